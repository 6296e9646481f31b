//! The agent control protocol. A controller sends the agent one command per line (on its standard
//! input or through a named pipe): `begin <run>`, `end <run>`, `quit` ([`AgentCommand`], text via
//! [`fmt::Display`] and [`FromStr`]). The agent answers with one JSON object per line on its
//! standard output, tagged by `event` ([`AgentEvent`]): `ready`, `begin`, `end` (the run's
//! [`RunCounters`]), `error`, `stopped`; `latency-agent tsc` prints a `tsc` event, `originate` an
//! `rtt` event and `reflect` a `reflected` event.

use std::fmt;
use std::num::ParseIntError;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::capture::CaptureSetup;

/// A command from the controller to the agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum AgentCommand {
    /// Open run `run` (numbered from 1): records from now on go to its file.
    Begin {
        /// Run number.
        run: u32,
    },
    /// Close run `run` and report its counters.
    End {
        /// Run number.
        run: u32,
    },
    /// Stop capturing and exit.
    Quit,
}

/// What the commands look like, for error messages.
const EXPECTED: &str = "expected `begin <run>`, `end <run>` or `quit`";

/// A command line that is not an [`AgentCommand`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// The line holds no word.
    #[error("empty command: {EXPECTED}")]
    Empty,
    /// The first word is no command.
    #[error("unknown command `{0}`: {EXPECTED}")]
    Unknown(String),
    /// `begin` or `end` without a run number.
    #[error("`{command}` needs a run number: `{command} <run>`")]
    MissingRun {
        /// The command.
        command: &'static str,
    },
    /// A run number that is not a `u32`.
    #[error("`{command} {run}`: the run is not a number from 0 to 4294967295")]
    BadRun {
        /// The command.
        command: &'static str,
        /// The run as written.
        run: String,
        /// Why it does not parse.
        #[source]
        source: ParseIntError,
    },
    /// Words after a complete command.
    #[error("`{line}`: unexpected words after the command ({EXPECTED})")]
    Trailing {
        /// The line.
        line: String,
    },
}

impl fmt::Display for AgentCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AgentCommand::Begin { run } => write!(f, "begin {run}"),
            AgentCommand::End { run } => write!(f, "end {run}"),
            AgentCommand::Quit => f.write_str("quit"),
        }
    }
}

impl FromStr for AgentCommand {
    type Err = CommandError;

    /// Words separated by any whitespace; surrounding whitespace is ignored.
    fn from_str(line: &str) -> Result<Self, Self::Err> {
        let mut words = line.split_whitespace();
        let run = |command: &'static str, word: Option<&str>| {
            let run = word.ok_or(CommandError::MissingRun { command })?;
            run.parse::<u32>().map_err(|source| CommandError::BadRun { command, run: run.to_owned(), source })
        };
        let cmd = match words.next() {
            None => return Err(CommandError::Empty),
            Some("begin") => AgentCommand::Begin { run: run("begin", words.next())? },
            Some("end") => AgentCommand::End { run: run("end", words.next())? },
            Some("quit") => AgentCommand::Quit,
            Some(other) => return Err(CommandError::Unknown(other.to_owned())),
        };
        match words.next() {
            None => Ok(cmd),
            Some(_) => Err(CommandError::Trailing { line: line.trim().to_owned() }),
        }
    }
}

/// TSC facts recorded with every capture.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TscInfo {
    /// Measured ticks per second.
    pub hz: f64,
    /// Measurement window, ns.
    pub window_ns: u64,
    /// `constant_tsc` and `nonstop_tsc` CPU flags present.
    pub invariant: bool,
    /// The flags found.
    pub flags: Vec<String>,
}

/// Per-run counters the agent reports when a run ends.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCounters {
    /// Run number.
    pub run: u32,
    /// Records written.
    pub records: u64,
    /// Probes seen on both ports (on every port of a capture on more than two).
    pub matched: u64,
    /// Probes seen on the pipeline port only.
    pub pipeline_only: u64,
    /// Probes seen on the bypass port only.
    pub bypass_only: u64,
    /// A capture on more than two ports: probes seen on some of them, but neither on all nor on
    /// the pipeline or the bypass port alone.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub partial: u64,
    /// A capture on more than two ports: the copies recorded on each port, in port order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_port: Vec<u64>,
    /// Packets without a probe marker (counted and freed), both ports.
    pub non_probe: u64,
    /// Probe copies dropped because the writer queue was full.
    pub dropped: u64,
    /// Probe copies that arrived while no run was open, since the previous run ended (or the
    /// capture started): before this run's `begin`.
    pub outside_run: u64,
    /// Frames carrying an already tagged probe (`P`/`B`): the agent's own reflections looping
    /// back into a capture port, neither recorded nor reflected again.
    #[serde(default)]
    pub reflected_loops: u64,
    /// Frames the receive ports' NICs or rings dropped while the run was open, before the agent
    /// saw them (DPDK `imissed` + `ierrors` + `rx_nombuf`; AF_PACKET ring drops and frames longer
    /// than its slots).
    #[serde(default)]
    pub nic_drops: u64,
    /// The run file.
    pub file: PathBuf,
    /// Soak mode: the run's interval log of differential histograms
    /// ([`soak`](crate::soak)); the counts above then come from pairing copies as they arrive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<PathBuf>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// An event the agent prints, one JSON object per line, tagged by `event`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum AgentEvent {
    /// Capturing: the ports are open and commands are read from now on.
    Ready {
        /// Port names, pipeline first.
        ports: Vec<String>,
        /// The TSC the stamps are taken with.
        tsc: TscInfo,
        /// Process id of the agent.
        pid: u32,
        /// What the capture set up: granted rings, promiscuous mode, service core, reflect
        /// destination (absent from agents older than this field).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        setup: Option<Box<CaptureSetup>>,
    },
    /// A run is open.
    Begin {
        /// Run number.
        run: u32,
        /// The run's file.
        file: PathBuf,
    },
    /// A run is closed: its counters.
    End(RunCounters),
    /// A command failed, or a capture thread ran into a problem.
    Error {
        /// The command line that failed, if a command did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        command: Option<String>,
        /// What went wrong.
        error: String,
    },
    /// The agent stopped capturing and exits.
    Stopped,
    /// `latency-agent tsc`: the measured TSC.
    Tsc(TscInfo),
    /// `latency-agent originate`: a run of probes sent and their echoes, stamped in `file` (record
    /// schema: transmissions as `bypass`, echoes as `pipeline`, so D is the round trip).
    Rtt {
        /// Probes sent.
        sent: u64,
        /// Probes whose echo came back.
        received: u64,
        /// Echoes of a probe already echoed.
        duplicates: u64,
        /// Frames received that were no echo of the run.
        other: u64,
        /// Seconds from the first probe sent to the last.
        seconds: f64,
        /// The run's records.
        file: PathBuf,
    },
    /// `latency-agent reflect`, when it stops: probes sent back, and frames that were not.
    Reflected {
        /// Probes reflected.
        reflected: u64,
        /// Frames that carried no probe, or could not be sent.
        other: u64,
    },
    /// `latency-agent version`: what the binary is and what it was built against.
    Version {
        /// The agent's version.
        agent: String,
        /// The DPDK version the binary links (absent when built without the DPDK backend).
        dpdk: Option<String>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::PortRings;

    fn tsc() -> TscInfo {
        TscInfo {
            hz: 2_899_999_812.5,
            window_ns: 200_000_000,
            invariant: true,
            flags: vec!["constant_tsc".into(), "nonstop_tsc".into()],
        }
    }

    fn round_trip(e: &AgentEvent) -> serde_json::Value {
        let line = serde_json::to_string(e).unwrap();
        assert!(!line.contains('\n'), "one event per line: {line}");
        assert_eq!(&serde_json::from_str::<AgentEvent>(&line).unwrap(), e, "{line}");
        serde_json::from_str(&line).unwrap()
    }

    #[test]
    fn every_event_round_trips_with_its_wire_fields() {
        let v = round_trip(&AgentEvent::Ready {
            ports: vec!["af_packet:r0".into(), "af_packet:r1".into()],
            tsc: tsc(),
            pid: 42,
            setup: None,
        });
        assert_eq!((v["event"].as_str(), v["pid"].as_u64()), (Some("ready"), Some(42)));
        assert!(v.get("setup").is_none(), "no setup key when none is known: {v}");
        assert_eq!(v["tsc"]["hz"].as_f64(), Some(2_899_999_812.5));
        assert_eq!(v["ports"][1], "af_packet:r1");

        let v = round_trip(&AgentEvent::Begin { run: 3, file: "/tmp/runs/run=3.arrows".into() });
        assert_eq!((v["event"].as_str(), v["run"].as_u64()), (Some("begin"), Some(3)));
        assert_eq!(v["file"], "/tmp/runs/run=3.arrows");

        let counters = RunCounters {
            run: 3,
            records: 40_000,
            matched: 19_998,
            pipeline_only: 1,
            bypass_only: 2,
            non_probe: 50,
            dropped: 4,
            outside_run: 5,
            reflected_loops: 6,
            nic_drops: 7,
            file: "/tmp/runs/run=3.arrows".into(),
            histogram: Some("/tmp/runs/run=3.hlog".into()),
            ..RunCounters::default()
        };
        let v = round_trip(&AgentEvent::End(counters));
        assert_eq!(v["histogram"], "/tmp/runs/run=3.hlog");
        assert_eq!(v["event"], "end");
        for (key, want) in [
            ("run", 3),
            ("records", 40_000),
            ("matched", 19_998),
            ("pipeline_only", 1),
            ("bypass_only", 2),
            ("non_probe", 50),
            ("dropped", 4),
            ("outside_run", 5),
            ("reflected_loops", 6),
            ("nic_drops", 7),
        ] {
            assert_eq!(v[key].as_u64(), Some(want), "{key}");
        }
        assert_eq!(v["file"], "/tmp/runs/run=3.arrows");

        let v = round_trip(&AgentEvent::Error { command: Some("end 4".into()), error: "run 4 is not open".into() });
        assert_eq!((v["event"].as_str(), v["command"].as_str()), (Some("error"), Some("end 4")));
        let v = round_trip(&AgentEvent::Error { command: None, error: "r0: cannot pin to core 9".into() });
        assert!(v.get("command").is_none(), "no command key when no command failed: {v}");

        round_trip(&AgentEvent::Stopped);
        round_trip(&AgentEvent::Version { agent: "0.1.0".into(), dpdk: Some("22.11.11".into()) });
        round_trip(&AgentEvent::Version { agent: "0.1.0".into(), dpdk: None });
        assert_eq!(serde_json::to_string(&AgentEvent::Stopped).unwrap(), r#"{"event":"stopped"}"#);

        let v = round_trip(&AgentEvent::Tsc(tsc()));
        assert_eq!((v["event"].as_str(), v["invariant"].as_bool()), (Some("tsc"), Some(true)));
        assert_eq!(v["window_ns"], 200_000_000);
    }

    #[test]
    fn ready_reports_the_capture_setup_and_old_lines_still_parse() {
        let setup = CaptureSetup {
            rings: vec![
                PortRings { port: "dpdk:0:0000:3b:00.0".into(), rx: 512, tx: 512 },
                PortRings { port: "dpdk:2:0000:86:00.0".into(), rx: 512, tx: 1024 },
            ],
            promiscuous: false,
            service_core: Some(2),
            reflect_dst_mac: Some("0c:42:a1:de:ad:01".parse().unwrap()),
            ..CaptureSetup::default()
        };
        let ready = AgentEvent::Ready {
            ports: vec!["dpdk:0:0000:3b:00.0".into()],
            tsc: tsc(),
            pid: 7,
            setup: Some(Box::new(setup)),
        };
        let v = round_trip(&ready);
        assert_eq!(v["setup"]["rings"][1]["tx"], 1024);
        assert_eq!(v["setup"]["service_core"], 2);
        assert_eq!(v["setup"]["promiscuous"], false);
        assert_eq!(v["setup"]["reflect_dst_mac"], "0c:42:a1:de:ad:01");
        // A line from an agent before these fields: no setup, no reflected_loops.
        let old = r#"{"event":"ready","ports":["af_packet:r0","af_packet:r1"],"tsc":{"hz":1.0,"window_ns":1,"invariant":true,"flags":[]},"pid":9}"#;
        match serde_json::from_str::<AgentEvent>(old).unwrap() {
            AgentEvent::Ready { pid: 9, setup: None, .. } => {}
            other => panic!("{other:?}"),
        }
        let old = r#"{"event":"end","run":1,"records":2,"matched":1,"pipeline_only":0,"bypass_only":0,"non_probe":0,"dropped":0,"outside_run":0,"file":"f"}"#;
        match serde_json::from_str::<AgentEvent>(old).unwrap() {
            AgentEvent::End(c) => assert_eq!((c.matched, c.reflected_loops), (1, 0)),
            other => panic!("{other:?}"),
        }
        // An empty setup decodes with its defaults.
        let e: CaptureSetup = serde_json::from_str("{}").unwrap();
        assert_eq!(e, CaptureSetup::default());
    }

    #[test]
    fn events_decode_strictly() {
        // A thread error has no `command` key; unknown events and missing fields are refused.
        let e: AgentEvent = serde_json::from_str(r#"{"event":"error","error":"disk full"}"#).unwrap();
        assert_eq!(e, AgentEvent::Error { command: None, error: "disk full".into() });
        assert!(serde_json::from_str::<AgentEvent>(r#"{"event":"started"}"#).is_err());
        assert!(serde_json::from_str::<AgentEvent>(r#"{"event":"begin","run":1}"#).is_err(), "file is required");
    }

    #[test]
    fn commands_round_trip_through_their_text() {
        for c in [AgentCommand::Begin { run: 1 }, AgentCommand::End { run: 4_294_967_295 }, AgentCommand::Quit] {
            assert_eq!(c.to_string().parse::<AgentCommand>(), Ok(c));
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(serde_json::from_str::<AgentCommand>(&json).unwrap(), c);
        }
        assert_eq!(AgentCommand::Begin { run: 7 }.to_string(), "begin 7");
        assert_eq!(AgentCommand::End { run: 7 }.to_string(), "end 7");
        assert_eq!("  end\t12 ".parse::<AgentCommand>(), Ok(AgentCommand::End { run: 12 }));
        assert_eq!("begin 0".parse::<AgentCommand>(), Ok(AgentCommand::Begin { run: 0 }));
    }

    #[test]
    fn bad_command_lines_say_what_is_expected() {
        let err = |line: &str| line.parse::<AgentCommand>().unwrap_err();
        assert_eq!(err("").to_string(), "empty command: expected `begin <run>`, `end <run>` or `quit`");
        assert_eq!(err("stop").to_string(), "unknown command `stop`: expected `begin <run>`, `end <run>` or `quit`");
        assert_eq!(err("Begin 1"), CommandError::Unknown("Begin".into()));
        assert_eq!(err("begin").to_string(), "`begin` needs a run number: `begin <run>`");
        let e = err("end -1");
        assert_eq!(e.to_string(), "`end -1`: the run is not a number from 0 to 4294967295");
        assert!(std::error::Error::source(&e).is_some(), "the parse error is kept");
        assert!(matches!(err("end 4294967296"), CommandError::BadRun { .. }));
        assert_eq!(
            err("begin 1 2").to_string(),
            "`begin 1 2`: unexpected words after the command (expected `begin <run>`, `end <run>` or `quit`)"
        );
        assert!(matches!(err("quit now"), CommandError::Trailing { .. }));
    }
}

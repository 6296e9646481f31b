//! The control client of the receiver's agent. The agent runs detached (setsid, pidfile); commands
//! ([`AgentCommand`]) are written one per line to its control pipe and its answers
//! ([`AgentEvent`]) read from the JSON lines of its events file, both in the session folder.
//! Each run's Arrow stream is decoded here once downloaded.

use crate::Doing;
use std::time::{Duration, Instant};

use arrow_array::RecordBatch;
use latency_proto::{AgentCommand, AgentEvent, RunCounters, TscInfo};
use latency_results::provenance::AgentSetup;

use super::failed;
use super::session::Hosts;
use crate::TestbedError;
use latency_plan::Action;
use latency_plan::inventory::Role;
use latency_plan::layout::RemoteLayout;
use latency_plan::template::shell_quote;

/// Writes a line to a pipe, given as `sh -c <this> agent-ctl LINE PIPE`.
const WRITE_LINE: &str = "printf '%s\\n' \"$1\" > \"$2\"";

latency_proto::words! {
/// The event that answers a command, or that a controller waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Awaited {
    /// The agent captures and reads commands.
    Ready = "ready",
    /// A run is open.
    Begin = "begin",
    /// A run is closed.
    End = "end",
    /// The agent stopped.
    Stopped = "stopped",
}
}

impl Awaited {
    /// The event answering `command`.
    pub fn answering(command: AgentCommand) -> Awaited {
        match command {
            AgentCommand::Begin { .. } => Awaited::Begin,
            AgentCommand::End { .. } => Awaited::End,
            AgentCommand::Quit => Awaited::Stopped,
        }
    }

    /// Whether `event` is the awaited one.
    pub fn is(self, event: &AgentEvent) -> bool {
        matches!(
            (self, event),
            (Awaited::Ready, AgentEvent::Ready { .. })
                | (Awaited::Begin, AgentEvent::Begin { .. })
                | (Awaited::End, AgentEvent::End(_))
                | (Awaited::Stopped, AgentEvent::Stopped)
        )
    }
}

/// What went wrong in an agent's events before the one awaited.
#[derive(Debug, thiserror::Error)]
pub enum AgentTrouble {
    /// A line that is no event of the protocol.
    #[error("not an agent event ({source}): {line}")]
    NotEvent {
        /// The line.
        line: String,
        /// Why it does not decode.
        source: serde_json::Error,
    },
    /// The agent reported an error on a command.
    #[error("the agent reported an error on `{command}`: {error}")]
    ErrorOn {
        /// The command.
        command: String,
        /// The agent's words.
        error: String,
    },
    /// The agent reported an error.
    #[error("the agent reported an error: {0}")]
    Error(String),
    /// The agent stopped.
    #[error("the agent stopped")]
    Stopped,
}

/// The awaited event among the complete lines of `text` (the agent may be writing the last one),
/// if there. A line that is no event of the protocol, or an error or stop before the awaited
/// event, is an error (its message).
pub fn scan(text: &str, want: Awaited) -> Result<Option<AgentEvent>, AgentTrouble> {
    let complete = text.rfind('\n').map_or("", |i| &text[..i]);
    for line in complete.lines().filter(|l| !l.trim().is_empty()) {
        let event: AgentEvent =
            serde_json::from_str(line).map_err(|source| AgentTrouble::NotEvent { line: line.to_string(), source })?;
        if want.is(&event) {
            return Ok(Some(event));
        }
        match event {
            AgentEvent::Error { command: Some(command), error } => {
                return Err(AgentTrouble::ErrorOn { command, error });
            }
            AgentEvent::Error { command: None, error } => return Err(AgentTrouble::Error(error)),
            AgentEvent::Stopped => return Err(AgentTrouble::Stopped),
            _ => {}
        }
    }
    Ok(None)
}

/// The remote command writing `command` to the control pipe `pipe`. A pipe without reader (a dead
/// agent) would block the writer for ever: bounded remotely.
pub fn write_command(command: AgentCommand, pipe: &str) -> String {
    let line = command.to_string();
    format!("timeout 10 sh -c {} agent-ctl {} {}", shell_quote(WRITE_LINE), shell_quote(&line), shell_quote(pipe))
}

/// Decode an Arrow IPC stream (a crash-truncated stream keeps its complete batches).
pub fn decode_stream(bytes: &[u8]) -> Result<Vec<RecordBatch>, arrow_schema::ArrowError> {
    let reader = arrow_ipc::reader::StreamReader::try_new(std::io::Cursor::new(bytes), None)?;
    let mut out = Vec::new();
    for b in reader {
        match b {
            Ok(b) => out.push(b),
            Err(e) if out.is_empty() => return Err(e),
            Err(_) => break,
        }
    }
    Ok(out)
}

/// Stop an agent or capture a previous orchestrator (or a failed attempt) left running, by their
/// pidfiles (best effort).
pub fn stop_leftovers(hosts: &Hosts, layout: &RemoteLayout) {
    for (role, pidfile) in layout.pidfiles() {
        let p = shell_quote(&pidfile);
        let cmd = format!("p={p}; [ -f \"$p\" ] && kill $(cat \"$p\") 2>/dev/null; rm -f \"$p\"; true");
        let _ = hosts.run(role, Doing::Cleanup, &cmd, Duration::from_secs(20));
    }
}

/// What a started agent reported in its `ready` event.
#[derive(Clone, Debug)]
pub struct Started {
    /// The TSC it stamps with.
    pub tsc: TscInfo,
    /// Its ports and what it set up, as provenance keeps them.
    pub setup: AgentSetup,
}

/// The agent of one session on the receiver.
pub struct Agent<'a> {
    /// The connections.
    pub hosts: &'a Hosts,
    /// Where its files are.
    pub layout: &'a RemoteLayout,
    /// The session's name.
    pub session: &'a str,
}

impl Agent<'_> {
    fn error(&self, message: String) -> TestbedError {
        failed(self.hosts.name(Role::Receiver), Doing::Agent, message)
    }

    fn sh(&self, cmd: &str) -> Result<String, TestbedError> {
        self.hosts.run(Role::Receiver, Doing::Agent, cmd, Duration::from_secs(10))
    }

    /// Make the session folder, before the agent is started in it.
    pub fn prepare(&self) -> Result<(), TestbedError> {
        let cmd = format!("mkdir -p {}", shell_quote(&self.layout.session_dir(self.session)));
        self.hosts.run(Role::Receiver, Doing::Action(Action::AgentStart), &cmd, Duration::from_secs(10)).map(drop)
    }

    /// Wait for the started agent's `ready`: the TSC it stamps with, its ports and what it set up
    /// (the fast path read back included).
    pub fn ready(&self, timeout: Duration) -> Result<Started, TestbedError> {
        match self.wait(0, Awaited::Ready, timeout)? {
            AgentEvent::Ready { tsc, ports, setup, .. } => {
                Ok(Started { tsc, setup: AgentSetup { ports, setup: setup.map(|s| *s) } })
            }
            other => Err(self.error(format!("expected `ready`, got {other:?}"))),
        }
    }

    /// Open run `run`: the remote file its records go to.
    pub fn begin(&self, run: u32) -> Result<String, TestbedError> {
        match self.command(AgentCommand::Begin { run }, Duration::from_secs(30))? {
            AgentEvent::Begin { file, .. } => Ok(file.display().to_string()),
            other => Err(self.error(format!("expected `begin`, got {other:?}"))),
        }
    }

    /// Close run `run`: its counters.
    pub fn end(&self, run: u32, timeout: Duration) -> Result<RunCounters, TestbedError> {
        match self.command(AgentCommand::End { run }, timeout)? {
            AgentEvent::End(counters) => Ok(counters),
            other => Err(self.error(format!("expected `end`, got {other:?}"))),
        }
    }

    /// Send one command to the agent and wait for the answering event.
    pub fn command(&self, command: AgentCommand, timeout: Duration) -> Result<AgentEvent, TestbedError> {
        let before = self.sh(&format!("wc -l < {}", shell_quote(&self.layout.events(self.session))))?;
        let skip: usize = before.trim().parse().unwrap_or(0);
        self.hosts.run(
            Role::Receiver,
            Doing::Agent,
            &write_command(command, &self.layout.control_pipe(self.session)),
            Duration::from_secs(15),
        )?;
        self.wait(skip, Awaited::answering(command), timeout)
    }

    /// Whether the agent process is alive (by its pidfile).
    pub fn alive(&self) -> bool {
        let pidfile = shell_quote(&self.layout.agent_pidfile());
        self.sh(&format!("kill -0 $(cat {pidfile} 2>/dev/null) 2>/dev/null")).is_ok()
    }

    /// Wait for the event `want` after the first `skip` lines of the agent's events.
    fn wait(&self, skip: usize, want: Awaited, timeout: Duration) -> Result<AgentEvent, TestbedError> {
        let events = shell_quote(&self.layout.events(self.session));
        let start = Instant::now();
        loop {
            let text = self.sh(&format!("tail -n +{} {events} 2>/dev/null || true", skip + 1))?;
            if let Some(event) = scan(&text, want).map_err(|m| self.error(m.to_string()))? {
                return Ok(event);
            }
            if start.elapsed() > timeout {
                return Err(TestbedError::Timeout {
                    host: self.hosts.name(Role::Receiver).to_string(),
                    action: Doing::AwaitAgent(want.name()),
                    seconds: timeout.as_secs_f64(),
                });
            }
            if want != Awaited::Ready && start.elapsed() > Duration::from_secs(1) && !self.alive() {
                return Err(self.error(format!("the agent exited before `{}`", want.name())));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    const READY: &str = r#"{"event":"ready","ports":["r0","r1"],"tsc":{"hz":2.9e9,"window_ns":200000000,"invariant":true,"flags":[]},"pid":7}"#;

    #[test]
    fn scanning_finds_the_awaited_event_in_complete_lines() {
        let begin = r#"{"event":"begin","run":1,"file":"/r/runs/s/run01.arrows"}"#;
        let text = format!("{READY}\n{begin}\n");
        assert!(matches!(scan(&text, Awaited::Ready), Ok(Some(AgentEvent::Ready { pid: 7, .. }))));
        assert_eq!(
            scan(&text, Awaited::Begin).unwrap(),
            Some(AgentEvent::Begin { run: 1, file: PathBuf::from("/r/runs/s/run01.arrows") })
        );
        // A line still being written is not read.
        assert_eq!(scan(&format!("{READY}\n{{\"event\":\"beg"), Awaited::Begin).unwrap(), None);
        assert_eq!(scan("", Awaited::End).unwrap(), None);
        let err = scan("{\"event\":\"error\",\"error\":\"no run\"}\n", Awaited::End).unwrap_err();
        assert_eq!(err.to_string(), "the agent reported an error: no run");
        assert_eq!(scan("{\"event\":\"stopped\"}\n", Awaited::Stopped).unwrap(), Some(AgentEvent::Stopped));
        assert_eq!(scan("{\"event\":\"stopped\"}\n", Awaited::End).unwrap_err().to_string(), "the agent stopped");
        let failed = "{\"event\":\"error\",\"command\":\"end 2\",\"error\":\"no run 2 is open\"}\n";
        assert_eq!(
            scan(failed, Awaited::End).unwrap_err().to_string(),
            "the agent reported an error on `end 2`: no run 2 is open"
        );
        assert!(scan("hello\n", Awaited::Ready).unwrap_err().to_string().starts_with("not an agent event ("));
        for (command, want) in [
            (AgentCommand::Begin { run: 2 }, Awaited::Begin),
            (AgentCommand::End { run: 2 }, Awaited::End),
            (AgentCommand::Quit, Awaited::Stopped),
        ] {
            assert_eq!(Awaited::answering(command), want);
        }
    }

    #[test]
    fn a_command_reaches_a_hostile_pipe_path_verbatim() {
        let tmp = tempfile::tempdir().unwrap();
        let pipe = tmp.path().join("ctl 'x' $(touch pwned) \"y\" `id`;&");
        let cmd = write_command(AgentCommand::End { run: 3 }, &pipe.display().to_string());
        let out = std::process::Command::new("sh").arg("-c").arg(&cmd).current_dir(tmp.path()).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(std::fs::read_to_string(&pipe).unwrap(), "end 3\n");
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_stream_cut_short_keeps_its_complete_batches() {
        let mut b = latency_proto::RecordBuilder::with_capacity(2);
        b.push(1, latency_proto::Port::Bypass, 10, 0, 128, None);
        let batch = b.finish().unwrap();
        let mut w = arrow_ipc::writer::StreamWriter::try_new(Vec::new(), &batch.schema()).unwrap();
        w.write(&batch).unwrap();
        w.write(&batch).unwrap();
        let bytes = w.into_inner().unwrap();
        assert_eq!(decode_stream(&bytes).unwrap().len(), 2);
        assert_eq!(decode_stream(&bytes[..bytes.len() - 20]).unwrap().len(), 1);
        assert!(decode_stream(b"nope").is_err());
    }
}

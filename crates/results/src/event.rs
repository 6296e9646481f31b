//! The journal's events (`journal.jsonl`): one typed definition that the engine writes and
//! resume, analysis, import and tests read back. Every line is an [`Entry`]: a millisecond
//! timestamp `t` beside the event's own fields, tagged by `event`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use latency_plan::Action;

/// One journal line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Milliseconds since the Unix epoch when the event was written.
    pub t: u64,
    /// The event.
    #[serde(flatten)]
    pub event: Event,
}

impl Entry {
    /// `event`, stamped now.
    pub fn now(event: Event) -> Entry {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        Entry { t, event }
    }
}

/// Copy counts of one run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Probes seen on both ports.
    pub matched: u64,
    /// Probes seen on the pipeline port only.
    pub pipeline_only: u64,
    /// Probes seen on the bypass port only.
    pub bypass_only: u64,
    /// Copies beyond the first of a probe on a port.
    pub duplicates: u64,
    /// Records that are neither port (should not occur).
    pub unknown_port: u64,
}

/// Rates a run achieved, as seen by the sender and by the receiver.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Pacing {
    /// From the sender's replay report.
    pub sender_pps: Option<f64>,
    /// From the bypass copies' arrival stamps (intervals over the first-to-last span).
    pub receiver_pps: Option<f64>,
}

/// Something that happened during a study.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The study (or its resumption) started.
    StudyStarted {
        /// Study name.
        study: String,
        /// Plan hash.
        plan_hash: String,
        /// Seed in use.
        seed: u64,
        /// Testbed name.
        testbed: String,
        /// How the testbed was chosen: `sim` or the inventory file given to `--testbed` (absent:
        /// the plan's own testbed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        testbed_arg: Option<String>,
        /// Simulator model file given with `--sim-model`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sim_model: Option<String>,
        /// Version of the tool.
        tool_version: String,
        /// The factor levels of a study with factors, in plan order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        levels: Vec<String>,
        /// sha256 of every file the study reads besides its plan (pcap traces, bitstream
        /// manifests, table files, the inventory, the simulator model), by what it is; a resumption
        /// with any of them changed is refused.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        inputs: BTreeMap<String, String>,
        /// Sessions in the schedule.
        sessions: usize,
        /// Runs in the schedule.
        runs: usize,
        /// Runs already complete (resume).
        complete: usize,
        /// Whether this is a resumption.
        resumed: bool,
    },
    /// A session's bring-up starts.
    SessionStarted {
        /// Session index in the schedule.
        index: usize,
        /// `program_sN`.
        name: String,
        /// Runs still to do in it.
        pending_runs: usize,
        /// Steps of its bring-up.
        steps: usize,
        /// The testbed slice it runs on (1, 2, …; absent with one testbed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        slice: Option<usize>,
    },
    /// The card was read back before a testbed's first bring-up of the study wrote anything.
    CardRead {
        /// Session index.
        index: usize,
        /// What the card reads back.
        identity: latency_proto::CardIdentity,
        /// Whether it runs the session's image, whose write is then left out.
        holds: bool,
    },
    /// Every run of the session is already complete (resume).
    SessionSkipped {
        /// Session index.
        index: usize,
        /// `program_sN`.
        name: String,
    },
    /// A step starts.
    StepStarted {
        /// Session index.
        index: usize,
        /// Action name.
        action: Action,
        /// Host.
        host: String,
        /// Attempt, from 1.
        attempt: u32,
    },
    /// A step succeeded.
    StepFinished {
        /// Session index.
        index: usize,
        /// Action name.
        action: Action,
        /// Seconds it took (modelled on the simulator).
        seconds: f64,
    },
    /// A step failed and will be retried.
    StepRetried {
        /// Session index.
        index: usize,
        /// Action name.
        action: Action,
        /// The attempt that failed.
        attempt: u32,
        /// Why.
        error: String,
    },
    /// A step failed after all its retries.
    StepFailed {
        /// Session index.
        index: usize,
        /// Action name.
        action: Action,
        /// Why.
        error: String,
    },
    /// The engine waits before a run (the capture settling before the first run of a session,
    /// the idle gap before the others).
    Waiting {
        /// Session index.
        index: usize,
        /// The run waited for.
        run: u32,
        /// Seconds.
        seconds: f64,
    },
    /// A run starts.
    RunStarted {
        /// Session index.
        index: usize,
        /// Run number.
        run: u32,
        /// Attempt, from 1.
        attempt: u32,
    },
    /// A run passed its checks and its data is stored.
    RunFinished {
        /// Session index.
        index: usize,
        /// Program or null group.
        program: String,
        /// Session number.
        session: u32,
        /// Run number.
        run: u32,
        /// The run's factor level (studies with factors).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        level: Option<String>,
        /// Attempt that succeeded.
        attempt: u32,
        /// Data file, relative to the results folder.
        path: String,
        /// sha256 of the data file.
        sha256: String,
        /// Records stored.
        records: u64,
        /// Copy counts.
        counts: Counts,
        /// Pacing achieved.
        pacing: Pacing,
        /// Seconds the run took on the testbed.
        seconds: f64,
        /// Soak mode: sha256 of the run's histogram log (`run=<r>.hlog` beside the data file).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        histogram_sha256: Option<String>,
    },
    /// A complete, verified run was kept from an earlier attempt of the study (resume).
    RunSkipped {
        /// Session index.
        index: usize,
        /// Run number.
        run: u32,
    },
    /// A run failed or did not pass its checks and will be redone.
    RunRetried {
        /// Session index.
        index: usize,
        /// Run number.
        run: u32,
        /// The attempt that failed.
        attempt: u32,
        /// Why.
        reason: String,
    },
    /// A run failed all its attempts.
    RunFailed {
        /// Session index.
        index: usize,
        /// Run number.
        run: u32,
        /// Why.
        reason: String,
    },
    /// A session ended.
    SessionFinished {
        /// Session index.
        index: usize,
    },
    /// Adaptive sessions: a program's bring-ups end, because its stopping rule holds or its
    /// `max` is reached; its remaining sessions are not run.
    SessionsEnded {
        /// Program.
        program: String,
        /// Sessions it took.
        sessions: u32,
        /// Whether the stopping rule holds (false: `max` was reached first).
        rule_met: bool,
        /// What the rule found, in words.
        detail: String,
    },
    /// A file that could not be trusted was moved aside.
    Quarantined {
        /// Original path, relative.
        path: String,
        /// Where it went.
        to: String,
        /// Why.
        reason: String,
    },
    /// The user stopped the study.
    Interrupted,
    /// The study ended.
    StudyFinished {
        /// Runs stored (in total, including earlier attempts of the study).
        complete: usize,
        /// Runs that failed all attempts.
        failed: usize,
    },
}

impl Event {
    /// Whether the journal must be on disk before the study goes on: everything but the marks of
    /// a step, wait or run beginning, each followed by the event that ends it (a crash loses at
    /// most such a mark, never a run, step or session that ended).
    pub fn is_commit(&self) -> bool {
        !matches!(self, Event::StepStarted { .. } | Event::Waiting { .. } | Event::RunStarted { .. })
    }
}

impl Pacing {
    /// Why the pacing is not within `tolerance` (relative) of `target` pps, if it is not.
    pub fn check(&self, target: f64, tolerance: f64) -> Option<String> {
        for (side, pps) in [("sender", self.sender_pps), ("receiver", self.receiver_pps)] {
            if let Some(pps) = pps
                && (pps - target).abs() > tolerance * target
            {
                return Some(format!(
                    "pacing {pps:.1} pps seen by the {side}, {:+.1} % off the planned {} pps (tolerance ±{:.1} %)",
                    (pps / target - 1.0) * 100.0,
                    planned(target),
                    tolerance * 100.0
                ));
            }
        }
        None
    }
}

/// A planned rate as people write it: whole rates as integers, others (a trace-timed pcap)
/// to at most four decimals.
fn planned(pps: f64) -> String {
    if pps.fract() == 0.0 { format!("{pps:.0}") } else { format!("{:.4}", pps).trim_end_matches('0').to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_event() -> Vec<Event> {
        let counts = Counts { matched: 3, pipeline_only: 1, bypass_only: 2, duplicates: 0, unknown_port: 0 };
        vec![
            Event::StudyStarted {
                study: "s".into(),
                plan_hash: "ab".into(),
                seed: 7,
                testbed: "sim".into(),
                testbed_arg: Some("sim".into()),
                sim_model: None,
                tool_version: "0.1.0".into(),
                levels: Vec::new(),
                inputs: BTreeMap::from([("trace t (t.pcap)".into(), "cd".into())]),
                sessions: 2,
                runs: 4,
                complete: 1,
                resumed: true,
            },
            Event::SessionStarted { index: 0, name: "p_s1".into(), pending_runs: 2, steps: 9, slice: Some(2) },
            Event::SessionSkipped { index: 1, name: "p_s2".into() },
            Event::StepStarted { index: 0, action: Action::Flash, host: "receiver".into(), attempt: 1 },
            Event::StepFinished { index: 0, action: Action::Flash, seconds: 1.5 },
            Event::StepRetried { index: 0, action: Action::PcieRescan, attempt: 1, error: "gone".into() },
            Event::StepFailed { index: 0, action: Action::HealthCheck, error: "0x1".into() },
            Event::Waiting { index: 0, run: 1, seconds: 3.0 },
            Event::RunStarted { index: 0, run: 1, attempt: 1 },
            Event::RunFinished {
                index: 0,
                program: "p".into(),
                session: 1,
                run: 1,
                level: None,
                attempt: 2,
                path: "data/program=p/session=1/run=1.parquet".into(),
                sha256: "cd".into(),
                records: 8,
                counts,
                pacing: Pacing { sender_pps: Some(499.9), receiver_pps: None },
                seconds: 40.1,
                histogram_sha256: Some("ef".into()),
            },
            Event::RunSkipped { index: 0, run: 2 },
            Event::RunRetried { index: 0, run: 2, attempt: 1, reason: "loss".into() },
            Event::RunFailed { index: 0, run: 2, reason: "loss".into() },
            Event::SessionFinished { index: 0 },
            Event::Quarantined { path: "a".into(), to: "quarantine/a".into(), reason: "checksum".into() },
            Event::Interrupted,
            Event::StudyFinished { complete: 3, failed: 1 },
        ]
    }

    #[test]
    fn every_event_round_trips_through_a_journal_line() {
        for (t, event) in every_event().into_iter().enumerate() {
            let entry = Entry { t: t as u64, event };
            let line = serde_json::to_string(&entry).expect("serialises");
            let back: Entry = serde_json::from_str(&line).expect("parses");
            assert_eq!(back, entry, "{line}");
        }
    }

    #[test]
    fn lines_keep_their_documented_shape() {
        let line = serde_json::to_string(&Entry { t: 5, event: Event::RunSkipped { index: 3, run: 2 } }).expect("ok");
        assert_eq!(line, r#"{"t":5,"event":"run_skipped","index":3,"run":2}"#);
        let line = serde_json::to_string(&Entry {
            t: 6,
            event: Event::StepFinished { index: 0, action: Action::DriverBind, seconds: 0.5 },
        })
        .expect("ok");
        assert_eq!(line, r#"{"t":6,"event":"step_finished","index":0,"action":"driver_bind","seconds":0.5}"#);
        assert!(serde_json::from_str::<Entry>(r#"{"t":1,"event":"no_such_event"}"#).is_err());
    }

    #[test]
    fn pacing_outside_the_tolerance_is_reported_with_its_side() {
        let ok = Pacing { sender_pps: Some(1990.0), receiver_pps: Some(2040.0) };
        assert_eq!(ok.check(2000.0, 0.05), None);
        let slow = Pacing { sender_pps: Some(2000.0), receiver_pps: Some(1800.0) };
        let why = slow.check(2000.0, 0.05).unwrap();
        assert!(why.contains("1800.0 pps seen by the receiver") && why.contains("-10.0 %"), "{why}");
        assert!(Pacing { sender_pps: Some(2101.0), receiver_pps: None }.check(2000.0, 0.05).is_some());
        assert_eq!(Pacing::default().check(2000.0, 0.0), None);
    }
}

//! What one more repetition at each level of the design costs in testbed time, from the
//! schedule's own predictions: the inputs of a designed study (Kalibera & Jones's `c_i`).

use serde::Serialize;

use crate::model::{Schedule, Session};
use latency_results::SessionKind;

/// Seconds of testbed time one more of each level costs, averaged over the program sessions.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Costs {
    /// One more session: its bring-up steps, teardown and the capture's settling before its
    /// first run.
    pub session_s: f64,
    /// One more run: the idle gap before it, its steps and its replay.
    pub run_s: f64,
    /// One more probe in every run: the replay time it adds (1 / pacing).
    pub probe_s: f64,
}

impl Schedule {
    /// The costs per level, from the program sessions (all sessions when there are none); none
    /// for an empty schedule.
    pub fn costs(&self) -> Option<Costs> {
        let programs: Vec<&Session> = self.sessions.iter().filter(|s| s.kind == SessionKind::Program).collect();
        let sessions: Vec<&Session> = if programs.is_empty() { self.sessions.iter().collect() } else { programs };
        let (mut bring_up, mut replay_s, mut probes) = (0.0, 0.0, 0.0);
        // Runs after a session's first (an idle gap before each), and first runs (the settling
        // counted with the bring-up).
        let (mut later, mut later_s, mut firsts, mut first_s) = (0usize, 0.0, 0usize, 0.0);
        for s in &sessions {
            bring_up += s.steps.iter().chain(&s.teardown).map(|st| st.estimate_s).sum::<f64>();
            for (k, r) in s.runs.iter().enumerate() {
                let steps = r.other_steps_s();
                if k == 0 {
                    bring_up += r.wait_before_s;
                    (firsts, first_s) = (firsts + 1, first_s + steps + r.replay_s);
                } else {
                    (later, later_s) = (later + 1, later_s + r.wait_before_s + steps + r.replay_s);
                }
                replay_s += r.replay_s;
                probes += r.probes as f64;
            }
        }
        let runs = later + firsts;
        let run_s = if later > 0 { later_s / later as f64 } else { first_s / firsts.max(1) as f64 };
        if sessions.is_empty() || runs == 0 {
            return None;
        }
        Some(Costs {
            session_s: bring_up / sessions.len() as f64,
            run_s,
            probe_s: if probes > 0.0 { replay_s / probes } else { 0.0 },
        })
    }
}

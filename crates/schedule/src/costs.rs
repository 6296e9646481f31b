//! What one more repetition at each level of the design costs in testbed time, from the
//! schedule's own predictions: the inputs of a designed study (Kalibera & Jones's `c_i`).

use serde::Serialize;

use crate::model::{Schedule, Session};
use latency_results::SessionKind;

/// Seconds of testbed time one more of each level costs, averaged over the program sessions.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Costs {
    /// One more session beyond its runs: its bring-up steps and teardown, and the capture's
    /// settling before its first run in place of an idle gap; a group's later sessions' where
    /// they differ from its first (which writes the image under `flash: redraw` or `on_change`).
    pub session_s: f64,
    /// One more run: the idle gap before it, its steps and its replay.
    pub run_s: f64,
    /// One more probe in every run: the replay time it adds (1 / pacing).
    pub probe_s: f64,
    /// What the schedule costs beyond its sessions and runs at those prices: a group's first
    /// bring-up's extra (writing the image once), and the null sessions' differences.
    pub fixed_s: f64,
}

/// What a session costs beyond its runs, each priced as a later run: its bring-up steps and
/// teardown, and the settling before its first run in place of an idle gap.
fn bring_up_s(s: &Session) -> f64 {
    let first_wait = match (s.runs.first(), s.runs.get(1)) {
        (Some(first), Some(second)) => first.wait_before_s - second.wait_before_s,
        (Some(first), None) => first.wait_before_s,
        _ => 0.0,
    };
    s.steps.iter().chain(&s.teardown).map(|st| st.estimate_s).sum::<f64>() + first_wait
}

impl Schedule {
    /// The costs per level, from the program sessions (all sessions when there are none); none
    /// for an empty schedule.
    pub fn costs(&self) -> Option<Costs> {
        let programs: Vec<&Session> = self.sessions.iter().filter(|s| s.kind == SessionKind::Program).collect();
        let sessions: Vec<&Session> = if programs.is_empty() { self.sessions.iter().collect() } else { programs };
        let (mut replay_s, mut probes) = (0.0, 0.0);
        // Runs after a session's first (an idle gap before each), and first runs (the settling
        // counted with the bring-up).
        let (mut later, mut later_s, mut firsts, mut first_s) = (0usize, 0.0, 0usize, 0.0);
        for s in &sessions {
            for (k, r) in s.runs.iter().enumerate() {
                let steps = r.other_steps_s();
                if k == 0 {
                    (firsts, first_s) = (firsts + 1, first_s + steps + r.replay_s);
                } else {
                    (later, later_s) = (later + 1, later_s + r.wait_before_s + steps + r.replay_s);
                }
                replay_s += r.replay_s;
                probes += r.probes as f64;
            }
        }
        let runs = later + firsts;
        if sessions.is_empty() || runs == 0 {
            return None;
        }
        let run_s = if later > 0 { later_s / later as f64 } else { first_s / firsts as f64 };
        // One more session is one more of a group's later sessions, where groups have them.
        let later_sessions: Vec<f64> = sessions.iter().filter(|s| s.session > 1).map(|s| bring_up_s(s)).collect();
        let session_s = if later_sessions.is_empty() {
            sessions.iter().map(|s| bring_up_s(s)).sum::<f64>() / sessions.len() as f64
        } else {
            later_sessions.iter().sum::<f64>() / later_sessions.len() as f64
        };
        let priced = self.sessions.len() as f64 * session_s
            + self.sessions.iter().map(|s| s.runs.len()).sum::<usize>() as f64 * run_s;
        Some(Costs {
            session_s,
            run_s,
            probe_s: if probes > 0.0 { replay_s / probes } else { 0.0 },
            fixed_s: self.predicted_seconds.total - priced,
        })
    }
}

//! A study on several testbed slices: which slice each session is predicted to run on, and the
//! predicted wall time. The engine gives each free slice the next session of the schedule; if
//! every session takes its predicted time, that is list scheduling in schedule order, as here.

use crate::model::{Assignment, Schedule, Session};

/// A session's predicted seconds: bring-up, waits, replays, run steps and teardown.
pub fn session_seconds(s: &Session) -> f64 {
    let steps: f64 = s.steps.iter().chain(&s.teardown).map(|st| st.estimate_s).sum();
    let runs: f64 = s.runs.iter().map(|r| r.wait_before_s + r.replay_s + r.other_steps_s()).sum();
    steps + runs
}

/// Each session in schedule order to the slice free first (the lowest-numbered on a tie).
pub fn assign(schedule: &Schedule, slices: Vec<String>) -> Assignment {
    let n = slices.len().max(1);
    let mut busy = vec![0.0_f64; n];
    let mut slice_of = Vec::with_capacity(schedule.sessions.len());
    for s in &schedule.sessions {
        let k = (0..n).min_by(|&a, &b| busy[a].total_cmp(&busy[b]).then(a.cmp(&b))).unwrap_or(0);
        busy[k] += session_seconds(s);
        slice_of.push(k + 1);
    }
    Assignment {
        wall_seconds: busy.iter().copied().fold(0.0, f64::max),
        one_slice_seconds: busy.iter().sum(),
        busy_seconds: busy,
        slice_of,
        slices,
    }
}

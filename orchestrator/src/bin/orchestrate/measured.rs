//! Step durations measured in the journals of studies already run (`--costs-from DIR`): the
//! dry run's and the design's costs from what the testbed took rather than the inventory's
//! estimates.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use latency_plan::{Action, Inventory};
use latency_results::event::Event;

use crate::Failure;

/// What the journals say each step took: the median of its finished attempts, and how many (for
/// the replay: what a run took beyond its probes at the rate it achieved).
pub(crate) struct Measured {
    per_action: BTreeMap<Action, (f64, usize)>,
    testbeds: Vec<String>,
}

/// The measured durations of every step the studies in `dirs` finished.
pub(crate) fn measured(dirs: &[PathBuf]) -> Result<Measured, Failure> {
    let mut seconds: BTreeMap<Action, Vec<f64>> = BTreeMap::new();
    let mut testbeds = Vec::new();
    for dir in dirs {
        let rd = latency_results::ResultsDir::open(dir)?;
        for entry in latency_results::journal::read(&rd.journal_path())? {
            match entry.event {
                Event::StepFinished { action, seconds: s, .. } if s.is_finite() && s >= 0.0 => {
                    seconds.entry(action).or_default().push(s);
                }
                Event::StudyStarted { testbed, .. } if !testbeds.contains(&testbed) => testbeds.push(testbed),
                // What a run took beyond sending its probes at the rate it achieved: the replay's
                // own cost (starting the sender, collecting the records).
                Event::RunFinished { seconds: s, counts, pacing, .. } => {
                    let sent = (counts.matched + counts.pipeline_only + counts.bypass_only) as f64;
                    if let Some(pps) = pacing.sender_pps.or(pacing.receiver_pps).filter(|p| *p > 0.0)
                        && s.is_finite()
                    {
                        let beyond = (s - sent / pps).max(0.0);
                        for a in [Action::Replay, Action::Originate] {
                            seconds.entry(a).or_default().push(beyond);
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let per_action =
        seconds.into_iter().map(|(a, mut v)| (a, (latency_analysis::stats::median(&mut v), v.len()))).collect();
    Ok(Measured { per_action, testbeds })
}

impl Measured {
    /// The inventory's estimates replaced by the measured durations; what was replaced, in words
    /// (for stderr).
    pub(crate) fn apply(&self, inv: &mut Inventory) -> String {
        let mut note = String::new();
        let elsewhere: Vec<&str> = self.testbeds.iter().map(String::as_str).filter(|t| *t != inv.name).collect();
        if !elsewhere.is_empty() {
            let _ = writeln!(
                note,
                "costs: measured on testbed {} and applied to `{}`",
                elsewhere.iter().map(|t| format!("`{t}`")).collect::<Vec<_>>().join(", "),
                inv.name
            );
        }
        for (action, (median, n)) in &self.per_action {
            if let Some(e) = inv.estimates_s.get_mut(action) {
                let _ = writeln!(note, "costs: {action} {median:.1} s (median of {n} measured; estimate {e:.1} s)");
                *e = *median;
            }
        }
        if self.per_action.is_empty() {
            let _ = writeln!(note, "costs: the journals hold no finished step; the estimates stand");
        }
        note
    }
}

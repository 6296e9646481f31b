//! The run engine: walks a schedule on a testbed (bring-up steps, runs, teardown), with timeouts,
//! retries and run validation, stores each accepted run atomically, and records every event in
//! the journal so that an interrupted study resumes exactly where it stopped.

pub mod adaptive;
pub mod events;
pub mod provenance;
mod resume;
mod session;
mod walk;

use std::collections::BTreeMap;
use std::sync::Mutex;

use events::{Event, Observer};
use latency_plan::Plan;
use latency_plan::inventory::Inventory;
use latency_results::ResultsDir;
use latency_results::ResultsError;
use latency_results::journal;
use latency_results::journal::Journal;
use latency_schedule::Schedule;
use latency_testbed::Cancel;
use latency_testbed::Testbed;
use latency_testbed::TestbedError;
pub use resume::{Audit, StartedWith, audit, input_digests};

use session::Engine;
use walk::walk;

/// Why a study stopped before its end.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The results folder could not be written or read.
    #[error(transparent)]
    Results(#[from] ResultsError),
    /// A step failed after all its retries.
    #[error("session {session}: {error}")]
    Testbed {
        /// `program_sN`.
        session: String,
        /// The failure (names host and step).
        error: TestbedError,
    },
}

/// How a study ended.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Runs stored, including those kept from earlier attempts of the study.
    pub complete: usize,
    /// Runs skipped because they were already complete.
    pub skipped: usize,
    /// Runs that failed all their attempts (`program_sN run R: reason`).
    pub failed: Vec<String>,
    /// Whether the user stopped the study.
    pub interrupted: bool,
}

/// Engine settings.
pub struct Options {
    /// Continue the study already in the results folder (whose start the caller has checked
    /// against `started` with [`StartedWith::differences`]).
    pub resume: bool,
    /// How this study is run: plan, seed, testbed and the options that chose them.
    pub started: StartedWith,
}
/// Runs already complete in a results folder: (program, session, run) → data sha256 recorded in
/// the journal.
pub fn completed_runs(dir: &ResultsDir) -> Result<BTreeMap<(String, u32, u32), String>, ResultsError> {
    Ok(journal::completed(&journal::read(&dir.journal_path())?).into_iter().map(|(k, c)| (k, c.sha256)).collect())
}

/// What a study runs: the plan, its inventory (none on the simulator) and its schedule.
pub struct Study<'a> {
    /// The plan.
    pub plan: &'a Plan,
    /// The inventory of a real testbed.
    pub inventory: Option<&'a Inventory>,
    /// The expanded schedule.
    pub schedule: &'a Schedule,
}

/// Run (or resume) a study on one testbed, or on several slices at once: each slice takes the
/// next session of the schedule when it is free. Every slice's cleanup runs on every path out of
/// here.
pub fn run_study(
    study: &Study<'_>,
    slices: &mut [Box<dyn Testbed>],
    dir: &ResultsDir,
    options: &Options,
    cancel: &Cancel,
    observers: &mut [Box<dyn Observer>],
) -> Result<Outcome, EngineError> {
    let mut journal = Journal::open(&dir.journal_path())?;
    journal.set_durable(!slices.iter().all(|tb| tb.reproducible()));
    let engine =
        Engine { plan: study.plan, inventory: study.inventory, dir, log: Mutex::new((journal, observers)), cancel };
    let result = walk(&engine, study.schedule, slices, options);
    for tb in slices.iter_mut() {
        tb.cleanup();
    }
    if let Ok(o) = &result {
        if o.interrupted {
            engine.emit(Event::Interrupted)?;
        } else {
            engine.emit(Event::StudyFinished { complete: o.complete, failed: o.failed.len() })?;
        }
    }
    result
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests;

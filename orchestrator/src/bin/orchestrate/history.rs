//! `orchestrate history` and `orchestrate trend`: the results history in a store.

use std::path::Path;

use orchestrator::exit::ExitStatus;
use orchestrator::history::store::{Store, StoreError};
use orchestrator::history::trend::{self, Trend};

use crate::cli::HistoryOp;
use crate::{Failure, json_line, open_locked, print_out, progress};

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Failure {
        Failure::Exit((&e).into(), e.to_string())
    }
}

pub(crate) fn history(op: HistoryOp) -> Result<(), Failure> {
    match op {
        HistoryOp::Add { results, store } => {
            let store = Store::open(&store)?;
            for dir in &results {
                add(&store, dir)?;
            }
            Ok(())
        }
        HistoryOp::List { store } => {
            for key in Store::open(&store)?.studies()? {
                print_out(&json_line(&key)?)?;
            }
            Ok(())
        }
    }
}

/// Add one results folder to `store` (under the folder's lock), saying what was done.
pub(crate) fn add(store: &Store, dir: &Path) -> Result<(), Failure> {
    let (rd, _lock) = open_locked(dir)?;
    let added = store.add(&rd)?;
    if added.already {
        progress(format_args!("history: {} is in {} already; nothing written", added.key.study, store.url()));
    } else {
        progress(format_args!(
            "history: added {} ({} rows, {} probe estimates) to {}",
            added.key.study,
            added.rows,
            added.estimates,
            store.url()
        ));
    }
    print_out(&json_line(&added)?)
}

/// The trend of `store`: Markdown (or JSON) on stdout, the HTML page and JUnit when asked; a
/// regression is [`ExitStatus::ChecksFailed`].
pub(crate) fn trend(store: &str, html: Option<&Path>, junit: Option<&Path>, json: bool) -> Result<Trend, Failure> {
    use orchestrator::report::trend as page;
    let s = Store::open(store)?;
    let t = trend::trend(&s.rows()?);
    let fail = |e: String| Failure::Exit(ExitStatus::Results, e);
    if json {
        print_out(&(serde_json::to_string_pretty(&t).map_err(|e| fail(e.to_string()))? + "\n"))?;
    } else {
        print_out(&page::markdown(&t, store).map_err(|e| fail(e.to_string()))?)?;
    }
    if let Some(path) = html {
        let text = page::html(&t, store).map_err(|e| fail(e.to_string()))?;
        orchestrator::results::write_file(path, text.as_bytes(), true)?;
        progress(format_args!("trend page: {}", path.display()));
    }
    if let Some(path) = junit {
        let xml = page::junit(&t).map_err(|e| fail(e.to_string()))?;
        orchestrator::results::write_file(path, xml.as_bytes(), true)?;
    }
    for c in t.regressions() {
        eprintln!(
            "regression: {} {}{}: {:+.1} ns [{:+.1}, {:+.1}] from {} ({})",
            c.program,
            c.statistic,
            c.level.as_ref().map(|l| format!(" [{l}]")).unwrap_or_default(),
            c.change.shift_ns,
            c.change.ci95_ns[0],
            c.change.ci95_ns[1],
            c.change.study,
            c.change.time
        );
    }
    if t.regressions().next().is_some() { Err(Failure::Exit(ExitStatus::ChecksFailed, String::new())) } else { Ok(t) }
}

//! The per-probe estimates of a study (step 2 of the pipeline), for the results history: each
//! probe's median differential over its session's runs, per program (or null calibration), level
//! and session, before the null calibration.

use std::collections::BTreeMap;

use crate::error::AnalysisError;
use crate::load;
use crate::runs::{RunPairs, session_estimates};
use latency_results::ResultsDir;
use latency_results::SessionKind;
use latency_results::index::Index;
use latency_results::journal;
use latency_results::provenance::Provenance;

/// One session's estimates.
pub struct SessionEstimates {
    /// Program, or null calibration group.
    pub program: String,
    /// Whether it is a null calibration.
    pub kind: SessionKind,
    /// Factor level (studies with factors).
    pub level: Option<String>,
    /// Session.
    pub session: u32,
    /// (probe id, estimate ns), in id order.
    pub estimates: Vec<(u64, f64)>,
}

/// Every session's per-probe estimates, from the runs the journal records as complete and whose
/// files match it (runs that cannot be used are left out, as the analysis leaves them out; a study
/// that kept histograms only has none).
pub fn probe_estimates(dir: &ResultsDir) -> Result<Vec<SessionEstimates>, AnalysisError> {
    let prov = Provenance::read(dir)?;
    let index = Index::from(&prov);
    let entries = journal::read(&dir.journal_path())?;
    let (files, _) = load::run_files(dir, &index.groups, &entries)?;
    let paired = load::paired_runs(&index, &files, &[], load::Reductions::Kept);
    let mut by_session: BTreeMap<(usize, Option<String>, u32), Vec<&RunPairs>> = BTreeMap::new();
    for (r, _) in paired.iter().flatten().filter(|(r, _)| r.counts.matched > 0) {
        by_session.entry((r.group, r.level.clone(), r.session)).or_default().push(r);
    }
    Ok(by_session
        .into_iter()
        .map(|((g, level, session), runs)| {
            let group = &index.groups[g];
            SessionEstimates {
                program: group.program.clone(),
                kind: group.kind,
                level,
                session,
                estimates: session_estimates(&runs).0,
            }
        })
        .collect())
}

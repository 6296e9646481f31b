//! What a results folder must be for the history to take its study ([`study`]), and the study as
//! the history takes it ([`Study`]: its key, identity, rows and estimates).
//!
//! A study is taken when
//!
//! - it has ended, at a UTC start time;
//! - it is healthy: no run failed every attempt and the analysis named no problem — the rule of
//!   `nightly`, which neither adds nor judges a study whose runs failed, so that no trend is ever
//!   judged on one;
//! - its run data is what its journal records (each complete run's file there, with the journal's
//!   sha256): the summary's fingerprint (`inputs_sha256`) covers the journal, so a summary of other
//!   data would otherwise pass for current;
//! - its summary, current or analysed anew, can be trusted ([`checks::contradiction`]).
//!
//! Otherwise it is refused ([`Refusal`]), naming the file and the key, and nothing is written.

use std::path::Path;

use latency_analysis as analysis;
use latency_analysis::AnalysisError;
use latency_analysis::load::{self, Unreadable};
use latency_results::ResultsDir;
use latency_results::SessionKind;
use latency_results::event::Event;
use latency_results::history::row::{self, Estimate, Row};
use latency_results::history::table::Micros;
use latency_results::index::Index;
use latency_results::journal;
use latency_results::provenance::{self, Provenance};

use crate::checks;
use crate::error::{Refusal, StoreError};
use crate::identity::{StudyIdentity, StudyKey};

/// A finished study as the history takes it.
#[derive(Clone, Debug)]
pub struct Study {
    /// Its key in the store.
    pub key: StudyKey,
    /// Its series' identity.
    pub identity: StudyIdentity,
    /// Its rows (`rows` table).
    pub rows: Vec<Row>,
    /// Its per-probe estimates (`estimates` table).
    pub estimates: Vec<Estimate>,
}

/// The study of the results folder `dir`, analysed first if its summary is not current; refused
/// ([`StoreError::Unfinished`]) unless it ended, is healthy and can be trusted.
pub fn study(dir: &ResultsDir) -> Result<Study, StoreError> {
    let root = dir.root();
    let refuse = |reason: Refusal| StoreError::Unfinished { dir: shown(root), reason: Box::new(reason) };
    let prov = Provenance::read(dir).map_err(AnalysisError::from)?;
    if prov.ended.is_none() {
        return Err(refuse(Refusal::NotEnded { dir: shown(root) }));
    }
    let start = latency_results::parse_utc_micros(&prov.started).zip(prov.started.get(..10));
    let Some((micros, date)) = start else {
        let file = shown(&root.join(provenance::FILE));
        return Err(refuse(Refusal::Start { file, value: prov.started.clone() }));
    };
    // Nightly's rule, first from what the engine recorded.
    let entries = journal::read(&dir.journal_path()).map_err(AnalysisError::from)?;
    let journal_failed = entries.iter().filter(|e| matches!(e.event, Event::RunFailed { .. })).count() as u64;
    if journal_failed > 0 {
        return Err(refuse(Refusal::Unhealthy { dir: shown(root), failed_runs: journal_failed, problems: Vec::new() }));
    }
    if let Some(reason) = run_data(dir, &prov, &entries)? {
        return Err(refuse(reason));
    }
    let summary = analysis::current_summary(dir)?;
    if !summary.health.is_clean() {
        let (failed_runs, problems) = (summary.health.failed_runs, summary.health.problems.clone());
        return Err(refuse(Refusal::Unhealthy { dir: shown(root), failed_runs, problems }));
    }
    if let Some(c) = checks::contradiction(&summary, &prov) {
        return Err(refuse(Refusal::Untrusted {
            dir: shown(root),
            file: shown(&root.join("summary.json")),
            key: c.key,
            what: c.what,
            remedy: Some(format!("`orchestrate analyze {}` computes it anew from the run data", shown(root))),
        }));
    }
    let key = StudyKey { date: date.to_string(), study: row::study_id(&prov, &summary) };
    let report = root.join("report.html");
    let report = report.is_file().then(|| std::path::absolute(&report).unwrap_or(report).display().to_string());
    let time = Micros(micros);
    let rows = row::rows(&summary, &prov, time, report);
    let estimates = estimates(dir)?;
    Ok(Study { key, identity: StudyIdentity::of_provenance(&prov), rows, estimates })
}

fn shown(path: &Path) -> String {
    path.display().to_string()
}

/// Why the run data is not what the journal records (a complete run's file missing, unreadable or
/// with another sha256), if it is not. Whatever else the analysis finds in a file the journal
/// vouches for, it found when it wrote the summary, which names it.
fn run_data(
    dir: &ResultsDir,
    prov: &Provenance,
    entries: &[latency_results::event::Entry],
) -> Result<Option<Refusal>, StoreError> {
    let index = Index::from(prov);
    let (files, _) = load::run_files(dir, &index.groups, entries)?;
    let checked = load::par_map(&files, |f| match index.groups.get(f.group) {
        Some(group) => load::read_verified(f, group).map(drop),
        None => Ok(()),
    });
    let untrusted = |rel: &str, what: String| Refusal::Untrusted {
        dir: shown(dir.root()),
        file: shown(&dir.root().join(rel)),
        key: "sha256".into(),
        what,
        remedy: None,
    };
    let why = "the run data is not the data summary.json was computed from (its fingerprint `inputs_sha256` covers \
               the journal)";
    Ok(checked.into_iter().find_map(|r| match r {
        Err(Unreadable::Checksum { rel, actual, recorded }) => {
            Some(untrusted(&rel, format!("is {actual}, the journal records {recorded} for this run: {why}")))
        }
        Err(Unreadable::Read { rel, source }) => {
            Some(untrusted(&rel, format!("cannot be computed ({source}), while the journal records the run complete")))
        }
        _ => None,
    }))
}

/// The study's estimates as rows of the `estimates` table.
fn estimates(dir: &ResultsDir) -> Result<Vec<Estimate>, StoreError> {
    let mut out = Vec::new();
    for s in analysis::estimates::probe_estimates(dir)? {
        let kind = if s.kind == SessionKind::Null { "null" } else { "program" };
        out.extend(s.estimates.iter().map(|&(probe, estimate_ns)| Estimate {
            program: s.program.clone(),
            level: s.level.clone(),
            kind: kind.into(),
            session: s.session,
            probe,
            estimate_ns,
        }));
    }
    Ok(out)
}

//! The analysis of a results folder: runs loaded, paired and reduced per program into the summary.

use crate::error::AnalysisError;
use crate::load::Reductions;
use crate::runs::RunPairs;
use crate::stats::summary_levels;
use crate::summarize::{Unusable, summarize};
use crate::{load, soak, soak_headline};
use latency_results::ResultsDir;
use latency_results::ResultsError;
use latency_results::index::Index;
use latency_results::journal;
use latency_results::provenance::Provenance;
use latency_results::summary::*;

/// Largest `summary.json` read back (a paper study's is about 1 MB).
pub const MAX_SUMMARY_BYTES: u64 = 256 << 20;

/// Analyse a results folder. Only runs the journal records as complete are used, each verified
/// against the journal; every file or run that cannot be used is named in `health.problems`. The
/// runs' reductions are read where kept and made again where not ([`Reductions::Kept`]).
pub fn analyze(dir: &ResultsDir) -> Result<Summary, AnalysisError> {
    analyze_from(dir, Reductions::Kept)
}

/// [`analyze`], reading the runs' reductions or ([`Reductions::Ignored`]) only the run files.
pub fn analyze_from(dir: &ResultsDir, reductions: Reductions) -> Result<Summary, AnalysisError> {
    analysed(dir, reductions).map(|a| a.summary)
}

/// A folder analysed: its summary, and the sha256 of each run file it used, which it read whole
/// and found to be the journal's (the folder's crate takes them instead of reading the files
/// again).
pub struct Analysed {
    /// The summary.
    pub summary: Summary,
    /// The run files used, by path relative to the folder.
    pub hashed: latency_results::rocrate::Hashed,
    /// The journal as the analysis read it.
    pub journal: Vec<latency_results::event::Entry>,
}

fn analysed(dir: &ResultsDir, reductions: Reductions) -> Result<Analysed, AnalysisError> {
    let prov = Provenance::read(dir)?;
    let index = Index::from(&prov);
    let entries = journal::read(&dir.journal_path())?;
    let data = dir.root().join("data");
    if !data.is_dir() {
        return Err(AnalysisError::NoRunData { path: data });
    }
    let (files, mut problems) = load::run_files(dir, &index.groups, &entries)?;
    if !files.is_empty() && files.iter().all(|f| f.records == 0 && f.histogram) {
        let summary = soak_headline::summary(dir, &index, &entries, &prov, problems)?;
        return Ok(Analysed { summary, hashed: Default::default(), journal: entries });
    }
    let port_pairs = &index.analysis.port_pairs;
    let others: Vec<latency_plan::PortPair> = port_pairs.values().copied().collect();
    let paired = load::paired_runs(&index, &files, &others, reductions);
    let mut runs = Vec::with_capacity(files.len());
    let mut by_pair: Vec<Vec<RunPairs>> = port_pairs.keys().map(|_| Vec::new()).collect();
    let mut failed = 0;
    let mut hashed = latency_results::rocrate::Hashed::new();
    for (f, r) in files.iter().zip(paired) {
        if r.is_ok() {
            hashed.insert(f.rel.clone(), f.sha256.clone());
        }
        match r {
            Ok((p, _)) if p.counts.matched == 0 => {
                failed += 1;
                problems.push(format!("{}: no probe matched on both ports; counted as a failed run", f.rel));
            }
            Ok((p, others)) => {
                runs.push(p);
                for (k, o) in others.into_iter().enumerate().filter(|(_, o)| o.counts.matched > 0) {
                    by_pair[k].push(o);
                }
            }
            Err(e) => problems.push(e.to_string()),
        }
    }
    let mut soaks = soak::summarize(dir, &index, &entries, &summary_levels(&index), &mut problems);
    let mut hops = Vec::new();
    for (name, runs) in port_pairs.keys().zip(&by_pair) {
        let s = summarize(&index, runs, &entries, None, Unusable::default());
        problems.extend(s.health.problems.iter().map(|p| format!("port pair `{name}`: {p}")));
        hops.push((name, s.programs));
    }
    let mut summary = summarize(&index, &runs, &entries, Some(&prov), Unusable { failed_runs: failed, problems });
    // Giving a study's runs back to the system (their pages unmapped) takes as long as a phase of
    // the analysis: done aside, while the summary is finished and written (where no thread can be
    // started, the runs go with the refused closure, here).
    let _aside = std::thread::Builder::new().spawn(move || drop((runs, by_pair)));
    for (name, p) in summary.programs.iter_mut() {
        p.soak = soaks.remove(name);
        for (pair, programs) in &mut hops {
            if let Some(h) = programs.remove(name) {
                p.port_pairs.insert((*pair).clone(), h);
            }
        }
    }
    summary.inputs_sha256 = latency_results::summary::inputs_sha256(dir)?;
    Ok(Analysed { summary, hashed, journal: entries })
}

/// Whether `summary` still describes the folder: same inputs, and no run file changed since it
/// was written.
pub fn is_current(dir: &ResultsDir, summary: &Summary) -> Result<bool, ResultsError> {
    if summary.inputs_sha256.is_empty() || summary.inputs_sha256 != latency_results::summary::inputs_sha256(dir)? {
        return Ok(false);
    }
    let written = std::fs::metadata(dir.root().join("summary.json")).and_then(|m| m.modified());
    let Ok(written) = written else { return Ok(false) };
    for f in dir.data_files()? {
        let modified = std::fs::metadata(dir.root().join(&f)).and_then(|m| m.modified());
        if modified.map_or(true, |m| m > written) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Analyse and write `summary.json` (atomically, replacing an earlier one).
pub fn analyze_and_write(dir: &ResultsDir) -> Result<Analysed, AnalysisError> {
    let a = analysed(dir, Reductions::Kept)?;
    let s = &a.summary;
    let path = dir.root().join("summary.json");
    if let Some(key) = s.non_finite() {
        return Err(AnalysisError::NonFinite { path, key });
    }
    let text = serde_json::to_string_pretty(s).map_err(|source| ResultsError::Json {
        path: path.clone(),
        what: "summary".into(),
        source,
    })?;
    latency_results::write_file(&path, text.as_bytes(), true)?;
    Ok(a)
}

/// The summary of a folder: `summary.json` when it is current, else analysed anew (and written).
pub fn current_summary(dir: &ResultsDir) -> Result<Summary, AnalysisError> {
    if let Some(s) = written_summary(dir)
        && is_current(dir, &s)?
    {
        return Ok(s);
    }
    analyze_and_write(dir).map(|a| a.summary)
}

/// The folder's `summary.json` as written, current or not; none when it is absent or unreadable.
pub fn written_summary(dir: &ResultsDir) -> Option<Summary> {
    let bytes = latency_results::read_capped(&dir.root().join("summary.json"), MAX_SUMMARY_BYTES, "summary").ok()?;
    serde_json::from_slice::<Summary>(&bytes).ok()
}

//! `orchestrate status DIR`: where a study stands, read without changing anything: each session's
//! done, failed, missing and set-apart runs, the lock's holder, whether the summary is current,
//! and every run a `--resume` would redo, with why (as `--resume` itself decides it:
//! [`orchestrator::engine::audit`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use latency_results::ResultsDir;
use latency_results::event::Event;
use latency_results::journal;
use latency_results::provenance::Provenance;
use orchestrator::engine::{self, StartedWith};

use crate::{Failure, print_out};

/// A run a resume would do again, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Redo {
    program: String,
    session: u32,
    run: u32,
    reason: String,
}

#[derive(Serialize)]
struct SessionCounts {
    program: String,
    session: u32,
    runs: usize,
    done: usize,
    failed: usize,
    missing: usize,
    set_apart: usize,
}

#[derive(Serialize)]
struct Status {
    folder: String,
    study: String,
    ended: bool,
    lock_holder: Option<String>,
    summary: &'static str,
    /// Why a resume would be refused as a whole (the study was started otherwise).
    refused: Vec<String>,
    sessions: Vec<SessionCounts>,
    redo: Vec<Redo>,
    /// Files of `data/` a resume moves aside that are no run of the schedule.
    strays: Vec<String>,
    resume: String,
}

/// Print the status of the study in `dir`; the plan is `plan`, else the one it was run from.
pub(crate) fn status(dir: &Path, plan: Option<&Path>, json: bool) -> Result<(), Failure> {
    let rd = ResultsDir::open(dir)?;
    let entries = journal::read(&rd.journal_path())?;
    let started = StartedWith::from_journal(&entries)
        .ok_or_else(|| Failure::Usage(format!("{}: the journal records no study start", dir.display())))?;
    let prov = Provenance::read(&rd).ok();
    let plan_path: PathBuf = match (plan, prov.as_ref().and_then(|p| p.plan_file.clone())) {
        (Some(p), _) => p.to_path_buf(),
        (None, Some(p)) => p,
        (None, None) => return Err(Failure::Usage(format!("{}: which plan? give it with --plan", dir.display()))),
    };
    let (plan, inventories) = crate::slices::load(&plan_path, started.testbed_arg.as_deref())?;
    let schedule =
        latency_schedule::expand(&plan, inventories[0].as_ref()).map_err(|e| Failure::Invalid(vec![e.diagnostic()]))?;
    let sim_model = started.sim_model.as_deref().map(Path::new);
    let now = crate::run::started_with(&plan, &inventories, started.seed, started.testbed_arg.clone(), sim_model)?;
    let refused = started.differences(&now);
    let audit = engine::audit(&rd, &schedule, &entries)?;
    let completed = journal::completed(&entries);
    let failed: std::collections::BTreeSet<(String, u32, u32)> = entries
        .iter()
        .filter_map(|e| match &e.event {
            Event::RunFailed { index, run, .. } => {
                schedule.sessions.get(*index).map(|s| (s.program.clone(), s.session, *run))
            }
            _ => None,
        })
        .collect();
    // Files set apart, by the run they would be.
    let mut set_apart: BTreeMap<PathBuf, String> = audit.set_apart.iter().cloned().collect();
    let quarantined = rd.quarantined()?;
    let mut sessions = Vec::new();
    let mut redo = Vec::new();
    for s in &schedule.sessions {
        let mut counts = SessionCounts {
            program: s.program.clone(),
            session: s.session,
            runs: s.runs.len(),
            done: 0,
            failed: 0,
            missing: 0,
            set_apart: 0,
        };
        for r in &s.runs {
            let key = (s.program.clone(), s.session, r.run);
            let rel = s.run_rel_path(r);
            if audit.verified.contains_key(&key) {
                counts.done += 1;
                continue;
            }
            let reason = if let Some(why) = set_apart.remove(&rel) {
                counts.set_apart += 1;
                format!("its file is set apart: {why}")
            } else if failed.contains(&key) {
                counts.failed += 1;
                "it failed its checks".to_string()
            } else if completed.contains_key(&key) {
                counts.missing += 1;
                "recorded as complete, but its file is missing".to_string()
            } else if let Some(q) = quarantined.get(&rel) {
                counts.missing += 1;
                format!("missing: an earlier resume moved its file to {}", q.display())
            } else {
                counts.missing += 1;
                "missing: never completed".to_string()
            };
            redo.push(Redo { program: key.0, session: key.1, run: key.2, reason });
        }
        sessions.push(counts);
    }
    let summary = match latency_analysis::written_summary(&rd) {
        None => "absent",
        Some(s) if latency_analysis::is_current(&rd, &s)? => "current",
        Some(_) => "stale (an analysis would rewrite it)",
    };
    let resume = if refused.is_empty() {
        crate::run::resume_command(&plan_path, dir, &started)
    } else {
        "refused: the study was started otherwise".to_string()
    };
    let status = Status {
        folder: dir.display().to_string(),
        study: schedule.study.clone(),
        ended: prov.as_ref().is_some_and(|p| p.ended.is_some()),
        lock_holder: latency_results::lock::holder(rd.root())?,
        summary,
        refused,
        sessions,
        redo,
        strays: set_apart.into_iter().map(|(p, why)| format!("{}: {why}", p.display())).collect(),
        resume,
    };
    if json {
        let text = serde_json::to_string_pretty(&status).map_err(|e| Failure::Usage(e.to_string()))?;
        return print_out(&format!("{text}\n"));
    }
    print_out(&text(&status))
}

fn text(s: &Status) -> String {
    use std::fmt::Write;
    let mut out = format!(
        "study {} in {}: {}; summary {}; {}\n",
        s.study,
        s.folder,
        if s.ended { "ended" } else { "not ended (interrupted or running)" },
        s.summary,
        match &s.lock_holder {
            Some(h) => format!("in use by {h}"),
            None => "not in use".into(),
        }
    );
    for r in &s.refused {
        let _ = writeln!(out, "a resume is refused: {r}");
    }
    out.push_str("\nsession                 runs  done  failed  missing  set apart\n");
    for c in &s.sessions {
        let _ = writeln!(
            out,
            "{:<22} {:>5} {:>5} {:>7} {:>8} {:>10}",
            format!("{} {}", c.program, c.session),
            c.runs,
            c.done,
            c.failed,
            c.missing,
            c.set_apart
        );
    }
    if s.redo.is_empty() {
        out.push_str("\nevery run is done\n");
    } else {
        let _ = writeln!(out, "\na resume redoes {} run(s):", s.redo.len());
        for r in &s.redo {
            let _ = writeln!(out, "  {} session {} run {}: {}", r.program, r.session, r.run, r.reason);
        }
    }
    for p in &s.strays {
        let _ = writeln!(out, "set apart by a resume: {p}");
    }
    let _ = writeln!(out, "\nresume: {}", s.resume);
    out
}

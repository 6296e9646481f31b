//! What a resumption must repeat of how a study was started, read from the journal's first
//! `study_started`, and the command-line options that repeat it; and the runs a resumed study
//! keeps.

use std::collections::BTreeMap;

use super::{Engine, EngineError};
use latency_plan::Plan;
use latency_plan::TraceSource;
use latency_plan::digest;
use latency_plan::inventory::Inventory;
use latency_results::HISTOGRAM_EXTENSION;
use latency_results::ResultsDir;
use latency_results::ResultsError;
use latency_results::event::Entry;
use latency_results::event::Event;
use latency_results::journal;
use latency_schedule::Schedule;
use std::path::Path;

/// How a study was started: what a resumption must repeat.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartedWith {
    /// sha256 of the plan.
    pub plan_hash: String,
    /// Seed.
    pub seed: u64,
    /// Testbed name (`sim` or the inventory's name).
    pub testbed: String,
    /// `--testbed` as given (absent: the plan's).
    pub testbed_arg: Option<String>,
    /// `--sim-model` as given.
    pub sim_model: Option<String>,
    /// Tool version.
    pub tool_version: String,
    /// The plan's factor levels, in order.
    pub levels: Vec<String>,
    /// sha256 of every other file the study reads ([`input_digests`]); none recorded by a
    /// journal older than the record.
    pub inputs: BTreeMap<String, String>,
}

impl StartedWith {
    /// The first `study_started` of a journal.
    pub fn from_journal(entries: &[Entry]) -> Option<StartedWith> {
        entries.iter().find_map(|e| match &e.event {
            Event::StudyStarted {
                plan_hash,
                seed,
                testbed,
                testbed_arg,
                sim_model,
                tool_version,
                levels,
                inputs,
                ..
            } => Some(StartedWith {
                plan_hash: plan_hash.clone(),
                seed: *seed,
                testbed: testbed.clone(),
                testbed_arg: testbed_arg.clone(),
                sim_model: sim_model.clone(),
                tool_version: tool_version.clone(),
                levels: levels.clone(),
                inputs: inputs.clone(),
            }),
            _ => None,
        })
    }

    /// Every way `now` differs from how the study was started (empty: it may resume).
    pub fn differences(&self, now: &StartedWith) -> Vec<String> {
        let mut out = Vec::new();
        if self.plan_hash != now.plan_hash {
            out.push(format!(
                "plan: started with a plan of hash {}, this one has {}; resume with the same plan file",
                short(&self.plan_hash),
                short(&now.plan_hash)
            ));
        }
        if self.levels != now.levels {
            let added: Vec<&str> = now.levels.iter().filter(|l| !self.levels.contains(l)).map(String::as_str).collect();
            let removed: Vec<&str> =
                self.levels.iter().filter(|l| !now.levels.contains(l)).map(String::as_str).collect();
            let list = |v: &[&str]| if v.is_empty() { "none".to_string() } else { v.join(", ") };
            out.push(format!(
                "factor levels: started with {} levels, this plan has {}; added: {}; removed: {}{}",
                self.levels.len(),
                now.levels.len(),
                list(&added),
                list(&removed),
                if added.is_empty() && removed.is_empty() { " (the order changed)" } else { "" }
            ));
        }
        if self.seed != now.seed {
            out.push(format!("seed: started with --seed {}, this resume uses {}", self.seed, now.seed));
        }
        if self.testbed != now.testbed {
            out.push(format!(
                "testbed: started on `{}`{}, this resume would run on `{}`",
                self.testbed,
                self.testbed_arg.as_ref().map(|a| format!(" (--testbed {a})")).unwrap_or_default(),
                now.testbed
            ));
        }
        if self.sim_model != now.sim_model {
            out.push(format!(
                "simulator model: started with {}, this resume uses {}",
                self.sim_model.as_deref().unwrap_or("the built-in model"),
                now.sim_model.as_deref().unwrap_or("the built-in model")
            ));
        }
        if !self.inputs.is_empty() {
            out.extend(changed_inputs(&self.inputs, &now.inputs));
        }
        if self.tool_version != now.tool_version {
            out.push(format!(
                "tool version: started with orchestrate {}, this is {}; resume with the same version",
                self.tool_version, now.tool_version
            ));
        }
        out
    }

    /// The options that repeat this start, as command-line arguments.
    pub fn resume_args(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(t) = &self.testbed_arg {
            out.extend(["--testbed".to_string(), t.clone()]);
        }
        out.extend(["--seed".to_string(), self.seed.to_string()]);
        if let Some(m) = &self.sim_model {
            out.extend(["--sim-model".to_string(), m.clone()]);
        }
        out
    }
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// The sha256 of every file a study reads besides its plan, by what it is: each pcap trace, each
/// bitstream manifest and table file, the inventory and the simulator model (a generated trace is
/// part of the plan). Recorded when a study starts; a resumption compares them.
pub fn input_digests(
    plan: &Plan,
    inventory: Option<&Inventory>,
    sim_model: Option<&Path>,
) -> Result<BTreeMap<String, String>, ResultsError> {
    let mut files: Vec<(String, &Path)> = Vec::new();
    for t in &plan.traces {
        if let TraceSource::Pcap { path, .. } = &t.source {
            files.push((format!("trace `{}`", t.name), path));
        }
    }
    for p in &plan.programs {
        for b in p.images() {
            files.push((format!("bitstream manifest `{}`", b.name), &b.manifest));
        }
        if let Some(table) = &p.table {
            files.push((format!("table of `{}`", p.name), table));
        }
    }
    if let Some(inv) = inventory {
        files.push(("inventory".into(), &inv.path));
    }
    if let Some(m) = sim_model {
        files.push(("simulator model".into(), m));
    }
    let mut out = BTreeMap::new();
    for (what, path) in files {
        let sha = digest::sha256_file(path).map_err(latency_results::io_err(path))?;
        out.insert(format!("{what} ({})", path.display()), sha);
    }
    Ok(out)
}

/// How the inputs now differ from those the study started with.
fn changed_inputs(before: &BTreeMap<String, String>, now: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    for (what, sha) in before {
        match now.get(what) {
            Some(s) if s == sha => {}
            Some(s) => {
                out.push(format!("{what} changed since the study started (sha256 {} → {})", short(sha), short(s)))
            }
            None => out.push(format!("{what} is no longer an input of this plan")),
        }
    }
    for what in now.keys().filter(|w| !before.contains_key(*w)) {
        out.push(format!("{what} is a new input"));
    }
    out
}

/// What a resumption finds in a results folder: the runs complete and verified, and every file
/// under `data/` it sets apart, with why.
#[derive(Debug, Default)]
pub struct Audit {
    /// (program, session, run) → the data file's sha256, as the journal recorded it.
    pub verified: BTreeMap<(String, u32, u32), String>,
    /// Files (relative to the folder) a resume moves to `quarantine/`, and why.
    pub set_apart: Vec<(std::path::PathBuf, String)>,
}

/// Check the data files of `dir` against the journal's `entries` and `schedule`: a run whose
/// checksum differs from the journal's, a run the journal does not record, and anything that is
/// not a run of the schedule are set apart. Reads only.
pub fn audit(dir: &ResultsDir, schedule: &Schedule, entries: &[Entry]) -> Result<Audit, ResultsError> {
    let completed = journal::completed(entries);
    let mut expected: BTreeMap<std::path::PathBuf, (String, u32, u32)> = BTreeMap::new();
    for s in &schedule.sessions {
        for r in &s.runs {
            expected.insert(s.run_rel_path(r), (s.program.clone(), s.session, r.run));
        }
    }
    let mut out = Audit::default();
    for rel in dir.data_files()? {
        let path = dir.root().join(&rel);
        // A FIFO, a device or a folder in place of a run (or an oversize file) is set apart like
        // a corrupt run, never read: the hash refuses it at once.
        let sha256 = || match digest::sha256_file(&path) {
            Ok(h) => Ok(Ok(h)),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::InvalidInput | std::io::ErrorKind::InvalidData) => {
                Ok(Err(e.to_string()))
            }
            Err(e) => Err(latency_results::io_err(&path)(e)),
        };
        let reason: String = if rel.extension().is_some_and(|e| e == HISTOGRAM_EXTENSION) {
            // A run's histogram log is kept when it is the one the journal recorded with the run.
            let run = expected.get(&rel.with_extension("parquet")).and_then(|k| completed.get(k));
            match run.and_then(|c| c.histogram_sha256.as_deref()) {
                Some(h) => match sha256()? {
                    Ok(actual) if actual == h => continue,
                    Ok(_) => "not the histogram log the journal recorded with its run".into(),
                    Err(unreadable) => unreadable,
                },
                None => "not the histogram log the journal recorded with its run".into(),
            }
        } else {
            match expected.get(&rel) {
                None => "not a run of this study's schedule".into(),
                Some(k) => match completed.get(k) {
                    Some(c) => match sha256()? {
                        Ok(actual) if c.sha256 == actual => {
                            out.verified.insert(k.clone(), actual);
                            continue;
                        }
                        Ok(_) => "checksum differs from the journal (corrupt or truncated)".into(),
                        Err(unreadable) => unreadable,
                    },
                    None => "not recorded as complete in the journal".into(),
                },
            }
        };
        out.set_apart.push((rel, reason));
    }
    Ok(out)
}

/// Check the results folder against a resumed study's inputs; returns the runs that are complete
/// and verified, after moving aside every file under `data/` that is not ([`audit`]).
pub(super) fn prepare(
    engine: &Engine<'_>,
    schedule: &Schedule,
) -> Result<BTreeMap<(String, u32, u32), String>, EngineError> {
    let entries = journal::read(&engine.dir.journal_path())?;
    engine.dir.remove_partial_files()?;
    let found = audit(engine.dir, schedule, &entries)?;
    for (rel, reason) in found.set_apart {
        let path = engine.dir.root().join(&rel);
        let to = engine.dir.quarantine(&path)?;
        let rel_to = to.strip_prefix(engine.dir.root()).unwrap_or(&to).to_string_lossy().into_owned();
        engine.emit(Event::Quarantined { path: rel.to_string_lossy().into_owned(), to: rel_to, reason })?;
    }
    Ok(found.verified)
}

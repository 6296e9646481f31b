//! `orchestrate run`: a study from plan to reports, resumable.

use std::path::Path;

use latency_plan as plan;
use latency_schedule as schedule;
use orchestrator::exit::ExitStatus;

use super::cli::{LogFormat, RunArgs};
use super::{Failure, QUIET, analyze_dir, json_line, print_out, report_dir};

/// A word for a shell command line (quoted when it needs to be).
pub(crate) fn shell_word(w: &str) -> String {
    if !w.is_empty() && w.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@+".contains(&b)) {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

/// This process's command line, for the lock's holder message (an argument that is not UTF-8
/// shown with replacement characters).
pub(crate) fn command_line() -> String {
    std::env::args_os().map(|a| shell_word(&a.to_string_lossy())).collect::<Vec<_>>().join(" ")
}

/// Most suffixes tried for a default results folder before giving up.
const MAX_SUFFIX: u32 = 1000;

/// A new, empty folder `name` in `parent` (created with it), or `name-2`, `name-3`, … when another
/// study took that name in the same second: each made with one `create_dir`, which fails for a
/// name that exists, so two studies never share a folder.
fn default_folder(parent: &Path, name: &str) -> Result<std::path::PathBuf, Failure> {
    let failed =
        |path: &Path, e: std::io::Error| Failure::Exit(ExitStatus::Results, format!("{}: {e}", path.display()));
    std::fs::create_dir_all(parent).map_err(|e| failed(parent, e))?;
    for k in 1..=MAX_SUFFIX {
        let path = parent.join(if k == 1 { name.to_owned() } else { format!("{name}-{k}") });
        match std::fs::create_dir(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(failed(&path, e)),
        }
    }
    Err(Failure::Usage(format!(
        "{}: {name} and {MAX_SUFFIX} suffixed names are taken; choose a folder with --out",
        parent.display()
    )))
}

pub(crate) fn run(args: &RunArgs) -> Result<(), Failure> {
    match run_plan(args)? {
        (_, true) => Ok(()),
        (_, false) => Err(Failure::Exit(ExitStatus::ChecksFailed, String::new())),
    }
}

/// Run a study (analysed and reported): its results folder, and whether every run passed its
/// checks and the analysis could use everything.
/// How a study of `plan` on `inventories` is started with these options: what a resume is
/// checked against.
pub(crate) fn started_with(
    plan: &latency_plan::Plan,
    inventories: &[Option<latency_plan::Inventory>],
    seed: u64,
    testbed_arg: Option<String>,
    sim_model: Option<&Path>,
) -> Result<orchestrator::engine::StartedWith, Failure> {
    Ok(orchestrator::engine::StartedWith {
        plan_hash: plan.hash.clone(),
        seed,
        testbed: crate::slices::names(inventories).join(","),
        testbed_arg,
        sim_model: sim_model.map(|p| p.display().to_string()),
        tool_version: orchestrator::tool::TOOL_VERSION.into(),
        levels: plan.factors.levels().iter().map(latency_plan::Level::name).collect(),
        inputs: orchestrator::engine::input_digests(plan, inventories[0].as_ref(), sim_model)?,
    })
}

/// The command that resumes the study `started` in `dir` from `plan`, shell-quoted.
pub(crate) fn resume_command(plan: &Path, dir: &Path, started: &orchestrator::engine::StartedWith) -> String {
    let mut words = vec![
        "orchestrate".to_string(),
        "run".into(),
        plan.display().to_string(),
        "--out".into(),
        dir.display().to_string(),
        "--resume".into(),
    ];
    words.extend(started.resume_args());
    words.iter().map(|w| shell_word(w)).collect::<Vec<_>>().join(" ")
}

pub(crate) fn run_plan(args: &RunArgs) -> Result<(std::path::PathBuf, bool), Failure> {
    use latency_results as results;
    use latency_results::ResultsDir;
    use latency_results::journal;
    use latency_testbed::Cancel;
    use latency_testbed::Testbed;
    use latency_testbed::model;
    use latency_testbed::sim::SimTestbed;
    use latency_testbed::ssh::SshTestbed;
    use orchestrator::engine;
    use orchestrator::engine::Options;
    use orchestrator::engine::StartedWith;
    use orchestrator::engine::events;

    let (plan, inventories) = crate::slices::load(&args.plan, args.testbed.as_deref())?;
    let inventory = inventories[0].clone();
    // Traces a real testbed cannot replay stop the study before anything is written (on resume,
    // once it is known that the folder's study is this one).
    let refused: Vec<_> = inventories.iter().flatten().flat_map(|inv| plan::refused_on(&plan, inv)).collect();
    if !refused.is_empty() && !args.resume {
        return Err(Failure::Invalid(refused));
    }
    let schedule = schedule::expand(&plan, inventory.as_ref()).map_err(|e| Failure::Invalid(vec![e.diagnostic()]))?;
    for note in &schedule.stand_ins {
        eprintln!("stand-in: {note}");
    }
    let seed = args.seed.unwrap_or(plan.protocol.seed);
    let model = match (&inventory, &args.sim_model) {
        (None, Some(p)) => {
            let mut diags = Vec::new();
            Some(plan::load_file(p, &mut diags, model::decode).ok_or(Failure::Invalid(diags))?)
        }
        (None, None) => Some(model::SimModel::default()),
        (Some(_), _) => None,
    };
    let started = started_with(&plan, &inventories, seed, args.testbed.clone(), args.sim_model.as_deref())?;
    // Every check before a byte is written: the folder, its lock and, on resume, the study in it.
    let dir = match &args.out {
        Some(out) if args.resume => ResultsDir::open(out)?,
        Some(out) => ResultsDir::create(out, true)?,
        None => {
            let name = format!("{}-{}", results::utc(results::now_secs()).replace(':', ""), &plan.hash[..12]);
            ResultsDir::create(&default_folder(&Path::new("results").join(&plan.study), &name)?, true)?
        }
    };
    let _lock = dir.lock(&command_line())?;
    if args.resume
        && let Some(original) = StartedWith::from_journal(&journal::read(&dir.journal_path())?)
    {
        let differences = original.differences(&started);
        if !differences.is_empty() {
            return Err(Failure::Usage(format!(
                "cannot resume {}: it was started otherwise (nothing was changed)\n  {}",
                dir.root().display(),
                differences.join("\n  ")
            )));
        }
    }
    if !refused.is_empty() {
        return Err(Failure::Invalid(refused));
    }
    if !args.resume {
        results::write_file(&dir.root().join("plan.yaml"), plan.source.as_bytes(), false)?;
    }
    let mut slices: Vec<Box<dyn Testbed>> = Vec::new();
    for inv in &inventories {
        match (inv, &model) {
            (None, Some(model)) => {
                slices.push(Box::new(SimTestbed::new(&plan, model.clone(), args.realtime).with_seed(seed)));
            }
            (Some(inv), _) => {
                let testbed_err =
                    |e| Failure::Exit(ExitStatus::Testbed, format!("{e}\nresults so far: {}", dir.root().display()));
                let staged = SshTestbed::connect(inv, dir.root(), &plan.hash).and_then(|mut tb| {
                    match tb.stage(&plan, dir.root()) {
                        Ok(()) => Ok(tb),
                        Err(e) => {
                            tb.cleanup();
                            Err(e)
                        }
                    }
                });
                match staged {
                    Ok(tb) => slices.push(Box::new(tb)),
                    Err(e) => {
                        for tb in &mut slices {
                            tb.cleanup();
                        }
                        return Err(testbed_err(e));
                    }
                }
            }
            (None, None) => return Err(Failure::Usage("no testbed".into())),
        }
    }
    engine::provenance::write_start(&dir, &plan, &schedule, &slices, seed)?;

    let cancel = Cancel::new();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // A second signal while stopping exits at once.
        let _ = signal_hook::flag::register_conditional_shutdown(sig, 130, cancel.flag());
        let _ = signal_hook::flag::register(sig, cancel.flag());
    }
    let text = args.log_format == LogFormat::Text && !args.quiet;
    QUIET.store(!text, std::sync::atomic::Ordering::Relaxed);
    let mut observers: Vec<Box<dyn events::Observer>> =
        vec![Box::new(events::Log::open(&dir.root().join("orchestrate.log"), text))];
    match args.log_format {
        LogFormat::Json => observers.push(Box::new(events::JsonLines)),
        LogFormat::Text if text => observers.push(Box::new(events::Progress::new())),
        LogFormat::Text => {}
    }
    let resume = resume_command(&args.plan, dir.root(), &started);
    let outcome = engine::run_study(
        &engine::Study { plan: &plan, inventory: inventory.as_ref(), schedule: &schedule },
        &mut slices,
        &dir,
        &Options { resume: args.resume, started },
        &cancel,
        &mut observers,
    )
    .map_err(|e| {
        let status = ExitStatus::from(&e);
        match status {
            ExitStatus::Testbed => Failure::Exit(status, format!("{e}\nresults so far: {}", dir.root().display())),
            _ => Failure::Exit(status, e.to_string()),
        }
    })?;
    if outcome.interrupted {
        eprintln!("interrupted; continue with: {resume}");
        print_out(&format!("{}\n", dir.root().display()))?;
        return Err(Failure::Exit(ExitStatus::Interrupted, String::new()));
    }
    engine::provenance::write_end(&dir, &slices)?;
    let usable = if outcome.complete > 0 {
        let analysed = analyze_dir(&dir)?;
        report_dir(&dir, &analysed.summary, &analysed.hashed, &[])?;
        analysed.summary.health.is_clean()
    } else {
        true
    };
    if !QUIET.load(std::sync::atomic::Ordering::Relaxed) {
        eprintln!(
            "{} runs stored ({} kept from before), {} failed",
            outcome.complete,
            outcome.skipped,
            outcome.failed.len()
        );
    }
    for f in &outcome.failed {
        eprintln!("failed: {f}");
    }
    if args.log_format == LogFormat::Json {
        let last = events::Finished {
            results: dir.root().to_path_buf(),
            runs_stored: outcome.complete,
            runs_kept: outcome.skipped,
            runs_failed: outcome.failed.clone(),
            usable,
        };
        print_out(&json_line(&last)?)?;
    } else {
        print_out(&format!("{}\n", dir.root().display()))?;
    }
    Ok((dir.root().to_path_buf(), outcome.failed.is_empty() && usable))
}

/// A plan derived from another (narrowed to some programs, or given another build), written
/// beside it so that its relative paths hold, as a hidden file; removed when dropped, whatever
/// happens to the study run from it.
pub(crate) struct DerivedPlan(std::path::PathBuf);

impl DerivedPlan {
    /// `text` beside `plan`, named for `what` (`confirm`, `bisect-3`) and this process.
    pub(crate) fn write(plan: &latency_plan::Plan, what: &str, text: &str) -> Result<DerivedPlan, Failure> {
        let stem = plan.path.file_stem().map_or("plan".into(), |s| s.to_string_lossy().into_owned());
        let path = plan.path.with_file_name(format!(".{stem}.{what}-{}.yaml", std::process::id()));
        latency_results::write_file(&path, text.as_bytes(), false)?;
        Ok(DerivedPlan(path))
    }

    /// Where it is.
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for DerivedPlan {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

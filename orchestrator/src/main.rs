//! `orchestrate`: command-line entry point. Argument parsing and exit codes only.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use orchestrator::plan::{self, yaml::Diagnostic};
use orchestrator::schedule::{self, Schedule};

const EXIT_CODES: &str = "\
Exit status:
  0    success
  1    the study ran but runs failed their checks, or a regression was found
  2    invalid input: plan, manifest, inventory or arguments (nothing was touched)
  3    testbed failure: a host or step failed after its retries
  4    results could not be written or read
  130  interrupted (Ctrl-C); the journal is consistent and --resume continues";

/// Declarative orchestrator for FPGA SmartNIC latency studies.
#[derive(Parser)]
#[command(name = "orchestrate", version, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args)]
struct RunArgs {
    /// Plan file.
    plan: PathBuf,
    /// `sim` or an inventory file (overrides the plan's `testbed`).
    #[arg(long)]
    testbed: Option<String>,
    /// Results folder (default: results/STUDY/UTCTIME-PLANHASH/).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Continue the study in --out: keep verified runs, redo the rest.
    #[arg(long, requires = "out")]
    resume: bool,
    /// Seed of the simulator and resampling (default: the plan's).
    #[arg(long)]
    seed: Option<u64>,
    /// Simulated testbed: YAML file overriding model parameters.
    #[arg(long)]
    sim_model: Option<PathBuf>,
    /// Simulated testbed: take the modelled wall time of every step and replay.
    #[arg(long)]
    realtime: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Run a study (`orchestrate PLAN` is the same).
    Run(RunArgs),
    /// Check plans and everything they reference; report every problem at once.
    Validate {
        /// Plan files.
        #[arg(required = true)]
        plans: Vec<PathBuf>,
    },
    /// Statistical pipeline over a results folder; writes RESULTS_DIR/summary.json.
    Analyze {
        /// Results folder.
        dir: PathBuf,
    },
    /// Reports (HTML, Markdown) from a results folder (analysed first if needed).
    Report {
        /// Results folder.
        dir: PathBuf,
        /// Formats, comma-separated: html, md (default: the plan's).
        #[arg(long, value_delimiter = ',')]
        format: Vec<String>,
    },
    /// Regression check of CANDIDATE against BASELINE (results folders); exit 1 on regression.
    Compare {
        /// Baseline results folder.
        baseline: PathBuf,
        /// Candidate results folder.
        candidate: PathBuf,
        /// Write JUnit XML here (one test case per program).
        #[arg(long)]
        junit: Option<PathBuf>,
        /// Largest accepted median shift, ns (default: the candidate plan's, else 3).
        #[arg(long)]
        median_shift_ns: Option<f64>,
        /// Largest accepted p99 shift, ns (default: the candidate plan's, else 10).
        #[arg(long)]
        p99_shift_ns: Option<f64>,
        /// Largest accepted Kolmogorov–Smirnov distance (default: the candidate plan's, else 0.1).
        #[arg(long)]
        ks: Option<f64>,
    },
    /// Convert published data into a results folder.
    Import {
        /// Source format.
        #[arg(value_parser = ["latencylab"])]
        format: String,
        /// Source folder (the LatencyLab repository, containing data/tsc/).
        src: PathBuf,
        /// Results folder to create.
        #[arg(long)]
        out: PathBuf,
        /// Probes per trace (ids outside 1..=N are invalid).
        #[arg(long, default_value_t = 20_000)]
        probes: u64,
    },
    /// Probe traces: generate pcaps, or inspect and verify one.
    Trace {
        #[command(subcommand)]
        op: TraceOp,
    },
    /// Dry run: every session, step and run with its rendered command, and the predicted duration.
    Plan {
        /// Plan file.
        plan: PathBuf,
        /// `sim` or an inventory file (overrides the plan's `testbed`).
        #[arg(long)]
        testbed: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum TraceOp {
    /// Generate a probe trace.
    Generate {
        /// Header template: forward, five_tuple, remove_header, checksum.
        #[arg(long)]
        template: String,
        /// Number of probes (ids 1..=N).
        #[arg(long)]
        count: u32,
        /// Probe id format: latencylab (ASCII marker) or compact (binary).
        #[arg(long, default_value = "latencylab")]
        probe_id: String,
        /// Output pcap (must not exist).
        #[arg(long)]
        out: PathBuf,
    },
    /// Generate every generated trace of a plan into a folder (`<trace>.pcap`).
    Plan {
        /// Plan file.
        plan: PathBuf,
        /// Output folder.
        #[arg(long)]
        out: PathBuf,
    },
    /// Count and check the probes of a pcap (exit 1 when it has problems).
    Inspect {
        /// The pcap.
        file: PathBuf,
        /// Probe id format.
        #[arg(long, default_value = "latencylab")]
        probe_id: String,
    },
}

enum Failure {
    Invalid(Vec<Diagnostic>),
    Usage(String),
    Exit(u8, String),
}

/// `orchestrate PLAN ...` is `orchestrate run PLAN ...`.
fn args() -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let known = ["run", "validate", "plan", "analyze", "report", "compare", "import", "trace", "help"];
    if let Some(first) = args.get(1).and_then(|a| a.to_str())
        && !first.starts_with('-')
        && !known.contains(&first)
    {
        args.insert(1, "run".into());
    }
    args
}

fn main() -> ExitCode {
    let cli = Cli::parse_from(args());
    let result = match cli.command {
        Command::Run(args) => run(&args),
        Command::Validate { plans } => validate(&plans),
        Command::Plan { plan, testbed, json } => show_plan(&plan, testbed.as_deref(), json),
        Command::Analyze { dir } => analyze(&dir).map(|_| ()),
        Command::Report { dir, format } => report(&dir, &format),
        Command::Compare { baseline, candidate, junit, median_shift_ns, p99_shift_ns, ks } => {
            compare(&baseline, &candidate, junit.as_deref(), [median_shift_ns, p99_shift_ns, ks])
        }
        Command::Import { src, out, probes, .. } => import(&src, &out, probes),
        Command::Trace { op } => trace(op),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Exit(code, msg)) => {
            if !msg.is_empty() {
                eprintln!("error: {msg}");
            }
            ExitCode::from(code)
        }
        Err(Failure::Invalid(diags)) => {
            print_diagnostics(&diags);
            ExitCode::from(2)
        }
        Err(Failure::Usage(msg)) => {
            eprintln!("error: {msg}");
            ExitCode::from(2)
        }
    }
}

fn print_diagnostics(diags: &[Diagnostic]) {
    let snippets = std::io::stderr().is_terminal();
    for d in diags {
        let text = match snippets.then(|| std::fs::read_to_string(&d.file).ok()).flatten() {
            Some(src) => d.with_snippet(&src),
            None => d.to_string(),
        };
        eprintln!("{text}");
    }
    eprintln!("{} problem{} found", diags.len(), if diags.len() == 1 { "" } else { "s" });
}

fn validate(plans: &[PathBuf]) -> Result<(), Failure> {
    let mut all = Vec::new();
    for p in plans {
        match plan::load(p, None) {
            Ok((plan, _)) => {
                eprintln!(
                    "{}: ok (study `{}`, {} program{})",
                    p.display(),
                    plan.study,
                    plan.programs.len(),
                    if plan.programs.len() == 1 { "" } else { "s" }
                )
            }
            Err(plan::Invalid(mut d)) => all.append(&mut d),
        }
    }
    if all.is_empty() { Ok(()) } else { Err(Failure::Invalid(all)) }
}

fn load_schedule(path: &Path, testbed: Option<&str>) -> Result<Schedule, Failure> {
    let (plan, inventory) = plan::load(path, testbed).map_err(|e| Failure::Invalid(e.0))?;
    schedule::expand(&plan, inventory.as_ref()).map_err(Failure::Usage)
}

fn show_plan(path: &Path, testbed: Option<&str>, json: bool) -> Result<(), Failure> {
    let s = load_schedule(path, testbed)?;
    if json {
        let text = serde_json::to_string_pretty(&s).map_err(|e| Failure::Usage(e.to_string()))?;
        println!("{text}");
    } else {
        print!("{}", orchestrator::schedule::describe(&s));
    }
    Ok(())
}

fn run(args: &RunArgs) -> Result<(), Failure> {
    use orchestrator::engine::{self, EngineError, Options, events};
    use orchestrator::results::{self, ResultsDir};
    use orchestrator::testbed::{Cancel, Testbed, model, sim::SimTestbed, ssh::SshTestbed};

    let (plan, inventory) = plan::load(&args.plan, args.testbed.as_deref()).map_err(|e| Failure::Invalid(e.0))?;
    let schedule = schedule::expand(&plan, inventory.as_ref()).map_err(Failure::Usage)?;
    let seed = args.seed.unwrap_or(plan.protocol.seed);
    let results_err = |e: results::ResultsError| Failure::Exit(4, e.to_string());
    let dir = match &args.out {
        Some(out) if args.resume => ResultsDir::open(out).map_err(|e| Failure::Usage(e.to_string()))?,
        Some(out) => ResultsDir::create(out).map_err(|e| Failure::Usage(e.to_string()))?,
        None => {
            let name = format!("{}-{}", results::utc(results::now_secs()).replace(':', ""), &plan.hash[..12]);
            ResultsDir::create(&Path::new("results").join(&plan.study).join(name)).map_err(results_err)?
        }
    };
    if !args.resume {
        results::write_file(&dir.root().join("plan.yaml"), plan.source.as_bytes(), false).map_err(results_err)?;
    }
    let mut testbed: Box<dyn Testbed> = match &inventory {
        None => {
            let model = match &args.sim_model {
                Some(p) => {
                    let mut diags = Vec::new();
                    plan::load_file(p, &mut diags, model::decode).ok_or(Failure::Invalid(diags))?
                }
                None => model::SimModel::default(),
            };
            Box::new(SimTestbed::new(&plan, model, args.realtime).with_seed(seed))
        }
        Some(inv) => {
            let testbed_err = |e| Failure::Exit(3, format!("{e}\nresults so far: {}", dir.root().display()));
            let tb = SshTestbed::connect(inv, dir.root(), &plan.hash).map_err(testbed_err)?;
            if let Err(e) = tb.stage(&plan, dir.root()) {
                let mut tb = tb;
                tb.cleanup();
                return Err(testbed_err(e));
            }
            Box::new(tb)
        }
    };
    engine::provenance::write_start(&dir, &plan, &schedule, testbed.as_ref(), seed).map_err(results_err)?;

    let cancel = Cancel::new();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // A second signal while stopping exits at once.
        let _ = signal_hook::flag::register_conditional_shutdown(sig, 130, cancel.flag());
        let _ = signal_hook::flag::register(sig, cancel.flag());
    }
    let mut observers: Vec<Box<dyn events::Observer>> =
        vec![Box::new(events::Progress::new()), Box::new(events::Log::open(&dir.root().join("orchestrate.log")))];
    let outcome = engine::run_study(
        &engine::Study { plan: &plan, inventory: inventory.as_ref(), schedule: &schedule },
        testbed.as_mut(),
        &dir,
        &Options { resume: args.resume, seed },
        &cancel,
        &mut observers,
    );
    let outcome = match outcome {
        Ok(o) => o,
        Err(EngineError::Results(e)) => return Err(results_err(e)),
        Err(EngineError::Resume(msg)) => return Err(Failure::Usage(msg)),
        Err(e @ EngineError::Testbed { .. }) => {
            return Err(Failure::Exit(3, format!("{e}\nresults so far: {}", dir.root().display())));
        }
    };
    if outcome.interrupted {
        eprintln!(
            "interrupted; continue with: orchestrate run {} --out {} --resume",
            args.plan.display(),
            dir.root().display()
        );
        println!("{}", dir.root().display());
        return Err(Failure::Exit(130, String::new()));
    }
    engine::provenance::write_end(&dir, testbed.as_ref()).map_err(results_err)?;
    if outcome.complete > 0 {
        analyze(dir.root())?;
        report(dir.root(), &[])?;
    }
    eprintln!(
        "{} runs stored ({} kept from before), {} failed",
        outcome.complete,
        outcome.skipped,
        outcome.failed.len()
    );
    for f in &outcome.failed {
        eprintln!("failed: {f}");
    }
    println!("{}", dir.root().display());
    if outcome.failed.is_empty() { Ok(()) } else { Err(Failure::Exit(1, String::new())) }
}

fn open_results(dir: &Path) -> Result<orchestrator::results::ResultsDir, Failure> {
    orchestrator::results::ResultsDir::open(dir).map_err(|e| Failure::Usage(e.to_string()))
}

fn analyze(dir: &Path) -> Result<orchestrator::analysis::summary::Summary, Failure> {
    let rd = open_results(dir)?;
    let summary = orchestrator::analysis::analyze_and_write(&rd).map_err(|e| match e {
        orchestrator::analysis::AnalysisError::Results(e) => Failure::Exit(4, e.to_string()),
        e => Failure::Exit(4, e.to_string()),
    })?;
    eprintln!("analysis: {}", rd.root().join("summary.json").display());
    for (name, p) in &summary.programs {
        let q = |k: &str| p.latency_ns.get(k).copied().unwrap_or(f64::NAN);
        let modes = if p.modes.len() > 1 { format!(" ({} modes)", p.modes.len()) } else { String::new() };
        eprintln!(
            "  {name:<16} median {:>6.1} ns [{:.1}, {:.1}]  p5 {:>6.1}  p99 {:>6.1}{modes}",
            q("p50"),
            p.median_ci95_ns[0],
            p.median_ci95_ns[1],
            q("p5"),
            q("p99")
        );
    }
    Ok(summary)
}

/// The summary of a results folder, analysing it first when it has none.
fn load_summary(dir: &Path) -> Result<orchestrator::analysis::summary::Summary, Failure> {
    let path = dir.join("summary.json");
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| Failure::Exit(4, format!("{}: {e}", path.display()))),
        Err(_) => analyze(dir),
    }
}

fn report(dir: &Path, formats: &[String]) -> Result<(), Failure> {
    use orchestrator::plan::ReportFormat;
    let summary = load_summary(dir)?;
    let prov: serde_json::Value = std::fs::read(dir.join("provenance.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let spec: orchestrator::plan::ReportSpec = serde_json::from_value(prov["report"].clone()).unwrap_or_default();
    let formats: Vec<ReportFormat> = if formats.is_empty() {
        spec.formats.clone()
    } else {
        formats
            .iter()
            .map(|f| match f.as_str() {
                "html" => Ok(ReportFormat::Html),
                "md" | "markdown" => Ok(ReportFormat::Markdown),
                other => Err(Failure::Usage(format!("unknown report format `{other}` (html, md)"))),
            })
            .collect::<Result<_, _>>()?
    };
    let written = orchestrator::report::render(&summary, &formats, spec.template.as_deref(), dir)
        .map_err(|e| Failure::Exit(4, e.to_string()))?;
    for w in written {
        eprintln!("report: {}", w.display());
    }
    Ok(())
}

fn compare(baseline: &Path, candidate: &Path, junit: Option<&Path>, flags: [Option<f64>; 3]) -> Result<(), Failure> {
    use orchestrator::compare::{self, Thresholds};
    let b = load_summary(baseline)?;
    let c = load_summary(candidate)?;
    let prov: serde_json::Value = std::fs::read(candidate.join("provenance.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let plan_t = &prov["regression"];
    let pick = |flag: Option<f64>, key: &str, default: f64| flag.or(plan_t[key].as_f64()).unwrap_or(default);
    let t = Thresholds {
        median_shift_ns: pick(flags[0], "median_shift_ns", 3.0),
        p99_shift_ns: pick(flags[1], "p99_shift_ns", 10.0),
        ks_distance: pick(flags[2], "ks_distance", 0.1),
    };
    let cmp = compare::compare(&b, &c, t);
    print!("{}", compare::markdown(&cmp));
    if let Some(path) = junit {
        orchestrator::results::write_file(path, compare::junit(&cmp).as_bytes(), true)
            .map_err(|e| Failure::Exit(4, e.to_string()))?;
    }
    if cmp.regressed() { Err(Failure::Exit(1, String::new())) } else { Ok(()) }
}

fn import(src: &Path, out: &Path, probes: u64) -> Result<(), Failure> {
    let report =
        orchestrator::import::import_latencylab(src, out, probes).map_err(|e| Failure::Usage(e.to_string()))?;
    let text = serde_json::to_string_pretty(&report).unwrap_or_default();
    eprintln!("{text}");
    analyze(out)?;
    report_all(out)?;
    println!("{}", out.display());
    Ok(())
}

fn report_all(dir: &Path) -> Result<(), Failure> {
    report(dir, &[])
}

fn probe_format(name: &str) -> Result<plan::ProbeFormat, Failure> {
    match name {
        "latencylab" => Ok(plan::ProbeFormat::Latencylab),
        "compact" => Ok(plan::ProbeFormat::Compact),
        other => Err(Failure::Usage(format!("unknown probe id format `{other}` (latencylab, compact)"))),
    }
}

fn trace(op: TraceOp) -> Result<(), Failure> {
    use orchestrator::trace;
    let failed = |e: trace::TraceError| Failure::Exit(4, e.to_string());
    match op {
        TraceOp::Generate { template, count, probe_id, out } => {
            let t = trace::template_by_name(&template).ok_or_else(|| {
                Failure::Usage(format!("unknown template `{template}` (forward, five_tuple, remove_header, checksum)"))
            })?;
            let info = trace::generate(t, count, probe_format(&probe_id)?, &out).map_err(failed)?;
            println!("{}", serde_json::to_string(&info).unwrap_or_default());
            Ok(())
        }
        TraceOp::Plan { plan: path, out } => {
            let (plan, _) = plan::load(&path, Some("sim")).map_err(|e| Failure::Invalid(e.0))?;
            for t in &plan.traces {
                if let plan::TraceSource::Generate { template, count, probe_id } = t.source {
                    let info = trace::generate(template, count, probe_id, &out.join(t.file_name())).map_err(failed)?;
                    println!("{}", serde_json::to_string(&info).unwrap_or_default());
                }
            }
            Ok(())
        }
        TraceOp::Inspect { file, probe_id } => {
            let report = trace::inspect(&file, probe_format(&probe_id)?).map_err(failed)?;
            println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
            let problems = report.problems();
            for p in &problems {
                eprintln!("{}: {p}", file.display());
            }
            if problems.is_empty() { Ok(()) } else { Err(Failure::Exit(1, String::new())) }
        }
    }
}

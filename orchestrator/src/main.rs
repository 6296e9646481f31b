//! `orchestrate`: command-line entry point. Argument parsing and exit codes only.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use orchestrator::exit::ExitStatus;
use orchestrator::plan::{self, yaml::Diagnostic};
use orchestrator::schedule::{self, Schedule};

/// Declarative orchestrator for FPGA SmartNIC latency studies.
#[derive(Parser)]
#[command(name = "orchestrate", version, after_help = ExitStatus::help())]
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
    /// Progress as text on stderr (bars on a terminal, lines otherwise), or `json`: the journal's
    /// events as JSON lines on stdout, bars off, and a last line naming the results.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// No progress on stderr: warnings and errors only.
    #[arg(long)]
    quiet: bool,
}

/// How `run` shows its progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    /// Bars and lines on stderr.
    Text,
    /// JSON lines on stdout.
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Run a study (`orchestrate PLAN` is the same).
    Run(RunArgs),
    /// Check plans (and everything they reference), inventories and bitstream manifests, each
    /// told apart by its keys; report every problem at once.
    Validate {
        /// Plan, inventory or bitstream manifest files.
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
        /// Formats, comma-separated (default: the plan's).
        #[arg(long, value_delimiter = ',', value_enum)]
        format: Vec<orchestrator::plan::ReportFormat>,
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
        #[arg(long, value_parser = non_negative)]
        median_shift_ns: Option<f64>,
        /// Largest accepted p99 shift, ns (default: the candidate plan's, else 10).
        #[arg(long, value_parser = non_negative)]
        p99_shift_ns: Option<f64>,
        /// Largest accepted Kolmogorov–Smirnov distance (default: the candidate plan's, else 0.1).
        #[arg(long, value_parser = non_negative)]
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
    /// Write a results folder in another tool's layout (exit 1 when a run could not be used).
    Export {
        /// Results folder.
        dir: PathBuf,
        /// Layout: latencylab-csv (`data/tsc/{programs,null}/<TAG>_s<n>/f_run<NN>.csv`).
        #[arg(long, value_enum)]
        format: orchestrator::export::Format,
        /// Folder to write into (existing files are never overwritten).
        #[arg(long)]
        out: PathBuf,
    },
    /// Probe traces: generate pcaps, or inspect and verify one.
    Trace {
        #[command(subcommand)]
        op: TraceOp,
    },
    /// Shell completions on stdout (`make install` installs them for bash, zsh and fish).
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Manual pages: orchestrate(1) and one per subcommand (orchestrate-run(1), …), written
    /// into a folder (`make install` installs them).
    Man {
        /// Folder for the pages (created if missing).
        #[arg(long)]
        out: PathBuf,
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
        /// Number of probes (ids 1..=N), at least 1.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(orchestrator::trace::MAX_PROBES)))]
        count: u32,
        /// Probe id format: latencylab (ASCII marker) or compact (binary).
        #[arg(long, value_enum, default_value_t = plan::ProbeFormat::Latencylab)]
        probe_id: plan::ProbeFormat,
        /// Bytes of every frame without FCS, a VLAN tag included (default 128, 132 tagged).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(orchestrator::trace::MAX_FRAME_LEN)))]
        frame_size: Option<u32>,
        /// VLAN id every frame is tagged with, or `none` (default: the template's tagging, VLAN
        /// 100 for remove_header, none for the others).
        #[arg(long, value_parser = parse_vlan)]
        vlan: Option<Vlan>,
        /// Output pcap (must not exist).
        #[arg(long)]
        out: PathBuf,
    },
    /// Generate every generated trace of a plan, and the stand-in of every absent pcap, into a
    /// folder (`<trace>.pcap`).
    Plan {
        /// Plan file.
        plan: PathBuf,
        /// Output folder.
        #[arg(long)]
        out: PathBuf,
    },
    /// Count and check the probes of a pcap (exit 1 when it has problems, 2 when it is no
    /// readable pcap).
    Inspect {
        /// The pcap.
        file: PathBuf,
        /// Probe id format.
        #[arg(long, value_enum, default_value_t = plan::ProbeFormat::Latencylab)]
        probe_id: plan::ProbeFormat,
    },
}

/// `--vlan`: an id (1..=4094) or `none`.
#[derive(Clone, Copy, Debug)]
struct Vlan(Option<u16>);

fn parse_vlan(s: &str) -> Result<Vlan, String> {
    match s {
        "none" => Ok(Vlan(None)),
        _ => match s.parse::<u16>() {
            Ok(v @ 1..=4094) => Ok(Vlan(Some(v))),
            _ => Err(format!("`{s}` is no VLAN id (1..=4094) nor `none`")),
        },
    }
}

enum Failure {
    Invalid(Vec<Diagnostic>),
    Usage(String),
    Exit(ExitStatus, String),
}

/// A threshold: a finite number ≥ 0 (NaN would silently disable a check).
fn non_negative(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        Ok(_) => Err(format!("`{text}` must be a finite number ≥ 0")),
        Err(e) => Err(format!("`{text}`: {e}")),
    }
}

/// One JSON line.
fn json_line(v: &impl serde::Serialize) -> Result<String, Failure> {
    serde_json::to_string(v).map(|s| s + "\n").map_err(|e| Failure::Exit(ExitStatus::Results, e.to_string()))
}

/// Write to stdout; a reader that went away (`| head`) ends the output quietly.
fn print_out(text: &str) -> Result<(), Failure> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure::Exit(ExitStatus::Results, format!("standard output: {e}"))),
    }
}

impl From<orchestrator::results::ResultsError> for Failure {
    fn from(e: orchestrator::results::ResultsError) -> Failure {
        Failure::Exit((&e).into(), e.to_string())
    }
}

impl From<orchestrator::analysis::AnalysisError> for Failure {
    fn from(e: orchestrator::analysis::AnalysisError) -> Failure {
        Failure::Exit((&e).into(), e.to_string())
    }
}

/// `orchestrate PLAN ...` is `orchestrate run PLAN ...`.
fn args() -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = <Cli as clap::CommandFactory>::command();
    let known = |name: &str| name == "help" || cli.get_subcommands().any(|c| c.get_name() == name);
    if let Some(first) = args.get(1).and_then(|a| a.to_str())
        && !first.starts_with('-')
        && !known(first)
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
        Command::Analyze { dir } => analyze(&dir),
        Command::Report { dir, format } => report(&dir, &format),
        Command::Compare { baseline, candidate, junit, median_shift_ns, p99_shift_ns, ks } => {
            compare(&baseline, &candidate, junit.as_deref(), [median_shift_ns, p99_shift_ns, ks])
        }
        Command::Import { src, out, probes, .. } => import(&src, &out, probes),
        Command::Trace { op } => trace(op),
        Command::Export { dir, format: orchestrator::export::Format::LatencylabCsv, out } => export(&dir, &out),
        Command::Completions { shell } => {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut <Cli as clap::CommandFactory>::command(), "orchestrate", &mut out);
            print_out(&String::from_utf8_lossy(&out))
        }
        Command::Man { out } => std::fs::create_dir_all(&out)
            .and_then(|()| clap_mangen::generate_to(<Cli as clap::CommandFactory>::command(), &out))
            .map_err(|e| Failure::Exit(ExitStatus::Results, format!("{}: {e}", out.display()))),
    };
    let status = match result {
        Ok(()) => ExitStatus::Success,
        Err(Failure::Exit(status, msg)) => {
            if !msg.is_empty() {
                eprintln!("error: {msg}");
            }
            status
        }
        Err(Failure::Invalid(diags)) => {
            print_diagnostics(&diags);
            ExitStatus::Invalid
        }
        Err(Failure::Usage(msg)) => {
            eprintln!("error: {msg}");
            ExitStatus::Invalid
        }
    };
    ExitCode::from(status.code())
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
        match plan::load_any(p) {
            Ok(doc) => {
                eprintln!("{}: ok ({})", p.display(), doc.summary());
                if let plan::Document::Plan(plan, Some(inv)) = &doc {
                    for d in plan::stand_ins_refused(plan, inv) {
                        eprintln!("warning: {d}; `run` refuses without it");
                    }
                }
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
        let text = serde_json::to_string_pretty(&s).map_err(|e| Failure::Exit(ExitStatus::Results, e.to_string()))?;
        print_out(&(text + "\n"))
    } else {
        print_out(&orchestrator::schedule::describe(&s))
    }
}

/// A word for a shell command line (quoted when it needs to be).
fn shell_word(w: &str) -> String {
    if !w.is_empty() && w.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@+".contains(&b)) {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

/// This process's command line, for the lock's holder message.
fn command_line() -> String {
    std::env::args().map(|a| shell_word(&a)).collect::<Vec<_>>().join(" ")
}

fn run(args: &RunArgs) -> Result<(), Failure> {
    use orchestrator::engine::{self, Options, StartedWith, events};
    use orchestrator::results::{self, ResultsDir, journal, provenance::TOOL_VERSION};
    use orchestrator::testbed::{Cancel, Testbed, model, sim::SimTestbed, ssh::SshTestbed};

    let (plan, inventory) = plan::load(&args.plan, args.testbed.as_deref()).map_err(|e| Failure::Invalid(e.0))?;
    // Traces a real testbed cannot replay stop the study before anything is written (on resume,
    // once it is known that the folder's study is this one).
    let refused = inventory.as_ref().map(|inv| plan::stand_ins_refused(&plan, inv)).unwrap_or_default();
    if !refused.is_empty() && !args.resume {
        return Err(Failure::Invalid(refused));
    }
    let schedule = schedule::expand(&plan, inventory.as_ref()).map_err(Failure::Usage)?;
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
    let started = StartedWith {
        plan_hash: plan.hash.clone(),
        seed,
        testbed: inventory.as_ref().map_or_else(|| "sim".to_string(), |i| i.name.clone()),
        testbed_arg: args.testbed.clone(),
        sim_model: args.sim_model.as_ref().map(|p| p.display().to_string()),
        tool_version: TOOL_VERSION.into(),
    };
    // Every check before a byte is written: the folder, its lock and, on resume, the study in it.
    let dir = match &args.out {
        Some(out) if args.resume => ResultsDir::open(out)?,
        Some(out) => ResultsDir::create(out, true)?,
        None => {
            let name = format!("{}-{}", results::utc(results::now_secs()).replace(':', ""), &plan.hash[..12]);
            ResultsDir::create(&Path::new("results").join(&plan.study).join(name), true)?
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
    let mut testbed: Box<dyn Testbed> = match (&inventory, model) {
        (None, Some(model)) => Box::new(SimTestbed::new(&plan, model, args.realtime).with_seed(seed)),
        (Some(inv), _) => {
            let testbed_err =
                |e| Failure::Exit(ExitStatus::Testbed, format!("{e}\nresults so far: {}", dir.root().display()));
            let tb = SshTestbed::connect(inv, dir.root(), &plan.hash).map_err(testbed_err)?;
            if let Err(e) = tb.stage(&plan, dir.root()) {
                let mut tb = tb;
                tb.cleanup();
                return Err(testbed_err(e));
            }
            Box::new(tb)
        }
        (None, None) => return Err(Failure::Usage("no testbed".into())),
    };
    engine::provenance::write_start(&dir, &plan, &schedule, testbed.as_ref(), seed)?;

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
    let resume_args = started.resume_args();
    let outcome = engine::run_study(
        &engine::Study { plan: &plan, inventory: inventory.as_ref(), schedule: &schedule },
        testbed.as_mut(),
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
        let mut hint = vec![
            "orchestrate".to_string(),
            "run".into(),
            args.plan.display().to_string(),
            "--out".into(),
            dir.root().display().to_string(),
            "--resume".into(),
        ];
        hint.extend(resume_args);
        eprintln!("interrupted; continue with: {}", hint.iter().map(|w| shell_word(w)).collect::<Vec<_>>().join(" "));
        print_out(&format!("{}\n", dir.root().display()))?;
        return Err(Failure::Exit(ExitStatus::Interrupted, String::new()));
    }
    engine::provenance::write_end(&dir, testbed.as_ref())?;
    let usable = if outcome.complete > 0 {
        let summary = analyze_dir(&dir)?;
        report_dir(&dir, &summary, &[])?;
        summary.health.problems.is_empty()
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
        let last = serde_json::json!({
            "results": dir.root(),
            "runs_stored": outcome.complete,
            "runs_kept": outcome.skipped,
            "runs_failed": outcome.failed,
            "usable": usable,
        });
        print_out(&format!("{last}\n"))?;
    } else {
        print_out(&format!("{}\n", dir.root().display()))?;
    }
    if outcome.failed.is_empty() && usable {
        Ok(())
    } else {
        Err(Failure::Exit(ExitStatus::ChecksFailed, String::new()))
    }
}

/// Open a results folder and take its lock.
fn open_locked(dir: &Path) -> Result<(orchestrator::results::ResultsDir, orchestrator::results::lock::Lock), Failure> {
    let rd = orchestrator::results::ResultsDir::open(dir)?;
    let lock = rd.lock(&command_line())?;
    Ok((rd, lock))
}

/// Analyse (the caller holds the lock), print the headline and every problem.
/// `run --quiet` or `--log-format json`: no progress lines on stderr.
static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A progress line on stderr, unless quiet.
fn progress(line: std::fmt::Arguments<'_>) {
    if !QUIET.load(std::sync::atomic::Ordering::Relaxed) {
        eprintln!("{line}");
    }
}

fn analyze_dir(rd: &orchestrator::results::ResultsDir) -> Result<orchestrator::analysis::summary::Summary, Failure> {
    let summary = orchestrator::analysis::analyze_and_write(rd)?;
    progress(format_args!("analysis: {}", rd.root().join("summary.json").display()));
    print_headline(&summary);
    Ok(summary)
}

fn print_headline(summary: &orchestrator::analysis::summary::Summary) {
    for (name, p) in &summary.programs {
        let q = |k: &str| p.latency_ns.get(k).copied().unwrap_or(f64::NAN);
        let modes = if p.modes.len() > 1 { format!(" ({} modes)", p.modes.len()) } else { String::new() };
        progress(format_args!(
            "  {name:<16} median {:>6.1} ns [{:.1}, {:.1}]  p5 {:>6.1}  p99 {:>6.1}{modes}",
            q("p50"),
            p.median_ci95_ns[0],
            p.median_ci95_ns[1],
            q("p5"),
            q("p99")
        ));
    }
    for problem in &summary.health.problems {
        eprintln!("problem: {problem}");
    }
}

fn export(dir: &Path, out: &Path) -> Result<(), Failure> {
    let rd = orchestrator::results::ResultsDir::open(dir)?;
    let e = orchestrator::export::latencylab_csv(&rd, out)?;
    eprintln!("exported {} runs ({} rows) to {}", e.files.len(), e.rows, out.display());
    for why in &e.skipped {
        eprintln!("problem: {why}");
    }
    print_out(&format!("{}\n", out.display()))?;
    if e.skipped.is_empty() { Ok(()) } else { Err(Failure::Exit(ExitStatus::ChecksFailed, String::new())) }
}

fn analyze(dir: &Path) -> Result<(), Failure> {
    let (rd, _lock) = open_locked(dir)?;
    let summary = analyze_dir(&rd)?;
    if summary.health.problems.is_empty() {
        Ok(())
    } else {
        Err(Failure::Exit(ExitStatus::ChecksFailed, String::new()))
    }
}

/// The current summary of a folder (recomputed when its inputs changed), under its lock.
fn load_summary(dir: &Path) -> Result<orchestrator::analysis::summary::Summary, Failure> {
    let (rd, _lock) = open_locked(dir)?;
    Ok(orchestrator::analysis::current_summary(&rd)?)
}

/// Write the reports of an analysed folder (the caller holds the lock).
fn report_dir(
    rd: &orchestrator::results::ResultsDir,
    summary: &orchestrator::analysis::summary::Summary,
    formats: &[orchestrator::plan::ReportFormat],
) -> Result<(), Failure> {
    let spec = summary.provenance.as_ref().map(|p| p.report.clone()).unwrap_or_default();
    let formats = if formats.is_empty() { &spec.formats[..] } else { formats };
    let written = orchestrator::report::render(summary, formats, spec.template.as_deref(), rd.root())
        .map_err(|e| Failure::Exit(ExitStatus::Results, e.to_string()))?;
    for w in written {
        progress(format_args!("report: {}", w.display()));
    }
    Ok(())
}

fn report(dir: &Path, formats: &[orchestrator::plan::ReportFormat]) -> Result<(), Failure> {
    let (rd, _lock) = open_locked(dir)?;
    let summary = orchestrator::analysis::current_summary(&rd)?;
    report_dir(&rd, &summary, formats)
}

fn compare(baseline: &Path, candidate: &Path, junit: Option<&Path>, flags: [Option<f64>; 3]) -> Result<(), Failure> {
    use orchestrator::compare::{self, Thresholds};
    let b = load_summary(baseline)?;
    let c = load_summary(candidate)?;
    let t = Thresholds::resolve(flags, c.provenance.as_ref().and_then(|p| p.regression.as_ref()));
    let cmp = compare::compare(&b, &c, t);
    print_out(&compare::markdown(&cmp))?;
    if let Some(path) = junit {
        let xml = compare::junit(&cmp).map_err(|e| Failure::Exit(ExitStatus::Results, e.to_string()))?;
        orchestrator::results::write_file(path, xml.as_bytes(), true)?;
    }
    if cmp.regressed() { Err(Failure::Exit(ExitStatus::ChecksFailed, String::new())) } else { Ok(()) }
}

fn import(src: &Path, dest: &Path, probes: u64) -> Result<(), Failure> {
    let report = orchestrator::import::import_latencylab(src, dest, probes)
        .map_err(|e| Failure::Exit((&e).into(), e.to_string()))?;
    eprint!("{report}");
    let (rd, _lock) = open_locked(dest)?;
    let summary = analyze_dir(&rd)?;
    report_dir(&rd, &summary, &[])?;
    print_out(&format!("{}\n", dest.display()))?;
    if summary.health.problems.is_empty() {
        Ok(())
    } else {
        Err(Failure::Exit(ExitStatus::ChecksFailed, String::new()))
    }
}

fn trace(op: TraceOp) -> Result<(), Failure> {
    use orchestrator::trace;
    let failed = |e: trace::TraceError| Failure::Exit(ExitStatus::Results, e.to_string());
    match op {
        TraceOp::Generate { template, count, probe_id, frame_size, vlan, out } => {
            let t = trace::template_by_name(&template).ok_or_else(|| {
                Failure::Usage(format!("unknown template `{template}` (forward, five_tuple, remove_header, checksum)"))
            })?;
            let mut spec = plan::Generated::new(t, count, probe_id);
            if let Some(Vlan(v)) = vlan {
                spec = plan::Generated { vlan: v, frame_len: trace::default_frame_len(v.is_some()), ..spec };
            }
            if let Some(f) = frame_size {
                let shortest = trace::shortest_frame(spec.vlan.is_some(), probe_id, count);
                if (f as usize) < shortest {
                    return Err(Failure::Usage(format!(
                        "--frame-size {f}: a frame must hold the headers and the probe ids, at least {shortest} B"
                    )));
                }
                spec.frame_len = f;
            }
            let info = trace::generate(&spec, &out).map_err(|e| match e {
                trace::TraceError::NoProbes { .. } => Failure::Usage(e.to_string()),
                e => failed(e),
            })?;
            print_out(&json_line(&info)?)?;
            Ok(())
        }
        TraceOp::Plan { plan: path, out } => {
            let (plan, _) = plan::load(&path, Some("sim")).map_err(|e| Failure::Invalid(e.0))?;
            for t in &plan.traces {
                if let Some(spec) = t.source.generated() {
                    let info = trace::generate(spec, &out.join(t.file_name())).map_err(failed)?;
                    print_out(&json_line(&info)?)?;
                }
            }
            Ok(())
        }
        TraceOp::Inspect { file, probe_id } => {
            // A file that is no readable pcap is invalid input.
            let report = trace::inspect(&file, probe_id).map_err(|e| Failure::Usage(e.to_string()))?;
            let text =
                serde_json::to_string_pretty(&report).map_err(|e| Failure::Exit(ExitStatus::Results, e.to_string()))?;
            print_out(&(text + "\n"))?;
            let problems = report.problems();
            for p in &problems {
                eprintln!("{}: {p}", file.display());
            }
            if problems.is_empty() { Ok(()) } else { Err(Failure::Exit(ExitStatus::ChecksFailed, String::new())) }
        }
    }
}

//! `orchestrate`: command-line entry point. Argument parsing and exit codes only.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;

use latency_plan as plan;
use latency_plan::schema;
use latency_plan::yaml::Diagnostic;
use orchestrator::exit::ExitStatus;

mod bisect;
mod cli;
mod design;
mod history;
mod measured;
mod run;
mod slices;
mod status;
mod verify;

use cli::{Cli, Command, TraceOp, Vlan};

enum Failure {
    Invalid(Vec<Diagnostic>),
    Usage(String),
    Exit(ExitStatus, String),
}

/// One JSON line.
fn json_line(v: &impl serde::Serialize) -> Result<String, Failure> {
    serde_json::to_string(v).map(|s| s + "\n").map_err(|e| Failure::Exit(ExitStatus::Results, e.to_string()))
}

/// Write to stdout; a reader that went away (`| head`) ends the output quietly.
pub(crate) fn print_out(text: &str) -> Result<(), Failure> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure::Exit(ExitStatus::Results, format!("standard output: {e}"))),
    }
}

impl From<latency_results::ResultsError> for Failure {
    fn from(e: latency_results::ResultsError) -> Failure {
        Failure::Exit((&e).into(), e.to_string())
    }
}

impl From<latency_analysis::AnalysisError> for Failure {
    fn from(e: latency_analysis::AnalysisError) -> Failure {
        Failure::Exit((&e).into(), e.to_string())
    }
}

/// The command line, with `orchestrate PLAN ...` read as `orchestrate run PLAN ...`: a first
/// argument that is no command is a plan file, unless no such file exists and it is close to a
/// command's name (a mistyped command, refused with the name meant).
fn args() -> Result<Vec<std::ffi::OsString>, Failure> {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = <Cli as clap::CommandFactory>::command();
    let names: Vec<&str> = cli.get_subcommands().map(clap::Command::get_name).chain(["help"]).collect();
    if let Some(first) = args.get(1)
        && !first.as_encoded_bytes().starts_with(b"-")
        && !first.to_str().is_some_and(|f| names.contains(&f))
    {
        if let Some(word) = first.to_str()
            && !Path::new(first).exists()
            && let Some(meant) = latency_plan::yaml::closest(word, &names)
                .or_else(|| names.iter().copied().find(|name| swapped_once(word, name)))
        {
            return Err(Failure::Usage(format!("unknown command `{word}`; did you mean `{meant}`?")));
        }
        args.insert(1, "run".into());
    }
    Ok(args)
}

/// Whether `typed` is `name` with two neighbouring letters swapped (`plna` for `plan`).
fn swapped_once(typed: &str, name: &str) -> bool {
    let (t, n): (Vec<char>, Vec<char>) = (typed.chars().collect(), name.chars().collect());
    let differ: Vec<usize> = (0..t.len()).filter(|&i| t.len() == n.len() && t[i] != n[i]).collect();
    matches!(differ[..], [i, j] if j == i + 1 && t[i] == n[j] && t[j] == n[i])
}

fn main() -> ExitCode {
    let result = args().and_then(|args| dispatch(Cli::parse_from(args)));
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

/// Run the command parsed.
fn dispatch(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::Run(args) => run::run(&args),
        Command::Validate { plans } => validate(&plans),
        Command::Plan { plan, testbed, json, costs_from } => show_plan(&plan, testbed.as_deref(), json, &costs_from),
        Command::Analyze { dir } => analyze(&dir),
        Command::Report { dir, format } => report(&dir, &format),
        Command::Status { dir, plan, json } => status::status(&dir, plan.as_deref(), json),
        Command::Design {
            plan,
            from,
            ci95_ns,
            as_precise_as_plan,
            budget,
            testbed,
            out,
            costs_from,
            pacing_from,
            pacing_within,
        } => {
            let goal = latency_analysis::design::Goal { half_width_ns: ci95_ns, budget_s: budget, precise_as: None };
            let inputs = design::Inputs {
                testbed: testbed.as_deref(),
                out: out.as_deref(),
                costs_from: &costs_from,
                pacing_from: pacing_from.as_deref(),
                pacing_within,
                as_precise_as_plan,
            };
            design::design(&plan, &from, goal, inputs)
        }
        Command::Compare { baseline, candidate, junit, html, median_shift_ns, p99_shift_ns, ks } => {
            compare(&baseline, &candidate, junit.as_deref(), html.as_deref(), [median_shift_ns, p99_shift_ns, ks])
        }
        Command::Import { src, out, probes, .. } => import(&src, &out, probes),
        Command::History { op } => history::history(op),
        Command::Trend { store, plan, html, junit, json } => {
            let markdown = if json { history::Listing::Json } else { history::Listing::Markdown(None) };
            let plan = match &plan {
                Some(p) => Some(slices::load(p, None)?.0),
                None => None,
            };
            history::trend(
                &store,
                latency_history::trend::Gates::of_plan(plan.as_ref()),
                markdown,
                html.as_deref(),
                junit.as_deref(),
            )
        }
        Command::Nightly { run, store } => history::nightly(&run, &store),
        Command::Bisect { run, builds } => bisect::bisect(&run, &builds),
        Command::Verify { dir } => verify::verify(&dir),
        Command::Trace { op } => trace(op),
        Command::Export { dir, format: orchestrator::export::Format::LatencylabCsv, out } => export(&dir, &out),
        Command::Export { dir, format: orchestrator::export::Format::RoCrate, out } => export_crate(&dir, &out),
        Command::Completions { shell } => {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut <Cli as clap::CommandFactory>::command(), "orchestrate", &mut out);
            print_out(&String::from_utf8_lossy(&out))
        }
        Command::Schema { kind: Some(kind), .. } => print_out(&schema::text(kind)),
        Command::Schema { kind: None, out } => write_schemas(&out.unwrap_or_default()),
        Command::Man { out } => std::fs::create_dir_all(&out)
            .and_then(|()| clap_mangen::generate_to(<Cli as clap::CommandFactory>::command(), &out))
            .map_err(|e| Failure::Exit(ExitStatus::Results, format!("{}: {e}", out.display()))),
    }
}

/// Every schema into `dir`.
fn write_schemas(dir: &Path) -> Result<(), Failure> {
    let fail = |e: std::io::Error| Failure::Exit(ExitStatus::Results, format!("{}: {e}", dir.display()));
    std::fs::create_dir_all(dir).map_err(fail)?;
    for kind in schema::DocKind::ALL {
        std::fs::write(dir.join(kind.file_name()), schema::text(kind)).map_err(fail)?;
    }
    Ok(())
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
                // A plan is valid when its schedule can be made: what `plan` and `run` refuse
                // (a trace's timing), `validate` refuses.
                if let plan::Document::Plan(plan, inv) = &doc
                    && let Err(e) = latency_schedule::expand(plan, inv.as_deref())
                {
                    all.push(e.diagnostic());
                    continue;
                }
                eprintln!("{}: ok ({})", p.display(), doc.summary());
                if let plan::Document::Plan(plan, Some(inv)) = &doc {
                    for d in plan::refused_on(plan, inv) {
                        eprintln!("warning: {d}; `run` refuses without it");
                    }
                }
            }
            Err(plan::Invalid(mut d)) => all.append(&mut d),
        }
    }
    if all.is_empty() { Ok(()) } else { Err(Failure::Invalid(all)) }
}

fn show_plan(path: &Path, testbed: Option<&str>, json: bool, costs_from: &[PathBuf]) -> Result<(), Failure> {
    let s = slices::load_schedule(path, testbed, costs_from)?;
    if json {
        let text = serde_json::to_string_pretty(&s).map_err(|e| Failure::Exit(ExitStatus::Results, e.to_string()))?;
        print_out(&(text + "\n"))
    } else {
        print_out(&latency_schedule::describe(&s))
    }
}

/// Open a results folder and take its lock.
fn open_locked(dir: &Path) -> Result<(latency_results::ResultsDir, latency_results::lock::Lock), Failure> {
    let rd = latency_results::ResultsDir::open(dir)?;
    let lock = rd.lock(&run::command_line())?;
    Ok((rd, lock))
}

/// `run --quiet` or `--log-format json`: no progress lines on stderr.
static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A progress line on stderr, unless quiet.
fn progress(line: std::fmt::Arguments<'_>) {
    if !QUIET.load(std::sync::atomic::Ordering::Relaxed) {
        eprintln!("{line}");
    }
}

/// Analyse (the caller holds the lock), print the headline and every problem.
fn analyze_dir(rd: &latency_results::ResultsDir) -> Result<latency_analysis::Analysed, Failure> {
    let analysed = latency_analysis::analyze_and_write(rd)?;
    progress(format_args!("analysis: {}", rd.root().join("summary.json").display()));
    print_headline(&analysed.summary);
    Ok(analysed)
}

fn print_headline(summary: &latency_results::summary::Summary) {
    for (name, p) in &summary.programs {
        let q = |level: f64| p.latency_ns.at(level).unwrap_or(f64::NAN);
        let modes = if p.modes.len() > 1 { format!(" ({} modes)", p.modes.len()) } else { String::new() };
        progress(format_args!(
            "  {name:<16} median {:>6.1} ns [{:.1}, {:.1}]  p5 {:>6.1}  p99 {:>6.1}{modes}",
            q(50.0),
            p.median_ci95_ns[0],
            p.median_ci95_ns[1],
            q(5.0),
            q(99.0)
        ));
    }
    for problem in &summary.health.problems {
        eprintln!("problem: {problem}");
    }
}

/// `export --format ro-crate`: the folder as one crate zip, saying what was left out.
fn export_crate(dir: &Path, out: &Path) -> Result<(), Failure> {
    use orchestrator::crate_zip::{self, CrateZipError};
    let (_rd, _lock) = open_locked(dir)?;
    let z = crate_zip::export(dir, out).map_err(|e| match e {
        CrateZipError::Exists(_) | CrateZipError::TooLarge(_) => Failure::Usage(e.to_string()),
        e => Failure::Exit(ExitStatus::Results, e.to_string()),
    })?;
    for (file, why) in &z.left_out {
        eprintln!("left out: {file}: {why}");
    }
    progress(format_args!(
        "export: {} ({} files, {} bytes; the folder's lock, hidden files and the runs' reductions left out)",
        z.out.display(),
        z.files,
        z.bytes
    ));
    print_out(&format!("{}\n", z.out.display()))
}

fn export(dir: &Path, out: &Path) -> Result<(), Failure> {
    let rd = latency_results::ResultsDir::open(dir)?;
    let e = orchestrator::export::latencylab_csv(&rd, out).map_err(|e| match e {
        orchestrator::export::ExportError::Analysis(e) => e.into(),
        e if e.refused() => Failure::Usage(e.to_string()),
        e => Failure::Exit(ExitStatus::Results, e.to_string()),
    })?;
    eprintln!("exported {} runs ({} rows) to {}", e.files.len(), e.rows, out.display());
    for why in &e.skipped {
        eprintln!("problem: {why}");
    }
    print_out(&format!("{}\n", out.display()))?;
    if e.skipped.is_empty() { Ok(()) } else { Err(Failure::Exit(ExitStatus::ChecksFailed, String::new())) }
}

fn analyze(dir: &Path) -> Result<(), Failure> {
    let (rd, _lock) = open_locked(dir)?;
    let analysed = analyze_dir(&rd)?;
    // The provenance and journal the analysis read, not read again.
    let read = analysed.summary.provenance.as_ref().map(|p| (p, analysed.journal.as_slice()));
    write_crate(&rd, &analysed.hashed, read)?;
    if analysed.summary.health.problems.is_empty() {
        Ok(())
    } else {
        Err(Failure::Exit(ExitStatus::ChecksFailed, String::new()))
    }
}

/// The current summary of a folder (recomputed when its inputs changed), under its lock.
pub(crate) fn load_summary(dir: &Path) -> Result<latency_results::summary::Summary, Failure> {
    let (rd, _lock) = open_locked(dir)?;
    Ok(latency_analysis::current_summary(&rd)?)
}

/// Write the reports of an analysed folder, then its crate (the caller holds the lock; `hashed`:
/// files whose sha256 the caller has just computed).
fn report_dir(
    rd: &latency_results::ResultsDir,
    summary: &latency_results::summary::Summary,
    hashed: &latency_results::rocrate::Hashed,
    formats: &[latency_plan::ReportFormat],
) -> Result<(), Failure> {
    let spec = summary.provenance.as_ref().map(|p| p.report.clone()).unwrap_or_default();
    let formats = if formats.is_empty() { &spec.formats[..] } else { formats };
    let written = latency_report::render(summary, formats, spec.template.as_deref(), rd.root())
        .map_err(|e| Failure::Exit(ExitStatus::Results, e.to_string()))?;
    for w in written {
        progress(format_args!("report: {}", w.display()));
    }
    write_crate(rd, hashed, None)
}

/// The folder's `ro-crate-metadata.json`, made again from its provenance, journal and files (those
/// in `hashed` not read again; `read`: the provenance and journal the caller has just read).
pub(crate) fn write_crate(
    rd: &latency_results::ResultsDir,
    hashed: &latency_results::rocrate::Hashed,
    read: Option<(&latency_results::provenance::Provenance, &[latency_results::event::Entry])>,
) -> Result<(), Failure> {
    match read {
        Some((prov, journal)) => latency_results::rocrate::write_of(rd.root(), prov, journal, hashed)?,
        None => latency_results::rocrate::write(rd.root(), hashed)?,
    }
    progress(format_args!("RO-Crate: {}", rd.root().join(latency_results::rocrate::FILE).display()));
    Ok(())
}

fn report(dir: &Path, formats: &[latency_plan::ReportFormat]) -> Result<(), Failure> {
    let (rd, _lock) = open_locked(dir)?;
    let summary = latency_analysis::current_summary(&rd)?;
    report_dir(&rd, &summary, &Default::default(), formats)
}

fn compare(
    baseline: &Path,
    candidate: &Path,
    junit: Option<&Path>,
    html: Option<&Path>,
    flags: [Option<f64>; 3],
) -> Result<(), Failure> {
    let Judged { cmp, baseline: b, candidate: c } = judge(baseline, candidate, flags)?;
    print_out(&latency_analysis::compare::markdown(&cmp))?;
    if let Some(path) = junit {
        latency_results::write_output(path, compare_junit(&cmp)?.as_bytes())?;
    }
    if let Some(path) = html {
        let page = latency_report::compare::html(&cmp, &b, &c)
            .map_err(|e| Failure::Exit(ExitStatus::Results, e.to_string()))?;
        latency_results::write_output(path, page.as_bytes())?;
    }
    if cmp.regressed() { Err(Failure::Exit(ExitStatus::ChecksFailed, String::new())) } else { Ok(()) }
}

/// The comparison as JUnit XML.
pub(crate) fn compare_junit(cmp: &latency_analysis::compare::Comparison) -> Result<String, Failure> {
    latency_analysis::compare::junit(cmp).map_err(|e| Failure::Exit(ExitStatus::Results, e.to_string()))
}

/// Refused (exit 2) when the study in `dir` has not ended: its runs are not all there.
pub(crate) fn check_ended(role: latency_analysis::compare::Role, dir: &Path) -> Result<(), Failure> {
    let prov = latency_results::provenance::Provenance::read(&latency_results::ResultsDir::open(dir)?)?;
    latency_analysis::compare::ended(role, Some(&prov)).map_err(|e| {
        let dir = dir.display();
        Failure::Usage(format!(
            "{dir}: {e}: finish it with `orchestrate run PLAN --out {dir} --resume`, or compare a finished study"
        ))
    })
}

/// A judgement and the two summaries it was made from.
pub(crate) struct Judged {
    pub(crate) cmp: latency_analysis::compare::Comparison,
    pub(crate) baseline: latency_results::summary::Summary,
    pub(crate) candidate: latency_results::summary::Summary,
}

/// Judge the study in `candidate` against `baseline`; refused (exit 2, nothing judged) unless both
/// have ended and are calibrated alike. Thresholds: `flags`, else the candidate plan's.
pub(crate) fn judge(baseline: &Path, candidate: &Path, flags: [Option<f64>; 3]) -> Result<Judged, Failure> {
    use latency_analysis::compare;
    use latency_analysis::compare::{Role, Thresholds};
    // Before any analysis: the runs of a study that has not ended are not all there.
    check_ended(Role::Baseline, baseline)?;
    check_ended(Role::Candidate, candidate)?;
    let b = load_summary(baseline)?;
    let c = load_summary(candidate)?;
    let t = Thresholds::resolve(flags, c.provenance.as_ref().and_then(|p| p.regression.as_ref()));
    let cmp = compare::compare(&b, &c, t)
        .map_err(|e| Failure::Usage(format!("{} against {}: {e}", candidate.display(), baseline.display())))?;
    Ok(Judged { cmp, baseline: b, candidate: c })
}

fn import(src: &Path, dest: &Path, probes: u64) -> Result<(), Failure> {
    let report = orchestrator::import::import_latencylab(src, dest, probes)
        .map_err(|e| Failure::Exit((&e).into(), e.to_string()))?;
    eprint!("{report}");
    let (rd, _lock) = open_locked(dest)?;
    let analysed = analyze_dir(&rd)?;
    report_dir(&rd, &analysed.summary, &analysed.hashed, &[])?;
    print_out(&format!("{}\n", dest.display()))?;
    if analysed.summary.health.problems.is_empty() {
        Ok(())
    } else {
        Err(Failure::Exit(ExitStatus::ChecksFailed, String::new()))
    }
}

fn trace(op: TraceOp) -> Result<(), Failure> {
    use latency_plan::trace;
    let failed = |e: trace::TraceError| Failure::Exit(ExitStatus::Results, e.to_string());
    match op {
        TraceOp::Generate { template, count, probe_id, frame_size, vlan, ip, transport, out } => {
            let shape = trace::Shape { vlan: vlan.map(|Vlan(v)| v), frame_len: frame_size, ip, transport };
            let spec = plan::Generated::with(template, count, probe_id, shape).map_err(|refused| {
                let flag = if matches!(refused, trace::Refused::Ipv6 { .. }) { "--ip ipv6" } else { "--frame-size" };
                Failure::Usage(format!("{flag}: {refused}"))
            })?;
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

//! `orchestrate bisect PLAN --builds FILE`: the first of an ordered list of a program's builds
//! whose latency moved. The plan, narrowed to the program, runs with the known good first build,
//! then on midpoints between the last build known good and the first known bad (the list's last,
//! as the file says), each judged against the first as `compare` judges two studies (the plan's
//! regression thresholds): at most ⌈log₂ N⌉ + 1 studies for N builds. Each step is a study of its
//! own in the bisection's folder; `--resume` keeps the steps that ended and finishes the rest.
//! `bisect.md` and `bisect.json` list the steps and name the build.

use std::path::{Path, PathBuf};

use serde::Serialize;

use latency_plan::builds::{self, Builds};
use orchestrator::exit::ExitStatus;

use crate::Failure;
use crate::cli::RunArgs;
use crate::progress;

/// One study of the bisection.
#[derive(Serialize)]
struct Step {
    /// Index of the build in the file.
    build: usize,
    /// Its version.
    version: String,
    /// Its results folder.
    results: PathBuf,
    /// Its median, ns.
    median_ns: f64,
    /// Against the first build's: median shift and its 95 % interval, ns.
    shift_ns: f64,
    shift_ci95_ns: [f64; 2],
    /// Whether `compare` judged it moved (its reasons).
    moved: Vec<String>,
}

/// What `bisect.json` holds.
#[derive(Serialize)]
struct Outcome<'a> {
    plan: &'a Path,
    builds: &'a Builds,
    /// The first build whose latency moved: its index and version.
    first_moved: usize,
    first_moved_version: &'a str,
    /// Whether that build was measured (else it is the list's last, bad as the file says).
    measured: bool,
    steps: &'a [Step],
}

pub(crate) fn bisect(args: &RunArgs, builds_file: &Path) -> Result<(), Failure> {
    let builds = builds::load(builds_file).map_err(Failure::Invalid)?;
    let (plan, _) = crate::slices::load(&args.plan, args.testbed.as_deref())?;
    if !plan.programs.iter().any(|p| p.name == builds.program) {
        return Err(Failure::Usage(format!(
            "{}: program `{}` is not in {} (it has {})",
            builds_file.display(),
            builds.program,
            args.plan.display(),
            plan.programs.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ")
        )));
    }
    let narrowed = latency_plan::subset::subset(&plan.path, &plan.source, &[&builds.program], None)
        .map_err(|e| Failure::Usage(format!("bisect: {e}")))?;
    let out = match &args.out {
        Some(o) => o.clone(),
        None => PathBuf::from("results")
            .join(format!("{}-bisect", plan.study))
            .join(latency_results::utc(latency_results::now_secs()).replace(':', "")),
    };
    if out.exists() && !args.resume && std::fs::read_dir(&out).is_ok_and(|mut d| d.next().is_some()) {
        return Err(Failure::Usage(format!(
            "{} holds a bisection already: continue it with --resume, or give another --out",
            out.display()
        )));
    }
    std::fs::create_dir_all(&out).map_err(|e| Failure::Exit(ExitStatus::Results, format!("{}: {e}", out.display())))?;
    let n = builds.builds.len();
    let mut steps: Vec<Step> = Vec::new();
    let first = study(args, &plan, &narrowed, &builds, 0, &out)?;
    steps.push(judged(&first, &first, 0, &builds)?);
    let (mut good, mut bad) = (0, n - 1);
    while bad - good > 1 {
        let mid = good + (bad - good) / 2;
        let dir = study(args, &plan, &narrowed, &builds, mid, &out)?;
        let step = judged(&first, &dir, mid, &builds)?;
        progress(format_args!(
            "bisect: build {} ({}) {} ({:+.1} ns)",
            mid + 1,
            step.version,
            if step.moved.is_empty() { "as the first" } else { "moved" },
            step.shift_ns
        ));
        if step.moved.is_empty() {
            good = mid;
        } else {
            bad = mid;
        }
        steps.push(step);
    }
    let measured = steps.iter().any(|s| s.build == bad);
    let version = &builds.builds[bad].version;
    let outcome = Outcome {
        plan: &args.plan,
        builds: &builds,
        first_moved: bad,
        first_moved_version: version,
        measured,
        steps: &steps,
    };
    let json = serde_json::to_string_pretty(&outcome).map_err(|e| Failure::Exit(ExitStatus::Results, e.to_string()))?;
    latency_results::write_file(&out.join("bisect.json"), (json + "\n").as_bytes(), true)?;
    let md = markdown(&outcome);
    latency_results::write_file(&out.join("bisect.md"), md.as_bytes(), true)?;
    crate::print_out(&md)?;
    Ok(())
}

/// The study of build `k`: its folder in `out`, reused when it ended (a resumed bisection),
/// continued when it started, run otherwise.
fn study(
    args: &RunArgs,
    plan: &latency_plan::Plan,
    narrowed: &str,
    builds: &Builds,
    k: usize,
    out: &Path,
) -> Result<PathBuf, Failure> {
    let b = &builds.builds[k];
    let safe: String = b.version.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    let dir = out.join(format!("{:02}-{safe}", k + 1));
    if crate::check_ended(latency_analysis::compare::Role::Candidate, &dir).is_ok() {
        progress(format_args!("bisect: build {} ({}) measured already: {}", k + 1, b.version, dir.display()));
        return Ok(dir);
    }
    let text = latency_plan::subset::with_bitstream(&plan.path, narrowed, &builds.program, &b.bitstream)
        .map_err(|e| Failure::Usage(format!("bisect: {e}")))?;
    let derived = crate::run::DerivedPlan::write(plan, &format!("bisect-{}", k + 1), &text)?;
    progress(format_args!("bisect: build {} of {} ({})", k + 1, builds.builds.len(), b.version));
    let step_args =
        RunArgs { plan: derived.path().to_path_buf(), out: Some(dir.clone()), resume: dir.exists(), ..args.clone() };
    let (dir, passed) = crate::run::run_plan(&step_args)?;
    if !passed {
        return Err(Failure::Exit(
            ExitStatus::Unjudged,
            format!(
                "bisect: build {} ({}): runs failed their checks ({}); nothing judged",
                k + 1,
                b.version,
                dir.display()
            ),
        ));
    }
    Ok(dir)
}

/// Build `k`'s study in `dir` judged against the first build's in `first`.
fn judged(first: &Path, dir: &Path, k: usize, builds: &Builds) -> Result<Step, Failure> {
    let crate::Judged { cmp, candidate, .. } = crate::judge(first, dir, [None; 3])?;
    let p = cmp.programs.iter().find(|p| p.program == builds.program);
    Ok(Step {
        build: k,
        version: builds.builds[k].version.clone(),
        results: dir.to_path_buf(),
        median_ns: candidate.programs.get(&builds.program).and_then(|s| s.latency_ns.median()).unwrap_or(f64::NAN),
        shift_ns: p.map_or(f64::NAN, |p| p.median_shift_ns),
        shift_ci95_ns: p.map_or([f64::NAN; 2], |p| p.median_shift_ci95_ns),
        moved: p.map(|p| p.failures.clone()).unwrap_or_default(),
    })
}

fn markdown(o: &Outcome<'_>) -> String {
    let b = &o.builds.builds[o.first_moved];
    let mut s = format!(
        "# Bisection of {} over {} builds ({})\n\nFirst build whose latency moved: **{}** (build {} of {}, {}){}.\n\n",
        o.builds.program,
        o.builds.builds.len(),
        o.builds.path.display(),
        b.version,
        o.first_moved + 1,
        o.builds.builds.len(),
        b.bitstream.display(),
        if o.measured { "" } else { ", the list's last: bad as the builds file says, not measured" }
    );
    s.push_str(&format!("{} studies, each judged against the first build's.\n\n", o.steps.len()));
    s.push_str("| step | build | version | median (ns) | shift (ns) | 95 % interval | verdict | results |\n");
    s.push_str("|---:|---:|---|---:|---:|---|---|---|\n");
    for (i, st) in o.steps.iter().enumerate() {
        let verdict = match (i, st.moved.is_empty()) {
            (0, _) => "known good".to_string(),
            (_, true) => "as the first".to_string(),
            (_, false) => format!("moved: {}", st.moved.join("; ")),
        };
        s.push_str(&format!(
            "| {} | {} | {} | {:.1} | {:+.1} | [{:+.1}, {:+.1}] | {} | {} |\n",
            i + 1,
            st.build + 1,
            st.version,
            st.median_ns,
            st.shift_ns,
            st.shift_ci95_ns[0],
            st.shift_ci95_ns[1],
            verdict,
            st.results.display()
        ));
    }
    s
}

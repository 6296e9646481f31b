//! `orchestrate design`: a plan's sessions and runs per session chosen from a dimensioning
//! study's variance components and the testbed's costs per level, written as a new plan.

use std::fmt::Write as _;
use std::path::Path;

use latency_analysis::components::Components;
use latency_analysis::design::{self, Costs, Designed, Goal};
use latency_schedule::hms;
use orchestrator::exit::ExitStatus;

use crate::Failure;
use crate::print_out;

/// Design `plan_path` from the study in `from` for `goal` on `testbed`; write the designed plan to
/// `out` when given. Exit 1 when the target is not met (the best design is still printed and
/// written).
pub(crate) fn design(
    plan_path: &Path,
    from: &Path,
    goal: Goal,
    testbed: Option<&str>,
    out: Option<&Path>,
) -> Result<(), Failure> {
    if goal == Goal::default() {
        return Err(Failure::Usage("design: give a target (--ci95-ns) or a budget (--budget), or both".into()));
    }
    let (plan, inventories) = crate::slices::load(plan_path, testbed)?;
    if let Some(out) = out {
        let folder = |p: &Path| {
            let parent = p.parent().filter(|f| !f.as_os_str().is_empty()).unwrap_or(Path::new("."));
            std::fs::canonicalize(parent).ok()
        };
        if folder(out) != folder(plan_path) {
            return Err(Failure::Usage(format!(
                "--out {}: write the designed plan beside {} (it keeps the plan's relative paths)",
                out.display(),
                plan_path.display()
            )));
        }
    }
    if plan.protocol.adaptive.is_some() {
        return Err(Failure::Usage(format!(
            "{}: the plan has adaptive sessions; design sets a fixed number (remove `sessions: {{min, max, until}}`)",
            plan_path.display()
        )));
    }
    let schedule =
        latency_schedule::expand(&plan, inventories[0].as_ref()).map_err(|e| Failure::Invalid(vec![e.diagnostic()]))?;
    let Some(c) = schedule.costs() else {
        return Err(Failure::Usage(format!("{}: the plan schedules no run", plan_path.display())));
    };
    let costs = Costs { session_s: c.session_s, run_s: c.run_s };
    let mut groups: Vec<&str> = schedule.sessions.iter().map(|s| s.program.as_str()).collect();
    groups.sort_unstable();
    groups.dedup();

    let summary = crate::load_summary(from)?;
    let mut estimates: Vec<(String, &'static str, Components)> = Vec::new();
    for p in &plan.programs {
        let Some(ps) = summary.programs.get(&p.name) else {
            return Err(Failure::Exit(
                ExitStatus::Invalid,
                format!("{}: the dimensioning study has no program `{}`", from.display(), p.name),
            ));
        };
        let Some(v) = ps.evidence.variance else {
            return Err(Failure::Exit(
                ExitStatus::Invalid,
                format!(
                    "{}: program `{}` has no variance components: a dimensioning study needs at least two \
                     sessions of two runs each ({} sessions here)",
                    from.display(),
                    p.name,
                    ps.sessions.len()
                ),
            ));
        };
        estimates.push((p.name.clone(), "p50", v.median));
        estimates.push((p.name.clone(), "p99", v.p99));
    }
    let all: Vec<Components> = estimates.iter().map(|e| e.2).collect();
    let Some(d) = design::design(&all, costs, groups.len() as u32, goal) else {
        return Err(Failure::Usage("design: nothing to design".into()));
    };
    let text = explain(&plan.study, &estimates, &d, costs, groups.len(), &schedule.predicted_seconds.total, goal);
    print_out(&text)?;
    if let Some(out) = out {
        let designed = designed_plan(plan_path, &plan.source, &d, from, &text)?;
        latency_results::write_file(out, designed.as_bytes(), false)?;
        // The designed plan must load and carry the design; else it is removed.
        let back = latency_plan::load(out, testbed).map_err(|e| Failure::Invalid(e.0));
        let carried = back.as_ref().is_ok_and(|(b, _)| (b.protocol.sessions, b.protocol.runs) == (d.sessions, d.runs));
        if !carried {
            let _ = std::fs::remove_file(out);
            back?;
            return Err(Failure::Exit(ExitStatus::Results, format!("{}: the design was not written", out.display())));
        }
        eprintln!("designed plan: {}", out.display());
    }
    if d.met {
        Ok(())
    } else {
        Err(Failure::Exit(
            ExitStatus::ChecksFailed,
            "the target cannot be met within the budget (or 1000 sessions); above is the best design".into(),
        ))
    }
}

/// The design in words: per estimate its components, shares and predicted half-width.
fn explain(
    study: &str,
    estimates: &[(String, &'static str, Components)],
    d: &Designed,
    costs: Costs,
    groups: usize,
    plan_seconds: &f64,
    goal: Goal,
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "design of {study}: {} sessions × {} runs for each of {groups} session groups, predicted {} of testbed time \
         (the plan as written: {})",
        d.sessions,
        d.runs,
        hms(d.seconds),
        hms(*plan_seconds)
    );
    let _ = writeln!(
        s,
        "costs: one session {} (bring-up), one run {}; the cheapest (sessions, runs) that meets the goal \
         (Kalibera & Jones's r for the widest estimate: {})",
        hms(costs.session_s),
        hms(costs.run_s),
        estimates
            .iter()
            .map(|e| e.2)
            .max_by(|a, b| design::half_width(a, 5, 10).total_cmp(&design::half_width(b, 5, 10)))
            .map_or(0, |c| design::runs_per_session(&c, costs))
    );
    if let Some(t) = goal.half_width_ns {
        let _ = writeln!(s, "target: every 95 % half-width ≤ {t} ns{}", if d.met { " (met)" } else { " (not met)" });
    }
    if let Some(b) = goal.budget_s {
        let _ = writeln!(s, "budget: {}", hms(b));
    }
    let _ = writeln!(s, "\n| program | statistic | T_session² | T_run² | V_probe | measured on | half-width (ns) |");
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|");
    for ((program, statistic, c), w) in estimates.iter().zip(&d.half_widths_ns) {
        let _ = writeln!(
            s,
            "| {program} | {statistic} | {:.3} | {:.3} | {:.3} | {:.0} × {:.1} × {:.0} | ±{w:.2} |",
            c.session_ns2, c.run_ns2, c.probe_ns2, c.design.sessions, c.design.runs, c.design.probes
        );
    }
    s
}

/// The plan's text with `protocol.sessions` and `protocol.runs` set to the design, its reasoning
/// as comments on top (below the editor's schema line, which stays first).
fn designed_plan(path: &Path, source: &str, d: &Designed, from: &Path, text: &str) -> Result<String, Failure> {
    let mut out = String::new();
    let (schema, source) = match source.split_once('\n') {
        Some((first, rest)) if first.starts_with("# yaml-language-server:") => (Some(first), rest),
        _ => (None, source),
    };
    if let Some(line) = schema {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(
        out,
        "# Designed by `orchestrate design` from {} and the study in {}:",
        path.display(),
        from.display()
    );
    for line in text.lines() {
        let _ = writeln!(out, "#   {line}");
    }
    let (mut in_protocol, mut set) = (false, [false; 2]);
    for line in source.lines() {
        let indented = line.starts_with(' ');
        if !indented && !line.trim().is_empty() && !line.starts_with('#') {
            in_protocol = line.trim_end() == "protocol:";
        }
        let key = line.trim_start();
        let indent = &line[..line.len() - key.len()];
        let value = |k: &str| key.strip_prefix(k).map(|rest| rest.split('#').next().unwrap_or("").trim().to_string());
        match (in_protocol && indented, value("sessions:"), value("runs:")) {
            (true, Some(v), _) if v.parse::<u32>().is_ok() => {
                let _ = writeln!(out, "{indent}sessions: {}   # designed (was {v})", d.sessions);
                set[0] = true;
            }
            (true, _, Some(v)) if v.parse::<u32>().is_ok() => {
                let _ = writeln!(out, "{indent}runs: {}   # designed (was {v})", d.runs);
                set[1] = true;
            }
            _ => {
                let _ = writeln!(out, "{line}");
            }
        }
    }
    if set != [true, true] {
        return Err(Failure::Usage(format!(
            "{}: `protocol.sessions` and `protocol.runs` must be plain numbers on lines of their own to be designed",
            path.display()
        )));
    }
    Ok(out)
}

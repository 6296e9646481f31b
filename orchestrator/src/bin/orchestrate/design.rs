//! `orchestrate design`: a plan's sessions and runs per session chosen from a dimensioning
//! study's variance components and the testbed's costs per level, written as a new plan.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use latency_analysis::components::Components;
use latency_analysis::design::{self, Costs, Designed, Goal, SweepPoint};
use latency_plan::FlashPolicy;
use latency_schedule::hms;
use orchestrator::exit::ExitStatus;

use crate::Failure;
use crate::print_out;

/// What `design` takes besides the plan, the dimensioning study and the goal.
pub(crate) struct Inputs<'a> {
    /// The testbed whose costs count (default: the plan's).
    pub testbed: Option<&'a str>,
    /// Where to write the designed plan.
    pub out: Option<&'a Path>,
    /// Studies whose journals' step durations replace the inventory's estimates.
    pub costs_from: &'a [PathBuf],
    /// A load sweep to choose the pacing from.
    pub pacing_from: Option<&'a Path>,
    /// How close a faster pacing's latency must stay, ns (default: the target).
    pub pacing_within: Option<f64>,
    /// Whether each estimate's target is the half-width the plan as written gives it.
    pub as_precise_as_plan: bool,
}

/// Design `plan_path` from the study in `from` for `goal`; write the designed plan when asked.
/// Exit 1 when the target is not met (the best design is still printed and written).
pub(crate) fn design(plan_path: &Path, from: &Path, mut goal: Goal, inputs: Inputs<'_>) -> Result<(), Failure> {
    if goal == Goal::default() && !inputs.as_precise_as_plan {
        return Err(Failure::Usage(
            "design: give a target (--ci95-ns or --as-precise-as-plan) or a budget (--budget), or both".into(),
        ));
    }
    let (mut plan, mut inventories) = crate::slices::load(plan_path, inputs.testbed)?;
    if let Some(p) = plan.programs.iter().find(|p| p.sessions.is_some()) {
        return Err(Failure::Usage(format!(
            "design: {} gives program `{}` sessions of its own; a design sets one count for every program (remove them first)",
            plan_path.display(),
            p.name
        )));
    }
    if inputs.as_precise_as_plan {
        goal.precise_as = Some((plan.protocol.sessions, plan.protocol.runs));
    }
    crate::slices::measured_costs(&mut inventories, inputs.costs_from)?;
    if let Some(out) = inputs.out {
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
    let as_written = latency_schedule::expand(&plan, inventories[0].as_ref())
        .map_err(|e| Failure::Invalid(vec![e.diagnostic()]))?
        .predicted_seconds
        .total;
    // Every session a bring-up that redraws the reset mode, by the cheapest the testbed has.
    plan.protocol.flash = FlashPolicy::Redraw;
    let pacing = match inputs.pacing_from {
        Some(sweep) => {
            let within = inputs.pacing_within.or(goal.half_width_ns).ok_or_else(|| {
                Failure::Usage(
                    "--pacing-from: say how close the latency must stay (--pacing-within, or --ci95-ns)".into(),
                )
            })?;
            let pps = fastest_pacing(sweep, &plan, within)?;
            plan.protocol.pacing_pps = pps;
            Some((pps, within, sweep))
        }
        None => None,
    };
    let schedule =
        latency_schedule::expand(&plan, inventories[0].as_ref()).map_err(|e| Failure::Invalid(vec![e.diagnostic()]))?;
    let Some(c) = schedule.costs() else {
        return Err(Failure::Usage(format!("{}: the plan schedules no run", plan_path.display())));
    };
    let costs = Costs { session_s: c.session_s, run_s: c.run_s, fixed_s: c.fixed_s };
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
    let mut text = explain(
        &plan.study,
        (plan.protocol.sessions, plan.protocol.runs),
        &estimates,
        &d,
        costs,
        groups.len(),
        as_written,
        goal,
    );
    let redraws =
        inventories[0].as_ref().map_or(&latency_plan::inventory::DEFAULT_MODE_REDRAWN_BY[..], |i| &i.mode_redrawn_by);
    let _ = writeln!(
        text,
        "bring-ups: `flash: redraw`: the reset mode is redrawn by {} on this testbed{}",
        redraws.iter().map(|a| format!("`{a}`")).collect::<Vec<_>>().join(", "),
        if redraws.contains(&latency_plan::Action::Boot) {
            ", so each image is written once and booted every session"
        } else {
            ", so every session writes the image"
        }
    );
    if let Some((pps, within, sweep)) = pacing {
        let _ = writeln!(
            text,
            "pacing: {pps} pps, the fastest of the load sweep in {} whose median and p99 stay within {within} ns of those at the plan's pacing",
            sweep.display()
        );
    }
    print_out(&text)?;
    if let Some(out) = inputs.out {
        let designed = designed_plan(plan_path, &plan, &d, from, &text)?;
        latency_results::write_file(out, designed.as_bytes(), false)?;
        // The designed plan must load and carry the design; else it is removed.
        let back = latency_plan::load(out, inputs.testbed).map_err(|e| Failure::Invalid(e.0));
        let carried = back.as_ref().is_ok_and(|(b, _)| {
            (b.protocol.sessions, b.protocol.runs, b.protocol.flash, b.protocol.pacing_pps)
                == (d.sessions, d.runs, plan.protocol.flash, plan.protocol.pacing_pps)
        });
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
#[allow(clippy::too_many_arguments)]
fn explain(
    study: &str,
    as_written: (u32, u32),
    estimates: &[(String, &'static str, Components)],
    d: &Designed,
    costs: Costs,
    groups: usize,
    plan_seconds: f64,
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
        hms(plan_seconds)
    );
    let _ = writeln!(
        s,
        "costs: one session {} (bring-up), one run {}, {} whatever the design; the cheapest (sessions, runs) that \
         meets the goal (Kalibera & Jones's r for the widest estimate: {})",
        hms(costs.session_s),
        hms(costs.run_s),
        hms(costs.fixed_s.max(0.0)),
        estimates
            .iter()
            .map(|e| e.2)
            .max_by(|a, b| design::half_width(a, 5, 10).total_cmp(&design::half_width(b, 5, 10)))
            .map_or(0, |c| design::runs_per_session(&c, costs))
    );
    let met = if d.met { " (met)" } else { " (not met)" };
    match (goal.half_width_ns, goal.precise_as) {
        (Some(t), None) => {
            let _ = writeln!(s, "target: every 95 % half-width ≤ {t} ns{met}");
        }
        (t, Some((n, r))) => {
            let _ = writeln!(
                s,
                "target: every 95 % half-width ≤ what the plan as written ({n} sessions × {r} runs) gives it{}{met}",
                t.map(|t| format!(" and ≤ {t} ns")).unwrap_or_default()
            );
        }
        (None, None) => {}
    }
    if let Some(b) = goal.budget_s {
        let _ = writeln!(s, "budget: {}", hms(b));
    }
    let _ = writeln!(
        s,
        "\n| program | statistic | T_session² | T_run² | V_probe | measured on | half-width (ns) | as written (ns) |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|");
    for ((program, statistic, c), w) in estimates.iter().zip(&d.half_widths_ns) {
        let _ = writeln!(
            s,
            "| {program} | {statistic} | {:.3} | {:.3} | {:.3} | {:.0} × {:.1} × {:.0} | ±{w:.2} | ±{:.2} |",
            c.session_ns2,
            c.run_ns2,
            c.probe_ns2,
            c.design.sessions,
            c.design.runs,
            c.design.probes,
            design::half_width(c, as_written.0, as_written.1)
        );
    }
    s
}

/// The highest pacing of the load sweep in `dir` within `within` ns of the plan's, every program
/// and setting of the other factors alike.
fn fastest_pacing(dir: &Path, plan: &latency_plan::Plan, within: f64) -> Result<u32, Failure> {
    let summary = crate::load_summary(dir)?;
    let mut points = Vec::new();
    for (program, p) in &summary.programs {
        for level in &p.levels {
            let Some(pps) = level.factors.get("pacing_pps").and_then(|v| v.as_num()) else { continue };
            let rest: Vec<String> =
                level.factors.iter().filter(|(k, _)| *k != "pacing_pps").map(|(k, v)| format!("{k}={v}")).collect();
            // The raw quantiles: every level has the same runs, so the same blur, and they do not
            // carry the noise correction's own scatter into the comparison.
            let raw = &level.summary.latency_raw_ns;
            let (Some(median_ns), Some(p99_ns)) = (raw.median(), raw.p99()) else {
                continue;
            };
            points.push(SweepPoint {
                pacing_pps: f64::from(pps),
                rest: format!("{program} {}", rest.join(" ")),
                median_ns,
                p99_ns,
            });
        }
    }
    let base = plan.protocol.pacing_pps;
    let unswept: Vec<&str> = plan
        .programs
        .iter()
        .map(|p| p.name.as_str())
        .filter(|name| !points.iter().any(|pt| pt.rest.split(' ').next() == Some(*name)))
        .collect();
    if !points.is_empty() && !unswept.is_empty() {
        return Err(Failure::Exit(
            ExitStatus::Invalid,
            format!(
                "{}: the load sweep did not measure {} at several pacings (each program's pipeline saturates at a rate \
                 of its own)",
                dir.display(),
                unswept.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
            ),
        ));
    }
    if points.is_empty() {
        return Err(Failure::Exit(
            ExitStatus::Invalid,
            format!("{}: not a load sweep (no level with a `pacing_pps` factor)", dir.display()),
        ));
    }
    design::fastest_pacing(&points, f64::from(base), within).map(|p| p as u32).ok_or_else(|| {
        Failure::Exit(
            ExitStatus::Invalid,
            format!(
                "{}: the load sweep has no level at the plan's pacing ({base} pps) for every setting",
                dir.display()
            ),
        )
    })
}

/// The plan's text with `protocol.sessions`, `runs`, `flash` and (paced evenly) `pacing_pps` set to the design,
/// its reasoning as comments on top (below the editor's schema line, which stays first).
fn designed_plan(
    path: &Path,
    plan: &latency_plan::Plan,
    d: &Designed,
    from: &Path,
    text: &str,
) -> Result<String, Failure> {
    let mut out = String::new();
    let (schema, source) = match plan.source.split_once('\n') {
        Some((first, rest)) if first.starts_with("# yaml-language-server:") => (Some(first), rest),
        _ => (None, plan.source.as_str()),
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
    let mut designed = vec![
        ("sessions", d.sessions.to_string()),
        ("runs", d.runs.to_string()),
        ("flash", plan.protocol.flash.to_string()),
    ];
    if plan.protocol.timing == latency_plan::protocol::Timing::Pps {
        designed.push(("pacing_pps", plan.protocol.pacing_pps.to_string()));
    }
    // Which keys were set in place; those absent go after the protocol's last key.
    let mut set = vec![false; designed.len()];
    let (mut in_protocol, mut last_key, mut key_indent) = (false, None, String::new());
    let mut lines: Vec<String> = Vec::new();
    for line in source.lines() {
        let indented = line.starts_with(' ');
        if !indented && !line.trim().is_empty() && !line.starts_with('#') {
            in_protocol = line.trim_end() == "protocol:";
        }
        let key = line.trim_start();
        let indent = &line[..line.len() - key.len()];
        let mut written = false;
        if in_protocol && indented && !key.starts_with('#') {
            if key_indent.is_empty() {
                key_indent = indent.to_string();
            }
            if indent == key_indent {
                last_key = Some(lines.len());
            }
            for (k, (name, value)) in designed.iter().enumerate() {
                let Some(rest) = key.strip_prefix(name).and_then(|r| r.strip_prefix(':')) else { continue };
                let (was, comment) = match rest.split_once('#') {
                    Some((was, comment)) => (was.trim(), Some(comment.trim())),
                    None => (rest.trim(), None),
                };
                if indent != key_indent || was.is_empty() {
                    continue;
                }
                let note = match (was == value, comment) {
                    (true, Some(c)) => format!("   # {c}"),
                    (true, None) => String::new(),
                    (false, Some(c)) => format!("   # designed (was {was}); {c}"),
                    (false, None) => format!("   # designed (was {was})"),
                };
                lines.push(format!("{indent}{name}: {value}{note}"));
                (set[k], written) = (true, true);
            }
        }
        if !written {
            lines.push(line.to_string());
        }
    }
    if !(set[0] && set[1]) {
        return Err(Failure::Usage(format!(
            "{}: `protocol.sessions` and `protocol.runs` must be plain numbers on lines of their own to be designed",
            path.display()
        )));
    }
    let missing: Vec<String> = designed
        .iter()
        .zip(set)
        .filter(|(_, done)| !done)
        .map(|((name, value), _)| format!("{key_indent}{name}: {value}   # designed"))
        .collect();
    // Sessions and runs were set inside `protocol:`, so it has a last key.
    if let Some(at) = last_key {
        lines.splice(at + 1..at + 1, missing);
    }
    for line in lines {
        let _ = writeln!(out, "{line}");
    }
    Ok(out)
}

//! The dry run in words: the schedule's sessions, steps and runs with their rendered commands,
//! the levels of a study with factors, and the predicted duration.

use serde::Serialize;

use super::{Schedule, Step};

/// `h m s` rendering of a duration.
pub fn hms(seconds: f64) -> String {
    let s = seconds.round() as u64;
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, m, sec) => format!("{m}m{sec:02}s"),
        (h, m, sec) => format!("{h}h{m:02}m{sec:02}s"),
    }
}

/// A unit enum's serde name (`cross`, `session_level_run`).
fn serde_plain(v: &impl Serialize) -> String {
    serde_json::to_value(v).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

/// Human-readable dry run.
pub fn describe(s: &Schedule) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let runs: usize = s.sessions.iter().map(|x| x.runs.len()).sum();
    let p = &s.predicted_seconds;
    let _ = writeln!(out, "study {} on {}: {} sessions, {} runs", s.study, s.testbed, s.sessions.len(), runs);
    let _ = writeln!(
        out,
        "predicted: replay {:.0} s ({}), idle gaps {:.0} s, bring-up {:.0} s, run steps {:.0} s, total {}\n",
        p.replay,
        hms(p.replay),
        p.idle_gaps,
        p.bring_up,
        p.run_steps,
        hms(p.total)
    );
    if let Some(c) = s.costs() {
        let _ = writeln!(
            out,
            "one more session costs {} (bring-up), one more run {} (gap, steps, replay), one more probe per run {}{}\n",
            hms(c.session_s),
            hms(c.run_s),
            if c.probe_s >= 1e-4 {
                format!("{:.1} ms", c.probe_s * 1e3)
            } else {
                format!("{:.1} µs", c.probe_s * 1e6)
            },
            if c.fixed_s >= 1.0 {
                format!("; {} whatever the sessions (images written once)", hms(c.fixed_s))
            } else {
                String::new()
            }
        );
    }
    if !s.levels.is_empty() {
        let f = &s.factors;
        let names: Vec<String> =
            f.factors.iter().map(|x| format!("{} ({} values)", x.name.name(), x.values.len())).collect();
        let _ = writeln!(
            out,
            "{} levels: {}, design {}, order {}",
            s.levels.len(),
            names.join(" × "),
            serde_plain(&f.design),
            serde_plain(&f.order)
        );
        for l in &s.levels {
            let _ = writeln!(out, "  level {}: {} runs, {} of replay and waits", l.name, l.runs, hms(l.seconds));
        }
        out.push('\n');
    }
    if let Some(low) = s.adaptive_min_seconds {
        let _ = writeln!(
            out,
            "adaptive sessions: each program is brought up until its stopping rule holds; predicted total between {} \
             (every program at its minimum) and {} (at its maximum); null calibrations take the minimum\n",
            hms(low),
            hms(p.total)
        );
    }
    if let Some(a) = &s.slices {
        let _ = writeln!(
            out,
            "{} testbed slices: predicted wall time {} (one testbed: {}); each free slice takes the next session",
            a.slices.len(),
            hms(a.wall_seconds),
            hms(a.one_slice_seconds)
        );
        for (k, (name, busy)) in a.slices.iter().zip(&a.busy_seconds).enumerate() {
            let sessions: Vec<String> = s
                .sessions
                .iter()
                .zip(&a.slice_of)
                .filter(|(_, slice)| **slice == k + 1)
                .map(|(x, _)| x.name())
                .collect();
            let _ = writeln!(out, "  slice {} ({name}): {}, {}", k + 1, hms(*busy), sessions.join(", "));
        }
        out.push('\n');
    }
    for note in &s.stand_ins {
        let _ = writeln!(out, "stand-in: {note}");
    }
    for d in &s.refused {
        let _ = writeln!(out, "refused: {d} (`run` refuses)");
    }
    if !s.stand_ins.is_empty() || !s.refused.is_empty() {
        out.push('\n');
    }
    let step_line = |out: &mut String, indent: &str, st: &Step| {
        let cmd = st.command.as_deref().unwrap_or("(simulated)");
        let _ = writeln!(out, "{indent}[{}] {}: {cmd}", st.host, st.action.name());
    };
    for line in &s.around.before {
        let _ = writeln!(out, "before: {line}");
    }
    for se in &s.sessions {
        let _ = writeln!(
            out,
            "session {}/{} {}: bitstream {}, trace {} ({} probes)",
            se.index + 1,
            s.sessions.len(),
            se.name(),
            se.bitstream,
            se.trace,
            se.probes
        );
        if !se.write_first.is_empty() {
            let _ = writeln!(
                out,
                "  only if the card may not hold {} (its first session on a testbed, after a resume or a failed bring-up):",
                se.bitstream
            );
            for st in &se.write_first {
                step_line(&mut out, "    ", st);
            }
        }
        if !se.unless_held.is_empty() {
            let held = if se.identity.is_empty() {
                "known to hold".to_string()
            } else {
                format!("read back as ({})", se.identity)
            };
            let actions: Vec<&str> = se.unless_held.iter().map(|a| a.name()).collect();
            let _ = writeln!(
                out,
                "  {} left out if the card holds {} already: written by an earlier session on its slice, or {held} at its first bring-up",
                actions.join(" and "),
                se.bitstream
            );
        }
        for st in &se.steps {
            step_line(&mut out, "  ", st);
        }
        if let Some(c) = &se.agent_control {
            let _ = writeln!(out, "  [receiver] agent control: {c}");
        }
        for r in &se.runs {
            if r.wait_before_s > 0.0 {
                let why = if r.run == 1 { "capture settles" } else { "idle gap" };
                let _ = writeln!(out, "  wait {} s ({why})", r.wait_before_s);
            }
            let at = r.level.as_ref().map(|l| format!(" at {}", l.name())).unwrap_or_default();
            let _ = writeln!(out, "  run {}{at} ({:.0} s replay)", r.run, r.replay_s);
            for st in &r.steps {
                step_line(&mut out, "    ", st);
            }
        }
        for st in &se.teardown {
            step_line(&mut out, "  ", st);
        }
    }
    for line in &s.around.after {
        let _ = writeln!(out, "after: {line}");
    }
    out
}

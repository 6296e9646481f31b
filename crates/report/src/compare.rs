//! The comparison page (`orchestrate compare --html FILE`): two studies side by side, one
//! self-contained HTML file like the report (inline CSS and SVG, no scripts) for a CI job's
//! summary. Per program: the verdict, the shift of each quantile (the median's and p99's with their
//! 95 % intervals), the distribution distances, the two distributions overlaid; then the runs'
//! health of each study, and where their provenance differs.

use std::collections::BTreeMap;

use serde::Serialize;

use latency_analysis::compare::Comparison;
use latency_results::summary::{Histogram, ProgramSummary, Summary};

use super::figures::histogram_path;
use super::format::ns;
use super::svg::{Anchor, Axis, Decor, Frame, Svg, TEXT, TEXT_MUTED, colour};
use super::{ReportError, render_template};

const COMPARE_HTML: &str = "compare.html.j2";
const BUILTIN_COMPARE_HTML: &str = include_str!("templates/compare.html.j2");
const WIDTH: f64 = 1000.0;
/// Colour of the baseline's distribution.
const BASELINE: &str = "#59636e";
/// Provenance values are cut to this many characters on the page.
const VALUE_CHARS: usize = 120;

#[derive(Serialize)]
struct View {
    baseline: String,
    candidate: String,
    regressed: bool,
    thresholds: String,
    rows: Vec<Row>,
    unmatched: Vec<String>,
    figures: Vec<Overlay>,
    health: Vec<[String; 3]>,
    provenance: Vec<[String; 3]>,
    provenance_more: usize,
}

#[derive(Serialize)]
struct Row {
    program: String,
    median: String,
    median_ci: String,
    p99: String,
    p99_ci: String,
    quantiles: String,
    ks: String,
    w1: String,
    modes: String,
    verdict: String,
    failed: bool,
}

#[derive(Serialize)]
struct Overlay {
    program: String,
    svg: String,
}

fn signed(v: f64) -> String {
    if v.is_finite() { format!("{v:+.1}") } else { "—".into() }
}

fn interval(ci: Option<[f64; 2]>) -> String {
    match ci {
        Some([a, b]) if a.is_finite() && b.is_finite() => format!("[{a:+.1}, {b:+.1}]"),
        _ => "—".into(),
    }
}

/// The comparison page of `cmp`, judged from the summaries `baseline` and `candidate`.
pub fn html(cmp: &Comparison, baseline: &Summary, candidate: &Summary) -> Result<String, ReportError> {
    let t = &cmp.thresholds;
    let rows = cmp
        .programs
        .iter()
        .map(|p| {
            let p99 = p.quantile_shifts_ns.iter().find(|(k, _)| k == "p99").map_or(f64::NAN, |x| x.1);
            let mut others: Vec<&(String, f64)> =
                p.quantile_shifts_ns.iter().filter(|(k, _)| k != "p50" && k != "p99").collect();
            let level = |k: &str| k.trim_start_matches('p').parse::<f64>().unwrap_or(f64::NAN);
            others.sort_by(|a, b| level(&a.0).total_cmp(&level(&b.0)));
            let others: Vec<String> = others.iter().map(|(k, v)| format!("{k} {}", signed(*v))).collect();
            let opt = |x: Option<f64>, prec: usize| x.map_or("—".into(), |v| format!("{v:.prec$}"));
            Row {
                program: p.program.clone(),
                median: signed(p.median_shift_ns),
                median_ci: interval(Some(p.median_shift_ci95_ns)),
                p99: signed(p99),
                p99_ci: interval(p.p99_shift_ci95_ns),
                quantiles: others.join(", "),
                ks: opt(p.ks_distance, 3),
                w1: opt(p.wasserstein_ns, 1),
                modes: format!("{} → {}", p.modes.0, p.modes.1),
                verdict: if p.failures.is_empty() { "pass".into() } else { p.failures.join("; ") },
                failed: !p.failures.is_empty(),
            }
        })
        .collect();
    let figures = candidate
        .programs
        .iter()
        .filter_map(|(name, c)| {
            let b = baseline.programs.get(name)?;
            Some(Overlay { program: name.clone(), svg: overlay(name, b, c)? })
        })
        .collect();
    let (provenance, provenance_more) = provenance_differences(baseline, candidate);
    let view = View {
        baseline: cmp.baseline.clone(),
        candidate: cmp.candidate.clone(),
        regressed: cmp.regressed(),
        thresholds: format!(
            "median ±{} ns (its 95 % interval excluding 0), p99 ±{} ns, Kolmogorov–Smirnov {}; {}",
            t.median_shift_ns,
            t.p99_shift_ns,
            t.ks_distance,
            if t.noise_corrected { "noise-corrected quantiles" } else { "quantiles before the noise correction" }
        ),
        rows,
        unmatched: cmp.unmatched.clone(),
        figures,
        health: health(baseline, candidate),
        provenance,
        provenance_more,
    };
    render_template(COMPARE_HTML, BUILTIN_COMPARE_HTML, None, &view)
}

/// The runs' health of both studies, row by row: (what, baseline, candidate).
fn health(b: &Summary, c: &Summary) -> Vec<[String; 3]> {
    let counts = |s: &Summary| {
        let h = &s.health;
        [
            h.runs,
            h.matched,
            h.pipeline_only,
            h.bypass_only,
            h.duplicates,
            h.retries,
            h.failed_runs,
            h.problems.len() as u64,
        ]
    };
    let what =
        ["runs", "probes matched", "pipeline only", "bypass only", "duplicates", "retries", "failed runs", "problems"];
    let (cb, cc) = (counts(b), counts(c));
    (0..what.len()).map(|k| [what[k].to_string(), cb[k].to_string(), cc[k].to_string()]).collect()
}

/// Where the two studies' provenance differs, as (field path, baseline, candidate); the times a
/// study started and ended are left out (they always differ). At most 60 rows, and how many more.
fn provenance_differences(b: &Summary, c: &Summary) -> (Vec<[String; 3]>, usize) {
    let flat = |s: &Summary| {
        let mut out = BTreeMap::new();
        if let Some(p) = &s.provenance {
            flatten("", &serde_json::to_value(p).unwrap_or_default(), &mut out);
        }
        out
    };
    let (fb, fc) = (flat(b), flat(c));
    let keys: std::collections::BTreeSet<&String> = fb.keys().chain(fc.keys()).collect();
    let cut = |v: Option<&String>| match v {
        None => "—".to_string(),
        Some(v) if v.chars().count() > VALUE_CHARS => format!("{}…", v.chars().take(VALUE_CHARS).collect::<String>()),
        Some(v) => v.clone(),
    };
    let all: Vec<[String; 3]> = keys
        .into_iter()
        .filter(|k| !matches!(k.as_str(), "started" | "ended"))
        .filter(|k| fb.get(*k) != fc.get(*k))
        .map(|k| [k.clone(), cut(fb.get(k)), cut(fc.get(k))])
        .collect();
    let more = all.len().saturating_sub(60);
    (all.into_iter().take(60).collect(), more)
}

/// `value`'s leaves as `a.b.0.c` → text.
fn flatten(path: &str, value: &serde_json::Value, out: &mut BTreeMap<String, String>) {
    let join = |k: &str| if path.is_empty() { k.to_string() } else { format!("{path}.{k}") };
    match value {
        serde_json::Value::Object(m) => m.iter().for_each(|(k, v)| flatten(&join(k), v, out)),
        serde_json::Value::Array(a) => a.iter().enumerate().for_each(|(i, v)| flatten(&join(&i.to_string()), v, out)),
        serde_json::Value::String(s) => {
            out.insert(path.to_string(), s.clone());
        }
        serde_json::Value::Null => {}
        other => {
            out.insert(path.to_string(), other.to_string());
        }
    }
}

/// The span of a histogram's probes but the farthest 0.2 % on each side (a few outliers would
/// squash the distributions into a sliver), and how many probes lie outside it.
fn extent(h: &Histogram) -> Option<(f64, f64, u64)> {
    let total: u64 = h.counts.iter().sum();
    if !(h.bin_ns > 0.0 && h.start_ns.is_finite()) || total == 0 {
        return None;
    }
    let tail = total / 500;
    let mut below = 0;
    let first = h.counts.iter().position(|&c| {
        below += c;
        below > tail
    })?;
    let mut above = 0;
    let last = h.counts.iter().rposition(|&c| {
        above += c;
        above > tail
    })?;
    let inside: u64 = h.counts[first..=last].iter().sum();
    Some((h.start_ns + first as f64 * h.bin_ns, h.start_ns + (last + 1) as f64 * h.bin_ns, total - inside))
}

/// Both studies' distributions of `name` on one axis: the baseline outlined in grey, the
/// candidate filled, each median a line.
fn overlay(name: &str, b: &ProgramSummary, c: &ProgramSummary) -> Option<String> {
    let (bl, bh, b_out) = extent(&b.histogram)?;
    let (cl, ch, c_out) = extent(&c.histogram)?;
    let medians = [b.latency_ns.at(50.0), c.latency_ns.at(50.0)];
    let (mut lo, mut hi) = (bl.min(cl), bh.max(ch));
    for m in medians.iter().flatten().filter(|m| m.is_finite()) {
        lo = lo.min(*m);
        hi = hi.max(*m);
    }
    let pad = (hi - lo).max(1.0) * 0.03;
    let x = Axis::nice(lo - pad, hi + pad, 10);
    let share = |h: &Histogram| {
        let total: u64 = h.counts.iter().sum();
        let peak = h.counts.iter().copied().max().unwrap_or(0);
        if total > 0 { peak as f64 / total as f64 * 100.0 } else { 0.0 }
    };
    let mut y = Axis::nice(0.0, share(&b.histogram).max(share(&c.histogram)) * 1.3, 3);
    y.ticks.retain(|t| *t <= y.hi);
    let (left, top, panel_h) = (78.0, 34.0, 180.0);
    let height = top + panel_h + 58.0;
    let mut svg = Svg::new(WIDTH, height);
    let frame = Frame { left, top, width: WIDTH - left - 24.0, height: panel_h, x: x.clone(), y };
    svg.title(left, 20.0, name, "baseline outlined, candidate filled");
    frame.draw(&mut svg, &Decor { x_title: Some("calibrated latency L̂ (ns)"), x_labels: true, ..Decor::default() });
    let candidate = colour(0);
    for (h, fill, opacity) in [(&c.histogram, candidate, 0.35), (&b.histogram, BASELINE, 0.0)] {
        if let Some(d) = histogram_path(&frame, h) {
            svg.path(&d, fill, opacity, fill, 1.4);
        }
    }
    for (k, (m, stroke, who)) in
        [(medians[0], BASELINE, "baseline"), (medians[1], TEXT, "candidate")].into_iter().enumerate()
    {
        let Some(m) = m.filter(|m| m.is_finite()) else { continue };
        let mx = frame.px(m);
        svg.line(mx, frame.top, mx, frame.top + panel_h, stroke, 1.8, if k == 0 { Some("5 3") } else { None });
        let label = format!("{who} median {} ns", ns(m));
        svg.label(
            frame.left + frame.width - 6.0,
            frame.top + 16.0 + 16.0 * k as f64,
            &label,
            12.0,
            Anchor::End,
            stroke,
            false,
        );
    }
    svg.vtext(22.0, top + panel_h / 2.0, "share of probes per bin (%)", 14.0);
    let mut notes = Vec::new();
    if b_out + c_out > 0 {
        notes.push(format!("off scale: {b_out} probes of the baseline, {c_out} of the candidate"));
    }
    if b.histogram.bin_ns != c.histogram.bin_ns {
        notes.push("bins differ between the studies".to_string());
    }
    if !notes.is_empty() {
        svg.text(left, height - 6.0, &notes.join("; "), 11.0, Anchor::Start, TEXT_MUTED, false);
    }
    Some(svg.finish(&format!("{name}: baseline and candidate distributions")))
}

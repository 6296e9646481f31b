//! Studies with factors: latency against each factor (one figure per factor, one panel per
//! program, one line per combination of the other factors) and the per-level table rows.

use std::collections::BTreeMap;

use serde::Serialize;

use super::format::{mode_median, ns};
use super::svg::Figure;
use super::svg::{Axis, Decor, Frame, Svg, colour};
use latency_plan::FactorValue;
use latency_results::summary::LevelSummary;
use latency_results::summary::ProgramSummary;
use latency_results::summary::Summary;

const WIDTH: f64 = 960.0;

/// A value axis, linear or in decades (when the values span two decades or more).
struct Scale {
    log: bool,
}

impl Scale {
    fn of(values: impl Iterator<Item = f64>) -> Scale {
        let (lo, hi) = values
            .filter(|v| v.is_finite() && *v > 0.0)
            .fold((f64::INFINITY, 0.0_f64), |(a, b), v| (a.min(v), b.max(v)));
        Scale { log: lo.is_finite() && hi / lo >= 10.0 }
    }

    fn at(&self, v: f64) -> f64 {
        if self.log { v.max(f64::MIN_POSITIVE).log10() } else { v }
    }

    /// The axis over `[lo, hi]` (values), and the tick labels when in decades.
    fn axis(&self, lo: f64, hi: f64, target: usize) -> (Axis, Option<Vec<(f64, String)>>) {
        if !self.log {
            return (Axis::nice(lo, hi, target), None);
        }
        let axis = Axis::decades(self.at(lo).floor() as i32, self.at(hi).ceil() as i32);
        let decades = axis.ticks.iter().map(|&k| (k, decade(k as i32))).collect();
        (axis, Some(decades))
    }
}

/// `10^k` in short form: 100, 1k, 10k, 1M.
fn decade(k: i32) -> String {
    match k {
        i32::MIN..=2 => format!("{}", 10f64.powi(k)),
        3..=5 => format!("{}k", 10f64.powi(k - 3)),
        6..=8 => format!("{}M", 10f64.powi(k - 6)),
        _ => format!("1e{k}"),
    }
}

/// The factors of a summary's levels, in the order the levels name them.
fn factor_names(s: &Summary) -> Vec<String> {
    let first = s.programs.values().find(|p| !p.levels.is_empty());
    first.map_or_else(Vec::new, |p| {
        p.level
            .as_deref()
            .unwrap_or_default()
            .split('/')
            .filter_map(|kv| kv.split('=').next())
            .map(str::to_owned)
            .collect()
    })
}

/// One figure per factor that takes at least two values.
pub(crate) fn figures(s: &Summary) -> Vec<Figure> {
    let factors = factor_names(s);
    let progs: Vec<(&String, &ProgramSummary)> = s.programs.iter().filter(|(_, p)| !p.levels.is_empty()).collect();
    let mut out = Vec::new();
    for (fi, factor) in factors.iter().enumerate() {
        let distinct = |p: &ProgramSummary| {
            let mut v: Vec<u32> = p.levels.iter().filter_map(|l| l.factors.get(factor)?.as_num()).collect();
            v.sort_unstable();
            v.dedup();
            v.len()
        };
        if progs.iter().all(|(_, p)| distinct(p) < 2) {
            continue;
        }
        out.push(against(factor, fi, &factors, &progs));
    }
    out
}

/// A series' points: the factor's value and the level.
type Points<'a> = Vec<(f64, &'a LevelSummary)>;

/// The levels of a program grouped by the values of the factors other than `factor` (in
/// numeric order), each series with its label and its points in `factor`'s order.
fn series<'a>(p: &'a ProgramSummary, factor: &str) -> Vec<(String, Points<'a>)> {
    let mut out: BTreeMap<Vec<(&str, &FactorValue)>, Points<'a>> = BTreeMap::new();
    for l in &p.levels {
        let Some(x) = l.factors.get(factor).and_then(FactorValue::as_num) else { continue };
        let rest: Vec<(&str, &FactorValue)> =
            l.factors.iter().filter(|(k, _)| *k != factor).map(|(k, v)| (k.as_str(), v)).collect();
        out.entry(rest).or_default().push((f64::from(x), l));
    }
    out.into_iter()
        .map(|(rest, mut points)| {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            let label: Vec<String> = rest.iter().map(|(k, v)| format!("{k} {v}")).collect();
            (label.join(", "), points)
        })
        .collect()
}

/// Legend entries per row.
const LEGEND_PER_ROW: usize = 4;

fn q(l: &LevelSummary, level: f64) -> f64 {
    l.summary.latency_ns.at(level).unwrap_or(f64::NAN)
}

fn against(factor: &str, index: usize, factors: &[String], progs: &[(&String, &ProgramSummary)]) -> Figure {
    let rows = progs.iter().map(|(_, p)| series(p, factor).len().div_ceil(LEGEND_PER_ROW)).max().unwrap_or(1);
    let (left, right, top, title_h, panel_h, gap_y) = (80.0, 20.0, 8.0, 24.0, 240.0, 64.0);
    let legend_h = 20.0 * rows.max(1) as f64 + 2.0;
    let height = top + progs.len() as f64 * (title_h + legend_h + panel_h + gap_y);
    let mut svg = Svg::new(WIDTH, height);
    for (i, (name, p)) in progs.iter().enumerate() {
        let py = top + i as f64 * (title_h + legend_h + panel_h + gap_y);
        let groups = series(p, factor);
        let xs = || groups.iter().flat_map(|g| &g.1).map(|(x, _)| *x);
        let ys = || groups.iter().flat_map(|g| &g.1).flat_map(|(_, l)| [q(l, 5.0), q(l, 50.0), q(l, 95.0), q(l, 99.0)]);
        let (xscale, yscale) = (Scale::of(xs()), Scale::of(ys()));
        let fold = |it: &mut dyn Iterator<Item = f64>| {
            it.filter(|v| v.is_finite()).fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)))
        };
        let (xlo, xhi) = fold(&mut xs());
        let (ylo, yhi) = fold(&mut ys());
        let (x, x_labels) = xscale.axis(xlo, xhi, 6);
        let (y, y_labels) = yscale.axis(ylo, yhi, 5);
        svg.title(left, py + 16.0, name, "median, p5–p95 band, p99 dashed");
        let frame = Frame { left, top: py + title_h + legend_h, width: WIDTH - left - right, height: panel_h, x, y };
        let x_title = format!("{factor}{}", if xscale.log { " (log scale)" } else { "" });
        let y_title = format!("calibrated latency (ns){}", if yscale.log { ", log" } else { "" });
        frame.draw(
            &mut svg,
            &Decor {
                x_title: Some(&x_title),
                y_title: Some(&y_title),
                x_labels: true,
                x_categories: x_labels,
                y_categories: y_labels,
            },
        );
        let mut lx = left;
        for (k, (rest, points)) in groups.iter().enumerate() {
            if k > 0 && k % LEGEND_PER_ROW == 0 {
                lx = left;
            }
            let ly = py + title_h + 14.0 + 20.0 * (k / LEGEND_PER_ROW) as f64;
            let c = colour(k);
            let at = |x: f64, v: f64| (frame.px(xscale.at(x)), frame.py(yscale.at(v)));
            let band: Vec<(f64, f64)> = points
                .iter()
                .map(|(x, l)| at(*x, q(l, 95.0)))
                .chain(points.iter().rev().map(|(x, l)| at(*x, q(l, 5.0))))
                .collect();
            if band.iter().all(|(a, b)| a.is_finite() && b.is_finite()) && band.len() >= 4 {
                let d: Vec<String> = band
                    .iter()
                    .enumerate()
                    .map(|(j, (a, b))| format!("{}{a:.1},{b:.1}", if j == 0 { "M" } else { "L" }))
                    .collect();
                svg.path(&format!("{}Z", d.join("")), c, 0.15, "none", 0.0);
            }
            let line = |level: f64| -> Vec<(f64, f64)> {
                points
                    .iter()
                    .map(|(x, l)| at(*x, q(l, level)))
                    .filter(|(a, b)| a.is_finite() && b.is_finite())
                    .collect()
            };
            svg.polyline(&line(50.0), c, 2.0, None);
            svg.polyline(&line(99.0), c, 1.2, Some("5 4"));
            for (x, l) in points {
                let (px, py) = at(*x, q(l, 50.0));
                svg.circle(px, py, 4.0, c, "#fff");
                // Other reset modes of the level, apart from the headline's.
                for m in l.summary.modes.iter().skip(1) {
                    let (mx, my) = at(*x, mode_median(m));
                    if my.is_finite() {
                        svg.diamond(mx, my, 4.5, "#fff", c);
                    }
                }
            }
            let text = if rest.is_empty() { "median".to_string() } else { rest.clone() };
            lx += svg.legend_entry(lx, ly, &text, |s, x, y| s.line(x - 8.0, y, x + 8.0, y, c, 2.0, None));
        }
    }
    let title = format!("Latency against {factor}");
    let others = factors.iter().filter(|f| *f != factor).cloned().collect::<Vec<_>>().join(", ");
    Figure {
        id: ["latency-vs-factor-1", "latency-vs-factor-2", "latency-vs-factor-3"]
            .get(index)
            .copied()
            .unwrap_or("latency-vs-factor"),
        caption: format!(
            "Calibrated latency of each level against {factor}: median (solid, points), p5–p95 (band) and p99 \
             (dashed){}. Hollow diamonds mark the medians of a level's other reset modes.",
            if others.is_empty() { String::new() } else { format!(", one line per value of {others}") }
        ),
        svg: svg.finish(&title),
        title,
    }
}

/// One row of the per-level table.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct LevelRow {
    program: String,
    level: String,
    median: String,
    p99: String,
    median_ci: String,
    modes: usize,
    null_calibration: String,
    probes: u64,
    bound: String,
}

/// Every level of every program, in plan order.
pub(crate) fn rows(s: &Summary) -> Vec<LevelRow> {
    let ci = |c: [f64; 2]| format!("[{}, {}]", ns(c[0]), ns(c[1]));
    s.programs
        .iter()
        .flat_map(|(name, p)| {
            p.levels.iter().map(move |l| LevelRow {
                program: name.clone(),
                level: l.summary.level.as_deref().unwrap_or_default().replace('/', ", ").replace('=', " "),
                median: ns(q(l, 50.0)),
                p99: ns(q(l, 99.0)),
                median_ci: ci(l.summary.median_ci95_ns),
                modes: l.summary.modes.len(),
                null_calibration: format!("{} ({})", l.null_calibration, l.null_level),
                probes: l.summary.probes,
                bound: l.summary.vendor_bound.as_ref().map_or("—".into(), |b| b.cycles.to_string()),
            })
        })
        .collect()
}

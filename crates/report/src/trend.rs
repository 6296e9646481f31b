//! The trend page of a history (`orchestrate trend`): a self-contained HTML page (each series as
//! an inline SVG: the nights, the groups' averages, the changes; each night linked to its report)
//! and Markdown for CI, both from built-in templates (`templates/trend.{html,md}.j2`); and JUnit
//! with one test case per series, failed when its latest change is a regression.

use serde::Serialize;

use super::format::ns;
use super::svg::{Anchor, Axis, Decor, Frame, Svg, TEXT_MUTED, colour};
use super::{ReportError, render_template};
use latency_history::trend::Judgement;
use latency_history::trend::Series;
use latency_history::trend::SeriesChange;
use latency_history::trend::SeriesKey;
use latency_history::trend::Trend;

const TREND_HTML: &str = "trend.html.j2";
const TREND_MD: &str = "trend.md.j2";
const BUILTIN_TREND_HTML: &str = include_str!("templates/trend.html.j2");
const BUILTIN_TREND_MD: &str = include_str!("templates/trend.md.j2");
const REGRESSION: &str = "#C0392B";

#[derive(Serialize)]
struct View {
    store: String,
    studies: usize,
    regressions: usize,
    series: Vec<SeriesView>,
    changes: Vec<ChangeView>,
}

#[derive(Serialize)]
struct SeriesView {
    name: String,
    nights: usize,
    first: String,
    last: String,
    latest: String,
    trend: String,
    groups: usize,
    verdict: &'static str,
    /// Night-to-night noise, ns.
    noise: String,
    /// What a series too noisy for the threshold would need.
    noisy: Option<String>,
    svg: String,
}

#[derive(Serialize)]
struct ChangeView {
    name: String,
    study: String,
    time: String,
    before: String,
    after: String,
    shift: String,
    ci95: String,
    verdict: &'static str,
    /// Whether a confirmation study of one of its nights belongs to its new level.
    confirmed: bool,
    /// Why its first study was acknowledged (`history annotate`).
    acknowledged: Option<String>,
    report: Option<String>,
}

/// A series' name: its study (and testbed), program, level and statistic.
fn name((study, program, level, statistic): SeriesKey<'_>) -> String {
    let level = level.map(|l| format!(" [{l}]")).unwrap_or_default();
    format!("{} ({}): {program}{level} {statistic}", study.name, study.testbed)
}

/// One line for a change: the series, the shift and its interval, where it starts, the averages.
pub fn describe(c: &SeriesChange) -> String {
    format!(
        "{}: {:+.1} ns [{:+.1}, {:+.1}] from {} ({}): {} → {} ns",
        name(c.key()),
        c.change.shift_ns,
        c.change.ci95_ns[0],
        c.change.ci95_ns[1],
        c.change.study,
        c.change.time,
        ns(c.change.before_ns),
        ns(c.change.after_ns)
    )
}

fn verdict(c: &SeriesChange) -> &'static str {
    match c.judgement {
        Judgement::Acknowledged => "acknowledged",
        Judgement::Regression if c.regression => "regression",
        Judgement::Regression => "unconfirmed",
        Judgement::Improvement => "improvement",
        Judgement::Noisy => "noisy",
        Judgement::TooFewNights => "too few nights",
        Judgement::Within => "within gates",
        Judgement::Earlier if c.change.shift_ns > 0.0 => "slower",
        Judgement::Earlier => "faster",
    }
}

fn view(t: &Trend, store: &str) -> View {
    let mut studies: Vec<&str> = t.series.iter().flat_map(|s| s.points.iter().map(|p| p.study.as_str())).collect();
    studies.sort_unstable();
    studies.dedup();
    let series = t
        .series
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let latest = t.changes.iter().find(|c| c.latest && c.key() == s.key());
            SeriesView {
                name: name(s.key()),
                nights: s.points.len(),
                first: s.points.first().map(|p| p.time.clone()).unwrap_or_default(),
                last: s.points.last().map(|p| p.time.clone()).unwrap_or_default(),
                latest: s.points.last().map_or_else(|| ns(f64::NAN), |p| ns(p.value_ns)),
                trend: s.groups.last().map_or_else(|| ns(f64::NAN), |g| ns(g.1)),
                groups: s.groups.len(),
                verdict: latest.map_or("steady", verdict),
                noise: s.noise_ns.map_or_else(|| "—".into(), |n| format!("{n:.2}")),
                noisy: s.noisy.map(|n| {
                    format!(
                        "shifts under {:.1} ns are not told from noise: {} nights at a new level, or {} sessions a night",
                        n.detectable_ns, n.nights_needed, n.sessions_needed
                    )
                }),
                svg: figure(s, i),
            }
        })
        .collect();
    let changes = t
        .changes
        .iter()
        .map(|c| {
            let s = t.series.iter().find(|s| s.key() == c.key());
            ChangeView {
                name: name(c.key()),
                study: c.change.study.clone(),
                time: c.change.time.clone(),
                before: ns(c.change.before_ns),
                after: ns(c.change.after_ns),
                shift: format!("{:+.1}", c.change.shift_ns),
                ci95: format!("[{:+.1}, {:+.1}]", c.change.ci95_ns[0], c.change.ci95_ns[1]),
                verdict: verdict(c),
                confirmed: c.confirmed,
                acknowledged: c.acknowledged.clone(),
                report: s.and_then(|s| s.points.get(c.change.index)).and_then(|p| p.report.clone()),
            }
        })
        .collect();
    View { store: store.to_string(), studies: studies.len(), regressions: t.regressions().count(), series, changes }
}

/// One series: nights as points (linked to their reports), each group's average as a dashed
/// segment, each change as a vertical line.
fn figure(s: &Series, i: usize) -> String {
    let (w, h, left, top) = (960.0, 260.0, 70.0, 14.0);
    let mut svg = Svg::new(w, h);
    let values = s.points.iter().map(|p| p.value_ns);
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)));
    let pad = ((hi - lo) * 0.1).max(0.5);
    let n = u32::try_from(s.points.len()).unwrap_or(u32::MAX).max(1);
    let frame = Frame {
        left,
        top,
        width: w - left - 20.0,
        height: h - top - 56.0,
        x: Axis::integers(1, n, 12),
        y: Axis::nice(lo - pad, hi + pad, 4),
    };
    let title = name(s.key());
    frame.draw(
        &mut svg,
        &Decor {
            x_title: Some("night"),
            y_title: Some(&format!("{} (ns)", s.statistic)),
            x_labels: true,
            ..Decor::default()
        },
    );
    let c = colour(i / 2);
    for (k, g) in s.groups.iter().enumerate() {
        let end = s.groups.get(k + 1).map_or(s.points.len(), |g| g.0);
        let (x0, x1) = (frame.px(g.0 as f64 + 0.5), frame.px(end as f64 + 0.5));
        svg.line(x0, frame.py(g.1), x1, frame.py(g.1), c, 1.5, Some("6 4"));
        if k > 0 {
            let x = frame.px(g.0 as f64 + 0.5);
            svg.line(x, frame.top, x, frame.top + frame.height, REGRESSION, 1.2, None);
            svg.text(
                x + 4.0,
                frame.top + 14.0,
                &format!("{:+.1} ns", g.1 - s.groups[k - 1].1),
                12.0,
                Anchor::Start,
                TEXT_MUTED,
                false,
            );
        }
    }
    svg.polyline(
        &s.points.iter().enumerate().map(|(k, p)| (frame.px(k as f64 + 1.0), frame.py(p.value_ns))).collect::<Vec<_>>(),
        c,
        1.0,
        None,
    );
    for (k, p) in s.points.iter().enumerate() {
        let (x, y) = (frame.px(k as f64 + 1.0), frame.py(p.value_ns));
        svg.linked_circle(
            x,
            y,
            3.5,
            c,
            &format!("{} · {} · {} ns", p.time, p.study, ns(p.value_ns)),
            p.report.as_deref(),
        );
    }
    svg.finish(&title)
}

/// The trend page (HTML).
pub fn html(t: &Trend, store: &str) -> Result<String, ReportError> {
    render_template(TREND_HTML, BUILTIN_TREND_HTML, None, &view(t, store))
}

/// The trend in Markdown (for CI job summaries).
pub fn markdown(t: &Trend, store: &str) -> Result<String, ReportError> {
    render_template(TREND_MD, BUILTIN_TREND_MD, None, &view(t, store))
}

/// JUnit XML: one test case per series, failed when its latest change is a regression.
pub fn junit(t: &Trend) -> Result<String, quick_junit::SerializeError> {
    use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
    let mut suite = TestSuite::new("trend");
    for s in &t.series {
        let name = name(s.key());
        let regression = t.regressions().find(|c| c.key() == s.key());
        let status = match regression {
            Some(c) => {
                let mut st = TestCaseStatus::non_success(NonSuccessKind::Failure);
                st.set_message(describe(c));
                st
            }
            None => TestCaseStatus::success(),
        };
        suite.add_test_case(TestCase::new(name, status));
    }
    let mut report = Report::new("orchestrate trend");
    report.add_test_suite(suite);
    report.to_string()
}

//! Trend changes: a series of nightly figures (a program's median at a level, night by night) split
//! by [`jumpavg`](super::jumpavg), each boundary between groups reported as a change with its size
//! and a 95 % interval of it; the history's trend ([`trend`]): every series of the store, its
//! changes, and whether the latest is a regression.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::jumpavg::{Group, classify};
use super::store::StoredRow;
use latency_results::history::row::HEADLINE;

/// One night's figure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// The study it comes from.
    pub study: String,
    /// When the study started (UTC, RFC 3339).
    pub time: String,
    /// The figure, ns.
    pub value_ns: f64,
    /// The study's report, when the history knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<String>,
}

/// A change in a series: where a new group starts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// The first study of the new group.
    pub study: String,
    /// Its time.
    pub time: String,
    /// Its index in the series.
    pub index: usize,
    /// Average of the group before, ns.
    pub before_ns: f64,
    /// Average of the group from here on, ns.
    pub after_ns: f64,
    /// `after_ns − before_ns` (positive: slower).
    pub shift_ns: f64,
    /// 95 % interval of the shift: ± 1.96 standard errors of the difference of the two groups'
    /// averages (normal approximation, as jumpavg's model).
    pub ci95_ns: [f64; 2],
}

/// The changes in `points` (in time order), in time order; `unit` is the figures' resolution
/// (none: jumpavg's default).
pub fn changes(points: &[Point], unit: Option<f64>) -> Vec<Change> {
    let values: Vec<f64> = points.iter().map(|p| p.value_ns).collect();
    changes_between(points, &classify(&values, unit))
}

/// The boundaries between `groups` (jumpavg's split of `points`) as changes.
fn changes_between(points: &[Point], groups: &[Group]) -> Vec<Change> {
    groups
        .windows(2)
        .map(|w| {
            let (a, b): (&Group, &Group) = (&w[0], &w[1]);
            let shift_ns = b.avg - a.avg;
            let se = (a.stdev * a.stdev / a.len as f64 + b.stdev * b.stdev / b.len as f64).sqrt();
            let p = &points[b.start];
            Change {
                study: p.study.clone(),
                time: p.time.clone(),
                index: b.start,
                before_ns: a.avg,
                after_ns: b.avg,
                shift_ns,
                ci95_ns: [shift_ns - 1.96 * se, shift_ns + 1.96 * se],
            }
        })
        .collect()
}

/// The statistics whose series are followed.
pub const STATISTICS: [&str; 2] = ["p50", "p99"];

/// One program's (and level's) series of one statistic.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Series {
    /// Program.
    pub program: String,
    /// Factor level (studies with factors).
    pub level: Option<String>,
    /// `p50` or `p99`.
    pub statistic: String,
    /// The nights, in time order.
    pub points: Vec<Point>,
    /// jumpavg's groups: (first index, average ns), in order.
    pub groups: Vec<(usize, f64)>,
}

/// A change of one series.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SeriesChange {
    /// Program.
    pub program: String,
    /// Factor level.
    pub level: Option<String>,
    /// `p50` or `p99`.
    pub statistic: String,
    /// The change.
    #[serde(flatten)]
    pub change: Change,
    /// Whether it starts the series' latest group (the current trend).
    pub latest: bool,
    /// The latest change, slower than the trend before it beyond its 95 % interval.
    pub regression: bool,
}

/// The trend of a whole history (`orchestrate trend --json`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Trend {
    /// Every change, in time order.
    pub changes: Vec<SeriesChange>,
    /// Every series, by program, level and statistic.
    pub series: Vec<Series>,
}

impl Trend {
    /// The changes that are regressions.
    pub fn regressions(&self) -> impl Iterator<Item = &SeriesChange> {
        self.changes.iter().filter(|c| c.regression)
    }
}

/// The trend of the headline rows of a history: per program, level and statistic, the series in
/// time order (a study at a time: ties by id), its jumpavg groups and changes. A night whose
/// figure is not finite (no estimate) is left out of the series.
pub fn trend(rows: &[StoredRow]) -> Trend {
    let mut by_series: BTreeMap<(&str, Option<&str>), Vec<&StoredRow>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.row.mode == HEADLINE) {
        by_series.entry((&r.row.program, r.row.level.as_deref())).or_default().push(r);
    }
    let mut series = Vec::new();
    let mut all_changes = Vec::new();
    for ((program, level), mut rs) in by_series {
        rs.sort_by(|a, b| (a.row.time, &a.key.study).cmp(&(b.row.time, &b.key.study)));
        for statistic in STATISTICS {
            let points: Vec<Point> = rs
                .iter()
                .map(|r| Point {
                    study: r.key.study.clone(),
                    time: r.row.time.utc(),
                    value_ns: if statistic == "p50" { r.row.p50_ns } else { r.row.p99_ns },
                    report: r.row.report.clone(),
                })
                .filter(|p| p.value_ns.is_finite())
                .collect();
            let values: Vec<f64> = points.iter().map(|p| p.value_ns).collect();
            let split = classify(&values, None);
            let found = changes_between(&points, &split);
            let groups = split.iter().map(|g| (g.start, g.avg)).collect();
            let n = found.len();
            all_changes.extend(found.into_iter().enumerate().map(|(k, change)| SeriesChange {
                program: program.to_string(),
                level: level.map(str::to_string),
                statistic: statistic.to_string(),
                regression: k + 1 == n && change.ci95_ns[0] > 0.0,
                latest: k + 1 == n,
                change,
            }));
            series.push(Series {
                program: program.to_string(),
                level: level.map(str::to_string),
                statistic: statistic.to_string(),
                points,
                groups,
            });
        }
    }
    all_changes.sort_by(|a, b| {
        (&a.change.time, &a.program, &a.level, &a.statistic).cmp(&(&b.change.time, &b.program, &b.level, &b.statistic))
    });
    Trend { changes: all_changes, series }
}

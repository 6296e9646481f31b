//! Trend changes: a series of nightly figures (a program's median at a level, night by night) split
//! by [`jumpavg`](super::jumpavg), each boundary between groups reported as a change with its size
//! and a 95 % interval of it; the history's trend ([`trend`]): every series of the store, its
//! changes, and whether the latest is a regression. A series is one study's (its
//! [`StudyIdentity`]: name and testbed) program, level and statistic: the nights of another study
//! are never compared with it. A study whose runs failed is never judged on.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::identity::StudyIdentity;
use super::jumpavg::{Group, classify};
use super::store::StoredRow;
use latency_results::history::row::{Annotation, HEADLINE};

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

/// One study's program's (and level's) series of one statistic.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Series {
    /// The study whose nights these are (`name`, `testbed`).
    #[serde(flatten)]
    pub identity: StudyIdentity,
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
    /// The series' study (`name`, `testbed`).
    #[serde(flatten)]
    pub identity: StudyIdentity,
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
    /// The latest change, slower than the trend before it beyond its 95 % interval, and not
    /// acknowledged.
    pub regression: bool,
    /// Why its first study was acknowledged as a new level (`history annotate`), if it was: the
    /// series is judged against it from there on, and it is no regression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acknowledged: Option<String>,
}

/// What names one series: the study, the program, the level and the statistic.
pub type SeriesKey<'a> = (&'a StudyIdentity, &'a str, Option<&'a str>, &'a str);

impl Series {
    /// The series' key.
    pub fn key(&self) -> SeriesKey<'_> {
        (&self.identity, &self.program, self.level.as_deref(), &self.statistic)
    }
}

impl SeriesChange {
    /// The key of the series it is a change of.
    pub fn key(&self) -> SeriesKey<'_> {
        (&self.identity, &self.program, self.level.as_deref(), &self.statistic)
    }
}

/// The trend of a whole history (`orchestrate trend --json`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Trend {
    /// Every change, in time order.
    pub changes: Vec<SeriesChange>,
    /// Every series, by study, program, level and statistic.
    pub series: Vec<Series>,
    /// The studies in the store whose runs failed (added before `history add` refused them), left
    /// out of every series: never judged on.
    #[serde(default)]
    pub left_out: Vec<LeftOut>,
}

/// A study left out of the trend.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LeftOut {
    /// The study.
    pub study: String,
    /// When it started (UTC, RFC 3339).
    pub time: String,
    /// Runs that failed every attempt.
    pub failed_runs: u64,
    /// Problems the analysis named.
    pub problems: u32,
}

impl Trend {
    /// The changes that are regressions.
    pub fn regressions(&self) -> impl Iterator<Item = &SeriesChange> {
        self.changes.iter().filter(|c| c.regression)
    }
}

/// The trend of the headline rows of a history: per study identity, program, level and statistic,
/// the series in time order (a study at a time: ties by id), its jumpavg groups and changes. A
/// night whose figure is not finite (no estimate) is left out of the series; a study that is not
/// healthy (failed runs or problems), of every series ([`Trend::left_out`]). A change whose first
/// study is acknowledged (`annotations`) is reported with the reason, never as a regression.
pub fn trend(rows: &[StoredRow], annotations: &[Annotation]) -> Trend {
    type Key<'a> = (StudyIdentity, &'a str, Option<&'a str>);
    let mut by_series: BTreeMap<Key<'_>, Vec<&StoredRow>> = BTreeMap::new();
    let mut left_out: BTreeMap<&str, LeftOut> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.row.mode == HEADLINE) {
        if !r.row.healthy || r.row.failed_runs > 0 || r.row.problems > 0 {
            left_out.entry(&r.key.study).or_insert_with(|| LeftOut {
                study: r.key.study.clone(),
                time: r.row.time.utc(),
                failed_runs: r.row.failed_runs,
                problems: r.row.problems,
            });
            continue;
        }
        by_series.entry((r.identity(), &r.row.program, r.row.level.as_deref())).or_default().push(r);
    }
    let mut series = Vec::new();
    let mut all_changes = Vec::new();
    for ((identity, program, level), mut rs) in by_series {
        rs.sort_by(|a, b| (a.row.time, a.row.ended, &a.key.study).cmp(&(b.row.time, b.row.ended, &b.key.study)));
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
            all_changes.extend(found.into_iter().enumerate().map(|(k, change)| {
                let acknowledged = annotations.iter().find(|a| a.study == change.study).map(|a| a.reason.clone());
                SeriesChange {
                    identity: identity.clone(),
                    program: program.to_string(),
                    level: level.map(str::to_string),
                    statistic: statistic.to_string(),
                    regression: k + 1 == n && change.ci95_ns[0] > 0.0 && acknowledged.is_none(),
                    latest: k + 1 == n,
                    acknowledged,
                    change,
                }
            }));
            series.push(Series {
                identity: identity.clone(),
                program: program.to_string(),
                level: level.map(str::to_string),
                statistic: statistic.to_string(),
                points,
                groups,
            });
        }
    }
    all_changes.sort_by(|a, b| {
        (&a.change.time, &a.identity, &a.program, &a.level, &a.statistic).cmp(&(
            &b.change.time,
            &b.identity,
            &b.program,
            &b.level,
            &b.statistic,
        ))
    });
    Trend { changes: all_changes, series, left_out: left_out.into_values().collect() }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::identity::StudyKey;
    use latency_results::history::row::Row;
    use latency_results::history::table::Micros;

    /// Night `day` of study `name` on `testbed`: Forward's headline at `p50_ns` (p99 20 ns above).
    fn night(name: &str, testbed: &str, day: i64, p50_ns: f64, failed_runs: u64) -> StoredRow {
        let time = Micros((1_790_000_000 + day * 86_400) * 1_000_000);
        StoredRow {
            key: StudyKey { date: time.utc()[..10].to_string(), study: format!("{name}-{day}") },
            row: Row {
                name: name.into(),
                time,
                ended: None,
                plan_hash: "0".repeat(64),
                tool_version: "0".into(),
                git_commit: String::new(),
                testbed: testbed.into(),
                host_facts: "{}".into(),
                seed: 1,
                report: None,
                program: "forward".into(),
                level: None,
                mode: HEADLINE.into(),
                bitstream_sha256: String::new(),
                p50_ns,
                p50_ci95_lo_ns: Some(p50_ns - 0.5),
                p50_ci95_hi_ns: Some(p50_ns + 0.5),
                p99_ns: p50_ns + 20.0,
                p99_ci95_lo_ns: Some(p50_ns + 19.0),
                p99_ci95_hi_ns: Some(p50_ns + 21.0),
                quantiles_json: "{}".into(),
                null_offset_ns: 24.0,
                reproducibility_ns: 0.0,
                sessions: 1,
                probes: 2000,
                failed_runs,
                problems: 0,
                healthy: failed_runs == 0,
                vendor_violations: None,
            },
        }
    }

    fn steady(name: &str, testbed: &str, days: std::ops::Range<i64>) -> Vec<StoredRow> {
        days.map(|d| night(name, testbed, d, 149.0 + 0.1 * (d % 3) as f64, 0)).collect()
    }

    #[test]
    fn studies_of_other_names_or_testbeds_are_series_of_their_own() {
        let mut rows = steady("nightly", "sim", 0..10);
        rows.push(night("nightly-big", "sim", 10, 20_145.0, 0));
        rows.push(night("nightly", "lab", 11, 400.0, 0));
        let t = trend(&rows, &[]);
        assert!(t.changes.is_empty(), "{:?}", t.changes);
        let p50: Vec<(String, String, usize)> = t
            .series
            .iter()
            .filter(|s| s.statistic == "p50")
            .map(|s| (s.identity.name.clone(), s.identity.testbed.clone(), s.points.len()))
            .collect();
        assert_eq!(
            p50,
            [
                ("nightly".to_string(), "lab".to_string(), 1),
                ("nightly".to_string(), "sim".to_string(), 10),
                ("nightly-big".to_string(), "sim".to_string(), 1)
            ]
        );
        // The same night in the nightly's own series is a change, and a regression.
        let mut slower = steady("nightly", "sim", 0..10);
        slower.extend((10..13).map(|d| night("nightly", "sim", d, 20_145.0, 0)));
        let t = trend(&slower, &[]);
        assert!(t.regressions().count() == 2 && t.changes.iter().all(|c| c.identity.name == "nightly"), "{t:?}");
        // Acknowledged (a new compiler, say): the same changes, with the reason, and no
        // regression; the nights after it are judged against the new level.
        let ack = Annotation { study: "nightly-10".into(), reason: "new compiler".into(), time: Micros(0) };
        let t = trend(&slower, &[ack]);
        assert_eq!(t.regressions().count(), 0, "{t:?}");
        assert!(t.changes.len() == 2 && t.changes.iter().all(|c| c.acknowledged.as_deref() == Some("new compiler")));
    }

    #[test]
    fn a_study_whose_runs_failed_is_never_judged_on() {
        let mut rows = steady("nightly", "sim", 0..10);
        rows.push(night("nightly", "sim", 10, 20_145.0, 2));
        let t = trend(&rows, &[]);
        assert_eq!(t.regressions().count(), 0, "{t:?}");
        assert_eq!(t.series[0].points.len(), 10);
        assert_eq!(t.left_out.len(), 1);
        assert_eq!((t.left_out[0].study.as_str(), t.left_out[0].failed_runs), ("nightly-10", 2));
    }
}

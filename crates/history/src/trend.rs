//! Trend changes: a series of nightly figures (a program's median at a level, night by night) split
//! by [`jumpavg`](super::jumpavg), each boundary between groups reported as a change with its size
//! and a 95 % interval of it; the history's trend ([`trend`]): every series of the store, its
//! changes, and how the latest is judged ([`Gates`]): a regression or an improvement when its
//! shift exceeds both the smallest shift that matters and k times the series' night-to-night
//! noise, its interval excluding zero; a series too noisy for that is flagged with the nights or
//! sessions it would need. A series is one study's (its [`StudyIdentity`]: name and testbed)
//! program, level and statistic: the nights of another study are never compared with it. A study
//! whose runs failed is never judged on.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::identity::StudyIdentity;
use super::jumpavg::{Group, classify};
use super::store::StoredRow;
use latency_results::history::row::{Annotation, Confirmation, HEADLINE};

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
    /// Bring-ups the figure pools.
    #[serde(default)]
    pub sessions: u32,
    /// The night this study re-measured to confirm a regression, if it is a confirmation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirms: Option<String>,
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
    /// Night-to-night noise, ns: the pooled sample standard deviation of the nights a change is
    /// judged against (those before the latest change, since the last acknowledged one) and of
    /// the nights of its new level, so that a series jumping between levels (reset modes landing
    /// at random) has the noise of its jumps wherever jumpavg draws its groups; none before three
    /// nights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise_ns: Option<f64>,
    /// Where the series is too noisy to judge a shift of the smallest that matters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noisy: Option<Noisy>,
}

/// A series whose noise hides a shift of the smallest that matters: `noise_k` × noise is above
/// it. What would make it judgeable: as many nights at a new level (their average's noise falls
/// as 1/√nights), or as many sessions a night (a night's noise is mostly its bring-ups').
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Noisy {
    /// The smallest shift the gates can tell from noise in one night, ns (`noise_k` × noise).
    pub detectable_ns: f64,
    /// Nights at a new level it would take.
    pub nights_needed: u64,
    /// Or sessions a night.
    pub sessions_needed: u64,
}

/// How a series' changes are judged (a plan's `trend:`, `orchestrate trend`'s options).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gates {
    /// Smallest shift of the median that matters, ns.
    pub median_shift_ns: f64,
    /// Smallest shift of the p99 that matters, ns.
    pub p99_shift_ns: f64,
    /// A shift must also exceed this many times the series' night-to-night noise.
    pub noise_k: f64,
    /// No judgement of a series with fewer nights.
    pub min_nights: usize,
    /// A regression alerts only once a confirmation study agrees with it (`nightly` re-measures
    /// the programs of a night that regressed).
    pub confirm: bool,
}

impl Default for Gates {
    /// 3 ns on the median, 10 ns on the p99 (the regression check's defaults), 3 × the noise,
    /// five nights, no confirmation.
    fn default() -> Self {
        Gates { median_shift_ns: 3.0, p99_shift_ns: 10.0, noise_k: 3.0, min_nights: 5, confirm: false }
    }
}

impl Gates {
    /// The gates `plan` judges its series with: its `trend:` section (whose thresholds default to
    /// its `regression`'s), else the defaults with its `regression` thresholds.
    pub fn of_plan(plan: Option<&latency_plan::Plan>) -> Gates {
        let mut g = Gates::default();
        if let Some(r) = plan.and_then(|p| p.regression.as_ref()) {
            (g.median_shift_ns, g.p99_shift_ns) = (r.median_shift_ns, r.p99_shift_ns);
        }
        if let Some(t) = plan.and_then(|p| p.trend.as_ref()) {
            g = Gates {
                median_shift_ns: t.median_shift_ns,
                p99_shift_ns: t.p99_shift_ns,
                noise_k: t.noise_k,
                min_nights: t.min_nights as usize,
                confirm: t.confirm.is_some(),
            };
        }
        g
    }

    /// The smallest shift that matters for `statistic` (`p50`, `p99`).
    pub fn threshold_ns(&self, statistic: &str) -> f64 {
        if statistic == "p50" { self.median_shift_ns } else { self.p99_shift_ns }
    }
}

/// How the latest change of a series is judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Judgement {
    /// Slower beyond the gates.
    Regression,
    /// Faster beyond the gates.
    Improvement,
    /// Within the gates: smaller than what matters, than the noise, or its interval spans zero.
    Within,
    /// The series is too noisy to judge at the smallest shift that matters ([`Series::noisy`]).
    Noisy,
    /// Fewer nights than [`Gates::min_nights`], or none sharing a group yet: not judged.
    TooFewNights,
    /// An earlier change: the series has moved on since.
    Earlier,
    /// Its first study was acknowledged as a new level (`history annotate`).
    Acknowledged,
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
    /// How it is judged.
    pub judgement: Judgement,
    /// Whether its new level holds a confirmation study of one of its nights: the level was
    /// measured again, and the confirmation belongs to it.
    #[serde(default)]
    pub confirmed: bool,
    /// An alert: the latest change judged a regression, and confirmed where the gates ask for it.
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

    /// The programs whose series regressed, unconfirmed, with night `study` in the new level: what
    /// a confirmation of that night measures again. Sorted, each once.
    pub fn unconfirmed(&self, study: &str) -> Vec<String> {
        let mut programs: Vec<String> = self
            .changes
            .iter()
            .filter(|c| c.latest && c.judgement == Judgement::Regression && !c.confirmed)
            .filter(|c| {
                self.series
                    .iter()
                    .any(|s| s.key() == c.key() && s.points[c.change.index..].iter().any(|p| p.study == study))
            })
            .map(|c| c.program.clone())
            .collect();
        programs.sort();
        programs.dedup();
        programs
    }
}

/// The trend of the headline rows of a history: per study identity, program, level and statistic,
/// the series in time order (ties by when the studies ended, then by id), its jumpavg groups and
/// changes, the latest judged by `gates`. A night whose figure is not finite (no estimate) is left
/// out of the series; a study that is not healthy (failed runs or problems), of every series
/// ([`Trend::left_out`]). A change whose first study is acknowledged (`annotations`) is reported
/// with the reason, never as a regression; `confirmations` say which studies re-measured which
/// nights.
pub fn trend(rows: &[StoredRow], annotations: &[Annotation], confirmations: &[Confirmation], gates: Gates) -> Trend {
    let confirms: BTreeMap<&str, &str> =
        confirmations.iter().map(|c| (c.study.as_str(), c.confirms.as_str())).collect();
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
                    sessions: r.row.sessions,
                    confirms: confirms.get(r.key.study.as_str()).map(|s| s.to_string()),
                })
                .filter(|p| p.value_ns.is_finite())
                .collect();
            let values: Vec<f64> = points.iter().map(|p| p.value_ns).collect();
            let split = classify(&values, None);
            let found = changes_between(&points, &split);
            let groups = split.iter().map(|g| (g.start, g.avg)).collect();
            // The reference nights: from the last acknowledged change to the latest change.
            let acked = |c: &Change| annotations.iter().any(|a| a.study == c.study);
            let latest_at = found.last().filter(|c| !acked(c)).map_or(values.len(), |c| c.index);
            let since = found.iter().filter(|c| acked(c) && c.index < latest_at).map(|c| c.index).max().unwrap_or(0);
            let noise_ns = pooled_sd(&[&values[since..latest_at], &values[latest_at..]]);
            let threshold = gates.threshold_ns(statistic);
            let sessions = points.last().map_or(1, |p| p.sessions.max(1));
            let noisy = noise_ns.and_then(|sd| noisy_series(sd, gates.noise_k, threshold, sessions));
            let n = found.len();
            all_changes.extend(found.into_iter().enumerate().map(|(k, change)| {
                let acknowledged = annotations.iter().find(|a| a.study == change.study).map(|a| a.reason.clone());
                let latest = k + 1 == n;
                let judgement = if acknowledged.is_some() {
                    Judgement::Acknowledged
                } else if !latest {
                    Judgement::Earlier
                } else {
                    judge(&change, points.len(), latest_at - since, noise_ns, threshold, &gates)
                };
                // The new level holds a study that re-measured one of its other nights.
                let level_studies = &points[change.index..];
                let confirmed = level_studies
                    .iter()
                    .any(|p| p.confirms.as_deref().is_some_and(|night| level_studies.iter().any(|q| q.study == night)));
                SeriesChange {
                    identity: identity.clone(),
                    program: program.to_string(),
                    level: level.map(str::to_string),
                    statistic: statistic.to_string(),
                    regression: judgement == Judgement::Regression && (confirmed || !gates.confirm),
                    judgement,
                    confirmed,
                    latest,
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
                noise_ns,
                noisy,
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

/// The pooled sample standard deviation of `parts` (each about its own mean); none with fewer
/// than two degrees of freedom.
fn pooled_sd(parts: &[&[f64]]) -> Option<f64> {
    let (mut squares, mut dof) = (0.0, 0usize);
    for p in parts.iter().filter(|p| p.len() > 1) {
        let mean = p.iter().sum::<f64>() / p.len() as f64;
        squares += p.iter().map(|v| (v - mean).powi(2)).sum::<f64>();
        dof += p.len() - 1;
    }
    (dof >= 2).then(|| (squares / dof as f64).sqrt())
}

/// Whether a series of night-to-night noise `sd` is too noisy for a shift of `threshold`, and
/// what it would take: `k·sd/√n ≤ threshold` for `n` nights, or as many times `sessions`.
fn noisy_series(sd: f64, k: f64, threshold: f64, sessions: u32) -> Option<Noisy> {
    let detectable_ns = k * sd;
    if detectable_ns <= threshold {
        return None;
    }
    let factor = if threshold > 0.0 { (detectable_ns / threshold).powi(2) } else { f64::INFINITY };
    let need = |x: f64| if x.is_finite() { x.ceil() as u64 } else { u64::MAX };
    Some(Noisy { detectable_ns, nights_needed: need(factor), sessions_needed: need(factor * f64::from(sessions)) })
}

/// The latest change of a series of `nights`, judged by `gates`: beyond the threshold and
/// `noise_k` times the noise of its new level's average, its interval excluding zero.
/// The shift between the averages of `reference` nights and of the new level's has the noise
/// `sd √(1/reference + 1/new)`: a series too noisy for the threshold in one night is judged once
/// the new level has the nights it needs.
fn judge(c: &Change, nights: usize, reference: usize, noise: Option<f64>, threshold: f64, gates: &Gates) -> Judgement {
    let Some(sd) = noise.filter(|_| nights >= gates.min_nights && reference > 0) else {
        return Judgement::TooFewNights;
    };
    let new = (nights - c.index).max(1) as f64;
    let level_noise = sd * (1.0 / reference as f64 + 1.0 / new).sqrt();
    if gates.noise_k * level_noise > threshold {
        return Judgement::Noisy;
    }
    let beyond = |shift: f64| shift > threshold && shift > gates.noise_k * level_noise;
    if beyond(c.shift_ns) && c.ci95_ns[0] > 0.0 {
        Judgement::Regression
    } else if beyond(-c.shift_ns) && c.ci95_ns[1] < 0.0 {
        Judgement::Improvement
    } else {
        Judgement::Within
    }
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
        let t = trend(&rows, &[], &[], Gates::default());
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
        let t = trend(&slower, &[], &[], Gates::default());
        assert!(t.regressions().count() == 2 && t.changes.iter().all(|c| c.identity.name == "nightly"), "{t:?}");
        // Acknowledged (a new compiler, say): the same changes, with the reason, and no
        // regression; the nights after it are judged against the new level.
        let ack = Annotation { study: "nightly-10".into(), reason: "new compiler".into(), time: Micros(0) };
        let t = trend(&slower, &[ack], &[], Gates::default());
        assert_eq!(t.regressions().count(), 0, "{t:?}");
        assert!(t.changes.len() == 2 && t.changes.iter().all(|c| c.acknowledged.as_deref() == Some("new compiler")));
    }

    #[test]
    fn a_study_whose_runs_failed_is_never_judged_on() {
        let mut rows = steady("nightly", "sim", 0..10);
        rows.push(night("nightly", "sim", 10, 20_145.0, 2));
        let t = trend(&rows, &[], &[], Gates::default());
        assert_eq!(t.regressions().count(), 0, "{t:?}");
        assert_eq!(t.series[0].points.len(), 10);
        assert_eq!(t.left_out.len(), 1);
        assert_eq!((t.left_out[0].study.as_str(), t.left_out[0].failed_runs), ("nightly-10", 2));
    }

    /// Nights `days` of `nightly` at `values`, one per day from `first`.
    fn nights(first: i64, values: &[f64]) -> Vec<StoredRow> {
        values.iter().enumerate().map(|(i, &v)| night("nightly", "sim", first + i as i64, v, 0)).collect()
    }

    fn latest_p50(t: &Trend) -> Option<&SeriesChange> {
        t.changes.iter().find(|c| c.latest && c.statistic == "p50")
    }

    #[test]
    fn a_change_is_judged_against_the_threshold_and_the_series_noise() {
        // Twenty nights alternating 149 and 151 ns before the change (squares about their mean
        // summing to 20, 19 degrees of freedom), three equal ones after (0, 2): the noise
        // √(20/21) = 0.9759 ns.
        let steady: Vec<f64> = (0..20).map(|i| if i % 2 == 0 { 149.0 } else { 151.0 }).collect();
        let sd = (20.0f64 / 21.0).sqrt();
        let gates = Gates { median_shift_ns: 5.0, ..Gates::default() };
        for (step, want) in [(12.0, Judgement::Regression), (-12.0, Judgement::Improvement)] {
            let mut rows = nights(0, &steady);
            rows.extend(nights(20, &[150.0 + step; 3]));
            let t = trend(&rows, &[], &[], gates);
            let s = t.series.iter().find(|s| s.statistic == "p50").unwrap();
            assert!((s.noise_ns.unwrap() - 0.9759).abs() < 1e-4, "{:?}", s.noise_ns);
            let c = latest_p50(&t).unwrap();
            assert_eq!((c.change.index, c.judgement), (20, want), "{c:?}");
            assert_eq!(c.regression, want == Judgement::Regression);
        }
        // The rule itself, on a change of one night after twenty as jumpavg reports it: the
        // shift's noise is 0.9759 √(1/20 + 1) = 1 ns; 4 ns is under the 5 ns that matter, 8 ns is
        // over both it and 3 × 1 ns, unless its interval reaches zero.
        let change = |shift: f64, lo: f64| Change {
            study: "n".into(),
            time: String::new(),
            index: 20,
            before_ns: 150.0,
            after_ns: 150.0 + shift,
            shift_ns: shift,
            ci95_ns: [lo, 2.0 * shift - lo],
        };
        let j = |c: &Change, gates: &Gates| judge(c, 21, 20, Some(sd), gates.median_shift_ns, gates);
        assert_eq!(j(&change(4.0, 3.5), &gates), Judgement::Within, "under the threshold");
        assert_eq!(j(&change(8.0, 7.5), &gates), Judgement::Regression);
        assert_eq!(j(&change(8.0, -0.1), &gates), Judgement::Within, "its interval reaches zero");
        let strict = Gates { noise_k: 8.0, ..gates };
        assert_eq!(j(&change(8.0, 7.5), &strict), Judgement::Noisy, "8 × the noise (8 ns) is over the 5 ns");
        assert_eq!(judge(&change(8.0, 7.5), 4, 3, Some(sd), 5.0, &gates), Judgement::TooFewNights);
        assert_eq!(judge(&change(8.0, 7.5), 21, 20, None, 5.0, &gates), Judgement::TooFewNights);
    }

    #[test]
    fn a_series_too_noisy_for_the_threshold_says_what_it_would_take() {
        // One night at the new level: the noise is the twenty before it, √(20/19) = 1.0260 ns,
        // the shift's 1.026 √(1/20 + 1) = 1.051 ns; 3 × that is above a 2.5 ns threshold. For the
        // series: 3 × 1.026 = 3.078 ns, (3.078 / 2.5)² = 1.516, so two nights at a new level, or
        // two sessions a night (this one has one).
        let steady: Vec<f64> = (0..20).map(|i| if i % 2 == 0 { 149.0 } else { 151.0 }).collect();
        let gates = Gates { median_shift_ns: 2.5, ..Gates::default() };
        let mut rows = nights(0, &steady);
        rows.extend(nights(20, &[162.0]));
        let t = trend(&rows, &[], &[], gates);
        let s = t.series.iter().find(|s| s.statistic == "p50").unwrap();
        let noisy = s.noisy.unwrap();
        assert!((noisy.detectable_ns - 3.0780).abs() < 1e-4, "{noisy:?}");
        assert_eq!((noisy.nights_needed, noisy.sessions_needed), (2, 2));
        let c = latest_p50(&t).unwrap();
        assert_eq!((c.change.index, c.judgement, c.regression), (20, Judgement::Noisy, false), "flagged, not alerted");
        // A second night at the new level (the noise now √(20/20) = 1 ns): the shift's noise is
        // √(1/20 + 1/2) = 0.742 ns, 3 × that 2.22 ns, under the threshold.
        rows.extend(nights(21, &[162.0]));
        let c = latest_p50(&trend(&rows, &[], &[], gates)).cloned().unwrap();
        assert_eq!((c.change.index, c.judgement, c.regression), (20, Judgement::Regression, true));
        // Pure arithmetic: 10 × 1 ns against 2 ns is 25 nights, or 75 sessions of a night of 3.
        let n = noisy_series(1.0, 10.0, 2.0, 3).unwrap();
        assert_eq!((n.nights_needed, n.sessions_needed), (25, 75));
        assert!(noisy_series(1.0, 3.0, 3.0, 1).is_none(), "exactly at the threshold is judged");
    }

    #[test]
    fn a_series_jumping_between_levels_is_noisy_where_a_step_is_not() {
        // Reset modes 30 ns apart landing at random: the nights hold both levels, and the noise is
        // theirs; after one step of the same size it is not.
        let modes: Vec<f64> = (0..16).map(|i| if (i * 7 + 3) % 5 < 2 { 181.0 } else { 151.0 }).collect();
        let t = trend(&nights(0, &modes), &[], &[], Gates::default());
        let s = t.series.iter().find(|s| s.statistic == "p50").unwrap();
        assert!(s.noise_ns.unwrap() > 10.0 && s.noisy.is_some(), "{s:?}");
        assert!(t.regressions().next().is_none());
        let step: Vec<f64> = (0..16).map(|i| if i < 12 { 151.0 + 0.1 * f64::from(i % 2) } else { 181.0 }).collect();
        let t = trend(&nights(0, &step), &[], &[], Gates::default());
        let s = t.series.iter().find(|s| s.statistic == "p50").unwrap();
        assert!(s.noise_ns.unwrap() < 0.1 && s.noisy.is_none(), "{s:?}");
        assert_eq!(latest_p50(&t).map(|c| (c.change.index, c.regression)), Some((12, true)));
        assert_eq!(pooled_sd(&[&[1.0, 2.0], &[5.0]]), None);
        assert_eq!(pooled_sd(&[&[1.0, 2.0, 3.0], &[7.0]]), Some(1.0));
        assert_eq!(pooled_sd(&[&[1.0, 3.0], &[7.0, 9.0]]), Some(2.0f64.sqrt()), "squares 2 + 2 over 1 + 1");
    }

    #[test]
    fn a_regression_alerts_once_a_confirmation_of_its_night_agrees() {
        let gates = Gates { confirm: true, ..Gates::default() };
        let base: Vec<f64> = (0..10).map(|i| 149.0 + 0.1 * f64::from(i % 3)).collect();
        let mut rows = nights(0, &base);
        rows.push(night("nightly", "sim", 10, 169.0, 0));
        let t = trend(&rows, &[], &[], gates);
        let c = latest_p50(&t).unwrap();
        assert_eq!((c.judgement, c.confirmed, c.regression), (Judgement::Regression, false, false), "not yet");
        assert_eq!(t.regressions().count(), 0);
        // The confirmation measures the same: confirmed, and an alert.
        let confirm = |value: f64| {
            let mut rows = rows.clone();
            rows.push(night("nightly", "sim", 11, value, 0));
            let c = Confirmation { study: "nightly-11".into(), confirms: "nightly-10".into(), time: Micros(0) };
            trend(&rows, &[], &[c], gates)
        };
        let t = confirm(169.2);
        let c = latest_p50(&t).unwrap();
        assert_eq!((c.change.index, c.confirmed, c.regression), (10, true, true), "{c:?}");
        assert_eq!(t.series[0].points[11].confirms.as_deref(), Some("nightly-10"));
        // It measures the old level: no alert.
        let t = confirm(149.1);
        assert_eq!(t.regressions().count(), 0, "{:?}", t.changes);
    }
}

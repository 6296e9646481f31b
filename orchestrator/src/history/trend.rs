//! Trend changes: a series of nightly figures (a program's median at a level, night by night) split
//! by [`jumpavg`](super::jumpavg), each boundary between groups reported as a change with its size
//! and a 95 % interval of it.

use serde::{Deserialize, Serialize};

use super::jumpavg::{Group, classify};

/// One night's figure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// The study it comes from.
    pub study: String,
    /// When the study started (UTC, RFC 3339).
    pub time: String,
    /// The figure, ns.
    pub value_ns: f64,
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
    let groups = classify(&values, unit);
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

//! Reset modes by evidence: session medians are split where the gap between neighbours is larger
//! than the sessions themselves vary.
//!
//! How much a session median moves between bring-ups without a mode change is measured, not
//! assumed: the null calibration's session medians (the same bring-up, no program) and the
//! sessions within each candidate mode give a pooled within-mode standard deviation σ. A gap
//! splits two modes when it is at least `min_gap_sigmas` × σ and at least `min_separation_ns` (a
//! floor against splitting on nothing when the sessions agree to a fraction of a nanosecond). The
//! split and σ are refined together until they agree. Each split is reported with its gap in ns and
//! in units of σ.

use std::ops::Range;

use super::stats::gap_clusters;

/// How the sessions of a program were split into modes.
#[derive(Clone, Debug, PartialEq)]
pub struct Split {
    /// Index ranges of the ascending session medians, one per mode.
    pub clusters: Vec<Range<usize>>,
    /// Pooled within-mode standard deviation of session medians, ns (none without two sessions
    /// anywhere).
    pub within_sd_ns: Option<f64>,
    /// The gap a split needed, ns.
    pub threshold_ns: f64,
}

/// Split ascending session medians `sorted`; `null_medians` are the calibrating null's session
/// medians (evidence of the bring-up spread).
pub fn split(sorted: &[f64], null_medians: &[f64], min_separation_ns: f64, min_gap_sigmas: f64) -> Split {
    let mut clusters: Vec<Range<usize>> = std::iter::once(0..sorted.len()).collect();
    let mut within = pooled_sd(&[null_medians]);
    let mut threshold = threshold_ns(within, min_separation_ns, min_gap_sigmas);
    // Start from the null's spread alone, then refine with the program's own modes.
    for _ in 0..8 {
        let next = gap_clusters(sorted, threshold);
        let groups: Vec<&[f64]> =
            std::iter::once(null_medians).chain(next.iter().map(|c| &sorted[c.clone()])).collect();
        let next_within = pooled_sd(&groups);
        let next_threshold = threshold_ns(next_within, min_separation_ns, min_gap_sigmas);
        let stable = next == clusters && next_threshold == threshold;
        clusters = next;
        within = next_within;
        threshold = next_threshold;
        if stable {
            break;
        }
    }
    if sorted.is_empty() {
        clusters.clear();
    }
    Split { clusters, within_sd_ns: within, threshold_ns: threshold }
}

fn threshold_ns(within: Option<f64>, floor: f64, sigmas: f64) -> f64 {
    within.map_or(floor, |s| (sigmas * s).max(floor))
}

/// Standard deviation pooled over groups (each about its own mean); none without a degree of
/// freedom.
fn pooled_sd(groups: &[&[f64]]) -> Option<f64> {
    let (mut ss, mut dof) = (0.0, 0usize);
    for g in groups.iter().filter(|g| g.len() >= 2) {
        let mean = g.iter().sum::<f64>() / g.len() as f64;
        ss += g.iter().map(|x| (x - mean).powi(2)).sum::<f64>();
        dof += g.len() - 1;
    }
    (dof > 0).then(|| (ss / dof as f64).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_12_ns_apart_split_when_sessions_repeat_within_one() {
        // The case: truth 107 and 119, sessions of one mode within 1 ns, null sessions
        // within 0.5 ns; a fixed 15 ns gap would merge them.
        let sorted = [106.6, 107.0, 107.5, 118.7, 119.2];
        let s = split(&sorted, &[24.0, 24.3, 23.9, 24.2, 24.1], 3.0, 8.0);
        assert_eq!(s.clusters, vec![0..3, 3..5]);
        // Pooled sd over the null (0.158, 4 dof), the low mode (0.451, 2 dof) and the high (0.354, 1).
        let want = ((0.1f64 + 0.406_667 + 0.125) / 7.0).sqrt();
        assert!((s.within_sd_ns.unwrap() - want).abs() < 1e-3, "{:?} vs {want}", s.within_sd_ns);
        // 8 σ = 2.4 ns: the 3 ns floor is the threshold.
        assert_eq!(s.threshold_ns, 3.0);
        // With a 1 ns floor, 8 σ rules.
        let finer = split(&sorted, &[24.0, 24.3, 23.9, 24.2, 24.1], 1.0, 8.0);
        assert!((finer.threshold_ns - 8.0 * want).abs() < 1e-2, "{finer:?}");
    }

    #[test]
    fn one_mode_stays_one_and_the_floor_holds() {
        // Five sessions within 0.4 ns and a null within 0.1: the floor (3 ns) keeps them together
        // although 8 σ is less than their range.
        let s = split(&[149.0, 149.1, 149.2, 149.25, 149.4], &[24.0, 24.02, 24.05, 24.01, 24.03], 3.0, 8.0);
        assert_eq!(s.clusters, vec![0..5]);
        assert_eq!(s.threshold_ns, 3.0);
        // Sessions that vary by 2 ns (as the null's do) need a gap of 16 ns: 10 is not enough.
        let s = split(&[100.0, 102.0, 104.0, 114.0, 115.0], &[20.0, 22.0, 18.0], 3.0, 8.0);
        assert_eq!(s.clusters, vec![0..5], "{s:?}");
        assert!(split(&[], &[], 3.0, 8.0).clusters.is_empty());
    }
}

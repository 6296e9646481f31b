//! Reset modes by evidence: session medians are split where the gap between neighbours is larger
//! than the sessions themselves vary.
//!
//! How much a session median moves between bring-ups without a mode change is measured, not
//! assumed: the standard deviation σ of the program's own session medians about their mode's mean,
//! pooled over its modes. A gap splits two modes when it is at least `min_gap_sigmas` × σ and at
//! least `min_separation_ns` (a floor against splitting on nothing when the sessions agree to a
//! fraction of a nanosecond). The split and σ decide each other, so the split is the one with the
//! most modes that agrees with its own σ: the k largest gaps split, and no other, at the threshold
//! that split's σ gives. The null calibration's session medians are not pooled in: δ̂ is one value
//! subtracted from every session of a program, so the null's bring-up scatter does not move one
//! calibrated session median against another (it enters the intervals, not the split). They are
//! the evidence only where the program's split leaves no degree of freedom (every mode a single
//! session). Each split is reported with its gap in ns and in units of σ.

use std::ops::Range;

use super::stats::gap_clusters;

/// How the sessions of a program were split into modes.
#[derive(Clone, Debug, PartialEq)]
pub struct Split {
    /// Index ranges of the ascending session medians, one per mode.
    pub clusters: Vec<Range<usize>>,
    /// Pooled within-mode standard deviation of the program's session medians (the null's where
    /// every mode is a single session), ns; none without two sessions anywhere.
    pub within_sd_ns: Option<f64>,
    /// The gap a split needed, ns.
    pub threshold_ns: f64,
}

/// Split ascending session medians `sorted`; `null_medians` are the calibrating null's session
/// medians (evidence of the bring-up spread where the program's own sessions give none).
pub fn split(sorted: &[f64], null_medians: &[f64], min_separation_ns: f64, min_gap_sigmas: f64) -> Split {
    if sorted.is_empty() {
        let within = pooled_sd(&[null_medians]);
        return Split {
            clusters: Vec::new(),
            within_sd_ns: within,
            threshold_ns: threshold_ns(within, min_separation_ns, min_gap_sigmas),
        };
    }
    // Gaps, largest first (ties: the lower gap first, for a deterministic order).
    let mut gaps: Vec<usize> = (1..sorted.len()).collect();
    gaps.sort_by(|&a, &b| (sorted[b] - sorted[b - 1]).total_cmp(&(sorted[a] - sorted[a - 1])).then(a.cmp(&b)));
    let mut best = None;
    for k in 0..sorted.len() {
        let mut cuts: Vec<usize> = gaps[..k].to_vec();
        cuts.sort_unstable();
        let clusters: Vec<Range<usize>> = std::iter::once(0)
            .chain(cuts.iter().copied())
            .zip(cuts.iter().copied().chain(std::iter::once(sorted.len())))
            .map(|(a, b)| a..b)
            .collect();
        let groups: Vec<&[f64]> = clusters.iter().map(|c| &sorted[c.clone()]).collect();
        let within = pooled_sd(&groups).or_else(|| pooled_sd(&[null_medians]));
        let threshold = threshold_ns(within, min_separation_ns, min_gap_sigmas);
        // The split agrees with its σ: exactly its gaps reach the threshold.
        if gap_clusters(sorted, threshold) == clusters {
            best = Some(Split { clusters, within_sd_ns: within, threshold_ns: threshold });
        }
    }
    best.unwrap_or_else(|| {
        let within = pooled_sd(&[sorted]).or_else(|| pooled_sd(&[null_medians]));
        Split {
            clusters: std::iter::once(0..sorted.len()).collect(),
            within_sd_ns: within,
            threshold_ns: threshold_ns(within, min_separation_ns, min_gap_sigmas),
        }
    })
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
        // Truth 107 and 119, sessions of one mode within 1 ns; a fixed 15 ns gap would merge them.
        let sorted = [106.6, 107.0, 107.5, 118.7, 119.2];
        let s = split(&sorted, &[24.0, 24.3, 23.9, 24.2, 24.1], 3.0, 8.0);
        assert_eq!(s.clusters, vec![0..3, 3..5]);
        // Pooled sd over the low mode (squares about its mean 0.406 667, 2 dof) and the high
        // (0.125, 1 dof); the null's sessions do not enter.
        let want = ((0.406_667f64 + 0.125) / 3.0).sqrt();
        assert!((s.within_sd_ns.unwrap() - want).abs() < 1e-3, "{:?} vs {want}", s.within_sd_ns);
        // 8 σ = 3.37 ns, above the 3 ns floor.
        assert!((s.threshold_ns - 8.0 * want).abs() < 1e-2, "{s:?}");
        // With a 4 ns floor, the floor rules.
        assert_eq!(split(&sorted, &[], 4.0, 8.0).threshold_ns, 4.0);
    }

    #[test]
    fn modes_8_ns_apart_split_on_the_programs_own_scatter() {
        // Sessions 99.2, 100.0, 100.9 and 108.3, 109.1: within the modes, squares 1.446 667 (2 dof)
        // and 0.32 (1 dof), σ = √(1.766 667 / 3) = 0.767, so 8 σ = 6.14 ns and the 7.4 ns gap
        // splits. The null's sessions (20, 22.5, 18.4, 21, 23: squares 14.008, 4 dof) pooled in
        // would give σ = √(15.774 667 / 7) = 1.50 and a 12 ns threshold: one mode.
        let sorted = [99.2, 100.0, 100.9, 108.3, 109.1];
        let s = split(&sorted, &[20.0, 22.5, 18.4, 21.0, 23.0], 3.0, 8.0);
        assert_eq!(s.clusters, vec![0..3, 3..5], "{s:?}");
        let want = (1.766_667f64 / 3.0).sqrt();
        assert!((s.within_sd_ns.unwrap() - want).abs() < 1e-3, "{s:?}");
        assert!((s.threshold_ns - 8.0 * want).abs() < 1e-2, "{s:?}");
    }

    #[test]
    fn one_mode_stays_one_and_the_floor_holds() {
        // Five sessions within 0.4 ns: the floor (3 ns) keeps them together although 8 σ (1.21 ns)
        // is less than their range.
        let s = split(&[149.0, 149.1, 149.2, 149.25, 149.4], &[24.0, 24.02, 24.05, 24.01, 24.03], 3.0, 8.0);
        assert_eq!(s.clusters, vec![0..5]);
        assert_eq!(s.threshold_ns, 3.0);
        // Sessions that vary by 2 ns: split at the 10 ns gap, the low mode's squares 8 (2 dof) and
        // the high's 0.5 (1 dof) give σ 1.68 and a 13.5 ns threshold; 10 is not enough.
        let s = split(&[100.0, 102.0, 104.0, 114.0, 115.0], &[20.0, 22.0, 18.0], 3.0, 8.0);
        assert_eq!(s.clusters, vec![0..5], "{s:?}");
        assert!(split(&[], &[], 3.0, 8.0).clusters.is_empty());
    }

    #[test]
    fn single_sessions_are_judged_on_the_nulls_scatter() {
        // Two sessions 10 ns apart, no degree of freedom of their own: the null's σ (sessions 20,
        // 22, 18: σ 2) needs 16 ns, so they stay one mode; null sessions within 0.2 (σ 0.1) let
        // the floor rule and split them.
        assert_eq!(split(&[100.0, 110.0], &[20.0, 22.0, 18.0], 3.0, 8.0).clusters, vec![0..2]);
        assert_eq!(split(&[100.0, 110.0], &[20.0, 20.1, 20.2], 3.0, 8.0).clusters, vec![0..1, 1..2]);
    }
}

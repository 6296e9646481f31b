//! Small statistics used by the pipeline, each tested against numbers computed independently.
//!
//! Quantile definition (used everywhere): linear interpolation between order statistics,
//! `Q(p) = x[⌊h⌋] + (h − ⌊h⌋)(x[⌊h⌋+1] − x[⌊h⌋])` with `h = (n − 1)p` on the sorted sample
//! (Hyndman & Fan type 7; numpy's and R's default).
//!
//! The samplers (normal, Gamma, Beta) are written here rather than taken from `rand_distr` so
//! that a seed gives bit-for-bit the same draws whatever the dependency versions: a resumed or
//! repeated study must reproduce its data exactly.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Human-readable statement of the quantile definition.
pub const QUANTILE_DEFINITION: &str =
    "linear interpolation between order statistics, h = (n - 1) p (Hyndman-Fan type 7, numpy/R default)";

/// Quantile `p` ∈ [0, 1] of an ascending sample; NaN for an empty one.
pub fn quantile_sorted(x: &[f64], p: f64) -> f64 {
    if x.is_empty() {
        return f64::NAN;
    }
    let h = (x.len() - 1) as f64 * p.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(x.len() - 1);
    x[lo] + (h - lo as f64) * (x[hi] - x[lo])
}

/// Median of a sample (sorts it in place). NaN for an empty sample.
pub fn median(x: &mut [f64]) -> f64 {
    if x.is_empty() {
        return f64::NAN;
    }
    x.sort_unstable_by(f64::total_cmp);
    quantile_sorted(x, 0.5)
}

/// Split ascending values into clusters wherever two neighbours are at least `min_gap` apart
/// (single-linkage). Returns the index ranges of the clusters.
pub fn gap_clusters(sorted: &[f64], min_gap: f64) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..sorted.len() {
        if sorted[i] - sorted[i - 1] >= min_gap {
            out.push(start..i);
            start = i;
        }
    }
    if !sorted.is_empty() {
        out.push(start..sorted.len());
    }
    out
}

/// Standard normal draw (Box–Muller).
pub fn normal(r: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = 1.0 - r.random::<f64>();
    let u2: f64 = r.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Gamma(shape, 1) draw (Marsaglia & Tsang), shape ≥ 1.
fn gamma(r: &mut ChaCha8Rng, shape: f64) -> f64 {
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = normal(r);
        let v = (1.0 + c * x).powi(3);
        if v <= 0.0 {
            continue;
        }
        let u: f64 = r.random();
        if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v;
        }
    }
}

/// Beta(a, b) draw, a, b ≥ 1.
fn beta(r: &mut ChaCha8Rng, a: f64, b: f64) -> f64 {
    let x = gamma(r, a);
    let y = gamma(r, b);
    x / (x + y)
}

/// Bootstrap 95 % confidence interval of quantile `p` of an ascending sample, with `resamples`
/// resamples.
///
/// In a resample of size n drawn with replacement, the k-th smallest value is `x[⌊nU⌋]` where U is
/// the k-th order statistic of n uniforms, distributed Beta(k, n − k + 1). Drawing U directly gives
/// the bootstrap distribution of the quantile (taken as the order statistic nearest to
/// h = (n − 1)p) at O(1) per resample instead of O(n).
pub fn bootstrap_ci(sorted: &[f64], p: f64, resamples: u32, rng: &mut ChaCha8Rng) -> [f64; 2] {
    let n = sorted.len();
    if n < 2 || resamples == 0 {
        let q = if n == 0 { f64::NAN } else { quantile_sorted(sorted, p) };
        return [q, q];
    }
    let k = ((n - 1) as f64 * p).round() as usize + 1;
    let mut draws: Vec<f64> = (0..resamples)
        .map(|_| {
            let u = beta(rng, k as f64, (n - k + 1) as f64);
            sorted[((u * n as f64) as usize).min(n - 1)]
        })
        .collect();
    draws.sort_unstable_by(f64::total_cmp);
    [quantile_sorted(&draws, 0.025), quantile_sorted(&draws, 0.975)]
}

/// Kolmogorov–Smirnov distance and Wasserstein-1 distance (ns) between two histograms with the
/// same bin width (their starts may differ by whole bins).
pub fn histogram_distances(a: &super::summary::Histogram, b: &super::summary::Histogram) -> Option<(f64, f64)> {
    if a.bin_ns != b.bin_ns || a.bin_ns <= 0.0 {
        return None;
    }
    let (na, nb) = (a.counts.iter().sum::<u64>() as f64, b.counts.iter().sum::<u64>() as f64);
    if na == 0.0 || nb == 0.0 {
        return None;
    }
    let start = a.start_ns.min(b.start_ns);
    let end = (a.start_ns + a.bin_ns * a.counts.len() as f64).max(b.start_ns + b.bin_ns * b.counts.len() as f64);
    let bins = ((end - start) / a.bin_ns).round() as usize;
    let at = |h: &super::summary::Histogram, i: usize| -> f64 {
        let offset = ((h.start_ns - start) / h.bin_ns).round() as isize;
        let j = i as isize - offset;
        if j >= 0 && (j as usize) < h.counts.len() { h.counts[j as usize] as f64 } else { 0.0 }
    };
    let (mut fa, mut fb, mut ks, mut w1) = (0.0, 0.0, 0.0f64, 0.0);
    for i in 0..bins {
        fa += at(a, i) / na;
        fb += at(b, i) / nb;
        ks = ks.max((fa - fb).abs());
        w1 += (fa - fb).abs() * a.bin_ns;
    }
    Some((ks, w1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::summary::Histogram;
    use rand::SeedableRng;

    #[test]
    fn quantiles_match_numpy_linear() {
        // numpy.percentile([1, 2, 3, 4, 10], [0, 25, 50, 90, 100]) = [1, 2, 3, 7.6, 10]
        let x = [1.0, 2.0, 3.0, 4.0, 10.0];
        let want = [(0.0, 1.0), (0.25, 2.0), (0.5, 3.0), (0.9, 7.6), (1.0, 10.0)];
        for (p, q) in want {
            assert!((quantile_sorted(&x, p) - q).abs() < 1e-12, "p{p}");
        }
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&mut []).is_nan());
    }

    #[test]
    fn clusters_split_at_large_gaps_only() {
        let x = [106.5, 107.0, 107.9, 137.2, 138.0];
        assert_eq!(gap_clusters(&x, 15.0), vec![0..3, 3..5]);
        assert_eq!(gap_clusters(&[148.0, 149.5, 150.2, 151.0], 15.0), vec![0..4]);
        assert!(gap_clusters(&[], 15.0).is_empty());
    }

    #[test]
    fn gamma_and_beta_have_their_textbook_moments() {
        let mut r = ChaCha8Rng::seed_from_u64(3);
        let n = 200_000;
        let g: Vec<f64> = (0..n).map(|_| gamma(&mut r, 4.0)).collect();
        let mean = g.iter().sum::<f64>() / n as f64;
        let var = g.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!((mean - 4.0).abs() < 0.03 && (var - 4.0).abs() < 0.08, "{mean} {var}");
        let b: Vec<f64> = (0..n).map(|_| beta(&mut r, 2.0, 6.0)).collect();
        let mean = b.iter().sum::<f64>() / n as f64;
        assert!((mean - 0.25).abs() < 0.002, "{mean}");
    }

    #[test]
    fn bootstrap_ci_of_a_normal_median_has_the_asymptotic_width() {
        // Median of n normal(0, σ) values: standard error ≈ 1.2533 σ / √n, so the 95 % interval
        // is about ±1.96 × that around the sample median.
        let mut r = ChaCha8Rng::seed_from_u64(9);
        let n = 20_000;
        let sigma = 10.0;
        let mut x: Vec<f64> = (0..n).map(|_| sigma * normal(&mut r)).collect();
        x.sort_unstable_by(f64::total_cmp);
        let [lo, hi] = bootstrap_ci(&x, 0.5, 4000, &mut r);
        let half = 1.96 * 1.2533 * sigma / (n as f64).sqrt();
        let m = quantile_sorted(&x, 0.5);
        assert!(lo < m && m < hi);
        assert!(((hi - lo) / 2.0 - half).abs() < 0.15 * half, "[{lo}, {hi}] vs ±{half}");
    }

    #[test]
    fn bootstrap_ci_agrees_with_brute_force_resampling() {
        let mut r = ChaCha8Rng::seed_from_u64(5);
        let mut x: Vec<f64> = (0..800).map(|_| (normal(&mut r) * 3.0).exp()).collect();
        x.sort_unstable_by(f64::total_cmp);
        for p in [0.5, 0.99] {
            let fast = bootstrap_ci(&x, p, 4000, &mut r);
            let mut qs: Vec<f64> = (0..4000)
                .map(|_| {
                    let mut s: Vec<f64> = (0..x.len()).map(|_| x[r.random_range(0..x.len())]).collect();
                    s.sort_unstable_by(f64::total_cmp);
                    quantile_sorted(&s, p)
                })
                .collect();
            qs.sort_unstable_by(f64::total_cmp);
            let slow = [quantile_sorted(&qs, 0.025), quantile_sorted(&qs, 0.975)];
            let width = slow[1] - slow[0];
            assert!(
                (fast[0] - slow[0]).abs() < 0.2 * width && (fast[1] - slow[1]).abs() < 0.2 * width,
                "p{p}: {fast:?} vs {slow:?}"
            );
        }
    }

    #[test]
    fn histogram_distances_by_hand() {
        let a = Histogram { start_ns: 0.0, bin_ns: 1.0, counts: vec![1, 1, 0, 0] };
        let b = Histogram { start_ns: 2.0, bin_ns: 1.0, counts: vec![1, 1] };
        // CDFs: a = .5, 1, 1, 1; b = 0, 0, .5, 1 → KS 1; W1 = .5 + 1 + .5 = 2 (a shift of 2 ns).
        assert_eq!(histogram_distances(&a, &b), Some((1.0, 2.0)));
        assert_eq!(histogram_distances(&a, &a), Some((0.0, 0.0)));
    }
}

//! Tail quantiles corrected for the measurement noise left in the per-probe estimates.
//!
//! The paper's per-probe estimate is the median of a probe's differentials over one session's
//! runs: its latency, which repeats, plus the median of the runs' noise, which does not. Pooling
//! those estimates over sessions keeps that noise (about 1.4 ns on the simulator), which blurs the
//! distribution: tails come out wider (p5 low, p99 high) and the median of a skewed distribution
//! moves. The corrected quantiles remove it in two steps:
//!
//! 1. **Fewer, better estimates.** A probe's latency repeats in every session of a mode, so its
//!    estimate is the median over all the mode's runs, each session first shifted to the mode's
//!    common session median (a bring-up moves every probe of a session alike). Five sessions of ten
//!    runs cut the noise by about √5.
//! 2. **Extrapolation to no noise** (SIMEX, simulation–extrapolation; Cook & Stefanski 1994). The
//!    noise left is observable: the medians of a probe's odd and of its even runs differ by noise
//!    alone, so half their difference has about the variance of the noise of the full median,
//!    except for a wander shared by a run's neighbouring probes, measured apart ([`noise_sd`]).
//!    The quantile is computed with the noise's standard deviation multiplied by s = 1 (as
//!    measured), 2 and 3 — the estimates' histogram convolved with a normal of the extra variance
//!    — and the curve `a + b √(c + s²)` through the three is extrapolated to s = 0
//!    ([`extrapolate`]). It is exact for a normal latency under normal noise, follows a quantile
//!    moved ∝ s² where the density is smooth and ∝ s at an edge, and, unlike a quadratic in s
//!    through the same points, does not over-correct a tail when the noise is a large share of
//!    the latency's spread (a quadratic takes 1.5 ns too much off the p99 of a normal latency of
//!    σ 4.5 ns under noise of 2.9 ns).
//!
//! The raw (paper) quantiles are reported beside the corrected ones. Where the extrapolated
//! quantiles come out of the order of their levels (noise as wide as the distribution, as with
//! the millisecond scheduling noise of round trips on a shared 2-core host), the extrapolation is
//! not trusted and the raw quantiles are the headline.

use super::stats::{grid_quantile, median};
use crate::network::Shifted;
use crate::runs::RunPairs;

/// Histogram bins per noise standard deviation in the convolution.
const BINS_PER_SD: f64 = 20.0;
/// Most bins of a histogram (a coarser bin is used beyond).
const MAX_BINS: usize = 1 << 18;

/// The noise of a per-probe estimate, from the half-differences `(median of odd runs − median of
/// even runs) / 2` of many probes and the estimates themselves, both in probe order. None without
/// at least 20 half-differences.
///
/// Where every run's noise is independent from probe to probe, the half-differences' spread is
/// the noise of a median over all runs. A noise that moves a run's neighbouring probes alike (a
/// slow wander with a phase of its own in every run) is not: what is left of it in the median over
/// all runs, and in the difference of the odd and even runs' medians, are two different slow
/// functions of the probe, whose variances differ from study to study by as much as the wander's
/// share of the noise. So the noise is measured in two parts: the part independent from probe to
/// probe from the differences between neighbouring half-differences (a slow wander cancels in
/// them; robust standard deviation, 1.4826 × MAD, over √2), and the slow part on the estimates
/// themselves ([`slow_variance`]), a probe's latency being independent of its neighbour's.
pub fn noise_sd(half_diffs: &[f64], estimates: &[f64]) -> Option<f64> {
    if half_diffs.len() < 20 {
        return None;
    }
    let steps: Vec<f64> = half_diffs.windows(2).map(|w| w[1] - w[0]).collect();
    let white = robust_sd(&steps) / std::f64::consts::SQRT_2;
    Some((white * white + slow_variance(estimates)).sqrt())
}

/// Probes in the moving average that finds the slow part of a sequence: 25 probes average a
/// wander of 150 probes' period (the testbed's) to 95 % of its amplitude.
pub const SLOW_WINDOW: usize = 25;

/// 1.4826 × the median absolute deviation.
fn robust_sd(x: &[f64]) -> f64 {
    let mut v = x.to_vec();
    let m = median(&mut v);
    v.iter_mut().for_each(|y| *y = (*y - m).abs());
    1.4826 * median(&mut v)
}

/// The variance of the slow part of `x` (in probe order): the variance of its moving average over
/// [`SLOW_WINDOW`] values less the variance independent values would give it (the variance of `x`
/// over the window), never below 0; values beyond 5 robust standard deviations are clipped. 0
/// for fewer than 4 windows of values.
pub fn slow_variance(x: &[f64]) -> f64 {
    let (n, w) = (x.len(), SLOW_WINDOW);
    if n < 4 * w {
        return 0.0;
    }
    let mut v = x.to_vec();
    let m = median(&mut v);
    let reach = 5.0 * robust_sd(x);
    let clipped: Vec<f64> = x.iter().map(|y| y.clamp(m - reach, m + reach)).collect();
    let mut sum: f64 = clipped[..w].iter().sum();
    let mut moving = Vec::with_capacity(n - w + 1);
    moving.push(sum / w as f64);
    for k in w..n {
        sum += clipped[k] - clipped[k - w];
        moving.push(sum / w as f64);
    }
    (variance(&moving) - variance(&clipped) / w as f64).max(0.0)
}

fn variance(x: &[f64]) -> f64 {
    let mean = x.iter().sum::<f64>() / x.len() as f64;
    x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (x.len() - 1).max(1) as f64
}

/// Quantiles at `levels` (fractions, ascending) of the ascending estimates `sorted`, which lie on
/// a grid of step `grid` (see [`grid_quantile`]), with noise of standard deviation `sd` removed
/// ([`trusted_simex`]). Without noise, the grid quantiles themselves.
pub fn corrected_quantiles(sorted: &[f64], sd: Option<f64>, levels: &[f64], grid: f64) -> Vec<f64> {
    match trusted_simex(sorted, sd, levels, grid) {
        Some(s) if s.blurs() => levels.iter().map(|&p| s.corrected(p)).collect(),
        _ => levels.iter().map(|&p| grid_quantile(sorted, p, grid)).collect(),
    }
}

/// The extrapolation of `sorted` with noise `sd`, unless its quantiles at `levels` (ascending)
/// come out of their order: then it cannot be trusted (the noise is as large as the
/// distribution's spread, or the distribution has an edge the quadratic does not follow), and
/// the estimates are taken as they are (no noise).
pub fn trusted_simex(sorted: &[f64], sd: Option<f64>, levels: &[f64], grid: f64) -> Option<Simex> {
    let s = Simex::new(sorted, sd, grid)?;
    let in_order = || levels.windows(2).all(|w| s.corrected(w[0]) <= s.corrected(w[1]));
    if s.blurs() && !in_order() { Simex::new(sorted, None, grid) } else { Some(s) }
}

/// The estimates' distribution at noise × 1 (as measured: each estimate spread over its grid
/// cell), × 2 and × 3 (further blurred by a normal of variance 3 sd² and 8 sd²), as histograms.
pub struct Simex {
    start: f64,
    bin: f64,
    grid: f64,
    /// Standard deviation of the extra blur of each histogram, ns (0 for the first).
    blur: [f64; 3],
    hist: Vec<Vec<f64>>,
}

impl Simex {
    /// The histograms of `values` (in any order: a cell's count is the same whatever adds to it
    /// first); only the first without noise (`sd` none or 0). None for an empty sample.
    pub fn new(values: &[f64], sd: Option<f64>, grid: f64) -> Option<Simex> {
        let lo = values.iter().copied().min_by(f64::total_cmp)?;
        let hi = values.iter().copied().max_by(f64::total_cmp)?;
        let sd = sd.filter(|s| *s > 0.0 && s.is_finite());
        let grid = grid.max(0.0);
        let scale = sd.unwrap_or(grid.max(1e-3));
        let blur = sd.map_or([0.0; 3], |sd| [0.0, 3f64.sqrt() * sd, 8f64.sqrt() * sd]);
        let reach = 6.0 * blur[2] + grid + scale;
        let (start, end) = (lo - reach, hi + reach);
        let mut bin = (scale / BINS_PER_SD).min(if grid > 0.0 { grid / 4.0 } else { f64::INFINITY });
        while (end - start) / bin > MAX_BINS as f64 {
            bin *= 2.0;
        }
        let n = ((end - start) / bin).ceil() as usize + 1;
        // Each estimate spread evenly over its grid cell.
        let spread = ((grid / bin).round() as usize).max(1);
        let mut first = vec![0.0f64; n];
        for &x in values {
            let from = ((x - grid / 2.0 - start) / bin).max(0.0) as usize;
            for cell in &mut first[from.min(n)..(from + spread).min(n)] {
                *cell += 1.0 / spread as f64;
            }
        }
        let mut hist = vec![first];
        if sd.is_some() {
            hist.push(convolve(&hist[0], blur[1] / bin));
            hist.push(convolve(&hist[0], blur[2] / bin));
        }
        Some(Simex { start, bin, grid, blur, hist })
    }

    /// Whether the blurred histograms exist (there was noise to remove).
    pub fn blurs(&self) -> bool {
        self.hist.len() == 3
    }

    /// Quantile `p` of histogram `k`.
    pub fn quantile(&self, k: usize, p: f64) -> f64 {
        hist_quantile(&self.hist[k], self.start, self.bin, p)
    }

    /// Quantile `p` extrapolated to no noise ([`extrapolate`]).
    pub fn corrected(&self, p: f64) -> f64 {
        extrapolate([self.quantile(0, p), self.quantile(1, p), self.quantile(2, p)])
    }

    /// Density of histogram `k` at `x`, averaged over ± `half` (at least one bin).
    pub fn density(&self, k: usize, x: f64, half: f64) -> f64 {
        let h = &self.hist[k];
        let total: f64 = h.iter().sum();
        let at = |x: f64| (((x - self.start) / self.bin).max(0.0) as usize).min(h.len() - 1);
        let (a, b) = (at(x - half), at(x + half));
        h[a..=b].iter().sum::<f64>() / (total * (b - a + 1) as f64 * self.bin)
    }

    /// How much an estimate `y` adds to the distribution function of histogram `k` at `x`: its
    /// grid cell, blurred by that histogram's normal.
    pub fn cdf_of(&self, k: usize, x: f64, y: f64) -> f64 {
        let s = self.blur[k];
        if s > 0.0 {
            let sd = (s * s + self.grid * self.grid / 12.0).sqrt();
            normal_cdf((x - y) / sd)
        } else if self.grid > 0.0 {
            ((x - y) / self.grid + 0.5).clamp(0.0, 1.0)
        } else if y <= x {
            1.0
        } else {
            0.0
        }
    }
}

/// The quantile at no noise from the quantiles `q` at noise × 1, × 2 and × 3, along
/// `Q(s) = a + b √(c + s²)` with c ≥ 0 (three points, three parameters). A normal latency of
/// variance τ² under normal noise of variance σ² follows it exactly (`Q(s) = μ + z √(τ² + s² σ²)`,
/// c = τ²/σ²); c = 0 is a quantile moving in proportion to the noise (an edge of the distribution),
/// c → ∞ one moving in proportion to its variance (a smooth density). The correction is
/// `−k (Q(2) − Q(1))`, k falling from 1 (c = 0) to 1/3 (c → ∞) as the curvature `(Q(3) − Q(2)) /
/// (Q(2) − Q(1))` rises from 1 to 5/3; beyond either end, k stays at that end's.
pub fn extrapolate(q: [f64; 3]) -> f64 {
    let (d1, d2) = (q[1] - q[0], q[2] - q[1]);
    if d1 == 0.0 {
        return q[0];
    }
    let r = d2 / d1;
    let k = |c: f64| ((c + 1.0).sqrt() - c.sqrt()) / ((c + 4.0).sqrt() - (c + 1.0).sqrt());
    let ratio = |c: f64| ((c + 9.0).sqrt() - (c + 4.0).sqrt()) / ((c + 4.0).sqrt() - (c + 1.0).sqrt());
    let shrink = if r <= 1.0 {
        1.0
    } else if r >= 5.0 / 3.0 {
        1.0 / 3.0
    } else {
        // ratio(c) rises from 1 at c = 0 to 5/3 as c grows; c = t / (1 − t).
        let (mut lo, mut hi) = (0.0f64, 1.0f64);
        for _ in 0..60 {
            let mid = 0.5 * (lo + hi);
            if ratio(mid / (1.0 - mid)) < r { lo = mid } else { hi = mid }
        }
        let t = 0.5 * (lo + hi);
        k(t / (1.0 - t))
    };
    q[0] - shrink * d1
}

/// The standard normal distribution function (Abramowitz & Stegun 7.1.26 through erf, error
/// below 1.5e-7).
fn normal_cdf(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly =
        t * (0.254_829_592 + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-x * x).exp();
    if z >= 0.0 { 0.5 * (1.0 + erf) } else { 0.5 * (1.0 - erf) }
}

/// A mode's per-probe estimates, the halves of their odd and even runs' difference, and whether
/// every estimate is a median of an odd number of runs ([`pooled_estimates`]).
pub type Pooled = (Vec<(u64, f64)>, Vec<f64>, bool);

/// Per-probe estimates of a mode: the median of each probe's differentials over all runs of the
/// mode's sessions, each session's runs first shifted by `shift` (its offset from the mode's
/// common session median, plus the null offset); with them, half the difference of the medians
/// of each probe's odd and even runs (for probes seen in at least two runs), and whether every
/// estimate is the median of an odd number of runs.
pub fn pooled_estimates(sessions: &[(&[&RunPairs], f64)]) -> Pooled {
    let lists: Vec<Shifted> =
        sessions.iter().flat_map(|&(runs, shift)| runs.iter().map(move |r| r.shifted(shift))).collect();
    aligned_pooled(&lists).unwrap_or_else(|| grouped_pooled(&lists))
}

/// [`pooled_estimates`] of any lists: each probe's values gathered ([`crate::runs::ByProbe`]).
fn grouped_pooled(lists: &[Shifted]) -> Pooled {
    let mut groups = crate::runs::ByProbe::new(lists);
    let (mut estimates, mut halves, mut odd_only) = (Vec::new(), Vec::new(), true);
    let (mut odd, mut even) = (Vec::new(), Vec::new());
    for (id, v) in groups.iter_mut() {
        if v.len() >= 2 {
            odd.clear();
            even.clear();
            for (k, &x) in v.iter().enumerate() {
                if k % 2 == 0 { odd.push(x) } else { even.push(x) }
            }
            halves.push((median(&mut odd) - median(&mut even)) / 2.0);
        }
        odd_only &= v.len() % 2 == 1;
        estimates.push((id, median(v)));
    }
    (estimates, halves, odd_only)
}

/// [`pooled_estimates`] of lists that hold the same ids in the same order (every probe paired in
/// every run): a probe's k-th value is the k-th list's, so its odd and even runs are the odd and
/// even lists ([`crate::network::aligned_medians`]). None otherwise.
fn aligned_pooled(lists: &[Shifted]) -> Option<Pooled> {
    let medians = crate::network::aligned_medians(lists)?;
    let halves = if lists.len() >= 2 {
        let odd: Vec<_> = lists.iter().copied().step_by(2).collect();
        let even: Vec<_> = lists.iter().copied().skip(1).step_by(2).collect();
        let (odd, even) = (crate::network::aligned_medians(&odd)?, crate::network::aligned_medians(&even)?);
        odd.iter().zip(&even).map(|(o, e)| (o - e) / 2.0).collect()
    } else {
        Vec::new()
    };
    Some((lists[0].ids.iter().copied().zip(medians).collect(), halves, lists.len() % 2 == 1))
}

/// The histogram convolved with a normal of standard deviation `sd_bins` bins (±6 sd).
fn convolve(hist: &[f64], sd_bins: f64) -> Vec<f64> {
    let half = (6.0 * sd_bins).ceil() as usize;
    let kernel: Vec<f64> = (0..=2 * half)
        .map(|k| {
            let z = (k as f64 - half as f64) / sd_bins;
            (-0.5 * z * z).exp()
        })
        .collect();
    let norm: f64 = kernel.iter().sum();
    let mut out = vec![0.0; hist.len()];
    // A bin's terms `c × kernel / norm` depend on its count c alone, and counts repeat (a grid's
    // values spread evenly over its cells): each count's terms made once, then added.
    let mut terms: std::collections::HashMap<u64, Vec<f64>> = std::collections::HashMap::new();
    for (i, &c) in hist.iter().enumerate() {
        if c == 0.0 {
            continue;
        }
        let from = i.saturating_sub(half);
        let to = (i + half).min(hist.len() - 1);
        let t = terms.entry(c.to_bits()).or_insert_with(|| kernel.iter().map(|&k| c * k / norm).collect());
        for (o, t) in out[from..=to].iter_mut().zip(&t[from + half - i..]) {
            *o += t;
        }
    }
    out
}

/// Quantile `p` of a histogram whose values are spread evenly within their bins (across empty
/// bins where the distribution function equals p, the middle of them).
fn hist_quantile(hist: &[f64], start: f64, bin: f64, p: f64) -> f64 {
    let total: f64 = hist.iter().sum();
    let target = p * total;
    let mut seen = 0.0;
    for (i, &c) in hist.iter().enumerate() {
        if c > 0.0 && seen + c >= target {
            let at = start + bin * (i as f64 + (target - seen) / c);
            if seen + c > target || target >= total {
                return at;
            }
            // Exactly at the end of this bin's mass: the middle of the empty bins that follow.
            let next = hist[i + 1..].iter().position(|&c| c > 0.0).map_or(i + 1, |k| i + 1 + k);
            return 0.5 * (at + start + bin * next as f64);
        }
        seen += c;
    }
    start + bin * hist.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::column::Column;
    use crate::stats::normal;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn pooled_estimates_of_aligned_runs_are_those_of_the_runs_grouped_by_probe() {
        let mut rng = ChaCha8Rng::seed_from_u64(21);
        for runs in [1, 2, 3, 10, 25, 50] {
            let ids: Vec<u64> = (1..=37).collect();
            let column = |whole: &[i64]| Column::of(whole.iter().map(|&t| Some(t)), whole.len(), 0.346);
            let whole: Vec<Vec<i64>> =
                (0..runs).map(|_| (0..37).map(|_| rng.random_range(-500..500i64)).collect()).collect();
            let columns: Vec<Column> = whole.iter().map(|w| column(w)).collect();
            let aligned: Vec<Shifted> = (0..runs)
                .map(|r| Shifted { ids: &ids, d: &columns[r], shift: f64::from(r as u32 / 10) * 1.7 - 0.6 })
                .collect();
            // The same runs with the first one's probes listed backwards: grouped by probe.
            let (backwards, back_whole): (Vec<u64>, Vec<i64>) = ids.iter().zip(&whole[0]).rev().unzip();
            let back = column(&back_whole);
            let mut grouped = aligned.clone();
            grouped[0] = Shifted { ids: &backwards, d: &back, shift: aligned[0].shift };
            let (a, g) = (aligned_pooled(&aligned).unwrap(), grouped_pooled(&grouped));
            assert!(aligned_pooled(&grouped).is_none());
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(a.0.iter().map(|e| e.0).collect::<Vec<_>>(), g.0.iter().map(|e| e.0).collect::<Vec<_>>());
            assert_eq!(
                bits(&a.0.iter().map(|e| e.1).collect::<Vec<_>>()),
                bits(&g.0.iter().map(|e| e.1).collect::<Vec<_>>())
            );
            assert_eq!(bits(&a.1), bits(&g.1), "{runs} runs");
            assert_eq!(a.2, g.2);
            assert_eq!(a.1.len(), if runs >= 2 { 37 } else { 0 });
        }
    }

    /// Each count's terms made once are those made for every bin, added in the same order: the
    /// blurred histogram is the direct sum's to the bit (repeated counts, fractional ones, edges).
    #[test]
    fn a_blur_with_each_counts_terms_made_once_is_the_direct_sum() {
        let hist: Vec<f64> =
            (0..300).map(|i| [0.0, 1.0, 2.0, 1.0 / 3.0, 5.5][i * 7 % 5] * f64::from(i as u32 % 4)).collect();
        for sd_bins in [0.7f64, 3.0, 40.0] {
            let half = (6.0 * sd_bins).ceil() as usize;
            let kernel: Vec<f64> =
                (0..=2 * half).map(|k| (-0.5 * ((k as f64 - half as f64) / sd_bins).powi(2)).exp()).collect();
            let norm: f64 = kernel.iter().sum();
            let mut direct = vec![0.0; hist.len()];
            for (i, &c) in hist.iter().enumerate().filter(|(_, c)| **c != 0.0) {
                for j in i.saturating_sub(half)..=(i + half).min(hist.len() - 1) {
                    direct[j] += c * kernel[j + half - i] / norm;
                }
            }
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&convolve(&hist, sd_bins)), bits(&direct), "sd {sd_bins} bins");
        }
    }

    /// A cell's count does not depend on the order its values come in: the histograms (and the
    /// study's histogram) of values shuffled are those of the values sorted, to the bit.
    #[test]
    fn histograms_of_values_in_any_order_are_those_of_the_values_sorted() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let mut v: Vec<f64> = (0..5000).map(|_| f64::from(rng.random_range(0..400u32)) * 0.346 - 20.0).collect();
        let shuffled = v.clone();
        v.sort_unstable_by(f64::total_cmp);
        let (a, b) = (Simex::new(&shuffled, Some(2.0), 0.346).unwrap(), Simex::new(&v, Some(2.0), 0.346).unwrap());
        for p in [0.01, 0.25, 0.5, 0.99] {
            for k in 0..3 {
                assert_eq!(a.quantile(k, p).to_bits(), b.quantile(k, p).to_bits(), "p{p}, histogram {k}");
            }
        }
        assert_eq!(crate::stats::histogram(&shuffled), crate::stats::histogram(&v));
    }

    #[test]
    fn an_extrapolation_out_of_order_keeps_the_raw_quantiles() {
        // An exponential of mean 10 (its quantiles −10 ln(1 − u)), blurred by noise of sd 5: the
        // extrapolation through the blurred quantiles puts p5 at 9.8, above p25 at 3.5. The raw
        // quantiles stay: p5 = −10 ln 0.95 = 0.51, p50 = 10 ln 2 = 6.93 (within a grid step).
        let v: Vec<f64> = (0..1000).map(|k| -10.0 * (1.0 - (k as f64 + 0.5) / 1000.0).ln()).collect();
        let levels = [0.05, 0.25, 0.5, 0.75, 0.95, 0.99];
        let s = Simex::new(&v, Some(5.0), 0.001).unwrap();
        assert!(s.corrected(0.05) > s.corrected(0.25), "the extrapolation is out of order here");
        let q = corrected_quantiles(&v, Some(5.0), &levels, 0.001);
        assert!(q.windows(2).all(|w| w[0] <= w[1]), "{q:?}");
        assert!((q[0] - 0.513).abs() < 0.02 && (q[2] - 6.931).abs() < 0.02, "{q:?}");
    }

    #[test]
    fn the_noise_of_a_median_of_ten_is_found_from_half_differences() {
        // Per-run noise normal(0, 3): the median of 10 runs has variance 0.1383 × 9 (the exact
        // small-sample factor of the median of 10 normal values), so sd 1.116 ns.
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let (mut half, mut estimates) = (Vec::new(), Vec::new());
        for _ in 0..20_000 {
            let mut a: Vec<f64> = (0..5).map(|_| 3.0 * normal(&mut rng)).collect();
            let mut b: Vec<f64> = (0..5).map(|_| 3.0 * normal(&mut rng)).collect();
            half.push((median(&mut a) - median(&mut b)) / 2.0);
            let mut all: Vec<f64> = a.iter().chain(&b).copied().collect();
            estimates.push(100.0 + 5.0 * normal(&mut rng) + median(&mut all));
        }
        let sd = noise_sd(&half, &estimates).unwrap();
        let want = (0.1383f64 * 9.0).sqrt();
        assert!((sd - want).abs() < 0.06 * want, "{sd} vs {want}");
    }

    #[test]
    fn a_wander_shared_by_a_runs_probes_is_measured_where_it_is_left() {
        // 24 runs of 12,000 probes, latencies uniform on 100–120 ns, per-run noise normal(0, 10)
        // plus a wander 8√2 sin(2π i / 150 + φ) with φ uniform per run (as on the testbed). The
        // noise left in each probe's median is read off against the known latencies; the
        // half-differences alone miss it by up to a quarter in one study or another (what the
        // run phases leave of the wander in the odd and even runs' medians is not what they leave
        // in the median of all runs), the estimate with the slow parts exchanged by under 10 %.
        let (runs, probes) = (24, 12_000);
        let mut worst: (f64, f64) = (0.0, 0.0);
        for seed in 0..6 {
            let mut rng = ChaCha8Rng::seed_from_u64(40 + seed);
            let latency: Vec<f64> = (0..probes).map(|_| 100.0 + 20.0 * rng.random::<f64>()).collect();
            let phases: Vec<f64> = (0..runs).map(|_| std::f64::consts::TAU * rng.random::<f64>()).collect();
            let (mut estimates, mut half, mut error) = (Vec::new(), Vec::new(), Vec::new());
            for (i, &l) in latency.iter().enumerate() {
                let wander =
                    |r: usize| 8.0 * 2f64.sqrt() * (std::f64::consts::TAU * i as f64 / 150.0 + phases[r]).sin();
                let mut v: Vec<f64> = (0..runs).map(|r| l + 10.0 * normal(&mut rng) + wander(r)).collect();
                let mut odd: Vec<f64> = v.iter().step_by(2).copied().collect();
                let mut even: Vec<f64> = v.iter().skip(1).step_by(2).copied().collect();
                half.push((median(&mut odd) - median(&mut even)) / 2.0);
                let m = median(&mut v);
                estimates.push(m);
                error.push(m - l);
            }
            let actual = variance(&error).sqrt();
            let found = noise_sd(&half, &estimates).unwrap() / actual - 1.0;
            let halves_alone = robust_sd(&half) / actual - 1.0;
            assert!(found.abs() < 0.1, "seed {seed}: off by {found:.3}");
            worst = (worst.0.max(found.abs()), worst.1.max(halves_alone.abs()));
        }
        assert!(worst.1 > 0.15 && worst.1 > 2.0 * worst.0, "{worst:?}");
    }

    #[test]
    fn the_extrapolation_follows_a_normal_latency_an_edge_and_a_smooth_density() {
        // A normal latency (μ 150, τ 4.5) under normal noise σ 2.9 at × 1, × 2, × 3: the p99 is
        // μ + 2.326 √(τ² + s² σ²), and at no noise μ + 2.326 τ = 160.468.
        let z = 2.326_348;
        let q = [1.0f64, 2.0, 3.0].map(|s| 150.0 + z * (4.5f64 * 4.5 + s * s * 2.9 * 2.9).sqrt());
        assert!((extrapolate(q) - (150.0 + z * 4.5)).abs() < 1e-6, "{}", extrapolate(q));
        // A quantile moved in proportion to the noise (an edge): 10 + 2 s.
        assert!((extrapolate([12.0, 14.0, 16.0]) - 10.0).abs() < 1e-12);
        // In proportion to its variance (a smooth density): 10 + 0.5 s², the limit c → ∞.
        assert!((extrapolate([10.5, 12.0, 14.5]) - 10.0).abs() < 1e-12);
        // No movement, no correction.
        assert_eq!(extrapolate([7.0, 7.0, 7.0]), 7.0);
    }

    #[test]
    fn blurred_quantiles_of_a_skewed_distribution_are_restored() {
        // The paper's RemoveHeader shape (Table I quantiles 157/171/177/181/188/192 ns at
        // p5/25/50/75/95/99, linear in between, tails half an interval long) plus normal noise of
        // sd 0.6 ns. Noise pulls p5 down, the median of this left-skewed distribution down and p99
        // up by 0.1–0.2 ns; the correction removes nearly all of it at p5 and p50. The p99 sits on
        // a corner 2 ns below the distribution's end, where the density halves: the blur there
        // follows no smooth curve in the noise, and a third of its error goes (0.19 → 0.12 ns).
        let q = [157.0, 171.0, 177.0, 181.0, 188.0, 192.0];
        let knots = [
            (0.0, 150.0),
            (0.05, q[0]),
            (0.25, q[1]),
            (0.5, q[2]),
            (0.75, q[3]),
            (0.95, q[4]),
            (0.99, q[5]),
            (1.0, 194.0),
        ];
        let inverse = |u: f64| {
            let w = knots.windows(2).find(|w| u <= w[1].0).unwrap_or(&knots[6..8]);
            w[0].1 + (w[1].1 - w[0].1) * (u - w[0].0) / (w[1].0 - w[0].0)
        };
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let n = 400_000;
        let mut y: Vec<f64> = (0..n).map(|_| inverse(rng.random::<f64>()) + 0.6 * normal(&mut rng)).collect();
        y.sort_unstable_by(f64::total_cmp);
        let levels = [0.05, 0.5, 0.99];
        let corrected = corrected_quantiles(&y, Some(0.6), &levels, 0.0);
        for (k, (&p, truth)) in levels.iter().zip([q[0], q[2], q[5]]).enumerate() {
            let raw = crate::stats::quantile_sorted(&y, p) - truth;
            let fixed = corrected[k] - truth;
            assert!(raw.abs() > 0.08, "p{p}: the noise moves it ({raw:.3})");
            let kept = if p == 0.99 { 0.7 } else { 0.25 };
            assert!(fixed.abs() < kept * raw.abs(), "p{p}: raw error {raw:.3}, corrected {fixed:.3}");
        }
    }

    #[test]
    fn the_normal_distribution_function_matches_its_table() {
        for (z, want) in [(0.0, 0.5), (1.0, 0.841_344_75), (-1.96, 0.024_997_9), (2.576, 0.995_002_5)] {
            assert!((normal_cdf(z) - want).abs() < 2e-7, "Φ({z}) = {}", normal_cdf(z));
        }
    }

    #[test]
    fn no_noise_no_correction() {
        let y: Vec<f64> = (0..1001).map(f64::from).collect();
        assert_eq!(corrected_quantiles(&y, Some(0.0), &[0.5], 0.0), vec![500.0]);
        assert_eq!(corrected_quantiles(&y, None, &[0.5], 0.0), vec![500.0]);
        assert!(corrected_quantiles(&[], Some(1.0), &[0.5], 0.0)[0].is_nan());
        assert!(noise_sd(&[1.0; 5], &[]).is_none());
    }
}

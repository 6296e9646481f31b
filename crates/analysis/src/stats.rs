//! Small statistics used by the pipeline, each tested against numbers computed independently.
//!
//! Quantile definition (used everywhere): linear interpolation between order statistics,
//! `Q(p) = x[⌊h⌋] + (h − ⌊h⌋)(x[⌊h⌋+1] − x[⌊h⌋])` with `h = (n − 1)p` on the sorted sample
//! (Hyndman & Fan type 7; numpy's and R's default).

use latency_results::index::Index;
use latency_results::summary::{Histogram, Quantiles};

/// Human-readable statement of the quantile definition.
pub const QUANTILE_DEFINITION: &str =
    "linear interpolation between order statistics, h = (n - 1) p (Hyndman-Fan type 7, numpy/R default)";

/// Quantile `p` ∈ [0, 1] of an ascending sample; NaN for an empty one.
pub fn quantile_sorted(x: &[f64], p: f64) -> f64 {
    interpolated(x.len(), p, |k| x[k])
}

/// Quantile `p` of `n` values in ascending order, `at(k)` the k-th (the definition above); NaN
/// for none.
fn interpolated(n: usize, p: f64, at: impl Fn(usize) -> f64) -> f64 {
    let Some(last) = n.checked_sub(1) else { return f64::NAN };
    let h = last as f64 * p.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let (at_lo, at_hi) = (at(lo), at((lo + 1).min(last)));
    at_lo + (h - lo as f64) * (at_hi - at_lo)
}

/// [`quantile_sorted`] of a sample in any order, by selection rather than a full sort (it
/// reorders the sample): the same two order statistics, so the same value to the last bit.
pub fn quantile_select(x: &mut [f64], p: f64) -> f64 {
    quantiles_select(x, &[p])[0]
}

/// [`quantile_select`] at each of `ps` (ascending), each selection made in what the previous one
/// left above it; in a large sample, among the values' bits made integers in the order of
/// `f64::total_cmp` (in place, and back after).
pub fn quantiles_select(x: &mut [f64], ps: &[f64]) -> Vec<f64> {
    debug_assert!(ps.windows(2).all(|w| w[0] <= w[1]), "levels ascending");
    if x.is_empty() {
        return vec![f64::NAN; ps.len()];
    }
    if x.len() < KEYED {
        return select_in(x, ps, f64::total_cmp, |x| x.iter().copied().min_by(f64::total_cmp), |v| v);
    }
    let keys: &mut [i64] = pulp::bytemuck::cast_slice_mut(x);
    keys.iter_mut().for_each(|k| *k = total_order(*k));
    let value = |k| f64::from_bits(total_order(k) as u64);
    let q = select_in(keys, ps, i64::cmp, |x| x.iter().copied().min(), value);
    keys.iter_mut().for_each(|k| *k = total_order(*k));
    q
}

/// [`quantiles_select`] in `x` ordered by `cmp` (`least`: the least of some), each order statistic
/// made a float by `value`.
fn select_in<T: Copy>(
    x: &mut [T],
    ps: &[f64],
    cmp: impl Fn(&T, &T) -> std::cmp::Ordering,
    least: impl Fn(&[T]) -> Option<T>,
    value: impl Fn(T) -> f64,
) -> Vec<f64> {
    // x[..placed] holds the smallest values, x[placed - 1] at its place in the order.
    let mut placed = 0;
    ps.iter()
        .map(|&p| {
            let h = (x.len() - 1) as f64 * p.clamp(0.0, 1.0);
            let lo = h.floor() as usize;
            if lo >= placed {
                x[placed..].select_nth_unstable_by(lo - placed, &cmp);
                placed = lo + 1;
            }
            let at_lo = value(x[lo]);
            let at_hi = least(&x[lo + 1..]).map_or(at_lo, &value);
            at_lo + (h - lo as f64) * (at_hi - at_lo)
        })
        .collect()
}

/// Samples from this size on are selected in as integers ([`total_order`]).
const KEYED: usize = 1 << 12;

/// A float's bits (as an integer) made an integer in the order of `f64::total_cmp`, and such an
/// integer made the float's bits again: one map both ways (the bits below the sign of a negative
/// number flipped).
fn total_order(bits: i64) -> i64 {
    bits ^ (((bits >> 63) as u64) >> 1) as i64
}

/// Quantile `p` of an ascending sample of values that lie on a grid of step `grid` (stamps of a
/// clock, medians of such stamps): each value is taken as spread evenly over its grid cell,
/// `[x − grid/2, x + grid/2]`, and the quantile is read from that continuous distribution, so that
/// it moves smoothly with the data instead of jumping from one grid point to the next (ties are
/// the rule on a grid). With `grid` ≤ 0 it is [`quantile_sorted`]. NaN for an empty sample.
pub fn grid_quantile(x: &[f64], p: f64, grid: f64) -> f64 {
    if x.is_empty() || grid.is_nan() || grid <= 0.0 {
        return quantile_sorted(x, p);
    }
    let half = grid / 2.0;
    let target = p.clamp(0.0, 1.0) * x.len() as f64;
    // F(t) · n = values whose cell ends below t, plus the covered part of the cells around t.
    let mass = |t: f64| -> f64 {
        let below = x.partition_point(|&v| v + half <= t);
        let inside = x.partition_point(|&v| v - half < t);
        below as f64 + x[below..inside].iter().map(|&v| (t - (v - half)) / grid).sum::<f64>()
    };
    // Where the distribution function crosses p: the first t with mass ≥ target and the last with
    // mass ≤ target, which differ only across a gap between cells (then the middle of the gap, so
    // that negating the sample negates its quantiles).
    let cross = |at_least: bool| {
        let (mut lo, mut hi) = (x[0] - half, x[x.len() - 1] + half);
        for _ in 0..64 {
            let mid = 0.5 * (lo + hi);
            let m = mass(mid);
            if m < target || (!at_least && m <= target) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        0.5 * (lo + hi)
    };
    0.5 * (cross(true) + cross(false))
}

/// Median of a sample on a grid (see [`grid_quantile`]; sorts it in place).
pub fn grid_median(x: &mut [f64], grid: f64) -> f64 {
    x.sort_unstable_by(f64::total_cmp);
    grid_quantile(x, 0.5, grid)
}

/// Median of a sample (reorders it in place, by selection rather than a full sort). NaN for an
/// empty sample.
pub fn median(x: &mut [f64]) -> f64 {
    let n = x.len();
    if n == 0 {
        return f64::NAN;
    }
    let mid = n / 2;
    if n <= 16 {
        // A per-probe median over a session's few runs: sorting a handful beats selecting.
        x.sort_unstable_by(f64::total_cmp);
        return if n % 2 == 1 { x[mid] } else { 0.5 * (x[mid - 1] + x[mid]) };
    }
    let (below, &mut upper, _) = x.select_nth_unstable_by(mid, f64::total_cmp);
    if n % 2 == 1 {
        upper
    } else {
        let lower = below.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        0.5 * (lower + upper)
    }
}

/// A sample of whole numbers of a unit within a narrow span (hardware-clock differentials, whole
/// ns; a run's differentials, whole TSC ticks), counted: its order statistics read from the
/// counts, each the whole number times the unit, the value a sort puts at that rank (the product
/// keeps the order), so its quantiles and median are [`quantiles_select`]'s and [`median`]'s to
/// the bit.
pub(crate) struct Counted {
    /// The smallest value, in units.
    low: i64,
    /// Values up to `low + k`, for each k.
    below: Vec<usize>,
    /// The unit the values are whole numbers of (1 for whole ns).
    unit: f64,
}

impl Counted {
    /// Widest span counted.
    const SPAN: i64 = 65_536;

    /// The values of `slices` other than `absent`, counted (perhaps none); none when they span
    /// more than [`Counted::SPAN`].
    pub(crate) fn of(slices: &[&[i32]], absent: i32) -> Option<Counted> {
        let present = || slices.iter().flat_map(|s| s.iter()).filter(move |&&v| v != absent).map(|&v| i64::from(v));
        let (low, high) = present().fold((i64::MAX, i64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
        if low > high {
            return Some(Counted { low: 0, below: Vec::new(), unit: 1.0 });
        }
        if high - low > Counted::SPAN {
            return None;
        }
        // Four counts a value, taken in turn, so that a run of equal values does not wait on
        // its own last count.
        let mut counts = vec![0usize; 4 * ((high - low) as usize + 1)];
        for (k, v) in present().enumerate() {
            counts[(v - low) as usize * 4 + (k & 3)] += 1;
        }
        Some(Counted::of_counts(low, counts.as_chunks::<4>().0.iter().map(|c| c.iter().sum()), 1.0))
    }

    /// The sample holding `count` values `low + k` (units of `unit`), k = 0, 1, … in turn.
    pub(crate) fn of_counts(low: i64, count: impl Iterator<Item = usize>, unit: f64) -> Counted {
        let mut sum = 0;
        let below = count.map(|c| {
            sum += c;
            sum
        });
        Counted { low, below: below.collect(), unit }
    }

    /// The samples of `parts` together; none when one is none or together they span more than
    /// [`Counted::SPAN`].
    pub(crate) fn merged(parts: &[Option<Counted>]) -> Option<Counted> {
        let parts: Vec<&Counted> = parts.iter().map(Option::as_ref).collect::<Option<_>>()?;
        let unit = parts.first().map_or(1.0, |c| c.unit);
        if parts.iter().any(|c| c.unit.to_bits() != unit.to_bits()) {
            return None;
        }
        let present = || parts.iter().filter(|c| !c.below.is_empty());
        let low = present().map(|c| c.low).min().unwrap_or(0);
        let high = present().map(|c| c.low + c.below.len() as i64 - 1).max().unwrap_or(-1);
        if high - low > Counted::SPAN {
            return None;
        }
        let mut counts = vec![0usize; (high - low + 1) as usize];
        for c in present() {
            let at = (c.low - low) as usize;
            let mut previous = 0;
            for (k, &b) in c.below.iter().enumerate() {
                counts[at + k] += b - previous;
                previous = b;
            }
        }
        Some(Counted::of_counts(low, counts.into_iter(), unit))
    }

    /// How many values it holds.
    pub(crate) fn len(&self) -> usize {
        self.below.last().copied().unwrap_or(0)
    }

    /// The value at `rank` (0-based) in ascending order.
    fn at(&self, rank: usize) -> f64 {
        (self.low + self.below.partition_point(|&b| b <= rank) as i64) as f64 * self.unit
    }

    /// [`quantiles_select`] at each of `ps` (NaN without values).
    pub(crate) fn quantiles(&self, ps: &[f64]) -> Vec<f64> {
        ps.iter().map(|&p| interpolated(self.len(), p, |k| self.at(k))).collect()
    }

    /// [`median`] (NaN without values).
    pub(crate) fn median(&self) -> f64 {
        let n = self.len();
        if n == 0 {
            return f64::NAN;
        }
        let upper = self.at(n / 2);
        if n % 2 == 1 { upper } else { 0.5 * (self.at(n / 2 - 1) + upper) }
    }
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

/// Kolmogorov–Smirnov distance and Wasserstein-1 distance (ns) between two histograms with the
/// same bin width (their starts may differ by whole bins).
pub fn histogram_distances(
    a: &latency_results::summary::Histogram,
    b: &latency_results::summary::Histogram,
) -> Option<(f64, f64)> {
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
    let at = |h: &latency_results::summary::Histogram, i: usize| -> f64 {
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

/// Wilson's 95 % score interval of a proportion of `k` in `n` (Wilson 1927): good coverage for
/// few trials and proportions near 0 or 1, unlike the normal approximation.
pub fn wilson95(k: usize, n: usize) -> [f64; 2] {
    if n == 0 {
        return [0.0, 1.0];
    }
    let (z, n) = (1.959_963_984_540_054_f64, n as f64);
    let p = k as f64 / n;
    let denominator = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / denominator;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / denominator;
    [(centre - half).max(0.0), (centre + half).min(1.0)]
}

/// Levels stored in every summary whatever the plan's quantiles (percent).
pub const HEADLINE_LEVELS: [f64; 2] = [50.0, 99.0];

/// Values at `levels` (percent) keyed `p50`, `p99`, ….
pub(crate) fn keyed(levels: &[f64], values: impl IntoIterator<Item = f64>) -> Quantiles {
    levels.iter().copied().zip(values).collect()
}

pub(crate) fn histogram(values: &[f64]) -> Histogram {
    let lo = values.iter().copied().min_by(f64::total_cmp);
    let (Some(lo), Some(hi)) = (lo, values.iter().copied().max_by(f64::total_cmp)) else {
        return Histogram::default();
    };
    let start = lo.floor();
    let mut bin = 1.0;
    while (hi - start) / bin > 4000.0 {
        bin *= 2.0;
    }
    let mut counts = vec![0u64; ((hi - start) / bin) as usize + 1];
    for &x in values {
        counts[((x - start) / bin) as usize] += 1;
    }
    Histogram { start_ns: start, bin_ns: bin, counts }
}

/// The quantile levels a summary stores (percent): the report's, and p50 and p99 always, which
/// regression checks judge whatever the report shows.
pub(crate) fn summary_levels(index: &Index) -> Vec<f64> {
    let mut levels = index.analysis.quantile_levels_or_default();
    for headline in HEADLINE_LEVELS {
        if !levels.contains(&headline) {
            levels.push(headline);
        }
    }
    levels.sort_by(f64::total_cmp);
    levels
}

/// Standard normal draw (Box–Muller) for the tests: the draws their seeds were chosen with (the
/// simulator has its own, in `latency-testbed`, for the studies it generates).
#[cfg(test)]
pub(crate) fn normal(r: &mut rand_chacha::ChaCha8Rng) -> f64 {
    use rand::Rng;
    let u1: f64 = 1.0 - r.random::<f64>();
    let u2: f64 = r.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Selection reads the same two order statistics as a full sort: the same quantile, bit
        /// for bit, ties, signed zeros and all.
        #[test]
        fn a_quantile_by_selection_is_the_sorted_ones(
            mut x in proptest::collection::vec(proptest::prop_oneof![-3i32..3, -1000i32..1000], 1..300),
            p in 0.0f64..=1.0,
            zeros in proptest::bool::ANY,
        ) {
            let mut v: Vec<f64> = x.drain(..).map(|k| if zeros && k == 0 { -0.0 } else { f64::from(k) * 0.25 }).collect();
            let mut sorted = v.clone();
            sorted.sort_unstable_by(f64::total_cmp);
            for q in [p, 0.0, 0.5, 0.99, 1.0] {
                proptest::prop_assert_eq!(quantile_select(&mut v, q).to_bits(), quantile_sorted(&sorted, q).to_bits());
            }
            let levels = [0.0, 0.25, 0.5, 0.5, p.min(0.9), 0.9, 0.95, 0.99, 1.0];
            let mut levels = levels.to_vec();
            levels.sort_by(f64::total_cmp);
            let selected = quantiles_select(&mut v, &levels);
            for (q, got) in levels.iter().zip(selected) {
                proptest::prop_assert_eq!(got.to_bits(), quantile_sorted(&sorted, *q).to_bits(), "p{}", q);
            }
        }
    }

    #[test]
    fn quantiles_of_a_large_sample_selected_as_integers_are_the_sorted_ones_to_the_bit() {
        let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(8);
        let levels = [0.0, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0];
        let n = 70_001;
        let normal_sample: Vec<f64> = (0..n).map(|_| 100.0 + 3.0 * normal(&mut rng)).collect();
        let ties: Vec<f64> = (0..n).map(|_| f64::from(rand::Rng::random_range(&mut rng, 0..5u8))).collect();
        let signs: Vec<f64> = (0..n).map(|k| [0.0, -0.0, 1.5, -2.0, f64::NAN, -f64::NAN][k % 6]).collect();
        let mut ascending = normal_sample.clone();
        ascending.sort_unstable_by(f64::total_cmp);
        let descending: Vec<f64> = ascending.iter().rev().copied().collect();
        for x in [normal_sample, ties, signs, ascending, descending] {
            let mut sorted = x.clone();
            sorted.sort_unstable_by(f64::total_cmp);
            let mut selected = x.clone();
            let got = quantiles_select(&mut selected, &levels);
            for (q, p) in got.iter().zip(levels) {
                assert_eq!(q.to_bits(), quantile_sorted(&sorted, p).to_bits(), "p{p}");
            }
            // Reordered, the same values (every bit) are left.
            selected.sort_unstable_by(f64::total_cmp);
            assert!(selected.iter().zip(&sorted).all(|(a, b)| a.to_bits() == b.to_bits()));
        }
        // The integers keep the floats' order, every bit pattern its own.
        let order =
            [f64::NEG_INFINITY, -1e300, -1.0, -f64::MIN_POSITIVE, -0.0, 0.0, 5e-324, 1.0, f64::INFINITY, f64::NAN];
        let key = |v: f64| total_order(v.to_bits() as i64);
        assert!(order.windows(2).all(|w| key(w[0]) < key(w[1])));
        assert!(order.iter().all(|&v| total_order(key(v)) == v.to_bits() as i64));
    }

    /// Counting reads the order statistics a sort does: whole numbers with ties, negative ones,
    /// odd and even counts; by hand for a small one (`N`: absent); and refuses a span too wide.
    #[test]
    fn counted_quantiles_and_medians_are_the_sorted_ones_to_the_bit() {
        const N: i32 = i32::MIN;
        let c = Counted::of(&[&[3, -2], &[N, 7, 3]], N).unwrap();
        // Sorted: −2, 3, 3, 7; the median (3 + 3) / 2; p25 at h = 0.75: −2 + 0.75 × 5.
        assert_eq!((c.median(), c.quantiles(&[0.25, 1.0])), (3.0, vec![1.75, 7.0]));
        let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(5);
        let levels = [0.0, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1.0];
        for n in [1, 2, 17, 1_000, 4_097] {
            let x: Vec<i32> = (0..n).map(|_| rand::Rng::random_range(&mut rng, -40..400)).collect();
            let c = Counted::of(&[&x], N).unwrap();
            let mut sorted: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
            let mut unsorted = sorted.clone();
            sorted.sort_unstable_by(f64::total_cmp);
            assert_eq!(c.median().to_bits(), median(&mut unsorted).to_bits(), "{n}");
            for (q, p) in c.quantiles(&levels).into_iter().zip(levels) {
                assert_eq!(q.to_bits(), quantile_sorted(&sorted, p).to_bits(), "{n} p{p}");
            }
        }
        assert!(Counted::of(&[&[0, 70_000]], N).is_none());
        let none = Counted::of(&[&[], &[N]], N).unwrap();
        assert!(none.len() == 0 && none.median().is_nan() && none.quantiles(&[0.5])[0].is_nan());
        // Counted apart and merged: the counts of the whole, by hand.
        let parts = [Counted::of(&[&[5, 9]], N), Counted::of(&[&[]], N), Counted::of(&[&[-3, 5, 5]], N)];
        let all = Counted::merged(&parts).unwrap();
        // Sorted: −3, 5, 5, 5, 9.
        assert_eq!((all.len(), all.median(), all.quantiles(&[0.0, 0.9])), (5, 5.0, vec![-3.0, 7.4]));
        assert!(Counted::merged(&[Counted::of(&[&[0]], N), Counted::of(&[&[70_000]], N)]).is_none());
        assert!(Counted::merged(&[Counted::of(&[&[0]], N), None]).is_none());
    }

    #[test]
    fn wilson_intervals_match_statsmodels() {
        // statsmodels.stats.proportion.proportion_confint(k, n, method="wilson").
        for (k, n, lo, hi) in [(6, 20, 0.145_5, 0.519_0), (0, 10, 0.0, 0.277_5), (19, 20, 0.763_9, 0.991_1)] {
            let [a, b] = wilson95(k, n);
            assert!((a - lo).abs() < 1e-4 && (b - hi).abs() < 1e-4, "{k}/{n}: [{a}, {b}]");
        }
    }
    use latency_results::summary::Histogram;

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
    fn medians_of_few_values_of_either_sign() {
        assert_eq!(median(&mut [-3.0, 5.0, -1.0]), -1.0);
        assert_eq!(median(&mut [-2.5, -0.5, 1.5, -7.0]), -1.5);
        assert_eq!(median(&mut [7.0]), 7.0);
        // −0 orders below +0, as f64::total_cmp has it.
        assert_eq!(median(&mut [0.0, -0.0, 1.0]).to_bits(), 0.0f64.to_bits());
        assert_eq!(median(&mut [0.0, -0.0, -1.0]).to_bits(), (-0.0f64).to_bits());
        // Ten and sixteen values, as a session's runs give them, and seventeen (selection).
        let mut ten = [12.5, -3.0, 7.0, 6.0, 0.25, 100.0, -50.0, 3.0, 8.0, 1e9];
        assert_eq!(median(&mut ten), 6.5);
        let mut sixteen: Vec<f64> = (1..=16).rev().map(|v| v as f64 * -1.5).collect();
        assert_eq!(median(&mut sixteen), -12.75);
        let mut seventeen: Vec<f64> = (1..=17).map(f64::from).collect();
        assert_eq!(median(&mut seventeen), 9.0);
    }

    #[test]
    fn grid_quantiles_interpolate_within_cells() {
        // Values 1, 2, 2, 3 on a grid of 1: cells [0.5,1.5], [1.5,2.5] ×2, [2.5,3.5]. The median
        // (mass 2 of 4) is at 2.0; p = 0.375 (mass 1.5) is halfway into the 2-cells: 1.75;
        // p = 0.9 (mass 3.6) is 0.6 into the last cell: 3.1.
        let x = [1.0, 2.0, 2.0, 3.0];
        for (p, want) in [(0.5, 2.0), (0.375, 1.75), (0.9, 3.1), (0.0, 0.5), (1.0, 3.5)] {
            assert!((grid_quantile(&x, p, 1.0) - want).abs() < 1e-9, "p{p}: {}", grid_quantile(&x, p, 1.0));
        }
        // A grid median moves with the balance of ties where the plain median sticks to a point.
        assert_eq!(median(&mut [1.0, 2.0, 2.0, 2.0, 3.0, 3.0]), 2.0);
        assert!((grid_median(&mut [1.0, 2.0, 2.0, 2.0, 3.0, 3.0], 1.0) - 2.166_667).abs() < 1e-5);
        assert_eq!(grid_quantile(&x, 0.5, 0.0), 2.0);
    }

    #[test]
    fn clusters_split_at_large_gaps_only() {
        let x = [106.5, 107.0, 107.9, 137.2, 138.0];
        assert_eq!(gap_clusters(&x, 15.0), vec![0..3, 3..5]);
        assert_eq!(gap_clusters(&[148.0, 149.5, 150.2, 151.0], 15.0), vec![0..4]);
        assert!(gap_clusters(&[], 15.0).is_empty());
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

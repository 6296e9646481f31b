//! Confidence intervals that follow the study's design.
//!
//! A calibrated quantile is `Q_p(program probes, pooled over the mode's sessions) − δ̂`, with δ̂
//! the median of the null calibration's probes. Two sources of uncertainty are separated:
//!
//! - **Probes.** The probes are a sample of the traffic, and each probe appears in every session
//!   (same trace, same ids), so probes are resampled as clusters: one Poisson(1) weight per probe
//!   id, applied to its estimates in every session and in the null calibration alike. The spread of
//!   `Q*_p − δ̂*` over the resamples is the standard error of "this testbed, these sessions".
//! - **Bring-ups.** Each session is a new bring-up that moves the differential by a little (the
//!   port asymmetry δ varies, as the null sessions show). Because every session measures the same
//!   probes, the spread of the per-session quantiles (and of the null's per-session medians) is
//!   that bring-up effect alone; its variance over n sessions enters as `s²/n`, with Student's t on
//!   the Welch–Satterthwaite degrees of freedom, since 5 sessions estimate it roughly.
//!
//! Runs are not resampled: a probe's estimate is the median over its runs, so the run-to-run noise
//! travels with the probe (resampling every level of a hierarchy overstates the variance). Every
//! interval is at least one TSC tick wide: no estimate is known better than the clock's step.

use rand_chacha::ChaCha8Rng;

use super::chacha::Words;
use super::noise::{Simex, extrapolate};
use super::stats::grid_quantile;
use super::student::{Z975, t975};

/// One quantile of one side (program or null), linearized in the probe weights: near its value
/// x, the weighted distribution function is `F*(x) = Σ_i w_i a_i / Σ_i w_i m_i` (probe i adds
/// `a_i` below x out of its `m_i` values), and the quantile moves to `x + (p − F*(x)) / f`, f the
/// density at x. `coef` is its weight in the estimate.
pub struct Linear {
    a: Vec<f32>,
    /// Index of the side's masses `m_i` in the list given to [`probe_se`].
    mass: usize,
    x: f64,
    f: f64,
    p: f64,
    coef: f64,
}

/// The values each probe has among `values` (dense probe index, value): a side's masses.
pub fn masses(values: &[(u32, f64)], probes: usize) -> Vec<f32> {
    let mut m = vec![0f32; probes];
    for &(i, _) in values {
        m[i as usize] += 1.0;
    }
    m
}

/// Linearize quantile `p` of histogram `k` of `simex`, built from `values` (dense probe index,
/// value) whose masses are number `mass` of [`probe_se`]'s; the density is averaged over ±
/// `half`.
#[allow(clippy::too_many_arguments)]
pub fn linear(
    values: &[(u32, f64)],
    mass: usize,
    probes: usize,
    simex: &Simex,
    k: usize,
    p: f64,
    coef: f64,
    half: f64,
) -> Linear {
    let x = simex.quantile(k, p);
    let f = simex.density(k, x, half);
    let mut a = vec![0f32; probes];
    for &(i, y) in values {
        a[i as usize] += simex.cdf_of(k, x, y) as f32;
    }
    Linear { a, mass, x, f, p, coef }
}

/// An estimate made of linearised quantiles ([`Linear`], by index into the terms given to
/// [`probe_se`]; a term may serve several estimates).
pub struct Estimate {
    /// The quantiles at noise × 1, × 2, × 3 whose extrapolation to no noise ([`extrapolate`]) the
    /// estimate holds, if any.
    pub extrapolated: Option<[usize; 3]>,
    /// Terms added as they are (`coef` × quantile).
    pub terms: Vec<usize>,
}

/// Standard error of each estimate over `resamples` cluster resamples of the probes: Poisson(1)
/// weights, one per probe, shared by every term of every estimate. The extrapolation is redone in
/// every resample, so the interval carries the correction's own variability, not only that of
/// the quantiles it starts from.
pub fn probe_se(
    terms: &[Linear],
    estimates: &[Estimate],
    masses: &[Vec<f32>],
    probes: usize,
    resamples: u32,
    rng: &mut ChaCha8Rng,
) -> Vec<f64> {
    if words_drawn(probes, resamples) == 0 {
        return vec![0.0; estimates.len()];
    }
    let usable = |t: &Linear| t.f > 0.0 && t.f.is_finite();
    // Resamples `range`, drawn from `rng` set at the first one's weights: each resample takes
    // ⌈probes / 2⌉ words of the generator, so a share of them starts at a known place in the
    // stream and the shares, computed on every core, give the draws of one pass in one order.
    let words = probes.div_ceil(2) as u128;
    let start = rng.get_word_pos();
    let resample = |range: std::ops::Range<u32>| {
        let mut rng = rng.clone();
        rng.set_word_pos(start + u128::from(range.start) * words);
        let mut rng = Words::of(&rng);
        let mut w = [vec![0f32; probes], vec![0f32; probes]];
        let mut value = vec![0f64; terms.len()];
        let mut draws = vec![Vec::with_capacity(range.len()); estimates.len()];
        // Every resample's sums: the masses', then each term's with a density (one without stays
        // at its value).
        let summed: Vec<&[f32]> = masses
            .iter()
            .map(Vec::as_slice)
            .chain(terms.iter().filter(|t| usable(t)).map(|t| t.a.as_slice()))
            .collect();
        let mut sums = [vec![0f32; summed.len()], vec![0f32; summed.len()]];
        // Two resamples at a time (a last one alone sums its weights twice and keeps one).
        let mut left = range.len();
        while left > 0 {
            let two = left.min(2);
            left -= two;
            for w in &mut w[..two] {
                poisson_weights(w, &mut rng);
            }
            let [s0, s1] = &mut sums;
            dots([&w[0], &w[two - 1]], &summed, [s0, s1]);
            for sums in &sums[..two] {
                let (total, mut below) = sums.split_at(masses.len());
                for (t, v) in terms.iter().zip(&mut value) {
                    let q = match below.split_first() {
                        Some((&b, rest)) if usable(t) => {
                            below = rest;
                            t.x + (t.p - f64::from(b) / f64::from(total[t.mass]).max(1.0)) / t.f
                        }
                        _ => t.x,
                    };
                    *v = t.coef * q;
                }
                for (e, d) in estimates.iter().zip(&mut draws) {
                    let noiseless = e.extrapolated.map_or(0.0, |[a, b, c]| extrapolate([value[a], value[b], value[c]]));
                    d.push(noiseless + e.terms.iter().map(|&k| value[k]).sum::<f64>());
                }
            }
        }
        draws
    };
    let half = resamples / 2;
    let shares: Vec<std::ops::Range<u32>> = vec![0..half, half..resamples];
    let parts = crate::load::par_map(&shares, |r| resample(r.clone()));
    rng.set_word_pos(start + words_drawn(probes, resamples));
    let mut draws = vec![Vec::with_capacity(resamples as usize); estimates.len()];
    for part in parts {
        for (d, p) in draws.iter_mut().zip(part) {
            d.extend(p);
        }
    }
    draws.iter().map(|d| sd(d)).collect()
}

/// The words of the generator [`probe_se`] draws for `resamples` resamples of `probes` probes
/// (two weights from each word; none when it resamples nothing): whatever draws from the same
/// generator after it starts this far on, and may run beside it.
pub fn words_drawn(probes: usize, resamples: u32) -> u128 {
    if resamples < 2 || probes == 0 { 0 } else { u128::from(resamples) * probes.div_ceil(2) as u128 }
}

/// The Poisson(1) counts of the 16-bit halves of `words` (low half first), as [`poisson_weights`]'
/// table gives them, into `out`: thirty-two halves in one AVX-512 register, each compared with
/// the eight steps of [`CDF`] at once (a lane at or above a step counts one more).
#[cfg(target_arch = "x86_64")]
fn counts_v4(simd: pulp::x86::V4, words: &[[u32; 16]], out: &mut [[f32; 32]]) {
    simd.vectorize(
        #[inline(always)]
        || {
            let (f, bw) = (simd.avx512f, simd.avx512bw);
            let steps = CDF.map(|c| f._mm512_set1_epi16(c as u16 as i16));
            for (w, out) in words.iter().zip(out) {
                let halves: std::arch::x86_64::__m512i = pulp::bytemuck::cast(*w);
                let mut count = f._mm512_setzero_si512();
                for &step in &steps {
                    // All ones (−1) in each lane at or above the step: taken away, one more.
                    count = bw._mm512_sub_epi16(count, bw._mm512_movm_epi16(bw._mm512_cmpge_epu16_mask(halves, step)));
                }
                let low = f._mm512_cvtepi32_ps(f._mm512_cvtepu16_epi32(f._mm512_castsi512_si256(count)));
                let high = f._mm512_cvtepi32_ps(f._mm512_cvtepu16_epi32(f._mm512_extracti64x4_epi64::<1>(count)));
                *out = pulp::bytemuck::cast([low, high]);
            }
        },
    );
}

/// `outs[r][j] = Σ_i a_r,i b_j,i` for each of two `a` (two resamples' weights, of one length)
/// and each of `bs`, four `b` at a time ([`dot2x4`]), each sum as [`dot`] makes it.
fn dots(a: [&[f32]; 2], bs: &[&[f32]], outs: [&mut [f32]; 2]) {
    let [out0, out1] = outs;
    for ((b, o0), o1) in bs.chunks(4).zip(out0.chunks_mut(4)).zip(out1.chunks_mut(4)) {
        // A last group of fewer than four repeats its first and drops what it gives twice.
        let four = std::array::from_fn(|k| *b.get(k).unwrap_or(&b[0]));
        let [s0, s1] = dot2x4(a, four);
        o0.copy_from_slice(&s0[..o0.len()]);
        o1.copy_from_slice(&s1[..o1.len()]);
    }
}

/// [`dot`] of each of two `a` with each of four `b` in one pass: eight chains of additions, each
/// in the order of the one `dot` makes (its sums the same to the bit), kept apart so that each
/// waits less on its own last addition, and each `b` read once for both `a`; in AVX2 registers
/// where the processor has them (eight lanes in one, as in two of SSE: the same additions in the
/// same order).
fn dot2x4(a: [&[f32]; 2], bs: [&[f32]; 4]) -> [[f32; 4]; 2] {
    #[cfg(target_arch = "x86_64")]
    if let Some(simd) = pulp::x86::V3::try_new() {
        let lanes = |v: &[f32; 8]| pulp::bytemuck::cast::<[f32; 8], pulp::f32x8>(*v);
        let (mul, add) = (|x, y| simd.mul_f32x8(x, y), |x, y| simd.add_f32x8(x, y));
        return simd.vectorize(
            #[inline(always)]
            || dot2x4_in(a, bs, lanes, mul, add, pulp::bytemuck::cast),
        );
    }
    dot2x4_sse(a, bs)
}

/// [`dot2x4`] in SSE registers (two for eight lanes), or whatever `wide` finds elsewhere.
fn dot2x4_sse(a: [&[f32]; 2], bs: [&[f32]; 4]) -> [[f32; 4]; 2] {
    use wide::f32x8;
    dot2x4_in(a, bs, |v| f32x8::new(*v), |x, y| x * y, |x, y| x + y, f32x8::to_array)
}

/// [`dot2x4`] with eight lanes `V`, made from eight values by `lanes`, multiplied and added lane
/// by lane by `mul` and `add`, and read back by `array`.
#[inline(always)]
fn dot2x4_in<V: Copy>(
    a: [&[f32]; 2],
    bs: [&[f32]; 4],
    lanes: impl Fn(&[f32; 8]) -> V,
    mul: impl Fn(V, V) -> V,
    add: impl Fn(V, V) -> V,
    array: impl Fn(V) -> [f32; 8],
) -> [[f32; 4]; 2] {
    let zero = lanes(&[0.0; 8]);
    let mut acc = [[zero; 4]; 2];
    let [(x0, tail0), (x1, tail1)] = a.map(|a| a.as_chunks::<8>());
    let [y0, y1, y2, y3] = bs.map(|b| b.as_chunks::<8>().0);
    for (((((x0, x1), y0), y1), y2), y3) in x0.iter().zip(x1).zip(y0).zip(y1).zip(y2).zip(y3) {
        let (x0, x1) = (lanes(x0), lanes(x1));
        for (j, y) in [y0, y1, y2, y3].into_iter().enumerate() {
            let y = lanes(y);
            acc[0][j] = add(acc[0][j], mul(x0, y));
            acc[1][j] = add(acc[1][j], mul(x1, y));
        }
    }
    let done = a[0].len() - tail0.len();
    let sum = |acc: V, tail: &[f32], b: &[f32]| {
        let tail: f32 = tail.iter().zip(&b[done..]).map(|(x, y)| x * y).sum();
        array(acc).iter().sum::<f32>() + tail
    };
    [std::array::from_fn(|j| sum(acc[0][j], tail0, bs[j])), std::array::from_fn(|j| sum(acc[1][j], tail1, bs[j]))]
}

/// Σ a_i b_i, eight lanes at a time.
#[cfg(test)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// P(X ≤ k) × 2¹⁶ for Poisson(1), k = 0..7.
const CDF: [u32; 8] = [24_109, 48_218, 60_273, 64_291, 65_296, 65_497, 65_530, 65_535];

/// Fill `w` with Poisson(1) draws, two from each 32-bit uniform: 16 bits each, looked up in a
/// table of the inverse distribution function (probabilities to 1/65,536, counts capped at 8),
/// or, in AVX-512 registers, compared with its eight steps at once ([`counts_v4`]). The words
/// are drawn a block at a time, in the order one at a time would draw them.
fn poisson_weights(w: &mut [f32], rng: &mut Words) {
    /// The count of each 16-bit uniform: how many of `CDF` it is not below.
    static TABLE: [u8; 1 << 16] = {
        let mut t = [0u8; 1 << 16];
        let mut u = 0;
        while u < t.len() {
            let mut k = 0;
            while k < CDF.len() && u as u32 >= CDF[k] {
                k += 1;
            }
            t[u] = k as u8;
            u += 1;
        }
        t
    };
    let count = |half: u32| f32::from(TABLE[(half & 0xffff) as usize]);
    #[cfg(target_arch = "x86_64")]
    let simd = pulp::x86::V4::try_new();
    let mut words = [0u32; 64];
    let (pairs, last) = w.as_chunks_mut::<2>();
    for block in pairs.chunks_mut(words.len()) {
        let words = &mut words[..block.len()];
        rng.fill(words);
        #[allow(unused_mut)]
        let mut done = 0;
        #[cfg(target_arch = "x86_64")]
        if let Some(simd) = simd {
            let (sixteens, _) = words.as_chunks::<16>();
            counts_v4(simd, sixteens, block.as_flattened_mut().as_chunks_mut::<32>().0);
            done = 16 * sixteens.len();
        }
        for (pair, &u) in block[done..].iter_mut().zip(&words[done..]) {
            *pair = [count(u), count(u >> 16)];
        }
    }
    if let [last] = last {
        *last = count(rng.next());
    }
}

fn sd(x: &[f64]) -> f64 {
    let x: Vec<f64> = x.iter().copied().filter(|v| v.is_finite()).collect();
    if x.len() < 2 {
        return 0.0;
    }
    let mean = x.iter().sum::<f64>() / x.len() as f64;
    (x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (x.len() - 1) as f64).sqrt()
}

/// The bring-up component of a calibrated quantile: per-session quantiles of the program's mode
/// and per-session medians of the null calibration (none: an uncalibrated quantile, which
/// subtracts nothing). Returns (variance of the pooled estimate, its Welch–Satterthwaite pieces
/// `(s²/n)²/(n − 1)` summed), or none when no side has two sessions. A null side with fewer than
/// two sessions borrows the program's spread, and the program the null's (a bring-up moves both
/// alike).
pub fn session_variance(program: &[f64], null: Option<&[f64]>) -> Option<(f64, f64)> {
    let var = |x: &[f64]| (x.len() >= 2).then(|| sd(x).powi(2));
    let Some(null) = null else {
        let n = program.len() as f64;
        let a = var(program)? / n;
        return Some((a, a * a / (n - 1.0)));
    };
    let (vp, vn) = match (var(program), var(null)) {
        (Some(p), Some(n)) => (p, n),
        (Some(p), None) => (p, p),
        (None, Some(n)) => (n, n),
        (None, None) => return None,
    };
    let (np, nn) = (program.len().max(1) as f64, null.len().max(1) as f64);
    let (a, b) = (vp / np, vn / nn);
    // A side of one session contributes its borrowed variance with the lender's degrees of freedom.
    let dof = |n: usize, other: usize| if n >= 2 { (n - 1) as f64 } else { (other.max(2) - 1) as f64 };
    let pieces = a * a / dof(program.len(), null.len()) + b * b / dof(null.len(), program.len());
    Some((a + b, pieces))
}

/// A 95 % interval around `estimate`: `estimate ± t · √(probe_se² + session variance)`, t from
/// Student's distribution on the Welch–Satterthwaite degrees of freedom (normal without a session
/// part), never narrower than one tick.
pub fn interval(estimate: f64, probe_se: f64, sessions: Option<(f64, f64)>, tick_ns: f64) -> [f64; 2] {
    let (var, t) = match sessions {
        Some((v, pieces)) if pieces > 0.0 => {
            let var = probe_se * probe_se + v;
            (var, t975(var * var / pieces))
        }
        Some((v, _)) => (probe_se * probe_se + v, Z975),
        None => (probe_se * probe_se, Z975),
    };
    let half = (t * var.sqrt()).max(tick_ns / 2.0);
    [estimate - half, estimate + half]
}

/// Quantile `p` of each session's ascending values, which lie on a grid of step `grid`.
pub fn per_session_quantiles(sessions: &[Vec<f64>], p: f64, grid: f64) -> Vec<f64> {
    sessions.iter().filter(|s| !s.is_empty()).map(|s| grid_quantile(s, p, grid)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn the_resamples_leave_the_generator_where_drawing_their_weights_one_by_one_does() {
        // Seven probes take four words per resample (two weights a word); five resamples, twenty.
        assert_eq!(words_drawn(7, 5), 20);
        assert_eq!((words_drawn(7, 1), words_drawn(0, 5)), (0, 0));
        let (n, resamples) = (7, 5);
        let values: Vec<(u32, f64)> = (0..n as u32).map(|i| (i, f64::from(i))).collect();
        let sorted: Vec<f64> = values.iter().map(|v| v.1).collect();
        let simex = Simex::new(&sorted, None, 1.0).unwrap();
        let terms = [linear(&values, 0, n, &simex, 0, 0.5, 1.0, 1.0)];
        let estimates = [Estimate { extrapolated: None, terms: vec![0] }];
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut one_by_one = Words::Plain(Box::new(rng.clone()));
        let mut w = vec![0f32; n];
        (0..resamples).for_each(|_| poisson_weights(&mut w, &mut one_by_one));
        let Words::Plain(mut one_by_one) = one_by_one else { unreachable!() };
        probe_se(&terms, &estimates, &[masses(&values, n)], n, resamples, &mut rng);
        assert_eq!(rng.get_word_pos(), one_by_one.get_word_pos());
        assert_eq!(rng.random::<u64>(), one_by_one.random::<u64>());
    }

    #[test]
    fn sums_taken_eight_at_a_time_are_those_taken_one_at_a_time_to_the_bit() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        for len in [0, 1, 7, 8, 9, 20_003] {
            let a: Vec<f32> = (0..len).map(|_| rng.random_range(0.0..8.0f32).floor()).collect();
            let a2: Vec<f32> = (0..len).map(|_| rng.random_range(0.0..8.0f32).floor()).collect();
            let bs: Vec<Vec<f32>> = (0..9).map(|_| (0..len).map(|_| rng.random::<f32>() - 0.3).collect()).collect();
            for n in 1..=bs.len() {
                let b: Vec<&[f32]> = bs[..n].iter().map(Vec::as_slice).collect();
                let (mut out, mut out2) = (vec![f32::NAN; n], vec![f32::NAN; n]);
                dots([&a, &a2], &b, [&mut out, &mut out2]);
                for (a, out) in [(&a, out), (&a2, out2)] {
                    let one: Vec<u32> = b.iter().map(|b| dot(a, b).to_bits()).collect();
                    assert_eq!(out.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), one, "{len} values, {n} sums");
                }
                // Without AVX2 too.
                let four = std::array::from_fn(|k| b[k.min(n - 1)]);
                let sse = dot2x4_sse([&a, &a2], four).map(|s| s.map(f32::to_bits));
                let one = [&a, &a2].map(|a| four.map(|b| dot(a, b).to_bits()));
                assert_eq!(sse, one, "{len} values, {n} sums, SSE");
            }
        }
        // By hand: 1·2 + 2·2 + … + 9·2 = 90, the ninth product added after the eight lanes.
        let a: Vec<f32> = (1..=9).map(|v| v as f32).collect();
        let (mut out, mut out2) = ([0.0], [0.0]);
        dots([&a, &[1.0; 9]], &[&[2.0; 9]], [&mut out, &mut out2]);
        assert_eq!((out, out2), ([90.0], [18.0]));
    }

    #[test]
    fn poisson_weights_count_each_half_word_drawn_one_at_a_time_against_the_distribution() {
        // P(X ≤ k) for Poisson(1), e⁻¹ Σ_{j ≤ k} 1/j!, times 2¹⁶ and truncated: 24,109 (0.3679),
        // 48,218 (0.7358), 60,273 (0.9197), 64,291 (0.9810), …; a half word below 24,109 is 0.
        let count = |h: u32| {
            [24_109, 48_218, 60_273, 64_291, 65_296, 65_497, 65_530, 65_535].iter().filter(|&&c| h >= c).count() as f32
        };
        for n in [1, 2, 127, 128, 129, 300] {
            let mut one = ChaCha8Rng::seed_from_u64(n as u64);
            let mut rng = Words::of(&one);
            let mut w = vec![f32::NAN; n];
            poisson_weights(&mut w, &mut rng);
            let want: Vec<f32> = (0..n.div_ceil(2))
                .flat_map(|_| {
                    let u: u32 = one.random();
                    [count(u & 0xffff), count(u >> 16)]
                })
                .take(n)
                .collect();
            assert_eq!(w, want, "{n} weights");
            assert_eq!(rng.next(), one.random::<u32>());
        }
    }

    /// Every 16-bit half compared in AVX-512 registers counts as the steps say, by hand.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn every_half_word_counted_in_vector_registers_counts_as_the_steps_say() {
        let Some(simd) = pulp::x86::V4::try_new() else { return };
        // Halves 2k (low) and 2k + 1 (high) in word k: every half once, in order.
        let words: Vec<[u32; 16]> =
            (0..1u32 << 15).map(|k| (2 * k) | (2 * k + 1) << 16).collect::<Vec<_>>().as_chunks::<16>().0.to_vec();
        let mut out = vec![[f32::NAN; 32]; words.len()];
        counts_v4(simd, &words, &mut out);
        for (h, &c) in out.as_flattened().iter().enumerate() {
            assert_eq!(c, CDF.iter().filter(|&&step| h as u32 >= step).count() as f32, "half {h}");
        }
        assert_eq!((out[0][0], out[2047][31]), (0.0, 8.0));
    }

    #[test]
    fn poisson_weights_have_mean_and_variance_one() {
        let n = 200_000;
        let mut w = vec![0f32; n];
        poisson_weights(&mut w, &mut Words::of(&ChaCha8Rng::seed_from_u64(8)));
        let x: Vec<f64> = w.iter().map(|&v| f64::from(v)).collect();
        let mean = x.iter().sum::<f64>() / n as f64;
        let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
        assert!((mean - 1.0).abs() < 0.01 && (var - 1.0).abs() < 0.02, "{mean} {var}");
    }

    #[test]
    fn the_probe_standard_error_of_a_median_matches_the_asymptotic_formula() {
        // 4000 probes of a normal(0, 10) latency, each estimate seen in 3 sessions (same probes),
        // and a null of zeros: the median's standard error is that of 4000 values,
        // 1.2533 σ / √n; the sessions add no information about the probes.
        let mut rng = ChaCha8Rng::seed_from_u64(12);
        let n = 4000;
        let lat: Vec<f64> = (0..n).map(|_| 10.0 * crate::stats::normal(&mut rng)).collect();
        let values: Vec<(u32, f64)> =
            (0..3).flat_map(|_| lat.iter().enumerate().map(|(i, &v)| (i as u32, v))).collect();
        let mut sorted: Vec<f64> = values.iter().map(|v| v.1).collect();
        sorted.sort_unstable_by(f64::total_cmp);
        let simex = Simex::new(&sorted, None, 0.0).unwrap();
        let zeros: Vec<(u32, f64)> = (0..n as u32).map(|i| (i, 0.0)).collect();
        let null = Simex::new(&[0.0; 4000], None, 0.01).unwrap();
        let masses = [masses(&values, n), masses(&zeros, n)];
        let terms = [linear(&values, 0, n, &simex, 0, 0.5, 1.0, 1.0), linear(&zeros, 1, n, &null, 0, 0.5, -1.0, 0.01)];
        let se = probe_se(&terms, &[Estimate { extrapolated: None, terms: vec![0, 1] }], &masses, n, 2000, &mut rng)[0];
        let want = 1.2533 * 10.0 / (n as f64).sqrt();
        assert!((se - want).abs() < 0.12 * want, "{se} vs {want}");
    }

    #[test]
    fn session_spread_enters_with_students_t() {
        // Program sessions 1, 2, 3 (s² = 1), null sessions 0, 0, 0, 0: variance 1/3, 2 degrees of
        // freedom, so the half-width is t(2) √(1/3) = 2.484.
        let s = session_variance(&[1.0, 2.0, 3.0], Some(&[0.0, 0.0, 0.0, 0.0])).unwrap();
        assert!((s.0 - 1.0 / 3.0).abs() < 1e-12);
        let [lo, hi] = interval(10.0, 0.0, Some(s), 0.3);
        assert!(((hi - lo) / 2.0 - 4.302_653 * (1.0f64 / 3.0).sqrt()).abs() < 0.03, "{lo} {hi}");
        // Nothing to say: one tick wide.
        assert_eq!(interval(10.0, 0.0, None, 0.3), [9.85, 10.15]);
        assert!(session_variance(&[1.0], Some(&[2.0])).is_none());
        // Uncalibrated: the program's sessions alone, 1/3 on 2 degrees of freedom as above; none
        // from one session.
        let (v, pieces) = session_variance(&[1.0, 2.0, 3.0], None).unwrap();
        assert!((v - 1.0 / 3.0).abs() < 1e-12 && (pieces - 1.0 / 18.0).abs() < 1e-12, "{v} {pieces}");
        assert!(session_variance(&[1.0], None).is_none());
    }
}

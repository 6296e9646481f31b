//! Medians of many small samples at once: the per-probe medians over a session's runs (and over a
//! mode's), when every run paired the same probes. A sorting network (Batcher's merge exchange,
//! Knuth, TAOCP 5.2.2, Algorithm M) orders the n values of several probes side by side, lane by
//! lane, with no branch on the data: the runs' whole numbers themselves, sixteen probes at once in
//! AVX-512 registers, where no run is shifted (a session's estimates), else their floats, four at
//! once. The median read from it is the one [`crate::stats::median`] gives, to the bit.

use wide::f64x4;

use crate::column::Column;

/// A run's values as the per-probe estimates read them: each less `shift`.
#[derive(Clone, Copy)]
pub(crate) struct Shifted<'a> {
    /// Probe ids (a run's ascending).
    pub(crate) ids: &'a [u64],
    /// The differential of each.
    pub(crate) d: &'a Column,
    pub(crate) shift: f64,
}

/// The comparators that put the middle of n values in place, in order: `(i, j)` leaves the
/// smaller at i and the larger at j.
struct Network {
    n: usize,
    pairs: Vec<(usize, usize)>,
}

impl Network {
    /// Batcher's merge exchange for n values, less the comparators no middle value depends on.
    fn median_of(n: usize) -> Network {
        let mut pairs = Vec::new();
        if n >= 2 {
            let t = usize::BITS - (n - 1).leading_zeros();
            let mut p = 1 << (t - 1);
            while p > 0 {
                let (mut q, mut r, mut d) = (1 << (t - 1), 0, p);
                loop {
                    for i in 0..n - d {
                        if i & p == r {
                            pairs.push((i, i + d));
                        }
                    }
                    if q == p {
                        break;
                    }
                    d = q - p;
                    q >>= 1;
                    r = p;
                }
                p >>= 1;
            }
        }
        // Backwards from the middle: a comparator counts when it writes a wire read later.
        let mut needed = vec![false; n];
        if n > 0 {
            needed[n / 2] = true;
            needed[(n - 1) / 2] = true;
        }
        let mut kept: Vec<(usize, usize)> = Vec::with_capacity(pairs.len());
        for &(i, j) in pairs.iter().rev() {
            if needed[i] || needed[j] {
                needed[i] = true;
                needed[j] = true;
                kept.push((i, j));
            }
        }
        kept.reverse();
        Network { n, pairs: kept }
    }

    /// The median of each lane of `v` (n values; emptied of meaning afterwards): the middle value,
    /// or the mean of the two middle ones, as [`crate::stats::median`] makes it.
    fn medians(&self, v: &mut [f64x4]) -> f64x4 {
        debug_assert_eq!(v.len(), self.n);
        for &(i, j) in &self.pairs {
            let (a, b) = (v[i], v[j]);
            v[i] = a.fast_min(b);
            v[j] = a.fast_max(b);
        }
        let mid = self.n / 2;
        if self.n % 2 == 1 { v[mid] } else { f64x4::splat(0.5) * (v[mid - 1] + v[mid]) }
    }
}

/// Per-probe medians of lists that hold the same ids in the same ascending order, each list's
/// values less its shift: probe k's median is that of the k-th value of every list, in id
/// order. None unless the ids line up so and every value is in 32 bits (the others are read
/// apart), or when a value is NaN or −0 (where the network's minimum and maximum would not order
/// as `f64::total_cmp` does).
pub(crate) fn aligned_medians(lists: &[Shifted]) -> Option<Vec<f64>> {
    let first = lists.first()?.ids;
    let same = |ids: &[u64]| std::ptr::eq(ids, first) || ids == first;
    if !lists.iter().all(|l| same(l.ids) && l.d.len() == first.len()) || !first.is_sorted_by(|a, b| a < b) {
        return None;
    }
    let narrow: Vec<&[i32]> = lists.iter().map(|l| l.d.narrow()).collect::<Option<_>>()?;
    let network = Network::median_of(lists.len());
    let unit = lists[0].d.unit();
    if lists.iter().all(|l| l.shift == 0.0 && l.d.unit() == unit) {
        return whole_medians(&network, &narrow, unit);
    }
    // Read in the same pass as the values: whether one is NaN or −0.
    let mut unordered = false;
    let mut out = Vec::with_capacity(first.len());
    let mut v = vec![f64x4::ZERO; lists.len()];
    let blocks = first.len() / 4;
    let negative_zero = f64x4::splat(-0.0).to_bits();
    for b in 0..blocks {
        for ((v, l), narrow) in v.iter_mut().zip(lists).zip(&narrow) {
            let whole = f64x4::new(narrow.as_chunks::<4>().0[b].map(f64::from));
            *v = whole * f64x4::splat(l.d.unit()) - f64x4::splat(l.shift);
            unordered |= v.is_nan().any() || v.to_bits().simd_eq(negative_zero).any();
        }
        out.extend_from_slice(&network.medians(&mut v).to_array());
    }
    let mut one: Vec<f64> = Vec::with_capacity(lists.len());
    for k in 4 * blocks..first.len() {
        one.clear();
        one.extend(lists.iter().map(|l| l.d.at(k) - l.shift));
        unordered |= one.iter().any(|v| v.is_nan() || v.to_bits() == (-0.0f64).to_bits());
        out.push(crate::stats::median(&mut one));
    }
    (!unordered).then_some(out)
}

/// [`aligned_medians`] of lists of one unit, none shifted: the network run on the whole numbers
/// themselves, as many lanes at once as the processor's widest registers hold (16 with AVX-512),
/// each median made a float as the float network makes it (the unit's product is monotone, so
/// the middle values are the same ones). None where a probe has no value.
fn whole_medians(network: &Network, narrow: &[&[i32]], unit: f64) -> Option<Vec<f64>> {
    #[cfg(target_arch = "x86_64")]
    if let Some(simd) = pulp::x86::V4::try_new() {
        return simd.vectorize(
            #[inline(always)]
            || whole_medians_in::<16>(network, narrow, unit),
        );
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(simd) = pulp::x86::V3::try_new() {
        return simd.vectorize(
            #[inline(always)]
            || whole_medians_in::<8>(network, narrow, unit),
        );
    }
    whole_medians_in::<4>(network, narrow, unit)
}

/// [`whole_medians`], `L` probes side by side.
#[inline(always)]
fn whole_medians_in<const L: usize>(network: &Network, narrow: &[&[i32]], unit: f64) -> Option<Vec<f64>> {
    let len = narrow[0].len();
    let mut out = Vec::with_capacity(len);
    let mut v = vec![[0i32; L]; network.n];
    // The least value read: NONE (i32::MIN) only where a probe has no value.
    let mut least = [i32::MAX; L];
    let mid = network.n / 2;
    let float = |w: i32| f64::from(w) * unit;
    for b in 0..len / L {
        for (v, narrow) in v.iter_mut().zip(narrow) {
            *v = *narrow[b * L..].first_chunk::<L>().expect("a whole block");
            least = std::array::from_fn(|k| least[k].min(v[k]));
        }
        for &(i, j) in &network.pairs {
            let (a, b) = (v[i], v[j]);
            v[i] = std::array::from_fn(|k| a[k].min(b[k]));
            v[j] = std::array::from_fn(|k| a[k].max(b[k]));
        }
        if network.n % 2 == 1 {
            out.extend(v[mid].map(float));
        } else {
            out.extend((0..L).map(|k| 0.5 * (float(v[mid - 1][k]) + float(v[mid][k]))));
        }
    }
    let mut one: Vec<f64> = Vec::with_capacity(narrow.len());
    for k in len / L * L..len {
        one.clear();
        one.extend(narrow.iter().map(|n| n[k]).inspect(|&w| least[0] = least[0].min(w)).map(float));
        out.push(crate::stats::median(&mut one));
    }
    (!least.contains(&Column::NONE)).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn the_network_puts_the_middle_in_place_for_every_zero_one_input() {
        // The zero-one principle (Knuth 5.3.4, Theorem Z): a network that orders every sequence
        // of zeros and ones orders every sequence; here, the middle wires of every one of the 2ⁿ.
        for n in 1..=16 {
            let network = Network::median_of(n);
            for bits in 0u32..1 << n {
                let mut v: Vec<u32> = (0..n).map(|i| bits >> i & 1).collect();
                for &(i, j) in &network.pairs {
                    if v[i] > v[j] {
                        v.swap(i, j);
                    }
                }
                let ones = bits.count_ones() as usize;
                let sorted = |k: usize| u32::from(k >= n - ones);
                assert_eq!((v[n / 2], v[(n - 1) / 2]), (sorted(n / 2), sorted((n - 1) / 2)), "{n} values, {bits:b}");
            }
        }
    }

    /// A column of whole numbers of `unit`.
    fn column(whole: &[i64], unit: f64) -> Column {
        Column::of(whole.iter().map(|&t| Some(t)), whole.len(), unit)
    }

    #[test]
    fn aligned_medians_are_those_of_each_probes_values_sorted_by_hand() {
        // Three runs of five probes in half units, the second run shifted by 1.
        fn list(d: &Column, shift: f64) -> Shifted<'_> {
            Shifted { ids: &[1, 2, 3, 4, 5], d, shift }
        }
        let half = |whole: &[i64]| column(whole, 0.5);
        // 5 −1 7 0 2.5; 3 4 9 −2 3.5; 1 2 8 1 2.5.
        let (a, b, c) = (&half(&[10, -2, 14, 0, 5]), &half(&[6, 8, 18, -4, 7]), &half(&[2, 4, 16, 2, 5]));
        let got = aligned_medians(&[list(a, 0.0), list(b, 1.0), list(c, 0.0)]).unwrap();
        // Probe 1: {5, 2, 1} → 2; 2: {−1, 3, 2} → 2; 3: {7, 8, 8} → 8; 4: {0, −3, 1} → 0;
        // 5: {2.5, 2.5, 2.5} → 2.5.
        assert_eq!(got, [2.0, 2.0, 8.0, 0.0, 2.5]);
        let two = aligned_medians(&[list(a, 0.0), list(c, 0.0)]).unwrap();
        assert_eq!(two, [3.0, 0.5, 7.5, 0.5, 2.5]);
        // Ids that do not line up, ids not ascending, a value beyond 32 bits and a NaN are left
        // to the general path.
        let shorter = half(&[-2, 14, 0, 5]);
        let other = Shifted { ids: &[2, 3, 4, 5], d: &shorter, shift: 0.0 };
        assert!(aligned_medians(&[list(a, 0.0), other]).is_none());
        let descending = Shifted { ids: &[5, 4, 3, 2, 1], d: a, shift: 0.0 };
        assert!(aligned_medians(&[descending, descending]).is_none());
        assert!(aligned_medians(&[list(a, 0.0), list(&half(&[0, 1 << 40, 0, 0, 0]), 0.0)]).is_none());
        assert!(aligned_medians(&[list(a, 0.0), list(c, f64::NAN)]).is_none());
        // A probe without a value, in a block of sixteen and after one: left to the general path.
        for at in [3, 17] {
            let some = Column::of((0..20).map(|k| (k != at).then_some(k as i64)), 20, 0.5);
            let full = column(&[1; 20], 0.5);
            let ids: Vec<u64> = (1..=20).collect();
            let l = |d| Shifted { ids: &ids, d, shift: 0.0 };
            assert!(aligned_medians(&[l(&full), l(&some), l(&full)]).is_none(), "no value at {at}");
        }
    }

    #[test]
    fn aligned_medians_are_the_sorted_medians_to_the_bit() {
        let mut rng = ChaCha8Rng::seed_from_u64(10);
        // Shifted lists (medians of floats) and unshifted ones (of the whole numbers, in blocks of
        // as many probes as the registers hold, then one by one).
        for (runs, shifted) in (1..=20).flat_map(|runs| [(runs, true), (runs, false)]) {
            let probes = rng.random_range(0..60u64);
            let ids: Vec<u64> = (0..probes).map(|id| 3 * id + 1).collect();
            let whole: Vec<Vec<i64>> =
                (0..runs).map(|_| (0..probes).map(|_| rng.random_range(-50..50i64)).collect()).collect();
            let columns: Vec<Column> = whole.iter().map(|w| column(w, 0.34)).collect();
            // Every other run with its own copy of the ids, as runs of other sessions have.
            let copies: Vec<Vec<u64>> = (0..runs).map(|_| ids.clone()).collect();
            let lists: Vec<Shifted> = columns
                .iter()
                .enumerate()
                .map(|(r, d)| Shifted {
                    ids: if r % 2 == 0 { &ids } else { &copies[r] },
                    d,
                    shift: if shifted { rng.random_range(-2.0..2.0) } else { 0.0 },
                })
                .collect();
            let got = aligned_medians(&lists).unwrap();
            for (k, m) in got.iter().enumerate() {
                let mut v: Vec<f64> = whole.iter().zip(&lists).map(|(w, l)| w[k] as f64 * 0.34 - l.shift).collect();
                assert_eq!(m.to_bits(), crate::stats::median(&mut v).to_bits(), "{runs} runs, probe {k}");
            }
        }
    }
}

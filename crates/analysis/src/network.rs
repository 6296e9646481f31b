//! Medians of many small samples at once: the per-probe medians over a session's runs (and over a
//! mode's), when every run paired the same probes. A sorting network (Batcher's merge exchange,
//! Knuth, TAOCP 5.2.2, Algorithm M) orders the n values of four probes side by side, lane by lane,
//! with no branch on the data; the median read from it is the one [`crate::stats::median`] gives,
//! to the bit.

use wide::f64x4;

/// A run's values as the per-probe estimates read them: each less `shift`.
#[derive(Clone, Copy)]
pub(crate) struct Shifted<'a> {
    /// Probe ids (a run's ascending).
    pub(crate) ids: &'a [u64],
    /// The value of each.
    pub(crate) values: &'a [f64],
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
/// order. None unless the ids line up so, or when a value is NaN or −0 (where the network's
/// minimum and maximum would not order as `f64::total_cmp` does).
pub(crate) fn aligned_medians(lists: &[Shifted]) -> Option<Vec<f64>> {
    let first = lists.first()?.ids;
    let same = |ids: &[u64]| std::ptr::eq(ids, first) || ids == first;
    if !lists.iter().all(|l| same(l.ids) && l.values.len() == first.len()) || !first.is_sorted_by(|a, b| a < b) {
        return None;
    }
    // Read in the same pass as the values: whether one is NaN or −0.
    let mut unordered = false;
    let network = Network::median_of(lists.len());
    let mut out = Vec::with_capacity(first.len());
    let mut v = vec![f64x4::ZERO; lists.len()];
    let blocks = first.len() / 4;
    let negative_zero = f64x4::splat(-0.0).to_bits();
    for b in 0..blocks {
        for (v, l) in v.iter_mut().zip(lists) {
            *v = f64x4::new(l.values.as_chunks::<4>().0[b]) - f64x4::splat(l.shift);
            unordered |= v.is_nan().any() || v.to_bits().simd_eq(negative_zero).any();
        }
        out.extend_from_slice(&network.medians(&mut v).to_array());
    }
    let mut one: Vec<f64> = Vec::with_capacity(lists.len());
    for k in 4 * blocks..first.len() {
        one.clear();
        one.extend(lists.iter().map(|l| l.values[k] - l.shift));
        unordered |= one.iter().any(|v| v.is_nan() || v.to_bits() == (-0.0f64).to_bits());
        out.push(crate::stats::median(&mut one));
    }
    (!unordered).then_some(out)
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

    #[test]
    fn aligned_medians_are_those_of_each_probes_values_sorted_by_hand() {
        // Three runs of five probes, the second run shifted by 1.
        let ids = [1, 2, 3, 4, 5];
        let list = |values: &'static [f64], shift: f64| Shifted { ids: &[1, 2, 3, 4, 5], values, shift };
        let (a, b, c) = (&[5.0, -1.0, 7.0, 0.0, 2.5], &[3.0, 4.0, 9.0, -2.0, 3.5], &[1.0, 2.0, 8.0, 1.0, 2.5]);
        let got = aligned_medians(&[list(a, 0.0), list(b, 1.0), list(c, 0.0)]).unwrap();
        // Probe 1: {5, 2, 1} → 2; 2: {−1, 3, 2} → 2; 3: {7, 8, 8} → 8; 4: {0, −3, 1} → 0;
        // 5: {2.5, 2.5, 2.5} → 2.5.
        assert_eq!(got, [2.0, 2.0, 8.0, 0.0, 2.5]);
        let two = aligned_medians(&[list(a, 0.0), list(c, 0.0)]).unwrap();
        assert_eq!(two, [3.0, 0.5, 7.5, 0.5, 2.5]);
        // Ids that do not line up, ids not ascending, and a −0 are left to the general path.
        let other = Shifted { ids: &ids[1..], values: &a[1..], shift: 0.0 };
        assert!(aligned_medians(&[list(a, 0.0), other]).is_none());
        let descending = Shifted { ids: &[5, 4, 3, 2, 1], values: a, shift: 0.0 };
        assert!(aligned_medians(&[descending, descending]).is_none());
        assert!(aligned_medians(&[list(a, 0.0), list(&[-0.0, 0.0, 0.0, 0.0, 0.0], 0.0)]).is_none());
    }

    #[test]
    fn aligned_medians_are_the_sorted_medians_to_the_bit() {
        let mut rng = ChaCha8Rng::seed_from_u64(10);
        for runs in 1..=20 {
            let probes = rng.random_range(0..40u64);
            let ids: Vec<u64> = (0..probes).map(|id| 3 * id + 1).collect();
            let values: Vec<Vec<f64>> = (0..runs)
                .map(|_| (0..probes).map(|_| f64::from(rng.random_range(-50..50i32)) * 0.34).collect())
                .collect();
            // Every other run with its own copy of the ids, as runs of other sessions have.
            let copies: Vec<Vec<u64>> = (0..runs).map(|_| ids.clone()).collect();
            let lists: Vec<Shifted> = values
                .iter()
                .enumerate()
                .map(|(r, v)| Shifted {
                    ids: if r % 2 == 0 { &ids } else { &copies[r] },
                    values: v,
                    shift: rng.random_range(-2.0..2.0),
                })
                .collect();
            let got = aligned_medians(&lists).unwrap();
            for (k, m) in got.iter().enumerate() {
                let mut v: Vec<f64> = lists.iter().map(|l| l.values[k] - l.shift).collect();
                assert_eq!(m.to_bits(), crate::stats::median(&mut v).to_bits(), "{runs} runs, probe {k}");
            }
        }
    }
}

//! Step 8, the hardware-clock check: re-pair the reflect residuals with the differentials at
//! random and compare the synthesised quantiles with the measured ones.

use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use crate::stats::{Counted, quantiles_select};
use latency_results::summary::{HwCheck, HwLevel};

/// Levels of the hardware-clock check (percent).
const HW_LEVELS: [f64; 6] = [25.0, 50.0, 75.0, 90.0, 95.0, 99.0];
/// The hardware-clock levels judged against the tolerance (p25–p95, as the paper does); p99 rests
/// on a few hundred probes of a paper run and is reported only.
const HW_JUDGED_MAX_LEVEL: f64 = 95.0;

/// Step 8: re-pair residuals C = R − D with the differentials at random and compare quantiles
/// of the synthesised D + C with the measured R; `pairs` gives the (D, R) pairs, in the same order
/// each time, their R counted if they could be. None without pairs.
pub(crate) fn hw_clock_check<I: Iterator<Item = (f64, f64)>>(
    pairs: impl Fn() -> I,
    measured: Option<Counted>,
    tolerance_ns: f64,
    rng: &mut ChaCha8Rng,
) -> Option<HwCheck> {
    // The residuals shuffled, then each made D + C in place (the synthesised values); the pairs
    // read by `for_each` (loops within loops where they are the runs' probes), not one by one.
    let mut synth: Vec<f64> = Vec::with_capacity(measured.as_ref().map_or_else(|| pairs().count(), Counted::len));
    pairs().for_each(|(d, r)| synth.push(r - d));
    let n = synth.len();
    if n == 0 {
        return None;
    }
    synth.shuffle(rng);
    let mut at = synth.iter_mut();
    pairs().for_each(|(d, _)| {
        if let Some(c) = at.next() {
            *c += d;
        }
    });
    let fractions = HW_LEVELS.map(|l| l / 100.0);
    // The measured R: counted (in 32 bits, over a narrow span), else selected.
    let m = measured.map(|c| c.quantiles(&fractions)).unwrap_or_else(|| {
        let mut values: Vec<f64> = Vec::with_capacity(n);
        pairs().for_each(|p| values.push(p.1));
        quantiles_select(&mut values, &fractions)
    });
    let s = quantiles_select(&mut synth, &fractions);
    let levels: Vec<HwLevel> = HW_LEVELS
        .iter()
        .zip(m.into_iter().zip(s))
        .map(|(&l, (m, s))| HwLevel {
            level: l,
            measured_ns: m,
            synthesized_ns: s,
            diff_ns: s - m,
            judged: l <= HW_JUDGED_MAX_LEVEL,
        })
        .collect();
    let max_diff_ns = levels.iter().filter(|l| l.judged).map(|l| l.diff_ns.abs()).fold(0.0, f64::max);
    Some(HwCheck { levels, max_diff_ns, tolerance_ns, pass: max_diff_ns <= tolerance_ns, pairs: n as u64 })
}

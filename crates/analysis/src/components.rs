//! Variance components of an estimate at each level of the study's design — bring-up (session),
//! run, probe — by the method of Kalibera & Jones ("Rigorous benchmarking in reasonable time",
//! ISMM 2013), with the corrected (unbiased) estimator of their libkalibera.
//!
//! The design nests probes in runs in sessions: n sessions, r runs per session, N probes per run.
//! The estimate θ is a quantile (p50, p99) of the per-probe differentials, so the levels are read
//! on per-run quantiles `θ_sr` rather than means:
//!
//! - probe level: the variance a run's quantile has because its probes are a sample, `V_probe`,
//!   from the two halves of each run (odd and even probe ids): each half's quantile has twice the
//!   variance of the whole run's, so `V_probe = mean over runs of (θ_odd − θ_even)² / 4`;
//! - run level: `S_run²` the variance of `θ_sr` over a session's runs, averaged over sessions; its
//!   part not explained by the probes is `T_run² = S_run² − V_probe`;
//! - session level: `S_session²` the variance over sessions of the session means `θ̄_s`; its part
//!   not explained by the runs is `T_session² = S_session² − S_run²/r`.
//!
//! A component estimated below zero is reported as zero (its estimate is kept apart: it says the
//! level adds nothing measurable). The variance of a study's estimate with n sessions of r runs is
//! then `T_session²/n + (T_run² + V_probe)/(n r)`, and each level's share of it says where more
//! repetitions would narrow the interval (see [`Components::shares`]).

use super::stats::{Counted, quantiles_select};
pub use latency_results::summary::{Components, Design, Shares};

/// A run's probe ids and the value of each.
pub type Run<'a> = (&'a [u64], &'a [f64]);

/// The components of quantile `p` from per-run values: for each session, each run's probe ids and
/// values. None without two sessions that each have two runs of at least two probes (no level can
/// be separated then). `tick`: the unit the values are whole numbers of, where they are (the TSC
/// tick, ns, of a run's differentials): such runs are counted rather than selected in.
pub fn of_quantile(sessions: &[Vec<Run>], p: f64, tick: Option<f64>) -> Option<Components> {
    of_quantiles(sessions, &[p], tick).map(|mut c| c.remove(0))
}

/// [`of_quantile`] at each of `ps` (ascending; none gives none), from one pass over the runs: each
/// run's values counted in whole ticks, or else its values and each half's copied once and every
/// quantile selected in them (the same order statistics: the same quantiles to the bit).
pub fn of_quantiles(sessions: &[Vec<Run>], ps: &[f64], tick: Option<f64>) -> Option<Vec<Components>> {
    let levels = ps.len();
    if levels == 0 {
        return None;
    }
    let mut session_means = vec![Vec::new(); levels];
    let mut run_vars = vec![Vec::new(); levels];
    let mut half_diffs = vec![Vec::new(); levels];
    let (mut runs, mut probes) = (0usize, 0usize);
    let (mut all, mut odd, mut even) = (Vec::new(), Vec::new(), Vec::new());
    let mut ticks = Vec::new();
    for s in sessions {
        let mut thetas = vec![Vec::new(); levels];
        for &(ids, values) in s.iter().filter(|r| r.1.len() >= 2) {
            probes += values.len();
            if let Some([whole, odd, even]) = tick.and_then(|t| counted(ids, values, t, &mut ticks)) {
                for (t, q) in thetas.iter_mut().zip(whole.quantiles(ps)) {
                    t.push(q);
                }
                if odd.len() > 0 && even.len() > 0 {
                    for (h, (o, e)) in half_diffs.iter_mut().zip(odd.quantiles(ps).into_iter().zip(even.quantiles(ps)))
                    {
                        h.push(o - e);
                    }
                }
                continue;
            }
            all.clear();
            all.extend_from_slice(values);
            for (t, q) in thetas.iter_mut().zip(quantiles_select(&mut all, ps)) {
                t.push(q);
            }
            odd.clear();
            even.clear();
            for (&id, &v) in ids.iter().zip(values) {
                if id % 2 == 1 { odd.push(v) } else { even.push(v) }
            }
            if !odd.is_empty() && !even.is_empty() {
                let (o, e) = (quantiles_select(&mut odd, ps), quantiles_select(&mut even, ps));
                for (h, (o, e)) in half_diffs.iter_mut().zip(o.into_iter().zip(e)) {
                    h.push(o - e);
                }
            }
        }
        if thetas[0].len() >= 2 {
            runs += thetas[0].len();
            for ((t, v), m) in thetas.iter().zip(&mut run_vars).zip(&mut session_means) {
                v.push(variance(t));
                m.push(t.iter().sum::<f64>() / t.len() as f64);
            }
        }
    }
    if session_means[0].len() < 2 || half_diffs[0].is_empty() {
        return None;
    }
    let n = session_means[0].len() as f64;
    let r = runs as f64 / n;
    let design = Design { sessions: n, runs: r, probes: probes as f64 / runs.max(1) as f64 };
    let components = (0..levels).map(|k| {
        let probe_ns2 = half_diffs[k].iter().map(|d| d * d).sum::<f64>() / half_diffs[k].len() as f64 / 4.0;
        let s_run2 = run_vars[k].iter().sum::<f64>() / run_vars[k].len() as f64;
        let s_session2 = variance(&session_means[k]);
        Components {
            session_ns2: (s_session2 - s_run2 / r).max(0.0),
            run_ns2: (s_run2 - probe_ns2).max(0.0),
            probe_ns2,
            design,
        }
    });
    Some(components.collect())
}

/// A run's values counted in whole ticks of `tick`: the whole run, its odd ids, its even ids;
/// none when a value is not a whole number of ticks (made so: the product of one by `tick` is
/// not the value), or when the values span more ticks than the run has probes (selecting is then
/// the quicker). `ticks`: room for the run's ticks.
fn counted(ids: &[u64], values: &[f64], tick: f64, ticks: &mut Vec<i32>) -> Option<[Counted; 3]> {
    // Rounded to the nearest whole by adding and taking away 1.5 · 2⁵² (exact below 2⁵¹), in
    // vector code where `round` is a call.
    const ROUND: f64 = 6_755_399_441_055_744.0;
    let per_ns = 1.0 / tick;
    ticks.clear();
    ticks.extend(values.iter().map(|&v| ((v * per_ns + ROUND) - ROUND) as i32));
    let whole = values.iter().zip(ticks.iter()).all(|(&v, &t)| (f64::from(t) * tick).to_bits() == v.to_bits());
    let (low, high) = ticks.iter().fold((i32::MAX, i32::MIN), |(lo, hi), &t| (lo.min(t), hi.max(t)));
    let span = i64::from(high) - i64::from(low) + 1;
    if !whole || span > values.len() as i64 {
        return None;
    }
    // Two counts a tick for each half, taken in turn (a run of equal values does not wait on its
    // own last count).
    let mut counts = vec![0usize; 4 * span as usize];
    for (k, (&id, &t)) in ids.iter().zip(ticks.iter()).enumerate() {
        counts[(t - low) as usize * 4 + (id % 2 * 2) as usize + (k & 1)] += 1;
    }
    let per_tick = counts.as_chunks::<4>().0;
    let low = i64::from(low);
    Some([
        Counted::of_counts(low, per_tick.iter().map(|c| c.iter().sum()), tick),
        Counted::of_counts(low, per_tick.iter().map(|c| c[2] + c[3]), tick),
        Counted::of_counts(low, per_tick.iter().map(|c| c[0] + c[1]), tick),
    ])
}

/// Sample variance (n − 1).
fn variance(x: &[f64]) -> f64 {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::normal;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    /// Probes N(0, σ_p²) + run shift N(0, σ_r²) + session shift N(0, σ_s²).
    struct Study {
        ids: Vec<u64>,
        values: Vec<Vec<Vec<f64>>>,
    }

    impl Study {
        fn runs(&self) -> Vec<Vec<Run<'_>>> {
            self.values.iter().map(|runs| runs.iter().map(|v| (self.ids.as_slice(), v.as_slice())).collect()).collect()
        }
    }

    fn study(n: usize, r: usize, probes: u64, sd: [f64; 3], seed: u64) -> Study {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let values = (0..n)
            .map(|_| {
                let s = sd[0] * normal(&mut rng);
                (0..r)
                    .map(|_| {
                        let run = s + sd[1] * normal(&mut rng);
                        (1..=probes).map(|_| run + sd[2] * normal(&mut rng)).collect()
                    })
                    .collect()
            })
            .collect();
        Study { ids: (1..=probes).collect(), values }
    }

    #[test]
    fn the_components_of_a_median_are_those_the_data_were_drawn_with() {
        // The median of N normal values has variance ≈ (π/2) σ²/N (Kenney & Keeping), here
        // (π/2) · 100 / 2000 = 0.0785 ns²; runs add 1 ns², sessions 4 ns². Averaged over ten
        // studies of 200 sessions × 5 runs, whose session estimates scatter by about 0.6 ns² each.
        let probe = std::f64::consts::FRAC_PI_2 * 100.0 / 2000.0;
        let mut sum = [0.0; 3];
        for seed in 1..=10 {
            let data = study(200, 5, 2000, [2.0, 1.0, 10.0], seed);
            let c = of_quantile(&data.runs(), 0.5, None).unwrap();
            assert_eq!(c.design, Design { sessions: 200.0, runs: 5.0, probes: 2000.0 });
            for (s, v) in sum.iter_mut().zip([c.session_ns2, c.run_ns2, c.probe_ns2]) {
                *s += v / 10.0;
            }
        }
        let [session, run, probe_got] = sum;
        assert!((probe_got - probe).abs() < 0.05 * probe, "{probe_got} vs {probe}");
        assert!((run - 1.0).abs() < 0.08, "{run}");
        assert!((session - 4.0).abs() < 0.6, "{session}");
    }

    #[test]
    fn a_level_that_adds_nothing_is_estimated_near_zero_not_inflated_by_the_levels_below() {
        // No session effect: the uncorrected session variance would be σ_r²/r + V_probe/r ≈ 0.2.
        let data = study(200, 5, 2000, [0.0, 1.0, 10.0], 5);
        let c = of_quantile(&data.runs(), 0.5, None).unwrap();
        assert!(c.session_ns2 < 0.1, "{c:?}");
        let shares = c.shares();
        assert!((shares.session + shares.run + shares.probe - 1.0).abs() < 1e-12);
        assert!(shares.run > 0.8, "{shares:?}");
    }

    #[test]
    fn the_variance_of_a_design_follows_the_hierarchy() {
        let c = Components {
            session_ns2: 4.0,
            run_ns2: 1.0,
            probe_ns2: 0.5,
            design: Design { sessions: 5.0, runs: 10.0, probes: 1000.0 },
        };
        // 4/5 + 1/50 + 0.5/50.
        assert!((c.variance(c.design) - 0.83).abs() < 1e-12);
        // Twice the probes per run halve the probe part: 4/10 + 1/20 + 0.25/20.
        let d = Design { sessions: 10.0, runs: 2.0, probes: 2000.0 };
        assert!((c.variance(d) - 0.4625).abs() < 1e-12);
    }

    #[test]
    fn a_calibrated_estimate_adds_the_null_calibrations_components() {
        let program = Components {
            session_ns2: 1.0,
            run_ns2: 0.1,
            probe_ns2: 0.04,
            design: Design { sessions: 5.0, runs: 10.0, probes: 20_000.0 },
        };
        let null = Components {
            session_ns2: 2.0,
            run_ns2: 0.5,
            probe_ns2: 0.2,
            design: Design { sessions: 5.0, runs: 10.0, probes: 10_000.0 },
        };
        // The null's probe part at the program's 20,000 probes per run: 0.2 × 10,000/20,000.
        let sum = program.plus(&null);
        assert_eq!((sum.session_ns2, sum.run_ns2, sum.probe_ns2), (3.0, 0.6, 0.04 + 0.1));
        assert_eq!(sum.design, program.design);
    }

    #[test]
    fn runs_counted_in_whole_ticks_give_the_selected_components_to_the_bit() {
        // Differentials of whole TSC ticks (1/2.6 GHz), as runs have: counted, they give the
        // components selection gives, every bit; a value off the grid, or a span wider than the
        // run, is selected in (the same again).
        let tick = 1e9 / 2.6e9;
        let data = study(4, 3, 500, [3.0, 2.0, 6.0], 9);
        let mut on_grid = Study { ids: data.ids.clone(), values: data.values.clone() };
        for v in on_grid.values.iter_mut().flatten().flatten() {
            *v = f64::from((*v / tick).round() as i32 + 1_000) * tick;
        }
        let off_grid = {
            let mut s = Study { ids: on_grid.ids.clone(), values: on_grid.values.clone() };
            s.values[1][2][7] += tick / 3.0;
            s.values[2][0][0] = 1e6 * tick;
            s
        };
        let levels = [0.05, 0.5, 0.99];
        for s in [&on_grid, &off_grid] {
            let counted = of_quantiles(&s.runs(), &levels, Some(tick)).unwrap();
            let selected = of_quantiles(&s.runs(), &levels, None).unwrap();
            for (c, v) in counted.iter().zip(&selected) {
                let bits = |c: &Components| [c.session_ns2, c.run_ns2, c.probe_ns2].map(f64::to_bits);
                assert_eq!(bits(c), bits(v));
                assert_eq!(c.design, v.design);
            }
        }
        // Counted, a run's quantiles are those of its values sorted (2 4 4 5 ticks; odd ids 2 4,
        // even 4 5): the median 4 ticks, p99 at h = 2.97 ticks 4 + 0.97 × 1.
        let (ids, values) = ([1, 2, 3, 4], [2.0, 4.0, 4.0, 5.0].map(|t| t * tick));
        let [whole, odd, even] = counted(&ids, &values, tick, &mut Vec::new()).unwrap();
        let near = |got: f64, ticks: f64| (got - ticks * tick).abs() < 1e-12;
        let [median, p99] = whole.quantiles(&[0.5, 0.99])[..] else { unreachable!() };
        assert!(near(median, 4.0) && near(p99, 4.0 + 0.97), "{median} {p99}");
        assert_eq!(odd.len() + even.len(), 4);
        assert!(near(odd.quantiles(&[0.5])[0], 3.0) && near(even.quantiles(&[0.5])[0], 4.5));
        assert!(counted(&ids, &[0.0, 1.5 * tick, 0.0, 0.0], tick, &mut Vec::new()).is_none());
        assert!(counted(&ids, &[0.0, 9.0 * tick, 0.0, 0.0], tick, &mut Vec::new()).is_none());
    }

    #[test]
    fn one_session_or_one_run_each_separates_nothing() {
        let data = study(1, 5, 100, [1.0, 1.0, 1.0], 1);
        assert!(of_quantile(&data.runs(), 0.5, None).is_none());
        let data = study(5, 1, 100, [1.0, 1.0, 1.0], 1);
        assert!(of_quantile(&data.runs(), 0.5, None).is_none());
    }
}

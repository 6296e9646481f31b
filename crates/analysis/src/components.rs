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

use super::column::Column;
use super::stats::{Counted, quantiles_select};
pub use latency_results::summary::{Components, Design, Shares};

/// A run's probe ids and the value of each (a run's differentials: whole TSC ticks).
pub(crate) type Run<'a> = (&'a [u64], &'a Column);

/// The components of quantile `p` from per-run values: for each session, each run's probe ids and
/// values. None without two sessions that each have two runs of at least two probes (no level can
/// be separated then).
pub(crate) fn of_quantile(sessions: &[Vec<Run>], p: f64) -> Option<Components> {
    of_quantiles(sessions, &[p]).map(|mut c| c.remove(0))
}

/// [`of_quantile`] at each of `ps` (ascending; none gives none), from one pass over the runs: each
/// run counted in whole ticks, or else (values over a wide span) its values and each half's copied
/// once and every quantile selected in them (the same order statistics: the same quantiles to the
/// bit).
pub(crate) fn of_quantiles(sessions: &[Vec<Run>], ps: &[f64]) -> Option<Vec<Components>> {
    let levels = ps.len();
    if levels == 0 {
        return None;
    }
    let mut session_means = vec![Vec::new(); levels];
    let mut run_vars = vec![Vec::new(); levels];
    let mut half_diffs = vec![Vec::new(); levels];
    let (mut runs, mut probes) = (0usize, 0usize);
    let (mut all, mut odd, mut even) = (Vec::new(), Vec::new(), Vec::new());
    for s in sessions {
        let mut thetas = vec![Vec::new(); levels];
        for &(ids, values) in s.iter().filter(|r| r.1.len() >= 2) {
            probes += values.len();
            if let Some([whole, odd, even]) = values.narrow().and_then(|t| counted(ids, t, values.unit())) {
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
            all.extend(values.iter());
            odd.clear();
            even.clear();
            for (&id, &v) in ids.iter().zip(&all) {
                if id % 2 == 1 { odd.push(v) } else { even.push(v) }
            }
            for (t, q) in thetas.iter_mut().zip(quantiles_select(&mut all, ps)) {
                t.push(q);
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

/// A run's whole numbers `whole` of `unit` counted: the whole run, its odd ids, its even ids; none
/// when they span more than the run has values (selecting is then the quicker).
fn counted(ids: &[u64], whole: &[i32], unit: f64) -> Option<[Counted; 3]> {
    let (low, high) = whole.iter().fold((i32::MAX, i32::MIN), |(lo, hi), &t| (lo.min(t), hi.max(t)));
    let span = i64::from(high) - i64::from(low) + 1;
    if span > whole.len() as i64 {
        return None;
    }
    // Two counts a value for each half, taken in turn (a run of equal values does not wait on
    // its own last count).
    let mut counts = vec![0usize; 4 * span as usize];
    for (k, (&id, &t)) in ids.iter().zip(whole).enumerate() {
        counts[(t - low) as usize * 4 + (id % 2 * 2) as usize + (k & 1)] += 1;
    }
    let per_value = counts.as_chunks::<4>().0;
    let low = i64::from(low);
    Some([
        Counted::of_counts(low, per_value.iter().map(|c| c.iter().sum()), unit),
        Counted::of_counts(low, per_value.iter().map(|c| c[2] + c[3]), unit),
        Counted::of_counts(low, per_value.iter().map(|c| c[0] + c[1]), unit),
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
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Probes N(0, σ_p²) + run shift N(0, σ_r²) + session shift N(0, σ_s²), in whole fm.
    struct Study {
        ids: Vec<u64>,
        values: Vec<Vec<Column>>,
    }

    impl Study {
        fn runs(&self) -> Vec<Vec<Run<'_>>> {
            self.values.iter().map(|runs| runs.iter().map(|v| (self.ids.as_slice(), v)).collect()).collect()
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
                        let fm = (1..=probes).map(|_| Some(((run + sd[2] * normal(&mut rng)) * 1e6).round() as i64));
                        Column::of(fm, probes as usize, 1e-6)
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
            let c = of_quantile(&data.runs(), 0.5).unwrap();
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
        let c = of_quantile(&data.runs(), 0.5).unwrap();
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
    fn a_runs_quantiles_counted_in_whole_ticks_are_those_selected_to_the_bit() {
        // Differentials of whole TSC ticks (1/2.6 GHz), as runs have: the whole run's quantiles
        // and each half's (odd and even ids), counted, are those selected in the same values.
        let tick = 1e9 / 2.6e9;
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let levels = [0.0, 0.05, 0.5, 0.99, 1.0];
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for n in [2usize, 3, 17, 500, 4_001] {
            let ids: Vec<u64> = (0..n as u64).map(|k| 3 * k + 1).collect();
            // Spanning fewer ticks than there are probes (counted).
            let whole: Vec<i32> = (0..n).map(|_| 900 + rng.random_range(0..n as i32)).collect();
            let counts = counted(&ids, &whole, tick).expect("a narrow span");
            let floats = |odd: Option<u64>| -> Vec<f64> {
                let kept = ids.iter().zip(&whole).filter(|(id, _)| odd.is_none_or(|o| *id % 2 == o));
                kept.map(|(_, &t)| f64::from(t) * tick).collect()
            };
            for (c, mut v) in counts.iter().zip([floats(None), floats(Some(1)), floats(Some(0))]) {
                assert_eq!(c.len(), v.len());
                let (got, want) = (c.quantiles(&levels), quantiles_select(&mut v, &levels));
                assert_eq!(bits(&got), bits(&want), "{n} probes");
            }
        }
        // By hand: 2 4 4 5 ticks (odd ids 2 4, even 4 5): the median 4 ticks, p99 at h = 2.97
        // ticks 4 + 0.97 × 1; the halves' medians 3 and 4.5.
        let [all, odd, even] = counted(&[1, 2, 3, 4], &[2, 4, 4, 5], tick).unwrap();
        let near = |got: f64, ticks: f64| (got - ticks * tick).abs() < 1e-12;
        let [median, p99] = all.quantiles(&[0.5, 0.99])[..] else { unreachable!() };
        assert!(near(median, 4.0) && near(p99, 4.0 + 0.97), "{median} {p99}");
        assert_eq!((odd.len(), even.len()), (2, 2));
        assert!(near(odd.quantiles(&[0.5])[0], 3.0) && near(even.quantiles(&[0.5])[0], 4.5));
        // Values spanning more ticks than the run has: selected instead.
        assert!(counted(&[1, 2, 3, 4], &[0, 9, 0, 0], tick).is_none());
    }

    #[test]
    fn one_session_or_one_run_each_separates_nothing() {
        let data = study(1, 5, 100, [1.0, 1.0, 1.0], 1);
        assert!(of_quantile(&data.runs(), 0.5).is_none());
        let data = study(5, 1, 100, [1.0, 1.0, 1.0], 1);
        assert!(of_quantile(&data.runs(), 0.5).is_none());
    }
}

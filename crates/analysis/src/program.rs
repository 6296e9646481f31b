//! Steps 5–9 for one program: calibrated per-probe estimates, session medians, reset modes,
//! noise-corrected quantiles, vendor-bound margins, confidence intervals and the hardware-clock
//! check.

use rand_chacha::ChaCha8Rng;

use super::noise::Simex;
use super::stats::quantile_sorted;
use super::stats::{grid_median, grid_quantile, median};
use super::uncertainty;
use crate::column::Column;
use crate::hwcheck::hw_clock_check;
use crate::runs::RunPairs;
use crate::stats::{Counted, keyed, quantiles_select};
use crate::{modes, noise};
use latency_plan::Analysis;
use latency_results::index::Group;
use latency_results::summary::*;

/// What the analysis of one program reads.
pub(super) struct Input<'a> {
    pub group: &'a Group,
    /// Per session: the program's per-probe estimates (raw).
    pub sessions: Vec<(u32, &'a [(u64, f64)])>,
    /// Per session: the runs.
    pub runs: Vec<&'a [&'a RunPairs]>,
    /// The calibrating null's per-probe estimates, per session.
    pub null_sessions: Vec<&'a [(u64, f64)]>,
    /// The calibrating null's runs, per session.
    pub null_runs: Vec<&'a [&'a RunPairs]>,
    /// The null calibration (none: `analysis.calibration: none`).
    pub null: Option<&'a NullSummary>,
    /// Levels stored (percent).
    pub levels: &'a [f64],
    /// Settings.
    pub analysis: &'a Analysis,
    /// TSC tick, ns.
    pub tick_ns: f64,
    /// The grid the program's and the null's per-session estimates lie on, ns.
    pub grid: f64,
    pub null_grid: f64,
}

/// Analyse one program; none when it has no usable estimate.
pub(super) fn analyse(input: &Input<'_>, rng: &mut ChaCha8Rng) -> Option<ProgramSummary> {
    let &Input { group: g, null, levels, analysis: a, .. } = input;
    let delta = null.map_or(0.0, |n| n.offset_ns);
    let grid = input.grid;
    let mut sessions = Vec::new();
    let mut calibrated: Vec<Vec<(u64, f64)>> = Vec::new();
    // Each session's hardware-clock differentials counted, where all fit in 32 bits and span little.
    let mut hw_counted = Vec::new();
    for (&(s, est), rs) in input.sessions.iter().zip(&input.runs) {
        let cal: Vec<(u64, f64)> = est.iter().map(|&(id, x)| (id, x - delta)).collect();
        let raw_median = grid_median(&mut est.iter().map(|e| e.1).collect::<Vec<_>>(), grid);
        sessions.push(SessionSummary {
            session: s,
            raw_median_ns: raw_median,
            median_ns: raw_median - delta,
            matched: rs.iter().map(|r| r.counts.matched).sum(),
            excluded: rs.iter().map(|r| r.excluded).sum(),
            runs: rs.len() as u32,
            hw_median_ns: {
                let narrow: Option<Vec<&[i32]>> = rs.iter().map(|r| r.hw.narrow()).collect();
                let c = narrow.and_then(|n| Counted::of(&n, Column::NONE));
                let median = match &c {
                    Some(c) => (c.len() > 0).then(|| c.median()),
                    None => {
                        let mut r: Vec<f64> = rs.iter().flat_map(|r| r.hw_pairs().map(|p| p.1)).collect();
                        (!r.is_empty()).then(|| median(&mut r))
                    }
                };
                hw_counted.push(c);
                median
            },
        });
        calibrated.push(cal);
    }
    if calibrated.iter().all(Vec::is_empty) {
        return None;
    }

    // Modes: clusters of session medians, split by evidence.
    let mut order: Vec<usize> = (0..sessions.len()).collect();
    order.sort_by(|&i, &j| sessions[i].median_ns.total_cmp(&sessions[j].median_ns));
    let sorted_medians: Vec<f64> = order.iter().map(|&i| sessions[i].median_ns).collect();
    let null_medians: Vec<f64> = null.iter().flat_map(|n| n.sessions.iter().map(|s| s.1)).collect();
    let split = if a.modes.enabled {
        modes::split(&sorted_medians, &null_medians, a.modes.min_separation_ns, a.modes.min_gap_sigmas)
    } else {
        modes::Split {
            clusters: std::iter::once(0..sorted_medians.len()).collect(),
            within_sd_ns: None,
            threshold_ns: f64::INFINITY,
        }
    };
    let mut modes = Vec::new();
    let mut members_of: Vec<Vec<usize>> = Vec::new();
    let mut pooled_of: Vec<Vec<(u64, f64)>> = Vec::new();
    let mut noise_of: Vec<Option<f64>> = Vec::new();
    let mut simex_of: Vec<Option<Simex>> = Vec::new();
    let mut reproducibility: f64 = 0.0;
    let fractions: Vec<f64> = levels.iter().map(|l| l / 100.0).collect();
    for c in &split.clusters {
        let members: Vec<usize> = order[c.clone()].to_vec();
        // Raw: the paper's per-session estimates, pooled, less the paper's δ̂.
        let mut values: Vec<f64> = members.iter().flat_map(|&i| calibrated[i].iter().map(|e| e.1)).collect();
        let paper_shift = null.map_or(0.0, |n| delta - n.offset_raw_ns);
        let raw = keyed(levels, quantiles_select(&mut values, &fractions).into_iter().map(|q| q + paper_shift));
        // Corrected: per-probe estimates over all the mode's runs, less the noise left in them.
        let mut raw_medians: Vec<f64> = members.iter().map(|&i| sessions[i].raw_median_ns).collect();
        let common = median(&mut raw_medians);
        let shifted: Vec<(&[&RunPairs], f64)> =
            members.iter().map(|&i| (input.runs[i], sessions[i].raw_median_ns - common + delta)).collect();
        let (pooled, halves, all_odd) = noise::pooled_estimates(&shifted);
        let pooled_grid = crate::runs::estimate_grid(input.tick_ns, all_odd);
        let mut sorted: Vec<f64> = pooled.iter().map(|e| e.1).collect();
        let noise_sd = noise::noise_sd(&halves, &sorted);
        sorted.sort_unstable_by(f64::total_cmp);
        let simex = noise::trusted_simex(&sorted, noise_sd, &fractions, pooled_grid);
        let corrected = keyed(
            levels,
            fractions.iter().map(|&p| match &simex {
                Some(s) if s.blurs() => s.corrected(p),
                _ => grid_quantile(&sorted, p, pooled_grid),
            }),
        );
        let mut ss: Vec<u32> = members.iter().map(|&i| sessions[i].session).collect();
        ss.sort_unstable();
        reproducibility = reproducibility.max(sorted_medians[c.end - 1] - sorted_medians[c.start]);
        let margins = g.vendor_bound_cycles.map(|cycles| {
            let period = 1e3 / g.clock_mhz;
            Margins {
                median_cycles: f64::from(cycles) - corrected.median().unwrap_or(f64::NAN) / period,
                p99_cycles: f64::from(cycles) - corrected.p99().unwrap_or(f64::NAN) / period,
            }
        });
        let gap_below = (c.start > 0).then(|| {
            let ns = sorted_medians[c.start] - sorted_medians[c.start - 1];
            Gap { ns, sigmas: split.within_sd_ns.filter(|s| *s > 0.0).map(|s| ns / s) }
        });
        modes.push(Mode {
            sessions: ss,
            latency_ns: corrected,
            margins,
            latency_raw_ns: raw,
            gap_below,
            median_ci95_ns: None,
            p99_ci95_ns: None,
            frequency: Some(members.len() as f64 / sessions.len() as f64),
            frequency_ci95: Some(super::stats::wilson95(members.len(), sessions.len())),
        });
        members_of.push(members);
        pooled_of.push(pooled);
        noise_of.push(noise_sd);
        simex_of.push(simex);
    }
    // Headline: the mode with most sessions (ties: the lower one, which comes first).
    let main = (0..modes.len()).max_by_key(|&m| (modes[m].sessions.len(), std::cmp::Reverse(m))).unwrap_or(0);
    let latency_ns = modes[main].latency_ns.clone();
    let latency_raw_ns = modes[main].latency_raw_ns.clone();
    let all: Vec<f64> = calibrated.iter().flat_map(|v| v.iter().map(|e| e.1)).collect();
    let vendor_bound = g.vendor_bound_cycles.map(|cycles| {
        let period = 1e3 / g.clock_mhz;
        VendorBound {
            clock_mhz: g.clock_mhz,
            cycles,
            ns: f64::from(cycles) * period,
            median_cycles: latency_ns.median().unwrap_or(f64::NAN) / period,
            median_margin_cycles: f64::from(cycles) - latency_ns.median().unwrap_or(f64::NAN) / period,
            p99_margin_cycles: f64::from(cycles) - latency_ns.p99().unwrap_or(f64::NAN) / period,
            violations: all.iter().filter(|&&x| x > f64::from(cycles) * period).count() as u64,
            worst_mode: modes.iter().filter_map(|m| m.margins).reduce(|a, b| Margins {
                median_cycles: a.median_cycles.min(b.median_cycles),
                p99_cycles: a.p99_cycles.min(b.p99_cycles),
            }),
            insertion: g.bound_model.map(|m| Insertion {
                base_cycles: m.base_cycles,
                insert_cycles: m.insert_cycles,
                in_flight: m.in_flight(m.min_frame_bytes),
                min_frame_bytes: m.min_frame_bytes,
                bus_bits: m.bus_bits,
                by_frame_len: by_frame_len(&m, period, &calibrated, &input.runs),
            }),
        }
    });

    // The probes of each mode's resamples, shared with the null calibration.
    let dense: Vec<Dense> = pooled_of.iter().map(|p| dense_probes(p, &input.null_sessions)).collect();
    // The hardware-clock check draws from the generator where the resamples leave it, so it runs
    // beside them, as the variance components (no resampling) do.
    let resamples = a.bootstrap_resamples;
    let mut hw_rng = rng.clone();
    hw_rng.set_word_pos(
        rng.get_word_pos() + dense.iter().map(|d| uncertainty::words_drawn(d.2, resamples)).sum::<u128>(),
    );
    let (variance, intervals, hw_check) = std::thread::scope(|scope| {
        let variance = scope.spawn(|| variance_of(&members_of[main], &input.runs, &input.null_runs));
        // Wherever there are reflections, none without (`analysis.hw_clock_check` only makes the
        // plan ask for reflect data).
        let hw_check = scope.spawn(move || {
            let pairs = || input.runs.iter().flat_map(|rs| rs.iter().flat_map(|r| r.hw_pairs()));
            hw_clock_check(pairs, Counted::merged(&hw_counted), a.hw_clock_tolerance_ns, &mut hw_rng)
        });
        // Confidence intervals of every mode's median and p99 (the headline's are the program's).
        let mut intervals = Vec::new();
        for (m, members) in members_of.iter().enumerate() {
            let sessions: Vec<&[(u64, f64)]> = members.iter().map(|&i| calibrated[i].as_slice()).collect();
            let mode =
                ModeData { dense: &dense[m], simex: simex_of[m].as_ref(), sessions: &sessions, noise: noise_of[m] };
            let found = mode_intervals(input, &mode, &modes[m].latency_ns, &null_medians, rng);
            modes[m].median_ci95_ns = Some(found[0].0);
            modes[m].p99_ci95_ns = Some(found[1].0);
            intervals.push(found);
        }
        let variance = variance.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        (variance, intervals, hw_check.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
    });
    let intervals = &intervals[main];
    Some(ProgramSummary {
        level: None,
        levels: Vec::new(),
        trace: g.trace.clone(),
        null_trace: g.null_trace.clone(),
        bitstream: g.bitstream.clone(),
        latency_ns,
        latency_raw_ns,
        modes,
        null_offset_ns: delta,
        reproducibility_ns: reproducibility,
        vendor_bound,
        median_ci95_ns: intervals[0].0,
        p99_ci95_ns: intervals[1].0,
        evidence: Evidence {
            noise_sd_ns: noise_of[main],
            median_ci95_sessions_ns: Some(intervals[0].1),
            p99_ci95_sessions_ns: Some(intervals[1].1),
            mode_within_sd_ns: split.within_sd_ns,
            mode_threshold_ns: split.threshold_ns.is_finite().then_some(split.threshold_ns),
            variance,
        },
        hw_check,
        probes: all.len() as u64,
        excluded: sessions.iter().map(|s| s.excluded).sum(),
        sessions,
        histogram: crate::stats::histogram(&all),
        soak: None,
        round_trip: None,
        stopping: None,
        port_pairs: Default::default(),
    })
}

/// The variance components of the calibrated median and p99 of a mode's sessions (`members`):
/// those of the program's differentials plus those of the null calibration's median, which every
/// calibrated estimate subtracts (each level adds, the two sides being independent bring-ups);
/// the program's alone without a null calibration.
fn variance_of(members: &[usize], runs: &[&[&RunPairs]], null_runs: &[&[&RunPairs]]) -> Option<Variance> {
    fn per_run<'a>(sessions: &[&'a [&'a RunPairs]]) -> Vec<Vec<crate::components::Run<'a>>> {
        sessions.iter().map(|s| s.iter().map(|r| (&*r.ids, &r.d)).collect()).collect()
    }
    let mine: Vec<&[&RunPairs]> = members.iter().map(|&i| runs[i]).collect();
    let (program, null) = (per_run(&mine), per_run(null_runs));
    let [median, p99]: [Components; 2] = crate::components::of_quantiles(&program, &[0.5, 0.99])?.try_into().ok()?;
    if null.is_empty() {
        return Some(Variance { median, p99 });
    }
    let null_median = crate::components::of_quantile(&null, 0.5)?;
    Some(Variance { median: median.plus(&null_median), p99: p99.plus(&null_median) })
}

/// What the intervals of one mode are computed from.
struct ModeData<'a> {
    /// Per-probe estimates over all the mode's runs, with the null's ([`dense_probes`]).
    dense: &'a Dense,
    /// Their distributions for the noise correction.
    simex: Option<&'a Simex>,
    /// The mode's sessions' calibrated per-probe estimates.
    sessions: &'a [&'a [(u64, f64)]],
    /// The noise left in `pooled`.
    noise: Option<f64>,
}

/// 95 % intervals of a mode's median and p99, each for a new bring-up and for these sessions:
/// probes resampled as clusters through the estimate (every quantile it is made of, and the null
/// offset), bring-ups from the spread of the sessions.
fn mode_intervals(
    input: &Input<'_>,
    mode: &ModeData<'_>,
    corrected: &Quantiles,
    null_medians: &[f64],
    rng: &mut ChaCha8Rng,
) -> [([f64; 2], [f64; 2]); 2] {
    let (program_values, null_values, probes) = mode.dense;
    let probes = *probes;
    let null_estimates: Vec<f64> = null_values.iter().map(|v| v.1).collect();
    let null_simex = Simex::new(&null_estimates, None, input.null_grid);
    let half = (2.0 * input.grid).max(0.5 * mode.noise.unwrap_or(1.0));
    let levels = [0.5, 0.99];
    // The terms of each estimate: its corrected quantile's parts, then the null offset (one term
    // shared by both).
    let mut terms = Vec::new();
    let mut estimates: Vec<uncertainty::Estimate> = Vec::new();
    for &p in &levels {
        let mut mine = uncertainty::Estimate { extrapolated: None, terms: Vec::new() };
        if let Some(sx) = mode.simex {
            let histograms = if sx.blurs() { 3 } else { 1 };
            let first = terms.len();
            for k in 0..histograms {
                terms.push(uncertainty::linear(program_values, 0, probes, sx, k, p, 1.0, half));
            }
            if sx.blurs() {
                mine.extrapolated = Some([first, first + 1, first + 2]);
            } else {
                mine.terms.push(first);
            }
        }
        estimates.push(mine);
    }
    if let Some(nx) = &null_simex {
        let null = terms.len();
        terms.push(uncertainty::linear(null_values, 1, probes, nx, 0, 0.5, -1.0, half));
        estimates.iter_mut().for_each(|e| e.terms.push(null));
    }
    let masses = [uncertainty::masses(program_values, probes), uncertainty::masses(null_values, probes)];
    let se = uncertainty::probe_se(&terms, &estimates, &masses, probes, input.analysis.bootstrap_resamples, rng);
    let per_session: Vec<Vec<f64>> = mode
        .sessions
        .iter()
        .map(|s| {
            let mut v: Vec<f64> = s.iter().map(|e| e.1).collect();
            v.sort_unstable_by(f64::total_cmp);
            v
        })
        .collect();
    let interval = |k: usize| {
        let p = levels[k];
        let estimate = corrected.at(p * 100.0).unwrap_or(f64::NAN);
        let program_q = uncertainty::per_session_quantiles(&per_session, p, input.grid);
        let bring_up = uncertainty::session_variance(&program_q, input.null.map(|_| null_medians));
        (
            uncertainty::interval(estimate, se[k], bring_up, input.tick_ns),
            uncertainty::interval(estimate, se[k], None, input.tick_ns),
        )
    };
    [interval(0), interval(1)]
}

/// Values with their dense probe index.
type Indexed = Vec<(u32, f64)>;

/// A mode's per-probe estimates and the null's ([`dense_probes`]), and the number of probes.
type Dense = (Indexed, Indexed, usize);

/// The calibrated per-probe estimates of every session grouped by the probe's frame length as
/// sent (from the runs' bypass copies), in length order, each against the bound of `m` for
/// traffic of that length (`period` ns per cycle). Empty without frame lengths.
fn by_frame_len(
    m: &latency_results::index::BoundModel,
    period: f64,
    calibrated: &[Vec<(u64, f64)>],
    runs: &[&[&RunPairs]],
) -> Vec<FrameLenRow> {
    let mut len_of = std::collections::HashMap::new();
    for r in runs.iter().flat_map(|rs| rs.iter()) {
        for (&id, &len) in r.ids.iter().zip(&r.lens) {
            len_of.entry(id).or_insert(len);
        }
    }
    let mut groups: std::collections::BTreeMap<u16, Vec<f64>> = std::collections::BTreeMap::new();
    for &(id, x) in calibrated.iter().flatten() {
        if let Some(&len) = len_of.get(&id) {
            groups.entry(len).or_default().push(x);
        }
    }
    groups
        .into_iter()
        .map(|(frame_len, mut v)| {
            v.sort_unstable_by(f64::total_cmp);
            let bound_cycles = m.cycles(u32::from(frame_len));
            let bound_ns = f64::from(bound_cycles) * period;
            FrameLenRow {
                frame_len,
                probes: v.len() as u64,
                p50_ns: quantile_sorted(&v, 0.5),
                p99_ns: quantile_sorted(&v, 0.99),
                bound_cycles,
                above_bound: v.iter().filter(|&&x| x > bound_ns).count() as u64,
            }
        })
        .collect()
}

/// The program's per-probe estimates and the null's per-session estimates with dense probe
/// indices shared by both, and the number of distinct probes.
fn dense_probes(program: &[(u64, f64)], null: &[&[(u64, f64)]]) -> Dense {
    // Mostly every list holds the same probes in ascending order: a probe's index is its place.
    let same_ids =
        |list: &[(u64, f64)]| list.len() == program.len() && list.iter().zip(program).all(|(a, b)| a.0 == b.0);
    if program.is_sorted_by(|a, b| a.0 < b.0) && null.iter().all(|s| same_ids(s)) {
        let indexed = |list: &[(u64, f64)]| list.iter().enumerate().map(|(k, e)| (k as u32, e.1)).collect::<Vec<_>>();
        return (indexed(program), null.iter().flat_map(|s| indexed(s)).collect(), program.len());
    }
    let mut ids: Vec<u64> = program.iter().chain(null.iter().flat_map(|s| s.iter())).map(|e| e.0).collect();
    ids.sort_unstable();
    ids.dedup();
    let index = |id: u64| ids.binary_search(&id).map_or(0, |k| k as u32);
    let program = program.iter().map(|&(id, v)| (index(id), v)).collect();
    let null = null.iter().flat_map(|s| s.iter()).map(|&(id, v)| (index(id), v)).collect();
    (program, null, ids.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use latency_results::index::BoundModel;

    /// Dense indices are places among every probe id of both sides, ascending: by hand for lists
    /// of other probes, and the same whether the lists hold one set of probes or not.
    #[test]
    fn probes_are_numbered_by_their_place_among_every_id() {
        let program = [(3, 0.5), (7, 1.5), (9, 2.5)];
        let (p, n, probes) = dense_probes(&program, &[&[(1, 9.0), (7, 8.0)], &[(3, 7.0)]]);
        // Ids 1, 3, 7, 9.
        assert_eq!((p, n, probes), (vec![(1, 0.5), (2, 1.5), (3, 2.5)], vec![(0, 9.0), (2, 8.0), (1, 7.0)], 4));
        let same = [(3, 4.0), (7, 5.0), (9, 6.0)];
        let (p, n, probes) = dense_probes(&program, &[&same, &same]);
        assert_eq!((p, n, probes), (vec![(0, 0.5), (1, 1.5), (2, 2.5)], [(0, 4.0), (1, 5.0), (2, 6.0)].repeat(2), 3));
        // Unordered program ids: numbered by their place all the same.
        let (p, _, _) = dense_probes(&[(9, 1.0), (3, 2.0)], &[&[(9, 0.0), (3, 0.0)]]);
        assert_eq!(p, [(1, 1.0), (0, 2.0)]);
    }

    #[test]
    fn each_frame_length_is_held_to_the_bound_of_traffic_that_long() {
        // Base 55 cycles, 1 inserted cycle per packet, 512-bit bus, 4 ns cycles. By hand: 64 B
        // frames take 1 cycle each, so ⌈55 / 1⌉ = 55 are in flight: 110 cycles (440 ns); 1500 B
        // frames take 23.4 cycles, ⌈2.35⌉ = 3 in flight: 58 cycles (232 ns).
        let m = BoundModel { base_cycles: 55, insert_cycles: 1, bus_bits: 512, min_frame_bytes: 64 };
        let run = RunPairs {
            group: 0,
            session: 1,
            level: None,
            ids: std::sync::Arc::from([1, 2, 3]),
            d: Column::of([0, 0, 0].into_iter().map(Some), 3, 1.0),
            hw: Column::default(),
            lens: vec![64, 1500, 1500],
            counts: Default::default(),
            excluded: 0,
            pacing_pps: None,
            pacing_inferred: false,
        };
        let calibrated = vec![vec![(1, 300.0), (2, 200.0), (3, 240.0)]];
        let rows = by_frame_len(&m, 4.0, &calibrated, &[&[&run]]);
        let got: Vec<(u16, u64, u32, u64)> =
            rows.iter().map(|r| (r.frame_len, r.probes, r.bound_cycles, r.above_bound)).collect();
        assert_eq!(got, [(64, 1, 110, 0), (1500, 2, 58, 1)]);
        assert_eq!((rows[1].p50_ns, rows[0].p99_ns), (220.0, 300.0));
    }
}

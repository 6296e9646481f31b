//! Tests of the pipeline against hand-computed numbers, properties, and the simulator's model.

use super::*;
use crate::column::Column;
use crate::hwcheck::hw_clock_check;
use crate::stats::Counted;
use latency_plan::Analysis;
use latency_proto::{Port, RecordBuilder};
use latency_results::SessionKind;
use latency_results::index::{Group, Index};
use latency_results::summary::Summary;
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn group(program: &str, kind: SessionKind, bound: Option<u32>) -> Group {
    Group::example(program, kind, bound, 4)
}

fn index(analysis: Analysis) -> Index {
    Index {
        study: "hand".into(),
        groups: vec![group("p", SessionKind::Program, Some(55)), group("null-t", SessionKind::Null, None)],
        levels: Vec::new(),
        analysis,
        report: Default::default(),
        tsc_hz: 1e9,
        seed: 1,
        sender: Default::default(),
    }
}

/// A run whose probe k (from 1) arrives on the bypass port at 1000·k ns and on the pipeline port
/// D[k] ns later (`None` = no pipeline copy).
fn run(group: usize, session: u32, d: &[Option<i64>]) -> RunPairs {
    let mut b = RecordBuilder::default();
    for (k, d) in d.iter().enumerate() {
        let id = k as u64 + 1;
        let t = 1000 * id as i64 + 1_000_000;
        b.push(id, Port::Bypass, t as u64, k as u64, 64, None);
        if let Some(d) = d {
            b.push(id, Port::Pipeline, (t + d) as u64, k as u64, 64, None);
        }
    }
    pair_batches(group, session, &[b.finish().unwrap()], 1e9, true)
}

fn approx(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// The runs of the hand-computed study: three of the null calibration, three of program `p`.
fn hand_runs() -> Vec<RunPairs> {
    vec![
        run(1, 1, &[Some(100), Some(10), Some(12), Some(20)]),
        run(1, 1, &[Some(100), Some(11), Some(12), Some(18)]),
        run(1, 1, &[Some(100), Some(12), Some(30), Some(19)]),
        run(0, 1, &[Some(500), Some(150), Some(160), Some(140)]),
        run(0, 1, &[Some(500), Some(152), Some(158), Some(141)]),
        run(0, 1, &[None, Some(151), Some(170), Some(139)]),
    ]
}

#[test]
fn hand_computed_study() {
    // Null: probe 1 is the first after the gap (excluded); per-probe medians over 3 runs:
    // probe 2: (10, 11, 12) → 11, probe 3: (12, 12, 30) → 12, probe 4: (20, 18, 19) → 19; δ̂ = 12.
    // Program: probe 2: (150, 152, 151) → 151, probe 3: (160, 158, 170) → 160,
    // probe 4: (140, 141, 139) → 140; raw session median 151; L̂ = 139, 148, 128.
    let runs = hand_runs();
    let s = summarize(&index(Analysis::default()), &runs, &[], None, Unusable::default());
    let null = &s.nulls["t"];
    assert_eq!(null.offset_ns, 12.0);
    assert_eq!(null.sessions, vec![(1, 12.0)]);
    let p = &s.programs["p"];
    assert_eq!(p.null_offset_ns, 12.0);
    assert_eq!(p.sessions.len(), 1);
    assert_eq!((p.sessions[0].raw_median_ns, p.sessions[0].median_ns), (151.0, 139.0));
    assert_eq!(p.sessions[0].excluded, 2, "probe 1 was matched in two of the three runs");
    assert_eq!(p.sessions[0].matched, 11);
    // The paper's estimator: type-7 quantiles of [128, 139, 148].
    for (k, want) in [("p5", 129.1), ("p25", 133.5), ("p50", 139.0), ("p75", 143.5), ("p95", 147.1), ("p99", 147.82)] {
        assert!(
            approx(p.latency_raw_ns.at_key(k).unwrap(), want),
            "{k}: {} vs {want}",
            p.latency_raw_ns.at_key(k).unwrap()
        );
    }
    // Too few probes to measure the noise: the headline is the grid quantile (medians of 3 runs
    // lie on the 1 ns tick, so each estimate is spread over ±0.5 ns): mass p × 3 is reached
    // p × 3 cells into the sample, e.g. p5: 0.15 of the first cell [127.5, 128.5] → 127.65; p99:
    // 2.97 → 148.47.
    assert_eq!(p.evidence.noise_sd_ns, None);
    for (k, want) in
        [("p5", 127.65), ("p25", 128.25), ("p50", 139.0), ("p75", 147.75), ("p95", 148.35), ("p99", 148.47)]
    {
        assert!(approx(p.latency_ns.at_key(k).unwrap(), want), "{k}: {} vs {want}", p.latency_ns.at_key(k).unwrap());
    }
    assert_eq!(p.modes.len(), 1);
    let vb = p.vendor_bound.as_ref().unwrap();
    assert_eq!((vb.cycles, vb.ns), (55, 220.0));
    assert!(approx(vb.median_margin_cycles, 55.0 - 139.0 / 4.0));
    assert!(approx(vb.p99_margin_cycles, 55.0 - 148.47 / 4.0));
    let m = p.modes[0].margins.unwrap();
    assert!(approx(m.median_cycles, 55.0 - 139.0 / 4.0) && approx(m.p99_cycles, 55.0 - 148.47 / 4.0));
    assert_eq!(vb.violations, 0);
    assert_eq!(s.health.runs, 6);
    assert_eq!(s.health.pipeline_only, 0);
    assert_eq!(s.health.bypass_only, 1);
    assert_eq!(s.health.excluded, 5);
}

#[test]
fn round_trips_give_rtt_quantiles_and_the_one_way_estimate_over_the_crossings() {
    // The hand-computed study above read as round trips that pass the program twice: per-probe
    // medians (151, 160, 140) are the round trips, type-7 quantiles of [140, 151, 160]: p5 141.1,
    // p50 151, p99 159.82; the null's median round trip is δ̂ = 12; one way is half the
    // calibrated headline: p50 139 / 2 = 69.5, p99 148.47 / 2 = 74.235.
    let runs = hand_runs();
    let mut idx = index(Analysis::default());
    idx.sender = latency_plan::Sender::Agent { crossings: 2 };
    let s = summarize(&idx, &runs, &[], None, Unusable::default());
    let rt = s.programs["p"].round_trip.as_ref().expect("round trips");
    assert_eq!(rt.crossings, 2);
    for (k, want) in [("p5", 141.1), ("p50", 151.0), ("p99", 159.82)] {
        assert!(approx(rt.rtt_ns.at_key(k).unwrap(), want), "{k}: {} vs {want}", rt.rtt_ns.at_key(k).unwrap());
    }
    assert_eq!(rt.null_rtt_ns, 12.0);
    for (k, want) in [("p50", 69.5), ("p99", 74.235)] {
        assert!(approx(rt.one_way_ns.at_key(k).unwrap(), want), "{k}: {} vs {want}", rt.one_way_ns.at_key(k).unwrap());
    }
    let ci = s.programs["p"].median_ci95_ns;
    assert_eq!(rt.one_way_median_ci95_ns, [ci[0] / 2.0, ci[1] / 2.0]);
    // tcpreplay studies have none.
    let s = summarize(&index(Analysis::default()), &runs, &[], None, Unusable::default());
    assert_eq!(s.programs["p"].round_trip, None);
}

#[test]
fn violations_count_probes_above_the_bound() {
    // Bound 55 cycles = 220 ns; calibrated estimates 230 and 200 → one violation.
    let runs = vec![run(1, 1, &[Some(0), Some(0), Some(0)]), run(0, 1, &[Some(0), Some(230), Some(200)])];
    let s = summarize(&index(Analysis::default()), &runs, &[], None, Unusable::default());
    assert_eq!(s.programs["p"].vendor_bound.as_ref().unwrap().violations, 1);
}

#[test]
fn sessions_in_separate_clusters_are_modes_and_never_averaged() {
    // Sessions 1 and 3 around 107 ns, session 2 around 138 ns: two modes, 31 ns apart.
    let mut runs = vec![run(1, 1, &[Some(0); 6])];
    for (s, base) in [(1, 107), (2, 138), (3, 108)] {
        runs.push(run(0, s, &[Some(0), Some(base - 1), Some(base), Some(base + 1), Some(base), Some(base + 2)]));
    }
    let s = summarize(&index(Analysis::default()), &runs, &[], None, Unusable::default());
    let p = &s.programs["p"];
    assert_eq!(p.modes.len(), 2);
    assert_eq!(p.modes[0].sessions, vec![1, 3]);
    assert_eq!(p.modes[1].sessions, vec![2]);
    // The headline is the most populated mode, not a mix.
    assert!(p.latency_ns.at(50.0).unwrap() < 110.0 && p.latency_ns.at(99.0).unwrap() < 111.0);
    // The high mode's calibrated probes are 137, 138, 138, 139, 140 ns: median 138, and 138.25
    // read on the 1 ns grid of single runs (cells ±0.5 ns: 1 value below 137.5, then 2 in the
    // next cell, of which 1.5 are needed).
    assert!(approx(p.modes[1].latency_raw_ns.at(50.0).unwrap(), 138.0));
    assert!(approx(p.modes[1].latency_ns.at(50.0).unwrap(), 138.25));
    // Every mode has its own margin under the 55-cycle bound (4 ns per cycle).
    assert!(approx(p.modes[1].margins.unwrap().median_cycles, 55.0 - 138.25 / 4.0));
    // The bound is judged on the worst mode: the high one.
    let worst = p.vendor_bound.as_ref().unwrap().worst_mode.unwrap();
    assert!(approx(worst.median_cycles, 55.0 - 138.25 / 4.0), "{worst:?}");
    assert!(approx(p.reproducibility_ns, 1.0), "{}", p.reproducibility_ns);
    // Every mode has its own intervals around its own quantiles; the headline's are the program's.
    for m in &p.modes {
        let [lo, hi] = m.median_ci95_ns.unwrap();
        assert!(
            lo <= m.latency_ns.at(50.0).unwrap() && m.latency_ns.at(50.0).unwrap() <= hi && hi - lo >= 1.0 - 1e-9,
            "{m:?}"
        );
        assert!(m.p99_ci95_ns.is_some());
    }
    assert_eq!(p.modes[0].median_ci95_ns, Some(p.median_ci95_ns));
    // Disabling mode detection gives one mode.
    let mut a = Analysis::default();
    a.modes.enabled = false;
    let s = summarize(&index(a), &runs, &[], None, Unusable::default());
    assert_eq!(s.programs["p"].modes.len(), 1);
}

/// Study with per-probe latencies `lat`, per-session noise `noise`, null δ `delta`; `shift` is
/// added to the pipeline stamps of the program's runs, `swap` exchanges the ports everywhere.
fn synthetic(lat: &[i64], delta: i64, noise: &[i64], shift: i64, shift_null: bool, swap: bool) -> Summary {
    let mut runs = Vec::new();
    for (s, n) in noise.iter().enumerate() {
        for r in 0..3 {
            let d = |l: i64, extra: i64| -> Option<i64> {
                let d = l + delta + n + (r as i64 - 1) + extra;
                Some(if swap { -d } else { d })
            };
            let prog: Vec<Option<i64>> = lat.iter().map(|&l| d(l, shift)).collect();
            let null: Vec<Option<i64>> = lat.iter().map(|_| d(0, if shift_null { shift } else { 0 })).collect();
            runs.push(run(0, s as u32 + 1, &prog));
            runs.push(run(1, s as u32 + 1, &null));
        }
    }
    summarize(&index(Analysis::default()), &runs, &[], None, Unusable::default())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn a_constant_on_the_pipeline_stamps_shifts_every_quantile_by_it(
        lat in proptest::collection::vec(80i64..400, 20..60),
        delta in 0i64..40,
        noise in proptest::collection::vec(-2i64..=2, 1..4),
        shift in 0i64..300,
    ) {
        let a = synthetic(&lat, delta, &noise, 0, false, false);
        let b = synthetic(&lat, delta, &noise, shift, false, false);
        for (k, v) in a.programs["p"].latency_ns.iter() {
            prop_assert!((b.programs["p"].latency_ns.at_key(k).unwrap() - v - shift as f64).abs() < 1e-9, "{}", k);
        }
        // The same constant on the null runs too is calibrated away.
        let c = synthetic(&lat, delta, &noise, shift, true, false);
        for (k, v) in a.programs["p"].latency_ns.iter() {
            prop_assert!((c.programs["p"].latency_ns.at_key(k).unwrap() - v).abs() < 1e-9, "{}", k);
        }
    }

    #[test]
    fn swapping_the_ports_negates_the_distribution(
        lat in proptest::collection::vec(80i64..400, 20..60),
        delta in 0i64..40,
        noise in proptest::collection::vec(-2i64..=2, 1..4),
    ) {
        let a = synthetic(&lat, delta, &noise, 0, false, false);
        let b = synthetic(&lat, delta, &noise, 0, false, true);
        // Exactly for the paper's quantiles; to the histogram's resolution for the corrected ones.
        for (lo, hi) in [("p5", "p95"), ("p25", "p75"), ("p50", "p50")] {
            let (pa, pb) = (&a.programs["p"], &b.programs["p"]);
            prop_assert!((pb.latency_raw_ns.at_key(lo).unwrap() + pa.latency_raw_ns.at_key(hi).unwrap()).abs() < 1e-9);
            let off = (pb.latency_ns.at_key(lo).unwrap() + pa.latency_ns.at_key(hi).unwrap()).abs();
            prop_assert!(off < 0.05, "{lo}/{hi}: {off}");
        }
        prop_assert!((b.nulls["t"].offset_ns + a.nulls["t"].offset_ns).abs() < 1e-9);
    }
}

#[test]
fn hardware_clock_check_passes_independent_noise_and_fails_correlated_noise() {
    let mut r = ChaCha8Rng::seed_from_u64(2);
    let d: Vec<f64> = (0..20_000).map(|i| 150.0 + 10.0 * stats::normal(&mut r) + (i % 7) as f64).collect();
    // R = D + C with C independent of D: the re-paired convolution matches R.
    let indep: Vec<(f64, f64)> = d.iter().map(|&x| (x, x + 6.0 * stats::normal(&mut r))).collect();
    let ok = hw_clock_check(|| indep.iter().copied(), None, 1.0, &mut r).unwrap();
    assert!(ok.pass, "{:?}", ok.levels);
    assert_eq!(ok.levels.len(), 6);
    // C that grows with D (R stretched around its median): re-pairing breaks the dependence,
    // so the synthesised tails are narrower than the measured ones.
    let corr: Vec<(f64, f64)> = d.iter().map(|&x| (x, x + 0.8 * (x - 150.0) + 2.0 * stats::normal(&mut r))).collect();
    let bad = hw_clock_check(|| corr.iter().copied(), None, 1.0, &mut r).unwrap();
    assert!(!bad.pass && bad.max_diff_ns > 5.0, "{:?}", bad.levels);
    assert_eq!((ok.pairs, bad.pairs), (20_000, 20_000));
    // R in whole ns (a hardware clock's): its quantiles counted are those selected.
    let whole: Vec<(f64, f64)> = indep.iter().map(|&(d, r)| (d, r.round())).collect();
    let ns: Vec<i32> = whole.iter().map(|p| p.1 as i32).collect();
    let (counted, selected) = (
        hw_clock_check(|| whole.iter().copied(), Counted::of(&[&ns], i32::MIN), 1.0, &mut r.clone()).unwrap(),
        hw_clock_check(|| whole.iter().copied(), None, 1.0, &mut r.clone()).unwrap(),
    );
    assert_eq!(format!("{counted:?}"), format!("{selected:?}"));
}

#[test]
fn values_group_by_probe_in_input_order_with_dense_or_sparse_ids() {
    // Each list as (probe id, value) pairs and its shift.
    let groups = |lists: &[(&[(u64, f64)], f64)]| -> Vec<(u64, Vec<f64>)> {
        // Whole values, in a column of unit 1.
        let column = |l: &[(u64, f64)]| Column::of(l.iter().map(|p| Some(p.1 as i64)), l.len(), 1.0);
        let split: Vec<(Vec<u64>, Column)> =
            lists.iter().map(|(l, _)| (l.iter().map(|p| p.0).collect(), column(l))).collect();
        let shifted: Vec<crate::network::Shifted> =
            split.iter().zip(lists).map(|((ids, d), &(_, shift))| crate::network::Shifted { ids, d, shift }).collect();
        crate::runs::ByProbe::new(&shifted).iter_mut().map(|(id, v)| (id, v.to_vec())).collect()
    };
    let a = [(3, 1.0), (1, 2.0), (3, 3.0)];
    let b = [(1, 10.0), (3, 20.0)];
    assert_eq!(groups(&[(&a, 0.0), (&b, 1.0)]), [(1, vec![2.0, 9.0]), (3, vec![1.0, 3.0, 19.0])]);
    // Ids beyond the dense table take the sorting path and group the same way.
    let big = 1u64 << 40;
    let c = [(big + 3, 1.0), (big + 1, 2.0), (big + 3, 3.0)];
    assert_eq!(groups(&[(&c, 0.0)]), [(big + 1, vec![2.0]), (big + 3, vec![1.0, 3.0])]);
    assert_eq!(groups(&[]).len(), 0);
    // Lists of the same ascending ids (a session whose runs paired every probe), the same ids in
    // another order, other ids of the same count: each probe's values in list order.
    let (d, e) = ([(1, 1.0), (4, 2.0), (9, 3.0)], [(1, 10.0), (4, 20.0), (9, 30.0)]);
    assert_eq!(groups(&[(&d, 0.0), (&e, 1.0)]), [(1, vec![1.0, 9.0]), (4, vec![2.0, 19.0]), (9, vec![3.0, 29.0])]);
    let (f, g) = ([(9, 3.0), (4, 2.0), (1, 1.0)], [(9, 30.0), (4, 20.0), (1, 10.0)]);
    assert_eq!(groups(&[(&f, 0.0), (&g, 1.0)]), [(1, vec![1.0, 9.0]), (4, vec![2.0, 19.0]), (9, vec![3.0, 29.0])]);
    let h = [(1, 10.0), (5, 20.0), (9, 30.0)];
    assert_eq!(
        groups(&[(&d, 0.0), (&h, 1.0)]),
        [(1, vec![1.0, 9.0]), (4, vec![2.0]), (5, vec![19.0]), (9, vec![3.0, 29.0])]
    );
}

/// A reduction of probes `ids`, D = 100 ticks × the id, hardware-clock differentials `hw` (none:
/// no hardware stamps), probe `first` first after the gap.
fn reduction(ids: &[u64], hw: Vec<Option<i64>>, first: Option<u64>) -> latency_results::reduction::Reduction {
    use latency_results::reduction::{FORMAT, Reduction, ReductionHeader, RunIdentity};
    let header = ReductionHeader {
        format: FORMAT,
        run: RunIdentity { records: ids.len() as u64, ..RunIdentity::default() },
        counts: Default::default(),
        first_id: first,
        bypass_span: (0, 0),
        bypass_ids: (0, 0),
        matched: ids.len() as u64,
        hw: !hw.is_empty(),
        lens: false,
    };
    Reduction { header, diffs: ids.iter().map(|&id| (id, 100 * id as i64)).collect(), hw_diffs: hw, lens: Vec::new() }
}

/// Run `r` of `session` made ready for the analysis, at `tsc_hz`, the first probe after the gap
/// left out when `exclude`: once from the reduction in memory and once read from its file (its
/// columns decoded straight into the run's), the two the same.
fn run_of(r: &latency_results::reduction::Reduction, session: u32, tsc_hz: f64, exclude: bool) -> RunPairs {
    let (a, b) = (crate::runs::SharedIds::default(), crate::runs::SharedIds::default());
    let making = |shared| crate::runs::Making { group: 0, session, tsc_hz, exclude_first: exclude, lens: true, shared };
    let of = RunPairs::of(r, &making(&a));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.pairs");
    r.write(&path).unwrap();
    let read = RunPairs::read(&path, &r.header.run, &making(&b)).expect("the reduction read back");
    let values = |c: &crate::column::Column| c.iter().map(f64::to_bits).collect::<Vec<_>>();
    assert_eq!((&*of.ids, values(&of.d), values(&of.hw)), (&*read.ids, values(&read.d), values(&read.hw)));
    assert_eq!((&of.lens, of.excluded, of.counts), (&read.lens, read.excluded, read.counts));
    of
}

#[test]
fn a_runs_hardware_clock_pairs_are_its_probes_with_one_in_id_order_less_the_first_after_the_gap() {
    // TSC at 2 GHz: 0.5 ns a tick. Probe 1 comes first after the gap; probe 3 has no reflection.
    let r = reduction(&[1, 2, 3, 4], vec![Some(55), Some(110), None, Some(-7)], Some(1));
    let kept = run_of(&r, 1, 2e9, true);
    assert_eq!(kept.hw_pairs().collect::<Vec<_>>(), [(100.0, 110.0), (200.0, -7.0)]);
    assert_eq!(kept.excluded, 1);
    let all = run_of(&r, 1, 2e9, false);
    assert_eq!(all.hw_pairs().collect::<Vec<_>>(), [(50.0, 55.0), (100.0, 110.0), (200.0, -7.0)]);
    // A run without hardware stamps has none.
    let none = reduction(&[1, 2, 3, 4], Vec::new(), Some(1));
    assert_eq!(run_of(&none, 1, 2e9, false).hw_pairs().count(), 0);
    // Frame lengths, the first probe's left out with it.
    let mut sized = reduction(&[1, 2, 3, 4], Vec::new(), Some(1));
    (sized.header.lens, sized.lens) = (true, vec![60, 61, 1518, 63]);
    assert_eq!(run_of(&sized, 1, 2e9, true).lens, [61, 1518, 63]);
    // Differentials beyond 32 bits (and at its ends) are kept aside, exactly; then the run's
    // differentials are not counted but selected.
    let far = [i64::from(i32::MAX), i64::from(i32::MIN), -(1 << 40), i64::MAX];
    let r = reduction(
        &[1, 2, 3, 4, 5, 6],
        vec![Some(far[0]), Some(9), Some(far[1]), None, Some(far[2]), Some(far[3])],
        None,
    );
    let wide = run_of(&r, 1, 2e9, false);
    let hw: Vec<f64> = wide.hw_pairs().map(|p| p.1).collect();
    assert_eq!(hw, [far[0] as f64, 9.0, far[1] as f64, far[2] as f64, far[3] as f64]);
    assert!(wide.hw.narrow().is_none() && all.hw.narrow().is_some());
    // So are differentials D beyond 32 bits: 2⁴⁰ ticks of 0.5 ns, exactly.
    let mut r = reduction(&[1, 2, 3], Vec::new(), None);
    r.diffs[1].1 = 1 << 40;
    let far = run_of(&r, 1, 2e9, false);
    assert_eq!(far.d.iter().collect::<Vec<_>>(), [50.0, 549_755_813_888.0, 150.0]);
    assert!(far.d.narrow().is_none() && all.d.narrow().is_some());
}

#[test]
fn the_runs_of_a_session_that_paired_the_same_probes_keep_one_list_of_ids() {
    use std::sync::Arc;
    let shared = crate::runs::SharedIds::default();
    let run = |session: u32, ids: &[u64], first: Option<u64>| {
        let making =
            crate::runs::Making { group: 0, session, tsc_hz: 1e9, exclude_first: true, lens: false, shared: &shared };
        RunPairs::of(&reduction(ids, Vec::new(), first), &making)
    };
    let (a, b) = (run(1, &[1, 2, 3], None), run(1, &[1, 2, 3], None));
    assert!(Arc::ptr_eq(&a.ids, &b.ids));
    // Other ids, or the same once the first probe after the gap is left out: their own lists.
    let c = run(1, &[1, 2, 4], None);
    assert_eq!((&*c.ids, c.d.iter().collect::<Vec<_>>()), (&[1, 2, 4][..], vec![100.0, 200.0, 400.0]));
    let d = run(1, &[1, 2, 3], Some(1));
    assert_eq!((&*d.ids, d.d.iter().collect::<Vec<_>>()), (&[2, 3][..], vec![200.0, 300.0]));
    assert!(!Arc::ptr_eq(&a.ids, &c.ids) && !Arc::ptr_eq(&c.ids, &d.ids));
    assert_eq!(&*a.ids, [1, 2, 3]);
    // Over several blocks of a reduction's columns (128 probes): the same list, one differing
    // in its second block, one shorter, one longer, one less a probe of its second block.
    let ids: Vec<u64> = (1..=300).map(|k| 2 * k).collect();
    let (e, f) = (run(2, &ids, None), run(2, &ids, None));
    assert!(Arc::ptr_eq(&e.ids, &f.ids) && *e.ids == *ids);
    let mut other = ids.clone();
    other[200] += 1;
    let shorter = &ids[..150];
    let longer: Vec<u64> = ids.iter().copied().chain([1000]).collect();
    for (list, first) in [(&other[..], None), (shorter, None), (&longer[..], None), (&ids[..], Some(262))] {
        let g = run(2, list, first);
        let expected: Vec<u64> = list.iter().copied().filter(|&id| Some(id) != first).collect();
        assert_eq!(*g.ids, *expected, "{} ids, less {first:?}", list.len());
        assert_eq!(g.d.iter().collect::<Vec<_>>(), expected.iter().map(|&id| 100.0 * id as f64).collect::<Vec<_>>());
        let _ = run(2, &ids, None); // The session's list made `ids` again.
    }
}

//! The simulator against numbers computed by hand from its model and the paper.

use super::*;
use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, UInt8Type, UInt64Type};
use latency_plan as plan;
use latency_plan::TraceTemplate;
use latency_results::pairs;
use latency_schedule as schedule;
use latency_schedule::Schedule;
use std::path::Path;

pub(super) fn paper() -> (Plan, Schedule) {
    let (p, _) = plan::load(Path::new("../../plans/paper.yaml"), Some("sim")).unwrap();
    let s = schedule::expand(&p, None).unwrap();
    (p, s)
}

/// The model without noise at any level: what is left is each probe's packet part, δ and the
/// TSC's resolution.
pub(super) fn quiet() -> SimModel {
    SimModel {
        poll_phase_ns: 0.0,
        dma_jitter_ns: 0.0,
        wander_ns: 0.0,
        outlier_prob: 0.0,
        session_delta_spread_ns: 0.0,
        session_shift_ns: 0.0,
        null_session_sd_ns: 0.0,
        null_run_sd_ns: 0.0,
        first_probe_ns: [0.0, 0.0],
        ..SimModel::default()
    }
}

pub(super) fn session<'a>(s: &'a Schedule, program: &str, n: u32) -> &'a Session {
    s.sessions.iter().find(|x| x.program == program && x.session == n).unwrap()
}

/// Differentials in ns by probe id.
pub(super) fn diffs_ns(data: &RunData, hz: f64) -> Vec<(u64, f64)> {
    pairs::pair(&data.batches).diffs.into_iter().map(|(id, d)| (id, d as f64 * 1e9 / hz)).collect()
}

pub(super) fn quantile(sorted: &[f64], p: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * p;
    let (lo, hi) = (h.floor() as usize, h.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (h - lo as f64)
}

#[test]
fn same_seed_same_records_other_seed_other_records() {
    let (p, s) = paper();
    let ses = session(&s, "forward", 2);
    let a = SimTestbed::new(&p, SimModel::default(), false).generate(ses, &ses.runs[3], 1);
    let b = SimTestbed::new(&p, SimModel::default(), false).generate(ses, &ses.runs[3], 1);
    let c = SimTestbed::new(&p, SimModel::default(), false).with_seed(99).generate(ses, &ses.runs[3], 1);
    assert_eq!(a.batches, b.batches);
    assert_ne!(a.batches, c.batches);
}

#[test]
fn without_noise_each_differential_is_the_model_latency_plus_delta() {
    let (p, s) = paper();
    let model = quiet();
    let mut sim = SimTestbed::new(&p, model.clone(), false);
    let ses = session(&s, "forward", 1);
    let d = diffs_ns(&sim.generate(ses, &ses.runs[0], 1), model.tsc_hz);
    // Every forwarded probe is matched; ids ending in 3, 6, 9 are dropped by Forward.
    assert_eq!(d.len(), 14_000);
    assert!(d.iter().all(|(id, _)| probes::forwarded(TraceTemplate::Forward, *id)));
    // D − δ(forward trace = 17 ns) reproduces the paper's quantiles narrowed to 0.6 of their
    // distance from the median (149 ns), within sampling error (the standard error of these
    // quantiles at n = 14,000 is below 0.1 ns; TSC ticks are 0.35 ns).
    let mut l: Vec<f64> = d.iter().map(|(_, x)| x - 17.0).collect();
    l.sort_by(f64::total_cmp);
    for (level, table) in [(0.05, 138.0), (0.25, 145.0), (0.5, 149.0), (0.75, 154.0), (0.95, 163.0), (0.99, 169.0)] {
        let (got, want) = (quantile(&l, level), 149.0 + 0.6 * (table - 149.0));
        assert!((got - want).abs() < 0.6, "p{}: {got} vs {want}", level * 100.0);
    }
    // The packet-dependent part repeats exactly in another run and another session.
    let again = diffs_ns(&sim.generate(session(&s, "forward", 4), &ses.runs[7], 1), model.tsc_hz);
    for ((i, x), (j, y)) in d.iter().zip(&again).take(500) {
        assert_eq!(i, j);
        assert!((x - y).abs() < 0.5, "probe {i}: {x} vs {y}");
    }
}

#[test]
fn per_run_noise_has_the_configured_spread() {
    let (p, s) = paper();
    let model = SimModel { outlier_prob: 0.0, first_probe_ns: [0.0, 0.0], wander_ns: 0.0, ..SimModel::default() };
    let mut sim = SimTestbed::new(&p, model.clone(), false);
    let ses = session(&s, "checksum", 1);
    let offset = sim.session_delta(ses) + sim.session_shift(ses);
    let lat = sim.packet_part("checksum", 0, ses.probes).to_vec();
    let d = diffs_ns(&sim.generate(ses, &ses.runs[0], 1), model.tsc_hz);
    let noise: Vec<f64> = d.iter().map(|(id, x)| x - lat[*id as usize] - offset).collect();
    let n = noise.len() as f64;
    let mean = noise.iter().sum::<f64>() / n;
    let sd = (noise.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    // Difference of two copies, each U(0, 6) + N(0, 10²): variance 2 × (36/12 + 100) = 206 (the
    // standard error of the mean is 0.1 ns, of the sd 0.07 ns).
    assert!(mean.abs() < 0.35, "mean {mean}");
    assert!((sd - 206f64.sqrt()).abs() < 0.25, "sd {sd}");
}

#[test]
fn five_tuple_holds_one_mode_per_session_and_modes_are_about_31_ns_apart() {
    let (p, s) = paper();
    let model = quiet();
    let mut sim = SimTestbed::new(&p, model.clone(), false);
    let mut medians = Vec::new();
    for n in 1..=5 {
        let ses = session(&s, "five_tuple", n);
        let mode = sim.session_mode(ses, 2);
        for r in [0, 9] {
            let mut d: Vec<f64> =
                diffs_ns(&sim.generate(ses, &ses.runs[r], 1), model.tsc_hz).iter().map(|x| x.1 - 14.0).collect();
            d.sort_by(f64::total_cmp);
            let m = quantile(&d, 0.5);
            let want = if mode == 0 { 107.0 } else { 137.0 };
            assert!((m - want).abs() < 0.6, "session {n} run {r}: {m} (mode {mode})");
            medians.push(m);
        }
    }
    // Over many bring-ups, the high mode turns up about half the time.
    let high = (1..=400)
        .filter(|&n| {
            let mut ses = session(&s, "five_tuple", 1).clone();
            ses.session = n;
            sim.session_mode(&ses, 2) == 1
        })
        .count();
    assert!((160..=240).contains(&high), "{high} of 400");
}

#[test]
fn without_a_reflash_sessions_keep_the_mode_of_the_flash() {
    let (mut p, _) = paper();
    p.protocol.flash = latency_plan::FlashPolicy::OnChange;
    let s = schedule::expand(&p, None).unwrap();
    // Over many seeds, every session of a program keeps its first session's mode, and both
    // modes still occur across seeds (one draw per flash, not none).
    let mut high = 0;
    for seed in 0..200 {
        let sim = SimTestbed::new(&p, quiet(), false).with_seed(seed);
        let modes: Vec<usize> = (1..=5).map(|n| sim.session_mode(session(&s, "five_tuple", n), 2)).collect();
        assert!(modes.iter().all(|&m| m == modes[0]), "seed {seed}: {modes:?}");
        high += modes[0];
    }
    assert!((60..=140).contains(&high), "{high} of 200 flashes in the high mode");
    // Flashing every session draws anew each time.
    let (p, s) = paper();
    let varied = (0..50).any(|seed| {
        let sim = SimTestbed::new(&p, quiet(), false).with_seed(seed);
        let modes: Vec<usize> = (1..=5).map(|n| sim.session_mode(session(&s, "five_tuple", n), 2)).collect();
        modes.iter().any(|&m| m != modes[0])
    });
    assert!(varied);
}

#[test]
fn a_boot_from_flash_redraws_the_mode_where_the_twin_says_it_does() {
    let (p, s) = paper();
    // Five sessions of five_tuple that only boot the image the card holds.
    let boots: Vec<Session> = (1..=5)
        .map(|n| {
            let mut x = session(&s, "five_tuple", n).clone();
            x.steps.retain(|st| st.action != latency_plan::Action::Flash);
            assert!(x.steps.iter().any(|st| st.action == latency_plan::Action::Boot));
            x
        })
        .collect();
    let modes = |model: SimModel, seed: u64| -> Vec<usize> {
        let sim = SimTestbed::new(&p, model, false).with_seed(seed);
        boots.iter().map(|x| sim.session_mode(x, 2)).collect()
    };
    // By default a boot configures the FPGA and draws the mode anew: some seed's sessions differ.
    assert!((0..50).any(|seed| modes(quiet(), seed).windows(2).any(|w| w[0] != w[1])));
    // A twin where only writing the flash redraws it keeps one mode through boots.
    let flash_only = SimModel { mode_redrawn_by: vec![latency_plan::Action::Flash], ..quiet() };
    for seed in 0..50 {
        let m = modes(flash_only.clone(), seed);
        assert!(m.iter().all(|&x| x == m[0]), "seed {seed}: {m:?}");
    }
}

#[test]
fn a_step_takes_the_twins_time_for_it_where_the_model_gives_one() {
    let (p, s) = paper();
    let ses = session(&s, "forward", 1);
    let flash = ses.steps.iter().find(|st| st.action == latency_plan::Action::Flash).unwrap();
    let boot = ses.steps.iter().find(|st| st.action == latency_plan::Action::Boot).unwrap();
    let model = SimModel { step_s: [(latency_plan::Action::Flash, 600.0)].into(), step_time_scale: 0.5, ..quiet() };
    let mut sim = SimTestbed::new(&p, model, false);
    let cancel = Cancel::default();
    assert_eq!(sim.step(ses, flash, 1, &cancel).unwrap(), 300.0);
    assert_eq!(sim.step(ses, boot, 1, &cancel).unwrap(), boot.estimate_s * 0.5);
}

#[test]
fn null_forwards_every_probe_and_first_probe_arrives_late() {
    let (p, s) = paper();
    let model =
        SimModel { first_probe_ns: SimModel::default().first_probe_ns, session_delta_spread_ns: 0.4, ..quiet() };
    let mut sim = SimTestbed::new(&p, model.clone(), false);
    let ses = session(&s, "null-forward_20k", 3);
    let delta = sim.session_delta(ses);
    assert!((delta - 17.0).abs() <= 0.2, "δ {delta} within the session spread");
    let d = diffs_ns(&sim.generate(ses, &ses.runs[0], 1), model.tsc_hz);
    assert_eq!(d.len(), 20_000);
    let first = d[0].1 - delta;
    assert!((19.5..=60.5).contains(&first), "first probe +{first} ns");
    assert!(d[1..].iter().all(|(_, x)| (x - delta).abs() < 0.5));
}

#[test]
fn an_agent_sender_records_every_transmission_and_each_echo_a_return_path_later() {
    let (mut p, s) = paper();
    let ses = session(&s, "forward", 1);
    let model = quiet();
    let one_way: std::collections::HashMap<u64, f64> =
        diffs_ns(&SimTestbed::new(&p, model.clone(), false).generate(ses, &ses.runs[0], 1), model.tsc_hz)
            .into_iter()
            .collect();
    p.protocol.sender = latency_plan::Sender::Agent { crossings: 1 };
    let rtt = diffs_ns(&SimTestbed::new(&p, model.clone(), false).generate(ses, &ses.runs[0], 1), model.tsc_hz);
    assert_eq!(rtt.len(), one_way.len());
    // The round trip is the one-way differential plus the wire to the card (the transmission
    // is stamped at the sender, before it) and the echo's way back; stamps are whole ticks.
    let back = WIRE_NS + model.echo_return_ns;
    for (id, d) in &rtt {
        assert!((d - one_way[id] - back).abs() < 1.0, "probe {id}: {d} vs {} + {back}", one_way[id]);
    }
    // Losses take echoes only: every probe sent is recorded.
    let lossy = SimModel { loss: 0.1, ..quiet() };
    let data = SimTestbed::new(&p, lossy, false).generate(ses, &ses.runs[0], 1);
    let c = pairs::pair(&data.batches).counts;
    assert_eq!(c.matched + c.bypass_only, 20_000, "{c:?}");
    assert!((12_300..=12_900).contains(&c.matched), "0.9 of the 14,000 forwarded: {c:?}");
}

#[test]
fn loss_removes_copies_and_reflect_adds_hardware_stamps() {
    let (mut p, s) = paper();
    p.protocol.reflect = true;
    let model = SimModel { loss: 0.1, ..SimModel::default() };
    let mut sim = SimTestbed::new(&p, model.clone(), false);
    let ses = session(&s, "checksum", 1);
    let data = sim.generate(ses, &ses.runs[0], 1);
    let c = pairs::pair(&data.batches).counts;
    // Each copy survives with probability 0.9: both with 0.81 (σ ≈ 55 probes).
    assert!((15_900..=16_500).contains(&c.matched), "{c:?}");
    let mut r_minus_d = Vec::new();
    let mut stamps = std::collections::HashMap::new();
    for b in &data.batches {
        let ids = b.column(0).as_primitive::<UInt64Type>();
        let ports = b.column(1).as_primitive::<UInt8Type>();
        let tsc = b.column(2).as_primitive::<UInt64Type>();
        let hw = b.column(5).as_primitive::<Int64Type>();
        assert_eq!(hw.null_count(), 0);
        for k in 0..b.num_rows() {
            stamps.insert((ids.value(k), ports.value(k)), (tsc.value(k), hw.value(k)));
        }
    }
    for id in 1..=20_000u64 {
        if let (Some(pp), Some(bb)) = (stamps.get(&(id, 0)), stamps.get(&(id, 1))) {
            let d = (pp.0 as f64 - bb.0 as f64) * 1e9 / model.tsc_hz;
            r_minus_d.push((pp.1 - bb.1) as f64 - d);
        }
    }
    let n = r_minus_d.len() as f64;
    let mean = r_minus_d.iter().sum::<f64>() / n;
    let sd = (r_minus_d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
    // C = R − D: two independent N(0, 4²) channel terms, plus rounding of both clocks.
    assert!(mean.abs() < 0.15 && (sd - 32f64.sqrt()).abs() < 0.25, "mean {mean} sd {sd}");
}

proptest::proptest! {
    /// The simulator's rounding is `f64::round`'s, halves and the edges of the range included.
    #[test]
    fn stamps_round_as_the_library_rounds(
        whole in -(1i64 << 53)..(1i64 << 53),
        eighths in 0u8..8,
        scale in proptest::sample::select(vec![1.0, 1e-3, 2.89, 1e6, 1e12]),
    ) {
        let x = (whole as f64 + f64::from(eighths) / 8.0) * scale;
        for v in [x, -x, x.next_up(), x.next_down()] {
            proptest::prop_assert_eq!(round(v), v.round() as i64, "{}", v);
        }
    }
}

#[test]
fn stamps_round_as_the_library_rounds_at_the_extremes() {
    for v in [
        0.5,
        -0.5,
        1.5,
        -2.5,
        0.49999999999999994,
        -0.49999999999999994,
        4503599627370495.5,
        -4503599627370495.5,
        9.3e18,
        -9.3e18,
        1e300,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -0.0,
    ] {
        assert_eq!(round(v), v.round() as i64, "{v}");
    }
}

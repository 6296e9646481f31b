//! Judge a nightly regression plan on the twin: per seed, its reference study, one steady night
//! and, for each program in turn, a night with that program 5 ns slower (every quantile of its
//! model, in every reset mode), each night judged against the reference by `compare` with the
//! night plan's thresholds. It prints how often a steady night raises an alarm (any program
//! failing) and how often each shift is caught (the shifted program failing), with the steady
//! nights' median and p99 shifts per program, and exits 1 when an alarm rate is over 5 % or a
//! shift is caught in under 95 % of seeds.
//!
//! `cargo run --release -p orchestrator --example validate_nightly -- [SEEDS] [--plan FILE]
//! [--reference FILE] [--shift NS]` (`make validate-nightly`; by default plans/nightly.yaml
//! against plans/nightly-reference.yaml, 40 seeds, 5 ns).

use std::collections::BTreeMap;
use std::path::Path;

use latency_analysis::compare;
use latency_analysis::compare::Thresholds;
use latency_results::summary::Summary;
use latency_testbed::model::SimModel;

mod twin;

const USAGE: &str = "usage: validate_nightly [SEEDS] [--plan FILE] [--reference FILE] [--shift NS]";

/// What one seed gives.
struct Seed {
    /// The steady night's comparison.
    steady: compare::Comparison,
    /// Per program shifted: the comparison of its night.
    shifted: Vec<(String, compare::Comparison)>,
}

fn main() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plans");
    let mut args = std::env::args().skip(1);
    let (mut seeds, mut shift) = (40u64, 5.0f64);
    let (mut night_path, mut reference_path) = (here.join("nightly.yaml"), here.join("nightly-reference.yaml"));
    while let Some(a) = args.next() {
        match a.as_str() {
            "--plan" => night_path = args.next().expect(USAGE).into(),
            "--reference" => reference_path = args.next().expect(USAGE).into(),
            "--shift" => shift = args.next().and_then(|v| v.parse().ok()).expect(USAGE),
            n => seeds = n.parse().unwrap_or_else(|_| panic!("{USAGE}")),
        }
    }
    let (night, reference) = (twin::load_plan(&night_path), twin::load_plan(&reference_path));
    let thresholds = Thresholds::resolve([None; 3], night.regression.as_ref());
    let model = SimModel::default();
    let t0 = std::time::Instant::now();
    let (night, reference, model) = (&night, &reference, &model);
    let results: Vec<Seed> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..2u64)
            .map(|half| {
                scope.spawn(move || {
                    (0..seeds)
                        .filter(|s| s % 2 == half)
                        .map(|s| one_seed(night, reference, model, s, shift, thresholds))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("a seed")).collect()
    });
    eprintln!("{seeds} seeds in {:.1} s", t0.elapsed().as_secs_f64());
    println!(
        "validate-nightly: {seeds} seeds of {} against {} on sim, {shift} ns shifts, thresholds: median {} ns, p99 {} ns, KS {}",
        night_path.display(),
        reference_path.display(),
        thresholds.median_shift_ns,
        thresholds.p99_shift_ns,
        thresholds.ks_distance
    );
    if !report(&results, seeds) {
        std::process::exit(1);
    }
}

/// The reference, a steady night and one shifted night per program, with `seed`.
fn one_seed(
    night: &latency_plan::Plan,
    reference: &latency_plan::Plan,
    model: &SimModel,
    seed: u64,
    shift: f64,
    t: Thresholds,
) -> Seed {
    let (_, _, base) = twin::simulate(reference, model, 9000 + seed);
    let judge = |s: &Summary| compare::compare(&base, s, t).expect("twin studies have ended and are calibrated alike");
    let (_, _, steady) = twin::simulate(night, model, 19_000 + seed);
    let shifted = night
        .programs
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let mut slower = model.clone();
            let m = slower.programs.get_mut(&p.bitstream.name).expect("the model has every program of the plan");
            m.modes.iter_mut().for_each(|q| *q = q.map(|v| v + shift));
            let (_, _, s) = twin::simulate(night, &slower, 29_000 + 16 * seed + k as u64);
            (p.name.clone(), judge(&s))
        })
        .collect();
    Seed { steady: judge(&steady), shifted }
}

/// Print the rates; whether they meet the targets (alarms ≤ 5 %, shifts caught ≥ 95 %).
fn report(results: &[Seed], seeds: u64) -> bool {
    let n = seeds as f64;
    let alarms = results.iter().filter(|s| s.steady.regressed()).count();
    // A shifted night's other programs are steady ones too.
    let other_alarms = results
        .iter()
        .flat_map(|s| s.shifted.iter())
        .filter(|(name, c)| c.programs.iter().any(|p| p.program != *name && !p.failures.is_empty()))
        .count();
    let mut steady: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
    for s in results {
        for p in &s.steady.programs {
            let p99 = p.quantile_shifts_ns.iter().find(|(k, _)| k == "p99").map_or(f64::NAN, |x| x.1);
            steady.entry(&p.program).or_default().push((p.median_shift_ns, p99));
        }
    }
    println!(
        "{:<14} {:>11} {:>10} {:>11} {:>10} {:>13} {:>12}",
        "program", "steady Δp50", "sd Δp50", "steady Δp99", "sd Δp99", "steady alarms", "shift caught"
    );
    let mut ok = true;
    for (name, shifts) in &steady {
        let (p50, p99): (Vec<f64>, Vec<f64>) = shifts.iter().copied().unzip();
        let failed = results
            .iter()
            .filter(|s| s.steady.programs.iter().any(|p| p.program == *name && !p.failures.is_empty()))
            .count();
        let caught = results
            .iter()
            .filter(|s| {
                s.shifted.iter().any(|(shifted, c)| {
                    shifted == name && c.programs.iter().any(|p| p.program == *name && !p.failures.is_empty())
                })
            })
            .count();
        ok &= caught as f64 >= 0.95 * n;
        println!(
            "{:<14} {:>+11.2} {:>10.2} {:>+11.2} {:>10.2} {:>12.1}% {:>11.1}%",
            name,
            mean(&p50),
            sd(&p50),
            mean(&p99),
            sd(&p99),
            100.0 * failed as f64 / n,
            100.0 * caught as f64 / n
        );
    }
    let programs = steady.len().max(1) as f64;
    println!(
        "steady nights with an alarm: {alarms} of {seeds} ({:.1} %); shifted nights with an alarm on another program: {other_alarms} of {} ({:.1} %)",
        100.0 * alarms as f64 / n,
        seeds * steady.len() as u64,
        100.0 * other_alarms as f64 / (n * programs)
    );
    ok &= alarms as f64 <= 0.05 * n;
    println!("{}", if ok { "targets met (alarms ≤ 5 %, shifts caught ≥ 95 %)" } else { "targets NOT met" });
    ok
}

fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

fn sd(x: &[f64]) -> f64 {
    let m = mean(x);
    (x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (x.len() as f64 - 1.0)).sqrt()
}

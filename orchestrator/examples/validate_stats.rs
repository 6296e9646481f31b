//! Judge the estimators against the simulator's ground truth: the paper plan simulated over many
//! seeds, analysed in memory, and per program and statistic the bias, RMSE and confidence-interval
//! coverage against the model's true quantiles; mode separation against the sessions the simulator
//! put in each mode.
//!
//! `cargo run --release -p orchestrator --example validate_stats -- [SEEDS] [--modes-apart NS]`
//! (`make validate-stats`). With `--modes-apart`, FiveTuple's second mode is moved to NS above its
//! first, to measure how often modes that close are told apart.

use std::collections::BTreeMap;
use std::path::Path;

use latency_analysis::Unusable;
use latency_analysis::pair_batches;
use latency_analysis::summarize;
use latency_results::index::Index;
use latency_testbed::model::LEVELS;
use latency_testbed::model::SimModel;
use latency_testbed::sim::SimTestbed;

/// What one seed gives for one program mode.
struct Outcome {
    program: String,
    /// Headline (largest) mode of the program.
    headline: bool,
    /// (level, estimate, raw estimate, truth).
    quantiles: Vec<(f64, f64, f64, f64)>,
    /// (level, [lo, hi]) of the headline mode's intervals.
    cis: Vec<(f64, [f64; 2])>,
    /// The found partition of sessions into modes equals the simulated one.
    modes_right: bool,
    /// Modes found and simulated.
    modes: (usize, usize),
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut seeds = 40u64;
    let mut apart: Option<f64> = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--modes-apart" => apart = args.next().and_then(|v| v.parse().ok()),
            n => seeds = n.parse().unwrap_or_else(|_| panic!("usage: validate_stats [SEEDS] [--modes-apart NS]")),
        }
    }
    let mut model = SimModel::default();
    if let Some(ns) = apart {
        let ft = model.programs.get_mut("five_tuple").expect("the model has five_tuple");
        let first = ft.modes[0];
        ft.modes[1] = first.map(|q| q + ns);
    }
    let plan_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plans/paper.yaml");
    let (mut plan, _) = latency_plan::load(&plan_path, Some("sim")).expect("the paper plan loads");
    // The hardware-clock check is not judged here; without reflection the simulation is faster.
    plan.protocol.reflect = false;
    plan.analysis.hw_clock_check = false;
    let plan = &plan;
    let model = &model;
    let t0 = std::time::Instant::now();
    let outcomes: Vec<(u64, Outcome)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..2u64)
            .map(|half| {
                scope.spawn(move || {
                    (0..seeds)
                        .filter(|s| s % 2 == half)
                        .flat_map(|s| study(plan, model, 7000 + s).into_iter().map(move |o| (s, o)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("a seed's study")).collect()
    });
    eprintln!("{seeds} seeds in {:.1} s", t0.elapsed().as_secs_f64());
    report(seeds, &outcomes, apart);
}

/// Simulate and analyse the plan with `seed`; one outcome per program and mode found.
fn study(plan: &latency_plan::Plan, model: &SimModel, seed: u64) -> Vec<Outcome> {
    let schedule = latency_schedule::expand(plan, None).expect("the plan expands");
    let groups = latency_schedule::groups(plan, &schedule);
    let mut sim = SimTestbed::new(plan, model.clone(), false).with_seed(seed);
    let mut runs = Vec::new();
    for s in &schedule.sessions {
        let gi = groups.iter().position(|g| g.program == s.program).expect("a group per program");
        for r in &s.runs {
            let data = sim.generate(s, r, 1);
            runs.push(pair_batches(gi, s.session, &data.batches, model.tsc_hz, plan.analysis.exclude_first_after_gap));
        }
    }
    let index = Index {
        study: "validate".into(),
        groups,
        levels: Vec::new(),
        analysis: plan.analysis.clone(),
        report: plan.report.clone(),
        tsc_hz: model.tsc_hz,
        seed,
        sender: Default::default(),
    };
    let summary = summarize(&index, &runs, &[], None, Unusable::default());
    let mut out = Vec::new();
    for (name, p) in &summary.programs {
        let truth = sim.program_model(&p.bitstream);
        let sessions: Vec<_> = schedule.sessions.iter().filter(|s| &s.program == name).collect();
        let mode_of =
            |n: u32| sim.session_mode(sessions.iter().find(|s| s.session == n).expect("a session"), truth.modes.len());
        let mut simulated: Vec<Vec<u32>> = (0..truth.modes.len())
            .map(|m| sessions.iter().map(|s| s.session).filter(|&n| mode_of(n) == m).collect())
            .filter(|v: &Vec<u32>| !v.is_empty())
            .collect();
        simulated.sort();
        let mut found: Vec<Vec<u32>> = p.modes.iter().map(|m| m.sessions.clone()).collect();
        found.sort();
        let modes_right = found == simulated;
        let headline = p.modes.iter().max_by_key(|m| m.sessions.len()).map(|m| m.sessions.clone());
        for m in &p.modes {
            // The mode's truth: the simulated mode most of its sessions are in.
            let mut votes = vec![0usize; truth.modes.len()];
            for &s in &m.sessions {
                votes[mode_of(s)] += 1;
            }
            let true_mode = (0..votes.len()).max_by_key(|&k| votes[k]).unwrap_or(0);
            let is_headline = headline.as_ref() == Some(&m.sessions);
            let raw = if is_headline { &p.latency_raw_ns } else { &m.latency_raw_ns };
            let quantiles = [5.0, 50.0, 99.0]
                .iter()
                .map(|&l| {
                    let t = truth.modes[true_mode][LEVELS.iter().position(|&x| x == l).expect("a model level")];
                    (l, m.latency_ns.at(l).unwrap_or(f64::NAN), raw.at(l).unwrap_or(f64::NAN), t)
                })
                .collect();
            let cis = [(50.0, m.median_ci95_ns), (99.0, m.p99_ci95_ns)]
                .into_iter()
                .filter_map(|(l, ci)| ci.map(|ci| (l, ci)))
                .collect();
            out.push(Outcome {
                program: name.clone(),
                headline: is_headline,
                quantiles,
                cis,
                modes_right,
                modes: (found.len(), simulated.len()),
            });
        }
    }
    out
}

fn report(seeds: u64, outcomes: &[(u64, Outcome)], apart: Option<f64>) {
    let mut programs: BTreeMap<&str, Vec<&Outcome>> = BTreeMap::new();
    for (_, o) in outcomes {
        programs.entry(&o.program).or_default().push(o);
    }
    println!(
        "validate-stats: {seeds} seeds of plans/paper.yaml on sim{}",
        apart.map_or(String::new(), |a| format!(", FiveTuple's modes {a} ns apart"))
    );
    println!(
        "{:<14} {:>5} {:>10} {:>9} {:>10} {:>9} {:>10} {:>10}",
        "program", "stat", "mean err", "rmse", "raw err", "raw rmse", "ci cover", "ci width"
    );
    for (name, all) in &programs {
        // The program's headline (its most populated mode); other modes are summed up after it.
        let os: Vec<&Outcome> = all.iter().copied().filter(|o| o.headline).collect();
        for (k, level) in [5.0, 50.0, 99.0].iter().enumerate() {
            let errs: Vec<f64> = os.iter().map(|o| o.quantiles[k].1 - o.quantiles[k].3).collect();
            let raw: Vec<f64> = os.iter().map(|o| o.quantiles[k].2 - o.quantiles[k].3).collect();
            let truth_in: Vec<(bool, f64)> = os
                .iter()
                .filter(|o| o.headline)
                .filter_map(|o| {
                    let t = o.quantiles[k].3;
                    o.cis.iter().find(|c| c.0 == *level).map(|(_, [lo, hi])| (*lo <= t && t <= *hi, hi - lo))
                })
                .collect();
            let cover = if truth_in.is_empty() {
                "—".to_string()
            } else {
                format!("{:.0} %", 100.0 * truth_in.iter().filter(|c| c.0).count() as f64 / truth_in.len() as f64)
            };
            let width = if truth_in.is_empty() {
                "—".to_string()
            } else {
                format!("{:.3}", truth_in.iter().map(|c| c.1).sum::<f64>() / truth_in.len() as f64)
            };
            println!(
                "{:<14} {:>5} {:>10.3} {:>9.3} {:>10.3} {:>9.3} {:>10} {:>10}",
                name,
                format!("p{level}"),
                mean(&errs),
                rmse(&errs),
                mean(&raw),
                rmse(&raw),
                cover,
                width
            );
        }
        let others: Vec<&Outcome> = all.iter().copied().filter(|o| !o.headline).collect();
        if !others.is_empty() {
            let err = |k: usize| mean(&others.iter().map(|o| o.quantiles[k].1 - o.quantiles[k].3).collect::<Vec<_>>());
            let cover = |k: usize, level: f64| {
                let hits: Vec<bool> = others
                    .iter()
                    .filter_map(|o| {
                        let t = o.quantiles[k].3;
                        o.cis.iter().find(|c| c.0 == level).map(|(_, [lo, hi])| *lo <= t && t <= *hi)
                    })
                    .collect();
                100.0 * hits.iter().filter(|h| **h).count() as f64 / hits.len().max(1) as f64
            };
            println!(
                "{:<14} other modes ({} in all, fewer sessions): mean err p5 {:.3}, p50 {:.3}, p99 {:.3}; ci cover p50 {:.0} %, p99 {:.0} %",
                name,
                others.len(),
                err(0),
                err(1),
                err(2),
                cover(1, 50.0),
                cover(2, 99.0)
            );
        }
        let seeds_right = os.iter().filter(|o| o.modes_right).count();
        let split = os.iter().filter(|o| o.modes.0 > o.modes.1).count();
        let merged = os.iter().filter(|o| o.modes.0 < o.modes.1).count();
        println!(
            "{:<14} modes right in {seeds_right}/{} seeds ({split} split too finely, {merged} merged)",
            name,
            os.len()
        );
    }
}

fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

fn rmse(x: &[f64]) -> f64 {
    (x.iter().map(|e| e * e).sum::<f64>() / x.len() as f64).sqrt()
}

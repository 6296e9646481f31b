//! Judge the nightly trend's gates and confirmation on the twin: per seed, 30 nights of the
//! nightly plan, each simulated with its own seed, added to a history in memory and the trend
//! judged by the plan's `trend:` gates after every night, as `orchestrate nightly` does. Where a
//! night's series regresses unconfirmed, its programs are measured again (the plan narrowed to them
//! with `trend.confirm.sessions`, another seed) and the confirmation recorded; an alert is a
//! regression the trend still reports then. Two histories per seed: steady nights, and Forward
//! `--shift` ns slower (every quantile of its model) from night 20 on. It prints how many seeds
//! alerted on the shift (target ≥ 95 %), confirmed false alerts per 100 steady nights (target ≤ 1)
//! and how many confirmations ran, and exits 1 when a target is missed.
//!
//! `cargo run --release -p orchestrator --example validate_trend -- [SEEDS] [--nights N]
//! [--from N] [--plan FILE] [--shift NS]` (`make validate-trend`; by default plans/nightly.yaml,
//! 40 seeds, 30 nights, a 5 ns shift from night 20). With `VALIDATE_TREND_DEBUG` set, every alert
//! and the shifted histories' Forward series from the shift on are printed on stderr.

use std::path::Path;

use latency_history::store::{StoredRow, StudyKey};
use latency_history::trend::{self, Gates};
use latency_results::history::row::{self, Confirmation, HEADLINE};
use latency_results::history::table::Micros;
use latency_results::provenance::{Provenance, TestbedFacts};
use latency_results::summary::Summary;
use latency_testbed::model::SimModel;

mod twin;

const USAGE: &str = "usage: validate_trend [SEEDS] [--nights N] [--from N] [--plan FILE] [--shift NS]";

/// What one history gives.
#[derive(Default)]
struct Outcome {
    /// Nights with an alert (a confirmed regression), and on which program.
    alerts: Vec<(usize, String)>,
    /// Confirmation studies run.
    confirmations: usize,
    /// Unconfirmed regressions (before their confirmation).
    unconfirmed: usize,
}

struct Setup<'a> {
    night: &'a latency_plan::Plan,
    narrowed: &'a (dyn Fn(&[String]) -> latency_plan::Plan + Sync),
    gates: Gates,
    nights: usize,
    from: usize,
    shift: f64,
}

fn main() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plans");
    let mut args = std::env::args().skip(1);
    let (mut seeds, mut nights, mut from, mut shift) = (40u64, 30usize, 20usize, 5.0f64);
    let mut plan_path = here.join("nightly.yaml");
    while let Some(a) = args.next() {
        let mut value = || args.next().expect(USAGE);
        match a.as_str() {
            "--plan" => plan_path = value().into(),
            "--nights" => nights = value().parse().expect(USAGE),
            "--from" => from = value().parse().expect(USAGE),
            "--shift" => shift = value().parse().expect(USAGE),
            n => seeds = n.parse().unwrap_or_else(|_| panic!("{USAGE}")),
        }
    }
    let plan = twin::load_plan(&plan_path);
    let t = plan.trend.clone().unwrap_or_else(|| panic!("{} has no `trend:` gates", plan_path.display()));
    let gates = Gates::of_plan(Some(&plan));
    let sessions = t.confirm.as_ref().and_then(|c| c.sessions);
    let narrowed = |programs: &[String]| {
        let keep: Vec<&str> = programs.iter().map(String::as_str).collect();
        let text = latency_plan::subset::subset(&plan.path, &plan.source, &keep, sessions).expect("the plan narrows");
        let path = plan.path.with_file_name(format!(".validate-trend-{}-{}.yaml", std::process::id(), keep.join("-")));
        std::fs::write(&path, text).expect("the narrowed plan is written beside the plan");
        let p = twin::load_plan(&path);
        let _ = std::fs::remove_file(&path);
        p
    };
    let setup = Setup { night: &plan, narrowed: &narrowed, gates, nights, from, shift };
    let model = SimModel::default();
    let t0 = std::time::Instant::now();
    // Two threads (this machine's cores), a history each at a time.
    let (setup, model) = (&setup, &model);
    let (steady, shifted): (Vec<Outcome>, Vec<Outcome>) = std::thread::scope(|scope| {
        let handles: Vec<_> = [false, true]
            .map(|shifted| {
                scope.spawn(move || (0..seeds).map(|s| history(setup, model, s, shifted)).collect::<Vec<_>>())
            })
            .into_iter()
            .collect();
        let mut both = handles.into_iter().map(|h| h.join().expect("a history"));
        (both.next().unwrap_or_default(), both.next().unwrap_or_default())
    });
    eprintln!("{seeds} seeds × {nights} nights × 2 in {:.1} s", t0.elapsed().as_secs_f64());
    let caught = shifted.iter().filter(|o| o.alerts.iter().any(|(n, p)| *n >= from && p == "forward")).count();
    let false_shifted: usize =
        shifted.iter().map(|o| o.alerts.iter().filter(|(n, p)| *n < from || p != "forward").count()).sum();
    let false_alerts: usize = steady.iter().map(|o| o.alerts.len()).sum();
    let steady_nights = seeds as usize * nights;
    let rate = 100.0 * false_alerts as f64 / steady_nights as f64;
    let confirmations: usize = steady.iter().chain(&shifted).map(|o| o.confirmations).sum();
    let unconfirmed: usize = steady.iter().chain(&shifted).map(|o| o.unconfirmed).sum();
    println!(
        "validate-trend: {seeds} seeds × {nights} nights of {} on sim; gates: median {} ns, p99 {} ns, {} × noise, {} nights; confirmation: {}",
        plan_path.display(),
        gates.median_shift_ns,
        gates.p99_shift_ns,
        gates.noise_k,
        gates.min_nights,
        if gates.confirm {
            format!("{} session(s) of the regressed programs", sessions.unwrap_or(plan.protocol.sessions))
        } else {
            "none".into()
        }
    );
    println!(
        "shift of {shift} ns on forward from night {from}: alerted (confirmed) in {caught} of {seeds} seeds ({:.1} %, target ≥ 95 %)",
        100.0 * caught as f64 / seeds as f64
    );
    println!(
        "steady nights: {false_alerts} confirmed false alert(s) in {steady_nights} nights ({rate:.2} per 100 nights, target ≤ 1); \
         other false alerts in the shifted histories: {false_shifted}"
    );
    println!("unconfirmed regressions: {unconfirmed}; confirmation studies run: {confirmations}");
    let ok = caught as f64 >= 0.95 * seeds as f64 && rate <= 1.0;
    println!("{}", if ok { "targets met" } else { "targets NOT met" });
    if !ok {
        std::process::exit(1);
    }
}

/// One history of `setup.nights` nights with `seed`; Forward shifted from night `from` on when
/// `shifted`.
fn history(setup: &Setup<'_>, model: &SimModel, seed: u64, shifted: bool) -> Outcome {
    let mut slower = model.clone();
    let forward = slower.programs.get_mut("forward").expect("the model has Forward");
    forward.modes.iter_mut().for_each(|q| *q = q.map(|v| v + setup.shift));
    let mut rows: Vec<StoredRow> = Vec::new();
    let mut confirmations: Vec<Confirmation> = Vec::new();
    let mut out = Outcome::default();
    let base = 1_000_000 * seed + if shifted { 500_000 } else { 0 };
    for n in 0..setup.nights {
        let m = if shifted && n >= setup.from { &slower } else { model };
        let night = format!("night-{n}");
        let (_, _, s) = twin::simulate(setup.night, m, base + 10 * n as u64);
        rows.extend(stored(&s, setup.night, &night, n, 0));
        let t = trend::trend(&rows, &[], &confirmations, setup.gates);
        let regressed = t.unconfirmed(&night);
        let t = if setup.gates.confirm && !regressed.is_empty() {
            out.unconfirmed += 1;
            out.confirmations += 1;
            let plan = (setup.narrowed)(&regressed);
            let by = format!("confirm-{n}");
            let (_, _, c) = twin::simulate(&plan, m, base + 10 * n as u64 + 1);
            rows.extend(stored(&c, &plan, &by, n, 1));
            confirmations.push(Confirmation { study: by, confirms: night.clone(), time: Micros(0) });
            trend::trend(&rows, &[], &confirmations, setup.gates)
        } else {
            t
        };
        if std::env::var_os("VALIDATE_TREND_DEBUG").is_some() && shifted && n >= setup.from {
            for s in t.series.iter().filter(|s| s.program == "forward") {
                let c = t.changes.iter().find(|c| c.latest && c.key() == s.key());
                eprintln!(
                    "seed {seed} night {n} forward {}: noise {:?} noisy {:?} latest {:?}",
                    s.statistic,
                    s.noise_ns,
                    s.noisy.map(|x| x.detectable_ns),
                    c.map(|c| (c.change.index, c.change.shift_ns, c.change.ci95_ns, c.judgement, c.confirmed))
                );
            }
        }
        if std::env::var_os("VALIDATE_TREND_DEBUG").is_some() {
            for c in t.regressions() {
                let s = t.series.iter().find(|s| s.key() == c.key()).expect("its series");
                eprintln!(
                    "seed {seed} {} night {n}: {} {} shift {:+.2} [{:+.2}, {:+.2}] from {} noise {:?} points {}",
                    if shifted { "shifted" } else { "steady" },
                    c.program,
                    c.statistic,
                    c.change.shift_ns,
                    c.change.ci95_ns[0],
                    c.change.ci95_ns[1],
                    c.change.index,
                    s.noise_ns,
                    s.points.iter().map(|p| format!("{:.1}", p.value_ns)).collect::<Vec<_>>().join(" ")
                );
            }
        }
        let mut alerted: Vec<String> = t.regressions().map(|c| c.program.clone()).collect();
        alerted.dedup();
        out.alerts.extend(alerted.into_iter().map(|p| (n, p)));
    }
    out
}

/// A simulated study's history rows, as `history add` makes them: night `n`, the `k`-th study of
/// the night (a confirmation runs after it).
fn stored(s: &Summary, plan: &latency_plan::Plan, id: &str, n: usize, k: i64) -> Vec<StoredRow> {
    let started = 1_790_000_000 + 86_400 * n as i64 + 3600 * k;
    let prov = Provenance {
        study: plan.study.clone(),
        plan_hash: plan.hash.clone(),
        plan_file: None,
        tool_version: String::new(),
        git_commit: String::new(),
        seed: 0,
        testbed: TestbedFacts { name: "sim".into(), facts: Default::default() },
        tsc_hz: f64::NAN,
        bitstreams: Default::default(),
        traces: Default::default(),
        groups: Vec::new(),
        levels: Vec::new(),
        analysis: plan.analysis.clone(),
        report: plan.report.clone(),
        regression: None,
        sessions: 0,
        runs: 0,
        started: latency_results::utc(started as u64),
        resumed: Vec::new(),
        ended: Some(latency_results::utc(started as u64 + 1800)),
        import: None,
        sender: Default::default(),
    };
    let key = StudyKey { date: prov.started[..10].to_string(), study: id.to_string() };
    row::rows(s, &prov, Micros(started * 1_000_000), None)
        .into_iter()
        .filter(|r| r.mode == HEADLINE)
        .map(|row| StoredRow { key: key.clone(), row })
        .collect()
}

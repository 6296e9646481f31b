//! What the statistical checks share: a plan simulated on the twin and analysed in memory, through
//! the same pairing and summary as a study's.

use latency_analysis::Unusable;
use latency_analysis::pair_batches;
use latency_analysis::summarize;
use latency_results::index::Index;
use latency_results::summary::Summary;
use latency_schedule::Schedule;
use latency_testbed::model::SimModel;
use latency_testbed::sim::SimTestbed;

/// The plan at `path` for the simulator (exit 2 with its diagnostics when invalid), without
/// reflection: the hardware-clock check is not judged here, and the simulation is faster.
pub fn load_plan(path: &std::path::Path) -> latency_plan::Plan {
    let (mut plan, _) = latency_plan::load(path, Some("sim")).unwrap_or_else(|e| {
        for d in &e.0 {
            eprintln!("{d}");
        }
        std::process::exit(2)
    });
    plan.protocol.reflect = false;
    plan.analysis.hw_clock_check = false;
    plan
}

/// `plan` simulated with `model` and `seed`, and its summary.
pub fn simulate(plan: &latency_plan::Plan, model: &SimModel, seed: u64) -> (Schedule, SimTestbed, Summary) {
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
        study: plan.study.clone(),
        groups,
        levels: Vec::new(),
        analysis: plan.analysis.clone(),
        report: plan.report.clone(),
        tsc_hz: model.tsc_hz,
        seed,
        sender: Default::default(),
    };
    let summary = summarize(&index, &runs, &[], None, Unusable::default());
    (schedule, sim, summary)
}

//! Writing a study's `provenance.json` (defined in [`latency_results::provenance`]) at its start
//! and end.

use crate::tool::GIT_COMMIT;
use crate::tool::TOOL_VERSION;
use latency_plan::Plan;
use latency_plan::TraceSource;
use latency_results::ResultsDir;
use latency_results::ResultsError;
use latency_results::now_micros;
use latency_results::provenance::Provenance;
use latency_results::provenance::{SliceFacts, TestbedFacts};
use latency_results::utc_micros;
use latency_schedule::Schedule;
use latency_schedule::groups;
use latency_testbed::Testbed;

/// Write the provenance at the start of a study, or add the time of its resumption. Only called
/// once every check of a resumption has passed.
pub fn write_start(
    dir: &ResultsDir,
    plan: &Plan,
    schedule: &Schedule,
    slices: &[Box<dyn Testbed>],
    seed: u64,
) -> Result<(), ResultsError> {
    let now = utc_micros(now_micros());
    let previous = dir.root().join(latency_results::provenance::FILE).exists().then(|| Provenance::read(dir));
    let (started, mut resumed) = match previous {
        Some(p) => {
            let p = p?;
            (p.started, p.resumed)
        }
        None => (now.clone(), Vec::new()),
    };
    if started != now || !resumed.is_empty() {
        resumed.push(now);
    }
    let (bitstreams, mut traces) = Provenance::plan_facts(plan);
    // A pcap the plan gives without its sha256 is recorded with the one it has now.
    for source in traces.values_mut() {
        if let TraceSource::Pcap { path, sha256: sha256 @ None } = source {
            *sha256 = Some(latency_plan::digest::sha256_file(path).map_err(latency_results::io_err(path))?);
        }
    }
    Provenance {
        study: plan.study.clone(),
        plan_hash: plan.hash.clone(),
        plan_file: Some(plan.path.clone()),
        tool_version: TOOL_VERSION.into(),
        git_commit: GIT_COMMIT.into(),
        seed,
        testbed: testbed_facts(slices),
        tsc_hz: slices.first().map_or(f64::NAN, |tb| tb.tsc_hz()),
        bitstreams,
        traces,
        groups: groups(plan, schedule),
        levels: latency_results::index::StudyLevel::of(plan),
        analysis: plan.analysis.clone(),
        report: plan.report.clone(),
        regression: plan.regression.clone(),
        sessions: schedule.sessions.len(),
        runs: schedule.sessions.iter().map(|s| s.runs.len()).sum(),
        started,
        resumed,
        ended: None,
        import: None,
        sender: plan.protocol.sender,
    }
    .write(dir)
}

/// Record the end time, and what the testbed learnt during the study (a real testbed knows its
/// TSC rate and host facts only once the agent has started).
pub fn write_end(dir: &ResultsDir, slices: &[Box<dyn Testbed>]) -> Result<(), ResultsError> {
    let mut p = Provenance::read(dir)?;
    p.ended = Some(utc_micros(now_micros()));
    if let Some(tb) = slices.first().filter(|tb| tb.tsc_hz().is_finite()) {
        p.tsc_hz = tb.tsc_hz();
    }
    p.testbed = testbed_facts(slices);
    p.write(dir)
}

/// The testbed's facts; on several slices, the first slice's, its name the slices' names joined
/// by commas, and fact `slices`: each slice's name, TSC rate and facts.
fn testbed_facts(slices: &[Box<dyn Testbed>]) -> TestbedFacts {
    let Some(first) = slices.first() else { return TestbedFacts { name: String::new(), facts: Default::default() } };
    let mut facts = first.facts();
    if slices.len() > 1 {
        let each = slices
            .iter()
            .map(|tb| SliceFacts {
                name: tb.name(),
                tsc_hz: Some(tb.tsc_hz()).filter(|hz| hz.is_finite()),
                facts: tb.facts(),
            })
            .collect();
        facts.slices = Some(each);
    }
    let names: Vec<String> = slices.iter().map(|tb| tb.name()).collect();
    TestbedFacts { name: names.join(","), facts }
}

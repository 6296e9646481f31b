//! Writing a study's `provenance.json` (defined in [`crate::results::provenance`]) at its start
//! and end.

use crate::plan::Plan;
use crate::results::index::groups;
use crate::results::provenance::{GIT_COMMIT, Provenance, TOOL_VERSION, TestbedFacts};
use crate::results::{ResultsDir, ResultsError, now_secs, utc};
use crate::schedule::Schedule;
use crate::testbed::Testbed;

/// Write the provenance at the start of a study, or add the time of its resumption. Only called
/// once every check of a resumption has passed.
pub fn write_start(
    dir: &ResultsDir,
    plan: &Plan,
    schedule: &Schedule,
    tb: &dyn Testbed,
    seed: u64,
) -> Result<(), ResultsError> {
    let now = utc(now_secs());
    let previous = dir.root().join(crate::results::provenance::FILE).exists().then(|| Provenance::read(dir));
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
    let (bitstreams, traces) = Provenance::plan_facts(plan);
    Provenance {
        study: plan.study.clone(),
        plan_hash: plan.hash.clone(),
        plan_file: Some(plan.path.clone()),
        tool_version: TOOL_VERSION.into(),
        git_commit: GIT_COMMIT.into(),
        seed,
        testbed: TestbedFacts { name: tb.name(), facts: tb.facts() },
        tsc_hz: tb.tsc_hz(),
        bitstreams,
        traces,
        groups: groups(plan, schedule),
        levels: crate::results::index::StudyLevel::of(plan),
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
pub fn write_end(dir: &ResultsDir, tb: &dyn Testbed) -> Result<(), ResultsError> {
    let mut p = Provenance::read(dir)?;
    p.ended = Some(utc(now_secs()));
    if tb.tsc_hz().is_finite() {
        p.tsc_hz = tb.tsc_hz();
    }
    p.testbed = TestbedFacts { name: tb.name(), facts: tb.facts() };
    p.write(dir)
}

//! `provenance.json`: what produced a results folder, enough to reproduce or audit it.

use serde_json::{Value, json};

use crate::plan::{Plan, TraceSource};
use crate::results::{ResultsDir, ResultsError, now_secs, utc, write_file};
use crate::schedule::Schedule;
use crate::testbed::Testbed;

/// Git commit of this build (`unknown` outside a checkout; `-dirty` with local changes).
pub const GIT_COMMIT: &str = env!("LATENCY_GIT_COMMIT");

/// Write the provenance at the start of a study (or of its resumption).
pub fn write_start(
    dir: &ResultsDir,
    plan: &Plan,
    schedule: &Schedule,
    tb: &dyn Testbed,
    seed: u64,
) -> Result<(), ResultsError> {
    let path = dir.root().join("provenance.json");
    let previous: Option<Value> = std::fs::read(&path).ok().and_then(|b| serde_json::from_slice(&b).ok());
    let now = utc(now_secs());
    let mut bitstreams = serde_json::Map::new();
    for b in plan.programs.iter().flat_map(|p| [&p.bitstream, &p.null]) {
        bitstreams.insert(
            b.name.clone(),
            json!({ "sha256": b.sha256, "file": b.file, "present": b.present, "manifest": b.manifest,
                    "clock_mhz": b.clock_mhz, "vendor_bound_cycles": b.vendor_bound_cycles, "null": b.null }),
        );
    }
    let traces: serde_json::Map<String, Value> = plan
        .traces
        .iter()
        .map(|t| {
            let v = match &t.source {
                TraceSource::Pcap { path, sha256 } => json!({ "pcap": path, "sha256": sha256 }),
                TraceSource::Generate { template, count, probe_id } => {
                    json!({ "generate": { "template": template, "count": count, "probe_id": probe_id } })
                }
            };
            (t.name.clone(), v)
        })
        .collect();
    let mut resumed: Vec<Value> = previous.as_ref().and_then(|p| p["resumed"].as_array().cloned()).unwrap_or_default();
    if previous.is_some() {
        resumed.push(json!(now));
    }
    let v = json!({
        "study": plan.study,
        "plan_hash": plan.hash,
        "plan_file": plan.path,
        "tool_version": env!("CARGO_PKG_VERSION"),
        "git_commit": GIT_COMMIT,
        "seed": seed,
        "testbed": { "name": tb.name(), "facts": tb.facts() },
        "tsc_hz": tb.tsc_hz(),
        "bitstreams": bitstreams,
        "traces": traces,
        "groups": crate::results::index::groups(plan, schedule),
        "analysis": plan.analysis,
        "report": plan.report,
        "regression": plan.regression,
        "sessions": schedule.sessions.len(),
        "runs": schedule.sessions.iter().map(|s| s.runs.len()).sum::<usize>(),
        "started": previous.as_ref().map_or(json!(now), |p| p["started"].clone()),
        "resumed": resumed,
        "ended": null,
    });
    write_file(&path, serde_json::to_string_pretty(&v).unwrap_or_default().as_bytes(), true)
}

/// Record the end time, and what the testbed learnt during the study (a real testbed knows its
/// TSC rate and host facts only once the agent has started).
pub fn write_end(dir: &ResultsDir, tb: &dyn Testbed) -> Result<(), ResultsError> {
    let path = dir.root().join("provenance.json");
    let bytes = std::fs::read(&path).map_err(crate::results::io_err(&path))?;
    let mut v: Value = serde_json::from_slice(&bytes)
        .map_err(|e| ResultsError::Format { path: path.clone(), message: e.to_string() })?;
    v["ended"] = json!(utc(now_secs()));
    if tb.tsc_hz().is_finite() {
        v["tsc_hz"] = json!(tb.tsc_hz());
    }
    v["testbed"] = json!({ "name": tb.name(), "facts": tb.facts() });
    write_file(&path, serde_json::to_string_pretty(&v).unwrap_or_default().as_bytes(), true)
}

//! The study's groups of runs (program or null calibration, trace, bitstream, vendor bound), as
//! provenance records them.

use crate::Schedule;
use latency_plan::Plan;
use latency_results::SessionKind;
use latency_results::index::BoundModel;
use latency_results::index::Group;

/// The groups of a scheduled plan.
pub fn groups(plan: &Plan, schedule: &Schedule) -> Vec<Group> {
    let mut out: Vec<Group> = Vec::new();
    for s in &schedule.sessions {
        if out.iter().any(|g| g.program == s.program) {
            continue;
        }
        let b = plan.programs.iter().flat_map(|p| p.images()).find(|b| b.name == s.bitstream);
        let null_trace = plan
            .programs
            .iter()
            .find(|p| s.kind == SessionKind::Program && p.name == s.program && p.null_trace != p.trace)
            .map(|p| plan.traces[p.null_trace].name.clone());
        let bound_model = b.and_then(|b| {
            Some(BoundModel {
                base_cycles: b.vendor_bound_cycles?,
                insert_cycles: b.header_insert_cycles?,
                bus_bits: b.bus_bits,
                min_frame_bytes: plan.traces.iter().find(|t| t.name == s.trace).map_or(60, smallest_frame),
            })
        });
        out.push(Group {
            program: s.program.clone(),
            kind: s.kind,
            trace: s.trace.clone(),
            null_trace,
            bitstream: s.bitstream.clone(),
            clock_mhz: b.map_or(250.0, |b| b.clock_mhz),
            vendor_bound_cycles: match bound_model {
                Some(m) => Some(m.cycles(m.min_frame_bytes)),
                None => b.and_then(|b| b.vendor_bound_cycles),
            },
            bound_model,
            probes: s.probes,
        });
    }
    out
}

/// The smallest frame of a trace, bytes: a generated trace's frame length, a pcap's shortest
/// frame (60 when it cannot be read: the Ethernet minimum the vendor's model floors at).
fn smallest_frame(t: &latency_plan::Trace) -> u32 {
    match &t.source {
        latency_plan::TraceSource::Pcap { path, .. } => {
            latency_plan::trace::inspect(path, latency_plan::ProbeFormat::Latencylab)
                .ok()
                .and_then(|i| i.frame_len_min)
                .unwrap_or(60)
        }
        source => source.generated().map_or(60, |g| g.frame_len),
    }
}

//! The round-trip table (`sender: agent`): each program's round trips as the originator timed
//! them, its null path's, and the one-way estimate.

use serde::Serialize;

use super::format::{ns, quantile};
use latency_results::summary::Summary;

/// One program's row.
#[derive(Serialize)]
pub struct RoundTripRow {
    program: String,
    rtt_p50: String,
    rtt_p99: String,
    null_rtt: String,
    crossings: u32,
    one_way_p50: String,
    one_way_p99: String,
    one_way_ci: String,
}

/// The rows, one per program timed by the originator.
pub fn rows(s: &Summary) -> Vec<RoundTripRow> {
    s.programs
        .iter()
        .filter_map(|(name, p)| {
            let r = p.round_trip.as_ref()?;
            Some(RoundTripRow {
                program: name.clone(),
                rtt_p50: quantile(&r.rtt_ns, 50.0),
                rtt_p99: quantile(&r.rtt_ns, 99.0),
                null_rtt: ns(r.null_rtt_ns),
                crossings: r.crossings,
                one_way_p50: quantile(&r.one_way_ns, 50.0),
                one_way_p99: quantile(&r.one_way_ns, 99.0),
                one_way_ci: format!("[{}, {}]", ns(r.one_way_median_ci95_ns[0]), ns(r.one_way_median_ci95_ns[1])),
            })
        })
        .collect()
}

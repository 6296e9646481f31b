//! The port-pair table (`analysis.port_pairs`): each program's differential between two capture
//! ports (a hop of a multi-hop path, or the whole path), analysed like the headline.

use serde::Serialize;

use super::format::{ns, quantile};
use latency_results::summary::Summary;

/// One program's figures for one pair.
#[derive(Serialize)]
pub struct PortPairRow {
    program: String,
    pair: String,
    ports: String,
    median: String,
    p99: String,
    median_ci: String,
    null_offset: String,
    probes: u64,
}

/// The rows: per program, its pairs in name order.
pub fn rows(s: &Summary) -> Vec<PortPairRow> {
    let pairs = s.provenance.as_ref().map(|p| p.analysis.port_pairs.clone()).unwrap_or_default();
    s.programs
        .iter()
        .flat_map(|(name, p)| p.port_pairs.iter().map(move |(pair, h)| (name, pair, h)))
        .map(|(name, pair, h)| PortPairRow {
            program: name.clone(),
            pair: pair.clone(),
            ports: pairs.get(pair).map_or_else(|| "—".into(), |pp| format!("{} → {}", pp.from, pp.to)),
            median: quantile(&h.latency_ns, 50.0),
            p99: quantile(&h.latency_ns, 99.0),
            median_ci: format!("[{}, {}]", ns(h.median_ci95_ns[0]), ns(h.median_ci95_ns[1])),
            null_offset: ns(h.null_offset_ns),
            probes: h.probes,
        })
        .collect()
}

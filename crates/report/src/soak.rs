//! The soak table: each program's differentials as its runs' HDR histograms give them.

use serde::Serialize;

use super::format::{ns, optional, quantile};
use latency_results::summary::Summary;

/// One program's row.
#[derive(Serialize)]
pub struct SoakRow {
    program: String,
    runs: u64,
    pairs: u64,
    raw_p50: String,
    raw_p99: String,
    null_median: String,
    p50: String,
    p99: String,
    /// The range of the interval medians over every run: drift during the soak.
    interval_medians: String,
    intervals: usize,
    resolution: String,
}

/// The rows, one per program with histogram logs.
pub fn rows(s: &Summary) -> Vec<SoakRow> {
    s.programs
        .iter()
        .filter_map(|(name, p)| {
            let k = p.soak.as_ref()?;
            let medians: Vec<f64> = k.intervals.iter().filter_map(|i| i.raw_median_ns).collect();
            let lo = medians.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = medians.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            Some(SoakRow {
                program: name.clone(),
                runs: k.runs,
                pairs: k.pairs,
                raw_p50: quantile(&k.latency_raw_ns, 50.0),
                raw_p99: quantile(&k.latency_raw_ns, 99.0),
                null_median: optional(k.null_median_ns),
                p50: quantile(&k.latency_ns, 50.0),
                p99: quantile(&k.latency_ns, 99.0),
                interval_medians: if medians.is_empty() { "—".into() } else { format!("{} – {}", ns(lo), ns(hi)) },
                intervals: k.intervals.len(),
                resolution: format!("{} significant digits (±{} %)", k.significant_digits, k.resolution * 100.0),
            })
        })
        .collect()
}

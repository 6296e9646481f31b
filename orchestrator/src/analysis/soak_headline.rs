//! The headline of a study that kept histograms only (`soak: {records: false}`): each program's
//! figures come from its soak summary ([`super::soak`]) instead of per-probe estimates.
//!
//! The quantiles are those of every pair's differential over the program's runs, less the null
//! calibration's median; there is no per-probe noise correction (no probe is seen twice), no
//! vendor-bound check by probe, no figure of the per-probe distribution. The 95 % intervals of the
//! median and p99 are the bring-up part only, from the spread of the session medians (a bring-up
//! moves the whole distribution alike), never narrower than the histograms' resolution: with one
//! session there is no bring-up spread to measure, and the interval is the resolution alone.

use super::soak::SoakSummary;
use super::summary::{Evidence, Mode, ProgramSummary, SessionSummary};
use super::uncertainty::{interval, session_variance};
use crate::results::index::Group;

/// Program `g`'s headline from its soak summary `k`; none without a null calibration median.
pub fn headline(g: &Group, k: SoakSummary) -> Option<ProgramSummary> {
    let null = k.null_median_ns?;
    let runs = |session: u32| {
        let mut r: Vec<u32> = k.intervals.iter().filter(|i| i.session == session).map(|i| i.run).collect();
        r.dedup();
        r.len() as u32
    };
    let sessions: Vec<SessionSummary> = k
        .sessions
        .iter()
        .map(|s| SessionSummary {
            session: s.session,
            raw_median_ns: s.raw_median_ns,
            median_ns: s.raw_median_ns - null,
            matched: s.pairs,
            excluded: 0,
            runs: runs(s.session),
            hw_median_ns: None,
        })
        .collect();
    let medians: Vec<f64> = sessions.iter().map(|s| s.median_ns).collect();
    let spread = session_variance(&medians, &[]);
    let lo = medians.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = medians.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let ci = |q: &str| {
        let v = k.latency_ns.get(q).copied().unwrap_or(f64::NAN);
        interval(v, 0.0, spread, 2.0 * k.resolution * v.abs())
    };
    let (median_ci95_ns, p99_ci95_ns) = (ci("p50"), ci("p99"));
    Some(ProgramSummary {
        level: None,
        levels: Vec::new(),
        trace: g.trace.clone(),
        null_trace: g.null_trace.clone(),
        bitstream: g.bitstream.clone(),
        latency_ns: k.latency_ns.clone(),
        latency_raw_ns: k.latency_ns.clone(),
        modes: vec![Mode {
            sessions: sessions.iter().map(|s| s.session).collect(),
            latency_ns: k.latency_ns.clone(),
            margins: None,
            latency_raw_ns: k.latency_ns.clone(),
            gap_below: None,
            median_ci95_ns: Some(median_ci95_ns),
            p99_ci95_ns: Some(p99_ci95_ns),
            frequency: None,
            frequency_ci95: None,
        }],
        sessions,
        null_offset_ns: null,
        reproducibility_ns: if medians.is_empty() { 0.0 } else { hi - lo },
        vendor_bound: None,
        median_ci95_ns,
        p99_ci95_ns,
        evidence: Evidence {
            median_ci95_sessions_ns: Some(median_ci95_ns),
            p99_ci95_sessions_ns: Some(p99_ci95_ns),
            ..Evidence::default()
        },
        hw_check: None,
        probes: k.pairs,
        excluded: 0,
        histogram: Default::default(),
        soak: Some(k),
        round_trip: None,
        port_pairs: Default::default(),
    })
}

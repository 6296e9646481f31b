//! The summary of a study that kept histograms only (`soak: {records: false}`): each program's
//! headline comes from its soak summary ([`super::soak`]) instead of per-probe estimates, and the
//! health from the journal.
//!
//! The quantiles are those of every pair's differential over the program's runs, less the null
//! calibration's median; there is no per-probe noise correction (no probe is seen twice), no
//! vendor-bound check by probe, no figure of the per-probe distribution. The 95 % intervals of the
//! median and p99 are the bring-up part only, from the spread of the session medians (a bring-up
//! moves the whole distribution alike), never narrower than the histograms' resolution: with one
//! session there is no bring-up spread to measure, and the interval is the resolution alone.

use std::collections::BTreeMap;

use super::uncertainty::{interval, session_variance};
use latency_results::SessionKind;
use latency_results::event::Entry;
use latency_results::event::Event;
use latency_results::index::Group;
use latency_results::index::Index;
use latency_results::provenance::Provenance;
use latency_results::summary::SoakSummary;
use latency_results::summary::{Evidence, Mode, ProgramSummary, SessionSummary, Summary};
use latency_results::{ResultsDir, ResultsError};

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
    let spread = session_variance(&medians, Some(&[]));
    let lo = medians.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = medians.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let ci = |level: f64| {
        let v = k.latency_ns.at(level).unwrap_or(f64::NAN);
        interval(v, 0.0, spread, 2.0 * k.resolution * v.abs())
    };
    let (median_ci95_ns, p99_ci95_ns) = (ci(50.0), ci(99.0));
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
        stopping: None,
        port_pairs: Default::default(),
    })
}

/// The summary of a study that kept histograms only (`soak: {records: false}`): health from the
/// journal, each program's headline from its histograms ([`headline`]).
pub(super) fn summary(
    dir: &ResultsDir,
    index: &Index,
    entries: &[Entry],
    prov: &Provenance,
    mut problems: Vec<String>,
) -> Result<Summary, ResultsError> {
    let mut soaks = crate::soak::summarize(dir, index, entries, &crate::stats::summary_levels(index), &mut problems);
    let programs: Vec<_> = index.groups.iter().filter(|g| g.kind == SessionKind::Program).collect();
    let mut headlines = BTreeMap::new();
    for g in programs {
        match soaks.remove(&g.program).and_then(|k| headline(g, k)) {
            Some(p) => {
                headlines.insert(g.program.clone(), p);
            }
            None => problems.push(format!(
                "program `{}`: no histograms of its runs and of its null calibration's; not analysed",
                g.program
            )),
        }
    }
    // No per-probe analysis: an index without groups summarises the journal alone.
    let bare = Index { groups: Vec::new(), ..index.clone() };
    let mut summary = crate::summarize::summarize(
        &bare,
        &[],
        entries,
        Some(prov),
        crate::summarize::Unusable { failed_runs: 0, problems },
    );
    let finished = entries.iter().filter_map(|e| match &e.event {
        Event::RunFinished { counts, pacing, .. } => Some((counts, pacing)),
        _ => None,
    });
    let mut pacing = Vec::new();
    for (c, p) in finished {
        summary.health.runs += 1;
        summary.health.matched += c.matched;
        summary.health.pipeline_only += c.pipeline_only;
        summary.health.bypass_only += c.bypass_only;
        summary.health.duplicates += c.duplicates;
        // Without records, the sender's report is the only measure of the pacing.
        pacing.extend(p.receiver_pps.or(p.sender_pps));
    }
    pacing.sort_unstable_by(f64::total_cmp);
    if let (Some(lo), Some(hi)) = (pacing.first(), pacing.last()) {
        summary.health.pacing_pps = [*lo, super::stats::quantile_sorted(&pacing, 0.5), *hi];
    }
    summary.programs = headlines;
    summary.inputs_sha256 = latency_results::summary::inputs_sha256(dir)?;
    Ok(summary)
}

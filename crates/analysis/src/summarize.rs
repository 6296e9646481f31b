//! Steps 2–9 over a study's paired runs: the per-program summaries (per level, for a study with
//! factors), round trips, and the run health, into the summary.

use latency_results::event::{Entry, Event};
use latency_results::index::Index;
use latency_results::provenance::Provenance;
use latency_results::summary::{self, Health, Summary};

use crate::levels;
use crate::runs::RunPairs;
use crate::stats::{self, quantile_sorted, summary_levels};
use crate::study::analyse_runs;

/// What was found unusable before the statistics.
#[derive(Clone, Debug, Default)]
pub struct Unusable {
    /// Runs recorded complete whose data is no measurement (no record, no matched probe).
    pub failed_runs: u64,
    /// Every run, file or program that could not be used, and why.
    pub problems: Vec<String>,
}

/// Steps 2–9 over paired runs. `journal` and `prov` supply retry counts and provenance.
pub fn summarize(
    index: &Index,
    runs: &[RunPairs],
    journal: &[Entry],
    prov: Option<&Provenance>,
    unusable: Unusable,
) -> Summary {
    let Unusable { failed_runs, mut problems } = unusable;
    let a = &index.analysis;
    let report_levels = a.quantile_levels_or_default();
    let levels = &summary_levels(index);

    let all: Vec<&RunPairs> = runs.iter().collect();
    let (mut programs, nulls) = if index.levels.is_empty() {
        analyse_runs(index, &all, levels, None, &mut problems)
    } else {
        levels::analyse(index, &all, levels, &mut problems)
    };
    if let latency_plan::Sender::Agent { crossings } = index.sender {
        for p in programs.values_mut() {
            for l in &mut p.levels {
                l.summary.round_trip = Some(summary::RoundTrip::of(&l.summary, crossings));
            }
            p.round_trip = Some(summary::RoundTrip::of(p, crossings));
        }
    }

    // The last word of each program's adaptive sessions (a resume may have said it again).
    for e in journal {
        if let Event::SessionsEnded { program, sessions, rule_met, detail } = &e.event
            && let Some(p) = programs.get_mut(program)
        {
            p.stopping = Some(summary::Stopping { sessions: *sessions, rule_met: *rule_met, detail: detail.clone() });
        }
    }
    let count = |f: fn(&Event) -> bool| journal.iter().filter(|e| f(&e.event)).count() as u64;
    let mut pacing: Vec<f64> = runs.iter().filter_map(|r| r.pacing_pps).collect();
    pacing.sort_unstable_by(f64::total_cmp);
    let health = Health {
        runs: runs.len() as u64,
        matched: runs.iter().map(|r| r.counts.matched).sum(),
        pipeline_only: runs.iter().map(|r| r.counts.pipeline_only).sum(),
        bypass_only: runs.iter().map(|r| r.counts.bypass_only).sum(),
        duplicates: runs.iter().map(|r| r.counts.duplicates).sum(),
        excluded: runs.iter().map(|r| r.excluded).sum(),
        retries: count(|e| matches!(e, Event::RunRetried { .. } | Event::StepRetried { .. })),
        failed_runs: count(|e| matches!(e, Event::RunFailed { .. })) + failed_runs,
        problems: Vec::new(),
        pacing_pps: if pacing.is_empty() {
            [f64::NAN; 3]
        } else {
            [pacing[0], quantile_sorted(&pacing, 0.5), pacing[pacing.len() - 1]]
        },
        pacing_inferred_runs: runs.iter().filter(|r| r.pacing_inferred).count() as u64,
    };
    Summary {
        study: index.study.clone(),
        title: if index.report.title.is_empty() {
            latency_plan::defaults::report_title(&index.study)
        } else {
            index.report.title.clone()
        },
        tool_version: env!("CARGO_PKG_VERSION").into(),
        tsc_hz: index.tsc_hz,
        quantile_levels: report_levels,
        quantile_definition: stats::QUANTILE_DEFINITION.into(),
        calibration: index.analysis.calibration,
        programs,
        nulls,
        health: Health { problems, ..health },
        provenance: prov.cloned(),
        inputs_sha256: String::new(),
    }
}

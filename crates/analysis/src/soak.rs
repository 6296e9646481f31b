//! Soak summaries: from each run's histogram log (`run=<r>.hlog`, [`latency_proto::soak`]), the
//! distribution of a program's differentials over all its runs, calibrated by its null
//! calibration's median, per session, and per interval of each run (drift over a long run). Every
//! quantile is an HDR-histogram quantile: within [`RESOLUTION`] of the exact order statistic.
//!
//! These are quantiles of the per-run differentials of every pair, not of per-probe medians over
//! runs as the headline's are: they keep all of each run's noise, and need no per-probe record.

use std::collections::BTreeMap;

use latency_proto::soak::{self, Differentials, Interval, RESOLUTION, SIGNIFICANT_DIGITS};

use latency_plan::digest;
use latency_results::HISTOGRAM_EXTENSION;
use latency_results::ResultsDir;
use latency_results::SessionKind;
use latency_results::event::Entry;
use latency_results::index::Index;
use latency_results::journal;
use latency_results::summary::{Quantiles, SoakInterval, SoakSession, SoakSummary};

/// Largest histogram log read (an interval of two histograms is a few kB: a day at 1 s is ~0.5 GB).
const MAX_LOG_BYTES: u64 = 1 << 30;

/// The logs of every complete run that has one, by group index: (session, run, intervals).
type Logs = BTreeMap<usize, Vec<(u32, u32, Vec<Interval>)>>;

fn read_logs(dir: &ResultsDir, index: &Index, entries: &[Entry], problems: &mut Vec<String>) -> Logs {
    let mut logs = Logs::new();
    for ((program, session, run), c) in journal::completed(entries) {
        let (Some(sha256), Some(group)) = (c.histogram_sha256, index.groups.iter().position(|g| g.program == program))
        else {
            continue;
        };
        let rel = std::path::Path::new(&c.path).with_extension(HISTOGRAM_EXTENSION);
        let read = latency_results::read_capped(&dir.root().join(&rel), MAX_LOG_BYTES, "histogram log")
            .map_err(|e| e.to_string())
            .and_then(|bytes| {
                if digest::sha256_hex(&bytes) != sha256 {
                    return Err("checksum differs from the journal's (the file was changed after the run)".into());
                }
                soak::read_log(&bytes).map_err(|e| e.to_string())
            });
        match read {
            Ok(intervals) => logs.entry(group).or_default().push((session, run, intervals)),
            Err(e) => problems.push(format!("{}: {e}; not analysed", rel.display())),
        }
    }
    logs
}

fn merged<'a>(intervals: impl IntoIterator<Item = &'a Interval>) -> Differentials {
    let mut d = Differentials::default();
    intervals.into_iter().for_each(|i| d.add(&i.differentials));
    d
}

/// The soak summary of every program with histogram logs, by program name (`levels`: the
/// quantile levels, percent).
pub fn summarize(
    dir: &ResultsDir,
    index: &Index,
    entries: &[Entry],
    levels: &[f64],
    problems: &mut Vec<String>,
) -> BTreeMap<String, SoakSummary> {
    let logs = read_logs(dir, index, entries, problems);
    let mut out = BTreeMap::new();
    for (&g, runs) in &logs {
        let group = &index.groups[g];
        if group.kind != SessionKind::Program {
            continue;
        }
        let null = index.groups.iter().position(|n| n.kind == SessionKind::Null && n.trace == group.calibrated_by());
        // The offset subtracted: the null's median, or nothing uncalibrated.
        let null_median = match index.analysis.calibration {
            latency_plan::Calibration::None => Some(0.0),
            latency_plan::Calibration::NullImage => {
                null.and_then(|n| logs.get(&n)).and_then(|r| merged(r.iter().flat_map(|(_, _, i)| i)).quantile(0.5))
            }
        };
        let all = merged(runs.iter().flat_map(|(_, _, i)| i));
        let raw: Quantiles = levels.iter().filter_map(|&l| Some((l, all.quantile(l / 100.0)?))).collect();
        let latency_ns = match null_median {
            Some(m) => raw.map(|v| v - m),
            None => Quantiles::new(),
        };
        let mut sessions: BTreeMap<u32, Differentials> = BTreeMap::new();
        for (session, _, intervals) in runs {
            sessions.entry(*session).or_default().add(&merged(intervals));
        }
        let sessions = sessions
            .into_iter()
            .filter_map(|(session, d)| {
                let raw_median_ns = d.quantile(0.5)?;
                Some(SoakSession {
                    session,
                    pairs: d.len(),
                    raw_median_ns,
                    median_ns: null_median.map(|m| raw_median_ns - m),
                })
            })
            .collect();
        let intervals = runs
            .iter()
            .flat_map(|(session, run, intervals)| {
                intervals.iter().map(|i| SoakInterval {
                    session: *session,
                    run: *run,
                    start_s: i.start_s,
                    duration_s: i.duration_s,
                    pairs: i.differentials.len(),
                    raw_median_ns: i.differentials.quantile(0.5),
                    raw_p99_ns: i.differentials.quantile(0.99),
                })
            })
            .collect();
        out.insert(
            group.program.clone(),
            SoakSummary {
                significant_digits: SIGNIFICANT_DIGITS,
                resolution: RESOLUTION,
                runs: runs.len() as u64,
                pairs: all.len(),
                latency_raw_ns: raw,
                null_median_ns: null_median,
                latency_ns,
                sessions,
                intervals,
            },
        );
    }
    out
}

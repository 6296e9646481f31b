//! The statistical pipeline over a results folder → `summary.json`.
//!
//! 1. pair the two copies of each probe within each run (`D_r(i) = t_P − t_B`, ns from the TSC
//!    rate in provenance); 2. per session, per-probe estimate = median over runs; 3. null
//!    calibration: δ̂ = median of the null group's per-probe estimates for the same trace (pooled;
//!    per session reported), `L̂(i) = estimate − δ̂`; 4. the first probe after each idle gap (the
//!    first arrival of every run) is excluded, counted and reported; 5. quantiles over all probes
//!    and sessions, raw and calibrated session medians; 6. reset modes: session medians split into
//!    clusters separated by at least `modes.min_separation_ns`, quantiles per mode — a program's
//!    headline quantiles are those of its most populated mode, never a mix of modes; 7. vendor
//!    bound margins; 8. hardware-clock check on reflect data; 9. bootstrap CIs.

pub mod pairs;
pub mod stats;
pub mod summary;

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use crate::results::index::{Group, Index};
use crate::results::{ResultsDir, ResultsError, io_err, journal};
use crate::schedule::SessionKind;
use stats::{bootstrap_ci, gap_clusters, median, quantile_sorted};
use summary::*;

/// Why a folder could not be analysed.
#[derive(Debug, thiserror::Error)]
pub enum AnalysisError {
    /// Reading the folder failed.
    #[error(transparent)]
    Results(#[from] ResultsError),
    /// The folder's content is not usable.
    #[error("{path}: {message}")]
    Invalid {
        /// The offending file or folder.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// Levels of the hardware-clock check (percent).
const HW_LEVELS: [f64; 6] = [25.0, 50.0, 75.0, 90.0, 95.0, 99.0];

/// One run, paired.
pub struct RunPairs {
    group: usize,
    session: u32,
    /// (probe id, D ns), id order, first probe after the gap already removed when excluded.
    diffs: Vec<(u64, f64)>,
    /// (D ns, R ns) for reflect data.
    hw: Vec<(f64, f64)>,
    counts: pairs::Counts,
    excluded: u64,
    pacing_pps: Option<f64>,
}

/// The run files of the folder: (group index, session, run, path).
fn run_files(dir: &ResultsDir, groups: &[Group]) -> Result<Vec<(usize, u32, u32, PathBuf)>, AnalysisError> {
    let mut out = Vec::new();
    for (gi, g) in groups.iter().enumerate() {
        let gdir = dir.root().join(format!("data/program={}", g.program));
        if !gdir.is_dir() {
            continue;
        }
        for s in std::fs::read_dir(&gdir).map_err(io_err(&gdir))? {
            let s = s.map_err(io_err(&gdir))?.path();
            let Some(session) = hive_value(&s, "session") else { continue };
            for r in std::fs::read_dir(&s).map_err(io_err(&s))? {
                let r = r.map_err(io_err(&s))?.path();
                if let Some(run) =
                    hive_value(&r.with_extension(""), "run").filter(|_| r.extension().is_some_and(|e| e == "parquet"))
                {
                    out.push((gi, session, run, r));
                }
            }
        }
    }
    out.sort();
    Ok(out)
}

fn hive_value(p: &Path, key: &str) -> Option<u32> {
    p.file_name()?.to_str()?.strip_prefix(key)?.strip_prefix('=')?.parse().ok()
}

/// Read the columns the analysis needs from a run file.
fn read_run(path: &Path) -> Result<Vec<arrow_array::RecordBatch>, AnalysisError> {
    let bad = |m: String| AnalysisError::Invalid { path: path.to_path_buf(), message: m };
    let f = File::open(path).map_err(io_err(path))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(f).map_err(|e| bad(e.to_string()))?;
    let wanted = [
        latency_agent::schema::col::PROBE_ID,
        latency_agent::schema::col::PORT,
        latency_agent::schema::col::TSC,
        latency_agent::schema::col::HW_NS,
    ];
    let schema = builder.schema().clone();
    let indices: Vec<usize> = wanted.iter().filter_map(|c| schema.index_of(c).ok()).collect();
    if indices.len() < 3 {
        return Err(bad("not a run file in the record schema".into()));
    }
    let mask = ProjectionMask::roots(builder.parquet_schema(), indices);
    let reader = builder.with_projection(mask).with_batch_size(1 << 16).build().map_err(|e| bad(e.to_string()))?;
    reader.map(|b| b.map_err(|e| bad(e.to_string()))).collect()
}

fn pair_file(
    group: usize,
    session: u32,
    path: &Path,
    tsc_hz: f64,
    exclude_first: bool,
) -> Result<RunPairs, AnalysisError> {
    Ok(pair_batches(group, session, &read_run(path)?, tsc_hz, exclude_first))
}

/// Pair one run's records (group index into the study's groups, session number).
pub fn pair_batches(
    group: usize,
    session: u32,
    batches: &[arrow_array::RecordBatch],
    tsc_hz: f64,
    exclude_first: bool,
) -> RunPairs {
    let p = pairs::pair(batches);
    let ns = 1e9 / tsc_hz;
    let skip = if exclude_first { p.first_id } else { None };
    let mut diffs = Vec::with_capacity(p.diffs.len());
    let mut hw = Vec::with_capacity(p.hw_diffs.len());
    let mut excluded = 0;
    for (k, &(id, d)) in p.diffs.iter().enumerate() {
        if Some(id) == skip {
            excluded += 1;
            continue;
        }
        diffs.push((id, d as f64 * ns));
        if let Some(Some(r)) = p.hw_diffs.get(k) {
            hw.push((d as f64 * ns, *r as f64));
        }
    }
    let pacing_pps = p.bypass_pps(tsc_hz);
    RunPairs { group, session, diffs, hw, counts: p.counts, excluded, pacing_pps }
}

/// Pair every run file, on all cores.
fn pair_all(
    files: &[(usize, u32, u32, PathBuf)],
    tsc_hz: f64,
    exclude_first: bool,
) -> Result<Vec<RunPairs>, AnalysisError> {
    let next = AtomicUsize::new(0);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(files.len().max(1));
    let mut results: Vec<Vec<(usize, Result<RunPairs, AnalysisError>)>> = Vec::new();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some((g, s, _, path)) = files.get(i) else { break };
                        mine.push((i, pair_file(*g, *s, path, tsc_hz, exclude_first)));
                    }
                    mine
                })
            })
            .collect();
        results = handles.into_iter().filter_map(|h| h.join().ok()).collect();
    });
    let mut all: Vec<(usize, Result<RunPairs, AnalysisError>)> = results.into_iter().flatten().collect();
    if all.len() != files.len() {
        return Err(AnalysisError::Invalid { path: PathBuf::from("data"), message: "a worker thread failed".into() });
    }
    all.sort_by_key(|(i, _)| *i);
    all.into_iter().map(|(_, r)| r).collect()
}

/// Per-probe estimates of one session: median over runs of each probe's differentials.
fn session_estimates(runs: &[&RunPairs]) -> Vec<(u64, f64)> {
    let mut by_id: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for r in runs {
        for &(id, d) in &r.diffs {
            by_id.entry(id).or_default().push(d);
        }
    }
    by_id.into_iter().map(|(id, mut v)| (id, median(&mut v))).collect()
}

fn quantiles(sorted: &[f64], levels: &[f64]) -> Quantiles {
    levels
        .iter()
        .map(|&l| (level_key(l), if sorted.is_empty() { f64::NAN } else { quantile_sorted(sorted, l / 100.0) }))
        .collect()
}

fn histogram(sorted: &[f64]) -> Histogram {
    let (Some(&lo), Some(&hi)) = (sorted.first(), sorted.last()) else { return Histogram::default() };
    let start = lo.floor();
    let mut bin = 1.0;
    while (hi - start) / bin > 4000.0 {
        bin *= 2.0;
    }
    let mut counts = vec![0u64; ((hi - start) / bin) as usize + 1];
    for &x in sorted {
        counts[((x - start) / bin) as usize] += 1;
    }
    Histogram { start_ns: start, bin_ns: bin, counts }
}

fn read_index(dir: &ResultsDir) -> Result<(Index, serde_json::Value), AnalysisError> {
    let path = dir.root().join("provenance.json");
    let bytes = std::fs::read(&path).map_err(io_err(&path))?;
    let prov: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| AnalysisError::Invalid { path: path.clone(), message: e.to_string() })?;
    let index: Index = serde_json::from_value(prov.clone())
        .map_err(|e| AnalysisError::Invalid { path: path.clone(), message: format!("not a study provenance: {e}") })?;
    Ok((index, prov))
}

/// Analyse a results folder.
pub fn analyze(dir: &ResultsDir) -> Result<Summary, AnalysisError> {
    let (index, prov) = read_index(dir)?;
    let files = run_files(dir, &index.groups)?;
    let runs = pair_all(&files, index.tsc_hz, index.analysis.exclude_first_after_gap)?;
    let journal = journal::read(&dir.journal_path()).unwrap_or_default();
    summarize(&index, &runs, &journal, &prov)
        .map_err(|message| AnalysisError::Invalid { path: dir.root().join("data"), message })
}

/// Steps 2–9 over paired runs. `journal` and `prov` supply retry counts and provenance.
pub fn summarize(
    index: &Index,
    runs: &[RunPairs],
    journal: &[serde_json::Value],
    prov: &serde_json::Value,
) -> Result<Summary, String> {
    let a = &index.analysis;
    let levels = &a.quantile_levels_or_default();

    // Per group and session: per-probe estimates.
    let mut estimates: BTreeMap<(usize, u32), Vec<(u64, f64)>> = BTreeMap::new();
    let mut by_session: BTreeMap<(usize, u32), Vec<&RunPairs>> = BTreeMap::new();
    for r in runs {
        by_session.entry((r.group, r.session)).or_default().push(r);
    }
    for (k, rs) in &by_session {
        estimates.insert(*k, session_estimates(rs));
    }

    // Null calibration per trace.
    let mut nulls: BTreeMap<String, NullSummary> = BTreeMap::new();
    for (gi, g) in index.groups.iter().enumerate().filter(|(_, g)| g.kind == SessionKind::Null) {
        let mut pooled = Vec::new();
        let mut sessions = Vec::new();
        for ((_, s), est) in estimates.range((gi, 0)..=(gi, u32::MAX)) {
            let mut v: Vec<f64> = est.iter().map(|e| e.1).collect();
            pooled.extend_from_slice(&v);
            sessions.push((*s, median(&mut v)));
        }
        if pooled.is_empty() {
            continue;
        }
        let lo = sessions.iter().map(|s| s.1).fold(f64::INFINITY, f64::min);
        let hi = sessions.iter().map(|s| s.1).fold(f64::NEG_INFINITY, f64::max);
        nulls.insert(
            g.trace.clone(),
            NullSummary { group: g.program.clone(), offset_ns: median(&mut pooled), sessions, spread_ns: hi - lo },
        );
    }

    let mut rng = ChaCha8Rng::seed_from_u64(index.seed);
    let mut programs = BTreeMap::new();
    for (gi, g) in index.groups.iter().enumerate().filter(|(_, g)| g.kind == SessionKind::Program) {
        let Some(null) = nulls.get(&g.trace) else {
            return Err(format!("program `{}`: no null calibration data for trace `{}`", g.program, g.trace));
        };
        let delta = null.offset_ns;
        let mut sessions = Vec::new();
        let mut per_session: Vec<(u32, Vec<f64>)> = Vec::new();
        for ((_, s), est) in estimates.range((gi, 0)..=(gi, u32::MAX)) {
            let mut raw: Vec<f64> = est.iter().map(|e| e.1).collect();
            let raw_median = median(&mut raw);
            let cal: Vec<f64> = raw.iter().map(|x| x - delta).collect();
            let rs = &by_session[&(gi, *s)];
            sessions.push(SessionSummary {
                session: *s,
                raw_median_ns: raw_median,
                median_ns: raw_median - delta,
                matched: rs.iter().map(|r| r.counts.matched).sum(),
                excluded: rs.iter().map(|r| r.excluded).sum(),
                runs: rs.len() as u32,
            });
            per_session.push((*s, cal));
        }
        if sessions.is_empty() {
            continue;
        }
        // Modes: clusters of session medians.
        let mut order: Vec<usize> = (0..sessions.len()).collect();
        order.sort_by(|&i, &j| sessions[i].median_ns.total_cmp(&sessions[j].median_ns));
        let sorted_medians: Vec<f64> = order.iter().map(|&i| sessions[i].median_ns).collect();
        let separation = if a.modes.enabled { a.modes.min_separation_ns } else { f64::INFINITY };
        let clusters = gap_clusters(&sorted_medians, separation);
        let mut modes = Vec::new();
        let mut mode_values: Vec<Vec<f64>> = Vec::new();
        let mut reproducibility: f64 = 0.0;
        for c in clusters {
            let members: Vec<usize> = order[c.clone()].to_vec();
            let mut values: Vec<f64> =
                members.iter().flat_map(|&i| per_session[i].1.iter().copied()).collect::<Vec<f64>>();
            values.sort_unstable_by(f64::total_cmp);
            let mut ss: Vec<u32> = members.iter().map(|&i| sessions[i].session).collect();
            ss.sort_unstable();
            reproducibility = reproducibility.max(sorted_medians[c.end - 1] - sorted_medians[c.start]);
            modes.push(Mode { sessions: ss, latency_ns: quantiles(&values, levels) });
            mode_values.push(values);
        }
        // Headline: the mode with most sessions (ties: the lower one, which comes first).
        let main = (0..modes.len()).max_by_key(|&m| (modes[m].sessions.len(), std::cmp::Reverse(m))).unwrap_or(0);
        let values = &mode_values[main];
        let mut all: Vec<f64> = per_session.iter().flat_map(|(_, v)| v.iter().copied()).collect();
        all.sort_unstable_by(f64::total_cmp);
        let latency_ns = quantiles(values, levels);
        let q = |p: f64| quantile_sorted(values, p);
        let vendor_bound = g.vendor_bound_cycles.map(|cycles| {
            let period = 1e3 / g.clock_mhz;
            VendorBound {
                clock_mhz: g.clock_mhz,
                cycles,
                ns: f64::from(cycles) * period,
                median_cycles: q(0.5) / period,
                median_margin_cycles: f64::from(cycles) - q(0.5) / period,
                p99_margin_cycles: f64::from(cycles) - q(0.99) / period,
                violations: all.iter().filter(|&&x| x > f64::from(cycles) * period).count() as u64,
            }
        });
        let median_ci95_ns = bootstrap_ci(values, 0.5, a.bootstrap_resamples, &mut rng);
        let p99_ci95_ns = bootstrap_ci(values, 0.99, a.bootstrap_resamples, &mut rng);
        let hw: Vec<(f64, f64)> = by_session
            .range((gi, 0)..=(gi, u32::MAX))
            .flat_map(|(_, rs)| rs.iter().flat_map(|r| r.hw.iter().copied()))
            .collect();
        let hw_check = (a.hw_clock_check || !hw.is_empty())
            .then(|| hw_clock_check(&hw, a.hw_clock_tolerance_ns, &mut rng))
            .flatten();
        programs.insert(
            g.program.clone(),
            ProgramSummary {
                trace: g.trace.clone(),
                bitstream: g.bitstream.clone(),
                latency_ns,
                modes,
                null_offset_ns: delta,
                reproducibility_ns: reproducibility,
                vendor_bound,
                median_ci95_ns,
                p99_ci95_ns,
                hw_check,
                probes: all.len() as u64,
                excluded: sessions.iter().map(|s| s.excluded).sum(),
                sessions,
                histogram: histogram(&all),
            },
        );
    }

    let count = |ev: &str| journal.iter().filter(|e| e["event"] == ev).count() as u64;
    let mut pacing: Vec<f64> = runs.iter().filter_map(|r| r.pacing_pps).collect();
    pacing.sort_unstable_by(f64::total_cmp);
    let health = Health {
        runs: runs.len() as u64,
        matched: runs.iter().map(|r| r.counts.matched).sum(),
        pipeline_only: runs.iter().map(|r| r.counts.pipeline_only).sum(),
        bypass_only: runs.iter().map(|r| r.counts.bypass_only).sum(),
        duplicates: runs.iter().map(|r| r.counts.duplicates).sum(),
        excluded: runs.iter().map(|r| r.excluded).sum(),
        retries: count("run_retried") + count("step_retried"),
        failed_runs: count("run_failed"),
        pacing_pps: if pacing.is_empty() {
            [f64::NAN; 3]
        } else {
            [pacing[0], quantile_sorted(&pacing, 0.5), pacing[pacing.len() - 1]]
        },
    };
    let keep = [
        "study",
        "plan_hash",
        "git_commit",
        "tool_version",
        "seed",
        "testbed",
        "tsc_hz",
        "bitstreams",
        "traces",
        "started",
        "ended",
        "import",
    ];
    let provenance = keep.iter().filter_map(|k| prov.get(*k).map(|v| (k.to_string(), v.clone()))).collect();
    Ok(Summary {
        study: index.study.clone(),
        title: if index.report.title.is_empty() {
            format!("Latency study {}", index.study)
        } else {
            index.report.title.clone()
        },
        tool_version: env!("CARGO_PKG_VERSION").into(),
        tsc_hz: index.tsc_hz,
        quantile_levels: levels.clone(),
        quantile_definition: stats::QUANTILE_DEFINITION.into(),
        programs,
        nulls,
        health,
        provenance,
    })
}

/// Step 8: re-pair residuals C = R − D with the differentials at random and compare quantiles
/// of the synthesised D + C with the measured R.
fn hw_clock_check(pairs: &[(f64, f64)], tolerance_ns: f64, rng: &mut ChaCha8Rng) -> Option<HwCheck> {
    if pairs.is_empty() {
        return None;
    }
    let mut residuals: Vec<f64> = pairs.iter().map(|(d, r)| r - d).collect();
    residuals.shuffle(rng);
    let mut synth: Vec<f64> = pairs.iter().zip(&residuals).map(|((d, _), c)| d + c).collect();
    let mut measured: Vec<f64> = pairs.iter().map(|p| p.1).collect();
    synth.sort_unstable_by(f64::total_cmp);
    measured.sort_unstable_by(f64::total_cmp);
    let levels: Vec<HwLevel> = HW_LEVELS
        .iter()
        .map(|&l| {
            let m = quantile_sorted(&measured, l / 100.0);
            let s = quantile_sorted(&synth, l / 100.0);
            HwLevel { level: l, measured_ns: m, synthesized_ns: s, diff_ns: s - m }
        })
        .collect();
    let max_diff_ns = levels.iter().map(|l| l.diff_ns.abs()).fold(0.0, f64::max);
    Some(HwCheck { levels, max_diff_ns, tolerance_ns, pass: max_diff_ns <= tolerance_ns, pairs: pairs.len() as u64 })
}

impl crate::plan::Analysis {
    /// The quantile levels, the default set when the list is empty.
    pub fn quantile_levels_or_default(&self) -> Vec<f64> {
        if self.quantiles.is_empty() { crate::plan::Analysis::default().quantiles } else { self.quantiles.clone() }
    }
}

/// Analyse and write `summary.json` (atomically, replacing an earlier one).
pub fn analyze_and_write(dir: &ResultsDir) -> Result<Summary, AnalysisError> {
    let s = analyze(dir)?;
    let text = serde_json::to_string_pretty(&s)
        .map_err(|e| AnalysisError::Invalid { path: dir.root().join("summary.json"), message: e.to_string() })?;
    crate::results::write_file(&dir.root().join("summary.json"), text.as_bytes(), true)?;
    Ok(s)
}

#[cfg(test)]
mod tests;

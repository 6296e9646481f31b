//! The analysis of a results folder: runs loaded, paired and reduced per program into the summary.

use std::collections::BTreeMap;
use std::path::PathBuf;

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use crate::stats::{grid_median, median, quantile_sorted};
use crate::{levels, load, program, soak, soak_headline, stats};
use latency_results::ResultsDir;
use latency_results::ResultsError;
use latency_results::SessionKind;
use latency_results::event::Entry;
use latency_results::event::Event;
use latency_results::index::Index;
use latency_results::journal;
use latency_results::provenance::Provenance;
use latency_results::summary;
use latency_results::summary::*;

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

/// Largest `summary.json` read back (a paper study's is about 1 MB).
pub const MAX_SUMMARY_BYTES: u64 = 256 << 20;

/// Levels stored in every summary whatever the plan's quantiles (percent).
pub const HEADLINE_LEVELS: [f64; 2] = [50.0, 99.0];

/// Levels of the hardware-clock check (percent).
const HW_LEVELS: [f64; 6] = [25.0, 50.0, 75.0, 90.0, 95.0, 99.0];
/// The hardware-clock levels judged against the tolerance (p25–p95, as the paper does); p99 rests
/// on a few hundred probes of a paper run and is reported only.
const HW_JUDGED_MAX_LEVEL: f64 = 95.0;

/// One run, paired.
pub struct RunPairs {
    pub(crate) group: usize,
    pub(crate) session: u32,
    /// The run's factor level (studies with factors).
    pub(crate) level: Option<String>,
    /// (probe id, D ns), id order, first probe after the gap already removed when excluded.
    pub(crate) diffs: Vec<(u64, f64)>,
    /// (D ns, R ns) for reflect data.
    pub(crate) hw: Vec<(f64, f64)>,
    /// Frame length of each probe of `diffs` as sent (empty without frame lengths).
    pub(crate) lens: Vec<u16>,
    pub(crate) counts: latency_results::pairs::Counts,
    pub(crate) excluded: u64,
    pub(crate) pacing_pps: Option<f64>,
    /// Whether the pacing was inferred from probe ids (most bypass copies missing).
    pub(crate) pacing_inferred: bool,
}

/// Pair one run's records (group index into the study's groups, session number).
pub fn pair_batches(
    group: usize,
    session: u32,
    batches: &[arrow_array::RecordBatch],
    tsc_hz: f64,
    exclude_first: bool,
) -> RunPairs {
    pair_ports_of(group, session, batches, tsc_hz, exclude_first, latency_plan::PortPair { from: 1, to: 0 })
}

/// Pair one run's records on two of its ports ([`latency_results::pairs::pair_ports`]).
pub fn pair_ports_of(
    group: usize,
    session: u32,
    batches: &[arrow_array::RecordBatch],
    tsc_hz: f64,
    exclude_first: bool,
    ports: latency_plan::PortPair,
) -> RunPairs {
    let p = latency_results::pairs::pair_ports(batches, ports);
    let ns = 1e9 / tsc_hz;
    let skip = if exclude_first { p.first_id } else { None };
    let mut diffs = Vec::with_capacity(p.diffs.len());
    let mut hw = Vec::with_capacity(p.hw_diffs.len());
    let mut lens = Vec::with_capacity(p.lens.len());
    let mut excluded = 0;
    for (k, &(id, d)) in p.diffs.iter().enumerate() {
        if Some(id) == skip {
            excluded += 1;
            continue;
        }
        diffs.push((id, d as f64 * ns));
        lens.extend(p.lens.get(k));
        if let Some(Some(r)) = p.hw_diffs.get(k) {
            hw.push((d as f64 * ns, *r as f64));
        }
    }
    let pacing_pps = p.bypass_pps(tsc_hz);
    let pacing_inferred = p.pacing_inferred();
    RunPairs { group, session, level: None, diffs, hw, lens, counts: p.counts, excluded, pacing_pps, pacing_inferred }
}

/// Per-probe estimates of one session: median over runs of each probe's differentials; with them,
/// whether every estimate is the median of an odd number of runs (then it lies on the TSC's grid,
/// else on a grid of half a tick).
pub(crate) fn session_estimates(runs: &[&RunPairs]) -> (Vec<(u64, f64)>, bool) {
    let lists: Vec<(&[(u64, f64)], f64)> = runs.iter().map(|r| (r.diffs.as_slice(), 0.0)).collect();
    let mut groups = ByProbe::new(&lists);
    let mut odd = true;
    let mut out = Vec::with_capacity(groups.ids.len());
    for (id, v) in groups.iter_mut() {
        odd &= v.len() % 2 == 1;
        out.push((id, median(v)));
    }
    (out, odd)
}

/// Values grouped by probe id, in id order, each group in input order: lists of `(id, value)`,
/// each list's values less its shift. Built by counting (no allocation per probe).
pub(crate) struct ByProbe {
    pub(crate) ids: Vec<u64>,
    /// Group k is `values[starts[k]..starts[k + 1]]`.
    pub(crate) starts: Vec<usize>,
    pub(crate) values: Vec<f64>,
}

impl ByProbe {
    pub(crate) fn new(lists: &[(&[(u64, f64)], f64)]) -> ByProbe {
        let all = || lists.iter().flat_map(|&(l, shift)| l.iter().map(move |&(id, v)| (id, v - shift)));
        let max_id = all().map(|(id, _)| id).max().unwrap_or(0);
        if max_id >= 1 << 22 {
            // Sparse ids: sort (stable, so each group keeps input order).
            let mut pairs: Vec<(u64, f64)> = all().collect();
            pairs.sort_by_key(|p| p.0);
            let mut g = ByProbe { ids: Vec::new(), starts: Vec::new(), values: Vec::with_capacity(pairs.len()) };
            for (k, (id, v)) in pairs.into_iter().enumerate() {
                if g.ids.last() != Some(&id) {
                    g.ids.push(id);
                    g.starts.push(k);
                }
                g.values.push(v);
            }
            g.starts.push(g.values.len());
            return g;
        }
        let mut count = vec![0usize; max_id as usize + 2];
        for (id, _) in all() {
            count[id as usize + 1] += 1;
        }
        for k in 1..count.len() {
            count[k] += count[k - 1];
        }
        let mut cursor = count.clone();
        let mut values = vec![0.0; count[count.len() - 1]];
        for (id, v) in all() {
            values[cursor[id as usize]] = v;
            cursor[id as usize] += 1;
        }
        let ids: Vec<u64> = (0..=max_id).filter(|&id| count[id as usize + 1] > count[id as usize]).collect();
        let mut starts: Vec<usize> = ids.iter().map(|&id| count[id as usize]).collect();
        starts.push(values.len());
        ByProbe { ids, starts, values }
    }

    /// Each probe id with its values.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (u64, &mut [f64])> {
        let mut rest: &mut [f64] = &mut self.values;
        let mut at = 0;
        self.ids.iter().zip(self.starts.windows(2)).map(move |(&id, w)| {
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(w[1] - at);
            rest = tail;
            at = w[1];
            debug_assert_eq!(w[0] + head.len(), w[1]);
            (id, head)
        })
    }
}

/// The grid per-probe estimates lie on: the TSC tick when each is the median of an odd number of
/// runs, half a tick otherwise.
pub(crate) fn estimate_grid(tick_ns: f64, odd: bool) -> f64 {
    if odd { tick_ns } else { tick_ns / 2.0 }
}

/// Values at `levels` (percent) keyed `p50`, `p99`, ….
pub(crate) fn keyed(levels: &[f64], values: impl IntoIterator<Item = f64>) -> Quantiles {
    levels.iter().map(|&l| level_key(l)).zip(values).collect()
}

pub(crate) fn histogram(sorted: &[f64]) -> Histogram {
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

/// Analyse a results folder. Only runs the journal records as complete are used, each verified
/// against the journal; every file or run that cannot be used is named in `health.problems`.
pub fn analyze(dir: &ResultsDir) -> Result<Summary, AnalysisError> {
    let prov = Provenance::read(dir)?;
    let index = Index::from(&prov);
    let entries = journal::read(&dir.journal_path())?;
    let data = dir.root().join("data");
    if !data.is_dir() {
        return Err(AnalysisError::Invalid { path: data, message: "missing: the folder holds no run data".into() });
    }
    let (files, mut problems) = load::run_files(dir, &index.groups, &entries)?;
    if !files.is_empty() && files.iter().all(|f| f.records == 0 && f.histogram) {
        return soak_headline::summary(dir, &index, &entries, &prov, problems)
            .map_err(|message| AnalysisError::Invalid { path: data, message });
    }
    let exclude = index.analysis.exclude_first_after_gap;
    let port_pairs = &index.analysis.port_pairs;
    // Each run read once: its headline pairs, then those of every declared port pair.
    let paired = load::par_map(&files, |f| {
        load::read_verified(f, &index.groups[f.group]).map(|batches| {
            let of = |ports| RunPairs {
                level: f.level.clone(),
                ..pair_ports_of(f.group, f.session, &batches, index.tsc_hz, exclude, ports)
            };
            let headline = of(latency_plan::PortPair { from: 1, to: 0 });
            (headline, port_pairs.values().map(|&p| of(p)).collect::<Vec<_>>())
        })
    });
    let mut runs = Vec::with_capacity(files.len());
    let mut by_pair: Vec<Vec<RunPairs>> = port_pairs.keys().map(|_| Vec::new()).collect();
    let mut failed = 0;
    for (f, r) in files.iter().zip(paired) {
        match r {
            Ok((p, _)) if p.counts.matched == 0 => {
                failed += 1;
                problems.push(format!("{}: no probe matched on both ports; counted as a failed run", f.rel));
            }
            Ok((p, others)) => {
                runs.push(p);
                for (k, o) in others.into_iter().enumerate().filter(|(_, o)| o.counts.matched > 0) {
                    by_pair[k].push(o);
                }
            }
            Err(e) => problems.push(e),
        }
    }
    let mut soaks = soak::summarize(dir, &index, &entries, &summary_levels(&index), &mut problems);
    let mut hops = Vec::new();
    for (name, runs) in port_pairs.keys().zip(&by_pair) {
        match summarize(&index, runs, &entries, None, Unusable::default()) {
            Ok(s) => {
                problems.extend(s.health.problems.iter().map(|p| format!("port pair `{name}`: {p}")));
                hops.push((name, s.programs));
            }
            Err(e) => problems.push(format!("port pair `{name}`: {e}")),
        }
    }
    let mut summary = summarize(&index, &runs, &entries, Some(&prov), Unusable { failed_runs: failed, problems })
        .map_err(|message| AnalysisError::Invalid { path: data, message })?;
    for (name, p) in summary.programs.iter_mut() {
        p.soak = soaks.remove(name);
        for (pair, programs) in &mut hops {
            if let Some(h) = programs.remove(name) {
                p.port_pairs.insert((*pair).clone(), h);
            }
        }
    }
    summary.inputs_sha256 = inputs_sha256(dir)?;
    Ok(summary)
}

/// Fingerprint of what a summary is computed from: the journal (which holds every run's sha256)
/// and the provenance.
pub fn inputs_sha256(dir: &ResultsDir) -> Result<String, ResultsError> {
    let mut text = String::new();
    for path in [dir.journal_path(), dir.root().join(latency_results::provenance::FILE)] {
        text.push_str(&latency_plan::digest::sha256_file(&path).map_err(latency_results::io_err(&path))?);
    }
    Ok(latency_plan::digest::sha256_hex(text.as_bytes()))
}

/// Whether `summary` still describes the folder: same inputs, and no run file changed since it
/// was written.
pub fn is_current(dir: &ResultsDir, summary: &Summary) -> Result<bool, ResultsError> {
    if summary.inputs_sha256.is_empty() || summary.inputs_sha256 != inputs_sha256(dir)? {
        return Ok(false);
    }
    let written = std::fs::metadata(dir.root().join("summary.json")).and_then(|m| m.modified());
    let Ok(written) = written else { return Ok(false) };
    for f in dir.data_files()? {
        let modified = std::fs::metadata(dir.root().join(&f)).and_then(|m| m.modified());
        if modified.map_or(true, |m| m > written) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// What was found unusable before the statistics.
#[derive(Clone, Debug, Default)]
pub struct Unusable {
    /// Runs recorded complete whose data is no measurement (no record, no matched probe).
    pub failed_runs: u64,
    /// Every run, file or program that could not be used, and why.
    pub problems: Vec<String>,
}

/// The quantile levels a summary stores (percent): the report's, and p50 and p99 always, which
/// regression checks judge whatever the report shows.
pub(crate) fn summary_levels(index: &Index) -> Vec<f64> {
    let mut levels = index.analysis.quantile_levels_or_default();
    for headline in HEADLINE_LEVELS {
        if !levels.contains(&headline) {
            levels.push(headline);
        }
    }
    levels.sort_by(f64::total_cmp);
    levels
}

/// Steps 2–9 over paired runs. `journal` and `prov` supply retry counts and provenance.
pub fn summarize(
    index: &Index,
    runs: &[RunPairs],
    journal: &[Entry],
    prov: Option<&Provenance>,
    unusable: Unusable,
) -> Result<Summary, String> {
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
    Ok(Summary {
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
        programs,
        nulls,
        health: Health { problems, ..health },
        provenance: prov.cloned(),
        inputs_sha256: String::new(),
    })
}

/// Steps 2–9 for one set of runs (a study's, or one level's with its null calibration's):
/// per program the summary, per null trace its calibration. `level` names the level in messages
/// and seeds the resampling with the program's name.
pub(crate) fn analyse_runs(
    index: &Index,
    runs: &[&RunPairs],
    levels: &[f64],
    level: Option<&str>,
    problems: &mut Vec<String>,
) -> (BTreeMap<String, ProgramSummary>, BTreeMap<String, NullSummary>) {
    let a = &index.analysis;
    let at = level.map(|l| format!(" at {l}")).unwrap_or_default();
    // Per group and session: per-probe estimates.
    let mut estimates: BTreeMap<(usize, u32), Vec<(u64, f64)>> = BTreeMap::new();
    // Per group: whether every estimate is a median of an odd number of runs.
    let mut odd: BTreeMap<usize, bool> = BTreeMap::new();
    let mut by_session: BTreeMap<(usize, u32), Vec<&RunPairs>> = BTreeMap::new();
    for r in runs {
        by_session.entry((r.group, r.session)).or_default().push(*r);
    }
    for (k, rs) in &by_session {
        let (est, all_odd) = session_estimates(rs);
        estimates.insert(*k, est);
        *odd.entry(k.0).or_insert(true) &= all_odd;
    }
    let sessions_of = |gi: usize| estimates.range((gi, 0)..=(gi, u32::MAX));
    let tick_ns = 1e9 / index.tsc_hz;
    let grid_of = |gi: usize| estimate_grid(tick_ns, odd.get(&gi).copied().unwrap_or(false));

    // Null calibration per trace.
    let mut nulls: BTreeMap<String, (usize, NullSummary)> = BTreeMap::new();
    for (gi, g) in index.groups.iter().enumerate().filter(|(_, g)| g.kind == SessionKind::Null) {
        let mut pooled = Vec::new();
        let mut sessions = Vec::new();
        for ((_, s), est) in sessions_of(gi) {
            let mut v: Vec<f64> = est.iter().map(|e| e.1).collect();
            pooled.extend_from_slice(&v);
            sessions.push((*s, grid_median(&mut v, grid_of(gi))));
        }
        if pooled.is_empty() {
            continue;
        }
        let lo = sessions.iter().map(|s| s.1).fold(f64::INFINITY, f64::min);
        let hi = sessions.iter().map(|s| s.1).fold(f64::NEG_INFINITY, f64::max);
        let offset_ns = grid_median(&mut pooled, grid_of(gi));
        let offset_raw_ns = median(&mut pooled);
        nulls.insert(
            g.trace.clone(),
            (gi, NullSummary { group: g.program.clone(), offset_ns, offset_raw_ns, sessions, spread_ns: hi - lo }),
        );
    }

    let mut inputs = Vec::new();
    for (gi, g) in index.groups.iter().enumerate().filter(|(_, g)| g.kind == SessionKind::Program) {
        let Some((null_gi, null)) = nulls.get(g.calibrated_by()) else {
            problems.push(format!(
                "program `{}`{at}: no usable null calibration data for trace `{}`; not analysed",
                g.program,
                g.calibrated_by()
            ));
            continue;
        };
        inputs.push(program::Input {
            group: g,
            sessions: sessions_of(gi).map(|((_, s), e)| (*s, e.as_slice())).collect(),
            runs: sessions_of(gi).map(|(k, _)| by_session[k].as_slice()).collect(),
            null_sessions: sessions_of(*null_gi).map(|(_, e)| e.as_slice()).collect(),
            null,
            levels,
            analysis: a,
            tick_ns,
            grid: grid_of(gi),
            null_grid: grid_of(*null_gi),
        });
    }
    // Programs in parallel, each resampled with its own generator (seeded by the study's seed and
    // its name, so that results do not depend on the order).
    let analysed = load::par_map(&inputs, |input| {
        let (study, name) = (index.seed.to_le_bytes(), input.group.program.as_bytes());
        let seed = match level {
            None => latency_plan::digest::key(&[&study, name]),
            Some(l) => latency_plan::digest::key(&[&study, name, l.as_bytes()]),
        };
        program::analyse(input, &mut ChaCha8Rng::seed_from_u64(seed))
    });
    let mut programs = BTreeMap::new();
    for (input, p) in inputs.iter().zip(analysed) {
        match p {
            Some(p) => {
                programs.insert(input.group.program.clone(), p);
            }
            None => problems.push(format!("program `{}`{at}: no usable run data; not analysed", input.group.program)),
        }
    }
    let nulls: BTreeMap<String, NullSummary> = nulls.into_iter().map(|(t, (_, n))| (t, n)).collect();

    (programs, nulls)
}

/// Step 8: re-pair residuals C = R − D with the differentials at random and compare quantiles
/// of the synthesised D + C with the measured R.
pub(crate) fn hw_clock_check(pairs: &[(f64, f64)], tolerance_ns: f64, rng: &mut ChaCha8Rng) -> Option<HwCheck> {
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
            HwLevel { level: l, measured_ns: m, synthesized_ns: s, diff_ns: s - m, judged: l <= HW_JUDGED_MAX_LEVEL }
        })
        .collect();
    let max_diff_ns = levels.iter().filter(|l| l.judged).map(|l| l.diff_ns.abs()).fold(0.0, f64::max);
    Some(HwCheck { levels, max_diff_ns, tolerance_ns, pass: max_diff_ns <= tolerance_ns, pairs: pairs.len() as u64 })
}

/// Analyse and write `summary.json` (atomically, replacing an earlier one).
pub fn analyze_and_write(dir: &ResultsDir) -> Result<Summary, AnalysisError> {
    let s = analyze(dir)?;
    let path = dir.root().join("summary.json");
    let text = serde_json::to_string_pretty(&s).map_err(|source| ResultsError::Json {
        path: path.clone(),
        what: "summary".into(),
        source,
    })?;
    latency_results::write_file(&path, text.as_bytes(), true)?;
    Ok(s)
}

/// The summary of a folder: `summary.json` when it is current, else analysed anew (and written).
pub fn current_summary(dir: &ResultsDir) -> Result<Summary, AnalysisError> {
    let path = dir.root().join("summary.json");
    if let Ok(bytes) = latency_results::read_capped(&path, MAX_SUMMARY_BYTES, "summary")
        && let Ok(s) = serde_json::from_slice::<Summary>(&bytes)
        && is_current(dir, &s)?
    {
        return Ok(s);
    }
    analyze_and_write(dir)
}

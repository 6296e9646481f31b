//! Steps 2–9 for one set of runs: per-probe estimates per session, the null calibration of each
//! trace, then each program analysed in parallel.

use std::collections::BTreeMap;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::runs::{RunPairs, estimate_grid, session_estimates};
use crate::stats::{grid_median, median};
use crate::{load, program};
use latency_plan::Calibration;
use latency_results::SessionKind;
use latency_results::index::Index;
use latency_results::summary::{NullSummary, ProgramSummary};

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
    let sessions: Vec<(&(usize, u32), &Vec<&RunPairs>)> = by_session.iter().collect();
    for ((k, _), (est, all_odd)) in sessions.iter().zip(load::par_map(&sessions, |(_, rs)| session_estimates(rs))) {
        estimates.insert(**k, est);
        *odd.entry(k.0).or_insert(true) &= all_odd;
    }
    let sessions_of = |gi: usize| estimates.range((gi, 0)..=(gi, u32::MAX));
    let tick_ns = 1e9 / index.tsc_hz;
    let grid_of = |gi: usize| estimate_grid(tick_ns, odd.get(&gi).copied().unwrap_or(false));

    // Null calibration per trace, the traces in parallel.
    let null_groups: Vec<usize> =
        (0..index.groups.len()).filter(|&gi| index.groups[gi].kind == SessionKind::Null).collect();
    let calibrations = load::par_map(&null_groups, |&gi| {
        let mut pooled = Vec::new();
        let mut sessions = Vec::new();
        for ((_, s), est) in sessions_of(gi) {
            let mut v: Vec<f64> = est.iter().map(|e| e.1).collect();
            pooled.extend_from_slice(&v);
            sessions.push((*s, grid_median(&mut v, grid_of(gi))));
        }
        if pooled.is_empty() {
            return None;
        }
        let lo = sessions.iter().map(|s| s.1).fold(f64::INFINITY, f64::min);
        let hi = sessions.iter().map(|s| s.1).fold(f64::NEG_INFINITY, f64::max);
        let offset_ns = grid_median(&mut pooled, grid_of(gi));
        let offset_raw_ns = median(&mut pooled);
        let g = &index.groups[gi];
        Some(NullSummary { group: g.program.clone(), offset_ns, offset_raw_ns, sessions, spread_ns: hi - lo })
    });
    let mut nulls: BTreeMap<String, (usize, NullSummary)> = BTreeMap::new();
    for (&gi, n) in null_groups.iter().zip(calibrations) {
        if let Some(n) = n {
            nulls.insert(index.groups[gi].trace.clone(), (gi, n));
        }
    }

    let mut inputs = Vec::new();
    for (gi, g) in index.groups.iter().enumerate().filter(|(_, g)| g.kind == SessionKind::Program) {
        // The null calibrating the program's trace: its group and summary (none uncalibrated).
        let null = match a.calibration {
            Calibration::None => None,
            Calibration::NullImage => match nulls.get(g.calibrated_by()) {
                Some((gi, n)) => Some((*gi, n)),
                None => {
                    problems.push(format!(
                        "program `{}`{at}: no usable null calibration data for trace `{}`; not analysed",
                        g.program,
                        g.calibrated_by()
                    ));
                    continue;
                }
            },
        };
        let null_gi = null.map(|n| n.0);
        let of_null = |gi: Option<usize>| gi.into_iter().flat_map(&sessions_of);
        inputs.push(program::Input {
            group: g,
            sessions: sessions_of(gi).map(|((_, s), e)| (*s, e.as_slice())).collect(),
            runs: sessions_of(gi).map(|(k, _)| by_session[k].as_slice()).collect(),
            null_sessions: of_null(null_gi).map(|(_, e)| e.as_slice()).collect(),
            null_runs: of_null(null_gi).map(|(k, _)| by_session[k].as_slice()).collect(),
            null: null.map(|n| n.1),
            levels,
            analysis: a,
            tick_ns,
            grid: grid_of(gi),
            null_grid: null_gi.map_or(grid_of(gi), grid_of),
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

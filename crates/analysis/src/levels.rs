//! Studies with factors: every level analysed like a study without factors, from the programs'
//! runs at the level and the null calibrations' runs at its calibration level.

use std::collections::BTreeMap;

use crate::runs::RunPairs;
use crate::study::analyse_runs;
use latency_plan::FactorName;
use latency_results::SessionKind;
use latency_results::index::Index;
use latency_results::summary::{LevelSummary, NullSummary, ProgramSummary};

/// Per program its first level's summary with every level's in `levels`; the null calibrations
/// of the first level.
pub(super) fn analyse(
    index: &Index,
    runs: &[&RunPairs],
    quantile_levels: &[f64],
    problems: &mut Vec<String>,
) -> (BTreeMap<String, ProgramSummary>, BTreeMap<String, NullSummary>) {
    let mut programs: BTreeMap<String, ProgramSummary> = BTreeMap::new();
    let mut first_nulls = None;
    for sl in &index.levels {
        let (name, calibration) = (sl.level.name(), sl.calibration.name());
        let at: Vec<&RunPairs> = runs
            .iter()
            .filter(|r| {
                let want = match index.groups[r.group].kind {
                    SessionKind::Program => &name,
                    SessionKind::Null => &calibration,
                };
                r.level.as_ref() == Some(want)
            })
            .copied()
            .collect();
        // A header-inserting program's bound depends on the level's frame size.
        let mut at_level = index.clone();
        if let Some(size) = sl.level.get(FactorName::FrameSize) {
            for g in &mut at_level.groups {
                if let Some(m) = &mut g.bound_model {
                    m.min_frame_bytes = size;
                    g.vendor_bound_cycles = Some(m.cycles(size));
                }
            }
        }
        let (level_programs, nulls) = analyse_runs(&at_level, &at, quantile_levels, Some(&name), problems);
        first_nulls.get_or_insert(nulls);
        let shared = sl.level.values.iter().all(|(f, _)| !f.changes_traffic());
        for (program, summary) in level_programs {
            let summary = ProgramSummary { level: Some(name.clone()), ..summary };
            let entry = programs.entry(program).or_insert_with(|| summary.clone());
            entry.levels.push(LevelSummary {
                factors: sl.level.values.iter().map(|(f, v)| (f.name().to_string(), v.clone())).collect(),
                null_calibration: if shared { "shared" } else { "per_level" }.into(),
                null_level: calibration.clone(),
                summary,
            });
        }
    }
    (programs, first_nulls.unwrap_or_default())
}

//! What the analysis needs to know of a study besides its run files, kept in `provenance.json`:
//! the session groups (programs and null calibrations) with their traces and bitstream facts, and
//! the analysis and report settings. Importers write the same.

use serde::{Deserialize, Serialize};

use super::provenance::Provenance;
use crate::plan::{Analysis, Level, Plan, ReportSpec};
use crate::schedule::{Schedule, SessionKind};

/// One program or null calibration group of a study.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Group {
    /// Program name, or `null-<trace>`.
    pub program: String,
    /// Program or null calibration.
    pub kind: SessionKind,
    /// Trace name.
    pub trace: String,
    /// A program's null calibration trace when it is not `trace` (the plan's `null_trace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub null_trace: Option<String>,
    /// Bitstream name.
    pub bitstream: String,
    /// Pipeline clock, MHz.
    pub clock_mhz: f64,
    /// Vendor bound, cycles.
    pub vendor_bound_cycles: Option<u32>,
    /// Probes per run.
    pub probes: u64,
}

/// One factor level of a study, with the level its null calibration is measured at (the same
/// traffic, other factors at their base values; see [`crate::plan::Level::calibration`]).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct StudyLevel {
    /// The level.
    pub level: Level,
    /// The null calibration's level.
    pub calibration: Level,
}

impl StudyLevel {
    /// Every level of `plan`.
    pub fn of(plan: &Plan) -> Vec<StudyLevel> {
        let levels = plan.factors.levels();
        levels
            .into_iter()
            .map(|l| StudyLevel { calibration: l.calibration(|f| plan.base_value(f)), level: l })
            .collect()
    }
}

/// What the analysis needs of a study's provenance.
#[derive(Clone, Debug)]
pub struct Index {
    /// Study name.
    pub study: String,
    /// Session groups in schedule order.
    pub groups: Vec<Group>,
    /// Factor levels (none without factors).
    pub levels: Vec<StudyLevel>,
    /// Analysis settings.
    pub analysis: Analysis,
    /// Report settings.
    pub report: ReportSpec,
    /// TSC ticks per second of the stamps.
    pub tsc_hz: f64,
    /// Seed of resampling.
    pub seed: u64,
}

impl Group {
    /// The trace whose null calibration this program group is differenced against.
    pub fn calibrated_by(&self) -> &str {
        self.null_trace.as_deref().unwrap_or(&self.trace)
    }
}

impl From<&Provenance> for Index {
    fn from(p: &Provenance) -> Index {
        Index {
            study: p.study.clone(),
            groups: p.groups.clone(),
            levels: p.levels.clone(),
            analysis: p.analysis.clone(),
            report: p.report.clone(),
            tsc_hz: p.tsc_hz,
            seed: p.seed,
        }
    }
}

#[cfg(test)]
impl Group {
    /// A group of trace `t` with a 250 MHz clock, for tests.
    pub(crate) fn for_test(program: &str, kind: SessionKind, bound: Option<u32>, probes: u64) -> Group {
        Group {
            program: program.into(),
            kind,
            trace: "t".into(),
            null_trace: None,
            bitstream: program.into(),
            clock_mhz: 250.0,
            vendor_bound_cycles: bound,
            probes,
        }
    }
}

/// The groups of a scheduled plan.
pub fn groups(plan: &Plan, schedule: &Schedule) -> Vec<Group> {
    let mut out: Vec<Group> = Vec::new();
    for s in &schedule.sessions {
        if out.iter().any(|g| g.program == s.program) {
            continue;
        }
        let b = plan.programs.iter().flat_map(|p| [&p.bitstream, &p.null]).find(|b| b.name == s.bitstream);
        let null_trace = plan
            .programs
            .iter()
            .find(|p| s.kind == SessionKind::Program && p.name == s.program && p.null_trace != p.trace)
            .map(|p| plan.traces[p.null_trace].name.clone());
        out.push(Group {
            program: s.program.clone(),
            kind: s.kind,
            trace: s.trace.clone(),
            null_trace,
            bitstream: s.bitstream.clone(),
            clock_mhz: b.map_or(250.0, |b| b.clock_mhz),
            vendor_bound_cycles: b.and_then(|b| b.vendor_bound_cycles),
            probes: s.probes,
        });
    }
    out
}

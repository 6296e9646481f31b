//! What the analysis needs to know of a study besides its run files, kept in `provenance.json`:
//! the session groups (programs and null calibrations) with their traces and bitstream facts, and
//! the analysis and report settings. Importers write the same.

use serde::{Deserialize, Serialize};

use latency_plan::Analysis;
use latency_plan::Level;
use latency_plan::Plan;
use latency_plan::ReportSpec;

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
    /// Vendor bound, cycles (with header insertion, for the group's trace; see `bound_model`).
    pub vendor_bound_cycles: Option<u32>,
    /// A program that inserts headers: the parts of its traffic-dependent bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_model: Option<BoundModel>,
    /// Probes per run.
    pub probes: u64,
}

/// One factor level of a study, with the level its null calibration is measured at (the same
/// traffic, other factors at their base values; see [`latency_plan::Level::calibration`]).
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

/// The vendor's bound of a program that inserts headers (Xilinx UG1308, as LatencyLab's
/// `emulator/run_latency.py` computes it): the base latency plus the cycles the insertions add
/// to every packet that can be in the pipeline at once, which depends on the smallest frame of the
/// traffic: `base + A × ⌈base / (max(60, smallest frame) × 8 / bus)⌉`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct BoundModel {
    /// Base latency (the program without insertions), cycles.
    pub base_cycles: u32,
    /// Cycles each packet adds for its inserted headers (A).
    pub insert_cycles: u32,
    /// Data bus width, bits.
    pub bus_bits: u32,
    /// The smallest frame of the group's trace, bytes.
    pub min_frame_bytes: u32,
}

impl BoundModel {
    /// Packets that can be in the pipeline at once with frames of at least `min_frame` bytes (B).
    pub fn in_flight(&self, min_frame: u32) -> u32 {
        let cycles_per_packet = f64::from(min_frame.max(60) * 8) / f64::from(self.bus_bits);
        (f64::from(self.base_cycles) / cycles_per_packet).ceil() as u32
    }

    /// The bound with frames of at least `min_frame` bytes, cycles (D = base + A × B).
    pub fn cycles(&self, min_frame: u32) -> u32 {
        self.base_cycles + self.insert_cycles * self.in_flight(min_frame)
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
    /// What sent the probes (the agent: the differentials are round trips).
    pub sender: latency_plan::Sender,
}

impl Group {
    /// The trace whose null calibration this program group is differenced against.
    pub fn calibrated_by(&self) -> &str {
        self.null_trace.as_deref().unwrap_or(&self.trace)
    }
}

impl Group {
    /// A group of trace `t` with a 250 MHz clock and no bound model, for tests and examples.
    pub fn example(program: &str, kind: SessionKind, bound: Option<u32>, probes: u64) -> Group {
        Group {
            program: program.into(),
            kind,
            trace: "t".into(),
            null_trace: None,
            bitstream: program.into(),
            clock_mhz: 250.0,
            vendor_bound_cycles: bound,
            bound_model: None,
            probes,
        }
    }
}

latency_proto::words! {
/// What a session measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionKind {
    /// A program under test.
    Program = "program",
    /// The null image with a program's trace (calibration).
    Null = "null",
}
}

/// A session kind's name that is not one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown session kind `{0}` (program, null)")]
pub struct UnknownSessionKind(pub String);

impl std::str::FromStr for SessionKind {
    type Err = UnknownSessionKind;
    fn from_str(s: &str) -> Result<Self, UnknownSessionKind> {
        SessionKind::from_name(s).ok_or_else(|| UnknownSessionKind(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_insertion_bound_follows_the_vendors_arithmetic() {
        // By hand, as run_latency.py computes it: base 55 cycles, A = 1, 512-bit bus.
        // 60 B: 480 / 512 = 0.9375 cycles per packet, ⌈55 / 0.9375⌉ = ⌈58.67⌉ = 59 in flight → 114.
        // 212 B: 1696 / 512 = 3.3125, ⌈16.6⌉ = 17 → 72. Frames below 60 B count as 60.
        let m = BoundModel { base_cycles: 55, insert_cycles: 1, bus_bits: 512, min_frame_bytes: 212 };
        assert_eq!((m.in_flight(60), m.cycles(60)), (59, 114));
        assert_eq!((m.in_flight(212), m.cycles(212)), (17, 72));
        assert_eq!(m.cycles(42), m.cycles(60));
        // Two bus beats per packet for a 96-bit header on a 64-bit bus: A = 2; 128 B → 16 beats.
        let m = BoundModel { base_cycles: 40, insert_cycles: 2, bus_bits: 64, min_frame_bytes: 128 };
        assert_eq!(m.cycles(128), 40 + 2 * 3);
    }
}

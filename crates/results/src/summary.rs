//! `summary.json`: the analysis result that reports, regression checks and other tools read.
//! Its keys are stable (documented in `docs/summary.md`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::provenance::Provenance;
use crate::{ResultsDir, ResultsError};
use latency_plan::FactorValue;

/// A distribution's quantiles by level (percent), ns, written as an object keyed `p5`, `p25`, …
/// (see [`level_key`]). A level is read with [`Quantiles::at`] (or [`Quantiles::median`],
/// [`Quantiles::p99`]), which says when the level is absent: there is no indexing that could panic.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Quantiles(BTreeMap<String, f64>);

impl Quantiles {
    /// No quantile.
    pub fn new() -> Quantiles {
        Quantiles::default()
    }

    /// The quantile at `level` percent, if it is there.
    pub fn at(&self, level: f64) -> Option<f64> {
        self.0.get(&level_key(level)).copied()
    }

    /// The quantile whose key is `key` as written (`p50`), if it is there.
    pub fn at_key(&self, key: &str) -> Option<f64> {
        self.0.get(key).copied()
    }

    /// The median, if it is there.
    pub fn median(&self) -> Option<f64> {
        self.at(50.0)
    }

    /// The 99th percentile, if it is there.
    pub fn p99(&self) -> Option<f64> {
        self.at(99.0)
    }

    /// Set the quantile at `level` percent.
    pub fn insert(&mut self, level: f64, value: f64) {
        self.0.insert(level_key(level), value);
    }

    /// Each quantile with its key as written (`p50`), in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, f64)> {
        self.0.iter().map(|(k, v)| (k.as_str(), *v))
    }

    /// Remove the quantile at `level` percent, returning it if it was there.
    pub fn remove(&mut self, level: f64) -> Option<f64> {
        self.0.remove(&level_key(level))
    }

    /// Whether there is no quantile.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The same levels with `f` applied to each value.
    pub fn map(&self, f: impl Fn(f64) -> f64) -> Quantiles {
        Quantiles(self.0.iter().map(|(k, v)| (k.clone(), f(*v))).collect())
    }
}

/// Quantiles from (level in percent, value) pairs.
impl FromIterator<(f64, f64)> for Quantiles {
    fn from_iter<I: IntoIterator<Item = (f64, f64)>>(iter: I) -> Quantiles {
        Quantiles(iter.into_iter().map(|(l, v)| (level_key(l), v)).collect())
    }
}

/// The key of a quantile level: 5 → `p5`, 99.9 → `p99.9`.
pub fn level_key(level: f64) -> String {
    format!("p{level}")
}

/// Whole-study summary.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Summary {
    /// Study name.
    pub study: String,
    /// Report title.
    pub title: String,
    /// Tool version that produced the summary.
    pub tool_version: String,
    /// TSC rate used to convert stamps to ns.
    pub tsc_hz: f64,
    /// Quantile levels reported (percent).
    pub quantile_levels: Vec<f64>,
    /// Definition of the quantiles (documented).
    pub quantile_definition: String,
    /// What the programs' figures are calibrated by (the plan's `analysis.calibration`):
    /// `null_image`, the paper's, or `none`, raw differentials with the path's offset δ in them.
    #[serde(default)]
    pub calibration: latency_plan::Calibration,
    /// Per program under test.
    pub programs: BTreeMap<String, ProgramSummary>,
    /// Null calibration per trace (none uncalibrated).
    pub nulls: BTreeMap<String, NullSummary>,
    /// Run health over the whole study.
    pub health: Health,
    /// The study's provenance (plan hash, commit, hashes, testbed, seed, times); absent when the
    /// summary was computed from runs alone.
    pub provenance: Option<Provenance>,
    /// Fingerprint of the inputs the summary was computed from (journal and provenance); a report
    /// recomputes a summary whose inputs changed.
    #[serde(default)]
    pub inputs_sha256: String,
}

/// Results of one program.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ProgramSummary {
    /// The factor level these figures are of: in a study with factors, the first level's (each
    /// level's are in `levels`); absent without factors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
    /// Each factor level's results, in plan order (studies with factors).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<LevelSummary>,
    /// Trace name.
    pub trace: String,
    /// The trace of the null calibration differenced out, when it is not `trace` (the plan's
    /// `null_trace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub null_trace: Option<String>,
    /// Bitstream name.
    pub bitstream: String,
    /// Calibrated latency quantiles over all probes and sessions (a single mode), or of the most
    /// populated mode when the sessions fall into several (never an average between modes),
    /// corrected for the measurement noise left in the per-probe estimates.
    pub latency_ns: Quantiles,
    /// The same quantiles before the noise correction.
    #[serde(default)]
    pub latency_raw_ns: Quantiles,
    /// Reset modes: clusters of session medians; one entry for single-clock programs.
    pub modes: Vec<Mode>,
    /// Per session.
    pub sessions: Vec<SessionSummary>,
    /// Pooled null offset δ̂ subtracted (ns).
    pub null_offset_ns: f64,
    /// Range (max − min) of the calibrated session medians within a mode, worst mode (ns).
    pub reproducibility_ns: f64,
    /// Vendor-bound check (absent when the manifest gives no bound).
    pub vendor_bound: Option<VendorBound>,
    /// 95 % confidence interval of the median (ns) for a new bring-up of this testbed: probes
    /// and sessions (see [`Evidence`]).
    pub median_ci95_ns: [f64; 2],
    /// 95 % confidence interval of p99 (ns), as the median's.
    pub p99_ci95_ns: [f64; 2],
    /// How the intervals, the noise correction and the modes were obtained.
    #[serde(default)]
    pub evidence: Evidence,
    /// Hardware-clock verification (null when no reflect data).
    pub hw_check: Option<HwCheck>,
    /// Probes with an estimate (all sessions).
    pub probes: u64,
    /// Probes excluded as first after an idle gap (all sessions).
    pub excluded: u64,
    /// Histogram of the calibrated per-probe estimates (for figures and distribution distances).
    pub histogram: Histogram,
    /// Soak mode: what the runs' HDR histogram logs say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soak: Option<SoakSummary>,
    /// `sender: agent`: the differentials are round trips; what they say one way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_trip: Option<RoundTrip>,
    /// The plan's `port_pairs`, by name: each pair's differential analysed like the headline's,
    /// calibrated by the null sessions' same pair.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub port_pairs: BTreeMap<String, ProgramSummary>,
    /// Adaptive sessions: when and why the program stopped being brought up (the journal's
    /// `sessions_ended`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopping: Option<Stopping>,
}

/// Why a program with adaptive sessions stopped being brought up.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Stopping {
    /// Sessions it took.
    pub sessions: u32,
    /// Whether its stopping rule held, precision targets included (false: `max` came first).
    pub rule_met: bool,
    /// What the rule found, in words.
    pub detail: String,
}

/// A program timed by the agent as originator (`sender: agent`): its differentials are round
/// trips, and its null (a loopback of the same path without the program) their calibration.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RoundTrip {
    /// Times a round trip passes the program (`rtt_crossings`).
    pub crossings: u32,
    /// Round-trip quantiles (per-probe medians over runs, before calibration), ns.
    pub rtt_ns: Quantiles,
    /// The null path's median round trip, ns (the calibration subtracted).
    pub null_rtt_ns: f64,
    /// One-way estimate: what the program adds to a round trip (`latency_ns`) over `crossings`.
    pub one_way_ns: Quantiles,
    /// 95 % confidence interval of the one-way median, ns.
    pub one_way_median_ci95_ns: [f64; 2],
}

impl RoundTrip {
    /// The round trip of `p`, whose differentials are round trips passing the program
    /// `crossings` times. The calibration subtracts one constant, so the round trip's quantiles are
    /// the uncorrected calibrated ones plus the null's median.
    pub fn of(p: &ProgramSummary, crossings: u32) -> RoundTrip {
        let k = f64::from(crossings.max(1));
        RoundTrip {
            crossings,
            rtt_ns: p.latency_raw_ns.map(|v| v + p.null_offset_ns),
            null_rtt_ns: p.null_offset_ns,
            one_way_ns: p.latency_ns.map(|v| v / k),
            one_way_median_ci95_ns: p.median_ci95_ns.map(|v| v / k),
        }
    }
}

/// One factor level of a program: computed exactly like a study without factors, from the
/// program's runs at the level and the null calibration's at its calibration level.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LevelSummary {
    /// Each factor's value.
    pub factors: BTreeMap<String, FactorValue>,
    /// `per_level` when the level changes the probes (frame size), so the null calibration is
    /// measured at it; `shared` when one calibration serves every level.
    pub null_calibration: String,
    /// The level of the null calibration differenced out.
    pub null_level: String,
    /// The results (with `level` set).
    #[serde(flatten)]
    pub summary: ProgramSummary,
}

/// A reset mode.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Mode {
    /// Sessions in this mode.
    pub sessions: Vec<u32>,
    /// Quantiles of the probes of these sessions.
    pub latency_ns: Quantiles,
    /// The vendor bound minus this mode's median and p99, in cycles (absent without a bound).
    #[serde(default)]
    pub margins: Option<Margins>,
    /// The same quantiles before the noise correction.
    #[serde(default)]
    pub latency_raw_ns: Quantiles,
    /// The gap of this mode's lowest session median above the mode below (none for the lowest).
    #[serde(default)]
    pub gap_below: Option<Gap>,
    /// 95 % interval of this mode's median for a new bring-up (as the program's).
    #[serde(default)]
    pub median_ci95_ns: Option<[f64; 2]>,
    /// 95 % interval of this mode's p99.
    #[serde(default)]
    pub p99_ci95_ns: Option<[f64; 2]>,
    /// The share of the program's sessions (bring-ups) that landed in this mode.
    #[serde(default)]
    pub frequency: Option<f64>,
    /// Wilson's 95 % score interval of that share.
    #[serde(default)]
    pub frequency_ci95: Option<[f64; 2]>,
}

/// The support of a split between two modes.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct Gap {
    /// Gap between the neighbouring session medians, ns.
    pub ns: f64,
    /// The gap in within-mode standard deviations of session medians (none when unmeasured).
    pub sigmas: Option<f64>,
}

/// The variance components of a program's median and p99 (headline mode), at each level of the
/// design (see `latency_analysis::components`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Variance {
    /// Of the median.
    pub median: Components,
    /// Of the p99.
    pub p99: Components,
}

/// The variance components of one estimate, ns².
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Components {
    /// Between bring-ups, beyond what the runs explain (`T_session²`, at least 0).
    pub session_ns2: f64,
    /// Between runs of a session, beyond what the probes explain (`T_run²`, at least 0).
    pub run_ns2: f64,
    /// Of one run's estimate, from its probes being a sample (`V_probe`).
    pub probe_ns2: f64,
    /// Sessions, runs per session (mean) and probes per run (mean) they were estimated from.
    pub design: Design,
}

/// How many of each level a study has (or would have).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Design {
    /// Sessions (bring-ups).
    pub sessions: f64,
    /// Runs per session.
    pub runs: f64,
    /// Probes per run.
    pub probes: f64,
}

/// Each level's share of a study estimate's variance (sums to 1).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Shares {
    /// Of the sessions.
    pub session: f64,
    /// Of the runs.
    pub run: f64,
    /// Of the probes.
    pub probe: f64,
}

impl Components {
    /// The variance of the estimate of a study of `design` (sessions, runs per session; probes
    /// per run scale the probe level from the design the components were measured on).
    pub fn variance(&self, design: Design) -> f64 {
        let [s, r, p] = self.parts(design);
        s + r + p
    }

    fn parts(&self, d: Design) -> [f64; 3] {
        let probe = self.probe_ns2 * self.design.probes / d.probes.max(1.0);
        [
            self.session_ns2 / d.sessions.max(1.0),
            self.run_ns2 / (d.sessions * d.runs).max(1.0),
            probe / (d.sessions * d.runs).max(1.0),
        ]
    }

    /// The components of a difference of two independent estimates (a program's quantile less
    /// the null calibration's median): each level's variances added, on this side's design (the
    /// other's probe part scaled to this side's probes per run).
    pub fn plus(&self, other: &Components) -> Components {
        let scale = other.design.probes / self.design.probes.max(1.0);
        Components {
            session_ns2: self.session_ns2 + other.session_ns2,
            run_ns2: self.run_ns2 + other.run_ns2,
            probe_ns2: self.probe_ns2 + other.probe_ns2 * scale,
            design: self.design,
        }
    }

    /// Each level's share of the variance of the estimate of the study they were measured on.
    pub fn shares(&self) -> Shares {
        let [s, r, p] = self.parts(self.design);
        let total = s + r + p;
        if total > 0.0 {
            Shares { session: s / total, run: r / total, probe: p / total }
        } else {
            Shares { session: 0.0, run: 0.0, probe: 0.0 }
        }
    }
}

/// What the uncertainty statements of a program rest on.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Evidence {
    /// Standard deviation of the noise left in a per-probe estimate (median over runs), from the
    /// halves of each probe's runs, ns; the quantiles are corrected for it.
    pub noise_sd_ns: Option<f64>,
    /// 95 % interval of the median for these sessions of this testbed: probes only.
    pub median_ci95_sessions_ns: Option<[f64; 2]>,
    /// 95 % interval of p99 for these sessions: probes only.
    pub p99_ci95_sessions_ns: Option<[f64; 2]>,
    /// Pooled within-mode standard deviation of session medians (the program's own sessions), ns.
    pub mode_within_sd_ns: Option<f64>,
    /// The gap between session medians that splits modes, ns.
    pub mode_threshold_ns: Option<f64>,
    /// Variance components of the headline's median and p99 at each level (none without two
    /// sessions of two runs each).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variance: Option<Variance>,
}

/// Headroom under the vendor bound, in pipeline clock cycles.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct Margins {
    /// Bound minus median.
    pub median_cycles: f64,
    /// Bound minus p99.
    pub p99_cycles: f64,
}

/// One session of a program.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SessionSummary {
    /// Session number.
    pub session: u32,
    /// Median of the raw per-probe estimates (before null calibration).
    pub raw_median_ns: f64,
    /// Median after null calibration.
    pub median_ns: f64,
    /// Matched probes summed over the session's runs.
    pub matched: u64,
    /// Probes excluded (first after an idle gap) in this session.
    pub excluded: u64,
    /// Runs used.
    pub runs: u32,
    /// Reflect mode: median of the hardware-clock differentials R of the session's probes.
    #[serde(default)]
    pub hw_median_ns: Option<f64>,
}

/// Null calibration of one trace.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct NullSummary {
    /// The null session group (`null-<trace>`).
    pub group: String,
    /// Pooled δ̂: median of all null per-probe estimates, read on their grid (ns).
    pub offset_ns: f64,
    /// The same median as the paper reads it (type 7), which the raw quantiles subtract (ns).
    #[serde(default)]
    pub offset_raw_ns: f64,
    /// δ̂ of each null session: (session, ns).
    pub sessions: Vec<(u32, f64)>,
    /// Range of the session offsets (ns).
    pub spread_ns: f64,
}

/// Vendor worst-case bound check.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct VendorBound {
    /// Pipeline clock, MHz.
    pub clock_mhz: f64,
    /// Bound in cycles.
    pub cycles: u32,
    /// Bound in ns.
    pub ns: f64,
    /// Median latency in cycles.
    pub median_cycles: f64,
    /// Bound minus median, cycles.
    pub median_margin_cycles: f64,
    /// Bound minus p99, cycles.
    pub p99_margin_cycles: f64,
    /// Probes whose estimate exceeds the bound.
    pub violations: u64,
    /// The bound judged on the worst reset mode: the smallest margins of any mode (equal to the
    /// headline's for a single-mode program).
    #[serde(default)]
    pub worst_mode: Option<Margins>,
    /// A program that inserts headers: how the bound was made from its parts (UG1308).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insertion: Option<Insertion>,
}

/// The parts of a header-inserting program's bound: `cycles = base_cycles + insert_cycles ×
/// in_flight`, `in_flight = ⌈base_cycles / (max(60, min_frame_bytes) × 8 / bus_bits)⌉`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Insertion {
    /// The program's latency without insertions, cycles.
    pub base_cycles: u32,
    /// Cycles each packet adds for its inserted headers.
    pub insert_cycles: u32,
    /// Packets that can be in the pipeline at once.
    pub in_flight: u32,
    /// The smallest frame of the traffic, bytes.
    pub min_frame_bytes: u32,
    /// Data bus width, bits.
    pub bus_bits: u32,
    /// The probes grouped by their frame length as sent, each group's latency against the bound
    /// the vendor's model gives traffic of that frame length (UG1308's B evaluated per probe).
    #[serde(default)]
    pub by_frame_len: Vec<FrameLenRow>,
}

/// The probes of one frame length of a header-inserting program.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct FrameLenRow {
    /// Frame length as sent (FCS excluded), bytes.
    pub frame_len: u16,
    /// Per-probe estimates of this length, over all sessions.
    pub probes: u64,
    /// Their median, ns (calibrated).
    pub p50_ns: f64,
    /// Their 99th percentile, ns (calibrated).
    pub p99_ns: f64,
    /// The bound for traffic of frames this long, cycles.
    pub bound_cycles: u32,
    /// Estimates above that bound.
    pub above_bound: u64,
}

/// Hardware-clock verification.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct HwCheck {
    /// Per level: measured R quantile, synthesised (D ⊕ C) quantile, difference.
    pub levels: Vec<HwLevel>,
    /// Largest absolute difference over the judged levels (ns).
    pub max_diff_ns: f64,
    /// Accepted difference (plan).
    pub tolerance_ns: f64,
    /// Whether every difference is within tolerance.
    pub pass: bool,
    /// Pairs used.
    pub pairs: u64,
}

/// One level of the hardware-clock check.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct HwLevel {
    /// Level (percent).
    pub level: f64,
    /// Quantile of the measured hardware-clock differentials R.
    pub measured_ns: f64,
    /// Quantile of the synthesised convolution D + C (random re-pairing).
    pub synthesized_ns: f64,
    /// synthesized − measured.
    pub diff_ns: f64,
    /// Whether this level is judged against the tolerance (p25–p95; p99 is reported only).
    #[serde(default = "judged_by_default")]
    pub judged: bool,
}

fn judged_by_default() -> bool {
    true
}

/// Fixed-width histogram.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Histogram {
    /// Left edge of the first bin (ns).
    pub start_ns: f64,
    /// Bin width (ns).
    pub bin_ns: f64,
    /// Counts per bin.
    pub counts: Vec<u64>,
}

/// Run health over the study.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Health {
    /// Runs analysed.
    pub runs: u64,
    /// Matched probes.
    pub matched: u64,
    /// Pipeline-only probes.
    pub pipeline_only: u64,
    /// Bypass-only probes (includes probes the program drops).
    pub bypass_only: u64,
    /// Duplicated copies.
    pub duplicates: u64,
    /// Probes excluded as first after an idle gap.
    pub excluded: u64,
    /// Run and step retries (from the journal).
    pub retries: u64,
    /// Runs that failed all attempts (from the journal).
    pub failed_runs: u64,
    /// Achieved pacing per run, packets/s: min, median, max (from bypass inter-arrival times,
    /// or inferred from probe ids, see `pacing_inferred_runs`).
    pub pacing_pps: [f64; 3],
    /// Runs whose pacing is inferred from the probe ids their bypass copies span, because most
    /// copies are missing (e.g. imported data that keeps only matched probes).
    #[serde(default)]
    pub pacing_inferred_runs: u64,
    /// Runs, files and programs that could not be used, each with the reason.
    #[serde(default)]
    pub problems: Vec<String>,
}

impl Health {
    /// Whether the study is one to judge on (nightly's rule, the history's too): no run failed
    /// and nothing went unused.
    pub fn is_clean(&self) -> bool {
        self.failed_runs == 0 && self.problems.is_empty()
    }
}

/// A program's soak summary.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SoakSummary {
    /// Significant digits the histograms keep.
    pub significant_digits: u8,
    /// Relative resolution of every quantile.
    pub resolution: f64,
    /// Runs with a log.
    pub runs: u64,
    /// Pairs in the histograms.
    pub pairs: u64,
    /// Quantiles of the differentials, before calibration (ns).
    pub latency_raw_ns: Quantiles,
    /// Median of the null calibration's differentials (ns), when it has logs.
    pub null_median_ns: Option<f64>,
    /// `latency_raw_ns` less `null_median_ns` (empty without a null median).
    pub latency_ns: Quantiles,
    /// Per session.
    pub sessions: Vec<SoakSession>,
    /// Per interval of each run, in run order.
    pub intervals: Vec<SoakInterval>,
}

/// One session's differentials.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SoakSession {
    /// Session number.
    pub session: u32,
    /// Pairs.
    pub pairs: u64,
    /// Median before calibration (ns).
    pub raw_median_ns: f64,
    /// Median less the null median (ns).
    pub median_ns: Option<f64>,
}

/// One interval of a run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SoakInterval {
    /// Session number.
    pub session: u32,
    /// Run number.
    pub run: u32,
    /// Seconds from the run's start.
    pub start_s: f64,
    /// Length, s.
    pub duration_s: f64,
    /// Pairs.
    pub pairs: u64,
    /// Median before calibration (ns).
    pub raw_median_ns: Option<f64>,
    /// p99 before calibration (ns).
    pub raw_p99_ns: Option<f64>,
}
impl Summary {
    /// The key (as in `summary.json`) of the first figure that is not a finite number, in a
    /// program or null with data: its quantiles, interval, null offset, spread and session
    /// medians. A program without data is a problem of its own (in `health.problems`).
    pub fn non_finite(&self) -> Option<String> {
        for (name, p) in &self.programs {
            if let Some(key) = p.non_finite() {
                return Some(format!("programs.{name}.{key}"));
            }
        }
        for (name, n) in &self.nulls {
            if !n.sessions.is_empty() && !n.offset_ns.is_finite() {
                return Some(format!("nulls.{name}.offset_ns"));
            }
        }
        None
    }
}

impl ProgramSummary {
    /// Whether `m` is the mode the program-wide figures describe (its quantiles are the
    /// program's: the most populated mode, never an average between modes).
    pub fn is_headline(&self, m: &Mode) -> bool {
        m.latency_ns == self.latency_ns
    }

    fn non_finite(&self) -> Option<String> {
        if self.probes == 0 {
            return None;
        }
        let quantiles = [("latency_ns", &self.latency_ns), ("latency_raw_ns", &self.latency_raw_ns)];
        for (field, q) in quantiles {
            if let Some((level, _)) = q.iter().find(|(_, v)| !v.is_finite()) {
                return Some(format!("{field}.{level}"));
            }
        }
        let figures = [
            ("median_ci95_ns[0]", self.median_ci95_ns[0]),
            ("median_ci95_ns[1]", self.median_ci95_ns[1]),
            ("null_offset_ns", self.null_offset_ns),
        ];
        if let Some((key, _)) = figures.iter().find(|(_, v)| !v.is_finite()) {
            return Some((*key).to_string());
        }
        for (i, s) in self.sessions.iter().enumerate() {
            if s.matched > 0 && !(s.raw_median_ns.is_finite() && s.median_ns.is_finite()) {
                return Some(format!("sessions[{i}].median_ns"));
            }
        }
        for (i, l) in self.levels.iter().enumerate() {
            if let Some(key) = l.summary.non_finite() {
                return Some(format!("levels[{i}].summary.{key}"));
            }
        }
        None
    }
}

/// Fingerprint of what a summary is computed from: the journal (which holds every run's sha256)
/// and the provenance.
pub fn inputs_sha256(dir: &ResultsDir) -> Result<String, ResultsError> {
    let mut text = String::new();
    for path in [dir.journal_path(), dir.root().join(crate::provenance::FILE)] {
        text.push_str(&latency_plan::digest::sha256_file(&path).map_err(crate::io_err(&path))?);
    }
    Ok(latency_plan::digest::sha256_hex(text.as_bytes()))
}

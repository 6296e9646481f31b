//! `provenance.json`: what produced a results folder, enough to reproduce or audit it. One typed
//! definition, written by the engine and the importer and read by resume, analysis and reports.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::{RATE, is_rate};
use super::index::{Group, Index, StudyLevel};
use super::{ResultsDir, ResultsError, write_file};
use latency_plan::Analysis;
use latency_plan::Plan;
use latency_plan::Regression;
use latency_plan::ReportSpec;
use latency_plan::Sender;
use latency_plan::TraceSource;

/// Largest `provenance.json` read back (host facts of hundreds of sessions stay far below it).
pub const MAX_PROVENANCE_BYTES: u64 = 64 << 20;

/// File name inside a results folder.
pub const FILE: &str = "provenance.json";

/// What a testbed reported about itself (`testbed.facts`): the simulator's kind, model and seed; a
/// real testbed's inventory, hosts, TSC rates, card read-backs and agents; an import's source; the
/// slices of a study on several testbeds. Each fact the tool writes has its type here; a fact
/// written by another version is kept, as it was, in `extra`. Fields are in key order, so the JSON
/// reads as a sorted object.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Facts {
    /// Per session, what its agent set up and read back of the fast path (`ready`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<BTreeMap<String, AgentSetup>>,
    /// Run files imported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<u64>,
    /// The sender's and receiver's kernel, CPU, TSC flags, DPDK and PCI functions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<TestbedHosts>,
    /// The inventory file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inventory: Option<String>,
    /// What kind of testbed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<TestbedKind>,
    /// The simulator's model, as the simulator writes it (`latency_testbed::model::SimModel`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<serde_json::Value>,
    /// Per session, what its `readback` step printed (parsed when it printed JSON): the card's own
    /// words, free-form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readback: Option<serde_json::Map<String, serde_json::Value>>,
    /// The simulator's seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Each slice of a study on several testbeds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slices: Option<Vec<SliceFacts>>,
    /// The imported folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The receiver's TSC rate, Hz (measured by its agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tsc_hz: Option<f64>,
    /// Per session, the TSC rate its agent measured, Hz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tsc_hz_by_session: Option<BTreeMap<String, f64>>,
    /// Facts this version does not know, kept as they were read.
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// The kind of a testbed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestbedKind {
    /// The built-in simulator.
    Simulated,
    /// Hosts reached over SSH (the emulated testbed or a real one).
    Ssh,
}

/// What one host reported (a field is absent when its probe printed nothing for it); fields in key
/// order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostFacts {
    /// CPU model.
    pub cpu: Option<String>,
    /// DPDK version, or `none`.
    pub dpdk: Option<String>,
    /// How the orchestrator names the host: `role (destination)`.
    pub host: String,
    /// Kernel release.
    pub kernel: Option<String>,
    /// Xilinx and Mellanox PCI functions, `; `-separated.
    pub pci: Option<String>,
    /// `constant_tsc` and `nonstop_tsc`, those present.
    pub tsc_flags: Option<String>,
}

/// The facts of both hosts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestbedHosts {
    /// The receiver.
    pub receiver: HostFacts,
    /// The sender.
    pub sender: HostFacts,
}

/// What a started agent reported in its `ready` event.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentSetup {
    /// Its ports, pipeline first.
    pub ports: Vec<String>,
    /// What it set up, and the fast path it read back.
    pub setup: Option<latency_proto::CaptureSetup>,
}

/// One slice of a study on several testbeds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SliceFacts {
    /// Its facts.
    pub facts: Facts,
    /// The slice's testbed name.
    pub name: String,
    /// Its TSC rate, Hz (null until the slice's agent has measured it).
    pub tsc_hz: Option<f64>,
}

/// The testbed a study ran on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TestbedFacts {
    /// `sim`, or the inventory's testbed name.
    pub name: String,
    /// What the testbed reported about itself.
    #[serde(default)]
    pub facts: Facts,
}

/// A bitstream used by the study.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BitstreamFacts {
    /// sha256 of the image.
    pub sha256: String,
    /// Where the image file belongs.
    pub file: PathBuf,
    /// Whether the image file was present (and verified) locally.
    pub present: bool,
    /// Manifest file.
    pub manifest: PathBuf,
    /// Pipeline clock, MHz.
    pub clock_mhz: f64,
    /// Vendor bound, cycles.
    pub vendor_bound_cycles: Option<u32>,
    /// Whether this is a null image.
    pub null: bool,
}

/// What an import did with the rows of one file, or of all files (then `diff_mismatch_max_ns`
/// is the largest of any file).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quirks {
    /// Data rows read.
    pub rows: u64,
    /// Rows imported (two records each).
    pub kept: u64,
    /// Rows dropped: id outside `1..=probes`.
    pub invalid_ids: u64,
    /// Rows dropped: bypass stamp out of the monotonic order of stamps in id order (misparsed id).
    pub misparsed: u64,
    /// Rows dropped: id already seen (the first in file order is kept).
    pub duplicates: u64,
    /// Rows with a negative `diff_latency_ns`, over all rows read (kept).
    pub negative_diffs: u64,
    /// Kept rows with `rx1 < rx2`: negative differentials as the analysis sees them.
    pub negative_diffs_kept: u64,
    /// Kept rows holding the run's first stamp (0): the first probe after the idle gap.
    pub first_after_gap: u64,
    /// Rows whose `diff_latency_ns` differs from `rx1_ts_ns − rx2_ts_ns`.
    pub diff_mismatch: u64,
    /// Largest such difference, ns.
    pub diff_mismatch_max_ns: u64,
    /// Kept rows joined to a hardware-clock differential.
    #[serde(default)]
    pub silicon_joined: u64,
    /// Kept rows of a session with hardware-clock data that found none for their id.
    #[serde(default)]
    pub silicon_missing: u64,
}

impl Quirks {
    /// Add another file's counts.
    pub fn add(&mut self, o: &Quirks) {
        self.rows += o.rows;
        self.kept += o.kept;
        self.invalid_ids += o.invalid_ids;
        self.misparsed += o.misparsed;
        self.duplicates += o.duplicates;
        self.negative_diffs += o.negative_diffs;
        self.negative_diffs_kept += o.negative_diffs_kept;
        self.first_after_gap += o.first_after_gap;
        self.diff_mismatch += o.diff_mismatch;
        self.diff_mismatch_max_ns = self.diff_mismatch_max_ns.max(o.diff_mismatch_max_ns);
        self.silicon_joined += o.silicon_joined;
        self.silicon_missing += o.silicon_missing;
    }
}

/// One imported file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImportedFile {
    /// The CSV, relative to the source folder.
    pub source: String,
    /// sha256 of the CSV.
    pub sha256: String,
    /// Program or null group it was stored under.
    pub program: String,
    /// Session number.
    pub session: u32,
    /// Run number.
    pub run: u32,
    /// Run file, relative to the results folder.
    pub path: String,
    /// Id of the first probe after the idle gap, if a kept row holds the run's first stamp.
    pub first_after_gap_id: Option<u64>,
    /// Its differential, ns (`rx1 − rx2`).
    pub first_after_gap_diff_ns: Option<i64>,
    /// What was dropped, kept and counted.
    pub quirks: Quirks,
}

/// One hardware-clock (silicon) file of an import and what was made of it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiliconFile {
    /// The CSV, relative to the source folder.
    pub source: String,
    /// sha256 of the CSV.
    pub sha256: String,
    /// Data rows read.
    pub rows: u64,
    /// Rows dropped: id outside `1..=probes`.
    pub invalid_ids: u64,
    /// Rows dropped: an id repeated within its run (every copy of it).
    pub duplicates: u64,
}

/// How published data was imported.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImportFacts {
    /// The folder read.
    pub source: PathBuf,
    /// Probes per run (ids `1..=probes` are valid).
    pub probes: u64,
    /// The rule applied to each quirk, by quirk name.
    pub rules: BTreeMap<String, String>,
    /// Sum over all files.
    pub totals: Quirks,
    /// Per file, in import order.
    pub files: Vec<ImportedFile>,
    /// Files that were not imported.
    pub ignored: Vec<String>,
    /// Hardware-clock files joined to the runs.
    #[serde(default)]
    pub silicon: Vec<SiliconFile>,
}

/// The whole `provenance.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Provenance {
    /// Study name.
    pub study: String,
    /// sha256 of the plan file.
    pub plan_hash: String,
    /// The plan file (absent for imports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_file: Option<PathBuf>,
    /// Tool version.
    pub tool_version: String,
    /// Git commit of the tool.
    pub git_commit: String,
    /// Seed of the simulator and of resampling.
    pub seed: u64,
    /// The testbed.
    pub testbed: TestbedFacts,
    /// TSC ticks per second of the stamps (NaN until a real testbed measured it).
    #[serde(with = "nan_as_null")]
    pub tsc_hz: f64,
    /// Bitstreams by name.
    #[serde(default)]
    pub bitstreams: BTreeMap<String, BitstreamFacts>,
    /// Traces by name.
    #[serde(default)]
    pub traces: BTreeMap<String, TraceSource>,
    /// Session groups (programs and null calibrations) in schedule order.
    pub groups: Vec<Group>,
    /// The factor levels of a study with factors, each with the level of the null calibration
    /// it is differenced against.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<StudyLevel>,
    /// Analysis settings.
    pub analysis: Analysis,
    /// Report settings.
    pub report: ReportSpec,
    /// Regression settings.
    #[serde(default)]
    pub regression: Option<Regression>,
    /// Sessions in the schedule.
    pub sessions: usize,
    /// Runs in the schedule.
    pub runs: usize,
    /// When the study started (UTC).
    pub started: String,
    /// When it was resumed (UTC), in order.
    #[serde(default)]
    pub resumed: Vec<String>,
    /// When it ended (UTC); null while running or after an interruption.
    pub ended: Option<String>,
    /// Present when the folder was imported from published data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import: Option<ImportFacts>,
    /// What sent the probes: with the agent as originator, the differentials are round trips.
    #[serde(default, skip_serializing_if = "Sender::is_tcpreplay")]
    pub sender: Sender,
}

/// JSON has no NaN: an unknown rate is written as null and read back as NaN.
mod nan_as_null {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() { s.serialize_f64(*v) } else { s.serialize_none() }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }
}

impl Provenance {
    /// The bitstream and trace facts of a plan.
    pub fn plan_facts(plan: &Plan) -> (BTreeMap<String, BitstreamFacts>, BTreeMap<String, TraceSource>) {
        let bitstreams = plan
            .programs
            .iter()
            .flat_map(|p| p.images())
            .map(|b| {
                (
                    b.name.clone(),
                    BitstreamFacts {
                        sha256: b.sha256.clone(),
                        file: b.file.clone(),
                        present: b.present,
                        manifest: b.manifest.clone(),
                        clock_mhz: b.clock_mhz,
                        vendor_bound_cycles: b.vendor_bound_cycles,
                        null: b.null,
                    },
                )
            })
            .collect();
        let traces = plan.traces.iter().map(|t| (t.name.clone(), t.source.clone())).collect();
        (bitstreams, traces)
    }

    /// Read `provenance.json` of a results folder.
    pub fn read(dir: &ResultsDir) -> Result<Provenance, ResultsError> {
        Self::read_file(&dir.root().join(FILE))
    }

    /// Read a provenance file.
    pub fn read_file(path: &Path) -> Result<Provenance, ResultsError> {
        let bytes = super::read_capped(path, MAX_PROVENANCE_BYTES, "study provenance").map_err(super::io_err(path))?;
        let p: Provenance = serde_json::from_slice(&bytes).map_err(|source| ResultsError::Json {
            path: path.to_path_buf(),
            what: "not a study provenance".into(),
            source,
        })?;
        p.check_rates(path)?;
        Ok(p)
    }

    /// Every TSC rate recorded is unknown or a positive number (a zero or negative rate would turn
    /// every stamp into a NaN or a negative latency).
    fn check_rates(&self, path: &Path) -> Result<(), ResultsError> {
        let facts = &self.testbed.facts;
        let by_session =
            facts.tsc_hz_by_session.iter().flatten().map(|(s, v)| (format!("testbed.facts.tsc_hz_by_session.{s}"), *v));
        let rates = [
            ("tsc_hz".to_string(), self.tsc_hz),
            ("testbed.facts.tsc_hz".to_string(), facts.tsc_hz.unwrap_or(f64::NAN)),
        ];
        for (key, value) in rates.into_iter().chain(by_session) {
            if !value.is_nan() && !is_rate(value) {
                return Err(ResultsError::Impossible { path: path.to_path_buf(), key, value, expected: RATE });
            }
        }
        Ok(())
    }

    /// Write it atomically into a results folder (replacing an earlier one).
    pub fn write(&self, dir: &ResultsDir) -> Result<(), ResultsError> {
        let path = dir.root().join(FILE);
        let text = serde_json::to_string_pretty(self).map_err(|source| ResultsError::Json {
            path: path.clone(),
            what: "provenance".into(),
            source,
        })?;
        write_file(&path, text.as_bytes(), true)
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
            sender: p.sender,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SessionKind;
    use latency_plan::Generated;
    use latency_plan::ProbeFormat;
    use latency_plan::TraceTemplate;

    pub(crate) fn sample() -> Provenance {
        let facts = Facts { kind: Some(TestbedKind::Simulated), ..Facts::default() };
        Provenance {
            study: "s".into(),
            plan_hash: "ab".repeat(32),
            plan_file: Some("plans/p.yaml".into()),
            tool_version: env!("CARGO_PKG_VERSION").into(),
            git_commit: "c0ffee".into(),
            seed: 7,
            testbed: TestbedFacts { name: "sim".into(), facts },
            tsc_hz: f64::NAN,
            bitstreams: BTreeMap::from([(
                "fwd".into(),
                BitstreamFacts {
                    sha256: "00".repeat(32),
                    file: "b/fwd.mcs".into(),
                    present: false,
                    manifest: "b/fwd.yaml".into(),
                    clock_mhz: 250.0,
                    vendor_bound_cycles: Some(55),
                    null: false,
                },
            )]),
            traces: BTreeMap::from([
                (
                    "t".into(),
                    TraceSource::Generate(Generated::new(TraceTemplate::Forward, 10, ProbeFormat::Latencylab)),
                ),
                ("u".into(), TraceSource::Pcap { path: "x.pcap".into(), sha256: None }),
            ]),
            levels: Vec::new(),
            groups: vec![Group {
                program: "fwd".into(),
                kind: SessionKind::Program,
                trace: "t".into(),
                null_trace: None,
                bitstream: "fwd".into(),
                clock_mhz: 250.0,
                vendor_bound_cycles: Some(55),
                bound_model: None,
                probes: 10,
            }],
            analysis: Analysis::default(),
            report: ReportSpec::default(),
            regression: None,
            sessions: 2,
            runs: 4,
            started: "2026-11-30T00:00:00Z".into(),
            resumed: vec!["2026-11-30T01:00:00Z".into()],
            ended: None,
            import: Some(ImportFacts {
                source: "/src".into(),
                probes: 10,
                rules: BTreeMap::from([("x".into(), "y".into())]),
                totals: Quirks { rows: 3, ..Quirks::default() },
                files: vec![],
                ignored: vec!["console.log".into()],
                silicon: Vec::new(),
            }),
            sender: Sender::Agent { crossings: 2 },
        }
    }

    #[test]
    fn round_trip_through_a_results_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = ResultsDir::create(&tmp.path().join("r"), true).unwrap();
        let p = sample();
        p.write(&dir).unwrap();
        let back = Provenance::read(&dir).unwrap();
        assert!(back.tsc_hz.is_nan(), "an unknown rate stays unknown");
        assert_eq!(serde_json::to_value(&back).unwrap(), serde_json::to_value(&p).unwrap());
        assert_eq!(back.import, p.import);
        assert_eq!(back.testbed, p.testbed);
    }

    #[test]
    fn an_empty_or_foreign_file_is_an_error_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join(FILE);
        std::fs::write(&path, b"").unwrap();
        let e = Provenance::read_file(&path).unwrap_err().to_string();
        assert!(e.contains("provenance.json") && e.contains("not a study provenance"), "{e}");
        std::fs::write(&path, b"{\"study\": \"x\"}").unwrap();
        assert!(Provenance::read_file(&path).is_err());
    }
}

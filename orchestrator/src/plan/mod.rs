//! The plan language: a study's YAML plan, the bitstream manifests and the testbed inventory it
//! names, decoded into validated values. Nothing here touches a host.
//!
//! Decoding is done in one pass that reports every problem at once (see [`yaml`]); a plan is only
//! returned when all of its files are valid.

pub mod bitstream;
pub mod inventory;
pub mod template;
pub mod yaml;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use bitstream::Bitstream;
pub use inventory::{Action, Inventory};
use yaml::{Decoder, Diagnostic, Node, Pos};

use crate::digest;

/// A validated study plan with everything it references loaded.
#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    /// The plan file.
    pub path: PathBuf,
    /// sha256 of the plan file's bytes.
    pub hash: String,
    /// The plan file's text (copied into results).
    #[serde(skip)]
    pub source: String,
    /// Study name (safe identifier).
    pub study: String,
    /// Free text.
    pub description: String,
    /// Where the study runs.
    pub testbed: TestbedRef,
    /// Sessions, runs and pacing.
    pub protocol: Protocol,
    /// Probe traces, by name.
    pub traces: Vec<Trace>,
    /// Programs under test, in plan order.
    pub programs: Vec<Program>,
    /// Statistical pipeline settings.
    pub analysis: Analysis,
    /// Report settings.
    pub report: ReportSpec,
    /// Optional regression check against a baseline.
    pub regression: Option<Regression>,
}

/// The testbed a plan names.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TestbedRef {
    /// The built-in simulated testbed.
    Sim,
    /// An inventory file.
    Inventory(PathBuf),
}

/// Timeout and retries of one kind of step.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct StepPolicy {
    /// Seconds before the step is cancelled.
    pub timeout_s: f64,
    /// Further attempts after a failure.
    pub retries: u32,
}

/// Thresholds a run must meet to count.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct RunChecks {
    /// Minimum fraction of the probes the program forwards that must be matched on both ports.
    pub min_matched_fraction: f64,
    /// Maximum duplicated probe copies.
    pub max_duplicates: u64,
    /// Attempts of one run before it is reported failed.
    pub max_attempts: u32,
    /// Largest relative deviation of the achieved pacing from `pacing_pps`, as reported by the
    /// sender and as seen in the receiver's stamps of the bypass copies.
    pub pacing_tolerance: f64,
}

/// The measurement protocol.
#[derive(Clone, Debug, Serialize)]
pub struct Protocol {
    /// Bring-ups per program (and per null/trace pair).
    pub sessions: u32,
    /// Replay runs per session.
    pub runs: u32,
    /// Replay rate, packets per second.
    pub pacing_pps: u32,
    /// Idle time between runs, seconds.
    pub idle_gap_s: f64,
    /// Seed of the simulator and of every resampling.
    pub seed: u64,
    /// Whether stamped probes are reflected to the sender's hardware clock.
    pub reflect: bool,
    /// When the card is reprogrammed.
    pub flash: FlashPolicy,
    /// Per-step overrides of the inventory's timeouts and retries.
    pub steps: BTreeMap<Action, StepPolicy>,
    /// Run acceptance thresholds.
    pub run_checks: RunChecks,
}

/// When a session reprograms the card.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FlashPolicy {
    /// Every session flashes and boots its image (a full bring-up, as in the paper).
    EverySession,
    /// Skip flash and boot when the previous session left the same image on the card.
    OnChange,
}

/// How a probe id is carried in the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeFormat {
    /// ASCII marker `oct-fpga-id:<decimal>` (LatencyLab traces).
    Latencylab,
    /// Binary: magic, 64-bit id, tag byte.
    Compact,
}

/// Header template of generated probes, matching a program's traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceTemplate {
    /// IPv4/UDP to destinations the Forward table forwards, and some it drops.
    Forward,
    /// IPv4/UDP five-tuples, some present in the CAM.
    FiveTuple,
    /// VLAN-tagged IPv4/UDP (the tag is removed by the program).
    RemoveHeader,
    /// IPv4/UDP with valid header checksums.
    Checksum,
}

/// A probe trace.
#[derive(Clone, Debug, Serialize)]
pub struct Trace {
    /// Name (safe identifier).
    pub name: String,
    /// Where the packets come from.
    pub source: TraceSource,
}

/// A trace given as a file or generated.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceSource {
    /// A pcap file, optionally with its sha256 (verified).
    Pcap {
        /// Path of the pcap.
        path: PathBuf,
        /// Expected sha256.
        sha256: Option<String>,
    },
    /// Generated by `orchestrate trace`.
    Generate {
        /// Header template.
        template: TraceTemplate,
        /// Number of probes.
        count: u32,
        /// Probe id format.
        probe_id: ProbeFormat,
    },
}

impl Trace {
    /// Number of probes, when known without reading a file.
    pub fn count(&self) -> Option<u32> {
        match self.source {
            TraceSource::Generate { count, .. } => Some(count),
            TraceSource::Pcap { .. } => None,
        }
    }

    /// File name of the trace on a host.
    pub fn file_name(&self) -> String {
        format!("{}.pcap", self.name)
    }
}

/// A program under test.
#[derive(Clone, Debug, Serialize)]
pub struct Program {
    /// Name (safe identifier).
    pub name: String,
    /// The program's image.
    pub bitstream: Bitstream,
    /// Optional table file loaded after bring-up.
    pub table: Option<PathBuf>,
    /// Index into [`Plan::traces`].
    pub trace: usize,
    /// The null image that calibrates this program's trace.
    pub null: Bitstream,
}

/// Statistical settings.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Analysis {
    /// Quantiles reported, in percent.
    pub quantiles: Vec<f64>,
    /// Estimator over runs (the paper's: median).
    pub estimator: Estimator,
    /// Whether the first probe after each idle gap is excluded.
    pub exclude_first_after_gap: bool,
    /// Hardware-clock verification (needs `protocol.reflect`).
    pub hw_clock_check: bool,
    /// Largest quantile difference (ns) the hardware-clock check accepts.
    pub hw_clock_tolerance_ns: f64,
    /// Bootstrap resamples for confidence intervals.
    pub bootstrap_resamples: u32,
    /// Reset-mode detection.
    pub modes: ModeSettings,
}

/// The per-probe estimator over runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Estimator {
    /// Median over runs.
    Median,
}

/// Reset-mode detection settings.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct ModeSettings {
    /// Whether modes are looked for at all.
    pub enabled: bool,
    /// Smallest gap (ns) between session-median clusters that separates two modes.
    pub min_separation_ns: f64,
}

/// Report output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReportFormat {
    /// One self-contained HTML file.
    Html,
    /// Markdown.
    Markdown,
}

/// Report settings.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ReportSpec {
    /// Formats produced.
    pub formats: Vec<ReportFormat>,
    /// Title.
    pub title: String,
    /// Folder of templates overriding the built-in ones.
    pub template: Option<PathBuf>,
}

/// Regression check against a baseline results folder.
#[derive(Clone, Debug, Serialize)]
pub struct Regression {
    /// Baseline results folder.
    pub baseline: PathBuf,
    /// Largest accepted shift of a program's median, ns.
    pub median_shift_ns: f64,
    /// Largest accepted shift of a program's p99, ns.
    pub p99_shift_ns: f64,
    /// Largest accepted Kolmogorov–Smirnov distance.
    pub ks_distance: f64,
}

/// Errors found while loading a plan, all of them.
#[derive(Debug)]
pub struct Invalid(pub Vec<Diagnostic>);

const TOP_KEYS: &[&str] =
    &["study", "description", "testbed", "protocol", "traces", "programs", "analysis", "report", "regression"];

/// Load and validate a plan file and every file it references. `testbed` overrides the plan's.
pub fn load(path: &Path, testbed: Option<&str>) -> Result<(Plan, Option<Inventory>), Invalid> {
    let mut diags = Vec::new();
    let plan = load_plan(path, &mut diags);
    let inventory = plan.as_ref().and_then(|p| {
        let tb = match testbed {
            Some("sim") => TestbedRef::Sim,
            Some(other) => TestbedRef::Inventory(PathBuf::from(other)),
            None => p.testbed.clone(),
        };
        match tb {
            TestbedRef::Sim => None,
            TestbedRef::Inventory(inv) => load_file(&inv, &mut diags, inventory::decode),
        }
    });
    if let (Some(p), Some(inv)) = (&plan, &inventory) {
        inventory::check_plan(p, inv, &mut diags);
    }
    diags.sort();
    diags.dedup();
    match plan {
        Some(p) if diags.is_empty() => Ok((p, inventory)),
        _ => Err(Invalid(diags)),
    }
}

/// Read and decode one YAML file, appending its problems to `diags`.
pub fn load_file<T>(
    path: &Path,
    diags: &mut Vec<Diagnostic>,
    decode: impl FnOnce(&mut Decoder, &Node) -> Option<T>,
) -> Option<T> {
    let src = match std::fs::read_to_string(path) {
        Ok(s) => s,
        Err(e) => {
            diags.push(Diagnostic {
                file: path.to_path_buf(),
                pos: Pos { line: 1, col: 1 },
                message: format!("cannot read: {e}"),
            });
            return None;
        }
    };
    let root = match yaml::parse(path, &src) {
        Ok(n) => n,
        Err(e) => {
            diags.push(e);
            return None;
        }
    };
    let mut d = Decoder::new(path);
    let out = decode(&mut d, &root);
    let ok = d.diags.is_empty();
    diags.append(&mut d.diags);
    out.filter(|_| ok)
}

fn load_plan(path: &Path, diags: &mut Vec<Diagnostic>) -> Option<Plan> {
    let source = match std::fs::read_to_string(path) {
        Ok(s) => s,
        Err(e) => {
            diags.push(Diagnostic {
                file: path.to_path_buf(),
                pos: Pos { line: 1, col: 1 },
                message: format!("cannot read: {e}"),
            });
            return None;
        }
    };
    let hash = digest::sha256_hex(source.as_bytes());
    load_file(path, diags, |d, root| decode_plan(d, root, source.clone(), hash))
}

fn decode_plan(d: &mut Decoder, root: &Node, source: String, hash: String) -> Option<Plan> {
    let mut m = d.map(root, "plan")?;
    let study = m.req(d, "study").and_then(|n| d.ident(n));
    let description = match m.get("description") {
        Some(n) => d.string(n),
        None => Some(String::new()),
    };
    let testbed = m.req(d, "testbed").and_then(|n| {
        let s = d.string(n)?;
        if s == "sim" { Some(TestbedRef::Sim) } else { d.path(n, true).map(TestbedRef::Inventory) }
    });
    let protocol = m.req(d, "protocol").and_then(|n| decode_protocol(d, n));
    let named_traces = m.req(d, "traces").and_then(|n| decode_traces(d, n));
    let names: Vec<String> = named_traces.iter().flatten().map(|(name, _)| name.clone()).collect();
    let programs = m.req(d, "programs").and_then(|n| decode_programs(d, n, &names));
    let traces: Option<Vec<Trace>> = named_traces
        .and_then(|ts| ts.into_iter().map(|(name, source)| source.map(|source| Trace { name, source })).collect());
    let analysis = match m.get("analysis") {
        Some(n) => decode_analysis(d, n),
        None => Some(Analysis::default()),
    };
    let report = match m.get("report") {
        Some(n) => decode_report(d, n),
        None => Some(ReportSpec::default()),
    };
    let regression = match m.get("regression") {
        Some(n) => decode_regression(d, n).map(Some),
        None => Some(None),
    };
    m.finish(d, TOP_KEYS);
    if let (Some(p), Some(a)) = (&protocol, &analysis)
        && a.hw_clock_check
        && !p.reflect
    {
        d.error(root.pos, "`analysis.hw_clock_check` needs `protocol.reflect: true`");
    }
    Some(Plan {
        path: d.file().to_path_buf(),
        hash,
        source,
        study: study?,
        description: description?,
        testbed: testbed?,
        protocol: protocol?,
        traces: traces?,
        programs: programs?,
        analysis: analysis?,
        report: report?,
        regression: regression?,
    })
}

/// Default timeouts and retries for every action (overridden by the inventory, then the plan).
pub fn default_policy(a: Action) -> StepPolicy {
    let (timeout_s, retries) = match a {
        Action::Flash => (1200.0, 1),
        Action::FlashJtag => (600.0, 1),
        Action::PcieRescan | Action::PcieRemove => (60.0, 3),
        Action::Replay => (3600.0, 0),
        Action::AgentStart => (120.0, 2),
        _ => (120.0, 1),
    };
    StepPolicy { timeout_s, retries }
}

fn decode_step_policy(d: &mut Decoder, n: &Node, base: StepPolicy) -> Option<StepPolicy> {
    let mut m = d.map(n, "step policy")?;
    let timeout_s = match m.get("timeout_s") {
        Some(v) => d.number(v, 0.001..=86_400.0),
        None => Some(base.timeout_s),
    };
    let retries = match m.get("retries") {
        Some(v) => d.int(v, 0..=10).map(|r| r as u32),
        None => Some(base.retries),
    };
    m.finish(d, &["timeout_s", "retries"]);
    Some(StepPolicy { timeout_s: timeout_s?, retries: retries? })
}

/// Decode a `steps:` mapping of action name → policy.
pub fn decode_steps(d: &mut Decoder, n: &Node) -> Option<BTreeMap<Action, StepPolicy>> {
    let mut m = d.map(n, "steps")?;
    let mut out = BTreeMap::new();
    let mut ok = true;
    for (pos, key, v) in m.entries() {
        match Action::from_name(key) {
            Some(a) => match decode_step_policy(d, v, default_policy(a)) {
                Some(p) => {
                    out.insert(a, p);
                }
                None => ok = false,
            },
            None => {
                let names: Vec<&str> = Action::ALL.iter().map(|a| a.name()).collect();
                let hint = yaml::closest(key, &names).map(|k| format!(" (did you mean `{k}`?)")).unwrap_or_default();
                d.error(*pos, format!("unknown action `{key}`{hint}"));
                ok = false;
            }
        }
    }
    ok.then_some(out)
}

fn decode_protocol(d: &mut Decoder, n: &Node) -> Option<Protocol> {
    let mut m = d.map(n, "protocol")?;
    let sessions = m.req(d, "sessions").and_then(|v| d.int(v, 1..=1000)).map(|v| v as u32);
    let runs = m.req(d, "runs").and_then(|v| d.int(v, 1..=10_000)).map(|v| v as u32);
    let pacing_pps = m.req(d, "pacing_pps").and_then(|v| d.int(v, 1..=100_000_000)).map(|v| v as u32);
    let idle_gap_s = match m.get("idle_gap_s") {
        Some(v) => d.number(v, 0.0..=86_400.0),
        None => Some(5.0),
    };
    let seed = match m.get("seed") {
        Some(v) => d.int(v, 0..=i64::MAX).map(|v| v as u64),
        None => Some(1),
    };
    let reflect = match m.get("reflect") {
        Some(v) => d.boolean(v),
        None => Some(false),
    };
    let flash = match m.get("flash") {
        Some(v) => d.choice(v, &[("every_session", FlashPolicy::EverySession), ("on_change", FlashPolicy::OnChange)]),
        None => Some(FlashPolicy::EverySession),
    };
    let steps = match m.get("steps") {
        Some(v) => decode_steps(d, v),
        None => Some(BTreeMap::new()),
    };
    let run_checks = match m.get("run_checks") {
        Some(v) => decode_run_checks(d, v),
        None => Some(RunChecks::default()),
    };
    m.finish(d, &["sessions", "runs", "pacing_pps", "idle_gap_s", "seed", "reflect", "flash", "steps", "run_checks"]);
    Some(Protocol {
        sessions: sessions?,
        runs: runs?,
        pacing_pps: pacing_pps?,
        idle_gap_s: idle_gap_s?,
        seed: seed?,
        reflect: reflect?,
        flash: flash?,
        steps: steps?,
        run_checks: run_checks?,
    })
}

impl Default for RunChecks {
    fn default() -> Self {
        RunChecks { min_matched_fraction: 0.99, max_duplicates: 0, max_attempts: 3, pacing_tolerance: 0.05 }
    }
}

fn decode_run_checks(d: &mut Decoder, n: &Node) -> Option<RunChecks> {
    let def = RunChecks::default();
    let mut m = d.map(n, "run_checks")?;
    let min_matched_fraction = match m.get("min_matched_fraction") {
        Some(v) => d.number(v, 0.0..=1.0),
        None => Some(def.min_matched_fraction),
    };
    let max_duplicates = match m.get("max_duplicates") {
        Some(v) => d.int(v, 0..=i64::MAX).map(|v| v as u64),
        None => Some(def.max_duplicates),
    };
    let max_attempts = match m.get("max_attempts") {
        Some(v) => d.int(v, 1..=20).map(|v| v as u32),
        None => Some(def.max_attempts),
    };
    let pacing_tolerance = match m.get("pacing_tolerance") {
        Some(v) => d.number(v, 0.0..=1.0),
        None => Some(def.pacing_tolerance),
    };
    m.finish(d, &["min_matched_fraction", "max_duplicates", "max_attempts", "pacing_tolerance"]);
    Some(RunChecks {
        min_matched_fraction: min_matched_fraction?,
        max_duplicates: max_duplicates?,
        max_attempts: max_attempts?,
        pacing_tolerance: pacing_tolerance?,
    })
}

/// Decode `traces:`; every name is returned (so that references can be checked) with its source
/// when that decoded.
fn decode_traces(d: &mut Decoder, n: &Node) -> Option<Vec<(String, Option<TraceSource>)>> {
    let mut m = d.map(n, "traces by name")?;
    let mut out = Vec::new();
    for (pos, name, v) in m.entries() {
        if !yaml::is_safe_ident(name) {
            d.error(
                *pos,
                format!(
                    "`{name}` is not a safe name: use letters, digits, `_` and `-`, starting with a letter (at most 64)"
                ),
            );
        }
        out.push((name.clone(), decode_trace(d, v)));
    }
    if out.is_empty() {
        d.error(n.pos, "at least one trace is needed");
        return None;
    }
    Some(out)
}

fn decode_trace(d: &mut Decoder, n: &Node) -> Option<TraceSource> {
    let mut m = d.map(n, "trace: `pcap` or `generate`")?;
    let pcap = m.get("pcap");
    let generate = m.get("generate");
    let out = match (pcap, generate) {
        (Some(p), None) => {
            let sha = match m.get("sha256") {
                Some(s) => bitstream::sha256_field(d, s).map(Some),
                None => Some(None),
            };
            let path = d.path(p, true);
            if let (Some(path), Some(Some(sha))) = (&path, &sha) {
                bitstream::check_sha256(d, p, path, sha);
            }
            Some(TraceSource::Pcap { path: path?, sha256: sha? })
        }
        (None, Some(g)) => {
            let mut gm = d.map(g, "trace generation spec")?;
            let template = gm.req(d, "template").and_then(|v| {
                d.choice(
                    v,
                    &[
                        ("forward", TraceTemplate::Forward),
                        ("five_tuple", TraceTemplate::FiveTuple),
                        ("remove_header", TraceTemplate::RemoveHeader),
                        ("checksum", TraceTemplate::Checksum),
                    ],
                )
            });
            let count = gm.req(d, "count").and_then(|v| d.int(v, 1..=10_000_000)).map(|v| v as u32);
            let probe_id = match gm.get("probe_id") {
                Some(v) => d.choice(v, &[("latencylab", ProbeFormat::Latencylab), ("compact", ProbeFormat::Compact)]),
                None => Some(ProbeFormat::Latencylab),
            };
            gm.finish(d, &["template", "count", "probe_id"]);
            Some(TraceSource::Generate { template: template?, count: count?, probe_id: probe_id? })
        }
        (Some(_), Some(_)) => {
            d.error(n.pos, "a trace has either `pcap` or `generate`, not both");
            None
        }
        (None, None) => {
            d.error(n.pos, "a trace needs `pcap: <file>` or `generate: {template, count, probe_id}`");
            None
        }
    };
    m.finish(d, &["pcap", "sha256", "generate"]);
    out
}

fn decode_programs(d: &mut Decoder, n: &Node, traces: &[String]) -> Option<Vec<Program>> {
    let items = d.seq(n)?;
    if items.is_empty() {
        d.error(n.pos, "at least one program is needed");
        return None;
    }
    let mut out = Vec::new();
    let mut ok = true;
    // (trace index) -> (null manifest, where it was named) to check that sharing programs agree.
    let mut nulls: BTreeMap<usize, (PathBuf, Pos)> = BTreeMap::new();
    let mut missing_null = Vec::new();
    for item in items {
        match decode_program(d, item, traces) {
            Some((p, null_at, name_pos)) => {
                if out.iter().any(|q: &Program| q.name == p.name) {
                    d.error(name_pos, format!("duplicate program name `{}`", p.name));
                    ok = false;
                }
                match (null_at, nulls.get(&p.trace)) {
                    (Some(at), Some((first, first_at))) if *first != p.null.manifest => {
                        d.error(
                            at,
                            format!(
                                "trace `{}` is already calibrated by {} (line {}); programs sharing a trace share its null runs",
                                traces[p.trace],
                                first.display(),
                                first_at.line
                            ),
                        );
                        ok = false;
                    }
                    (Some(at), None) => {
                        nulls.insert(p.trace, (p.null.manifest.clone(), at));
                    }
                    (None, _) => missing_null.push((p.trace, item.pos, p.name.clone())),
                    _ => {}
                }
                out.push(p);
            }
            None => ok = false,
        }
    }
    // A program without `null` borrows the calibration of another program with the same trace.
    for (trace, pos, name) in missing_null {
        match nulls.get(&trace) {
            Some((manifest, _)) => {
                let null = out.iter().find(|p| p.null.manifest == *manifest).map(|p| p.null.clone());
                if let (Some(null), Some(p)) = (null, out.iter_mut().find(|p| p.name == name)) {
                    p.null = null;
                }
            }
            None => {
                d.error(
                    pos,
                    format!(
                        "program `{name}`: its trace `{}` has no null calibration (add `null: <null bitstream manifest>`)",
                        traces[trace]
                    ),
                );
                ok = false;
            }
        }
    }
    ok.then_some(out)
}

/// Decode one program; returns it with the position of its `null` key (if given) and of its name.
fn decode_program(d: &mut Decoder, n: &Node, traces: &[String]) -> Option<(Program, Option<Pos>, Pos)> {
    let mut m = d.map(n, "program")?;
    let name_node = m.req(d, "name");
    let name = name_node.and_then(|v| d.ident(v));
    if let (Some(n), Some(at)) = (&name, name_node)
        && n.starts_with("null-")
    {
        d.error(at.pos, format!("program name `{n}`: the prefix `null-` is reserved for null calibration sessions"));
    }
    let bitstream = m.req(d, "bitstream").and_then(|v| load_manifest(d, v));
    if let Some(b) = &bitstream
        && b.null
    {
        d.error(
            n.pos,
            format!("program bitstream {} is a null bitstream; name it under `null:`", b.manifest.display()),
        );
    }
    let table = match m.get("table") {
        Some(v) => d.path(v, true).map(Some),
        None => Some(None),
    };
    let trace = m.req(d, "trace").and_then(|v| {
        let t = d.string(v)?;
        match traces.iter().position(|x| *x == t) {
            Some(i) => Some(i),
            None => {
                let names: Vec<&str> = traces.iter().map(String::as_str).collect();
                let hint = yaml::closest(&t, &names).map(|k| format!(" (did you mean `{k}`?)")).unwrap_or_default();
                d.error(v.pos, format!("undefined trace `{t}`{hint}"));
                None
            }
        }
    });
    let null_node = m.get("null");
    let null = match null_node {
        Some(v) => load_manifest(d, v).and_then(|b| {
            if b.null {
                Some(Some(b))
            } else {
                d.error(
                    v.pos,
                    format!("{} is not a null bitstream (`null: true` in its manifest)", b.manifest.display()),
                );
                None
            }
        }),
        None => Some(None),
    };
    m.finish(d, &["name", "bitstream", "table", "trace", "null"]);
    let bitstream = bitstream?;
    // Without its own `null`, a placeholder is filled in from a program sharing the trace.
    let null = null?.unwrap_or_else(|| bitstream.clone());
    Some((
        Program { name: name?, bitstream, table: table?, trace: trace?, null },
        null_node.map(|v| v.pos),
        name_node.map_or(n.pos, |v| v.pos),
    ))
}

/// Load the bitstream manifest a plan node points to; its problems are reported against the
/// manifest file itself, plus one line at the referencing node.
fn load_manifest(d: &mut Decoder, v: &Node) -> Option<Bitstream> {
    let path = d.path(v, true)?;
    let mut diags = Vec::new();
    let b = load_file(&path, &mut diags, bitstream::decode);
    if !diags.is_empty() {
        d.error(v.pos, format!("invalid bitstream manifest {}", path.display()));
        d.diags.extend(diags);
    }
    b
}

impl Default for Analysis {
    fn default() -> Self {
        Analysis {
            quantiles: vec![5.0, 25.0, 50.0, 75.0, 95.0, 99.0],
            estimator: Estimator::Median,
            exclude_first_after_gap: true,
            hw_clock_check: false,
            hw_clock_tolerance_ns: 5.0,
            bootstrap_resamples: 1000,
            modes: ModeSettings { enabled: true, min_separation_ns: 15.0 },
        }
    }
}

fn decode_analysis(d: &mut Decoder, n: &Node) -> Option<Analysis> {
    let def = Analysis::default();
    let mut m = d.map(n, "analysis")?;
    let quantiles = match m.get("quantiles") {
        Some(v) => d.seq(v).and_then(|items| {
            let qs: Vec<Option<f64>> = items.iter().map(|q| d.number(q, 0.0..=100.0)).collect();
            let qs: Option<Vec<f64>> = qs.into_iter().collect();
            let qs = qs?;
            if qs.windows(2).any(|w| w[0] >= w[1]) {
                d.error(v.pos, "quantiles must be strictly increasing");
                return None;
            }
            Some(qs)
        }),
        None => Some(def.quantiles.clone()),
    };
    let estimator = match m.get("estimator") {
        Some(v) => d.choice(v, &[("median", Estimator::Median)]),
        None => Some(def.estimator),
    };
    let bool_or = |d: &mut Decoder, v: Option<&Node>, default: bool| v.map_or(Some(default), |v| d.boolean(v));
    let exclude = bool_or(d, m.get("exclude_first_after_gap"), def.exclude_first_after_gap);
    let hw = bool_or(d, m.get("hw_clock_check"), def.hw_clock_check);
    let tol = m.get("hw_clock_tolerance_ns").map_or(Some(def.hw_clock_tolerance_ns), |v| d.number(v, 0.0..=1e6));
    let boot = m
        .get("bootstrap_resamples")
        .map_or(Some(def.bootstrap_resamples), |v| d.int(v, 0..=1_000_000).map(|x| x as u32));
    let modes = match m.get("modes") {
        Some(v) => d.map(v, "modes").and_then(|mut mm| {
            let enabled = bool_or(d, mm.get("enabled"), def.modes.enabled);
            let sep = mm.get("min_separation_ns").map_or(Some(def.modes.min_separation_ns), |x| d.number(x, 0.0..=1e6));
            mm.finish(d, &["enabled", "min_separation_ns"]);
            Some(ModeSettings { enabled: enabled?, min_separation_ns: sep? })
        }),
        None => Some(def.modes),
    };
    m.finish(
        d,
        &[
            "quantiles",
            "estimator",
            "exclude_first_after_gap",
            "hw_clock_check",
            "hw_clock_tolerance_ns",
            "bootstrap_resamples",
            "modes",
        ],
    );
    Some(Analysis {
        quantiles: quantiles?,
        estimator: estimator?,
        exclude_first_after_gap: exclude?,
        hw_clock_check: hw?,
        hw_clock_tolerance_ns: tol?,
        bootstrap_resamples: boot?,
        modes: modes?,
    })
}

impl Default for ReportSpec {
    fn default() -> Self {
        ReportSpec { formats: vec![ReportFormat::Html, ReportFormat::Markdown], title: String::new(), template: None }
    }
}

fn decode_report(d: &mut Decoder, n: &Node) -> Option<ReportSpec> {
    let mut m = d.map(n, "report")?;
    let formats = match m.get("formats") {
        Some(v) => d.seq(v).and_then(|items| {
            let fs: Vec<Option<ReportFormat>> = items
                .iter()
                .map(|f| d.choice(f, &[("html", ReportFormat::Html), ("markdown", ReportFormat::Markdown)]))
                .collect();
            fs.into_iter().collect()
        }),
        None => Some(ReportSpec::default().formats),
    };
    let title = m.get("title").map_or(Some(String::new()), |v| d.string(v));
    let template = match m.get("template") {
        Some(v) => d.path(v, true).map(Some),
        None => Some(None),
    };
    m.finish(d, &["formats", "title", "template"]);
    Some(ReportSpec { formats: formats?, title: title?, template: template? })
}

fn decode_regression(d: &mut Decoder, n: &Node) -> Option<Regression> {
    let mut m = d.map(n, "regression")?;
    let baseline = m.req(d, "baseline").and_then(|v| d.path(v, true));
    let (mut med, mut p99, mut ks) = (Some(3.0), Some(10.0), Some(0.1));
    if let Some(t) = m.get("thresholds")
        && let Some(mut tm) = d.map(t, "thresholds")
    {
        if let Some(v) = tm.get("median_shift_ns") {
            med = d.number(v, 0.0..=1e9);
        }
        if let Some(v) = tm.get("p99_shift_ns") {
            p99 = d.number(v, 0.0..=1e9);
        }
        if let Some(v) = tm.get("ks_distance") {
            ks = d.number(v, 0.0..=1.0);
        }
        tm.finish(d, &["median_shift_ns", "p99_shift_ns", "ks_distance"]);
    }
    m.finish(d, &["baseline", "thresholds"]);
    Some(Regression { baseline: baseline?, median_shift_ns: med?, p99_shift_ns: p99?, ks_distance: ks? })
}

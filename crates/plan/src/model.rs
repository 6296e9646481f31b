//! The validated plan: its types and the loading of a plan with everything it names.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::bitstream::Bitstream;
use crate::factors::{FactorName, Factors};
use crate::inventory::Inventory;
use crate::protocol::Protocol;
use crate::testbed_checks::{check_ports, check_reflect, check_sender, check_soak, check_timing};
use crate::yaml::{Decoder, Diagnostic, Node, Value};
use crate::{PortPair, analysis, bitstream, cross_checks, factors, inventory, programs, protocol, traces, yaml};

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
    /// Factors varied within the study (none: one level, as the protocol says).
    pub factors: Factors,
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

/// How a probe id is carried in the payload: the wire format the agent parses.
pub use latency_proto::ProbeFormat;

/// Header template of generated probes, matching a program's traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
    /// INT-MD over UDP or TCP: DSCP marks the INT shim after the transport header, then the INT-MD
    /// header and the source's hop metadata (one hop), then the probe; to the Forward table's hits.
    Int,
    /// INT-MD over GRE: the INT shim after the GRE header, then the INT-MD header, the source's hop
    /// metadata and the original IPv4 packet carrying the probe; to the Forward table's hits.
    IntGre,
}

/// IP version of generated probes (`ip: ipv4 | ipv6`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IpVersion {
    /// IPv4 (20-byte header, no options).
    #[default]
    Ipv4,
    /// IPv6 (40-byte header, no extension headers).
    Ipv6,
}

impl IpVersion {
    /// Every version with its name in plans and on command lines.
    pub const NAMES: [(&'static str, IpVersion); 2] = [("ipv4", IpVersion::Ipv4), ("ipv6", IpVersion::Ipv6)];

    /// The name in plans and on command lines.
    pub fn name(self) -> &'static str {
        word_of(&IpVersion::NAMES, self)
    }
}

/// Transport of generated probes (`transport: udp | tcp`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// UDP (8-byte header).
    #[default]
    Udp,
    /// TCP (20-byte header, PSH+ACK, the probe id as sequence number).
    Tcp,
}

impl Transport {
    /// Every transport with its name in plans and on command lines.
    pub const NAMES: [(&'static str, Transport); 2] = [("udp", Transport::Udp), ("tcp", Transport::Tcp)];

    /// The name in plans and on command lines.
    pub fn name(self) -> &'static str {
        word_of(&Transport::NAMES, self)
    }
}

/// The name `value` has in `names`.
fn word_of<T: PartialEq + Copy>(names: &[(&'static str, T)], value: T) -> &'static str {
    names.iter().find(|(_, v)| *v == value).map_or("?", |(n, _)| n)
}

/// A probe trace.
#[derive(Clone, Debug, Serialize)]
pub struct Trace {
    /// Name (safe identifier).
    pub name: String,
    /// Where the packets come from.
    pub source: TraceSource,
    /// Where the source is named in the plan (`pcap:` or `generate:`).
    #[serde(skip)]
    pub at: yaml::Pos,
}

/// A trace given as a file, generated, or generated in place of a published file that is absent.
#[derive(Clone, Debug, Serialize, Deserialize)]
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
    Generate(Generated),
    /// The plan's pcap is not on this machine: the generated stand-in it declares (same frame
    /// size, VLAN tagging and flows) is replayed instead. Never on real hardware.
    StandIn {
        /// The pcap the plan names, which was not found.
        pcap: PathBuf,
        /// Its sha256, as the plan gives it.
        sha256: Option<String>,
        /// What is replayed instead.
        generate: Generated,
    },
}

/// How a generated trace is made: probes 1..=count of a template's flows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Generated {
    /// Header template.
    pub template: TraceTemplate,
    /// Number of probes.
    pub count: u32,
    /// Probe id format.
    pub probe_id: ProbeFormat,
    /// Bytes of every frame as captured (FCS excluded, a VLAN tag included).
    #[serde(default = "default_frame_len")]
    pub frame_len: u32,
    /// 802.1Q VLAN id of every frame; none: untagged.
    #[serde(default)]
    pub vlan: Option<u16>,
    /// IP version.
    #[serde(default)]
    pub ip: IpVersion,
    /// Transport.
    #[serde(default)]
    pub transport: Transport,
}

fn default_frame_len() -> u32 {
    crate::trace::FRAME_LEN as u32
}

impl TraceSource {
    /// How the replayed trace is generated, unless it is a file.
    pub fn generated(&self) -> Option<&Generated> {
        match self {
            TraceSource::Generate(g) | TraceSource::StandIn { generate: g, .. } => Some(g),
            TraceSource::Pcap { .. } => None,
        }
    }
}

impl Trace {
    /// Number of probes, when known without reading a file.
    pub fn count(&self) -> Option<u32> {
        self.source.generated().map(|g| g.count)
    }

    /// File name of the trace on a host.
    pub fn file_name(&self) -> String {
        format!("{}.pcap", self.name)
    }

    /// In plain words, when a stand-in replaces the plan's pcap.
    pub fn stand_in_note(&self) -> Option<String> {
        stand_in_note(&self.name, &self.source)
    }
}

/// In plain words, when `source` is a stand-in for trace `name`.
pub fn stand_in_note(name: &str, source: &TraceSource) -> Option<String> {
    let TraceSource::StandIn { pcap, generate: g, .. } = source else { return None };
    Some(format!(
        "trace `{name}`: {} is not here, so a generated stand-in replaces it ({}); results with it do not \
         reproduce the published measurement",
        pcap.display(),
        g.describe()
    ))
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
    /// Index into [`Plan::traces`] of the trace the null image is run with (the program's own,
    /// unless the plan names another with `null_trace`).
    pub null_trace: usize,
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
    /// Further differentials by name, each between two capture ports (a hop of a multi-hop path),
    /// analysed like the headline (pipeline − bypass) and calibrated by the null sessions' same
    /// pair.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub port_pairs: BTreeMap<String, PortPair>,
}

impl Analysis {
    /// The quantile levels, the default set when the list is empty.
    pub fn quantile_levels_or_default(&self) -> Vec<f64> {
        if self.quantiles.is_empty() { Analysis::default().quantiles } else { self.quantiles.clone() }
    }
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
    /// Smallest gap (ns) between session-median clusters that separates two modes: a floor under
    /// the evidence rule.
    pub min_separation_ns: f64,
    /// A gap separates two modes only when it is at least this many within-mode standard
    /// deviations of session medians (measured on the null's and the program's sessions).
    #[serde(default = "default_min_gap_sigmas")]
    pub min_gap_sigmas: f64,
}

fn default_min_gap_sigmas() -> f64 {
    crate::defaults::MODE_MIN_GAP_SIGMAS
}

/// Report output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum ReportFormat {
    /// One self-contained HTML file.
    Html,
    /// Markdown (with its figures as separate SVG files).
    #[value(name = "md", alias = "markdown")]
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
#[derive(Clone, Debug, Serialize, Deserialize)]
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

/// Largest schedule a plan may expand to: (programs + null calibrations) × sessions × runs. The
/// paper's study is 400 runs; 100,000 runs of a 40 s replay are 46 days of testbed time, and a
/// larger schedule only exhausts the memory of `plan` and `run`.
pub const MAX_RUNS: u64 = 100_000;

/// Load and validate a plan file and every file it references. `testbed` overrides the plan's.
pub fn load(path: &Path, testbed: Option<&str>) -> Result<(Plan, Option<Inventory>), Invalid> {
    let mut diags = Vec::new();
    let plan = read(path, &mut diags).and_then(|(source, root)| plan_from(path, source, &root, &mut diags));
    with_inventory(plan, testbed, diags)
}

/// A validated YAML file of any kind `orchestrate validate` takes.
#[derive(Debug)]
pub enum Document {
    /// A study plan, with the inventory it names (none on the simulated testbed).
    Plan(Box<Plan>, Option<Box<Inventory>>),
    /// A testbed inventory.
    Inventory(Box<Inventory>),
    /// A bitstream manifest.
    Bitstream(Box<Bitstream>),
}

impl Document {
    /// What the file is, for `validate`'s `FILE: ok (…)` line.
    pub fn summary(&self) -> String {
        let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
        match self {
            Document::Plan(p, _) => format!("study `{}`, {}", p.study, plural(p.programs.len(), "program")),
            Document::Inventory(inv) => {
                let own = inv.actions.iter().filter(|(a, t)| t.source() != a.default_template()).count();
                format!(
                    "inventory `{}`, {}, {} overridden",
                    inv.name,
                    plural(inv.receiver.fpga_pci.len(), "FPGA function"),
                    plural(own, "action")
                )
            }
            Document::Bitstream(b) => format!(
                "bitstream manifest `{}`, {}{}, image {}",
                b.name,
                if b.null { "null image, " } else { "" },
                match b.programming {
                    bitstream::Programming::Qspi => "qspi",
                    bitstream::Programming::Jtag => "jtag",
                },
                if b.present { "present, sha256 verified" } else { "not present" }
            ),
        }
    }
}

/// Load and validate a plan, an inventory or a bitstream manifest, told apart by their top-level
/// keys (a plan's `study`/`programs`, an inventory's `sender`/`receiver`, a manifest's
/// `board`/`programming`); a file with none of them is read as a plan.
pub fn load_any(path: &Path) -> Result<Document, Invalid> {
    let mut diags = Vec::new();
    let Some((source, root)) = read(path, &mut diags) else { return Err(Invalid(diags)) };
    let has = |keys: &[&str]| match &root.value {
        Value::Map(entries) => entries.iter().any(|(_, k, _)| keys.contains(&k.as_str())),
        _ => false,
    };
    let decoded = if has(&["study", "programs", "protocol", "traces", "testbed"]) {
        None
    } else if has(&["sender", "receiver"]) {
        Some(decode(path, &root, &mut diags, inventory::decode).map(|i| Document::Inventory(Box::new(i))))
    } else if has(&["board", "programming", "clock_mhz", "vendor_bound_cycles"]) {
        Some(decode(path, &root, &mut diags, bitstream::decode).map(|b| Document::Bitstream(Box::new(b))))
    } else {
        None
    };
    match decoded {
        None => {
            let plan = plan_from(path, source, &root, &mut diags);
            with_inventory(plan, None, diags).map(|(p, i)| Document::Plan(Box::new(p), i.map(Box::new)))
        }
        Some(doc) => {
            diags.sort();
            diags.dedup();
            doc.filter(|_| diags.is_empty()).ok_or(Invalid(diags))
        }
    }
}

/// The plan's inventory loaded and checked against it; every problem found, sorted.
fn with_inventory(
    plan: Option<Plan>,
    testbed: Option<&str>,
    mut diags: Vec<Diagnostic>,
) -> Result<(Plan, Option<Inventory>), Invalid> {
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
        check_reflect(p, inv, &mut diags);
        check_timing(p, inv, &mut diags);
        check_soak(p, inv, &mut diags);
        check_sender(p, inv, &mut diags);
        check_ports(p, inv, &mut diags);
    }
    diags.sort();
    diags.dedup();
    match plan {
        Some(p) if diags.is_empty() => Ok((p, inventory)),
        _ => Err(Invalid(diags)),
    }
}

/// Read (within [`yaml::MAX_YAML_BYTES`]) and parse one YAML file.
fn read(path: &Path, diags: &mut Vec<Diagnostic>) -> Option<(String, Node)> {
    let parsed = yaml::read_source(path).and_then(|src| yaml::parse(path, &src).map(|root| (src, root)));
    parsed.map_err(|e| diags.push(e)).ok()
}

/// Decode a parsed file, appending its problems to `diags`; the value only when it has none.
fn decode<T>(
    path: &Path,
    root: &Node,
    diags: &mut Vec<Diagnostic>,
    decode: impl FnOnce(&mut Decoder, &Node) -> Option<T>,
) -> Option<T> {
    let mut d = Decoder::new(path);
    let out = decode(&mut d, root);
    let ok = d.diags.is_empty();
    diags.append(&mut d.diags);
    out.filter(|_| ok)
}

/// Read and decode one YAML file, appending its problems to `diags`.
pub fn load_file<T>(
    path: &Path,
    diags: &mut Vec<Diagnostic>,
    decode_root: impl FnOnce(&mut Decoder, &Node) -> Option<T>,
) -> Option<T> {
    let (_, root) = read(path, diags)?;
    decode(path, &root, diags, decode_root)
}

fn plan_from(path: &Path, source: String, root: &Node, diags: &mut Vec<Diagnostic>) -> Option<Plan> {
    let hash = digest::sha256_hex(source.as_bytes());
    decode(path, root, diags, |d, root| decode_plan(d, root, source, hash))
}

pub(crate) fn decode_plan(d: &mut Decoder, root: &Node, source: String, hash: String) -> Option<Plan> {
    let mut m = d.map(root, "plan")?;
    let study = m.required(d, "study", Decoder::ident);
    let description = m.or(d, "description", String::new(), Decoder::string);
    let testbed = m.required(d, "testbed", |d, n| {
        let s = d.string(n)?;
        if s == "sim" { Some(TestbedRef::Sim) } else { d.path(n, true).map(TestbedRef::Inventory) }
    });
    let protocol_node = m.req(d, "protocol");
    let protocol = protocol_node.and_then(|n| protocol::decode_protocol(d, n));
    let named_traces = m.required(d, "traces", traces::decode_traces);
    let names: Vec<String> = named_traces.iter().flatten().map(|(name, ..)| name.clone()).collect();
    let programs = m.required(d, "programs", |d, n| programs::decode_programs(d, n, &names));
    let traces: Option<Vec<Trace>> = named_traces.and_then(|ts| {
        ts.into_iter().map(|(name, source, at)| source.map(|source| Trace { name, source, at })).collect()
    });
    let factor_list = m.optional(d, "factors", factors::decode_factors);
    let design = m.or(d, "design", factors::Design::Cross, |d, v| d.choice(v, &factors::DESIGNS));
    let order = m.or(d, "order", factors::Order::SessionLevelRun, |d, v| d.choice(v, &factors::ORDERS));
    let at_analysis = m.at("analysis").unwrap_or(root.pos);
    let analysis = m.or(d, "analysis", Analysis::default(), analysis::decode_analysis);
    let report = m.or(d, "report", ReportSpec::default(), analysis::decode_report);
    let regression = m.optional(d, "regression", analysis::decode_regression);
    m.done(d);
    if let (Some(p), Some(a)) = (&protocol, &analysis)
        && a.hw_clock_check
        && !p.reflect
    {
        d.error(root.pos, "`analysis.hw_clock_check` needs `protocol.reflect: true`");
    }
    if let (Some(p), Some(a)) = (&protocol, &analysis) {
        cross_checks::port_pairs_with_protocol(d, at_analysis, p, a);
    }
    let factor_list = factor_list.flatten().unwrap_or_default();
    let zip_ok = design != Some(factors::Design::Zip) || factors::check_zip(d, &factor_list);
    let used = match (&traces, &programs) {
        (Some(traces), Some(progs)) if !factor_list.is_empty() => factors::replayed(d, traces, progs, &factor_list),
        _ => Vec::new(),
    };
    let sized = match (&traces, factor_list.iter().find(|f| f.name == FactorName::FrameSize)) {
        (Some(traces), Some(f)) => factors::sized_traces(d, traces, &used, f),
        _ => Some(Vec::new()),
    };
    cross_checks::factors_with_protocol(d, protocol.as_ref(), &factor_list, order);
    let factors = Factors { factors: factor_list, design: design?, order: order? };
    if let (Some(p), Some(at)) = (&protocol, protocol_node)
        && !cross_checks::adaptive_order(d, at, p, factors.order)
    {
        return None;
    }
    let mut traces = traces?;
    traces.extend(sized?);
    if !zip_ok {
        return None;
    }
    if let (Some(p), Some(progs), Some(at)) = (&protocol, &programs, protocol_node) {
        cross_checks::size(d, at, p, progs, factors.levels().len().max(1));
    }
    Some(Plan {
        path: d.file().to_path_buf(),
        hash,
        source,
        study: study?,
        description: description?,
        testbed: testbed?,
        protocol: protocol?,
        factors,
        traces,
        programs: programs?,
        analysis: analysis?,
        report: report?,
        regression: regression?,
    })
}

//! The validated plan: the [`Plan`] that joins a study's sections, and the decoding of a plan
//! file's top level, which decodes every section and checks them against each other.

use std::path::PathBuf;

use serde::Serialize;

use crate::analysis::{self, Analysis, Regression, ReportSpec, TrendGates};
use crate::factors::{self, FactorName, FactorValue, Factors, Level, sized_trace_name};
use crate::programs::{self, Program};
use crate::protocol::{self, Protocol};
use crate::trace_spec::Trace;
use crate::yaml::{Decoder, Node};
use crate::{cross_checks, traces};

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
    /// How the nightly trend judges the plan's series (`trend:`; none: the defaults).
    pub trend: Option<TrendGates>,
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

impl Plan {
    /// The trace replayed at `level` in place of trace `trace`: the level's `trace` if it sets
    /// one, else `trace`; made at the level's frame size if it sets one.
    pub fn level_trace(&self, trace: usize, level: Option<&Level>) -> usize {
        let named = |name: &str| self.traces.iter().position(|t| t.name == name);
        let base = match level.and_then(|l| l.value(FactorName::Trace)) {
            Some(FactorValue::Word(name)) => named(name).unwrap_or(trace),
            _ => trace,
        };
        let Some(size) = level.and_then(|l| l.get(FactorName::FrameSize)) else { return base };
        named(&sized_trace_name(&self.traces[base].name, size)).unwrap_or(base)
    }

    /// The value a factor takes where no level sets it (null calibrations of a level that does not
    /// change the traffic): the protocol's pacing and burst (the factors that change the traffic
    /// are always set by the level).
    pub fn base_value(&self, factor: FactorName) -> u32 {
        match factor {
            FactorName::PacingPps => self.protocol.pacing_pps,
            FactorName::Burst => self.protocol.burst,
            FactorName::FrameSize | FactorName::Trace | FactorName::Var(_) => 0,
        }
    }
}

/// A plan as the list of its traces (what [`crate::trace::materialize`] makes local).
impl AsRef<[Trace]> for Plan {
    fn as_ref(&self) -> &[Trace] {
        &self.traces
    }
}

/// Decode a plan file's root: every section, then the checks across them. `source` and `hash` are
/// the file's text and its sha256, kept in the plan.
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
    let at_analysis = m.at("analysis").unwrap_or(root.pos);
    let analysis = m.or(d, "analysis", Analysis::default(), analysis::decode_analysis);
    let calibrated = analysis.as_ref().is_none_or(|a| a.calibration == analysis::Calibration::NullImage);
    let adaptive = protocol.as_ref().is_some_and(|p| p.adaptive.is_some());
    let programs = m.required(d, "programs", |d, n| programs::decode_programs(d, n, &names, calibrated, adaptive));
    let traces: Option<Vec<Trace>> = named_traces.and_then(|ts| {
        ts.into_iter().map(|(name, source, at)| source.map(|source| Trace { name, source, at })).collect()
    });
    let factor_list = m.optional(d, "factors", factors::decode_factors);
    let design = m.or(d, "design", factors::Design::Cross, |d, v| d.choice(v, &factors::Design::WORDS));
    let order = m.or(d, "order", factors::Order::SessionLevelRun, |d, v| d.choice(v, &factors::Order::WORDS));
    let report = m.or(d, "report", ReportSpec::default(), analysis::decode_report);
    let regression = m.optional(d, "regression", analysis::decode_regression);
    let trend =
        m.optional(d, "trend", |d, n| analysis::decode_trend(d, n, regression.as_ref().and_then(|r| r.as_ref())));
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
        trend: trend?,
    })
}

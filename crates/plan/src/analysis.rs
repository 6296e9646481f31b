//! Decoding of a plan's `analysis:`, `report:` and `regression:` sections, and the port pairs
//! `analysis:` declares.

use std::collections::BTreeMap;

use super::yaml::{Decoder, Node};
use super::{Analysis, Estimator, ModeSettings, Regression, ReportFormat, ReportSpec};
use crate::defaults;

/// Two capture ports (0 pipeline, 1 bypass, 2, 3, … further ones): the differential is
/// `t_to − t_from` of each probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PortPair {
    /// The port a probe reaches first.
    pub from: u8,
    /// The port it reaches later.
    pub to: u8,
}

impl Analysis {
    /// Ports a capture needs for the headline and every port pair: 2 and up.
    pub fn ports(&self) -> usize {
        self.port_pairs.values().map(|p| usize::from(p.from.max(p.to)) + 1).max().unwrap_or(2).max(2)
    }
}

impl Default for Analysis {
    fn default() -> Self {
        Analysis {
            quantiles: defaults::QUANTILE_LEVELS.to_vec(),
            estimator: Estimator::Median,
            exclude_first_after_gap: true,
            hw_clock_check: false,
            hw_clock_tolerance_ns: defaults::HW_CLOCK_TOLERANCE_NS,
            bootstrap_resamples: defaults::BOOTSTRAP_RESAMPLES,
            modes: ModeSettings {
                enabled: true,
                min_separation_ns: defaults::MODE_MIN_SEPARATION_NS,
                min_gap_sigmas: defaults::MODE_MIN_GAP_SIGMAS,
            },
            port_pairs: BTreeMap::new(),
        }
    }
}

fn decode_quantiles(d: &mut Decoder, v: &Node) -> Option<Vec<f64>> {
    let items = d.seq(v)?;
    let qs: Vec<Option<f64>> = items.iter().map(|q| d.number(q, 0.0..=100.0)).collect();
    let qs: Vec<f64> = qs.into_iter().collect::<Option<_>>()?;
    if qs.windows(2).any(|w| w[0] >= w[1]) {
        d.error(v.pos, "quantiles must be strictly increasing");
        return None;
    }
    Some(qs)
}

fn decode_modes(d: &mut Decoder, v: &Node, def: ModeSettings) -> Option<ModeSettings> {
    let mut m = d.map(v, "modes")?;
    let enabled = m.or(d, "enabled", def.enabled, Decoder::boolean);
    let sep = m.or(d, "min_separation_ns", def.min_separation_ns, |d, x| d.number(x, 0.0..=1e6));
    let sigmas = m.or(d, "min_gap_sigmas", def.min_gap_sigmas, |d, x| d.number(x, 0.0..=1e6));
    m.done(d);
    Some(ModeSettings { enabled: enabled?, min_separation_ns: sep?, min_gap_sigmas: sigmas? })
}

/// Decode `analysis:`.
pub(super) fn decode_analysis(d: &mut Decoder, n: &Node) -> Option<Analysis> {
    let def = Analysis::default();
    let mut m = d.map(n, "analysis")?;
    let quantiles = m.or(d, "quantiles", def.quantiles, decode_quantiles);
    let estimator = m.or(d, "estimator", def.estimator, |d, v| d.choice(v, &[("median", Estimator::Median)]));
    let exclude = m.or(d, "exclude_first_after_gap", def.exclude_first_after_gap, Decoder::boolean);
    let hw = m.or(d, "hw_clock_check", def.hw_clock_check, Decoder::boolean);
    let tol = m.or(d, "hw_clock_tolerance_ns", def.hw_clock_tolerance_ns, |d, v| d.number(v, 0.0..=1e6));
    let boot = m.or(d, "bootstrap_resamples", def.bootstrap_resamples, |d, v| d.uint(v, 0..=1_000_000));
    let modes = m.or(d, "modes", def.modes, |d, v| decode_modes(d, v, def.modes));
    let port_pairs = m.or(d, "port_pairs", BTreeMap::new(), decode_port_pairs);
    m.done(d);
    Some(Analysis {
        quantiles: quantiles?,
        estimator: estimator?,
        exclude_first_after_gap: exclude?,
        hw_clock_check: hw?,
        hw_clock_tolerance_ns: tol?,
        bootstrap_resamples: boot?,
        modes: modes?,
        port_pairs: port_pairs?,
    })
}

/// `port_pairs: {name: [from, to]}`.
fn decode_port_pairs(d: &mut Decoder, n: &Node) -> Option<BTreeMap<String, PortPair>> {
    let mut m = d.map(n, "port pairs by name: {name: [from, to]}")?;
    let mut out = BTreeMap::new();
    let mut ok = true;
    for (name, v) in m.names(d) {
        match decode_port_pair(d, v) {
            Some(p) => {
                out.insert(name.to_string(), p);
            }
            None => ok = false,
        }
    }
    ok.then_some(out)
}

fn decode_port_pair(d: &mut Decoder, v: &Node) -> Option<PortPair> {
    let items = d.seq(v)?;
    let ports: Vec<Option<u8>> = items.iter().map(|p| d.uint(p, 0..=15)).collect();
    let ports: Vec<u8> = ports.into_iter().collect::<Option<_>>()?;
    match ports[..] {
        [from, to] if from != to => Some(PortPair { from, to }),
        _ => {
            d.error(
                v.pos,
                "a port pair is [from, to]: two different capture ports (0 pipeline, 1 bypass, 2, 3, … further hops)",
            );
            None
        }
    }
}

impl Default for ReportSpec {
    fn default() -> Self {
        ReportSpec { formats: vec![ReportFormat::Html, ReportFormat::Markdown], title: String::new(), template: None }
    }
}

const FORMATS: &[(&str, ReportFormat)] = &[("html", ReportFormat::Html), ("markdown", ReportFormat::Markdown)];

/// Decode `report:`.
pub(super) fn decode_report(d: &mut Decoder, n: &Node) -> Option<ReportSpec> {
    let mut m = d.map(n, "report")?;
    let formats = m.or(d, "formats", ReportSpec::default().formats, |d, v| {
        let items = d.seq(v)?;
        let fs: Vec<Option<ReportFormat>> = items.iter().map(|f| d.choice(f, FORMATS)).collect();
        fs.into_iter().collect()
    });
    let title = m.or(d, "title", String::new(), Decoder::string);
    let template = m.optional(d, "template", |d, v| d.path(v, true));
    m.done(d);
    Some(ReportSpec { formats: formats?, title: title?, template: template? })
}

/// Default thresholds of a regression check: median shift (ns), p99 shift (ns), KS distance.
const THRESHOLDS: [f64; 3] = [defaults::MEDIAN_SHIFT_NS, defaults::P99_SHIFT_NS, defaults::KS_DISTANCE];

fn decode_thresholds(d: &mut Decoder, t: &Node) -> Option<[f64; 3]> {
    let mut m = d.map(t, "thresholds")?;
    let med = m.or(d, "median_shift_ns", THRESHOLDS[0], |d, v| d.number(v, 0.0..=1e9));
    let p99 = m.or(d, "p99_shift_ns", THRESHOLDS[1], |d, v| d.number(v, 0.0..=1e9));
    let ks = m.or(d, "ks_distance", THRESHOLDS[2], |d, v| d.number(v, 0.0..=1.0));
    m.done(d);
    Some([med?, p99?, ks?])
}

/// Decode `regression:`.
pub(super) fn decode_regression(d: &mut Decoder, n: &Node) -> Option<Regression> {
    let mut m = d.map(n, "regression")?;
    let baseline = m.required(d, "baseline", |d, v| d.path(v, true));
    let thresholds = m.or(d, "thresholds", THRESHOLDS, decode_thresholds);
    m.done(d);
    let [median_shift_ns, p99_shift_ns, ks_distance] = thresholds?;
    Some(Regression { baseline: baseline?, median_shift_ns, p99_shift_ns, ks_distance })
}

//! A plan's `analysis:`, `report:` and `regression:` sections (the statistical settings with the
//! port pairs they analyse, the report settings, the regression check): their types and their
//! decoding.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::defaults;
use crate::yaml::{Decoder, Node};

/// Two capture ports (0 pipeline, 1 bypass, 2, 3, … further ones): the differential is
/// `t_to − t_from` of each probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortPair {
    /// The port a probe reaches first.
    pub from: u8,
    /// The port it reaches later.
    pub to: u8,
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
    /// What calibrates the differentials: the null image's sessions (the paper's), or nothing.
    #[serde(default)]
    pub calibration: Calibration,
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

latency_proto::words! {
/// The per-probe estimator over runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Estimator {
    /// Median over runs.
    Median = "median",
}
}

latency_proto::words! {
/// What a program's differentials are calibrated by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Calibration {
    /// The null image run with the program's trace (its own sessions): the paper's, the default.
    #[default]
    NullImage = "null_image",
    /// Nothing: the figures are the raw differentials, the measurement path's offset δ included,
    /// for judging a testbed's programs against themselves night after night without the null's
    /// own bring-up scatter (no null sessions are run).
    None = "none",
}
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
    /// deviations of session medians (measured on the program's own sessions).
    #[serde(default = "default_min_gap_sigmas")]
    pub min_gap_sigmas: f64,
}

fn default_min_gap_sigmas() -> f64 {
    defaults::MODE_MIN_GAP_SIGMAS
}

latency_proto::words! {
/// Report output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    /// One self-contained HTML file.
    Html = "html",
    /// Markdown (with its figures as separate SVG files).
    #[value(name = "md", alias = "markdown")]
    Markdown = "markdown",
}
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
    /// Whether the quantiles judged are the noise-corrected ones (the default) or those before
    /// the correction (`latency_raw_ns`), whose noise is the same in two studies of as many runs
    /// per session however many sessions each pools, where the correction's residual is not.
    #[serde(default = "yes")]
    pub noise_corrected: bool,
}

fn yes() -> bool {
    true
}

/// How `nightly` and `trend` judge this plan's series night to night (`trend:`): a change is a
/// regression (or an improvement) when its shift exceeds the smallest that matters and
/// `noise_k` times the series' night-to-night noise, and its interval excludes zero.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TrendGates {
    /// Smallest shift of a median that matters, ns (default: `regression`'s, else 3).
    pub median_shift_ns: f64,
    /// Smallest shift of a p99 that matters, ns (default: `regression`'s, else 10).
    pub p99_shift_ns: f64,
    /// How many times the night-to-night noise a shift must exceed (default 3).
    pub noise_k: f64,
    /// Nights a series needs before it is judged (default 5).
    pub min_nights: u32,
    /// Re-measure the programs of a night that regressed before alerting (none: alert at once).
    pub confirm: Option<Confirm>,
}

/// `trend.confirm`: the confirmation study `nightly` runs when a night regresses.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Confirm {
    /// Sessions of each regressed program (default: the plan's).
    pub sessions: Option<u32>,
    /// Longest the confirmation may take, by the plan's predicted time, minutes: a confirmation
    /// predicted longer is not run, and the regression is reported unconfirmed.
    pub max_minutes: f64,
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
            calibration: Calibration::NullImage,
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
    let estimator = m.or(d, "estimator", def.estimator, |d, v| d.choice(v, &Estimator::WORDS));
    let exclude = m.or(d, "exclude_first_after_gap", def.exclude_first_after_gap, Decoder::boolean);
    let hw = m.or(d, "hw_clock_check", def.hw_clock_check, Decoder::boolean);
    let tol = m.or(d, "hw_clock_tolerance_ns", def.hw_clock_tolerance_ns, |d, v| d.number(v, 0.0..=1e6));
    let boot = m.or(d, "bootstrap_resamples", def.bootstrap_resamples, |d, v| d.uint(v, 0..=1_000_000));
    let modes = m.or(d, "modes", def.modes, |d, v| decode_modes(d, v, def.modes));
    let port_pairs = m.or(d, "port_pairs", BTreeMap::new(), decode_port_pairs);
    let calibration = m.or(d, "calibration", def.calibration, |d, v| d.choice(v, &Calibration::WORDS));
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
        calibration: calibration?,
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

/// Decode `report:`.
pub(super) fn decode_report(d: &mut Decoder, n: &Node) -> Option<ReportSpec> {
    let mut m = d.map(n, "report")?;
    let formats = m.or(d, "formats", ReportSpec::default().formats, |d, v| {
        let items = d.seq(v)?;
        let fs: Vec<Option<ReportFormat>> = items.iter().map(|f| d.choice(f, &ReportFormat::WORDS)).collect();
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

/// Decode `trend:`; the thresholds default to `regression`'s.
pub(super) fn decode_trend(d: &mut Decoder, n: &Node, regression: Option<&Regression>) -> Option<TrendGates> {
    let mut m = d.map(n, "trend")?;
    let [med0, p990] = regression.map_or([THRESHOLDS[0], THRESHOLDS[1]], |r| [r.median_shift_ns, r.p99_shift_ns]);
    let med = m.or(d, "median_shift_ns", med0, |d, v| d.number(v, 0.0..=1e9));
    let p99 = m.or(d, "p99_shift_ns", p990, |d, v| d.number(v, 0.0..=1e9));
    let k = m.or(d, "noise_k", 3.0, |d, v| d.number(v, 0.0..=100.0));
    let min_nights = m.or(d, "min_nights", 5, |d, v| d.uint(v, 2..=10_000));
    let confirm = m.optional(d, "confirm", |d, v| {
        let mut c = d.map(v, "confirm")?;
        let sessions = c.optional(d, "sessions", |d, v| d.uint(v, 1..=1000));
        let max_minutes = c.or(d, "max_minutes", 60.0, |d, v| d.number(v, 0.0..=1e6));
        c.done(d);
        Some(Confirm { sessions: sessions?, max_minutes: max_minutes? })
    });
    m.done(d);
    Some(TrendGates {
        median_shift_ns: med?,
        p99_shift_ns: p99?,
        noise_k: k?,
        min_nights: min_nights?,
        confirm: confirm?,
    })
}

/// Decode `regression:`.
pub(super) fn decode_regression(d: &mut Decoder, n: &Node) -> Option<Regression> {
    let mut m = d.map(n, "regression")?;
    let baseline = m.required(d, "baseline", |d, v| d.path(v, false));
    let thresholds = m.or(d, "thresholds", THRESHOLDS, decode_thresholds);
    let noise_corrected = m.or(d, "noise_corrected", true, Decoder::boolean);
    m.done(d);
    let [median_shift_ns, p99_shift_ns, ks_distance] = thresholds?;
    Some(Regression {
        baseline: baseline?,
        median_shift_ns,
        p99_shift_ns,
        ks_distance,
        noise_corrected: noise_corrected?,
    })
}

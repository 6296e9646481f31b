//! Factors of a study: named lists of values (`factors: {pacing_pps: [...], frame_size: [...]}`)
//! combined into levels, each measured like a study without factors.
//!
//! `design: cross` (the default) takes every combination, the first factor varying slowest;
//! `design: zip` takes the lists' i-th values together. `order` says how levels and sessions nest:
//! `session_level_run` (the default: every bring-up measures every level, runs innermost, so that a
//! reset mode, which is drawn per bring-up, is the same for all levels it is compared across) or
//! `level_session_run` (each level has its own bring-ups).

use serde::{Deserialize, Serialize};

use super::yaml::{Decoder, Node, Pos};
use super::{Generated, Plan, Program, Trace, TraceSource};
use crate::trace::Shape;

/// What a factor varies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FactorName {
    /// Replay rate, packets per second.
    PacingPps,
    /// Bytes of every generated frame (the traffic changes: null calibration per level).
    FrameSize,
    /// Probes sent back to back at each interval.
    Burst,
}

impl FactorName {
    /// Every factor, as named in plans.
    pub const ALL: [FactorName; 3] = [FactorName::PacingPps, FactorName::FrameSize, FactorName::Burst];

    /// The name in plans, paths and summaries.
    pub fn name(self) -> &'static str {
        match self {
            FactorName::PacingPps => "pacing_pps",
            FactorName::FrameSize => "frame_size",
            FactorName::Burst => "burst",
        }
    }

    /// Whether the factor changes the probes themselves, so that the null calibration is measured
    /// at each of its values (else it is shared by every level).
    pub fn changes_traffic(self) -> bool {
        matches!(self, FactorName::FrameSize)
    }

    fn range(self) -> std::ops::RangeInclusive<i64> {
        match self {
            FactorName::PacingPps => 1..=100_000_000,
            FactorName::FrameSize => 1..=i64::from(crate::trace::MAX_FRAME_LEN),
            FactorName::Burst => 1..=10_000,
        }
    }
}

/// How factor values are combined.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Design {
    /// Every combination.
    #[default]
    Cross,
    /// The i-th value of every factor together (lists of equal length).
    Zip,
}

/// How levels and sessions nest, outer to inner.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// Each session measures every level; runs innermost.
    #[default]
    SessionLevelRun,
    /// Each level has its own sessions.
    LevelSessionRun,
}

/// One factor and its values.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Factor {
    /// What it varies.
    pub name: FactorName,
    /// Its values, in plan order.
    pub values: Vec<u32>,
    /// Where the factor is named in the plan.
    #[serde(skip)]
    pub at: Pos,
}

/// A plan's factors.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Factors {
    /// In plan order (the first varies slowest in a cross design).
    pub factors: Vec<Factor>,
    /// How values combine.
    pub design: Design,
    /// How levels and sessions nest.
    pub order: Order,
}

/// One combination of factor values.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Level {
    /// Each factor's value, in plan order.
    pub values: Vec<(FactorName, u32)>,
}

impl Level {
    /// The stable name, also the level's folders in the results tree: `pacing_pps=500/frame_size=128`.
    pub fn name(&self) -> String {
        let parts: Vec<String> = self.values.iter().map(|(f, v)| format!("{}={v}", f.name())).collect();
        parts.join("/")
    }

    /// In words: `pacing_pps 500, frame_size 128`.
    pub fn label(&self) -> String {
        let parts: Vec<String> = self.values.iter().map(|(f, v)| format!("{} {v}", f.name())).collect();
        parts.join(", ")
    }

    /// The value of `factor`, if the level sets it.
    pub fn get(&self, factor: FactorName) -> Option<u32> {
        self.values.iter().find(|(f, _)| *f == factor).map(|(_, v)| *v)
    }

    /// The level the null calibration of this level is measured at: the same traffic, every other
    /// factor at its base value (`base` gives it).
    pub fn calibration(&self, base: impl Fn(FactorName) -> u32) -> Level {
        let values = self.values.iter().map(|&(f, v)| (f, if f.changes_traffic() { v } else { base(f) })).collect();
        Level { values }
    }
}

impl Factors {
    /// Whether the plan declares no factor.
    pub fn is_empty(&self) -> bool {
        self.factors.is_empty()
    }

    /// The factor varying `name`, if declared.
    pub fn get(&self, name: FactorName) -> Option<&Factor> {
        self.factors.iter().find(|f| f.name == name)
    }

    /// Every level in order; none without factors.
    pub fn levels(&self) -> Vec<Level> {
        if self.factors.is_empty() {
            return Vec::new();
        }
        match self.design {
            Design::Zip => (0..self.factors[0].values.len())
                .map(|i| Level { values: self.factors.iter().map(|f| (f.name, f.values[i])).collect() })
                .collect(),
            Design::Cross => {
                let mut out = vec![Level { values: Vec::new() }];
                for f in &self.factors {
                    out = out
                        .into_iter()
                        .flat_map(|l| {
                            f.values.iter().map(move |&v| {
                                let mut values = l.values.clone();
                                values.push((f.name, v));
                                Level { values }
                            })
                        })
                        .collect();
                }
                out
            }
        }
    }
}

/// Decode `factors:` (the plan's `design` and `order` are read beside it). Every problem is
/// reported; the factors without one are returned, so that what depends on them is checked too.
pub(super) fn decode_factors(d: &mut Decoder, n: &Node) -> Option<Vec<Factor>> {
    let mut m = d.map(n, "factors: name → list of values")?;
    let names = FactorName::ALL.map(FactorName::name);
    let (entries, _) = m.among(d, &names, "factor");
    if entries.is_empty() {
        d.error(n.pos, "`factors` names no factor: name at least one, or leave the key out");
    }
    let mut out = Vec::new();
    for (i, v) in entries {
        let name = FactorName::ALL[i];
        let Some(items) = d.seq(v) else { continue };
        let values: Vec<Option<u32>> = items.iter().map(|x| d.uint(x, name.range())).collect();
        let valid: Vec<u32> = values.iter().flatten().copied().collect();
        if let Some(k) = (1..valid.len()).find(|&k| valid[..k].contains(&valid[k])) {
            d.error(v.pos, format!("factor `{}` repeats the value {}", name.name(), valid[k]));
        }
        if items.is_empty() {
            d.error(v.pos, format!("factor `{}` needs at least one value", name.name()));
        } else if valid.len() == values.len() {
            out.push(Factor { name, values: valid, at: v.pos });
        }
    }
    Some(out)
}

/// The plan's `design` and `order` words.
pub(super) const DESIGNS: [(&str, Design); 2] = [("cross", Design::Cross), ("zip", Design::Zip)];
pub(super) const ORDERS: [(&str, Order); 2] =
    [("session_level_run", Order::SessionLevelRun), ("level_session_run", Order::LevelSessionRun)];

/// Check a zip design's lists are of one length; the error is at the first list that differs.
pub(super) fn check_zip(d: &mut Decoder, factors: &[Factor]) -> bool {
    let Some(first) = factors.first() else { return true };
    for f in &factors[1..] {
        if f.values.len() != first.values.len() {
            d.error(
                f.at,
                format!(
                    "`design: zip` takes the lists' values together, but `{}` has {} values and `{}` {}",
                    f.name.name(),
                    f.values.len(),
                    first.name.name(),
                    first.values.len()
                ),
            );
            return false;
        }
    }
    true
}

/// The name of trace `base` made with frames of `frame_size` bytes (a `frame_size` level's).
pub fn sized_trace_name(base: &str, frame_size: u32) -> String {
    format!("{base}-{frame_size}B")
}

/// For a `frame_size` factor: each trace of the programs and their null calibrations made at each
/// frame size, as traces of their own. Only generated traces can be made at another size.
pub(super) fn sized_traces(d: &mut Decoder, traces: &[Trace], programs: &[Program], f: &Factor) -> Option<Vec<Trace>> {
    let mut used: Vec<usize> = programs.iter().flat_map(|p| [p.trace, p.null_trace]).collect();
    used.sort_unstable();
    used.dedup();
    let mut out = Vec::new();
    let mut ok = true;
    for t in used.into_iter().map(|i| &traces[i]) {
        let TraceSource::Generate(g) = &t.source else {
            d.error(
                f.at,
                format!(
                    "factor `frame_size`: trace `{}` is not generated, so it cannot be made at other sizes",
                    t.name
                ),
            );
            ok = false;
            continue;
        };
        for &size in &f.values {
            let shape = Shape { frame_len: Some(size), ..Shape::of(g) };
            match Generated::with(g.template, g.count, g.probe_id, shape) {
                Ok(sized) => out.push(Trace {
                    name: sized_trace_name(&t.name, size),
                    source: TraceSource::Generate(sized),
                    at: t.at,
                }),
                Err(refused) => {
                    d.error(f.at, format!("factor `frame_size`: trace `{}`: {refused}", t.name));
                    ok = false;
                }
            }
        }
    }
    ok.then_some(out)
}

impl Plan {
    /// The trace replayed at `level` in place of trace `trace`: the same, or its sized copy.
    pub fn level_trace(&self, trace: usize, level: Option<&Level>) -> usize {
        let Some(size) = level.and_then(|l| l.get(FactorName::FrameSize)) else { return trace };
        let name = sized_trace_name(&self.traces[trace].name, size);
        self.traces.iter().position(|t| t.name == name).unwrap_or(trace)
    }

    /// The value a factor takes where no level sets it (null calibrations of a level that does not
    /// change the traffic): the protocol's pacing; a frame size is always set by traffic levels.
    pub fn base_value(&self, factor: FactorName) -> u32 {
        match factor {
            FactorName::PacingPps => self.protocol.pacing_pps,
            FactorName::FrameSize => 0,
            FactorName::Burst => self.protocol.burst,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn factor(name: FactorName, values: &[u32]) -> Factor {
        Factor { name, values: values.to_vec(), at: Pos::default() }
    }

    #[test]
    fn cross_takes_every_combination_the_first_factor_slowest_and_zip_takes_them_together() {
        let mut f = Factors {
            factors: vec![factor(FactorName::PacingPps, &[500, 1000]), factor(FactorName::FrameSize, &[128, 256, 512])],
            ..Factors::default()
        };
        let names: Vec<String> = f.levels().iter().map(Level::name).collect();
        assert_eq!(
            names,
            [
                "pacing_pps=500/frame_size=128",
                "pacing_pps=500/frame_size=256",
                "pacing_pps=500/frame_size=512",
                "pacing_pps=1000/frame_size=128",
                "pacing_pps=1000/frame_size=256",
                "pacing_pps=1000/frame_size=512",
            ]
        );
        f.design = Design::Zip;
        f.factors[0].values.push(2000);
        let names: Vec<String> = f.levels().iter().map(Level::name).collect();
        assert_eq!(
            names,
            ["pacing_pps=500/frame_size=128", "pacing_pps=1000/frame_size=256", "pacing_pps=2000/frame_size=512"]
        );
        assert!(Factors::default().levels().is_empty());
    }

    #[test]
    fn zip_needs_lists_of_one_length() {
        let mut d = Decoder::new(std::path::Path::new("p.yaml"));
        let mut f = vec![factor(FactorName::PacingPps, &[500, 1000]), factor(FactorName::FrameSize, &[128])];
        f[1].at = Pos { line: 7, col: 3 };
        assert!(!check_zip(&mut d, &f));
        assert_eq!(
            d.diags.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [
                "p.yaml:7:3: `design: zip` takes the lists' values together, but `frame_size` has 1 values and `pacing_pps` 2"
            ]
        );
        f[1].values.push(256);
        assert!(check_zip(&mut d, &f));
    }

    #[test]
    fn the_calibration_level_keeps_the_traffic_and_takes_the_base_of_the_rest() {
        let l = Level { values: vec![(FactorName::PacingPps, 80_000), (FactorName::FrameSize, 256)] };
        let c = l.calibration(|f| if f == FactorName::PacingPps { 500 } else { 0 });
        assert_eq!(c.name(), "pacing_pps=500/frame_size=256");
        assert_eq!(l.label(), "pacing_pps 80000, frame_size 256");
    }
}

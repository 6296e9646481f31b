//! Factors of a study: named lists of values (`factors: {pacing_pps: [...], frame_size: [...]}`)
//! combined into levels, each measured like a study without factors.
//!
//! `design: cross` (the default) takes every combination, the first factor varying slowest;
//! `design: zip` takes the lists' i-th values together. `order` says how levels and sessions nest:
//! `session_level_run` (the default: every bring-up measures every level, runs innermost, so that a
//! reset mode, which is drawn per bring-up, is the same for all levels it is compared across) or
//! `level_session_run` (each level has its own bring-ups).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::actions::VARIABLES;
use crate::inventory::BACKENDS;
use crate::programs::Program;
use crate::trace_spec::{Generated, MAX_FRAME_LEN, Shape, Trace, TraceSource};
use crate::yaml::{Decoder, Node, Pos, Value};

/// What a factor varies: the replay's rate, frame size or bursts, the trace, or an inventory
/// template variable (its index in [`VARIABLES`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FactorName {
    /// Replay rate, packets per second.
    PacingPps,
    /// Bytes of every generated frame.
    FrameSize,
    /// Probes sent back to back at each interval.
    Burst,
    /// The trace every program and null calibration replays at the level (by name).
    Trace,
    /// An inventory template variable (e.g. `agent_backend`), set in every command of the level.
    Var(u16),
}

/// The template variables the schedule sets itself: no factor may set them.
const SCHEDULE_VARIABLES: &[&str] = &[
    "agent_pidfile",
    "bitstream",
    "bitstream_sha256",
    "burst_args",
    "capture_file",
    "capture_pidfile",
    "pace_args",
    "pacing_pps",
    "probe_format",
    "program",
    "reflect_args",
    "run",
    "session",
    "session_dir",
    "table",
    "table_driver",
    "table_driver_dir",
    "trace",
];

impl FactorName {
    /// The factors with a fixed name (the others are template variables).
    pub const FIXED: [FactorName; 4] =
        [FactorName::PacingPps, FactorName::FrameSize, FactorName::Burst, FactorName::Trace];

    /// The name in plans, paths and summaries.
    pub fn name(self) -> &'static str {
        match self {
            FactorName::PacingPps => "pacing_pps",
            FactorName::FrameSize => "frame_size",
            FactorName::Burst => "burst",
            FactorName::Trace => "trace",
            FactorName::Var(i) => VARIABLES.get(usize::from(i)).copied().unwrap_or("?"),
        }
    }

    /// The factor named `name`: a fixed one, or a template variable the schedule does not set.
    pub fn from_name(name: &str) -> Option<FactorName> {
        FactorName::FIXED.into_iter().find(|f| f.name() == name).or_else(|| {
            let i = VARIABLES.iter().position(|v| *v == name && !SCHEDULE_VARIABLES.contains(v))?;
            u16::try_from(i).ok().map(FactorName::Var)
        })
    }

    /// Every name a plan may use, for messages.
    pub fn names() -> Vec<&'static str> {
        let vars = VARIABLES.iter().filter(|v| !SCHEDULE_VARIABLES.contains(v)).copied();
        FactorName::FIXED.iter().map(|f| f.name()).chain(vars).collect()
    }

    /// Whether the factor's values are numbers (else words).
    pub fn numeric(self) -> bool {
        matches!(self, FactorName::PacingPps | FactorName::FrameSize | FactorName::Burst)
    }

    /// Whether the null calibration is measured at each of the factor's values (else it is
    /// shared by every level): the factors that change the probes (frame size, trace) and the
    /// template variables, which may change how both ports are stamped (the agent's backend).
    pub fn changes_traffic(self) -> bool {
        !matches!(self, FactorName::PacingPps | FactorName::Burst)
    }

    fn range(self) -> std::ops::RangeInclusive<i64> {
        match self {
            FactorName::PacingPps => 1..=100_000_000,
            FactorName::FrameSize => 1..=i64::from(MAX_FRAME_LEN),
            FactorName::Burst => 1..=10_000,
            FactorName::Trace | FactorName::Var(_) => 0..=0,
        }
    }
}

impl Serialize for FactorName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for FactorName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        FactorName::from_name(&name).ok_or_else(|| serde::de::Error::custom(format!("unknown factor `{name}`")))
    }
}

/// A factor's value: a number, or a word (a trace's name, a template variable's value).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FactorValue {
    /// Of a numeric factor.
    Num(u32),
    /// Of a trace or template-variable factor.
    Word(String),
}

impl FactorValue {
    /// The number, if it is one.
    pub fn as_num(&self) -> Option<u32> {
        match self {
            FactorValue::Num(n) => Some(*n),
            FactorValue::Word(_) => None,
        }
    }
}

impl PartialEq<u32> for FactorValue {
    fn eq(&self, other: &u32) -> bool {
        self.as_num() == Some(*other)
    }
}

impl fmt::Display for FactorValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FactorValue::Num(n) => write!(f, "{n}"),
            FactorValue::Word(w) => f.write_str(w),
        }
    }
}

latency_proto::words! {
/// How factor values are combined.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Design {
    /// Every combination.
    #[default]
    Cross = "cross",
    /// The i-th value of every factor together (lists of equal length).
    Zip = "zip",
}
}

latency_proto::words! {
/// How levels and sessions nest, outer to inner.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Order {
    /// Each session measures every level; runs innermost.
    #[default]
    SessionLevelRun = "session_level_run",
    /// Each level has its own sessions.
    LevelSessionRun = "level_session_run",
}
}

/// One factor and its values.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Factor {
    /// What it varies.
    pub name: FactorName,
    /// Its values, in plan order.
    pub values: Vec<FactorValue>,
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
    pub values: Vec<(FactorName, FactorValue)>,
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

    /// The value of numeric `factor`, if the level sets it.
    pub fn get(&self, factor: FactorName) -> Option<u32> {
        self.value(factor).and_then(FactorValue::as_num)
    }

    /// The value of `factor`, if the level sets it.
    pub fn value(&self, factor: FactorName) -> Option<&FactorValue> {
        self.values.iter().find(|(f, _)| *f == factor).map(|(_, v)| v)
    }

    /// The template variables the level sets, with their values.
    pub fn vars(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.values.iter().filter_map(|(f, v)| match (f, v) {
            (FactorName::Var(_), FactorValue::Word(w)) => Some((f.name(), w.as_str())),
            _ => None,
        })
    }

    /// The level the null calibration of this level is measured at: the same traffic, every other
    /// factor at its base value (`base` gives it).
    pub fn calibration(&self, base: impl Fn(FactorName) -> u32) -> Level {
        let values = self
            .values
            .iter()
            .map(|(f, v)| (*f, if f.changes_traffic() { v.clone() } else { FactorValue::Num(base(*f)) }))
            .collect();
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
                .map(|i| Level { values: self.factors.iter().map(|f| (f.name, f.values[i].clone())).collect() })
                .collect(),
            Design::Cross => {
                let mut out = vec![Level { values: Vec::new() }];
                for f in &self.factors {
                    out = out
                        .into_iter()
                        .flat_map(|l| {
                            f.values.iter().map(move |v| {
                                let mut values = l.values.clone();
                                values.push((f.name, v.clone()));
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
    let names = FactorName::names();
    let (entries, _) = m.among(d, &names, "factor");
    if entries.is_empty() {
        d.error(n.pos, "`factors` names no factor: name at least one, or leave the key out");
    }
    let mut out = Vec::new();
    for (i, v) in entries {
        let Some(name) = FactorName::from_name(names[i]) else { continue };
        let Some(items) = d.seq(v) else { continue };
        let values: Vec<Option<FactorValue>> = items
            .iter()
            .map(|x| match name {
                // A describe pass sees one factor for all: its values are numbers or words.
                _ if matches!(x.value, Value::Slot(_)) => {
                    let _ = d.uint::<u64>(x, name.range());
                    d.string(x).map(FactorValue::Word)
                }
                _ if name.numeric() => d.uint(x, name.range()).map(FactorValue::Num),
                FactorName::Trace => d.ident(x).map(FactorValue::Word),
                _ => factor_word(d, x, name).map(FactorValue::Word),
            })
            .collect();
        let valid: Vec<FactorValue> = values.iter().flatten().cloned().collect();
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

/// A template variable's value as a factor: one word that is also a folder name in the results
/// tree (letters, digits, `.`, `_`, `-`, `+`, `:` and `,`).
fn factor_word(d: &mut Decoder, x: &Node, name: FactorName) -> Option<String> {
    if name.name() == "agent_backend" {
        return d.choice(x, &BACKENDS).map(str::to_owned);
    }
    let w = d.string(x)?;
    let ok = !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || "._-+:,".contains(c));
    if !ok {
        d.error(
            x.pos,
            format!("`{w}` cannot be a factor's value: one word of letters, digits, `.`, `_`, `-`, `+`, `:` or `,`"),
        );
        return None;
    }
    Some(w)
}

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

/// The traces a study with `factors` replays: those of the programs and their null calibrations,
/// or, with a `trace` factor, the traces it names (indices into `traces`; a name not among them is
/// reported at the factor).
pub(super) fn replayed(d: &mut Decoder, traces: &[Trace], programs: &[Program], factors: &[Factor]) -> Vec<usize> {
    let mut used: Vec<usize> = match factors.iter().find(|f| f.name == FactorName::Trace) {
        Some(f) => f
            .values
            .iter()
            .filter_map(|v| {
                let found = traces.iter().position(|t| FactorValue::Word(t.name.clone()) == *v);
                if found.is_none() {
                    d.error(f.at, format!("factor `trace`: no trace `{v}` in `traces`"));
                }
                found
            })
            .collect(),
        None => programs.iter().flat_map(|p| [p.trace, p.null_trace]).collect(),
    };
    used.sort_unstable();
    used.dedup();
    used
}

/// For a `frame_size` factor: each trace in `used` made at each frame size, as traces of their
/// own. Only generated traces can be made at another size.
pub(super) fn sized_traces(d: &mut Decoder, traces: &[Trace], used: &[usize], f: &Factor) -> Option<Vec<Trace>> {
    let mut out = Vec::new();
    let mut ok = true;
    for t in used.iter().map(|&i| &traces[i]) {
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
        for size in f.values.iter().filter_map(FactorValue::as_num) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn factor(name: FactorName, values: &[u32]) -> Factor {
        Factor { name, values: values.iter().map(|&v| FactorValue::Num(v)).collect(), at: Pos::default() }
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
        f.factors[0].values.push(FactorValue::Num(2000));
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
        f[1].values.push(FactorValue::Num(256));
        assert!(check_zip(&mut d, &f));
    }

    #[test]
    fn the_calibration_level_keeps_the_traffic_and_takes_the_base_of_the_rest() {
        let l = Level {
            values: vec![
                (FactorName::PacingPps, FactorValue::Num(80_000)),
                (FactorName::FrameSize, FactorValue::Num(256)),
            ],
        };
        let c = l.calibration(|f| if f == FactorName::PacingPps { 500 } else { 0 });
        assert_eq!(c.name(), "pacing_pps=500/frame_size=256");
        assert_eq!(l.label(), "pacing_pps 80000, frame_size 256");
    }
}

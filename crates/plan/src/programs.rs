//! A plan's `programs:`: each program under test with its bitstream manifest, table, trace and the
//! null image calibrating that trace (programs sharing a trace share its null sessions); its type
//! and its decoding.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::bitstream::{self, Bitstream};
use crate::board::{Board, Shell};
use crate::yaml::{self, Decoder, Node, Pos, Value};

/// A program under test.
#[derive(Clone, Debug, Serialize)]
pub struct Program {
    /// Name (safe identifier).
    pub name: String,
    /// The program's image.
    pub bitstream: Bitstream,
    /// Optional table file loaded after bring-up.
    pub table: Option<PathBuf>,
    /// Index into [`Plan::traces`](crate::Plan::traces).
    pub trace: usize,
    /// The null image that calibrates this program's trace; none under
    /// `analysis.calibration: none`.
    pub null: Option<Bitstream>,
    /// Index into [`Plan::traces`](crate::Plan::traces) of the trace the null image is run with
    /// (the program's own, unless the plan names another with `null_trace`).
    pub null_trace: usize,
    /// This program's bring-ups, when not `protocol.sessions` (a plain count there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sessions: Option<u32>,
    /// Every build the plan names for the program (`bitstream: [a.yaml, b.yaml]`, one per board
    /// and shell; `bitstream` is the first, or the testbed's after [`Program::for_testbed`]).
    #[serde(skip)]
    pub builds: Vec<Bitstream>,
    /// Every build of its null image, likewise.
    #[serde(skip)]
    pub null_builds: Vec<Bitstream>,
}

impl Program {
    /// Take the builds of the testbed's board and shell where the plan names them (a testbed
    /// without one keeps the first, which validation then refuses).
    pub fn for_testbed(&mut self, board: Board, shell: Shell) {
        let pick = |builds: &[Bitstream]| builds.iter().find(|b| (b.board, b.shell) == (board, shell)).cloned();
        if let Some(b) = pick(&self.builds) {
            self.bitstream = b;
        }
        if let Some(b) = pick(&self.null_builds) {
            self.null = Some(b);
        }
    }

    /// The images this program's sessions load: its own, then its null's (if calibrated by one).
    pub fn images(&self) -> impl Iterator<Item = &Bitstream> {
        std::iter::once(&self.bitstream).chain(self.null.as_ref())
    }
}

/// Decode `programs:`; `calibrated`: whether each trace needs a null image (the plan's
/// `analysis.calibration` is `null_image`) or none may be named; `adaptive`: whether
/// `protocol.sessions` is a stopping rule, which a program's own `sessions` cannot replace.
pub(super) fn decode_programs(
    d: &mut Decoder,
    n: &Node,
    traces: &[String],
    calibrated: bool,
    adaptive: bool,
) -> Option<Vec<Program>> {
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
        let Some((p, null_at, name_pos)) = decode_program(d, item, traces) else {
            ok = false;
            continue;
        };
        if adaptive && p.sessions.is_some() {
            d.error(
                name_pos,
                format!(
                    "program `{}`: its own `sessions` needs `protocol.sessions` to be a count, not a stopping rule",
                    p.name
                ),
            );
            ok = false;
        }
        if out.iter().any(|q: &Program| q.name == p.name) {
            d.error(name_pos, format!("duplicate program name `{}`", p.name));
            ok = false;
        }
        if !calibrated {
            if null_at.is_some() || p.null_trace != p.trace {
                d.error(
                    null_at.unwrap_or(item.pos),
                    format!(
                        "program `{}`: `analysis.calibration: none` runs no null sessions; remove its `null` and `null_trace`",
                        p.name
                    ),
                );
                ok = false;
            }
            out.push(p);
            continue;
        }
        let manifest = p.null.as_ref().map(|b| b.manifest.clone());
        match (null_at.zip(manifest), nulls.get(&p.null_trace)) {
            (Some((at, manifest)), Some((first, first_at))) if *first != manifest => {
                d.error(
                    at,
                    format!(
                        "trace `{}` is already calibrated by {} (line {}); programs sharing a trace share its null runs",
                        traces[p.null_trace],
                        first.display(),
                        first_at.line
                    ),
                );
                ok = false;
            }
            (Some((at, manifest)), None) => {
                nulls.insert(p.null_trace, (manifest, at));
            }
            (None, _) => missing_null.push((p.null_trace, item.pos, p.name.clone())),
            _ => {}
        }
        out.push(p);
    }
    // A program without `null` borrows the calibration of another program with the same trace.
    for (trace, pos, name) in missing_null {
        match nulls.get(&trace) {
            Some((manifest, _)) => {
                let lender = out.iter().find(|p| p.null.as_ref().is_some_and(|b| b.manifest == *manifest));
                let (null, builds) = lender.map(|p| (p.null.clone(), p.null_builds.clone())).unwrap_or_default();
                if let Some(p) = out.iter_mut().find(|p| p.name == name) {
                    p.null = null;
                    p.null_builds = builds;
                }
            }
            None => {
                d.error(
                    pos,
                    format!(
                        "program `{name}`: its trace `{}` has no null calibration (add `null: <null bitstream manifest>`, or run uncalibrated with `analysis.calibration: none`)",
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
    let builds = m.req(d, "bitstream").and_then(|v| load_builds(d, v));
    if let Some(b) = builds.iter().flatten().find(|b| b.null) {
        d.error(
            n.pos,
            format!("program bitstream {} is a null bitstream; name it under `null:`", b.manifest.display()),
        );
    }
    let table = m.optional(d, "table", |d, v| d.path(v, true));
    let trace = m.required(d, "trace", |d, v| trace_index(d, v, traces));
    // The paper runs the null image with the program's trace; LatencyLab's Forward null runs
    // replayed an untagged copy of it (`null_trace: <trace>` says so).
    let null_trace = m.optional(d, "null_trace", |d, v| trace_index(d, v, traces));
    let null_node = m.get(d, "null");
    let sessions = m.optional(d, "sessions", |d, v| d.uint(v, 1..=1000));
    let null_builds = match null_node {
        Some(v) => load_builds(d, v).and_then(|builds| {
            let not_null: Vec<&Bitstream> = builds.iter().filter(|b| !b.null).collect();
            for b in &not_null {
                d.error(
                    v.pos,
                    format!("{} is not a null bitstream (`null: true` in its manifest)", b.manifest.display()),
                );
            }
            not_null.is_empty().then_some(builds)
        }),
        None => Some(Vec::new()),
    };
    m.done(d);
    let builds = builds?;
    // Without its own `null`, it is filled in from a program sharing the trace.
    let null_builds = null_builds?;
    let trace = trace?;
    let null_trace = null_trace?.unwrap_or(trace);
    Some((
        Program {
            name: name?,
            bitstream: builds[0].clone(),
            table: table?,
            trace,
            null: null_builds.first().cloned(),
            null_trace,
            sessions: sessions?,
            builds,
            null_builds,
        },
        null_node.map(|v| v.pos),
        name_node.map_or(n.pos, |v| v.pos),
    ))
}

/// The index of the trace named at `v`.
fn trace_index(d: &mut Decoder, v: &Node, traces: &[String]) -> Option<usize> {
    let t = d.string(v)?;
    let found = traces.iter().position(|x| *x == t);
    if found.is_none() {
        let names: Vec<&str> = traces.iter().map(String::as_str).collect();
        let hint = yaml::closest(&t, &names).map(|k| format!(" (did you mean `{k}`?)")).unwrap_or_default();
        d.error(v.pos, format!("undefined trace `{t}`{hint}"));
    }
    found
}

/// The builds a plan node names: one manifest, or a list of them, one per board and shell.
fn load_builds(d: &mut Decoder, v: &Node) -> Option<Vec<Bitstream>> {
    let items = match &v.value {
        Value::Seq(_) => d.seq(v)?,
        // A describe pass: a manifest, or a list of them.
        Value::Slot(_) => {
            let items = d.seq(v)?;
            let _ = load_manifest(d, &items[0]);
            return load_manifest(d, v).map(|b| vec![b]);
        }
        _ => return load_manifest(d, v).map(|b| vec![b]),
    };
    if items.is_empty() {
        d.error(v.pos, "name at least one bitstream manifest");
        return None;
    }
    let builds: Vec<Option<Bitstream>> = items.iter().map(|i| load_manifest(d, i)).collect();
    let builds: Vec<Bitstream> = builds.into_iter().collect::<Option<_>>()?;
    for (k, b) in builds.iter().enumerate() {
        if let Some(first) = builds[..k].iter().find(|a| (a.board, a.shell) == (b.board, b.shell)) {
            d.error(
                items[k].pos,
                format!(
                    "{} is a second build for a {} with the {} shell ({} is the first): name one build per board and shell",
                    b.manifest.display(),
                    b.board.name().to_uppercase(),
                    b.shell,
                    first.manifest.display()
                ),
            );
            return None;
        }
    }
    Some(builds)
}

/// Load the bitstream manifest a plan node points to; its problems are reported against the
/// manifest file itself, plus one line at the referencing node.
fn load_manifest(d: &mut Decoder, v: &Node) -> Option<Bitstream> {
    let path = d.path(v, true)?;
    let mut diags = Vec::new();
    let b = yaml::load_file(&path, &mut diags, bitstream::decode);
    if !diags.is_empty() {
        d.error(v.pos, format!("invalid bitstream manifest {}", path.display()));
        d.diags.extend(diags);
    }
    b
}

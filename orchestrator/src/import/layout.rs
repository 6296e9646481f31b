//! The LatencyLab folder layout: which tag is which program or null calibration, and finding
//! every run CSV under `data/tsc`.

use std::fs;
use std::path::{Path, PathBuf};

use super::{ImportError, io_err, layout};
use latency_results::SessionKind;

/// What a LatencyLab tag stands for.
pub(super) struct Tag {
    pub(super) tag: &'static str,
    pub(super) kind: SessionKind,
    pub(super) program: &'static str,
    pub(super) trace: &'static str,
    /// The trace of the null runs calibrating a program (its own trace for a null tag).
    pub(super) null_trace: &'static str,
    pub(super) bitstream: &'static str,
    pub(super) bound: Option<u32>,
}

const fn program(
    tag: &'static str,
    name: &'static str,
    trace: &'static str,
    null_trace: &'static str,
    bound: u32,
) -> Tag {
    Tag { tag, kind: SessionKind::Program, program: name, trace, null_trace, bitstream: name, bound: Some(bound) }
}

const fn null(tag: &'static str, group: &'static str, trace: &'static str) -> Tag {
    Tag { tag, kind: SessionKind::Null, program: group, trace, null_trace: trace, bitstream: "golden_nic", bound: None }
}

/// In group order: programs, then their null calibrations. The Forward null runs replayed the
/// untagged copy of the Forward trace (LatencyLab `master162_null.sh`).
pub(super) const TAGS: [Tag; 8] = [
    program("FWD", "forward", "forward_20k", "forward_20k_untagged", 55),
    program("FT", "five_tuple", "five_tuple_20k", "five_tuple_20k", 53),
    program("RH", "remove_header", "remove_header_20k", "remove_header_20k", 66),
    program("CS", "checksum", "checksum_20k", "checksum_20k", 109),
    null("NF", "null-forward_20k_untagged", "forward_20k_untagged"),
    null("NT", "null-five_tuple_20k", "five_tuple_20k"),
    null("NR", "null-remove_header_20k", "remove_header_20k"),
    null("NC", "null-checksum_20k", "checksum_20k"),
];

/// LatencyLab's tag of a session group: a program by its name, a null calibration by the trace
/// it replays or the program trace it calibrates (the Forward null runs replayed an untagged copy).
pub(crate) fn tag_of(kind: SessionKind, program: &str, trace: &str) -> Option<&'static str> {
    match kind {
        SessionKind::Program => TAGS.iter().find(|t| t.kind == kind && t.program == program).map(|t| t.tag),
        SessionKind::Null => {
            let calibrated =
                TAGS.iter().find(|t| t.kind == SessionKind::Program && (t.trace == trace || t.null_trace == trace));
            let replayed = calibrated.map_or(trace, |t| t.null_trace);
            TAGS.iter().find(|t| t.kind == kind && t.trace == replayed).map(|t| t.tag)
        }
    }
}

/// One run CSV found in the source folder.
pub(super) struct Input {
    pub(super) path: PathBuf,
    pub(super) rel: String,
    pub(super) tag: usize,
    pub(super) session: u32,
    pub(super) run: u32,
}

/// Entries of a folder, sorted by name: (name, path, is a folder).
fn entries(dir: &Path) -> Result<Vec<(String, PathBuf, bool)>, ImportError> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).map_err(io_err(dir))? {
        let e = e.map_err(io_err(dir))?;
        let path = e.path();
        out.push((e.file_name().to_string_lossy().into_owned(), path.clone(), path.is_dir()));
    }
    out.sort();
    Ok(out)
}

fn number(digits: &str) -> Option<u32> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn rel_path(src: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(src).unwrap_or(path);
    rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}

/// The run CSVs of one `<TAG>_s<n>` folder. `kind` is the kind its parent folder demands
/// (`programs/` or `null/`), `None` in the flat layout.
fn session_folder(
    src: &Path,
    dir: &Path,
    name: &str,
    kind: Option<SessionKind>,
    inputs: &mut Vec<Input>,
    ignored: &mut Vec<String>,
) -> Result<(), ImportError> {
    let Some((tag, session)) = name.rsplit_once("_s").and_then(|(t, n)| Some((t, number(n)?))) else {
        return Err(layout(dir, "expected a session folder named <TAG>_s<n> (for example FWD_s1)"));
    };
    let Some(t) = TAGS.iter().position(|t| t.tag == tag) else {
        let known: Vec<&str> = TAGS.iter().map(|t| t.tag).collect();
        return Err(layout(dir, format!("unknown LatencyLab tag `{tag}` (known: {})", known.join(", "))));
    };
    if let Some(k) = kind
        && k != TAGS[t].kind
    {
        let what = if TAGS[t].kind == SessionKind::Null { "a null" } else { "a program" };
        return Err(layout(dir, format!("`{tag}` is {what} tag, in the wrong folder")));
    }
    for (file, path, is_dir) in entries(dir)? {
        let run = file.strip_prefix("f_run").and_then(|f| f.strip_suffix(".csv")).and_then(number);
        match run {
            Some(run) if !is_dir => {
                inputs.push(Input { rel: rel_path(src, &path), path, tag: t, session, run });
            }
            _ if file.ends_with(".csv") && !is_dir => {
                return Err(layout(&path, "expected a run file named f_run<NN>.csv"));
            }
            _ => ignored.push(rel_path(src, &path)),
        }
    }
    Ok(())
}

/// Every run CSV under `src/data/tsc`, in group, session and run order.
pub(super) fn discover(src: &Path, ignored: &mut Vec<String>) -> Result<Vec<Input>, ImportError> {
    let tsc = src.join("data").join("tsc");
    if !tsc.is_dir() {
        return Err(layout(src, "not a LatencyLab folder (no data/tsc)"));
    }
    let mut inputs = Vec::new();
    for (name, path, is_dir) in entries(&tsc)? {
        let kind = match name.as_str() {
            "programs" => Some(SessionKind::Program),
            "null" => Some(SessionKind::Null),
            _ => None,
        };
        match (kind, is_dir) {
            (Some(kind), true) => {
                for (name, path, is_dir) in entries(&path)? {
                    if is_dir {
                        session_folder(src, &path, &name, Some(kind), &mut inputs, ignored)?;
                    } else {
                        ignored.push(rel_path(src, &path));
                    }
                }
            }
            (None, true) => session_folder(src, &path, &name, None, &mut inputs, ignored)?,
            (_, false) => ignored.push(rel_path(src, &path)),
        }
    }
    if inputs.is_empty() {
        return Err(layout(&tsc, "no run files (<TAG>_s<n>/f_run<NN>.csv) found"));
    }
    inputs.sort_by(|a, b| (a.tag, a.session, a.run, &a.rel).cmp(&(b.tag, b.session, b.run, &b.rel)));
    for w in inputs.windows(2) {
        if (w[0].tag, w[0].session, w[0].run) == (w[1].tag, w[1].session, w[1].run) {
            return Err(layout(&w[1].path, format!("the same run as {}", w[0].rel)));
        }
    }
    Ok(inputs)
}

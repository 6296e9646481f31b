//! Import of published LatencyLab data into a results folder, so that the analysis and the
//! reports read the public dataset exactly like a study this tool ran.
//!
//! The public repository stores one CSV per run, `data/tsc/{programs,null}/<TAG>_s<n>/f_runNN.csv`
//! (older commits: `data/tsc/<TAG>_s<n>/f_runNN.csv`, null tags starting with `N`), with the
//! columns `pkt_id,tx_ts_ns,rx1_ts_ns,rx2_ts_ns,latency_rx1_ns,latency_rx2_ns,diff_latency_ns`:
//! `rx1` is the pipeline (P) arrival, `rx2` the bypass (B) arrival, in ns from the run's first
//! stamp. Each row becomes two records (P and B) in the agent's record schema with `tsc_hz` = 1e9.
//!
//! The published data has faults of its own. The importer drops what cannot be right, keeps what
//! is merely unusual, and counts every case per file (in the returned [`ImportReport`] and under
//! `import` in `provenance.json`), so that nothing is silently hidden:
//!
//! - ids outside the trace (`1..=probes`) are invalid: dropped (`invalid_ids`);
//! - misparsed ids: the receiver sometimes read one digit too many from the payload (probe 17
//!   recorded as 178, probe 2017 as 20178). Such a row carries another probe's stamps, which break
//!   the monotonic order of stamps when rows are sorted by id. Rows outside a longest
//!   non-decreasing run of bypass stamps in id order are dropped (`misparsed`). A longest chain
//!   (rather than "below the previous row") keeps one too-high row from dropping every row after
//!   it; where two chains are equally long, the lower stamps are taken for the misparse, since
//!   the known fault maps a probe to a larger id. The first row of a run has `rx2_ts_ns` = 0 and
//!   is the start of the chain, so it is kept;
//! - repeated ids that survive the above: the first in file order is kept (`duplicates`);
//! - the first probe after the idle gap (a row with a zero stamp) is kept and counted
//!   (`first_after_gap`), as are negative differentials (`negative_diffs`);
//! - `diff_latency_ns` is rounded apart from the stamps (it differs from `rx1 − rx2` by up to
//!   1 ns in about half the rows): the stamps are imported and the disagreement is counted
//!   (`diff_mismatch`).

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use latency_agent::{Port, RecordBuilder};
use serde::Serialize;
use serde_json::json;

use crate::analysis::pairs;
use crate::digest;
use crate::engine::provenance::GIT_COMMIT;
use crate::plan::{Analysis, ReportSpec};
use crate::results::index::Group;
use crate::results::journal::Journal;
use crate::results::{ResultsDir, ResultsError, now_secs, runfile, utc, write_file};
use crate::schedule::SessionKind;

/// Study (and testbed) name of an imported results folder.
pub const STUDY: &str = "latencylab-import";
/// Probes per run of the LatencyLab traces.
pub const DEFAULT_PROBES: u64 = 20_000;
/// Stamps are already in ns.
pub const TSC_HZ: f64 = 1e9;
const SEED: u64 = 1;
const CLOCK_MHZ: f64 = 250.0;
const HEADER: [&str; 7] =
    ["pkt_id", "tx_ts_ns", "rx1_ts_ns", "rx2_ts_ns", "latency_rx1_ns", "latency_rx2_ns", "diff_latency_ns"];

/// Why an import failed. Every message names the file (and the line, for CSV content).
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// A file or folder could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// A CSV line is malformed.
    #[error("{path}:{line}: {message}")]
    Csv {
        /// The CSV file.
        path: PathBuf,
        /// Line number, from 1 (the header is line 1).
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The folder does not have the LatencyLab layout (unknown tag, bad name, no data).
    #[error("{path}: {message}")]
    Layout {
        /// The offending file or folder.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The records of a run could not be built.
    #[error("{path}: {message}")]
    Records {
        /// The CSV file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The results folder could not be written.
    #[error(transparent)]
    Results(#[from] ResultsError),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ImportError + '_ {
    move |source| ImportError::Io { path: path.to_path_buf(), source }
}

fn layout(path: &Path, message: impl Into<String>) -> ImportError {
    ImportError::Layout { path: path.to_path_buf(), message: message.into() }
}

/// What the import did with the rows of one file, or of all files (then `diff_mismatch_max_ns`
/// is the largest of any file).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
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
}

impl Quirks {
    fn add(&mut self, o: &Quirks) {
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
    }
}

/// One imported CSV.
#[derive(Clone, Debug, Serialize)]
pub struct FileReport {
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

/// The outcome of an import.
#[derive(Clone, Debug, Serialize)]
pub struct ImportReport {
    /// The LatencyLab folder read.
    pub source: PathBuf,
    /// The results folder written.
    pub results: PathBuf,
    /// Probes per run (ids `1..=probes` are valid).
    pub probes: u64,
    /// Per CSV, in import order.
    pub files: Vec<FileReport>,
    /// Sum over all files.
    pub totals: Quirks,
    /// Files under `data/tsc` that are not run CSVs (for example `console.log`), not imported.
    pub ignored: Vec<String>,
}

impl fmt::Display for ImportReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.totals;
        writeln!(
            f,
            "imported {} runs from {} into {}",
            self.files.len(),
            self.source.display(),
            self.results.display()
        )?;
        writeln!(f, "  rows read            {}", t.rows)?;
        writeln!(f, "  rows kept            {}", t.kept)?;
        writeln!(f, "  dropped, invalid id  {} (outside 1..={})", t.invalid_ids, self.probes)?;
        writeln!(f, "  dropped, misparsed   {} (stamps out of order for their id)", t.misparsed)?;
        writeln!(f, "  dropped, duplicate   {}", t.duplicates)?;
        writeln!(f, "  first after gap      {} (kept)", t.first_after_gap)?;
        writeln!(
            f,
            "  negative diffs       {} of all rows, {} of kept rows (kept)",
            t.negative_diffs, t.negative_diffs_kept
        )?;
        writeln!(
            f,
            "  diff ≠ rx1 − rx2     {} rows (at most {} ns; stamps imported)",
            t.diff_mismatch, t.diff_mismatch_max_ns
        )?;
        if !self.ignored.is_empty() {
            writeln!(f, "  not imported         {}", self.ignored.join(", "))?;
        }
        Ok(())
    }
}

/// What a LatencyLab tag stands for.
struct Tag {
    tag: &'static str,
    kind: SessionKind,
    program: &'static str,
    trace: &'static str,
    bitstream: &'static str,
    bound: Option<u32>,
}

const fn program(tag: &'static str, name: &'static str, trace: &'static str, bound: u32) -> Tag {
    Tag { tag, kind: SessionKind::Program, program: name, trace, bitstream: name, bound: Some(bound) }
}

const fn null(tag: &'static str, group: &'static str, trace: &'static str) -> Tag {
    Tag { tag, kind: SessionKind::Null, program: group, trace, bitstream: "golden_nic", bound: None }
}

/// In group order: programs, then their null calibrations.
const TAGS: [Tag; 8] = [
    program("FWD", "forward", "forward_20k", 55),
    program("FT", "five_tuple", "five_tuple_20k", 53),
    program("RH", "remove_header", "remove_header_20k", 66),
    program("CS", "checksum", "checksum_20k", 109),
    null("NF", "null-forward_20k", "forward_20k"),
    null("NT", "null-five_tuple_20k", "five_tuple_20k"),
    null("NR", "null-remove_header_20k", "remove_header_20k"),
    null("NC", "null-checksum_20k", "checksum_20k"),
];

/// One run CSV found in the source folder.
struct Input {
    path: PathBuf,
    rel: String,
    tag: usize,
    session: u32,
    run: u32,
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
fn discover(src: &Path, ignored: &mut Vec<String>) -> Result<Vec<Input>, ImportError> {
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

/// One CSV data row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// `pkt_id`.
    pub id: u64,
    /// `rx1_ts_ns`: pipeline arrival.
    pub rx1: u64,
    /// `rx2_ts_ns`: bypass arrival.
    pub rx2: u64,
    /// `diff_latency_ns`.
    pub diff: i64,
    /// Line in the file, from 1 (the header is line 1).
    pub line: usize,
}

/// Parse a LatencyLab run CSV (`path` only names it in errors).
pub fn parse_csv(path: &Path, bytes: &[u8]) -> Result<Vec<Row>, ImportError> {
    let err = |line: usize, message: String| ImportError::Csv { path: path.to_path_buf(), line, message };
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count() + 1;
        err(line, "not UTF-8 text".into())
    })?;
    let mut lines = text.lines();
    let header = lines.next().unwrap_or("").trim_start_matches('\u{feff}');
    if header.starts_with("version https://git-lfs") {
        return Err(err(1, "a Git LFS pointer, not the data (run `git lfs pull` in the LatencyLab checkout)".into()));
    }
    if !header.split(',').map(str::trim).eq(HEADER) {
        return Err(err(1, format!("expected the header `{}`, found `{header}`", HEADER.join(","))));
    }
    let mut rows = Vec::new();
    for (i, line) in lines.enumerate() {
        let n = i + 2;
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if fields.len() != HEADER.len() {
            return Err(err(n, format!("expected {} comma-separated fields, found {}", HEADER.len(), fields.len())));
        }
        let unsigned = |k: usize| {
            fields[k]
                .parse::<u64>()
                .map_err(|_| err(n, format!("{}: `{}` is not a whole number ≥ 0", HEADER[k], fields[k])))
        };
        let signed = |k: usize| {
            fields[k]
                .parse::<i64>()
                .map_err(|_| err(n, format!("{}: `{}` is not a whole number", HEADER[k], fields[k])))
        };
        let row = Row { id: unsigned(0)?, rx1: unsigned(2)?, rx2: unsigned(3)?, diff: signed(6)?, line: n };
        // The unused columns are checked too: a shifted or garbled line must not pass.
        for k in [1, 4, 5] {
            signed(k)?;
        }
        rows.push(row);
    }
    Ok(rows)
}

/// Indices, ascending, of a longest non-decreasing subsequence of `stamps`. Where several are
/// equally long, the one with the larger stamps is taken.
pub fn monotonic_chain(stamps: &[u64]) -> Vec<usize> {
    // Scanned from the end: heads[k] starts the chain of length k + 1 with the largest first stamp
    // seen so far, so the first stamps of heads do not increase with k.
    let mut heads: Vec<usize> = Vec::new();
    let mut next = vec![usize::MAX; stamps.len()];
    for (i, &v) in stamps.iter().enumerate().rev() {
        let k = heads.partition_point(|&h| stamps[h] >= v);
        if k > 0 {
            next[i] = heads[k - 1];
        }
        if k == heads.len() {
            heads.push(i);
        } else {
            heads[k] = i;
        }
    }
    let mut chain = Vec::with_capacity(heads.len());
    let mut i = heads.last().copied().unwrap_or(usize::MAX);
    while i != usize::MAX {
        chain.push(i);
        i = next[i];
    }
    chain
}

/// Rows kept from one file and what happened to the others.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Filtered {
    /// Kept rows, in id order.
    pub rows: Vec<Row>,
    /// Counts.
    pub quirks: Quirks,
}

/// Apply the import rules (see the module documentation) to one file's rows.
pub fn filter(rows: Vec<Row>, probes: u64) -> Filtered {
    let mut q = Quirks { rows: rows.len() as u64, ..Quirks::default() };
    for r in &rows {
        q.negative_diffs += u64::from(r.diff < 0);
        let mismatch = (i128::from(r.rx1) - i128::from(r.rx2) - i128::from(r.diff)).unsigned_abs();
        if mismatch > 0 {
            q.diff_mismatch += 1;
            q.diff_mismatch_max_ns = q.diff_mismatch_max_ns.max(u64::try_from(mismatch).unwrap_or(u64::MAX));
        }
    }
    let (mut valid, invalid): (Vec<Row>, Vec<Row>) = rows.into_iter().partition(|r| (1..=probes).contains(&r.id));
    q.invalid_ids = invalid.len() as u64;
    // Duplicates sort by stamp so that they never break the order among themselves.
    valid.sort_by_key(|r| (r.id, r.rx2, r.line));
    let stamps: Vec<u64> = valid.iter().map(|r| r.rx2).collect();
    let mut kept: Vec<Row> = monotonic_chain(&stamps).into_iter().map(|i| valid[i]).collect();
    q.misparsed = (valid.len() - kept.len()) as u64;
    kept.sort_by_key(|r| (r.id, r.line));
    let before = kept.len();
    kept.dedup_by_key(|r| r.id);
    q.duplicates = (before - kept.len()) as u64;
    q.kept = kept.len() as u64;
    q.negative_diffs_kept = kept.iter().filter(|r| r.rx1 < r.rx2).count() as u64;
    q.first_after_gap = kept.iter().filter(|r| r.rx1 == 0 || r.rx2 == 0).count() as u64;
    Filtered { rows: kept, quirks: q }
}

/// The records of kept rows: P and B per row, in stamp order, `seq` counting arrivals per port.
pub fn records(rows: &[Row]) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let mut recs: Vec<(u64, u8, u64)> =
        rows.iter().flat_map(|r| [(r.rx1, Port::Pipeline as u8, r.id), (r.rx2, Port::Bypass as u8, r.id)]).collect();
    recs.sort_unstable();
    let mut seq = [0u64; 2];
    let mut b = RecordBuilder::with_capacity(recs.len());
    for (tsc, port, id) in recs {
        let (p, s) = if port == Port::Pipeline as u8 { (Port::Pipeline, 0) } else { (Port::Bypass, 1) };
        b.push(id, p, tsc, seq[s], 0, None);
        seq[s] += 1;
    }
    b.finish()
}

/// Read, hash, parse and filter one input.
fn load(input: &Input, probes: u64) -> Result<(String, Filtered), ImportError> {
    let bytes = fs::read(&input.path).map_err(io_err(&input.path))?;
    let sha256 = digest::sha256_hex(&bytes);
    let rows = parse_csv(&input.path, &bytes)?;
    Ok((sha256, filter(rows, probes)))
}

fn run_metadata(input: &Input, plan_hash: &str, probes: u64, sha256: &str) -> Vec<(String, String)> {
    let t = &TAGS[input.tag];
    [
        ("study", STUDY.to_string()),
        ("plan_hash", plan_hash.to_string()),
        ("program", t.program.to_string()),
        ("kind", format!("{:?}", t.kind).to_lowercase()),
        ("session", input.session.to_string()),
        ("run", input.run.to_string()),
        ("attempt", "1".to_string()),
        ("bitstream", t.bitstream.to_string()),
        ("bitstream_sha256", String::new()),
        ("trace", t.trace.to_string()),
        ("probes", probes.to_string()),
        ("testbed", STUDY.to_string()),
        ("seed", SEED.to_string()),
        ("tsc_hz", TSC_HZ.to_string()),
        ("tool_version", env!("CARGO_PKG_VERSION").to_string()),
        ("source", input.rel.clone()),
        ("source_sha256", sha256.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (format!("latency.{k}"), v))
    .collect()
}

/// Import the LatencyLab folder `src` into a new results folder `out` (which must not exist or
/// be empty). `probes` is the trace length: ids `1..=probes` are valid ([`DEFAULT_PROBES`] for the
/// published traces). Every file is read and checked before anything is written.
pub fn import_latencylab(src: &Path, out: &Path, probes: u64) -> Result<ImportReport, ImportError> {
    if probes == 0 {
        return Err(layout(src, "the trace length (probes) must be at least 1"));
    }
    let mut ignored = Vec::new();
    let inputs = discover(src, &mut ignored)?;
    let mut files = Vec::with_capacity(inputs.len());
    for input in &inputs {
        let (sha256, f) = load(input, probes)?;
        let t = &TAGS[input.tag];
        let first = f.rows.iter().find(|r| r.rx1 == 0 || r.rx2 == 0);
        files.push(FileReport {
            source: input.rel.clone(),
            sha256,
            program: t.program.to_string(),
            session: input.session,
            run: input.run,
            path: ResultsDir::run_rel_path(t.program, input.session, input.run).to_string_lossy().into_owned(),
            first_after_gap_id: first.map(|r| r.id),
            first_after_gap_diff_ns: first.map(|r| r.rx1 as i64 - r.rx2 as i64),
            quirks: f.quirks,
        });
    }
    // The "plan" of an import is its input: the sorted list of CSVs and their digests.
    let mut listing: Vec<(&str, &str)> = files.iter().map(|f| (f.source.as_str(), f.sha256.as_str())).collect();
    listing.sort_unstable();
    let listing: String = listing.iter().map(|(source, sha256)| format!("{sha256}  {source}\n")).collect();
    let plan_hash = digest::sha256_hex(listing.as_bytes());

    let dir = ResultsDir::create(out)?;
    let started = utc(now_secs());
    let mut journal = Journal::open(&dir.journal_path())?;
    let mut sessions: Vec<(usize, u32)> = inputs.iter().map(|i| (i.tag, i.session)).collect();
    sessions.dedup();
    journal.append(&json!({
        "event": "study_started", "study": STUDY, "plan_hash": plan_hash, "seed": SEED, "testbed": STUDY,
        "sessions": sessions.len(), "runs": inputs.len(), "complete": 0, "resumed": false,
    }))?;
    let mut current: Option<usize> = None;
    for (input, report) in inputs.iter().zip(&files) {
        let t = &TAGS[input.tag];
        let index = sessions.iter().position(|&s| s == (input.tag, input.session)).unwrap_or(0);
        if current != Some(index) {
            if let Some(previous) = current {
                journal.append(&json!({ "event": "session_finished", "index": previous }))?;
            }
            current = Some(index);
            let pending = inputs.iter().filter(|i| (i.tag, i.session) == (input.tag, input.session)).count();
            journal.append(&json!({
                "event": "session_started", "index": index, "name": format!("{}_s{}", t.program, input.session),
                "pending_runs": pending, "steps": 0,
            }))?;
        }
        let (sha256, f) = load(input, probes)?;
        if sha256 != report.sha256 {
            return Err(layout(&input.path, "changed while it was being imported"));
        }
        let batch =
            records(&f.rows).map_err(|e| ImportError::Records { path: input.path.clone(), message: e.to_string() })?;
        let path = dir.root().join(&report.path);
        runfile::write(&path, std::slice::from_ref(&batch), &run_metadata(input, &plan_hash, probes, &sha256))?;
        let stored = digest::sha256_file(&path).map_err(crate::results::io_err(&path))?;
        let counts = pairs::pair(std::slice::from_ref(&batch)).counts;
        let stamps = f.rows.iter().flat_map(|r| [r.rx1, r.rx2]);
        let span = stamps.clone().max().unwrap_or(0) - stamps.min().unwrap_or(0);
        journal.append(&json!({
            "event": "run_finished", "index": index, "program": t.program, "session": input.session,
            "run": input.run, "attempt": 1, "path": report.path, "sha256": stored,
            "records": batch.num_rows() as u64, "counts": counts, "seconds": span as f64 / TSC_HZ,
        }))?;
    }
    if let Some(previous) = current {
        journal.append(&json!({ "event": "session_finished", "index": previous }))?;
    }

    let mut totals = Quirks::default();
    for f in &files {
        totals.add(&f.quirks);
    }
    let report = ImportReport { source: src.to_path_buf(), results: out.to_path_buf(), probes, files, totals, ignored };
    write_provenance(&dir, &report, &plan_hash, &inputs, &started)?;
    journal.append(&json!({ "event": "study_finished", "complete": inputs.len(), "failed": 0 }))?;
    Ok(report)
}

fn write_provenance(
    dir: &ResultsDir,
    report: &ImportReport,
    plan_hash: &str,
    inputs: &[Input],
    started: &str,
) -> Result<(), ImportError> {
    let mut groups: Vec<Group> = Vec::new();
    for i in inputs {
        let t = &TAGS[i.tag];
        if groups.last().is_none_or(|g| g.program != t.program) {
            groups.push(Group {
                program: t.program.to_string(),
                kind: t.kind,
                trace: t.trace.to_string(),
                bitstream: t.bitstream.to_string(),
                clock_mhz: CLOCK_MHZ,
                vendor_bound_cycles: t.bound,
                probes: report.probes,
            });
        }
    }
    let mut sessions: Vec<(usize, u32)> = inputs.iter().map(|i| (i.tag, i.session)).collect();
    sessions.dedup();
    let source = fs::canonicalize(&report.source).unwrap_or_else(|_| report.source.clone());
    let v = json!({
        "study": STUDY,
        "plan_hash": plan_hash,
        "tool_version": env!("CARGO_PKG_VERSION"),
        "git_commit": GIT_COMMIT,
        "seed": SEED,
        "testbed": { "name": STUDY, "facts": { "source": source, "files": inputs.len() } },
        "tsc_hz": TSC_HZ,
        "groups": groups,
        "analysis": Analysis::default(),
        "report": ReportSpec { title: "LatencyLab data (imported)".into(), ..ReportSpec::default() },
        "sessions": sessions.len(),
        "runs": inputs.len(),
        "started": started,
        "ended": utc(now_secs()),
        "import": {
            "source": source,
            "probes": report.probes,
            "rules": {
                "invalid_ids": "id outside 1..=probes: dropped",
                "misparsed": "bypass stamp outside a longest non-decreasing chain of bypass stamps in id order \
                              (an id misread from the payload, carrying another probe's stamps): dropped",
                "duplicates": "id seen before in the file: dropped (the first is kept)",
                "negative_diffs": "diff_latency_ns < 0 over all rows read; negative_diffs_kept: rx1 < rx2 \
                                   over kept rows (kept)",
                "first_after_gap": "kept row holding the run's first stamp (0): first probe after the idle gap (kept)",
                "diff_mismatch": "diff_latency_ns differs from rx1_ts_ns - rx2_ts_ns (the stamps are imported)",
            },
            "totals": report.totals,
            "files": report.files,
            "ignored": report.ignored,
        },
    });
    let path = dir.root().join("provenance.json");
    let text = serde_json::to_string_pretty(&v)
        .map_err(|e| ResultsError::Format { path: path.clone(), message: e.to_string() })?;
    write_file(&path, text.as_bytes(), false)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 2_000_000;

    /// A hand-made run of a 40-probe trace at 2 ms pacing: probe i has bypass stamp (i − 1) × 2 ms
    /// and arrives 150 ns later on the pipeline port (row 1: the zero stamp of the first probe).
    fn csv(rows: &[(u64, u64, i64)]) -> String {
        let mut s = HEADER.join(",") + "\n";
        for &(id, rx2, diff) in rows {
            s += &format!("{id},0,{},{rx2},0,0,{diff}\n", rx2.saturating_add_signed(diff));
        }
        s
    }

    fn ids(f: &Filtered) -> Vec<u64> {
        f.rows.iter().map(|r| r.id).collect()
    }

    #[test]
    fn chain_keeps_the_longest_monotonic_run_and_drops_the_lower_stamp_on_a_tie() {
        assert_eq!(monotonic_chain(&[]), Vec::<usize>::new());
        assert_eq!(monotonic_chain(&[0, 10, 5, 20]), vec![0, 1, 3]);
        assert_eq!(monotonic_chain(&[0, 1, 100, 3, 4]), vec![0, 1, 3, 4]);
        assert_eq!(monotonic_chain(&[0, 5, 5, 7]), vec![0, 1, 2, 3], "equal stamps are in order");
    }

    #[test]
    fn misparsed_ids_are_found_by_their_out_of_order_stamps() {
        let p = |i: u64| (i - 1) * MS;
        let text = csv(&[
            (1, 0, 148), // first probe after the gap: rx2 = 0, kept
            (2, p(2), 150),
            // probe 3 recorded as 38 (one digit too many): in the trace, but its stamps are probe 3's
            (4, p(4), 150),
            (5, p(5), -12), // negative differential, kept
            (6, p(6), 150),
            (7, p(7), 150),
            (5, p(5), 150), // duplicate id with consistent stamps: the first is kept
            (38, p(3), 150),
            (41, p(41), 150), // beyond the trace: invalid
        ]);
        let rows = parse_csv(Path::new("x.csv"), text.as_bytes()).unwrap();
        let f = filter(rows, 40);
        assert_eq!(ids(&f), vec![1, 2, 4, 5, 6, 7]);
        assert_eq!(f.rows[3].diff, -12, "the first copy of a duplicated id is kept");
        let q = f.quirks;
        assert_eq!((q.rows, q.kept, q.invalid_ids, q.misparsed, q.duplicates), (9, 6, 1, 1, 1));
        assert_eq!((q.negative_diffs, q.negative_diffs_kept, q.first_after_gap, q.diff_mismatch), (1, 1, 1, 0));
    }

    #[test]
    fn a_row_with_too_late_stamps_does_not_take_the_following_rows_with_it() {
        // Id 3 carries probe 9's stamps: "below the previous row" would drop 4..=8 as well.
        let p = |i: u64| (i - 1) * MS;
        let text = csv(&[(1, 0, 148), (2, p(2), 150), (3, p(9), 150), (4, p(4), 150), (5, p(5), 150), (6, p(6), 150)]);
        let f = filter(parse_csv(Path::new("x.csv"), text.as_bytes()).unwrap(), 40);
        assert_eq!(ids(&f), vec![1, 2, 4, 5, 6]);
        assert_eq!(f.quirks.misparsed, 1);
    }

    #[test]
    fn diff_column_disagreeing_with_the_stamps_is_counted() {
        let text = format!("{}\n1,0,148,0,0,0,148\n2,0,2000152,2000000,0,0,151\n", HEADER.join(","));
        let f = filter(parse_csv(Path::new("x.csv"), text.as_bytes()).unwrap(), 40);
        assert_eq!((f.quirks.diff_mismatch, f.quirks.diff_mismatch_max_ns), (1, 1));
    }

    #[test]
    fn records_are_in_stamp_order_with_per_port_sequence_numbers() {
        use arrow_array::cast::AsArray;
        use arrow_array::types::{UInt8Type, UInt64Type};
        let rows =
            [Row { id: 1, rx1: 148, rx2: 0, diff: 148, line: 2 }, Row { id: 2, rx1: 90, rx2: 100, diff: -10, line: 3 }];
        let b = records(&rows).unwrap();
        assert_eq!(b.column(0).as_primitive::<UInt64Type>().values(), &[1, 2, 2, 1]);
        assert_eq!(b.column(1).as_primitive::<UInt8Type>().values(), &[1, 0, 1, 0]);
        assert_eq!(b.column(2).as_primitive::<UInt64Type>().values(), &[0, 90, 100, 148]);
        assert_eq!(b.column(3).as_primitive::<UInt64Type>().values(), &[0, 0, 1, 1]);
    }

    #[test]
    fn csv_errors_name_the_file_and_line() {
        let p = Path::new("d/f_run01.csv");
        let text = format!("{}\n1,0,148,0,0,0,148\n2,0,x,1,0,0,1\n", HEADER.join(","));
        assert_eq!(
            parse_csv(p, text.as_bytes()).unwrap_err().to_string(),
            "d/f_run01.csv:3: rx1_ts_ns: `x` is not a whole number ≥ 0"
        );
        let e = parse_csv(p, b"pkt_id,rx\n").unwrap_err().to_string();
        assert!(e.starts_with("d/f_run01.csv:1: expected the header"), "{e}");
        let e = parse_csv(p, format!("{}\n1,2,3\n", HEADER.join(",")).as_bytes()).unwrap_err().to_string();
        assert_eq!(e, "d/f_run01.csv:2: expected 7 comma-separated fields, found 3");
        let e = parse_csv(p, b"version https://git-lfs.github.com/spec/v1\n").unwrap_err().to_string();
        assert!(e.contains("git lfs pull"), "{e}");
    }
}

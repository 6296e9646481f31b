//! `orchestrate export`: a results folder in the layout other tools read.
//!
//! `latencylab-csv` writes LatencyLab's TSC files, `data/tsc/{programs,null}/<TAG>_s<n>/
//! f_run<NN>.csv`, with its header `pkt_id,tx_ts_ns,rx1_ts_ns,rx2_ts_ns,latency_rx1_ns,
//! latency_rx2_ns,diff_latency_ns`: one row per probe seen on both ports, in probe-id order, paired
//! as the analysis pairs them (`latency_results::pairs`: the first copy on each port); `rx1`
//! (pipeline) and `rx2` (bypass) in whole ns from the run's first stamp, `diff_latency_ns` =
//! `rx1 − rx2`, the `tx` and `latency_*` columns 0 as LatencyLab writes them. Only runs the journal
//! records as complete and whose files match it are exported. Tags are LatencyLab's for its
//! programs and traces (FWD, FT, RH, CS; NF, NT, NR, NC), else the group's name.
//!
//! An export is whole or absent: two groups sharing a tag, or a file of the export that exists
//! already, refuse it before anything is written; the files are written beside the destination
//! (a new folder) or in a hidden folder inside it (an existing one) and moved into place only when
//! all are written, and whatever fails on the way leaves the destination as it was.

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use latency_analysis::AnalysisError;
use latency_analysis::load;
use latency_results::ResultsDir;
use latency_results::ResultsError;
use latency_results::SessionKind;
use latency_results::index::Group;
use latency_results::index::Index;
use latency_results::journal;
use latency_results::pairs;
use latency_results::provenance::Provenance;

/// Why an export was refused or failed; in every case nothing of it was written.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The results folder could not be read.
    #[error(transparent)]
    Analysis(#[from] AnalysisError),
    /// Two groups would export into the same folders.
    #[error(
        "{} `{first}` and `{second}` would both export as tag `{tag}` (data/tsc/{}/{tag}_s<n>/): rename one of them \
         in the plan; nothing was exported",
        if *.null { "null calibrations" } else { "programs" },
        if *.null { "null" } else { "programs" }
    )]
    SharedTag {
        /// Whether the groups are null calibrations (else programs).
        null: bool,
        /// The tag.
        tag: String,
        /// The first group, in the study's order.
        first: String,
        /// The other.
        second: String,
    },
    /// A file of the export exists already.
    #[error("{} exists and is never overwritten; nothing was exported", .0.display())]
    Exists(PathBuf),
    /// The export could not be written.
    #[error("{}: {source}; nothing was exported", .path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// A file of the export could not be written.
    #[error("{0}; nothing was exported")]
    Write(ResultsError),
}

impl ExportError {
    /// Whether the export was refused for what was asked (invalid input), rather than failed.
    pub fn refused(&self) -> bool {
        matches!(self, ExportError::SharedTag { .. } | ExportError::Exists(_))
    }
}

fn io_err(path: &Path) -> impl Fn(io::Error) -> ExportError + '_ {
    move |source| ExportError::Io { path: path.to_path_buf(), source }
}

/// Export formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// LatencyLab's per-run TSC CSV files.
    LatencylabCsv,
    /// The folder as one RO-Crate zip ([`crate::crate_zip`]).
    RoCrate,
}

/// The header of LatencyLab's TSC files.
pub const HEADER: &str = "pkt_id,tx_ts_ns,rx1_ts_ns,rx2_ts_ns,latency_rx1_ns,latency_rx2_ns,diff_latency_ns";

/// What an export wrote.
#[derive(Debug, serde::Serialize)]
pub struct Exported {
    /// Files written, relative to the output folder.
    pub files: Vec<String>,
    /// Rows written.
    pub rows: u64,
    /// Runs not exported, with the reason (as the analysis names them).
    pub skipped: Vec<String>,
}

/// LatencyLab's tag of a group (the import's tag table), else the group's name.
pub fn tag(group: &Group) -> String {
    crate::import::tag_of(group.kind, &group.program, &group.trace).map_or_else(|| group.program.clone(), str::to_owned)
}

/// Export the results folder `dir` as LatencyLab CSV files under `out` (created, or an existing
/// folder the files join): refused when two groups share a tag or a file exists, before anything
/// is written; written whole or not at all.
pub fn latencylab_csv(dir: &ResultsDir, out: &Path) -> Result<Exported, ExportError> {
    let prov = Provenance::read(dir).map_err(AnalysisError::from)?;
    let index = Index::from(&prov);
    for (i, a) in index.groups.iter().enumerate() {
        if let Some(b) = index.groups[i + 1..].iter().find(|b| b.kind == a.kind && tag(b) == tag(a)) {
            return Err(ExportError::SharedTag {
                null: a.kind == SessionKind::Null,
                tag: tag(a),
                first: a.program.clone(),
                second: b.program.clone(),
            });
        }
    }
    let entries = journal::read(&dir.journal_path()).map_err(AnalysisError::from)?;
    let (files, skipped) = load::run_files(dir, &index.groups, &entries)?;
    let rel_of = |f: &load::RunFile| -> PathBuf {
        let g = &index.groups[f.group];
        let kind = if g.kind == SessionKind::Null { "null" } else { "programs" };
        ["data", "tsc", kind, &format!("{}_s{}", tag(g), f.session), &format!("f_run{:02}.csv", f.run)].iter().collect()
    };
    if out.exists() && !out.is_dir() {
        return Err(ExportError::Io {
            path: out.to_path_buf(),
            source: io::Error::new(io::ErrorKind::NotADirectory, "not a folder"),
        });
    }
    for f in &files {
        let path = out.join(rel_of(f));
        match fs::symlink_metadata(&path) {
            Ok(_) => return Err(ExportError::Exists(path)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&path)(e)),
        }
    }

    let mut staging = Staging::new(out)?;
    let ns_per_tick = 1e9 / index.tsc_hz;
    let mut written = Exported { files: Vec::new(), rows: 0, skipped };
    let wrote = files.iter().try_for_each(|f| {
        let batches = match load::read_verified(f, &index.groups[f.group]) {
            Ok(b) => b,
            Err(why) => {
                written.skipped.push(why.to_string());
                return Ok(());
            }
        };
        let (text, rows) = csv(&batches, ns_per_tick);
        let rel = rel_of(f);
        latency_results::write_file(&staging.root.join(&rel), text.as_bytes(), false).map_err(ExportError::Write)?;
        written.files.push(rel.to_string_lossy().into_owned());
        written.rows += rows;
        Ok(())
    });
    match wrote.and_then(|()| staging.place(&written.files)) {
        Ok(()) => Ok(written),
        Err(e) => {
            staging.undo();
            Err(e)
        }
    }
}

/// Where an export is written before it is moved into place, and what the move did so far.
struct Staging {
    /// The folder the files are written into.
    root: PathBuf,
    /// The destination.
    out: PathBuf,
    /// Whether `out` existed (the files join it) or is made by renaming `root`.
    merge: bool,
    /// The topmost folder made for a new `out`'s parent, if any.
    made_parent: Option<PathBuf>,
    /// Folders made inside an existing `out`, in order, and files linked into it.
    made: Vec<PathBuf>,
    linked: Vec<PathBuf>,
}

impl Staging {
    /// A fresh staging folder: beside `out` when it does not exist, else hidden inside it (one file
    /// system either way, so the files move by rename or link).
    fn new(out: &Path) -> Result<Staging, ExportError> {
        let pid = std::process::id();
        let merge = out.is_dir();
        let mut made_parent = None;
        let root = if merge {
            out.join(format!(".exporting-{pid}"))
        } else {
            let name = out.file_name().map_or_else(|| "export".into(), |n| n.to_string_lossy().into_owned());
            let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
            made_parent = parent
                .ancestors()
                .take_while(|a| !a.as_os_str().is_empty() && !a.exists())
                .last()
                .map(Path::to_path_buf);
            fs::create_dir_all(parent).map_err(io_err(parent))?;
            parent.join(format!(".{name}.exporting-{pid}"))
        };
        let _ = fs::remove_dir_all(&root);
        let staging =
            Staging { root, out: out.to_path_buf(), merge, made_parent, made: Vec::new(), linked: Vec::new() };
        if let Err(e) = fs::create_dir(&staging.root) {
            staging.undo();
            return Err(io_err(&staging.root)(e));
        }
        Ok(staging)
    }

    /// Move the written `files` (relative) into place: the whole folder renamed to a new `out`,
    /// or each file linked into an existing one (never over a file) and the staging folder removed.
    fn place(&mut self, files: &[String]) -> Result<(), ExportError> {
        if !self.merge {
            return fs::rename(&self.root, &self.out).map_err(io_err(&self.out));
        }
        for rel in files {
            let (from, to) = (self.root.join(rel), self.out.join(rel));
            if let Some(parent) = to.parent() {
                let missing: Vec<PathBuf> =
                    parent.ancestors().take_while(|a| !a.exists()).map(Path::to_path_buf).collect();
                for dir in missing.into_iter().rev() {
                    fs::create_dir(&dir).map_err(io_err(&dir))?;
                    self.made.push(dir);
                }
            }
            match fs::hard_link(&from, &to) {
                Ok(()) => self.linked.push(to),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Err(ExportError::Exists(to)),
                Err(e) => return Err(io_err(&to)(e)),
            }
        }
        fs::remove_dir_all(&self.root).map_err(io_err(&self.root))
    }

    /// Remove everything the export made: the staging folder, the files linked and folders made
    /// inside an existing `out`, the parents made for a new one.
    fn undo(&self) {
        let _ = fs::remove_dir_all(&self.root);
        for file in &self.linked {
            let _ = fs::remove_file(file);
        }
        for dir in self.made.iter().rev() {
            let _ = fs::remove_dir(dir);
        }
        if let Some(top) = &self.made_parent {
            let _ = fs::remove_dir_all(top);
        }
    }
}

/// One run's CSV text and its number of rows: the run's pairs as the analysis pairs them (the
/// first copy of each probe on each port), stamps from the run's first one.
fn csv(batches: &[arrow_array::RecordBatch], ns_per_tick: f64) -> (String, u64) {
    let paired = pairs::pair(batches);
    let base = paired.first_tsc.unwrap_or(0);
    let ns = |tsc: u64| (tsc.saturating_sub(base) as f64 * ns_per_tick).round() as i64;
    let mut text = format!("{HEADER}\n");
    for (&(id, _), &(p, b)) in paired.diffs.iter().zip(&paired.stamps) {
        let (rx1, rx2) = (ns(p), ns(b));
        let _ = writeln!(text, "{id},0,{rx1},{rx2},0,0,{}", rx1 - rx2);
    }
    (text, paired.stamps.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use latency_proto::{Port, RecordBuilder};

    #[test]
    fn rows_are_the_pairs_in_id_order_from_the_runs_first_stamp() {
        // 2 GHz: a tick is 0.5 ns. Probe 3 arrives first (tick 1000, the base); probe 1 has a
        // second bypass copy (the first counts) and probe 2 no pipeline copy; a record of port 2
        // is neither copy.
        let mut b = RecordBuilder::default();
        b.push(3, Port::Bypass, 1000, 0, 64, None);
        b.push(3, Port::Pipeline, 1301, 0, 64, None);
        b.push(1, Port::Bypass, 2000, 1, 64, None);
        b.push(1, Port::Pipeline, 2100, 1, 64, None);
        b.push(1, Port::Bypass, 2500, 2, 64, None);
        b.push(2, Port::Bypass, 3000, 3, 64, None);
        b.push_index(4, 2, 10, 0, 64, None);
        let (text, rows) = csv(&[b.finish().unwrap()], 0.5);
        assert_eq!(rows, 2);
        // Each stamp rounded on its own (150.5 → 151), the difference of the rounded stamps.
        assert_eq!(text, format!("{HEADER}\n1,0,550,500,0,0,50\n3,0,151,0,0,0,151\n"));
        assert_eq!(csv(&[], 1.0), (format!("{HEADER}\n"), 0));
    }

    /// Every file in `dir`, relative, sorted (folders end with `/`).
    fn tree(dir: &Path) -> Vec<String> {
        let mut out = Vec::new();
        let mut todo = vec![dir.to_path_buf()];
        while let Some(d) = todo.pop() {
            for e in fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                if p.is_dir() {
                    out.push(format!("{rel}/"));
                    todo.push(p);
                } else {
                    out.push(rel);
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn a_move_into_an_existing_folder_that_fails_midway_is_undone() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out");
        fs::create_dir(&out).unwrap();
        // `b` is a file where the export needs a folder: its second file cannot be placed.
        fs::write(out.join("b"), "mine").unwrap();
        let mut staging = Staging::new(&out).unwrap();
        let files = ["a/x/1.csv".to_string(), "b/2.csv".to_string()];
        for f in &files {
            latency_results::write_file(&staging.root.join(f), b"rows", false).unwrap();
        }
        let e = staging.place(&files).unwrap_err();
        assert!(matches!(&e, ExportError::Io { path, .. } if path.ends_with("b/2.csv")), "{e}");
        // The first file was placed before the second failed.
        assert_eq!(fs::read_to_string(out.join("a/x/1.csv")).unwrap(), "rows");
        staging.undo();
        assert_eq!(tree(&out), ["b"], "only what was there");
        assert_eq!(fs::read_to_string(out.join("b")).unwrap(), "mine");

        // A new folder: built beside it, then renamed; undone, nothing is left, parents included.
        let new = tmp.path().join("p/q/new");
        let staging = Staging::new(&new).unwrap();
        assert_eq!(staging.root, tmp.path().join(format!("p/q/.new.exporting-{}", std::process::id())));
        staging.undo();
        assert_eq!(tree(tmp.path()), ["out/", "out/b"]);
    }
}

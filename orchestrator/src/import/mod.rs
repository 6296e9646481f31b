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
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

pub mod csv;
mod layout;
pub mod silicon;
mod study;

pub use csv::{CsvFault, Filtered, Row, filter, monotonic_chain, parse_csv, records};
use latency_results::ResultsError;
pub(crate) use layout::tag_of;
pub use study::import_latencylab;

/// Study (and testbed) name of an imported results folder.
pub const STUDY: &str = "latencylab-import";
/// Probes per run of the LatencyLab traces.
pub const DEFAULT_PROBES: u64 = 20_000;
/// Stamps are already in ns.
pub const TSC_HZ: f64 = 1e9;
const SEED: u64 = 1;
const CLOCK_MHZ: f64 = 250.0;
/// Largest CSV read (a 20,000-probe run is about 1 MB).
pub const MAX_CSV_BYTES: u64 = 256 << 20;

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
    #[error("{path}:{line}: {fault}")]
    Csv {
        /// The CSV file.
        path: PathBuf,
        /// Line number, from 1 (the header is line 1).
        line: usize,
        /// What is wrong.
        fault: CsvFault,
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
    #[error("{path}: {source}")]
    Records {
        /// The CSV file.
        path: PathBuf,
        /// What went wrong.
        source: arrow_schema::ArrowError,
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

pub use latency_results::provenance::ImportedFile as FileReport;
pub use latency_results::provenance::Quirks;

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
    /// Hardware-clock files (`data/silicon`) joined to the runs.
    pub silicon: Vec<silicon::SiliconFile>,
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
        for s in &self.silicon {
            writeln!(
                f,
                "  hardware clock       {}: {} rows, {} dropped (invalid id), {} dropped (repeated id)",
                s.source, s.rows, s.invalid_ids, s.duplicates
            )?;
        }
        if !self.silicon.is_empty() {
            writeln!(
                f,
                "  joined to the clock  {} kept rows ({} without a hardware-clock value)",
                t.silicon_joined, t.silicon_missing
            )?;
        }
        if !self.ignored.is_empty() {
            writeln!(f, "  not imported         {}", self.ignored.join(", "))?;
        }
        Ok(())
    }
}

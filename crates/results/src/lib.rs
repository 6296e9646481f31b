//! The results format: the published contract of a results folder and of the results history,
//! which DuckDB, pandas and Spark users read. Each file's one typed definition, with its reader and
//! writer, is here: the folder's layout ([`ResultsDir`]), journal events ([`event`], [`journal`]),
//! provenance ([`provenance`]), the run-file schema and metadata ([`runfile`]), the pairing of a
//! run's records into probes ([`pairs`]) and the run's reduction kept beside it ([`reduction`]),
//! `summary.json` ([`summary`]), the folder as an RO-Crate ([`rocrate`]) and the history's rows
//! ([`history`]).
//!
//! May touch: files inside a results folder or a history store's rows, written atomically. Must
//! not: reach a host, run a study, compute statistics beyond pairing a run's records, or read
//! pcap traces.
//!
//! ```text
//! <dir>/plan.yaml  provenance.json  journal.jsonl  orchestrate.log
//! <dir>/data/program=<p>/session=<s>/run=<r>.parquet
//! <dir>/data/program=<p>/<factor>=<v>/…/session=<s>/run=<r>.parquet   (a study with factors)
//! <dir>/pairs/program=<p>/…/session=<s>/run=<r>.pairs   each run's reduction (derived, rebuilt when missing)
//! <dir>/quarantine/            files found corrupt or unaccounted for on resume (never deleted)
//! <dir>/.lock                  held (OS lock) by the process writing the folder
//! ```
//!
//! Every file is written atomically (temporary file, fsync, rename, fsync of the folder) and a
//! run file that exists is never overwritten; the files that can be made again identical (the
//! runs' reductions, a simulated study's run files) are renamed into place without the fsyncs.

mod dir;
mod error;
pub mod event;
pub mod failpoint;
pub mod history;
pub mod index;
pub mod journal;
pub mod lock;
pub mod pairs;
mod parallel;
pub mod provenance;
pub mod reduction;
pub mod rocrate;
pub mod runfile;
pub mod summary;

pub use dir::*;
pub use error::{ResultsError, io_err};
pub use index::SessionKind;
pub use parallel::par_map;

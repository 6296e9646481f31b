//! The errors of the results format: a file of the folder that cannot be read, written or
//! understood, each naming the file.

use std::io;
use std::path::{Path, PathBuf};

/// Errors of the results store.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    /// An I/O operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// A JSON document could not be read or written.
    #[error("{path}: {what}: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// What the document is (and where in the file, for a line of the journal).
        what: String,
        /// The error.
        source: serde_json::Error,
    },
    /// A Parquet file could not be read or written.
    #[error("{path}: {source}")]
    Parquet {
        /// The file.
        path: PathBuf,
        /// The error.
        source: parquet::errors::ParquetError,
    },
    /// Records could not be read or converted.
    #[error("{path}: {source}")]
    Arrow {
        /// The file.
        path: PathBuf,
        /// The error.
        source: arrow_schema::ArrowError,
    },
    /// A run file's metadata is missing a key or holds a value of another type.
    #[error("{path}: {source}")]
    Metadata {
        /// The run file.
        path: PathBuf,
        /// What is wrong.
        source: MetadataError,
    },
    /// A run file's columns are not the record schema's.
    #[error("{path}: unexpected schema {found}")]
    Schema {
        /// The run file.
        path: PathBuf,
        /// The schema found.
        found: String,
    },
    /// The Parquet decoder gave up on a run file (it panicked on corrupt metadata).
    #[error("{path}: corrupt Parquet file: {source}")]
    Corrupt {
        /// The run file.
        path: PathBuf,
        /// The decoder's message.
        source: DecoderPanicked,
    },
    /// A value that makes no physical sense (a TSC rate that is not a positive number).
    #[error("{path}: `{key}` is {value}: {expected}")]
    Impossible {
        /// The file.
        path: PathBuf,
        /// The key, as written in the file.
        key: String,
        /// The value found.
        value: f64,
        /// What it must be.
        expected: &'static str,
    },
    /// The folder cannot be used as asked.
    #[error("{0}")]
    Refused(String),
    /// An output path names a device, FIFO, folder or a results folder's own file.
    #[error(transparent)]
    Output(latency_files::FileError),
}

impl From<latency_files::FileError> for ResultsError {
    fn from(e: latency_files::FileError) -> ResultsError {
        match e {
            latency_files::FileError::Io { path, source } => ResultsError::Io { path, source },
            latency_files::FileError::Exists(path) => {
                ResultsError::Refused(format!("{} exists and is never overwritten", path.display()))
            }
            e @ (latency_files::FileError::NotRegular { .. } | latency_files::FileError::Protected { .. }) => {
                ResultsError::Output(e)
            }
        }
    }
}

/// Attach the path to an I/O error.
pub fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ResultsError + '_ {
    move |source| ResultsError::Io { path: path.to_path_buf(), source }
}

/// Why a run file's metadata cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    /// A key is not there.
    #[error("metadata key `{key}` is missing")]
    Missing {
        /// The key.
        key: &'static str,
    },
    /// A key's value is not of its type.
    #[error("metadata key `{key}`: `{value}`: {source}")]
    Invalid {
        /// The key.
        key: &'static str,
        /// Its value.
        value: String,
        /// Why the value does not parse.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// A decoder of an untrusted file panicked (see [`guarded`](crate::runfile::guarded)): the panic's message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DecoderPanicked(pub String);

/// What a TSC rate must be.
pub(crate) const RATE: &str = "a TSC rate must be a finite number of Hz above 1 MHz";

/// Whether `hz` can be a TSC rate.
pub(crate) fn is_rate(hz: f64) -> bool {
    hz.is_finite() && hz >= 1e6
}

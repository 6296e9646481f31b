//! Why a results folder could not be analysed.

use std::path::PathBuf;

use latency_results::ResultsError;

/// Why a folder could not be analysed.
#[derive(Debug, thiserror::Error)]
pub enum AnalysisError {
    /// Reading the folder failed.
    #[error(transparent)]
    Results(#[from] ResultsError),
    /// A figure of the summary is not a finite number: it is not written.
    #[error("{path}: `{key}` is not a finite number; the summary is not written")]
    NonFinite {
        /// The summary's path.
        path: PathBuf,
        /// The figure, as its key in `summary.json`.
        key: String,
    },
    /// The folder holds no run data.
    #[error("{path}: missing: the folder holds no run data")]
    NoRunData {
        /// The run-data folder.
        path: PathBuf,
    },
}

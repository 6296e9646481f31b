//! Why a results folder could not be analysed.

use std::path::PathBuf;

use latency_results::ResultsError;

/// Why a folder could not be analysed.
#[derive(Debug, thiserror::Error)]
pub enum AnalysisError {
    /// Reading the folder failed.
    #[error(transparent)]
    Results(#[from] ResultsError),
    /// The folder's content is not usable.
    #[error("{path}: {message}")]
    Invalid {
        /// The offending file or folder.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

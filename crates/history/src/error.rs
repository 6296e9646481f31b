//! Why the history could not be read or written ([`StoreError`]), or would not take a study
//! ([`Refusal`]).

use latency_analysis::AnalysisError;
use latency_results::history::table::ColumnError;

/// Why the history could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store's URL cannot be used, or names no store (a folder that does not exist, an S3
    /// prefix that holds nothing): only adding a study creates a store.
    #[error("history store `{url}`: {message}")]
    Url {
        /// The URL.
        url: String,
        /// What is wrong.
        message: String,
    },
    /// An object could not be read or written.
    #[error("history store `{url}`: {path}: {source}")]
    Object {
        /// The store's URL.
        url: String,
        /// The object.
        path: String,
        /// What failed.
        source: object_store::Error,
    },
    /// A table could not be encoded, or an object is not a Parquet file.
    #[error("history store `{url}`: {path}: {source}")]
    Parquet {
        /// The store's URL.
        url: String,
        /// The object.
        path: String,
        /// The error.
        source: parquet::errors::ParquetError,
    },
    /// A table's records could not be built or read.
    #[error("history store `{url}`: {path}: {source}")]
    Arrow {
        /// The store's URL.
        url: String,
        /// The object.
        path: String,
        /// The error.
        source: arrow_schema::ArrowError,
    },
    /// An object holds something else than the history's tables.
    #[error("history store `{url}`: {path}: {source}")]
    Columns {
        /// The store's URL.
        url: String,
        /// The object.
        path: String,
        /// The column that is missing or of another type.
        source: ColumnError,
    },
    /// The results folder could not be read or analysed.
    #[error(transparent)]
    Analysis(#[from] AnalysisError),
    /// The results folder's study is not taken into the history as it is, and nothing was written:
    /// it has not ended, its runs failed, its files cannot be trusted, or the store holds it with
    /// other figures ([`Refusal`] says which; named for its first cause).
    #[error("{reason}")]
    Unfinished {
        /// The folder.
        dir: String,
        /// Why it is not added (boxed: the error stays small).
        reason: Box<Refusal>,
    },
}

impl StoreError {
    /// Whether the error is an object of the store that cannot be read as the history's table
    /// (truncated, not Parquet, other columns): adding its study again rewrites it.
    pub fn is_damaged_table(&self) -> bool {
        matches!(self, StoreError::Parquet { .. } | StoreError::Arrow { .. } | StoreError::Columns { .. })
    }
}

/// Why a results folder's study is not added to the history (nothing is written).
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The study has not ended.
    #[error("{dir}: the study has not ended (interrupted or still running): resume it first; not added")]
    NotEnded {
        /// The folder.
        dir: String,
    },
    /// Its start time cannot be read.
    #[error("{file}: `started` is `{value}`, not a UTC time; not added")]
    Start {
        /// `provenance.json`.
        file: String,
        /// The value.
        value: String,
    },
    /// Runs failed, or the analysis could not use everything: the rule of `nightly`, which neither
    /// adds nor judges such a study.
    #[error(
        "{dir}: {}; a study whose runs failed is not added to the history (as `nightly` does not add it), so that no \
         trend is judged on it",
        unhealthy(*.failed_runs, .problems)
    )]
    Unhealthy {
        /// The folder.
        dir: String,
        /// Runs that failed every attempt (the journal's, or the summary's if more).
        failed_runs: u64,
        /// The problems the analysis named.
        problems: Vec<String>,
    },
    /// A file of the folder contradicts itself, or another file of the folder: not trusted.
    #[error(
        "{file}: `{key}` {what}: not trusted, not added{}",
        .remedy.as_ref().map(|r| format!("; {r}")).unwrap_or_default()
    )]
    Untrusted {
        /// The folder.
        dir: String,
        /// The file.
        file: String,
        /// The key in it.
        key: String,
        /// What is wrong with it.
        what: String,
        /// How to make it right, when a command can.
        remedy: Option<String>,
    },
    /// The store holds the study (same id) with other figures than the folder gives now.
    #[error(
        "{dir}: study {study} is in history store `{url}` with other figures ({what}); nothing written: remove its \
         objects rows/date={date}/study={study}/ and estimates/date={date}/study={study}/ from the store to add it anew"
    )]
    Differs {
        /// The folder.
        dir: String,
        /// The store's URL.
        url: String,
        /// The study's date partition.
        date: String,
        /// The study's id.
        study: String,
        /// The first difference: the table, row and column, and both values.
        what: String,
    },
}

/// What is wrong with an unhealthy study: its failed runs, its problems (the first named).
fn unhealthy(failed_runs: u64, problems: &[String]) -> String {
    let mut parts = Vec::new();
    if failed_runs > 0 {
        parts.push(format!("{failed_runs} run(s) failed every attempt"));
    }
    if let Some(first) = problems.first() {
        parts.push(format!("the analysis named {} problem(s) (the first: {first})", problems.len()));
    }
    parts.join(" and ")
}

//! The exit statuses of `orchestrate`: one table, used for `--help`, by the binary for every
//! error, and checked against the reference (`docs/exit-status.md`) by a test.

use crate::engine::EngineError;
use crate::import::ImportError;
use latency_analysis::AnalysisError;
use latency_history::store::StoreError;
use latency_results::ResultsError;

/// How a command ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    /// Everything asked was done.
    Success,
    /// The work ran, but runs failed their checks, data could not be used, or a regression was
    /// found.
    ChecksFailed,
    /// Invalid input (plan, manifest, inventory, trace, arguments, source data); nothing was
    /// touched.
    Invalid,
    /// A host or step failed after its retries.
    Testbed,
    /// Results could not be written or read.
    Results,
    /// Interrupted; the journal is consistent and `--resume` continues.
    Interrupted,
    /// `nightly`: runs failed their checks, so the study was neither added to the history nor
    /// judged.
    Unjudged,
}

impl ExitStatus {
    /// Every status, in code order.
    pub const ALL: [ExitStatus; 7] = [
        ExitStatus::Success,
        ExitStatus::ChecksFailed,
        ExitStatus::Invalid,
        ExitStatus::Testbed,
        ExitStatus::Results,
        ExitStatus::Unjudged,
        ExitStatus::Interrupted,
    ];

    /// The process exit code.
    pub fn code(self) -> u8 {
        match self {
            ExitStatus::Success => 0,
            ExitStatus::ChecksFailed => 1,
            ExitStatus::Invalid => 2,
            ExitStatus::Testbed => 3,
            ExitStatus::Results => 4,
            ExitStatus::Unjudged => 5,
            ExitStatus::Interrupted => 130,
        }
    }

    /// What the code means, as the reference and `--help` say it.
    pub fn meaning(self) -> &'static str {
        match self {
            ExitStatus::Success => "success",
            ExitStatus::ChecksFailed => {
                "runs failed their checks, run data could not be used, or a regression was found"
            }
            ExitStatus::Invalid => {
                "invalid input: plan, manifest, inventory, trace, arguments or source data (nothing was touched)"
            }
            ExitStatus::Testbed => "testbed failure: a host or step failed after its retries",
            ExitStatus::Results => "results could not be written or read",
            ExitStatus::Unjudged => {
                "nightly: runs failed their checks; the study was neither added to the history nor judged"
            }
            ExitStatus::Interrupted => "interrupted (Ctrl-C); the journal is consistent and --resume continues",
        }
    }

    /// The table for `--help`.
    pub fn help() -> String {
        let mut s = String::from("Exit status:\n");
        for e in Self::ALL {
            s.push_str(&format!("  {:<4} {}\n", e.code(), e.meaning()));
        }
        s
    }
}

impl From<&ResultsError> for ExitStatus {
    fn from(e: &ResultsError) -> ExitStatus {
        match e {
            // A folder that cannot be used as asked: the user's choice, nothing was touched.
            ResultsError::Refused(_) | ResultsError::Output(_) => ExitStatus::Invalid,
            ResultsError::Io { .. }
            | ResultsError::Json { .. }
            | ResultsError::Parquet { .. }
            | ResultsError::Arrow { .. }
            | ResultsError::Metadata { .. }
            | ResultsError::Impossible { .. }
            | ResultsError::Schema { .. }
            | ResultsError::Corrupt { .. } => ExitStatus::Results,
        }
    }
}

impl From<&AnalysisError> for ExitStatus {
    fn from(e: &AnalysisError) -> ExitStatus {
        match e {
            AnalysisError::Results(e) => e.into(),
            AnalysisError::NoRunData { .. } | AnalysisError::NonFinite { .. } => ExitStatus::Results,
        }
    }
}

impl From<&StoreError> for ExitStatus {
    fn from(e: &StoreError) -> ExitStatus {
        match e {
            StoreError::Analysis(e) => e.into(),
            // The URL or the folder given cannot be used: nothing was touched.
            StoreError::Url { .. } | StoreError::Unfinished { .. } => ExitStatus::Invalid,
            StoreError::Object { .. }
            | StoreError::Parquet { .. }
            | StoreError::Arrow { .. }
            | StoreError::Columns { .. } => ExitStatus::Results,
        }
    }
}

impl From<&ImportError> for ExitStatus {
    fn from(e: &ImportError) -> ExitStatus {
        match e {
            ImportError::Results(e) => e.into(),
            // The source data is the input of an import.
            ImportError::Io { .. }
            | ImportError::Csv { .. }
            | ImportError::Layout { .. }
            | ImportError::Records { .. } => ExitStatus::Invalid,
        }
    }
}

impl From<&EngineError> for ExitStatus {
    fn from(e: &EngineError) -> ExitStatus {
        match e {
            EngineError::Results(e) => e.into(),
            EngineError::Testbed { .. } => ExitStatus::Testbed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference's table (`| exit status | meaning |`) says exactly what the code does.
    #[test]
    fn the_documented_table_matches() {
        let page = include_str!("../../docs/exit-status.md");
        let rows: Vec<(u8, String)> = page
            .lines()
            .skip_while(|l| !l.starts_with("| exit status |"))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .filter_map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                Some((cells.get(1)?.parse().ok()?, cells.get(2)?.to_string()))
            })
            .collect();
        let ours: Vec<(u8, String)> = ExitStatus::ALL.iter().map(|e| (e.code(), e.meaning().to_string())).collect();
        assert_eq!(rows, ours);
    }

    #[test]
    fn codes_are_distinct() {
        let mut codes: Vec<u8> = ExitStatus::ALL.iter().map(|e| e.code()).collect();
        codes.dedup();
        assert_eq!(codes.len(), ExitStatus::ALL.len());
    }
}

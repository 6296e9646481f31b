//! The append-only journal (`journal.jsonl`): one [`Entry`] per line, fsynced as each event that
//! ends something is written, so that after a crash (SIGKILL included) it tells exactly which runs
//! are complete.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::event::{Entry, Event};
use super::{ResultsError, io_err};

/// Largest journal read back (a paper study writes about 2 MB).
pub const MAX_JOURNAL_BYTES: u64 = 256 << 20;

/// An open journal.
pub struct Journal {
    path: PathBuf,
    file: File,
    /// Whether commits are fsynced as they are written ([`Journal::set_durable`]).
    durable: bool,
}

impl Journal {
    /// Open (or create) the journal for appending. A last line cut short by a crash is removed, so
    /// that new lines start on a fresh line.
    pub fn open(path: &Path) -> Result<Journal, ResultsError> {
        let mut file = OpenOptions::new().create(true).read(true).append(true).open(path).map_err(io_err(path))?;
        let mut text = Vec::new();
        file.read_to_end(&mut text).map_err(io_err(path))?;
        if !text.is_empty() && text.last() != Some(&b'\n') {
            let keep = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            file.set_len(keep as u64).map_err(io_err(path))?;
            file.seek(SeekFrom::End(0)).map_err(io_err(path))?;
        }
        Ok(Journal { path: path.to_path_buf(), file, durable: true })
    }

    /// Whether each commit is on the disk before [`Journal::append`] returns (the default). A
    /// study whose runs can all be made again identical (the simulator's) sets it off: its journal
    /// then reaches the disk at the study's end or when the system writes it back, and a crash
    /// before costs only runs that are redone identical.
    pub fn set_durable(&mut self, durable: bool) {
        self.durable = durable;
    }

    /// Append one event with the current time, and fsync it when it commits something
    /// ([`Event::is_commit`]; the next commit's fsync carries the marks written before it), or, for
    /// a journal that is not durable, when it ends the study.
    pub fn append(&mut self, event: &Event) -> Result<(), ResultsError> {
        let mut line = serde_json::to_string(&Entry::now(event.clone())).map_err(|source| ResultsError::Json {
            path: self.path.clone(),
            what: "journal event".into(),
            source,
        })?;
        line.push('\n');
        self.file.write_all(line.as_bytes()).map_err(io_err(&self.path))?;
        let ends = matches!(event, Event::StudyFinished { .. } | Event::Interrupted);
        if (self.durable && event.is_commit()) || ends {
            self.file.sync_data().map_err(io_err(&self.path))?;
        }
        Ok(())
    }
}

/// Every complete line of a journal. A cut-short last line is ignored; any other line that is not
/// a known event is an error naming the line.
pub fn read(path: &Path) -> Result<Vec<Entry>, ResultsError> {
    let bytes = super::read_capped(path, MAX_JOURNAL_BYTES, "journal of this tool").map_err(io_err(path))?;
    let complete = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(i) => &bytes[..=i],
        None => &[][..],
    };
    complete
        .split(|&b| b == b'\n')
        .enumerate()
        .filter(|(_, l)| !l.is_empty())
        .map(|(i, l)| {
            serde_json::from_slice(l).map_err(|source| ResultsError::Json {
                path: path.to_path_buf(),
                what: format!("line {}", i + 1),
                source,
            })
        })
        .collect()
}

/// A run the journal records as complete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completed {
    /// Data file, relative to the results folder.
    pub path: String,
    /// sha256 of the data file.
    pub sha256: String,
    /// Records stored.
    pub records: u64,
    /// The run's factor level.
    pub level: Option<String>,
    /// Soak mode: sha256 of the run's histogram log.
    pub histogram_sha256: Option<String>,
}

/// Runs recorded complete: (program, session, run) → the last `run_finished` of each.
pub fn completed(entries: &[Entry]) -> BTreeMap<(String, u32, u32), Completed> {
    entries
        .iter()
        .filter_map(|e| match &e.event {
            Event::RunFinished { program, session, run, path, sha256, records, level, histogram_sha256, .. } => Some((
                (program.clone(), *session, *run),
                Completed {
                    path: path.clone(),
                    sha256: sha256.clone(),
                    records: *records,
                    level: level.clone(),
                    histogram_sha256: histogram_sha256.clone(),
                },
            )),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torn_last_line_is_dropped_and_appending_resumes_cleanly() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("journal.jsonl");
        std::fs::write(&p, "{\"t\":1,\"event\":\"interrupted\"}\n{\"t\":2,\"event\":\"session_finished\",\"ind")
            .unwrap();
        assert_eq!(read(&p).unwrap().len(), 1);
        let mut j = Journal::open(&p).unwrap();
        j.append(&Event::SessionFinished { index: 3 }).unwrap();
        let lines = read(&p).unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1].event, Event::SessionFinished { index: 3 });
        assert!(lines[1].t > 0);
    }

    #[test]
    fn a_line_that_is_not_an_event_is_an_error_naming_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("journal.jsonl");
        std::fs::write(&p, "{\"t\":1,\"event\":\"interrupted\"}\n{\"t\":2,\"index\":3}\n").unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(e.contains("line 2"), "{e}");
    }
}

//! The append-only journal (`journal.jsonl`): one JSON object per event, fsynced as written, so
//! that after a crash (SIGKILL included) it tells exactly which runs are complete.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::{ResultsError, io_err};

/// An open journal.
pub struct Journal {
    path: PathBuf,
    file: File,
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
        Ok(Journal { path: path.to_path_buf(), file })
    }

    /// Append one event (any serialisable object) with a millisecond timestamp `t`, and fsync.
    pub fn append(&mut self, event: &serde_json::Value) -> Result<(), ResultsError> {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        let mut obj = serde_json::json!({ "t": t });
        if let (Some(o), Some(e)) = (obj.as_object_mut(), event.as_object()) {
            o.extend(e.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        let mut line = obj.to_string();
        line.push('\n');
        self.file.write_all(line.as_bytes()).map_err(io_err(&self.path))?;
        self.file.sync_data().map_err(io_err(&self.path))
    }
}

/// Every complete line of a journal, parsed. A cut-short last line is ignored.
pub fn read(path: &Path) -> Result<Vec<serde_json::Value>, ResultsError> {
    let text = std::fs::read_to_string(path).map_err(io_err(path))?;
    let complete = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    complete
        .lines()
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map_err(|e| ResultsError::Format { path: path.to_path_buf(), message: format!("line {}: {e}", i + 1) })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torn_last_line_is_dropped_and_appending_resumes_cleanly() {
        let dir = std::env::temp_dir().join(format!("journal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("journal.jsonl");
        std::fs::write(&p, "{\"event\":\"a\"}\n{\"event\":\"b\",\"x\":").unwrap();
        assert_eq!(read(&p).unwrap().len(), 1);
        let mut j = Journal::open(&p).unwrap();
        j.append(&serde_json::json!({"event": "c"})).unwrap();
        let lines = read(&p).unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1]["event"], "c");
        assert!(lines[1]["t"].as_u64().unwrap() > 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

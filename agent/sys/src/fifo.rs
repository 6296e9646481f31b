//! Lines through a named pipe: what any number of successive writers write (a controller over SSH
//! opens, writes and closes the pipe for every command) reaches a long-running process as lines.
//! The agent (`--control`) and the FPGA emulator take their commands this way; what a line means
//! is theirs to decide.

use std::io::{self, BufRead, BufReader};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::sync::mpsc::{self, Receiver};

/// Create the FIFO at `path` if it is missing (with `mkfifo`, mode 600).
pub fn ensure_fifo(path: &Path) -> io::Result<()> {
    match std::fs::metadata(path) {
        Ok(m) if m.file_type().is_fifo() => return Ok(()),
        Ok(_) => std::fs::remove_file(path)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let status = std::process::Command::new("mkfifo").arg("-m").arg("600").arg(path).status()?;
    if status.success() { Ok(()) } else { Err(io::Error::other(format!("mkfifo {} failed", path.display()))) }
}

/// Lines written to the FIFO at `path` by any number of successive writers.
///
/// The FIFO is open for reading when this returns. The listener holds it open for writing as
/// well (Linux allows a FIFO to be opened read-write): it never sees the end of file between
/// writers, so it never has to reopen it, and a writer that opens it while the previous one
/// closes is never refused (`EPIPE`).
pub fn listen(path: &Path) -> io::Result<Receiver<String>> {
    ensure_fifo(path)?;
    let f = std::fs::OpenOptions::new().read(true).write(true).open(path)?;
    let (tx, lines) = mpsc::channel::<String>();
    std::thread::Builder::new().name("control".into()).spawn(move || {
        for line in BufReader::new(f).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                return;
            }
        }
    })?;
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::time::Duration;

    use super::*;

    #[test]
    fn lines_from_many_successive_writers_all_arrive() {
        let dir = std::env::temp_dir().join(format!("agent-control-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch folder");
        let path = dir.join("ctl");
        let lines = listen(&path).expect("listening");
        let n = 2000;
        for i in 0..n {
            // As a controller over SSH writes: open, write one line, close.
            let mut f = std::fs::OpenOptions::new().write(true).open(&path).expect("open for writing");
            writeln!(f, "begin {i}").unwrap_or_else(|e| panic!("writer {i} refused: {e}"));
        }
        for i in 0..n {
            assert_eq!(lines.recv_timeout(Duration::from_secs(5)).expect("a line"), format!("begin {i}"));
        }
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}

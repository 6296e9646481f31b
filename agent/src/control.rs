//! Control through a named pipe: commands written by any number of successive writers (a
//! controller over SSH opens, writes and closes the pipe for every command) reach a long-running
//! process as lines. Used by the agent (`--control`) and by the FPGA emulator.

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
pub fn listen(path: &Path) -> io::Result<Receiver<String>> {
    ensure_fifo(path)?;
    let (tx, lines) = mpsc::channel::<String>();
    let path = path.to_path_buf();
    std::thread::Builder::new().name("control".into()).spawn(move || {
        loop {
            // Opening blocks until a writer opens the pipe; EOF when it closes it, then reopen.
            let Ok(f) = std::fs::File::open(&path) else { break };
            for line in BufReader::new(f).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    return;
                }
            }
        }
    })?;
    Ok(lines)
}

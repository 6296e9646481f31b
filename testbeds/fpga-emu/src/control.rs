//! The control FIFO (`DIR/ctl`): the emulator reads command lines from it, and the `flash` and
//! `status` subcommands are its clients, which then follow the state file until the command took
//! effect.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use latency_proto::CardIdentity;

use crate::bitstream::Bitstream;
use crate::state::{self, CONTROL_FIFO, Phase, State};

pub use latency_sys::fifo::{ensure_fifo, listen};

/// Errors of the control clients.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The emulator is not running (no state file, no reader on the FIFO, dead pid).
    #[error("fpga-emu is not running in {dir}: {why}")]
    NotRunning {
        /// The emulator's folder.
        dir: PathBuf,
        /// What shows it.
        why: String,
    },
    /// The command did not take effect in time.
    #[error("timed out after {0:?} waiting for fpga-emu")]
    Timeout(Duration),
    /// The emulator reports a failure.
    #[error("{0}")]
    Failed(String),
}

fn not_running(dir: &Path, why: impl Into<String>) -> ClientError {
    ClientError::NotRunning { dir: dir.to_path_buf(), why: why.into() }
}

/// Whether process `pid` exists.
fn alive(pid: u32) -> bool {
    pid > 0 && Path::new(&format!("/proc/{pid}")).exists()
}

/// The state file, checked to belong to a live emulator.
pub fn live_state(dir: &Path) -> Result<State, ClientError> {
    let s = state::read_state(dir).map_err(|e| not_running(dir, format!("{}: {e}", state::STATE_FILE)))?;
    if s.state == Phase::Stopped || !alive(s.pid) {
        return Err(not_running(dir, format!("process {} has exited", s.pid)));
    }
    Ok(s)
}

/// Write one command line to the FIFO; fails at once when no emulator reads it.
pub fn send(dir: &Path, line: &str) -> Result<(), ClientError> {
    let path = dir.join(CONTROL_FIFO);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&path)
        .map_err(|e| not_running(dir, format!("{}: {e}", path.display())))?;
    f.write_all(format!("{line}\n").as_bytes()).map_err(|e| not_running(dir, format!("{}: {e}", path.display())))
}

/// Whether bitstream `b` is `want` (the image as given, its name, or its behaviour).
pub fn matches(b: &Bitstream, want: &str) -> bool {
    [b.image.as_str(), b.name.as_str(), b.behaviour.name()].contains(&want) || b.name == crate::bitstream::stem(want)
}

/// Flash `image` (optionally with a delay in µs; `written`: the image's sha256 and USERCODE, which
/// the card then reads back) and wait until the emulator runs it again.
pub fn flash(
    dir: &Path,
    image: &str,
    delay_us: Option<u64>,
    written: &CardIdentity,
    timeout: Duration,
) -> Result<State, ClientError> {
    let before = live_state(dir)?.generation;
    let mut line = format!("flash {image}");
    if let Some(us) = delay_us {
        line.push_str(&format!(" {us}"));
    }
    if let Some(h) = &written.sha256 {
        line.push_str(&format!(" sha256={h}"));
    }
    if let Some(u) = written.usercode {
        line.push_str(&format!(" usercode={u}"));
    }
    send(dir, &line)?;
    let start = Instant::now();
    loop {
        let s = live_state(dir)?;
        if s.generation > before && s.state == Phase::Running {
            if s.last_result != "ok" {
                return Err(ClientError::Failed(format!("flash {image}: {}", s.last_result)));
            }
            if s.bitstream.image != image {
                return Err(ClientError::Failed(format!("flash {image}: the card runs {} instead", s.bitstream.image)));
            }
            return Ok(s);
        }
        if start.elapsed() > timeout {
            return Err(ClientError::Timeout(timeout));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Wait (up to `timeout`) until the emulator is running, with bitstream `expect` if given.
pub fn status(dir: &Path, expect: Option<&str>, timeout: Duration) -> Result<State, ClientError> {
    let start = Instant::now();
    loop {
        let r = live_state(dir).and_then(|s| {
            if s.state != Phase::Running {
                return Err(ClientError::Failed(format!("the card is {}", s.state.name())));
            }
            match expect {
                Some(want) if !matches(&s.bitstream, want) => Err(ClientError::Failed(format!(
                    "the card runs {} ({}), not {want}",
                    s.bitstream.name, s.bitstream.image
                ))),
                _ => Ok(s),
            }
        });
        match r {
            Ok(s) => return Ok(s),
            Err(e) if start.elapsed() >= timeout => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expectations_match_image_name_or_behaviour() {
        let b = crate::bitstream::resolve("/w/bitstreams/rmvhdr.mcs", None).unwrap();
        assert_eq!((b.name.as_str(), b.behaviour.name()), ("rmvhdr", "remove_header"));
        for want in ["/w/bitstreams/rmvhdr.mcs", "rmvhdr", "remove_header", "/elsewhere/rmvhdr.mcs"] {
            assert!(matches(&b, want), "{want}");
        }
        assert!(!matches(&b, "forward"));
        assert!(!matches(&b, "/w/bitstreams/forward.mcs"));
    }

    #[test]
    fn clients_fail_fast_without_an_emulator() {
        let dir = std::env::temp_dir().join(format!("fpga-emu-ctl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(matches!(
            flash(&dir, "forward", None, &CardIdentity::default(), Duration::from_secs(1)),
            Err(ClientError::NotRunning { .. })
        ));
        ensure_fifo(&dir.join(CONTROL_FIFO)).unwrap();
        // A FIFO with no reader: the write side cannot open it.
        assert!(matches!(send(&dir, "status"), Err(ClientError::NotRunning { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn fifo_lines_reach_the_listener() {
        let dir = std::env::temp_dir().join(format!("fpga-emu-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let lines = listen(&dir.join(CONTROL_FIFO)).unwrap();
        // The FIFO is open once `listen` returns: a client's non-blocking open finds its reader.
        send(&dir, "flash forward").unwrap();
        send(&dir, "quit").unwrap();
        assert_eq!(lines.recv_timeout(Duration::from_secs(5)).unwrap(), "flash forward");
        assert_eq!(lines.recv_timeout(Duration::from_secs(5)).unwrap(), "quit");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! What the emulator publishes in its folder: the state file (`state.json`, replaced atomically),
//! and a file standing in for the register BAR (`bar2`), whose CMAC RX status words read 0x3 while
//! the links are up, so that `latency-agent regs init/check --bar` work against it.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::bitstream::Bitstream;

/// File name of the state file in the emulator's folder.
pub const STATE_FILE: &str = "state.json";
/// File name of the control FIFO in the emulator's folder.
pub const CONTROL_FIFO: &str = "ctl";
/// File name of the fake register BAR in the emulator's folder.
pub const BAR_FILE: &str = "bar2";
/// File name of the pid file in the emulator's folder.
pub const PID_FILE: &str = "fpga-emu.pid";

/// Size of the fake BAR: the register window `latency-agent regs` maps.
pub const BAR_LEN: u64 = latency_sys::regs::WINDOW as u64;

latency_proto::words! {
/// Phase of the emulated card.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Forwarding with the loaded bitstream.
    Running = "running",
    /// Being flashed: host-facing links down, nothing forwarded.
    Flashing = "flashing",
    /// The emulator has exited.
    Stopped = "stopped",
}
}

/// Packet counters since start.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Frames received on switch link A (pipeline path).
    pub pipeline_in: u64,
    /// Frames sent on host link P.
    pub pipeline_out: u64,
    /// Frames the program dropped, by reason ([`crate::packet::DropReason::name`]).
    pub pipeline_dropped: BTreeMap<Cow<'static, str>, u64>,
    /// Frames received on switch link B (bypass path).
    pub bypass_in: u64,
    /// Frames sent on host link B.
    pub bypass_out: u64,
    /// Probe frames (latencylab or compact marker) received on A and on B.
    pub probes_in: [u64; 2],
    /// Frames lost to a flash: in the pipeline when it started, or arriving while links were down.
    pub lost_to_flash: u64,
    /// Sends that failed.
    pub send_errors: u64,
}

/// Everything the state file holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// Process id of the emulator.
    pub pid: u32,
    /// Phase.
    pub state: Phase,
    /// Number of completed `flash` commands (successful or not).
    pub generation: u64,
    /// Outcome of the last flash: `ok` or the error.
    pub last_result: String,
    /// The loaded bitstream.
    pub bitstream: Bitstream,
    /// What the card reads back as its identity: the sha256 of the image file it was flashed
    /// from (when the flash gave one) and its board profile, in the controller's own type.
    #[serde(flatten)]
    pub identity: latency_proto::CardIdentity,
    /// Unix time of the last completed flash, ms.
    pub flashed_at_ms: u64,
    /// Interfaces: switch A, switch B, host P, host B.
    pub links: [String; 4],
    /// Counters.
    pub counters: Counters,
}

/// Milliseconds since the Unix epoch.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Replace `dir/state.json` atomically (write a temporary file, then rename).
pub fn write_state(dir: &Path, state: &State) -> io::Result<()> {
    let mut text = serde_json::to_string_pretty(state).map_err(io::Error::other)?;
    text.push('\n');
    let tmp = dir.join(format!(".{STATE_FILE}.tmp"));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, dir.join(STATE_FILE))
}

/// Read `dir/state.json`.
pub fn read_state(dir: &Path) -> io::Result<State> {
    let text = std::fs::read_to_string(dir.join(STATE_FILE))?;
    serde_json::from_str(&text).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// The fake register BAR.
pub struct FakeBar {
    path: PathBuf,
}

impl FakeBar {
    /// Create `dir/bar2` (zero-filled, [`BAR_LEN`] bytes) unless it exists with that size.
    pub fn create(dir: &Path) -> io::Result<FakeBar> {
        let path = dir.join(BAR_FILE);
        let f = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path)?;
        if f.metadata()?.len() != BAR_LEN {
            f.set_len(0)?;
            f.set_len(BAR_LEN)?;
        }
        Ok(FakeBar { path })
    }

    /// Set both CMAC RX status registers: 0x3 (aligned, up) or 0x0.
    pub fn set_links_up(&self, up: bool) -> io::Result<()> {
        let f = OpenOptions::new().write(true).open(&self.path)?;
        let v: u32 = if up { 0x3 } else { 0x0 };
        for (offset, _, _) in latency_sys::regs::RX_STATUS {
            f.write_all_at(&v.to_le_bytes(), offset as u64)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_bar_passes_the_agents_health_check_only_when_up() {
        let dir = std::env::temp_dir().join(format!("fpga-emu-bar-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bar = FakeBar::create(&dir).unwrap();
        let check = || {
            let b = latency_sys::bar::Bar::map(&dir.join(BAR_FILE), latency_sys::regs::WINDOW).unwrap();
            latency_sys::regs::check(&b, 2).unwrap()
        };
        assert!(!check().is_empty());
        bar.set_links_up(true).unwrap();
        assert!(check().is_empty());
        bar.set_links_up(false).unwrap();
        assert!(!check().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn state_file_round_trips() {
        let dir = std::env::temp_dir().join(format!("fpga-emu-state-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut counters = Counters { pipeline_in: 9, probes_in: [4, 5], ..Counters::default() };
        counters.pipeline_dropped.insert(Cow::Borrowed("bad_checksum"), 2);
        let s = State {
            pid: 1,
            state: Phase::Running,
            generation: 3,
            last_result: "ok".into(),
            bitstream: crate::bitstream::resolve("rmvhdr.mcs", None).unwrap(),
            identity: latency_proto::CardIdentity {
                sha256: Some("ab".repeat(32)),
                profile: Some("U280".into()),
                ..Default::default()
            },
            flashed_at_ms: 5,
            links: ["a", "b", "p", "q"].map(String::from),
            counters,
        };
        write_state(&dir, &s).unwrap();
        assert_eq!(read_state(&dir).unwrap(), s);
        let identity: latency_proto::CardIdentity =
            serde_json::from_str(&std::fs::read_to_string(dir.join(STATE_FILE)).unwrap()).unwrap();
        assert_eq!(identity.sha256, Some("ab".repeat(32)), "the identity the controller reads back");
        assert_eq!(identity.profile.as_deref(), Some("U280"));
        // The field names and encodings others read (`fpga-emu status`, the readback provenance).
        let text = std::fs::read_to_string(dir.join(STATE_FILE)).unwrap();
        for phase in [Phase::Running, Phase::Flashing, Phase::Stopped] {
            assert_eq!(serde_json::to_string(&phase).unwrap(), format!("\"{}\"", phase.name()));
        }
        for field in [
            r#""generation": 3"#,
            r#""state": "running""#,
            r#""behaviour": "remove_header""#,
            r#""delay_us": 400"#,
            r#""name": "rmvhdr""#,
            r#""bad_checksum": 2"#,
        ] {
            assert!(text.contains(field), "{field} in {text}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

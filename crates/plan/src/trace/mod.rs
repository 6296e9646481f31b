//! Probe trace generation and inspection (`orchestrate trace`).
//!
//! A generated trace is a nanosecond pcap of probes 1..=N whose headers match a program's traffic
//! ([`TraceTemplate`](crate::TraceTemplate); IPv4 or IPv6, UDP or TCP, INT-MD over UDP/TCP or over
//! GRE: [`frame`]) and whose payload carries the probe id in the agent's wire format
//! ([`latency_proto::probe`]), zero-padded to the frame size asked for, VLAN-tagged when asked.
//! Generation is deterministic: the same [`Generated`] spec gives a byte-identical file (fixed MACs,
//! addresses and timestamps id × 2 ms, i.e. 500 pps).
//!
//! Inspection ([`inspect()`]) reads any classic pcap (µs or ns, either byte order) and reports what a
//! replay would send: packets, probes, duplicates, gaps, frame lengths, and the problems found,
//! among them what a replay cannot send as the file has it ([`Defect`]: a link type other than
//! Ethernet, records holding more than their frame, time stamps out of range, frames too long).

mod frame;
mod inspect;

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, TsResolution};
use serde::Serialize;

pub use frame::*;
pub use inspect::{Defect, Inspection, inspect};
// The templates, limits and shapes of a generation spec (defined with the spec, which plans decode)
// are named here too, beside the frames they make.
pub use crate::trace_spec::{
    FRAME_LEN, MAX_FRAME_LEN, MAX_PROBES, Refused, Shape, VLAN_ID, default_frame_len, default_vlan, takes_ipv6,
};

use crate::digest::sha256_hex;
use crate::probes;
use crate::trace_spec::{Generated, Trace, TraceSource};
use latency_files::FileError;

/// Spacing of the probes' timestamps: 2 ms, i.e. 500 packets per second.
pub const SPACING: Duration = Duration::from_millis(2);

/// Errors of trace generation and inspection, each naming the file.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file cannot be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// A trace of no probes was asked for.
    #[error("{path}: a trace needs at least one probe (count 0)")]
    NoProbes {
        /// The file that was to be generated.
        path: PathBuf,
    },
    /// The file is not a readable pcap, or a packet cannot be encoded.
    #[error("{path}: {message}")]
    Pcap {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// A probe frame cannot be built.
    #[error("{path}: probe {id}: {source}")]
    Build {
        /// The file being generated.
        path: PathBuf,
        /// The probe id.
        id: u64,
        /// What went wrong.
        source: frame::FrameError,
    },
    /// The file cannot be written (it exists, or the write failed); the error names the file.
    #[error(transparent)]
    Write(#[from] FileError),
}

/// What [`generate`] wrote.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TraceInfo {
    /// The pcap file.
    pub path: PathBuf,
    /// Number of probes (ids 1..=probes).
    pub probes: u32,
    /// Size of the file in bytes.
    pub bytes: u64,
    /// sha256 of the file (lowercase hex).
    pub sha256: String,
}

/// Write the trace of `spec` to `path` (atomically; an existing file is an error).
pub fn generate(spec: &Generated, path: &Path) -> Result<TraceInfo, TraceError> {
    if spec.count == 0 {
        return Err(TraceError::NoProbes { path: path.to_path_buf() });
    }
    let header = PcapHeader {
        ts_resolution: TsResolution::NanoSecond,
        endianness: Endianness::Little,
        datalink: DataLink::ETHERNET,
        ..PcapHeader::default()
    };
    let pcap_err = |e: pcap_file::PcapError| TraceError::Pcap { path: path.to_path_buf(), message: e.to_string() };
    let per_packet = 16 + spec.frame_len as usize;
    let buf = Vec::with_capacity(24 + per_packet * spec.count as usize);
    let mut w = PcapWriter::with_header(buf, header).map_err(pcap_err)?;
    for id in probes::ids(u64::from(spec.count)) {
        let data = frame(spec, id).map_err(|source| TraceError::Build { path: path.to_path_buf(), id, source })?;
        let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        let ts = SPACING.saturating_mul(u32::try_from(id).unwrap_or(u32::MAX));
        w.write_packet(&PcapPacket::new(ts, len, &data)).map_err(pcap_err)?;
    }
    let bytes = w.into_writer();
    latency_files::write_file(path, &bytes, false)?;
    Ok(TraceInfo {
        path: path.to_path_buf(),
        probes: spec.count,
        bytes: bytes.len() as u64,
        sha256: sha256_hex(&bytes),
    })
}

/// The local file of every trace of `traces` (a [`Plan`](crate::Plan)'s, or any list of them),
/// with the file name it is replayed under ([`Trace::file_name`]), in their order: a `pcap:`
/// trace is its file; a generated one is generated into `dir` unless a file of its name is there
/// already (from an earlier attempt of the study).
pub fn materialize(traces: &(impl AsRef<[Trace]> + ?Sized), dir: &Path) -> Result<Vec<(String, PathBuf)>, TraceError> {
    let traces = traces.as_ref();
    let mut out = Vec::with_capacity(traces.len());
    for t in traces {
        let path = match &t.source {
            TraceSource::Pcap { path, .. } => path.clone(),
            TraceSource::Generate(spec) | TraceSource::StandIn { generate: spec, .. } => {
                let path = dir.join(t.file_name());
                if !path.exists() {
                    generate(spec, &path)?;
                }
                path
            }
        };
        out.push((t.file_name(), path));
    }
    Ok(out)
}

//! Probe trace generation and inspection (`orchestrate trace`).
//!
//! A generated trace is a nanosecond pcap of probes 1..=N whose headers match a program's traffic
//! ([`TraceTemplate`]; IPv4 or IPv6, UDP or TCP, INT-MD over UDP/TCP or over GRE: [`frame`]) and
//! whose payload carries the probe id in the agent's wire format ([`latency_proto::probe`]),
//! zero-padded to the frame size asked for, VLAN-tagged when asked. Generation is deterministic: the
//! same [`Generated`] spec gives a byte-identical file (fixed MACs, addresses and timestamps
//! id × 2 ms, i.e. 500 pps).
//!
//! Inspection ([`inspect()`]) reads any classic pcap (µs or ns, either byte order) and reports what a
//! replay would send: packets, probes, duplicates, gaps, frame lengths, and the problems found.

mod frame;
mod inspect;

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, TsResolution};
use serde::Serialize;

pub use frame::*;
pub use inspect::{Inspection, inspect};

use crate::Generated;
use crate::Plan;
use crate::TraceSource;
use crate::TraceTemplate;
use crate::digest::sha256_hex;
use crate::probes;
use latency_files::FileError;

/// Length of an untagged probe frame (without FCS) unless a plan asks for another; VLAN-tagged
/// frames are 4 bytes longer.
pub const FRAME_LEN: usize = 128;
/// Longest frame a plan may ask for (a jumbo frame, without FCS).
pub const MAX_FRAME_LEN: u32 = 9216;
/// Spacing of the probes' timestamps: 2 ms, i.e. 500 packets per second.
pub const SPACING: Duration = Duration::from_millis(2);
/// Most probes a generated trace has (plans and `trace generate` accept 1..=MAX_PROBES).
pub const MAX_PROBES: u32 = 10_000_000;

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
    #[error("{path}: probe {id}: {message}")]
    Build {
        /// The file being generated.
        path: PathBuf,
        /// The probe id.
        id: u64,
        /// What went wrong.
        message: String,
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

/// Every trace template with its name as written in plans.
pub const TEMPLATES: [(&str, TraceTemplate); 6] = [
    ("forward", TraceTemplate::Forward),
    ("five_tuple", TraceTemplate::FiveTuple),
    ("remove_header", TraceTemplate::RemoveHeader),
    ("checksum", TraceTemplate::Checksum),
    ("int", TraceTemplate::Int),
    ("int_gre", TraceTemplate::IntGre),
];

/// The template named `name` (as in plans: `forward`, `five_tuple`, `remove_header`, `checksum`,
/// `int`, `int_gre`).
pub fn template_by_name(name: &str) -> Option<TraceTemplate> {
    TEMPLATES.iter().find(|(n, _)| *n == name).map(|&(_, t)| t)
}

/// The name of a template as written in plans.
pub fn template_name(template: TraceTemplate) -> &'static str {
    TEMPLATES.iter().find(|(_, t)| *t == template).map_or("?", |&(n, _)| n)
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
        let data = frame(spec, id).map_err(|message| TraceError::Build { path: path.to_path_buf(), id, message })?;
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

/// The local file of every trace of `plan`, with the file name it is replayed under
/// ([`Trace::file_name`](crate::Trace::file_name)), in the plan's order: a `pcap:` trace is
/// its file; a generated one is generated into `dir` unless a file of its name is there already
/// (from an earlier attempt of the study).
pub fn materialize(plan: &Plan, dir: &Path) -> Result<Vec<(String, PathBuf)>, TraceError> {
    let mut out = Vec::with_capacity(plan.traces.len());
    for t in &plan.traces {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn materializing_generates_each_trace_once() {
        let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../plans/smoke.yaml"));
        let (plan, _) = crate::load(path, None).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("traces");
        let traces = materialize(&plan, &dir).unwrap();
        let names: Vec<&str> = traces.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["forward_1k.pcap", "checksum_1k.pcap"]);
        for (name, path) in &traces {
            assert_eq!(*path, dir.join(name));
            assert_eq!(inspect(path, crate::ProbeFormat::Latencylab).unwrap().packets, 1000);
        }
        // A file already there is kept as it is.
        std::fs::write(&traces[0].1, b"kept").unwrap();
        assert_eq!(materialize(&plan, &dir).unwrap(), traces);
        assert_eq!(std::fs::read(&traces[0].1).unwrap(), b"kept");
    }
}

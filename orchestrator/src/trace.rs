//! Probe trace generation and inspection (`orchestrate trace`).
//!
//! A generated trace is a nanosecond pcap of probes 1..=N whose headers match a program's traffic
//! ([`TraceTemplate`]) and whose payload carries the probe id in the agent's wire format
//! ([`latency_proto::probe`]), zero-padded to the frame size asked for, VLAN-tagged when asked.
//! Generation is deterministic: the same [`Generated`] spec gives a byte-identical file (fixed MACs,
//! addresses and timestamps id × 2 ms, i.e. 500 pps).
//!
//! Inspection reads any classic pcap (µs or ns, either byte order) and reports what a replay would
//! send: packets, probes, duplicates, gaps, frame lengths, and the problems found.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use etherparse::{PacketBuilder, VlanId};
use latency_proto::probe;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, TsResolution};
use serde::Serialize;

use crate::digest::sha256_hex;
use crate::pcap::{PcapError, Reader};
use crate::plan::{Generated, Plan, ProbeFormat, TraceSource, TraceTemplate};
use crate::probes;
use crate::results::{self, ResultsError};

/// Destination MAC of every probe: broadcast, so that a flooding switch copies it to both ports.
pub const DST_MAC: [u8; 6] = [0xff; 6];
/// Source MAC of every probe (locally administered).
pub const SRC_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x01];
/// Source address of every probe (the FiveTuple table's source).
pub const SRC_IP: [u8; 4] = [10, 0, 0, 100];
/// UDP source port of every probe (the FiveTuple table's source port).
pub const SRC_PORT: u16 = 4000;
/// UDP destination port of probes other than FiveTuple's.
pub const DST_PORT: u16 = 5000;
/// VLAN id of RemoveHeader probes.
pub const VLAN_ID: u16 = 100;
/// Length of an untagged probe frame (without FCS) unless a plan asks for another; VLAN-tagged
/// frames are 4 bytes longer.
pub const FRAME_LEN: usize = 128;
/// Longest frame a plan may ask for (a jumbo frame, without FCS).
pub const MAX_FRAME_LEN: u32 = 9216;
/// Ethernet, IPv4 and UDP headers of an untagged probe.
const HEADERS_LEN: usize = 14 + 20 + 8;
/// Ethernet's shortest frame without FCS.
const ETHERNET_MIN: usize = 60;
/// Spacing of the probes' timestamps: 2 ms, i.e. 500 packets per second.
pub const SPACING: Duration = Duration::from_millis(2);
/// Time to live of the probes' IPv4 header.
const TTL: u8 = 64;
/// How many duplicated or missing ids an inspection lists.
const LIST_MAX: usize = 10;
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
    Write(#[from] ResultsError),
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
pub const TEMPLATES: [(&str, TraceTemplate); 4] = [
    ("forward", TraceTemplate::Forward),
    ("five_tuple", TraceTemplate::FiveTuple),
    ("remove_header", TraceTemplate::RemoveHeader),
    ("checksum", TraceTemplate::Checksum),
];

/// The template named `name` (as in plans: `forward`, `five_tuple`, `remove_header`, `checksum`).
pub fn template_by_name(name: &str) -> Option<TraceTemplate> {
    TEMPLATES.iter().find(|(n, _)| *n == name).map(|&(_, t)| t)
}

/// The name of a template as written in plans.
pub fn template_name(template: TraceTemplate) -> &'static str {
    TEMPLATES.iter().find(|(_, t)| *t == template).map_or("?", |&(n, _)| n)
}

/// Addresses and ports of a probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flow {
    /// IPv4 source.
    pub src: [u8; 4],
    /// IPv4 destination.
    pub dst: [u8; 4],
    /// UDP source port.
    pub sport: u16,
    /// UDP destination port.
    pub dport: u16,
    /// 802.1Q VLAN id, if the frame is tagged.
    pub vlan: Option<u16>,
}

/// The flow of probe `id` in a trace of `template`, consistent with the programs' tables:
/// Forward probes go to 10.0.0.1–7 (table hits) when [`probes::forwarded`], else to 10.0.1.x
/// (misses); FiveTuple probes use the table's four five-tuples 10.0.0.100:4000 →
/// 10.0.0.(1..4):(5000..5003); RemoveHeader and Checksum probes go to 10.0.0.1–7. Tagged with
/// `vlan` when given.
pub fn flow(template: TraceTemplate, id: u64, vlan: Option<u16>) -> Flow {
    let hit = [10, 0, 0, 1 + (id % 7) as u8];
    let base = Flow { src: SRC_IP, dst: hit, sport: SRC_PORT, dport: DST_PORT, vlan };
    match template {
        TraceTemplate::Forward if probes::forwarded(template, id) => base,
        TraceTemplate::Forward => Flow { dst: [10, 0, 1, (id % 250 + 1) as u8], ..base },
        TraceTemplate::FiveTuple => {
            let k = id % 4;
            Flow { dst: [10, 0, 0, 1 + k as u8], dport: DST_PORT + k as u16, ..base }
        }
        TraceTemplate::RemoveHeader | TraceTemplate::Checksum => base,
    }
}

/// The VLAN tag of a template's traffic unless a plan says otherwise: RemoveHeader's probes carry
/// the header the program removes (VLAN 100); the others are untagged.
pub fn default_vlan(template: TraceTemplate) -> Option<u16> {
    (template == TraceTemplate::RemoveHeader).then_some(VLAN_ID)
}

/// The frame length unless a plan asks for another: [`FRAME_LEN`], 4 bytes more when tagged.
pub fn default_frame_len(tagged: bool) -> u32 {
    (FRAME_LEN + if tagged { 4 } else { 0 }) as u32
}

/// The shortest frame that holds the headers and the probe id of every probe 1..=`count`, and
/// is no shorter than Ethernet's minimum (60 B without FCS).
pub fn shortest_frame(tagged: bool, format: ProbeFormat, count: u32) -> usize {
    let needed = HEADERS_LEN + if tagged { 4 } else { 0 } + probe::payload(u64::from(count), format, 0).len();
    needed.max(ETHERNET_MIN)
}

impl Generated {
    /// Probes 1..=`count` of `template` in `format`, with the template's tagging and the default
    /// frame length.
    pub fn new(template: TraceTemplate, count: u32, probe_id: ProbeFormat) -> Generated {
        let vlan = default_vlan(template);
        Generated { template, count, probe_id, frame_len: default_frame_len(vlan.is_some()), vlan }
    }

    /// Probes 1..=`count` of `template` in `format`, tagged with `vlan` (none: the template's
    /// tagging) and `frame_len` bytes long (none: the default for the tagging). Too short a frame
    /// is refused with the shortest that holds the headers and ids.
    pub fn with(
        template: TraceTemplate,
        count: u32,
        probe_id: ProbeFormat,
        vlan: Option<Option<u16>>,
        frame_len: Option<u32>,
    ) -> Result<Generated, usize> {
        let vlan = vlan.unwrap_or_else(|| default_vlan(template));
        let shortest = shortest_frame(vlan.is_some(), probe_id, count);
        match frame_len {
            Some(f) if (f as usize) < shortest => Err(shortest),
            f => Ok(Generated {
                template,
                count,
                probe_id,
                frame_len: f.unwrap_or(default_frame_len(vlan.is_some())),
                vlan,
            }),
        }
    }

    /// In words: `template forward, 20000 probes, 212 B frames, VLAN 100`.
    pub fn describe(&self) -> String {
        let tag = self.vlan.map_or_else(|| "untagged".to_owned(), |v| format!("VLAN {v}"));
        format!("template {}, {} probes, {} B frames, {tag}", template_name(self.template), self.count, self.frame_len)
    }
}

/// The Ethernet frame of probe `id` of `spec`: `spec.frame_len` bytes (longer only if the id does
/// not fit), IPv4 and UDP checksums filled in, the payload from [`probe::payload`] padded with
/// zeros.
pub fn frame(spec: &Generated, id: u64) -> Result<Vec<u8>, String> {
    let f = flow(spec.template, id, spec.vlan);
    let tag_len = if f.vlan.is_some() { 4 } else { 0 };
    let pad = (spec.frame_len as usize).saturating_sub(HEADERS_LEN + tag_len);
    let payload = probe::payload(id, spec.probe_id, pad);
    let mut out = Vec::with_capacity(HEADERS_LEN + tag_len + payload.len());
    match f.vlan {
        Some(vid) => {
            let vid = VlanId::try_new(vid).map_err(|e| e.to_string())?;
            let b = PacketBuilder::ethernet2(SRC_MAC, DST_MAC)
                .single_vlan(vid)
                .ipv4(f.src, f.dst, TTL)
                .udp(f.sport, f.dport);
            b.write(&mut out, &payload).map_err(|e| e.to_string())?;
        }
        None => {
            let b = PacketBuilder::ethernet2(SRC_MAC, DST_MAC).ipv4(f.src, f.dst, TTL).udp(f.sport, f.dport);
            b.write(&mut out, &payload).map_err(|e| e.to_string())?;
        }
    }
    Ok(out)
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
    results::write_file(path, &bytes, false)?;
    Ok(TraceInfo {
        path: path.to_path_buf(),
        probes: spec.count,
        bytes: bytes.len() as u64,
        sha256: sha256_hex(&bytes),
    })
}

/// The local file of every trace of `plan`, with the file name it is replayed under
/// ([`Trace::file_name`](crate::plan::Trace::file_name)), in the plan's order: a `pcap:` trace is
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

/// What a trace holds, as [`inspect`] found it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Inspection {
    /// The pcap file.
    pub path: PathBuf,
    /// The probe format looked for (`latencylab` or `compact`).
    pub format: String,
    /// Packets in the file.
    pub packets: u64,
    /// Packets carrying a probe in `format`.
    pub probes: u64,
    /// Packets carrying no probe in `format`.
    pub non_probes: u64,
    /// Probes whose marker is already tagged P or B (reflected packets, not a trace to replay).
    pub tagged: u64,
    /// Distinct probe ids.
    pub unique_ids: u64,
    /// Probes repeating an id seen before (a probe sent three times counts 2).
    pub duplicate_ids: u64,
    /// The smallest duplicated ids (at most 10).
    pub duplicates: Vec<u64>,
    /// Smallest probe id.
    pub min_id: Option<u64>,
    /// Largest probe id.
    pub max_id: Option<u64>,
    /// Ids missing between the smallest and the largest.
    pub gaps: u64,
    /// The smallest missing ids (at most 10).
    pub missing: Vec<u64>,
    /// Packets carrying a probe in each format (by format name), whichever was looked for.
    pub formats: BTreeMap<String, u64>,
    /// Shortest captured frame, in bytes.
    pub frame_len_min: Option<u32>,
    /// Longest captured frame, in bytes.
    pub frame_len_max: Option<u32>,
    /// Whether probe ids increase strictly in file order.
    pub strictly_increasing: bool,
}

impl Inspection {
    /// What makes the trace unfit as a probe trace to replay: no packets or probes, packets without
    /// a probe, duplicated or missing ids, ids out of order, tagged probes, probes of the other
    /// format. Empty when the trace is fine.
    pub fn problems(&self) -> Vec<String> {
        if self.packets == 0 {
            return vec![NO_PACKETS.to_owned()];
        }
        let mut out = Vec::new();
        if self.probes == 0 {
            out.push(self.no_probe());
        } else if self.non_probes > 0 {
            out.push(format!("{} of {} packets carry no {} probe id", self.non_probes, self.packets, self.format));
        }
        for (name, &n) in &self.formats {
            if *name != self.format && n > 0 {
                out.push(format!("{n} packets carry a {name} probe id, but the trace is read as {}", self.format));
            }
        }
        out.extend(self.repeated());
        if self.gaps > 0 {
            out.push(format!(
                "{} ids are missing between {} and {} (ids {})",
                self.gaps,
                self.min_id.unwrap_or(0),
                self.max_id.unwrap_or(0),
                list(&self.missing, self.gaps > self.missing.len() as u64)
            ));
        }
        if !self.strictly_increasing && self.duplicate_ids == 0 {
            out.push("probe ids do not increase strictly in file order".to_owned());
        }
        if self.tagged > 0 {
            out.push(format!("{} probes are already tagged P or B (reflected packets)", self.tagged));
        }
        out
    }

    /// What makes the trace unusable for a study, which plan validation rejects: no packets, no
    /// probe in the format looked for, repeated probe ids (the copies of a probe could not be
    /// paired). A subset of [`Inspection::problems`].
    pub fn unusable(&self) -> Vec<String> {
        if self.packets == 0 {
            return vec![NO_PACKETS.to_owned()];
        }
        let mut out: Vec<String> = (self.probes == 0).then(|| self.no_probe()).into_iter().collect();
        out.extend(self.repeated());
        out
    }

    fn no_probe(&self) -> String {
        format!("no packet carries a {} probe id", self.format)
    }

    fn repeated(&self) -> Option<String> {
        (self.duplicate_ids > 0).then(|| {
            format!(
                "{} probes repeat an id seen before (ids {})",
                self.duplicate_ids,
                list(&self.duplicates, self.duplicate_ids > self.duplicates.len() as u64)
            )
        })
    }
}

const NO_PACKETS: &str = "the trace holds no packets";

fn list(ids: &[u64], more: bool) -> String {
    let mut s = ids.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
    if more {
        s.push_str(", …");
    }
    s
}

/// Read the pcap at `path` and report its probes in `format`.
pub fn inspect(path: &Path, format: ProbeFormat) -> Result<Inspection, TraceError> {
    let read_err = |e: PcapError| match e {
        PcapError::Io(source) => TraceError::Io { path: path.to_path_buf(), source },
        other => TraceError::Pcap { path: path.to_path_buf(), message: other.to_string() },
    };
    let mut reader = Reader::open(path).map_err(read_err)?;
    let mut packets = 0u64;
    let mut tagged = 0u64;
    let mut formats: BTreeMap<String, u64> = ProbeFormat::ALL.iter().map(|f| (f.name().to_owned(), 0)).collect();
    let mut frame_len: Option<(u32, u32)> = None;
    let mut strictly_increasing = true;
    let mut ids: Vec<u64> = Vec::new();
    while let Some(data) = reader.next_record().map_err(read_err)? {
        packets += 1;
        let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        frame_len = Some(frame_len.map_or((len, len), |(lo, hi)| (lo.min(len), hi.max(len))));
        let mut found = None;
        for f in ProbeFormat::ALL {
            if let Some(p) = probe::parse(data, f) {
                *formats.entry(f.name().to_owned()).or_default() += 1;
                if f == format {
                    found = Some(p);
                }
            }
        }
        let Some(p) = found else { continue };
        tagged += u64::from(p.tag.is_some());
        if ids.last().is_some_and(|&last| p.id <= last) {
            strictly_increasing = false;
        }
        ids.push(p.id);
    }
    let probes = ids.len() as u64;
    ids.sort_unstable();
    let (min_id, max_id) = (ids.first().copied(), ids.last().copied());
    let mut duplicate_ids = 0u64;
    let mut duplicates = Vec::new();
    let mut gaps = 0u64;
    let mut missing = Vec::new();
    for w in ids.windows(2) {
        let (a, b) = (w[0], w[1]);
        if a == b {
            duplicate_ids += 1;
            if duplicates.len() < LIST_MAX && duplicates.last() != Some(&a) {
                duplicates.push(a);
            }
        } else if b - a > 1 {
            gaps += b - a - 1;
            missing.extend((a + 1..b).take(LIST_MAX - missing.len()));
        }
    }
    Ok(Inspection {
        path: path.to_path_buf(),
        format: format.name().to_owned(),
        packets,
        probes,
        non_probes: packets - probes,
        tagged,
        unique_ids: probes - duplicate_ids,
        duplicate_ids,
        duplicates,
        min_id,
        max_id,
        gaps,
        missing,
        formats,
        frame_len_min: frame_len.map(|(lo, _)| lo),
        frame_len_max: frame_len.map(|(_, hi)| hi),
        strictly_increasing,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_have_the_fixed_lengths() {
        for (_, t) in TEMPLATES {
            for format in ProbeFormat::ALL {
                for id in [1, 3, 20_000, 10_000_000] {
                    let f = frame(&Generated::new(t, 10_000_000, format), id).unwrap();
                    let expected = if t == TraceTemplate::RemoveHeader { FRAME_LEN + 4 } else { FRAME_LEN };
                    assert_eq!(f.len(), expected, "{t:?} {format} {id}");
                    assert_eq!(probe::parse(&f, format), Some(probe::Probe { id, tag: None }));
                }
            }
        }
    }

    #[test]
    fn frame_size_and_tagging_are_as_asked() {
        // The published Forward trace's mean frame (212 B, tagged) and an untagged one.
        let tagged = Generated {
            frame_len: 212,
            vlan: Some(7),
            ..Generated::new(TraceTemplate::Forward, 20_000, ProbeFormat::Latencylab)
        };
        let f = frame(&tagged, 20_000).unwrap();
        assert_eq!(f.len(), 212);
        assert_eq!(&f[12..16], &[0x81, 0x00, 0x00, 0x07], "802.1Q TPID then VLAN 7");
        assert_eq!(probe::parse(&f, ProbeFormat::Latencylab), Some(probe::Probe { id: 20_000, tag: None }));
        let plain = Generated { vlan: None, frame_len: 208, ..tagged };
        let f = frame(&plain, 3).unwrap();
        assert_eq!((f.len(), &f[12..14]), (208, &[0x08, 0x00][..]), "untagged IPv4");
        // The shortest frame holds 42 B of headers (46 tagged), the 12-byte marker and the 8 digits
        // of 10,000,000, and never less than Ethernet's 60 B.
        assert_eq!(shortest_frame(false, ProbeFormat::Latencylab, 10_000_000), 42 + 12 + 8);
        assert_eq!(shortest_frame(true, ProbeFormat::Latencylab, 10_000_000), 46 + 12 + 8);
        assert_eq!(shortest_frame(false, ProbeFormat::Latencylab, 20_000), 60);
        assert_eq!(shortest_frame(true, ProbeFormat::Compact, 1), 60);
        let tight = Generated { frame_len: 62, count: 10_000_000, ..plain };
        assert_eq!(frame(&tight, 10_000_000).unwrap().len(), 62);
    }

    #[test]
    fn flows_match_the_tables() {
        assert_eq!(flow(TraceTemplate::Forward, 1, None).dst, [10, 0, 0, 2]);
        assert_eq!(flow(TraceTemplate::Forward, 3, None).dst, [10, 0, 1, 4]);
        assert_eq!(flow(TraceTemplate::Forward, 7, None).dst, [10, 0, 0, 1]);
        for id in 1..=100 {
            let f = flow(TraceTemplate::FiveTuple, id, None);
            assert_eq!((f.src, f.sport), (SRC_IP, SRC_PORT));
            assert!((1..=4).contains(&f.dst[3]));
            assert_eq!(f.dport, 5000 + u16::from(f.dst[3]) - 1, "table pairs 10.0.0.k with port 4999+k");
            let fwd = flow(TraceTemplate::Forward, id, None);
            assert_eq!(fwd.dst[2] == 0, probes::forwarded(TraceTemplate::Forward, id));
            assert!((1..=250).contains(&fwd.dst[3]));
        }
        assert_eq!(Generated::new(TraceTemplate::RemoveHeader, 5, ProbeFormat::Compact).vlan, Some(100));
        assert_eq!(Generated::new(TraceTemplate::Forward, 5, ProbeFormat::Compact).vlan, None);
    }

    #[test]
    fn names_round_trip() {
        for (name, t) in TEMPLATES {
            assert_eq!(template_by_name(name), Some(t));
            assert_eq!(template_name(t), name);
        }
        assert_eq!(template_by_name("fwd"), None);
    }

    #[test]
    fn problems_of_a_clean_and_a_broken_inspection() {
        let clean = Inspection {
            path: PathBuf::from("t.pcap"),
            format: "latencylab".into(),
            packets: 3,
            probes: 3,
            non_probes: 0,
            tagged: 0,
            unique_ids: 3,
            duplicate_ids: 0,
            duplicates: vec![],
            min_id: Some(1),
            max_id: Some(3),
            gaps: 0,
            missing: vec![],
            formats: [("latencylab".to_owned(), 3), ("compact".to_owned(), 0)].into(),
            frame_len_min: Some(128),
            frame_len_max: Some(128),
            strictly_increasing: true,
        };
        assert!(clean.problems().is_empty());
        let broken = Inspection {
            packets: 5,
            non_probes: 2,
            duplicate_ids: 1,
            duplicates: vec![2],
            gaps: 12,
            missing: (4..14).collect(),
            max_id: Some(15),
            strictly_increasing: false,
            ..clean
        };
        assert_eq!(
            broken.problems(),
            [
                "2 of 5 packets carry no latencylab probe id",
                "1 probes repeat an id seen before (ids 2)",
                "12 ids are missing between 1 and 15 (ids 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, …)",
            ]
        );
    }

    #[test]
    fn materializing_generates_each_trace_once() {
        let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../plans/smoke.yaml"));
        let (plan, _) = crate::plan::load(path, None).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("traces");
        let traces = materialize(&plan, &dir).unwrap();
        let names: Vec<&str> = traces.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["forward_1k.pcap", "checksum_1k.pcap"]);
        for (name, path) in &traces {
            assert_eq!(*path, dir.join(name));
            assert_eq!(inspect(path, ProbeFormat::Latencylab).unwrap().packets, 1000);
        }
        // A file already there is kept as it is.
        std::fs::write(&traces[0].1, b"kept").unwrap();
        assert_eq!(materialize(&plan, &dir).unwrap(), traces);
        assert_eq!(std::fs::read(&traces[0].1).unwrap(), b"kept");
    }
}

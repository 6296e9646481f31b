//! What a pcap holds, read as a study would replay it.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use latency_proto::probe;
use serde::Serialize;

use super::TraceError;
use crate::ProbeFormat;
use crate::trace_spec::MAX_FRAME_LEN;
use latency_proto::pcap::PcapError;
use latency_proto::pcap::Reader;

/// How many duplicated or missing ids an inspection lists.
const LIST_MAX: usize = 10;

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
    /// What a replay cannot send as the file has it: its link type, records holding more than
    /// their frame, time stamps out of range, frames too long (each kind once, at its first record).
    pub defects: Vec<Defect>,
}

/// Something in a pcap that a replay cannot send as the file has it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "defect")]
pub enum Defect {
    /// The file's link type is not Ethernet (1): its records are no Ethernet frames.
    LinkType {
        /// The link type of the file header.
        link_type: u32,
    },
    /// A record holds more bytes than its frame had (`incl_len` > `orig_len`).
    CapturedBeyondFrame {
        /// The first such record, from 1.
        record: u64,
        /// Its captured length.
        captured: u32,
        /// Its original length.
        original: u32,
        /// Records like it.
        records: u64,
    },
    /// A time stamp's fraction of a second is a second or more (≥ 10⁹ ns, or ≥ 10⁶ µs).
    Fraction {
        /// The first such record, from 1.
        record: u64,
        /// Its fraction.
        fraction: u32,
        /// Whether the file's fractions are ns (else µs).
        nanos: bool,
        /// Records like it.
        records: u64,
    },
    /// A frame longer than the largest a probe trace may hold ([`MAX_FRAME_LEN`]).
    Oversized {
        /// The first such record, from 1.
        record: u64,
        /// Its captured length.
        len: u32,
        /// Records like it.
        records: u64,
    },
}

impl fmt::Display for Defect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = |f: &mut fmt::Formatter<'_>, record: u64, records: u64| {
            write!(f, "record {record}")?;
            if records > 1 { write!(f, " and {} more", records - 1) } else { Ok(()) }
        };
        match *self {
            Defect::LinkType { link_type } => write!(
                f,
                "the file's link type is {link_type}, not Ethernet ({ETHERNET}): a replay sends every record as an \
                 Ethernet frame"
            ),
            Defect::CapturedBeyondFrame { record, captured, original, records } => {
                at(f, record, records)?;
                write!(
                    f,
                    ": {captured} bytes captured of a frame of {original} bytes (a record cannot hold more than its frame)"
                )
            }
            Defect::Fraction { record, fraction, nanos, records } => {
                at(f, record, records)?;
                let (unit, power) = if nanos { ("ns", 9) } else { ("µs", 6) };
                write!(f, ": time stamp fraction {fraction} {unit} is not below a second (10^{power} {unit})")
            }
            Defect::Oversized { record, len, records } => {
                at(f, record, records)?;
                write!(
                    f,
                    ": a frame of {len} bytes, longer than {MAX_FRAME_LEN} bytes, the largest a probe trace may hold"
                )
            }
        }
    }
}

/// The link type of Ethernet frames (LINKTYPE_ETHERNET).
const ETHERNET: u32 = 1;

impl Inspection {
    /// What makes the trace unfit as a probe trace to replay: no packets or probes, packets without
    /// a probe, duplicated or missing ids, ids out of order, tagged probes, probes of the other
    /// format. Empty when the trace is fine.
    pub fn problems(&self) -> Vec<String> {
        let mut out: Vec<String> = self.defects.iter().map(Defect::to_string).collect();
        if self.packets == 0 {
            out.push(NO_PACKETS.to_owned());
            return out;
        }
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

    /// What makes the trace unusable for a study, which plan validation rejects: its defects
    /// (what a replay cannot send as the file has it), no packets, no probe in the format looked
    /// for, repeated probe ids (the copies of a probe could not be paired). A subset of
    /// [`Inspection::problems`].
    pub fn unusable(&self) -> Vec<String> {
        let mut out: Vec<String> = self.defects.iter().map(Defect::to_string).collect();
        if self.packets == 0 {
            out.push(NO_PACKETS.to_owned());
            return out;
        }
        out.extend((self.probes == 0).then(|| self.no_probe()));
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
    // As `Reader::open`: a directory or special file is refused before it is opened (opening a
    // FIFO would block until a writer appears).
    let meta = std::fs::metadata(path).map_err(|e| read_err(PcapError::Io(e)))?;
    if !meta.is_file() {
        let kind = if meta.is_dir() { "a directory" } else { "a device, pipe or socket" };
        return Err(read_err(PcapError::NotAFile(kind)));
    }
    let file = std::fs::File::open(path).map_err(|e| read_err(PcapError::Io(e)))?;
    let seen = Rc::new(RefCell::new(Vec::new()));
    let mut reader = Reader::new(Tap { inner: BufReader::new(file), seen: Rc::clone(&seen) }).map_err(read_err)?;
    let mut headers = Headers::of_file(&seen.take());
    let mut record = 0u64;
    let mut packets = 0u64;
    let mut tagged = 0u64;
    let mut formats: BTreeMap<String, u64> = ProbeFormat::ALL.iter().map(|f| (f.name().to_owned(), 0)).collect();
    let mut frame_len: Option<(u32, u32)> = None;
    let mut strictly_increasing = true;
    let mut ids: Vec<u64> = Vec::new();
    while let Some(data) = reader.next_record().map_err(read_err)? {
        packets += 1;
        record += 1;
        headers.record(record, &seen.take());
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
        defects: headers.defects(),
    })
}

/// The bytes a [`Reader`] takes from its source, kept until taken: the file header after
/// [`Reader::new`], a record's header and data after each record (the reader reads exactly
/// these, in this order). The reader checks the framing; the fields it does not give (the link
/// type, a record's original length, its raw time stamp) are read from these bytes.
struct Tap<R> {
    inner: R,
    seen: Rc<RefCell<Vec<u8>>>,
}

impl<R: Read> Read for Tap<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.seen.borrow_mut().extend_from_slice(&buf[..n]);
        Ok(n)
    }
}

/// The header fields of a pcap, and the defects found in them so far.
struct Headers {
    big_endian: bool,
    nanos: bool,
    link_type: u32,
    /// Per kind (captured beyond the frame, fraction, oversized): its first defect and how many.
    found: [Option<(Defect, u64)>; 3],
}

impl Headers {
    /// The fields of the file header (24 bytes the reader has accepted).
    fn of_file(header: &[u8]) -> Headers {
        let word = |at: usize| header.get(at..at + 4).map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        // The magic numbers the reader accepts: µs or ns, either byte order.
        let (big_endian, nanos) = match word(0) {
            0xa1b2_3c4d => (false, true),
            0xd4c3_b2a1 => (true, false),
            0x4d3c_b2a1 => (true, true),
            _ => (false, false),
        };
        let link_type = if big_endian { word(20).swap_bytes() } else { word(20) };
        // The low 16 bits are the link type; the high ones say whether frames carry their FCS.
        Headers { big_endian, nanos, link_type: link_type & 0xffff, found: [None, None, None] }
    }

    fn word(&self, bytes: &[u8], at: usize) -> u32 {
        let b = bytes.get(at..at + 4).map_or([0; 4], |b| [b[0], b[1], b[2], b[3]]);
        if self.big_endian { u32::from_be_bytes(b) } else { u32::from_le_bytes(b) }
    }

    /// Check record `record` (its 16-byte header and data, as the reader read them).
    fn record(&mut self, record: u64, bytes: &[u8]) {
        let (fraction, captured, original) = (self.word(bytes, 4), self.word(bytes, 8), self.word(bytes, 12));
        let limit = if self.nanos { 1_000_000_000 } else { 1_000_000 };
        let nanos = self.nanos;
        let found = [
            (captured > original).then_some(Defect::CapturedBeyondFrame { record, captured, original, records: 1 }),
            (fraction >= limit).then_some(Defect::Fraction { record, fraction, nanos, records: 1 }),
            (captured > MAX_FRAME_LEN).then_some(Defect::Oversized { record, len: captured, records: 1 }),
        ];
        for (slot, defect) in self.found.iter_mut().zip(found) {
            if let Some(d) = defect {
                match slot {
                    Some((_, n)) => *n += 1,
                    None => *slot = Some((d, 1)),
                }
            }
        }
    }

    /// Every defect found, the link type's first, each record kind's with its count.
    fn defects(self) -> Vec<Defect> {
        let link = (self.link_type != ETHERNET).then_some(Defect::LinkType { link_type: self.link_type });
        let records = self.found.into_iter().flatten().map(|(mut d, n)| {
            if let Defect::CapturedBeyondFrame { records, .. }
            | Defect::Fraction { records, .. }
            | Defect::Oversized { records, .. } = &mut d
            {
                *records = n;
            }
            d
        });
        link.into_iter().chain(records).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            defects: vec![],
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
}

//! What a pcap holds, read as a study would replay it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use latency_proto::probe;
use serde::Serialize;

use super::TraceError;
use crate::ProbeFormat;
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
}

//! Reflect mode: the receiver's agent sends every stamped probe back to the sender tagged `P`
//! (pipeline copy) or `B` (bypass copy), where a capture stamps it with the adapter's clock. This
//! joins that capture to the agent's records by probe id and tag, into their `hw_ns` column.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{UInt8Type, UInt64Type};
use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use arrow_schema::ArrowError;
use latency_proto::pcap::{PcapError, Reader};
use latency_proto::probe::{self, ProbeFormat, TAG_BYPASS, TAG_PIPELINE};
use latency_proto::schema::col;
use serde::Serialize;

/// Why a capture cannot be joined to the records.
#[derive(Debug, thiserror::Error)]
pub enum ReflectError {
    /// The capture is not a readable classic pcap (its header; a cut last record is not an error).
    #[error(transparent)]
    Pcap(#[from] PcapError),
    /// The records lack a column the join reads or writes.
    #[error("records without probe_id, port or hw_ns columns")]
    Columns,
    /// The joined records cannot be built.
    #[error(transparent)]
    Arrow(#[from] ArrowError),
}

/// What the join found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct JoinCounts {
    /// Packets in the capture.
    pub captured: u64,
    /// Captured packets carrying no tagged probe (other traffic).
    pub untagged: u64,
    /// Captured reflections of a probe copy already seen (only the first counts).
    pub duplicates: u64,
    /// Records given a hardware stamp.
    pub stamped: u64,
    /// Records whose reflection was not captured.
    pub missing: u64,
}

/// Sender stamps (ns) by (port, probe id).
pub type Stamps = HashMap<(u8, u64), i64>;

/// Sender stamps of the reflected copies in a capture (classic pcap, µs or ns resolution, either
/// byte order); the first reflection of each copy counts.
pub fn stamps(pcap: &[u8]) -> Result<(Stamps, JoinCounts), ReflectError> {
    let mut reader = Reader::new(pcap)?;
    let mut out = HashMap::new();
    let mut counts = JoinCounts::default();
    loop {
        let packet = match reader.next_packet() {
            Ok(Some(packet)) => packet,
            Ok(None) => break,
            // A capture stopped by a signal may end in a partial record, and a corrupt record
            // ends what can be read: keep what is complete before it.
            Err(PcapError::Truncated { .. } | PcapError::Oversized { .. }) => break,
            Err(e) => return Err(e.into()),
        };
        counts.captured += 1;
        let data = packet.data;
        let found = probe::parse(data, ProbeFormat::Latencylab).or_else(|| probe::parse(data, ProbeFormat::Compact));
        let port = match found.and_then(|p| p.tag) {
            Some(TAG_PIPELINE) => 0,
            Some(TAG_BYPASS) => 1,
            _ => {
                counts.untagged += 1;
                continue;
            }
        };
        let id = found.map_or(0, |p| p.id);
        // At most about 4.3 × 10^18 (a u32 of seconds in ns), within an i64.
        let ns = i64::try_from(packet.ns).unwrap_or(i64::MAX);
        match out.entry((port, id)) {
            Entry::Vacant(e) => {
                e.insert(ns);
            }
            Entry::Occupied(mut e) => {
                counts.duplicates += 1;
                if ns < *e.get() {
                    e.insert(ns);
                }
            }
        }
    }
    Ok((out, counts))
}

/// The agent's records with `hw_ns` set from the sender's capture `pcap` (null where a copy's
/// reflection was not captured).
pub fn join(batches: &[RecordBatch], pcap: &[u8]) -> Result<(Vec<RecordBatch>, JoinCounts), ReflectError> {
    let (stamps, mut counts) = stamps(pcap)?;
    let mut out = Vec::with_capacity(batches.len());
    for b in batches {
        let (Some(ids), Some(ports), Some(at)) = (
            b.column_by_name(col::PROBE_ID).and_then(|c| c.as_primitive_opt::<UInt64Type>()),
            b.column_by_name(col::PORT).and_then(|c| c.as_primitive_opt::<UInt8Type>()),
            b.schema().index_of(col::HW_NS).ok(),
        ) else {
            return Err(ReflectError::Columns);
        };
        let hw: Int64Array = ids
            .values()
            .iter()
            .zip(ports.values())
            .map(|(&id, &port)| {
                let s = stamps.get(&(port, id)).copied();
                if s.is_some() {
                    counts.stamped += 1;
                } else {
                    counts.missing += 1;
                }
                s
            })
            .collect();
        let mut columns: Vec<ArrayRef> = b.columns().to_vec();
        columns[at] = Arc::new(hw);
        out.push(RecordBatch::try_new(b.schema(), columns)?);
    }
    Ok((out, counts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use latency_proto::{Port, RecordBuilder};

    fn frame(id: u64, tag: u8) -> Vec<u8> {
        let mut f = vec![0u8; 42];
        f.extend(probe::payload(id, ProbeFormat::Latencylab, 40));
        assert!(probe::set_tag(&mut f, ProbeFormat::Latencylab, tag));
        f
    }

    /// A capture as `tcpdump --time-stamp-precision=nano -s 512` writes it (little-endian, ns
    /// magic, Ethernet): each packet `(frame, stamp in ns)` keeps its first 512 bytes.
    fn capture(packets: &[(Vec<u8>, u64)]) -> Vec<u8> {
        const SNAPLEN: usize = 512;
        let mut out = [0xa1b2_3c4du32.to_le_bytes(), [2, 0, 4, 0], [0; 4], [0; 4]].concat();
        out.extend((SNAPLEN as u32).to_le_bytes());
        out.extend(1u32.to_le_bytes());
        for (data, ns) in packets {
            let kept = &data[..data.len().min(SNAPLEN)];
            let secs = u32::try_from(ns / 1_000_000_000).unwrap();
            let frac = (ns % 1_000_000_000) as u32;
            for word in [secs, frac, kept.len() as u32, data.len() as u32] {
                out.extend(word.to_le_bytes());
            }
            out.extend(kept);
        }
        out
    }

    #[test]
    fn stamps_join_by_probe_id_and_tag() {
        let mut b = RecordBuilder::with_capacity(8);
        // Probes 1 and 2 on both ports; probe 3's pipeline reflection is lost.
        for (id, port) in [(1, Port::Bypass), (2, Port::Bypass), (1, Port::Pipeline), (3, Port::Bypass)] {
            b.push(id, port, 1000 * id, 0, 128, None);
        }
        b.push(2, Port::Pipeline, 5000, 1, 124, None);
        b.push(3, Port::Pipeline, 6000, 2, 124, None);
        let records = vec![b.finish().unwrap()];
        let t0 = 1_700_000_000_000_000_000;
        let pcap = capture(&[
            (frame(1, TAG_BYPASS), t0 + 10),
            (frame(2, TAG_BYPASS), t0 + 2_000_010),
            (frame(1, TAG_PIPELINE), t0 + 160),
            (vec![0xff; 60], t0 + 200), // not a probe
            (frame(3, TAG_BYPASS), t0 + 4_000_007),
            (frame(2, TAG_PIPELINE), t0 + 2_000_171),
            (frame(2, TAG_PIPELINE), t0 + 2_000_999), // a second reflection of the same copy
        ]);
        let (joined, counts) = join(&records, &pcap).unwrap();
        assert_eq!(counts, JoinCounts { captured: 7, untagged: 1, duplicates: 1, stamped: 5, missing: 1 });
        let hw: Vec<Option<i64>> = joined[0]
            .column_by_name(col::HW_NS)
            .unwrap()
            .as_primitive::<arrow_array::types::Int64Type>()
            .iter()
            .collect();
        let t0 = t0 as i64;
        assert_eq!(
            hw,
            [Some(t0 + 10), Some(t0 + 2_000_010), Some(t0 + 160), Some(t0 + 4_000_007), Some(t0 + 2_000_171), None]
        );
        // The pairing then gives R = hw_P − hw_B for each matched probe, None where lost.
        let p = latency_results::pairs::pair(&joined);
        assert_eq!(p.hw_diffs, [Some(150), Some(161), None]);
    }

    #[test]
    fn a_capture_cut_short_keeps_its_complete_records() {
        let pcap = capture(&[(frame(1, TAG_BYPASS), 10), (frame(1, TAG_PIPELINE), 20)]);
        let (s, c) = stamps(&pcap[..pcap.len() - 5]).unwrap();
        assert_eq!((s.len(), c.captured), (1, 1));
        assert_eq!(stamps(b"not a pcap").unwrap_err().to_string(), "not a pcap file (magic number 0x20746f6e)");
        assert_eq!(stamps(b"").unwrap_err().to_string(), "the file is empty (0 bytes), not a pcap");
    }

    #[test]
    fn frames_longer_than_the_snapshot_do_not_end_the_capture() {
        // Regression: pcap-file's reader refused any record whose original length exceeds the
        // snapshot length (tcpdump -s 512), so one jumbo frame ended the join and every later
        // reflection went missing.
        let mut jumbo = frame(1, TAG_BYPASS);
        jumbo.resize(1500, 0);
        let pcap =
            capture(&[(jumbo, 10), (vec![0; 9000], 15), (frame(1, TAG_PIPELINE), 20), (frame(2, TAG_BYPASS), 30)]);
        let (s, c) = stamps(&pcap).unwrap();
        assert_eq!(c, JoinCounts { captured: 4, untagged: 1, duplicates: 0, stamped: 0, missing: 0 });
        assert_eq!((s[&(1, 1)], s[&(0, 1)], s[&(1, 2)]), (10, 20, 30));
    }

    #[test]
    fn microsecond_and_big_endian_captures_give_ns_stamps() {
        // The same two reflections at 5.000001 s and 5.000003 s, as µs and as big-endian ns.
        let header = |magic: [u8; 4], word: fn(u32) -> [u8; 4]| {
            [magic.to_vec(), vec![0; 12], word(512).to_vec(), word(1).to_vec()].concat()
        };
        let record = |word: fn(u32) -> [u8; 4], frac: u32, data: &[u8]| {
            let len = data.len() as u32;
            [word(5), word(frac), word(len), word(len)]
                .concat()
                .into_iter()
                .chain(data.iter().copied())
                .collect::<Vec<u8>>()
        };
        let (p, b) = (frame(7, TAG_PIPELINE), frame(7, TAG_BYPASS));
        let micro = [
            header(0xa1b2_c3d4u32.to_le_bytes(), u32::to_le_bytes),
            record(u32::to_le_bytes, 1, &b),
            record(u32::to_le_bytes, 3, &p),
        ]
        .concat();
        let big = [
            header(0xa1b2_3c4du32.to_be_bytes(), u32::to_be_bytes),
            record(u32::to_be_bytes, 1_000, &b),
            record(u32::to_be_bytes, 3_000, &p),
        ]
        .concat();
        for pcap in [micro, big] {
            let (s, c) = stamps(&pcap).unwrap();
            assert_eq!(c.captured, 2);
            assert_eq!((s[&(1, 7)], s[&(0, 7)]), (5_000_001_000, 5_000_003_000));
        }
    }

    #[test]
    fn records_without_the_columns_are_an_error() {
        let batch = RecordBatch::try_from_iter([("x", Arc::new(Int64Array::from(vec![1])) as ArrayRef)]).unwrap();
        let e = join(&[batch], &capture(&[])).unwrap_err();
        assert!(matches!(e, ReflectError::Columns));
        assert_eq!(e.to_string(), "records without probe_id, port or hw_ns columns");
    }
}

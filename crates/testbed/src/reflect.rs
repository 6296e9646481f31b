//! Reflect mode: the receiver's agent sends every stamped probe back to the sender tagged `P`
//! (pipeline copy) or `B` (bypass copy), where a capture stamps it with the adapter's clock. This
//! joins that capture to the agent's records by probe id and tag, into their `hw_ns` column.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{UInt8Type, UInt64Type};
use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use latency_proto::probe::{self, ProbeFormat, TAG_BYPASS, TAG_PIPELINE};
use latency_proto::schema::col;
use pcap_file::pcap::PcapReader;
use serde::Serialize;

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

/// Sender stamps of the reflected copies in a capture (classic pcap, µs or ns resolution); the
/// first reflection of each copy counts.
pub fn stamps(pcap: &[u8]) -> Result<(Stamps, JoinCounts), String> {
    let mut reader = PcapReader::new(pcap).map_err(|e| e.to_string())?;
    let mut out = HashMap::new();
    let mut counts = JoinCounts::default();
    while let Some(packet) = reader.next_packet() {
        // A capture stopped by a signal may end in a partial record: keep what is complete.
        let Ok(packet) = packet else { break };
        counts.captured += 1;
        let data: &[u8] = &packet.data;
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
        let ns = i64::try_from(packet.timestamp.as_nanos()).map_err(|e| e.to_string())?;
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
pub fn join(batches: &[RecordBatch], pcap: &[u8]) -> Result<(Vec<RecordBatch>, JoinCounts), String> {
    let (stamps, mut counts) = stamps(pcap)?;
    let mut out = Vec::with_capacity(batches.len());
    for b in batches {
        let (Some(ids), Some(ports), Some(at)) = (
            b.column_by_name(col::PROBE_ID).and_then(|c| c.as_primitive_opt::<UInt64Type>()),
            b.column_by_name(col::PORT).and_then(|c| c.as_primitive_opt::<UInt8Type>()),
            b.schema().index_of(col::HW_NS).ok(),
        ) else {
            return Err("records without probe_id, port or hw_ns columns".into());
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
        out.push(RecordBatch::try_new(b.schema(), columns).map_err(|e| e.to_string())?);
    }
    Ok((out, counts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use latency_proto::{Port, RecordBuilder};
    use pcap_file::TsResolution;
    use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
    use std::time::Duration;

    fn frame(id: u64, tag: u8) -> Vec<u8> {
        let mut f = vec![0u8; 42];
        f.extend(probe::payload(id, ProbeFormat::Latencylab, 40));
        assert!(probe::set_tag(&mut f, ProbeFormat::Latencylab, tag));
        f
    }

    fn capture(packets: &[(Vec<u8>, u64)]) -> Vec<u8> {
        let header = PcapHeader { ts_resolution: TsResolution::NanoSecond, ..Default::default() };
        let mut w = PcapWriter::with_header(Vec::new(), header).unwrap();
        for (data, ns) in packets {
            w.write_packet(&PcapPacket::new(Duration::from_nanos(*ns), data.len() as u32, data)).unwrap();
        }
        w.into_writer()
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
        assert!(stamps(b"not a pcap").is_err());
    }
}

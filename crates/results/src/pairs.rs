//! Step 1 of the analysis, also used to validate a run before it counts: pair the pipeline and
//! bypass copies of each probe within a run by probe id and take `D(i) = t_P − t_B`.

pub use crate::event::Counts;
use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, UInt8Type, UInt16Type, UInt64Type};
use arrow_array::{Array, RecordBatch};
use latency_proto::schema::col;

use latency_plan::PortPair;

/// Pairs of one run: `(probe id, D in TSC ticks)` of every matched probe, in id order, with the
/// first copy of each probe on each port.
#[derive(Clone, Debug, Default)]
pub struct Paired {
    /// Matched probes and their differentials in ticks.
    pub diffs: Vec<(u64, i64)>,
    /// Reflect mode: hardware-clock differential R = hw_P − hw_B (ns) of each matched probe, in
    /// the order of `diffs`; `None` where a reflected copy was not captured (empty without
    /// hardware stamps).
    pub hw_diffs: Vec<Option<i64>>,
    /// TSC of each matched probe's first `to` (pipeline) and first `from` (bypass) copy, in the
    /// order of `diffs` (their difference is its `D`).
    pub stamps: Vec<(u64, u64)>,
    /// Frame length of each matched probe's bypass copy (the probe as sent), in the order of
    /// `diffs` (empty when the records have no frame lengths).
    pub lens: Vec<u16>,
    /// Counts.
    pub counts: Counts,
    /// Probe of the earliest record of the run: the first probe after the idle gap.
    pub first_id: Option<u64>,
    /// TSC of the earliest record of the run on the two ports (duplicates included).
    pub first_tsc: Option<u64>,
    /// Bypass copies and the TSC span between the first and last of them (pacing check).
    pub bypass_span: (u64, u64),
    /// Probe ids of the first and the last bypass copy (in time).
    pub bypass_ids: (u64, u64),
}

impl Paired {
    /// The rate probes arrived at, packets per second: the bypass copies' intervals over their
    /// TSC span when they are (nearly) all there; otherwise, when most are missing (a dataset that
    /// keeps only matched probes), inferred from the probe ids they span, since probes are sent in
    /// id order at the plan's pacing (see [`Paired::pacing_inferred`]).
    pub fn bypass_pps(&self, tsc_hz: f64) -> Option<f64> {
        bypass_pps(self.bypass_span, self.bypass_ids, tsc_hz)
    }

    /// Whether [`Paired::bypass_pps`] is inferred from probe ids: fewer than 90 % of the ids the
    /// bypass copies span have one.
    pub fn pacing_inferred(&self) -> bool {
        pacing_inferred(self.bypass_span, self.bypass_ids)
    }
}

/// [`Paired::bypass_pps`] of a run's bypass span (copies, ticks) and first and last bypass ids.
pub(crate) fn bypass_pps((n, span): (u64, u64), ids: (u64, u64), tsc_hz: f64) -> Option<f64> {
    let intervals = if pacing_inferred((n, span), ids) { ids.1.abs_diff(ids.0) } else { n.saturating_sub(1) };
    (intervals > 0 && span > 0 && tsc_hz > 0.0).then(|| intervals as f64 / (span as f64 / tsc_hz))
}

/// [`Paired::pacing_inferred`] of a run's bypass span and ids.
pub(crate) fn pacing_inferred((n, _): (u64, u64), ids: (u64, u64)) -> bool {
    n > 1 && ((n - 1) as f64) < 0.9 * ids.1.abs_diff(ids.0) as f64
}

const NONE: u64 = u64::MAX;

/// Pair a run's records: pipeline (port 0) against bypass (port 1).
pub fn pair(batches: &[RecordBatch]) -> Paired {
    pair_ports(batches, PortPair { from: 1, to: 0 })
}

/// Pair a run's records on two of its ports: `D = t_to − t_from`, `to` in the place of the
/// pipeline copy and `from` in the bypass copy's (pacing, frame lengths). Records of other ports
/// count as `unknown_port`.
pub fn pair_ports(batches: &[RecordBatch], ports_of: PortPair) -> Paired {
    let max_id = batches
        .iter()
        .filter_map(|b| b.column_by_name(col::PROBE_ID))
        .filter_map(|c| c.as_primitive::<UInt64Type>().values().iter().max().copied())
        .max()
        .unwrap_or(0);
    // Dense tables by id: first TSC on each port (NONE = not seen).
    let n = usize::try_from(max_id).unwrap_or(usize::MAX).saturating_add(1);
    let dense = n <= 1 << 27;
    let mut first: [Vec<u64>; 2] = if dense { [vec![NONE; n], vec![NONE; n]] } else { [Vec::new(), Vec::new()] };
    let mut sparse: [std::collections::HashMap<u64, u64>; 2] = Default::default();
    let has_hw = batches.iter().any(|b| b.column_by_name(col::HW_NS).is_some_and(|c| c.null_count() < c.len()));
    // First hardware stamp on each port: by id like `first` when dense (NO_HW = none).
    const NO_HW: i64 = i64::MIN;
    let mut hw_dense: [Vec<i64>; 2] =
        if has_hw && dense { [vec![NO_HW; n], vec![NO_HW; n]] } else { [Vec::new(), Vec::new()] };
    let mut hw_first: [std::collections::HashMap<u64, i64>; 2] = Default::default();
    // Frame length of each probe's first bypass copy: by id when dense.
    let has_len = batches.iter().any(|b| b.column_by_name(col::FRAME_LEN).is_some());
    let mut len_dense: Vec<u16> = if has_len && dense { vec![0; n] } else { Vec::new() };
    let mut len_sparse: std::collections::HashMap<u64, u16> = Default::default();
    let mut counts = Counts::default();
    let mut earliest: Option<(u64, u64)> = None;
    let (mut b_count, mut b_min, mut b_max) = (0u64, u64::MAX, 0u64);
    let mut b_ids = (0u64, 0u64);
    for b in batches {
        let hws = b.column_by_name(col::HW_NS).filter(|_| has_hw).map(|c| c.as_primitive::<Int64Type>().clone());
        let (Some(ids), Some(ports), Some(tscs)) =
            (b.column_by_name(col::PROBE_ID), b.column_by_name(col::PORT), b.column_by_name(col::TSC))
        else {
            continue;
        };
        let ids = ids.as_primitive::<UInt64Type>().values();
        let ports = ports.as_primitive::<UInt8Type>().values();
        let tscs = tscs.as_primitive::<UInt64Type>().values();
        let lens = b.column_by_name(col::FRAME_LEN).map(|c| c.as_primitive::<UInt16Type>().values().clone());
        for k in 0..ids.len() {
            let port = match ports[k] {
                p if p == ports_of.to => 0,
                p if p == ports_of.from => 1,
                _ => {
                    counts.unknown_port += 1;
                    continue;
                }
            };
            let slot =
                if dense { &mut first[port][ids[k] as usize] } else { sparse[port].entry(ids[k]).or_insert(NONE) };
            if *slot == NONE {
                *slot = tscs[k];
                if let Some(l) = lens.as_ref().filter(|_| port == 1) {
                    if dense {
                        len_dense[ids[k] as usize] = l[k];
                    } else {
                        len_sparse.insert(ids[k], l[k]);
                    }
                }
                if let Some(h) = hws.as_ref().filter(|h| h.is_valid(k)) {
                    if dense {
                        hw_dense[port][ids[k] as usize] = h.value(k);
                    } else {
                        hw_first[port].insert(ids[k], h.value(k));
                    }
                }
            } else {
                counts.duplicates += 1;
            }
            if earliest.is_none_or(|(t, _)| tscs[k] < t) {
                earliest = Some((tscs[k], ids[k]));
            }
            if port == 1 {
                b_count += 1;
                if tscs[k] < b_min {
                    (b_min, b_ids.0) = (tscs[k], ids[k]);
                }
                if tscs[k] >= b_max {
                    (b_max, b_ids.1) = (tscs[k], ids[k]);
                }
            }
        }
    }
    let mut diffs = Vec::new();
    let mut stamps = Vec::new();
    let mut hw_diffs = Vec::new();
    let mut lens = Vec::new();
    let mut visit = |id: u64, p: u64, b: u64| match (p != NONE, b != NONE) {
        (true, true) => {
            counts.matched += 1;
            diffs.push((id, p as i64 - b as i64));
            stamps.push((p, b));
            if has_len {
                lens.push(if dense { len_dense[id as usize] } else { len_sparse.get(&id).copied().unwrap_or(0) });
            }
            if has_hw {
                let (hp, hb) = if dense {
                    let at = |port: usize| Some(hw_dense[port][id as usize]).filter(|&h| h != NO_HW);
                    (at(0), at(1))
                } else {
                    (hw_first[0].get(&id).copied(), hw_first[1].get(&id).copied())
                };
                hw_diffs.push(hp.zip(hb).map(|(hp, hb)| hp - hb));
            }
        }
        (true, false) => counts.pipeline_only += 1,
        (false, true) => counts.bypass_only += 1,
        (false, false) => {}
    };
    if dense {
        for (id, (&p, &b)) in first[0].iter().zip(&first[1]).enumerate() {
            visit(id as u64, p, b);
        }
    } else {
        let mut ids: Vec<u64> = sparse[0].keys().chain(sparse[1].keys()).copied().collect();
        ids.sort_unstable();
        ids.dedup();
        for id in ids {
            visit(id, sparse[0].get(&id).copied().unwrap_or(NONE), sparse[1].get(&id).copied().unwrap_or(NONE));
        }
    }
    let span = if b_count > 1 { b_max - b_min } else { 0 };
    Paired {
        diffs,
        stamps,
        hw_diffs,
        lens,
        counts,
        first_id: earliest.map(|(_, id)| id),
        first_tsc: earliest.map(|(tsc, _)| tsc),
        bypass_span: (b_count, span),
        bypass_ids: b_ids,
    }
}

/// The mean number of probes per burst in which the bypass copies arrived: a burst ends at a
/// gap longer than the mean gap (copies sent back to back arrive closer than that, bursts further
/// apart). Evenly paced copies give about 2. None without three copies.
pub fn burst_size(batches: &[RecordBatch]) -> Option<f64> {
    let mut stamps: Vec<u64> = Vec::new();
    for b in batches {
        let (Some(ports), Some(tscs)) = (b.column_by_name(col::PORT), b.column_by_name(col::TSC)) else { continue };
        let ports = ports.as_primitive::<UInt8Type>().values();
        let tscs = tscs.as_primitive::<UInt64Type>().values();
        stamps.extend(ports.iter().zip(tscs.iter()).filter(|(p, _)| **p == 1).map(|(_, t)| *t));
    }
    stamps.sort_unstable();
    let (first, last) = (*stamps.first()?, *stamps.last()?);
    if stamps.len() < 3 || last == first {
        return None;
    }
    let mean_gap = (last - first) as f64 / (stamps.len() - 1) as f64;
    let bursts = 1 + stamps.windows(2).filter(|w| (w[1] - w[0]) as f64 > mean_gap).count();
    Some(stamps.len() as f64 / bursts as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use latency_proto::{Port, RecordBuilder};

    #[test]
    fn bursts_are_counted_from_the_bypass_gaps() {
        // 24 probes in bursts of 4 (10 ticks apart inside, 1000 between bursts); pipeline copies
        // do not count.
        let mut b = RecordBuilder::default();
        for id in 0..24u64 {
            b.push(id + 1, Port::Bypass, 1000 * (id / 4) + 10 * (id % 4), id, 64, None);
            b.push(id + 1, Port::Pipeline, 5 + 1000 * id, id, 64, None);
        }
        assert_eq!(burst_size(&[b.finish().unwrap()]), Some(4.0));
        // Evenly paced with alternating gaps of 90 and 110: every other gap is above the mean.
        let mut b = RecordBuilder::default();
        let mut t = 0;
        for id in 0..21u64 {
            b.push(id + 1, Port::Bypass, t, id, 64, None);
            t += if id % 2 == 0 { 90 } else { 110 };
        }
        assert_eq!(burst_size(&[b.finish().unwrap()]), Some(21.0 / 11.0));
    }

    #[test]
    fn any_two_ports_of_a_three_port_run_pair_by_hand() {
        // Port 1 (bypass, before hop 1) at 1000·k, port 0 (after hop 1) 300 later, port 2 (after
        // hop 2) 500 after port 0; probe 3 never reaches port 2.
        let mut b = RecordBuilder::default();
        for k in 1..=3u64 {
            b.push_index(k, 1, 1000 * k, k, 64, None);
            b.push_index(k, 0, 1000 * k + 300, k, 64, None);
            if k < 3 {
                b.push_index(k, 2, 1000 * k + 800, k, 64, None);
            }
        }
        let batches = [b.finish().unwrap()];
        let hop1 = pair(&batches);
        assert_eq!(hop1.diffs, vec![(1, 300), (2, 300), (3, 300)]);
        assert_eq!(hop1.counts.unknown_port, 2);
        let hop2 = pair_ports(&batches, PortPair { from: 0, to: 2 });
        assert_eq!(hop2.diffs, vec![(1, 500), (2, 500)]);
        assert_eq!((hop2.counts.matched, hop2.counts.bypass_only, hop2.counts.unknown_port), (2, 1, 3));
        // The pacing of a pair is its `from` port's: every 1000 ticks.
        assert_eq!(hop2.bypass_pps(1000.0), Some(1.0));
        let path = pair_ports(&batches, PortPair { from: 1, to: 2 });
        assert_eq!(path.diffs, vec![(1, 800), (2, 800)]);
    }

    #[test]
    fn pairs_counts_and_differentials_by_hand() {
        let mut b = RecordBuilder::default();
        // probe 1: both ports, P 300 ticks after B; probe 2: bypass only; probe 3: pipeline only;
        // probe 4: both, with a duplicate bypass copy (the first one counts); probe 5: P before B.
        b.push(1, Port::Bypass, 1000, 0, 64, None);
        b.push(1, Port::Pipeline, 1300, 0, 64, None);
        b.push(2, Port::Bypass, 2000, 1, 64, None);
        b.push(3, Port::Pipeline, 3300, 1, 64, None);
        b.push(4, Port::Bypass, 4000, 2, 64, None);
        b.push(4, Port::Bypass, 4010, 3, 64, None);
        b.push(4, Port::Pipeline, 4250, 2, 64, None);
        b.push(5, Port::Pipeline, 5000, 3, 64, None);
        b.push(5, Port::Bypass, 5040, 4, 64, None);
        let p = pair(&[b.finish().unwrap()]);
        assert_eq!(p.diffs, vec![(1, 300), (4, 250), (5, -40)]);
        assert_eq!(p.stamps, vec![(1300, 1000), (4250, 4000), (5000, 5040)]);
        assert_eq!((p.first_id, p.first_tsc), (Some(1), Some(1000)));
        assert_eq!(p.bypass_span, (5, 5040 - 1000));
        assert_eq!(p.bypass_ids, (1, 5));
        assert!(!p.pacing_inferred(), "4 bypass copies for 4 ids");
        assert!(p.hw_diffs.is_empty());
        assert_eq!(p.counts, Counts { matched: 3, pipeline_only: 1, bypass_only: 1, duplicates: 1, unknown_port: 0 });
    }

    #[test]
    fn pacing_is_inferred_from_ids_when_most_bypass_copies_are_missing() {
        // Probes sent every 2 ms (500 pps) but only every third kept, as a dataset of matched
        // probes only keeps them: 7 copies over ids 1..=19, 36 ms. Intervals alone say 167 pps;
        // ids say 18 intervals in 36 ms, 500 pps.
        let mut b = RecordBuilder::default();
        for id in (1..=19u64).step_by(3) {
            b.push(id, Port::Bypass, 2_000_000 * id, id, 64, None);
        }
        let p = pair(&[b.finish().unwrap()]);
        assert!(p.pacing_inferred());
        assert!((p.bypass_pps(1e9).unwrap() - 500.0).abs() < 1e-9, "{:?}", p.bypass_pps(1e9));
    }

    #[test]
    fn huge_ids_use_the_sparse_path() {
        let mut b = RecordBuilder::default();
        b.push(1 << 40, Port::Bypass, 10, 0, 64, None);
        b.push(1 << 40, Port::Pipeline, 15, 0, 64, None);
        let p = pair(&[b.finish().unwrap()]);
        assert_eq!(p.diffs, vec![(1 << 40, 5)]);
        assert_eq!((p.stamps, p.first_tsc), (vec![(15, 10)], Some(10)));
    }
}

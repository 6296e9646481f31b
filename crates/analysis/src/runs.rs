//! A run's records paired into per-probe differentials (ns), and a session's per-probe estimates
//! (median over its runs).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::column::Column;
use crate::network::Shifted;
use crate::stats::median;
use latency_results::reduction::{Reduction, RunIdentity};

/// One run, paired.
pub struct RunPairs {
    pub(crate) group: usize,
    pub(crate) session: u32,
    /// The run's factor level (studies with factors).
    pub(crate) level: Option<String>,
    /// Probe ids in ascending order, the first probe after the gap already removed when
    /// excluded; one list for the runs of a session that paired the same probes ([`SharedIds`]).
    pub(crate) ids: Ids,
    /// D of each probe of `ids`: whole TSC ticks, read in ns.
    pub(crate) d: Column,
    /// The hardware-clock differential R (whole ns) of each probe of `ids` (reflect data); empty
    /// for a run without hardware stamps.
    pub(crate) hw: Column,
    /// Frame length of each probe of `ids` as sent (empty without frame lengths).
    pub(crate) lens: Vec<u16>,
    pub(crate) counts: latency_results::pairs::Counts,
    pub(crate) excluded: u64,
    pub(crate) pacing_pps: Option<f64>,
    /// Whether the pacing was inferred from probe ids (most bypass copies missing).
    pub(crate) pacing_inferred: bool,
}

/// Pair one run's records (group index into the study's groups, session number).
pub fn pair_batches(
    group: usize,
    session: u32,
    batches: &[arrow_array::RecordBatch],
    tsc_hz: f64,
    exclude_first: bool,
) -> RunPairs {
    pair_ports_of(group, session, batches, tsc_hz, exclude_first, latency_plan::PortPair { from: 1, to: 0 })
}

/// Pair one run's records on two of its ports ([`latency_results::pairs::pair_ports`]).
pub fn pair_ports_of(
    group: usize,
    session: u32,
    batches: &[arrow_array::RecordBatch],
    tsc_hz: f64,
    exclude_first: bool,
    ports: latency_plan::PortPair,
) -> RunPairs {
    let p = latency_results::pairs::pair_ports(batches, ports);
    let r = Reduction::of(p, RunIdentity::default());
    RunPairs::of(group, session, &r, tsc_hz, exclude_first, true, &SharedIds::default())
}

/// Probe-id lists kept once for the runs that paired the same probes (the runs of a session
/// mostly do): the last list of each group and session, handed to a run whose ids are the same.
#[derive(Default)]
pub(crate) struct SharedIds(Mutex<HashMap<(usize, u32), Ids>>);

/// A run's probe ids, ascending.
type Ids = Arc<[u64]>;

impl SharedIds {
    /// The list of `ids` (ascending), the one kept for `group` and `session` when it holds the same.
    fn of(&self, group: usize, session: u32, ids: impl Iterator<Item = u64> + Clone) -> Ids {
        let key = (group, session);
        let kept = self.0.lock().unwrap_or_else(PoisonError::into_inner).get(&key).cloned();
        if let Some(kept) = kept.filter(|k| k.iter().copied().eq(ids.clone())) {
            return kept;
        }
        let ids: Ids = ids.collect();
        self.0.lock().unwrap_or_else(PoisonError::into_inner).insert(key, ids.clone());
        ids
    }
}

impl RunPairs {
    /// A run's reduction in the analysis' units: differentials in ns, the first probe after the
    /// gap left out when `exclude_first`, frame lengths kept only when `lens` (the analysis
    /// reads them only for a per-probe bound); its ids the ones `shared` keeps where the same.
    pub(crate) fn of(
        group: usize,
        session: u32,
        r: &Reduction,
        tsc_hz: f64,
        exclude_first: bool,
        lens: bool,
        shared: &SharedIds,
    ) -> RunPairs {
        let ns = 1e9 / tsc_hz;
        let skip = if exclude_first { r.header.first_id } else { None };
        let lens = if lens { r.lens.as_slice() } else { &[] };
        let ids = shared.of(group, session, r.diffs.iter().map(|e| e.0).filter(|&id| Some(id) != skip));
        // The probes kept: all but those of the excluded id, as runs of consecutive probes
        // copied in whole loops (a column shorter than the ids gives what it has).
        let mut kept = Vec::with_capacity(2);
        let mut from = 0;
        for k in (0..r.diffs.len()).filter(|&k| Some(r.diffs[k].0) == skip) {
            kept.push(from..k);
            from = k + 1;
        }
        let excluded = kept.len() as u64;
        kept.push(from..r.diffs.len());
        let runs = |len: usize| kept.iter().map(move |k| k.start.min(len)..k.end.min(len));
        fn copied<T, U>(from: &[T], runs: impl Iterator<Item = std::ops::Range<usize>>, f: impl Fn(&T) -> U) -> Vec<U> {
            let mut out = Vec::with_capacity(from.len());
            runs.for_each(|k| out.extend(from[k].iter().map(&f)));
            out
        }
        let d = Column::of(runs(r.diffs.len()).flat_map(|k| r.diffs[k].iter().map(|e| Some(e.1))), r.diffs.len(), ns);
        let hw = Column::of(runs(r.hw_diffs.len()).flat_map(|k| r.hw_diffs[k].iter().copied()), r.hw_diffs.len(), 1.0);
        let kept_lens = copied(lens, runs(lens.len()), |&l| l);
        RunPairs {
            group,
            session,
            level: r.header.run.level.clone(),
            ids,
            d,
            hw,
            lens: kept_lens,
            counts: r.header.counts,
            excluded,
            pacing_pps: r.bypass_pps(tsc_hz),
            pacing_inferred: r.pacing_inferred(),
        }
    }

    /// Its values, each less `shift`, as the per-probe estimates read them.
    pub(crate) fn shifted(&self, shift: f64) -> Shifted<'_> {
        Shifted { ids: &self.ids, d: &self.d, shift }
    }

    /// (D ns, R ns) of each probe with a hardware-clock differential, in id order.
    pub(crate) fn hw_pairs(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        (0..self.hw.len()).filter(|&k| self.hw.has(k)).map(|k| (self.d.at(k), self.hw.at(k)))
    }
}

/// Per-probe estimates of one session: median over runs of each probe's differentials; with them,
/// whether every estimate is the median of an odd number of runs (then it lies on the TSC's grid,
/// else on a grid of half a tick).
pub(crate) fn session_estimates(runs: &[&RunPairs]) -> (Vec<(u64, f64)>, bool) {
    let lists: Vec<Shifted> = runs.iter().map(|r| r.shifted(0.0)).collect();
    if let Some(medians) = crate::network::aligned_medians(&lists) {
        return (lists[0].ids.iter().copied().zip(medians).collect(), lists.len() % 2 == 1);
    }
    let mut groups = ByProbe::new(&lists);
    let mut odd = true;
    let mut out = Vec::with_capacity(groups.ids.len());
    for (id, v) in groups.iter_mut() {
        odd &= v.len() % 2 == 1;
        out.push((id, median(v)));
    }
    (out, odd)
}

/// Values grouped by probe id, in id order, each group in input order: lists of ids and values,
/// each list's values less its shift. Built by counting (no allocation per probe).
pub(crate) struct ByProbe {
    pub(crate) ids: Vec<u64>,
    /// Group k is `values[starts[k]..starts[k + 1]]`.
    pub(crate) starts: Vec<usize>,
    pub(crate) values: Vec<f64>,
}

impl ByProbe {
    pub(crate) fn new(lists: &[Shifted]) -> ByProbe {
        let all = || lists.iter().flat_map(|l| l.ids.iter().zip(l.d.iter()).map(move |(&id, v)| (id, v - l.shift)));
        let max_id = all().map(|(id, _)| id).max().unwrap_or(0);
        if max_id >= 1 << 22 {
            // Sparse ids: sort (stable, so each group keeps input order).
            let mut pairs: Vec<(u64, f64)> = all().collect();
            pairs.sort_by_key(|p| p.0);
            let mut g = ByProbe { ids: Vec::new(), starts: Vec::new(), values: Vec::with_capacity(pairs.len()) };
            for (k, (id, v)) in pairs.into_iter().enumerate() {
                if g.ids.last() != Some(&id) {
                    g.ids.push(id);
                    g.starts.push(k);
                }
                g.values.push(v);
            }
            g.starts.push(g.values.len());
            return g;
        }
        let mut count = vec![0usize; max_id as usize + 2];
        for (id, _) in all() {
            count[id as usize + 1] += 1;
        }
        for k in 1..count.len() {
            count[k] += count[k - 1];
        }
        let mut cursor = count.clone();
        let mut values = vec![0.0; count[count.len() - 1]];
        for (id, v) in all() {
            values[cursor[id as usize]] = v;
            cursor[id as usize] += 1;
        }
        let ids: Vec<u64> = (0..=max_id).filter(|&id| count[id as usize + 1] > count[id as usize]).collect();
        let mut starts: Vec<usize> = ids.iter().map(|&id| count[id as usize]).collect();
        starts.push(values.len());
        ByProbe { ids, starts, values }
    }

    /// Each probe id with its values.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (u64, &mut [f64])> {
        let mut rest: &mut [f64] = &mut self.values;
        let mut at = 0;
        self.ids.iter().zip(self.starts.windows(2)).map(move |(&id, w)| {
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(w[1] - at);
            rest = tail;
            at = w[1];
            debug_assert_eq!(w[0] + head.len(), w[1]);
            (id, head)
        })
    }
}

/// The grid per-probe estimates lie on: the TSC tick when each is the median of an odd number of
/// runs, half a tick otherwise.
pub(crate) fn estimate_grid(tick_ns: f64, odd: bool) -> f64 {
    if odd { tick_ns } else { tick_ns / 2.0 }
}

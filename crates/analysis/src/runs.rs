//! A run's records paired into per-probe differentials (ns), and a session's per-probe estimates
//! (median over its runs).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::column::Column;
use crate::network::Shifted;
use crate::stats::median;
use latency_results::reduction::{Columns, Reduction, ReductionHeader, RunIdentity};

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
    let shared = SharedIds::default();
    RunPairs::of(&r, &Making { group, session, tsc_hz, exclude_first, lens: true, shared: &shared })
}

/// Probe-id lists kept once for the runs that paired the same probes (the runs of a session
/// mostly do): the last list of each group and session, handed to a run whose ids are the same.
#[derive(Default)]
pub(crate) struct SharedIds(Mutex<HashMap<(usize, u32), Ids>>);

/// A run's probe ids, ascending.
type Ids = Arc<[u64]>;

impl SharedIds {
    /// The list kept for `group` and `session`, if any.
    fn kept(&self, group: usize, session: u32) -> Option<Ids> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).get(&(group, session)).cloned()
    }

    /// Keep `ids` as the list of `group` and `session`.
    fn keep(&self, group: usize, session: u32, ids: Ids) -> Ids {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).insert((group, session), ids.clone());
        ids
    }
}

/// What [`RunPairs`] are made of and for: a run of a session of a group, its differentials made
/// ns at `tsc_hz`, the first probe after the gap left out when `exclude_first`, frame lengths kept
/// only when `lens` (the analysis reads them only for a per-probe bound), its ids the ones
/// `shared` keeps where the same.
pub(crate) struct Making<'a> {
    pub(crate) group: usize,
    pub(crate) session: u32,
    pub(crate) tsc_hz: f64,
    pub(crate) exclude_first: bool,
    pub(crate) lens: bool,
    pub(crate) shared: &'a SharedIds,
}

/// A run's columns made as [`RunPairs`] keeps them while its reduction is read or walked
/// ([`Columns`]): D in 32 bits straight from the reduction's numbers, the ids compared with the
/// session's list as they come (copied only where they differ).
struct Columned<'a> {
    making: &'a Making<'a>,
    skip: Option<u64>,
    /// The places of the probe left out (the first after the gap).
    excluded: Vec<usize>,
    /// The session's list while the run's ids are the same so far, and how many are.
    same: Option<Ids>,
    matched: usize,
    /// The run's ids, once they differ from the session's list.
    ids: Vec<u64>,
    d: Column,
    hw: Column,
    lens: Vec<u16>,
}

impl Columns for Columned<'_> {
    fn header(&mut self, h: &ReductionHeader) {
        let (n, m) = (h.matched as usize, self.making);
        self.skip = if m.exclude_first { h.first_id } else { None };
        self.same = m.shared.kept(m.group, m.session);
        self.d = Column::with_capacity(n, 1e9 / m.tsc_hz);
        self.hw = Column::with_capacity(if h.hw { n } else { 0 }, 1.0);
        self.lens = Vec::with_capacity(if m.lens && h.lens { n } else { 0 });
    }

    fn ids(&mut self, from: usize, ids: &[u64]) {
        // A block without the probe left out: compared with the session's list, or kept, whole.
        if !self.skip.is_some_and(|s| ids.contains(&s)) {
            match &self.same {
                Some(same) if same.get(self.matched..self.matched + ids.len()) == Some(ids) => {
                    self.matched += ids.len();
                    return;
                }
                None => {
                    self.ids.extend_from_slice(ids);
                    return;
                }
                Some(_) => {}
            }
        }
        for (k, &id) in (from..).zip(ids) {
            if Some(id) == self.skip {
                self.excluded.push(k);
                continue;
            }
            if let Some(same) = &self.same {
                if same.get(self.matched) == Some(&id) {
                    self.matched += 1;
                    continue;
                }
                self.ids.extend_from_slice(&same[..self.matched]);
                self.same = None;
            }
            self.ids.push(id);
        }
    }

    fn diffs(&mut self, from: usize, diffs: &[i64]) {
        let excluded = &self.excluded;
        let d = &mut self.d;
        kept(excluded, from, diffs, |v| d.extend(v));
    }

    fn hw(&mut self, from: usize, hw: &[Option<i64>]) {
        let (excluded, column) = (&self.excluded, &mut self.hw);
        kept(excluded, from, hw, |v| v.iter().for_each(|&h| column.push(h)));
    }

    fn lens(&mut self, from: usize, lens: &[u16]) {
        if self.making.lens {
            let (excluded, out) = (&self.excluded, &mut self.lens);
            kept(excluded, from, lens, |v| out.extend_from_slice(v));
        }
    }
}

/// Hand `take` the runs of `values` (places `from` on) not at an `excluded` place.
fn kept<T>(excluded: &[usize], from: usize, values: &[T], mut take: impl FnMut(&[T])) {
    let mut start = 0;
    for &k in excluded.iter().filter(|&&k| (from..from + values.len()).contains(&k)) {
        take(&values[start..k - from]);
        start = k - from + 1;
    }
    take(&values[start..]);
}

impl<'a> Columned<'a> {
    fn new(making: &'a Making<'a>) -> Columned<'a> {
        Columned {
            making,
            skip: None,
            excluded: Vec::new(),
            same: None,
            matched: 0,
            ids: Vec::new(),
            d: Column::default(),
            hw: Column::default(),
            lens: Vec::new(),
        }
    }

    /// The run, once every column is read.
    fn made(self, header: &ReductionHeader) -> RunPairs {
        let m = self.making;
        let ids = match self.same {
            Some(same) if self.matched == same.len() => same,
            Some(same) => m.shared.keep(m.group, m.session, same[..self.matched].into()),
            None => m.shared.keep(m.group, m.session, self.ids.into()),
        };
        RunPairs {
            group: m.group,
            session: m.session,
            level: header.run.level.clone(),
            ids,
            d: self.d,
            hw: self.hw,
            lens: self.lens,
            counts: header.counts,
            excluded: self.excluded.len() as u64,
            pacing_pps: header.bypass_pps(m.tsc_hz),
            pacing_inferred: header.pacing_inferred(),
        }
    }
}

impl RunPairs {
    /// A run's reduction in the analysis' units ([`Making`]).
    pub(crate) fn of(r: &Reduction, making: &Making) -> RunPairs {
        let mut columns = Columned::new(making);
        r.columns_into(&mut columns);
        columns.made(&r.header)
    }

    /// The run's reduction kept at `path` in the analysis' units ([`Making`]), if it is one of
    /// the run `id` names ([`Reduction::read_into`]); its columns read straight into the run's.
    pub(crate) fn read(path: &std::path::Path, id: &RunIdentity, making: &Making) -> Option<RunPairs> {
        let mut columns = Columned::new(making);
        let header = Reduction::read_into(path, id, &mut columns)?;
        Some(columns.made(&header))
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

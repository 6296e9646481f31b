//! Change detection in a series of nightly figures by minimum description length, in the manner
//! of FD.io CSIT's `jumpavg` (PyPI `jumpavg` 0.4, its `classify`): the series is split into
//! consecutive groups, each taken as samples of its own normal distribution, so that the whole
//! series costs the fewest bits to encode. Each group's cost is that of its length, its average
//! (uniform on `[0, max]` for the first group; for the next ones, a distribution peaked at the
//! previous group's average, so small shifts are cheap and a new group needs real evidence), its
//! standard deviation, and its samples given both. A change is a boundary between groups.
//!
//! The search is jumpavg's: one pass over the values, keeping for every possible start of the
//! last group the best split before it, O(n²) in time and O(n) splits kept.
//!
//! Values are measured in `unit` (their resolution): when none is given, the unit makes the
//! largest value 2¹³ − 1 units (jumpavg's default of 12 significant bits per sample).

/// One group of consecutive values: a stretch of the series without a change.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    /// Index of its first value.
    pub start: usize,
    /// Values in it.
    pub len: usize,
    /// Their average.
    pub avg: f64,
    /// Their population standard deviation.
    pub stdev: f64,
}

/// Size, average and second moment of a group, updated value by value (Welford).
#[derive(Clone, Copy, Debug, Default)]
struct Stats {
    size: u64,
    avg: f64,
    m2: f64,
}

impl Stats {
    fn push(&mut self, x: f64) {
        self.size += 1;
        let delta = x - self.avg;
        self.avg += delta / self.size as f64;
        self.m2 += delta * (x - self.avg);
    }

    fn stdev(&self) -> f64 {
        if self.size == 0 { 0.0 } else { (self.m2 / self.size as f64).max(0.0).sqrt() }
    }
}

/// The information content, in bits, of a group with `s`'s statistics, in units of `unit`, in a
/// series whose largest value is `max_value`, after a group averaging `prev_avg` (none: the
/// first group).
fn bits(s: &Stats, max_value: f64, unit: f64, prev_avg: Option<f64>) -> f64 {
    if s.size == 0 {
        return 0.0;
    }
    let n = s.size as f64;
    let max = max_value / unit;
    let avg = s.avg / unit;
    // The length: probability 1/(n(n + 1)) of n values.
    let mut bits = (n * (n + 1.0)).log2();
    bits += match prev_avg {
        // The average, uniform on [0, max].
        None => (max + 1.0).log2(),
        // The average, on a distribution falling away from the previous one.
        Some(prev) => {
            let prev = prev / unit;
            let norm = prev * prev - (prev - 1.0) * max + max * max / 2.0;
            -(((avg - prev).abs() + 1.0) / norm).log2()
        }
    };
    if s.size < 2 {
        return bits;
    }
    // The standard deviation, as the length, cut off at the largest value.
    let stdev = s.stdev() / unit;
    bits += ((stdev + 1.0) * (stdev + 2.0)).log2();
    bits += (1.0 - 1.0 / (max + 2.0)).log2();
    // The values lie on a sphere of n − 2 dimensions, radius² = stdev² · n.
    let ln = std::f64::consts::LN_2 + std::f64::consts::PI.ln() * ((n - 1.0) / 2.0)
        - latency_analysis::student::ln_gamma((n - 1.0) / 2.0)
        + (stdev + 1.0).ln() * (n - 2.0)
        + n.ln() * ((n - 2.0) / 2.0);
    bits + ln / std::f64::consts::LN_2
}

/// A split of the values seen so far: the groups before the last one (their starts, the last
/// group's average, their bits) and the last group.
#[derive(Clone, Debug)]
struct Split {
    starts: Vec<usize>,
    bits_before: f64,
    prev_avg: Option<f64>,
    last: Stats,
}

impl Split {
    fn bits(&self, max_value: f64, unit: f64) -> f64 {
        self.bits_before + bits(&self.last, max_value, unit, self.prev_avg)
    }
}

/// The groups of `values` (non-negative figures in time order) that encode them in the fewest
/// bits. `unit` is their resolution (none: the largest value over 2¹³ − 1).
pub fn classify(values: &[f64], unit: Option<f64>) -> Vec<Group> {
    let max_value = values.iter().copied().fold(0.0, f64::max);
    let unit = unit_of(max_value, unit);
    // Every split whose last group may still grow, by the start of that group; and the best split
    // of the values so far.
    let mut open: Vec<Split> = Vec::new();
    let mut record: Option<Split> = None;
    for (i, &x) in values.iter().enumerate() {
        // A new group starting here, after the best split of the values before it.
        let mut fresh = match &record {
            None => Split { starts: Vec::new(), bits_before: 0.0, prev_avg: None, last: Stats::default() },
            Some(r) => {
                let mut starts = r.starts.clone();
                starts.push(i - r.last.size as usize);
                Split {
                    starts,
                    bits_before: r.bits(max_value, unit),
                    prev_avg: Some(r.last.avg),
                    last: Stats::default(),
                }
            }
        };
        fresh.last.push(x);
        let mut best = fresh.clone();
        let mut best_bits = fresh.bits(max_value, unit);
        for o in &mut open {
            o.last.push(x);
            let b = o.bits(max_value, unit);
            // As jumpavg: an older split replaces the record only when strictly better.
            if b < best_bits {
                best_bits = b;
                best = o.clone();
            }
        }
        open.push(fresh);
        record = Some(best);
    }
    let Some(r) = record else { return Vec::new() };
    let mut starts = r.starts;
    starts.push(values.len() - r.last.size as usize);
    let ends: Vec<usize> = starts.iter().skip(1).copied().chain([values.len()]).collect();
    starts
        .iter()
        .zip(ends)
        .map(|(&start, end)| {
            let mut s = Stats::default();
            values[start..end].iter().for_each(|&x| s.push(x));
            Group { start, len: end - start, avg: s.avg, stdev: s.stdev() }
        })
        .collect()
}

/// The bits the split into `groups` takes to encode `values` (as [`classify`] counts them).
pub fn description_bits(values: &[f64], groups: &[Group], unit: Option<f64>) -> f64 {
    let max_value = values.iter().copied().fold(0.0, f64::max);
    let unit = unit_of(max_value, unit);
    let mut prev_avg = None;
    let mut total = 0.0;
    for g in groups {
        let mut s = Stats::default();
        values[g.start..g.start + g.len].iter().for_each(|&x| s.push(x));
        total += bits(&s, max_value, unit, prev_avg);
        prev_avg = Some(s.avg);
    }
    total
}

/// The unit asked for, or the largest value over 2¹³ − 1.
fn unit_of(max_value: f64, unit: Option<f64>) -> f64 {
    match unit.filter(|u| *u > 0.0) {
        Some(u) => u,
        None if max_value > 0.0 => max_value / (2f64.powf(13.0) - 1.0),
        None => 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_value_costs_its_length_and_its_average() {
        // n = 1: log2(1 · 2) = 1 bit for the length, log2(max/unit + 1) for the average.
        let s = Stats { size: 1, avg: 100.0, m2: 0.0 };
        assert!((bits(&s, 1023.0, 1.0, None) - (1.0 + 10.0)).abs() < 1e-12);
    }

    #[test]
    fn a_flat_series_is_one_group_and_a_step_is_found_where_it_is() {
        // Nightly medians of 150 ns ± 1 ns (a fixed, repeating pattern), then 155 ns from night
        // 20 (index 19) on.
        let noise = [0.3, -0.8, 0.5, 0.9, -0.2, -0.6, 0.1, 0.7, -0.9, 0.4];
        let flat: Vec<f64> = (0..30).map(|k| 150.0 + noise[k % 10]).collect();
        let groups = classify(&flat, Some(0.01));
        assert_eq!(groups.len(), 1, "{groups:?}");
        let step: Vec<f64> = flat.iter().enumerate().map(|(k, v)| if k >= 19 { v + 5.0 } else { *v }).collect();
        let groups = classify(&step, Some(0.01));
        assert_eq!(groups.iter().map(|g| (g.start, g.len)).collect::<Vec<_>>(), [(0, 19), (19, 11)], "{groups:?}");
        let shift = groups[1].avg - groups[0].avg;
        assert!((shift - 5.0).abs() < 0.5, "{shift}");
    }
}

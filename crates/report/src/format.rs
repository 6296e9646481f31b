//! Formatting shared by the template context and the figures: numbers, session lists and the
//! order of a program's reset modes.

use std::collections::BTreeMap;

use latency_results::summary::Mode;
use latency_results::summary::ProgramSummary;
use latency_results::summary::Quantiles;

/// Placeholder for a missing value.
pub(super) const NONE: &str = "—";

/// One decimal, or the placeholder for NaN/∞; never `-0.0`.
pub(super) fn ns(v: f64) -> String {
    if v.is_finite() { format!("{:.1}", if v == 0.0 { 0.0 } else { v }) } else { NONE.to_string() }
}

/// A value that may be absent (ns, one decimal), `—` when it is.
pub(super) fn optional(v: Option<f64>) -> String {
    v.map_or_else(|| NONE.to_string(), ns)
}

/// A quantile of `q` at `level`, formatted.
pub(super) fn quantile(q: &Quantiles, level: f64) -> String {
    optional(q.at(level))
}

/// `1, 3, 5`; runs of three or more consecutive sessions shortened to `6–9`.
pub(super) fn session_list(sessions: &[u32]) -> String {
    let mut sorted = sessions.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        if j >= i + 2 {
            parts.push(format!("{}–{}", sorted[i], sorted[j]));
        } else {
            parts.extend(sorted[i..=j].iter().map(u32::to_string));
        }
        i = j + 1;
    }
    parts.join(", ")
}

/// The median of a mode (NaN when absent, sorting last).
pub(super) fn mode_median(m: &Mode) -> f64 {
    m.latency_ns.median().unwrap_or(f64::NAN)
}

/// The program's modes, lowest median first.
pub(super) fn ordered_modes(p: &ProgramSummary) -> Vec<&Mode> {
    let mut modes: Vec<&Mode> = p.modes.iter().collect();
    modes.sort_by(|a, b| mode_median(a).total_cmp(&mode_median(b)));
    modes
}

/// Index (into [`ordered_modes`]) of the mode the program-wide figures describe: the one whose
/// quantiles are the program's, else the one with the most matched probes.
pub(super) fn dominant_mode(p: &ProgramSummary, modes: &[&Mode]) -> Option<usize> {
    if let Some(i) = modes.iter().position(|m| p.is_headline(m)) {
        return Some(i);
    }
    let matched =
        |m: &Mode| -> u64 { p.sessions.iter().filter(|s| m.sessions.contains(&s.session)).map(|s| s.matched).sum() };
    (0..modes.len()).max_by_key(|&i| matched(modes[i]))
}

/// Session → index into [`ordered_modes`].
pub(super) fn session_modes(modes: &[&Mode]) -> BTreeMap<u32, usize> {
    modes.iter().enumerate().flat_map(|(i, m)| m.sessions.iter().map(move |&s| (s, i))).collect()
}

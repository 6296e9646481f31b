//! Adaptive sessions: whether a program has been brought up often enough. After each of its
//! sessions from the plan's `min`-th on, the sessions so far are split into reset modes (as the
//! analysis does, on each session's raw median) and the stopping rule is checked: no new mode in
//! the latest `stable_sessions` sessions, a Good–Turing estimate of the chance that the next
//! bring-up shows an unseen mode below `unseen_mode_below`, and (when asked) 95 % intervals of
//! the headline mode's median and p99 over its sessions narrower than `median_ci_ns` and
//! `p99_ci_ns`.

use std::collections::BTreeMap;

use latency_analysis::modes;
use latency_analysis::stats;
use latency_analysis::student;
use latency_plan::Adaptive;
use latency_plan::ModeSettings;
use latency_results::ResultsDir;
use latency_results::pairs;
use latency_results::runfile;
use latency_schedule::Session;

/// What the rule found after some sessions.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// Modes seen.
    pub modes: usize,
    /// Good–Turing estimate of the probability of an unseen mode at the next bring-up.
    pub unseen: f64,
    /// Sessions since the last new mode appeared.
    pub stable: usize,
    /// Width of the 95 % interval of the headline mode's median over its sessions, ns.
    pub ci_width_ns: Option<f64>,
    /// The same of its p99, ns.
    pub p99_ci_width_ns: Option<f64>,
    /// Whether every condition holds.
    pub stop: bool,
}

impl Verdict {
    /// In words, for the journal.
    pub fn describe(&self, sessions: usize) -> String {
        format!(
            "after {sessions} sessions: {} reset mode{}, none new in the last {}, P(unseen mode) ≈ {:.3}{}",
            self.modes,
            if self.modes == 1 { "" } else { "s" },
            self.stable,
            self.unseen,
            self.ci_width_ns.map(|w| format!(", median interval {w:.2} ns wide")).unwrap_or_default()
                + &self.p99_ci_width_ns.map(|w| format!(", p99 interval {w:.2} ns wide")).unwrap_or_default()
        )
    }
}

/// A session's raw figures: the median and p99 over probes of each probe's median over the
/// session's runs, ns.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SessionFigures {
    /// Median.
    pub median: f64,
    /// 99th percentile.
    pub p99: f64,
}

/// The width of the 95 % interval (Student's t) of the mean of `x`; none below two values.
fn ci_width(x: &[f64]) -> Option<f64> {
    (x.len() >= 2).then(|| {
        let n = x.len() as f64;
        let mean = x.iter().sum::<f64>() / n;
        let sd = (x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        2.0 * student::t975(n - 1.0) * sd / n.sqrt()
    })
}

/// Check the stopping rule on the raw figures of a program's sessions, in session order.
pub fn decide(rule: &Adaptive, settings: &ModeSettings, sessions: &[SessionFigures]) -> Verdict {
    let medians: Vec<f64> = sessions.iter().map(|s| s.median).collect();
    let n = medians.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| medians[a].total_cmp(&medians[b]));
    let sorted: Vec<f64> = order.iter().map(|&i| medians[i]).collect();
    let split = if settings.enabled {
        modes::split(&sorted, &[], settings.min_separation_ns, settings.min_gap_sigmas)
    } else {
        modes::Split { clusters: std::iter::once(0..n).collect(), within_sd_ns: None, threshold_ns: f64::INFINITY }
    };
    // The mode of each session, in session order.
    let mut mode_of = vec![0; n];
    for (k, c) in split.clusters.iter().enumerate() {
        for &i in &order[c.clone()] {
            mode_of[i] = k;
        }
    }
    let first_seen = (0..split.clusters.len()).filter_map(|k| mode_of.iter().position(|&m| m == k)).max();
    let stable = first_seen.map_or(0, |i| n - 1 - i);
    let singletons = split.clusters.iter().filter(|c| c.len() == 1).count();
    let unseen = if n == 0 { 1.0 } else { singletons as f64 / n as f64 };
    // The headline mode's sessions, in session order.
    let headline = split.clusters.iter().max_by_key(|c| c.len()).map(|c| &order[c.clone()]).unwrap_or(&[]);
    let of = |f: fn(&SessionFigures) -> f64| headline.iter().map(|&i| f(&sessions[i])).collect::<Vec<f64>>();
    let ci_width_ns = ci_width(&of(|s| s.median));
    let p99_ci_width_ns = ci_width(&of(|s| s.p99));
    let narrow = |target: Option<f64>, width: Option<f64>| target.is_none_or(|t| width.is_some_and(|w| w < t));
    let ci_ok = narrow(rule.median_ci_ns, ci_width_ns) && narrow(rule.p99_ci_ns, p99_ci_width_ns);
    let stop =
        n >= rule.min as usize && stable >= rule.stable_sessions as usize && unseen < rule.unseen_mode_below && ci_ok;
    Verdict { modes: split.clusters.len(), unseen, stable, ci_width_ns, p99_ci_width_ns, stop }
}

/// The raw figures of a session: per probe the median over its stored runs of the differential,
/// then the median and p99 over probes, ns; with factors, over the runs of the session's first level (the
/// same level in every session, so that the medians compare). Reads the session's run files at
/// their places in the tree: a run is stored there only once it passed its checks, and a resume
/// has moved aside whatever the journal does not vouch for; a run that failed has no file.
pub fn session_figures(dir: &ResultsDir, s: &Session, tsc_hz: f64) -> Option<SessionFigures> {
    let mut by_probe: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    let first_level = s.runs.first().and_then(|r| r.level.as_ref());
    for r in s.runs.iter().filter(|r| r.level.as_ref() == first_level) {
        let Ok((batches, _)) = runfile::read(&dir.root().join(s.run_rel_path(r))) else { continue };
        for (id, d) in pairs::pair(&batches).diffs {
            by_probe.entry(id).or_default().push(d as f64 * 1e9 / tsc_hz);
        }
    }
    let mut estimates: Vec<f64> = by_probe.into_values().map(|mut v| stats::median(&mut v)).collect();
    estimates.sort_by(f64::total_cmp);
    (!estimates.is_empty()).then(|| SessionFigures {
        median: stats::quantile_sorted(&estimates, 0.5),
        p99: stats::quantile_sorted(&estimates, 0.99),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: Adaptive = Adaptive {
        min: 3,
        max: 50,
        stable_sessions: 4,
        unseen_mode_below: 0.1,
        median_ci_ns: Some(1.0),
        p99_ci_ns: None,
    };

    /// Sessions whose p99 is 20 ns above their median.
    fn figures(medians: &[f64]) -> Vec<SessionFigures> {
        medians.iter().map(|&m| SessionFigures { median: m, p99: m + 20.0 }).collect()
    }
    const MODES: ModeSettings = ModeSettings { enabled: true, min_separation_ns: 3.0, min_gap_sigmas: 8.0 };

    #[test]
    fn the_rule_waits_for_stable_modes_no_singletons_and_a_narrow_interval() {
        // Two modes 30 ns apart; the second first seen in session 3.
        let m = [107.0, 107.2, 137.1, 106.9, 137.0, 107.1, 106.8, 107.0];
        let v = decide(&RULE, &MODES, &figures(&m[..3]));
        assert_eq!((v.modes, v.stable, v.stop), (2, 0, false));
        // By hand after 8: modes seen at sessions 1 and 3 → 5 sessions since; no mode seen once
        // → P(unseen) = 0; the low mode's 6 medians: mean 107.0, sd 0.1414, t(5) = 2.5706 →
        // width 2 × 2.5706 × 0.1414 / √6 = 0.2968 ns.
        let v = decide(&RULE, &MODES, &figures(&m));
        assert_eq!((v.modes, v.stable, v.unseen), (2, 5, 0.0));
        assert!((v.ci_width_ns.unwrap() - 0.2968).abs() < 1e-3, "{v:?}");
        assert!(v.stop);
        // A third mode seen once: P(unseen) = 1/9 ≥ 0.1, and it is new.
        let mut more = m.to_vec();
        more.push(160.0);
        let v = decide(&RULE, &MODES, &figures(&more));
        assert_eq!((v.modes, v.stable, v.stop), (3, 0, false));
        assert!((v.unseen - 1.0 / 9.0).abs() < 1e-12);
        // A wide interval alone keeps it going.
        let loose = [100.0, 101.5, 100.2, 101.9, 100.1, 101.7];
        let v = decide(&RULE, &MODES, &figures(&loose));
        assert_eq!((v.modes, v.stop), (1, false), "{v:?}");
        // A p99 target: the eight sessions' medians are narrow enough but their p99s scatter.
        let p99_rule = Adaptive { p99_ci_ns: Some(1.0), ..RULE };
        let mut tails = figures(&m);
        for (k, f) in tails.iter_mut().enumerate() {
            f.p99 += if k % 2 == 0 { 1.0 } else { -1.0 };
        }
        let v = decide(&p99_rule, &MODES, &tails);
        // The low mode's sessions 1, 2, 4, 6, 7, 8 (indices 0, 1, 3, 5, 6, 7): p99 offsets +1, −1,
        // −1, −1, +1, −1 about median + 20 → 128.0, 126.2, 125.9, 126.1, 127.8, 126.0; mean
        // 126.667, sd 0.9626, width 2 × 2.5706 × 0.9626 / √6 = 2.020 ns.
        assert!((v.p99_ci_width_ns.unwrap() - 2.020).abs() < 2e-3, "{v:?}");
        assert!(!v.stop && decide(&RULE, &MODES, &tails).stop, "{v:?}");
    }
}

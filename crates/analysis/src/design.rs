//! Designed studies: from the variance components a dimensioning study measured and what each
//! level costs on the testbed, the runs per session and the sessions that reach a target
//! precision in the least testbed time, or the best precision within a budget (Kalibera & Jones,
//! "Rigorous benchmarking in reasonable time", ISMM 2013).
//!
//! With `T_s²` the session component, `T_r² + V_p` the variance a run adds (its own component and
//! its probes'), `c_s` the cost of a session's bring-up and `c_r` that of a run, the runs per
//! session that minimise the cost of a given variance are
//! `r = ⌈√((c_s / c_r) · (T_r² + V_p) / T_s²)⌉` (their optimum for the level below the top),
//! and the sessions are then the fewest whose 95 % half-width `t₀.₉₇₅(n − 1) · √Var(n, r)` meets
//! the target for every estimate. The probes per run stay those of the plan's traces. A study of
//! `g` session groups then takes `c_0 + g · n · (c_s + r · c_r)`, `c_0` being what it costs
//! whatever its sessions (writing each image once when later sessions only boot it).

use serde::Serialize;

use super::components::{Components, Design};
use super::student::t975;

/// What one more repetition costs, seconds of testbed time (from the schedule's predictions).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Costs {
    /// One more session of every group that has one (programs and their null calibrations).
    pub session_s: f64,
    /// One more run in each of those sessions.
    pub run_s: f64,
    /// What the study costs whatever its sessions and runs (writing each image once).
    pub fixed_s: f64,
}

/// What a design must reach: every estimate's 95 % half-width at most `half_width_ns`, or at most
/// what `precise_as` (sessions, runs per session) gives it, or both (in the least time); within
/// `budget_s` seconds of testbed time (the narrowest it pays for); or a target and a budget (the
/// target if the budget pays for it, else the best the budget can do, not met).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Goal {
    /// Half-width of every 95 % interval, ns.
    pub half_width_ns: Option<f64>,
    /// Each estimate's half-width from this many sessions of this many runs (a plan's own
    /// precision), as its target.
    pub precise_as: Option<(u32, u32)>,
    /// Testbed time, seconds.
    pub budget_s: Option<f64>,
}

impl Goal {
    /// Each estimate's target half-width, ns; none without a target.
    fn targets(&self, estimates: &[Components]) -> Option<Vec<f64>> {
        if self.half_width_ns.is_none() && self.precise_as.is_none() {
            return None;
        }
        Some(
            estimates
                .iter()
                .map(|c| {
                    let own = self.precise_as.map_or(f64::INFINITY, |(n, r)| half_width(c, n, r));
                    own.min(self.half_width_ns.unwrap_or(f64::INFINITY))
                })
                .collect(),
        )
    }
}

/// A design and what it predicts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Designed {
    /// Sessions per program (and per null calibration).
    pub sessions: u32,
    /// Runs per session.
    pub runs: u32,
    /// Predicted testbed time, seconds.
    pub seconds: f64,
    /// Predicted 95 % half-width of each estimate, ns, in the order given.
    pub half_widths_ns: Vec<f64>,
    /// Whether the goal is met: the target reached (within the budget, if both are given); a
    /// budget alone is met when it pays for two sessions.
    pub met: bool,
}

/// Most sessions a design may have.
pub const MAX_SESSIONS: u32 = 1000;
/// Most runs per session.
pub const MAX_RUNS: u32 = 100;

/// The runs per session that buy a given variance most cheaply (at least 1), and why: the ratio of
/// what a run adds to what a session adds.
pub fn runs_per_session(c: &Components, costs: Costs) -> u32 {
    let run = c.run_ns2 + c.probe_ns2;
    if c.session_ns2 <= 0.0 {
        // Sessions add nothing measurable: one run per session would waste bring-ups, but more
        // runs do not reduce what sessions add either; take what the data had.
        return (c.design.runs.round() as u32).clamp(1, MAX_RUNS);
    }
    let r = ((costs.session_s / costs.run_s.max(1e-9)) * run / c.session_ns2).sqrt().ceil();
    (r as u32).clamp(1, MAX_RUNS)
}

/// The 95 % half-width of an estimate of components `c` from `sessions` of `runs` (probes per run
/// as measured), with Student's t on n − 1 degrees of freedom.
pub fn half_width(c: &Components, sessions: u32, runs: u32) -> f64 {
    t975(f64::from(sessions.max(2) - 1)) * standard_error(c, sessions, runs)
}

fn standard_error(c: &Components, sessions: u32, runs: u32) -> f64 {
    let d = Design { sessions: f64::from(sessions), runs: f64::from(runs), probes: c.design.probes };
    c.variance(d).sqrt()
}

/// Design a study for `estimates` (each program's median and p99 components), `groups` session
/// groups sharing the design (programs and null calibrations), to reach `goal`: every (sessions,
/// runs per session) is weighed — the cheapest that meets the target (within the budget), else
/// the narrowest the budget pays for. Kalibera & Jones's `r` ([`runs_per_session`]) is the
/// continuous optimum this search lands next to.
pub fn design(estimates: &[Components], costs: Costs, groups: u32, goal: Goal) -> Option<Designed> {
    if estimates.is_empty() || goal == Goal::default() {
        return None;
    }
    let seconds = |n: u32, r: u32| {
        costs.fixed_s + f64::from(groups) * f64::from(n) * (costs.session_s + f64::from(r) * costs.run_s)
    };
    let t: Vec<f64> = (0..=MAX_SESSIONS).map(|n| t975(f64::from(n.max(2) - 1))).collect();
    let targets = goal.targets(estimates);
    // How far the worst estimate is from its target (≤ 1: met); without a target, the widest
    // half-width.
    let excess = |n: u32, r: u32| {
        let widths = estimates.iter().map(|c| t[n as usize] * standard_error(c, n, r));
        match &targets {
            Some(ts) => widths.zip(ts).map(|(w, t)| w / t).fold(0.0, f64::max),
            None => widths.fold(0.0, f64::max),
        }
    };
    let affordable = |n: u32, r: u32| goal.budget_s.is_none_or(|b| seconds(n, r) <= b);
    let candidates = (2..=MAX_SESSIONS).flat_map(|n| (1..=MAX_RUNS).map(move |r| (n, r)));
    let meeting = targets.as_ref().and_then(|_| {
        candidates
            .clone()
            .filter(|&(n, r)| affordable(n, r) && excess(n, r) <= 1.0)
            .min_by(|a, b| seconds(a.0, a.1).total_cmp(&seconds(b.0, b.1)))
    });
    let (sessions, runs, met) = match meeting {
        Some((n, r)) => (n, r, true),
        None => {
            let best = candidates.filter(|&(n, r)| affordable(n, r)).min_by(|a, b| {
                excess(a.0, a.1).total_cmp(&excess(b.0, b.1)).then(seconds(a.0, a.1).total_cmp(&seconds(b.0, b.1)))
            });
            match best {
                Some((n, r)) => (n, r, targets.is_none()),
                None => (2, 1, false),
            }
        }
    };
    let half_widths_ns = estimates.iter().map(|c| half_width(c, sessions, runs)).collect();
    Some(Designed { sessions, runs, seconds: seconds(sessions, runs), half_widths_ns, met })
}

/// One level of a load sweep: its pacing, the rest of its level (the program and the other
/// factors' values), and its median and p99.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepPoint {
    /// Probes per second.
    pub pacing_pps: f64,
    /// Everything else that names the level.
    pub rest: String,
    /// Median, ns.
    pub median_ns: f64,
    /// p99, ns.
    pub p99_ns: f64,
}

/// The highest pacing of a load sweep whose median and p99 stay within `within_ns` of those at
/// `base_pps` for every program and setting of the other factors, as do all pacings between (so
/// that faster replays give the same probes): `base_pps` when no faster one does; none when some
/// setting was not measured at `base_pps`.
pub fn fastest_pacing(points: &[SweepPoint], base_pps: f64, within_ns: f64) -> Option<f64> {
    let mut rests: Vec<&str> = points.iter().map(|p| p.rest.as_str()).collect();
    rests.sort_unstable();
    rests.dedup();
    let bases = rests
        .iter()
        .map(|r| points.iter().find(|p| p.rest == *r && p.pacing_pps == base_pps).map(|b| (*r, b)))
        .collect::<Option<Vec<_>>>()?;
    let close = |p: &SweepPoint| {
        bases.iter().find(|(r, _)| *r == p.rest).is_some_and(|(_, b)| {
            (p.median_ns - b.median_ns).abs() <= within_ns && (p.p99_ns - b.p99_ns).abs() <= within_ns
        })
    };
    let mut faster: Vec<f64> = points.iter().map(|p| p.pacing_pps).filter(|&x| x > base_pps).collect();
    faster.sort_by(f64::total_cmp);
    faster.dedup();
    let mut best = base_pps;
    for pps in faster {
        if !points.iter().filter(|p| p.pacing_pps == pps).all(close) {
            break;
        }
        best = pps;
    }
    Some(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn components(session: f64, run: f64, probe: f64) -> Components {
        Components {
            session_ns2: session,
            run_ns2: run,
            probe_ns2: probe,
            design: Design { sessions: 5.0, runs: 10.0, probes: 20_000.0 },
        }
    }

    #[test]
    fn runs_per_session_follow_kalibera_and_jones() {
        // r = ⌈√((c_s/c_r) · (T_r² + V_p)/T_s²)⌉: √((480/52) · 0.5/1) = √4.615 = 2.15 → 3.
        let c = components(1.0, 0.3, 0.2);
        assert_eq!(runs_per_session(&c, Costs { session_s: 480.0, run_s: 52.0, fixed_s: 0.0 }), 3);
        // Cheap sessions, dear runs: one run each. √((10/100) · 0.5/1) = 0.22 → 1.
        assert_eq!(runs_per_session(&c, Costs { session_s: 10.0, run_s: 100.0, fixed_s: 0.0 }), 1);
        // Quiet sessions: many runs. √((480/52) · 4/0.01) = 60.8 → 61.
        let c = components(0.01, 3.0, 1.0);
        assert_eq!(runs_per_session(&c, Costs { session_s: 480.0, run_s: 52.0, fixed_s: 0.0 }), 61);
    }

    #[test]
    fn the_half_width_is_student_t_times_the_standard_error_of_the_design() {
        // Var = 1/5 + (0.3 + 0.2)/50 = 0.21; t(4) = 2.776445.
        let c = components(1.0, 0.3, 0.2);
        assert!((half_width(&c, 5, 10) - 2.776_445 * 0.21_f64.sqrt()).abs() < 1e-5);
    }

    #[test]
    fn a_target_takes_the_fewest_sessions_that_meet_it_and_a_budget_the_most_it_pays_for() {
        let c = components(1.0, 0.3, 0.2);
        let costs = Costs { session_s: 480.0, run_s: 52.0, fixed_s: 0.0 };
        let d = design(&[c], costs, 2, Goal { half_width_ns: Some(1.0), ..Goal::default() }).unwrap();
        assert!(d.met && d.half_widths_ns[0] <= 1.0);
        // The cheapest: every cheaper (sessions, runs) misses the target, found by brute force.
        let cost = |n: u32, r: u32| 2.0 * f64::from(n) * (480.0 + f64::from(r) * 52.0);
        assert!((d.seconds - cost(d.sessions, d.runs)).abs() < 1e-9);
        for n in 2..=60 {
            for r in 1..=20 {
                if cost(n, r) < d.seconds {
                    assert!(half_width(&c, n, r) > 1.0, "{n} × {r} is cheaper and meets it");
                }
            }
        }
        // Near Kalibera & Jones's r = 3 for these costs and components.
        assert!((2..=4).contains(&d.runs), "{d:?}");
        let b = design(&[c], costs, 2, Goal { budget_s: Some(3.0 * 3600.0), ..Goal::default() }).unwrap();
        assert!(b.met && b.seconds <= 3.0 * 3600.0);
        for n in 2..=60 {
            for r in 1..=20 {
                if cost(n, r) <= 3.0 * 3600.0 {
                    assert!(half_width(&c, n, r) >= b.half_widths_ns[0] - 1e-12, "{n} × {r} is narrower");
                }
            }
        }
        // A target below what any number of sessions can reach is not met.
        let never = design(&[c], costs, 2, Goal { half_width_ns: Some(0.01), ..Goal::default() }).unwrap();
        assert!(!never.met);
        // Within a budget that does not pay for the target: the most the budget pays for, not met.
        let both = Goal { half_width_ns: Some(0.3), budget_s: Some(3.0 * 3600.0), ..Goal::default() };
        let d = design(&[c], costs, 2, both).unwrap();
        assert_eq!((d.sessions, d.runs, d.met), (b.sessions, b.runs, false));
        assert!(d.half_widths_ns[0] > 0.3);
        // As precise as 5 sessions of 10 runs, estimate by estimate, in the least time: no
        // half-width wider than 5 × 10 gives it, and every cheaper design has one wider.
        let quiet = components(0.2, 2.0, 0.1);
        let as_plan = Goal { precise_as: Some((5, 10)), ..Goal::default() };
        let d = design(&[c, quiet], costs, 2, as_plan).unwrap();
        assert!(d.met, "{d:?}");
        let own = [half_width(&c, 5, 10), half_width(&quiet, 5, 10)];
        assert!(d.half_widths_ns.iter().zip(own).all(|(w, o)| *w <= o + 1e-12), "{d:?} {own:?}");
        for n in 2..=60 {
            for r in 1..=30 {
                if cost(n, r) < d.seconds {
                    assert!(
                        half_width(&c, n, r) > own[0] || half_width(&quiet, n, r) > own[1],
                        "{n} × {r} is cheaper and as precise"
                    );
                }
            }
        }
        // What the study costs whatever its design is added once, and spent before the budget.
        let fixed = Costs { fixed_s: 600.0, ..costs };
        let t = Goal { half_width_ns: Some(1.0), ..Goal::default() };
        let (plain, with) = (design(&[c], costs, 2, t).unwrap(), design(&[c], fixed, 2, t).unwrap());
        assert_eq!((with.sessions, with.runs), (plain.sessions, plain.runs));
        assert!((with.seconds - plain.seconds - 600.0).abs() < 1e-9);
        let tight = design(&[c], fixed, 2, Goal { budget_s: Some(3.0 * 3600.0), ..Goal::default() }).unwrap();
        assert!(tight.seconds <= 3.0 * 3600.0 && tight.seconds - 600.0 <= b.seconds);
    }

    #[test]
    fn the_fastest_pacing_is_the_last_of_an_unbroken_run_within_the_tolerance() {
        let point = |pps: f64, rest: &str, median_ns: f64, p99_ns: f64| SweepPoint {
            pacing_pps: pps,
            rest: rest.into(),
            median_ns,
            p99_ns,
        };
        let sweep = [
            point(500.0, "128", 150.0, 170.0),
            point(5e3, "128", 150.5, 170.4),
            point(5e5, "128", 151.0, 172.9),
            point(2e6, "128", 152.0, 174.0), // p99 4 ns above: out at 3 ns
            point(5e6, "128", 151.0, 171.0), // within again, but past a break
            point(500.0, "512", 160.0, 180.0),
            point(5e3, "512", 160.2, 180.1),
            point(5e5, "512", 161.0, 181.0),
            point(2e6, "512", 161.0, 181.0),
            point(5e6, "512", 161.0, 181.0),
        ];
        assert_eq!(fastest_pacing(&sweep, 500.0, 3.0), Some(5e5));
        assert_eq!(fastest_pacing(&sweep, 500.0, 4.0), Some(5e6));
        // A setting the 512-byte frames fail first bounds both.
        let mut worse = sweep.clone();
        worse[7].median_ns = 164.5;
        assert_eq!(fastest_pacing(&worse, 500.0, 3.0), Some(5e3));
        assert_eq!(fastest_pacing(&sweep, 500.0, 0.1), Some(500.0));
        // Without the base rate measured, nothing can be said.
        assert_eq!(fastest_pacing(&sweep[1..], 500.0, 3.0), None);
    }
}

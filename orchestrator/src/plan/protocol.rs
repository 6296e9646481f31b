//! Decoding of a plan's `protocol:` (sessions, runs, pacing, flashing, step policies, run checks).

use std::collections::BTreeMap;

use super::steps::decode_steps;
use super::yaml::{Decoder, Node};
use super::{Adaptive, FlashPolicy, Protocol, RunChecks};

const FLASH: &[(&str, FlashPolicy)] =
    &[("every_session", FlashPolicy::EverySession), ("on_change", FlashPolicy::OnChange)];

/// Decode `protocol:`.
pub(super) fn decode_protocol(d: &mut Decoder, n: &Node) -> Option<Protocol> {
    let mut m = d.map(n, "protocol")?;
    let sessions =
        m.required(d, "sessions", |d, v| d.either(v, decode_adaptive, |d, v| d.uint(v, 1..=1000).map(|n| (n, None))));
    let runs = m.required(d, "runs", |d, v| d.uint(v, 1..=10_000));
    let pacing_pps = m.required(d, "pacing_pps", |d, v| d.uint(v, 1..=100_000_000));
    let burst = m.or(d, "burst", 1, |d, v| d.uint(v, 1..=10_000));
    let idle_gap_s = m.or(d, "idle_gap_s", 5.0, |d, v| d.number(v, 0.0..=86_400.0));
    let settle_s = m.or(d, "settle_s", 0.0, |d, v| d.number(v, 0.0..=86_400.0));
    let seed = m.or(d, "seed", 1, |d, v| d.uint(v, 0..=i64::MAX));
    let reflect = m.or(d, "reflect", false, Decoder::boolean);
    let flash = m.or(d, "flash", FlashPolicy::EverySession, |d, v| d.choice(v, FLASH));
    let steps = m.or(d, "steps", BTreeMap::new(), decode_steps);
    let run_checks = m.or(d, "run_checks", RunChecks::default(), decode_run_checks);
    m.done(d);
    let (sessions, adaptive) = sessions?;
    Some(Protocol {
        sessions,
        adaptive,
        runs: runs?,
        pacing_pps: pacing_pps?,
        burst: burst?,
        idle_gap_s: idle_gap_s?,
        settle_s: settle_s?,
        seed: seed?,
        reflect: reflect?,
        flash: flash?,
        steps: steps?,
        run_checks: run_checks?,
    })
}

/// `sessions: {min, max, until: {stable_sessions, unseen_mode_below, median_ci_ns}}`.
fn decode_adaptive(d: &mut Decoder, n: &Node) -> Option<(u32, Option<Adaptive>)> {
    let mut m = d.map(n, "adaptive sessions: {min, max, until}")?;
    let min = m.required(d, "min", |d, v| d.uint(v, 2..=1000));
    let max = m.required(d, "max", |d, v| d.uint(v, 2..=1000));
    let until = m.required(d, "until", |d, v| {
        let mut u = d.map(v, "stopping rule: {stable_sessions, unseen_mode_below, median_ci_ns}")?;
        let stable = u.or(d, "stable_sessions", 5, |d, v| d.uint(v, 1..=1000));
        let unseen = u.or(d, "unseen_mode_below", 0.05, |d, v| d.number(v, 0.0..=1.0));
        let ci = u.optional(d, "median_ci_ns", |d, v| d.number(v, 0.0..=1e6));
        u.done(d);
        Some((stable?, unseen?, ci?))
    });
    m.done(d);
    let (min, max, (stable_sessions, unseen_mode_below, median_ci_ns)) = (min?, max?, until?);
    if max < min {
        d.error(n.pos, format!("`max` ({max}) is below `min` ({min})"));
        return None;
    }
    Some((max, Some(Adaptive { min, max, stable_sessions, unseen_mode_below, median_ci_ns })))
}

impl Default for RunChecks {
    fn default() -> Self {
        RunChecks { min_matched_fraction: 0.99, max_duplicates: 0, max_attempts: 3, pacing_tolerance: 0.05 }
    }
}

fn decode_run_checks(d: &mut Decoder, n: &Node) -> Option<RunChecks> {
    let def = RunChecks::default();
    let mut m = d.map(n, "run_checks")?;
    let min_matched_fraction = m.or(d, "min_matched_fraction", def.min_matched_fraction, |d, v| d.number(v, 0.0..=1.0));
    let max_duplicates = m.or(d, "max_duplicates", def.max_duplicates, |d, v| d.uint(v, 0..=i64::MAX));
    let max_attempts = m.or(d, "max_attempts", def.max_attempts, |d, v| d.uint(v, 1..=20));
    let pacing_tolerance = m.or(d, "pacing_tolerance", def.pacing_tolerance, |d, v| d.number(v, 0.0..=1.0));
    m.done(d);
    Some(RunChecks {
        min_matched_fraction: min_matched_fraction?,
        max_duplicates: max_duplicates?,
        max_attempts: max_attempts?,
        pacing_tolerance: pacing_tolerance?,
    })
}

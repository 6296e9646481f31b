//! Decoding of a plan's `protocol:` (sessions, runs, pacing, flashing, step policies, run checks)
//! and of the `steps:` overrides that plans and inventories share.

use std::collections::BTreeMap;

use super::inventory::Action;
use super::yaml::{self, Decoder, Node};
use super::{FlashPolicy, Protocol, RunChecks, StepPolicy};

/// Default timeouts and retries for every action (overridden by the inventory, then the plan).
pub fn default_policy(a: Action) -> StepPolicy {
    let (timeout_s, retries) = match a {
        Action::Flash => (1200.0, 1),
        Action::FlashJtag => (600.0, 1),
        Action::PcieRescan | Action::PcieRemove => (60.0, 3),
        Action::Replay => (3600.0, 0),
        Action::AgentStart => (120.0, 2),
        _ => (120.0, 1),
    };
    StepPolicy { timeout_s, retries }
}

fn decode_step_policy(d: &mut Decoder, n: &Node, base: StepPolicy) -> Option<StepPolicy> {
    let mut m = d.map(n, "step policy")?;
    let timeout_s = m.or(d, "timeout_s", base.timeout_s, |d, v| d.number(v, 0.001..=86_400.0));
    let retries = m.or(d, "retries", base.retries, |d, v| d.uint(v, 0..=10));
    m.done(d);
    Some(StepPolicy { timeout_s: timeout_s?, retries: retries? })
}

/// Decode a `steps:` mapping of action name → policy.
pub fn decode_steps(d: &mut Decoder, n: &Node) -> Option<BTreeMap<Action, StepPolicy>> {
    let mut m = d.map(n, "steps")?;
    let mut out = BTreeMap::new();
    let mut ok = true;
    for (pos, key, v) in m.entries() {
        match Action::from_name(key) {
            Some(a) => match decode_step_policy(d, v, default_policy(a)) {
                Some(p) => {
                    out.insert(a, p);
                }
                None => ok = false,
            },
            None => {
                let names: Vec<&str> = Action::ALL.iter().map(|a| a.name()).collect();
                let hint = yaml::closest(key, &names).map(|k| format!(" (did you mean `{k}`?)")).unwrap_or_default();
                d.error(*pos, format!("unknown action `{key}`{hint}"));
                ok = false;
            }
        }
    }
    ok.then_some(out)
}

const FLASH: &[(&str, FlashPolicy)] =
    &[("every_session", FlashPolicy::EverySession), ("on_change", FlashPolicy::OnChange)];

/// Decode `protocol:`.
pub(super) fn decode_protocol(d: &mut Decoder, n: &Node) -> Option<Protocol> {
    let mut m = d.map(n, "protocol")?;
    let sessions = m.required(d, "sessions", |d, v| d.uint(v, 1..=1000));
    let runs = m.required(d, "runs", |d, v| d.uint(v, 1..=10_000));
    let pacing_pps = m.required(d, "pacing_pps", |d, v| d.uint(v, 1..=100_000_000));
    let idle_gap_s = m.or(d, "idle_gap_s", 5.0, |d, v| d.number(v, 0.0..=86_400.0));
    let seed = m.or(d, "seed", 1, |d, v| d.uint(v, 0..=i64::MAX));
    let reflect = m.or(d, "reflect", false, Decoder::boolean);
    let flash = m.or(d, "flash", FlashPolicy::EverySession, |d, v| d.choice(v, FLASH));
    let steps = m.or(d, "steps", BTreeMap::new(), decode_steps);
    let run_checks = m.or(d, "run_checks", RunChecks::default(), decode_run_checks);
    m.done(d);
    Some(Protocol {
        sessions: sessions?,
        runs: runs?,
        pacing_pps: pacing_pps?,
        idle_gap_s: idle_gap_s?,
        seed: seed?,
        reflect: reflect?,
        flash: flash?,
        steps: steps?,
        run_checks: run_checks?,
    })
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

//! Step policies (timeout, retries) of the host actions, and the `steps:` overrides that plans
//! and inventories share.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::actions::Action;
use crate::yaml::{Decoder, Node};

/// Timeout and retries of one kind of step.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct StepPolicy {
    /// Seconds before the step is cancelled.
    pub timeout_s: f64,
    /// Further attempts after a failure.
    pub retries: u32,
}

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
    let (entries, mut ok) = m.among(d, &Action::NAMES, "action");
    let mut out = BTreeMap::new();
    for (i, v) in entries {
        let a = Action::ALL[i];
        match decode_step_policy(d, v, default_policy(a)) {
            Some(p) => {
                out.insert(a, p);
            }
            None => ok = false,
        }
    }
    ok.then_some(out)
}

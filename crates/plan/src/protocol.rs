//! A plan's `protocol:` (sessions, adaptive sessions, runs, pacing and bursts, flashing, step
//! policies, run checks): its types and its decoding.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::actions::Action;
use crate::steps::{StepPolicy, decode_steps};
use crate::yaml::{Decoder, Node};

/// Thresholds a run must meet to count.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct RunChecks {
    /// Minimum fraction of the probes the program forwards that must be matched on both ports.
    pub min_matched_fraction: f64,
    /// Maximum duplicated probe copies.
    pub max_duplicates: u64,
    /// Attempts of one run before it is reported failed.
    pub max_attempts: u32,
    /// Largest relative deviation of the achieved pacing from `pacing_pps`, as reported by the
    /// sender and as seen in the receiver's stamps of the bypass copies.
    pub pacing_tolerance: f64,
}

/// The measurement protocol.
#[derive(Clone, Debug, Serialize)]
pub struct Protocol {
    /// Bring-ups per program (and per null/trace pair); with `adaptive`, the most a program may
    /// take.
    pub sessions: u32,
    /// Adaptive sessions: a program keeps being brought up until its stopping rule holds.
    pub adaptive: Option<Adaptive>,
    /// Replay runs per session.
    pub runs: u32,
    /// Replay rate, packets per second (0 with [`Timing::Trace`]: each run's rate is its trace's).
    pub pacing_pps: u32,
    /// How the probes of a run are timed.
    pub timing: Timing,
    /// Probes sent back to back at each pacing interval, the intervals `burst` times as long (1:
    /// evenly paced); tcpreplay's `--pps-multi`.
    pub burst: u32,
    /// Idle time between runs, seconds (waited on every testbed; the first probe after it is
    /// excluded by the analysis).
    pub idle_gap_s: f64,
    /// Time the capture settles after a bring-up before the first run, seconds.
    pub settle_s: f64,
    /// Seed of the simulator and of every resampling.
    pub seed: u64,
    /// Whether stamped probes are reflected to the sender's hardware clock.
    pub reflect: bool,
    /// When the card is reprogrammed.
    pub flash: FlashPolicy,
    /// Per-step overrides of the inventory's timeouts and retries.
    pub steps: BTreeMap<Action, StepPolicy>,
    /// Run acceptance thresholds.
    pub run_checks: RunChecks,
    /// What sends the probes: tcpreplay, or the agent as an originator timing round trips.
    pub sender: Sender,
    /// Soak mode: the agent also keeps an HDR histogram of each run's differentials, appended to
    /// the run's interval log every `interval_s` (none: records only).
    pub soak: Option<Soak>,
}

/// What sends a run's probes (`sender: tcpreplay | agent`, with `rtt_crossings`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Sender {
    /// tcpreplay replays the trace; the receiver's agent stamps both copies of every probe.
    #[default]
    Tcpreplay,
    /// `latency-agent originate` on the sender sends the trace at the pace, stamping each probe
    /// as it goes and each echo as it returns from the receiver's `latency-agent reflect`: a run's
    /// differential is the round trip, and the null calibration leaves what the program adds.
    Agent {
        /// How many times a round trip passes the program (1 when echoes return by a path of their
        /// own, 2 when back through the card): the one-way estimate is the calibrated round trip
        /// divided by it.
        crossings: u32,
    },
}

impl Sender {
    /// Whether tcpreplay sends (the default, left out of the provenance).
    pub fn is_tcpreplay(&self) -> bool {
        *self == Sender::Tcpreplay
    }
}

/// Soak mode (`soak: {interval_s}`): beside its records, each run keeps an HDR histogram of its
/// differentials (`run=<r>.hlog`, the agent's `--histogram-interval-s`), which the analysis
/// summarises on its own (quantiles with their resolution, and per interval over the run).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Soak {
    /// Seconds between the histograms appended to a run's log.
    pub interval_s: f64,
    /// Whether the per-packet records are kept beside the histograms (false: histograms only,
    /// for soaks too long to store every record; the run checks then use the agent's counts and
    /// the headline comes from the histograms).
    pub records: bool,
}

/// How a run's probes are timed (`timing: pps`, or `timing: trace` with `multiplier`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "timing")]
pub enum Timing {
    /// Evenly, `pacing_pps` (or the level's) per second: tcpreplay's `--pps`.
    Pps,
    /// At the gaps of the trace's time stamps divided by `multiplier`: tcpreplay's
    /// `--multiplier`. The run checks expect the trace's mean rate times `multiplier`.
    Trace {
        /// How many times faster than recorded.
        multiplier: f64,
    },
}

/// Adaptive sessions (`sessions: {min, max, until}`): after each of a program's sessions from the
/// `min`-th on, the study stops bringing it up once its reset modes are stable and its median is
/// known well enough; never past `max`. Null calibrations take `min` sessions.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Adaptive {
    /// Sessions always run.
    pub min: u32,
    /// Sessions never exceeded.
    pub max: u32,
    /// No new mode may have appeared in this many latest sessions.
    pub stable_sessions: u32,
    /// The Good–Turing estimate of the probability that the next bring-up lands in a mode not seen
    /// yet (modes seen in exactly one session / sessions) must be below this.
    pub unseen_mode_below: f64,
    /// The 95 % interval of the headline mode's median over its sessions must be narrower than
    /// this, ns (none: not required).
    pub median_ci_ns: Option<f64>,
    /// The same for the headline mode's p99, ns (none: not required).
    pub p99_ci_ns: Option<f64>,
}

latency_proto::words! {
/// When a session reprograms the card.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlashPolicy {
    /// Every session flashes and boots its image (a full bring-up, as in the paper).
    EverySession = "every_session",
    /// Skip flash and boot when the previous session left the same image on the card.
    OnChange = "on_change",
    /// Every session redraws the reset mode with the cheapest bring-up the testbed says redraws it
    /// (its inventory's `mode_redrawn_by`): the image is written only when the card does not hold
    /// it already, and then booted or loaded every session.
    Redraw = "redraw",
}
}

/// Decode `protocol:`.
pub(super) fn decode_protocol(d: &mut Decoder, n: &Node) -> Option<Protocol> {
    let mut m = d.map(n, "protocol")?;
    let sessions =
        m.required(d, "sessions", |d, v| d.either(v, decode_adaptive, |d, v| d.uint(v, 1..=1000).map(|n| (n, None))));
    let runs = m.required(d, "runs", |d, v| d.uint(v, 1..=10_000));
    let pacing_pps = m.optional(d, "pacing_pps", |d, v| d.uint(v, 1..=100_000_000));
    let (at_pacing, at_multiplier) = (m.at("pacing_pps"), m.at("multiplier"));
    let traced = m.or(d, "timing", false, |d, v| d.choice(v, &[("pps", false), ("trace", true)]));
    let multiplier = m.optional(d, "multiplier", |d, v| d.number(v, 0.001..=1000.0));
    let burst = m.or(d, "burst", 1, |d, v| d.uint(v, 1..=10_000));
    let idle_gap_s = m.or(d, "idle_gap_s", 5.0, |d, v| d.number(v, 0.0..=86_400.0));
    let settle_s = m.or(d, "settle_s", 0.0, |d, v| d.number(v, 0.0..=86_400.0));
    let seed = m.or(d, "seed", 1, |d, v| d.uint(v, 0..=i64::MAX));
    let reflect = m.or(d, "reflect", false, Decoder::boolean);
    let flash = m.or(d, "flash", FlashPolicy::EverySession, |d, v| d.choice(v, &FlashPolicy::WORDS));
    let steps = m.or(d, "steps", BTreeMap::new(), decode_steps);
    let run_checks = m.or(d, "run_checks", RunChecks::default(), decode_run_checks);
    let agent_sender = m.or(d, "sender", false, |d, v| d.choice(v, &[("tcpreplay", false), ("agent", true)]));
    let (at_sender, at_crossings) = (m.at("sender"), m.at("rtt_crossings"));
    let crossings = m.optional(d, "rtt_crossings", |d, v| d.uint(v, 1..=2));
    let soak = m.optional(d, "soak", |d, v| {
        let mut s = d.map(v, "soak: {interval_s, records}")?;
        let interval_s = s.required(d, "interval_s", |d, v| d.number(v, 0.01..=86_400.0));
        let records = s.or(d, "records", true, Decoder::boolean);
        s.done(d);
        Some(Soak { interval_s: interval_s?, records: records? })
    });
    m.done(d);
    let (sessions, adaptive) = sessions?;
    let (pacing_pps, timing) = match (pacing_pps?, traced?, multiplier?) {
        (Some(pps), false, None) => (pps, Timing::Pps),
        (None, true, multiplier) => (0, Timing::Trace { multiplier: multiplier.unwrap_or(1.0) }),
        (None, false, _) => {
            d.error(n.pos, "missing key `pacing_pps` (required unless `timing: trace`)");
            return None;
        }
        (Some(_), true, _) => {
            let at = at_pacing.unwrap_or(n.pos);
            d.error(
                at,
                "`pacing_pps` is for `timing: pps`: with `timing: trace` the trace's time stamps pace the probes",
            );
            return None;
        }
        (Some(_), false, Some(_)) => {
            d.error(at_multiplier.unwrap_or(n.pos), "`multiplier` is used only with `timing: trace`");
            return None;
        }
    };
    let sender = match (agent_sender?, crossings?) {
        (false, None) => Sender::Tcpreplay,
        (false, Some(_)) => {
            d.error(at_crossings.unwrap_or(n.pos), "`rtt_crossings` is used only with `sender: agent`");
            return None;
        }
        (true, crossings) => Sender::Agent { crossings: crossings.unwrap_or(1) },
    };
    if let Sender::Agent { .. } = sender {
        let at = at_sender.unwrap_or(n.pos);
        let clash = [
            (reflect == Some(true), "`reflect: true` (tcpreplay's probes reflected to the sender's clock)"),
            (timing != Timing::Pps, "`timing: trace` (the originator paces evenly)"),
            (matches!(soak, Some(Some(_))), "`soak` (the originator keeps records, not histograms)"),
        ];
        if let Some((_, what)) = clash.iter().find(|c| c.0) {
            d.error(at, format!("`sender: agent` times round trips itself: it does not combine with {what}"));
            return None;
        }
    }
    Some(Protocol {
        sender,
        sessions,
        adaptive,
        runs: runs?,
        pacing_pps,
        timing,
        burst: burst?,
        idle_gap_s: idle_gap_s?,
        settle_s: settle_s?,
        seed: seed?,
        reflect: reflect?,
        flash: flash?,
        steps: steps?,
        run_checks: run_checks?,
        soak: soak?,
    })
}

/// `sessions: {min, max, until: {stable_sessions, unseen_mode_below, median_ci_ns, p99_ci_ns}}`.
fn decode_adaptive(d: &mut Decoder, n: &Node) -> Option<(u32, Option<Adaptive>)> {
    let mut m = d.map(n, "adaptive sessions: {min, max, until}")?;
    let min = m.required(d, "min", |d, v| d.uint(v, 2..=1000));
    let max = m.required(d, "max", |d, v| d.uint(v, 2..=1000));
    let until = m.required(d, "until", |d, v| {
        let mut u = d.map(v, "stopping rule: {stable_sessions, unseen_mode_below, median_ci_ns, p99_ci_ns}")?;
        let stable = u.or(d, "stable_sessions", 5, |d, v| d.uint(v, 1..=1000));
        let unseen = u.or(d, "unseen_mode_below", 0.05, |d, v| d.number(v, 0.0..=1.0));
        let ci = u.optional(d, "median_ci_ns", |d, v| d.number(v, 0.0..=1e6));
        let p99_ci = u.optional(d, "p99_ci_ns", |d, v| d.number(v, 0.0..=1e6));
        u.done(d);
        Some((stable?, unseen?, ci?, p99_ci?))
    });
    m.done(d);
    let (min, max, (stable_sessions, unseen_mode_below, median_ci_ns, p99_ci_ns)) = (min?, max?, until?);
    if max < min {
        d.error(n.pos, format!("`max` ({max}) is below `min` ({min})"));
        return None;
    }
    Some((max, Some(Adaptive { min, max, stable_sessions, unseen_mode_below, median_ci_ns, p99_ci_ns })))
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

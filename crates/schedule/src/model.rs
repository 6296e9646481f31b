//! The schedule's types: the study's sessions in execution order, each with its steps and runs,
//! the levels of a study with factors, and the predicted durations.

use serde::Serialize;

use latency_plan::Level;
use latency_plan::inventory::Action;
use latency_proto::CardIdentity;
pub use latency_results::SessionKind;

/// The whole study, in execution order.
#[derive(Clone, Debug, Serialize)]
pub struct Schedule {
    /// Study name.
    pub study: String,
    /// Testbed: `sim` or the inventory name.
    pub testbed: String,
    /// Sessions in execution order.
    pub sessions: Vec<Session>,
    /// Predicted duration.
    pub predicted_seconds: Predicted,
    /// The plan's factors, design and order.
    pub factors: latency_plan::Factors,
    /// Each level with its runs and predicted time, in plan order (none without factors).
    pub levels: Vec<LevelPlan>,
    /// What a real testbed does besides the steps, before the first session and after the last
    /// (leases, leftovers, cleanup); empty on the simulator.
    pub around: Around,
    /// Traces replayed as generated stand-ins of absent published files, in plain words.
    pub stand_ins: Vec<String>,
    /// What the testbed, being the real hardware, refuses to run (stand-ins, images not built),
    /// each naming the file and line: `run` stops on them.
    pub refused: Vec<String>,
    /// Adaptive sessions: the predicted total if every program stops at its minimum (the total
    /// above is at the maximum).
    pub adaptive_min_seconds: Option<f64>,
    /// On several testbed slices: the predicted assignment of the sessions and the wall time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slices: Option<Assignment>,
}

/// One level of a study with factors, as the dry run shows it.
#[derive(Clone, Debug, Serialize)]
pub struct LevelPlan {
    /// The level's name (`pacing_pps=500/frame_size=128`).
    pub name: String,
    /// Runs at this level, null calibrations included.
    pub runs: usize,
    /// Predicted replay time and waits before its runs, seconds (bring-ups are shared).
    pub seconds: f64,
}

impl Predicted {
    pub(crate) fn sum(&self) -> f64 {
        self.replay + self.idle_gaps + self.bring_up + self.run_steps
    }
}

/// A real testbed's work around the steps, as the dry run shows it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Around {
    /// Before the first session.
    pub before: Vec<String>,
    /// After the last session (and on every way out, Ctrl-C included).
    pub after: Vec<String>,
}

/// One bring-up followed by its runs.
#[derive(Clone, Debug, Serialize)]
pub struct Session {
    /// Position in the schedule, from 0.
    pub index: usize,
    /// Program or null calibration.
    pub kind: SessionKind,
    /// Program name, or `null-<trace>` for calibration sessions.
    pub program: String,
    /// Session number within the program, from 1.
    pub session: u32,
    /// Bitstream name.
    pub bitstream: String,
    /// Trace name.
    pub trace: String,
    /// Probes of the session's trace (with a `trace` factor a run's own are [`Run::probes`]).
    pub probes: u64,
    /// Bring-up steps.
    pub steps: Vec<Step>,
    /// The steps that put the session's image on the card (write, boot), left out of `steps`
    /// because the session before it in the schedule left that image there (`flash: on_change`,
    /// `redraw`): run first when that cannot be vouched for — a testbed's first session of a run
    /// of the tool (a resume), a session after another image on the same slice, or after a failed
    /// bring-up.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub write_first: Vec<Step>,
    /// The actions of `steps` the session leaves out when the card already holds its image
    /// although the schedule does not expect it to: read back at a testbed's first bring-up and
    /// found to run the image (`identity`), or written by an earlier session on the same slice.
    /// They are the steps `write_first` would hold (none with `flash: every_session`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unless_held: Vec<Action>,
    /// What the card reads back while it runs the session's image (the manifest's sha256 and
    /// `identity`).
    #[serde(skip_serializing_if = "CardIdentity::is_empty")]
    pub identity: CardIdentity,
    /// Runs.
    pub runs: Vec<Run>,
    /// Steps after the last run.
    pub teardown: Vec<Step>,
    /// How the agent is driven during the runs (absent on the simulator).
    pub agent_control: Option<String>,
}

impl Run {
    /// Predicted seconds of the run's steps beyond its probes at the pacing: the captures, and
    /// what the replay's step takes besides sending (its estimate: starting the sender, collecting
    /// the records).
    pub fn other_steps_s(&self) -> f64 {
        self.steps.iter().map(|st| st.estimate_s).sum()
    }

    /// The name of the run's level, if it has one.
    pub fn level_name(&self) -> Option<String> {
        self.level.as_ref().map(Level::name)
    }
}

impl Session {
    /// Path of a run's data in the results folder, relative to it.
    pub fn run_rel_path(&self, r: &Run) -> std::path::PathBuf {
        latency_results::ResultsDir::run_rel_path(&self.program, r.level_name().as_deref(), self.session, r.run)
    }

    /// `program_sN`, used for paths on hosts.
    pub fn name(&self) -> String {
        format!("{}_s{}", self.program, self.session)
    }
}

/// One host action, rendered.
#[derive(Clone, Debug, Serialize)]
pub struct Step {
    /// `sender`, `receiver`, or `sim`.
    pub host: String,
    /// Action.
    pub action: Action,
    /// The command exactly as it would be executed (absent on the simulated testbed).
    pub command: Option<String>,
    /// Expected duration, seconds.
    pub estimate_s: f64,
}

/// One replay of the trace.
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    /// Run number within the session, from 1 (through every level of the session).
    pub run: u32,
    /// The factor level measured (none without factors).
    pub level: Option<Level>,
    /// Replay rate, packets per second: `pacing_pps` (or the level's), or under `timing: trace`
    /// the trace's own mean rate times `multiplier`, which may be below 1.
    pub pacing_pps: Pps,
    /// Probes sent back to back at each interval.
    pub burst: u32,
    /// The trace replayed (the session's, or its copy at the level's frame size).
    pub trace: String,
    /// Probes of that trace.
    pub probes: u64,
    /// Steps of the run.
    pub steps: Vec<Step>,
    /// Replay time, seconds (probes / pacing).
    pub replay_s: f64,
    /// Wait before the run, seconds: the capture's settling before the first run of a session,
    /// the idle gap before the others.
    pub wait_before_s: f64,
}

/// A replay rate in packets per second: whole under `timing: pps`, any positive rate under
/// `timing: trace` (a trace stamped 10 s apart replays at 0.1 pps). Written as an integer when it
/// is whole.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Pps(pub f64);

impl From<u32> for Pps {
    fn from(pps: u32) -> Pps {
        Pps(f64::from(pps))
    }
}

impl From<Pps> for f64 {
    fn from(pps: Pps) -> f64 {
        pps.0
    }
}

impl Pps {
    /// The rate as host-command templates take it (`{{ pacing_pps }}`, a whole number): rounded,
    /// at least 1. Under `timing: trace` the replay is paced by the trace (`{{ pace_args }}`), so
    /// this is only what the rate is near.
    pub fn whole(self) -> u32 {
        self.0.round().clamp(1.0, f64::from(u32::MAX)) as u32
    }
}

impl std::fmt::Display for Pps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl Serialize for Pps {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Whole rates as integers, as plans write them; u32 holds every whole rate a plan sets.
        match u32::try_from(self.0 as i64) {
            Ok(whole) if f64::from(whole) == self.0 => s.serialize_u32(whole),
            _ => s.serialize_f64(self.0),
        }
    }
}

/// Predicted duration of the study, by term.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Predicted {
    /// Pure replay time: probes / pacing, summed over runs.
    pub replay: f64,
    /// Waits before runs: idle gaps between runs and the capture's settling before the first.
    pub idle_gaps: f64,
    /// Bring-up steps (flash, PCIe, drivers, tables, registers, agent).
    pub bring_up: f64,
    /// Per-run steps other than the replay (captures) and teardown.
    pub run_steps: f64,
    /// Sum of the terms.
    pub total: f64,
}

/// The predicted assignment of a schedule's sessions to slices.
#[derive(Clone, Debug, Serialize)]
pub struct Assignment {
    /// The slices, as named on the command line.
    pub slices: Vec<String>,
    /// Per session (schedule order), its slice (1, 2, …).
    pub slice_of: Vec<usize>,
    /// Predicted seconds of each slice's sessions.
    pub busy_seconds: Vec<f64>,
    /// Predicted wall time on the slices.
    pub wall_seconds: f64,
    /// Predicted wall time on one testbed.
    pub one_slice_seconds: f64,
}

//! The testbed boundary: every side effect of a study (hosts, processes, hardware, or their
//! simulation) sits behind [`Testbed`]. The engine only sees steps that succeed or fail and runs
//! that return records.
//!
//! May touch: hosts over SSH, processes, files on hosts, hardware, or their simulation. Must not:
//! write a results folder (the engine does), analyse data, or know the reports.

pub mod model;
pub mod reflect;
pub mod replay;
pub mod sim;
pub mod soak;
pub mod ssh;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arrow_array::RecordBatch;
use latency_plan::Action;
use latency_proto::CardIdentity;

use latency_schedule::Run;
use latency_schedule::Session;
use latency_schedule::Step;

/// Set when the user asks to stop (Ctrl-C, SIGTERM); long operations poll it.
#[derive(Clone, Debug, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// A flag that is not set.
    pub fn new() -> Self {
        Cancel::default()
    }

    /// The shared flag, for signal handlers.
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.0.clone()
    }

    /// Ask every holder to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether a stop was asked for.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// What a testbed was doing when it failed: one of the schedule's host actions, or its own work
/// around them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Doing {
    /// A host action of the schedule.
    Action(Action),
    /// Connecting to a host.
    Connect,
    /// Reading the hosts' facts.
    Facts,
    /// Taking, renewing or releasing the testbed's lease.
    Lease,
    /// Staging traces, bitstreams and the agent on the hosts.
    Stage,
    /// Uploading a file.
    Upload,
    /// Downloading a file.
    Download,
    /// Collecting a run's files.
    Collect,
    /// Talking to a running agent.
    Agent,
    /// Waiting for a running agent's event (`ready`, `started`, …).
    AwaitAgent(&'static str),
    /// Removing what a study left on a host.
    Cleanup,
}

impl From<Action> for Doing {
    fn from(action: Action) -> Doing {
        Doing::Action(action)
    }
}

impl std::fmt::Display for Doing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Doing::Action(a) => a.name(),
            Doing::Connect => "connect",
            Doing::Facts => "facts",
            Doing::Lease => "lease",
            Doing::Stage => "stage",
            Doing::Upload => "upload",
            Doing::Download => "download",
            Doing::Collect => "collect",
            Doing::Agent => "agent",
            Doing::AwaitAgent(event) => return write!(f, "agent {event}"),
            Doing::Cleanup => "cleanup",
        })
    }
}

/// A step or run that did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum TestbedError {
    /// The step failed; it may succeed when retried.
    #[error("{host}: {action}: {message}")]
    Failed {
        /// Host the step ran on.
        host: String,
        /// What the testbed was doing.
        action: Doing,
        /// What went wrong.
        message: String,
    },
    /// The step exceeded its timeout.
    #[error("{host}: {action}: timed out after {seconds} s")]
    Timeout {
        /// Host the step ran on.
        host: String,
        /// What the testbed was doing.
        action: Doing,
        /// The timeout.
        seconds: f64,
    },
    /// A trace could not be generated for staging.
    #[error("local: stage: {0}")]
    Trace(#[source] latency_plan::trace::TraceError),
    /// The user asked to stop.
    #[error("interrupted")]
    Interrupted,
}

/// What a run produced.
#[derive(Debug)]
pub struct RunData {
    /// Records in the agent's schema, in arrival order.
    pub batches: Vec<RecordBatch>,
    /// Seconds the run took on the testbed (modelled on the simulator).
    pub seconds: f64,
    /// The sender's report of the replay, when it gave one.
    pub replay: Option<replay::ReplayReport>,
    /// Frames the agent received that were its own reflections coming back (reflect mode; the
    /// agent neither records nor reflects them).
    pub reflected_loops: u64,
    /// Frames the receiver's NICs or capture rings dropped during the run, before the agent saw
    /// them.
    pub nic_drops: u64,
    /// Soak mode: the run's histogram log ([`latency_proto::soak`]).
    pub histogram: Option<Vec<u8>>,
    /// The agent's own counts of the run's probes (a capture agent's; none from an originator):
    /// what the run checks use when the run kept no records (`soak.records: false`).
    pub agent_counts: Option<latency_results::event::Counts>,
}

/// Sleep `seconds`, waking every 20 ms to end early with [`TestbedError::Interrupted`] on Ctrl-C.
pub fn sleep(seconds: f64, cancel: &Cancel) -> Result<(), TestbedError> {
    let end = std::time::Instant::now() + std::time::Duration::from_secs_f64(seconds.max(0.0));
    loop {
        if cancel.is_cancelled() {
            return Err(TestbedError::Interrupted);
        }
        let left = end.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        std::thread::sleep(left.min(std::time::Duration::from_millis(20)));
    }
}

/// A testbed the engine can drive.
pub trait Testbed: Send {
    /// Short description for logs and provenance (`sim`, inventory name).
    fn name(&self) -> String;

    /// Facts about the hosts (or the model) for provenance.
    fn facts(&self) -> latency_results::provenance::Facts;

    /// TSC ticks per second of the receiver's stamps.
    fn tsc_hz(&self) -> f64;

    /// Execute one bring-up or teardown step (`attempt` counts from 1); returns the seconds it took.
    fn step(&mut self, session: &Session, step: &Step, attempt: u32, cancel: &Cancel) -> Result<f64, TestbedError>;

    /// What the card reads back before the testbed's first bring-up of a study, before anything
    /// is written to it: the session's `readback` step run once on its own. `None` where it cannot
    /// tell (no readback step, a card that does not answer, output that is not an identity): the
    /// image is then written. The simulator's card starts every study unknown.
    fn read_card(&mut self, session: &Session, cancel: &Cancel) -> Result<Option<CardIdentity>, TestbedError> {
        let _ = (session, cancel);
        Ok(None)
    }

    /// Execute one run (capture start, replay, capture stop) and collect its records. `attempt`
    /// counts from 1.
    fn run(&mut self, session: &Session, run: &Run, attempt: u32, cancel: &Cancel) -> Result<RunData, TestbedError>;

    /// Wait `seconds` before a run (idle gap, capture settling); Ctrl-C ends the wait with
    /// [`TestbedError::Interrupted`]. Real testbeds sleep; the simulator models the time instead.
    fn wait(&mut self, seconds: f64, cancel: &Cancel) -> Result<(), TestbedError> {
        sleep(seconds, cancel)
    }

    /// Whether a run's records are a function of its key alone (seed, program, session, run,
    /// attempt), so that a run lost in a crash is made again identical: the simulator's are. The
    /// engine then stores its run files without waiting for the disk (a crash leaves at worst a
    /// file the resume finds damaged, moves aside and makes again); a real testbed's are written
    /// through to the disk before they count.
    fn reproducible(&self) -> bool {
        false
    }

    /// Stop whatever the testbed left running (agents, captures). Called on every exit path.
    fn cleanup(&mut self);
}

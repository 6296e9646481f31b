//! Consumers of a study's events: progress bars, the log. (The journal is written by the engine
//! itself, since a journal failure must stop the study; the events are defined in
//! [`latency_results::event`].)

use std::fs::File;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
pub use latency_results::event::Event;

/// A consumer of events (from the slice threads of a study on several testbeds too).
pub trait Observer: Send {
    /// Handle one event.
    fn event(&mut self, e: &Event);
}

/// Progress bars: study (runs, with ETA) → session → current step or run. Hidden when stderr is
/// not a terminal.
pub struct Progress {
    multi: MultiProgress,
    study: ProgressBar,
    session: ProgressBar,
    current: ProgressBar,
}

impl Progress {
    /// Bars drawn on stderr (nothing is drawn if it is not a terminal).
    pub fn new() -> Self {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let bar = |template: &str| {
            let pb = multi.add(ProgressBar::new(0));
            pb.set_style(ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()));
            pb
        };
        let study = bar("{prefix:>8} [{bar:30}] {pos}/{len} runs  {elapsed_precise} ETA {eta_precise}");
        let session = bar("{prefix:>8} [{bar:30}] {pos}/{len} {msg}");
        let current = bar("{prefix:>8} {spinner} {msg}");
        study.set_prefix("study");
        session.set_prefix("session");
        current.set_prefix("step");
        Progress { multi, study, session, current }
    }
}

impl Default for Progress {
    fn default() -> Self {
        Self::new()
    }
}

impl Observer for Progress {
    fn event(&mut self, e: &Event) {
        match e {
            Event::StudyStarted { runs, complete, .. } => {
                self.study.set_length(*runs as u64);
                self.study.set_position(*complete as u64);
                self.study.reset_eta();
            }
            Event::SessionStarted { name, pending_runs, steps, .. } => {
                self.session.set_length((*pending_runs + *steps) as u64);
                self.session.set_position(0);
                self.session.set_message(name.clone());
            }
            Event::StepStarted { action, host, attempt, .. } => {
                let retry = if *attempt > 1 { format!(" (attempt {attempt})") } else { String::new() };
                self.current.set_message(format!("{host}: {action}{retry}"));
                self.current.tick();
            }
            Event::StepFinished { .. } => self.session.inc(1),
            Event::RunStarted { run, attempt, .. } => {
                let retry = if *attempt > 1 { format!(" (attempt {attempt})") } else { String::new() };
                self.current.set_message(format!("run {run}{retry}"));
                self.current.tick();
            }
            Event::RunFinished { .. } | Event::RunFailed { .. } => {
                self.session.inc(1);
                self.study.inc(1);
            }
            Event::StepRetried { action, error, .. } => {
                let _ = self.multi.println(format!("retrying {action}: {error}"));
            }
            Event::RunRetried { run, reason, .. } => {
                let _ = self.multi.println(format!("retrying run {run}: {reason}"));
            }
            Event::StudyFinished { .. } | Event::Interrupted => {
                self.current.finish_and_clear();
                self.session.finish_and_clear();
                self.study.finish_and_clear();
            }
            _ => {}
        }
    }
}

/// The human-readable log: every event as a line in `orchestrate.log`, and session-level lines on
/// stderr when it is not a terminal (where the progress bars would be).
pub struct Log {
    file: Option<File>,
    stderr_lines: bool,
}

impl Log {
    /// Append to `path`; session-level lines on stderr too when it is not a terminal and
    /// `stderr_lines`.
    pub fn open(path: &Path, stderr_lines: bool) -> Self {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path).ok();
        Log { file, stderr_lines: stderr_lines && !std::io::stderr().is_terminal() }
    }
}

/// The last line `run --log-format json` prints after the events: where the results are and how
/// the study ended.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Finished {
    /// The results folder.
    pub results: PathBuf,
    /// Runs stored, those kept from earlier attempts included.
    pub runs_stored: usize,
    /// Runs kept from earlier attempts.
    pub runs_kept: usize,
    /// Runs that failed all their attempts, each with its reason.
    pub runs_failed: Vec<String>,
    /// Whether the analysis could use every run, file and program.
    pub usable: bool,
}

/// Every event as a line of JSON on stdout, exactly as the journal writes it (`t` in ms since the
/// epoch, `event` and its fields), for CI systems that follow a study.
pub struct JsonLines;

impl Observer for JsonLines {
    fn event(&mut self, e: &Event) {
        if let Ok(line) = serde_json::to_string(&latency_results::event::Entry::now(e.clone())) {
            let mut out = std::io::stdout().lock();
            // A reader that went away stops nothing: the journal has every event.
            let _ = writeln!(out, "{line}").and_then(|()| out.flush());
        }
    }
}

impl Observer for Log {
    fn event(&mut self, e: &Event) {
        let line = match e {
            Event::StudyStarted { study, testbed, sessions, runs, complete, resumed, .. } => format!(
                "{} study {study} on {testbed}: {sessions} sessions, {runs} runs ({complete} already complete)",
                if *resumed { "resuming" } else { "starting" }
            ),
            Event::SessionStarted { index, name, pending_runs, .. } => {
                format!("session {} {name}: bring-up, then {pending_runs} runs", index + 1)
            }
            Event::CardRead { index, identity, holds } => format!(
                "session {}: the card reads back ({identity}){}",
                index + 1,
                if *holds { ": it runs the session's image, which is not written again" } else { "" }
            ),
            Event::SessionSkipped { index, name } => format!("session {} {name}: complete, skipped", index + 1),
            Event::StepRetried { index, action, attempt, error } => {
                format!("session {}: {action} attempt {attempt} failed, retrying: {error}", index + 1)
            }
            Event::StepFailed { index, action, error } => format!("session {}: {action} failed: {error}", index + 1),
            Event::RunRetried { index, run, attempt, reason } => {
                format!("session {} run {run}: attempt {attempt} rejected, retrying: {reason}", index + 1)
            }
            Event::RunFailed { index, run, reason } => format!("session {} run {run}: failed: {reason}", index + 1),
            Event::Quarantined { path, to, reason } => format!("{path}: {reason}; moved to {to}"),
            Event::SessionsEnded { program, rule_met, detail, .. } => format!(
                "{program}: {} {detail}",
                if *rule_met { "stopping rule met" } else { "maximum sessions reached, stopping rule not met" }
            ),
            Event::Interrupted => "interrupted; cleaning up".to_string(),
            Event::StudyFinished { complete, failed } => {
                format!("study finished: {complete} runs stored, {failed} failed")
            }
            other => {
                if let Some(f) = &mut self.file {
                    let _ = writeln!(
                        f,
                        "{}",
                        serde_json::to_string(other).unwrap_or_else(|e| format!("(event not printable: {e})"))
                    );
                }
                return;
            }
        };
        if let Some(f) = &mut self.file {
            let _ = writeln!(f, "{line}");
        }
        if self.stderr_lines {
            eprintln!("{line}");
        }
    }
}

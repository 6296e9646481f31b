//! The run engine: walks a schedule on a testbed (bring-up steps, runs, teardown), with timeouts,
//! retries and run validation, stores each accepted run atomically, and records every event in
//! the journal so that an interrupted study resumes exactly where it stopped.

pub mod adaptive;
pub mod events;
pub mod provenance;
mod resume;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::tool::TOOL_VERSION;
use events::{Event, Observer};
use latency_plan::Plan;
use latency_plan::StepPolicy;
use latency_plan::default_policy;
use latency_plan::digest;
use latency_plan::inventory::Action;
use latency_plan::inventory::Inventory;
use latency_plan::probes;
use latency_results::ResultsDir;
use latency_results::ResultsError;
use latency_results::SessionKind;
use latency_results::journal;
use latency_results::journal::Journal;
use latency_results::pairs;
use latency_results::pairs::Counts;
use latency_results::pairs::Paired;
use latency_results::runfile;
use latency_results::runfile::RunMetadata;
use latency_schedule::Run;
use latency_schedule::Schedule;
use latency_schedule::Session;
use latency_schedule::Step;
use latency_testbed::Cancel;
use latency_testbed::RunData;
use latency_testbed::Testbed;
use latency_testbed::TestbedError;
use latency_testbed::replay::Pacing;
pub use resume::StartedWith;

/// Why a study stopped before its end.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The results folder could not be written or read.
    #[error(transparent)]
    Results(#[from] ResultsError),
    /// A step failed after all its retries.
    #[error("session {session}: {error}")]
    Testbed {
        /// `program_sN`.
        session: String,
        /// The failure (names host and step).
        error: TestbedError,
    },
}

/// How a study ended.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Runs stored, including those kept from earlier attempts of the study.
    pub complete: usize,
    /// Runs skipped because they were already complete.
    pub skipped: usize,
    /// Runs that failed all their attempts (`program_sN run R: reason`).
    pub failed: Vec<String>,
    /// Whether the user stopped the study.
    pub interrupted: bool,
}

/// Engine settings.
pub struct Options {
    /// Continue the study already in the results folder (whose start the caller has checked
    /// against `started` with [`StartedWith::differences`]).
    pub resume: bool,
    /// How this study is run: plan, seed, testbed and the options that chose them.
    pub started: StartedWith,
}

/// Engine state for one study, shared by the threads of its testbed slices.
struct Engine<'a> {
    plan: &'a Plan,
    inventory: Option<&'a Inventory>,
    dir: &'a ResultsDir,
    /// The journal and the observers: one event at a time, in the order the journal has them.
    log: Mutex<(Journal, &'a mut [Box<dyn Observer>])>,
    cancel: &'a Cancel,
}

impl Engine<'_> {
    fn emit(&self, e: Event) -> Result<(), ResultsError> {
        let mut log = self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (journal, observers) = &mut *log;
        journal.append(&e)?;
        for o in observers.iter_mut() {
            o.event(&e);
        }
        Ok(())
    }

    fn policy(&self, a: Action) -> StepPolicy {
        self.plan
            .protocol
            .steps
            .get(&a)
            .or_else(|| self.inventory.and_then(|i| i.steps.get(&a)))
            .copied()
            .unwrap_or_else(|| default_policy(a))
    }

    /// Run one step with its retries. `Ok(false)` = interrupted.
    fn step(&self, tb: &mut dyn Testbed, s: &Session, st: &Step) -> Result<bool, EngineError> {
        let policy = self.policy(st.action);
        let action = st.action;
        for attempt in 1..=policy.retries + 1 {
            self.emit(Event::StepStarted { index: s.index, action, host: st.host.clone(), attempt })?;
            match tb.step(s, st, attempt, self.cancel) {
                Ok(seconds) => {
                    self.emit(Event::StepFinished { index: s.index, action, seconds })?;
                    return Ok(true);
                }
                Err(TestbedError::Interrupted) => return Ok(false),
                Err(e) if attempt <= policy.retries => {
                    self.emit(Event::StepRetried { index: s.index, action, attempt, error: e.to_string() })?;
                }
                Err(e) => {
                    self.emit(Event::StepFailed { index: s.index, action, error: e.to_string() })?;
                    return Err(EngineError::Testbed { session: s.name(), error: e });
                }
            }
        }
        unreachable!("the last attempt returns")
    }

    /// Probes of a run that should be matched on both ports, when its trace tells.
    fn expected_matched(&self, s: &Session, r: &Run) -> Option<u64> {
        let trace = self.plan.traces.iter().find(|t| t.name == r.trace)?;
        match (trace.source.generated(), s.kind) {
            (_, SessionKind::Null) => Some(r.probes),
            (Some(g), SessionKind::Program) => {
                Some(probes::ids(r.probes).filter(|&i| probes::forwarded(g.template, i)).count() as u64)
            }
            (None, SessionKind::Program) => None,
        }
    }

    /// Why a run is not acceptable, if it is not: copies missing or duplicated, packets the
    /// sender could not send, reflections not captured or looping back, or pacing off the plan.
    fn check_run(
        &self,
        s: &Session,
        r: &Run,
        (paired, c): (&Paired, &Counts),
        data: &RunData,
        pacing: &Pacing,
    ) -> Option<String> {
        let checks = &self.plan.protocol.run_checks;
        if let Some(rep) = data.replay.filter(|rep| rep.failed > 0) {
            return Some(format!("the sender failed to send {} of {} packets", rep.failed, rep.packets));
        }
        let frac = checks.min_matched_fraction;
        let bypass = c.matched + c.bypass_only;
        if (bypass as f64) < frac * r.probes as f64 {
            return Some(format!("bypass port saw {bypass} of {} probes (minimum {:.1} %)", r.probes, frac * 100.0));
        }
        if let Some(expected) = self.expected_matched(s, r)
            && (c.matched as f64) < frac * expected as f64
        {
            return Some(format!(
                "{} of {expected} forwarded probes matched on both ports (minimum {:.1} %)",
                c.matched,
                frac * 100.0
            ));
        }
        if c.duplicates > checks.max_duplicates {
            return Some(format!("{} duplicated copies (maximum {})", c.duplicates, checks.max_duplicates));
        }
        if data.nic_drops > 0 {
            return Some(format!(
                "the receiver's NICs or capture rings dropped {} frames before the agent saw them (DPDK imissed, \
                 ierrors, rx_nombuf; AF_PACKET ring drops): the pollers fell behind",
                data.nic_drops
            ));
        }
        if data.reflected_loops > 0 {
            return Some(format!(
                "{} of the agent's own reflections came back to its ports: the switch floods them, so their \
                 destination MAC (the receiver's reflect_dst_mac) is not the sender's capture NIC",
                data.reflected_loops
            ));
        }
        let reflected = paired.hw_diffs.iter().filter(|r| r.is_some()).count();
        if self.plan.protocol.reflect && (reflected as f64) < frac * c.matched as f64 {
            return Some(format!(
                "the sender captured both reflections of {reflected} of {} matched probes (minimum {:.1} %)",
                c.matched,
                frac * 100.0
            ));
        }
        if r.burst > 1
            && let Some(size) = pairs::burst_size(&data.batches)
            && (size / f64::from(r.burst) - 1.0).abs() > checks.pacing_tolerance
        {
            return Some(format!(
                "the bypass copies arrived in bursts of {size:.1} probes on average, not {} (tolerance {:.0} %)",
                r.burst,
                checks.pacing_tolerance * 100.0
            ));
        }
        pacing.check(f64::from(r.pacing_pps), checks.pacing_tolerance)
    }

    fn run_metadata(&self, s: &Session, r: &Run, attempt: u32, tb: &dyn Testbed, seed: u64) -> RunMetadata {
        let bitstream_sha256 = self
            .plan
            .programs
            .iter()
            .flat_map(|p| [&p.bitstream, &p.null])
            .find(|b| b.name == s.bitstream)
            .map(|b| b.sha256.clone())
            .unwrap_or_default();
        RunMetadata {
            study: self.plan.study.clone(),
            plan_hash: self.plan.hash.clone(),
            program: s.program.clone(),
            kind: s.kind,
            session: s.session,
            run: r.run,
            attempt,
            bitstream: s.bitstream.clone(),
            bitstream_sha256,
            trace: r.trace.clone(),
            probes: s.probes,
            testbed: tb.name(),
            seed,
            tsc_hz: tb.tsc_hz(),
            tool_version: TOOL_VERSION.into(),
            level: r.level_name(),
            source: None,
            source_sha256: None,
        }
    }

    /// Perform one run until it is stored or out of attempts. `Ok(false)` = interrupted.
    fn run(
        &self,
        tb: &mut dyn Testbed,
        s: &Session,
        r: &Run,
        seed: u64,
        outcome: &Mutex<Outcome>,
    ) -> Result<bool, EngineError> {
        let max = self.plan.protocol.run_checks.max_attempts;
        let mut reason = String::new();
        for attempt in 1..=max {
            if self.cancel.is_cancelled() {
                return Ok(false);
            }
            self.emit(Event::RunStarted { index: s.index, run: r.run, attempt })?;
            let data = match tb.run(s, r, attempt, self.cancel) {
                Ok(d) => d,
                Err(TestbedError::Interrupted) => return Ok(false),
                Err(e) => {
                    reason = e.to_string();
                    if attempt < max {
                        self.emit(Event::RunRetried { index: s.index, run: r.run, attempt, reason: reason.clone() })?;
                    }
                    continue;
                }
            };
            let paired = pairs::pair(&data.batches);
            // A run without records (a soak keeping histograms only) is counted by the agent.
            let counts = match data.agent_counts {
                Some(c) if data.batches.is_empty() => c,
                _ => paired.counts,
            };
            let pacing =
                Pacing { sender_pps: data.replay.and_then(|r| r.pps()), receiver_pps: paired.bypass_pps(tb.tsc_hz()) };
            if let Some(why) = self.check_run(s, r, (&paired, &counts), &data, &pacing) {
                reason = why;
                if attempt < max {
                    self.emit(Event::RunRetried { index: s.index, run: r.run, attempt, reason: reason.clone() })?;
                }
                continue;
            }
            let rel = s.run_rel_path(r);
            let path = self.dir.root().join(&rel);
            runfile::write(&path, &data.batches, &self.run_metadata(s, r, attempt, tb, seed))?;
            let sha256 = digest::sha256_file(&path).map_err(latency_results::io_err(&path))?;
            let histogram_sha256 = match &data.histogram {
                Some(log) => {
                    let at = path.with_extension(latency_results::HISTOGRAM_EXTENSION);
                    latency_results::write_file(&at, log, true)?;
                    Some(digest::sha256_hex(log))
                }
                None => None,
            };
            let records = data.batches.iter().map(|b| b.num_rows() as u64).sum();
            self.emit(Event::RunFinished {
                index: s.index,
                program: s.program.clone(),
                session: s.session,
                run: r.run,
                level: r.level_name(),
                attempt,
                path: rel.to_string_lossy().into_owned(),
                sha256,
                records,
                counts,
                pacing,
                seconds: data.seconds,
                histogram_sha256,
            })?;
            lock(outcome).complete += 1;
            return Ok(true);
        }
        self.emit(Event::RunFailed { index: s.index, run: r.run, reason: reason.clone() })?;
        lock(outcome).failed.push(format!("{} run {}: {reason}", s.name(), r.run));
        Ok(true)
    }
}

/// Runs already complete in a results folder: (program, session, run) → data sha256 recorded in
/// the journal.
pub fn completed_runs(dir: &ResultsDir) -> Result<BTreeMap<(String, u32, u32), String>, ResultsError> {
    Ok(journal::completed(&journal::read(&dir.journal_path())?).into_iter().map(|(k, c)| (k, c.sha256)).collect())
}

/// What a study runs: the plan, its inventory (none on the simulator) and its schedule.
pub struct Study<'a> {
    /// The plan.
    pub plan: &'a Plan,
    /// The inventory of a real testbed.
    pub inventory: Option<&'a Inventory>,
    /// The expanded schedule.
    pub schedule: &'a Schedule,
}

/// Run (or resume) a study on one testbed, or on several slices at once: each slice takes the
/// next session of the schedule when it is free. Every slice's cleanup runs on every path out of
/// here.
pub fn run_study(
    study: &Study<'_>,
    slices: &mut [Box<dyn Testbed>],
    dir: &ResultsDir,
    options: &Options,
    cancel: &Cancel,
    observers: &mut [Box<dyn Observer>],
) -> Result<Outcome, EngineError> {
    let journal = Journal::open(&dir.journal_path())?;
    let engine =
        Engine { plan: study.plan, inventory: study.inventory, dir, log: Mutex::new((journal, observers)), cancel };
    let result = walk(&engine, study.schedule, slices, options);
    for tb in slices.iter_mut() {
        tb.cleanup();
    }
    if let Ok(o) = &result {
        if o.interrupted {
            engine.emit(Event::Interrupted)?;
        } else {
            engine.emit(Event::StudyFinished { complete: o.complete, failed: o.failed.len() })?;
        }
    }
    result
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What the slices share while they walk a schedule.
struct Walk<'a, 'e> {
    engine: &'a Engine<'e>,
    schedule: &'a Schedule,
    options: &'a Options,
    done: BTreeMap<(String, u32, u32), String>,
    outcome: Mutex<Outcome>,
    ladder: Mutex<Ladder>,
    /// The next session to take.
    next: AtomicUsize,
    /// Set when a slice stops the study (interrupted, or a step failed): the others stop after
    /// their current session.
    stop: AtomicBool,
}

fn walk(
    engine: &Engine<'_>,
    schedule: &Schedule,
    slices: &mut [Box<dyn Testbed>],
    options: &Options,
) -> Result<Outcome, EngineError> {
    let done = if options.resume { resume::prepare(engine, schedule)? } else { BTreeMap::new() };
    let total_runs = schedule.sessions.iter().map(|s| s.runs.len()).sum();
    engine.emit(Event::StudyStarted {
        study: schedule.study.clone(),
        plan_hash: options.started.plan_hash.clone(),
        seed: options.started.seed,
        testbed: options.started.testbed.clone(),
        testbed_arg: options.started.testbed_arg.clone(),
        sim_model: options.started.sim_model.clone(),
        tool_version: options.started.tool_version.clone(),
        levels: options.started.levels.clone(),
        sessions: schedule.sessions.len(),
        runs: total_runs,
        complete: done.len(),
        resumed: options.resume,
    })?;
    let w = Walk {
        engine,
        schedule,
        options,
        done,
        outcome: Mutex::new(Outcome::default()),
        ladder: Mutex::new(Ladder::default()),
        next: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
    };
    let several = slices.len() > 1;
    let results: Vec<Result<(), EngineError>> = if several {
        std::thread::scope(|scope| {
            let handles: Vec<_> = slices
                .iter_mut()
                .enumerate()
                .map(|(k, tb)| {
                    let w = &w;
                    scope.spawn(move || w.slice(tb.as_mut(), Some(k + 1)))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
        })
    } else {
        slices.iter_mut().map(|tb| w.slice(tb.as_mut(), None)).collect()
    };
    for r in results {
        r?;
    }
    Ok(w.outcome.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner))
}

impl Walk<'_, '_> {
    /// One slice's share: sessions until none is left or the study stops.
    fn slice(&self, tb: &mut dyn Testbed, slice: Option<usize>) -> Result<(), EngineError> {
        while !self.stop.load(Ordering::SeqCst) {
            let Some(s) = self.schedule.sessions.get(self.next.fetch_add(1, Ordering::SeqCst)) else {
                return Ok(());
            };
            match self.session(tb, s, slice) {
                Ok(true) => {}
                Ok(false) => {
                    lock(&self.outcome).interrupted = true;
                    self.stop.store(true, Ordering::SeqCst);
                }
                Err(e) => {
                    self.stop.store(true, Ordering::SeqCst);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// One session: its bring-up, its pending runs, its teardown. `Ok(false)` = interrupted.
    fn session(&self, tb: &mut dyn Testbed, s: &Session, slice: Option<usize>) -> Result<bool, EngineError> {
        let engine = self.engine;
        if lock(&self.ladder).ended.contains(&s.program) {
            return Ok(true);
        }
        let pending: Vec<&Run> =
            s.runs.iter().filter(|r| !self.done.contains_key(&(s.program.clone(), s.session, r.run))).collect();
        {
            let mut o = lock(&self.outcome);
            o.skipped += s.runs.len() - pending.len();
            o.complete += s.runs.len() - pending.len();
        }
        if pending.is_empty() {
            engine.emit(Event::SessionSkipped { index: s.index, name: s.name() })?;
            lock(&self.ladder).after_session(engine, s, tb)?;
            return Ok(true);
        }
        if engine.cancel.is_cancelled() {
            return Ok(false);
        }
        engine.emit(Event::SessionStarted {
            index: s.index,
            name: s.name(),
            pending_runs: pending.len(),
            steps: s.steps.len(),
            slice,
        })?;
        for r in s.runs.iter().filter(|r| !pending.iter().any(|p| p.run == r.run)) {
            engine.emit(Event::RunSkipped { index: s.index, run: r.run })?;
        }
        let mut live = true;
        for st in &s.steps {
            live = engine.step(tb, s, st)?;
            if !live {
                break;
            }
        }
        for r in pending.iter().filter(|_| live) {
            if r.wait_before_s > 0.0 {
                engine.emit(Event::Waiting { index: s.index, run: r.run, seconds: r.wait_before_s })?;
                if tb.wait(r.wait_before_s, engine.cancel).is_err() {
                    live = false;
                    break;
                }
            }
            if !engine.run(tb, s, r, self.options.started.seed, &self.outcome)? {
                live = false;
                break;
            }
        }
        // Teardown runs even when interrupted; its failures are reported but do not stop the study.
        for st in &s.teardown {
            let interrupted = engine.cancel.is_cancelled();
            match tb.step(s, st, 1, &Cancel::new()) {
                Ok(seconds) => engine.emit(Event::StepFinished { index: s.index, action: st.action, seconds })?,
                Err(e) => engine.emit(Event::StepFailed { index: s.index, action: st.action, error: e.to_string() })?,
            }
            if interrupted {
                live = false;
            }
        }
        if !live {
            return Ok(false);
        }
        engine.emit(Event::SessionFinished { index: s.index })?;
        lock(&self.ladder).after_session(engine, s, tb)?;
        Ok(true)
    }
}

/// Adaptive sessions: the raw medians of each program's sessions so far, and the programs whose
/// bring-ups have ended.
#[derive(Default)]
struct Ladder {
    medians: BTreeMap<String, Vec<f64>>,
    ended: std::collections::BTreeSet<String>,
}

impl Ladder {
    /// After a program's session (run or already complete): check its stopping rule.
    fn after_session(&mut self, engine: &Engine<'_>, s: &Session, tb: &dyn Testbed) -> Result<(), EngineError> {
        let Some(rule) = engine.plan.protocol.adaptive.filter(|_| s.kind == SessionKind::Program) else {
            return Ok(());
        };
        let medians = self.medians.entry(s.program.clone()).or_default();
        medians.extend(adaptive::session_median(engine.dir, s, tb.tsc_hz()));
        if s.session < rule.min {
            return Ok(());
        }
        let verdict = adaptive::decide(&rule, &engine.plan.analysis.modes, medians);
        if verdict.stop || s.session >= rule.max {
            let detail = verdict.describe(medians.len());
            self.ended.insert(s.program.clone());
            engine.emit(Event::SessionsEnded {
                program: s.program.clone(),
                sessions: s.session,
                rule_met: verdict.stop,
                detail,
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

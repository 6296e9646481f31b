//! The schedule walked by the testbed's slices: each slice takes the next session when it is
//! free, skips what a resumed study already holds, and stops with the others when one stops.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::adaptive;
use super::events::Event;
use super::session::Engine;
use super::{EngineError, Options, Outcome, lock, resume};
use latency_plan::Action;
use latency_results::SessionKind;
use latency_schedule::Run;
use latency_schedule::Schedule;
use latency_schedule::Session;
use latency_schedule::Step;
use latency_testbed::Cancel;
use latency_testbed::Testbed;
use latency_testbed::TestbedError;

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

pub(super) fn walk(
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
        inputs: options.started.inputs.clone(),
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
        // The image this testbed's card holds, as far as this run of the tool brought it up.
        let mut card = Card::default();
        while !self.stop.load(Ordering::SeqCst) {
            let Some(s) = self.schedule.sessions.get(self.next.fetch_add(1, Ordering::SeqCst)) else {
                return Ok(());
            };
            match self.session(tb, s, slice, &mut card) {
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

    /// One session: its bring-up, its pending runs, its teardown. `Ok(false)` = interrupted. The
    /// bring-up writes the image unless the card is known to hold it (`card`, updated).
    fn session(
        &self,
        tb: &mut dyn Testbed,
        s: &Session,
        slice: Option<usize>,
        card: &mut Card,
    ) -> Result<bool, EngineError> {
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
        // Before the slice's first bring-up writes anything, what the card is and runs.
        if !std::mem::replace(&mut card.read, true) {
            match tb.read_card(s, engine.cancel) {
                Ok(Some(identity)) => {
                    let holds = identity.matches(&s.identity) == Some(true);
                    engine.emit(Event::CardRead { index: s.index, identity, holds })?;
                    if holds {
                        card.image = Some(s.bitstream.clone());
                    }
                }
                Ok(None) => {}
                Err(TestbedError::Interrupted) => return Ok(false),
                Err(e) => {
                    engine.emit(Event::StepFailed {
                        index: s.index,
                        action: Action::Readback,
                        error: e.to_string(),
                    })?;
                    return Err(EngineError::Testbed { session: s.name(), error: e });
                }
            }
        }
        let held = card.image.as_deref() == Some(s.bitstream.as_str());
        let write_first: &[Step] = if held { &[] } else { &s.write_first };
        let steps: Vec<&Step> = s.steps.iter().filter(|st| !(held && s.unless_held.contains(&st.action))).collect();
        engine.emit(Event::SessionStarted {
            index: s.index,
            name: s.name(),
            pending_runs: pending.len(),
            steps: write_first.len() + steps.len(),
            slice,
        })?;
        for r in s.runs.iter().filter(|r| !pending.iter().any(|p| p.run == r.run)) {
            engine.emit(Event::RunSkipped { index: s.index, run: r.run })?;
        }
        let mut live = true;
        // Unknown until the bring-up is through (a failed one leaves the card unknown).
        card.image = None;
        for st in write_first.iter().chain(steps) {
            live = engine.step(tb, s, st)?;
            if !live {
                break;
            }
        }
        if live {
            card.image = Some(s.bitstream.clone());
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

/// What a slice knows of its card.
#[derive(Default)]
struct Card {
    /// The image it holds, as far as this run of the tool wrote it or read it back.
    image: Option<String>,
    /// Whether it was read back: once, before the slice's first bring-up. Never after one, whose
    /// write may have stopped half-way while the card still runs the image it had.
    read: bool,
}

/// Adaptive sessions: the raw figures of each program's sessions so far, and the programs whose
/// bring-ups have ended.
#[derive(Default)]
struct Ladder {
    figures: BTreeMap<String, Vec<adaptive::SessionFigures>>,
    ended: std::collections::BTreeSet<String>,
}

impl Ladder {
    /// After a program's session (run or already complete): check its stopping rule.
    fn after_session(&mut self, engine: &Engine<'_>, s: &Session, tb: &dyn Testbed) -> Result<(), EngineError> {
        let Some(rule) = engine.plan.protocol.adaptive.filter(|_| s.kind == SessionKind::Program) else {
            return Ok(());
        };
        let figures = self.figures.entry(s.program.clone()).or_default();
        figures.extend(adaptive::session_figures(engine.dir, s, tb.tsc_hz()));
        if s.session < rule.min {
            return Ok(());
        }
        let verdict = adaptive::decide(&rule, &engine.plan.analysis.modes, figures);
        if verdict.stop || s.session >= rule.max {
            let detail = verdict.describe(figures.len());
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

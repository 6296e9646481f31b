//! One session of a study: its bring-up steps with timeouts and retries, its runs with
//! validation, each accepted run stored atomically and journalled, and its teardown.

use std::sync::Mutex;

use super::events::{Event, Observer};
use super::{EngineError, Outcome, lock};
use crate::tool::TOOL_VERSION;
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
use latency_results::journal::Journal;
use latency_results::pairs;
use latency_results::pairs::Counts;
use latency_results::pairs::Paired;
use latency_results::reduction::{Reduction, RunIdentity};
use latency_results::runfile;
use latency_results::runfile::RunMetadata;
use latency_schedule::Run;
use latency_schedule::Session;
use latency_schedule::Step;
use latency_testbed::Cancel;
use latency_testbed::RunData;
use latency_testbed::Testbed;
use latency_testbed::TestbedError;
use latency_testbed::replay::Pacing;

/// Engine state for one study, shared by the threads of its testbed slices.
pub(super) struct Engine<'a> {
    pub(super) plan: &'a Plan,
    pub(super) inventory: Option<&'a Inventory>,
    pub(super) dir: &'a ResultsDir,
    /// The journal and the observers: one event at a time, in the order the journal has them.
    pub(super) log: Mutex<(Journal, &'a mut [Box<dyn Observer>])>,
    pub(super) cancel: &'a Cancel,
}

impl Engine<'_> {
    pub(super) fn emit(&self, e: Event) -> Result<(), ResultsError> {
        let mut log = self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (journal, observers) = &mut *log;
        journal.append(&e)?;
        for o in observers.iter_mut() {
            o.event(&e);
        }
        Ok(())
    }

    pub(super) fn policy(&self, a: Action) -> StepPolicy {
        self.plan
            .protocol
            .steps
            .get(&a)
            .or_else(|| self.inventory.and_then(|i| i.steps.get(&a)))
            .copied()
            .unwrap_or_else(|| default_policy(a))
    }

    /// Run one step with its retries. `Ok(false)` = interrupted.
    pub(super) fn step(&self, tb: &mut dyn Testbed, s: &Session, st: &Step) -> Result<bool, EngineError> {
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
    pub(super) fn expected_matched(&self, s: &Session, r: &Run) -> Option<u64> {
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
    pub(super) fn check_run(
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
                 ierrors, rx_nombuf; AF_PACKET ring drops): the pollers fell behind, or (AF_PACKET) frames were \
                 longer than the ring's slots, sized to the session's longest frame plus {} B unless the \
                 inventory's receiver.longest_frame says otherwise",
                data.nic_drops,
                latency_proto::capture::FRAME_GROWTH
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

    pub(super) fn run_metadata(&self, s: &Session, r: &Run, attempt: u32, tb: &dyn Testbed, seed: u64) -> RunMetadata {
        let bitstream_sha256 = self
            .plan
            .programs
            .iter()
            .flat_map(|p| p.images())
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
    pub(super) fn run(
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
            let meta = self.run_metadata(s, r, attempt, tb, seed);
            let sha256 = runfile::write(&path, &data.batches, &meta, !tb.reproducible())?;
            let histogram_sha256 = match &data.histogram {
                Some(log) => {
                    let at = path.with_extension(latency_results::HISTOGRAM_EXTENSION);
                    latency_results::write_file(&at, log, true)?;
                    Some(digest::sha256_hex(log))
                }
                None => None,
            };
            let records = data.batches.iter().map(|b| b.num_rows() as u64).sum();
            // The run's reduction beside it, from the pairing that checked it: the summary needs
            // no second pass over the run file. Derived data, made again by the analysis when
            // missing, so a failure to write it does not fail the run.
            let id = RunIdentity {
                program: s.program.clone(),
                session: s.session,
                run: r.run,
                level: r.level_name(),
                run_sha256: sha256.clone(),
                records,
            };
            let _ = Reduction::of(paired, id).write(&self.dir.root().join(ResultsDir::reduction_rel_path(&rel)));
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

//! The SSH testbed itself: its hosts' sessions, leases and layouts, and the [`Testbed`] steps
//! (bring-up actions, runs through the agent, teardown) each host action runs as.

use crate::Doing;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use latency_proto::AgentEvent;

use super::agent::decode_stream;
use super::dpdk::{agent_dpdk_version, check_dpdk_abi};
use super::failed;
use super::{agent, facts, lease, session, transfer};
use crate::replay::ReplayReport;
use crate::{Cancel, RunData, Testbed, TestbedError, reflect};
use latency_plan::Sender;
use latency_plan::inventory::Action;
use latency_plan::inventory::Inventory;
use latency_plan::inventory::Role;
use latency_plan::layout::RemoteLayout;
use latency_proto::CardIdentity;
use latency_schedule::Run;
use latency_schedule::Session as StudySession;
use latency_schedule::Step;

/// The SSH testbed.
pub struct SshTestbed {
    hosts: session::Hosts,
    inv: Inventory,
    layout: RemoteLayout,
    lease: lease::Lease,
    logs: PathBuf,
    tsc_hz: Option<f64>,
    /// The TSC rate the agent measured at each session's start, by session.
    tsc_by_session: std::collections::BTreeMap<String, f64>,
    facts: latency_results::provenance::TestbedHosts,
    /// Seconds to wait after a replay for the last copies to reach the agent.
    drain: Duration,
    /// What each session's `readback` step read from the card (JSON when it printed JSON).
    readback: serde_json::Map<String, serde_json::Value>,
    /// What each session's agent reported at start: ports, setup, fast path.
    agents: std::collections::BTreeMap<String, latency_results::provenance::AgentSetup>,
    /// Fast-path findings already warned about (each is said once per study).
    warned: std::collections::BTreeSet<String>,
}

impl SshTestbed {
    /// Connect to every host of `inv`, health-check the connections and take the leases.
    /// `results` is the results folder (step logs go there); `plan_hash` identifies the study in
    /// the leases.
    pub fn connect(inv: &Inventory, results: &Path, plan_hash: &str) -> Result<SshTestbed, TestbedError> {
        let hosts = session::Hosts::connect(inv)?;
        let layout = RemoteLayout::of(inv);
        let lease = lease::Lease::for_plan(plan_hash);
        lease.take(&hosts, &layout)?;
        agent::stop_leftovers(&hosts, &layout);
        let facts = facts::collect(&hosts);
        Ok(SshTestbed {
            hosts,
            inv: inv.clone(),
            layout,
            lease,
            logs: results.join("logs"),
            tsc_hz: None,
            tsc_by_session: std::collections::BTreeMap::new(),
            facts,
            drain: Duration::from_millis(100),
            readback: serde_json::Map::new(),
            agents: std::collections::BTreeMap::new(),
            warned: std::collections::BTreeSet::new(),
        })
    }

    /// Where the study's files are on the hosts.
    pub fn layout(&self) -> &RemoteLayout {
        &self.layout
    }

    fn agent<'a>(&'a self, session: &'a str) -> agent::Agent<'a> {
        agent::Agent { hosts: &self.hosts, layout: &self.layout, session }
    }

    /// The timeout of `action`'s steps (every action has a policy in a decoded inventory).
    fn timeout(&self, action: Action) -> Duration {
        let policy = self.inv.steps.get(&action).copied().unwrap_or_else(|| latency_plan::default_policy(action));
        Duration::from_secs_f64(policy.timeout_s)
    }

    fn sh(&self, role: Role, action: Doing, cmd: &str, timeout: Duration) -> Result<String, TestbedError> {
        self.hosts.run(role, action, cmd, timeout)
    }

    fn log(&self, session: &str, action: &str, text: &str) {
        let dir = self.logs.join(session);
        if std::fs::create_dir_all(&dir).is_ok() {
            use std::io::Write;
            if let Ok(mut f) =
                std::fs::OpenOptions::new().create(true).append(true).open(dir.join(format!("{action}.log")))
            {
                let _ = writeln!(f, "{text}");
            }
        }
    }

    /// Upload `local` to `remote` on `role` unless a file with the same sha256 is already there.
    /// The bytes are written beside `remote` and renamed into place only when the host's sha256
    /// of them is the one sent; a mismatch is retried once, then reported.
    pub fn upload(&self, role: Role, local: &Path, remote: &str) -> Result<(), TestbedError> {
        transfer::upload(&self.hosts, role, local, remote)
    }

    /// Read a remote file whole, verified against the host's sha256 of it.
    pub fn download(&self, role: Role, remote: &str) -> Result<Vec<u8>, TestbedError> {
        transfer::download(&self.hosts, role, remote)
    }

    /// Read a file a run left on `role` (verified like any download), then leave it there under a
    /// name marking it as collected by `attempt` (best effort: a later attempt's file is fresh).
    fn collect(&self, role: Role, remote: &str, attempt: u32) -> Result<Vec<u8>, TestbedError> {
        let bytes = self.download(role, remote)?;
        let collected = RemoteLayout::collected(remote, attempt);
        let _ = self.sh(role, Doing::Collect, &transfer::rename_command(remote, &collected), Duration::from_secs(10));
        Ok(bytes)
    }

    /// Put on the hosts what the study needs: the plan's traces, generated into
    /// `<results>/traces/` first ([`latency_plan::trace::materialize`]), then [`SshTestbed::upload_study`].
    pub fn stage(&self, plan: &latency_plan::Plan, results: &Path) -> Result<(), TestbedError> {
        let traces = latency_plan::trace::materialize(plan, &results.join("traces")).map_err(TestbedError::Trace)?;
        self.upload_study(plan, &traces)
    }

    /// Upload what the study needs, each file only if it is missing or differs (checksummed): the
    /// probe `traces` (file name on the host, local file) on the sender, tables and present
    /// bitstream images on the receiver, and the agent binary where the inventory places it in a
    /// host's work folder (the receiver's; the sender's too when the plan's sender is the agent).
    pub fn upload_study(&self, plan: &latency_plan::Plan, traces: &[(String, PathBuf)]) -> Result<(), TestbedError> {
        for u in transfer::study_uploads(plan, &self.layout, traces) {
            self.upload(u.role, &u.local, &u.remote)?;
        }
        let mut agents = vec![(Role::Receiver, &self.inv.receiver.agent)];
        if let Sender::Agent { .. } = plan.protocol.sender {
            agents.push((Role::Sender, &self.inv.sender.agent));
        }
        for (role, agent) in agents.into_iter().filter(|(role, a)| self.layout.agent_is_staged(*role, a)) {
            let local = |e: String| failed("local", Doing::Stage, e);
            let exe = std::env::current_exe().map_err(|e| local(e.to_string()))?;
            let built = exe.with_file_name("latency-agent");
            if !built.is_file() {
                return Err(local(format!(
                    "{} not found: build the agent (cargo build --release -p latency-agent)",
                    built.display()
                )));
            }
            if let (Role::Receiver, Some(wanted)) = (role, &self.inv.receiver.dpdk_version) {
                let built_against = agent_dpdk_version(&built).map_err(|e| local(e.to_string()))?;
                check_dpdk_abi(built_against.as_deref(), wanted)
                    .map_err(|e| failed(self.hosts.name(Role::Receiver), Doing::Stage, e.to_string()))?;
            }
            self.upload(role, &built, agent)?;
            self.sh(role, Doing::Stage, &transfer::executable_command(agent), Duration::from_secs(10))?;
        }
        Ok(())
    }

    /// Restart an agent that died during the session: its start, register init and health gate
    /// again (the shell's registers are cleared whenever a DPDK application starts).
    fn restart_agent(&mut self, session: &StudySession, cancel: &Cancel) -> Result<(), TestbedError> {
        eprintln!(
            "warning: {}: the agent of {} is gone; restarting it",
            self.hosts.name(Role::Receiver),
            session.name()
        );
        agent::stop_leftovers(&self.hosts, &self.layout);
        // The whole PCIe re-enumeration comes before every start of a DPDK application, as
        // LatencyLab's SETUP.md demands ("no dance → dead BAR"): remove, rescan, tables, reset
        // method, vfio bind, then the agent, its registers and the health gate.
        let steps: Vec<Step> = session
            .steps
            .iter()
            .skip_while(|s| s.action != Action::PcieRemove)
            .filter(|s| s.action != Action::Readback)
            .cloned()
            .collect();
        for st in &steps {
            self.step(session, st, 1, cancel)?;
        }
        Ok(())
    }

    /// Run `step`, the sender's originator (`sender: agent`; the reflector echoes on its own, with
    /// no `begin` or `end`), and collect the records it wrote on the sender.
    fn originate(
        &self,
        name: &str,
        run: &Run,
        step: &Step,
        attempt: u32,
        start: Instant,
    ) -> Result<RunData, TestbedError> {
        let cmd = step.command.as_deref().unwrap_or("true");
        self.log(name, step.action.name(), &format!("# run {} attempt {attempt}\n$ {cmd}", run.run));
        let out = self.sh(Role::Sender, step.action.into(), cmd, self.timeout(step.action));
        self.log(name, step.action.name(), out.as_ref().map_or_else(|e| e.to_string(), String::clone).as_str());
        let out = out?;
        let sender = self.hosts.name(Role::Sender);
        let event = out.lines().rev().find_map(|l| serde_json::from_str::<AgentEvent>(l.trim()).ok());
        let Some(AgentEvent::Rtt { sent, received, seconds, file, .. }) = event else {
            return Err(failed(
                sender,
                Doing::Action(Action::Originate),
                format!("no `rtt` event in the originator's output: {}", out.trim()),
            ));
        };
        self.log(name, "run", &format!("originate: {sent} sent, {received} echoed in {seconds:.6} s"));
        let file = file.display().to_string();
        let bytes = self.collect(Role::Sender, &file, attempt)?;
        let batches = decode_stream(&bytes).map_err(|e| failed(sender, Doing::Collect, format!("{file}: {e}")))?;
        Ok(RunData {
            batches,
            seconds: start.elapsed().as_secs_f64(),
            replay: Some(ReplayReport { packets: sent, seconds, failed: 0 }),
            reflected_loops: 0,
            nic_drops: 0,
            histogram: None,
            agent_counts: None,
        })
    }

    /// Run a run's steps (capture start, replay, capture stop) between the agent's `begin` and
    /// `end`; on an error, stop a capture the run started and end the agent's run (best effort).
    fn run_steps(
        &self,
        name: &str,
        run: &Run,
        attempt: u32,
        cancel: &Cancel,
    ) -> Result<Option<ReplayReport>, TestbedError> {
        let end = || self.agent(name).end(run.run, Duration::from_secs(30));
        let mut replay = None;
        for st in &run.steps {
            if cancel.is_cancelled() {
                let _ = end();
                return Err(TestbedError::Interrupted);
            }
            let cmd = st.command.as_deref().unwrap_or("true");
            self.log(name, st.action.name(), &format!("# run {} attempt {attempt}\n$ {cmd}", run.run));
            match self.sh(st.action.role(), st.action.into(), cmd, self.timeout(st.action)) {
                Ok(out) => {
                    self.log(name, st.action.name(), &out);
                    if st.action == Action::Replay {
                        replay = ReplayReport::parse(&out);
                        // The last copies (and their reflections) are still on their way.
                        std::thread::sleep(self.drain);
                    }
                }
                Err(e) => {
                    if let Some(stop) = run.steps.iter().find(|s| s.action == Action::CaptureStop)
                        && st.action == Action::Replay
                    {
                        let stop_cmd = stop.command.as_deref().unwrap_or("true");
                        let _ = self.sh(Role::Sender, stop.action.into(), stop_cmd, Duration::from_secs(10));
                    }
                    let _ = end();
                    return Err(e);
                }
            }
        }
        Ok(replay)
    }
}

impl Testbed for SshTestbed {
    fn name(&self) -> String {
        self.inv.name.clone()
    }

    fn facts(&self) -> latency_results::provenance::Facts {
        latency_results::provenance::Facts {
            kind: Some(latency_results::provenance::TestbedKind::Ssh),
            inventory: Some(self.inv.path.display().to_string()),
            hosts: Some(self.facts.clone()),
            tsc_hz: self.tsc_hz,
            tsc_hz_by_session: Some(self.tsc_by_session.clone()),
            readback: Some(self.readback.clone()),
            agent: Some(self.agents.clone()),
            ..Default::default()
        }
    }

    fn tsc_hz(&self) -> f64 {
        self.tsc_hz.unwrap_or(f64::NAN)
    }

    fn read_card(&mut self, session: &StudySession, cancel: &Cancel) -> Result<Option<CardIdentity>, TestbedError> {
        let Some(cmd) = session.steps.iter().find(|s| s.action == Action::Readback).and_then(|s| s.command.as_deref())
        else {
            return Ok(None);
        };
        if cancel.is_cancelled() {
            return Err(TestbedError::Interrupted);
        }
        let name = session.name();
        self.log(&name, "read_card", &format!("# before the first bring-up\n$ {cmd}"));
        let out = self.sh(Role::Receiver, Action::Readback.into(), cmd, self.timeout(Action::Readback));
        match &out {
            Ok(o) => self.log(&name, "read_card", o),
            Err(e) => self.log(&name, "read_card", &format!("error: {e}")),
        }
        let read = out.ok().and_then(|o| identity(&readback_value(&o))).filter(|r| !r.is_empty());
        // Another board than the testbed's and the image's: nothing is written to it.
        if let Some(r) = read.as_ref().filter(|r| r.other_board(&session.identity)) {
            return Err(TestbedError::Failed {
                host: self.hosts.name(Role::Receiver).to_string(),
                action: Doing::Action(Action::Readback),
                message: format!(
                    "the card is a {} board (its management firmware's profile), not the {} that {} is built for \
                     and the inventory names: nothing was written to it",
                    r.profile.as_deref().unwrap_or("?"),
                    session.identity.profile.as_deref().unwrap_or("?"),
                    session.bitstream
                ),
            });
        }
        Ok(read)
    }

    fn step(
        &mut self,
        session: &StudySession,
        step: &Step,
        attempt: u32,
        cancel: &Cancel,
    ) -> Result<f64, TestbedError> {
        if cancel.is_cancelled() {
            return Err(TestbedError::Interrupted);
        }
        let start = Instant::now();
        let cmd = step.command.as_deref().unwrap_or("true");
        let timeout = self.timeout(step.action);
        let name = session.name();
        self.log(&name, step.action.name(), &format!("# attempt {attempt}\n$ {cmd}"));
        let starts_agent = matches!(step.action, Action::AgentStart | Action::ReflectorStart);
        if starts_agent {
            self.agent(&name).prepare()?;
        }
        let out = self.sh(step.action.role(), step.action.into(), cmd, timeout);
        match &out {
            Ok(o) => self.log(&name, step.action.name(), o),
            Err(e) => self.log(&name, step.action.name(), &format!("error: {e}")),
        }
        let out = out?;
        if step.action == Action::Readback {
            let value = readback_value(&out);
            let read = identity(&value);
            self.readback.insert(name.clone(), value);
            // A card running another image than the session's is not measured.
            if let Some(read) = read.filter(|r| r.matches(&session.identity) == Some(false)) {
                return Err(TestbedError::Failed {
                    host: self.hosts.name(Role::Receiver).to_string(),
                    action: Doing::Action(Action::Readback),
                    message: format!("the card reads back ({read}), not {} ({})", session.bitstream, session.identity),
                });
            }
        }
        if starts_agent {
            let started = self.agent(&name).ready(timeout)?;
            self.tsc_hz = Some(started.tsc.hz);
            self.tsc_by_session.insert(name.clone(), started.tsc.hz);
            let findings = started.setup.setup.iter().flat_map(|s| &s.fast_path).flat_map(|f| &f.findings);
            for finding in findings.map(ToString::to_string) {
                self.log(&name, step.action.name(), &format!("fast path: {finding}"));
                if self.warned.insert(finding.clone()) {
                    eprintln!("warning: {}: fast path: {finding}", self.hosts.name(Role::Receiver));
                }
            }
            self.agents.insert(name.clone(), started.setup);
        }
        self.lease.heartbeat(&self.hosts, &self.layout);
        Ok(start.elapsed().as_secs_f64())
    }

    fn run(
        &mut self,
        session: &StudySession,
        run: &Run,
        attempt: u32,
        cancel: &Cancel,
    ) -> Result<RunData, TestbedError> {
        let start = Instant::now();
        let name = session.name();
        if !self.agent(&name).alive() {
            self.restart_agent(session, cancel)?;
        }
        if let Some(step) = run.steps.iter().find(|s| s.action == Action::Originate) {
            return self.originate(&name, run, step, attempt, start);
        }
        let file = self.agent(&name).begin(run.run)?;
        let replay = self.run_steps(&name, run, attempt, cancel)?;
        let counters = self.agent(&name).end(run.run, Duration::from_secs(60))?;
        let (reflected_loops, nic_drops) = (counters.reflected_loops, counters.nic_drops);
        let agent_counts = Some(latency_results::event::Counts {
            matched: counters.matched,
            pipeline_only: counters.pipeline_only,
            bypass_only: counters.bypass_only,
            duplicates: 0,
            unknown_port: 0,
        });
        let histogram_file = counters.histogram.as_ref().map(|p| p.display().to_string());
        let end = AgentEvent::End(counters);
        self.log(&name, "run", &serde_json::to_string(&end).unwrap_or_else(|e| format!("(unprintable: {e})")));
        let bytes = self.collect(Role::Receiver, &file, attempt)?;
        let mut batches = decode_stream(&bytes)
            .map_err(|e| failed(self.hosts.name(Role::Receiver), Doing::Collect, format!("{file}: {e}")))?;
        if run.steps.iter().any(|s| s.action == Action::CaptureStop) {
            let capture = self.layout.capture_file(&name, run.run);
            let pcap = self.download(Role::Sender, &capture)?;
            let (joined, counts) = reflect::join(&batches, &pcap)
                .map_err(|e| failed(self.hosts.name(Role::Sender), Doing::Collect, format!("{capture}: {e}")))?;
            self.log(&name, "run", &format!("reflect: {counts:?}"));
            batches = joined;
        }
        let histogram = histogram_file.map(|log| self.collect(Role::Receiver, &log, attempt)).transpose()?;
        Ok(RunData {
            batches,
            seconds: start.elapsed().as_secs_f64(),
            replay,
            reflected_loops,
            nic_drops,
            histogram,
            agent_counts,
        })
    }

    fn cleanup(&mut self) {
        // Stop any agent and capture left running, then release the leases.
        agent::stop_leftovers(&self.hosts, &self.layout);
        self.lease.release(&self.hosts, &self.layout);
    }
}

/// What a readback printed, for the provenance: its JSON; where it printed several lines, the
/// fields of each line that is a JSON object (the USERCODE read over JTAG, then the shell's
/// registers), a field keeping its first value; else the text.
fn readback_value(out: &str) -> serde_json::Value {
    let text = out.trim();
    if let Ok(v) = serde_json::from_str(text) {
        return v;
    }
    let mut fields = serde_json::Map::new();
    for line in text.lines() {
        if let Ok(serde_json::Value::Object(m)) = serde_json::from_str(line.trim()) {
            for (k, v) in m {
                fields.entry(k).or_insert(v);
            }
        }
    }
    if fields.is_empty() { serde_json::Value::String(text.to_string()) } else { serde_json::Value::Object(fields) }
}

/// The card's identity in a readback's value, if it reads as one.
fn identity(value: &serde_json::Value) -> Option<CardIdentity> {
    serde_json::from_value(value.clone()).ok()
}

#[cfg(test)]
mod tests {
    use latency_proto::Hex32;

    use super::*;

    #[test]
    fn a_readback_of_several_lines_gives_one_identity() {
        // Vivado's banner and messages, the Tcl script's USERCODE line, then the shell's registers.
        let out = "\n****** Vivado Lab Edition v2023.1 (64-bit)\nINFO: [Labtoolstcl 44-466] Opening hw_target\n\
                   {\"usercode\":\"0XA5A50001\"}\n{\"build_timestamp\":\"0x10140810\",\"profile\":\"U280\"}\n";
        let value = readback_value(out);
        assert_eq!(value["usercode"], "0XA5A50001");
        let id = identity(&value).unwrap();
        assert_eq!(
            (id.usercode, id.build_timestamp, id.profile.as_deref()),
            (Some(Hex32(0xa5a5_0001)), Some(Hex32(0x1014_0810)), Some("U280"))
        );
        // One JSON document (the emulator's state, pretty-printed) is kept whole.
        let state = "{\n  \"sha256\": \"de45\",\n  \"behaviour\": \"forward\"\n}\n";
        assert_eq!(readback_value(state)["behaviour"], "forward");
        assert_eq!(identity(&readback_value(state)).unwrap().sha256.as_deref(), Some("de45"));
        // Text that is no JSON is kept as text and names no image.
        assert_eq!(readback_value("card busy\n"), serde_json::Value::String("card busy".into()));
        assert!(identity(&readback_value("card busy")).is_none());
    }
}

//! The SSH testbed: real hosts (the OCT testbed, or the emulated one in network namespaces)
//! driven over one OpenSSH ControlMaster connection per host.
//!
//! Host keys are always checked strictly (against the inventory's known_hosts, or the user's).
//! Every host action is the inventory's template rendered with shell-quoted values, run with a
//! timeout, its output kept in `logs/<session>/<action>.log` of the results folder. The agent runs
//! detached (setsid, pidfile) and is controlled through its `ctl` named pipe; its events are read
//! from `events.jsonl` in the session folder on the receiver, and each run's Arrow stream is
//! streamed back over the SSH channel and checked against the receiver's sha256 of it.
//!
//! A lease file on each host (owner, plan hash, heartbeat) keeps a second orchestrator away; a
//! lease whose heartbeat is older than [`LEASE_STALE_S`] is taken over with a warning.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use arrow_array::RecordBatch;
use latency_proto::{AgentCommand, AgentEvent};
use openssh::{KnownHosts, Session, SessionBuilder};

use super::replay::ReplayReport;
use super::{Cancel, RunData, Testbed, TestbedError, reflect};
use crate::plan::inventory::{Action, Host, Inventory, Role, SshTarget};
use crate::plan::template::shell_quote;
use crate::schedule::{Run, Session as StudySession, Step};

/// Seconds after which a lease without heartbeat is considered abandoned.
pub const LEASE_STALE_S: u64 = 120;

/// One connected host.
struct Conn {
    role: Role,
    name: String,
    host: Host,
    session: RefCell<Session>,
    workdir: String,
}

/// The SSH testbed.
pub struct SshTestbed {
    rt: tokio::runtime::Runtime,
    inv: Inventory,
    hosts: Vec<Conn>,
    logs: PathBuf,
    owner: String,
    tsc_hz: Option<f64>,
    facts: serde_json::Value,
    /// Seconds to wait after a replay for the last copies to reach the agent.
    drain: Duration,
    /// What each session's `readback` step read from the card (JSON when it printed JSON).
    readback: serde_json::Map<String, serde_json::Value>,
}

fn failed(host: &str, action: &str, message: impl Into<String>) -> TestbedError {
    TestbedError::Failed { host: host.to_string(), action: action.to_string(), message: message.into() }
}

fn builder(host: &Host) -> (SessionBuilder, String) {
    let mut b = SessionBuilder::default();
    b.known_hosts_check(KnownHosts::Strict)
        .connect_timeout(Duration::from_secs(10))
        .server_alive_interval(Duration::from_secs(5));
    match &host.ssh {
        SshTarget::Alias { alias, config } => {
            if let Some(c) = config {
                b.config_file(c);
            }
            (b, alias.clone())
        }
        SshTarget::Direct { host, user, port, identity, known_hosts } => {
            b.user(user.clone()).port(*port);
            if let Some(k) = identity {
                b.keyfile(k);
            }
            if let Some(k) = known_hosts {
                b.user_known_hosts_file(k);
            }
            (b, host.clone())
        }
    }
}

/// This machine's name, as written in leases.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default().trim().to_string()
}

/// Whether a lease holder (`user@host pid N plan H`) is an orchestrator of this machine that no
/// longer runs (killed without releasing its lease).
fn holder_is_dead(holder: &str) -> bool {
    let mut words = holder.split_whitespace();
    let (Some(who), Some("pid"), Some(pid)) = (words.next(), words.next(), words.next()) else { return false };
    let same_host = who.rsplit_once('@').is_some_and(|(_, h)| h == hostname());
    same_host && pid.parse::<u32>().is_ok_and(|p| !Path::new(&format!("/proc/{p}")).exists())
}

/// Open and health-check the ControlMaster connection to `host`.
fn open_master(rt: &tokio::runtime::Runtime, host: &Host, name: &str) -> Result<Session, TestbedError> {
    let (b, dest) = builder(host);
    let session = rt
        .block_on(async { tokio::time::timeout(Duration::from_secs(30), b.connect_mux(&dest)).await })
        .map_err(|_| TestbedError::Timeout { host: name.to_string(), action: "connect".into(), seconds: 30.0 })?
        .map_err(|e| failed(name, "connect", e.to_string()))?;
    rt.block_on(session.check()).map_err(|e| failed(name, "connect", e.to_string()))?;
    Ok(session)
}

impl SshTestbed {
    /// Connect to every host of `inv`, health-check the connections and take the leases.
    /// `results` is the results folder (step logs go there); `plan_hash` identifies the study in
    /// the leases.
    pub fn connect(inv: &Inventory, results: &Path, plan_hash: &str) -> Result<SshTestbed, TestbedError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| failed("local", "connect", e.to_string()))?;
        let owner = format!(
            "{}@{} pid {} plan {}",
            std::env::var("USER").unwrap_or_else(|_| "?".into()),
            hostname(),
            std::process::id(),
            &plan_hash[..12.min(plan_hash.len())]
        );
        let mut hosts = Vec::new();
        for (role, host) in [(Role::Sender, &inv.sender.host), (Role::Receiver, &inv.receiver.host)] {
            let name = format!("{} ({})", role.name(), builder(host).1);
            let session = open_master(&rt, host, &name)?;
            hosts.push(Conn {
                role,
                name,
                host: host.clone(),
                session: RefCell::new(session),
                workdir: host.workdir.clone(),
            });
        }
        let mut tb = SshTestbed {
            rt,
            inv: inv.clone(),
            hosts,
            logs: results.join("logs"),
            owner,
            tsc_hz: None,
            facts: serde_json::Value::Null,
            drain: Duration::from_millis(100),
            readback: serde_json::Map::new(),
        };
        tb.take_leases()?;
        tb.kill_leftovers();
        tb.facts = tb.collect_facts();
        Ok(tb)
    }

    fn conn(&self, role: Role) -> &Conn {
        // Both roles are connected in `connect`.
        &self.hosts[usize::from(role == Role::Receiver)]
    }

    /// Run `cmd` through the remote shell of `role` with a timeout; returns stdout. A non-zero exit
    /// is an error carrying the last lines of stderr.
    /// A master connection that died (network blip, killed ssh process) is reopened once and the
    /// command retried.
    fn sh(&self, role: Role, action: &str, cmd: &str, timeout: Duration) -> Result<String, TestbedError> {
        let c = self.conn(role);
        let attempt = || {
            let session = c.session.borrow();
            self.rt.block_on(async { tokio::time::timeout(timeout, session.shell(cmd).output()).await }).map_err(|_| {
                TestbedError::Timeout { host: c.name.clone(), action: action.into(), seconds: timeout.as_secs_f64() }
            })
        };
        let out = match attempt()? {
            Ok(out) => out,
            Err(e) if self.rt.block_on(c.session.borrow().check()).is_err() => {
                eprintln!("warning: {}: connection lost during {action} ({e}); reconnecting", c.name);
                *c.session.borrow_mut() = open_master(&self.rt, &c.host, &c.name)?;
                attempt()?.map_err(|e| failed(&c.name, action, e.to_string()))?
            }
            Err(e) => return Err(failed(&c.name, action, e.to_string())),
        };
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            let err = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = err.lines().rev().take(3).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            Err(failed(&c.name, action, format!("exit {}: {}", out.status.code().unwrap_or(-1), tail.join(" | "))))
        }
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

    fn take_leases(&self) -> Result<(), TestbedError> {
        for c in &self.hosts {
            let lease = format!("{}/lease", c.workdir);
            // Atomic create (noclobber); an existing lease is taken over only when its heartbeat
            // (mtime) is stale.
            let cmd = format!(
                "mkdir -p {w} && if (set -C; printf '%s\\n' {o} > {l}) 2>/dev/null; then echo taken; \
                 else age=$(( $(date +%s) - $(stat -c %Y {l}) )); \
                 if [ $age -gt {stale} ]; then printf '%s\\n' {o} > {l}; echo \"stale $age $(cat {l})\"; \
                 else echo \"held $(cat {l})\"; fi; fi",
                w = shell_quote(&c.workdir),
                o = shell_quote(&self.owner),
                l = shell_quote(&lease),
                stale = LEASE_STALE_S
            );
            let out = self.sh(c.role, "lease", &cmd, Duration::from_secs(20))?;
            let out = out.trim();
            if let Some(holder) = out.strip_prefix("held ") {
                if !holder_is_dead(holder) {
                    return Err(failed(&c.name, "lease", format!("the testbed is in use by {holder}")));
                }
                eprintln!("warning: {}: taking over the lease of a dead orchestrator ({holder})", c.name);
                let cmd = format!("printf '%s\\n' {} > {}", shell_quote(&self.owner), shell_quote(&lease));
                self.sh(c.role, "lease", &cmd, Duration::from_secs(20))?;
            }
            if out.starts_with("stale") {
                eprintln!("warning: {}: took over a stale lease ({out})", c.name);
            }
        }
        Ok(())
    }

    /// Stop an agent or capture a previous orchestrator left running (by their pidfiles).
    fn kill_leftovers(&self) {
        for (role, pidfile) in [(Role::Receiver, "agent.pid"), (Role::Sender, "capture.pid")] {
            let p = shell_quote(&format!("{}/{pidfile}", self.conn(role).workdir));
            let cmd = format!("p={p}; [ -f \"$p\" ] && kill $(cat \"$p\") 2>/dev/null; rm -f \"$p\"; true");
            let _ = self.sh(role, "cleanup", &cmd, Duration::from_secs(20));
        }
    }

    fn heartbeat(&self) {
        for c in &self.hosts {
            let _ = self.sh(
                c.role,
                "lease",
                &format!("touch {}", shell_quote(&format!("{}/lease", c.workdir))),
                Duration::from_secs(10),
            );
        }
    }

    fn collect_facts(&self) -> serde_json::Value {
        let probe = "uname -r; grep -m1 'model name' /proc/cpuinfo | cut -d: -f2; \
                     grep -o -w -m2 'constant_tsc\\|nonstop_tsc' /proc/cpuinfo | sort -u | tr '\\n' ' '; echo; \
                     (pkg-config --modversion libdpdk 2>/dev/null || echo none); (lspci -nn 2>/dev/null | grep -i -E 'xilinx|mellanox' || true)";
        let mut facts = serde_json::Map::new();
        for c in &self.hosts {
            let text = self.sh(c.role, "facts", probe, Duration::from_secs(20)).unwrap_or_default();
            let lines: Vec<&str> = text.lines().map(str::trim).collect();
            facts.insert(
                c.role.name().into(),
                serde_json::json!({
                    "host": c.name,
                    "kernel": lines.first(),
                    "cpu": lines.get(1),
                    "tsc_flags": lines.get(2),
                    "dpdk": lines.get(3),
                    "pci": lines.get(4..).map(|l| l.join("; ")),
                }),
            );
        }
        serde_json::Value::Object(facts)
    }

    /// Upload `local` to `remote` on `role` unless a file with the same sha256 is already there.
    /// The bytes are written to `<remote>.part` and renamed into place only when the host's sha256
    /// of them is the one sent; a mismatch is retried once, then reported.
    pub fn upload(&self, role: Role, local: &Path, remote: &str) -> Result<(), TestbedError> {
        let c = self.conn(role);
        let want = crate::digest::sha256_file(local)
            .map_err(|e| failed("local", "upload", format!("{}: {e}", local.display())))?;
        let q = shell_quote(remote);
        let have =
            self.sh(role, "upload", &format!("sha256sum {q} 2>/dev/null | cut -d' ' -f1"), Duration::from_secs(60))?;
        if have.trim() == want {
            return Ok(());
        }
        let bytes = std::fs::read(local).map_err(|e| failed("local", "upload", format!("{}: {e}", local.display())))?;
        let cmd = format!(
            "mkdir -p \"$(dirname {q})\" && cat > {t} && s=$(sha256sum < {t} | cut -d' ' -f1) \
             && if [ \"$s\" = {w} ]; then mv {t} {q}; else rm -f {t}; fi && echo \"$s\"",
            t = shell_quote(&format!("{remote}.part")),
            w = shell_quote(&want),
        );
        let mut mismatch = String::new();
        for attempt in 1..=2 {
            let mut sent = bytes.clone();
            if super::failpoint::hit("corrupt-upload")
                && let Some(b) = sent.last_mut()
            {
                *b ^= 0x01;
            }
            let out = self.send(c, &cmd, &sent).map_err(|e| failed(&c.name, "upload", format!("{remote}: {e}")))?;
            if !out.status.success() {
                let err = String::from_utf8_lossy(&out.stderr);
                return Err(failed(&c.name, "upload", format!("{remote}: {}", err.trim())));
            }
            let got = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if got == want {
                return Ok(());
            }
            mismatch = format!("{remote}: checksum mismatch after upload (sent {want}, host has {got})");
            if attempt == 1 {
                eprintln!("warning: {}: {mismatch}; uploading again", c.name);
            }
        }
        Err(failed(&c.name, "upload", mismatch))
    }

    /// Run `cmd` on `c` with `bytes` as its standard input.
    fn send(&self, c: &Conn, cmd: &str, bytes: &[u8]) -> Result<std::process::Output, openssh::Error> {
        let session = c.session.borrow();
        self.rt.block_on(async {
            use tokio::io::AsyncWriteExt;
            let mut child = session
                .shell(cmd)
                .stdin(openssh::Stdio::piped())
                .stdout(openssh::Stdio::piped())
                .stderr(openssh::Stdio::piped())
                .spawn()
                .await?;
            if let Some(mut stdin) = child.stdin().take() {
                stdin.write_all(bytes).await.map_err(openssh::Error::ChildIo)?;
                stdin.shutdown().await.map_err(openssh::Error::ChildIo)?;
            }
            child.wait_with_output().await
        })
    }

    /// Read a remote file whole, verified against the host's sha256 of it.
    pub fn download(&self, role: Role, remote: &str) -> Result<Vec<u8>, TestbedError> {
        let c = self.conn(role);
        let q = shell_quote(remote);
        let sum = self.sh(role, "download", &format!("sha256sum {q} | cut -d' ' -f1"), Duration::from_secs(60))?;
        let session = c.session.borrow();
        let out = self
            .rt
            .block_on(async {
                tokio::time::timeout(Duration::from_secs(300), session.shell(format!("cat {q}")).output()).await
            })
            .map_err(|_| TestbedError::Timeout { host: c.name.clone(), action: "download".into(), seconds: 300.0 })?
            .map_err(|e| failed(&c.name, "download", e.to_string()))?;
        if crate::digest::sha256_hex(&out.stdout) != sum.trim() {
            return Err(failed(&c.name, "download", format!("{remote}: checksum mismatch")));
        }
        Ok(out.stdout)
    }

    /// Send one command to the session's agent and wait for the answering event.
    fn agent_command(
        &self,
        session: &str,
        command: AgentCommand,
        timeout: Duration,
    ) -> Result<AgentEvent, TestbedError> {
        let line = command.to_string();
        let want = match command {
            AgentCommand::Begin { .. } => "begin",
            AgentCommand::End { .. } => "end",
            AgentCommand::Quit => "stopped",
        };
        let dir = self.inv.session_dir(session);
        let ctl = shell_quote(&format!("{dir}/ctl"));
        let events = format!("{dir}/events.jsonl");
        let before =
            self.sh(Role::Receiver, "agent", &format!("wc -l < {}", shell_quote(&events)), Duration::from_secs(10))?;
        let skip: usize = before.trim().parse().unwrap_or(0);
        // A pipe with no reader (a dead agent) would block the writer for ever: bounded remotely.
        let write = format!("printf '%s\\n' {} > {ctl}", shell_quote(&line));
        self.sh(
            Role::Receiver,
            "agent",
            &format!("timeout 10 sh -c {}", shell_quote(&write)),
            Duration::from_secs(15),
        )?;
        self.wait_event(session, skip, want, timeout)
    }

    /// Whether the session's agent process is alive (by its pidfile).
    fn agent_alive(&self) -> bool {
        let pidfile = shell_quote(&format!("{}/agent.pid", self.inv.receiver.host.workdir));
        self.sh(
            Role::Receiver,
            "agent",
            &format!("kill -0 $(cat {pidfile} 2>/dev/null) 2>/dev/null"),
            Duration::from_secs(10),
        )
        .is_ok()
    }

    /// Restart an agent that died during the session: its start, register init and health gate
    /// again (the shell's registers are cleared whenever a DPDK application starts).
    fn restart_agent(&mut self, session: &StudySession, cancel: &Cancel) -> Result<(), TestbedError> {
        eprintln!(
            "warning: {}: the agent of {} is gone; restarting it",
            self.conn(Role::Receiver).name,
            session.name()
        );
        self.kill_leftovers();
        let steps: Vec<Step> = session
            .steps
            .iter()
            .filter(|s| matches!(s.action, Action::AgentStart | Action::RegisterInit | Action::HealthCheck))
            .cloned()
            .collect();
        for st in &steps {
            self.step(session, st, 1, cancel)?;
        }
        Ok(())
    }

    /// Wait for an event of kind `want` (`ready`, `begin`, `end`, `stopped`) after the first `skip`
    /// lines of the agent's events. A line that is no event of the agent protocol is an error.
    fn wait_event(
        &self,
        session: &str,
        skip: usize,
        want: &str,
        timeout: Duration,
    ) -> Result<AgentEvent, TestbedError> {
        let events = shell_quote(&format!("{}/events.jsonl", self.inv.session_dir(session)));
        let start = Instant::now();
        loop {
            let text = self.sh(
                Role::Receiver,
                "agent",
                &format!("tail -n +{} {events} 2>/dev/null || true", skip + 1),
                Duration::from_secs(10),
            )?;
            // Only complete lines: the agent may be writing the last one.
            let complete = text.rfind('\n').map_or("", |i| &text[..i]);
            for line in complete.lines().filter(|l| !l.trim().is_empty()) {
                let event: AgentEvent = serde_json::from_str(line).map_err(|e| {
                    failed(&self.conn(Role::Receiver).name, "agent", format!("not an agent event ({e}): {line}"))
                })?;
                let kind = match &event {
                    AgentEvent::Ready { .. } => "ready",
                    AgentEvent::Begin { .. } => "begin",
                    AgentEvent::End(_) => "end",
                    AgentEvent::Stopped => "stopped",
                    AgentEvent::Error { .. } | AgentEvent::Tsc(_) => "",
                };
                if kind == want {
                    return Ok(event);
                }
                if matches!(event, AgentEvent::Error { .. } | AgentEvent::Stopped) {
                    return Err(failed(&self.conn(Role::Receiver).name, "agent", format!("agent reported: {line}")));
                }
            }
            if start.elapsed() > timeout {
                return Err(TestbedError::Timeout {
                    host: self.conn(Role::Receiver).name.clone(),
                    action: format!("agent {want}"),
                    seconds: timeout.as_secs_f64(),
                });
            }
            if want != "ready" && start.elapsed() > Duration::from_secs(1) && !self.agent_alive() {
                return Err(failed(
                    &self.conn(Role::Receiver).name,
                    "agent",
                    format!("the agent exited before `{want}`"),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Decode an Arrow IPC stream (a crash-truncated stream keeps its complete batches).
pub fn decode_stream(bytes: &[u8]) -> Result<Vec<RecordBatch>, String> {
    let reader =
        arrow_ipc::reader::StreamReader::try_new(std::io::Cursor::new(bytes), None).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for b in reader {
        match b {
            Ok(b) => out.push(b),
            Err(e) if out.is_empty() => return Err(e.to_string()),
            Err(_) => break,
        }
    }
    Ok(out)
}

impl Testbed for SshTestbed {
    fn name(&self) -> String {
        self.inv.name.clone()
    }

    fn facts(&self) -> crate::results::provenance::Facts {
        crate::results::provenance::Facts::from([
            ("kind".into(), "ssh".into()),
            ("inventory".into(), self.inv.path.display().to_string().into()),
            ("hosts".into(), self.facts.clone()),
            ("tsc_hz".into(), self.tsc_hz.into()),
            ("readback".into(), serde_json::Value::Object(self.readback.clone())),
        ])
    }

    fn tsc_hz(&self) -> f64 {
        self.tsc_hz.unwrap_or(f64::NAN)
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
        let policy = self.inv.steps[&step.action];
        let name = session.name();
        self.log(&name, step.action.name(), &format!("# attempt {attempt}\n$ {cmd}"));
        if step.action == Action::AgentStart {
            self.sh(
                Role::Receiver,
                "agent_start",
                &format!("mkdir -p {}", shell_quote(&self.inv.session_dir(&name))),
                Duration::from_secs(10),
            )?;
        }
        let out = self.sh(step.action.role(), step.action.name(), cmd, Duration::from_secs_f64(policy.timeout_s));
        match &out {
            Ok(o) => self.log(&name, step.action.name(), o),
            Err(e) => self.log(&name, step.action.name(), &format!("error: {e}")),
        }
        let out = out?;
        if step.action == Action::Readback {
            let text = out.trim();
            let value = serde_json::from_str(text).unwrap_or_else(|_| serde_json::Value::String(text.to_string()));
            self.readback.insert(name.clone(), value);
        }
        if step.action == Action::AgentStart
            && let AgentEvent::Ready { tsc, .. } =
                self.wait_event(&name, 0, "ready", Duration::from_secs_f64(policy.timeout_s))?
        {
            self.tsc_hz = Some(tsc.hz);
        }
        self.heartbeat();
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
        if !self.agent_alive() {
            self.restart_agent(session, cancel)?;
        }
        let AgentEvent::Begin { file, .. } =
            self.agent_command(&name, AgentCommand::Begin { run: run.run }, Duration::from_secs(30))?
        else {
            unreachable!("wait_event returns the event asked for")
        };
        let file = file.display().to_string();
        let mut replay = None;
        for st in &run.steps {
            if cancel.is_cancelled() {
                let _ = self.agent_command(&name, AgentCommand::End { run: run.run }, Duration::from_secs(30));
                return Err(TestbedError::Interrupted);
            }
            let cmd = st.command.as_deref().unwrap_or("true");
            let policy = self.inv.steps[&st.action];
            self.log(&name, st.action.name(), &format!("# run {} attempt {attempt}\n$ {cmd}", run.run));
            match self.sh(st.action.role(), st.action.name(), cmd, Duration::from_secs_f64(policy.timeout_s)) {
                Ok(out) => {
                    self.log(&name, st.action.name(), &out);
                    if st.action == Action::Replay {
                        replay = ReplayReport::parse(&out);
                        // The last copies (and their reflections) are still on their way.
                        std::thread::sleep(self.drain);
                    }
                }
                Err(e) => {
                    // Stop a capture this run started (best effort), then the agent's run.
                    if let Some(stop) = run.steps.iter().find(|s| s.action == Action::CaptureStop)
                        && st.action == Action::Replay
                    {
                        let _ = self.sh(
                            Role::Sender,
                            stop.action.name(),
                            stop.command.as_deref().unwrap_or("true"),
                            Duration::from_secs(10),
                        );
                    }
                    let _ = self.agent_command(&name, AgentCommand::End { run: run.run }, Duration::from_secs(30));
                    return Err(e);
                }
            }
        }
        let end = self.agent_command(&name, AgentCommand::End { run: run.run }, Duration::from_secs(60))?;
        self.log(&name, "run", &serde_json::to_string(&end).unwrap_or_else(|e| format!("(unprintable: {e})")));
        let bytes = self.download(Role::Receiver, &file)?;
        // The run file stays on the receiver under a name marking it as collected.
        let _ = self.sh(
            Role::Receiver,
            "collect",
            &format!("mv {f} {f}.collected-{attempt}", f = shell_quote(&file)),
            Duration::from_secs(10),
        );
        let mut batches = decode_stream(&bytes)
            .map_err(|e| failed(&self.conn(Role::Receiver).name, "collect", format!("{file}: {e}")))?;
        if run.steps.iter().any(|s| s.action == Action::CaptureStop) {
            let capture = self.inv.capture_file(&name, run.run);
            let pcap = self.download(Role::Sender, &capture)?;
            let (joined, counts) = reflect::join(&batches, &pcap)
                .map_err(|e| failed(&self.conn(Role::Sender).name, "collect", format!("{capture}: {e}")))?;
            self.log(&name, "run", &format!("reflect: {counts:?}"));
            batches = joined;
        }
        Ok(RunData { batches, seconds: start.elapsed().as_secs_f64(), replay })
    }

    fn cleanup(&mut self) {
        // Stop any agent and capture left running, then release the leases.
        self.kill_leftovers();
        for c in &self.hosts {
            let lease = shell_quote(&format!("{}/lease", c.workdir));
            let _ = self.sh(
                c.role,
                "lease",
                &format!("grep -qF {} {lease} 2>/dev/null && rm -f {lease}; true", shell_quote(&self.owner)),
                Duration::from_secs(10),
            );
        }
    }
}

impl SshTestbed {
    /// Put on the hosts what the study needs, each file only if it is missing or differs
    /// (checksummed): the probe traces on the sender (generated ones are generated into
    /// `<results>/traces/` first), tables and present bitstream images on the receiver, and the
    /// agent binary when the inventory places it in the receiver's work folder.
    pub fn stage(&self, plan: &crate::plan::Plan, results: &Path) -> Result<(), TestbedError> {
        let local = |e: String| failed("local", "stage", e);
        let swork = &self.inv.sender.host.workdir;
        let rwork = &self.inv.receiver.host.workdir;
        for t in &plan.traces {
            let path = match &t.source {
                crate::plan::TraceSource::Pcap { path, .. } => path.clone(),
                crate::plan::TraceSource::Generate { template, count, probe_id } => {
                    let p = results.join("traces").join(t.file_name());
                    if !p.exists() {
                        crate::trace::generate(*template, *count, *probe_id, &p).map_err(|e| local(e.to_string()))?;
                    }
                    p
                }
            };
            self.upload(Role::Sender, &path, &format!("{swork}/traces/{}", t.file_name()))?;
        }
        for p in &plan.programs {
            if let Some(table) = &p.table {
                let name = table.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
                self.upload(Role::Receiver, table, &format!("{rwork}/tables/{}/{name}", p.name))?;
            }
            for b in [&p.bitstream, &p.null] {
                if b.present {
                    let name = b.file.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
                    self.upload(Role::Receiver, &b.file, &format!("{rwork}/bitstreams/{name}"))?;
                }
            }
        }
        let agent = &self.inv.receiver.agent;
        if agent.starts_with(&format!("{rwork}/")) {
            let exe = std::env::current_exe().map_err(|e| local(e.to_string()))?;
            let built = exe.with_file_name("latency-agent");
            if !built.is_file() {
                return Err(local(format!(
                    "{} not found: build the agent (cargo build --release -p latency-agent)",
                    built.display()
                )));
            }
            self.upload(Role::Receiver, &built, agent)?;
            self.sh(Role::Receiver, "stage", &format!("chmod +x {}", shell_quote(agent)), Duration::from_secs(10))?;
        }
        Ok(())
    }
}

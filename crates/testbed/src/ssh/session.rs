//! One OpenSSH ControlMaster connection per host, and running commands over it with a timeout.
//!
//! Host keys are always checked strictly (against the inventory's known_hosts, or the user's). A
//! master that died (network blip, killed ssh process) is reopened once and the command retried.

use crate::Doing;
use std::cell::RefCell;
use std::process::Output;
use std::time::Duration;

use openssh::{KnownHosts, Session, SessionBuilder};

use super::failed;
use crate::TestbedError;
use latency_plan::inventory::Host;
use latency_plan::inventory::Inventory;
use latency_plan::inventory::Role;
use latency_plan::inventory::SshTarget;

/// Seconds a connection may take to open.
const CONNECT_S: u64 = 30;

/// The testbed's hosts, in the order they are connected, leased and released.
pub const ROLES: [Role; 2] = [Role::Sender, Role::Receiver];

/// One connected host.
struct Conn {
    /// `role (destination)`, as errors and warnings name the host.
    name: String,
    host: Host,
    master: RefCell<Session>,
}

/// The connections to the sender and the receiver, and the runtime that drives them.
pub struct Hosts {
    rt: tokio::runtime::Runtime,
    /// Sender, receiver.
    conns: [Conn; 2],
}

/// Where the ControlMaster sockets live: one `.ssh-connection*/master` per open connection, under
/// the temporary folder (private to the user), so that nothing is written where the tool runs.
pub fn control_dir() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("latency-orchestrator-ssh-{}", users_id()))
}

/// The real user id, from `/proc/self` (no libc here): keeps users' socket folders apart.
fn users_id() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix("Uid:").and_then(|v| v.split_whitespace().next().map(String::from)))
        })
        .unwrap_or_else(|| "user".into())
}

fn builder(host: &Host) -> (SessionBuilder, String) {
    let mut b = SessionBuilder::default();
    let dir = control_dir();
    if std::fs::create_dir_all(&dir).is_ok() {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
        b.control_directory(&dir);
    }
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

/// Open and health-check the ControlMaster connection to `host`.
fn open_master(rt: &tokio::runtime::Runtime, host: &Host, name: &str) -> Result<Session, TestbedError> {
    let (b, dest) = builder(host);
    let session = rt
        .block_on(async { tokio::time::timeout(Duration::from_secs(CONNECT_S), b.connect_mux(&dest)).await })
        .map_err(|_| TestbedError::Timeout {
            host: name.to_string(),
            action: Doing::Connect,
            seconds: CONNECT_S as f64,
        })?
        .map_err(|e| failed(name, Doing::Connect, e.to_string()))?;
    rt.block_on(session.check()).map_err(|e| failed(name, Doing::Connect, e.to_string()))?;
    Ok(session)
}

/// What a failed command printed last: up to three lines of its standard error.
fn stderr_tail(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = err.lines().rev().take(3).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    tail.join(" | ")
}

impl Hosts {
    /// Connect to the sender and the receiver of `inv` and health-check both connections.
    pub fn connect(inv: &Inventory) -> Result<Hosts, TestbedError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| failed("local", Doing::Connect, e.to_string()))?;
        let open = |role: Role, host: &Host| -> Result<Conn, TestbedError> {
            let name = format!("{} ({})", role.name(), builder(host).1);
            let master = open_master(&rt, host, &name)?;
            Ok(Conn { name, host: host.clone(), master: RefCell::new(master) })
        };
        let sender = open(Role::Sender, &inv.sender.host)?;
        let receiver = open(Role::Receiver, &inv.receiver.host)?;
        Ok(Hosts { rt, conns: [sender, receiver] })
    }

    fn conn(&self, role: Role) -> &Conn {
        &self.conns[usize::from(role == Role::Receiver)]
    }

    /// How errors and warnings name `role`'s host: `role (destination)`.
    pub fn name(&self, role: Role) -> &str {
        &self.conn(role).name
    }

    /// Run `cmd` through the remote shell of `role` with a timeout; returns stdout. A non-zero exit
    /// is an error carrying the last lines of stderr.
    pub fn run(&self, role: Role, action: Doing, cmd: &str, timeout: Duration) -> Result<String, TestbedError> {
        let c = self.conn(role);
        let attempt = || {
            let master = c.master.borrow();
            self.rt
                .block_on(async { tokio::time::timeout(timeout, master.shell(cmd).output()).await })
                .map_err(|_| TestbedError::Timeout { host: c.name.clone(), action, seconds: timeout.as_secs_f64() })
        };
        let out = match attempt()? {
            Ok(out) => out,
            Err(e) if self.rt.block_on(c.master.borrow().check()).is_err() => {
                eprintln!("warning: {}: connection lost during {action} ({e}); reconnecting", c.name);
                *c.master.borrow_mut() = open_master(&self.rt, &c.host, &c.name)?;
                attempt()?.map_err(|e| failed(&c.name, action, e.to_string()))?
            }
            Err(e) => return Err(failed(&c.name, action, e.to_string())),
        };
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(failed(&c.name, action, format!("exit {}: {}", out.status.code().unwrap_or(-1), stderr_tail(&out))))
        }
    }

    /// The standard output of `cmd` on `role`, whatever its exit status (for reading files whose
    /// content is verified otherwise); no retry.
    pub fn read(&self, role: Role, action: Doing, cmd: &str, timeout: Duration) -> Result<Vec<u8>, TestbedError> {
        let c = self.conn(role);
        let master = c.master.borrow();
        let out = self
            .rt
            .block_on(async { tokio::time::timeout(timeout, master.shell(cmd).output()).await })
            .map_err(|_| TestbedError::Timeout { host: c.name.clone(), action, seconds: timeout.as_secs_f64() })?
            .map_err(|e| failed(&c.name, action, e.to_string()))?;
        Ok(out.stdout)
    }

    /// Run `cmd` on `role` with `input` as its standard input; no timeout, no retry.
    pub fn run_with_input(&self, role: Role, cmd: &str, input: &[u8]) -> Result<Output, openssh::Error> {
        let master = self.conn(role).master.borrow();
        self.rt.block_on(async {
            use tokio::io::AsyncWriteExt;
            let mut child = master
                .shell(cmd)
                .stdin(openssh::Stdio::piped())
                .stdout(openssh::Stdio::piped())
                .stderr(openssh::Stdio::piped())
                .spawn()
                .await?;
            if let Some(mut stdin) = child.stdin().take() {
                stdin.write_all(input).await.map_err(openssh::Error::ChildIo)?;
                stdin.shutdown().await.map_err(openssh::Error::ChildIo)?;
            }
            child.wait_with_output().await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_keeps_the_last_three_lines_of_stderr() {
        let out =
            std::process::Command::new("sh").args(["-c", "printf 'a\\nb\\nc\\nd\\n' >&2; exit 3"]).output().unwrap();
        assert_eq!(stderr_tail(&out), "b | c | d");
    }
}

//! The lease that keeps a second orchestrator away from a testbed: a file on each host naming its
//! holder (`user@host pid N plan H`), whose mtime is the holder's heartbeat. A lease whose
//! heartbeat is older than [`LEASE_STALE_S`] is taken over with a warning, and so is the lease of
//! an orchestrator of this machine that no longer runs.
//!
//! The protocol is the shell script `lease.sh`, run on the host with every value (lease file,
//! owner, staleness) passed as a quoted argument.

use crate::Doing;
use std::path::Path;
use std::time::Duration;

use super::failed;
use super::session::{Hosts, ROLES};
use crate::TestbedError;
use latency_plan::layout::RemoteLayout;
use latency_plan::template::shell_quote;

pub use latency_plan::layout::LEASE_STALE_S;

/// The lease protocol, run by `sh` on the host.
const SCRIPT: &str = include_str!("lease.sh");

/// One operation of the lease protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Create the lease unless it exists; take over one older than `stale_s` seconds.
    Take {
        /// Seconds without heartbeat after which a lease is abandoned.
        stale_s: u64,
    },
    /// Make the owner the holder, whoever held the lease.
    Overwrite,
    /// Renew the heartbeat.
    Heartbeat,
    /// Remove the lease if the owner holds it.
    Release,
}

/// The remote command performing `op` on the lease file `lease` for `owner`.
pub fn command(op: Op, lease: &str, owner: &str) -> String {
    let (name, stale) = match op {
        Op::Take { stale_s } => ("take", Some(stale_s.to_string())),
        Op::Overwrite => ("overwrite", None),
        Op::Heartbeat => ("heartbeat", None),
        Op::Release => ("release", None),
    };
    let mut words = vec!["sh".to_string(), "-c".into(), shell_quote(SCRIPT), "lease".into(), name.into()];
    words.extend([shell_quote(lease), shell_quote(owner)]);
    words.extend(stale.as_deref().map(shell_quote));
    words.join(" ")
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

/// This orchestrator's leases on the testbed's hosts.
pub struct Lease {
    owner: String,
}

impl Lease {
    /// The lease of this process running the study whose plan hash is `plan_hash`.
    pub fn for_plan(plan_hash: &str) -> Lease {
        let owner = format!(
            "{}@{} pid {} plan {}",
            std::env::var("USER").unwrap_or_else(|_| "?".into()),
            hostname(),
            std::process::id(),
            plan_hash.get(..12).unwrap_or(plan_hash)
        );
        Lease { owner }
    }

    /// Take the lease of every host, or fail naming the orchestrator that holds one.
    pub fn take(&self, hosts: &Hosts, layout: &RemoteLayout) -> Result<(), TestbedError> {
        for role in ROLES {
            let lease = layout.lease(role);
            let take = command(Op::Take { stale_s: LEASE_STALE_S }, &lease, &self.owner);
            let out = hosts.run(role, Doing::Lease, &take, Duration::from_secs(20))?;
            let out = out.trim();
            if let Some(holder) = out.strip_prefix("held ") {
                if !holder_is_dead(holder) {
                    return Err(failed(hosts.name(role), Doing::Lease, format!("the testbed is in use by {holder}")));
                }
                eprintln!("warning: {}: taking over the lease of a dead orchestrator ({holder})", hosts.name(role));
                let overwrite = command(Op::Overwrite, &lease, &self.owner);
                hosts.run(role, Doing::Lease, &overwrite, Duration::from_secs(20))?;
            }
            if out.starts_with("stale") {
                eprintln!("warning: {}: took over a stale lease ({out})", hosts.name(role));
            }
        }
        Ok(())
    }

    /// Renew the heartbeat of every lease (best effort).
    pub fn heartbeat(&self, hosts: &Hosts, layout: &RemoteLayout) {
        for role in ROLES {
            let cmd = command(Op::Heartbeat, &layout.lease(role), &self.owner);
            let _ = hosts.run(role, Doing::Lease, &cmd, Duration::from_secs(10));
        }
    }

    /// Release every lease this orchestrator holds (best effort).
    pub fn release(&self, hosts: &Hosts, layout: &RemoteLayout) {
        for role in ROLES {
            let cmd = command(Op::Release, &layout.lease(role), &self.owner);
            let _ = hosts.run(role, Doing::Lease, &cmd, Duration::from_secs(10));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Runs `cmd` as the remote login shell would, in `dir`; returns stdout.
    fn sh(dir: &Path, cmd: &str) -> String {
        let out = Command::new("sh").arg("-c").arg(cmd).current_dir(dir).output().unwrap();
        assert!(out.status.success(), "{cmd}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    #[test]
    fn hostile_values_reach_the_lease_verbatim() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a dir 'with' \"quotes\" $(touch pwned) `touch pwned2`");
        let lease = format!("{}/lease", dir.display());
        let a = "-e x' $(touch pwned3) \"q\" `id` ;|& * user@host pid 1 plan 0";
        let b = "other@elsewhere pid 2 plan 1";
        let take = |owner: &str| sh(tmp.path(), &command(Op::Take { stale_s: 120 }, &lease, owner));
        let holder = || std::fs::read_to_string(&lease).unwrap();

        assert_eq!(take(a), "taken\n");
        assert_eq!(holder(), format!("{a}\n"));
        assert_eq!(take(b), format!("held {a}\n"));
        // Only the holder releases.
        sh(tmp.path(), &command(Op::Release, &lease, b));
        assert_eq!(holder(), format!("{a}\n"));
        sh(tmp.path(), &command(Op::Release, &lease, a));
        assert!(!Path::new(&lease).exists());

        // A lease without heartbeat for longer than the staleness is taken over; a heartbeat
        // renews it.
        assert_eq!(take(b), "taken\n");
        let old = Command::new("touch").args(["-d", "@1000000000", &lease]).status().unwrap();
        assert!(old.success());
        let out = take(a);
        assert!(out.starts_with("stale ") && out.ends_with(&format!(" {a}\n")), "{out}");
        Command::new("touch").args(["-d", "@1000000000", &lease]).status().unwrap();
        sh(tmp.path(), &command(Op::Heartbeat, &lease, a));
        assert_eq!(take(b), format!("held {a}\n"));
        sh(tmp.path(), &command(Op::Overwrite, &lease, b));
        assert_eq!(holder(), format!("{b}\n"));

        let made: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(made.len(), 1, "nothing but the lease's folder: {made:?}");
    }

    #[test]
    fn only_a_dead_orchestrator_of_this_machine_loses_its_lease() {
        let me = hostname();
        assert!(holder_is_dead(&format!("u@{me} pid 4294967295 plan abc")));
        assert!(!holder_is_dead(&format!("u@{me} pid {} plan abc", std::process::id())));
        assert!(!holder_is_dead("u@another-machine-entirely pid 4294967295 plan abc"));
        assert!(!holder_is_dead("garbage"));
        let owner = Lease::for_plan("0123456789abcdef").owner;
        assert!(owner.ends_with(&format!("@{me} pid {} plan 0123456789ab", std::process::id())), "{owner}");
        assert!(Lease::for_plan("abc").owner.ends_with(" plan abc"));
    }
}

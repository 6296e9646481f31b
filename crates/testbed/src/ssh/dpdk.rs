//! Whether the local agent can load the receiver's DPDK poll-mode drivers: the DPDK release it
//! was built against, against the receiver's.

use std::path::Path;

use latency_proto::AgentEvent;

/// Why the local agent cannot load the receiver's poll-mode drivers.
#[derive(Debug, thiserror::Error)]
pub enum DpdkMismatch {
    /// The agent cannot be asked its version.
    #[error("{agent}: {source}")]
    Unknown {
        /// The agent binary.
        agent: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The agent's answer is not its version event.
    #[error("{agent} version: not the agent's version event: {output}")]
    NoVersion {
        /// The agent binary.
        agent: std::path::PathBuf,
        /// What it printed.
        output: String,
    },
    /// Built against another DPDK release.
    #[error(
        "the agent is built against DPDK {agent} but the receiver's drivers belong to DPDK {receiver} (inventory \
         `dpdk_version`): build the agent on the receiver against its DPDK (cargo build --release -p latency-agent \
         --features dpdk) and name that binary in the inventory's `agent`"
    )]
    Release {
        /// The agent's DPDK.
        agent: String,
        /// The receiver's.
        receiver: String,
    },
    /// Built without DPDK.
    #[error(
        "the agent is built without the DPDK backend but the receiver's drivers belong to DPDK {receiver}: build it \
         with --features dpdk against that DPDK and name it in the inventory's `agent`"
    )]
    NoDpdk {
        /// The receiver's DPDK.
        receiver: String,
    },
}

/// The DPDK version the local agent binary was built against (`latency-agent version`).
pub(super) fn agent_dpdk_version(agent: &Path) -> Result<Option<String>, DpdkMismatch> {
    let o = std::process::Command::new(agent)
        .arg("version")
        .output()
        .map_err(|source| DpdkMismatch::Unknown { agent: agent.to_path_buf(), source })?;
    let line = String::from_utf8_lossy(&o.stdout);
    match serde_json::from_str::<AgentEvent>(line.trim()) {
        Ok(AgentEvent::Version { dpdk, .. }) => Ok(dpdk),
        _ => Err(DpdkMismatch::NoVersion { agent: agent.to_path_buf(), output: line.trim().to_string() }),
    }
}

/// An agent can load the receiver's poll-mode drivers only when it links the same DPDK release
/// (`YY.MM`; the ABI changes between releases): refuse otherwise, with what to do.
pub fn check_dpdk_abi(built_against: Option<&str>, receiver: &str) -> Result<(), DpdkMismatch> {
    let release = |v: &str| v.split('.').take(2).collect::<Vec<_>>().join(".");
    match built_against {
        Some(b) if release(b) == release(receiver) => Ok(()),
        Some(b) => Err(DpdkMismatch::Release { agent: b.to_string(), receiver: receiver.to_string() }),
        None => Err(DpdkMismatch::NoDpdk { receiver: receiver.to_string() }),
    }
}

#[cfg(test)]
mod tests {
    use super::check_dpdk_abi;

    #[test]
    fn an_agent_is_refused_unless_it_links_the_receivers_dpdk_release() {
        assert!(check_dpdk_abi(Some("22.11.11"), "22.11").is_ok());
        assert!(check_dpdk_abi(Some("20.11.9"), "20.11.1").is_ok());
        let e = check_dpdk_abi(Some("22.11.11"), "20.11").unwrap_err().to_string();
        assert!(
            e.starts_with("the agent is built against DPDK 22.11.11 but the receiver's drivers belong to DPDK 20.11"),
            "{e}"
        );
        assert!(check_dpdk_abi(None, "20.11").unwrap_err().to_string().contains("built without the DPDK backend"));
    }
}

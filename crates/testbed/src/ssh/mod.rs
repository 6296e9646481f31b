//! The SSH testbed: real hosts (the OCT testbed, or the emulated one in network namespaces)
//! driven over one OpenSSH ControlMaster connection per host (`session`).
//!
//! Every host action is the inventory's template rendered with shell-quoted values, run with a
//! timeout, its output kept in `logs/<session>/<action>.log` of the results folder. A lease on
//! each host keeps a second orchestrator away (`lease`); what a study needs is uploaded verified
//! (`transfer`); the agent is driven through its control pipe and events (`agent`), and each
//! run's Arrow stream is streamed back and checked against the receiver's sha256 of it. Host
//! facts go to the provenance (`facts`). Every remote path comes from the [`RemoteLayout`](latency_plan::layout::RemoteLayout).

mod agent;
mod dpdk;
mod facts;
mod lease;
mod session;
mod testbed;
mod transfer;

use crate::{Doing, TestbedError};

pub use agent::decode_stream;
pub use dpdk::{DpdkMismatch, check_dpdk_abi};
pub use lease::LEASE_STALE_S;
pub use session::control_dir;
pub use testbed::SshTestbed;

fn failed(host: &str, action: Doing, message: impl Into<String>) -> TestbedError {
    TestbedError::Failed { host: host.to_string(), action, message: message.into() }
}

//! The receiver agent: captures probe copies on the pipeline and bypass ports, stamps each with
//! the TSC right after it is dequeued, and writes per-run Arrow record streams. The formats it
//! shares with other processes (record schema, probe wire formats, control commands and events,
//! EAL configuration) are defined in `latency-proto`.
//!
//! The capture backends, the register tool and the TSC clock run on x86_64 Linux only
//! ([`sys`] and what builds on it); the rest of the library builds anywhere.

pub mod capture;
#[cfg(unix)]
pub mod control;
pub mod eal;
pub mod fastpath;
pub mod recorder;
pub mod regs;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub mod rtt;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[allow(unsafe_code)]
pub mod sys;
pub mod tsc;

// The shared formats under the paths their users imported them from before they moved to
// `latency-proto`.
pub use latency_proto::schema::{Port, RecordBuilder, record_schema};
pub use latency_proto::{probe, schema};

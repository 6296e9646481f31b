//! The receiver agent: captures probe copies on the pipeline and bypass ports, stamps each with
//! the TSC right after it is dequeued, and writes per-run Arrow record streams. The formats it
//! shares with other processes (record schema, probe wire formats, control commands and events,
//! EAL configuration) are defined in `latency-proto`.
//!
//! The system layer underneath (packet sockets, DPDK, the PCI BAR and its register map, TSC
//! reads, CPU pinning, the control FIFO) is the `latency-sys` crate, which holds all the agent's
//! `unsafe` code; this crate has none. The capture backends, the register tool and the TSC clock
//! run on x86_64 Linux only (what builds on `latency-sys`); the rest of the library builds
//! anywhere.

pub mod capture;
pub mod eal;
pub mod fastpath;
pub mod recorder;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub mod rtt;
pub mod tsc;

// The shared formats under the paths their users imported them from before they moved to
// `latency-proto`.
pub use latency_proto::schema::{Port, RecordBuilder, record_schema};
pub use latency_proto::{probe, schema};

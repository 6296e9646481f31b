//! The latency-study orchestrator: plan → schedule → engine → testbed → results → analysis → report.
//!
//! The binary `orchestrate` is a thin layer over this library.

pub mod analysis;
pub mod compare;
pub mod defaults;
pub mod digest;
pub mod engine;
pub mod exit;
pub mod export;
pub mod history;
pub mod import;
pub use latency_proto::pcap;
pub mod plan;
pub mod probes;
pub mod report;
pub mod results;
pub mod schedule;
pub mod testbed;
pub mod trace;

#[cfg(test)]
mod robustness;

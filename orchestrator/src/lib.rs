//! The latency-study orchestrator: plan → schedule → engine → testbed → results → analysis → report.
//!
//! The binary `orchestrate` is a thin layer over this library.

pub mod digest;
pub mod pcap;
pub mod plan;
pub mod schedule;
pub mod probes;
pub mod testbed;
pub mod results;
pub mod analysis;
pub mod engine;

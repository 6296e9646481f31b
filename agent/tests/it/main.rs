//! The agent's integration tests, one binary: capture on real packets over veth pairs
//! (`capture`), the DPDK backend on virtual devices (`dpdk`, with the `dpdk` feature), and their
//! shared helpers (`common`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod capture;
mod common;
#[cfg(feature = "dpdk")]
mod dpdk;
mod ring;
mod rtt;

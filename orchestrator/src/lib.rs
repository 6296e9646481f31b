//! The `orchestrate` command's library: the engine that walks a study's schedule on a testbed
//! into a results folder, the LatencyLab import, the exports (LatencyLab's CSV layout, an RO-Crate
//! zip) and the exit statuses. The layers it
//! drives are crates of their own, each depending only on those below it (ARCHITECTURE.md):
//! `latency-plan` → `latency-results` → `latency-schedule` → `latency-analysis` →
//! `latency-testbed` → `latency-history` → `latency-report` → this crate.
//!
//! May touch: everything, through the crates below; side effects on hosts only through a
//! [`latency_testbed::Testbed`]. Must not: be depended on by any other crate of the workspace.

pub mod crate_zip;
pub mod engine;
pub mod exit;
pub mod export;
pub mod import;
pub mod tool;

#[cfg(test)]
mod robustness;

//! The analysis: a results folder's run data in, `summary.json` out. Pure statistics over typed
//! data; [`compare`] judges one summary against another.
//!
//! May touch: a results folder (read; `summary.json` written by [`analyze`]). Must not: reach a
//! host, run a study, know the engine or a testbed.
//!
//! 1. pair the two copies of each probe within each run (`D_r(i) = t_P − t_B`, ns from the TSC
//!    rate in provenance); 2. per session, per-probe estimate = median over runs; 3. null
//!    calibration: δ̂ = median of the null group's per-probe estimates for the same trace (pooled;
//!    per session reported), `L̂(i) = estimate − δ̂`; 4. the first probe after each idle gap (the
//!    first arrival of every run) is excluded, counted and reported; 5. quantiles over all probes
//!    and sessions, raw and calibrated session medians; 6. reset modes: session medians split into
//!    clusters separated by at least `modes.min_separation_ns`, quantiles per mode — a program's
//!    headline quantiles are those of its most populated mode, never a mix of modes; 7. vendor
//!    bound margins; 8. hardware-clock check on reflect data; 9. bootstrap CIs.

mod analyze;
mod chacha;
mod column;
pub mod compare;
pub mod components;
pub mod design;
mod error;
pub mod estimates;
mod hwcheck;
mod levels;
pub mod load;
pub mod modes;
mod network;
pub mod noise;
mod program;
mod runs;
pub mod soak;
mod soak_headline;
pub mod stats;
pub mod student;
mod study;
mod summarize;
#[cfg(test)]
mod tests;
pub mod uncertainty;

pub use analyze::*;
pub use error::AnalysisError;
pub use runs::{RunPairs, pair_batches, pair_ports_of};
pub use summarize::{Unusable, summarize};

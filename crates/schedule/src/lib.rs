//! The schedule: a validated plan expanded into the ordered sessions, steps and runs that the
//! engine walks and that `orchestrate plan` shows, with its predicted duration ([`describe`]), its
//! assignment to testbed slices ([`slices`]) and the study's groups of runs ([`groups`]).
//!
//! May touch: nothing (pure, but for reading a pcap trace's records, their number and time
//! stamps, through latency-proto's pcap reader). Must not: reach a host, write a results folder,
//! analyse data.

mod costs;
mod dry_run;
mod expand;
mod groups;
mod model;
pub mod slices;
#[cfg(test)]
mod tests;

pub use costs::Costs;
pub use dry_run::{describe, hms};
pub use expand::expand;
pub use groups::groups;
pub use model::*;

//! The plan language: a study's YAML plan, the bitstream manifests and the testbed inventory it
//! names, decoded into validated values, and the probe traces it replays. Nothing here touches a
//! host.
//!
//! May touch: the plan's own files (YAML, manifests, inventories, pcap traces), read and written
//! through [`yaml`] and [`trace`]. Must not: reach a host, know the results folder, the engine or
//! the analysis; every layer above reads plans, none is read from here.
//!
//! Decoding is done in one pass that reports every problem at once (see [`decoder`]); a plan is only
//! returned when all of its files are valid. The same decoders describe the files as JSON Schemas
//! ([`schema`]). Each section has its decoder: [`protocol`], `traces`
//! (which reads every pcap trace through), `programs` and `analysis` (analysis, report,
//! regression). The validated types are in `model`, re-exported here.

mod analysis;
pub use analysis::PortPair;
pub mod bitstream;
mod cross_checks;
pub mod decoder;
pub mod defaults;
pub mod digest;
pub mod factors;
pub mod inventory;
pub mod layout;
mod model;
pub mod probes;
mod programs;
pub mod protocol;
pub mod schema;
pub mod steps;
pub mod template;
mod testbed_checks;
pub mod trace;
mod traces;
pub mod yaml;

pub use bitstream::Bitstream;
pub use factors::{FactorName, FactorValue, Factors, Level, sized_trace_name};
pub use inventory::{Action, Inventory};
pub use model::*;
pub use protocol::{Adaptive, FlashPolicy, Protocol, RunChecks, Sender, Soak, Timing};
pub use steps::{StepPolicy, decode_steps, default_policy};
pub use testbed_checks::refused_on;

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
//! ([`schema`]). Each section has its module with its types and its decoder: [`protocol`],
//! [`factors`], `traces` (which reads every pcap trace through), `programs` and `analysis`
//! (analysis, report, regression); their types are re-exported here.
//!
//! The modules are layered: each uses only modules listed before it.
//! - [`yaml`] (positioned YAML and diagnostics, then the [`decoder`] over them), [`digest`],
//!   [`defaults`], [`template`], [`board`] (boards, shells, flash methods) and `actions` (the host
//!   actions: [`Action`], whose built-in templates depend on the flash method), which use nothing
//!   else of the crate but each other in that order;
//! - `trace_spec` (what a probe trace is: [`Trace`], [`TraceSource`], [`Generated`]…), [`probes`],
//!   [`trace`] (pcap generation and inspection);
//! - [`bitstream`], [`steps`], [`protocol`], [`layout`], [`inventory`];
//! - the plan's other sections: `analysis`, `programs`, `traces`, [`factors`];
//! - `cross_checks` (the sections against each other), `model` (the [`Plan`] and the decoding of a
//!   plan file), `testbed_checks` (a plan against its testbed), `load` ([`load`], [`load_any`]),
//!   [`schema`].

// Positioned YAML and the leaves.
mod actions;
pub mod board;
pub mod defaults;
pub mod digest;
pub mod template;
pub mod yaml;

// Probe traces.
pub mod probes;
pub mod trace;
mod trace_spec;

// The testbed: images, step policies, the protocol that drives them, remote files, inventories.
pub mod bitstream;
pub mod builds;
pub mod inventory;
pub mod layout;
pub mod protocol;
pub mod steps;
pub mod subset;

// The plan's other sections.
mod analysis;
pub mod factors;
mod programs;
mod traces;

// The whole plan: checked, loaded, described.
mod cross_checks;
mod load;
mod model;
pub mod schema;
mod testbed_checks;

pub use actions::Action;
pub use analysis::{
    Analysis, Calibration, Confirm, Estimator, ModeSettings, PortPair, Regression, ReportFormat, ReportSpec, TrendGates,
};
pub use bitstream::Bitstream;
pub use board::{Board, FlashMethod, Shell};
pub use cross_checks::MAX_RUNS;
pub use factors::{FactorName, FactorValue, Factors, Level, sized_trace_name};
pub use inventory::Inventory;
pub use load::{Document, Invalid, load, load_any};
pub use model::{Plan, TestbedRef};
pub use programs::Program;
pub use protocol::{Adaptive, FlashPolicy, Protocol, RunChecks, Sender, Soak, Timing};
pub use steps::{StepPolicy, decode_steps, default_policy};
pub use testbed_checks::refused_on;
pub use trace_spec::{Generated, IpVersion, ProbeFormat, Trace, TraceSource, TraceTemplate, Transport, stand_in_note};
pub use yaml::{decoder, load_file};

//! The orchestrator's integration tests, one binary: the CLI's diagnostics and dry runs (`cli`),
//! studies on the simulator (`run`), import, analysis, reports and comparison (`import`,
//! `analysis`, `report`), studies with factors (`levels`) and adaptive sessions (`adaptive`), the JSON Schemas of the YAML files (`schemas`), probe traces and their stand-ins (`trace`, `stand_in`), completions and
//! manual pages (`shell`) and, with the `failpoints` feature, the study
//! end to end on the emulated testbed (`e2e`); `common` holds their shared helpers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod adaptive;
mod analysis;
mod bisect;
mod cli;
mod common;
mod design;
#[cfg(feature = "failpoints")]
mod e2e;
mod export;
mod history;
mod hops;
mod hostile;
mod import;
mod incremental;
mod levels;
mod replay;
mod report;
mod rocrate;
mod rtt;
mod run;
mod schemas;
mod shell;
mod slices;
mod soak;
mod stand_in;
mod trace;
mod trend;
// The statistical checks' simulation, shared with `make validate-stats` and `validate-nightly`.
#[allow(dead_code)]
#[path = "../../examples/twin/mod.rs"]
mod twin;
mod uncalibrated;

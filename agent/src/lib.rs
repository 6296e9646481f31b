//! The receiver agent: captures probe copies on the pipeline and bypass ports, stamps each with
//! the TSC right after it is dequeued, and writes per-run Arrow record streams. Its library holds
//! the one definition of the probe wire formats and of the record schema that every writer and
//! reader of run data (agent, simulator, importer, analysis) shares.

pub mod capture;
pub mod control;
pub mod eal;
pub mod probe;
pub mod recorder;
pub mod regs;
pub mod schema;
#[allow(unsafe_code)]
pub mod sys;
pub mod tsc;

pub use schema::{Port, RecordBuilder, record_schema};

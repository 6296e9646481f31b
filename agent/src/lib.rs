//! The receiver agent's library: the one definition of the probe record schema that every writer
//! and reader of run data (agent, simulator, importer, analysis) shares.

pub mod schema;

pub use schema::{Port, RecordBuilder, record_schema};

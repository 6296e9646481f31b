//! The results history of nightly runs: finished studies in a store of hive-partitioned Parquet
//! tables ([`store`]; the rows are the results format's `history` tables), change detection
//! across a series of studies ([`jumpavg`]) and the changes of a series ([`trend`]).
//!
//! May touch: a history store (a folder or an S3 bucket) and the results folders it reads. Must
//! not: reach a testbed host, run a study, render reports.

pub mod jumpavg;
pub mod store;
pub mod trend;

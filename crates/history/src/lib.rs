//! The results history of nightly runs: finished studies in a store of hive-partitioned Parquet
//! tables ([`store`]; the rows are the results format's `history` tables), what a study must be
//! for the history to take it ([`admit`], its summary's self-consistency in [`checks`]), who a
//! study is ([`identity`]: its key in the store, the series it belongs to), change detection
//! across a series of studies ([`jumpavg`]) and the changes of each series ([`trend`]).
//!
//! May touch: a history store (a folder or an S3 bucket) and the results folders it reads. Must
//! not: reach a testbed host, run a study, render reports.

pub mod admit;
pub mod checks;
pub mod error;
pub mod identity;
pub mod jumpavg;
pub mod store;
pub mod trend;

pub use error::{Refusal, StoreError};
pub use identity::{StudyIdentity, StudyKey};

//! The results history of nightly runs: finished studies in a store of hive-partitioned Parquet
//! tables ([`store`], [`row`]), change detection across a series of studies ([`jumpavg`]) and
//! the changes of a series ([`trend`]).

pub mod jumpavg;
pub mod row;
pub mod store;
pub mod table;
pub mod trend;

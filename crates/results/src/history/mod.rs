//! The results history's rows: one row per program of a study and its per-probe estimates,
//! stored as hive-partitioned Parquet tables ([`table`], [`row`]).

pub mod row;
pub mod table;

//! The statistical pipeline over collected runs.

pub mod pairs;

//! The results history of nightly runs: change detection across a series of studies
//! ([`jumpavg`]) and the changes of a series ([`trend`]).

pub mod jumpavg;
pub mod trend;

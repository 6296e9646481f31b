//! The results history of nightly runs: change detection across a series of studies
//! ([`jumpavg`]).

pub mod jumpavg;

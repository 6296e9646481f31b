//! Probe numbering and the destinations of generated traces, shared by the trace generator, the
//! simulated testbed and run validation.

use crate::trace_spec::TraceTemplate;

/// Probe ids of a trace of `count` probes: 1..=count (as in LatencyLab traces).
pub fn ids(count: u64) -> std::ops::RangeInclusive<u64> {
    1..=count
}

/// Whether probe `id` of a trace generated with `template` is addressed to a destination that the
/// matching program forwards. Forward traces send three probes in ten (ids ending in 3, 6, 9) to
/// destinations missing from the Forward table, as in the LatencyLab traces where about 30 % of the
/// probes are dropped; the other templates' probes are all forwarded.
pub fn forwarded(template: TraceTemplate, id: u64) -> bool {
    match template {
        TraceTemplate::Forward => !matches!(id % 10, 3 | 6 | 9),
        TraceTemplate::FiveTuple
        | TraceTemplate::RemoveHeader
        | TraceTemplate::Checksum
        | TraceTemplate::Int
        | TraceTemplate::IntGre => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forward_traces_drop_thirty_percent() {
        let kept = ids(20_000).filter(|&i| forwarded(TraceTemplate::Forward, i)).count();
        assert_eq!(kept, 14_000);
        assert!(ids(100).all(|i| forwarded(TraceTemplate::Checksum, i)));
    }
}

//! The TSC as a clock: its rate measured against `CLOCK_MONOTONIC_RAW` (the rate DPDK reports is
//! rounded — 0.19 % off on the test machines) and the invariant-TSC check. Measuring needs x86_64
//! Linux; reading the flags does not.

pub use latency_proto::control::TscInfo;

/// Measure the TSC rate over `window_ns` of `CLOCK_MONOTONIC_RAW`
/// ([`latency_sys::measure_tsc_hz`]).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub use latency_sys::measure_tsc_hz as measure_hz;

/// Whether `/proc/cpuinfo` lists `constant_tsc` and `nonstop_tsc`, and which of them it lists.
pub fn invariant_flags(cpuinfo: &str) -> (bool, Vec<String>) {
    let flags = cpuinfo.lines().find(|l| l.starts_with("flags")).unwrap_or("");
    let found: Vec<String> = ["constant_tsc", "nonstop_tsc"]
        .iter()
        .filter(|f| flags.split_whitespace().any(|w| w == **f))
        .map(|f| f.to_string())
        .collect();
    (found.len() == 2, found)
}

/// Measure the rate and read the flags of this machine.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub fn probe(window_ns: u64) -> TscInfo {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let (invariant, flags) = invariant_flags(&cpuinfo);
    TscInfo { hz: measure_hz(window_ns), window_ns, invariant, flags }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_read_from_cpuinfo() {
        let (ok, f) = invariant_flags("processor: 0\nflags\t\t: fpu tsc constant_tsc rep_good nonstop_tsc\n");
        assert!(ok);
        assert_eq!(f, ["constant_tsc", "nonstop_tsc"]);
        assert!(!invariant_flags("flags : fpu tsc constant_tsc\n").0);
    }

    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    #[test]
    fn measured_rate_converts_tsc_to_wall_time_within_a_tenth_of_a_percent() {
        let hz = measure_hz(200_000_000);
        assert!(hz > 1e8 && hz < 1e10, "{hz}");
        // An independent interval: convert its TSC length with the measured rate.
        use latency_sys::{monotonic_raw_ns, rdtsc_fenced};
        let (t0, c0) = (rdtsc_fenced(), monotonic_raw_ns());
        std::thread::sleep(std::time::Duration::from_millis(300));
        let (t1, c1) = (rdtsc_fenced(), monotonic_raw_ns());
        let tsc_ns = (t1 - t0) as f64 * 1e9 / hz;
        let err = (tsc_ns - (c1 - c0) as f64).abs() / (c1 - c0) as f64;
        assert!(err < 1e-3, "relative error {err}");
    }
}

//! Default values a plan may override, named once: the analysis settings, the regression
//! thresholds and the report title.

/// Quantile levels reported (percent): the paper's Table I columns.
pub const QUANTILE_LEVELS: [f64; 6] = [5.0, 25.0, 50.0, 75.0, 95.0, 99.0];
/// Largest accepted difference between measured and synthesised hardware-clock quantiles over
/// p25–p95, ns: the agreement the paper reports for its own data ("within 8 ns").
pub const HW_CLOCK_TOLERANCE_NS: f64 = 8.0;
/// Bootstrap resamples of each confidence interval.
pub const BOOTSTRAP_RESAMPLES: u32 = 1000;
/// Smallest gap between session medians that separates two reset modes, ns (a floor: the gap must
/// also be [`MODE_MIN_GAP_SIGMAS`] within-mode standard deviations).
pub const MODE_MIN_SEPARATION_NS: f64 = 3.0;
/// A gap between session medians separates two reset modes when it is at least this many
/// within-mode standard deviations.
pub const MODE_MIN_GAP_SIGMAS: f64 = 8.0;
/// Largest accepted shift of a program's median in a regression check, ns.
pub const MEDIAN_SHIFT_NS: f64 = 3.0;
/// Largest accepted shift of a program's p99 in a regression check, ns.
pub const P99_SHIFT_NS: f64 = 10.0;
/// Largest accepted Kolmogorov–Smirnov distance in a regression check.
pub const KS_DISTANCE: f64 = 0.1;

/// The report title of a study whose plan gives none.
pub fn report_title(study: &str) -> String {
    format!("Latency study {study}")
}

//! Regression check between two analysed studies (nightly jobs), both ended (a study interrupted
//! or still running is refused, never judged): per program, the median shift
//! with a confidence interval, quantile shifts, distribution distances (Kolmogorov–Smirnov and
//! Wasserstein-1 on the per-probe estimates' histograms) and mode changes, judged against
//! thresholds; rendered as Markdown and JUnit XML. A study with factors is judged level by level
//! (`forward at pacing_pps=500/frame_size=128`).

use serde::Serialize;

use crate::stats::histogram_distances;
use latency_plan::Calibration;
use latency_plan::defaults;
use latency_results::provenance::Provenance;
use latency_results::summary::Histogram;
use latency_results::summary::ProgramSummary;
use latency_results::summary::Summary;
use latency_results::summary::level_key;

/// Regression thresholds.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Thresholds {
    /// Largest accepted |median shift|, ns (a shift also needs its 95 % CI to exclude zero).
    pub median_shift_ns: f64,
    /// Largest accepted |p99 shift|, ns.
    pub p99_shift_ns: f64,
    /// Largest accepted Kolmogorov–Smirnov distance.
    pub ks_distance: f64,
    /// Judge the noise-corrected quantiles (else those before the correction, `latency_raw_ns`:
    /// the plan's `regression.noise_corrected`).
    pub noise_corrected: bool,
}

impl Thresholds {
    /// Command-line values (median, p99, KS) first, then the candidate plan's, then the defaults.
    pub fn resolve(flags: [Option<f64>; 3], plan: Option<&latency_plan::Regression>) -> Thresholds {
        Thresholds {
            median_shift_ns: flags[0].or(plan.map(|r| r.median_shift_ns)).unwrap_or(defaults::MEDIAN_SHIFT_NS),
            p99_shift_ns: flags[1].or(plan.map(|r| r.p99_shift_ns)).unwrap_or(defaults::P99_SHIFT_NS),
            ks_distance: flags[2].or(plan.map(|r| r.ks_distance)).unwrap_or(defaults::KS_DISTANCE),
            noise_corrected: plan.is_none_or(|r| r.noise_corrected),
        }
    }
}

/// Which of the two studies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The study compared against.
    Baseline,
    /// The study judged.
    Candidate,
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Role::Baseline => "baseline",
            Role::Candidate => "candidate",
        })
    }
}

/// A study that has not ended (interrupted, or still running) holds only some of its runs:
/// comparing it would judge what is missing as a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the {role} study has not ended (interrupted or still running)")]
pub struct NotEnded {
    /// Which study.
    pub role: Role,
}

/// Whether a study's provenance records its end (a summary computed from runs alone, without
/// provenance, is taken as it is).
pub fn ended(role: Role, provenance: Option<&Provenance>) -> Result<(), NotEnded> {
    match provenance {
        Some(p) if p.ended.is_none() => Err(NotEnded { role }),
        _ => Ok(()),
    }
}

/// Comparison of one program.
#[derive(Clone, Debug, Serialize)]
pub struct ProgramComparison {
    /// Program.
    pub program: String,
    /// Candidate − baseline median, ns.
    pub median_shift_ns: f64,
    /// 95 % CI of the median shift (from the two bootstrap intervals).
    pub median_shift_ci95_ns: [f64; 2],
    /// 95 % interval of the p99 shift, from the two studies' p99 intervals (none for a program
    /// with several reset modes, whose p99 interval is its headline mode's alone).
    pub p99_shift_ci95_ns: Option<[f64; 2]>,
    /// Candidate − baseline at every reported quantile.
    pub quantile_shifts_ns: Vec<(String, f64)>,
    /// Kolmogorov–Smirnov distance of the per-probe estimates' distributions, each about its
    /// median (none for a program with several reset modes: judged mode by mode).
    pub ks_distance: Option<f64>,
    /// Wasserstein-1 distance of the per-probe estimates' distributions, ns (as measured, the
    /// median's move included; none with several reset modes).
    pub wasserstein_ns: Option<f64>,
    /// Modes in baseline and candidate.
    pub modes: (usize, usize),
    /// Reasons this program regressed (empty = passed).
    pub failures: Vec<String>,
}

/// Comparison of two studies.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// Baseline study.
    pub baseline: String,
    /// Candidate study.
    pub candidate: String,
    /// Thresholds used.
    pub thresholds: Thresholds,
    /// Programs present in both.
    pub programs: Vec<ProgramComparison>,
    /// Programs in only one of the two.
    pub unmatched: Vec<String>,
}

impl Comparison {
    /// Whether any program regressed (or disappeared).
    pub fn regressed(&self) -> bool {
        self.programs.iter().any(|p| !p.failures.is_empty()) || !self.unmatched.is_empty()
    }
}

/// One reset mode's figures (a program's own when it has one mode): quantiles and the 95 %
/// interval of its median.
struct Side<'a> {
    latency_ns: &'a latency_results::summary::Quantiles,
    median_ci95_ns: [f64; 2],
    /// The bring-ups it is of.
    sessions: usize,
}

impl Side<'_> {
    fn median(&self) -> f64 {
        self.latency_ns.at(50.0).unwrap_or(f64::NAN)
    }
}

/// The reset modes of `p` (its headline alone when it has fewer than two), the headline's first;
/// their quantiles noise-corrected or not (`corrected`).
fn sides(p: &ProgramSummary, corrected: bool) -> Vec<Side<'_>> {
    let pick = |c, raw| if corrected { c } else { raw };
    if p.modes.len() < 2 {
        return vec![Side {
            latency_ns: pick(&p.latency_ns, &p.latency_raw_ns),
            median_ci95_ns: p.median_ci95_ns,
            sessions: p.sessions.len(),
        }];
    }
    let mut out: Vec<Side<'_>> = p
        .modes
        .iter()
        .map(|m| Side {
            latency_ns: pick(&m.latency_ns, &m.latency_raw_ns),
            median_ci95_ns: m.median_ci95_ns.unwrap_or(p.median_ci95_ns),
            sessions: m.sessions.len(),
        })
        .collect();
    if let Some(k) = p.modes.iter().position(|m| p.is_headline(m)) {
        out.swap(0, k);
    }
    out
}

/// The 95 % half-width of the median of `sessions` (at least two) new bring-ups of `runs` runs,
/// predicted from the variance components the baseline `b` measured (`T_session²/m + (T_run² +
/// V_probe)/(m r)`, Student's t on its sessions), when it measured them on more bring-ups: two
/// studies of one testbed share its scatter between bring-ups, and a candidate mode of a few
/// bring-ups measures its own on few degrees of freedom (two: Student's t on one, 12.7 times its
/// standard error). A mode of one bring-up keeps its own interval (its probes': it has no scatter
/// between bring-ups to measure, and the threshold carries the judgement).
fn predicted_half(b: &ProgramSummary, sessions: usize, runs: Option<u32>) -> Option<f64> {
    let v = b.evidence.variance.as_ref()?.median;
    let (m, r) = (sessions as f64, f64::from(runs?));
    if v.design.sessions <= m || m < 2.0 || r < 1.0 {
        return None;
    }
    let var = v.session_ns2 / m + (v.run_ns2 + v.probe_ns2) / (m * r);
    Some(crate::student::t975(v.design.sessions - 1.0) * var.sqrt())
}

/// The number of runs of most of `p`'s sessions.
fn runs_per_session(p: &ProgramSummary) -> Option<u32> {
    let mut runs: Vec<u32> = p.sessions.iter().map(|s| s.runs).collect();
    runs.sort_unstable();
    runs.get(runs.len() / 2).copied()
}

/// Judge program `name`. A program with several reset modes (in either study) is judged mode by
/// mode: each of the candidate's modes against the baseline's nearest (a bring-up lands in a mode
/// by chance, so which mode is the most populated, and how the modes share the probes, change
/// from study to study without anything changing); its distribution distance is not judged then.
/// A single mode's distance is judged on the distributions' shapes, each about its median: the
/// median's move is judged with its interval, and a bring-up's shift of a few ns must not read as
/// a change of shape.
fn compare_program(name: &str, b: &ProgramSummary, c: &ProgramSummary, t: &Thresholds) -> ProgramComparison {
    let mut failures = Vec::new();
    // A statistic that cannot be judged is a failure, never a pass.
    for (s, which) in [(b, "baseline"), (c, "candidate")] {
        for level in [50.0, 99.0] {
            if !s.latency_ns.at(level).is_some_and(f64::is_finite) {
                failures.push(format!("{} is missing from the {which} summary; cannot judge it", level_key(level)));
            }
        }
    }
    // Before the noise correction, each per-probe estimate keeps the noise of a median over one
    // session's runs: two studies of different runs per session differ by that alone.
    if !t.noise_corrected && runs_per_session(b) != runs_per_session(c) {
        failures.push(format!(
            "the quantiles before the noise correction are judged (`regression.noise_corrected: false`), but the baseline's sessions have {} runs and the candidate's {}: they differ by their noise alone",
            runs_per_session(b).unwrap_or(0),
            runs_per_session(c).unwrap_or(0)
        ));
    }
    let (base, cand) = (sides(b, t.noise_corrected), sides(c, t.noise_corrected));
    let multi_mode = base.len() > 1 || cand.len() > 1;
    let half = |ci: [f64; 2]| (ci[1] - ci[0]) / 2.0;
    // (shift, its interval, p99 shift, quantile shifts) of the candidate's headline.
    let mut headline = None;
    for (k, cm) in cand.iter().enumerate() {
        let Some(bm) =
            base.iter().min_by(|x, y| (x.median() - cm.median()).abs().total_cmp(&(y.median() - cm.median()).abs()))
        else {
            continue;
        };
        let shift = cm.median() - bm.median();
        let p99 = cm.latency_ns.p99().unwrap_or(f64::NAN) - bm.latency_ns.p99().unwrap_or(f64::NAN);
        let h = half(bm.median_ci95_ns)
            .hypot(predicted_half(b, cm.sessions, runs_per_session(c)).unwrap_or(half(cm.median_ci95_ns)));
        let ci = [shift - h, shift + h];
        let which = if multi_mode {
            format!("mode at {:.1} ns (the baseline's at {:.1} ns): ", cm.median(), bm.median())
        } else {
            String::new()
        };
        if shift.abs() > t.median_shift_ns && (ci[0] > 0.0 || ci[1] < 0.0) {
            failures.push(format!(
                "{which}median moved {shift:+.1} ns (95 % CI [{:+.1}, {:+.1}]), threshold ±{} ns",
                ci[0], ci[1], t.median_shift_ns
            ));
        }
        if p99.abs() > t.p99_shift_ns {
            failures.push(format!("{which}p99 moved {p99:+.1} ns, threshold ±{} ns", t.p99_shift_ns));
        }
        if k == 0 {
            let quantiles: Vec<(String, f64)> = bm
                .latency_ns
                .iter()
                .filter_map(|(q, bv)| Some((q.to_string(), cm.latency_ns.at_key(q)? - bv)))
                .collect();
            headline = Some((shift, ci, quantiles));
        }
    }
    let (shift, ci, quantile_shifts_ns) = headline.unwrap_or((f64::NAN, [f64::NAN; 2], Vec::new()));
    let (mut ks_distance, mut wasserstein_ns) = (None, None);
    if !multi_mode {
        wasserstein_ns = histogram_distances(&b.histogram, &c.histogram).map(|d| d.1);
        let about_median = Histogram { start_ns: c.histogram.start_ns - shift, ..c.histogram.clone() };
        ks_distance = histogram_distances(&b.histogram, &about_median).map(|d| d.0).filter(|_| shift.is_finite());
        if let Some(ks) = ks_distance.filter(|ks| *ks > t.ks_distance) {
            failures.push(format!("distribution changed shape: KS distance {ks:.3} > {}", t.ks_distance));
        }
    }
    let p99_shift_ci95_ns = (!multi_mode).then(|| {
        let shift = c.latency_ns.p99().unwrap_or(f64::NAN) - b.latency_ns.p99().unwrap_or(f64::NAN);
        let h = half(b.p99_ci95_ns).hypot(half(c.p99_ci95_ns));
        [shift - h, shift + h]
    });
    ProgramComparison {
        program: name.to_string(),
        median_shift_ns: shift,
        median_shift_ci95_ns: ci,
        p99_shift_ci95_ns,
        quantile_shifts_ns,
        ks_distance,
        wasserstein_ns,
        modes: (b.modes.len(), c.modes.len()),
        failures,
    }
}

/// What is judged of a study: each program, or each level of a program in a study with factors.
fn judged(s: &Summary) -> Vec<(String, &ProgramSummary)> {
    s.programs
        .iter()
        .flat_map(|(name, p)| {
            let levels = p
                .levels
                .iter()
                .map(move |l| (format!("{name} at {}", l.summary.level.as_deref().unwrap_or_default()), &l.summary));
            let whole = p.levels.is_empty().then(|| (name.clone(), p));
            whole.into_iter().chain(levels)
        })
        .collect()
}

/// Why two studies are not compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// One has not ended.
    #[error(transparent)]
    NotEnded(#[from] NotEnded),
    /// Their figures are calibrated differently (`analysis.calibration`): every program would move
    /// by its trace's null offset δ.
    #[error(
        "the baseline's figures are calibrated by `{baseline}` and the candidate's by `{candidate}` (`analysis.calibration`): they differ by the null offset δ, so they are not compared"
    )]
    Calibration {
        /// The baseline's.
        baseline: Calibration,
        /// The candidate's.
        candidate: Calibration,
    },
}

/// Compare a candidate study against a baseline; refused unless both have ended and are
/// calibrated alike.
pub fn compare(baseline: &Summary, candidate: &Summary, thresholds: Thresholds) -> Result<Comparison, Refused> {
    ended(Role::Baseline, baseline.provenance.as_ref())?;
    ended(Role::Candidate, candidate.provenance.as_ref())?;
    if baseline.calibration != candidate.calibration {
        return Err(Refused::Calibration { baseline: baseline.calibration, candidate: candidate.calibration });
    }
    let mut programs = Vec::new();
    let mut unmatched = Vec::new();
    let (base, cand) = (judged(baseline), judged(candidate));
    for (name, b) in &base {
        match cand.iter().find(|(n, _)| n == name) {
            Some((_, c)) => programs.push(compare_program(name, b, c, &thresholds)),
            None => unmatched.push(format!("{name}: missing from the candidate")),
        }
    }
    for (name, _) in cand.iter().filter(|(n, _)| !base.iter().any(|(b, _)| b == n)) {
        unmatched.push(format!("{name}: not in the baseline"));
    }
    Ok(Comparison {
        baseline: baseline.study.clone(),
        candidate: candidate.study.clone(),
        thresholds,
        programs,
        unmatched,
    })
}

/// Markdown summary.
pub fn markdown(c: &Comparison) -> String {
    use std::fmt::Write;
    let mut s = format!(
        "# Latency regression check\n\nBaseline `{}`, candidate `{}`: **{}**\n\n",
        c.baseline,
        c.candidate,
        if c.regressed() { "REGRESSION" } else { "no regression" }
    );
    s.push_str("| program | median shift (ns) | 95 % CI | p99 shift (ns) | KS | W1 (ns) | modes | verdict |\n");
    s.push_str("|---|---:|---|---:|---:|---:|---|---|\n");
    for p in &c.programs {
        let p99 = p.quantile_shifts_ns.iter().find(|(k, _)| k == "p99").map_or(f64::NAN, |x| x.1);
        let opt = |x: Option<f64>, prec: usize| x.map_or("—".into(), |v| format!("{v:.prec$}"));
        let _ = writeln!(
            s,
            "| {} | {:+.1} | [{:+.1}, {:+.1}] | {:+.1} | {} | {} | {} → {} | {} |",
            p.program,
            p.median_shift_ns,
            p.median_shift_ci95_ns[0],
            p.median_shift_ci95_ns[1],
            p99,
            opt(p.ks_distance, 3),
            opt(p.wasserstein_ns, 1),
            p.modes.0,
            p.modes.1,
            if p.failures.is_empty() { "pass".to_string() } else { format!("FAIL: {}", p.failures.join("; ")) }
        );
    }
    for u in &c.unmatched {
        let _ = writeln!(s, "\n- {u}");
    }
    s
}

/// JUnit XML: one test case per program.
pub fn junit(c: &Comparison) -> Result<String, quick_junit::SerializeError> {
    use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
    let mut suite = TestSuite::new("latency-regression");
    for p in &c.programs {
        let status = if p.failures.is_empty() {
            TestCaseStatus::success()
        } else {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(p.failures.join("; "));
            s
        };
        let mut case = TestCase::new(p.program.as_str(), status);
        case.set_classname(c.candidate.as_str()).set_system_out(format!(
            "median shift {:+.2} ns, CI [{:+.2}, {:+.2}]",
            p.median_shift_ns, p.median_shift_ci95_ns[0], p.median_shift_ci95_ns[1]
        ));
        suite.add_test_case(case);
    }
    for u in &c.unmatched {
        let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
        s.set_message(u.as_str());
        let mut case = TestCase::new(u.as_str(), s);
        case.set_classname(c.candidate.as_str());
        suite.add_test_case(case);
    }
    let mut report = Report::new("orchestrate compare");
    report.add_test_suite(suite);
    report.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use latency_results::summary::Histogram;
    use latency_results::summary::Quantiles;

    fn program(p50: f64, p99: Option<f64>, ci: [f64; 2]) -> ProgramSummary {
        let mut q = Quantiles::new();
        q.insert(50.0, p50);
        if let Some(v) = p99 {
            q.insert(99.0, v);
        }
        ProgramSummary {
            level: None,
            levels: Vec::new(),
            trace: "t".into(),
            null_trace: None,
            bitstream: "b".into(),
            latency_ns: q,
            latency_raw_ns: Default::default(),
            evidence: Default::default(),
            modes: Vec::new(),
            sessions: Vec::new(),
            null_offset_ns: 0.0,
            reproducibility_ns: 0.0,
            vendor_bound: None,
            median_ci95_ns: ci,
            p99_ci95_ns: [f64::NAN; 2],
            hw_check: None,
            probes: 0,
            excluded: 0,
            histogram: Histogram::default(),
            soak: None,
            round_trip: None,
            stopping: None,
            port_pairs: Default::default(),
        }
    }

    /// Session `session` of `runs` runs whose median is `median_ns`.
    fn session(session: u32, runs: u32, median_ns: f64) -> latency_results::summary::SessionSummary {
        latency_results::summary::SessionSummary {
            session,
            raw_median_ns: median_ns,
            median_ns,
            matched: 0,
            excluded: 0,
            runs,
            hw_median_ns: None,
        }
    }

    const T: Thresholds =
        Thresholds { median_shift_ns: 3.0, p99_shift_ns: 10.0, ks_distance: 0.1, noise_corrected: true };

    /// A program of two reset modes with these (median, p99, sessions), the most populated the
    /// headline.
    fn two_modes(modes: [(f64, f64, u32); 2]) -> ProgramSummary {
        let mut p = program(0.0, None, [0.0, 0.0]);
        p.modes = modes
            .iter()
            .map(|&(median, p99, n)| {
                let mut q = Quantiles::new();
                q.insert(50.0, median);
                q.insert(99.0, p99);
                latency_results::summary::Mode {
                    sessions: (1..=n).collect(),
                    latency_ns: q,
                    margins: None,
                    latency_raw_ns: Quantiles::new(),
                    gap_below: None,
                    median_ci95_ns: Some([median - 0.5, median + 0.5]),
                    p99_ci95_ns: None,
                    frequency: None,
                    frequency_ci95: None,
                }
            })
            .collect();
        let headline = p.modes.iter().max_by_key(|m| m.sessions.len()).unwrap();
        (p.latency_ns, p.median_ci95_ns) = (headline.latency_ns.clone(), headline.median_ci95_ns.unwrap());
        p
    }

    #[test]
    fn modes_are_judged_each_against_the_baselines_nearest_whichever_is_the_headline() {
        // The baseline's headline is its 137 ns mode, the candidate's its 107 ns one: the same
        // testbed, bring-ups landing otherwise.
        let base = two_modes([(107.0, 127.0, 2), (137.0, 159.0, 3)]);
        let c = compare_program("ft", &base, &two_modes([(107.2, 127.1, 3), (136.9, 159.2, 2)]), &T);
        assert!(c.failures.is_empty(), "{:?}", c.failures);
        assert!((c.median_shift_ns - 0.2).abs() < 1e-9 && c.ks_distance.is_none(), "{c:?}");
        // The low mode 5 ns slower: named with the mode it was judged against.
        let c = compare_program("ft", &base, &two_modes([(112.0, 132.0, 3), (137.0, 159.0, 2)]), &T);
        assert_eq!(
            c.failures,
            [
                "mode at 112.0 ns (the baseline's at 107.0 ns): median moved +5.0 ns (95 % CI [+4.3, +5.7]), threshold ±3 ns"
            ]
        );
        // One mode only in the candidate, the baseline's other: judged against it.
        let c = compare_program("ft", &base, &program(137.5, Some(159.0), [137.0, 138.0]), &T);
        assert!(c.failures.is_empty(), "{:?}", c.failures);
    }

    #[test]
    fn the_distribution_is_judged_on_its_shape_about_the_median() {
        let shaped = |median: f64, start_ns: f64, counts: Vec<u64>| {
            let mut p = program(median, Some(median + 20.0), [median - 3.0, median + 3.0]);
            p.histogram = Histogram { start_ns, bin_ns: 1.0, counts };
            p
        };
        let base = shaped(150.0, 140.0, vec![1, 2, 4, 8, 10, 8, 4, 2, 1]);
        // The same shape 2 ns higher, within the median's interval: no change (the whole
        // distributions' KS distance would be 0.4).
        let moved = shaped(152.0, 142.0, vec![1, 2, 4, 8, 10, 8, 4, 2, 1]);
        let c = compare_program("f", &base, &moved, &T);
        assert!(c.failures.is_empty() && c.ks_distance == Some(0.0), "{c:?}");
        assert!((c.wasserstein_ns.unwrap() - 2.0).abs() < 1e-9, "{c:?}");
        // A wider shape about the same median. By hand, the CDFs in 40ths: 1 3 7 15 25 33 37 39
        // 40 and 3 7 12 17 23 28 33 37 40; the largest gap 5/40 = 0.125 (third and sixth bins).
        let wide = shaped(150.0, 140.0, vec![3, 4, 5, 5, 6, 5, 5, 4, 3]);
        let c = compare_program("f", &base, &wide, &T);
        assert!((c.ks_distance.unwrap() - 0.125).abs() < 1e-12, "{c:?}");
        assert_eq!(c.failures, ["distribution changed shape: KS distance 0.125 > 0.1"]);
    }

    #[test]
    fn a_median_shift_fails_only_beyond_the_threshold_and_outside_its_interval() {
        let base = program(149.0, Some(169.0), [148.8, 149.2]);
        // +5 ns with CIs of half-width 0.2: interval [4.72, 5.28] excludes 0, and 5 > 3.
        let c = compare_program("f", &base, &program(154.0, Some(169.0), [153.8, 154.2]), &T);
        assert_eq!(c.failures, ["median moved +5.0 ns (95 % CI [+4.7, +5.3]), threshold ±3 ns"]);
        // +5 ns but so uncertain that the interval holds 0: not a regression.
        let c = compare_program("f", &base, &program(154.0, Some(169.0), [146.0, 162.0]), &T);
        assert!(c.failures.is_empty(), "{:?}", c.failures);
        // +2 ns, certain: under the threshold.
        let c = compare_program("f", &base, &program(151.0, Some(169.0), [150.9, 151.1]), &T);
        assert!(c.failures.is_empty(), "{:?}", c.failures);
    }

    #[test]
    fn a_missing_statistic_is_a_failure_not_a_pass() {
        let base = program(149.0, Some(169.0), [148.8, 149.2]);
        let c = compare_program("f", &base, &program(149.0, None, [148.8, 149.2]), &T);
        assert_eq!(c.failures, ["p99 is missing from the candidate summary; cannot judge it"]);
        let c = compare_program("f", &program(149.0, Some(f64::NAN), [148.8, 149.2]), &base, &T);
        assert_eq!(c.failures, ["p99 is missing from the baseline summary; cannot judge it"]);
    }

    #[test]
    fn thresholds_come_from_flags_then_the_plan_then_the_defaults() {
        let plan = latency_plan::Regression {
            baseline: "b".into(),
            median_shift_ns: 1.0,
            p99_shift_ns: 2.0,
            ks_distance: 0.3,
            noise_corrected: false,
        };
        let t = Thresholds::resolve([Some(5.0), None, None], Some(&plan));
        assert_eq!((t.median_shift_ns, t.p99_shift_ns, t.ks_distance, t.noise_corrected), (5.0, 2.0, 0.3, false));
        let t = Thresholds::resolve([None, None, Some(0.2)], None);
        assert_eq!((t.median_shift_ns, t.p99_shift_ns, t.ks_distance, t.noise_corrected), (3.0, 10.0, 0.2, true));
    }

    #[test]
    fn a_candidate_of_a_few_bring_ups_takes_their_scatter_from_the_baselines_components() {
        use latency_results::summary::{Components, Design, Variance};
        let sessions = |n: u32| (1..=n).map(|k| session(k, 5, 0.0)).collect::<Vec<_>>();
        // The baseline: 8 bring-ups of 5 runs, T_session² = 1, T_run² = 0, V_probe = 0.5 ns²; its
        // own median interval ±0.5.
        let mut base = program(149.0, Some(169.0), [148.5, 149.5]);
        base.sessions = sessions(8);
        let c = Components {
            session_ns2: 1.0,
            run_ns2: 0.0,
            probe_ns2: 0.5,
            design: Design { sessions: 8.0, runs: 5.0, probes: 20_000.0 },
        };
        base.evidence.variance = Some(Variance { median: c, p99: c });
        // A candidate of 2 bring-ups 4 ns slower whose own interval (Student's t on one degree of
        // freedom) is ±20: by hand, 1/2 + 0.5/10 = 0.55 ns², t(7) = 2.3646, so ±1.7537, and with
        // the baseline's ±0.5 the shift's interval is 4 ± 1.8236: a regression.
        let mut two = program(153.0, Some(169.0), [133.0, 173.0]);
        two.sessions = sessions(2);
        assert_eq!(
            compare_program("f", &base, &two, &T).failures,
            ["median moved +4.0 ns (95 % CI [+2.2, +5.8]), threshold ±3 ns"]
        );
        // One bring-up keeps its own interval (here ±20, so no regression), as does a candidate
        // of as many bring-ups as the baseline.
        let mut one = two.clone();
        one.sessions = sessions(1);
        assert!(compare_program("f", &base, &one, &T).failures.is_empty());
        let mut eight = two.clone();
        eight.sessions = sessions(8);
        assert!(compare_program("f", &base, &eight, &T).failures.is_empty());
    }

    #[test]
    fn before_the_noise_correction_the_raw_quantiles_are_judged_at_equal_runs_per_session() {
        let with = |corrected: f64, raw: f64, runs: u32| {
            let mut p = program(corrected, Some(169.0), [corrected - 0.2, corrected + 0.2]);
            p.latency_raw_ns.insert(50.0, raw);
            p.latency_raw_ns.insert(99.0, 171.0);
            p.sessions = vec![session(1, runs, raw)];
            p
        };
        let before = Thresholds { noise_corrected: false, ..T };
        // The corrected medians equal, those before the correction 5 ns apart: only the
        // judgement before the correction fails.
        let (b, c) = (with(149.0, 148.0, 5), with(149.0, 153.0, 5));
        assert!(compare_program("f", &b, &c, &T).failures.is_empty());
        assert_eq!(
            compare_program("f", &b, &c, &before).failures,
            ["median moved +5.0 ns (95 % CI [+4.7, +5.3]), threshold ±3 ns"]
        );
        // Sessions of 5 and 25 runs: not comparable before the correction, and said so.
        let f = compare_program("f", &b, &with(149.0, 148.0, 25), &before).failures;
        assert!(f.len() == 1 && f[0].contains("baseline's sessions have 5 runs and the candidate's 25"), "{f:?}");
    }

    #[test]
    fn junit_has_one_case_per_program_and_one_failure_per_regression() {
        let base = program(149.0, Some(169.0), [148.8, 149.2]);
        let mut b = std::collections::BTreeMap::new();
        b.insert("slow".to_string(), base.clone());
        b.insert("same".to_string(), base.clone());
        let mut c = b.clone();
        c.insert("slow".to_string(), program(154.0, Some(169.0), [153.8, 154.2]));
        let cmp = Comparison {
            baseline: "b".into(),
            candidate: "c".into(),
            thresholds: T,
            programs: b.iter().map(|(n, p)| compare_program(n, p, &c[n], &T)).collect(),
            unmatched: vec!["gone: missing from the candidate".into()],
        };
        assert!(cmp.regressed());
        let xml = junit(&cmp).unwrap();
        assert!(xml.contains("tests=\"3\"") && xml.contains("failures=\"2\""), "{xml}");
        assert!(xml.contains("<testcase name=\"slow\" classname=\"c\">"), "{xml}");
    }
    #[test]
    fn a_study_with_factors_is_judged_level_by_level() {
        use latency_results::summary::LevelSummary;
        let level = |name: &str, p50: f64| {
            let mut summary = program(p50, Some(169.0), [p50 - 0.2, p50 + 0.2]);
            summary.level = Some(name.to_string());
            LevelSummary {
                factors: Default::default(),
                null_calibration: "shared".into(),
                null_level: String::new(),
                summary,
            }
        };
        let study = |slow: f64, extra: bool| {
            let mut p = program(149.0, Some(169.0), [148.8, 149.2]);
            p.levels = vec![level("pacing_pps=500", 149.0), level("pacing_pps=1000000", slow)];
            if extra {
                p.levels.push(level("pacing_pps=2000000", 200.0));
            }
            Summary {
                study: "s".into(),
                title: String::new(),
                tool_version: String::new(),
                tsc_hz: 1e9,
                quantile_levels: vec![50.0, 99.0],
                quantile_definition: String::new(),
                calibration: Default::default(),
                programs: [("forward".to_string(), p)].into(),
                nulls: Default::default(),
                health: Default::default(),
                provenance: None,
                inputs_sha256: String::new(),
            }
        };
        let c = compare(&study(160.0, false), &study(170.0, true), T).unwrap();
        let names: Vec<&str> = c.programs.iter().map(|p| p.program.as_str()).collect();
        assert_eq!(names, ["forward at pacing_pps=500", "forward at pacing_pps=1000000"]);
        assert!(c.programs[0].failures.is_empty());
        assert!(c.programs[1].failures[0].starts_with("median moved +10.0 ns"), "{:?}", c.programs[1].failures);
        assert_eq!(c.unmatched, ["forward at pacing_pps=2000000: not in the baseline"]);
    }
}

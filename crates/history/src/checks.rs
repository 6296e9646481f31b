//! Whether a summary can be the history's record of its study ([`contradiction`]): it is the
//! study's (its name and provenance are the folder's) and the figures the history stores agree
//! with themselves: finite, each estimate inside its own 95 % interval, p50 not above p99, the
//! headline one of its modes, no negative range. The analysis never writes a summary that fails
//! these checks; one that does was edited or damaged since, and is not trusted.

use latency_results::provenance::Provenance;
use latency_results::summary::{ProgramSummary, Quantiles, Summary};

/// What contradicts: the key (its path in `summary.json`) and what is wrong with its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Contradiction {
    /// The key, e.g. `programs.forward.latency_ns.p50`.
    pub key: String,
    /// What is wrong, e.g. "is 1, outside its own 95 % interval …".
    pub what: String,
}

/// The first contradiction of `summary` (read from the results folder whose provenance is
/// `prov`), if any.
pub fn contradiction(summary: &Summary, prov: &Provenance) -> Option<Contradiction> {
    check(summary, prov).err()
}

type Checked = Result<(), Contradiction>;

fn fail(key: impl Into<String>, what: String) -> Checked {
    Err(Contradiction { key: key.into(), what })
}

fn check(summary: &Summary, prov: &Provenance) -> Checked {
    if summary.study != prov.study {
        return fail("study", format!("is `{}`, provenance.json says `{}`", summary.study, prov.study));
    }
    if let Some(p) = &summary.provenance {
        for (key, ours, theirs) in [
            ("provenance.study", &p.study, &prov.study),
            ("provenance.plan_hash", &p.plan_hash, &prov.plan_hash),
            ("provenance.started", &p.started, &prov.started),
        ] {
            if ours != theirs {
                return fail(key, format!("is `{ours}`, provenance.json says `{theirs}`"));
            }
        }
    }
    for (name, p) in &summary.programs {
        let prefix = format!("programs.{name}");
        if p.levels.is_empty() {
            program(&prefix, p)?;
        } else {
            for (i, l) in p.levels.iter().enumerate() {
                program(&format!("{prefix}.levels[{i}].summary"), &l.summary)?;
            }
        }
    }
    Ok(())
}

/// One program's (or level's) figures, as the history's rows take them.
fn program(prefix: &str, s: &ProgramSummary) -> Checked {
    let (p50, p99) = quantiles(&format!("{prefix}.latency_ns"), &s.latency_ns)?;
    interval(prefix, "median_ci95_ns", s.median_ci95_ns, "p50", p50)?;
    interval(prefix, "p99_ci95_ns", s.p99_ci95_ns, "p99", p99)?;
    for (k, m) in s.modes.iter().enumerate() {
        let mode = format!("{prefix}.modes[{k}]");
        let (p50, p99) = quantiles(&format!("{mode}.latency_ns"), &m.latency_ns)?;
        if let Some(ci) = m.median_ci95_ns {
            interval(&mode, "median_ci95_ns", ci, "p50", p50)?;
        }
        if let Some(ci) = m.p99_ci95_ns {
            interval(&mode, "p99_ci95_ns", ci, "p99", p99)?;
        }
    }
    if !s.modes.is_empty() && !s.modes.iter().any(|m| s.is_headline(m)) {
        return fail(
            format!("{prefix}.latency_ns"),
            format!("is none of its modes' (`{prefix}.modes[…].latency_ns`), while the headline is its main mode's"),
        );
    }
    if !s.null_offset_ns.is_finite() {
        return fail(format!("{prefix}.null_offset_ns"), format!("is {}, not a number of ns", s.null_offset_ns));
    }
    if !(s.reproducibility_ns.is_finite() && s.reproducibility_ns >= 0.0) {
        return fail(
            format!("{prefix}.reproducibility_ns"),
            format!("is {}: a range of session medians is a number of ns, never negative", s.reproducibility_ns),
        );
    }
    if let Some(v) = &s.vendor_bound
        && v.violations > s.probes
    {
        return fail(
            format!("{prefix}.vendor_bound.violations"),
            format!("is {}, more than the {} probes of `{prefix}.probes`", v.violations, s.probes),
        );
    }
    Ok(())
}

/// Every quantile finite, p50 and p99 there, p50 not above p99: (p50, p99).
fn quantiles(key: &str, q: &Quantiles) -> Result<(f64, f64), Contradiction> {
    for (level, value) in q.iter() {
        if !value.is_finite() {
            fail(format!("{key}.{level}"), format!("is {value}, not a latency"))?;
        }
    }
    let (Some(p50), Some(p99)) = (q.median(), q.p99()) else {
        let missing = if q.median().is_none() { "p50" } else { "p99" };
        return Err(Contradiction { key: format!("{key}.{missing}"), what: "is missing".into() });
    };
    if p50 > p99 {
        fail(format!("{key}.p99"), format!("is {p99}, below the median `{key}.p50` {p50}"))?;
    }
    Ok((p50, p99))
}

/// A 95 % interval `[lo, hi]` (finite, `lo ≤ hi`) around its estimate.
fn interval(prefix: &str, name: &str, ci: [f64; 2], statistic: &str, estimate: f64) -> Checked {
    let [lo, hi] = ci;
    if !(lo.is_finite() && hi.is_finite() && lo <= hi) {
        return fail(format!("{prefix}.{name}"), format!("is [{lo}, {hi}], not an interval"));
    }
    if !(lo <= estimate && estimate <= hi) {
        return fail(
            format!("{prefix}.latency_ns.{statistic}"),
            format!("is {estimate}, outside its own 95 % interval `{prefix}.{name}` [{lo}, {hi}]"),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A summary the analysis wrote (one night of the nightly test plan on the simulator).
    fn summary() -> Summary {
        serde_json::from_str(include_str!("../tests/fixtures/nightly-summary.json")).unwrap()
    }

    fn found(edit: impl Fn(&mut Summary)) -> Option<Contradiction> {
        let mut s = summary();
        let prov = s.provenance.clone().unwrap();
        edit(&mut s);
        contradiction(&s, &prov)
    }

    fn key(edit: impl Fn(&mut Summary)) -> String {
        found(edit).map(|c| c.key).unwrap_or_default()
    }

    fn forward(s: &mut Summary) -> &mut ProgramSummary {
        s.programs.get_mut("forward").unwrap()
    }

    #[test]
    fn the_analysis_summary_holds_no_contradiction() {
        assert_eq!(found(|_| {}), None);
    }

    #[test]
    fn an_estimate_outside_its_own_interval_is_named() {
        let c = found(|s| {
            let f = forward(s);
            f.latency_ns.insert(50.0, 1.0);
            f.modes[0].latency_ns.insert(50.0, 1.0);
        })
        .unwrap();
        assert_eq!(c.key, "programs.forward.latency_ns.p50");
        assert!(c.what.contains("outside its own 95 % interval `programs.forward.median_ci95_ns`"), "{}", c.what);
        // The headline alone edited: it is none of its modes.
        assert_eq!(
            key(|s| {
                let f = forward(s);
                let p50 = f.latency_ns.median().unwrap();
                f.latency_ns.insert(50.0, p50 + 0.01);
            }),
            "programs.forward.latency_ns"
        );
        // A mode's interval.
        assert_eq!(
            key(|s| forward(s).modes[0].p99_ci95_ns = Some([0.0, 1.0])),
            "programs.forward.modes[0].latency_ns.p99"
        );
    }

    #[test]
    fn non_finite_figures_and_reversed_intervals_are_named() {
        assert_eq!(key(|s| forward(s).latency_ns.insert(95.0, f64::NAN)), "programs.forward.latency_ns.p95");
        assert_eq!(key(|s| forward(s).latency_ns.insert(99.0, f64::INFINITY)), "programs.forward.latency_ns.p99");
        assert_eq!(key(|s| forward(s).median_ci95_ns = [150.0, 148.0]), "programs.forward.median_ci95_ns");
        assert_eq!(key(|s| forward(s).p99_ci95_ns[1] = f64::NAN), "programs.forward.p99_ci95_ns");
        assert_eq!(key(|s| forward(s).null_offset_ns = f64::NAN), "programs.forward.null_offset_ns");
        assert_eq!(key(|s| forward(s).reproducibility_ns = -1.0), "programs.forward.reproducibility_ns");
        assert_eq!(
            key(|s| {
                forward(s).latency_ns.remove(50.0);
            }),
            "programs.forward.latency_ns.p50"
        );
    }

    #[test]
    fn a_median_above_p99_is_named() {
        let c = found(|s| {
            let f = forward(s);
            f.latency_ns.insert(99.0, 120.0);
            f.p99_ci95_ns = [119.0, 121.0];
        })
        .unwrap();
        assert_eq!(c.key, "programs.forward.latency_ns.p99");
        assert!(c.what.contains("below the median"), "{}", c.what);
    }

    #[test]
    fn a_summary_of_another_study_is_named() {
        assert_eq!(key(|s| s.study = "other".into()), "study");
        assert_eq!(key(|s| s.provenance.as_mut().unwrap().plan_hash = "0".repeat(64)), "provenance.plan_hash");
    }

    #[test]
    fn more_violations_than_probes_is_named() {
        assert_eq!(
            key(|s| {
                let f = forward(s);
                f.vendor_bound.as_mut().unwrap().violations = f.probes + 1;
            }),
            "programs.forward.vendor_bound.violations"
        );
    }
}

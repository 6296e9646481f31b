//! The history's two tables, each defined once for the writer and every reader:
//!
//! - `rows`: one row per study × program × level × mode, with the headline statistics, their
//!   intervals, the health and the study's identity;
//! - `estimates`: one row per probe estimate (a probe's median over a session's runs, before the
//!   null calibration) of each program and null calibration, so distributions can be compared.
//!
//! Both are partitioned hive-style by `date` (the study's start, UTC) and `study` (its id); the
//! partition values live in the paths, not in the files.

use crate::provenance::Provenance;
use crate::summary::ProgramSummary;
use crate::summary::Quantiles;
use crate::summary::Summary;

use super::table::{Micros, table};

/// The mode of a program's headline row (its figures over all sessions, or the most populated
/// reset mode's); reset modes are numbered `1`, `2`, … from the fastest.
pub const HEADLINE: &str = "headline";

table! {
    /// One row of the `rows` table.
    pub struct Row {
        /// The plan's study name.
        pub name: String,
        /// When the study started.
        pub time: Micros,
        /// When it ended (none in a store written before this column): orders studies that
        /// started at the same time.
        pub ended: Option<Micros>,
        /// sha256 of the plan file.
        pub plan_hash: String,
        /// Tool version.
        pub tool_version: String,
        /// Git commit of the tool.
        pub git_commit: String,
        /// `sim`, or the inventory's testbed name.
        pub testbed: String,
        /// What the testbed reported about its hosts, as JSON.
        pub host_facts: String,
        /// Seed of the simulator and of resampling.
        pub seed: u64,
        /// The study's HTML report when it was added (a path on the adding machine).
        pub report: Option<String>,
        /// Program.
        pub program: String,
        /// Factor level (studies with factors).
        pub level: Option<String>,
        /// [`HEADLINE`], or the number of a reset mode.
        pub mode: String,
        /// sha256 of the program's bitstream.
        pub bitstream_sha256: String,
        /// Median latency, ns.
        pub p50_ns: f64,
        /// 95 % interval of the median, ns.
        pub p50_ci95_lo_ns: Option<f64>,
        /// Upper end of that interval.
        pub p50_ci95_hi_ns: Option<f64>,
        /// p99 latency, ns.
        pub p99_ns: f64,
        /// 95 % interval of p99, ns.
        pub p99_ci95_lo_ns: Option<f64>,
        /// Upper end of that interval.
        pub p99_ci95_hi_ns: Option<f64>,
        /// Every reported quantile, as JSON (`{"p5": …, "p50": …}`).
        pub quantiles_json: String,
        /// Null offset subtracted, ns.
        pub null_offset_ns: f64,
        /// Range of the calibrated session medians within a mode, ns.
        pub reproducibility_ns: f64,
        /// Sessions of this row.
        pub sessions: u32,
        /// Probes with an estimate.
        pub probes: u64,
        /// Runs that failed every attempt (whole study).
        pub failed_runs: u64,
        /// Problems the analysis named (whole study).
        pub problems: u32,
        /// Whether the study ran clean: no failed run and no problem.
        pub healthy: bool,
        /// Probes beyond the vendor bound (absent without a bound).
        pub vendor_violations: Option<u64>,
    }
}

table! {
    /// One row of the `annotations` table: a study acknowledged as the start of a new level (a
    /// new compiler, a new shell), so that the trend judges later nights against it instead of
    /// alerting on it.
    pub struct Annotation {
        /// The study's id.
        pub study: String,
        /// Why, in words.
        pub reason: String,
        /// When it was acknowledged.
        pub time: Micros,
    }
}

table! {
    /// One row of the `confirmations` table: a study that re-measured the programs of a night
    /// whose trend regressed (`nightly` with a plan's `trend.confirm`), so that the trend tells a
    /// confirmed regression from one night's.
    pub struct Confirmation {
        /// The confirmation study's id.
        pub study: String,
        /// The id of the night it re-measured.
        pub confirms: String,
        /// When it was recorded.
        pub time: Micros,
    }
}

table! {
    /// One row of the `estimates` table.
    pub struct Estimate {
        /// Program, or null calibration group.
        pub program: String,
        /// Factor level (studies with factors).
        pub level: Option<String>,
        /// `program` or `null`.
        pub kind: String,
        /// Session.
        pub session: u32,
        /// Probe id.
        pub probe: u64,
        /// The probe's median differential over the session's runs, ns (before the null
        /// calibration: subtract the row's `null_offset_ns`).
        pub estimate_ns: f64,
    }
}

/// A study's id in the history: its name and start time, and a hash of its plan, start and run
/// data, so adding the same results again finds the same id and two studies never share one.
pub fn study_id(prov: &Provenance, summary: &Summary) -> String {
    use sha2::{Digest, Sha256};
    let name: String =
        prov.study.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
    let time: String = prov.started.chars().filter(char::is_ascii_alphanumeric).collect();
    let hash = Sha256::digest(format!("{}\n{}\n{}", prov.plan_hash, prov.started, summary.inputs_sha256));
    let hex: String = hash[..6].iter().map(|b| format!("{b:02x}")).collect();
    format!("{name}-{time}-{hex}")
}

/// The rows of a study: per program (and level) its headline and, with several reset modes, each
/// mode.
pub fn rows(summary: &Summary, prov: &Provenance, time: Micros, report: Option<String>) -> Vec<Row> {
    let host_facts = serde_json::to_string(&prov.testbed.facts).unwrap_or_default();
    let failed_runs = summary.health.failed_runs;
    let problems = u32::try_from(summary.health.problems.len()).unwrap_or(u32::MAX);
    let ended = prov.ended.as_deref().and_then(crate::parse_utc_micros).map(Micros);
    let mut out = Vec::new();
    for (program, p) in &summary.programs {
        let levels: Vec<&ProgramSummary> =
            if p.levels.is_empty() { vec![p] } else { p.levels.iter().map(|l| &l.summary).collect() };
        for s in levels {
            let sha = prov.bitstreams.get(&s.bitstream).map(|b| b.sha256.clone()).unwrap_or_default();
            let row = |mode: String, q: &Quantiles, ci50: Option<[f64; 2]>, ci99: Option<[f64; 2]>, sessions| Row {
                name: summary.study.clone(),
                time,
                ended,
                plan_hash: prov.plan_hash.clone(),
                tool_version: prov.tool_version.clone(),
                git_commit: prov.git_commit.clone(),
                testbed: prov.testbed.name.clone(),
                host_facts: host_facts.clone(),
                seed: prov.seed,
                report: report.clone(),
                program: program.clone(),
                level: s.level.clone(),
                mode,
                bitstream_sha256: sha.clone(),
                p50_ns: q.median().unwrap_or(f64::NAN),
                p50_ci95_lo_ns: ci50.map(|c| c[0]),
                p50_ci95_hi_ns: ci50.map(|c| c[1]),
                p99_ns: q.p99().unwrap_or(f64::NAN),
                p99_ci95_lo_ns: ci99.map(|c| c[0]),
                p99_ci95_hi_ns: ci99.map(|c| c[1]),
                quantiles_json: serde_json::to_string(q).unwrap_or_default(),
                null_offset_ns: s.null_offset_ns,
                reproducibility_ns: s.reproducibility_ns,
                sessions,
                probes: s.probes,
                failed_runs,
                problems,
                healthy: summary.health.is_clean(),
                vendor_violations: s.vendor_bound.as_ref().map(|v| v.violations),
            };
            let sessions = u32::try_from(s.sessions.len()).unwrap_or(u32::MAX);
            out.push(row(HEADLINE.into(), &s.latency_ns, Some(s.median_ci95_ns), Some(s.p99_ci95_ns), sessions));
            if s.modes.len() > 1 {
                for (k, m) in s.modes.iter().enumerate() {
                    let n = u32::try_from(m.sessions.len()).unwrap_or(u32::MAX);
                    out.push(row((k + 1).to_string(), &m.latency_ns, m.median_ci95_ns, m.p99_ci95_ns, n));
                }
            }
        }
    }
    out
}

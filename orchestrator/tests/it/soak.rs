//! Soak mode on the simulator: every run's histogram log is stored beside its records, hashed in
//! the journal, and summarised; the summary's quantiles agree with the same quantiles computed
//! here from the records, within the histograms' stated resolution.

use std::collections::HashMap;
use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{UInt8Type, UInt64Type};
use latency_results::summary::Summary;

use crate::common::{orchestrate, run_steady, stderr, tmp_dir};

const PLAN: &str = "tests/fixtures/good/soak.yaml";

/// Every pair's differential (t_P − t_B, ns) of the runs of `program`, from the Parquet files.
fn differentials(dir: &Path, program: &str, tsc_hz: f64) -> Vec<f64> {
    let mut out = Vec::new();
    for session in 1..=2 {
        for run in 1..=2 {
            let file = dir.join(format!("data/program={program}/session={session}/run={run}.parquet"));
            let (batches, _) = latency_results::runfile::read(&file).unwrap();
            let mut waiting: HashMap<u64, (u8, u64)> = HashMap::new();
            for b in &batches {
                let id = b.column_by_name("probe_id").unwrap().as_primitive::<UInt64Type>();
                let port = b.column_by_name("port").unwrap().as_primitive::<UInt8Type>();
                let tsc = b.column_by_name("tsc").unwrap().as_primitive::<UInt64Type>();
                for k in 0..b.num_rows() {
                    let (i, p, t) = (id.value(k), port.value(k), tsc.value(k));
                    match waiting.remove(&i) {
                        Some((q, u)) if q != p => {
                            let (pipe, byp) = if p == 0 { (t, u) } else { (u, t) };
                            out.push((pipe as i64 - byp as i64) as f64 * 1e9 / tsc_hz);
                        }
                        _ => {
                            waiting.insert(i, (p, t));
                        }
                    }
                }
            }
        }
    }
    out.sort_by(f64::total_cmp);
    out
}

/// The nearest-rank quantile of sorted values.
fn rank(sorted: &[f64], q: f64) -> f64 {
    sorted[((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1]
}

#[test]
fn soak_logs_are_stored_hashed_and_summarised_like_the_records_say() {
    let dir = tmp_dir("soak");
    let o = orchestrate(&["run", PLAN, "--out", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(dir.join("data/program=forward/session=2/run=2.hlog").is_file());
    let s: Summary = serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    let k = s.programs["forward"].soak.as_ref().expect("a soak summary");
    let forward = differentials(&dir, "forward", s.tsc_hz);
    let null = differentials(&dir, "null-fwd", s.tsc_hz);
    assert_eq!((k.runs, k.pairs), (4, forward.len() as u64));
    // Each 40 s run in 10 s intervals (the last one holds the copies after 40 s, if any).
    assert!(k.intervals.iter().filter(|i| i.session == 1 && i.run == 1).count() >= 4, "{:?}", k.intervals);
    assert_eq!(k.intervals.iter().map(|i| i.pairs).sum::<u64>(), k.pairs);
    let close = |got: f64, exact: f64| (got - exact).abs() <= k.resolution * exact.abs() + 1.0;
    for q in [50.0, 99.0] {
        let (got, exact) = (k.latency_raw_ns.at(q).unwrap(), rank(&forward, q / 100.0));
        assert!(close(got, exact), "raw p{q}: {got} vs {exact} from the records");
    }
    let null_median = k.null_median_ns.unwrap();
    assert!(close(null_median, rank(&null, 0.5)), "null median {null_median} vs {}", rank(&null, 0.5));
    assert_eq!(k.latency_ns.at(50.0).unwrap(), k.latency_raw_ns.at(50.0).unwrap() - null_median);
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("**Table III.** Soak mode") && report.contains("3 significant digits"), "{report}");

    // A resume keeps every run and the log recorded with it.
    let o = orchestrate(&["run", PLAN, "--out", dir.to_str().unwrap(), "--resume", "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap();
    assert!(!journal.contains("quarantined"), "{journal}");
    assert_eq!(journal.matches("\"run_finished\"").count(), 8, "nothing was run again: {journal}");
    assert!(dir.join("data/program=null-fwd/session=2/run=2.hlog").is_file());

    // A log changed after the run is named and left out.
    let log = dir.join("data/program=forward/session=1/run=1.hlog");
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.push_str("#edited\n");
    std::fs::write(&log, text).unwrap();
    let o = orchestrate(&["analyze", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "data that could not be used: {}", stderr(&o));
    let s: Summary = serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s.programs["forward"].soak.as_ref().unwrap().runs, 3);
    assert!(
        s.health.problems.iter().any(|p| p.contains("session=1/run=1.hlog: checksum differs from the journal's")),
        "{:?}",
        s.health.problems
    );
}

#[test]
fn a_soak_without_records_keeps_histograms_only_and_its_headline_is_theirs() {
    // The same simulated study (same seed), once with records and once with histograms only.
    let kept = tmp_dir("soak-kept");
    // Two bring-ups check the histograms against the records, not the bring-ups' scatter.
    let with = run_steady(PLAN, &kept, &[]);
    let dir = tmp_dir("soak-histograms");
    let s = run_steady("tests/fixtures/good/soak-histograms.yaml", &dir, &[]);

    // No records were stored, and the run checks held on the agent's counts: every run passed,
    // with the same counts as pairing the records gives.
    let file = dir.join("data/program=forward/session=1/run=1.parquet");
    let (batches, _) = latency_results::runfile::read(&file).unwrap();
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 0);
    assert_eq!((s.health.runs, s.health.failed_runs), (8, 0));
    assert_eq!(s.health.matched, with.health.matched);

    // The headline is the histograms': the records study's soak figures, which agree with the
    // records' own order statistics; Forward's median is the paper's 149 ns (Table I) within the
    // per-run noise these quantiles keep.
    let p = &s.programs["forward"];
    let k = with.programs["forward"].soak.as_ref().unwrap();
    assert_eq!(p.latency_ns, k.latency_ns);
    assert_eq!(p.null_offset_ns, k.null_median_ns.unwrap());
    let forward = differentials(&kept, "forward", with.tsc_hz);
    let exact = rank(&forward, 0.5) - k.null_median_ns.unwrap();
    assert!((p.latency_ns.at(50.0).unwrap() - exact).abs() <= k.resolution * rank(&forward, 0.5) + 1.0, "{p:?}");
    assert!((p.latency_ns.at(50.0).unwrap() - 149.0).abs() < 2.0, "{:?}", p.latency_ns);
    assert_eq!(p.sessions.len(), 2);
    // Two sessions: the interval has the bring-up spread of their medians.
    assert!(
        p.median_ci95_ns[0] < p.latency_ns.at(50.0).unwrap() && p.latency_ns.at(50.0).unwrap() < p.median_ci95_ns[1]
    );
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("**Table III.** Soak mode"), "{report}");
    for d in [dir, kept] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

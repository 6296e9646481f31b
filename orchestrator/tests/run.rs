//! Black-box tests of `orchestrate run` on the simulated testbed: results layout, resume after
//! SIGKILL and Ctrl-C at arbitrary points, corrupted files, retries and failures.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const PLAN: &str = "tests/fixtures/good/study.yaml";
const RUNS: usize = 48;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_orchestrate"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("orchestrate-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn run(out: &Path, extra: &[&str]) -> Output {
    bin().args(["run", PLAN, "--out"]).arg(out).args(extra).output().unwrap()
}

fn spawn(out: &Path, extra: &[&str]) -> Child {
    bin().args(["run", PLAN, "--out"]).arg(out).args(extra).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap()
}

/// sha256 of every run file, by relative path.
fn checksums(dir: &Path) -> BTreeMap<String, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(rel, orchestrator::digest::sha256_file(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, &dir.join("data"), &mut out);
    out
}

fn journal(dir: &Path) -> Vec<serde_json::Value> {
    orchestrator::results::journal::read(&dir.join("journal.jsonl")).unwrap()
}

fn finished_runs(dir: &Path) -> Vec<(String, u64, u64)> {
    journal(dir)
        .iter()
        .filter(|e| e["event"] == "run_finished")
        .map(|e| {
            (e["program"].as_str().unwrap().to_string(), e["session"].as_u64().unwrap(), e["run"].as_u64().unwrap())
        })
        .collect()
}

/// Wait until the journal has at least `lines` lines (or the process ended); true if still running.
fn wait_for_lines(child: &mut Child, dir: &Path, lines: usize) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        let n = std::fs::read_to_string(dir.join("journal.jsonl")).map_or(0, |t| t.lines().count());
        if n >= lines {
            return true;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    panic!("no progress");
}

fn reference() -> BTreeMap<String, String> {
    static REF: std::sync::OnceLock<BTreeMap<String, String>> = std::sync::OnceLock::new();
    REF.get_or_init(|| {
        let dir = tmp("reference");
        let o = run(&dir, &[]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let sums = checksums(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        sums
    })
    .clone()
}

#[test]
fn a_study_leaves_a_complete_results_folder() {
    let dir = tmp("complete");
    let o = run(&dir, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The last line on stdout is the results folder.
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().last().unwrap(), dir.to_string_lossy());
    let sums = checksums(&dir);
    assert_eq!(sums.len(), RUNS);
    assert!(sums.contains_key("data/program=null-fwd/session=3/run=4.parquet"));
    assert_eq!(
        std::fs::read(dir.join("plan.yaml")).unwrap(),
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join(PLAN)).unwrap()
    );
    let prov: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("provenance.json")).unwrap()).unwrap();
    for key in [
        "plan_hash",
        "tool_version",
        "git_commit",
        "seed",
        "testbed",
        "tsc_hz",
        "bitstreams",
        "traces",
        "started",
        "ended",
    ] {
        assert!(!prov[key].is_null(), "provenance lacks {key}");
    }
    assert_eq!(prov["seed"], 11);
    assert_eq!(
        prov["bitstreams"]["forward"]["sha256"],
        "de453f948b7e0ea6e3deb86421683a9644bed11764983f26061cc9d1d141a3cf"
    );
    assert_eq!(prov["testbed"]["facts"]["model"]["tsc_hz"], 2.89e9);
    // Every run file carries its provenance and reads back in the record schema.
    let (batches, meta) =
        orchestrator::results::runfile::read(&dir.join("data/program=forward/session=2/run=3.parquet")).unwrap();
    let meta: BTreeMap<_, _> = meta.into_iter().collect();
    assert_eq!(meta["latency.program"], "forward");
    assert_eq!(meta["latency.run"], "3");
    assert_eq!(meta["latency.plan_hash"], prov["plan_hash"].as_str().unwrap());
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows, 20_000 + 14_000, "bypass sees every probe, the pipeline the forwarded 70 %");
    assert_eq!(checksums(&dir), reference(), "same seed, same data");
    let j = journal(&dir);
    assert_eq!(j.last().unwrap()["event"], "study_finished");
    // A second run into the same folder is refused and touches nothing.
    let again = run(&dir, &[]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("--resume"));
    assert_eq!(journal(&dir).len(), j.len());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sigkill_at_arbitrary_points_then_resume_gives_identical_data() {
    let dir = tmp("sigkill");
    // Journal line counts at which the process is killed: during bring-up, mid-session, late.
    let mut killed = 0;
    for (i, at) in [3usize, 60, 150, 260].into_iter().enumerate() {
        let mut child = spawn(&dir, if i == 0 { &[] } else { &["--resume"] });
        if wait_for_lines(&mut child, &dir, at) {
            child.kill().unwrap(); // SIGKILL
            killed += 1;
        }
        child.wait().unwrap();
    }
    assert!(killed >= 3, "the study finished before it could be killed");
    let o = run(&dir, &["--resume"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(checksums(&dir), reference());
    let mut runs = finished_runs(&dir);
    let n = runs.len();
    runs.sort();
    runs.dedup();
    assert_eq!(runs.len(), RUNS, "every run recorded");
    assert_eq!(n, RUNS, "no run recorded twice");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn ctrl_c_stops_cleanly_and_resume_completes() {
    let dir = tmp("sigint");
    let mut child = spawn(&dir, &[]);
    assert!(wait_for_lines(&mut child, &dir, 100), "finished too early");
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let j = journal(&dir);
    assert_eq!(j.last().unwrap()["event"], "interrupted");
    // Cleanup (teardown) ran for the interrupted session.
    assert!(j.iter().rev().take(4).any(|e| e["action"] == "agent_stop"), "{j:?}");
    let o = run(&dir, &["--resume"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(checksums(&dir), reference());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn corrupted_and_truncated_runs_are_detected_and_redone() {
    let dir = tmp("corrupt");
    assert!(run(&dir, &[]).status.success());
    let a = dir.join("data/program=five_tuple/session=1/run=2.parquet");
    let b = dir.join("data/program=null-ft/session=3/run=1.parquet");
    let mut bytes = std::fs::read(&a).unwrap();
    bytes[100] ^= 0xff;
    std::fs::write(&a, bytes).unwrap();
    let len = std::fs::metadata(&b).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&b).unwrap().set_len(len / 2).unwrap();
    let o = run(&dir, &["--resume"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(checksums(&dir), reference());
    let quarantined: Vec<_> = std::fs::read_dir(dir.join("quarantine")).unwrap().collect();
    assert_eq!(quarantined.len(), 2, "the bad files are kept aside, not deleted");
    let j = journal(&dir);
    assert_eq!(j.iter().filter(|e| e["event"] == "quarantined").count(), 2);
    // Only the two sessions with a bad run were brought up again.
    let resumed_from = j.iter().rposition(|e| e["event"] == "study_started").unwrap();
    let started: Vec<_> = j[resumed_from..].iter().filter(|e| e["event"] == "session_started").collect();
    assert_eq!(started.len(), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn resume_refuses_another_seed() {
    let dir = tmp("seed");
    assert!(run(&dir, &[]).status.success());
    let o = run(&dir, &["--resume", "--seed", "12"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("was started with seed 11"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn failing_steps_are_retried_and_a_step_out_of_retries_names_host_and_step() {
    let dir = tmp("faulty");
    let o = run(&dir, &["--sim-model", "tests/fixtures/good/faulty-steps.yaml"]);
    let err = String::from_utf8_lossy(&o.stderr);
    let j = journal(&dir);
    assert!(j.iter().any(|e| e["event"] == "step_retried"), "no retries seen");
    if o.status.success() {
        assert_eq!(finished_runs(&dir).len(), RUNS);
    } else {
        assert_eq!(o.status.code(), Some(3), "{err}");
        assert!(err.contains("sim: "), "{err}");
        let failed = j.iter().find(|e| e["event"] == "step_failed").unwrap();
        assert!(err.contains(failed["action"].as_str().unwrap()), "{err}");
        assert!(err.contains(&dir.to_string_lossy().into_owned()), "points at the results kept so far: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn runs_failing_their_checks_are_retried_then_reported() {
    let dir = tmp("lossy");
    // 5 % loss per copy leaves ~90 % of probes matched, under the default 99 % threshold.
    let o = run(&dir, &["--sim-model", "tests/fixtures/good/lossy.yaml"]);
    assert_eq!(o.status.code(), Some(1));
    let j = journal(&dir);
    assert_eq!(j.iter().filter(|e| e["event"] == "run_failed").count(), RUNS);
    assert_eq!(j.iter().filter(|e| e["event"] == "run_retried").count(), RUNS * 2);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("failed: forward_s1 run 1: bypass port saw"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn runs_off_their_pacing_are_rejected_and_the_achieved_pacing_is_recorded() {
    // 10 % slow: every run is outside the default ±5 % and is retried, then reported.
    let dir = tmp("slow-sender");
    let o = run(&dir, &["--sim-model", "tests/fixtures/good/slow-sender.yaml"]);
    assert_eq!(o.status.code(), Some(1));
    let j = journal(&dir);
    assert_eq!(j.iter().filter(|e| e["event"] == "run_failed").count(), RUNS);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("pacing 450.0 pps seen by the sender, -10.0 % off the planned 500 pps (tolerance ±5.0 %)"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();

    // 3 % fast: accepted, and both views of the rate are stored with each run: 515 pps within the
    // departure jitter (2 µs σ over 20,000 probes) and the receiver's stamps (ns over ~39 s).
    let dir = tmp("fast-sender");
    let o = run(&dir, &["--sim-model", "tests/fixtures/good/fast-sender.yaml"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let finished: Vec<serde_json::Value> = journal(&dir).into_iter().filter(|e| e["event"] == "run_finished").collect();
    assert_eq!(finished.len(), RUNS);
    for e in &finished {
        for side in ["sender_pps", "receiver_pps"] {
            let pps = e["pacing"][side].as_f64().unwrap();
            assert!((pps - 515.0).abs() < 0.01, "{side}: {pps} in {e}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

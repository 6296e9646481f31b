//! Black-box tests of `orchestrate run` on the simulated testbed: results layout, resume after
//! SIGKILL and Ctrl-C at arbitrary points, corrupted files, retries and failures.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::{bin, tmp};
use latency_results::event::Entry;
use latency_results::event::Event;
use latency_results::provenance::Provenance;

const PLAN: &str = "tests/fixtures/good/study.yaml";
const RUNS: usize = 48;

pub(crate) fn run(out: &Path, extra: &[&str]) -> Output {
    bin().args(["run", PLAN, "--out"]).arg(out).args(extra).output().unwrap()
}

pub(crate) fn spawn(out: &Path, extra: &[&str]) -> Child {
    bin().args(["run", PLAN, "--out"]).arg(out).args(extra).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap()
}

/// sha256 of every run file, by relative path.
pub(crate) fn checksums(dir: &Path) -> BTreeMap<String, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(rel, latency_plan::digest::sha256_file(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, &dir.join("data"), &mut out);
    out
}

pub(crate) fn journal(dir: &Path) -> Vec<Entry> {
    latency_results::journal::read(&dir.join("journal.jsonl")).unwrap()
}

pub(crate) fn finished_runs(dir: &Path) -> Vec<(String, u64, u64)> {
    journal(dir)
        .iter()
        .filter_map(|e| match &e.event {
            Event::RunFinished { program, session, run, .. } => {
                Some((program.clone(), u64::from(*session), u64::from(*run)))
            }
            _ => None,
        })
        .collect()
}

/// Wait until the journal has at least `lines` lines (or the process ended); true if still running.
pub(crate) fn wait_for_lines(child: &mut Child, dir: &Path, lines: usize) -> bool {
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

pub(crate) fn reference() -> BTreeMap<String, String> {
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
    let prov = Provenance::read_file(&dir.join("provenance.json")).unwrap();
    assert!(!prov.plan_hash.is_empty() && !prov.git_commit.is_empty() && prov.ended.is_some());
    assert!(prov.tsc_hz > 0.0 && prov.traces.len() == 2, "{prov:?}");
    assert_eq!(prov.seed, 11);
    assert_eq!(prov.bitstreams["forward"].sha256, "de453f948b7e0ea6e3deb86421683a9644bed11764983f26061cc9d1d141a3cf");
    let model: latency_testbed::model::SimModel =
        serde_json::from_value(prov.testbed.facts.model.clone().unwrap()).unwrap();
    assert_eq!(model.tsc_hz, 2.89e9);
    // Every run file carries its provenance and reads back in the record schema.
    let (batches, meta) =
        latency_results::runfile::read(&dir.join("data/program=forward/session=2/run=3.parquet")).unwrap();
    assert_eq!((meta.program.as_str(), meta.session, meta.run), ("forward", 2, 3));
    assert_eq!(meta.plan_hash, prov.plan_hash);
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows, 20_000 + 14_000, "bypass sees every probe, the pipeline the forwarded 70 %");
    assert_eq!(checksums(&dir), reference(), "same seed, same data");
    let j = journal(&dir);
    assert!(matches!(j.last().unwrap().event, Event::StudyFinished { .. }));
    // The idle gap (2 s) before every run but the first of each session (no settling asked for).
    let waits: Vec<f64> = j
        .iter()
        .filter_map(|e| match e.event {
            Event::Waiting { seconds, .. } => Some(seconds),
            _ => None,
        })
        .collect();
    assert_eq!(waits, vec![2.0; 12 * 3]);
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
    assert!(matches!(j.last().unwrap().event, Event::Interrupted));
    // Cleanup (teardown) ran for the interrupted session.
    assert!(
        j.iter()
            .rev()
            .take(4)
            .any(|e| matches!(e.event, Event::StepFinished { action: latency_plan::Action::AgentStop, .. })),
        "{j:?}"
    );
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
    assert_eq!(j.iter().filter(|e| matches!(e.event, Event::Quarantined { .. })).count(), 2);
    // Only the two sessions with a bad run were brought up again.
    let resumed_from = j.iter().rposition(|e| matches!(e.event, Event::StudyStarted { .. })).unwrap();
    let started: Vec<_> =
        j[resumed_from..].iter().filter(|e| matches!(e.event, Event::SessionStarted { .. })).collect();
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
        String::from_utf8_lossy(&o.stderr).contains("seed: started with --seed 11, this resume uses 12"),
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
    assert!(j.iter().any(|e| matches!(e.event, Event::StepRetried { .. })), "no retries seen");
    if o.status.success() {
        assert_eq!(finished_runs(&dir).len(), RUNS);
    } else {
        assert_eq!(o.status.code(), Some(3), "{err}");
        assert!(err.contains("sim: "), "{err}");
        let failed = j
            .iter()
            .find_map(|e| match e.event {
                Event::StepFailed { action, .. } => Some(action),
                _ => None,
            })
            .unwrap();
        assert!(err.contains(failed.name()), "{err}");
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
    assert_eq!(j.iter().filter(|e| matches!(e.event, Event::RunFailed { .. })).count(), RUNS);
    assert_eq!(j.iter().filter(|e| matches!(e.event, Event::RunRetried { .. })).count(), RUNS * 2);
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
    assert_eq!(j.iter().filter(|e| matches!(e.event, Event::RunFailed { .. })).count(), RUNS);
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
    let finished: Vec<Entry> =
        journal(&dir).into_iter().filter(|e| matches!(e.event, Event::RunFinished { .. })).collect();
    assert_eq!(finished.len(), RUNS);
    for e in &finished {
        let Event::RunFinished { pacing, .. } = e.event else { unreachable!() };
        for (side, pps) in [("sender", pacing.sender_pps), ("receiver", pacing.receiver_pps)] {
            let pps = pps.unwrap();
            assert!((pps - 515.0).abs() < 0.01, "{side}: {pps} in {e:?}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

// --- A results folder that trusts nothing on disk, and a resume that changes nothing when it
// refuses (each test is named after the problem it pins).

/// A finished study of the engine-test plan in a folder of its own.
fn copy_of_finished(name: &str) -> PathBuf {
    let dir = tmp(name);
    let o = run(&dir, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    dir
}

fn read_all(dir: &Path, files: &[&str]) -> Vec<Vec<u8>> {
    files.iter().map(|f| std::fs::read(dir.join(f)).unwrap()).collect()
}

fn summary_of(dir: &Path) -> latency_results::summary::Summary {
    serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap()
}

#[test]
fn a_refused_resume_changes_nothing_and_the_study_still_analyses() {
    let dir = copy_of_finished("refused-resume");
    let kept = ["provenance.json", "journal.jsonl", "summary.json"];
    let before = read_all(&dir, &kept);
    // Another plan (on sim: on its own testbed, its absent traces stop it first), with another seed.
    for extra in [&["--testbed", "sim", "--seed", "12"][..], &["--testbed", "sim"][..]] {
        let o =
            bin().args(["run", "../plans/paper.yaml", "--out"]).arg(&dir).arg("--resume").args(extra).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("nothing was changed") && err.contains("plan: started with a plan of hash"), "{err}");
    }
    let o = run(&dir, &["--resume", "--seed", "12"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(read_all(&dir, &kept), before, "a refused resume writes nothing");
    let o = bin().args(["analyze"]).arg(&dir).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_second_writer_is_refused_with_the_holders_pid_and_command() {
    let dir = copy_of_finished("locked");
    let journal_before = std::fs::read(dir.join("journal.jsonl")).unwrap();
    let lock = latency_results::lock::Lock::acquire(&dir, "a test holding the folder").unwrap();
    for args in [vec!["run", PLAN, "--resume", "--out"], vec!["analyze"], vec!["report"]] {
        let o = bin().args(&args).arg(&dir).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("in use by pid {} (a test holding the folder)", std::process::id())),
            "{args:?}: {err}"
        );
    }
    assert_eq!(std::fs::read(dir.join("journal.jsonl")).unwrap(), journal_before);
    drop(lock);
    assert!(bin().args(["analyze"]).arg(&dir).output().unwrap().status.success(), "free again");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn analyze_counts_only_journaled_runs_and_names_every_stray_or_altered_file() {
    let dir = copy_of_finished("stray");
    let medians =
        |d: &Path| -> Vec<f64> { summary_of(d).programs.values().map(|p| p.latency_ns.at(50.0).unwrap()).collect() };
    let clean = medians(&dir);
    // A checksum run copied where no run of the study is, and a forward run edited to 0 rows.
    let stray = dir.join("data/program=forward/session=3/run=99.parquet");
    std::fs::copy(dir.join("data/program=five_tuple/session=1/run=1.parquet"), &stray).unwrap();
    let (_, meta) = latency_results::runfile::read(&dir.join("data/program=forward/session=1/run=2.parquet")).unwrap();
    let edited = dir.join("data/program=forward/session=1/run=2.parquet");
    std::fs::remove_file(&edited).unwrap();
    latency_results::runfile::write(&edited, &[], &meta, true).unwrap();
    let o = bin().args(["analyze"]).arg(&dir).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let problems = summary_of(&dir).health.problems;
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("data/program=forward/session=3/run=99.parquet: not a run the journal records")),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| p.starts_with("data/program=forward/session=1/run=2.parquet: checksum")),
        "{problems:?}"
    );
    assert_eq!(summary_of(&dir).health.runs, RUNS as u64 - 1, "the altered run is left out, the stray never counted");
    let shifted = medians(&dir);
    for (a, b) in clean.iter().zip(&shifted) {
        assert!((a - b).abs() < 0.5, "one run of ten less moves a median little: {clean:?} vs {shifted:?}");
    }
    // Resume moves both aside and redoes the altered run: the data is the reference again.
    let o = run(&dir, &["--resume"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!stray.exists());
    assert_eq!(checksums(&dir), reference());
    assert!(summary_of(&dir).health.problems.is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_resume_hint_repeats_testbed_and_seed_and_resume_checks_the_testbed() {
    // The paper plan names the OCT inventory; run on sim, stopped, then resumed as printed.
    let dir = tmp("hint");
    let child = bin()
        .args(["run", "../plans/paper.yaml", "--testbed", "sim", "--seed", "5", "--out"])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = child;
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(dir.join("journal.jsonl")).map_or(0, |t| t.lines().count()) < 30 {
        assert!(Instant::now() < deadline && child.try_wait().unwrap().is_none(), "no progress");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130));
    let err = String::from_utf8_lossy(&o.stderr);
    let hint = format!(
        "continue with: orchestrate run ../plans/paper.yaml --out {} --resume --testbed sim --seed 5",
        dir.display()
    );
    assert!(err.contains(&hint), "{err}");
    // Without --testbed the plan's inventory would be used: refused before any connection.
    let journal_before = std::fs::read(dir.join("journal.jsonl")).unwrap();
    let o = bin().args(["run", "../plans/paper.yaml", "--seed", "5", "--resume", "--out"]).arg(&dir).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("testbed: started on `sim` (--testbed sim), this resume would run on `oct-u280`"), "{err}");
    assert_eq!(std::fs::read(dir.join("journal.jsonl")).unwrap(), journal_before);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_study_whose_program_has_no_usable_data_is_reported_by_name_not_a_panic() {
    let dir = copy_of_finished("empty-forward");
    // Every Forward run emptied, journal updated to match: nothing to estimate Forward from.
    let mut journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap();
    for f in walk_parquet(&dir.join("data/program=forward")) {
        let (_, meta) = latency_results::runfile::read(&f).unwrap();
        let old = latency_plan::digest::sha256_file(&f).unwrap();
        std::fs::remove_file(&f).unwrap();
        latency_results::runfile::write(&f, &[], &meta, true).unwrap();
        let new = latency_plan::digest::sha256_file(&f).unwrap();
        journal = journal.replace(&old, &new);
    }
    let journal = journal
        .lines()
        .map(|l| {
            let mut e: Entry = serde_json::from_str(l).unwrap();
            if let Event::RunFinished { program, records, .. } = &mut e.event
                && program == "forward"
            {
                *records = 0;
            }
            serde_json::to_string(&e).unwrap() + "\n"
        })
        .collect::<String>();
    std::fs::write(dir.join("journal.jsonl"), journal).unwrap();
    let o = bin().args(["analyze"]).arg(&dir).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("problem: program `forward`: no usable run data; not analysed"), "{err}");
    let s = summary_of(&dir);
    assert!(s.programs.contains_key("five_tuple") && !s.programs.contains_key("forward"));
    assert_eq!(s.health.failed_runs, 12, "each empty run is a failed run");
    std::fs::remove_dir_all(&dir).unwrap();
}

fn walk_parquet(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk_parquet(&p));
        } else if p.extension().is_some_and(|x| x == "parquet") {
            out.push(p);
        }
    }
    out
}

#[test]
fn compare_judges_p99_even_when_the_plan_reports_only_quartiles() {
    let plan = "tests/fixtures/good/study-quartiles.yaml";
    let (base, cand) = (tmp("quartiles-base"), tmp("quartiles-cand"));
    let o = bin().args(["run", plan, "--out"]).arg(&base).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = bin()
        .args(["run", plan, "--sim-model", "tests/fixtures/good/forward-tail.yaml", "--out"])
        .arg(&cand)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = bin().arg("compare").arg(&base).arg(&cand).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stdout));
    let md = String::from_utf8_lossy(&o.stdout);
    assert!(md.contains("FAIL: ") && md.contains("p99 moved +"), "{md}");
    // A NaN threshold is refused, not a silently disabled check.
    for flag in ["--median-shift-ns", "--p99-shift-ns", "--ks"] {
        let o = bin().arg("compare").arg(&base).arg(&cand).args([flag, "NaN"]).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{flag}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("must be a finite number"), "{flag}");
    }
    std::fs::remove_dir_all(&base).unwrap();
    std::fs::remove_dir_all(&cand).unwrap();
}

#[test]
fn exit_codes_and_messages_for_unusable_folders() {
    // An --out that cannot be created: results could not be written (4), not invalid input.
    let o = bin().args(["run", PLAN, "--out", "/proc/orchestrate-cannot-be-here/x"]).output().unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", String::from_utf8_lossy(&o.stderr));
    // A folder of unrelated files is not called a results folder.
    let dir = tmp("unrelated");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
    let o = run(&dir, &[]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("is not empty and is not a results folder") && !err.contains("--resume"), "{err}");
    // A results folder without data/ says so.
    std::fs::remove_file(dir.join("notes.txt")).unwrap();
    let done = copy_of_finished("no-data");
    std::fs::remove_dir_all(done.join("data")).unwrap();
    let o = bin().arg("analyze").arg(&done).output().unwrap();
    assert_eq!(o.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&o.stderr).contains("data: missing: the folder holds no run data"));
    // `plan | head -1`: a closed pipe ends the output quietly.
    let mut child =
        bin().args(["plan", "../plans/paper.yaml"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("panicked"));
    for d in [dir, done] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

#[test]
fn a_report_recomputes_a_summary_older_than_its_data() {
    let dir = copy_of_finished("stale");
    assert!(summary_of(&dir).health.problems.is_empty());
    let f = dir.join("data/program=forward/session=2/run=1.parquet");
    let mut bytes = std::fs::read(&f).unwrap();
    bytes[200] ^= 0x55;
    std::fs::write(&f, bytes).unwrap();
    let o = bin().arg("report").arg(&dir).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let problems = summary_of(&dir).health.problems;
    assert!(
        problems.iter().any(|p| p.starts_with("data/program=forward/session=2/run=1.parquet: checksum")),
        "{problems:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn json_progress_is_the_journal_on_stdout_and_quiet_leaves_stderr_empty() {
    let dir = tmp("json-log");
    let o = run(&dir, &["--log-format", "json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stderr.is_empty(), "no bars or lines: {}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    // Every line but the last is a journal entry, the same events in the same order.
    let (last, events) = lines.split_last().unwrap();
    let printed: Vec<Event> = events.iter().map(|l| serde_json::from_str::<Entry>(l).unwrap().event).collect();
    let journaled: Vec<Event> = journal(&dir).into_iter().map(|e| e.event).collect();
    assert_eq!(printed, journaled);
    assert!(matches!(printed.first(), Some(Event::StudyStarted { .. })));
    let last: orchestrator::engine::events::Finished = serde_json::from_str(last).unwrap();
    assert_eq!(last.results, dir);
    assert_eq!(last.runs_stored, printed.iter().filter(|e| matches!(e, Event::RunFinished { .. })).count());
    assert_eq!((last.runs_kept, last.runs_failed.len(), last.usable), (0, 0, true));
    std::fs::remove_dir_all(&dir).unwrap();

    let o = run(&dir, &["--quiet"]);
    assert!(o.status.success());
    assert!(o.stderr.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8(o.stdout).unwrap(), format!("{}\n", dir.display()));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `status` on a study stopped mid-session (as a kill leaves it: the journal ends after a run,
/// the next run's file is written but not journaled, the later ones absent) and with one journaled
/// run corrupted, lists exactly the runs `--resume` then redoes, each with why; it changes nothing.
#[test]
fn status_names_exactly_the_runs_a_resume_redoes_and_why() {
    let dir = tmp("status");
    assert!(run(&dir, &[]).status.success());
    let journal_path = dir.join("journal.jsonl");
    let text = std::fs::read_to_string(&journal_path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let finished: Vec<usize> =
        lines.iter().enumerate().filter(|(_, l)| l.contains("\"event\":\"run_finished\"")).map(|(k, _)| k).collect();
    // Cut after the 20th run: the 21st's file stays (written, never journaled), the rest go.
    let cut = finished[19];
    let path_of = |line: &str| {
        serde_json::from_str::<Entry>(line).ok().and_then(|e| match e.event {
            Event::RunFinished { path, .. } => Some(path),
            _ => None,
        })
    };
    for k in finished.iter().skip(21) {
        std::fs::remove_file(dir.join(path_of(lines[*k]).unwrap())).unwrap();
    }
    std::fs::write(&journal_path, lines[..=cut].join("\n") + "\n").unwrap();
    let corrupt = dir.join(path_of(lines[finished[3]]).unwrap());
    let mut bytes = std::fs::read(&corrupt).unwrap();
    bytes[100] ^= 0xff;
    std::fs::write(&corrupt, bytes).unwrap();
    let before = checksums(&dir);

    let o = bin().args(["status"]).arg(&dir).args(["--plan", PLAN, "--json"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let redo: BTreeMap<(String, u64, u64), String> = v["redo"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let key = (
                r["program"].as_str().unwrap().to_string(),
                r["session"].as_u64().unwrap(),
                r["run"].as_u64().unwrap(),
            );
            (key, r["reason"].as_str().unwrap().to_string())
        })
        .collect();
    assert_eq!(redo.len(), RUNS - 20 + 1, "28 never journaled, one corrupted: {redo:#?}");
    let reasons: Vec<&str> = redo.values().map(String::as_str).collect();
    assert_eq!(reasons.iter().filter(|r| r.contains("checksum differs from the journal")).count(), 1);
    assert_eq!(reasons.iter().filter(|r| r.contains("not recorded as complete in the journal")).count(), 1);
    assert_eq!(reasons.iter().filter(|r| **r == "missing: never completed").count(), RUNS - 21);
    assert_eq!(v["lock_holder"], serde_json::Value::Null);
    assert_eq!(checksums(&dir), before, "status changes nothing");
    let o = bin().args(["status"]).arg(&dir).args(["--plan", PLAN]).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains(&format!("a resume redoes {} run(s):", redo.len())), "{text}");

    // What the resume then runs: exactly those.
    let o = run(&dir, &["--resume"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j = journal(&dir);
    let resumed_from = j.iter().rposition(|e| matches!(e.event, Event::StudyStarted { .. })).unwrap();
    let redone: std::collections::BTreeSet<(String, u64, u64)> = j[resumed_from..]
        .iter()
        .filter_map(|e| match &e.event {
            Event::RunFinished { program, session, run, .. } => {
                Some((program.clone(), u64::from(*session), u64::from(*run)))
            }
            _ => None,
        })
        .collect();
    assert_eq!(redone, redo.keys().cloned().collect());
    std::fs::remove_dir_all(&dir).unwrap();
}

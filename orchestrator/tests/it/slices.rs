//! One plan on several testbed slices (`--testbed sim,sim`): the same runs as on one testbed, each
//! session's slice in the journal, resume after a kill, the dry run's assignment, and refusals.

use latency_results::event::Event;
use latency_results::provenance::Provenance;

use crate::common::{orchestrate, stderr, tmp};
use crate::run::{checksums, finished_runs, journal, reference, run, spawn, wait_for_lines};

const TWO: [&str; 2] = ["--testbed", "sim,sim"];

#[test]
fn two_simulated_slices_store_the_same_runs_as_one_and_the_journal_names_each_sessions_slice() {
    let dir = tmp("slices");
    let o = run(&dir, &TWO);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(checksums(&dir), reference(), "every run file as on one testbed");
    let slices: std::collections::BTreeSet<Option<usize>> = journal(&dir)
        .iter()
        .filter_map(|e| match e.event {
            Event::SessionStarted { slice, .. } => Some(slice),
            _ => None,
        })
        .collect();
    assert_eq!(slices, [Some(1), Some(2)].into(), "both slices ran sessions");
    let prov = Provenance::read_file(&dir.join("provenance.json")).unwrap();
    assert_eq!(prov.testbed.name, "sim,sim");
    assert_eq!(prov.testbed.facts.slices.as_ref().map(Vec::len), Some(2));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_study_killed_on_two_slices_resumes_on_them_to_the_same_runs() {
    let dir = tmp("slices-kill");
    let mut child = spawn(&dir, &TWO);
    assert!(wait_for_lines(&mut child, &dir, 120), "finished too early");
    child.kill().unwrap();
    child.wait().unwrap();
    let o = run(&dir, &["--resume", "--testbed", "sim,sim"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(checksums(&dir), reference());
    let runs = finished_runs(&dir);
    let mut unique = runs.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), runs.len(), "no run recorded twice");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_dry_run_assigns_sessions_to_slices_and_predicts_the_wall_time() {
    let o = orchestrate(&["plan", "tests/fixtures/good/study.yaml", "--testbed", "sim,sim", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let a = &s["slices"];
    // 12 sessions of equal predicted length: they alternate, and two slices halve the total.
    let of: Vec<u64> = a["slice_of"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
    assert_eq!(of, [1, 2].repeat(6));
    let (wall, one) = (a["wall_seconds"].as_f64().unwrap(), a["one_slice_seconds"].as_f64().unwrap());
    let total = s["predicted_seconds"]["total"].as_f64().unwrap();
    assert!((one - total).abs() < 1e-6 * total, "{one} vs the schedule's {total}");
    assert!((2.0 * wall - one).abs() < 1e-6 * one, "{wall} vs {one}");
    let text = orchestrate(&["plan", "tests/fixtures/good/study.yaml", "--testbed", "sim,sim"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("2 testbed slices: predicted wall time"), "{text}");
    assert!(text.contains("slice 2 (sim):"), "{text}");
}

#[test]
fn slices_of_mixed_kinds_or_with_adaptive_sessions_are_refused() {
    for (plan, testbed, says) in [
        ("tests/fixtures/good/study.yaml", "sim,../testbeds/emulated.yaml", "all `sim` or all inventories"),
        ("tests/fixtures/good/study.yaml", "../testbeds/emulated.yaml,../testbeds/emulated.yaml", "named twice"),
        ("../plans/fivetuple-ladder.yaml", "sim,sim", "adaptive sessions run on one testbed"),
    ] {
        let out = tmp("slices-refused");
        let o = orchestrate(&["run", plan, "--testbed", testbed, "--out", &out.display().to_string()]);
        assert_eq!(o.status.code(), Some(2), "{testbed}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{testbed}: {}", stderr(&o));
        assert!(!out.exists(), "nothing written");
    }
}

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

/// With `flash: on_change`, a session skips writing the image the session before it left on the
/// card; on two slices that session ran elsewhere, so each slice writes the image of the first
/// session it runs and of every session after another image, whatever the schedule assumed.
#[test]
fn each_slice_writes_the_image_its_card_does_not_hold() {
    let dir = tmp("slices-on-change");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let plan = dir.with_extension("yaml");
    let text = std::fs::read_to_string("tests/fixtures/good/study.yaml")
        .unwrap()
        .replace("../../../../", &format!("{}/", root.display()))
        .replace("  runs: 4\n", "  runs: 4\n  flash: on_change\n");
    std::fs::write(&plan, text).unwrap();
    let o = orchestrate(&[
        "run",
        plan.to_str().unwrap(),
        "--testbed",
        "sim,sim",
        "--quiet",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Per slice, in order: (session index, whether it wrote the image).
    let s: serde_json::Value =
        serde_json::from_slice(&orchestrate(&["plan", plan.to_str().unwrap(), "--testbed", "sim", "--json"]).stdout)
            .unwrap();
    let image = |i: usize| s["sessions"][i]["bitstream"].as_str().unwrap().to_string();
    let mut on: [Vec<(usize, bool)>; 2] = Default::default();
    for e in journal(&dir) {
        match e.event {
            Event::SessionStarted { index, slice: Some(k), .. } => on[k - 1].push((index, false)),
            Event::StepFinished { index, action: latency_plan::Action::Flash, .. } => {
                let k = (0..2).find(|&k| on[k].last().is_some_and(|l| l.0 == index)).unwrap();
                on[k].last_mut().unwrap().1 = true;
            }
            _ => {}
        }
    }
    let mut writes = 0;
    for sessions in &on {
        assert!(!sessions.is_empty(), "{on:?}");
        for (k, &(index, wrote)) in sessions.iter().enumerate() {
            let held = k > 0 && image(sessions[k - 1].0) == image(index);
            assert_eq!(
                wrote,
                !held,
                "session {index} on a card that held {}: {on:?}",
                if held { "its image" } else { "another" }
            );
            writes += usize::from(wrote);
        }
    }
    // More writes than the schedule's three (forward, five_tuple, the null image), at most one a session.
    assert!(writes > 3 && writes <= 12, "{writes}: {on:?}");
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_file(&plan).unwrap();
}

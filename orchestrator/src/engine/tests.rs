//! The engine's unit tests: resuming, and the journal's view of a study.

use super::*;
use latency_results::event::Counts;
use latency_results::event::Entry;
use latency_results::event::Pacing;

fn started() -> StartedWith {
    StartedWith {
        plan_hash: "a".repeat(64),
        seed: 11,
        testbed: "sim".into(),
        testbed_arg: Some("sim".into()),
        sim_model: None,
        tool_version: "0.1.0".into(),
        levels: Vec::new(),
        inputs: BTreeMap::new(),
    }
}

#[test]
fn a_resume_names_every_input_that_changed_appeared_or_went() {
    let mut original = started();
    original.inputs = BTreeMap::from([
        ("trace `t` (t.pcap)".to_string(), "1".repeat(64)),
        ("inventory (i.yaml)".to_string(), "2".repeat(64)),
    ]);
    let mut now = original.clone();
    assert!(original.differences(&now).is_empty());
    now.inputs = BTreeMap::from([
        ("trace `t` (t.pcap)".to_string(), "3".repeat(64)),
        ("simulator model (m.yaml)".to_string(), "4".repeat(64)),
    ]);
    assert_eq!(
        original.differences(&now),
        [
            "inventory (i.yaml) is no longer an input of this plan",
            "trace `t` (t.pcap) changed since the study started (sha256 111111111111 → 333333333333)",
            "simulator model (m.yaml) is a new input",
        ]
    );
    // A journal from before inputs were recorded has nothing to compare.
    assert!(started().differences(&now).is_empty());
}

#[test]
fn a_resume_is_compared_field_by_field_and_says_what_differs() {
    let original = started();
    assert!(original.differences(&original).is_empty());
    let now = StartedWith {
        plan_hash: "b".repeat(64),
        seed: 12,
        testbed: "oct-u280".into(),
        testbed_arg: None,
        sim_model: Some("m.yaml".into()),
        tool_version: "0.2.0".into(),
        levels: vec!["pacing_pps=500".into()],
        inputs: BTreeMap::new(),
    };
    assert_eq!(
        original.differences(&now),
        [
            "plan: started with a plan of hash aaaaaaaaaaaa, this one has bbbbbbbbbbbb; resume with the same plan file",
            "factor levels: started with 0 levels, this plan has 1; added: pacing_pps=500; removed: none",
            "seed: started with --seed 11, this resume uses 12",
            "testbed: started on `sim` (--testbed sim), this resume would run on `oct-u280`",
            "simulator model: started with the built-in model, this resume uses m.yaml",
            "tool version: started with orchestrate 0.1.0, this is 0.2.0; resume with the same version",
        ]
    );
    assert_eq!(original.resume_args(), ["--testbed", "sim", "--seed", "11"]);
}

fn finished(program: &str, run: u32, sha256: &str) -> Entry {
    Entry {
        t: 1,
        event: Event::RunFinished {
            index: 0,
            program: program.into(),
            session: 1,
            run,
            attempt: 1,
            level: None,
            path: ResultsDir::run_rel_path(program, None, 1, run).to_string_lossy().into_owned(),
            sha256: sha256.into(),
            records: 10,
            counts: Counts::default(),
            pacing: Pacing::default(),
            seconds: 1.0,
            histogram_sha256: None,
        },
    }
}

#[test]
fn the_journal_knows_its_first_start_and_the_last_record_of_each_run() {
    let start = |seed| Entry {
        t: 0,
        event: Event::StudyStarted {
            study: "s".into(),
            plan_hash: "a".repeat(64),
            seed,
            testbed: "sim".into(),
            testbed_arg: Some("sim".into()),
            sim_model: None,
            tool_version: "0.1.0".into(),
            levels: Vec::new(),
            inputs: Default::default(),
            sessions: 1,
            runs: 2,
            complete: 0,
            resumed: false,
        },
    };
    let entries = vec![start(11), finished("p", 1, "old"), start(99), finished("p", 1, "new"), finished("p", 2, "x")];
    assert_eq!(StartedWith::from_journal(&entries), Some(started()));
    let done = journal::completed(&entries);
    assert_eq!(done.len(), 2);
    assert_eq!(done[&("p".to_string(), 1, 1)].sha256, "new", "a redone run's last record counts");
    assert_eq!(done[&("p".to_string(), 1, 2)].path, "data/program=p/session=1/run=2.parquet");
}

//! Adaptive sessions on the simulated testbed: `plans/fivetuple-ladder.yaml` with a model of three
//! FiveTuple modes of unequal frequency stops once its rule holds, with every mode's frequency and
//! an interval covering the model's; a resume reaches the same decision.

use std::path::Path;

use latency_results::event::Entry;
use latency_results::event::Event;
use latency_results::summary::Summary;

use crate::cli::assert_invalid;
use crate::common::{orchestrate, stderr, tmp};

const PLAN: &str = "../plans/fivetuple-ladder.yaml";
const MODEL: &str = "../testbeds/sim/fivetuple-3modes.yaml";
/// The model's modes: median and frequency at a bring-up.
const MODES: [(f64, f64); 3] = [(107.0, 0.6), (137.0, 0.3), (167.0, 0.1)];

fn ended(dir: &Path) -> Vec<(u32, bool)> {
    let text = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap();
    text.lines()
        .filter_map(|l| match serde_json::from_str::<Entry>(l).unwrap().event {
            Event::SessionsEnded { sessions, rule_met, .. } => Some((sessions, rule_met)),
            _ => None,
        })
        .collect()
}

fn sessions_stored(dir: &Path, group: &str) -> usize {
    std::fs::read_dir(dir.join(format!("data/program={group}"))).map_or(0, |d| d.count())
}

#[test]
fn the_ladder_stops_when_its_rule_holds_and_reports_each_modes_frequency() {
    let plan = orchestrate(&["plan", PLAN]);
    let text = String::from_utf8_lossy(&plan.stdout);
    assert!(
        text.contains(
            "adaptive sessions: each program is brought up until its stopping rule holds; predicted total between"
        ),
        "{text}"
    );

    let dir = tmp("ladder");
    let o = orchestrate(&["run", PLAN, "--sim-model", MODEL, "--out", dir.to_str().unwrap(), "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let stop = ended(&dir);
    assert_eq!(stop.len(), 1, "{stop:?}");
    let (sessions, rule_met) = stop[0];
    assert!(rule_met && (30..120).contains(&sessions), "{stop:?}");
    assert_eq!(sessions_stored(&dir, "five_tuple"), sessions as usize, "no session after the stop");
    assert_eq!(sessions_stored(&dir, "null-five_tuple_5k"), 10, "the null calibration takes the minimum");

    let s: Summary = serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    let p = &s.programs["five_tuple"];
    assert_eq!(p.modes.len(), 3, "{:?}", p.modes.iter().map(|m| &m.latency_ns).collect::<Vec<_>>());
    let mut modes: Vec<_> = p.modes.iter().collect();
    modes.sort_by(|a, b| a.latency_ns.at(50.0).unwrap().total_cmp(&b.latency_ns.at(50.0).unwrap()));
    let total: usize = modes.iter().map(|m| m.sessions.len()).sum();
    assert_eq!(total, sessions as usize);
    for (m, (median, share)) in modes.iter().zip(MODES) {
        // Each mode's median carries its own bring-ups' scatter (σ ≈ 1 ns each): its interval
        // must cover the model's median, and the estimate lie within a few ns of it.
        let [a, b] = m.median_ci95_ns.unwrap();
        assert!(a <= median && median <= b, "mode at {median} ns: interval [{a}, {b}]");
        assert!((m.latency_ns.at(50.0).unwrap() - median).abs() < 4.0, "{:?}", m.latency_ns);
        let f = m.frequency.unwrap();
        assert!((f - m.sessions.len() as f64 / total as f64).abs() < 1e-12);
        let [lo, hi] = m.frequency_ci95.unwrap();
        assert!(lo <= share && share <= hi, "mode at {median} ns: {share} outside [{lo}, {hi}]");
    }
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("% of bring-ups, 95 % CI"), "{md}");
    // The summary and the report say why the program stopped.
    let st = p.stopping.as_ref().expect("the stopping of an adaptive program");
    assert_eq!((st.sessions, st.rule_met), (sessions, true));
    assert!(st.detail.starts_with(&format!("after {sessions} sessions: 3 reset modes")), "{st:?}");
    assert!(
        md.contains(&format!("Adaptive sessions of five_tuple: {sessions} sessions, its stopping rule met: after")),
        "{md}"
    );

    // A resume after the journal lost its last half decides the same.
    let journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap();
    let lines: Vec<&str> = journal.lines().collect();
    std::fs::write(dir.join("journal.jsonl"), lines[..lines.len() / 2].join("\n") + "\n").unwrap();
    let o = orchestrate(&["run", PLAN, "--sim-model", MODEL, "--out", dir.to_str().unwrap(), "--resume", "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(ended(&dir), vec![(sessions, true)]);
    assert_eq!(sessions_stored(&dir, "five_tuple"), sessions as usize);
}

#[test]
fn adaptive_session_mistakes_are_reported() {
    assert_invalid(
        "tests/fixtures/bad/adaptive.yaml",
        &[
            "tests/fixtures/bad/adaptive.yaml:4:13: `max` (4) is below `min` (8)",
            "tests/fixtures/bad/adaptive.yaml:4:60: unknown key `unseen_below` (did you mean `unseen_mode_below`?)",
        ],
    );
}

//! The runs' reductions (`pairs/`): the summary a study writes from them as its runs land is the
//! one a full analysis of the run files gives, after a resume that redid runs and with reductions
//! missing, damaged or of another run; reductions made again are the engine's to the byte.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::{bin, tmp};
use crate::run::{finished_runs, run, spawn, wait_for_lines};

/// sha256 of every file under `sub`, by relative path.
fn tree(dir: &Path, sub: &str) -> BTreeMap<String, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(rel, latency_plan::digest::sha256_file(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, &dir.join(sub), &mut out);
    out
}

fn summary(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap()
}

/// The summary without what differs between two folders of the same study: when each ran, and
/// the fingerprint of its journal (which holds those times).
fn figures(mut s: serde_json::Value) -> serde_json::Value {
    let o = s.as_object_mut().unwrap();
    o.remove("provenance");
    o.remove("inputs_sha256");
    s
}

fn analyze(dir: &Path) {
    let o = bin().arg("analyze").arg(dir).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn incremental_and_full_analysis_give_identical_summaries() {
    let dir = tmp("incremental");
    // A study killed in its middle, so that the resume redoes the run it was in.
    let mut child = spawn(&dir, &[]);
    assert!(wait_for_lines(&mut child, &dir, 150), "finished too early");
    child.kill().unwrap();
    child.wait().unwrap();
    // One kept run's file damaged (the resume redoes it); reductions of kept runs missing, damaged,
    // and one replaced by another run's.
    let finished = finished_runs(&dir);
    let (program, session, _) = finished
        .iter()
        .find(|(p, s, _)| finished.iter().filter(|(q, t, _)| (q, t) == (p, s)).count() == 4)
        .expect("a session whose four runs ended before the kill");
    let pairs = dir.join(format!("pairs/program={program}/session={session}"));
    let damaged_run = dir.join(format!("data/program={program}/session={session}/run=1.parquet"));
    let mut bytes = std::fs::read(&damaged_run).unwrap();
    bytes[200] ^= 0xff;
    std::fs::write(&damaged_run, bytes).unwrap();
    std::fs::remove_file(pairs.join("run=2.pairs")).unwrap();
    let mut reduction = std::fs::read(pairs.join("run=3.pairs")).unwrap();
    let last = reduction.len() - 10;
    reduction[last] ^= 0x01;
    std::fs::write(pairs.join("run=3.pairs"), reduction).unwrap();
    std::fs::copy(pairs.join("run=1.pairs"), pairs.join("run=4.pairs")).unwrap();

    let o = run(&dir, &["--resume"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let incremental = summary(&dir);
    let runs = tree(&dir, "data").len();
    let reductions = tree(&dir, "pairs");
    assert_eq!(reductions.len(), runs, "one reduction per run file: {reductions:?}");

    // A full analysis: no reduction at hand, every run file decoded and paired; the reductions it
    // makes again are the ones the engine and the resume's analysis wrote.
    std::fs::remove_dir_all(dir.join("pairs")).unwrap();
    analyze(&dir);
    assert_eq!(summary(&dir), incremental, "full analysis against the study's own");
    assert_eq!(tree(&dir, "pairs"), reductions);
    // And from the reductions alone.
    analyze(&dir);
    assert_eq!(summary(&dir), incremental, "analysis from the reductions");

    // The same study never interrupted gives the same figures.
    let whole = tmp("incremental-whole");
    assert!(run(&whole, &[]).status.success());
    assert_eq!(figures(summary(&whole)), figures(incremental));
    assert_eq!(tree(&whole, "pairs"), reductions);
    for d in [dir, whole] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

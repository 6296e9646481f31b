//! `orchestrate design`: a plan's sessions and runs chosen from a dimensioning study.

use std::path::{Path, PathBuf};

use crate::common::{bin, stderr, tmp_dir};

/// The smoke plan copied into `dir` with absolute paths, its sessions set to `sessions`.
fn smoke_in(dir: &Path, sessions: u32) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let text = std::fs::read_to_string(root.join("plans/smoke.yaml"))
        .unwrap()
        .replace("../bitstreams/", &format!("{}/bitstreams/", root.display()))
        .replace("sessions: 2", &format!("sessions: {sessions}"));
    let path = dir.join("plan.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

fn study(plan: &Path, dir: &Path) -> PathBuf {
    let out = dir.join("dimensioning");
    let o = bin().arg("run").arg(plan).args(["--testbed", "sim", "--quiet", "--out"]).arg(&out).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    out
}

#[test]
fn a_design_meets_its_target_in_a_plan_that_loads_and_carries_it() {
    let dir = tmp_dir("design");
    let plan = smoke_in(&dir, 3);
    let from = study(&plan, &dir);
    let out = dir.join("designed.yaml");
    let o = bin()
        .arg("design")
        .arg(&plan)
        .arg("--from")
        .arg(&from)
        .args(["--ci95-ns", "5", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}{}", text, stderr(&o));
    assert!(text.contains("(met)"), "{text}");
    // Every predicted half-width within the target.
    for line in text.lines().filter(|l| l.contains("| ±")) {
        let w: f64 = line.rsplit("±").next().unwrap().trim_end_matches(" |").trim().parse().unwrap();
        assert!(w <= 5.0, "{line}");
    }
    let designed = std::fs::read_to_string(&out).unwrap();
    let mut lines = designed.lines();
    assert_eq!(
        lines.next(),
        Some("# yaml-language-server: $schema=../schemas/plan.schema.json"),
        "the schema line stays first"
    );
    assert!(lines.next().unwrap().starts_with("# Designed by `orchestrate design`"), "{designed}");
    let o = bin().arg("validate").arg(&out).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn a_target_beyond_the_budget_gives_the_best_design_and_exit_1() {
    let dir = tmp_dir("design-budget");
    let plan = smoke_in(&dir, 3);
    let from = study(&plan, &dir);
    let o = bin()
        .arg("design")
        .arg(&plan)
        .arg("--from")
        .arg(&from)
        .args(["--ci95-ns", "0.001", "--budget", "10m"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot be met within the budget"), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("(not met)"));
}

#[test]
fn a_dimensioning_study_of_one_session_is_refused_naming_what_it_lacks() {
    let dir = tmp_dir("design-small");
    let plan = smoke_in(&dir, 1);
    let from = study(&plan, &dir);
    let o = bin().arg("design").arg(&plan).arg("--from").arg(&from).args(["--ci95-ns", "5"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("has no variance components") && err.contains("two sessions of two runs"), "{err}");
    let o = bin().arg("design").arg(&plan).arg("--from").arg(&from).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("give a target (--ci95-ns) or a budget (--budget)"), "{}", stderr(&o));
}

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

/// Run `plan` on the simulator into `out`.
fn run_sim(plan: &Path, out: &Path) {
    let o = bin().arg("run").arg(plan).args(["--testbed", "sim", "--quiet", "--out"]).arg(out).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `orchestrate design PLAN --from FROM`, to which the test adds its options.
fn design(plan: &Path, from: &Path) -> std::process::Command {
    let mut c = bin();
    c.arg("design").arg(plan).arg("--from").arg(from);
    c
}

fn study(plan: &Path, dir: &Path) -> PathBuf {
    let out = dir.join("dimensioning");
    run_sim(plan, &out);
    out
}

#[test]
fn a_design_meets_its_target_in_a_plan_that_loads_and_carries_it() {
    let dir = tmp_dir("design");
    let plan = smoke_in(&dir, 3);
    let from = study(&plan, &dir);
    let out = dir.join("designed.yaml");
    let o = design(&plan, &from).args(["--ci95-ns", "5", "--out"]).arg(&out).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}{}", text, stderr(&o));
    assert!(text.contains("(met)"), "{text}");
    // Every predicted half-width within the target.
    for line in text.lines().filter(|l| l.contains("| ±")) {
        let w: f64 = line.split('|').find_map(|c| c.trim().strip_prefix('±')).unwrap().parse().unwrap();
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
    let o = design(&plan, &from).args(["--ci95-ns", "0.001", "--budget", "10m"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot be met within the budget"), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("(not met)"));
}

#[test]
fn a_dimensioning_study_of_one_session_is_refused_naming_what_it_lacks() {
    let dir = tmp_dir("design-small");
    let plan = smoke_in(&dir, 1);
    let from = study(&plan, &dir);
    let o = design(&plan, &from).args(["--ci95-ns", "5"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("has no variance components") && err.contains("two sessions of two runs"), "{err}");
    let o = design(&plan, &from).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("give a target (--ci95-ns or --as-precise-as-plan) or a budget (--budget)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_design_redraws_every_session_and_replays_at_the_fastest_pacing_of_a_load_sweep() {
    let dir = tmp_dir("design-pacing");
    let plan = smoke_in(&dir, 3);
    let from = study(&plan, &dir);
    // The smoke plan swept from its 10,000 pps: Checksum's pipeline (10 M/s) waits 5.6 ns more at
    // 1 M/s (M/D/1: ρ / (2 μ (1 − ρ)), ρ = 0.1), 50 ns at 5 M/s.
    let sweep_plan = dir.join("sweep.yaml");
    let text = std::fs::read_to_string(&plan).unwrap().replace(
        "programs:",
        "factors:\n  pacing_pps: [10000, 1000000, 5000000]\ndesign: cross\norder: session_level_run\n\nprograms:",
    );
    std::fs::write(&sweep_plan, text).unwrap();
    let sweep = dir.join("sweep");
    run_sim(&sweep_plan, &sweep);
    let out = dir.join("designed.yaml");
    let o = design(&plan, &from)
        .args(["--ci95-ns", "5", "--pacing-within", "8", "--pacing-from"])
        .arg(&sweep)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{printed}{}", stderr(&o));
    assert!(printed.contains("pacing: 1000000 pps"), "{printed}");
    let designed = std::fs::read_to_string(&out).unwrap();
    assert!(designed.contains("pacing_pps: 1000000   # designed (was 10000)"), "{designed}");
    assert!(designed.contains("flash: redraw   # designed"), "{designed}");
    // The designed plan's replays are a hundred times shorter.
    let o = bin().args(["plan", "--json"]).arg(&out).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["sessions"][0]["runs"][0]["replay_s"].as_f64(), Some(0.001));

    // A sweep that did not measure every program of the plan cannot choose for them.
    let forward_only = dir.join("forward-only.yaml");
    let text = std::fs::read_to_string(&sweep_plan).unwrap();
    let cut = text.find("  - name: checksum").unwrap();
    std::fs::write(&forward_only, &text[..cut]).unwrap();
    let partial = dir.join("partial");
    run_sim(&forward_only, &partial);
    let o = design(&plan, &from).args(["--ci95-ns", "5", "--pacing-from"]).arg(&partial).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("did not measure `checksum`"), "{}", stderr(&o));
}

#[test]
fn the_dry_run_prices_steps_as_the_journals_of_studies_measured_them() {
    let dir = tmp_dir("costs-from");
    let plan = smoke_in(&dir, 2);
    // A twin whose flash takes 600 s and boot 45 s.
    let model = dir.join("model.yaml");
    std::fs::write(&model, "step_s: { flash: 600, boot: 45 }\n").unwrap();
    let measured = dir.join("measured");
    let o = bin()
        .arg("run")
        .arg(&plan)
        .args(["--testbed", "sim", "--quiet", "--sim-model"])
        .arg(&model)
        .arg("--out")
        .arg(&measured)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let oct = root.join("testbeds/oct-u280.yaml");
    let dry = |costs: bool| {
        let mut c = bin();
        c.args(["plan", "--json"]).arg(&plan).arg("--testbed").arg(&oct);
        if costs {
            c.arg("--costs-from").arg(&measured);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        (serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap(), stderr(&o))
    };
    let estimate_of = |s: &serde_json::Value, action: &str| {
        s["sessions"][0]["steps"].as_array().unwrap().iter().find(|st| st["action"] == action).unwrap()["estimate_s"]
            .as_f64()
            .unwrap()
    };
    let (before, _) = dry(false);
    let (after, said) = dry(true);
    assert_eq!((estimate_of(&before, "flash"), estimate_of(&before, "boot")), (420.0, 30.0));
    assert_eq!((estimate_of(&after, "flash"), estimate_of(&after, "boot")), (600.0, 45.0));
    // 8 sessions × 195 s more.
    let total = |s: &serde_json::Value| s["predicted_seconds"]["total"].as_f64().unwrap();
    assert!((total(&after) - total(&before) - 8.0 * 195.0).abs() < 1e-6, "{} {}", total(&after), total(&before));
    assert!(said.contains("costs: flash 600.0 s (median of 8 measured; estimate 420.0 s)"), "{said}");
    assert!(said.contains("measured on testbed `sim` and applied to `oct-u280`"), "{said}");
    // The simulator has no estimates to replace.
    let o = bin().args(["plan"]).arg(&plan).args(["--testbed", "sim", "--costs-from"]).arg(&measured).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn as_precise_as_the_plan_targets_each_estimates_own_half_width() {
    let dir = tmp_dir("design-precise");
    let plan = smoke_in(&dir, 3);
    let from = study(&plan, &dir);
    let o = design(&plan, &from).arg("--as-precise-as-plan").output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}{}", stderr(&o));
    assert!(text.contains("what the plan as written (3 sessions × 2 runs) gives it (met)"), "{text}");
    // Each estimate's predicted half-width within its own as the plan is written.
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("| ") && l.contains("±")).collect();
    assert_eq!(rows.len(), 4, "{text}");
    for row in rows {
        let cells: Vec<f64> =
            row.split('|').filter_map(|c| c.trim().strip_prefix('±')).map(|c| c.parse().unwrap()).collect();
        assert!(cells[0] <= cells[1] + 1e-9, "{row}");
    }
}

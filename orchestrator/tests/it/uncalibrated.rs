//! Uncalibrated studies (`analysis.calibration: none`) and the nightly job judged against its
//! plan's reference (`regression.baseline`).

use std::path::{Path, PathBuf};

use latency_results::summary::Summary;

use crate::common::{STEADY, orchestrate, run_steady, stderr, tmp_dir};

/// A one-program plan (Forward, 1 session × 3 runs of 2,000 probes) in `dir`: uncalibrated with
/// `regression` (a YAML block, may be empty), or calibrated by the golden image.
fn plan(dir: &Path, name: &str, calibrated: bool, regression: &str) -> PathBuf {
    let bitstreams = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bitstreams");
    let (null, calibration) = if calibrated {
        (format!(", null: {}/golden_nic.yaml", bitstreams.display()), "null_image")
    } else {
        (String::new(), "none")
    };
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &path,
        format!(
            "study: {name}\ntestbed: sim\nprotocol: {{ sessions: 1, runs: 3, pacing_pps: 2000, idle_gap_s: 1, seed: 1 }}\n\
             traces:\n  fwd: {{ generate: {{ template: forward, count: 2000 }} }}\n\
             programs:\n  - {{ name: forward, bitstream: {}/forward.yaml, trace: fwd{null} }}\n\
             analysis:\n  calibration: {calibration}\n  modes: {{ enabled: false }}\n  bootstrap_resamples: 50\n\
             report:\n  formats: [markdown]\n{regression}",
            bitstreams.display()
        ),
    )
    .unwrap();
    path
}

#[test]
fn an_uncalibrated_study_runs_no_null_and_reports_the_raw_differential() {
    let dir = tmp_dir("uncalibrated");
    let raw = run_steady(plan(&dir, "raw", false, "").to_str().unwrap(), &dir.join("raw"), &[]);
    let cal = run_steady(plan(&dir, "cal", true, "").to_str().unwrap(), &dir.join("cal"), &[]);
    assert_eq!(raw.calibration, latency_plan::Calibration::None);
    assert!(raw.nulls.is_empty() && raw.programs["forward"].null_offset_ns == 0.0, "{:?}", raw.nulls);
    let journal = std::fs::read_to_string(dir.join("raw/journal.jsonl")).unwrap();
    assert!(!journal.contains("null-fwd"), "a null session was run");
    // The twin's Forward: Table I's median 149 ns, and the forward trace's path offset δ = 17 ns
    // (testbeds/sim's model), which the raw differential keeps and the calibration removes.
    let (r, c) =
        (raw.programs["forward"].latency_ns.median().unwrap(), cal.programs["forward"].latency_ns.median().unwrap());
    assert!((r - 166.0).abs() < 2.0 && (c - 149.0).abs() < 2.0, "raw {r}, calibrated {c}");
    let report = std::fs::read_to_string(dir.join("raw/report.md")).unwrap();
    assert!(report.contains("**Table I.** Uncalibrated latency per program"), "{report}");
    // Figures with and without δ are not compared.
    let o = orchestrate(&["compare", dir.join("cal").to_str().unwrap(), dir.join("raw").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("calibrated by `null_image` and the candidate's by `none`"), "{}", stderr(&o));
}

#[test]
fn a_plan_names_no_null_when_uncalibrated() {
    let dir = tmp_dir("uncalibrated-null");
    let path = plan(&dir, "both", true, "");
    let text = std::fs::read_to_string(&path).unwrap().replace("calibration: null_image", "calibration: none");
    std::fs::write(&path, text).unwrap();
    let o = orchestrate(&["validate", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(&format!(
            "{}:7:", path.display()
        )) && stderr(&o).contains("program `forward`: `analysis.calibration: none` runs no null sessions; remove its `null` and `null_trace`"),
        "{}",
        stderr(&o)
    );
}

/// `orchestrate nightly PLAN` on the steady twin (or `model`) into `out`.
fn nightly(plan: &Path, store: &Path, out: &Path, model: &str) -> std::process::Output {
    let args = ["nightly", plan.to_str().unwrap(), "--store", store.to_str().unwrap(), "--sim-model", model];
    orchestrate(&[&args[..], &["--out", out.to_str().unwrap(), "--quiet"]].concat())
}

#[test]
fn the_nightly_job_judges_each_night_against_its_plans_reference() {
    let dir = tmp_dir("nightly-reference");
    let reference = dir.join("reference");
    let regression = format!(
        "regression:\n  baseline: {}\n  thresholds: {{ median_shift_ns: 3 }}\n  noise_corrected: false\n",
        reference.display()
    );
    let night = plan(&dir, "night", false, &regression);
    let store = dir.join("store");
    // Without its reference, nothing is run.
    let o = nightly(&night, &store, &dir.join("night0"), STEADY);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("`regression.baseline` of") && !dir.join("night0").exists(), "{}", stderr(&o));
    // The reference: the same plan with another seed.
    run_steady(plan(&dir, "reference", false, "").to_str().unwrap(), &reference, &["--seed", "2"]);
    let o = nightly(&night, &store, &dir.join("night1"), STEADY);
    assert!(o.status.success(), "{}", stderr(&o));
    let md = std::fs::read_to_string(dir.join("night1/compare.md")).unwrap();
    assert!(md.contains("Baseline `reference`, candidate `night`: **no regression**"), "{md}");
    // Forward 5 ns slower (Table I + 5 in the steady twin): exit 1, compare.md and its JUnit say so.
    let slower = dir.join("slower.yaml");
    let steady = std::fs::read_to_string(STEADY).unwrap();
    std::fs::write(&slower, format!("{steady}programs:\n  forward:\n    - [143, 150, 154, 159, 168, 174]\n")).unwrap();
    let o = nightly(&night, &store, &dir.join("night2"), slower.to_str().unwrap());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let md = std::fs::read_to_string(dir.join("night2/compare.md")).unwrap();
    assert!(md.contains("**REGRESSION**") && md.contains("FAIL: median moved +5."), "{md}");
    let xml = std::fs::read_to_string(dir.join("night2/compare.xml")).unwrap();
    assert!(xml.contains("failures=\"1\""), "{xml}");
    let summary: Summary = serde_json::from_slice(&std::fs::read(dir.join("night2/summary.json")).unwrap()).unwrap();
    assert_eq!(summary.calibration, latency_plan::Calibration::None);
}

#[test]
fn a_program_may_take_bring_ups_of_its_own() {
    let dir = tmp_dir("program-sessions");
    let path = plan(&dir, "own", false, "");
    let text = std::fs::read_to_string(&path).unwrap();
    let two = text
        .replace(
            "programs:\n  - { name: forward,",
            "programs:\n  - { name: fast, bitstream: BS, trace: fwd }\n  - { name: forward, sessions: 3,",
        )
        .replace("BS", &Path::new(env!("CARGO_MANIFEST_DIR")).join("../bitstreams/forward.yaml").display().to_string());
    std::fs::write(&path, &two).unwrap();
    let o = orchestrate(&["plan", path.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let sessions: Vec<(&str, u64)> = v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["program"].as_str().unwrap(), s["session"].as_u64().unwrap()))
        .collect();
    assert_eq!(sessions, [("fast", 1), ("forward", 1), ("forward", 2), ("forward", 3)]);
    // Not with a stopping rule for sessions.
    let adaptive = two.replace("sessions: 1,", "sessions: { min: 2, max: 5, until: { stable_sessions: 2 } },");
    std::fs::write(&path, adaptive).unwrap();
    let o = orchestrate(&["validate", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("program `forward`: its own `sessions` needs `protocol.sessions` to be a count"),
        "{}",
        stderr(&o)
    );
}

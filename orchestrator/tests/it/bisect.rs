//! `orchestrate bisect` on the simulator: sixteen builds of Forward, the eleventh and every later one
//! 5 ns slower (their models' quantiles, Table I + 5).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::{STEADY, orchestrate, stderr, tmp, tmp_dir};

/// Sixteen manifests `forward_b01` … `forward_b16` (Forward's, renamed) in `dir`, a twin in which
/// builds from `slow_from` on are 5 ns slower, and the builds file listing them as `v01` … `v16`.
fn builds(dir: &Path, slow_from: usize) -> (PathBuf, PathBuf) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let forward = std::fs::read_to_string(root.join("bitstreams/forward.yaml")).unwrap();
    let mut model = std::fs::read_to_string(STEADY).unwrap() + "programs:\n";
    let mut list = String::from("program: forward\nbuilds:\n");
    for k in 1..=16 {
        let name = format!("forward_b{k:02}");
        let manifest = forward
            .replace("name: forward\n", &format!("name: {name}\n"))
            .replace("file: bin/", &format!("file: {}/bitstreams/bin/", root.display()));
        std::fs::write(dir.join(format!("{name}.yaml")), manifest).unwrap();
        let q = if k >= slow_from { [143, 150, 154, 159, 168, 174] } else { [138, 145, 149, 154, 163, 169] };
        model.push_str(&format!("  {name}:\n    - {q:?}\n"));
        list.push_str(&format!("  - {{ version: v{k:02}, bitstream: {name}.yaml }}\n"));
    }
    std::fs::write(dir.join("model.yaml"), model).unwrap();
    std::fs::write(dir.join("builds.yaml"), list).unwrap();
    (dir.join("builds.yaml"), dir.join("model.yaml"))
}

fn bisect(builds: &Path, model: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "bisect",
        "tests/fixtures/good/nightly.yaml",
        "--builds",
        builds.to_str().unwrap(),
        "--sim-model",
        model.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ];
    args.extend_from_slice(extra);
    orchestrate(&args)
}

/// Sixteen builds, one 5 ns step at the eleventh: found in at most ⌈log₂ 16⌉ + 1 = 5 studies,
/// each listed; a resumed bisection runs nothing again and names the same build.
#[test]
fn bisection_names_the_first_build_that_moved_in_log_studies() {
    let dir = tmp_dir("bisect");
    let (list, model) = builds(&dir, 11);
    let out = tmp("bisect-out");
    let o = bisect(&list, &model, &out, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&std::fs::read(out.join("bisect.json")).unwrap()).unwrap();
    assert_eq!(v["first_moved_version"], "v11", "{v:#}");
    let steps = v["steps"].as_array().unwrap();
    assert!(steps.len() <= 5, "{} studies", steps.len());
    let built: Vec<u64> = steps.iter().map(|s| s["build"].as_u64().unwrap() + 1).collect();
    assert_eq!(built, [1, 8, 12, 10, 11], "the first, then midpoints");
    for s in steps {
        let slow = s["build"].as_u64().unwrap() + 1 >= 11;
        let shift = s["shift_ns"].as_f64().unwrap();
        assert!((shift - if slow { 5.0 } else { 0.0 }).abs() < 2.0, "{s}");
        assert_eq!(s["moved"].as_array().unwrap().is_empty(), !slow, "{s}");
    }
    let md = std::fs::read_to_string(out.join("bisect.md")).unwrap();
    assert!(md.contains("First build whose latency moved: **v11** (build 11 of 16"), "{md}");
    assert!(String::from_utf8_lossy(&o.stdout).ends_with(&md), "the steps' folders, then the listing");
    // Every step is a study of its own, with the build's manifest.
    let prov: Value = serde_json::from_slice(&std::fs::read(out.join("11-v11/provenance.json")).unwrap()).unwrap();
    assert!(prov["bitstreams"].as_object().unwrap().contains_key("forward_b11"), "{prov:#}");

    // Resumed: every step ended, nothing runs again.
    let o = bisect(&list, &model, &out, &["--resume"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stderr(&o).matches("measured already").count(), 5, "{}", stderr(&o));
    let again: Value = serde_json::from_slice(&std::fs::read(out.join("bisect.json")).unwrap()).unwrap();
    assert_eq!(again["first_moved_version"], "v11");
    // Without --resume, a folder holding a bisection is not overwritten.
    let o = bisect(&list, &model, &out, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("holds a bisection already"), "{}", stderr(&o));
}

/// A builds file that is malformed, too short, names a missing manifest or a program the plan
/// does not have is refused where it says so, before anything runs.
#[test]
fn a_bad_builds_file_is_refused_before_anything_runs() {
    let dir = tmp_dir("bisect-bad");
    let (_, model) = builds(&dir, 11);
    for (text, want) in [
        (
            "program: forward\nbuilds:\n  - { version: v01, bitstream: forward_b01.yaml }\n",
            "builds.yaml:1:1: a bisection needs at least two builds",
        ),
        (
            "program: forward\nbuilds:\n  - { version: v01, bitstream: forward_b01.yaml }\n  - { version: v02, bitstream: nope.yaml }\n",
            "builds.yaml:4:32: file not found: nope.yaml",
        ),
        (
            "program: forward\nbuilds:\n  - { version: v01, bitstream: forward_b01.yaml }\n  - { version: v01, bitstream: forward_b02.yaml }\n",
            "builds.yaml:4:5: version `v01` is listed twice",
        ),
        (
            "program: checksum\nbuilds:\n  - { version: v01, bitstream: forward_b01.yaml }\n  - { version: v02, bitstream: forward_b02.yaml }\n",
            "program `checksum` is not in",
        ),
        ("program: forward\nbuild: []\n", "builds.yaml:2:1: "),
    ] {
        let list = dir.join("builds.yaml");
        std::fs::write(&list, text).unwrap();
        let out = tmp("bisect-bad-out");
        let o = bisect(&list, &model, &out, &[]);
        assert_eq!(o.status.code(), Some(2), "{text}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{text}: {}", stderr(&o));
        assert!(!out.join("01-v01").exists(), "nothing ran");
    }
}

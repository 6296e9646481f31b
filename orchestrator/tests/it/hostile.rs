//! Hostile files and output paths: a FIFO or a link to a device where a run file belongs, an
//! output path that is a device, a FIFO, a symlink or a results folder's own file. Every command
//! refuses at once naming the file, and nothing it points at is replaced.

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::{bin, stderr, tmp, tmp_dir};

/// A finished smoke study on the simulator (4 sessions of 2 runs).
fn smoke_study(name: &str) -> PathBuf {
    let dir = tmp(name);
    let o =
        bin().args(["run", "../plans/smoke.yaml", "--testbed", "sim", "--quiet", "--out"]).arg(&dir).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    dir
}

/// The first run file of a study.
fn a_run_file(dir: &Path) -> PathBuf {
    let mut files: Vec<PathBuf> =
        walk(&dir.join("data")).into_iter().filter(|p| p.extension().is_some_and(|e| e == "parquet")).collect();
    files.sort();
    files.remove(0)
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() { out.extend(walk(&p)) } else { out.push(p) }
    }
    out
}

/// Run `cmd`, killing it after `limit`: its output, or none if it had to be killed.
fn within(mut cmd: Command, limit: Duration) -> Option<Output> {
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let start = Instant::now();
    while start.elapsed() < limit {
        if child.try_wait().unwrap().is_some() {
            return Some(child.wait_with_output().unwrap());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

fn mkfifo(path: &Path) {
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
}

#[test]
fn a_fifo_or_a_device_in_place_of_a_run_file_is_refused_at_once_by_every_reader() {
    let study = smoke_study("hostile-fifo");
    let run = a_run_file(&study);
    let rel = run.strip_prefix(&study).unwrap().display().to_string();
    for (what, make) in [
        ("a FIFO", (|p: &Path| mkfifo(p)) as fn(&Path)),
        ("/dev/zero", |p: &Path| std::os::unix::fs::symlink("/dev/zero", p).unwrap()),
    ] {
        std::fs::remove_file(&run).unwrap();
        make(&run);
        let store = tmp_dir("hostile-store");
        let export = tmp("hostile-export");
        let commands: Vec<(&str, Command)> = vec![
            ("analyze", {
                let mut c = bin();
                c.arg("analyze").arg(&study);
                c
            }),
            ("report", {
                let mut c = bin();
                c.arg("report").arg(&study);
                c
            }),
            ("export", {
                let mut c = bin();
                c.arg("export").arg(&study).args(["--format", "latencylab-csv", "--out"]).arg(&export);
                c
            }),
            ("history add", {
                let mut c = bin();
                c.args(["history", "add"]).arg(&study).arg("--store").arg(&store);
                c
            }),
            ("run --resume", {
                let mut c = bin();
                c.args(["run", "../plans/smoke.yaml", "--testbed", "sim", "--quiet", "--resume", "--out"]).arg(&study);
                c
            }),
        ];
        for (name, cmd) in commands {
            // Without a summary every command must read the run data.
            let _ = std::fs::remove_file(study.join("summary.json"));
            let o = within(cmd, Duration::from_secs(20)).unwrap_or_else(|| panic!("{what}: `{name}` hung"));
            let err = stderr(&o);
            assert!(!err.contains("panicked"), "{what}: {name}: {err}");
            if name == "run --resume" {
                // The resume sets the special file apart and measures that run again.
                assert!(o.status.success(), "{what}: {name}: {err}");
                assert!(std::fs::symlink_metadata(&run).unwrap().file_type().is_file(), "{what}: {name}");
                let journal = std::fs::read_to_string(study.join("journal.jsonl")).unwrap();
                assert!(
                    journal.contains("\"quarantined\"") && journal.contains(&rel),
                    "{what}: no quarantine of {rel}"
                );
            } else if name == "report" {
                // A report is still written, listing the run it could not read among its problems.
                let report = std::fs::read_to_string(study.join("report.md")).unwrap();
                assert!(report.contains(&rel), "{what}: the report does not list {rel}");
            } else {
                assert!(!o.status.success(), "{what}: `{name}` succeeded: {err}");
                assert!(err.contains(&rel), "{what}: `{name}` does not name {rel}: {err}");
            }
        }
    }
}

#[test]
fn an_output_path_is_never_replaced_when_it_is_a_device_a_fifo_or_a_results_folders_file() {
    let study = smoke_study("hostile-out");
    let journal = study.join("journal.jsonl");
    let before = std::fs::read(&journal).unwrap();
    let scratch = tmp_dir("hostile-targets");
    let fifo = scratch.join("out.xml");
    mkfifo(&fifo);
    let link_to_journal = scratch.join("j.xml");
    std::os::unix::fs::symlink(&journal, &link_to_journal).unwrap();
    let store = tmp_dir("hostile-trend-store");
    let add = bin().args(["history", "add"]).arg(&study).arg("--store").arg(&store).output().unwrap();
    assert!(add.status.success(), "{}", stderr(&add));
    for target in [fifo.clone(), journal.clone(), link_to_journal.clone(), study.join("data").join("new.xml")] {
        let outputs: Vec<(&str, Command)> = vec![
            ("compare --junit", {
                let mut c = bin();
                c.arg("compare").arg(&study).arg(&study).arg("--junit").arg(&target);
                c
            }),
            ("trend --junit", {
                let mut c = bin();
                c.arg("trend").arg("--store").arg(&store).arg("--junit").arg(&target);
                c
            }),
            ("trend --html", {
                let mut c = bin();
                c.arg("trend").arg("--store").arg(&store).arg("--html").arg(&target);
                c
            }),
        ];
        for (name, cmd) in outputs {
            let o = within(cmd, Duration::from_secs(20)).unwrap_or_else(|| panic!("`{name}` hung"));
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{name} {}: {err}", target.display());
            assert!(err.contains("regular files") || err.contains("inside the results folder"), "{name}: {err}");
        }
    }
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    assert!(std::fs::symlink_metadata(&link_to_journal).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read(&journal).unwrap(), before, "the journal was overwritten");
    assert!(!study.join("data").join("new.xml").exists());
}

#[test]
fn an_output_given_as_a_bare_file_name_is_written_in_the_current_folder() {
    let study = smoke_study("hostile-bare");
    let cwd = tmp_dir("hostile-cwd");
    let o = bin()
        .current_dir(&cwd)
        .arg("compare")
        .arg(&study)
        .arg(&study)
        .args(["--junit", "compare.xml"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read_to_string(cwd.join("compare.xml")).unwrap().contains("<testsuite"));
}

/// Every numeric value of a simulator model at its edges (zero, negative, huge): the model is
/// refused naming the file, line and column, or the study ends with finite, positive figures.
#[test]
fn no_simulator_model_value_gives_a_nan_or_zero_latency_with_exit_0() {
    let keys = [
        "tsc_hz",
        "poll_phase_ns",
        "dma_jitter_ns",
        "outlier_prob",
        "loss",
        "nic_drop_prob",
        "session_delta_spread_ns",
        "pacing_jitter_ns",
        "reflect_channel_ns",
        "pacing_error",
        "mode_change_prob",
        "line_gbps",
        "step_failure_prob",
        "step_time_scale",
    ];
    let scratch = tmp_dir("hostile-model");
    for key in keys {
        for value in ["0", "-1", "1e300"] {
            let model = scratch.join(format!("{key}={value}.yaml"));
            std::fs::write(&model, format!("# edge\n{key}: {value}\n")).unwrap();
            let out = tmp("hostile-model-run");
            let o = bin()
                .args(["run", "../plans/smoke.yaml", "--testbed", "sim", "--quiet", "--sim-model"])
                .arg(&model)
                .arg("--out")
                .arg(&out)
                .output()
                .unwrap();
            let err = stderr(&o);
            assert!(!err.contains("panicked"), "{key}: {value}: {err}");
            if o.status.code() == Some(2) {
                assert!(err.contains(&format!("{}:2:", model.display())), "{key}: {value}: {err}");
                continue;
            }
            if !o.status.success() {
                // A study that cannot measure (every probe lost, every step failing) says why.
                assert!(
                    err.contains("problem") || err.contains("failed"),
                    "{key}: {value}: exit {:?}: {err}",
                    o.status
                );
                continue;
            }
            let summary: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
            for (name, p) in summary["programs"].as_object().unwrap() {
                for (level, v) in p["latency_ns"].as_object().unwrap() {
                    let v = v.as_f64().unwrap_or(f64::NAN);
                    assert!(v.is_finite() && v > 0.0, "{key}: {value}: {name} {level} = {v}");
                }
            }
        }
    }
}

/// A copy of the smoke plan in `dir` whose forward trace is a pcap file and whose forward image
/// has its manifest in `dir` too (both without declared checksums), with the pcap and manifest.
fn plan_with_files(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let pcap = dir.join("forward.pcap");
    let o = bin()
        .args(["trace", "generate", "--template", "forward", "--count", "1000", "--out"])
        .arg(&pcap)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let manifest = dir.join("forward.yaml");
    let text = std::fs::read_to_string(root.join("bitstreams/forward.yaml")).unwrap();
    std::fs::write(&manifest, text.replace("file: bin/", &format!("file: {}/bitstreams/bin/", root.display())))
        .unwrap();
    let plan = std::fs::read_to_string(root.join("plans/smoke.yaml"))
        .unwrap()
        .replace("../bitstreams/forward.yaml", &manifest.display().to_string())
        .replace("../bitstreams/", &format!("{}/bitstreams/", root.display()))
        .replace(
            "generate: { template: forward, count: 1000, probe_id: latencylab }",
            &format!("pcap: {}", pcap.display()),
        );
    let path = dir.join("plan.yaml");
    std::fs::write(&path, plan).unwrap();
    (path, pcap, manifest)
}

#[test]
fn a_resume_with_a_changed_trace_or_manifest_is_refused_and_changes_nothing() {
    for changed in ["trace", "manifest"] {
        let dir = tmp_dir("hostile-inputs");
        let (plan, pcap, manifest) = plan_with_files(&dir);
        let out = dir.join("results");
        let run = |extra: &[&str]| {
            bin()
                .arg("run")
                .arg(&plan)
                .args(["--testbed", "sim", "--quiet", "--out"])
                .arg(&out)
                .args(extra)
                .output()
                .unwrap()
        };
        let o = run(&[]);
        assert!(o.status.success(), "{}", stderr(&o));
        let o = run(&["--resume"]);
        assert!(o.status.success(), "an unchanged resume: {}", stderr(&o));
        if changed == "trace" {
            std::fs::remove_file(&pcap).unwrap();
            let o = bin()
                .args(["trace", "generate", "--template", "forward", "--count", "999", "--out"])
                .arg(&pcap)
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", stderr(&o));
        } else {
            let text = std::fs::read_to_string(&manifest).unwrap();
            std::fs::write(&manifest, text.replace("vendor_bound_cycles: 55", "vendor_bound_cycles: 60")).unwrap();
        }
        let before: Vec<Vec<u8>> =
            ["journal.jsonl", "provenance.json"].iter().map(|f| std::fs::read(out.join(f)).unwrap()).collect();
        let o = run(&["--resume"]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{changed}: {err}");
        let named = if changed == "trace" { pcap.display().to_string() } else { manifest.display().to_string() };
        assert!(err.contains(&named) && err.contains("changed since the study started"), "{changed}: {err}");
        let after: Vec<Vec<u8>> =
            ["journal.jsonl", "provenance.json"].iter().map(|f| std::fs::read(out.join(f)).unwrap()).collect();
        assert!(before == after, "{changed}: the refused resume changed the folder");
    }
}

#[test]
fn a_summary_names_its_first_figure_that_is_not_finite() {
    use latency_results::summary::Summary;
    let study = smoke_study("hostile-nonfinite");
    let text = std::fs::read_to_string(study.join("summary.json")).unwrap();
    let good: Summary = serde_json::from_str(&text).unwrap();
    assert_eq!(good.non_finite(), None);
    let mut s = good.clone();
    s.programs.get_mut("forward").unwrap().latency_ns.insert(50.0, f64::NAN);
    assert_eq!(s.non_finite().as_deref(), Some("programs.forward.latency_ns.p50"));
    let mut s = good.clone();
    s.programs.get_mut("checksum").unwrap().median_ci95_ns[1] = f64::INFINITY;
    assert_eq!(s.non_finite().as_deref(), Some("programs.checksum.median_ci95_ns[1]"));
    let mut s = good;
    s.programs.get_mut("forward").unwrap().sessions[1].median_ns = f64::NAN;
    assert_eq!(s.non_finite().as_deref(), Some("programs.forward.sessions[1].median_ns"));
}

#[test]
fn a_tsc_rate_that_is_not_a_positive_number_is_refused_naming_the_file_and_key() {
    let study = smoke_study("hostile-rate");
    let path = study.join("provenance.json");
    let good = std::fs::read_to_string(&path).unwrap();
    for bad in ["-2890000000.0", "0.0", "1.0"] {
        std::fs::write(&path, good.replace("\"tsc_hz\": 2890000000.0", &format!("\"tsc_hz\": {bad}"))).unwrap();
        assert_ne!(std::fs::read_to_string(&path).unwrap(), good, "the fixture has no tsc_hz to replace");
        let o = bin().arg("analyze").arg(&study).output().unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(4), "{bad}: {err}");
        assert!(err.contains("provenance.json") && err.contains("`tsc_hz`"), "{bad}: {err}");
    }
}

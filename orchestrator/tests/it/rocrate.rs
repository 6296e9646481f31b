//! Every results folder is a Workflow Run RO-Crate: `rocrate-validator` (PyPI `roc-validator`,
//! installed by `scripts/test.sh`, its RO-Crate 1.1 context cached by
//! `scripts/rocrate-seed-cache.py`) passes it at the REQUIRED level of the Provenance Run Crate
//! profile 0.5 (with the Process and Workflow Run Crate and Workflow RO-Crate profiles it builds
//! on): the smoke study on the simulator and the imported LatencyLab sample.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::{orchestrate, runs_here, stderr, tmp};

/// The validator, when the test machine has it.
pub(crate) fn validator() -> Option<PathBuf> {
    let path = std::env::var_os("LATENCY_TEST_ROCRATE")
        .map_or_else(|| PathBuf::from("/opt/latency-rocrate-venv/bin/rocrate-validator"), PathBuf::from);
    let needs = format!("{} (scripts/test.sh installs roc-validator and seeds its cache)", path.display());
    runs_here(path.is_file(), &needs).then_some(path)
}

/// `rocrate-validator` on `dir` with `profile`: passed, and its issues.
pub(crate) fn validate(validator: &Path, dir: &Path, profile: &str) -> (bool, String) {
    let o = Command::new(validator)
        .args(["-y", "validate", "--offline", "-p", profile, "-f", "json"])
        .arg(dir)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!("{e}: {} {}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
    });
    (o.status.success() && report["passed"] == true, serde_json::to_string_pretty(&report["issues"]).unwrap())
}

#[test]
fn results_folders_are_valid_workflow_run_crates() {
    let Some(v) = validator() else { return };
    let smoke = tmp("crate-smoke");
    let o =
        orchestrate(&["run", "../plans/smoke.yaml", "--testbed", "sim", "--out", smoke.to_str().unwrap(), "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let imported = tmp("crate-import");
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/latencylab");
    let o = orchestrate(&["import", "latencylab", fixture, "--out", imported.to_str().unwrap()]);
    assert!(o.status.code().is_some_and(|c| c <= 1), "{}", stderr(&o));
    for (dir, workflow) in [(&smoke, "plan.yaml"), (&imported, "import.md")] {
        let text = std::fs::read_to_string(dir.join("ro-crate-metadata.json")).unwrap();
        let meta: Value = serde_json::from_str(&text).unwrap();
        for profile in ["workflow-run-crate-0.5", "provenance-run-crate-0.5"] {
            let (passed, issues) = validate(&v, dir, profile);
            assert!(passed, "{} at {profile}: {issues}", dir.display());
        }
        // From the typed provenance: the plan as the workflow (for imported data, the description of
        // the procedure that measured them), each run file with its checksum.
        let graph = meta["@graph"].as_array().unwrap();
        let entity = |id: &str| graph.iter().find(|e| e["@id"] == id).unwrap_or_else(|| panic!("no {id}"));
        assert_eq!(entity("./")["mainEntity"]["@id"], workflow);
        let journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap();
        let finished: Vec<Value> = journal
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|e| e["event"] == "run_finished")
            .collect();
        assert!(!finished.is_empty());
        for run in finished {
            assert_eq!(entity(run["path"].as_str().unwrap())["sha256"], run["sha256"], "{run}");
        }
    }
    // A folder the crate does not describe fails: a file listed but gone.
    let report = smoke.join("report.md");
    std::fs::remove_file(&report).unwrap();
    let (passed, issues) = validate(&v, &smoke, "provenance-run-crate-0.5");
    assert!(!passed && issues.contains("report.md"), "{issues}");
}

/// The crate's checksums are those of the files as they are, each computed here from the file's
/// bytes: for the run files, whose checksums the crate takes from the analysis that has just read
/// them, and for every other file; a run file damaged after the study is listed with the checksum
/// of its bytes, not the journal's.
#[test]
fn the_crate_holds_the_checksum_of_each_file_as_it_is() {
    let dir = tmp("crate-checksums");
    let o = orchestrate(&["run", "../plans/smoke.yaml", "--testbed", "sim", "--out", dir.to_str().unwrap(), "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let run = "data/program=forward/session=1/run=1.parquet";
    let mut bytes = std::fs::read(dir.join(run)).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(dir.join(run), &bytes).unwrap();
    let o = orchestrate(&["analyze", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains(&format!("{run}: checksum")), "{}", stderr(&o));
    let meta: Value = serde_json::from_slice(&std::fs::read(dir.join("ro-crate-metadata.json")).unwrap()).unwrap();
    let files: Vec<(&str, &str)> = meta["@graph"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| Some((e["@id"].as_str()?, e["sha256"].as_str()?)))
        .collect();
    assert!(files.iter().any(|&(id, _)| id == run), "{files:?}");
    let runs = files.iter().filter(|(id, _)| id.starts_with("data/")).count();
    assert!(runs >= 4, "the smoke study's run files: {runs}");
    for (id, sha256) in files {
        let bytes = std::fs::read(dir.join(id)).unwrap_or_else(|e| panic!("{id}: {e}"));
        assert_eq!(sha256, latency_plan::digest::sha256_hex(&bytes), "{id}");
    }
}

/// `export --format ro-crate`: the paper study on the simulator as one zip, which Python's
/// zipfile reads back entry by entry (each file's bytes as in the folder) and `rocrate-validator`
/// passes once unpacked; a private key or SSH key that found its way into the folder is left out
/// and named, and an existing zip is never overwritten.
#[test]
fn the_paper_study_exports_as_one_valid_crate_zip_without_keys() {
    let Some(v) = validator() else { return };
    let Some(python) = crate::common::test_python() else { return };
    let dir = tmp("crate-paper");
    let o = orchestrate(&["run", "../plans/paper.yaml", "--testbed", "sim", "--out", dir.to_str().unwrap(), "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Keys that must not leave: a private key under a log name, a host key by its name.
    std::fs::create_dir_all(dir.join("logs/leak")).unwrap();
    std::fs::write(dir.join("logs/leak/step.log"), "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n").unwrap();
    std::fs::write(dir.join("logs/leak/ssh_host_ed25519_key.pub"), "ssh-ed25519 AAAAC3Nz host\n").unwrap();
    let zip = tmp("crate-paper-zip").with_extension("zip");
    let o = orchestrate(&["export", dir.to_str().unwrap(), "--format", "ro-crate", "--out", zip.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("left out: logs/leak/step.log: holds a private key"), "{err}");
    assert!(err.contains("left out: logs/leak/ssh_host_ed25519_key.pub: named as a key"), "{err}");
    // Python's zipfile: every entry, its bytes those of the folder's file; no key among them.
    let unpacked = tmp("crate-paper-unpacked");
    let check = "import sys, zipfile, pathlib\n\
                 z = zipfile.ZipFile(sys.argv[1]); assert z.testzip() is None\n\
                 root = pathlib.Path(sys.argv[2]); names = z.namelist()\n\
                 assert not any('leak' in n for n in names), names\n\
                 for n in names:\n    if n != 'ro-crate-metadata.json': assert z.read(n) == (root / n).read_bytes(), n\n\
                 z.extractall(sys.argv[3]); print(len(names))";
    let o = Command::new(python).args(["-c", check]).arg(&zip).arg(&dir).arg(&unpacked).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let entries: usize = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    assert!(entries > 400, "the paper study's 400 run files and the rest: {entries}");
    let (passed, issues) = validate(&v, &unpacked, "provenance-run-crate-0.5");
    assert!(passed, "{issues}");
    let o = orchestrate(&["export", dir.to_str().unwrap(), "--format", "ro-crate", "--out", zip.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("exists"), "{}", stderr(&o));
}

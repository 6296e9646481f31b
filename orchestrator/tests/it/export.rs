//! `orchestrate export --format latencylab-csv` of studies run on the simulator: every check
//! before a file is written (tags two groups share, files that exist), the export built beside
//! its destination and moved into place whole, into a new folder or one that holds other files.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::{orchestrate, stderr, tmp, tmp_dir};

/// Every file under `dir`, relative to it, sorted.
fn files(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.push(p.strip_prefix(root).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    let mut out = Vec::new();
    if dir.exists() {
        walk(dir, dir, &mut out);
    }
    out.sort();
    out
}

/// Whatever an export left beside `out` (its staging folder, if any).
fn beside(out: &Path) -> Vec<String> {
    let name = out.file_name().unwrap().to_string_lossy().into_owned();
    std::fs::read_dir(out.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(&name) && *n != name)
        .collect()
}

fn export(study: &Path, out: &Path) -> Output {
    orchestrate(&["export", study.to_str().unwrap(), "--format", "latencylab-csv", "--out", out.to_str().unwrap()])
}

/// A study on the simulator of `programs` (name, bitstream), one session of two runs each.
fn study(name: &str, programs: &[(&str, &str)]) -> PathBuf {
    let dir = tmp_dir(name);
    let bitstreams = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("bitstreams");
    let mut plan = format!(
        "study: {name}\ntestbed: sim\nprotocol: {{ sessions: 1, runs: 2, pacing_pps: 1000, idle_gap_s: 0, seed: 3 }}\n\
         traces:\n  fwd:\n    generate: {{ template: forward, count: 200 }}\nprograms:\n"
    );
    for (program, bitstream) in programs {
        plan.push_str(&format!(
            "  - name: {program}\n    bitstream: {b}/{bitstream}.yaml\n    trace: fwd\n    \"null\": {b}/golden_nic.yaml\n",
            b = bitstreams.display()
        ));
    }
    plan.push_str("report:\n  formats: [markdown]\n");
    std::fs::write(dir.join("plan.yaml"), plan).unwrap();
    let results = dir.join("results");
    let o =
        orchestrate(&["run", dir.join("plan.yaml").to_str().unwrap(), "--out", results.to_str().unwrap(), "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    results
}

/// Programs `forward` (LatencyLab's tag FWD) and `FWD` (no tag of LatencyLab's: its own name)
/// would export into one folder: refused before a file is written, naming both and the tag.
#[test]
fn two_programs_exporting_under_one_tag_are_refused_before_anything_is_written() {
    let results = study("export-collide", &[("forward", "forward"), ("FWD", "forward")]);
    let out = tmp("export-collide-out");
    let o = export(&results, &out);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        "error: programs `forward` and `FWD` would both export as tag `FWD` (data/tsc/programs/FWD_s<n>/): rename one \
         of them in the plan; nothing was exported\n"
    );
    assert!(!out.exists(), "nothing written: {:?}", files(&out));
    assert!(beside(&out).is_empty(), "{:?}", beside(&out));
    std::fs::remove_dir_all(results.parent().unwrap()).unwrap();
}

/// A file of the export that exists already is found before anything is written, even when it
/// is the last one the export would write; an existing folder's other files are kept, and the
/// export lands in it whole.
#[test]
fn an_export_writes_every_file_or_none() {
    let results = study("export-whole", &[("forward", "forward"), ("checksum", "checksum")]);
    let fresh = tmp("export-whole-fresh");
    let o = export(&results, &fresh);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let all = files(&fresh);
    assert_eq!(
        all,
        [
            "data/tsc/null/null-fwd_s1/f_run01.csv",
            "data/tsc/null/null-fwd_s1/f_run02.csv",
            "data/tsc/programs/CS_s1/f_run01.csv",
            "data/tsc/programs/CS_s1/f_run02.csv",
            "data/tsc/programs/FWD_s1/f_run01.csv",
            "data/tsc/programs/FWD_s1/f_run02.csv",
        ]
    );
    assert!(beside(&fresh).is_empty(), "{:?}", beside(&fresh));

    // Into a folder holding the last file the export writes (and another of its own): refused,
    // naming the file, and the folder is as it was.
    let last = "data/tsc/null/null-fwd_s1/f_run02.csv";
    let used = tmp_dir("export-whole-used");
    std::fs::create_dir_all(used.join(last).parent().unwrap()).unwrap();
    std::fs::write(used.join(last), "mine\n").unwrap();
    std::fs::write(used.join("README"), "LatencyLab\n").unwrap();
    let o = export(&results, &used);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        format!("error: {} exists and is never overwritten; nothing was exported\n", used.join(last).display())
    );
    assert_eq!(files(&used), ["README", last]);
    assert_eq!(std::fs::read_to_string(used.join(last)).unwrap(), "mine\n");
    assert!(beside(&used).is_empty(), "{:?}", beside(&used));

    // Without it, the export joins the folder's own files, identical to the fresh one.
    std::fs::remove_file(used.join(last)).unwrap();
    let o = export(&results, &used);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut expected = all.clone();
    expected.insert(0, "README".into());
    assert_eq!(files(&used), expected);
    for f in &all {
        assert_eq!(std::fs::read(used.join(f)).unwrap(), std::fs::read(fresh.join(f)).unwrap(), "{f}");
    }
    assert!(beside(&used).is_empty(), "{:?}", beside(&used));
    for d in [results.parent().unwrap(), &fresh, &used] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

//! Helpers shared by the integration tests: the `orchestrate` binary, run from the crate's folder
//! (where the fixtures' relative paths start), fresh temporary paths, and what a test needs of
//! the machine ([`runs_here`]: a test that cannot run here fails under CI and is skipped with a
//! `SKIPPED` line elsewhere, never passed in silence).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use latency_results::summary::Summary;

/// `orchestrate`, run from the orchestrator crate's folder.
pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_orchestrate"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

/// Run `orchestrate` with `args` to completion.
pub fn orchestrate(args: &[&str]) -> Output {
    bin().args(args).output().expect("run orchestrate")
}

/// The steady twin: the simulator without the scatter between bring-ups and runs, which one or
/// two bring-ups cannot average out (σ ≈ 4 ns from study to study on the calibrated twin), for
/// tests of mechanics (pairing, histograms, the history), not of a plan's design.
pub const STEADY: &str = "tests/fixtures/good/steady-bringups.yaml";

/// `orchestrate run PLAN` on the [`STEADY`] twin into `dir`, with `extra` options; its summary.
pub fn run_steady(plan: &str, dir: &Path, extra: &[&str]) -> Summary {
    let out = dir.to_str().expect("a UTF-8 temporary path");
    let mut args = vec!["run", plan, "--sim-model", STEADY, "--out", out, "--quiet"];
    args.extend_from_slice(extra);
    let o = orchestrate(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice(&std::fs::read(dir.join("summary.json")).expect("a summary")).expect("a summary")
}

/// Standard error of a finished command, as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A fresh path in the temporary folder, unique to this call, that does not exist yet (a results
/// folder must not exist, or be empty, before a study or an import writes it).
pub fn tmp(name: &str) -> PathBuf {
    let dir = tempfile::Builder::new().prefix(&format!("orchestrate-{name}-")).tempdir().expect("a temporary folder");
    let path = dir.keep();
    std::fs::remove_dir(&path).expect("remove the empty folder");
    path
}

/// Whether the calling test can run here, `available` saying whether what it `needs` is there.
/// When it is not, the test fails under CI (the environment variable `CI` set: a CI machine must
/// provide everything the tests use), and elsewhere prints one line `SKIPPED <test>: needs
/// <needs>` on stderr and returns false, upon which the test returns at once. A test that can
/// never run in CI is `#[ignore = "why"]` instead.
#[track_caller]
pub fn runs_here(available: bool, needs: &str) -> bool {
    requirement(None, available, needs)
}

/// [`runs_here`] for a `part` of the calling test, which goes on without it: fails under CI,
/// elsewhere prints `SKIPPED <test> (<part>): needs <needs>`.
#[track_caller]
pub fn part_runs_here(part: &str, available: bool, needs: &str) -> bool {
    requirement(Some(part), available, needs)
}

#[track_caller]
fn requirement(part: Option<&str>, available: bool, needs: &str) -> bool {
    if available {
        return true;
    }
    // libtest runs each test on a thread named after it (also under nextest).
    let mut test = std::thread::current().name().unwrap_or("this test").to_owned();
    if let Some(part) = part {
        test = format!("{test} ({part})");
    }
    assert!(std::env::var_os("CI").is_none(), "{test}: CI must provide {needs}");
    eprintln!("SKIPPED {test}: needs {needs}");
    false
}

/// Whether `tool` is on the PATH.
#[allow(dead_code, reason = "the end-to-end test binary uses it; `it` shares this module")]
pub fn have(tool: &str) -> bool {
    Command::new("sh").arg("-c").arg(format!("command -v {tool}")).output().is_ok_and(|o| o.status.success())
}

/// Whether the tests run as root.
#[allow(dead_code, reason = "the end-to-end test binary uses it; `it` shares this module")]
pub fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// The Python with the other tools that read our files (DuckDB, pyarrow, pandas,
/// check-jsonschema, scapy, jumpavg, pyspark), which `scripts/test.sh` installs; none when it is
/// missing ([`runs_here`]: the calling test fails under CI, else is skipped with a notice).
#[track_caller]
pub fn test_python() -> Option<PathBuf> {
    let python = std::env::var_os("LATENCY_TEST_PYTHON")
        .map_or_else(|| PathBuf::from("/opt/latency-test-venv/bin/python"), PathBuf::from);
    let needs = format!(
        "{} (scripts/test.sh installs DuckDB, pyarrow, pandas, check-jsonschema, scapy, jumpavg and pyspark there; or \
         set LATENCY_TEST_PYTHON)",
        python.display()
    );
    runs_here(python.is_file(), &needs).then_some(python)
}

/// A fresh, empty folder in the temporary folder (kept after the test, for inspection).
pub fn tmp_dir(name: &str) -> PathBuf {
    let path = tmp(name);
    std::fs::create_dir_all(&path).expect("create the folder");
    path
}

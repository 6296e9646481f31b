//! Helpers shared by the integration tests: the `orchestrate` binary, run from the crate's folder
//! (where the fixtures' relative paths start), and fresh temporary paths.

use std::path::PathBuf;
use std::process::{Command, Output};

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

/// The Python with the other tools that read our files (DuckDB, pyarrow, pandas,
/// check-jsonschema, scapy), which `scripts/test.sh` installs.
pub fn test_python() -> PathBuf {
    let python = std::env::var_os("LATENCY_TEST_PYTHON")
        .map_or_else(|| PathBuf::from("/opt/latency-test-venv/bin/python"), PathBuf::from);
    assert!(
        python.is_file(),
        "{} not found: scripts/test.sh installs DuckDB, pyarrow, pandas, check-jsonschema and scapy there (or set \
         LATENCY_TEST_PYTHON)",
        python.display()
    );
    python
}

/// A fresh, empty folder in the temporary folder (kept after the test, for inspection).
pub fn tmp_dir(name: &str) -> PathBuf {
    let path = tmp(name);
    std::fs::create_dir_all(&path).expect("create the folder");
    path
}

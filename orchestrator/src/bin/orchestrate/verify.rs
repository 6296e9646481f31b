//! `orchestrate verify DIR`: whether a results folder's reports follow from its data, without
//! trusting the folder. Every run file is hashed again against the journal's checksum; the
//! analysis runs again on the run files (never on the runs' reductions, which it neither reads nor
//! writes) and its summary is compared with `summary.json` (numbers equal
//! within a relative 1e-9, everything else exactly); the reports are rendered again from
//! `summary.json` and compared with those in the folder. Nothing in the folder is written. Exit 1
//! naming each difference.

use std::path::Path;

use latency_results::ResultsDir;
use latency_results::journal;
use orchestrator::exit::ExitStatus;

use crate::Failure;
use crate::progress;

/// Relative tolerance on the numbers of a summary analysed again (floating-point sums may be
/// taken in another order).
pub(crate) const TOLERANCE: f64 = 1e-9;

pub(crate) fn verify(dir: &Path) -> Result<(), Failure> {
    let rd = ResultsDir::open(dir)?;
    let mut differences = Vec::new();

    // The run files, against the journal.
    let entries = journal::read(&rd.journal_path())?;
    let completed = journal::completed(&entries);
    for c in completed.values() {
        let path = rd.root().join(&c.path);
        match latency_plan::digest::sha256_file(&path) {
            Ok(h) if h == c.sha256 => {}
            Ok(h) => differences.push(format!("{}: sha256 {h}, the journal recorded {}", c.path, c.sha256)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                differences.push(format!("{}: missing (the journal recorded it finished)", c.path));
            }
            Err(e) => differences.push(format!("{}: {e}", c.path)),
        }
    }
    progress(format_args!("verify: {} run files against the journal", completed.len()));

    // The summary, analysed again.
    let written = latency_analysis::written_summary(&rd);
    match (&written, latency_analysis::analyze_from(&rd, latency_analysis::load::Reductions::Ignored)) {
        (None, _) => differences.push("summary.json: missing or unreadable".into()),
        (Some(_), Err(e)) => differences.push(format!("the analysis of the data failed: {e}")),
        (Some(w), Ok(again)) => {
            let (w, again) = (serde_json::to_value(w), serde_json::to_value(&again));
            if let (Ok(w), Ok(again)) = (w, again) {
                diff("summary.json", &w, &again, &mut differences);
            }
        }
    }
    progress(format_args!("verify: summary.json against the data analysed again"));

    // The reports, rendered again from summary.json.
    if let Some(summary) = &written {
        let spec = summary.provenance.as_ref().map(|p| p.report.clone()).unwrap_or_default();
        let scratch = tempdir()?;
        let rendered = latency_report::render(summary, &spec.formats, spec.template.as_deref(), &scratch)
            .map_err(|e| Failure::Exit(ExitStatus::Results, e.to_string()))?;
        for file in rendered {
            let rel = file.strip_prefix(&scratch).unwrap_or(&file);
            let theirs = std::fs::read(rd.root().join(rel));
            match theirs {
                Ok(bytes) if std::fs::read(&file).is_ok_and(|ours| ours == bytes) => {}
                Ok(_) => differences.push(format!("{}: not the report of summary.json", rel.display())),
                Err(_) => differences.push(format!("{}: missing", rel.display())),
            }
        }
        let _ = std::fs::remove_dir_all(&scratch);
        progress(format_args!("verify: reports against summary.json"));
    }

    if differences.is_empty() {
        crate::print_out(&format!("{}: verified\n", dir.display()))?;
        return Ok(());
    }
    for d in &differences {
        eprintln!("differs: {d}");
    }
    Err(Failure::Exit(
        ExitStatus::ChecksFailed,
        format!(
            "{}: {} difference(s); the reports do not follow from the data as they stand",
            dir.display(),
            differences.len()
        ),
    ))
}

/// A scratch folder outside the results.
fn tempdir() -> Result<std::path::PathBuf, Failure> {
    let dir = std::env::temp_dir().join(format!("orchestrate-verify-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| Failure::Exit(ExitStatus::Results, format!("{}: {e}", dir.display())))?;
    Ok(dir)
}

/// The differences between `written` and `again` at `path`, each named by its JSON path.
fn diff(path: &str, written: &serde_json::Value, again: &serde_json::Value, out: &mut Vec<String>) {
    use serde_json::Value;
    match (written, again) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                match b.get(k) {
                    Some(w) => diff(&format!("{path}.{k}"), v, w, out),
                    None => out.push(format!("{path}.{k}: not in the analysis of the data")),
                }
            }
            for k in b.keys().filter(|k| !a.contains_key(*k)) {
                out.push(format!("{path}.{k}: missing, the analysis of the data gives it"));
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff(&format!("{path}[{i}]"), x, y, out);
            }
        }
        (Value::Number(a), Value::Number(b)) => {
            let (x, y) = (a.as_f64().unwrap_or(f64::NAN), b.as_f64().unwrap_or(f64::NAN));
            if (x - y).abs() > TOLERANCE * x.abs().max(y.abs()) {
                out.push(format!("{path}: {x} written, {y} from the data"));
            }
        }
        (a, b) if a != b => out.push(format!("{path}: {a} written, {b} from the data")),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_are_named_by_their_json_path() {
        let a = serde_json::json!({"p": {"median": 149.0, "q": [1.0, 2.0], "name": "f"}, "x": 1});
        let b = serde_json::json!({"p": {"median": 149.0 * (1.0 + 1e-12), "q": [1.0, 2.5], "name": "g"}, "y": 1});
        let mut out = Vec::new();
        diff("s", &a, &b, &mut out);
        assert_eq!(
            out,
            [
                "s.p.name: \"f\" written, \"g\" from the data",
                "s.p.q[1]: 2 written, 2.5 from the data",
                "s.x: not in the analysis of the data",
                "s.y: missing, the analysis of the data gives it"
            ]
        );
    }
}

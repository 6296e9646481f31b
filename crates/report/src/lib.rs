//! Reports (HTML, Markdown) from a summary, laid out like a paper's evaluation section: provenance,
//! the Table I equivalent (latency quantiles per program and reset mode against the vendor bound),
//! figures, run health and the method; the trend page of the results history ([`trend`]); and
//! the page comparing two studies ([`compare`]).
//!
//! May touch: the report files it is asked to write (never a results folder's data, journal or
//! provenance). Must not: reach a host, run a study, compute statistics.
//!
//! `report.html` is one self-contained file (inline CSS and SVG, no scripts, nothing fetched);
//! `report.md` references its figures as `figures/<id>.svg` next to it.
//!
//! Templates are [minijinja](https://docs.rs/minijinja) templates built into the binary
//! (`templates/report.html.j2`, `templates/report.md.j2`); a file of the same name in the plan's
//! template folder replaces the built-in one. HTML templates autoescape; figures must be emitted
//! with `{{ figure.svg|safe }}`. Undefined variables are errors. Context:
//!
//! | variable | content |
//! |---|---|
//! | `title`, `study`, `tool_version`, `tsc_ghz`, `quantile_definition` | strings |
//! | `provenance`, `testbed_facts`, `bitstreams`, `traces`, `health` | lists of `{label, value, mono}` |
//! | `problems` | strings: what the analysis could not use or check |
//! | `variance` | rows `{program, statistic, session, run, probe, shares, design}` |
//! | `quantile_columns` | `["p5", "p25", …]` |
//! | `table` | rows `{label, program, quantiles[], median_ci, bound_ns, bound_cycles, median_margin, p99_margin, violations, hw_max_diff, hw_pass, hw_ok, first}` |
//! | `has_hw`, `has_multi_mode` | booleans |
//! | `figures` | `{id, number, title, caption, svg, file}` |
//! | `programs` | `{name, trace, bitstream, null_offset, reproducibility, probes, excluded, multi_mode, modes[], sessions[{session, mode, raw_median, median, matched, excluded, runs}], hw}` |
//! | `nulls` | `{trace, group, offset, spread, sessions}` |
//!
//! Numbers arrive formatted (ns with one decimal, `—` when missing). The filter `md` escapes a
//! string for a Markdown table cell.

pub mod compare;
mod figures;
mod format;
mod levels;
mod port_pairs;
mod round_trip;
mod soak;
mod svg;
pub mod trend;
mod view;

use std::path::{Path, PathBuf};

use minijinja::{Environment, UndefinedBehavior};

use latency_plan::ReportFormat;
use latency_results::ResultsError;
use latency_results::summary::Summary;
use latency_results::write_file;

const HTML_TEMPLATE: &str = "report.html.j2";
/// Largest report template read.
const MAX_TEMPLATE_BYTES: u64 = 1 << 20;
const MD_TEMPLATE: &str = "report.md.j2";
const BUILTIN_HTML: &str = include_str!("templates/report.html.j2");
const BUILTIN_MD: &str = include_str!("templates/report.md.j2");

/// Errors of report rendering; each names the file concerned.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The template folder given does not exist.
    #[error("{path}: template folder not found")]
    TemplateDir {
        /// The folder.
        path: PathBuf,
    },
    /// An override template could not be read.
    #[error("{path}: cannot read template: {source}")]
    ReadTemplate {
        /// The template file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A template does not parse or fails to render.
    #[error("{template}: {source}")]
    Template {
        /// The template (file path for an override, name for a built-in one).
        template: String,
        /// The error, with the line.
        source: minijinja::Error,
    },
    /// A report or figure file could not be written.
    #[error("{path}: cannot write report: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The error.
        source: ResultsError,
    },
}

/// Render `summary` in each of `formats` into `out_dir` (`report.html`, `report.md` and, for
/// Markdown, `figures/*.svg`), replacing earlier reports. Templates in `template_dir` override
/// the built-in ones of the same name. Returns the files written.
pub fn render(
    summary: &Summary,
    formats: &[ReportFormat],
    template_dir: Option<&Path>,
    out_dir: &Path,
) -> Result<Vec<PathBuf>, ReportError> {
    if let Some(dir) = template_dir
        && !dir.is_dir()
    {
        return Err(ReportError::TemplateDir { path: dir.to_path_buf() });
    }
    let figures = figures::all(summary);
    let view = view::build(summary, &figures);
    let mut written = Vec::new();
    let mut done: Vec<ReportFormat> = Vec::new();
    for format in formats {
        if done.contains(format) {
            continue;
        }
        done.push(*format);
        let (name, builtin, file) = match format {
            ReportFormat::Html => (HTML_TEMPLATE, BUILTIN_HTML, "report.html"),
            ReportFormat::Markdown => (MD_TEMPLATE, BUILTIN_MD, "report.md"),
        };
        if *format == ReportFormat::Markdown {
            for f in &figures {
                let path = out_dir.join("figures").join(format!("{}.svg", f.id));
                write(&path, f.standalone().as_bytes())?;
                written.push(path);
            }
        }
        let text = render_template(name, builtin, template_dir, &view)?;
        let path = out_dir.join(file);
        write(&path, text.as_bytes())?;
        written.push(path);
    }
    Ok(written)
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    write_file(path, bytes, true).map_err(|source| ReportError::Write { path: path.to_path_buf(), source })
}

/// Render template `name`: the override in `template_dir` when there is one, else `builtin`.
fn render_template(
    name: &'static str,
    builtin: &'static str,
    template_dir: Option<&Path>,
    view: &impl serde::Serialize,
) -> Result<String, ReportError> {
    let override_path = template_dir.map(|d| d.join(name)).filter(|p| p.is_file());
    let (source, label) = match &override_path {
        Some(p) => (
            latency_files::read_capped(p, MAX_TEMPLATE_BYTES, "report template")
                .and_then(|b| String::from_utf8(b).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e)))
                .map_err(|source| ReportError::ReadTemplate { path: p.clone(), source })?,
            p.display().to_string(),
        ),
        None => (builtin.to_string(), format!("built-in template {name}")),
    };
    let err = |source| ReportError::Template { template: label.clone(), source };
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_keep_trailing_newline(true);
    env.add_filter("md", md_cell);
    // The name (not the path) picks the autoescaping: HTML for `*.html.j2`.
    env.add_template_owned(name, source).map_err(err)?;
    env.get_template(name).and_then(|t| t.render(view)).map_err(err)
}

/// Escape text for a Markdown table cell.
fn md_cell(s: String) -> String {
    s.replace('\\', "\\\\").replace('|', "\\|").replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn md_cells_escape_pipes_and_newlines() {
        assert_eq!(md_cell("a|b\nc".to_string()), "a\\|b c");
    }

    /// Empty, NaN and missing values everywhere must render (placeholders), never panic.
    #[test]
    fn degenerate_summary_renders() {
        use latency_results::summary::Health;
        use latency_results::summary::Histogram;
        use latency_results::summary::HwCheck;
        use latency_results::summary::NullSummary;
        use latency_results::summary::ProgramSummary;
        let nan = f64::NAN;
        let program = ProgramSummary {
            level: None,
            levels: Vec::new(),
            trace: String::new(),
            null_trace: None,
            bitstream: String::new(),
            latency_ns: Default::default(),
            latency_raw_ns: Default::default(),
            evidence: Default::default(),
            modes: Vec::new(),
            sessions: Vec::new(),
            null_offset_ns: nan,
            reproducibility_ns: nan,
            vendor_bound: None,
            median_ci95_ns: [nan, nan],
            p99_ci95_ns: [nan, nan],
            hw_check: Some(HwCheck { levels: Vec::new(), max_diff_ns: nan, tolerance_ns: nan, pass: false, pairs: 0 }),
            probes: 0,
            excluded: 0,
            histogram: Histogram { start_ns: nan, bin_ns: 0.0, counts: vec![0; 3] },
            soak: None,
            round_trip: None,
            stopping: None,
            port_pairs: Default::default(),
        };
        let summary = Summary {
            study: "s".into(),
            title: String::new(),
            tool_version: String::new(),
            tsc_hz: 0.0,
            quantile_levels: vec![50.0],
            quantile_definition: String::new(),
            calibration: Default::default(),
            programs: [("p".to_string(), program)].into(),
            nulls: [(
                "t".to_string(),
                NullSummary { group: "g".into(), offset_ns: nan, offset_raw_ns: nan, sessions: vec![], spread_ns: nan },
            )]
            .into(),
            health: Health { pacing_pps: [nan; 3], ..Health::default() },
            provenance: None,
            inputs_sha256: String::new(),
        };
        let figures = figures::all(&summary);
        assert_eq!(figures.iter().map(|f| f.id).collect::<Vec<_>>(), ["hw-clock-check"]);
        let view = view::build(&summary, &figures);
        let html = render_template(HTML_TEMPLATE, BUILTIN_HTML, None, &view).map_err(|e| e.to_string());
        let md = render_template(MD_TEMPLATE, BUILTIN_MD, None, &view).map_err(|e| e.to_string());
        assert!(html.is_ok_and(|h| h.contains("Latency study s")));
        assert!(md.is_ok_and(|m| m.contains("| p | — | — | — | — | — | — | — | — | FAIL |")));
    }

    #[test]
    fn builtin_templates_parse() {
        let mut env = Environment::new();
        assert!(env.add_template(HTML_TEMPLATE, BUILTIN_HTML).is_ok());
        assert!(env.add_template(MD_TEMPLATE, BUILTIN_MD).is_ok());
    }
}

//! The import itself: every LatencyLab file read, hashed, parsed and filtered before anything is
//! written, then the whole results folder (run files, journal, provenance) built beside its
//! destination and renamed into place.

use std::fs;
use std::path::Path;

use crate::tool::GIT_COMMIT;
use crate::tool::TOOL_VERSION;
use latency_plan::Analysis;
use latency_plan::ReportSpec;
use latency_plan::digest;
use latency_results::ResultsDir;
use latency_results::SessionKind;
use latency_results::event::Event;
use latency_results::event::Pacing;
use latency_results::index::Group;
use latency_results::journal::Journal;
use latency_results::now_micros;
use latency_results::pairs;
use latency_results::provenance::Facts;
use latency_results::provenance::ImportFacts;
use latency_results::provenance::Provenance;
use latency_results::provenance::TestbedFacts;
use latency_results::runfile;
use latency_results::runfile::RunMetadata;
use latency_results::utc_micros;

use super::layout::{Input, TAGS, discover};
use super::silicon::{self, Silicon};
use super::{
    CLOCK_MHZ, FileReport, Filtered, ImportError, ImportReport, MAX_CSV_BYTES, Quirks, SEED, STUDY, TSC_HZ, filter,
    io_err, layout, parse_csv, records,
};

/// Hardware-clock differentials of one run, by probe id.
type Hw<'a> = Option<&'a std::collections::BTreeMap<u64, i64>>;

/// The hardware-clock differentials of `input`'s run, if its session has a silicon file.
fn hw_of<'a>(silicon: &'a Silicon, input: &Input) -> Hw<'a> {
    silicon.get(&(input.tag, input.session)).map(|(_, runs)| runs.get(&input.run).unwrap_or(&EMPTY))
}

static EMPTY: std::collections::BTreeMap<u64, i64> = std::collections::BTreeMap::new();

/// Read, hash, parse and filter one input.
fn load(input: &Input, probes: u64) -> Result<(String, Filtered), ImportError> {
    let bytes = latency_results::read_capped(&input.path, MAX_CSV_BYTES, "run CSV").map_err(io_err(&input.path))?;
    let sha256 = digest::sha256_hex(&bytes);
    let rows = parse_csv(&input.path, &bytes)?;
    Ok((sha256, filter(rows, probes)))
}

fn run_metadata(input: &Input, plan_hash: &str, probes: u64, sha256: &str) -> RunMetadata {
    let t = &TAGS[input.tag];
    RunMetadata {
        study: STUDY.into(),
        plan_hash: plan_hash.into(),
        program: t.program.into(),
        kind: t.kind,
        session: input.session,
        run: input.run,
        attempt: 1,
        bitstream: t.bitstream.into(),
        bitstream_sha256: String::new(),
        trace: t.trace.into(),
        probes,
        testbed: STUDY.into(),
        seed: SEED,
        tsc_hz: TSC_HZ,
        tool_version: TOOL_VERSION.into(),
        level: None,
        source: Some(input.rel.clone()),
        source_sha256: Some(sha256.into()),
    }
}

/// Import the LatencyLab folder `src` into a new results folder `out` (which must not exist or
/// be empty). `probes` is the trace length: ids `1..=probes` are valid ([`DEFAULT_PROBES`](super::DEFAULT_PROBES) for the
/// published traces). Every file is read and checked before anything is written, and the folder
/// is built beside `out` and renamed into place only when complete: a failed import leaves
/// nothing behind.
pub fn import_latencylab(src: &Path, out: &Path, probes: u64) -> Result<ImportReport, ImportError> {
    if probes == 0 {
        return Err(layout(src, "the trace length (probes) must be at least 1"));
    }
    let mut ignored = Vec::new();
    let inputs = discover(src, &mut ignored)?;
    let silicon = silicon::discover(src, probes)?;
    let mut files = Vec::with_capacity(inputs.len());
    for input in &inputs {
        let (sha256, mut f) = load(input, probes)?;
        if let Some(hw) = hw_of(&silicon, input) {
            f.quirks.silicon_joined = f.rows.iter().filter(|r| hw.contains_key(&r.id)).count() as u64;
            f.quirks.silicon_missing = f.quirks.kept - f.quirks.silicon_joined;
        }
        if f.rows.is_empty() {
            return Err(layout(
                &input.path,
                format!("no usable rows ({} read; ids must be in 1..={probes})", f.quirks.rows),
            ));
        }
        let t = &TAGS[input.tag];
        let first = f.rows.iter().find(|r| r.rx1 == 0 || r.rx2 == 0);
        files.push(FileReport {
            source: input.rel.clone(),
            sha256,
            program: t.program.to_string(),
            session: input.session,
            run: input.run,
            path: ResultsDir::run_rel_path(t.program, None, input.session, input.run).to_string_lossy().into_owned(),
            first_after_gap_id: first.map(|r| r.id),
            first_after_gap_diff_ns: first.map(|r| r.rx1 as i64 - r.rx2 as i64),
            quirks: f.quirks,
        });
    }
    for t in inputs.iter().map(|i| &TAGS[i.tag]).filter(|t| t.kind == SessionKind::Program) {
        if !inputs.iter().any(|i| TAGS[i.tag].kind == SessionKind::Null && TAGS[i.tag].trace == t.null_trace) {
            let null =
                TAGS.iter().find(|n| n.kind == SessionKind::Null && n.trace == t.null_trace).map_or("?", |n| n.tag);
            return Err(layout(
                &src.join("data/tsc"),
                format!(
                    "`{}` runs have no null calibration: add the {null}_s<n> runs (null/{null}_s<n>/f_run<NN>.csv)",
                    t.tag
                ),
            ));
        }
    }
    // The "plan" of an import is its input: the sorted list of CSVs and their digests.
    let mut listing: Vec<(&str, &str)> = files
        .iter()
        .map(|f| (f.source.as_str(), f.sha256.as_str()))
        .chain(silicon.values().map(|(s, _)| (s.source.as_str(), s.sha256.as_str())))
        .collect();
    listing.sort_unstable();
    let listing: String = listing.iter().map(|(source, sha256)| format!("{sha256}  {source}\n")).collect();
    let plan_hash = digest::sha256_hex(listing.as_bytes());

    // Refuse a used `out` before any work, then build beside it.
    if out.exists() && fs::read_dir(out).map_err(io_err(out))?.next().is_some() {
        ResultsDir::create(out, false)?;
    }
    let name = out.file_name().map_or_else(|| "import".into(), |n| n.to_string_lossy().into_owned());
    let staging = out.with_file_name(format!(".{name}.importing-{}", std::process::id()));
    let _ = fs::remove_dir_all(&staging);
    let mut totals = Quirks::default();
    for f in &files {
        totals.add(&f.quirks);
    }
    let report = ImportReport {
        source: src.to_path_buf(),
        results: out.to_path_buf(),
        probes,
        files,
        totals,
        ignored,
        silicon: silicon.values().map(|(s, _)| s.clone()).collect(),
    };
    let written = write_study(&staging, &inputs, &silicon, &report, &plan_hash).and_then(|()| {
        if out.exists() {
            fs::remove_dir(out).map_err(io_err(out))?;
        }
        fs::rename(&staging, out).map_err(io_err(out))
    });
    if let Err(e) = written {
        let _ = fs::remove_dir_all(&staging);
        return Err(e);
    }
    Ok(report)
}

/// The description of what produced an imported folder's data.
pub const IMPORT_PROCEDURE: &str = "import.md";

/// Write the whole results folder of an import into `root` (a fresh folder).
fn write_study(
    root: &Path,
    inputs: &[Input],
    silicon: &Silicon,
    report: &ImportReport,
    plan_hash: &str,
) -> Result<(), ImportError> {
    let probes = report.probes;
    let dir = ResultsDir::create(root, false)?;
    let _lock = dir.lock("orchestrate import")?;
    let started = utc_micros(now_micros());
    // What produced the data, for the folder's RO-Crate (its main workflow): LatencyLab's
    // published procedure, and this import of its files with the rules applied.
    let procedure = format!(
        "# Import of LatencyLab data\n\nThe run data of this folder were measured by LatencyLab's published procedure \
         (the OCT-FPGA/LatencyLab repository's scripts: flash, replay with tcpreplay, capture of both copies with TSC \
         stamps) and imported by orchestrate {TOOL_VERSION} (`orchestrate import latencylab`) from the files below, \
         each converted to a run file with the rules listed.\n\n```\n{report}```\n"
    );
    latency_results::write_file(&dir.root().join(IMPORT_PROCEDURE), procedure.as_bytes(), false)?;
    let mut journal = Journal::open(&dir.journal_path())?;
    let mut sessions: Vec<(usize, u32)> = inputs.iter().map(|i| (i.tag, i.session)).collect();
    sessions.dedup();
    journal.append(&Event::StudyStarted {
        study: STUDY.into(),
        plan_hash: plan_hash.into(),
        seed: SEED,
        testbed: STUDY.into(),
        testbed_arg: None,
        sim_model: None,
        tool_version: TOOL_VERSION.into(),
        levels: Vec::new(),
        inputs: Default::default(),
        sessions: sessions.len(),
        runs: inputs.len(),
        complete: 0,
        resumed: false,
    })?;
    let mut current: Option<usize> = None;
    for (input, file) in inputs.iter().zip(&report.files) {
        let t = &TAGS[input.tag];
        let index = sessions.iter().position(|&s| s == (input.tag, input.session)).unwrap_or(0);
        if current != Some(index) {
            if let Some(previous) = current {
                journal.append(&Event::SessionFinished { index: previous })?;
            }
            current = Some(index);
            let pending = inputs.iter().filter(|i| (i.tag, i.session) == (input.tag, input.session)).count();
            journal.append(&Event::SessionStarted {
                index,
                name: format!("{}_s{}", t.program, input.session),
                pending_runs: pending,
                steps: 0,
                slice: None,
            })?;
        }
        let (sha256, f) = load(input, probes)?;
        if sha256 != file.sha256 {
            return Err(layout(&input.path, "changed while it was being imported"));
        }
        let batch = records(&f.rows, hw_of(silicon, input))
            .map_err(|source| ImportError::Records { path: input.path.clone(), source })?;
        let path = dir.root().join(&file.path);
        let stored = runfile::write(
            &path,
            std::slice::from_ref(&batch),
            &run_metadata(input, plan_hash, probes, &sha256),
            true,
        )?;
        let counts = pairs::pair(std::slice::from_ref(&batch)).counts;
        let stamps = f.rows.iter().flat_map(|r| [r.rx1, r.rx2]);
        let span = stamps.clone().max().unwrap_or(0) - stamps.min().unwrap_or(0);
        journal.append(&Event::RunFinished {
            index,
            program: t.program.into(),
            session: input.session,
            run: input.run,
            level: None,
            attempt: 1,
            path: file.path.clone(),
            sha256: stored,
            records: batch.num_rows() as u64,
            counts,
            pacing: Pacing::default(),
            seconds: span as f64 / TSC_HZ,
            histogram_sha256: None,
        })?;
    }
    if let Some(previous) = current {
        journal.append(&Event::SessionFinished { index: previous })?;
    }
    write_provenance(&dir, inputs, report, plan_hash, &started)?;
    journal.append(&Event::StudyFinished { complete: inputs.len(), failed: 0 })?;
    Ok(())
}

fn write_provenance(
    dir: &ResultsDir,
    inputs: &[Input],
    report: &ImportReport,
    plan_hash: &str,
    started: &str,
) -> Result<(), ImportError> {
    let probes = report.probes;
    let mut groups: Vec<Group> = Vec::new();
    for i in inputs {
        let t = &TAGS[i.tag];
        if groups.last().is_none_or(|g| g.program != t.program) {
            groups.push(Group {
                program: t.program.to_string(),
                kind: t.kind,
                trace: t.trace.to_string(),
                null_trace: (t.null_trace != t.trace).then(|| t.null_trace.to_string()),
                bitstream: t.bitstream.to_string(),
                clock_mhz: CLOCK_MHZ,
                vendor_bound_cycles: t.bound,
                bound_model: None,
                probes,
            });
        }
    }
    let mut sessions: Vec<(usize, u32)> = inputs.iter().map(|i| (i.tag, i.session)).collect();
    sessions.dedup();
    let source = fs::canonicalize(&report.source).unwrap_or_else(|_| report.source.clone());
    let rules = [
        ("invalid_ids", "id outside 1..=probes: dropped"),
        (
            "misparsed",
            "bypass stamp outside a longest non-decreasing chain of bypass stamps in id order (an id misread \
             from the payload, carrying another probe's stamps): dropped",
        ),
        ("duplicates", "id seen before in the file: dropped (the first is kept)"),
        (
            "negative_diffs",
            "diff_latency_ns < 0 over all rows read; negative_diffs_kept: rx1 < rx2 over kept rows (kept)",
        ),
        ("first_after_gap", "kept row holding the run's first stamp (0): first probe after the idle gap (kept)"),
        ("diff_mismatch", "diff_latency_ns differs from rx1_ts_ns - rx2_ts_ns (the stamps are imported)"),
    ];
    let facts =
        Facts { source: Some(source.display().to_string()), files: Some(inputs.len() as u64), ..Facts::default() };
    Provenance {
        study: STUDY.into(),
        plan_hash: plan_hash.into(),
        plan_file: None,
        tool_version: TOOL_VERSION.into(),
        git_commit: GIT_COMMIT.into(),
        seed: SEED,
        testbed: TestbedFacts { name: STUDY.into(), facts },
        tsc_hz: TSC_HZ,
        bitstreams: Default::default(),
        traces: Default::default(),
        groups,
        levels: Vec::new(),
        analysis: Analysis::default(),
        report: ReportSpec { title: "LatencyLab data (imported)".into(), ..ReportSpec::default() },
        regression: None,
        sessions: sessions.len(),
        runs: inputs.len(),
        started: started.into(),
        resumed: Vec::new(),
        ended: Some(utc_micros(now_micros())),
        import: Some(ImportFacts {
            source,
            probes,
            rules: rules.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            totals: report.totals,
            files: report.files.clone(),
            ignored: report.ignored.clone(),
            silicon: report.silicon.clone(),
        }),
        sender: latency_plan::Sender::Tcpreplay,
    }
    .write(dir)?;
    Ok(())
}

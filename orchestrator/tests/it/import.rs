//! Import of the real LatencyLab sample (`tests/fixtures/latencylab`, see its README) into a
//! results folder: what is dropped and counted, the run files, the journal and the provenance,
//! and the figures the fixture's README states, recomputed here from the imported data.

use std::path::{Path, PathBuf};

use crate::common::tmp;
use arrow_array::cast::AsArray;
use arrow_array::types::{UInt8Type, UInt64Type};
use latency_results::SessionKind;
use latency_results::event::Event;
use latency_results::index::Group;
use latency_results::journal;
use latency_results::pairs;
use latency_results::provenance::Provenance;
use latency_results::runfile;
use orchestrator::import::ImportError;
use orchestrator::import::import_latencylab;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/latencylab");
const FWD_CSV: &str = "data/tsc/programs/FWD_s1/f_run04.csv";
const NULL_CSV: &str = "data/tsc/null/NF_s1/f_run01.csv";
const HEADER: &str = "pkt_id,tx_ts_ns,rx1_ts_ns,rx2_ts_ns,latency_rx1_ns,latency_rx2_ns,diff_latency_ns";

/// A CSV row as the test reads it, independently of the importer: (id, rx1, rx2, diff column).
type Row = (u64, u64, u64, i64);

fn csv_rows(rel: &str) -> Vec<Row> {
    rows_in(&Path::new(FIXTURE).join(rel))
}

/// The rows of a LatencyLab CSV file, after checking its header.
fn rows_in(path: &Path) -> Vec<Row> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(HEADER));
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0].parse().unwrap(), f[2].parse().unwrap(), f[3].parse().unwrap(), f[6].parse().unwrap())
        })
        .collect()
}

/// The rows the fixture README says are sound: ids of the trace, minus the …78 ids with an odd
/// hundreds digit (178, 378, …, 19978), which are probes 17, 37, … read with one digit too many.
fn sound(rows: &[Row]) -> Vec<Row> {
    let mut v: Vec<Row> = rows.iter().copied().filter(|r| (1..=20_000).contains(&r.0) && r.0 % 200 != 178).collect();
    v.sort_unstable();
    v
}

/// Median with linear interpolation (numpy's default percentile definition).
fn median(v: &[i64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_unstable();
    let h = (s.len() - 1) as f64 * 0.5;
    let (lo, hi) = (h.floor() as usize, h.ceil() as usize);
    s[lo] as f64 + (h - lo as f64) * (s[hi] - s[lo]) as f64
}

#[test]
fn latencylab_sample_imports_with_every_quirk_counted() {
    let out = tmp("sample");
    let report = import_latencylab(Path::new(FIXTURE), &out, 20_000).unwrap();

    // --- What was found, per file.
    let [fwd, null] = &report.files[..] else { panic!("expected two files: {report:#?}") };
    assert_eq!((fwd.source.as_str(), null.source.as_str()), (FWD_CSV, NULL_CSV));
    assert_eq!((fwd.program.as_str(), fwd.session, fwd.run), ("forward", 1, 4));
    assert_eq!((null.program.as_str(), null.session, null.run), ("null-forward_20k_untagged", 1, 1));
    assert_eq!(fwd.path, "data/program=forward/session=1/run=4.parquet");
    assert_eq!(null.path, "data/program=null-forward_20k_untagged/session=1/run=1.parquet");
    for f in [fwd, null] {
        let q = &f.quirks;
        assert_eq!(q.rows, 14_900, "{}", f.source);
        assert_eq!(q.invalid_ids, 900, "{}: ids 20178…199978", f.source);
        assert_eq!(q.misparsed, 100, "{}: ids 178, 378, …, 19978", f.source);
        assert_eq!(q.duplicates, 0, "{}", f.source);
        assert_eq!(q.kept, 13_900, "{}", f.source);
        assert_eq!(q.first_after_gap, 1, "{}", f.source);
        assert_eq!(f.first_after_gap_id, Some(1), "{}", f.source);
        assert_eq!(q.diff_mismatch_max_ns, 1, "{}: the diff column is rounded apart from the stamps", f.source);
    }
    // Negative differentials over all rows as the README counts them, and over the kept rows'
    // stamps as the analysis sees them.
    assert_eq!((fwd.quirks.negative_diffs, fwd.quirks.negative_diffs_kept), (3, 3));
    assert_eq!((null.quirks.negative_diffs, null.quirks.negative_diffs_kept), (3_470, 3_267));
    assert_eq!((fwd.quirks.diff_mismatch, null.quirks.diff_mismatch), (7_120, 7_751));
    assert_eq!((fwd.first_after_gap_diff_ns, null.first_after_gap_diff_ns), (Some(148), Some(3_961)));
    let t = &report.totals;
    assert_eq!((t.rows, t.kept, t.invalid_ids, t.misparsed, t.negative_diffs), (29_800, 27_800, 1_800, 200, 3_473));
    assert_eq!(report.ignored, Vec::<String>::new());
    // The hardware-clock file of the Forward run: 900 ids beyond the trace dropped, every kept
    // Forward row joined (the misread ids' TSC rows were dropped, so their values find no row).
    assert_eq!(report.silicon.len(), 1);
    let sil = &report.silicon[0];
    assert_eq!(sil.source, "data/silicon/silicon_FWD_s1_run04.csv");
    assert_eq!((sil.rows, sil.invalid_ids, sil.duplicates), (14_900, 900, 0));
    assert_eq!((fwd.quirks.silicon_joined, fwd.quirks.silicon_missing), (13_900, 0));
    assert_eq!((null.quirks.silicon_joined, null.quirks.silicon_missing), (0, 0), "no silicon file for NF_s1");
    let (batches, _) = runfile::read(&out.join(&fwd.path)).unwrap();
    let hw = batches[0].column_by_name("hw_ns").unwrap();
    assert_eq!(hw.null_count(), 0, "every Forward record carries its hardware-clock value");
    let text = report.to_string();
    assert!(text.contains("dropped, misparsed   200") && text.contains("dropped, invalid id  1800"), "{text}");

    // --- The run files give back exactly the sound rows, as (id, rx1 − rx2).
    for (f, rel, program, kind) in
        [(fwd, FWD_CSV, "forward", "program"), (null, NULL_CSV, "null-forward_20k_untagged", "null")]
    {
        let (batches, m) = runfile::read(&out.join(&f.path)).unwrap();
        let paired = pairs::pair(&batches);
        let expected: Vec<(u64, i64)> = sound(&csv_rows(rel)).iter().map(|r| (r.0, r.1 as i64 - r.2 as i64)).collect();
        assert_eq!(expected.len(), 13_900);
        assert_eq!(paired.diffs, expected, "{rel}");
        assert_eq!(paired.counts.matched, 13_900);
        assert_eq!(paired.counts.pipeline_only + paired.counts.bypass_only + paired.counts.duplicates, 0);
        // Records in stamp order, seq counting arrivals per port from 0.
        let b = &batches[0];
        let ports = b.column(1).as_primitive::<UInt8Type>().values();
        let tscs = b.column(2).as_primitive::<UInt64Type>().values();
        let seqs = b.column(3).as_primitive::<UInt64Type>().values();
        assert!(tscs.windows(2).all(|w| w[0] <= w[1]), "{rel}: records not in stamp order");
        for port in [0u8, 1] {
            let s: Vec<u64> = (0..b.num_rows()).filter(|&k| ports[k] == port).map(|k| seqs[k]).collect();
            assert_eq!(s, (0..13_900).collect::<Vec<u64>>(), "{rel} port {port}");
        }
        assert_eq!(m.source.as_deref(), Some(rel));
        assert_eq!(m.program, program);
        assert_eq!(m.kind.name(), kind);
        assert_eq!(m.tsc_hz, 1e9);
        assert_eq!(m.study, "latencylab-import");
    }

    // --- The README's figures. All rows, diff column: exactly as the README states (numpy, linear).
    let all = |rel: &str| csv_rows(rel).iter().map(|r| r.3).collect::<Vec<i64>>();
    assert_eq!(median(&all(FWD_CSV)), 166.0);
    assert_eq!(median(&all(NULL_CSV)), 24.0);
    // Kept rows, from the imported data (rx1 − rx2): the same within ±1 ns (it gives 166 and 24;
    // the diff column over the same kept rows gives 166 and 23).
    let imported = |path: &str| {
        let (batches, _) = runfile::read(&out.join(path)).unwrap();
        pairs::pair(&batches).diffs.iter().map(|d| d.1).collect::<Vec<i64>>()
    };
    let (m_fwd, m_null) = (median(&imported(&fwd.path)), median(&imported(&null.path)));
    assert!((m_fwd - 166.0).abs() <= 1.0, "forward median {m_fwd}");
    assert!((m_null - 24.0).abs() <= 1.0, "null median {m_null}");
    let kept_column = |rel: &str| sound(&csv_rows(rel)).iter().map(|r| r.3).collect::<Vec<i64>>();
    assert!((median(&kept_column(FWD_CSV)) - 166.0).abs() <= 1.0);
    assert!((median(&kept_column(NULL_CSV)) - 24.0).abs() <= 1.0);

    // --- Journal: the engine's event shapes.
    let events = journal::read(&out.join("journal.jsonl")).unwrap();
    let Event::StudyStarted { study, testbed, seed, resumed, plan_hash, .. } = &events[0].event else {
        panic!("{:?}", events[0])
    };
    assert_eq!((study.as_str(), testbed.as_str()), ("latencylab-import", "latencylab-import"));
    assert_eq!((*seed, *resumed), (1, false));
    // The import's "plan" is the list of its input files (run CSVs and hardware-clock files) and their digests.
    let mut listing: Vec<(&str, String)> = [FWD_CSV, NULL_CSV, "data/silicon/silicon_FWD_s1_run04.csv"]
        .iter()
        .map(|rel| (*rel, latency_plan::digest::sha256_file(&Path::new(FIXTURE).join(rel)).unwrap()))
        .collect();
    listing.sort();
    let listing: String = listing.iter().map(|(rel, h)| format!("{h}  {rel}\n")).collect();
    assert_eq!(*plan_hash, latency_plan::digest::sha256_hex(listing.as_bytes()));
    let runs: Vec<&Event> =
        events.iter().map(|e| &e.event).filter(|e| matches!(e, Event::RunFinished { .. })).collect();
    assert_eq!(runs.len(), 2);
    for (i, (e, f)) in runs.iter().zip([fwd, null]).enumerate() {
        let Event::RunFinished {
            index, program, session, run, attempt, path, sha256, records, counts, seconds, ..
        } = e
        else {
            unreachable!()
        };
        assert_eq!((path, program), (&f.path, &f.program));
        assert_eq!((*index, *session, *run, *attempt), (i, 1, f.run, 1));
        assert_eq!(*sha256, latency_plan::digest::sha256_file(&out.join(&f.path)).unwrap());
        assert_eq!((*records, counts.matched), (27_800, 13_900));
        assert!(*seconds > 39.0, "20,000 probes at 500 pps");
    }
    let done = orchestrator::engine::completed_runs(&latency_results::ResultsDir::open(&out).unwrap()).unwrap();
    assert_eq!(done.len(), 2);
    assert!(matches!(events.last().unwrap().event, Event::StudyFinished { .. }));

    // --- Provenance: what the analysis reads, and the import's counts.
    let index = Provenance::read_file(&out.join("provenance.json")).unwrap();
    assert_eq!(index.study, "latencylab-import");
    assert_eq!((index.tsc_hz, index.seed), (1e9, 1));
    assert_eq!(index.report.title, "LatencyLab data (imported)");
    assert_eq!(
        index.groups,
        vec![
            Group {
                program: "forward".into(),
                kind: SessionKind::Program,
                trace: "forward_20k".into(),
                null_trace: Some("forward_20k_untagged".into()),
                bitstream: "forward".into(),
                clock_mhz: 250.0,
                vendor_bound_cycles: Some(55),
                bound_model: None,
                probes: 20_000,
            },
            Group {
                program: "null-forward_20k_untagged".into(),
                kind: SessionKind::Null,
                trace: "forward_20k_untagged".into(),
                null_trace: None,
                bitstream: "golden_nic".into(),
                clock_mhz: 250.0,
                vendor_bound_cycles: None,
                bound_model: None,
                probes: 20_000,
            },
        ]
    );
    assert_eq!(&index.plan_hash, plan_hash);
    assert_eq!(index.testbed.name, "latencylab-import");
    assert_eq!(index.testbed.facts.files, Some(2));
    assert!(!index.git_commit.is_empty() && !index.started.is_empty() && index.ended.is_some());
    let import = index.import.as_ref().unwrap();
    assert_eq!(import.totals.misparsed, 200);
    assert_eq!(import.files[1].quirks.negative_diffs, 3_470);

    // The files keep matched probes only (70 % of the Forward ids): the pacing is inferred from
    // the ids the bypass copies span, 499.44 pps for the Forward run by hand (ids 1 → 20,000 in
    // 40.0425 s), not the 347 pps their intervals alone would say.
    let summary = latency_analysis::analyze(&latency_results::ResultsDir::open(&out).unwrap()).unwrap();
    let h = &summary.health;
    assert_eq!(h.pacing_inferred_runs, 2);
    assert!(h.pacing_pps.iter().all(|p| (499.0..=500.0).contains(p)), "{:?}", h.pacing_pps);
    assert!(h.pacing_pps.iter().any(|p| (p - 499.445).abs() < 0.01), "{:?}", h.pacing_pps);

    // A folder with results is never imported into again.
    assert!(matches!(import_latencylab(Path::new(FIXTURE), &out, 20_000), Err(ImportError::Results(_))));
    std::fs::remove_dir_all(&out).unwrap();
}

/// A LatencyLab-like source folder with the given files (relative path, content).
fn source(name: &str, files: &[(&str, String)]) -> PathBuf {
    let dir = tmp(name);
    for (rel, text) in files {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

#[test]
fn a_malformed_csv_line_is_reported_with_path_and_line_and_nothing_is_written() {
    let rel = "data/tsc/programs/FWD_s1/f_run01.csv";
    let src = source("malformed", &[(rel, format!("{HEADER}\n1,0,148,0,0,0,148\n2,0,2000150,2000000,0,0\n"))]);
    let out = tmp("malformed-out");
    let e = import_latencylab(&src, &out, 20_000).unwrap_err();
    assert_eq!(e.to_string(), format!("{}:3: expected 7 comma-separated fields, found 6", src.join(rel).display()));
    assert!(!out.exists(), "nothing is written before every file is checked");
    std::fs::remove_dir_all(&src).unwrap();
}

#[test]
fn an_unknown_tag_names_its_folder() {
    let src = source("unknown-tag", &[("data/tsc/programs/XYZ_s1/f_run01.csv", format!("{HEADER}\n"))]);
    let e = import_latencylab(&src, &tmp("unknown-tag-out"), 20_000).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("{}: unknown LatencyLab tag `XYZ`", src.join("data/tsc/programs/XYZ_s1").display())),
        "{e}"
    );
    std::fs::remove_dir_all(&src).unwrap();
}

#[test]
fn the_older_flat_layout_is_accepted_and_other_files_are_listed() {
    let fwd = std::fs::read_to_string(Path::new(FIXTURE).join(FWD_CSV)).unwrap();
    let null = std::fs::read_to_string(Path::new(FIXTURE).join(NULL_CSV)).unwrap();
    let src = source(
        "flat",
        &[
            ("data/tsc/FWD_s2/f_run07.csv", fwd),
            ("data/tsc/NF_s3/f_run10.csv", null),
            ("data/tsc/NF_s3/console.log", "log\n".into()),
        ],
    );
    let out = tmp("flat-out");
    let report = import_latencylab(&src, &out, 20_000).unwrap();
    let paths: Vec<&str> = report.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "data/program=forward/session=2/run=7.parquet",
            "data/program=null-forward_20k_untagged/session=3/run=10.parquet"
        ]
    );
    assert!(paths.iter().all(|p| out.join(p).is_file()));
    assert_eq!(report.ignored, ["data/tsc/NF_s3/console.log"]);
    assert_eq!(report.totals.misparsed, 200);
    std::fs::remove_dir_all(&src).unwrap();
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_header_only_csv_or_missing_null_data_is_invalid_input_and_leaves_nothing() {
    // A run without any row: refused by name before anything is written.
    let rel = "data/tsc/programs/FWD_s1/f_run01.csv";
    let null = std::fs::read_to_string(Path::new(FIXTURE).join(NULL_CSV)).unwrap();
    let src = source("header-only", &[(rel, format!("{HEADER}\n")), ("data/tsc/null/NF_s1/f_run01.csv", null)]);
    let out = tmp("header-only-out");
    let e = import_latencylab(&src, &out, 20_000).unwrap_err();
    assert_eq!(orchestrator::exit::ExitStatus::from(&e).code(), 2);
    assert_eq!(
        e.to_string(),
        format!("{}: no usable rows (0 read; ids must be in 1..=20000)", src.join(rel).display())
    );
    assert!(!out.exists());
    // Program runs without the null runs of their trace: nothing to calibrate with.
    let fwd = std::fs::read_to_string(Path::new(FIXTURE).join(FWD_CSV)).unwrap();
    let src2 = source("no-null", &[(FWD_CSV, fwd)]);
    let e = import_latencylab(&src2, &out, 20_000).unwrap_err();
    assert_eq!(orchestrator::exit::ExitStatus::from(&e).code(), 2);
    assert!(e.to_string().contains("`FWD` runs have no null calibration: add the NF_s<n> runs"), "{e}");
    assert!(!out.exists(), "a failed import leaves no folder behind");
    let leftovers: Vec<_> = std::fs::read_dir(out.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            let staging = format!(".{}.importing-", out.file_name().unwrap().to_string_lossy());
            e.file_name().to_string_lossy().starts_with(&staging)
        })
        .collect();
    assert!(leftovers.is_empty(), "no staging folder left: {leftovers:?}");
    std::fs::remove_dir_all(&src).unwrap();
    std::fs::remove_dir_all(&src2).unwrap();
}

#[test]
fn an_imported_sample_exports_back_to_latencylabs_rows() {
    let imported = tmp("export-src");
    import_latencylab(Path::new(FIXTURE), &imported, 20_000).unwrap();
    let out = tmp("export-out");
    let export = || {
        let (src, dest) = (imported.to_str().unwrap(), out.to_str().unwrap());
        crate::common::orchestrate(&["export", src, "--format", "latencylab-csv", "--out", dest])
    };
    let o = export();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Rows whose diff column differs from rx1 − rx2 in the original (counted with Python's csv
    // module over the sound rows): 6,621 (Forward) and 7,233 (null).
    for (rel, rounded_apart) in [(FWD_CSV, 6_621), (NULL_CSV, 7_233)] {
        let text = std::fs::read_to_string(out.join(rel)).unwrap();
        let constant = text.lines().skip(1).all(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[1], f[4], f[5]) == ("0", "0", "0")
        });
        assert!(constant, "{rel}: tx and latency columns as LatencyLab writes them");
        let exported = rows_in(&out.join(rel));
        // The original rows minus what the import removed (ids outside the trace: 900; ids read
        // with one digit too many: 100), stamps identical; LatencyLab's diff column was rounded
        // apart from its stamps (by at most 1 ns), the export's is rx1 − rx2.
        let original = sound(&csv_rows(rel));
        assert_eq!(original.len(), 13_900, "{rel}");
        assert_eq!(exported.len(), original.len(), "{rel}");
        let mut rounded = 0;
        for (e, o) in exported.iter().zip(&original) {
            assert_eq!((e.0, e.1, e.2), (o.0, o.1, o.2), "{rel}");
            assert_eq!(e.3, e.1 as i64 - e.2 as i64);
            assert!((e.3 - o.3).abs() <= 1, "{rel}: {e:?} vs {o:?}");
            rounded += usize::from(e.3 != o.3);
        }
        assert_eq!(rounded, rounded_apart, "{rel}");
    }
    // Nothing is overwritten: a second export into the same folder is refused (invalid input,
    // naming the file) and leaves the files.
    let before = std::fs::read(out.join(FWD_CSV)).unwrap();
    let o = export();
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("exists and is never overwritten"));
    assert_eq!(std::fs::read(out.join(FWD_CSV)).unwrap(), before);
    std::fs::remove_dir_all(&imported).unwrap();
    std::fs::remove_dir_all(&out).unwrap();
}

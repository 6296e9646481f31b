//! Every decoder and the analysis fed random and mutated input: plans, inventories and bitstream
//! manifests (from the shipped files), LatencyLab CSVs (from the real sample), run files (from a
//! real run file) and records. Each must answer with an error or a value, never a panic. The
//! number of cases is bounded so that the whole module runs in seconds in CI.

use std::path::{Path, PathBuf};

use proptest::prelude::*;

use latency_analysis::Unusable;
use latency_analysis::load::RunFile;
use latency_analysis::load::read_verified;
use latency_analysis::pair_batches;
use latency_analysis::summarize;
use latency_plan::Analysis;
use latency_proto::{Port, RecordBuilder};
use latency_results::SessionKind;
use latency_results::index::Group;
use latency_results::index::Index;
use latency_results::runfile;
use latency_results::runfile::RunMetadata;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A shipped YAML file with its relative references made absolute, so that a mutated copy in a
/// temporary folder still reaches the manifests, inventories and images it names.
fn shipped(rel: &str) -> String {
    let path = repo().join(rel);
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    text.replace(" ../", &format!(" {}/../", dir.display()))
        .replace(": emulated/", &format!(": {}/emulated/", dir.display()))
}

/// One edit of a text: replace, insert or delete a byte, or repeat or drop a line.
#[derive(Clone, Debug)]
enum Edit {
    Replace(usize, u8),
    Insert(usize, u8),
    Delete(usize),
    DupLine(usize),
    DropLine(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    let byte = prop::sample::select(b" \t\n:-[]{},'\"#&*!|>%@`0123456789.aZ_\xff".to_vec());
    prop_oneof![
        (any::<usize>(), byte.clone()).prop_map(|(i, b)| Edit::Replace(i, b)),
        (any::<usize>(), byte).prop_map(|(i, b)| Edit::Insert(i, b)),
        any::<usize>().prop_map(Edit::Delete),
        any::<usize>().prop_map(Edit::DupLine),
        any::<usize>().prop_map(Edit::DropLine),
    ]
}

fn apply(text: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut t = text.to_vec();
    for e in edits {
        if t.is_empty() {
            break;
        }
        let n = t.len();
        let mut lines: Vec<Vec<u8>> = t.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
        match *e {
            Edit::Replace(i, b) => t[i % n] = b,
            Edit::Insert(i, b) => t.insert(i % (n + 1), b),
            Edit::Delete(i) => {
                t.remove(i % n);
            }
            Edit::DupLine(i) => {
                let k = i % lines.len();
                lines.insert(k, lines[k].clone());
                t = lines.join(&b'\n');
            }
            Edit::DropLine(i) => {
                lines.remove(i % lines.len());
                t = lines.join(&b'\n');
            }
        }
    }
    t
}

/// Write `bytes` as `name` into a fresh temporary folder and decode it as any document.
fn decode_any(name: &str, bytes: &[u8]) {
    let Ok(dir) = tempfile::tempdir() else { return };
    let path = dir.path().join(name);
    if std::fs::write(&path, bytes).is_ok()
        && let Ok(latency_plan::Document::Plan(plan, inventory)) = latency_plan::load_any(&path)
    {
        let _ = latency_schedule::expand(&plan, inventory.as_deref());
    }
}

/// `cases` per property, or `PROPTEST_CASES` for a longer search.
fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(cases);
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

#[test]
fn the_unmutated_files_decode() {
    // The mutations start from valid documents, so that they reach past the first check.
    let tmp = tempfile::tempdir().expect("a temporary folder");
    for (rel, kind) in [
        ("plans/paper.yaml", "plan"),
        ("plans/emulated.yaml", "plan"),
        ("testbeds/oct-u280.yaml", "inventory"),
        ("bitstreams/forward.yaml", "bitstream"),
    ] {
        let path = tmp.path().join(Path::new(rel).file_name().expect("a file name"));
        std::fs::write(&path, shipped(rel)).expect("write");
        let got = match latency_plan::load_any(&path) {
            Ok(latency_plan::Document::Plan(..)) => "plan",
            Ok(latency_plan::Document::Inventory(_)) => "inventory",
            Ok(latency_plan::Document::Bitstream(_)) => "bitstream",
            // The emulated inventory names the ssh_config that `testbeds/emulated/up.sh` writes;
            // before it has run, that missing file must be the only complaint.
            Err(e) if rel == "plans/emulated.yaml" && !emulated_state_exists() => {
                assert!(
                    !e.0.is_empty() && e.0.iter().all(|d| d.message.contains("emulated/state/ssh_config")),
                    "{rel}: {:?}",
                    e.0
                );
                kind
            }
            Err(e) => panic!("{rel}: {:?}", e.0),
        };
        assert_eq!(got, kind, "{rel}");
    }
    let csv =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/latencylab/data/tsc/programs/FWD_s1/f_run04.csv");
    let rows = crate::import::parse_csv(&csv, &std::fs::read(&csv).expect("the sample")).expect("the sample parses");
    assert_eq!(rows.len(), 14_900);
}

fn emulated_state_exists() -> bool {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testbeds/emulated/state/ssh_config").exists()
}

proptest! {
    #![proptest_config(config(96))]

    #[test]
    fn mutated_plans_inventories_and_manifests_never_panic(
        which in 0usize..5,
        edits in prop::collection::vec(edit(), 1..6),
    ) {
        let files = ["plans/paper.yaml", "plans/emulated.yaml", "testbeds/oct-u280.yaml", "testbeds/emulated.yaml", "bitstreams/forward.yaml"];
        let text = shipped(files[which]);
        prop_assume!(!text.is_empty());
        let name = Path::new(files[which]).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        decode_any(&name, &apply(text.as_bytes(), &edits));
    }

    #[test]
    fn random_bytes_as_yaml_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        decode_any("random.yaml", &bytes);
    }

    #[test]
    fn mutated_latencylab_csvs_never_panic(edits in prop::collection::vec(edit(), 1..8), keep in 2usize..300) {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/latencylab/data/tsc/programs/FWD_s1/f_run04.csv");
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let head: String = text.lines().take(keep).map(|l| format!("{l}\n")).collect();
        let bytes = apply(head.as_bytes(), &edits);
        if let Ok(rows) = crate::import::parse_csv(&path, &bytes) {
            let f = crate::import::filter(rows, 20_000);
            let _ = crate::import::records(&f.rows, None);
        }
    }

    #[test]
    fn mutated_run_files_are_errors_never_panics(flips in prop::collection::vec((any::<usize>(), any::<u8>()), 1..6), cut in any::<usize>()) {
        let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let good = dir.path().join("data/program=p/session=1/run=1.parquet");
        runfile::write(&good, &[records(50)], &meta(), true).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut bytes = std::fs::read(&good).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for (i, b) in flips {
            let n = bytes.len();
            bytes[i % n] ^= b | 1;
        }
        if cut % 3 == 0 {
            bytes.truncate(cut % bytes.len());
        }
        let bad = dir.path().join("data/program=p/session=1/run=2.parquet");
        std::fs::write(&bad, &bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let _ = runfile::read(&bad);
        // Past the checksum (the journal agrees with the mutated file) into the decoder.
        let run = RunFile {
            group: 0,
            session: 1,
            run: 2,
            level: None,
            path: bad,
            rel: "data/program=p/session=1/run=2.parquet".into(),
            sha256: latency_plan::digest::sha256_hex(&bytes),
            records: 100,
            histogram: false,
            reduction: dir.path().join("pairs/program=p/session=1/run=2.pairs"),
        };
        let _ = read_verified(&run, &group("p", SessionKind::Program));
    }

    #[test]
    fn random_records_never_panic_the_analysis(
        runs in prop::collection::vec(
            (0usize..2, 1u32..3, prop::collection::vec((0u64..40, 0u8..3, any::<u32>(), prop::option::of(any::<i32>())), 0..60)),
            0..8,
        ),
        tsc_hz in prop::sample::select(vec![1e9, 2.89e9, 0.0, f64::NAN]),
    ) {
        let index = Index {
            study: "fuzz".into(),
            groups: vec![group("p", SessionKind::Program), group("null-t", SessionKind::Null)],
            levels: Vec::new(),
            analysis: Analysis::default(),
            report: Default::default(),
            tsc_hz,
            seed: 1,
            sender: Default::default(),
        };
        let paired: Vec<_> = runs
            .iter()
            .map(|(g, s, recs)| {
                let mut b = RecordBuilder::default();
                for (k, (id, port, tsc, hw)) in recs.iter().enumerate() {
                    let port = if *port == 0 { Port::Pipeline } else { Port::Bypass };
                    b.push(*id, port, u64::from(*tsc), k as u64, 64, hw.map(i64::from));
                }
                let batch = b.finish().map_err(|e| TestCaseError::fail(e.to_string()))?;
                Ok(pair_batches(*g, *s, &[batch], tsc_hz, true))
            })
            .collect::<Result<_, TestCaseError>>()?;
        let _ = summarize(&index, &paired, &[], None, Unusable::default());
    }
}

fn group(program: &str, kind: SessionKind) -> Group {
    Group::example(program, kind, Some(55), 50)
}

fn records(n: u64) -> arrow_array::RecordBatch {
    let mut b = RecordBuilder::default();
    for id in 1..=n {
        b.push(id, Port::Bypass, 1_000 * id, id - 1, 128, None);
        b.push(id, Port::Pipeline, 1_000 * id + 150, id - 1, 128, None);
    }
    b.finish().expect("a well-formed batch")
}

fn meta() -> RunMetadata {
    RunMetadata {
        study: "fuzz".into(),
        plan_hash: "00".into(),
        program: "p".into(),
        kind: SessionKind::Program,
        session: 1,
        run: 1,
        attempt: 1,
        bitstream: "p".into(),
        bitstream_sha256: String::new(),
        trace: "t".into(),
        probes: 50,
        testbed: "sim".into(),
        seed: 1,
        tsc_hz: 1e9,
        tool_version: "0".into(),
        level: None,
        source: None,
        source_sha256: None,
    }
}

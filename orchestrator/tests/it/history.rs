//! The results history: `history add`, `trend`, on a folder and on an S3 server (moto, started by
//! scripts/test.sh), and read by DuckDB and Spark.

use std::path::{Path, PathBuf};

use latency_history::store::Added;
use latency_history::store::Store;
use latency_history::trend::Trend;
use latency_results::summary::Summary;
use serde_json::Value;

use crate::common::{orchestrate, runs_here, stderr, tmp, tmp_dir};

/// The S3-compatible server of the tests (`LATENCY_TEST_S3`, e.g. `http://127.0.0.1:5055`), with a
/// fresh bucket: the store's URL and the environment to reach it.
fn s3_store(name: &str) -> (String, Vec<(&'static str, String)>) {
    let endpoint = std::env::var("LATENCY_TEST_S3").expect(
        "LATENCY_TEST_S3 is not set: scripts/test.sh starts an S3-compatible server (moto) on 127.0.0.1 and sets it",
    );
    let bucket = format!("{name}-{}", std::process::id());
    // Create the bucket: one unsigned PUT, which moto accepts.
    let host = endpoint.trim_start_matches("http://").trim_end_matches('/');
    let mut c = std::net::TcpStream::connect(host).expect("the S3 server of LATENCY_TEST_S3 listens");
    use std::io::{Read, Write};
    write!(c, "PUT /{bucket} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").unwrap();
    let mut reply = String::new();
    c.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    let env = vec![
        ("AWS_ENDPOINT", endpoint.clone()),
        ("AWS_ACCESS_KEY_ID", "test".into()),
        ("AWS_SECRET_ACCESS_KEY", "test".into()),
        ("AWS_REGION", "us-east-1".into()),
        ("AWS_ALLOW_HTTP", "true".into()),
    ];
    (format!("s3://{bucket}/nightly"), env)
}

/// `orchestrate` with `env` set.
fn run(args: &[&str], env: &[(&str, String)]) -> std::process::Output {
    let mut c = crate::common::bin();
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run orchestrate")
}

/// One simulated night of tests/fixtures/good/nightly.yaml (`seed`, `model`: none for the paper's),
/// dated night `k` of November 2026 at 02:00 UTC, as a nightly job would have started it.
pub fn night(k: u32, seed: u64, model: Option<&Path>) -> PathBuf {
    let dir = tmp("night");
    let mut args = vec!["run".to_string(), "tests/fixtures/good/nightly.yaml".into(), "--quiet".into()];
    args.extend(["--seed".into(), seed.to_string(), "--out".into(), dir.display().to_string()]);
    if let Some(m) = model {
        args.extend(["--sim-model".into(), m.display().to_string()]);
    }
    let o = orchestrate(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", stderr(&o));
    let path = dir.join("provenance.json");
    let mut prov: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    prov["started"] = format!("2026-11-{k:02}T02:00:00Z").into();
    std::fs::write(&path, serde_json::to_vec_pretty(&prov).unwrap()).unwrap();
    dir
}

fn summary(dir: &Path) -> Summary {
    serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap()
}

/// `trend --json` of `store`: (exit code, the trend).
pub fn trend_json(store: &str, env: &[(&str, String)], extra: &[&str]) -> (Option<i32>, Trend) {
    let mut args = vec!["trend", "--store", store, "--json"];
    args.extend_from_slice(extra);
    let o = run(&args, env);
    let trend = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&o)));
    (o.status.code(), trend)
}

/// The values of one series of a trend.
pub fn series_values(trend: &Trend, program: &str, statistic: &str) -> Vec<f64> {
    let s = trend
        .series
        .iter()
        .find(|s| s.program == program && s.statistic == statistic)
        .unwrap_or_else(|| panic!("no series {program} {statistic} in {trend:?}"));
    s.points.iter().map(|p| p.value_ns).collect()
}

/// The same checks on a folder and on the S3 server: each study is added once, reads back as its
/// summary says (headline figures exactly, estimates as the raw median), and an add killed between
/// the estimates and the rows leaves no study visible.
#[test]
fn a_store_on_a_folder_and_on_s3_keeps_each_study_once_as_its_summary_says() {
    let needs =
        "an S3-compatible server named by LATENCY_TEST_S3 (scripts/test.sh starts moto on 127.0.0.1 and sets it)";
    if !runs_here(std::env::var_os("LATENCY_TEST_S3").is_some(), needs) {
        return;
    }
    let nights: Vec<PathBuf> = (1..=3).map(|k| night(k, u64::from(k), None)).collect();
    let folder = tmp_dir("store").display().to_string();
    for (store, env) in [(folder, Vec::new()), s3_store("store")] {
        let add = |dir: &Path, env: &[(&str, String)]| {
            let o = run(&["history", "add", &dir.display().to_string(), "--store", &store], env);
            (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned(), stderr(&o))
        };
        let (code, out, err) = add(&nights[0], &env);
        assert_eq!(code, Some(0), "{store}: {err}");
        let first: Added = serde_json::from_str(&out).unwrap();
        assert_eq!((first.already, first.rows), (false, 1), "{out}");
        let (code, out, _) = add(&nights[0], &env);
        let again: Added = serde_json::from_str(&out).unwrap();
        assert_eq!((code, again.already, &again.key), (Some(0), true, &first.key));
        assert_eq!(add(&nights[1], &env).0, Some(0));

        // Killed between the estimates and the rows: the third night is not in the history.
        #[cfg(feature = "failpoints")]
        {
            let mut killed = env.clone();
            killed.push(("ORCHESTRATE_FAILPOINTS", "history-add-killed".into()));
            let (code, _, err) = add(&nights[2], &killed);
            assert_ne!(code, Some(0), "{err}");
            let (_, t) = trend_json(&store, &env, &[]);
            assert_eq!(series_values(&t, "forward", "p50").len(), 2, "{t:?}");
        }
        assert_eq!(add(&nights[2], &env).0, Some(0));
        let o = run(&["history", "list", "--store", &store], &env);
        assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 3, "{}", stderr(&o));

        // The series are the summaries' figures, night by night.
        let (code, t) = trend_json(&store, &env, &[]);
        assert_eq!(code, Some(0), "{t:?}");
        for stat in ["p50", "p99"] {
            let want: Vec<f64> =
                nights.iter().map(|d| summary(d).programs["forward"].latency_ns.at_key(stat).unwrap()).collect();
            assert_eq!(series_values(&t, "forward", stat), want, "{store} {stat}");
        }

        // The estimates: Forward's, less the null offset, have the raw median of the summary.
        let st = Store::open_with(&store, env.iter().map(|(k, v)| (k.to_string(), v.clone()))).unwrap();
        let keys = st.studies().unwrap();
        assert_eq!(keys.len(), 3);
        assert_eq!(keys[0].date, "2026-11-01");
        let sum = summary(&nights[0]);
        let f = &sum.programs["forward"];
        let mut est: Vec<f64> = st
            .estimates(&keys[0])
            .unwrap()
            .into_iter()
            .filter(|e| e.program == "forward" && e.kind == "program")
            .map(|e| e.estimate_ns - f.null_offset_ns)
            .collect();
        assert_eq!(est.len() as u64, f.probes);
        est.sort_by(f64::total_cmp);
        let n = est.len();
        let median = if n % 2 == 1 { est[n / 2] } else { (est[n / 2 - 1] + est[n / 2]) / 2.0 };
        assert!((median - f.latency_raw_ns.at(50.0).unwrap()).abs() <= 0.5, "{median} vs {:?}", f.latency_raw_ns);
    }
}

/// `nightly` on the simulator: a pass (0) writes the report, the trend page, its Markdown and
/// JUnit; Forward 5 ns slower after eight steady nights is a regression (1); runs that fail their
/// checks are not added nor judged (5); a store it cannot use stops it before the study (2).
#[test]
fn nightly_runs_adds_and_judges_and_its_exit_status_says_which() {
    let store = tmp_dir("nightly-store").display().to_string();
    let nightly = |out: &Path, extra: &[&str]| {
        let out = out.display().to_string();
        let mut args = vec!["nightly", "tests/fixtures/good/nightly.yaml", "--store", &store, "--out", &out, "--quiet"];
        args.extend_from_slice(extra);
        orchestrate(&args)
    };
    let listed =
        || String::from_utf8_lossy(&orchestrate(&["history", "list", "--store", &store]).stdout).lines().count();

    let steady: Vec<PathBuf> = (1..=8).map(|k| night(k, u64::from(k), None)).collect();
    let mut args = vec!["history".to_string(), "add".into(), "--store".into(), store.clone()];
    args.extend(steady.iter().map(|d| d.display().to_string()));
    assert!(orchestrate(&args.iter().map(String::as_str).collect::<Vec<_>>()).status.success());

    let pass = tmp("nightly-pass");
    let o = nightly(&pass, &["--seed", "9"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for f in ["report.md", "trend.html", "trend.md", "trend.xml"] {
        assert!(pass.join(f).is_file(), "{f}");
    }
    assert!(!std::fs::read_to_string(pass.join("trend.xml")).unwrap().contains("<failure"));
    assert_eq!(listed(), 9);

    let model = tmp_dir("nightly-model").join("slower.yaml");
    std::fs::write(&model, "programs:\n  forward:\n    - [143, 150, 154, 159, 168, 174]\n").unwrap();
    let mut last = None;
    for seed in 10..=12 {
        let out = tmp("nightly-slower");
        last = Some((nightly(&out, &["--seed", &seed.to_string(), "--sim-model", &model.display().to_string()]), out));
    }
    let (o, out) = last.unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("regression: forward p50"), "{}", stderr(&o));
    assert!(std::fs::read_to_string(out.join("trend.xml")).unwrap().contains("<failure"));
    assert!(std::fs::read_to_string(out.join("trend.md")).unwrap().contains("**regression**"));
    assert_eq!(listed(), 12);

    // 5 % loss per copy: the runs fail their checks; the study is kept, not added.
    let lossy = tmp("nightly-lossy");
    let o = nightly(&lossy, &["--sim-model", "tests/fixtures/good/lossy.yaml"]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(lossy.join("journal.jsonl").is_file() && !lossy.join("trend.html").exists());
    assert_eq!(listed(), 12);

    let never = tmp("nightly-never");
    let o = orchestrate(&[
        "nightly",
        "tests/fixtures/good/nightly.yaml",
        "--store",
        "ftp://host/x",
        "--out",
        &never.display().to_string(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!never.exists(), "nothing ran");
}

/// Every column of the history's tables is documented in the reference (`docs/history.md`).
#[test]
fn the_reference_documents_every_column_of_the_history() {
    use latency_results::history::row::Estimate;
    use latency_results::history::row::Row;
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/history.md")).unwrap();
    let section = &page[page.find("### The results history").expect("a section on the history")..];
    for field in Row::schema().fields().iter().chain(Estimate::schema().fields().iter()) {
        assert!(
            section.contains(&format!("`{}`", field.name())),
            "docs/history.md: column `{}` is not documented",
            field.name()
        );
    }
}

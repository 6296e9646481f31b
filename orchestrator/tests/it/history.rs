//! The results history: `history add`, `trend`, on a folder and on an S3 server (moto, started by
//! scripts/test.sh), and read by DuckDB and Spark.

use std::path::{Path, PathBuf};

use latency_history::store::Added;
use latency_history::store::Store;
use latency_history::trend::Trend;
use latency_results::summary::Summary;
use serde_json::Value;

use crate::common::{STEADY, orchestrate, runs_here, stderr, tmp, tmp_dir};

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

/// [`STEADY`] with Forward 5 ns slower at every quantile (Table I + 5), written into `dir`.
pub fn slower_model(dir: &Path) -> PathBuf {
    let model = dir.join("slower.yaml");
    let steady = std::fs::read_to_string(STEADY).unwrap();
    std::fs::write(&model, format!("{steady}programs:\n  forward:\n    - [143, 150, 154, 159, 168, 174]\n")).unwrap();
    model
}

/// One simulated night of tests/fixtures/good/nightly.yaml (`seed`, `model`: none for the paper's),
/// dated night `k` of November 2026 at 02:00 UTC, as a nightly job would have started it
/// (with [`STEADY`] unless another model is given).
pub fn night(k: u32, seed: u64, model: Option<&Path>) -> PathBuf {
    night_of(Path::new("tests/fixtures/good/nightly.yaml"), k, seed, model)
}

/// [`night`] of another plan.
fn night_of(plan: &Path, k: u32, seed: u64, model: Option<&Path>) -> PathBuf {
    let dir = tmp("night");
    let mut args = vec!["run".to_string(), plan.display().to_string(), "--quiet".into()];
    args.extend(["--seed".into(), seed.to_string(), "--out".into(), dir.display().to_string()]);
    args.extend(["--sim-model".into(), model.unwrap_or(Path::new(STEADY)).display().to_string()]);
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
    // The nights follow each other within the second: their times (to the microsecond) order them.
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
    let o = nightly(&pass, &["--seed", "9", "--sim-model", STEADY]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for f in ["report.md", "trend.html", "trend.md", "trend.xml"] {
        assert!(pass.join(f).is_file(), "{f}");
    }
    assert!(!std::fs::read_to_string(pass.join("trend.xml")).unwrap().contains("<failure"));
    assert_eq!(listed(), 9);

    let model = slower_model(&tmp_dir("nightly-model"));
    let mut last = None;
    for seed in 10..=12 {
        let out = tmp("nightly-slower");
        last = Some((nightly(&out, &["--seed", &seed.to_string(), "--sim-model", &model.display().to_string()]), out));
    }
    let (o, out) = last.unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("regression: nightly (sim): forward p50"), "{}", stderr(&o));
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

/// `nightly` with a plan whose `trend.confirm` asks for it: Forward 5 ns slower after eight steady
/// nights regresses unconfirmed, is measured again by a confirmation study (its folder inside the
/// night's, added to the store and recorded as the night's confirmation), and alerts (1) once the
/// confirmation agrees, the trend page saying so. A confirmation that may not run (over its time
/// budget) leaves the regression unconfirmed: reported, no alert (0).
#[test]
fn nightly_confirms_a_regression_before_it_alerts() {
    let plan = "tests/fixtures/good/nightly-confirm.yaml";
    let steady: Vec<PathBuf> = (1..=8).map(|k| night_of(Path::new(plan), k, u64::from(k), None)).collect();
    let model = slower_model(&tmp_dir("confirm-model"));
    for (budget, alert) in [(None, true), (Some("max_minutes: 0"), false)] {
        let store = tmp_dir("confirm-store").display().to_string();
        let mut args = vec!["history".to_string(), "add".into(), "--store".into(), store.clone()];
        args.extend(steady.iter().map(|d| d.display().to_string()));
        assert!(orchestrate(&args.iter().map(String::as_str).collect::<Vec<_>>()).status.success());
        let plan = match budget {
            None => PathBuf::from(plan),
            Some(b) => {
                let p = Path::new("tests/fixtures/good/.nightly-confirm-budget.yaml");
                std::fs::write(p, std::fs::read_to_string(plan).unwrap().replace("max_minutes: 60", b)).unwrap();
                p.to_path_buf()
            }
        };
        let out = tmp("confirm-night");
        let o = orchestrate(&[
            "nightly",
            plan.to_str().unwrap(),
            "--store",
            &store,
            "--out",
            out.to_str().unwrap(),
            "--quiet",
            "--seed",
            "20",
            "--sim-model",
            model.to_str().unwrap(),
        ]);
        if budget.is_some() {
            std::fs::remove_file(&plan).unwrap();
        }
        let err = stderr(&o);
        let listed =
            String::from_utf8_lossy(&orchestrate(&["history", "list", "--store", &store]).stdout).lines().count();
        let md = std::fs::read_to_string(out.join("trend.md")).unwrap();
        if alert {
            assert_eq!(o.status.code(), Some(1), "{err}");
            assert!(err.contains("regression: nightly (sim): forward p50"), "{err}");
            assert!(out.join("confirmation/summary.json").is_file(), "the confirmation's results in the night's");
            assert_eq!(listed, 10, "eight nights, the night, its confirmation");
            let (_, t) = trend_json(&store, &[], &["--plan", "tests/fixtures/good/nightly-confirm.yaml"]);
            let c = t.changes.iter().find(|c| c.latest && c.statistic == "p50").unwrap();
            assert!(c.confirmed && c.regression, "{c:?}");
            let points = &t.series.iter().find(|s| s.statistic == "p50").unwrap().points;
            assert_eq!(points.last().unwrap().confirms.as_deref(), Some(points[8].study.as_str()));
            assert!(md.contains("| yes | **regression**") || md.contains("| yes | regression"), "{md}");
        } else {
            assert_eq!(o.status.code(), Some(0), "{err}");
            assert!(err.contains("over `trend.confirm.max_minutes` 0; not run"), "{err}");
            assert!(err.contains("unconfirmed: nightly (sim): forward p50"), "{err}");
            assert!(!out.join("confirmation").exists());
            assert_eq!(listed, 9);
            assert!(md.contains("| no | unconfirmed"), "{md}");
        }
    }
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

/// The S3 server of the tests, when there is one (`LATENCY_TEST_S3`; a part of a test that needs it
/// is skipped visibly without it, and fails under CI).
fn s3_here() -> bool {
    let needs =
        "an S3-compatible server named by LATENCY_TEST_S3 (scripts/test.sh starts moto on 127.0.0.1 and sets it)";
    crate::common::part_runs_here("S3", std::env::var_os("LATENCY_TEST_S3").is_some(), needs)
}

/// Put `body` at `key` of the store `url` as they are (a damaged object, as a crash, a full disk or
/// a hand would leave it): a file of a folder store, or an object on the S3 server (through boto3,
/// which the S3 server moto brings, with the store's `env`).
fn put_raw(url: &str, key: &str, body: &[u8], env: &[(&str, String)]) {
    let Some(rest) = url.strip_prefix("s3://") else {
        let path = Path::new(url).join(key);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
        return;
    };
    use std::io::Write;
    let (bucket, prefix) = rest.split_once('/').unwrap();
    let python = crate::common::test_python().expect("the test Python, with boto3");
    let put = "import boto3, os, sys\n\
               boto3.client('s3', endpoint_url=os.environ['AWS_ENDPOINT'], region_name='us-east-1')\
               .put_object(Bucket=sys.argv[1], Key=sys.argv[2], Body=sys.stdin.buffer.read())";
    let mut c = std::process::Command::new(python);
    c.args(["-c", put, bucket, &format!("{prefix}/{key}")]).stdin(std::process::Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c.spawn().unwrap();
    child.stdin.take().unwrap().write_all(body).unwrap();
    assert!(child.wait().unwrap().success(), "boto3 put {url}/{key}");
}

/// `history add DIRS --store STORE` with `env`: its exit code, its JSON lines, its stderr.
fn history_add(store: &str, dirs: &[&Path], env: &[(&str, String)]) -> (Option<i32>, Vec<Added>, String) {
    let mut args = vec!["history".to_string(), "add".into(), "--store".into(), store.to_string()];
    args.extend(dirs.iter().map(|d| d.display().to_string()));
    let o = run(&args.iter().map(String::as_str).collect::<Vec<_>>(), env);
    let lines = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    (o.status.code(), lines, stderr(&o))
}

/// `trend` and `history list` of a store that does not exist (a typo) fail as invalid input (2),
/// naming it, print no listing and create nothing; on S3, a prefix that holds nothing is no store
/// either. Only `history add` creates a store.
#[test]
fn trend_and_list_of_a_store_that_does_not_exist_fail_naming_it() {
    let typo = tmp("TYPO");
    let mut stores = vec![(typo.display().to_string(), Vec::new()), (format!("file://{}", typo.display()), Vec::new())];
    if s3_here() {
        stores.push(s3_store("typo"));
    }
    for (store, env) in &stores {
        for args in [
            vec!["trend", "--store", store],
            vec!["trend", "--store", store, "--json"],
            vec!["history", "list", "--store", store],
        ] {
            let o = run(&args, env);
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
            assert!(err.contains(store.as_str()) && err.contains("no history store"), "{args:?}: {err}");
            assert!(o.stdout.is_empty(), "{args:?}: {}", String::from_utf8_lossy(&o.stdout));
            assert!(!typo.exists(), "{args:?} created {}", typo.display());
        }
    }
    // An existing folder is a store, empty until a study is added.
    let empty = tmp_dir("empty-store").display().to_string();
    let o = orchestrate(&["history", "list", "--store", &empty]);
    assert_eq!((o.status.code(), o.stdout.len()), (Some(0), 0), "{}", stderr(&o));
}

/// A study of another plan, named otherwise, is a series of its own, not a "+20 µs regression" of
/// the nightly's: the trend keys series by the study's identity (its name and testbed) and program.
#[test]
fn a_study_of_another_plan_is_a_series_of_its_own_not_a_change_of_the_nightly_one() {
    let dir = tmp_dir("other-plan");
    let bitstreams = concat!(env!("CARGO_MANIFEST_DIR"), "/../bitstreams");
    let plan = std::fs::read_to_string("tests/fixtures/good/nightly.yaml")
        .unwrap()
        .replace("study: nightly", "study: nightly-big")
        .replace("../../../../bitstreams", bitstreams);
    std::fs::write(dir.join("big.yaml"), plan).unwrap();
    std::fs::write(
        dir.join("big-model.yaml"),
        "programs:\n  forward:\n    - [20133, 20140, 20144, 20149, 20158, 20164]\n",
    )
    .unwrap();
    let mut nights: Vec<PathBuf> = (1..=8).map(|k| night(k, u64::from(k), None)).collect();
    nights.push(night_of(&dir.join("big.yaml"), 9, 9, Some(&dir.join("big-model.yaml"))));
    let store = tmp_dir("two-studies").display().to_string();
    let (code, _, err) = history_add(&store, &nights.iter().map(PathBuf::as_path).collect::<Vec<_>>(), &[]);
    assert_eq!(code, Some(0), "{err}");

    let (code, t) = trend_json(&store, &[], &[]);
    assert_eq!(code, Some(0), "no regression: {t:?}");
    assert_eq!(t.changes.len(), 0, "{t:?}");
    let mut forward_p50: Vec<(String, usize)> = t
        .series
        .iter()
        .filter(|s| s.program == "forward" && s.statistic == "p50")
        .map(|s| (s.identity.name.clone(), s.points.len()))
        .collect();
    forward_p50.sort();
    assert_eq!(forward_p50, [("nightly".to_string(), 8), ("nightly-big".to_string(), 1)], "{t:?}");
}

/// `history add` refuses a study with failed runs, as `nightly` does (exit 2, naming the folder and
/// its failed runs): nothing is written, not even a store.
#[test]
fn a_study_with_failed_runs_is_not_added_as_nightly_does_not_add_it() {
    let lossy = tmp("lossy");
    let o = orchestrate(&[
        "run",
        "tests/fixtures/good/nightly.yaml",
        "--sim-model",
        "tests/fixtures/good/lossy.yaml",
        "--quiet",
        "--out",
        &lossy.display().to_string(),
    ]);
    assert_eq!(o.status.code(), Some(1), "runs failed their checks: {}", stderr(&o));
    let missing = tmp("lossy-store");
    let (code, lines, err) = history_add(&missing.display().to_string(), &[&lossy], &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(lines.is_empty(), "{lines:?}");
    assert!(err.contains(&lossy.display().to_string()) && err.contains("not added"), "{err}");
    assert!(!missing.exists(), "a refused study creates no store");

    let store = tmp_dir("lossy-store").display().to_string();
    let good = night(1, 1, None);
    let (code, _, err) = history_add(&store, &[&good, &lossy], &[]);
    assert_eq!(code, Some(2), "{err}");
    let o = orchestrate(&["history", "list", "--store", &store]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 1, "only the good night: {}", stderr(&o));
}

/// A truncated rows or estimates object makes `trend` fail (4, naming it); adding its study again
/// rewrites it (`already` false, `repaired` naming the table), after which the trend reads it and
/// another add changes nothing. On a folder and on the S3 server.
#[test]
fn adding_a_study_whose_stored_tables_are_damaged_rewrites_them() {
    let nights = [night(1, 1, None), night(2, 2, None)];
    let mut stores = vec![(tmp("damaged").display().to_string(), Vec::new())];
    // On S3, the damaged objects are put through boto3 (moto refuses an unsigned overwrite).
    if s3_here() && crate::common::test_python().is_some() {
        stores.push(s3_store("damaged"));
    }
    let mut damaged: Option<(Vec<u8>, Vec<u8>)> = None;
    for (store, env) in &stores {
        let (code, lines, err) = history_add(store, &[&nights[0], &nights[1]], env);
        assert_eq!(code, Some(0), "{store}: {err}");
        let (date, study) = (&lines[0].key.date, &lines[0].key.study);
        let object = |table: &str| format!("{table}/date={date}/study={study}/part-0.parquet");
        // Truncated copies of the first night's tables, taken from the folder store.
        let (rows, estimates) = damaged
            .get_or_insert_with(|| {
                let half = |t: &str| {
                    let bytes = std::fs::read(Path::new(store).join(object(t))).unwrap();
                    bytes[..bytes.len() / 2].to_vec()
                };
                (half("rows"), half("estimates"))
            })
            .clone();
        let want: Vec<f64> =
            nights.iter().map(|d| summary(d).programs["forward"].latency_ns.at_key("p50").unwrap()).collect();

        put_raw(store, &object("rows"), &rows, env);
        let o = run(&["trend", "--store", store], env);
        assert_eq!(o.status.code(), Some(4), "{store}: {}", stderr(&o));
        assert!(stderr(&o).contains(&object("rows")), "{store}: {}", stderr(&o));
        let (code, lines, err) = history_add(store, &[&nights[0]], env);
        assert_eq!(code, Some(0), "{store}: {err}");
        assert!(!lines[0].already, "{store}: {lines:?}");
        assert_eq!(lines[0].rows, 1, "{store}: {lines:?}");
        assert_eq!(lines[0].repaired, ["rows"], "{store}: {lines:?}");
        let (code, t) = trend_json(store, env, &[]);
        assert_eq!((code, series_values(&t, "forward", "p50")), (Some(0), want.clone()), "{store}");
        let (code, lines, err) = history_add(store, &[&nights[0]], env);
        assert_eq!((code, lines[0].already), (Some(0), true), "{store}: {err}");

        put_raw(store, &object("estimates"), &estimates, env);
        let (code, lines, err) = history_add(store, &[&nights[0]], env);
        assert_eq!(code, Some(0), "{store}: {err}");
        assert!(!lines[0].already, "{store}: {lines:?}");
        assert_eq!(lines[0].repaired, ["estimates"], "{store}: {lines:?}");
        let st = Store::open_with(store, env.iter().map(|(k, v)| (k.to_string(), v.clone()))).unwrap();
        let key = st.studies().unwrap().into_iter().find(|k| k.study == *study).unwrap();
        let forward = summary(&nights[0]).programs["forward"].probes;
        let stored = st.estimates(&key).unwrap().iter().filter(|e| e.program == "forward").count();
        assert_eq!(stored as u64, forward, "{store}");
        let (code, lines, _) = history_add(store, &[&nights[0]], env);
        assert_eq!((code, lines[0].already), (Some(0), true), "{store}");
    }
}

/// A study stored with other figures than its results folder gives now is not overwritten, nor
/// taken as "already there": `history add` refuses (2), naming the store, the study and the
/// column, and the stored rows stay as they were.
#[test]
fn a_study_stored_with_other_figures_is_neither_overwritten_nor_already_there() {
    let n = night(1, 1, None);
    let store = tmp("other-figures").display().to_string();
    let (code, lines, err) = history_add(&store, &[&n], &[]);
    assert_eq!(code, Some(0), "{err}");
    let study = lines[0].key.study.clone();
    let st = Store::open(&store).unwrap();
    let key = st.studies().unwrap().remove(0);
    let mut rows: Vec<_> = st.rows().unwrap().into_iter().map(|r| r.row).collect();
    rows[0].p50_ns = 1.0;
    let estimates = st.estimates(&key).unwrap();
    std::fs::remove_file(Path::new(&store).join(format!("rows/date={}/study={}/part-0.parquet", key.date, study)))
        .unwrap();
    assert!(st.put_study(&key, &rows, &estimates).unwrap());

    let (code, lines, err) = history_add(&store, &[&n], &[]);
    assert_eq!(code, Some(2), "{lines:?} {err}");
    assert!(err.contains(&store) && err.contains(&study) && err.contains("p50_ns"), "{err}");
    assert_eq!(st.rows().unwrap()[0].row.p50_ns, 1.0, "the stored study is left as it is");
}

/// A summary whose figures contradict themselves, or that the run data does not match any more,
/// is not trusted: `history add` refuses it (2), naming the file and the key, and writes nothing.
#[test]
fn a_summary_that_contradicts_itself_or_its_run_data_is_not_added() {
    let edit_summary = |dir: &Path, f: &dyn Fn(&mut Summary)| {
        let path = dir.join("summary.json");
        let mut s: Summary = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        f(&mut s);
        std::fs::write(&path, serde_json::to_vec_pretty(&s).unwrap()).unwrap();
    };
    type Edit<'a> = Box<dyn Fn(&Path) + 'a>;
    let cases: Vec<(&str, &str, Edit)> = vec![
        (
            "summary.json",
            "programs.forward.latency_ns.p50",
            Box::new(|d: &Path| {
                edit_summary(d, &|s| {
                    let f = s.programs.get_mut("forward").unwrap();
                    f.latency_ns.insert(50.0, 1.0);
                    f.modes[0].latency_ns.insert(50.0, 1.0);
                });
            }),
        ),
        (
            "summary.json",
            "programs.forward.latency_ns.p99",
            Box::new(|d: &Path| {
                edit_summary(d, &|s| {
                    let f = s.programs.get_mut("forward").unwrap();
                    f.latency_ns.insert(99.0, 120.0);
                    f.p99_ci95_ns = [119.0, 121.0];
                    f.modes[0].latency_ns.insert(99.0, 120.0);
                    f.modes[0].p99_ci95_ns = Some([119.0, 121.0]);
                });
            }),
        ),
        ("summary.json", "study", Box::new(|d: &Path| edit_summary(d, &|s| s.study = "another-study".into()))),
        (
            "data/program=forward/session=1/run=2.parquet",
            "sha256",
            Box::new(|d: &Path| {
                // One byte changed, the file's time kept: the summary still looks current.
                let path = d.join("data/program=forward/session=1/run=2.parquet");
                let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
                let mut bytes = std::fs::read(&path).unwrap();
                let mid = bytes.len() / 2;
                bytes[mid] ^= 0x55;
                std::fs::write(&path, bytes).unwrap();
                std::fs::File::options().write(true).open(&path).unwrap().set_modified(modified).unwrap();
            }),
        ),
    ];
    for (k, (file, key, edit)) in cases.iter().enumerate() {
        let n = night(k as u32 + 1, k as u64 + 1, None);
        // Analysed again after the night's date was set, so that the summary is current.
        let o = orchestrate(&["analyze", &n.display().to_string()]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        edit(&n);
        let store = tmp("untrusted");
        let (code, lines, err) = history_add(&store.display().to_string(), &[&n], &[]);
        assert_eq!(code, Some(2), "{key}: {lines:?} {err}");
        assert!(err.contains(&n.join(file).display().to_string()) && err.contains(key), "{key}: {err}");
        assert!(!store.exists(), "{key}: nothing written");
    }
}

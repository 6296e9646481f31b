//! The trend's change detection against its reference: FD.io CSIT's `jumpavg` (PyPI 0.4.2, which
//! `scripts/test.sh` installs) splits the same series at the same places, with the same bits.

use std::io::Write;
use std::process::{Command, Stdio};

use latency_history::jumpavg::classify;
use latency_history::jumpavg::description_bits;

use crate::common::test_python;

/// A reproducible series of `n` values: `level(k)` plus noise uniform in ±`spread`.
fn series(n: usize, seed: u64, spread: f64, level: impl Fn(usize) -> f64) -> Vec<f64> {
    let mut x = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    (0..n)
        .map(|k| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            level(k) + spread * (2.0 * u - 1.0)
        })
        .collect()
}

const REFERENCE: &str = r#"
import json, sys, jumpavg
out = []
for s in json.load(sys.stdin):
    groups = jumpavg.classify(s["values"], unit=s["unit"])
    starts, at = [], 0
    for g in groups:
        starts.append(at)
        at += len(g)
    out.append({"starts": starts, "bits": groups.bits})
print(json.dumps(out))
"#;

#[test]
fn change_points_and_bits_agree_with_csit_jumpavg() {
    let Some(python) = test_python() else { return };
    let cases: Vec<(Vec<f64>, Option<f64>)> = vec![
        (series(30, 1, 1.0, |_| 150.0), None),
        (series(30, 2, 1.0, |k| if k >= 19 { 155.0 } else { 150.0 }), None),
        (series(30, 3, 1.0, |k| if k >= 19 { 155.0 } else { 150.0 }), Some(0.01)),
        (
            series(60, 4, 3.0, |k| {
                if k < 20 {
                    300.0
                } else if k < 40 {
                    280.0
                } else {
                    310.0
                }
            }),
            None,
        ),
        (series(45, 5, 0.5, |k| 100.0 + 0.2 * k as f64), Some(0.1)),
        (series(40, 6, 2.0, |k| if k % 13 == 7 { 900.0 } else { 400.0 }), None),
        (series(365, 7, 4.0, |k| if k >= 200 { 520.0 } else { 500.0 }), None),
        (vec![5.0; 10], Some(1.0)),
    ];
    let input: Vec<serde_json::Value> =
        cases.iter().map(|(v, unit)| serde_json::json!({"values": v, "unit": unit.unwrap_or(0.0)})).collect();
    let mut py = Command::new(python)
        .args(["-c", REFERENCE])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    py.stdin.take().unwrap().write_all(serde_json::to_string(&input).unwrap().as_bytes()).unwrap();
    let o = py.wait_with_output().unwrap();
    assert!(o.status.success(), "jumpavg: {}", String::from_utf8_lossy(&o.stderr));
    let reference: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    let mut changes = 0;
    for ((values, unit), want) in cases.iter().zip(&reference) {
        let groups = classify(values, *unit);
        let starts: Vec<u64> = groups.iter().map(|g| g.start as u64).collect();
        let want_starts: Vec<u64> = want["starts"].as_array().unwrap().iter().map(|s| s.as_u64().unwrap()).collect();
        assert_eq!(starts, want_starts, "{values:?}");
        let bits = description_bits(values, &groups, *unit);
        let want_bits = want["bits"].as_f64().unwrap();
        assert!((bits - want_bits).abs() < 1e-6 * want_bits.abs().max(1.0), "bits {bits} vs {want_bits}");
        changes += groups.len() - 1;
    }
    // The cases do hold changes (steps, a drift, outliers), not only flat series.
    assert!(changes >= 4, "{changes} changes in all");
}

/// Add `nights` to a fresh store folder; its URL.
fn store_of(name: &str, nights: &[std::path::PathBuf]) -> String {
    let store = crate::common::tmp_dir(name).display().to_string();
    let mut args = vec!["history".to_string(), "add".into(), "--store".into(), store.clone()];
    args.extend(nights.iter().map(|d| d.display().to_string()));
    let o = crate::common::orchestrate(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", crate::common::stderr(&o));
    store
}

/// 30 simulated nights, and the same with Forward 5 ns slower from night 20, through the store and
/// `orchestrate trend`: one change, at night 20, of 5 ± 1 ns, a regression (exit 1, JUnit failure);
/// none in the steady series (exit 0). DuckDB and Spark read the same series from the store.
#[test]
fn a_five_nanosecond_slowdown_from_night_twenty_is_the_one_change_and_a_steady_series_has_none() {
    let Some(python) = test_python() else { return };
    use crate::history::{night, series_values, trend_json};
    // From night 20 on, every quantile of Forward's model is 5 ns higher (Table I + 5).
    let dir = crate::common::tmp_dir("slower-forward");
    let model = crate::history::slower_model(&dir);
    let steady: Vec<_> = (1..=30).map(|k| night(k, u64::from(k), None)).collect();
    let mut slower = steady[..19].to_vec();
    slower.extend((20..=30).map(|k| night(k, u64::from(k), Some(&model))));

    let steady_store = store_of("steady", &steady);
    let (code, t) = trend_json(&steady_store, &[], &[]);
    assert_eq!((code, t.changes.len()), (Some(0), 0), "{t:?}");

    let slower_store = store_of("slower", &slower);
    let junit = dir.join("trend.xml");
    let html = dir.join("trend.html");
    let (code, t) = trend_json(
        &slower_store,
        &[],
        &["--junit", &junit.display().to_string(), "--html", &html.display().to_string()],
    );
    assert_eq!(code, Some(1), "a regression exits 1: {t:?}");
    let night20 = slower[19].file_name().unwrap();
    for c in &t.changes {
        assert_eq!(
            (c.program.as_str(), c.change.index, c.change.time.as_str()),
            ("forward", 19, "2026-11-20T02:00:00Z"),
            "{c:?} ({night20:?})"
        );
    }
    let p50: Vec<_> = t.changes.iter().filter(|c| c.statistic == "p50").collect();
    assert_eq!(p50.len(), 1, "{t:?}");
    assert!((p50[0].change.shift_ns - 5.0).abs() < 1.0 && p50[0].regression, "{t:?}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("<testcase name=\"nightly (sim): forward p50\"") && xml.contains("<failure"), "{xml}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<svg") && page.contains("regression") && !page.contains("<script"), "self-contained page");

    // DuckDB and Spark, reading the store on their own, see the same nights and medians.
    let o = Command::new(python)
        .args(["tests/readers/history_series.py", &slower_store, "duckdb", "spark"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let readers: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for reader in ["duckdb", "spark"] {
        for stat in ["p50", "p99"] {
            let mut ours = series_values(&t, "forward", stat);
            let theirs = &readers[reader]["series"][format!("forward {stat}")];
            let values: Vec<f64> = theirs["values"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
            assert_eq!(values, ours, "{reader} {stat}");
            ours.sort_by(f64::total_cmp);
            let median = (ours[14] + ours[15]) / 2.0;
            assert!((theirs["median"].as_f64().unwrap() - median).abs() < 1e-9, "{reader} {stat}: {theirs}");
        }
        assert!(readers[reader]["estimates"].as_u64().unwrap() > 30 * 3000, "{readers}");
    }

    // Night 20 acknowledged as a new level: the same changes, with the reason, and no regression
    // (exit 0); the Markdown says so. A study the store does not hold is refused (exit 2).
    let study = t.changes[0].change.study.clone();
    let o = crate::common::orchestrate(&["history", "annotate", &study, "new compiler", "--store", &slower_store]);
    assert!(o.status.success(), "{}", crate::common::stderr(&o));
    let (code, t) = trend_json(&slower_store, &[], &[]);
    assert_eq!(code, Some(0), "{t:?}");
    assert!(
        !t.changes.is_empty()
            && t.changes.iter().all(|c| !c.regression && c.acknowledged.as_deref() == Some("new compiler")),
        "{:?}",
        t.changes
    );
    let o = crate::common::orchestrate(&["trend", "--store", &slower_store]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("| acknowledged: new compiler |"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let o = crate::common::orchestrate(&["history", "annotate", "no-such-study", "x", "--store", &slower_store]);
    assert_eq!(o.status.code(), Some(2), "{}", crate::common::stderr(&o));
    assert!(crate::common::stderr(&o).contains("no study `no-such-study`"), "{}", crate::common::stderr(&o));
    std::fs::remove_dir_all(&dir).unwrap();
}

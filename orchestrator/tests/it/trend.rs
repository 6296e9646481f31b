//! The trend's change detection against its reference: FD.io CSIT's `jumpavg` (PyPI 0.4.2, which
//! `scripts/test.sh` installs) splits the same series at the same places, with the same bits.

use std::io::Write;
use std::process::{Command, Stdio};

use orchestrator::history::jumpavg::{classify, description_bits};

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
    let mut py = Command::new(test_python())
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

/// Forward's median of one simulated night (`seed`), with `model` (none: the paper's).
fn night(seed: u64, model: Option<&std::path::Path>) -> (String, f64) {
    let dir = crate::common::tmp("nightly");
    let mut args = vec!["run".to_string(), "tests/fixtures/good/nightly.yaml".into(), "--quiet".into()];
    args.extend(["--seed".into(), seed.to_string(), "--out".into(), dir.display().to_string()]);
    if let Some(m) = model {
        args.extend(["--sim-model".into(), m.display().to_string()]);
    }
    let o = crate::common::orchestrate(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", crate::common::stderr(&o));
    let s: orchestrator::analysis::summary::Summary =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    (format!("night-{seed}"), s.programs["forward"].latency_ns["p50"])
}

#[test]
fn a_five_nanosecond_slowdown_from_night_twenty_is_the_one_change_and_a_steady_series_has_none() {
    use orchestrator::history::trend::{Point, changes};
    // From night 20 on, every quantile of Forward's model is 5 ns higher (Table I + 5).
    let dir = crate::common::tmp_dir("slower-forward");
    let model = dir.join("slower.yaml");
    std::fs::write(&model, "programs:\n  forward:\n    - [143, 150, 154, 159, 168, 174]\n").unwrap();
    let point = |(study, value_ns): (String, f64), k: usize| Point {
        study,
        time: format!("2026-11-{:02}T02:00:00Z", k % 28 + 1),
        value_ns,
    };
    let steady: Vec<Point> = (1..=30).map(|k| point(night(k as u64, None), k)).collect();
    assert_eq!(changes(&steady, None), [], "{steady:?}");
    let mut slower = steady[..19].to_vec();
    slower.extend((20..=30).map(|k| point(night(k as u64, Some(&model)), k)));
    let found = changes(&slower, None);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!((found[0].index, found[0].study.as_str()), (19, "night-20"));
    assert!((found[0].shift_ns - 5.0).abs() < 1.0, "{found:?}");
    assert!(found[0].ci95_ns[0] > 0.0 && found[0].ci95_ns[1] > found[0].shift_ns, "{found:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

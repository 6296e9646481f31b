//! Black-box tests of `orchestrate import`, `analyze`, `report` and `compare`.

use std::path::Path;
use std::process::{Command, Output};

use crate::common::{orchestrate, test_python, tmp};
use latency_results::summary::Summary;
use latency_testbed::model::SimModel;

fn summary(dir: &Path) -> Summary {
    serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap()
}

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/latencylab");

#[test]
fn latencylab_sample_reproduces_the_paper_forward_estimate() {
    let out = tmp("latencylab");
    let o = orchestrate(&["import", "latencylab", FIXTURE, "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = summary(&out);
    let fwd = &s.programs["forward"];
    let p50 = fwd.latency_ns.at(50.0).unwrap();
    // One run of Forward and one of null (13,900 valid probes each): median(Forward) = 166 ns and
    // median(null) = 24 ns by independent computation (fixture README), so the estimate is 142 ns.
    // The paper's 149 ns comes from 5 sessions x 10 runs; with one session the null offset alone
    // varies by up to 7 ns between sessions (paper), so a one-run check can only expect 149 ± 10.
    assert!((p50 - 142.0).abs() <= 1.0, "estimate {p50}");
    assert!((p50 - 149.0).abs() <= 10.0, "estimate {p50} vs the paper's 149 ns");
    // The null median is 24 ns in numpy's reading (type 7); the analysis reads integer-ns data as
    // spread over each nanosecond (the values are stamps on a 1 ns grid), which numpy gives as
    // 23.899 ns for the null run and 166.362 ns for the Forward run (bisection on the grouped
    // distribution function of the 13,899 kept probes after the first).
    assert!((fwd.null_offset_ns - 23.899).abs() < 1e-3, "{}", fwd.null_offset_ns);
    assert!((fwd.sessions[0].raw_median_ns - 166.362).abs() < 1e-3, "{}", fwd.sessions[0].raw_median_ns);
    assert_eq!(fwd.sessions[0].excluded, 1, "the first probe after the idle gap");
    assert_eq!(fwd.modes.len(), 1);
    let vb = fwd.vendor_bound.as_ref().unwrap();
    assert_eq!(vb.cycles, 55);
    // Median margin: 55 cycles − 142 ns / 4 ns ≈ 19.5 cycles (the paper: 18–22 cycles of headroom).
    let margin = vb.median_margin_cycles;
    assert!((margin - (55.0 - p50 / 4.0)).abs() < 1e-9 && (17.0..=22.0).contains(&margin), "{margin}");

    // The hardware-clock sample of the same run (silicon_FWD_s1_run04.csv), joined by probe id.
    // Independently (numpy, tests/fixtures/latencylab/hwcheck.py: the same kept probes, R from the
    // silicon file, D = rx1 − rx2, 300 random re-pairings of C = R − D): measured R quantiles at
    // p25 p50 p75 p90 p95 p99 = 128 153 179 224 263 423 ns exactly; synthesised D + C between
    // 122–124, 153–155, 184–185, 220–223, 260–267 and 414–424 ns over the re-pairings, and the
    // largest |difference| over p25–p95 is 5–6 ns. One seeded re-pairing must land in that range.
    let hw = fwd.hw_check.as_ref().expect("a hardware-clock check from the silicon data");
    assert_eq!(hw.pairs, 13_899);
    let measured = [128.0, 153.0, 179.0, 224.0, 263.0, 423.0];
    let synthesized = [(122.0, 124.0), (153.0, 155.0), (184.0, 185.0), (220.0, 223.0), (260.0, 267.0), (414.0, 424.0)];
    for (k, l) in hw.levels.iter().enumerate() {
        assert_eq!(l.measured_ns, measured[k], "p{}", l.level);
        let (lo, hi) = synthesized[k];
        assert!((lo..=hi).contains(&l.synthesized_ns), "p{}: {}", l.level, l.synthesized_ns);
    }
    assert!((5.0..=6.0).contains(&hw.max_diff_ns), "{hw:?}");
    // The paper's agreement, within 8 ns from p25 through p95: it passes; p99 is reported only.
    assert_eq!(hw.tolerance_ns, 8.0);
    assert!(hw.pass && hw.max_diff_ns <= 8.0, "{hw:?}");
    assert_eq!(hw.levels.iter().filter(|l| l.judged).count(), 5);
    assert_eq!(fwd.sessions[0].hw_median_ns, Some(153.0), "the silicon median of the run (fixture README)");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("hw-clock-check.svg"), "the convolution figure is in the report");
    assert!(out.join("report.html").is_file());
    std::fs::remove_dir_all(&out).unwrap();
}

/// Run the smoke plan on the simulator into `dir` with `seed` and an optional model override.
fn smoke(dir: &Path, seed: &str, model: Option<&str>) -> Output {
    let mut args = vec!["run", "../plans/smoke.yaml", "--out", dir.to_str().unwrap(), "--seed", seed];
    if let Some(m) = model {
        args.extend(["--sim-model", m]);
    }
    orchestrate(&args)
}

/// The smoke plan with the paper's protocol, 5 sessions × 10 runs (of 1,000 probes), written into
/// `dir`; returns its path.
fn smoke_paper_protocol(dir: &Path) -> std::path::PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let text = std::fs::read_to_string(root.join("plans/smoke.yaml")).unwrap();
    let text = text
        .replace("../bitstreams", root.join("bitstreams").to_str().unwrap())
        .replace("sessions: 2\n", "sessions: 5\n")
        .replace("runs: 2\n", "runs: 10\n");
    assert!(text.contains("sessions: 5\n") && text.contains("runs: 10\n"), "{text}");
    std::fs::create_dir_all(dir).unwrap();
    let plan = dir.join("smoke-5x10.yaml");
    std::fs::write(&plan, text).unwrap();
    plan
}

/// A rerun with another seed passes and a pipeline 5 ns slower fails. The studies have the paper's
/// protocol (5 bring-ups of 10 runs): on the twin, as on the testbed, a study's median moves with
/// its bring-ups (σ 1 ns each, and the null's offsets), and the smoke plan's 2 × 2 runs leave each
/// probe's estimate the mean of two noisy differentials (σ ≈ 11 ns), so two of its reruns can
/// differ by more than compare's defaults (their p99 by 10 ns or more, their modes split).
#[test]
fn compare_passes_a_rerun_and_flags_a_slower_pipeline() {
    let base = tmp("base");
    let same = tmp("same");
    let slow = tmp("slow");
    let plan = smoke_paper_protocol(&tmp("compare-plan"));
    let run = |dir: &Path, seed: &str, model: Option<&str>| {
        let mut args = vec!["run", plan.to_str().unwrap(), "--out", dir.to_str().unwrap(), "--seed", seed, "--quiet"];
        if let Some(m) = model {
            args.extend(["--sim-model", m]);
        }
        let o = orchestrate(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    run(&base, "1", None);
    run(&same, "2", None);
    let model = tmp("model.yaml");
    std::fs::write(&model, "programs:\n  forward: [[143, 150, 154, 159, 168, 174]]\n").unwrap();
    run(&slow, "1", Some(model.to_str().unwrap()));

    let junit = tmp("junit.xml");
    let ok =
        orchestrate(&["compare", base.to_str().unwrap(), same.to_str().unwrap(), "--junit", junit.to_str().unwrap()]);
    let md = String::from_utf8_lossy(&ok.stdout);
    assert_eq!(ok.status.code(), Some(0), "{md}");
    assert!(md.contains("no regression"), "{md}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("<testsuite name=\"latency-regression\" tests=\"2\" skipped=\"0\" errors=\"0\" failures=\"0\">"),
        "{xml}"
    );

    let page = tmp("compare.html");
    let bad = orchestrate(&[
        "compare",
        base.to_str().unwrap(),
        slow.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
        "--html",
        page.to_str().unwrap(),
    ]);
    let md = String::from_utf8_lossy(&bad.stdout);
    assert_eq!(bad.status.code(), Some(1), "{md}");
    assert!(md.contains("REGRESSION"), "{md}");
    let fwd = md.lines().find(|l| l.starts_with("| forward")).unwrap();
    // The model's Forward median moved by 5 ns (149 → 154); with the same seed (the same bring-ups
    // and noise), 1,000-probe traces recover it to ±0.5 ns.
    let shift: f64 = fwd.split('|').nth(2).unwrap().trim().parse().unwrap();
    assert!((shift - 5.0).abs() <= 0.5 && fwd.contains("FAIL: median moved +"), "{fwd}");
    let chk = md.lines().find(|l| l.starts_with("| checksum")).unwrap();
    assert!(chk.ends_with("| pass |"), "{chk}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("<testsuite name=\"latency-regression\" tests=\"2\" skipped=\"0\" errors=\"0\" failures=\"1\">")
            && xml.contains("<testcase name=\"forward\" classname=\"smoke\">\n            <failure"),
        "{xml}"
    );
    // The comparison page: self-contained, the same verdict and shifts, p99's interval from the
    // two studies' p99 intervals (worked out here from their summaries), both distributions of
    // each program, the health side by side, and the provenance field that differs (the model).
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("<script") && !html.contains("src=\"http") && !html.contains("href=\"http"));
    assert!(html.contains("<span class=\"regression\">REGRESSION</span>"), "verdict");
    let row = html.lines().find(|l| l.starts_with("<tr><td>forward</td>")).unwrap();
    let md_shift = fwd.split('|').nth(2).unwrap().trim();
    assert!(row.contains(&format!("<td class=\"num\">{md_shift}</td>")), "{row} vs {fwd}");
    let (b, c) = (summary(&base).programs["forward"].clone(), summary(&slow).programs["forward"].clone());
    let half = |ci: [f64; 2]| (ci[1] - ci[0]) / 2.0;
    let p99 = c.latency_ns.at(99.0).unwrap() - b.latency_ns.at(99.0).unwrap();
    let h = half(b.p99_ci95_ns).hypot(half(c.p99_ci95_ns));
    assert!(row.contains(&format!("[{:+.1}, {:+.1}]", p99 - h, p99 + h)), "{row}");
    assert_eq!(html.matches("<figure>").count(), 2, "one overlay per program");
    assert!(html.contains("baseline median") && html.contains("candidate median"));
    assert!(html.contains("<tr><td>runs</td><td class=\"num\">"), "health");
    assert!(html.contains("<tr><td><code>testbed.facts.model."), "the simulator model differs");
    // A looser threshold from the command line accepts the shift.
    let loose = orchestrate(&[
        "compare",
        base.to_str().unwrap(),
        slow.to_str().unwrap(),
        "--median-shift-ns",
        "8",
        "--p99-shift-ns",
        "8",
        "--ks",
        "1",
    ]);
    assert_eq!(loose.status.code(), Some(0), "{}", String::from_utf8_lossy(&loose.stdout));
    for d in [base, same, slow, plan.parent().unwrap().to_path_buf()] {
        std::fs::remove_dir_all(d).unwrap();
    }
    std::fs::remove_file(page).unwrap();
}

#[test]
fn analyze_and_report_rerun_on_an_existing_folder() {
    let dir = tmp("rerun");
    assert!(smoke(&dir, "3", None).status.success());
    let before = summary(&dir);
    std::fs::remove_file(dir.join("summary.json")).unwrap();
    let o = orchestrate(&["analyze", dir.to_str().unwrap()]);
    assert!(o.status.success());
    assert_eq!(
        serde_json::to_value(summary(&dir)).unwrap(),
        serde_json::to_value(before).unwrap(),
        "analysis is deterministic"
    );
    let o = orchestrate(&["report", dir.to_str().unwrap(), "--format", "md"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = orchestrate(&["report", dir.to_str().unwrap(), "--format", "pdf"]);
    assert_eq!(o.status.code(), Some(2));
    let o = orchestrate(&["analyze", "/nonexistent/results"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/results is not a results folder"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn duckdb_pyarrow_and_pandas_read_the_results_tree_and_reproduce_the_paper_medians() {
    let Some(python) = test_python() else { return };
    let out = tmp("readers");
    let o = orchestrate(&["run", "../plans/smoke.yaml", "--out", out.to_str().unwrap(), "--quiet"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = summary(&out);
    // Every mode of every program, with the null group that calibrates it.
    let mut expected = std::collections::BTreeMap::new();
    let mut args = vec![
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/readers/paper_medians.py").to_string(),
        out.display().to_string(),
        s.tsc_hz.to_string(),
    ];
    for (name, p) in &s.programs {
        let null = &s.nulls[p.null_trace.as_ref().unwrap_or(&p.trace)].group;
        for m in &p.modes {
            let sessions = m.sessions.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
            args.push(format!("{name}:{sessions}:{null}"));
            expected.insert(format!("{name}:{sessions}"), m.latency_raw_ns.at(50.0).unwrap());
        }
    }
    let o = Command::new(python).args(&args).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got: std::collections::BTreeMap<String, std::collections::BTreeMap<String, f64>> =
        serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(got.keys().collect::<Vec<_>>(), ["duckdb", "pandas", "pyarrow"]);
    for (reader, medians) in &got {
        assert_eq!(medians.len(), expected.len(), "{reader}");
        for (k, want) in &expected {
            assert!((medians[k] - want).abs() < 1e-9, "{reader} {k}: {} vs orchestrate's {want}", medians[k]);
        }
    }
    std::fs::remove_dir_all(&out).unwrap();
}

/// One seed of the simulator check: returns, per program and mode, (recovered median, true median
/// of the model latencies of the probes in the trace, the median's 95 % interval for a new
/// bring-up, found sessions, simulated sessions).
type ModeCheck = (String, f64, f64, [f64; 2], Vec<u32>, Vec<u32>);

fn simulated_study(seed: u64, probes: u32) -> Vec<ModeCheck> {
    let (mut plan, _) = latency_plan::load(
        std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../plans/paper.yaml")),
        Some("sim"),
    )
    .unwrap();
    for t in &mut plan.traces {
        if let latency_plan::TraceSource::Generate(g) | latency_plan::TraceSource::StandIn { generate: g, .. } =
            &mut t.source
        {
            g.count = probes;
        }
    }
    let (schedule, sim, summary) = crate::twin::simulate(&plan, &SimModel::default(), seed);
    let mut out = Vec::new();
    for (name, p) in &summary.programs {
        let truth = sim.program_model(&p.bitstream);
        let sessions: Vec<&latency_schedule::Session> =
            schedule.sessions.iter().filter(|s| &s.program == name).collect();
        let mode_of = |n: u32| sim.session_mode(sessions.iter().find(|s| s.session == n).unwrap(), truth.modes.len());
        let mut simulated: Vec<Vec<u32>> = (0..truth.modes.len())
            .map(|m| sessions.iter().map(|s| s.session).filter(|&n| mode_of(n) == m).collect::<Vec<u32>>())
            .filter(|v| !v.is_empty())
            .collect();
        simulated.sort_by(|a, b| truth.median(mode_of(a[0])).total_cmp(&truth.median(mode_of(b[0]))));
        for (m, want) in p.modes.iter().zip(simulated.iter().chain(std::iter::repeat(&Vec::new()))) {
            // Ground truth: the model latency of every probe the program forwards (the first probe
            // after the gap is excluded by the analysis, so from the truth too).
            let mode = mode_of(m.sessions[0]);
            let template =
                plan.traces.iter().find(|t| t.name == p.trace).and_then(|t| t.source.generated()).map(|g| g.template);
            let mut lat: Vec<f64> = (2..=u64::from(probes))
                .filter(|&id| template.is_none_or(|t| latency_plan::probes::forwarded(t, id)))
                .map(|id| sim.packet_latency(&p.bitstream, mode, id))
                .collect();
            out.push((
                name.clone(),
                m.latency_ns.at(50.0).unwrap(),
                latency_analysis::stats::median(&mut lat),
                m.median_ci95_ns.unwrap(),
                m.sessions.clone(),
                want.clone(),
            ));
        }
        assert_eq!(p.modes.len(), simulated.len(), "seed {seed} {name}: modes found {:?}", p.modes);
    }
    out
}

#[test]
fn simulator_medians_and_modes_are_recovered_for_20_seeds() {
    // The paper's protocol (5 sessions x 10 runs, all four programs and their null sets) with
    // 4,000-probe traces. The modes must hold exactly the sessions the simulator put in them, and
    // the recovered median of each program (and of each FiveTuple mode) must be near the true
    // median of the simulated probes' latencies: a study measures its own bring-ups, each of which
    // shifts a program's pipeline path (σ 1 ns) and the null's offset (σ 1.5 ns, and 5 ns per null
    // run), so its median misses the truth by about 1 ns (σ; 40 paper-size seeds of
    // `make validate-stats`: RMSE 0.87–1.24 ns). Each error is held to 4 ns (the old twin, without
    // bring-up variance, held 0.5), and the interval for a new bring-up covers the truth as a 95 %
    // interval should: in at least 85 % of the (seed, mode) cases.
    let results: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..2u64)
            .map(|half| {
                scope.spawn(move || {
                    (0..10u64)
                        .flat_map(|i| {
                            let seed = 1000 + 2 * i + half;
                            simulated_study(seed, 4000).into_iter().map(move |r| (seed, r))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(results.len(), 20 * 4 + results.iter().filter(|(_, r)| r.0 == "five_tuple").count() - 20);
    let mut worst: f64 = 0.0;
    let mut covered = 0;
    for (seed, (name, got, truth, [lo, hi], found, simulated)) in &results {
        assert_eq!(found, simulated, "seed {seed} {name}: mode sessions");
        assert!((got - truth).abs() <= 4.0, "seed {seed} {name}: recovered {got:.3} vs true {truth:.3}");
        worst = worst.max((got - truth).abs());
        covered += usize::from(lo <= truth && truth <= hi);
    }
    let coverage = covered as f64 / results.len() as f64;
    eprintln!("largest error over 20 seeds: {worst:.3} ns; the intervals cover {covered} of {}", results.len());
    assert!(coverage >= 0.85, "the 95 % intervals cover the truth in {covered} of {}", results.len());
}

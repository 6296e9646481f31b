//! Studies with factors on the simulated testbed: the levels in the dry run, the hive tree, the
//! summary, the report, DuckDB's view of the tree and a resume; the analysis recovers the
//! simulator's load model at every level.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use latency_plan::FactorValue;
use latency_results::summary::Summary;

use crate::cli::assert_invalid;
use crate::common::{orchestrate, stderr, test_python, tmp, tmp_dir};

const PLAN: &str = "tests/fixtures/good/sweep.yaml";
const QUIET: &str = "tests/fixtures/good/quiet.yaml";
const PACING: [u32; 4] = [500, 50_000, 10_000_000, 19_000_000];
const FRAMES: [u32; 2] = [128, 256];

fn summary(dir: &Path) -> Summary {
    serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap()
}

/// The simulator model's latency of Forward at `pps`: its median (149 ns) plus the mean M/D/1
/// queueing delay ρ/(2μ(1 − ρ)) of its 20 Mpps pipeline (testbed/model.rs).
fn model_median(pps: u32) -> f64 {
    let mu = 20e6;
    let rho = f64::from(pps) / mu;
    149.0 + 1e9 * rho / (2.0 * mu * (1.0 - rho))
}

#[test]
fn a_load_sweep_recovers_the_model_at_every_level_and_every_level_is_in_tree_summary_and_report() {
    let Some(python) = test_python() else { return };
    let plan = orchestrate(&["plan", PLAN]);
    let text = String::from_utf8_lossy(&plan.stdout);
    assert!(text.contains("8 levels: pacing_pps (4 values) × frame_size (2 values), design cross"), "{text}");
    assert!(text.contains("run 7 at pacing_pps=50000/frame_size=128"), "{text}");

    let dir = tmp("sweep");
    let o = orchestrate(&["run", PLAN, "--out", dir.to_str().unwrap(), "--sim-model", QUIET, "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = summary(&dir);
    assert!(s.health.problems.is_empty(), "{:?}", s.health.problems);
    let p = &s.programs["forward"];
    let names: Vec<&str> = p.levels.iter().filter_map(|l| l.summary.level.as_deref()).collect();
    let want: Vec<String> =
        PACING.iter().flat_map(|pps| FRAMES.map(|f| format!("pacing_pps={pps}/frame_size={f}"))).collect();
    assert_eq!(names, want);
    assert_eq!(p.level.as_deref(), Some(want[0].as_str()), "the headline is the first level's");
    for l in &p.levels {
        let (pps, frame) = (l.factors["pacing_pps"].as_num().unwrap(), l.factors["frame_size"].as_num().unwrap());
        let got = l.summary.latency_ns.at(50.0).unwrap();
        let model = model_median(pps);
        assert!((got - model).abs() < 0.5, "{pps} pps, {frame} B: {got} ns against the model's {model} ns");
        // The null calibration is measured at each frame size, at the base pacing.
        assert_eq!(
            (l.null_calibration.as_str(), l.null_level.clone()),
            ("per_level", format!("pacing_pps=500/frame_size={frame}"))
        );
    }
    let median = |pps: u32| {
        p.levels.iter().find(|l| l.factors["pacing_pps"] == pps).unwrap().summary.latency_ns.at(50.0).unwrap()
    };
    assert!((median(50_000) - median(500)).abs() < 1.0, "flat at low load");
    assert!(median(19_000_000) > median(500) + 400.0, "past the knee");

    // The hive tree: every level of the program, the null at its calibration levels.
    for pps in PACING {
        for f in FRAMES {
            let d = dir.join(format!("data/program=forward/pacing_pps={pps}/frame_size={f}/session=2"));
            assert_eq!(d.read_dir().unwrap().count(), 3, "{}", d.display());
        }
    }
    for f in FRAMES {
        assert!(dir.join(format!("data/program=null-fwd/pacing_pps=500/frame_size={f}/session=1")).is_dir());
    }
    // DuckDB reads the factors as columns of the hive tree (it refuses trees whose folders differ).
    let query = format!(
        "import duckdb; print(duckdb.sql(\"SELECT program, pacing_pps, frame_size, count(DISTINCT session || '-' || run) FROM \
         read_parquet('{}/data/**/*.parquet', hive_partitioning=true) GROUP BY ALL ORDER BY ALL\").fetchall())",
        dir.display()
    );
    let o = Command::new(python).args(["-c", &query]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = String::from_utf8_lossy(&o.stdout);
    assert_eq!(rows.matches("('forward'").count(), 8, "{rows}");
    assert_eq!(rows.matches("('null-fwd', 500, ").count(), 2, "{rows}");
    assert!(rows.contains("('forward', 19000000, 256, 6)") && rows.contains("('null-fwd', 500, 128, 6)"), "{rows}");

    // The report's per-level table and a figure per factor.
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert_eq!(md.matches("| forward | pacing_pps ").count(), 8, "{md}");
    for f in ["latency-vs-factor-1.svg", "latency-vs-factor-2.svg"] {
        assert!(dir.join("figures").join(f).is_file(), "{f}");
    }
    assert!(md.contains("Latency against pacing_pps") && md.contains("Latency against frame_size"));

    // A resume after the journal lost its last half redoes those runs, bit for bit.
    let before = tree_checksums(&dir.join("data"));
    let journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap();
    let lines: Vec<&str> = journal.lines().collect();
    std::fs::write(dir.join("journal.jsonl"), lines[..lines.len() / 2].join("\n") + "\n").unwrap();
    let o = orchestrate(&["run", PLAN, "--out", dir.to_str().unwrap(), "--sim-model", QUIET, "--resume", "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(tree_checksums(&dir.join("data")), before);
    assert_eq!(summary(&dir).programs["forward"].levels, p.levels);
}

/// sha256 of every file under `dir`, by relative path.
fn tree_checksums(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(dir).unwrap().display().to_string();
                out.insert(rel, latency_plan::digest::sha256_file(&path).unwrap());
            }
        }
    }
    out
}

#[test]
fn factor_mistakes_are_all_reported() {
    assert_invalid(
        "tests/fixtures/bad/factors.yaml",
        &[
            "tests/fixtures/bad/factors.yaml:5:15: factor `pacing_pps` repeats the value 500",
            "tests/fixtures/bad/factors.yaml:5:26: 0 is out of range (1..=100000000)",
            "tests/fixtures/bad/factors.yaml:6:15: factor `frame_size`: trace `made`: a frame of 40 B is too short: at least 60 B hold its headers, the probe ids and Ethernet's 60 B minimum",
            "tests/fixtures/bad/factors.yaml:6:15: factor `frame_size`: trace `published` is not generated, so it cannot be made at other sizes",
            "tests/fixtures/bad/factors.yaml:7:3: unknown factor `flows`",
            "tests/fixtures/bad/factors.yaml:9:8: unknown value `sessions_first`: expected one of `session_level_run`, `level_session_run`",
        ],
    );
}

#[test]
fn a_header_inserting_programs_bound_follows_each_levels_frame_size() {
    let dir = tmp("inserting");
    let o = orchestrate(&["run", "tests/fixtures/good/inserting.yaml", "--out", dir.to_str().unwrap(), "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = summary(&dir);
    // By hand (UG1308, as run_latency.py): base 55 cycles, 1 cycle per packet inserted, 512-bit
    // bus. 128 B: 1024 / 512 = 2 cycles a packet, ⌈55 / 2⌉ = 28 in flight → 83 cycles; 512 B: 8
    // cycles a packet, ⌈6.9⌉ = 7 → 62 cycles.
    let bounds: Vec<(u32, u32, u32)> = s.programs["transit"]
        .levels
        .iter()
        .map(|l| {
            let b = l.summary.vendor_bound.as_ref().unwrap();
            (l.factors["frame_size"].as_num().unwrap(), b.insertion.as_ref().unwrap().in_flight, b.cycles)
        })
        .collect();
    assert_eq!(bounds, [(128, 28, 83), (512, 7, 62)]);
    // Per probe: every probe of a level is of its frame size, so its bound is the level's and the
    // probes above it are the level's violations (the simulator's rare outliers).
    for l in &s.programs["transit"].levels {
        let b = l.summary.vendor_bound.as_ref().unwrap();
        let rows = &b.insertion.as_ref().unwrap().by_frame_len;
        let f = l.factors["frame_size"].as_num().unwrap();
        assert_eq!(rows.len(), 1, "{rows:?}");
        let row = &rows[0];
        assert_eq!((u32::from(row.frame_len), row.bound_cycles, row.above_bound), (f, b.cycles, b.violations));
        assert!(row.probes >= 2 * 1399 && (row.p50_ns - l.summary.latency_ns.at(50.0).unwrap()).abs() < 2.0, "{row:?}");
    }
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        md.contains("transit inserts headers: its bound is 55 base cycles + 1 cycles × 28 packets in flight (128 B")
            && md.contains("Latency against frame length, each held to the bound for traffic of that length: 128 B: "),
        "{md}"
    );
}

#[test]
fn bursts_queue_behind_each_other_and_a_sender_that_does_not_burst_is_caught() {
    let dir = tmp("bursts");
    let plan = "tests/fixtures/good/bursts.yaml";
    let o = orchestrate(&["run", plan, "--out", dir.to_str().unwrap(), "--sim-model", QUIET, "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = summary(&dir);
    let median = |b: u32| {
        s.programs["forward"]
            .levels
            .iter()
            .find(|l| l.factors["burst"] == b)
            .unwrap()
            .summary
            .latency_ns
            .at(50.0)
            .unwrap()
    };
    // By hand: at 1 Mpps on the 20 Mpps pipeline, ρ = 0.05 adds 1.32 ns to every probe; in a
    // burst the j-th probe also waits j × (50 − 12.16) ns (a 128 B frame and 24 B of overhead at
    // 100 Gb/s take 12.16 ns): half the probes wait at most 3 × 37.84 ns, half at least 4 ×,
    // so the median moves by about 3.5 × 37.84 = 132.4 ns.
    assert!((median(1) - model_median(1_000_000)).abs() < 0.5, "{}", median(1));
    assert!((median(8) - median(1) - 132.4).abs() < 10.0, "{} against {}", median(8), median(1));
    let dry = String::from_utf8_lossy(&orchestrate(&["plan", plan, "--testbed", "../testbeds/oct-u280.yaml"]).stdout)
        .into_owned();
    assert!(dry.contains("--pps=1000000 --pps-multi=8 ") && dry.contains("--pps=1000000 /var/tmp"), "{dry}");

    let dir = tmp("even-sender");
    let o = orchestrate(&[
        "run",
        plan,
        "--out",
        dir.to_str().unwrap(),
        "--sim-model",
        "tests/fixtures/good/even-sender.yaml",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the bypass copies arrived in bursts of 1.")
            && stderr(&o).contains("probes on average, not 8"),
        "{}",
        stderr(&o)
    );
}

/// `plans/int.yaml` on the simulator without per-copy noise: IntTransit's latency grows by the
/// model's 0.0625 ns per byte of the entering frame on top of its median (68 % of its 60-cycle
/// bound: 163.2 ns), Forward's stays at 149 ns; every level is in summary, tree and report. Real
/// hardware refuses the plan at the manifest's `sha256: unbuilt`.
///
/// The plan's 500 probes draw the packet part of the latency once per probe id, the same draws at
/// every level: their sample median misses the model's by a standard error of about 0.45 ns
/// (1 / (2 f √500), f ≈ 0.05 /ns the model's density at its median), shared by all levels. So each
/// level is held to 1.5 ns of the model, and its difference from the first level to 0.5 ns.
#[test]
fn the_int_study_recovers_the_transit_hops_frame_length_dependent_latency() {
    const INT: &str = "../plans/int.yaml";
    let dir = tmp("int-sim");
    let o = orchestrate(&["run", INT, "--out", dir.to_str().unwrap(), "--sim-model", QUIET, "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = summary(&dir);
    assert!(s.health.problems.is_empty(), "{:?}", s.health.problems);
    for (program, base, per_byte) in [("forward", 149.0, 0.0), ("int_transit", 0.68 * 60.0 * 4.0, 0.0625)] {
        let levels = &s.programs[program].levels;
        let sizes: Vec<u32> = levels.iter().map(|l| l.factors["frame_size"].as_num().unwrap()).collect();
        assert_eq!(sizes, [128, 512, 1024], "{program}");
        let first = levels[0].summary.latency_ns.at(50.0).unwrap();
        for l in levels {
            let f = l.factors["frame_size"].as_num().unwrap();
            let (got, model) = (l.summary.latency_ns.at(50.0).unwrap(), base + per_byte * f64::from(f));
            assert!((got - model).abs() < 1.5, "{program} at {f} B: {got} ns against the model's {model} ns");
            let (rise, model_rise) = (got - first, per_byte * f64::from(f - 128));
            assert!((rise - model_rise).abs() < 0.5, "{program} from 128 B to {f} B: {rise} ns, model {model_rise} ns");
            assert_eq!(l.null_level, format!("frame_size={f}"), "a null calibration per frame size");
            let runs = dir.join(format!("data/program={program}/frame_size={f}/session=2"));
            assert_eq!(runs.read_dir().unwrap().count(), 3, "{}", runs.display());
        }
    }
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert_eq!(md.matches("| int_transit | frame_size ").count(), 3, "{md}");
    assert!(md.contains("Latency against frame_size"), "{md}");

    let o =
        orchestrate(&["run", INT, "--testbed", "../testbeds/oct-u280.yaml", "--out", tmp("int-oct").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(
            "bitstreams/int_transit.yaml:10:9: bitstream `int_transit` is not built (`sha256: unbuilt`); testbed \
             `oct-u280` flashes built images only"
        ),
        "{}",
        stderr(&o)
    );
}

/// Factors whose values are words: `trace` replaces every program's (and null calibration's)
/// trace at its level, and a template variable (`agent_backend`, the inventory's
/// `receiver.backend`) is set in every command of its level, the bring-up's included.
#[test]
fn trace_and_template_variable_factors_set_the_traffic_and_the_commands_of_their_levels() {
    const WORDS: &str = "tests/fixtures/good/word-factors.yaml";
    let o = orchestrate(&["plan", WORDS, "--testbed", "../testbeds/oct-u280.yaml", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for s in v["sessions"].as_array().unwrap() {
        let level = s["runs"][0]["level"]["values"].as_array().unwrap();
        let backend = level[1][1].as_str().unwrap();
        let start = s["steps"].as_array().unwrap().iter().find(|x| x["action"] == "agent_start").unwrap();
        let command = start["command"].as_str().unwrap();
        assert!(command.contains(&format!(" capture --backend {backend} ")), "{command}");
        let trace = level[0][1].as_str().unwrap();
        for run in s["runs"].as_array().unwrap() {
            assert_eq!(run["trace"], trace, "every run of the level replays its trace");
        }
    }

    let dir = tmp("word-factors");
    let o = orchestrate(&["run", WORDS, "--out", dir.to_str().unwrap(), "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = summary(&dir);
    let p = &s.programs["forward"];
    let names: Vec<&str> = p.levels.iter().filter_map(|l| l.summary.level.as_deref()).collect();
    assert_eq!(
        names,
        [
            "trace=fwd/agent_backend=dpdk",
            "trace=fwd/agent_backend=af-packet",
            "trace=int/agent_backend=dpdk",
            "trace=int/agent_backend=af-packet"
        ]
    );
    for l in &p.levels {
        // Forward drops 3 in 10 of the Forward trace's 1,000 probes (table misses); each of the INT
        // trace's 600 is addressed to a table hit: matched over the session's 2 runs, each run
        // checked against its own trace (the program's is `int`). The null is measured with the
        // level's trace and backend.
        let forwarded = if l.factors["trace"] == FactorValue::Word("fwd".into()) { 2 * 700 } else { 2 * 600 };
        assert_eq!(l.summary.sessions[0].matched, forwarded, "{:?}", l.factors);
        assert_eq!(Some(&l.null_level), l.summary.level.as_ref(), "a null calibration per level");
        assert_eq!(l.null_calibration, "per_level");
    }
    assert!(dir.join("data/program=forward/trace=int/agent_backend=af-packet/session=4").is_dir());

    let text = std::fs::read_to_string(WORDS).unwrap();
    let bad = tmp_dir("word-factors-bad").join("plan.yaml");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let text = text.replace("../../../../bitstreams", root.join("bitstreams").to_str().unwrap());
    std::fs::write(&bad, text.replace("order: level_session_run\n", "").replace("[fwd, int]", "[fwd, udp]")).unwrap();
    let o = orchestrate(&["validate", bad.to_str().unwrap()]);
    let err = stderr(&o);
    assert!(err.contains(":7:10: factor `trace`: no trace `udp` in `traces`"), "{err}");
    assert!(
        err.contains(
            ":8:18: factor `agent_backend` sets a template variable, which a bring-up uses once per session: it \
                      needs `order: level_session_run`"
        ),
        "{err}"
    );
}

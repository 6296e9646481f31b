//! A synthetic year of nightly paper-scale studies in a history store, for `make bench-trend`.
//!
//! `cargo run --release -p orchestrator --example history_year -- STORE [NIGHTS]`
//!
//! Each night holds the paper's four programs (Table I medians and p99s, with night-to-night noise
//! of sd 0.3 ns and 1 ns; Forward 5 ns slower from night 200 on) and a paper study's per-probe
//! estimates: 4 programs and 4 null groups × 5 sessions × 20,000 probes (800,000 rows a night).

use std::time::Instant;

use latency_history::store::Store;
use latency_history::store::StudyKey;
use latency_results::history::row::Estimate;
use latency_results::history::row::HEADLINE;
use latency_results::history::row::Row;
use latency_results::history::table::Micros;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The paper's programs: name, median and p99 (Table I, ns).
const PROGRAMS: [(&str, f64, f64); 4] = [
    ("forward", 149.0, 168.0),
    ("five_tuple", 181.0, 205.0),
    ("remove_header", 157.0, 174.0),
    ("checksum", 165.0, 186.0),
];

/// A normal draw (Box–Muller).
fn normal(r: &mut ChaCha8Rng) -> f64 {
    let (u, v): (f64, f64) = (r.random_range(f64::EPSILON..1.0), r.random());
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(url) = args.next() else {
        eprintln!("usage: history_year STORE [NIGHTS]");
        std::process::exit(2);
    };
    let nights: u32 = args.next().map_or(365, |n| n.parse().expect("NIGHTS is a number"));
    let store = Store::create(&url).unwrap_or_else(|e| panic!("{e}"));
    let mut r = ChaCha8Rng::seed_from_u64(2026);
    let start = Instant::now();
    // One night's estimates (the values differ night to night in a real history; their volume is
    // what matters to the store).
    let mut estimates = Vec::with_capacity(800_000);
    for (program, median, _) in PROGRAMS {
        for (name, kind, offset) in
            [(program.to_string(), "program", 24.0 + median), (format!("null-{program}"), "null", 24.0)]
        {
            for session in 1..=5 {
                estimates.extend((1..=20_000).map(|probe| Estimate {
                    program: name.clone(),
                    level: None,
                    kind: kind.into(),
                    session,
                    probe,
                    estimate_ns: offset + 3.0 * normal(&mut r),
                }));
            }
        }
    }
    let day0 = 1_767_225_600_i64; // 2026-01-01T00:00:00Z
    for night in 0..nights {
        let secs = day0 + 7200 + i64::from(night) * 86_400;
        let time = Micros(secs * 1_000_000);
        let utc = time.utc();
        let key = StudyKey { date: utc[..10].to_string(), study: format!("paper-{}", utc.replace([':', '-'], "")) };
        let rows: Vec<Row> = PROGRAMS
            .iter()
            .map(|&(program, median, p99)| {
                let step = if program == "forward" && night >= 200 { 5.0 } else { 0.0 };
                let p50 = median + step + 0.3 * normal(&mut r);
                let p99 = p99 + step + normal(&mut r);
                Row {
                    name: "paper".into(),
                    time,
                    ended: None,
                    plan_hash: "0".repeat(64),
                    tool_version: env!("CARGO_PKG_VERSION").into(),
                    git_commit: String::new(),
                    testbed: "sim".into(),
                    host_facts: "{}".into(),
                    seed: u64::from(night),
                    report: None,
                    program: program.into(),
                    level: None,
                    mode: HEADLINE.into(),
                    bitstream_sha256: String::new(),
                    p50_ns: p50,
                    p50_ci95_lo_ns: Some(p50 - 0.6),
                    p50_ci95_hi_ns: Some(p50 + 0.6),
                    p99_ns: p99,
                    p99_ci95_lo_ns: Some(p99 - 2.0),
                    p99_ci95_hi_ns: Some(p99 + 2.0),
                    quantiles_json: format!("{{\"p50\":{p50},\"p99\":{p99}}}"),
                    null_offset_ns: 24.0,
                    reproducibility_ns: 1.0,
                    sessions: 5,
                    probes: 100_000,
                    failed_runs: 0,
                    problems: 0,
                    healthy: true,
                    vendor_violations: None,
                }
            })
            .collect();
        store.put_study(&key, &rows, &estimates).unwrap_or_else(|e| panic!("{e}"));
    }
    eprintln!(
        "history_year: {nights} nights × {} programs, {} estimates a night, written in {:.1} s",
        PROGRAMS.len(),
        estimates.len(),
        start.elapsed().as_secs_f64()
    );
}

//! Soak mode's cost per packet and its memory: a synthetic feed of probe pairs (pipeline copy,
//! then bypass copy, differentials spread over ~300 µs) through the writer's soak path
//! (pairing table, HDR histogram, interval log appended every 10 s), as the writer runs it for
//! every batch. Prints ns per packet (copy) and the process's peak resident memory before and
//! after 10⁹ probes (2 × 10⁹ copies); pass a count to feed fewer. Run with
//! `cargo bench -p latency-agent --bench soak [-- PROBES]` (`make bench-soak`).

use std::hint::black_box;
use std::time::{Duration, Instant};

use latency_agent::recorder::{SoakOptions, SoakRun};
use latency_proto::schema::Port;

/// Peak resident set of this process, KiB (`VmHWM`).
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("VmHWM:")?.trim().split(' ').next()?.parse().ok()))
        .unwrap_or(0)
}

fn main() {
    let probes: u64 = std::env::args().filter_map(|a| a.parse().ok()).next().unwrap_or(1_000_000_000);
    let dir = std::env::temp_dir().join(format!("agent-bench-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch folder");
    let opts = SoakOptions { interval: Duration::from_secs(10), records: false, tsc_hz: 2.4e9 };
    let before = peak_rss_kib();
    let mut run = SoakRun::open(&dir, 1, &opts).expect("log");
    let opened = peak_rss_kib();
    // A batch of 256 copies at a time, as the pollers hand them over; ids wrap like a looped trace.
    let mut x: u64 = 88172645463325252;
    let start = Instant::now();
    let mut tsc = 0u64;
    for first in (0..probes).step_by(128) {
        for id in first..(first + 128).min(probes) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            tsc += 2_400;
            let trace_id = id % 20_000 + 1;
            // Bypass first, then the pipeline copy 280-340 µs later.
            run.offer(black_box(trace_id), Port::Bypass, tsc);
            run.offer(black_box(trace_id), Port::Pipeline, tsc + 672_000 + x % 144_000);
        }
        run.tick().expect("append");
    }
    let elapsed = start.elapsed();
    let after = peak_rss_kib();
    let (log, pairer) = run.finish().expect("finish");
    let log_bytes = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
    let intervals = latency_proto::soak::read_log(&std::fs::read(&log).expect("log")).expect("a log");
    let recorded: u64 = intervals.iter().map(|i| i.differentials.len()).sum();
    assert_eq!((pairer.matched, recorded), (probes, probes), "every pair recorded");
    let mut all = latency_proto::soak::Differentials::default();
    intervals.iter().for_each(|i| all.add(&i.differentials));
    println!(
        "soak: {probes} probes ({} copies) in {:.1} s: {:.1} ns per copy (target <= 30 ns); p50 {:.1} us, p99 {:.1} us \
         (3 significant digits)",
        2 * probes,
        elapsed.as_secs_f64(),
        elapsed.as_nanos() as f64 / (2 * probes) as f64,
        all.quantile(0.5).unwrap_or(f64::NAN) / 1e3,
        all.quantile(0.99).unwrap_or(f64::NAN) / 1e3,
    );
    println!(
        "soak: peak resident memory {before} KiB before, {opened} KiB with the run open, {after} KiB after all \
         probes (pairing table {} KiB, histograms {} KiB); log {} intervals, {log_bytes} bytes",
        latency_agent::recorder::PAIRING_SLOTS * 24 / 1024,
        latency_proto::soak::Differentials::default().memory_bytes() / 1024,
        intervals.len(),
    );
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

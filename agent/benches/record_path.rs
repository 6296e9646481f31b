//! Per-packet record path of the agent: TSC stamp + probe id parse + append to the batch being
//! built, as a poller and the writer do for every packet. Prints ns/packet for both probe formats.
//! Run with `cargo bench -p latency-agent`.

use std::hint::black_box;
use std::time::Instant;

use latency_proto::probe::{self, ProbeFormat};
use latency_proto::{Port, RecordBuilder};
use latency_sys::rdtsc_fenced;

fn frames(format: ProbeFormat, n: u64) -> Vec<Vec<u8>> {
    (1..=n)
        .map(|id| {
            // 14-byte Ethernet + 20-byte IPv4 + 8-byte UDP headers, then the probe payload.
            let mut f = vec![0u8; 42];
            f.extend(probe::payload(id, format, 86));
            f
        })
        .collect()
}

fn main() {
    const N: u64 = 20_000;
    const ROUNDS: usize = 100;
    for format in [ProbeFormat::Latencylab, ProbeFormat::Compact] {
        let fs = frames(format, N);
        let mut best = f64::INFINITY;
        for _ in 0..5 {
            let start = Instant::now();
            for _ in 0..ROUNDS {
                let mut b = RecordBuilder::with_capacity(4096);
                for (seq, f) in fs.iter().enumerate() {
                    let tsc = rdtsc_fenced();
                    if let Some(p) = probe::parse(black_box(f), format) {
                        b.push(p.id, Port::Pipeline, tsc, seq as u64, f.len() as u16, None);
                    }
                    if b.len() == 4096 {
                        black_box(b.finish().ok());
                    }
                }
                black_box(b.finish().ok());
            }
            let ns = start.elapsed().as_nanos() as f64 / (N as f64 * ROUNDS as f64);
            best = best.min(ns);
        }
        println!(
            "record path ({}): {best:.1} ns/packet (target <= 50 ns), best of 5 x {} packets",
            format.name(),
            N * ROUNDS as u64
        );
    }
}

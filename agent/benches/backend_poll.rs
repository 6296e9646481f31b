//! Per-packet cost of each kernel backend's stamping loop: a port's ring is filled with 4,000
//! probes on a veth pair, then drained by `poll` with the whole record path (TSC stamp, probe
//! parse, append to the batch), as a poller does; ns/packet for AF_PACKET and AF_XDP, beside the
//! target. Only the drain is timed: the probes are sent, and anything else the interface received
//! is drained, before the clock starts. Needs root and `ip`: the benchmark re-runs itself inside a
//! private network namespace. Run with `cargo bench -p latency-agent --bench backend_poll` (part
//! of `make bench-agent`).

use std::hint::black_box;
use std::process::Command;
use std::time::{Duration, Instant};

use latency_agent::capture::{KernelPort, RxPort};
use latency_proto::probe::{self, ProbeFormat};
use latency_proto::{Port, RecordBuilder};
use latency_sys::af_packet::PacketSender;

/// Probes per fill: fewer than either ring holds (AF_XDP 4,096 frames).
const PROBES: u64 = 4000;
const ROUNDS: usize = 30;
/// The per-packet budget of the receive path, ns.
const TARGET_NS: f64 = 30.0;
const INSIDE: &str = "LATENCY_BENCH_INSIDE_NETNS";

fn ip(args: &[&str]) -> bool {
    Command::new("ip").args(args).status().is_ok_and(|s| s.success())
}

fn main() {
    if std::env::var_os(INSIDE).is_none() {
        let ns = format!("agent-bench-poll-{}", std::process::id());
        if !ip(&["netns", "add", &ns]) {
            println!("backend poll: skipped (needs root and ip)");
            return;
        }
        let ok = ip(&["-n", &ns, "link", "add", "s0", "type", "veth", "peer", "name", "r0"])
            && ["lo", "s0", "r0"].iter().all(|d| ip(&["-n", &ns, "link", "set", d, "up"]));
        let status = ok.then(|| {
            Command::new("ip")
                .args(["netns", "exec", &ns])
                .arg(std::env::current_exe().expect("the benchmark binary"))
                .env(INSIDE, "1")
                .status()
        });
        ip(&["netns", "del", &ns]);
        assert!(matches!(status, Some(Ok(s)) if s.success()), "the benchmark inside the namespace failed");
        return;
    }
    let frames: Vec<Vec<u8>> = (1..=PROBES)
        .map(|id| {
            let mut f = vec![0xff; 6];
            f.extend([2, 0, 0, 0, 0, 1, 0x08, 0x00]);
            f.extend([0u8; 28]);
            f.extend(probe::payload(id, ProbeFormat::Compact, 86));
            f
        })
        .collect();
    let tx = PacketSender::open("s0").expect("sender on s0");
    for backend in ["af_packet", "af_xdp"] {
        let mut port = match backend {
            "af_packet" => KernelPort::af_packet("r0", false),
            _ => KernelPort::af_xdp("r0", false, None),
        }
        .expect("port on r0");
        let mut times = Vec::with_capacity(ROUNDS);
        let mut drained = 0;
        for _ in 0..ROUNDS {
            // Frames the interface received meanwhile (IPv6 router solicitations) are no probes.
            while port.poll(256, &mut |_, _| {}) > 0 {}
            for (k, f) in frames.iter().enumerate() {
                while tx.send(f).is_err() {
                    std::thread::yield_now();
                }
                // Small bursts, so that the veth's backlog never overflows.
                if k % 200 == 199 {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            std::thread::sleep(Duration::from_millis(20));
            let mut b = RecordBuilder::with_capacity(4096);
            let mut seq = 0u64;
            let start = Instant::now();
            while port.poll(256, &mut |data, tsc| {
                if let Some(p) = probe::parse(black_box(data), ProbeFormat::Compact) {
                    b.push(p.id, Port::Pipeline, tsc, seq, data.len() as u16, None);
                }
                seq += 1;
            }) > 0
            {}
            let ns = start.elapsed().as_nanos() as f64 / seq.max(1) as f64;
            black_box(b.finish().ok());
            drained = seq;
            times.push(ns);
        }
        assert_eq!(drained, PROBES, "{backend}: every probe sent was drained");
        times.sort_by(f64::total_cmp);
        println!(
            "backend poll ({backend}): {:.1} ns/packet (target <= {TARGET_NS} ns; ring read + stamp + parse + append), \
             best of {ROUNDS} x {PROBES} packets (median {:.1} ns); {} dropped",
            times[0],
            times[ROUNDS / 2],
            port.drops()
        );
    }
}

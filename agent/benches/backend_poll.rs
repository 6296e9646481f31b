//! Per-packet cost of each kernel backend's stamping loop: 4,000 probes sent on a veth pair in
//! bursts of 200 and drained by `poll` with the poller's whole path (TSC stamp, probe parse, the
//! probe's id, stamp and length appended to what it hands the writer thread), as a poller does; ns/packet for AF_PACKET and AF_XDP, beside the target, in two
//! cases: each burst drained as it arrives, as a poller that keeps up does (the frames still in
//! the caches), and the whole ring drained 20 ms after it filled, as a poller fallen behind does
//! (the frames read from memory). AF_PACKET is timed with the ring slots a controller gives a
//! study of these frames (their length and `FRAME_GROWTH` more) and with the agent's default of
//! 2 KiB. Only the drains are timed: the sending, and anything else the interface received, is
//! not. Needs root and `ip`: the benchmark re-runs itself inside a
//! private network namespace. Run with `cargo bench -p latency-agent --bench backend_poll` (part
//! of `make bench-agent`); `-- af_xdp` (any word of a backend's name) times that backend alone.

use std::hint::black_box;
use std::process::Command;
use std::time::{Duration, Instant};

use latency_agent::capture::{KernelPort, RxPort};
use latency_agent::recorder::Seen;
use latency_proto::capture::FRAME_GROWTH;
use latency_proto::probe::{self, ProbeFormat};
use latency_sys::af_packet::PacketSender;

/// Probes per fill: fewer than either ring holds (AF_XDP 4,096 frames).
const PROBES: u64 = 4000;
/// Probes sent back to back.
const BURST: usize = 200;
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
                .args(std::env::args().skip(1))
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
    let only: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    // AF_PACKET's ring slots as the controller sizes them for this trace (its longest frame and
    // what a program may add), and as the agent has them when not told (2 KiB).
    let longest = frames.iter().map(Vec::len).max().unwrap_or(0) + usize::from(FRAME_GROWTH);
    for (backend, slots) in [("af_packet", Some(longest)), ("af_packet", None), ("af_xdp", None)] {
        if !only.is_empty() && !only.iter().any(|w| backend.contains(w.as_str())) {
            continue;
        }
        let mut port = match backend {
            "af_packet" => KernelPort::af_packet("r0", false, slots),
            _ => KernelPort::af_xdp("r0", false, None),
        }
        .expect("port on r0");
        let backend = match (backend, slots) {
            ("af_packet", Some(l)) => format!("af_packet, slots for frames of {l} B"),
            ("af_packet", None) => "af_packet, 2 KiB slots".to_string(),
            _ => backend.to_string(),
        };
        // What a poller holds for the writer thread, kept from round to round as a poller keeps it.
        let mut seen: Vec<Seen> = Vec::with_capacity(PROBES as usize);
        for backlog in [true, false] {
            let mut times = Vec::with_capacity(ROUNDS);
            for _ in 0..ROUNDS {
                // Frames the interface received meanwhile (IPv6 router solicitations) are no probes.
                while port.poll(256, &mut |_, _| {}) > 0 {}
                // Frames drained (a stray one among them counts: it is handled too) and probes.
                let (mut seq, mut probes) = (0u64, 0u64);
                let mut timed = Duration::ZERO;
                let mut drain = |port: &mut KernelPort, expected: u64| {
                    let start = Instant::now();
                    while probes < expected {
                        port.poll(256, &mut |data, tsc| {
                            if let Some(p) = probe::parse(black_box(data), ProbeFormat::Compact) {
                                seen.push(Seen { id: p.id, tsc, len: data.len().min(u16::MAX as usize) as u16 });
                                probes += 1;
                            }
                            seq += 1;
                        });
                    }
                    timed += start.elapsed();
                };
                for (k, chunk) in frames.chunks(BURST).enumerate() {
                    for f in chunk {
                        while tx.send(f).is_err() {
                            std::thread::yield_now();
                        }
                    }
                    // Let the kernel deliver the burst; the veth's backlog never overflows.
                    std::thread::sleep(Duration::from_micros(200));
                    if !backlog {
                        drain(&mut port, ((k + 1) * BURST).min(frames.len()) as u64);
                    }
                }
                if backlog {
                    std::thread::sleep(Duration::from_millis(20));
                    drain(&mut port, PROBES);
                }
                assert_eq!(probes, PROBES, "{backend}: every probe sent was drained");
                black_box(&seen);
                seen.clear();
                times.push(timed.as_nanos() as f64 / seq as f64);
            }
            times.sort_by(f64::total_cmp);
            let how = if backlog {
                "a ring of 4,000 drained 20 ms after it filled (a poller fallen behind)"
            } else {
                "each burst of 200 drained as it arrives (a poller keeping up)"
            };
            println!(
                "backend poll ({backend}): {:.1} ns/packet (target <= {TARGET_NS} ns; ring read + stamp + parse + \
                 record), {how}: best of {ROUNDS} x {PROBES} packets (median {:.1} ns); {} dropped",
                times[0],
                times[ROUNDS / 2],
                port.drops()
            );
        }
    }
}

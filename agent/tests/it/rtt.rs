//! Round trips between two network namespaces joined by a veth pair: `reflect` (AF_XDP) on one
//! side, `originate` (AF_PACKET) on the other. Every probe sent is accounted for: its
//! transmission and its echo are in the run file once each, and each round trip is positive.
//! Needs root and `ip`; skipped with a notice elsewhere unless CI is set.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use latency_proto::control::AgentEvent;
use latency_proto::probe::ProbeFormat;

use crate::common::{check_run, event, ok, read_run, runs_as_root_with};

/// Two namespaces joined by a0 (in the first) – b0 (in the second), deleted on drop.
struct Pair(String, String);

impl Pair {
    fn new(tag: &str) -> Pair {
        let (a, b) = (format!("rtt-a-{tag}"), format!("rtt-b-{tag}"));
        for ns in [&a, &b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
            ok(Command::new("ip").args(["netns", "add", ns]));
        }
        let pair = Pair(a, b);
        ok(Command::new("ip")
            .args(["-n", &pair.0, "link", "add", "a0", "type", "veth", "peer", "name", "b0", "netns", &pair.1]));
        for (ns, dev) in [(&pair.0, "a0"), (&pair.1, "b0"), (&pair.0, "lo"), (&pair.1, "lo")] {
            ok(Command::new("ip").args(["netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]));
            ok(Command::new("ip").args(["-n", ns, "link", "set", dev, "up"]));
        }
        pair
    }

    /// A second pair, b1 (second namespace) – a1 (first): a return path of its own.
    fn with_return_path(self) -> Pair {
        ok(Command::new("ip")
            .args(["-n", &self.1, "link", "add", "b1", "type", "veth", "peer", "name", "a1", "netns", &self.0]));
        ok(Command::new("ip").args(["-n", &self.0, "link", "set", "a1", "up"]));
        ok(Command::new("ip").args(["-n", &self.1, "link", "set", "b1", "up"]));
        self
    }

    fn mac(&self) -> String {
        Pair::mac_of(&self.1, "b0")
    }

    fn mac_of(ns: &str, dev: &str) -> String {
        let o = Command::new("ip").args(["-n", ns, "-o", "link", "show", dev]).output().unwrap();
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        text.split("link/ether ").nth(1).and_then(|r| r.split(' ').next()).unwrap().to_string()
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for ns in [&self.0, &self.1] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

#[test]
fn originate_and_reflect_account_for_every_probe_between_two_namespaces() {
    if !runs_as_root_with(&["ip"]) {
        return;
    }
    let pair = Pair::new(&std::process::id().to_string());
    let agent = env!("CARGO_BIN_EXE_latency-agent");
    let mut reflector = Command::new("ip")
        .args(["netns", "exec", &pair.1, agent, "reflect", "--backend", "af-xdp", "--port", "b0", "--core", "1"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut events = BufReader::new(reflector.stdout.take().unwrap()).lines();
    match event(&events.next().unwrap().unwrap()) {
        AgentEvent::Ready { ports, .. } => assert_eq!(ports, ["af_xdp:b0"]),
        other => panic!("expected ready: {other:?}"),
    }
    let dir = std::env::temp_dir().join(format!("agent-rtt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("rtt.arrows");
    let n = 3000u64;
    let o = Command::new("ip")
        .args(["netns", "exec", &pair.0, agent, "originate", "--port", "a0", "--core", "0", "--tx-core", "0"])
        .args(["--count", &n.to_string(), "--pps", "20000", "--burst", "2", "--dst-mac", &pair.mac(), "--out"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let seconds = match event(String::from_utf8_lossy(&o.stdout).trim()) {
        AgentEvent::Rtt { sent, received, duplicates, file: f, seconds, .. } => {
            assert_eq!((sent, received, duplicates), (n, n, 0));
            assert_eq!(f, file);
            seconds
        }
        other => panic!("expected rtt: {other:?}"),
    };
    Command::new("kill").args(["-TERM", &reflector.id().to_string()]).status().unwrap();
    match event(&events.next().unwrap().unwrap()) {
        AgentEvent::Reflected { reflected, .. } => assert_eq!(reflected, n),
        other => panic!("expected reflected: {other:?}"),
    }
    assert!(reflector.wait().unwrap().success());

    // Echoes as the pipeline copies, transmissions as the bypass copies: every probe once each,
    // and every round trip positive and below 0.1 s (at 20 kpps the whole run takes ~0.15 s): the
    // echoes' poller spins on the sender's core, so a round trip can hold a scheduler slice or two
    // of a loaded machine (22 ms seen), never a run's length.
    let per_port = read_run(&file);
    check_run(&per_port, n);
    let sent: std::collections::HashMap<u64, u64> = per_port[1].iter().copied().collect();
    // The TSC's rate: the sends' span over the seconds the agent timed it.
    let tsc_hz = (per_port[1].last().unwrap().1 - per_port[1][0].1) as f64 / seconds;
    for &(id, echo) in &per_port[0] {
        let rtt = echo as i64 - sent[&id] as i64;
        assert!(rtt > 0 && (rtt as f64) < 0.1 * tsc_hz, "probe {id}: round trip {rtt} ticks");
    }
    assert!(tsc_hz > 1e8, "paced sends: {tsc_hz} ticks a second");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A classic pcap (microsecond stamps) holding `frames`.
fn pcap(frames: &[Vec<u8>]) -> Vec<u8> {
    // Magic, version 2.4 (two u16), zone, accuracy, snapshot length, Ethernet.
    let mut out = 0xa1b2_c3d4u32.to_le_bytes().to_vec();
    out.extend_from_slice(&[2, 0, 4, 0]);
    for w in [0u32, 0, 65_535, 1] {
        out.extend_from_slice(&w.to_le_bytes());
    }
    for (i, f) in frames.iter().enumerate() {
        for w in [i as u32, 0, f.len() as u32, f.len() as u32] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.extend_from_slice(f);
    }
    out
}

#[test]
fn a_trace_sent_out_of_one_port_comes_back_on_the_return_path_with_both_sides_sleeping() {
    if !runs_as_root_with(&["ip"]) {
        return;
    }
    let pair = Pair::new(&format!("{}r", std::process::id())).with_return_path();
    let agent = env!("CARGO_BIN_EXE_latency-agent");
    let dir = std::env::temp_dir().join(format!("agent-rtt-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Ids that are not 1..n, and one frame that is no probe (skipped).
    let n = 400u64;
    let mut frames: Vec<Vec<u8>> = (0..n)
        .map(|k| {
            let f = ProbeFormat::Latencylab;
            latency_agent::rtt::probe_frame(1000 + 7 * k, f, 100, [0xff; 6], [2, 0, 0, 0, 0, 1])
        })
        .collect();
    frames.insert(5, vec![0u8; 60]);
    let trace = dir.join("t.pcap");
    std::fs::write(&trace, pcap(&frames)).unwrap();
    let pidfile = dir.join("reflector.pid");
    let mut reflector = Command::new("ip")
        .args(["netns", "exec", &pair.1, agent, "reflect", "--port", "b0", "--tx-port", "b1", "--wait"])
        .args(["--probe-format", "latencylab", "--dst-mac", &Pair::mac_of(&pair.0, "a1"), "--pidfile"])
        .arg(&pidfile)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut events = BufReader::new(reflector.stdout.take().unwrap()).lines();
    assert!(matches!(event(&events.next().unwrap().unwrap()), AgentEvent::Ready { .. }));
    assert_eq!(std::fs::read_to_string(&pidfile).unwrap().trim(), reflector.id().to_string());
    let file = dir.join("rtt.arrows");
    let o = Command::new("ip")
        .args(["netns", "exec", &pair.0, agent, "originate", "--port", "a0", "--rx-port", "a1", "--wait"])
        .args(["--probe-format", "latencylab", "--pps", "2000", "--trace"])
        .arg(&trace)
        .arg("--out")
        .arg(&file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    match event(String::from_utf8_lossy(&o.stdout).trim()) {
        AgentEvent::Rtt { sent, received, duplicates, seconds, .. } => {
            assert_eq!((sent, received, duplicates), (n, n, 0));
            // 399 intervals at 2,000 pps: 0.1995 s; sleeping between sends keeps the pace.
            assert!((seconds - 0.1995).abs() < 0.01, "{seconds} s");
        }
        other => panic!("expected rtt: {other:?}"),
    }
    Command::new("kill").args(["-TERM", &reflector.id().to_string()]).status().unwrap();
    match event(&events.next().unwrap().unwrap()) {
        AgentEvent::Reflected { reflected, .. } => assert_eq!(reflected, n),
        other => panic!("expected reflected: {other:?}"),
    }
    assert!(reflector.wait().unwrap().success());
    assert!(!pidfile.exists(), "the reflector removes its pidfile");
    let per_port = read_run(&file);
    let ids: Vec<u64> = per_port[1].iter().map(|r| r.0).collect();
    assert_eq!(ids, (0..n).map(|k| 1000 + 7 * k).collect::<Vec<_>>(), "sent in the trace's order");
    let mut echoed: Vec<u64> = per_port[0].iter().map(|r| r.0).collect();
    echoed.sort_unstable();
    assert_eq!(echoed, ids);
    std::fs::remove_dir_all(&dir).unwrap();
}

//! Round trips between two network namespaces joined by a veth pair: `reflect` (AF_XDP) on one
//! side, `originate` (AF_PACKET) on the other. Every probe sent is accounted for: its
//! transmission and its echo are in the run file once each, and each round trip is positive.
//! Needs root and `ip`; skipped with a notice elsewhere unless CI is set.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use latency_proto::control::AgentEvent;

use crate::common::{check_run, event, have, is_root, ok, read_run};

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

    fn mac(&self) -> String {
        let o = Command::new("ip").args(["-n", &self.1, "-o", "link", "show", "b0"]).output().unwrap();
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
    if !(have("ip") && is_root()) {
        assert!(std::env::var_os("CI").is_none(), "CI must provide root and ip");
        eprintln!("skipped: needs root and ip");
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
    match event(String::from_utf8_lossy(&o.stdout).trim()) {
        AgentEvent::Rtt { sent, received, duplicates, file: f, .. } => {
            assert_eq!((sent, received, duplicates), (n, n, 0));
            assert_eq!(f, file);
        }
        other => panic!("expected rtt: {other:?}"),
    }
    Command::new("kill").args(["-TERM", &reflector.id().to_string()]).status().unwrap();
    match event(&events.next().unwrap().unwrap()) {
        AgentEvent::Reflected { reflected, .. } => assert_eq!(reflected, n),
        other => panic!("expected reflected: {other:?}"),
    }
    assert!(reflector.wait().unwrap().success());

    // Echoes as the pipeline copies, transmissions as the bypass copies: every probe once each,
    // and every round trip positive and below 10 ms (at 20 kpps, ~0.15 s for the whole run).
    let per_port = read_run(&file);
    check_run(&per_port, n);
    let sent: std::collections::HashMap<u64, u64> = per_port[1].iter().copied().collect();
    for &(id, echo) in &per_port[0] {
        let rtt = echo as i64 - sent[&id] as i64;
        assert!(rtt > 0 && rtt < 30_000_000, "probe {id}: round trip {rtt} ticks");
    }
    let span = per_port[1].last().unwrap().1 - per_port[1][0].1;
    assert!(span > 0, "paced sends");
    std::fs::remove_dir_all(&dir).unwrap();
}

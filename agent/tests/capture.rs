//! The agent on real packets: an AF_PACKET capture over two veth pairs in a private network
//! namespace, fed by tcpreplay, controlled over stdin like the orchestrator does. Needs root,
//! `ip` and `tcpreplay` (installed by .ci/run); skipped with a notice elsewhere unless CI is set.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use latency_agent::probe::{self, ProbeFormat};

mod common;
use common::{Netns, check_run, have, is_root, read_run};

/// A classic pcap of `n` broadcast probes (ids 1..=n) and `junk` non-probe frames.
fn write_trace(path: &Path, n: u64, junk: u64, format: ProbeFormat) {
    let mut out = Vec::new();
    out.extend(0xa1b2_c3d4u32.to_le_bytes());
    out.extend([2, 0, 4, 0]);
    out.extend([0u8; 8]);
    out.extend(65535u32.to_le_bytes());
    out.extend(1u32.to_le_bytes());
    let mut frame = |payload: Vec<u8>| {
        let mut f = vec![0xff; 6];
        f.extend([2, 0, 0, 0, 0, 1, 0x88, 0xb5]);
        f.extend(payload);
        f.resize(f.len().max(64), 0);
        out.extend([0u8; 8]);
        out.extend((f.len() as u32).to_le_bytes());
        out.extend((f.len() as u32).to_le_bytes());
        out.extend(f);
    };
    for id in 1..=n {
        frame(probe::payload(id, format, 64));
    }
    for _ in 0..junk {
        frame(b"not a probe".to_vec());
    }
    std::fs::write(path, out).unwrap();
}

#[test]
fn af_packet_capture_records_every_probe_once_per_port() {
    if !(have("ip") && have("tcpreplay") && is_root()) {
        assert!(std::env::var_os("CI").is_none(), "CI must provide root, ip and tcpreplay");
        eprintln!("skipped: needs root, ip and tcpreplay");
        return;
    }
    let ns = Netns::new(&format!("agent-test-{}", std::process::id()));
    let dir = std::env::temp_dir().join(format!("agent-capture-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("t.pcap");
    let n = 3000;
    write_trace(&trace, n, 25, ProbeFormat::Latencylab);

    let mut agent = Command::new("ip")
        .args(["netns", "exec", &ns.0, env!("CARGO_BIN_EXE_latency-agent"), "capture", "--backend", "af-packet"])
        .args(["--ports", "r0,r1", "--cores", "0,1", "--out"])
        .arg(dir.join("runs"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = agent.stdin.take().unwrap();
    let mut events = BufReader::new(agent.stdout.take().unwrap()).lines();
    let mut next = || -> serde_json::Value { serde_json::from_str(&events.next().unwrap().unwrap()).unwrap() };
    let ready = next();
    assert_eq!(ready["event"], "ready");
    let hz = ready["tsc"]["hz"].as_f64().unwrap();

    let mut files: Vec<PathBuf> = Vec::new();
    for run in 1..=2u32 {
        writeln!(stdin, "begin {run}").unwrap();
        let begin = next();
        assert_eq!(begin["run"], run);
        files.push(PathBuf::from(begin["file"].as_str().unwrap()));
        let replay = |dev: &str| {
            Command::new("ip")
                .args(["netns", "exec", &ns.0, "tcpreplay", "-q", "-T", "nano", "-i", dev, "--pps=10000"])
                .arg(&trace)
                .output()
                .unwrap()
        };
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| replay("s0"));
            let b = s.spawn(|| replay("s1"));
            (a.join().unwrap(), b.join().unwrap())
        });
        assert!(a.status.success() && b.status.success());
        std::thread::sleep(std::time::Duration::from_millis(200));
        writeln!(stdin, "end {run}").unwrap();
        let end = next();
        assert_eq!(end["event"], "end", "{end}");
        assert_eq!(end["matched"], n, "{end}");
        assert_eq!((end["pipeline_only"].as_u64(), end["bypass_only"].as_u64()), (Some(0), Some(0)), "{end}");
        assert_eq!(end["records"], 2 * n, "{end}");
        assert_eq!(end["non_probe"], 50, "{end}");
        assert_eq!(end["dropped"], 0, "{end}");
    }
    drop(stdin); // stdin closed: the agent exits cleanly
    assert_eq!(next()["event"], "stopped");
    assert!(agent.wait().unwrap().success());

    for f in &files {
        let per_port = read_run(f);
        check_run(&per_port, n);
        for recs in &per_port {
            // tcpreplay paced 3,000 probes at 10 kpps: ~0.3 s between first and last stamp.
            let span_s = (recs.last().unwrap().1 - recs[0].1) as f64 / hz;
            assert!((span_s - 0.2999).abs() < 0.03, "stamp span {span_s} s");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_detached_agent_is_controlled_through_a_named_pipe() {
    if !have("ip") || !is_root() {
        assert!(std::env::var_os("CI").is_none(), "CI must provide root and ip");
        eprintln!("skipped: needs root and ip");
        return;
    }
    let ns = Netns::new(&format!("agent-fifo-{}", std::process::id()));
    let dir = std::env::temp_dir().join(format!("agent-fifo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("ctl");
    let events = dir.join("events.jsonl");
    let mut agent = Command::new("ip")
        .args(["netns", "exec", &ns.0, env!("CARGO_BIN_EXE_latency-agent"), "capture", "--backend", "af-packet"])
        .args(["--ports", "r0,r1", "--out"])
        .arg(dir.join("runs"))
        .arg("--control")
        .arg(&fifo)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&events).unwrap())
        .spawn()
        .unwrap();
    // Each command from a separate writer, as a controller over SSH would send them.
    let send = |cmd: &str| {
        while !fifo.exists() {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let mut f = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
        writeln!(f, "{cmd}").unwrap();
    };
    send("begin 1");
    send("end 1");
    send("quit");
    assert!(agent.wait().unwrap().success());
    let lines: Vec<serde_json::Value> =
        std::fs::read_to_string(&events).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let kinds: Vec<&str> = lines.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["ready", "begin", "end", "stopped"]);
    assert_eq!(lines[2]["records"], 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

//! Helpers shared by the agent's integration tests.

use std::io::{BufRead, BufReader, Lines, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};

use arrow_array::cast::AsArray;
use arrow_array::types::{UInt8Type, UInt64Type};
use latency_proto::capture::CaptureSetup;
use latency_proto::control::{AgentEvent, RunCounters};
use latency_proto::probe::{self, ProbeFormat};

/// Whether the calling test can run here, `available` saying whether what it `needs` is there.
/// When it is not, the test fails under CI (the environment variable `CI` set: a CI machine must
/// provide everything the tests use), and elsewhere prints one line `SKIPPED <test>: needs
/// <needs>` on stderr and returns false, upon which the test returns at once. A test that can
/// never run in CI is `#[ignore = "why"]` instead.
#[track_caller]
pub fn runs_here(available: bool, needs: &str) -> bool {
    if available {
        return true;
    }
    // libtest runs each test on a thread named after it (also under nextest).
    let test = std::thread::current().name().unwrap_or("this test").to_owned();
    assert!(std::env::var_os("CI").is_none(), "{test}: CI must provide {needs}");
    eprintln!("SKIPPED {test}: needs {needs}");
    false
}

/// Whether the tests run as root with every one of `tools` on the PATH ([`runs_here`]: if not,
/// the test fails under CI and is skipped with a notice elsewhere).
#[track_caller]
pub fn runs_as_root_with(tools: &[&str]) -> bool {
    let mut missing: Vec<&str> = tools.iter().copied().filter(|t| !have(t)).collect();
    if !is_root() {
        missing.insert(0, "root");
    }
    let all: Vec<&str> = std::iter::once("root").chain(tools.iter().copied()).collect();
    runs_here(missing.is_empty(), &format!("{} (missing here: {})", all.join(", "), missing.join(", ")))
}

/// Whether `tool` is on the PATH.
pub fn have(tool: &str) -> bool {
    Command::new("sh").arg("-c").arg(format!("command -v {tool}")).output().is_ok_and(|o| o.status.success())
}

/// Whether the tests run as root.
pub fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Run a command that must succeed.
pub fn ok(cmd: &mut Command) {
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&o.stderr));
}

/// A network namespace with veth pairs s0–r0 and s1–r1 (the two receive ports) and s2–r2 (reflect
/// port r2, seen from s2), deleted on drop.
pub struct Netns(pub String);

impl Netns {
    pub fn new(name: &str) -> Netns {
        let _ = Command::new("ip").args(["netns", "del", name]).output();
        ok(Command::new("ip").args(["netns", "add", name]));
        let ns = Netns(name.to_string());
        for i in 0..3 {
            ok(Command::new("ip").args([
                "-n",
                name,
                "link",
                "add",
                &format!("s{i}"),
                "type",
                "veth",
                "peer",
                "name",
                &format!("r{i}"),
            ]));
        }
        ok(Command::new("ip").args(["netns", "exec", name, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]));
        for dev in ["lo", "s0", "r0", "s1", "r1", "s2", "r2"] {
            ok(Command::new("ip").args(["-n", name, "link", "set", dev, "up"]));
        }
        ns
    }
}

impl Netns {
    /// Replay `trace` on s0 and s1 at once (tcpreplay, `pps` packets per second each).
    pub fn replay_both(&self, trace: &Path, pps: u32) {
        self.replay_on(&["s0", "s1"], trace, pps);
    }

    /// Replay `trace` on each of `devs` at once.
    pub fn replay_on(&self, devs: &[&str], trace: &Path, pps: u32) {
        let replay = |dev: &str| {
            Command::new("ip")
                .args(["netns", "exec", &self.0, "tcpreplay", "-q", "-T", "nano", "-i", dev])
                .arg(format!("--pps={pps}"))
                .arg(trace)
                .output()
                .unwrap()
        };
        let outputs: Vec<_> = std::thread::scope(|sc| {
            let runs: Vec<_> = devs.iter().map(|&d| sc.spawn(move || replay(d))).collect();
            runs.into_iter().map(|r| r.join().unwrap()).collect()
        });
        for (dev, o) in devs.iter().zip(outputs) {
            assert!(o.status.success(), "tcpreplay {dev}: {}", String::from_utf8_lossy(&o.stderr));
        }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// Read a run file: per port, the (id, tsc) records in arrival order (checking `seq`).
pub fn read_run(file: &Path) -> [Vec<(u64, u64)>; 2] {
    let mut ports = read_ports(file, 2).into_iter();
    [ports.next().unwrap(), ports.next().unwrap()]
}

/// Read a run file of a capture on `k` ports: per port, the (id, tsc) records in arrival order.
pub fn read_ports(file: &Path, k: usize) -> Vec<Vec<(u64, u64)>> {
    let reader = arrow_ipc::reader::StreamReader::try_new(std::fs::File::open(file).unwrap(), None).unwrap();
    assert_eq!(reader.schema(), latency_proto::record_schema());
    let mut per_port: Vec<Vec<(u64, u64)>> = vec![Vec::new(); k];
    for b in reader {
        let b = b.unwrap();
        let ids = b.column(0).as_primitive::<UInt64Type>();
        let ports = b.column(1).as_primitive::<UInt8Type>();
        let tsc = b.column(2).as_primitive::<UInt64Type>();
        let seq = b.column(3).as_primitive::<UInt64Type>();
        for k in 0..b.num_rows() {
            let p = ports.value(k) as usize;
            assert_eq!(seq.value(k), per_port[p].len() as u64, "per-port arrival sequence");
            per_port[p].push((ids.value(k), tsc.value(k)));
        }
    }
    per_port
}

/// Every id of `1..=n` exactly once per port, TSC stamps monotonic per port.
pub fn check_run(per_port: &[Vec<(u64, u64)>], n: u64) {
    for (p, recs) in per_port.iter().enumerate() {
        assert!(recs.windows(2).all(|w| w[0].1 <= w[1].1), "port {p}: stamps are monotonic");
        let mut ids: Vec<u64> = recs.iter().map(|r| r.0).collect();
        ids.sort_unstable();
        assert_eq!(ids, (1..=n).collect::<Vec<_>>(), "port {p}: every id exactly once");
    }
}

/// One event line of the agent.
pub fn event(line: &str) -> AgentEvent {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not an agent event: {line:?}: {e}"))
}

/// The agent under test, with its event stream.
pub struct Agent {
    pub child: Child,
    stdin: Option<std::process::ChildStdin>,
    events: Lines<BufReader<ChildStdout>>,
}

impl Agent {
    pub fn spawn(mut cmd: Command) -> Agent {
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        let stdin = child.stdin.take();
        let events = BufReader::new(child.stdout.take().unwrap()).lines();
        Agent { child, stdin, events }
    }

    pub fn send(&mut self, line: &str) {
        writeln!(self.stdin.as_mut().unwrap(), "{line}").unwrap();
    }

    pub fn next(&mut self) -> AgentEvent {
        let line = self.events.next().expect("the agent closed its stdout").unwrap();
        event(&line)
    }

    /// The next event, which must be `ready`: the port names, the TSC rate and the setup.
    pub fn ready(&mut self) -> (Vec<String>, f64, CaptureSetup) {
        match self.next() {
            AgentEvent::Ready { ports, tsc, setup, .. } => {
                (ports, tsc.hz, *setup.expect("the agent reports its setup"))
            }
            other => panic!("expected ready, got {other:?}"),
        }
    }

    /// Send `begin <run>` and return the run file.
    pub fn begin(&mut self, run: u32) -> PathBuf {
        self.send(&format!("begin {run}"));
        match self.next() {
            AgentEvent::Begin { run: r, file } if r == run => file,
            other => panic!("expected begin {run}, got {other:?}"),
        }
    }

    /// Send `end <run>` and return the run's counters.
    pub fn end(&mut self, run: u32) -> RunCounters {
        self.send(&format!("end {run}"));
        match self.next() {
            AgentEvent::End(c) if c.run == run => c,
            other => panic!("expected end {run}, got {other:?}"),
        }
    }

    /// Close stdin, expect `stopped` and a clean exit.
    pub fn finish(mut self) {
        drop(self.stdin.take());
        assert_eq!(self.next(), AgentEvent::Stopped);
        assert!(self.child.wait().unwrap().success());
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The frames of a pcap file (classic, either timestamp precision).
pub fn pcap_frames(path: &Path) -> Vec<Vec<u8>> {
    let bytes = std::fs::read(path).unwrap();
    assert!(bytes.len() >= 24, "{}: no pcap header", path.display());
    let mut frames = Vec::new();
    let mut at = 24;
    while at + 16 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        frames.push(bytes[at + 16..at + 16 + len].to_vec());
        at += 16 + len;
    }
    assert_eq!(at, bytes.len(), "{}: truncated record", path.display());
    frames
}

/// Classic pcap file header (microseconds, Ethernet).
pub fn pcap_header() -> Vec<u8> {
    let mut out = Vec::new();
    out.extend(0xa1b2_c3d4u32.to_le_bytes());
    out.extend([2, 0, 4, 0]);
    out.extend([0u8; 8]);
    out.extend(65535u32.to_le_bytes());
    out.extend(1u32.to_le_bytes());
    out
}

/// A broadcast frame: 14-byte Ethernet header, then `payload`, padded to 64 bytes.
pub fn frame(payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend([2, 0, 0, 0, 0, 1, 0x88, 0xb5]);
    f.extend_from_slice(payload);
    f.resize(f.len().max(64), 0);
    f
}

/// pcap records of probes `1..=n` (LatencyLab format) and `junk` frames without a probe, followed
/// by `loops` reflections of probes `1..=loops` as the agent sends them (tagged alternately P and
/// B): what reaches a capture port when reflections loop back.
pub fn pcap_records_with_loops(n: u64, junk: u64, loops: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut record = |f: Vec<u8>| {
        out.extend([0u8; 8]);
        out.extend((f.len() as u32).to_le_bytes());
        out.extend((f.len() as u32).to_le_bytes());
        out.extend(f);
    };
    for id in 1..=n {
        record(frame(&probe::payload(id, ProbeFormat::Latencylab, 64)));
    }
    for _ in 0..junk {
        record(frame(b"not a probe"));
    }
    for id in 1..=loops {
        let mut f = frame(&probe::payload(id, ProbeFormat::Latencylab, 64));
        let tag = if id % 2 == 1 { probe::TAG_PIPELINE } else { probe::TAG_BYPASS };
        assert!(probe::set_tag(&mut f, ProbeFormat::Latencylab, tag));
        record(f);
    }
    out
}

/// A classic pcap file at `path` of probes `1..=n`, `junk` frames without a probe and `loops`
/// looped-back reflections ([`pcap_records_with_loops`]).
pub fn write_trace_with_loops(path: &Path, n: u64, junk: u64, loops: u64) {
    let mut bytes = pcap_header();
    bytes.extend(pcap_records_with_loops(n, junk, loops));
    std::fs::write(path, bytes).unwrap();
}

/// The sender's MAC that reflections are addressed to in the tests.
pub const SENDER_MAC: &str = "0c:42:a1:5e:00:01";

/// [`SENDER_MAC`] as bytes.
pub const SENDER_MAC_BYTES: [u8; 6] = [0x0c, 0x42, 0xa1, 0x5e, 0x00, 0x01];

/// The cores a thread of process `pid` may run on (`Cpus_allowed_list`), by thread name.
pub fn thread_affinities(pid: u32) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let dir = task.unwrap().path();
        let (Ok(name), Ok(status)) =
            (std::fs::read_to_string(dir.join("comm")), std::fs::read_to_string(dir.join("status")))
        else {
            continue; // the thread ended meanwhile
        };
        let allowed = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).unwrap_or("").trim();
        out.push((name.trim().to_string(), allowed.to_string()));
    }
    out.sort();
    out
}

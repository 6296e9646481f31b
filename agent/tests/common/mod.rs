//! Helpers shared by the agent's integration tests.

#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

use arrow_array::cast::AsArray;
use arrow_array::types::{UInt8Type, UInt64Type};

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

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// Read a run file: per port, the (id, tsc) records in arrival order (checking `seq`).
pub fn read_run(file: &Path) -> [Vec<(u64, u64)>; 2] {
    let reader = arrow_ipc::reader::StreamReader::try_new(std::fs::File::open(file).unwrap(), None).unwrap();
    assert_eq!(reader.schema(), latency_agent::record_schema());
    let mut per_port: [Vec<(u64, u64)>; 2] = [Vec::new(), Vec::new()];
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
pub fn check_run(per_port: &[Vec<(u64, u64)>; 2], n: u64) {
    for (p, recs) in per_port.iter().enumerate() {
        assert!(recs.windows(2).all(|w| w[0].1 <= w[1].1), "port {p}: stamps are monotonic");
        let mut ids: Vec<u64> = recs.iter().map(|r| r.0).collect();
        ids.sort_unstable();
        assert_eq!(ids, (1..=n).collect::<Vec<_>>(), "port {p}: every id exactly once");
    }
}

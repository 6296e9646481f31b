//! Helpers shared by the agent's integration tests.

#![allow(dead_code, clippy::unwrap_used)]

use std::process::Command;

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

/// A network namespace with veth pairs s0–r0 and s1–r1, deleted on drop.
pub struct Netns(pub String);

impl Netns {
    pub fn new(name: &str) -> Netns {
        let _ = Command::new("ip").args(["netns", "del", name]).output();
        ok(Command::new("ip").args(["netns", "add", name]));
        let ns = Netns(name.to_string());
        for i in 0..2 {
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
        for dev in ["lo", "s0", "r0", "s1", "r1"] {
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

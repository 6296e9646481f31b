//! Facts about the hosts for the provenance: kernel, CPU model, TSC flags, DPDK version and the
//! Xilinx/Mellanox PCI functions, read once when the testbed is connected.

use crate::Doing;
use std::time::Duration;

use super::session::Hosts;
use latency_plan::inventory::Role;
use latency_results::provenance::{HostFacts, TestbedHosts};

/// Prints, one per line: kernel release, CPU model, TSC flags, DPDK version (`none`), then the
/// Xilinx and Mellanox PCI functions.
const PROBE: &str = "uname -r; grep -m1 'model name' /proc/cpuinfo | cut -d: -f2; \
                     grep -o -w -m2 'constant_tsc\\|nonstop_tsc' /proc/cpuinfo | sort -u | tr '\\n' ' '; echo; \
                     (pkg-config --modversion libdpdk 2>/dev/null || echo none); (lspci -nn 2>/dev/null | grep -i -E 'xilinx|mellanox' || true)";

/// The facts of `host` from the output of the probe.
pub fn parse(host: &str, probe: &str) -> HostFacts {
    let lines: Vec<&str> = probe.lines().map(str::trim).collect();
    let line = |i: usize| lines.get(i).map(|l| (*l).to_string());
    HostFacts {
        host: host.to_string(),
        kernel: line(0),
        cpu: line(1),
        tsc_flags: line(2),
        dpdk: line(3),
        pci: lines.get(4..).map(|l| l.join("; ")),
    }
}

/// Probe both hosts (a host whose probe fails gets empty facts).
pub fn collect(hosts: &Hosts) -> TestbedHosts {
    let probe = |role: Role| {
        let text = hosts.run(role, Doing::Facts, PROBE, Duration::from_secs(20)).unwrap_or_default();
        parse(hosts.name(role), &text)
    };
    TestbedHosts { sender: probe(Role::Sender), receiver: probe(Role::Receiver) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_output_becomes_the_host_facts() {
        let out = "6.8.0-45-generic\n Intel(R) Xeon(R) Gold 6226R CPU @ 2.90GHz\nconstant_tsc nonstop_tsc \n20.11.0\n\
                   3b:00.0 Processing accelerators [1200]: Xilinx [10ee:903f]\n86:00.0 Ethernet: Mellanox [15b3:1017]\n";
        let f = parse("receiver (oct-receiver)", out);
        assert_eq!(f.cpu.as_deref(), Some("Intel(R) Xeon(R) Gold 6226R CPU @ 2.90GHz"));
        assert_eq!(f.tsc_flags.as_deref(), Some("constant_tsc nonstop_tsc"));
        assert_eq!(
            f.pci.as_deref(),
            Some("3b:00.0 Processing accelerators [1200]: Xilinx [10ee:903f]; 86:00.0 Ethernet: Mellanox [15b3:1017]")
        );
        let json =
            serde_json::to_value(TestbedHosts { sender: parse("sender (s)", ""), receiver: f }).unwrap().to_string();
        assert!(json.starts_with(r#"{"receiver":{"cpu":"Intel(R)"#), "{json}");
        assert!(
            json.ends_with(
                r#""sender":{"cpu":null,"dpdk":null,"host":"sender (s)","kernel":null,"pci":null,"tsc_flags":null}}"#
            ),
            "{json}"
        );
        // No PCI function found: an empty list, not a missing one.
        assert_eq!(parse("h", "k\nc\nf\nnone\n").pci.as_deref(), Some(""));
    }
}

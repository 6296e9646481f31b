//! DPDK EAL configuration of the agent as a value, and the EAL arguments it turns into (pure, so
//! the controller can build and show them without DPDK).

use serde::{Deserialize, Serialize};

/// What the EAL of the receiver agent is started with, from a host inventory.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EalConfig {
    /// Main lcore (`--main-lcore`), added to the lcore list when it is not a poller core.
    pub main_core: Option<u32>,
    /// Poller lcores, one per receive port.
    pub poller_cores: Vec<u32>,
    /// NUMA node of the NIC: where `--socket-mem` puts the memory.
    pub numa_node: u32,
    /// PCI functions of the receive ports, allowed with `-a`.
    pub pci: Vec<String>,
    /// PCI function of the reflect port (reflect mode), allowed after the receive ports.
    pub reflect_pci: Option<String>,
    /// Virtual devices (`--vdev=`).
    pub vdevs: Vec<String>,
    /// Run without hugepages (`--no-huge`).
    pub no_huge: bool,
    /// Memory in MB: `-m` without hugepages, `--socket-mem` on [`EalConfig::numa_node`] with them.
    pub memory_mb: Option<u32>,
    /// Runtime file prefix (`--file-prefix`), none when empty.
    pub file_prefix: String,
    /// Driver libraries or directories to load (`-d`).
    pub drivers: Vec<String>,
    /// Memory channels per socket (`-n`), as LatencyLab's receiver passes (`-n 4`).
    pub memory_channels: Option<u32>,
}

impl EalConfig {
    /// The EAL arguments (without the program name):
    ///
    /// - `-l` the lcores (the main core first when it is not among the poller cores; nothing when
    ///   both are empty: the EAL then takes every core) and `--main-lcore`;
    /// - `-n` the memory channels, when given;
    /// - memory: `--no-huge` with `-m N` (never `--in-memory`, which does not combine with it), or
    ///   with hugepages `--socket-mem` giving `memory_mb` to NUMA node `numa_node` (0 to the others);
    /// - `--file-prefix` (when not empty) and `--no-shconf` (the agent is a lone primary process);
    /// - `-a` for each allowed PCI function (receive ports, then the reflect port), or `--no-pci`
    ///   when there is none;
    /// - `--vdev=` for each virtual device and `-d` for each driver library or directory.
    pub fn args(&self) -> Vec<String> {
        let mut args = Vec::new();
        let mut lcores: Vec<u32> = Vec::new();
        if let Some(m) = self.main_core
            && !self.poller_cores.contains(&m)
        {
            lcores.push(m);
        }
        lcores.extend_from_slice(&self.poller_cores);
        if !lcores.is_empty() {
            let list: Vec<String> = lcores.iter().map(u32::to_string).collect();
            args.extend(["-l".to_string(), list.join(",")]);
        }
        if let Some(m) = self.main_core {
            args.extend(["--main-lcore".to_string(), m.to_string()]);
        }
        if let Some(n) = self.memory_channels {
            args.extend(["-n".to_string(), n.to_string()]);
        }
        if self.no_huge {
            args.push("--no-huge".into());
            if let Some(mb) = self.memory_mb {
                args.extend(["-m".to_string(), mb.to_string()]);
            }
        } else if let Some(mb) = self.memory_mb {
            let per_node: Vec<String> =
                (0..=self.numa_node).map(|n| if n == self.numa_node { mb.to_string() } else { "0".into() }).collect();
            args.extend(["--socket-mem".to_string(), per_node.join(",")]);
        }
        if !self.file_prefix.is_empty() {
            args.push(format!("--file-prefix={}", self.file_prefix));
        }
        args.push("--no-shconf".into());
        let allow: Vec<&String> = self.pci.iter().chain(&self.reflect_pci).collect();
        if allow.is_empty() {
            args.push("--no-pci".into());
        }
        for a in allow {
            args.extend(["-a".to_string(), a.clone()]);
        }
        for v in &self.vdevs {
            args.push(format!("--vdev={v}"));
        }
        for d in &self.drivers {
            args.extend(["-d".to_string(), d.clone()]);
        }
        args
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn oct_receiver_and_test_vdevs() {
        // The OCT receiver: main lcore 2, pollers 4 and 6, the U280's two PFs and the ConnectX-5.
        let oct = EalConfig {
            main_core: Some(2),
            poller_cores: vec![4, 6],
            pci: s(&["0000:3b:00.0", "0000:3b:00.1"]),
            reflect_pci: Some("0000:86:00.0".into()),
            file_prefix: "latency".into(),
            drivers: s(&["librte_net_qdma.so"]),
            ..EalConfig::default()
        };
        assert_eq!(
            oct.args(),
            s(&[
                "-l",
                "2,4,6",
                "--main-lcore",
                "2",
                "--file-prefix=latency",
                "--no-shconf",
                "-a",
                "0000:3b:00.0",
                "-a",
                "0000:3b:00.1",
                "-a",
                "0000:86:00.0",
                "-d",
                "librte_net_qdma.so"
            ])
        );
        // No hugepages, virtual devices: `--no-huge -m`, never `--in-memory`; `--no-pci`.
        let vdev = EalConfig {
            poller_cores: vec![0, 1],
            vdevs: s(&["net_null0"]),
            no_huge: true,
            memory_mb: Some(512),
            file_prefix: "t".into(),
            ..EalConfig::default()
        }
        .args();
        assert_eq!(
            vdev,
            s(&[
                "-l",
                "0,1",
                "--no-huge",
                "-m",
                "512",
                "--file-prefix=t",
                "--no-shconf",
                "--no-pci",
                "--vdev=net_null0"
            ])
        );
        assert!(!vdev.iter().any(|a| a == "--in-memory"));
    }

    #[test]
    fn hugepage_memory_goes_to_the_numa_node_and_the_main_core_is_not_repeated() {
        let c = EalConfig {
            main_core: Some(1),
            poller_cores: vec![2, 4],
            numa_node: 1,
            memory_mb: Some(1024),
            ..EalConfig::default()
        };
        assert_eq!(
            c.args(),
            s(&["-l", "1,2,4", "--main-lcore", "1", "--socket-mem", "0,1024", "--no-shconf", "--no-pci"])
        );
        let c = EalConfig { main_core: Some(3), poller_cores: vec![3, 5], no_huge: true, ..EalConfig::default() };
        assert_eq!(c.args(), s(&["-l", "3,5", "--main-lcore", "3", "--no-huge", "--no-shconf", "--no-pci"]));
        // Nothing known: only what the agent always wants.
        assert_eq!(EalConfig::default().args(), s(&["--no-shconf", "--no-pci"]));
        // The reflect port alone is an allowed device too.
        let c = EalConfig { reflect_pci: Some("0000:86:00.0".into()), ..EalConfig::default() };
        assert_eq!(c.args(), s(&["--no-shconf", "-a", "0000:86:00.0"]));
    }

    #[test]
    fn memory_channels_follow_the_lcores() {
        let c = EalConfig {
            main_core: Some(2),
            poller_cores: vec![4, 6],
            memory_channels: Some(4),
            ..EalConfig::default()
        };
        assert_eq!(c.args(), s(&["-l", "2,4,6", "--main-lcore", "2", "-n", "4", "--no-shconf", "--no-pci"]));
        let c = EalConfig { memory_channels: Some(4), ..EalConfig::default() };
        assert_eq!(c.args(), s(&["-n", "4", "--no-shconf", "--no-pci"]));
        assert_eq!(serde_json::from_str::<EalConfig>(r#"{"memory_channels":4}"#).unwrap(), c);
    }

    #[test]
    fn config_round_trips_through_serde_and_rejects_unknown_keys() {
        let c = EalConfig { main_core: Some(2), poller_cores: vec![4, 6], no_huge: true, ..EalConfig::default() };
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<EalConfig>(&json).unwrap(), c);
        assert_eq!(serde_json::from_str::<EalConfig>(r#"{"poller_cores":[1]}"#).unwrap().poller_cores, [1]);
        assert!(serde_json::from_str::<EalConfig>(r#"{"cores":[1]}"#).is_err());
    }
}

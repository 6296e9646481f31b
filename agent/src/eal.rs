//! DPDK EAL arguments as a value: what a host inventory turns into (pure, so the controller can
//! build and show them without DPDK).

/// The EAL arguments (without the program name) that a host inventory turns into:
///
/// - `-l` the lcores (`main_core` is added first when it is not among `cores`; nothing when both
///   are empty: the EAL then takes every core) and `--main-lcore`;
/// - memory: `--no-huge` with `-m N` (never `--in-memory`, which does not combine with it), or
///   with hugepages `--socket-mem` giving `memory_mb` to NUMA node `numa_node` (0 to the others);
/// - `--file-prefix` (when not empty) and `--no-shconf` (the agent is a lone primary process);
/// - `-a` for each allowed PCI device, or `--no-pci` when there is none;
/// - `--vdev=` for each virtual device and `-d` for each driver library or directory.
#[allow(clippy::too_many_arguments)]
pub fn eal_args_from_inventory(
    cores: &[u32],
    main_core: Option<u32>,
    numa_node: u32,
    allow: &[String],
    vdevs: &[String],
    no_huge: bool,
    memory_mb: Option<u32>,
    file_prefix: &str,
    drivers: &[String],
) -> Vec<String> {
    let mut args = Vec::new();
    let mut lcores: Vec<u32> = Vec::new();
    if let Some(m) = main_core
        && !cores.contains(&m)
    {
        lcores.push(m);
    }
    lcores.extend_from_slice(cores);
    if !lcores.is_empty() {
        let list: Vec<String> = lcores.iter().map(u32::to_string).collect();
        args.extend(["-l".to_string(), list.join(",")]);
    }
    if let Some(m) = main_core {
        args.extend(["--main-lcore".to_string(), m.to_string()]);
    }
    if no_huge {
        args.push("--no-huge".into());
        if let Some(mb) = memory_mb {
            args.extend(["-m".to_string(), mb.to_string()]);
        }
    } else if let Some(mb) = memory_mb {
        let per_node: Vec<String> =
            (0..=numa_node).map(|n| if n == numa_node { mb.to_string() } else { "0".into() }).collect();
        args.extend(["--socket-mem".to_string(), per_node.join(",")]);
    }
    if !file_prefix.is_empty() {
        args.push(format!("--file-prefix={file_prefix}"));
    }
    args.push("--no-shconf".into());
    if allow.is_empty() {
        args.push("--no-pci".into());
    }
    for a in allow {
        args.extend(["-a".to_string(), a.clone()]);
    }
    for v in vdevs {
        args.push(format!("--vdev={v}"));
    }
    for d in drivers {
        args.extend(["-d".to_string(), d.clone()]);
    }
    args
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
        let oct = eal_args_from_inventory(
            &[4, 6],
            Some(2),
            0,
            &s(&["0000:3b:00.0", "0000:3b:00.1", "0000:86:00.0"]),
            &[],
            false,
            None,
            "latency",
            &s(&["librte_net_qdma.so"]),
        );
        assert_eq!(
            oct,
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
        let vdev = eal_args_from_inventory(&[0, 1], None, 0, &[], &s(&["net_null0"]), true, Some(512), "t", &[]);
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
}

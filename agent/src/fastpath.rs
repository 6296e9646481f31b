//! Read the receiver's fast path back at start ([`FastPath`]): from `/sys` and `/proc` under a
//! root folder (`/` on a host; a fake tree in tests). A fact that cannot be read is left empty;
//! nothing here fails.

use std::path::Path;

use latency_proto::capture::{CaptureOptions, CaptureSetup};
use latency_proto::fastpath::{self, Backend, CoreFacts, FastPath, Hugepages, IrqAffinity, Verdict};

/// A CPU list as the kernel writes it (`0-3,8,10-11`; empty for none). Malformed items are
/// skipped.
pub fn cpu_list(text: &str) -> Vec<u32> {
    let mut cores = Vec::new();
    for item in text.trim().split(',').map(str::trim).filter(|i| !i.is_empty()) {
        match item.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    cores.extend(a..=b.min(a.saturating_add(65_535)));
                }
            }
            None => cores.extend(item.parse::<u32>().ok()),
        }
    }
    cores
}

fn read(root: &Path, path: &str) -> Option<String> {
    std::fs::read_to_string(root.join(path)).ok().map(|s| s.trim().to_string())
}

fn number(root: &Path, path: &str) -> Option<u32> {
    read(root, path)?.parse().ok()
}

/// The enabled cpuidle states of `core`, by name.
fn idle_states(root: &Path, core: u32) -> Vec<String> {
    let dir = root.join(format!("sys/devices/system/cpu/cpu{core}/cpuidle"));
    let mut states: Vec<(u32, String)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let index = e.file_name().to_str()?.strip_prefix("state")?.parse().ok()?;
            let name = std::fs::read_to_string(e.path().join("name")).ok()?.trim().to_string();
            let disabled = std::fs::read_to_string(e.path().join("disable")).is_ok_and(|d| d.trim() == "1");
            (!disabled).then_some((index, name))
        })
        .collect();
    states.sort();
    states.into_iter().map(|(_, n)| n).collect()
}

fn hugepages(root: &Path) -> Option<Hugepages> {
    let meminfo = read(root, "proc/meminfo")?;
    let field =
        |name: &str| meminfo.lines().find_map(|l| l.strip_prefix(name)?.split_whitespace().next()?.parse::<u64>().ok());
    Some(Hugepages {
        total: field("HugePages_Total:")?,
        free: field("HugePages_Free:")?,
        size_kib: field("Hugepagesize:")?,
    })
}

/// The interrupts of `interface`'s device (its MSI vectors) and where each may run.
fn irqs(root: &Path, interface: &str) -> Vec<IrqAffinity> {
    let dir = root.join(format!("sys/class/net/{interface}/device/msi_irqs"));
    let mut irqs: Vec<u32> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    irqs.sort_unstable();
    irqs.into_iter()
        .map(|irq| IrqAffinity {
            interface: interface.to_string(),
            irq,
            cores: cpu_list(&read(root, &format!("proc/irq/{irq}/smp_affinity_list")).unwrap_or_default()),
        })
        .collect()
}

/// The fast path of the poller `cores` and the capture `interfaces` (kernel interface names;
/// none for ports a poll-mode driver owns), read under `root`.
pub fn read_back(root: &Path, cores: &[usize], interfaces: &[String]) -> FastPath {
    let isolated = read(root, "sys/devices/system/cpu/isolated").unwrap_or_default();
    let nohz_full = read(root, "sys/devices/system/cpu/nohz_full").unwrap_or_default();
    let (iso, nohz) = (cpu_list(&isolated), cpu_list(&nohz_full));
    let cores = cores
        .iter()
        .map(|&c| {
            let core = c as u32;
            CoreFacts {
                core,
                isolated: iso.contains(&core),
                nohz_full: nohz.contains(&core),
                governor: read(root, &format!("sys/devices/system/cpu/cpu{core}/cpufreq/scaling_governor")),
                idle_states: idle_states(root, core),
            }
        })
        .collect();
    FastPath {
        cores,
        isolated,
        nohz_full,
        busy_poll_us: number(root, "proc/sys/net/core/busy_poll"),
        busy_read_us: number(root, "proc/sys/net/core/busy_read"),
        intel_idle_max_cstate: number(root, "sys/module/intel_idle/parameters/max_cstate"),
        hugepages: hugepages(root),
        irqs: interfaces.iter().flat_map(|i| irqs(root, i)).collect(),
        findings: Vec::new(),
    }
}

/// The fast path read back under `root`, with the policy's findings on it and on `setup`; or,
/// when the policy refuses a finding, why the capture must not start.
pub fn judge(
    root: &Path,
    backend: Backend,
    cores: &[usize],
    interfaces: &[String],
    options: &CaptureOptions,
    setup: &CaptureSetup,
) -> Result<FastPath, String> {
    let mut facts = read_back(root, cores, interfaces);
    facts.findings = fastpath::evaluate(&facts, setup, options, backend);
    let refused: Vec<String> =
        facts.findings.iter().filter(|f| f.verdict == Verdict::Refuse).map(ToString::to_string).collect();
    if refused.is_empty() {
        Ok(facts)
    } else {
        Err(format!("the fast path is refused by its policy: {}", refused.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_read_ranges_singles_and_nothing() {
        assert_eq!(cpu_list("0-3,8,10-11\n"), [0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(cpu_list(""), Vec::<u32>::new());
        assert_eq!(cpu_list("\n"), Vec::<u32>::new());
        assert_eq!(cpu_list("2,x,4-"), [2]);
    }

    /// A host tuned as the DPDK and AF_XDP guides ask (cores 2-3 isolated and tickless, the
    /// performance governor on 2, deep states disabled, hugepages), its NIC's two interrupts on
    /// cores 0-1 and 3: every fact read back from its files.
    #[test]
    fn the_facts_are_read_from_sys_and_proc() {
        let root = std::env::temp_dir().join(format!("agent-fastpath-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let put = |path: &str, text: &str| {
            let p = root.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        put("sys/devices/system/cpu/isolated", "2-3\n");
        put("sys/devices/system/cpu/nohz_full", "2-3\n");
        put("sys/devices/system/cpu/cpu2/cpufreq/scaling_governor", "performance\n");
        for (k, name, disabled) in [(0, "POLL", "0"), (1, "C1", "0"), (2, "C6", "1")] {
            put(&format!("sys/devices/system/cpu/cpu2/cpuidle/state{k}/name"), &format!("{name}\n"));
            put(&format!("sys/devices/system/cpu/cpu2/cpuidle/state{k}/disable"), &format!("{disabled}\n"));
        }
        put("sys/module/intel_idle/parameters/max_cstate", "1\n");
        put("proc/sys/net/core/busy_poll", "50\n");
        put("proc/sys/net/core/busy_read", "0\n");
        put(
            "proc/meminfo",
            "MemTotal:  24000000 kB\nHugePages_Total:    1024\nHugePages_Free:      512\nHugepagesize:       2048 kB\n",
        );
        put("sys/class/net/ens1f0/device/msi_irqs/120", "msix\n");
        put("sys/class/net/ens1f0/device/msi_irqs/121", "msix\n");
        put("proc/irq/120/smp_affinity_list", "0-1\n");
        put("proc/irq/121/smp_affinity_list", "3\n");

        let f = read_back(&root, &[2, 3], &["ens1f0".into(), "veth0".into()]);
        assert_eq!((f.isolated.as_str(), f.nohz_full.as_str()), ("2-3", "2-3"));
        let cores: Vec<_> = f
            .cores
            .iter()
            .map(|c| (c.core, c.isolated, c.nohz_full, c.governor.as_deref(), c.idle_states.clone()))
            .collect();
        assert_eq!(
            cores,
            [
                (2, true, true, Some("performance"), vec!["POLL".to_string(), "C1".into()]),
                (3, true, true, None, vec![])
            ]
        );
        assert_eq!((f.busy_poll_us, f.busy_read_us, f.intel_idle_max_cstate), (Some(50), Some(0), Some(1)));
        assert_eq!(f.hugepages, Some(Hugepages { total: 1024, free: 512, size_kib: 2048 }));
        let irqs: Vec<_> = f.irqs.iter().map(|i| (i.interface.as_str(), i.irq, i.cores.clone())).collect();
        assert_eq!(irqs, [("ens1f0", 120, vec![0, 1]), ("ens1f0", 121, vec![3])]);

        let bare = read_back(&root.join("nothing"), &[0], &[]);
        assert_eq!((bare.cores[0].isolated, bare.hugepages.as_ref(), bare.busy_poll_us), (false, None, None));
        std::fs::remove_dir_all(&root).unwrap();
    }
}

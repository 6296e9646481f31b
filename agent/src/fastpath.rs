//! Read the receiver's fast path back at start ([`FastPath`]): from `/sys` and `/proc` under a
//! root folder (`/` on a host; a fake tree in tests). A fact that cannot be read is left empty;
//! nothing here fails.

use std::path::Path;

use latency_proto::capture::{CaptureOptions, CaptureSetup};
use latency_proto::fastpath::{Backend, Check, CoreFacts, FastPath, Finding, Hugepages, IrqAffinity, Verdict};

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
) -> Result<FastPath, Refused> {
    let mut facts = read_back(root, cores, interfaces);
    facts.findings = evaluate(&facts, setup, options, backend);
    let refused: Vec<Finding> = facts.findings.iter().filter(|f| f.verdict == Verdict::Refuse).cloned().collect();
    if refused.is_empty() { Ok(facts) } else { Err(Refused(refused)) }
}

/// The findings a fast-path policy refuses.
#[derive(Clone, Debug, PartialEq)]
pub struct Refused(pub Vec<Finding>);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let each: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        write!(f, "the fast path is refused by its policy: {}", each.join("; "))
    }
}

impl std::error::Error for Refused {}

/// Deep idle states: any but polling and C1 (with its enhanced variant).
fn deep(state: &str) -> bool {
    !matches!(state, "POLL" | "C1" | "C1E" | "C1_ACPI" | "C1-ACPI")
}

/// The checks that fail on `facts` and `setup` for `backend` with `options`, each with the
/// policy's verdict (those the policy ignores are left out). Checks that do not apply to the
/// backend (zero-copy without AF_XDP, hugepages and rings without DPDK) never fail.
pub fn evaluate(facts: &FastPath, setup: &CaptureSetup, options: &CaptureOptions, backend: Backend) -> Vec<Finding> {
    let list = |cores: Vec<u32>| cores.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
    let failing = |f: &dyn Fn(&CoreFacts) -> bool| list(facts.cores.iter().filter(|c| f(c)).map(|c| c.core).collect());
    let mut problems: Vec<(Check, String)> = Vec::new();
    if facts.cores.is_empty() {
        problems.push((Check::IsolatedCores, "the pollers are not pinned to cores (--cores)".into()));
    }
    let not_isolated = failing(&|c| !c.isolated);
    if !not_isolated.is_empty() {
        problems.push((
            Check::IsolatedCores,
            format!("poller cores {not_isolated} are not isolated (isolcpus: `{}`)", facts.isolated),
        ));
    }
    let ticking = failing(&|c| !c.nohz_full);
    if !ticking.is_empty() {
        problems
            .push((Check::NohzFull, format!("poller cores {ticking} are not in nohz_full (`{}`)", facts.nohz_full)));
    }
    let scaled = failing(&|c| c.governor.as_deref().is_some_and(|g| g != "performance"));
    if !scaled.is_empty() {
        problems.push((Check::Governor, format!("poller cores {scaled} do not run the performance governor")));
    }
    let sleepy = failing(&|c| c.idle_states.iter().any(|s| deep(s)));
    if !sleepy.is_empty() {
        problems.push((Check::CStates, format!("poller cores {sleepy} may enter idle states deeper than C1")));
    }
    if backend == Backend::AfXdp && options.busy_poll_us.is_none() {
        problems.push((Check::BusyPoll, "the AF_XDP sockets do not busy-poll (busy_poll_us)".into()));
    }
    if backend == Backend::Dpdk && facts.hugepages.as_ref().is_none_or(|h| h.total == 0) {
        problems.push((Check::Hugepages, "no hugepages are reserved".into()));
    }
    let pollers: Vec<u32> = facts.cores.iter().map(|c| c.core).collect();
    for irq in &facts.irqs {
        let on: Vec<u32> = irq.cores.iter().copied().filter(|c| pollers.contains(c)).collect();
        if !on.is_empty() {
            problems.push((
                Check::IrqAffinity,
                format!("interrupt {} of {} may run on poller cores {}", irq.irq, irq.interface, list(on)),
            ));
        }
    }
    for g in setup.af_xdp.iter().filter(|g| !g.zero_copy) {
        problems.push((Check::ZeroCopy, format!("{}: the driver gave copy mode, not zero-copy", g.port)));
    }
    for r in setup.rings.iter().filter(|r| r.rx != options.rx_ring || r.tx != options.tx_ring) {
        problems.push((
            Check::Rings,
            format!(
                "{}: the driver granted {} RX / {} TX descriptors, not the {} / {} asked for",
                r.port, r.rx, r.tx, options.rx_ring, options.tx_ring
            ),
        ));
    }
    problems
        .into_iter()
        .map(|(check, problem)| Finding { check, verdict: options.fast_path.verdict(check), problem })
        .filter(|f| f.verdict != Verdict::Ignore)
        .collect()
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

#[cfg(test)]
mod evaluate_tests {
    use super::*;
    use latency_proto::capture::{PortRings, XdpGrant};
    use latency_proto::fastpath::FastPathPolicy;

    fn core(core: u32, isolated: bool, governor: &str, idle: &[&str]) -> CoreFacts {
        CoreFacts {
            core,
            isolated,
            nohz_full: isolated,
            governor: (!governor.is_empty()).then(|| governor.into()),
            idle_states: idle.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn policies_parse_print_and_name_their_mistakes() {
        let p: FastPathPolicy = "isolated_cores=refuse, zero_copy=ignore".parse().unwrap();
        assert_eq!(p.verdict(Check::IsolatedCores), Verdict::Refuse);
        assert_eq!(p.verdict(Check::ZeroCopy), Verdict::Ignore);
        assert_eq!(p.verdict(Check::Governor), Verdict::Warn, "unlisted checks warn");
        assert_eq!(p.to_string(), "isolated_cores=refuse,zero_copy=ignore");
        assert_eq!(p.to_string().parse::<FastPathPolicy>(), Ok(p));
        assert_eq!("".parse::<FastPathPolicy>(), Ok(FastPathPolicy::default()));
        assert!(
            "isolated=refuse".parse::<FastPathPolicy>().unwrap_err().starts_with("`isolated` is no fast-path check")
        );
        assert!("governor=fail".parse::<FastPathPolicy>().unwrap_err().contains("one of ignore, warn, refuse"));
        assert!("governor".parse::<FastPathPolicy>().unwrap_err().contains("expected check=verdict"));
        let json = serde_json::to_string(&"isolated_cores=refuse".parse::<FastPathPolicy>().unwrap()).unwrap();
        assert_eq!(json, r#"{"isolated_cores":"refuse"}"#);
    }

    #[test]
    fn a_tuned_host_passes_and_each_untuned_fact_is_found_with_its_verdict() {
        let tuned = FastPath {
            cores: vec![core(2, true, "performance", &["POLL", "C1"]), core(3, true, "", &[])],
            hugepages: Some(Hugepages { total: 1024, free: 512, size_kib: 2048 }),
            irqs: vec![IrqAffinity { interface: "ens1f0".into(), irq: 120, cores: vec![0, 1] }],
            ..FastPath::default()
        };
        let options = CaptureOptions { busy_poll_us: Some(50), ..CaptureOptions::default() };
        let granted = PortRings { port: "0".into(), rx: 512, tx: 512 };
        let setup = CaptureSetup { rings: vec![granted.clone()], ..CaptureSetup::default() };
        for backend in [Backend::Dpdk, Backend::AfPacket, Backend::AfXdp] {
            assert_eq!(evaluate(&tuned, &setup, &options, backend), [], "{backend:?}");
        }

        let untuned = FastPath {
            cores: vec![core(2, false, "powersave", &["POLL", "C1", "C6"]), core(3, true, "performance", &[])],
            isolated: "3".into(),
            irqs: vec![IrqAffinity { interface: "ens1f0".into(), irq: 120, cores: vec![1, 2, 3] }],
            ..FastPath::default()
        };
        let options = CaptureOptions {
            fast_path: "isolated_cores=refuse,governor=ignore".parse().unwrap(),
            ..CaptureOptions::default()
        };
        let setup = CaptureSetup {
            rings: vec![PortRings { rx: 256, ..granted }],
            af_xdp: vec![XdpGrant {
                port: "ens1f0".into(),
                queue: 0,
                native: true,
                zero_copy: false,
                rx_ring: 4096,
                fill_ring: 4096,
                frame: 4096,
                busy_poll_us: None,
            }],
            ..CaptureSetup::default()
        };
        let found: Vec<String> =
            evaluate(&untuned, &setup, &options, Backend::AfXdp).iter().map(ToString::to_string).collect();
        assert_eq!(
            found,
            [
                "poller cores 2 are not isolated (isolcpus: `3`) (isolated_cores: refuse)",
                "poller cores 2 are not in nohz_full (``) (nohz_full: warn)",
                "poller cores 2 may enter idle states deeper than C1 (c_states: warn)",
                "the AF_XDP sockets do not busy-poll (busy_poll_us) (busy_poll: warn)",
                "interrupt 120 of ens1f0 may run on poller cores 2, 3 (irq_affinity: warn)",
                "ens1f0: the driver gave copy mode, not zero-copy (zero_copy: warn)",
                "0: the driver granted 256 RX / 512 TX descriptors, not the 512 / 512 asked for (rings: warn)",
            ]
        );
        let dpdk = evaluate(&untuned, &CaptureSetup::default(), &options, Backend::Dpdk);
        assert!(dpdk.iter().any(|f| f.check == Check::Hugepages && f.problem == "no hugepages are reserved"));
        let unpinned = evaluate(&FastPath::default(), &CaptureSetup::default(), &options, Backend::AfPacket);
        assert_eq!(unpinned[0].problem, "the pollers are not pinned to cores (--cores)");
        assert_eq!(unpinned[0].verdict, Verdict::Refuse);
    }
}

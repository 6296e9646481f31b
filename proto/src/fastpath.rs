//! The fast path of the receiver, as the agent reads it back at start ([`FastPath`]): whether its
//! poller cores are isolated from the scheduler and from timer ticks, their frequency governor and
//! idle states, the busy-poll sysctls, hugepages, and where the capture interfaces' interrupts
//! go. What the capture itself was granted (zero-copy, descriptor rings) is in the capture's
//! [`CaptureSetup`].
//!
//! A [`FastPathPolicy`] (an inventory's `receiver.fast_path`, the agent's `--fast-path`) says for
//! each [`Check`] whether a failure is ignored, warned about, or refuses the capture.
//! [`evaluate`] turns the facts into [`Finding`]s.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::capture::{CaptureOptions, CaptureSetup};

/// What the agent read about the fast path at start.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FastPath {
    /// Each poller core.
    pub cores: Vec<CoreFacts>,
    /// `/sys/devices/system/cpu/isolated` (`isolcpus=`), as written.
    pub isolated: String,
    /// `/sys/devices/system/cpu/nohz_full`, as written.
    pub nohz_full: String,
    /// `net.core.busy_poll`, µs.
    pub busy_poll_us: Option<u32>,
    /// `net.core.busy_read`, µs.
    pub busy_read_us: Option<u32>,
    /// `intel_idle.max_cstate`, where that driver is loaded.
    pub intel_idle_max_cstate: Option<u32>,
    /// Hugepages of the default size (`/proc/meminfo`).
    pub hugepages: Option<Hugepages>,
    /// The interrupts of the capture interfaces and the cores they may run on (none for
    /// interfaces without a device, such as veth, and for ports a poll-mode driver owns).
    pub irqs: Vec<IrqAffinity>,
    /// The checks, with the policy's verdict on each that failed.
    pub findings: Vec<Finding>,
}

/// One poller core.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CoreFacts {
    /// The core.
    pub core: u32,
    /// In `isolcpus=`.
    pub isolated: bool,
    /// In `nohz_full=`.
    pub nohz_full: bool,
    /// Its cpufreq governor (none where the OS does not scale its frequency, as in most VMs).
    pub governor: Option<String>,
    /// Its cpuidle states that are enabled, by name (`POLL`, `C1`, `C6`, ...).
    pub idle_states: Vec<String>,
}

/// Hugepages of the default size.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hugepages {
    /// `HugePages_Total`.
    pub total: u64,
    /// `HugePages_Free`.
    pub free: u64,
    /// `Hugepagesize`, KiB.
    pub size_kib: u64,
}

/// One interrupt of a capture interface.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IrqAffinity {
    /// The interface.
    pub interface: String,
    /// The interrupt number.
    pub irq: u32,
    /// The cores it may run on (`/proc/irq/N/smp_affinity_list`).
    pub cores: Vec<u32>,
}

/// A fast-path check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    /// Every poller core is in `isolcpus=`.
    IsolatedCores,
    /// Every poller core is in `nohz_full=`.
    NohzFull,
    /// Every poller core that has a cpufreq governor runs `performance`.
    Governor,
    /// No poller core has an idle state deeper than C1 enabled.
    CStates,
    /// AF_XDP sockets busy-poll (`busy_poll_us`).
    BusyPoll,
    /// DPDK has hugepages reserved.
    Hugepages,
    /// No interrupt of a capture interface may run on a poller core.
    IrqAffinity,
    /// AF_XDP sockets got zero-copy.
    ZeroCopy,
    /// The driver granted the descriptors asked for (DPDK).
    Rings,
}

impl Check {
    /// Every check, with its name.
    pub const ALL: [(Check, &'static str); 9] = [
        (Check::IsolatedCores, "isolated_cores"),
        (Check::NohzFull, "nohz_full"),
        (Check::Governor, "governor"),
        (Check::CStates, "c_states"),
        (Check::BusyPoll, "busy_poll"),
        (Check::Hugepages, "hugepages"),
        (Check::IrqAffinity, "irq_affinity"),
        (Check::ZeroCopy, "zero_copy"),
        (Check::Rings, "rings"),
    ];

    /// The check's name.
    pub fn name(self) -> &'static str {
        Check::ALL.iter().find(|(c, _)| *c == self).map_or("?", |(_, n)| n)
    }
}

/// What a failed check does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Nothing (the facts are still recorded).
    Ignore,
    /// A warning in the `ready` event, the controller's output and the provenance.
    #[default]
    Warn,
    /// The agent does not start.
    Refuse,
}

impl Verdict {
    /// Every verdict, with its name.
    pub const ALL: [(Verdict, &'static str); 3] =
        [(Verdict::Ignore, "ignore"), (Verdict::Warn, "warn"), (Verdict::Refuse, "refuse")];

    /// The verdict's name.
    pub fn name(self) -> &'static str {
        Verdict::ALL.iter().find(|(v, _)| *v == self).map_or("?", |(_, n)| n)
    }
}

/// The verdict of each check that fails; checks not listed warn.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FastPathPolicy(pub BTreeMap<Check, Verdict>);

impl FastPathPolicy {
    /// The verdict on `check` failing.
    pub fn verdict(&self, check: Check) -> Verdict {
        self.0.get(&check).copied().unwrap_or_default()
    }
}

/// `check=verdict,...` (empty: every check warns).
impl FromStr for FastPathPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut policy = BTreeMap::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (check, verdict) = item
                .split_once('=')
                .ok_or_else(|| format!("`{item}`: expected check=verdict (e.g. isolated_cores=refuse)"))?;
            let names = |all: &[&str]| all.join(", ");
            let check = Check::ALL.iter().find(|(_, n)| *n == check).map(|(c, _)| *c).ok_or_else(|| {
                format!("`{check}` is no fast-path check (one of {})", names(&Check::ALL.map(|(_, n)| n)))
            })?;
            let verdict = Verdict::ALL.iter().find(|(_, n)| *n == verdict).map(|(v, _)| *v).ok_or_else(|| {
                format!("`{verdict}` is no verdict (one of {})", names(&Verdict::ALL.map(|(_, n)| n)))
            })?;
            policy.insert(check, verdict);
        }
        Ok(FastPathPolicy(policy))
    }
}

impl fmt::Display for FastPathPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let items: Vec<String> = self.0.iter().map(|(c, v)| format!("{}={}", c.name(), v.name())).collect();
        f.write_str(&items.join(","))
    }
}

/// A check that failed, and what the policy makes of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// The check.
    pub check: Check,
    /// The policy's verdict.
    pub verdict: Verdict,
    /// What is wrong.
    pub problem: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}: {})", self.problem, self.check.name(), self.verdict.name())
    }
}

/// The receive backend, as far as the checks care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// DPDK poll-mode drivers.
    Dpdk,
    /// AF_PACKET rings.
    AfPacket,
    /// AF_XDP sockets.
    AfXdp,
}

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
    use crate::capture::{PortRings, XdpGrant};

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

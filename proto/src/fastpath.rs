//! The fast path of the receiver, as the agent reads it back at start ([`FastPath`]): whether its
//! poller cores are isolated from the scheduler and from timer ticks, their frequency governor and
//! idle states, the busy-poll sysctls, hugepages, and where the capture interfaces' interrupts
//! go. What the capture itself was granted (zero-copy, descriptor rings) is in the capture's
//! `CaptureSetup`.
//!
//! A [`FastPathPolicy`] (an inventory's `receiver.fast_path`, the agent's `--fast-path`) says for
//! each [`Check`] whether a failure is ignored, warned about, or refuses the capture.
//! The agent judges the facts against its capture and turns them into [`Finding`]s.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

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

crate::words! {
/// A fast-path check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Check {
    /// Every poller core is in `isolcpus=`.
    IsolatedCores = "isolated_cores",
    /// Every poller core is in `nohz_full=`.
    NohzFull = "nohz_full",
    /// Every poller core that has a cpufreq governor runs `performance`.
    Governor = "governor",
    /// No poller core has an idle state deeper than C1 enabled.
    CStates = "c_states",
    /// AF_XDP sockets busy-poll (`busy_poll_us`).
    BusyPoll = "busy_poll",
    /// DPDK has hugepages reserved.
    Hugepages = "hugepages",
    /// No interrupt of a capture interface may run on a poller core.
    IrqAffinity = "irq_affinity",
    /// AF_XDP sockets got zero-copy.
    ZeroCopy = "zero_copy",
    /// The driver granted the descriptors asked for (DPDK).
    Rings = "rings",
}
}

crate::words! {
/// What a failed check does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Nothing (the facts are still recorded).
    Ignore = "ignore",
    /// A warning in the `ready` event, the controller's output and the provenance.
    #[default]
    Warn = "warn",
    /// The agent does not start.
    Refuse = "refuse",
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
            let check = Check::from_name(check)
                .ok_or_else(|| format!("`{check}` is no fast-path check (one of {})", names(&Check::NAMES)))?;
            let verdict = Verdict::from_name(verdict)
                .ok_or_else(|| format!("`{verdict}` is no verdict (one of {})", names(&Verdict::NAMES)))?;
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

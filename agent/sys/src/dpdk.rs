//! DPDK capture ports (feature `dpdk`): the EAL, one RX queue per port with its own mbuf pool, and
//! [`DpdkPort`], whose [`poll`](DpdkPort::poll) hands each received frame over with a TSC stamp
//! (`rte_rdtsc_precise`) taken right after `rte_eth_rx_burst` returned it (the agent's capture
//! trait is implemented over it in the agent).
//!
//! The EAL is initialised once per process ([`Eal::init`]); it cannot be initialised again after
//! `rte_eal_cleanup`, which runs when the last port (and [`Eal`] handle) is dropped. DPDK's log
//! goes to stderr (the Linux EAL would write it to stdout, where the agent's JSON events go), and
//! so does whatever the EAL prints during its initialisation (its usage text on a bad argument). The
//! EAL pins the calling thread to its main lcore; that pinning is undone, so that the threads the
//! agent spawns later (its pollers, pinned with `--cores`) do not all inherit that one core.
//!
//! Poll-mode drivers come from the EAL's default plugin directory (Debian:
//! `/usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0`, loaded because DPDK is linked as shared
//! libraries, as `dpdk-testpmd` does) or from `-d` arguments.
//!
//! Reflect mode ([`open_with_reflect`]): each probe is tagged and re-addressed in place
//! ([`probe::prepare_reflection`]: `P` on the first receiving port, `B` on the others, Ethernet
//! destination the sender's NIC) and sent out of the reflect port on the TX queue whose index is
//! the receiving port's index; frames without a probe, and already tagged probes (the agent's own
//! reflections looping back), are freed.
//!
//! Rings and promiscuous mode are [`PortConfig`]'s: 512 descriptors by default (LatencyLab's
//! receiver; the QDMA driver needs RX rings of 512), promiscuous mode left as the driver has it
//! unless asked for. What each port got is reported by [`DpdkPort::rings`].

use std::cell::Cell;
use std::ffi::{CStr, CString, c_char, c_int};
use std::sync::Arc;

use dpdk_sys as ffi;
use latency_proto::capture::{DEFAULT_RING, MacAddr, PortRings};
use latency_proto::probe::{self, ProbeFormat, TAG_BYPASS, TAG_PIPELINE};

mod eal;
pub use eal::{Eal, eal_args};

/// The DPDK version the bindings were generated and linked against (`pkg-config --modversion`).
pub const DPDK_VERSION: &str = ffi::DPDK_VERSION;
/// Most frames taken from the NIC per `rte_eth_rx_burst`.
pub const BURST: usize = 32;
/// Program name put first in the EAL argv.
pub const PROGRAM: &str = "latency-agent";
/// Mbufs per port pool (2^n - 1 is the best size for the ring underneath).
const POOL_MBUFS: u32 = 8191;
/// Per-lcore mbuf cache of a pool.
const POOL_CACHE: u32 = 256;
/// `-ENOTSUP`: a driver without the operation (promiscuous mode on some virtual devices).
const ENOTSUP: c_int = 95;

/// What went wrong, with DPDK's own error text (`rte_strerror`).
#[derive(Debug, thiserror::Error)]
pub enum DpdkError {
    /// `rte_eal_init` failed.
    #[error("DPDK EAL init failed: {msg} (rte_errno {code}); EAL arguments: {args:?}")]
    EalInit {
        /// rte_errno.
        code: i32,
        /// rte_strerror(rte_errno).
        msg: String,
        /// The argv given to the EAL.
        args: Vec<String>,
    },
    /// The EAL of this process was cleaned up (or failed to initialise) before.
    #[error("the DPDK EAL cannot be initialised again in this process ({0})")]
    EalUnavailable(String),
    /// An EAL argument holds a NUL byte.
    #[error("EAL argument {0:?} contains a NUL byte")]
    NulInArgument(String),
    /// A port is not a number.
    #[error("`{0}` is not a DPDK port id (expected a number such as 0 or 1)")]
    BadPortId(String),
    /// No such port after the EAL probed its devices.
    #[error("no DPDK port {port}: the EAL found {available} port(s) (check the -a / --vdev EAL arguments)")]
    NoSuchPort {
        /// The port asked for.
        port: u16,
        /// Ports the EAL found.
        available: u16,
    },
    /// The same receiving port is listed twice.
    #[error("DPDK port {0} is listed twice")]
    DuplicatePort(u16),
    /// The reflect port has too few TX queues (one per receiving port is needed).
    #[error(
        "reflect port {port} supports {max} TX queue(s), {needed} are needed (one per receiving port; net_af_packet: add `qpairs={needed}` to its --vdev)"
    )]
    ReflectQueues {
        /// The reflect port.
        port: u16,
        /// TX queues the device supports.
        max: u16,
        /// TX queues needed.
        needed: u16,
    },
    /// A DPDK call on a port failed.
    #[error("DPDK port {port}: {step} failed: {msg} (error {code})")]
    Port {
        /// The port.
        port: u16,
        /// The call (`rte_eth_dev_configure`, …).
        step: &'static str,
        /// The positive errno value.
        code: i32,
        /// rte_strerror(code).
        msg: String,
    },
}

/// DPDK's text for an errno value (its own codes included).
fn strerror(code: i32) -> String {
    // SAFETY: rte_strerror returns a pointer to a static or per-lcore NUL-terminated string,
    // valid until the next call on this thread; it is copied at once.
    unsafe {
        let s = ffi::rte_strerror(code);
        if s.is_null() { format!("error {code}") } else { CStr::from_ptr(s).to_string_lossy().into_owned() }
    }
}

/// The calling thread's rte_errno.
fn rte_errno() -> i32 {
    // SAFETY: reads a per-thread integer; no preconditions.
    unsafe { ffi::ldpdk_errno() }
}

/// `Err(Port)` for a negative `-errno` return value.
fn check(port: u16, step: &'static str, rc: c_int) -> Result<c_int, DpdkError> {
    if rc < 0 { Err(DpdkError::Port { port, step, code: -rc, msg: strerror(-rc) }) } else { Ok(rc) }
}

/// Everything opened by one `open…` call: stopped, closed and freed when the last port using it
/// is dropped — ports first (their rings give the mbufs back), then the pools, then the EAL.
struct Session {
    ports: Vec<u16>,
    /// The rings granted to each port set up, in set-up order (receive ports, then reflect port).
    rings: Vec<PortRings>,
    pools: Vec<*mut ffi::rte_mempool>,
    _eal: Arc<Eal>,
}

// SAFETY: the pool pointers are only used in Drop; DPDK mempools and ethdev control calls may be
// used from any thread (not concurrently on one port, which Drop's exclusivity ensures).
unsafe impl Send for Session {}
// SAFETY: `&Session` gives no access to the pointers.
unsafe impl Sync for Session {}

impl Drop for Session {
    fn drop(&mut self) {
        for &p in &self.ports {
            // SAFETY: `p` was configured by this session and no DpdkPort polls it any more (they
            // all hold this session). Errors are of no use at this point.
            unsafe {
                ffi::rte_eth_dev_stop(p);
                ffi::rte_eth_dev_close(p);
            }
        }
        for &pool in &self.pools {
            // SAFETY: the ports using the pool are closed, so no mbuf of it is in use by them.
            unsafe { ffi::rte_mempool_free(pool) };
        }
    }
}

/// Where a receiving port reflects its probes.
#[derive(Clone, Copy, Debug)]
struct Reflect {
    port: u16,
    queue: u16,
    tag: u8,
    dst_mac: [u8; 6],
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Registration {
    NotTried,
    ByUs,
    NotNeeded,
}

thread_local! {
    /// Whether this thread was registered as an EAL lcore (for its mempool cache).
    static REGISTRATION: Cell<Registration> = const { Cell::new(Registration::NotTried) };
}

/// Packet counters of a port (`rte_eth_stats_get`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Packets received.
    pub ipackets: u64,
    /// Packets the device dropped because the RX queue was full.
    pub imissed: u64,
    /// Erroneous received packets.
    pub ierrors: u64,
    /// RX mbuf allocation failures.
    pub rx_nombuf: u64,
    /// Packets sent.
    pub opackets: u64,
    /// Failed transmissions.
    pub oerrors: u64,
}

/// One DPDK receive port (RX queue 0), for one polling thread.
pub struct DpdkPort {
    port: u16,
    /// `imissed + ierrors + rx_nombuf` when [`DpdkPort::drops`] last read them.
    drops_seen: u64,
    name: String,
    format: ProbeFormat,
    reflect: Option<Reflect>,
    _session: Arc<Session>,
}

impl DpdkPort {
    /// The DPDK port id.
    pub fn port_id(&self) -> u16 {
        self.port
    }

    /// The device name (`net_pcap0`, `0000:3b:00.0`, …).
    pub fn device(&self) -> &str {
        &self.name
    }

    /// The descriptor rings the drivers granted to every port opened with this one (receive
    /// ports in order, then the reflect port), named as [`DpdkPort::name`] names them.
    pub fn rings(&self) -> &[PortRings] {
        &self._session.rings
    }

    /// The port's counters.
    pub fn stats(&self) -> Result<PortStats, DpdkError> {
        let mut s = ffi::rte_eth_stats::default();
        // SAFETY: the port is open (the session is alive); `s` is a writable rte_eth_stats.
        check(self.port, "rte_eth_stats_get", unsafe { ffi::rte_eth_stats_get(self.port, &mut s) })?;
        Ok(PortStats {
            ipackets: s.ipackets,
            imissed: s.imissed,
            ierrors: s.ierrors,
            rx_nombuf: s.rx_nombuf,
            opackets: s.opackets,
            oerrors: s.oerrors,
        })
    }

    /// Register the polling thread as an EAL lcore once, so that mbuf allocations and frees use
    /// the pools' per-lcore caches. Harmless when it fails (non-EAL threads work, slower).
    #[inline]
    fn register_thread() {
        if REGISTRATION.get() != Registration::NotTried {
            return;
        }
        // SAFETY: reads the calling thread's lcore id.
        let next = if unsafe { ffi::rte_lcore_id() } != ffi::LCORE_ID_ANY {
            Registration::NotNeeded
        // SAFETY: the EAL is initialised (this port's session holds it); the thread is not an
        // EAL thread, as just checked.
        } else if unsafe { ffi::rte_thread_register() } == 0 {
            Registration::ByUs
        } else {
            Registration::NotNeeded
        };
        REGISTRATION.set(next);
    }

    /// Frames the NIC dropped before the poller saw them (`imissed + ierrors + rx_nombuf`), since
    /// the last call; none when the counters cannot be read.
    pub fn drops(&mut self) -> u64 {
        let Ok(s) = self.stats() else { return 0 };
        let total = s.imissed + s.ierrors + s.rx_nombuf;
        // Counters that went back (a port reset) start over from their new value.
        total.saturating_sub(std::mem::replace(&mut self.drops_seen, total))
    }

    /// Hand the frames waiting on RX queue 0 (up to `budget`, at most [`BURST`]) to `f` with
    /// their TSC stamps, reflecting the probes in reflect mode; returns how many were handed over.
    /// Never blocks.
    pub fn poll(&mut self, budget: usize, mut f: impl FnMut(&[u8], u64)) -> usize {
        let want = budget.min(BURST);
        if want == 0 {
            return 0;
        }
        Self::register_thread();
        let mut bufs = [std::ptr::null_mut::<ffi::rte_mbuf>(); BURST];
        // SAFETY: the port is started and RX queue 0 is polled by this thread only (a DpdkPort is
        // not Clone and polls take &mut self); `bufs` has room for `want` ≤ BURST pointers.
        let n = usize::from(unsafe { ffi::rte_eth_rx_burst(self.port, 0, bufs.as_mut_ptr(), want as u16) });
        if n == 0 {
            return 0;
        }
        let mut stamps = [0u64; BURST];
        for s in &mut stamps[..n] {
            // SAFETY: `mfence; rdtsc` — no memory effects beyond the fence.
            *s = unsafe { ffi::rte_rdtsc_precise() };
        }
        let mut tx = [std::ptr::null_mut::<ffi::rte_mbuf>(); BURST];
        let mut ntx = 0;
        for (&m, &tsc) in bufs[..n].iter().zip(&stamps[..n]) {
            // SAFETY: `m` is a valid mbuf the driver just handed over, owned by us until it is
            // freed or transmitted below; its first segment holds `data_len` bytes at its data
            // pointer, and nothing else accesses them meanwhile.
            let data: &mut [u8] = unsafe {
                std::slice::from_raw_parts_mut(
                    ffi::ldpdk_mbuf_data(m).cast::<u8>(),
                    usize::from(ffi::ldpdk_mbuf_data_len(m)),
                )
            };
            f(data, tsc);
            match self.reflect {
                Some(r) if probe::prepare_reflection(data, self.format, r.tag, r.dst_mac) => {
                    tx[ntx] = m;
                    ntx += 1;
                }
                // SAFETY: `m` is ours and not used after this.
                _ => unsafe { ffi::rte_pktmbuf_free(m) },
            }
        }
        if let (Some(r), true) = (self.reflect, ntx > 0) {
            // SAFETY: the reflect port is started with a TX queue per receiving port and queue
            // `r.queue` is used by this port's thread only; the driver takes ownership of the
            // first `sent` mbufs.
            let sent = usize::from(unsafe { ffi::rte_eth_tx_burst(r.port, r.queue, tx.as_mut_ptr(), ntx as u16) });
            for &m in &tx[sent..ntx] {
                // SAFETY: not taken by the driver, so still ours.
                unsafe { ffi::rte_pktmbuf_free(m) };
            }
        }
        n
    }

    /// Name for logs: `dpdk:<port id>:<device>`.
    pub fn name(&self) -> String {
        format!("dpdk:{}:{}", self.port, self.name)
    }
}

impl Drop for DpdkPort {
    fn drop(&mut self) {
        if REGISTRATION.get() == Registration::ByUs {
            REGISTRATION.set(Registration::NotTried);
            // SAFETY: this thread was registered by `register_thread`; the EAL is still up (the
            // session, dropped after this body, holds it).
            unsafe { ffi::rte_thread_unregister() };
        }
    }
}

/// Parse DPDK port ids ("0", "1", …).
pub fn parse_ports(ports: &[String]) -> Result<Vec<u16>, DpdkError> {
    let mut ids: Vec<u16> = Vec::with_capacity(ports.len());
    for p in ports {
        let id: u16 = p.trim().parse().map_err(|_| DpdkError::BadPortId(p.clone()))?;
        if ids.contains(&id) {
            return Err(DpdkError::DuplicatePort(id));
        }
        ids.push(id);
    }
    Ok(ids)
}

/// How the ports are set up.
#[derive(Clone, Copy, Debug)]
pub struct PortConfig {
    /// Probe format (for reflection).
    pub format: ProbeFormat,
    /// Reflect mode: the reflect port and the destination MAC of the reflected frames.
    pub reflect: Option<(u16, MacAddr)>,
    /// RX descriptors asked for per queue (the driver may adjust them).
    pub rx_ring: u16,
    /// TX descriptors asked for per queue.
    pub tx_ring: u16,
    /// Enable promiscuous mode on every port (otherwise it is left as the driver has it).
    pub promiscuous: bool,
}

impl PortConfig {
    /// No reflection, default rings, promiscuous mode untouched.
    pub fn new(format: ProbeFormat) -> PortConfig {
        PortConfig { format, reflect: None, rx_ring: DEFAULT_RING, tx_ring: DEFAULT_RING, promiscuous: false }
    }
}

/// Receive ports ready to poll, and the rings granted to every port opened (see
/// [`DpdkPort::rings`]).
pub type Opened = (Vec<DpdkPort>, Vec<PortRings>);

/// Open `ports` (DPDK port ids, pipeline first) for capture: the EAL is initialised with
/// [`PROGRAM`] and `eal`. What `latency-agent capture --backend dpdk` calls. Also returns the
/// rings granted (see [`DpdkPort::rings`]).
pub fn open_ports(ports: &[String], config: &PortConfig, eal: &[String]) -> Result<Opened, DpdkError> {
    let ids = parse_ports(ports)?;
    let eal = Eal::init(&eal_args(PROGRAM, eal))?;
    let opened = open_with_reflect(&eal, &ids, config)?;
    let rings = opened.first().map(|p| p.rings().to_vec()).unwrap_or_default();
    Ok((opened, rings))
}

/// Open `ports` on the initialised `eal` (see [`open_ports`]). Each port gets one RX queue with
/// its own mbuf pool on the port's NUMA socket and the rings of `config` (adjusted to the
/// device's limits), promiscuous mode if asked for, and is started; a reflect port gets one TX
/// queue per receiving port (the other ports one, unused).
pub fn open_with_reflect(eal: &Arc<Eal>, ports: &[u16], config: &PortConfig) -> Result<Vec<DpdkPort>, DpdkError> {
    let reflect_port = config.reflect.map(|(p, _)| p);
    let available = eal.port_count();
    let mut all: Vec<u16> = Vec::new();
    for &p in ports {
        if all.contains(&p) {
            return Err(DpdkError::DuplicatePort(p));
        }
        all.push(p);
    }
    if let Some(r) = reflect_port
        && !all.contains(&r)
    {
        all.push(r);
    }
    for &p in &all {
        // SAFETY: the EAL is initialised; any port id may be asked about.
        if unsafe { ffi::rte_eth_dev_is_valid_port(p) } == 0 {
            return Err(DpdkError::NoSuchPort { port: p, available });
        }
    }
    let mut session = Session { ports: Vec::new(), rings: Vec::new(), pools: Vec::new(), _eal: eal.clone() };
    // `all` starts with `ports`, in order: names[i] is the name of ports[i].
    let mut names = Vec::new();
    let needed_tx = ports.len() as u16;
    for &p in &all {
        let nb_tx = if reflect_port == Some(p) { needed_tx } else { 1 };
        names.push(setup_port(&mut session, p, nb_tx, reflect_port == Some(p), config)?);
    }
    let session = Arc::new(session);
    Ok(ports
        .iter()
        .enumerate()
        .map(|(i, &p)| DpdkPort {
            port: p,
            drops_seen: 0,
            name: names[i].clone(),
            format: config.format,
            reflect: config.reflect.map(|(r, mac)| Reflect {
                port: r,
                queue: i as u16,
                tag: if i == 0 { TAG_PIPELINE } else { TAG_BYPASS },
                dst_mac: mac.0,
            }),
            _session: session.clone(),
        })
        .collect())
}

/// A unique mempool name (DPDK names are process-wide and at most 25 characters).
fn pool_name(port: u16) -> CString {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    CString::new(format!("lat_rx{port}_{n}")).unwrap_or_default()
}

/// Configure, set up and start one port; returns its device name. What was configured is
/// recorded in `session`, so that an error part-way still closes it.
fn setup_port(
    session: &mut Session,
    p: u16,
    nb_tx: u16,
    is_reflect: bool,
    config: &PortConfig,
) -> Result<String, DpdkError> {
    let mut info = ffi::rte_eth_dev_info::default();
    // SAFETY: `p` is a valid port; `info` is writable.
    check(p, "rte_eth_dev_info_get", unsafe { ffi::rte_eth_dev_info_get(p, &mut info) })?;
    if is_reflect && info.max_tx_queues < nb_tx {
        return Err(DpdkError::ReflectQueues { port: p, max: info.max_tx_queues, needed: nb_tx });
    }
    let nb_tx = nb_tx.min(info.max_tx_queues);
    let conf = ffi::rte_eth_conf::default();
    // SAFETY: `p` is valid and stopped; `conf` is a zeroed (= default) configuration.
    check(p, "rte_eth_dev_configure", unsafe { ffi::rte_eth_dev_configure(p, 1, nb_tx, &conf) })?;
    session.ports.push(p);
    // SAFETY: `p` is valid.
    let socket = unsafe { ffi::rte_eth_dev_socket_id(p) };
    let socket = if socket < 0 { ffi::SOCKET_ID_ANY } else { socket };
    let name = pool_name(p);
    // SAFETY: `name` is a valid C string; the sizes are within DPDK's limits.
    let pool = unsafe {
        ffi::rte_pktmbuf_pool_create(
            name.as_ptr(),
            POOL_MBUFS,
            POOL_CACHE,
            0,
            ffi::RTE_MBUF_DEFAULT_BUF_SIZE as u16,
            socket,
        )
    };
    if pool.is_null() {
        let code = rte_errno();
        return Err(DpdkError::Port { port: p, step: "rte_pktmbuf_pool_create", code, msg: strerror(code) });
    }
    session.pools.push(pool);
    let (mut nb_rxd, mut nb_txd) = (config.rx_ring, config.tx_ring);
    // SAFETY: `p` is configured; both counts are writable.
    check(p, "rte_eth_dev_adjust_nb_rx_tx_desc", unsafe {
        ffi::rte_eth_dev_adjust_nb_rx_tx_desc(p, &mut nb_rxd, &mut nb_txd)
    })?;
    // SAFETY: `p` is configured with one RX queue; NULL = the driver's default RX config; `pool`
    // outlives the queue (both belong to the session, ports closed before pools freed).
    check(p, "rte_eth_rx_queue_setup", unsafe {
        ffi::rte_eth_rx_queue_setup(p, 0, nb_rxd, socket as u32, std::ptr::null(), pool)
    })?;
    for q in 0..nb_tx {
        // SAFETY: `p` is configured with `nb_tx` TX queues; NULL = default TX config.
        check(p, "rte_eth_tx_queue_setup", unsafe {
            ffi::rte_eth_tx_queue_setup(p, q, nb_txd, socket as u32, std::ptr::null())
        })?;
    }
    // SAFETY: `p` is configured with its queues set up.
    check(p, "rte_eth_dev_start", unsafe { ffi::rte_eth_dev_start(p) })?;
    if config.promiscuous {
        // SAFETY: `p` is started.
        let rc = unsafe { ffi::rte_eth_promiscuous_enable(p) };
        if rc != -ENOTSUP {
            check(p, "rte_eth_promiscuous_enable", rc)?;
        }
    }
    let mut buf = [0 as c_char; ffi::RTE_ETH_NAME_MAX_LEN as usize];
    // SAFETY: `buf` has RTE_ETH_NAME_MAX_LEN bytes, as the call requires.
    let rc = unsafe { ffi::rte_eth_dev_get_name_by_port(p, buf.as_mut_ptr()) };
    let name = if rc == 0 {
        // SAFETY: on success the buffer holds a NUL-terminated name.
        unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned()
    } else {
        format!("port{p}")
    };
    session.rings.push(PortRings { port: format!("dpdk:{p}:{name}"), rx: nb_rxd, tx: nb_txd });
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn eal_argv_starts_with_the_program() {
        assert_eq!(
            eal_args("latency-agent", &s(&["--no-pci", "-l", "0"])),
            s(&["latency-agent", "--no-pci", "-l", "0"])
        );
        assert_eq!(eal_args("x", &[]), s(&["x"]));
    }

    #[test]
    fn port_ids_parse_and_reject_garbage_and_duplicates() {
        assert_eq!(parse_ports(&s(&["0", " 1"])).unwrap(), vec![0, 1]);
        assert!(matches!(parse_ports(&s(&["eth0"])), Err(DpdkError::BadPortId(p)) if p == "eth0"));
        assert!(matches!(parse_ports(&s(&["70000"])), Err(DpdkError::BadPortId(_))));
        assert!(matches!(parse_ports(&s(&["1", "1"])), Err(DpdkError::DuplicatePort(1))));
    }

    #[test]
    fn errors_name_the_port_and_step() {
        let e = check(3, "rte_eth_dev_start", -22).unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("DPDK port 3: rte_eth_dev_start failed: "), "{text}");
        assert!(text.ends_with("(error 22)"), "{text}");
        assert_eq!(check(3, "x", 2).unwrap(), 2);
    }
}

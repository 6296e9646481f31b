//! Capture backends behind one trait: each port is polled by its own thread, and every frame is
//! handed over with a TSC stamp taken right after it was dequeued. The backends (AF_PACKET and
//! AF_XDP sockets, DPDK ports with the `dpdk` feature) are `latency-sys`'s and run on x86_64
//! Linux; here they become [`RxPort`]s.

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
use std::io;

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
use latency_proto::capture::MacAddr;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
use latency_proto::probe::{self, ProbeFormat};

/// One receive port.
pub trait RxPort: Send {
    /// Hand the frames waiting on the port (up to `budget`) to `f` with their TSC stamps; returns
    /// how many were handed over. Never blocks.
    fn poll(&mut self, budget: usize, f: &mut dyn FnMut(&[u8], u64)) -> usize;

    /// Name for logs (interface or DPDK port).
    fn name(&self) -> String;

    /// Frames the NIC or the ring dropped before the poller saw them, since the last call
    /// (AF_PACKET: the ring's drops and the frames longer than its slots; AF_XDP: RX ring full or
    /// fill ring empty; DPDK: `imissed`, `ierrors` and `rx_nombuf`). Read at the start and the end
    /// of every run, never per packet.
    fn drops(&mut self) -> u64 {
        0
    }

    /// Block until a frame may be waiting, at most `timeout_ms` (for pollers that sleep while
    /// their port is idle instead of spinning; ports the kernel does not deliver return at once).
    fn wait(&mut self, timeout_ms: i32) {
        let _ = timeout_ms;
    }

    /// From now on, stamp each frame with the moment the kernel received it, where the port keeps
    /// it (AF_PACKET: [`latency_sys::af_packet::PacketRing::stamp_at_arrival`]), on the TSC of
    /// `tsc_hz`, instead of the moment a poll saw it: for a poller that sleeps while its port is
    /// idle, whose every wake-up would otherwise count into the stamps taken after it. Other ports
    /// keep the poll's stamps.
    fn stamp_at_arrival(&mut self, tsc_hz: f64) {
        let _ = tsc_hz;
    }

    /// After a poll that handed over nothing: sleep in the kernel until a frame arrives (at most
    /// 1 ms, so that a poller still sees its settings change) if `sleep`, else spin once.
    fn idle(&mut self, sleep: bool) {
        if sleep { self.wait(1) } else { std::hint::spin_loop() }
    }
}

/// A port the kernel delivers: an AF_PACKET receive ring or an AF_XDP socket (no DPDK needed),
/// optionally reflecting every probe out of another interface, tagged (reflect mode).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub struct KernelPort {
    socket: Socket,
    reflect: Option<Reflect>,
    _promiscuous: Option<latency_sys::af_packet::Promiscuous>,
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
enum Socket {
    Packet(latency_sys::af_packet::PacketRing),
    Xdp(Box<latency_sys::af_xdp::XdpSocket>),
}

/// Where and how a port reflects its probes.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
struct Reflect {
    tx: latency_sys::af_packet::PacketSender,
    tag: u8,
    format: ProbeFormat,
    dst_mac: [u8; 6],
    frame: Vec<u8>,
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
impl KernelPort {
    /// An AF_PACKET ring on `interface` (needs CAP_NET_RAW), in promiscuous mode if `promiscuous`,
    /// its slots holding frames of up to `longest_frame` bytes whole (2 KiB slots without it;
    /// [`latency_sys::af_packet::PacketRing::open_fitting`]).
    pub fn af_packet(interface: &str, promiscuous: bool, longest_frame: Option<usize>) -> io::Result<Self> {
        let longest = longest_frame.unwrap_or(latency_sys::af_packet::WHOLE_FRAME_DEFAULT);
        latency_sys::af_packet::PacketRing::open_fitting(interface, promiscuous, longest)
            .map(|ring| KernelPort { socket: Socket::Packet(ring), reflect: None, _promiscuous: None })
            .map_err(|e| io::Error::new(e.kind(), format!("{interface}: {e}")))
    }

    /// An AF_XDP socket on queue 0 of `interface`, busy-polling with `busy_poll_us`
    /// ([`latency_sys::af_xdp::XdpSocket::open`]), the interface in promiscuous mode if
    /// `promiscuous`.
    pub fn af_xdp(interface: &str, promiscuous: bool, busy_poll_us: Option<u32>) -> io::Result<Self> {
        let socket = latency_sys::af_xdp::XdpSocket::open(interface, busy_poll_us)?;
        let promiscuous = match promiscuous {
            true => Some(
                latency_sys::af_packet::Promiscuous::hold(interface)
                    .map_err(|e| io::Error::new(e.kind(), format!("{interface}: promiscuous mode: {e}")))?,
            ),
            false => None,
        };
        Ok(KernelPort { socket: Socket::Xdp(Box::new(socket)), reflect: None, _promiscuous: promiscuous })
    }

    /// The longest frame an AF_PACKET ring's slots hold whole.
    pub fn longest_frame(&self) -> Option<usize> {
        match &self.socket {
            Socket::Packet(ring) => Some(ring.longest_frame()),
            Socket::Xdp(_) => None,
        }
    }

    /// What the kernel granted an AF_XDP socket.
    pub fn xdp_grant(&self) -> Option<&latency_proto::capture::XdpGrant> {
        match &self.socket {
            Socket::Xdp(x) => Some(x.grant()),
            Socket::Packet(_) => None,
        }
    }

    /// Send a copy of every probe received, tagged `tag` ([`probe::TAG_PIPELINE`] or
    /// [`probe::TAG_BYPASS`]) and addressed to `dst_mac`, out of `interface` right after it is
    /// stamped ([`probe::prepare_reflection`]: probes already tagged, the agent's own reflections
    /// looping back, are not reflected again). Each port has its own packet socket on that
    /// interface (as each has its own TX queue with DPDK), whichever socket receives.
    pub fn reflect_to(mut self, interface: &str, tag: u8, format: ProbeFormat, dst_mac: MacAddr) -> io::Result<Self> {
        let tx = latency_sys::af_packet::PacketSender::open(interface)
            .map_err(|e| io::Error::new(e.kind(), format!("{interface}: {e}")))?;
        self.reflect = Some(Reflect { tx, tag, format, dst_mac: dst_mac.0, frame: Vec::with_capacity(2048) });
        Ok(self)
    }
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
impl RxPort for KernelPort {
    fn drops(&mut self) -> u64 {
        // Statistics that cannot be read report none; the kernel never refuses them for an open
        // socket.
        match &mut self.socket {
            Socket::Packet(ring) => ring.drops(),
            Socket::Xdp(xsk) => xsk.drops(),
        }
        .unwrap_or(0)
    }

    fn poll(&mut self, budget: usize, f: &mut dyn FnMut(&[u8], u64)) -> usize {
        let KernelPort { socket, reflect, .. } = self;
        let mut reflecting;
        let f: &mut dyn FnMut(&[u8], u64) = match reflect {
            None => f,
            Some(r) => {
                reflecting = |data: &[u8], tsc| {
                    f(data, tsc);
                    r.frame.clear();
                    r.frame.extend_from_slice(data);
                    if probe::prepare_reflection(&mut r.frame, r.format, r.tag, r.dst_mac) {
                        // Never blocks the poller: a reflection the interface refuses (its buffer
                        // full) is lost like one dropped on the wire, and the controller finds it
                        // missing from the sender's capture.
                        let _ = r.tx.send(&r.frame);
                    }
                };
                &mut reflecting
            }
        };
        match socket {
            Socket::Packet(ring) => ring.poll(budget, f),
            Socket::Xdp(xsk) => xsk.poll(budget, f),
        }
    }

    fn stamp_at_arrival(&mut self, tsc_hz: f64) {
        if let Socket::Packet(ring) = &mut self.socket {
            ring.stamp_at_arrival(tsc_hz);
        }
    }

    fn wait(&mut self, timeout_ms: i32) {
        let fd = match &self.socket {
            Socket::Packet(ring) => ring.fd(),
            Socket::Xdp(xsk) => xsk.fd(),
        };
        latency_sys::wait_readable(fd, timeout_ms);
    }

    fn name(&self) -> String {
        match &self.socket {
            Socket::Packet(ring) => format!("af_packet:{}", ring.interface()),
            Socket::Xdp(xsk) => format!("af_xdp:{}", xsk.interface()),
        }
    }
}

/// A DPDK port ([`latency_sys::dpdk::open_ports`], [`latency_sys::dpdk::open_with_reflect`]): it
/// reflects its probes itself in reflect mode, and is never woken by the kernel (the default
/// [`RxPort::wait`] returns at once).
#[cfg(all(feature = "dpdk", target_arch = "x86_64", target_os = "linux"))]
impl RxPort for latency_sys::dpdk::DpdkPort {
    fn poll(&mut self, budget: usize, f: &mut dyn FnMut(&[u8], u64)) -> usize {
        latency_sys::dpdk::DpdkPort::poll(self, budget, f)
    }

    fn name(&self) -> String {
        latency_sys::dpdk::DpdkPort::name(self)
    }

    fn drops(&mut self) -> u64 {
        latency_sys::dpdk::DpdkPort::drops(self)
    }
}

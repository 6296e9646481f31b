//! Capture backends behind one trait: each port is polled by its own thread, and every frame is
//! handed over with a TSC stamp taken right after it was dequeued. The backends (AF_PACKET here,
//! DPDK in `sys::dpdk`) run on x86_64 Linux.

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
    /// (AF_PACKET: the ring's drops; DPDK: `imissed`, `ierrors` and `rx_nombuf`). Read at the
    /// start and the end of every run, never per packet.
    fn drops(&mut self) -> u64 {
        0
    }
}

/// Linux AF_PACKET receive ring (no DPDK needed), optionally reflecting every probe out of
/// another interface, tagged (reflect mode).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub struct AfPacketPort {
    ring: crate::sys::af_packet::PacketRing,
    reflect: Option<Reflect>,
}

/// Where and how a port reflects its probes.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
struct Reflect {
    tx: crate::sys::af_packet::PacketSender,
    tag: u8,
    format: ProbeFormat,
    dst_mac: [u8; 6],
    frame: Vec<u8>,
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
impl AfPacketPort {
    /// Open `interface` (needs CAP_NET_RAW), in promiscuous mode if `promiscuous`.
    pub fn open(interface: &str, promiscuous: bool) -> io::Result<Self> {
        crate::sys::af_packet::PacketRing::open(interface, promiscuous)
            .map(|ring| AfPacketPort { ring, reflect: None })
            .map_err(|e| io::Error::new(e.kind(), format!("{interface}: {e}")))
    }

    /// Send a copy of every probe received, tagged `tag` ([`probe::TAG_PIPELINE`] or
    /// [`probe::TAG_BYPASS`]) and addressed to `dst_mac`, out of `interface` right after it is
    /// stamped ([`probe::prepare_reflection`]: probes already tagged, the agent's own reflections
    /// looping back, are not reflected again). Each port has its own socket on that interface (as
    /// each has its own TX queue with DPDK).
    pub fn reflect_to(mut self, interface: &str, tag: u8, format: ProbeFormat, dst_mac: MacAddr) -> io::Result<Self> {
        let tx = crate::sys::af_packet::PacketSender::open(interface)
            .map_err(|e| io::Error::new(e.kind(), format!("{interface}: {e}")))?;
        self.reflect = Some(Reflect { tx, tag, format, dst_mac: dst_mac.0, frame: Vec::with_capacity(2048) });
        Ok(self)
    }
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
impl RxPort for AfPacketPort {
    fn drops(&mut self) -> u64 {
        // A ring whose statistics cannot be read reports none; the kernel never refuses it for
        // an open packet socket.
        self.ring.drops().unwrap_or(0)
    }

    fn poll(&mut self, budget: usize, f: &mut dyn FnMut(&[u8], u64)) -> usize {
        let AfPacketPort { ring, reflect } = self;
        match reflect {
            None => ring.poll(budget, f),
            Some(r) => ring.poll(budget, &mut |data, tsc| {
                f(data, tsc);
                r.frame.clear();
                r.frame.extend_from_slice(data);
                if probe::prepare_reflection(&mut r.frame, r.format, r.tag, r.dst_mac) {
                    // Never blocks the poller: a reflection the interface refuses (its buffer
                    // full) is lost like one dropped on the wire, and the controller finds it
                    // missing from the sender's capture.
                    let _ = r.tx.send(&r.frame);
                }
            }),
        }
    }

    fn name(&self) -> String {
        format!("af_packet:{}", self.ring.interface())
    }
}

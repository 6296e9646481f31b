//! Capture backends behind one trait: each port is polled by its own thread, and every frame is
//! handed over with a TSC stamp taken right after it was dequeued.

use std::io;

/// One receive port.
pub trait RxPort: Send {
    /// Hand the frames waiting on the port (up to `budget`) to `f` with their TSC stamps; returns
    /// how many were handed over. Never blocks.
    fn poll(&mut self, budget: usize, f: &mut dyn FnMut(&[u8], u64)) -> usize;

    /// Name for logs (interface or DPDK port).
    fn name(&self) -> String;
}

/// Linux AF_PACKET receive ring (no DPDK needed).
pub struct AfPacketPort(crate::sys::af_packet::PacketRing);

impl AfPacketPort {
    /// Open `interface` (needs CAP_NET_RAW).
    pub fn open(interface: &str) -> io::Result<Self> {
        crate::sys::af_packet::PacketRing::open(interface)
            .map(AfPacketPort)
            .map_err(|e| io::Error::new(e.kind(), format!("{interface}: {e}")))
    }
}

impl RxPort for AfPacketPort {
    fn poll(&mut self, budget: usize, f: &mut dyn FnMut(&[u8], u64)) -> usize {
        self.0.poll(budget, f)
    }

    fn name(&self) -> String {
        format!("af_packet:{}", self.0.interface())
    }
}

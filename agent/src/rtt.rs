//! Round trips without tcpreplay: `originate` sends probes itself at a fixed pace (or in bursts),
//! stamping each with the TSC right before it is sent, while a poller stamps the echoes coming
//! back; `reflect` on the far host sends every probe it receives back where it came from (source
//! and destination MAC swapped), or out of a return interface to a given MAC, on any kernel
//! backend. Either may sleep while idle instead of spinning (`wait`, [`RxPort::idle`]), for hosts
//! whose cores they share: the stamps then include the kernel's wake-up, which a null calibration
//! takes out.
//!
//! An originator's run is written in the record schema, as a capture run is: each probe's
//! transmission as the `bypass` copy and its echo as the `pipeline` copy. So D = t_P − t_B is
//! the round-trip time, and the analysis's pairing and null calibration apply as they are. With a
//! loopback or null path as the calibration, the difference is the latency the path under test
//! adds.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, BufWriter};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use arrow_ipc::writer::StreamWriter;
use latency_proto::probe::{self, ProbeFormat};
use latency_proto::schema::{Port, RecordBuilder, record_schema};
use latency_sys::af_packet::PacketSender;
use latency_sys::{pin_current_thread, rdtsc_fenced};

use crate::capture::RxPort;

/// UDP ports of the probes an originator sends.
const UDP_PORT: u16 = 4791;

/// An Ethernet + IPv4 + UDP frame to `dst` from `src` carrying probe `id`, `size` bytes long
/// (at least 60, before the FCS), with a valid IPv4 header checksum (UDP checksum 0: none).
pub fn probe_frame(id: u64, format: ProbeFormat, size: usize, dst: [u8; 6], src: [u8; 6]) -> Vec<u8> {
    let payload = probe::payload(id, format, size.saturating_sub(42));
    let ip_len = 20 + 8 + payload.len();
    let mut f = Vec::with_capacity(14 + ip_len);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x08, 0x00]);
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&(ip_len as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
    ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
    let sum = ip.chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum::<u32>();
    let folded = (sum & 0xffff) + (sum >> 16);
    ip[10..12].copy_from_slice(&(!(((folded & 0xffff) + (folded >> 16)) as u16)).to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&UDP_PORT.to_be_bytes());
    f.extend_from_slice(&UDP_PORT.to_be_bytes());
    f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&payload);
    f.resize(f.len().max(60), 0);
    f
}

/// Where a reflector sends its echoes: back out of the receiving interface with the MAC addresses
/// swapped, or out of another interface re-addressed to a given MAC (a return path of its own).
pub struct EchoTo<'a> {
    /// The sending socket.
    pub tx: &'a PacketSender,
    /// Destination MAC (none: swap source and destination).
    pub dst_mac: Option<[u8; 6]>,
}

/// Send every untagged probe `port` receives back as `to` says, until `stop`; sleep in the kernel
/// while the port is idle if `wait` (else spin). Returns (probes reflected, frames that were no
/// probe or could not be sent).
pub fn reflect(port: &mut dyn RxPort, to: &EchoTo, format: ProbeFormat, wait: bool, stop: &AtomicBool) -> (u64, u64) {
    let (mut reflected, mut other) = (0u64, 0u64);
    let mut frame = Vec::with_capacity(2048);
    while !stop.load(Ordering::Relaxed) {
        let n = port.poll(64, &mut |data, _| {
            if data.len() < probe::ETHERNET_HEADER || probe::parse(data, format).is_none_or(|p| p.tag.is_some()) {
                other += 1;
                return;
            }
            frame.clear();
            frame.extend_from_slice(data);
            let (dst, src) = frame.split_at_mut(6);
            match to.dst_mac {
                Some(mac) => {
                    src[..6].copy_from_slice(dst);
                    dst.copy_from_slice(&mac);
                }
                None => dst.swap_with_slice(&mut src[..6]),
            }
            match to.tx.send(&frame) {
                Ok(()) => reflected += 1,
                Err(_) => other += 1,
            }
        });
        if n == 0 {
            port.idle(wait);
        }
    }
    (reflected, other)
}

/// What an originator sends.
#[derive(Clone, Debug)]
pub struct Originate {
    /// The probes, in sending order: each id with its frame.
    pub probes: Vec<(u64, Vec<u8>)>,
    /// Probes per second.
    pub pps: f64,
    /// Probes sent back to back at each pacing instant (intervals `burst` times as long).
    pub burst: u64,
    /// Probe id format.
    pub format: ProbeFormat,
    /// How long the echoes may take after the last probe was sent.
    pub drain: Duration,
    /// Core of the sending thread, and of the receiving poller.
    pub cores: (Option<usize>, Option<usize>),
    /// Sleep between sends and while no echo is waiting, instead of spinning (for hosts whose
    /// cores the originator shares).
    pub wait: bool,
}

impl Originate {
    /// `count` probes numbered from 1, `frame_size` bytes, addressed to `dst_mac`.
    pub fn generated(count: u64, format: ProbeFormat, frame_size: usize, dst_mac: [u8; 6]) -> Vec<(u64, Vec<u8>)> {
        (1..=count).map(|id| (id, probe_frame(id, format, frame_size, dst_mac, [0x02, 0, 0, 0, 0, 0x0a]))).collect()
    }

    /// The frames of a pcap trace that carry a probe id in `format`, in the trace's order (other
    /// frames are skipped: the controller's traces hold probes only).
    pub fn from_trace(path: &Path, format: ProbeFormat) -> io::Result<Vec<(u64, Vec<u8>)>> {
        let mut r = latency_proto::pcap::Reader::open(path)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", path.display())))?;
        let mut out = Vec::new();
        while let Some(frame) = r
            .next_record()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", path.display())))?
        {
            if let Some(p) = probe::parse(frame, format).filter(|p| p.tag.is_none()) {
                out.push((p.id, frame.to_vec()));
            }
        }
        Ok(out)
    }
}

/// What an originator's run gave: its counts (the records are in its file).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Counts {
    /// Probes sent.
    pub sent: u64,
    /// Echoes received (first of each probe).
    pub received: u64,
    /// Echoes of a probe already echoed.
    pub duplicates: u64,
    /// Frames received that were no echo of this run.
    pub other: u64,
    /// Seconds from the first probe sent to the last.
    pub seconds: f64,
}

/// Send `o.probes` out of `tx` at the pace asked, stamping each, while a poller stamps their
/// echoes on `rx`; write every stamp to `out` (record schema: transmissions as `bypass`, echoes as
/// `pipeline`) and return the counts.
pub fn originate(rx: Box<dyn RxPort>, tx: &PacketSender, o: &Originate, tsc_hz: f64, out: &Path) -> io::Result<Counts> {
    let stop = Arc::new(AtomicBool::new(false));
    // Each probe's frame length, by id: also which frames are echoes of this run.
    let lens: Arc<HashMap<u64, u16>> = Arc::new(o.probes.iter().map(|(id, f)| (*id, f.len() as u16)).collect());
    let (format, rx_core, wait, n) = (o.format, o.cores.1, o.wait, o.probes.len());
    let poller = {
        let (stop, lens) = (stop.clone(), lens.clone());
        std::thread::Builder::new().name("rtt-rx".into()).spawn(move || {
            let mut rx = rx;
            if wait {
                rx.stamp_at_arrival(tsc_hz);
            }
            if let Some(c) = rx_core {
                let _ = pin_current_thread(c);
            }
            let (mut seen, mut other) = (Vec::with_capacity(n), 0u64);
            while !stop.load(Ordering::Relaxed) {
                let got = rx.poll(256, &mut |data, tsc| match probe::parse(data, format) {
                    Some(p) if p.tag.is_none() && lens.contains_key(&p.id) => seen.push((p.id, tsc)),
                    _ => other += 1,
                });
                if got == 0 {
                    rx.idle(wait);
                }
            }
            (seen, other)
        })?
    };
    if let Some(c) = o.cores.0 {
        pin_current_thread(c)?;
    }
    let ticks_per_instant = tsc_hz * o.burst.max(1) as f64 / o.pps;
    // Sleeping, the sender wakes this long before a probe is due, then spins.
    let early = (tsc_hz * 200e-6) as u64;
    let mut sent: Vec<(u64, u64)> = Vec::with_capacity(n);
    let start = rdtsc_fenced() + (tsc_hz / 1000.0) as u64;
    for (k, (id, f)) in o.probes.iter().enumerate() {
        let due = start + ((k as u64 / o.burst.max(1)) as f64 * ticks_per_instant) as u64;
        let now = rdtsc_fenced();
        if wait && due > now + early {
            std::thread::sleep(Duration::from_secs_f64((due - now - early) as f64 / tsc_hz));
        }
        while rdtsc_fenced() < due {
            std::hint::spin_loop();
        }
        // The send may be refused while the interface's queue is full: try again, stamped anew.
        loop {
            let tsc = rdtsc_fenced();
            match tx.send(f) {
                Ok(()) => {
                    sent.push((*id, tsc));
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::hint::spin_loop(),
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    return Err(e);
                }
            }
        }
    }
    std::thread::sleep(o.drain);
    stop.store(true, Ordering::Relaxed);
    let (echoes, other) = poller.join().map_err(|_| io::Error::other("the receiving poller panicked"))?;
    let seconds = match (sent.first(), sent.last()) {
        (Some(a), Some(b)) => (b.1 - a.1) as f64 / tsc_hz,
        _ => 0.0,
    };
    let mut first = HashSet::with_capacity(echoes.len());
    let mut counts = Counts { sent: sent.len() as u64, other, seconds, ..Counts::default() };
    let mut b = RecordBuilder::with_capacity(sent.len() + echoes.len());
    for (seq, &(id, tsc)) in sent.iter().enumerate() {
        b.push(id, Port::Bypass, tsc, seq as u64, lens[&id], None);
    }
    for (seq, &(id, tsc)) in echoes.iter().enumerate() {
        if first.insert(id) {
            counts.received += 1;
        } else {
            counts.duplicates += 1;
        }
        b.push(id, Port::Pipeline, tsc, seq as u64, lens[&id], None);
    }
    let mut w =
        StreamWriter::try_new(BufWriter::new(File::create(out)?), &record_schema()).map_err(io::Error::other)?;
    w.write(&b.finish().map_err(io::Error::other)?).map_err(io::Error::other)?;
    w.finish().map_err(io::Error::other)?;
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_frames_have_a_valid_ipv4_checksum_and_carry_their_id() {
        let f = probe_frame(77, ProbeFormat::Compact, 128, [1; 6], [2; 6]);
        assert_eq!(f.len(), 128);
        assert_eq!(probe::parse(&f, ProbeFormat::Compact).map(|p| p.id), Some(77));
        // The ones' complement sum of a valid header, checksum included, is 0xffff.
        let sum: u32 = f[14..34].chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
        assert_eq!((sum & 0xffff) + (sum >> 16), 0xffff);
        assert_eq!(u16::from_be_bytes([f[16], f[17]]) as usize, 128 - 14);
        assert_eq!(probe_frame(1, ProbeFormat::Latencylab, 10, [1; 6], [2; 6]).len(), 60);
    }
}

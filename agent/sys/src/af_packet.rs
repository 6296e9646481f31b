//! An AF_PACKET socket with a TPACKET_V2 receive ring shared with the kernel: frames are read in
//! place from the ring, with no system call per packet.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{Ordering, fence};

/// Bytes of the ring (about: a whole number of blocks).
const RING_BYTES: usize = 16 << 20;
/// Bytes of a block (about: a whole number of slots, and of 64 slots, so that a block of slots of
/// whole cache lines is a whole number of pages).
const BLOCK_BYTES: usize = 1 << 20;
/// Where the kernel puts an Ethernet frame in its slot: after the TPACKET_V2 header and
/// `sockaddr_ll`, at the offset that 16-aligns its IP header (less for a frame whose network
/// header lies deeper, VLAN-tagged).
pub const FRAME_OFFSET: usize = 66;
/// The longest frame a ring opened by [`PacketRing::open`] holds whole: its slots are 2 KiB.
pub const WHOLE_FRAME_DEFAULT: usize = 2048 - FRAME_OFFSET;
/// The start of a frame that the receive loop reads: the TPACKET_V2 header and `sockaddr_ll`
/// (line 0, read with the status word), then the packet at [`FRAME_OFFSET`]: line 1 holds its
/// Ethernet, IPv4 and UDP headers and the first 20 bytes of payload, where a probe starts; line 2
/// the next 64 bytes (an IPv6 or VLAN-tagged probe, a long LatencyLab id). Line 1 of every waiting
/// frame is prefetched as its status word is read; line 2, of frames that are not IPv4, a few
/// frames ahead of the one handed over, so that a ring drained from memory does not wait on it
/// where it is read, nor queue it behind the status words where it is not, nor fetch it where no
/// probe reaches it.
const LINE: usize = 64;
/// The Ethernet type of IPv4, as it lies in a frame.
const ETHERTYPE_IPV4: [u8; 2] = [0x08, 0x00];
/// How many frames ahead of the one handed over line 2 is prefetched.
const SECOND_LINE_AHEAD: usize = 4;

/// A receive ring bound to one interface, in promiscuous mode.
pub struct PacketRing {
    fd: OwnedFd,
    ring: *mut u8,
    /// Bytes per slot, and slots in the ring.
    slot: usize,
    slots: usize,
    next: usize,
    /// Frames longer than a slot, seen since the last [`PacketRing::drops`].
    cut: u64,
    interface: String,
    /// TSC ticks per ns when frames are stamped with the moment the kernel received them
    /// ([`PacketRing::stamp_at_arrival`]).
    arrival: Option<f64>,
    /// The last stamp handed over, which a stamp taken from the kernel's time never goes below.
    last: u64,
}

// SAFETY: the ring mapping and socket are owned by this value; the kernel only touches frames
// whose status says they belong to it. Moving the owner to another thread is sound.
unsafe impl Send for PacketRing {}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

fn setsockopt<T>(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` points to a live T of the size passed; the kernel copies it.
    check(unsafe {
        libc::setsockopt(fd.as_raw_fd(), level, name, (value as *const T).cast(), std::mem::size_of::<T>() as u32)
    })
}

fn ifindex(interface: &str) -> io::Result<u32> {
    let name =
        CString::new(interface).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "bad interface name"))?;
    // SAFETY: `name` is a valid NUL-terminated string.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if ifindex == 0 {
        return Err(io::Error::new(io::ErrorKind::NotFound, format!("no interface `{interface}`")));
    }
    Ok(ifindex)
}

/// A raw packet socket receiving `proto` (network order; 0 receives nothing).
fn packet_socket(proto: u16) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the result is checked before it is owned.
    let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, libc::c_int::from(proto)) };
    check(raw)?;
    // SAFETY: `raw` is a fresh, valid descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

fn bind(fd: &OwnedFd, ifindex: u32, proto: u16) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain data; all-zero is a valid starting value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = proto;
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: `sll` is a valid sockaddr_ll and the length passed is its size.
    check(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    })
}

/// Put `ifindex` in promiscuous mode for as long as `fd` is open.
fn add_promiscuous(fd: &OwnedFd, ifindex: u32) -> io::Result<()> {
    // SAFETY: packet_mreq is plain data.
    let mut mreq: libc::packet_mreq = unsafe { std::mem::zeroed() };
    mreq.mr_ifindex = ifindex as i32;
    mreq.mr_type = libc::PACKET_MR_PROMISC as u16;
    setsockopt(fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq)
}

/// Keeps an interface in promiscuous mode while it lives, for receive paths that are not packet
/// sockets (AF_XDP): a packet socket that receives nothing.
pub struct Promiscuous {
    _fd: OwnedFd,
}

impl Promiscuous {
    /// Put `interface` in promiscuous mode (needs CAP_NET_RAW).
    pub fn hold(interface: &str) -> io::Result<Promiscuous> {
        let ifindex = ifindex(interface)?;
        let fd = packet_socket(0)?;
        bind(&fd, ifindex, 0)?;
        add_promiscuous(&fd, ifindex)?;
        Ok(Promiscuous { _fd: fd })
    }
}

/// A socket that only sends frames out of one interface (reflect mode); it receives nothing.
pub struct PacketSender {
    fd: OwnedFd,
    interface: String,
}

impl PacketSender {
    /// Open a sender on `interface` (needs CAP_NET_RAW).
    pub fn open(interface: &str) -> io::Result<PacketSender> {
        let ifindex = ifindex(interface)?;
        let fd = packet_socket(0)?;
        bind(&fd, ifindex, 0)?;
        Ok(PacketSender { fd, interface: interface.to_string() })
    }

    /// Send one Ethernet frame (header included) without ever blocking: when the socket's send
    /// buffer is full (the kernel has not yet passed earlier frames on), the frame is refused
    /// with `WouldBlock`. The kernel copies the frame before this returns.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        send(&self.fd, &self.interface, frame, libc::MSG_DONTWAIT)
    }
}

/// Send one Ethernet frame on a packet socket bound to `interface`.
fn send(fd: &OwnedFd, interface: &str, frame: &[u8], flags: libc::c_int) -> io::Result<()> {
    // SAFETY: `frame` is a live, initialised slice and the length passed is its length; the
    // kernel only reads it during the call. The socket is bound to the interface, so no
    // destination address is needed.
    let n = unsafe { libc::send(fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), flags) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n as usize != frame.len() {
        return Err(io::Error::other(format!("{interface}: sent {n} of {} bytes", frame.len())));
    }
    Ok(())
}

impl PacketRing {
    /// Open a ring on `interface` (needs CAP_NET_RAW) whose slots hold frames of up to
    /// [`WHOLE_FRAME_DEFAULT`] bytes whole, putting the interface in promiscuous mode (for as long
    /// as the socket is open) if `promiscuous`.
    pub fn open(interface: &str, promiscuous: bool) -> io::Result<PacketRing> {
        PacketRing::open_fitting(interface, promiscuous, WHOLE_FRAME_DEFAULT)
    }

    /// Like [`PacketRing::open`], with slots that hold frames of up to `longest_frame` bytes whole
    /// (at least 62), in whole cache lines: the ring's 16 MiB then holds more frames the shorter
    /// they are, and a poller reads them densely, fetching fewer lines from memory when it has
    /// fallen behind. A longer frame, which the kernel would cut, is not handed over: it counts
    /// among the ring's [`drops`](PacketRing::drops).
    pub fn open_fitting(interface: &str, promiscuous: bool, longest_frame: usize) -> io::Result<PacketRing> {
        if longest_frame > usize::from(u16::MAX) {
            let e = format!("{interface}: no ring slot holds frames of {longest_frame} bytes (at most 65,535)");
            return Err(io::Error::new(io::ErrorKind::InvalidInput, e));
        }
        let ifindex = ifindex(interface)?;
        let proto = (libc::ETH_P_ALL as u16).to_be();
        let fd = packet_socket(proto)?;
        setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_VERSION, &(libc::tpacket_versions::TPACKET_V2 as libc::c_int))?;
        let slot = (FRAME_OFFSET + longest_frame).max(2 * LINE).next_multiple_of(LINE);
        let per_block = (BLOCK_BYTES / slot / 64).max(1) * 64;
        let block = slot * per_block;
        let blocks = (RING_BYTES / block).max(1);
        let slots = blocks * per_block;
        let req = libc::tpacket_req {
            tp_block_size: block as u32,
            tp_block_nr: blocks as u32,
            tp_frame_size: slot as u32,
            tp_frame_nr: slots as u32,
        };
        setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &req)?;
        let len = block * blocks;
        // SAFETY: maps the ring the kernel just allocated for this socket, with its exact size.
        let ring = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ring == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut ring = PacketRing {
            fd,
            ring: ring.cast(),
            slot,
            slots,
            next: 0,
            cut: 0,
            interface: interface.to_string(),
            arrival: None,
            last: 0,
        };
        bind(&ring.fd, ifindex, proto)?;
        if promiscuous {
            add_promiscuous(&ring.fd, ifindex)?;
        }
        ring.next = 0;
        Ok(ring)
    }

    /// The socket, to wait on ([`super::wait_readable`]).
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.fd.as_fd()
    }

    /// Stamp each frame with the moment the kernel received it (the frame's `tp_sec`/`tp_nsec`,
    /// `CLOCK_REALTIME`, written as the kernel put the frame in the ring) instead of the moment
    /// [`PacketRing::poll`] saw it: the TSC read after the frames' status words, less each frame's
    /// age in the ring (the realtime clock read next to the TSC, less the kernel's time), at
    /// `tsc_hz`. For a poller that sleeps while its port is idle, whose wake-up would otherwise
    /// count into every stamp it takes after one. Only the age is converted, so neither the
    /// rate's error nor a slew of the realtime clock over the µs of an age matter; a stamp is never
    /// later than the one taken at the poll nor earlier than the stamp before it (a step of the
    /// realtime clock gives the poll's).
    pub fn stamp_at_arrival(&mut self, tsc_hz: f64) {
        self.arrival = Some(tsc_hz / 1e9);
    }

    /// The interface the ring is bound to.
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// The longest frame the ring's slots hold whole.
    pub fn longest_frame(&self) -> usize {
        self.slot - FRAME_OFFSET
    }

    /// Frames lost since the last call: those the kernel dropped because the ring was full
    /// (`PACKET_STATISTICS`, which the kernel resets on every read), and those longer than a slot,
    /// which were not handed over.
    pub fn drops(&mut self) -> io::Result<u64> {
        // SAFETY: tpacket_stats is plain data; all-zero is a valid starting value.
        let mut stats: libc::tpacket_stats = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: `stats` is a writable tpacket_stats and `len` holds its size, which the kernel
        // does not exceed.
        check(unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut stats as *mut libc::tpacket_stats).cast(),
                &mut len,
            )
        })?;
        Ok(u64::from(stats.tp_drops) + std::mem::take(&mut self.cut))
    }

    /// Send one Ethernet frame (header included) out of the interface through the same socket. The
    /// kernel copies the frame before this returns. Frames sent this way are not seen by this
    /// socket's own receive ring.
    pub fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        send(&self.fd, &self.interface, frame, 0)
    }

    /// Hand every frame waiting in the ring to `f` (in arrival order) with a TSC stamp taken right
    /// after the frame is seen, then give the slot back to the kernel. Frames this host sent are
    /// skipped; frames longer than a slot are counted as lost. Returns the number of frames handed
    /// over; at most `budget`.
    ///
    /// No system call: the status words are read in the shared ring. The frames are taken 32 at a
    /// time (`STAMP_BATCH`), as the DPDK backend takes a burst: the status words of the waiting
    /// ones are read, each is stamped (one TSC read after another, the first fenced so that all
    /// follow those reads: `stamp_batch`), then they are handed over. So a stamp never waits for
    /// the handling of the frames before it. As its status word is read, the start of each
    /// waiting frame's packet is prefetched, and the next line (where the frame is not IPv4) a few
    /// frames ahead of the one handed over; when a whole batch waited, the next batch's slots are
    /// fetched while it is handled. So a ring holding many frames is drained without waiting on
    /// memory for each, while a poller that keeps up touches no slot the kernel has yet to fill.
    pub fn poll(&mut self, budget: usize, mut f: impl FnMut(&[u8], u64)) -> usize {
        let mut stamps = [0u64; super::STAMP_BATCH];
        let (mut n, mut cut) = (0, 0);
        while n < budget {
            let want = (budget - n).min(super::STAMP_BATCH);
            let first = self.next;
            let mut seen = 0;
            while seen < want {
                let hdr = self.frame(first, seen).cast::<libc::tpacket2_hdr>();
                // SAFETY: `hdr` points into the ring; the status word is shared with the kernel,
                // so it is read volatile.
                let status = unsafe { std::ptr::read_volatile(std::ptr::addr_of!((*hdr).tp_status)) };
                if status & libc::TP_STATUS_USER == 0 {
                    break;
                }
                // The packet's first line, for the second pass. Only frames the kernel has filled
                // are touched: a slot it has yet to fill, held in this core's cache, would cost
                // the kernel a cache miss when it writes the frame there.
                super::prefetch(hdr.cast::<u8>().wrapping_add(LINE));
                seen += 1;
            }
            // Each stamp follows the status reads: the fence before it waits for them.
            super::stamp_batch(&mut stamps[..seen]);
            // The frames' contents are read after their status words.
            fence(Ordering::Acquire);
            if let Some(ticks_per_ns) = self.arrival {
                self.backdate(first, &mut stamps[..seen], ticks_per_ns);
            }
            // Line 2 of a frame whose probe may reach it: one that is not IPv4 (an IPv6 or VLAN
            // header puts the probe 20 or 4 bytes deeper). An IPv4 probe, compact or LatencyLab's
            // marker with an id of up to seven digits, ends in line 1.
            let second_line = |k: usize| {
                let frame = self.frame(first, k);
                // SAFETY: a frame the kernel gave to user space (its status read in the first
                // pass), whose header stays put until handed back; the two bytes read lie inside
                // its slot of the mapped ring (a frame shorter than an Ethernet header leaves
                // older bytes there, which decide only a prefetch).
                let ethertype = unsafe {
                    let mac = (*frame.cast::<libc::tpacket2_hdr>()).tp_mac as usize;
                    frame.add((mac + 12).min(self.slot - 2)).cast::<[u8; 2]>().read()
                };
                if ethertype != ETHERTYPE_IPV4 {
                    super::prefetch(frame.wrapping_add(2 * LINE));
                }
            };
            (0..seen.min(SECOND_LINE_AHEAD)).for_each(second_line);
            // A whole batch waiting: the poller is behind, and the next batch most likely waits
            // too; its slots' first two lines are fetched while this one is handled.
            let behind = seen == super::STAMP_BATCH;
            for (k, &tsc) in stamps[..seen].iter().enumerate() {
                if k + SECOND_LINE_AHEAD < seen {
                    second_line(k + SECOND_LINE_AHEAD);
                }
                if behind {
                    let ahead = self.frame(first, k + super::STAMP_BATCH);
                    super::prefetch(ahead);
                    super::prefetch(ahead.wrapping_add(LINE));
                }
                let frame = self.frame(first, k);
                let hdr = frame.cast::<libc::tpacket2_hdr>();
                // SAFETY: the kernel gave this frame to user space (TP_STATUS_USER, read in the
                // first pass): its header and the `tp_snaplen` bytes at `tp_mac` are initialised
                // and stay put until the status is handed back below. The sockaddr_ll follows the
                // aligned header.
                let (data, outgoing, whole) = unsafe {
                    let h = &*hdr;
                    let sll = frame
                        .add(libc::TPACKET_ALIGN(std::mem::size_of::<libc::tpacket2_hdr>()))
                        .cast::<libc::sockaddr_ll>();
                    let data = std::slice::from_raw_parts(frame.add(h.tp_mac as usize), h.tp_snaplen as usize);
                    (data, (*sll).sll_pkttype == libc::PACKET_OUTGOING, h.tp_snaplen == h.tp_len)
                };
                if !outgoing {
                    if whole {
                        f(data, tsc);
                        n += 1;
                    } else {
                        cut += 1;
                    }
                }
                fence(Ordering::Release);
                // SAFETY: returning the slot to the kernel; nothing reads `data` after this.
                unsafe { std::ptr::write_volatile(std::ptr::addr_of_mut!((*hdr).tp_status), libc::TP_STATUS_KERNEL) };
            }
            self.next = self.index(first, seen);
            if seen < want {
                break;
            }
        }
        self.cut += cut;
        n
    }

    /// Replace the poll's stamps of the frames from slot `first` on with the moments the kernel
    /// received them ([`PacketRing::stamp_at_arrival`]).
    fn backdate(&mut self, first: usize, stamps: &mut [u64], ticks_per_ns: f64) {
        let now_ns = super::realtime_ns();
        let now_tsc = super::rdtsc_fenced();
        for (k, s) in stamps.iter_mut().enumerate() {
            let hdr = self.frame(first, k).cast::<libc::tpacket2_hdr>();
            // SAFETY: the kernel gave this frame to user space (its status was read before the
            // acquire fence in `poll`); its header is initialised and stays put until its status
            // is handed back.
            let at = unsafe { i64::from((*hdr).tp_sec) * 1_000_000_000 + i64::from((*hdr).tp_nsec) };
            // A frame without a receive time (none is ever 0) keeps the poll's stamp.
            if at > 0 {
                let age = (now_ns - at).max(0) as f64 * ticks_per_ns;
                let arrived = now_tsc.saturating_sub(age as u64);
                *s = arrived.clamp(self.last.min(*s), *s);
            }
            self.last = *s;
        }
    }

    /// The slot `k` (at most the ring's size) after slot `first`, wrapping.
    #[inline(always)]
    fn index(&self, first: usize, k: usize) -> usize {
        let i = first + k;
        if i >= self.slots { i - self.slots } else { i }
    }

    /// The start of the slot `k` after slot `first`: its TPACKET_V2 header, 4-aligned. The
    /// blocks are mapped one after the other, and each holds whole slots.
    #[inline(always)]
    fn frame(&self, first: usize, k: usize) -> *mut u8 {
        self.ring.wrapping_add(self.index(first, k) * self.slot)
    }
}

impl Drop for PacketRing {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping made in `open`, no longer used.
        unsafe { libc::munmap(self.ring.cast(), self.slot * self.slots) };
    }
}

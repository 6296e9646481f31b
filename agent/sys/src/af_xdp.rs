//! An AF_XDP socket on queue 0 of one interface. It has a UMEM (frame buffers shared with the
//! kernel), a fill ring, and an RX ring whose frames are read in place. The XDP program sends the
//! queue's frames to the socket, like libxdp's default program: an XSKMAP lookup by queue
//! index, and the normal stack when no socket is there. It is attached through a BPF link, which
//! the kernel detaches when the socket's owner exits, even if it is killed.
//!
//! This speaks the kernel's ABI directly (`linux/if_xdp.h`, `linux/bpf.h`): the structures that
//! libxdp's `xsk.h` wraps, and six instructions of BPF. So the agent needs no C library to build
//! and no bpffs at run time.
//!
//! The driver grants zero-copy if it can, copy mode otherwise (veth); [`XdpSocket::grant`] says
//! which. The program is attached in native (driver) mode, or in generic mode where the driver
//! has no XDP.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

use latency_proto::capture::XdpGrant;

/// Bytes per UMEM frame. A frame carries at most this minus the kernel's 256-byte headroom:
/// 3,840 bytes (no jumbo frames; the kernel counts longer ones as dropped).
const FRAME: u32 = 4096;
/// UMEM frames; the fill and RX rings have as many slots, so every frame is always either in
/// the fill ring, in the RX ring, or being read.
const FRAMES: u32 = 4096;
/// Completion ring slots (the socket sends nothing, but the kernel wants the ring).
const COMPLETION: u32 = 64;
/// The queue the socket is bound to.
const QUEUE: u32 = 0;
/// How many frames ahead of the one being handled the receive loop prefetches.
const PREFETCH_AHEAD: u32 = 8;
/// Bytes prefetched at the start of a received packet, where probes sit.
const PREFETCH_BYTES: usize = 128;
/// Size of a transparent huge page on x86_64: the UMEM is aligned to it.
const HUGE_PAGE: usize = 2 << 20;

const BPF_MAP_CREATE: libc::c_int = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_int = 2;
const BPF_PROG_LOAD: libc::c_int = 5;
const BPF_LINK_CREATE: libc::c_int = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
const SO_PREFER_BUSY_POLL: libc::c_int = 69;
const SO_BUSY_POLL_BUDGET: libc::c_int = 70;

/// `bpf_attr` for `BPF_MAP_CREATE`: the fields used, the rest zero.
#[repr(C)]
#[derive(Default)]
struct MapCreate {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
}

/// `bpf_attr` for `BPF_MAP_UPDATE_ELEM`.
#[repr(C)]
#[derive(Default)]
struct MapUpdate {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// `bpf_attr` for `BPF_PROG_LOAD`, up to `expected_attach_type`.
#[repr(C)]
#[derive(Default)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// `bpf_attr` for `BPF_LINK_CREATE`.
#[repr(C)]
#[derive(Default)]
struct LinkCreate {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

/// One `bpf(2)` command; a new descriptor for those that return one.
fn bpf<T>(cmd: libc::c_int, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, writable bpf_attr prefix for `cmd` of the size passed; the kernel
    // reads (and for some commands writes) only that many bytes, and the pointers inside it
    // point to live buffers of the sizes they state.
    let rc = unsafe { libc::syscall(libc::SYS_bpf, cmd, (attr as *mut T).cast::<u8>(), std::mem::size_of::<T>()) };
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(rc) }
}

fn owned(rc: libc::c_long) -> OwnedFd {
    // SAFETY: a descriptor a system call just returned, owned by nobody else.
    unsafe { OwnedFd::from_raw_fd(rc as RawFd) }
}

/// One BPF instruction: opcode, registers (destination in the low nibble), offset, immediate.
fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    let [o0, o1] = off.to_le_bytes();
    let [i0, i1, i2, i3] = imm.to_le_bytes();
    u64::from_le_bytes([code, dst | (src << 4), o0, o1, i0, i1, i2, i3])
}

/// `r2 = ctx->rx_queue_index; return bpf_redirect_map(&xsks, r2, XDP_PASS);`
fn redirect_program(map: RawFd) -> [u64; 6] {
    [
        insn(0x61, 2, 1, 16, 0),  // r2 = *(u32 *)(r1 + offsetof(xdp_md, rx_queue_index))
        insn(0x18, 1, 1, 0, map), // r1 = the map (BPF_PSEUDO_MAP_FD), 64-bit load...
        0,                        // ...whose upper half is 0
        insn(0xb7, 3, 0, 0, 2),   // r3 = XDP_PASS: the action when the queue has no socket
        insn(0x85, 0, 0, 0, 51),  // call bpf_redirect_map
        insn(0x95, 0, 0, 0, 0),   // exit
    ]
}

/// A memory mapping, unmapped on drop.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    /// Map `len` bytes: of `fd` at `offset` with `fd` Some (a ring), else anonymous memory.
    fn new(fd: Option<&OwnedFd>, len: usize, offset: u64, flags: libc::c_int) -> io::Result<Mapping> {
        let (flags, raw) = match fd {
            Some(fd) => (libc::MAP_SHARED | flags, fd.as_raw_fd()),
            None => (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | flags, -1),
        };
        // SAFETY: a fresh mapping at an address the kernel picks, of the length asked for; for a
        // ring, the offset names one the kernel set up for this socket.
        let ptr = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, raw, offset as libc::off_t)
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { ptr: ptr.cast(), len })
    }

    /// `len` bytes of anonymous memory for the UMEM, on transparent huge pages where the kernel
    /// grants them (`MADV_HUGEPAGE`; normal pages otherwise), so that the frames the kernel
    /// fills do not cost a TLB miss each when they are read. Faulted in before it returns.
    fn umem(len: usize) -> io::Result<Mapping> {
        // A huge page more than needed, to start on a huge-page boundary; the two unaligned ends
        // are unmapped at once.
        let over = Mapping::new(None, len + HUGE_PAGE, 0, 0)?;
        let head = (over.ptr as usize).next_multiple_of(HUGE_PAGE) - over.ptr as usize;
        let umem = Mapping { ptr: over.ptr.wrapping_add(head), len };
        std::mem::forget(over);
        // SAFETY: the bytes before and after the `len` kept, in the mapping just made; nothing
        // refers to them.
        unsafe {
            if head > 0 {
                libc::munmap(umem.ptr.wrapping_sub(head).cast(), head);
            }
            libc::munmap(umem.ptr.wrapping_add(len).cast(), HUGE_PAGE - head);
        }
        // SAFETY: advice on our own fresh mapping: it changes how its pages are backed, never
        // what they hold. Huge pages only make reads faster, so a refusal is ignored.
        unsafe { libc::madvise(umem.ptr.cast(), len, libc::MADV_HUGEPAGE) };
        // SAFETY: as above; faulting the (zero) pages in now, not when the kernel first fills a
        // frame.
        if unsafe { libc::madvise(umem.ptr.cast(), len, libc::MADV_POPULATE_WRITE) } != 0 {
            // Kernels before 5.14: touch each page instead.
            for page in (0..len).step_by(4096) {
                // SAFETY: inside the mapping, which nothing else uses yet.
                unsafe { umem.ptr.add(page).write_volatile(0) };
            }
        }
        Ok(umem)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping made in `new`, no longer used.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// A single-producer single-consumer ring shared with the kernel: producer and consumer indexes
/// that only grow, and `size` (a power of two) slots of `T`.
struct Ring<T> {
    _map: Mapping,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    slots: *mut T,
    size: u32,
}

impl<T> Ring<T> {
    fn map(fd: &OwnedFd, off: &libc::xdp_ring_offset, size: u32, pgoff: u64) -> io::Result<Ring<T>> {
        let len = off.desc as usize + size as usize * std::mem::size_of::<T>();
        let map = Mapping::new(Some(fd), len, pgoff, libc::MAP_POPULATE)?;
        // SAFETY: the kernel's offsets lie inside the mapping it sized; the indexes are 4-aligned
        // u32s, which AtomicU32 has the layout of.
        let (producer, consumer, slots) = unsafe {
            (
                map.ptr.add(off.producer as usize).cast::<AtomicU32>(),
                map.ptr.add(off.consumer as usize).cast::<AtomicU32>(),
                map.ptr.add(off.desc as usize).cast::<T>(),
            )
        };
        Ok(Ring { _map: map, producer, consumer, slots, size })
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: points into `self.map`, alive as long as `self`.
        unsafe { &*self.producer }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { &*self.consumer }
    }

    fn slot(&self, index: u32) -> *mut T {
        // SAFETY: masked by size - 1 (size a power of two), so inside the slots.
        unsafe { self.slots.add((index & (self.size - 1)) as usize) }
    }
}

/// An AF_XDP socket receiving queue 0 of one interface.
pub struct XdpSocket {
    // Dropped in this order: the link detaches the program before the socket closes.
    _link: OwnedFd,
    _prog: OwnedFd,
    _map: OwnedFd,
    rx: Ring<libc::xdp_desc>,
    fill: Ring<u64>,
    _completion: Ring<u64>,
    fd: OwnedFd,
    umem: Mapping,
    interface: String,
    grant: XdpGrant,
    busy_poll: bool,
    dropped: u64,
}

// SAFETY: the mappings, rings and descriptors are owned by this value; the kernel only touches
// ring slots and frames the indexes give it. Moving the owner to another thread is sound.
unsafe impl Send for XdpSocket {}

fn setsockopt<T>(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` points to a live T of the size passed; the kernel copies it.
    let rc = unsafe {
        libc::setsockopt(fd.as_raw_fd(), level, name, (value as *const T).cast(), std::mem::size_of::<T>() as u32)
    };
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// Read an `SOL_XDP` option; `T` must be plain data (a C struct of integers).
fn getsockopt<T>(fd: &OwnedFd, name: libc::c_int) -> io::Result<T> {
    // SAFETY: every caller's T is a C struct of integers, for which all-zero is a valid value.
    let mut value: T = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` is a writable T and `len` its size, which the kernel does not exceed.
    let rc = unsafe { libc::getsockopt(fd.as_raw_fd(), libc::SOL_XDP, name, (&mut value as *mut T).cast(), &mut len) };
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(value) }
}

/// What failed, with the interface and the step.
fn step(interface: &str, what: &str) -> impl FnOnce(io::Error) -> io::Error {
    move |e| io::Error::new(e.kind(), format!("{interface}: {what}: {e}"))
}

impl XdpSocket {
    /// Open a socket on queue 0 of `interface` and attach the redirect program (needs
    /// CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF). With `busy_poll_us`, the socket busy-polls its
    /// queue (`SO_PREFER_BUSY_POLL`, `SO_BUSY_POLL`) whenever its RX ring is empty.
    pub fn open(interface: &str, busy_poll_us: Option<u32>) -> io::Result<XdpSocket> {
        let name =
            CString::new(interface).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "bad interface name"))?;
        // SAFETY: `name` is a valid NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(io::Error::new(io::ErrorKind::NotFound, format!("no interface `{interface}`")));
        }
        let umem = Mapping::umem((FRAME * FRAMES) as usize).map_err(step(interface, "UMEM"))?;
        // SAFETY: plain socket(2) call; the result is checked before it is owned.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW, 0) };
        if raw < 0 {
            return Err(step(interface, "AF_XDP socket")(io::Error::last_os_error()));
        }
        let fd = owned(raw.into());
        let reg = libc::xdp_umem_reg {
            addr: umem.ptr as u64,
            len: umem.len as u64,
            chunk_size: FRAME,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        let ring_setup = || -> io::Result<()> {
            setsockopt(&fd, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg)?;
            setsockopt(&fd, libc::SOL_XDP, libc::XDP_UMEM_FILL_RING, &FRAMES)?;
            setsockopt(&fd, libc::SOL_XDP, libc::XDP_UMEM_COMPLETION_RING, &COMPLETION)?;
            setsockopt(&fd, libc::SOL_XDP, libc::XDP_RX_RING, &FRAMES)
        };
        ring_setup().map_err(step(interface, "UMEM and rings"))?;
        let off: libc::xdp_mmap_offsets =
            getsockopt(&fd, libc::XDP_MMAP_OFFSETS).map_err(step(interface, "ring offsets"))?;
        let map_rings = || -> io::Result<_> {
            Ok((
                Ring::<libc::xdp_desc>::map(&fd, &off.rx, FRAMES, libc::XDP_PGOFF_RX_RING as u64)?,
                Ring::<u64>::map(&fd, &off.fr, FRAMES, libc::XDP_UMEM_PGOFF_FILL_RING)?,
                Ring::<u64>::map(&fd, &off.cr, COMPLETION, libc::XDP_UMEM_PGOFF_COMPLETION_RING)?,
            ))
        };
        let (rx, fill, completion) = map_rings().map_err(step(interface, "ring mappings"))?;
        // Every frame to the kernel, before it can receive.
        for k in 0..FRAMES {
            // SAFETY: slot k of the fill ring, which nobody else writes before the producer moves.
            unsafe { fill.slot(k).write(u64::from(k * FRAME)) };
        }
        fill.producer().store(FRAMES, Ordering::Release);

        // SAFETY: sockaddr_xdp is plain data; all-zero is a valid starting value.
        let mut sxdp: libc::sockaddr_xdp = unsafe { std::mem::zeroed() };
        sxdp.sxdp_family = libc::AF_XDP as u16;
        sxdp.sxdp_ifindex = ifindex;
        sxdp.sxdp_queue_id = QUEUE;
        // No flags: the kernel grants zero-copy if the driver has it, copy mode otherwise.
        // SAFETY: `sxdp` is a valid sockaddr_xdp and the length passed is its size.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sxdp as *const libc::sockaddr_xdp).cast(),
                std::mem::size_of::<libc::sockaddr_xdp>() as u32,
            )
        };
        if rc < 0 {
            return Err(step(interface, "bind to queue 0")(io::Error::last_os_error()));
        }
        let options: libc::xdp_options = getsockopt(&fd, libc::XDP_OPTIONS).map_err(step(interface, "XDP_OPTIONS"))?;

        let map = owned(
            bpf(
                BPF_MAP_CREATE,
                &mut MapCreate {
                    map_type: BPF_MAP_TYPE_XSKMAP,
                    key_size: 4,
                    value_size: 4,
                    max_entries: 64,
                    map_flags: 0,
                },
            )
            .map_err(step(interface, "XSKMAP"))?,
        );
        let insns = redirect_program(map.as_raw_fd());
        let license = c"Dual MIT/GPL";
        let mut name = [0u8; 16];
        name[..9].copy_from_slice(b"xsk_redir");
        let prog = owned(
            bpf(
                BPF_PROG_LOAD,
                &mut ProgLoad {
                    prog_type: BPF_PROG_TYPE_XDP,
                    insn_cnt: insns.len() as u32,
                    insns: insns.as_ptr() as u64,
                    license: license.as_ptr() as u64,
                    prog_name: name,
                    expected_attach_type: BPF_XDP,
                    ..ProgLoad::default()
                },
            )
            .map_err(step(interface, "loading the XDP program"))?,
        );
        let attach = |flags| {
            bpf(
                BPF_LINK_CREATE,
                &mut LinkCreate {
                    prog_fd: prog.as_raw_fd() as u32,
                    target_ifindex: ifindex,
                    attach_type: BPF_XDP,
                    flags,
                },
            )
        };
        let (link, native) = match attach(XDP_FLAGS_DRV_MODE) {
            Ok(link) => (link, true),
            Err(_) => (attach(XDP_FLAGS_SKB_MODE).map_err(step(interface, "attaching the XDP program"))?, false),
        };
        let link = owned(link);
        let (key, value) = (QUEUE, fd.as_raw_fd() as u32);
        bpf(
            BPF_MAP_UPDATE_ELEM,
            &mut MapUpdate {
                map_fd: map.as_raw_fd() as u32,
                key: &key as *const u32 as u64,
                value: &value as *const u32 as u64,
                ..MapUpdate::default()
            },
        )
        .map_err(step(interface, "XSKMAP entry"))?;
        if let Some(us) = busy_poll_us {
            let busy = || -> io::Result<()> {
                setsockopt(&fd, libc::SOL_SOCKET, SO_PREFER_BUSY_POLL, &1 as &libc::c_int)?;
                setsockopt(&fd, libc::SOL_SOCKET, libc::SO_BUSY_POLL, &(us as libc::c_int))?;
                setsockopt(&fd, libc::SOL_SOCKET, SO_BUSY_POLL_BUDGET, &64 as &libc::c_int)
            };
            busy().map_err(step(interface, "busy-poll options"))?;
        }
        let grant = XdpGrant {
            port: interface.to_string(),
            queue: QUEUE,
            native,
            zero_copy: options.flags & libc::XDP_OPTIONS_ZEROCOPY != 0,
            rx_ring: FRAMES,
            fill_ring: FRAMES,
            frame: FRAME,
            busy_poll_us,
        };
        let mut socket = XdpSocket {
            _link: link,
            _prog: prog,
            _map: map,
            rx,
            fill,
            _completion: completion,
            fd,
            umem,
            interface: interface.to_string(),
            grant,
            busy_poll: busy_poll_us.is_some(),
            dropped: 0,
        };
        socket.drops()?;
        Ok(socket)
    }

    /// The socket, to wait on ([`super::wait_readable`]).
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.fd.as_fd()
    }

    /// The interface the socket is bound to.
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// What the kernel granted: attach mode, zero-copy, ring sizes.
    pub fn grant(&self) -> &XdpGrant {
        &self.grant
    }

    /// Frames the kernel dropped since the last call: no room in the RX ring or no frame in the
    /// fill ring (`XDP_STATISTICS`' `rx_ring_full` and `rx_dropped`, which only grow).
    pub fn drops(&mut self) -> io::Result<u64> {
        let stats: libc::xdp_statistics = getsockopt(&self.fd, libc::XDP_STATISTICS)?;
        let total = stats.rx_dropped + stats.rx_ring_full;
        let new = total.saturating_sub(self.dropped);
        self.dropped = total;
        Ok(new)
    }

    /// Hand every frame waiting in the RX ring (at most `budget`) to `f`, in arrival order, with
    /// a TSC stamp taken after the ring's producer index showed it, then give the frames back
    /// through the fill ring. Returns the number handed over.
    ///
    /// No system call unless busy polling finds the ring empty; the rings' indexes are read and
    /// written once per call, not per frame. The frames are taken 32 at a time (`STAMP_BATCH`), as
    /// the DPDK backend takes a burst: each is stamped (one TSC read after another, the first fenced: `stamp_batch`), then
    /// they are handed over, so that a stamp never waits for the handling of the frames before it.
    /// While a frame is handled, the packet eight descriptors on is prefetched.
    pub fn poll(&mut self, budget: usize, mut f: impl FnMut(&[u8], u64)) -> usize {
        let cons = self.rx.consumer().load(Ordering::Relaxed);
        let mut avail = self.rx.producer().load(Ordering::Acquire).wrapping_sub(cons);
        if avail == 0 && self.busy_poll {
            // Drive the queue's NAPI from this thread (busy poll), then look again.
            // SAFETY: a zero-length, non-blocking receive on the socket: no buffer is written.
            unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    std::ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            };
            avail = self.rx.producer().load(Ordering::Acquire).wrapping_sub(cons);
        }
        let n = avail.min(budget as u32);
        let fill_prod = self.fill.producer().load(Ordering::Relaxed);
        for k in 0..n.min(PREFETCH_AHEAD) {
            self.prefetch(cons.wrapping_add(k));
        }
        let mut stamps = [0u64; super::STAMP_BATCH];
        let mut k = 0;
        while k < n {
            let batch = (n - k).min(super::STAMP_BATCH as u32) as usize;
            super::stamp_batch(&mut stamps[..batch]);
            for &tsc in &stamps[..batch] {
                // SAFETY: slots cons..cons+n were published by the kernel (producer read with
                // Acquire) and are ours until the consumer index moves past them.
                let desc = unsafe { self.rx.slot(cons.wrapping_add(k)).read() };
                if k + PREFETCH_AHEAD < n {
                    self.prefetch(cons.wrapping_add(k + PREFETCH_AHEAD));
                }
                let (addr, len) = (desc.addr as usize, desc.len as usize);
                if addr + len <= self.umem.len {
                    // SAFETY: inside the UMEM (checked), written by the kernel before it published
                    // the descriptor; not handed back to it before `f` returns.
                    f(unsafe { std::slice::from_raw_parts(self.umem.ptr.add(addr), len) }, tsc);
                }
                // SAFETY: the fill ring has a free slot for every frame we hold: it and the RX
                // ring both have a slot per UMEM frame.
                unsafe { self.fill.slot(fill_prod.wrapping_add(k)).write(desc.addr & !u64::from(FRAME - 1)) };
                k += 1;
            }
        }
        if n > 0 {
            self.rx.consumer().store(cons.wrapping_add(n), Ordering::Release);
            self.fill.producer().store(fill_prod.wrapping_add(n), Ordering::Release);
        }
        n as usize
    }

    /// Prefetch the start of the packet of RX slot `index`, one the kernel has published.
    #[inline(always)]
    fn prefetch(&self, index: u32) {
        // SAFETY: a published slot (the caller's), ours until the consumer index moves past it.
        let desc = unsafe { self.rx.slot(index).read() };
        let packet = self.umem.ptr.wrapping_add(desc.addr as usize);
        for line in (0..PREFETCH_BYTES).step_by(64) {
            super::prefetch(packet.wrapping_add(line));
        }
    }
}

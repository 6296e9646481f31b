//! The receiver agent's system layer: thin safe wrappers over the CPU, the kernel and DPDK, for
//! the agent and for the FPGA emulator (which needs the packet rings and the register map without
//! the agent).
//!
//! What it holds: TSC reads, `CLOCK_MONOTONIC_RAW`, CPU affinity and waiting on a descriptor (at
//! the root); AF_PACKET receive rings and packet sockets ([`af_packet`]); AF_XDP sockets and their
//! XDP program ([`af_xdp`]); DPDK ports over the `dpdk-sys` bindings (`dpdk`, feature `dpdk`);
//! PCI BAR mappings ([`bar`]) and the Open-NIC-Shell register map applied through them
//! ([`regs`]); control lines read from a named pipe ([`fifo`]).
//!
//! What it may touch: sockets, `mmap`, `ioctl`/`setsockopt`, BPF, FFI. All the agent's `unsafe`
//! code lives here (and in `dpdk-sys` underneath): only the modules and functions that need it
//! allow it, and every unsafe block carries a `// SAFETY:` note saying why it is sound.
//!
//! What it must not know: plans, schedules, what a record means or how records are written, the
//! controller and its protocol. It hands frames over with their TSC stamps and register values
//! over as numbers; what they mean is the agent's business. From `latency-proto` it uses only the
//! frame-level pieces a port needs: probe formats and their tagging (DPDK reflects in place, before
//! the mbuf is freed), MAC addresses, and the ring sizes and AF_XDP mode it reports as granted.
//!
//! Everything but [`regs`]' plain register values and [`fifo`] runs on x86_64 Linux only.

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[allow(unsafe_code)]
pub mod af_packet;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[allow(unsafe_code)]
pub mod af_xdp;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[allow(unsafe_code)]
pub mod bar;
#[cfg(all(feature = "dpdk", target_arch = "x86_64", target_os = "linux"))]
#[allow(unsafe_code)]
pub mod dpdk;
#[cfg(unix)]
pub mod fifo;
pub mod regs;

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
use std::io;

/// Frames the kernel backends stamp before they hand any of them over (their `poll`s): as many as
/// a DPDK burst, whose frames the DPDK backend stamps the same way.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
const STAMP_BATCH: usize = 32;

/// Read the TSC after all earlier loads have completed (`lfence; rdtsc`), so that a stamp taken
/// right after a dequeue is not hoisted before it.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[allow(unsafe_code)]
#[inline(always)]
pub fn rdtsc_fenced() -> u64 {
    // SAFETY: `lfence` needs SSE2 and `rdtsc` the TSC, which every x86_64 CPU has; neither has
    // memory effects.
    unsafe {
        std::arch::x86_64::_mm_lfence();
        std::arch::x86_64::_rdtsc()
    }
}

/// Stamp a batch of frames whose ring entries were just read: one stamp each, the first a fenced
/// TSC read ([`rdtsc_fenced`]), which waits for those reads, the others plain `rdtsc`s, which the
/// fence keeps after them too. A stamp is never earlier than the one before it (plain `rdtsc`s
/// are not ordered among themselves; one that read earlier takes the value before it). The fence
/// is most of a fenced read's cost (12.6 ns against 7.4 ns for `rdtsc` alone on a 2.6 GHz Xeon
/// VM): paid once a batch rather than once a frame.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[allow(unsafe_code)]
#[inline(always)]
fn stamp_batch(stamps: &mut [u64]) {
    let Some((first, rest)) = stamps.split_first_mut() else { return };
    *first = rdtsc_fenced();
    let mut last = *first;
    for s in rest {
        // SAFETY: `rdtsc` needs the TSC, which every x86_64 CPU has; it has no memory effects.
        last = last.max(unsafe { std::arch::x86_64::_rdtsc() });
        *s = last;
    }
}

/// Ask the CPU to start loading the cache line at `p` (`prefetcht0`): a hint with no effect on
/// what the program computes. The receive loops call it for the frames a few slots ahead, so that
/// their cache lines and page-table entries arrive while the frames before them are handled.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[allow(unsafe_code)]
#[inline(always)]
pub(crate) fn prefetch(p: *const u8) {
    // SAFETY: a prefetch never faults and reads nothing the program sees, whatever the address
    // (it may lie outside any mapping); it needs SSE, which every x86_64 CPU has.
    unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast()) }
}

/// Clock `clock` in ns (`clock_gettime`).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[allow(unsafe_code)]
fn clock_ns(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the clocks asked for (CLOCK_MONOTONIC_RAW,
    // CLOCK_REALTIME) exist on every Linux.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    debug_assert_eq!(rc, 0);
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// `CLOCK_MONOTONIC_RAW` in ns (not slewed by NTP: the reference for measuring the TSC rate).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub fn monotonic_raw_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC_RAW) as u64
}

/// Measure the TSC rate over `window_ns` of `CLOCK_MONOTONIC_RAW` (the rate DPDK reports is
/// rounded). The clock read is bracketed by two TSC reads and the midpoint is used, at both ends.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub fn measure_tsc_hz(window_ns: u64) -> f64 {
    let sample = || {
        let a = rdtsc_fenced();
        let c = monotonic_raw_ns();
        let b = rdtsc_fenced();
        (a / 2 + b / 2, c)
    };
    let (t0, c0) = sample();
    loop {
        std::thread::sleep(std::time::Duration::from_millis(10));
        let (t1, c1) = sample();
        if c1 - c0 >= window_ns {
            return (t1 - t0) as f64 * 1e9 / (c1 - c0) as f64;
        }
    }
}

/// `CLOCK_REALTIME` in ns since the epoch: the clock of the kernel's receive times
/// ([`af_packet::PacketRing::stamp_at_arrival`]).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub fn realtime_ns() -> i64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// Block until `fd` is readable or `timeout_ms` have passed (an interrupted wait returns early:
/// callers poll again either way).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[allow(unsafe_code)]
pub fn wait_readable(fd: std::os::fd::BorrowedFd<'_>, timeout_ms: i32) {
    use std::os::fd::AsRawFd;
    let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: `p` is one valid, writable pollfd and the count passed is 1; the descriptor is
    // borrowed, so it stays open for the call.
    let _ = unsafe { libc::poll(&mut p, 1, timeout_ms) };
}

/// Pin the calling thread to one CPU core.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[allow(unsafe_code)]
pub fn pin_current_thread(core: usize) -> io::Result<()> {
    if core >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("core {core} out of range")));
    }
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `core` < CPU_SETSIZE was checked above, so CPU_SET stays inside `set`.
    unsafe { libc::CPU_SET(core, &mut set) };
    // SAFETY: pid 0 = the calling thread; `set` is a valid cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

#[cfg(test)]
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn tsc_and_raw_clock_advance() {
        let (t0, c0) = (rdtsc_fenced(), monotonic_raw_ns());
        std::thread::sleep(std::time::Duration::from_millis(5));
        let (t1, c1) = (rdtsc_fenced(), monotonic_raw_ns());
        assert!(t1 > t0 && c1 >= c0 + 5_000_000);
    }

    #[test]
    fn a_batchs_stamps_are_taken_in_order_between_the_reads_around_them() {
        for n in [0, 1, 2, STAMP_BATCH] {
            let mut stamps = [0u64; STAMP_BATCH];
            let before = rdtsc_fenced();
            stamp_batch(&mut stamps[..n]);
            let after = rdtsc_fenced();
            assert!(stamps[..n].windows(2).all(|w| w[0] <= w[1]), "{n}: {stamps:?}");
            assert!(stamps[..n].iter().all(|&s| before <= s && s <= after), "{n}: {before} {stamps:?} {after}");
            assert!(stamps[n..].iter().all(|&s| s == 0), "{n}: only the batch is stamped");
        }
    }

    #[test]
    fn pinning_to_core_zero_works_and_absurd_cores_fail() {
        pin_current_thread(0).unwrap();
        assert!(pin_current_thread(1 << 20).is_err());
    }
}

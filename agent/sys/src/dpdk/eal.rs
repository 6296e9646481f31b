//! The DPDK EAL of the process: its argv, its one initialisation (stdout kept for the agent's
//! events, the calling thread's affinity restored) and its cleanup with the last handle.

use std::ffi::{CString, c_char, c_int};
use std::sync::{Arc, Mutex, MutexGuard};

use dpdk_sys as ffi;

use super::{DpdkError, rte_errno, strerror};

/// The EAL argv: the program name, then the user's arguments as given.
pub fn eal_args(program: &str, user_args: &[String]) -> Vec<String> {
    std::iter::once(program.to_string()).chain(user_args.iter().cloned()).collect()
}

enum EalState {
    Uninit,
    Up(std::sync::Weak<Eal>),
    Unavailable(String),
}

static EAL: Mutex<EalState> = Mutex::new(EalState::Uninit);

fn eal_state() -> MutexGuard<'static, EalState> {
    EAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The initialised EAL of this process. Dropping the last handle calls `rte_eal_cleanup`; DPDK
/// cannot be used in this process afterwards.
pub struct Eal {
    _private: (),
}

impl Eal {
    /// Initialise the EAL with `argv` (program name first: see [`eal_args`]), or return the
    /// running EAL (its arguments were fixed by the first call; later ones are ignored).
    pub fn init(argv: &[String]) -> Result<Arc<Eal>, DpdkError> {
        let mut state = eal_state();
        match &*state {
            EalState::Up(weak) => {
                return weak.upgrade().ok_or_else(|| DpdkError::EalUnavailable("it was cleaned up".into()));
            }
            EalState::Unavailable(why) => return Err(DpdkError::EalUnavailable(why.clone())),
            EalState::Uninit => {}
        }
        let owned: Vec<CString> = argv
            .iter()
            .map(|a| CString::new(a.as_str()).map_err(|_| DpdkError::NulInArgument(a.clone())))
            .collect::<Result<_, _>>()?;
        // The EAL may keep pointers into argv (and permutes it): it lives as long as the process.
        let mut ptrs: Vec<*mut c_char> = owned.into_iter().map(CString::into_raw).collect();
        ptrs.push(std::ptr::null_mut());
        let ptrs: &'static mut [*mut c_char] = Box::leak(ptrs.into_boxed_slice());
        let affinity = Affinity::current();
        // SAFETY: rte_openlog_stream(stderr) only stores the stream pointer.
        unsafe { ffi::ldpdk_log_to_stderr() };
        let stdout = StdoutToStderr::begin();
        // SAFETY: argc matches the NUL-terminated argv of valid C strings, leaked so they outlive
        // the EAL; the state mutex guarantees a single call per process.
        let rc = unsafe { ffi::rte_eal_init(argv.len() as c_int, ptrs.as_mut_ptr()) };
        drop(stdout);
        if let Some(a) = affinity {
            a.restore();
        }
        if rc < 0 {
            let code = rte_errno();
            let msg = strerror(code);
            *state = EalState::Unavailable(format!("its initialisation failed: {msg}"));
            return Err(DpdkError::EalInit { code, msg, args: argv.to_vec() });
        }
        let eal = Arc::new(Eal { _private: () });
        *state = EalState::Up(Arc::downgrade(&eal));
        Ok(eal)
    }

    /// The TSC rate DPDK assumes (`rte_get_tsc_hz`; rounded — measure it for conversions).
    pub fn tsc_hz(&self) -> u64 {
        // SAFETY: reads a value set by rte_eal_init, which has run (self exists).
        unsafe { ffi::rte_get_tsc_hz() }
    }

    /// Ports the EAL found.
    pub fn port_count(&self) -> u16 {
        // SAFETY: the EAL is initialised.
        unsafe { ffi::rte_eth_dev_count_avail() }
    }
}

impl Drop for Eal {
    fn drop(&mut self) {
        let mut state = eal_state();
        *state = EalState::Unavailable("it was cleaned up".into());
        // SAFETY: the last handle is gone, so no port of this module is open any more.
        unsafe { ffi::rte_eal_cleanup() };
    }
}

/// Standard output redirected to standard error while it lives: the EAL prints its usage text
/// (on a bad argument) and a few messages with `printf`, and the agent's stdout carries only JSON.
struct StdoutToStderr(Option<c_int>);

impl StdoutToStderr {
    fn begin() -> StdoutToStderr {
        // SAFETY: dup/dup2 on the process's standard descriptors; a failed dup leaves stdout as
        // it was (nothing is redirected then).
        unsafe {
            let saved = libc::dup(libc::STDOUT_FILENO);
            if saved >= 0 && libc::dup2(libc::STDERR_FILENO, libc::STDOUT_FILENO) < 0 {
                libc::close(saved);
                return StdoutToStderr(None);
            }
            StdoutToStderr((saved >= 0).then_some(saved))
        }
    }
}

impl Drop for StdoutToStderr {
    fn drop(&mut self) {
        if let Some(saved) = self.0 {
            // SAFETY: flushes C's stdio buffers (what the EAL printed goes to stderr), then puts
            // the saved descriptor back and closes the copy.
            unsafe {
                libc::fflush(std::ptr::null_mut());
                libc::dup2(saved, libc::STDOUT_FILENO);
                libc::close(saved);
            }
        }
    }
}

/// A thread's CPU affinity, to undo the EAL's pinning of the calling thread.
struct Affinity(libc::cpu_set_t);

impl Affinity {
    fn current() -> Option<Affinity> {
        // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: pid 0 = the calling thread; `set` is writable and of the size passed.
        let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
        (rc == 0).then_some(Affinity(set))
    }

    fn restore(&self) {
        // SAFETY: pid 0 = the calling thread; the set was read by sched_getaffinity.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.0) };
    }
}

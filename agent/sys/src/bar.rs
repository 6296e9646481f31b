//! A PCI BAR mapped from `/sys/bus/pci/devices/<bdf>/resourceN` (or any file standing in for it)
//! for 32-bit register reads and writes.

use std::fs::OpenOptions;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

/// A mapped register window.
pub struct Bar {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is owned by this value and only accessed through &self/&mut self methods
// with volatile 32-bit operations; moving it to another thread is sound.
unsafe impl Send for Bar {}

impl Bar {
    /// Map the first `len` bytes of `path` read-write and shared.
    pub fn map(path: &Path, len: usize) -> io::Result<Bar> {
        let f = OpenOptions::new().read(true).write(true).open(path)?;
        let size = f.metadata()?.len() as usize;
        if len == 0 || len > size {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: cannot map {len} bytes of a {size}-byte resource", path.display()),
            ));
        }
        // SAFETY: a fresh shared mapping of an open file descriptor with a length checked against
        // the file size; the result is checked against MAP_FAILED before use. The fd may be closed
        // afterwards: the mapping keeps its own reference.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Bar { base: p.cast(), len })
    }

    fn check(&self, offset: usize) -> io::Result<()> {
        if !offset.is_multiple_of(4) || offset + 4 > self.len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("register offset {offset:#x} is unaligned or beyond the {:#x}-byte window", self.len),
            ));
        }
        Ok(())
    }

    /// Read the 32-bit register at `offset`.
    pub fn read32(&self, offset: usize) -> io::Result<u32> {
        self.check(offset)?;
        // SAFETY: offset is 4-aligned and inside the mapping (checked); volatile because the
        // device may change the value at any time.
        Ok(unsafe { std::ptr::read_volatile(self.base.add(offset).cast::<u32>()) })
    }

    /// Write the 32-bit register at `offset`.
    pub fn write32(&mut self, offset: usize, value: u32) -> io::Result<()> {
        self.check(offset)?;
        // SAFETY: as in read32; the write must reach the device, hence volatile.
        unsafe { std::ptr::write_volatile(self.base.add(offset).cast::<u32>(), value) };
        Ok(())
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        // SAFETY: base/len are exactly what mmap returned and the mapping is not used afterwards.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

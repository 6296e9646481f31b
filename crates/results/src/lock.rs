//! The results folder's lock: one writer at a time (`run`, `--resume`, `analyze`, `report`,
//! `import`). An OS file lock on `DIR/.lock`, so that it is released when its holder dies, with
//! the holder's pid and command written inside for the message a second writer gets.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::{ResultsError, io_err};

/// Name of the lock file inside a results folder.
pub const FILE: &str = ".lock";

/// A held lock; released when dropped (or when the process ends, however it ends).
#[derive(Debug)]
pub struct Lock {
    _file: File,
    path: PathBuf,
}

impl Lock {
    /// Take the lock of the folder `root` for `command` (shown to whoever is refused).
    pub fn acquire(root: &Path, command: &str) -> Result<Lock, ResultsError> {
        let path = root.join(FILE);
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io_err(&path))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                let holder = if holder.is_empty() { "another process".to_string() } else { holder.to_string() };
                return Err(ResultsError::Refused(format!(
                    "{} is in use by {holder}; wait for it to finish (the lock is released when it exits)",
                    root.display()
                )));
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io_err(&path)(e)),
        }
        let who = format!("pid {} ({command})\n", std::process::id());
        (|| {
            file.set_len(0)?;
            file.seek(SeekFrom::Start(0))?;
            file.write_all(who.as_bytes())?;
            file.sync_data()
        })()
        .map_err(io_err(&path))?;
        Ok(Lock { _file: file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Who holds the lock of the folder `root` (its pid and command), if anyone; without taking it
/// (a shared probe, released at once).
pub fn holder(root: &Path) -> Result<Option<String>, ResultsError> {
    let path = root.join(FILE);
    let mut file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(&path)(e)),
    };
    match file.try_lock_shared() {
        Ok(()) => Ok(None),
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut who = String::new();
            let _ = file.read_to_string(&mut who);
            let who = who.trim();
            Ok(Some(if who.is_empty() { "another process".to_string() } else { who.to_string() }))
        }
        Err(std::fs::TryLockError::Error(e)) => Err(io_err(&path)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holder_is_named_while_the_lock_is_held_and_none_after() {
        let dir = std::env::temp_dir().join(format!("lock-holder-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(holder(&dir).unwrap(), None, "no lock file");
        let lock = Lock::acquire(&dir, "run plans/x.yaml").unwrap();
        assert_eq!(holder(&dir).unwrap(), Some(format!("pid {} (run plans/x.yaml)", std::process::id())));
        drop(lock);
        assert_eq!(holder(&dir).unwrap(), None, "released");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_second_holder_is_refused_with_the_first_holders_pid_and_command() {
        let dir = tempfile::tempdir().unwrap();
        let first = Lock::acquire(dir.path(), "orchestrate analyze X").unwrap();
        let e = Lock::acquire(dir.path(), "orchestrate report X").unwrap_err().to_string();
        assert!(e.contains(&format!("pid {}", std::process::id())) && e.contains("orchestrate analyze X"), "{e}");
        drop(first);
        let again = Lock::acquire(dir.path(), "orchestrate report X").unwrap();
        assert!(again.path().ends_with(FILE));
    }
}

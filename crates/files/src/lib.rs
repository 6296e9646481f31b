//! Files written atomically and read with a bound: the one way the controller's crates write a
//! file that must never be seen half-written, and read a file that must not exhaust memory.
//!
//! May touch: the files and folders it is given. Must not: know what the files mean.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// A file could not be written.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// An I/O operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// The file exists and the write was asked never to overwrite.
    #[error("{} exists and is never overwritten", .0.display())]
    Exists(PathBuf),
}

/// Attach the path to an I/O error.
fn io_err(path: &Path) -> impl FnOnce(io::Error) -> FileError + '_ {
    move |source| FileError::Io { path: path.to_path_buf(), source }
}

/// Whether `path` is the temporary file of a write [`write_atomic`] did not finish.
pub fn is_partial(path: &Path) -> bool {
    path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.') && n.ends_with(".tmp"))
}

/// Write `path` atomically: a hidden temporary file in the same folder, fsync, rename over the
/// target, fsync of the folder. With `overwrite: false` an existing target is an error.
pub fn write_atomic(
    path: &Path,
    overwrite: bool,
    write: impl FnOnce(&mut File) -> io::Result<()>,
) -> Result<(), FileError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    if !overwrite && path.exists() {
        return Err(FileError::Exists(path.to_path_buf()));
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = File::create(&tmp)?;
        write(&mut f)?;
        f.flush()?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(io_err(path))
}

/// Read a whole file of at most `max` bytes; a larger one is an error (`InvalidData`) saying the
/// limit and what the file was expected to be.
pub fn read_capped(path: &Path, max: u64, what: &str) -> io::Result<Vec<u8>> {
    use io::Read;
    let mut bytes = Vec::new();
    File::open(path)?.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        let limit = if max >= 1 << 30 { format!("{} GiB", max >> 30) } else { format!("{} MiB", max >> 20) };
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("larger than {limit}: not a {what}")));
    }
    Ok(bytes)
}

/// Write bytes atomically (see [`write_atomic`]).
pub fn write_file(path: &Path, bytes: &[u8], overwrite: bool) -> Result<(), FileError> {
    write_atomic(path, overwrite, |f| f.write_all(bytes))
}

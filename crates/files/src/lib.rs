//! Files written atomically and read with a bound: the one way the controller's crates write a
//! file that must never be seen half-written, write a file a user named as an output, and read a
//! file that must not exhaust memory or hang the tool (only regular files are read).
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
    /// An output path names something that is not a regular file (a device, a FIFO, a folder).
    #[error("{}: {kind}; outputs are written only to regular files", .path.display())]
    NotRegular {
        /// The path (a symlink's target when it was one).
        path: PathBuf,
        /// What it is.
        kind: Kind,
    },
    /// An output path names a file a protected folder holds (see [`write_output`]).
    #[error("{}: {why}; choose a path outside it", .path.display())]
    Protected {
        /// The path (a symlink's target when it was one).
        path: PathBuf,
        /// Why the folder guards it.
        why: String,
    },
}

/// What a path that is not a regular file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A folder.
    Directory,
    /// A named pipe.
    Fifo,
    /// A character or block device.
    Device,
    /// A socket.
    Socket,
    /// Something else.
    Other,
}

impl Kind {
    fn of(t: fs::FileType) -> Option<Kind> {
        use std::os::unix::fs::FileTypeExt;
        if t.is_file() {
            None
        } else if t.is_dir() {
            Some(Kind::Directory)
        } else if t.is_fifo() {
            Some(Kind::Fifo)
        } else if t.is_char_device() || t.is_block_device() {
            Some(Kind::Device)
        } else if t.is_socket() {
            Some(Kind::Socket)
        } else {
            Some(Kind::Other)
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Directory => "a folder",
            Kind::Fifo => "a named pipe (FIFO)",
            Kind::Device => "a device",
            Kind::Socket => "a socket",
            Kind::Other => "a special file",
        })
    }
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
    let dir = folder_of(path);
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

/// The folder a path's file is in (`.` for a bare file name).
fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Open `path` to read it: following links, it must be a regular file of at most `max` bytes
/// (`InvalidData` saying the limit and what the file was expected to be; `InvalidInput` for a
/// folder, FIFO, device or socket). The open does not block (a FIFO with no writer would hold it
/// forever); the type and size are checked on the open file.
pub fn open_regular(path: &Path, max: u64, what: &str) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    let meta = f.metadata()?;
    if let Some(kind) = Kind::of(meta.file_type()) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{kind}, not a {what}")));
    }
    if meta.len() > max {
        return Err(too_large(max, what));
    }
    Ok(f)
}

fn too_large(max: u64, what: &str) -> io::Error {
    let limit = if max >= 1 << 30 { format!("{} GiB", max >> 30) } else { format!("{} MiB", max >> 20) };
    io::Error::new(io::ErrorKind::InvalidData, format!("larger than {limit}: not a {what}"))
}

/// Ask the system to start reading each of `paths` whole into its cache, and return: the reads
/// that follow (perhaps on other threads) then wait less on the disk. A hint: a path that cannot
/// be opened, or is not a regular file, is passed over. Files are opened as [`open_regular`]
/// opens them (never blocking on a FIFO).
pub fn read_ahead<P: AsRef<Path>>(paths: impl IntoIterator<Item = P>) {
    use std::os::unix::fs::OpenOptionsExt;
    for path in paths {
        let Ok(f) = fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path) else { continue };
        if f.metadata().is_ok_and(|m| m.is_file()) {
            let _ = rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::WillNeed);
        }
    }
}

/// Read a whole regular file of at most `max` bytes (see [`open_regular`]).
pub fn read_capped(path: &Path, max: u64, what: &str) -> io::Result<Vec<u8>> {
    use io::Read;
    let mut bytes = Vec::new();
    open_regular(path, max, what)?.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(too_large(max, what));
    }
    Ok(bytes)
}

/// Write a file a user named as an output (a report, a JUnit file, a trend page), atomically,
/// replacing an older one. A symlink is followed and its target written (the link stays); a path
/// that is a folder, FIFO, device or socket is refused, never replaced; and `guard` may refuse
/// the final path (it says why: e.g. a results folder's own file).
pub fn write_output(path: &Path, bytes: &[u8], guard: impl FnOnce(&Path) -> Option<String>) -> Result<(), FileError> {
    let target = match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => resolve_link(path)?,
        _ => path.to_path_buf(),
    };
    match fs::metadata(&target) {
        Ok(m) => {
            if let Some(kind) = Kind::of(m.file_type()) {
                return Err(FileError::NotRegular { path: target, kind });
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(FileError::Io { path: target, source: e }),
    }
    let absolute = std::path::absolute(&target).map_err(io_err(&target))?;
    if let Some(why) = guard(&absolute) {
        return Err(FileError::Protected { path: target, why });
    }
    write_file(&target, bytes, true)
}

/// Where a symlink finally points (a chain followed; a dangling link's would-be target).
fn resolve_link(path: &Path) -> Result<PathBuf, FileError> {
    let mut at = path.to_path_buf();
    for _ in 0..40 {
        match fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = fs::read_link(&at).map_err(io_err(&at))?;
                at = if to.is_absolute() { to } else { folder_of(&at).join(to) };
            }
            _ => return Ok(at),
        }
    }
    Err(FileError::Io { path: path.to_path_buf(), source: io::Error::from_raw_os_error(libc::ELOOP) })
}

/// Write a file that can be made again and whose reader checks it (a run's reduction, with its
/// checksum; a simulated run, against the journal's sha256): replaced atomically (a hidden
/// temporary file renamed over the target) but without fsync, so that a crash leaves at worst a
/// file its reader refuses and that is then made again.
pub fn write_derived(path: &Path, bytes: &[u8]) -> Result<(), FileError> {
    let dir = folder_of(path);
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.{:?}.tmp", std::process::id(), std::thread::current().id()));
    let result = fs::write(&tmp, bytes).and_then(|()| fs::rename(&tmp, path));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(io_err(path))
}

/// Write bytes atomically (see [`write_atomic`]).
pub fn write_file(path: &Path, bytes: &[u8], overwrite: bool) -> Result<(), FileError> {
    write_atomic(path, overwrite, |f| f.write_all(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A new folder with a FIFO named as a run file in it.
    fn with_fifo() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("run.parquet");
        let status = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(status.success());
        (dir, fifo)
    }

    #[test]
    fn special_files_are_refused_at_once_and_never_read() {
        let (dir, fifo) = with_fifo();
        let zero = dir.path().join("zero.parquet");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        for (path, kind) in
            [(&fifo, "a named pipe (FIFO)"), (&zero, "a device"), (&dir.path().to_path_buf(), "a folder")]
        {
            let start = Instant::now();
            let e = read_capped(path, 1 << 30, "run file").unwrap_err();
            assert!(start.elapsed() < Duration::from_secs(1), "{}: {:?}", path.display(), start.elapsed());
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
            assert_eq!(e.to_string(), format!("{kind}, not a run file"));
        }
    }

    #[test]
    fn reading_ahead_passes_over_special_files_without_waiting_on_them() {
        // A FIFO opened to read without O_NONBLOCK waits for a writer: reading ahead must not.
        let (dir, fifo) = with_fifo();
        let run = dir.path().join("run=1.parquet");
        fs::write(&run, b"PAR1 records PAR1").unwrap();
        let paths =
            [fifo, dir.path().join("absent"), dir.path().to_path_buf(), PathBuf::from("/dev/zero"), run.clone()];
        let (done, waited) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            read_ahead(&paths);
            done.send(()).unwrap();
        });
        waited.recv_timeout(Duration::from_secs(5)).expect("reading ahead waited on a special file");
        assert_eq!(read_capped(&run, 1 << 20, "run file").unwrap(), b"PAR1 records PAR1");
    }

    #[test]
    fn an_oversize_file_is_refused_before_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big");
        File::create(&big).unwrap().set_len(3 << 20).unwrap();
        let e = open_regular(&big, 2 << 20, "summary").unwrap_err();
        assert_eq!(e.to_string(), "larger than 2 MiB: not a summary");
        assert_eq!(read_capped(&big, 3 << 20, "summary").unwrap().len(), 3 << 20);
    }

    #[test]
    fn an_output_through_a_symlink_writes_its_target_and_keeps_the_link() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("pages").join("trend.html");
        fs::create_dir_all(target.parent().unwrap()).unwrap();
        fs::write(&target, "old").unwrap();
        let link = dir.path().join("latest.html");
        std::os::unix::fs::symlink("pages/trend.html", &link).unwrap();
        write_output(&link, b"new", |_| None).unwrap();
        assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(fs::read(&target).unwrap(), b"new");
    }

    #[test]
    fn an_output_never_replaces_a_device_a_fifo_or_a_folder() {
        let (dir, fifo) = with_fifo();
        let link = dir.path().join("pipe.xml");
        std::os::unix::fs::symlink("run.parquet", &link).unwrap();
        let mut cases = vec![
            (fifo.clone(), fifo.clone(), Kind::Fifo),
            (link.clone(), fifo.clone(), Kind::Fifo),
            (dir.path().to_path_buf(), dir.path().to_path_buf(), Kind::Directory),
        ];
        // A private copy of /dev/null (1, 3), where the test may create device nodes (as root).
        let null = dir.path().join("null");
        let made = std::process::Command::new("mknod").arg(&null).args(["c", "1", "3"]).status();
        if made.is_ok_and(|s| s.success()) {
            cases.push((null.clone(), null.clone(), Kind::Device));
        }
        for (path, shown, kind) in cases {
            match write_output(&path, b"x", |_| None) {
                Err(FileError::NotRegular { path: p, kind: k }) => assert_eq!((p, k), (shown, kind)),
                other => panic!("{}: {other:?}", path.display()),
            }
        }
        use std::os::unix::fs::FileTypeExt;
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
        if null.exists() {
            assert!(fs::symlink_metadata(&null).unwrap().file_type().is_char_device());
        }
    }

    #[test]
    fn the_guard_sees_the_final_absolute_path_and_may_refuse_it() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("journal.jsonl");
        fs::write(&journal, "{}\n").unwrap();
        let link = dir.path().join("j");
        std::os::unix::fs::symlink("journal.jsonl", &link).unwrap();
        let guard = |p: &Path| (p.file_name() == Some("journal.jsonl".as_ref())).then(|| "the journal".to_string());
        match write_output(&link, b"x", guard) {
            Err(FileError::Protected { path, why }) => {
                assert_eq!((path, why.as_str()), (journal.clone(), "the journal"))
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(fs::read(&journal).unwrap(), b"{}\n");
    }

    #[test]
    fn a_bare_file_name_is_written_in_the_current_folder() {
        assert_eq!(folder_of(Path::new("compare.xml")), Path::new("."));
        assert_eq!(folder_of(Path::new("a/compare.xml")), Path::new("a"));
        assert_eq!(folder_of(Path::new("/compare.xml")), Path::new("/"));
    }
}

//! The results folder and its files: layout, atomic writes, bounded reads, time stamps.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

use crate::error::{ResultsError, io_err};

/// The extension of a run's histogram log beside its data file (soak mode).
pub const HISTOGRAM_EXTENSION: &str = "hlog";
/// Folder of the runs' reductions ([`crate::reduction`]), beside `data/`.
pub const REDUCTIONS: &str = "pairs";

/// The results folder holding `path` (absolute): the nearest folder above it with a journal.
pub fn results_folder_of(path: &Path) -> Option<&Path> {
    path.ancestors().skip(1).find(|dir| dir.join("journal.jsonl").is_file())
}

/// Write a file a user named as an output (a JUnit file, a trend page, a listing): through a
/// symlink to its target, never onto a device, FIFO or folder, and never inside a results folder,
/// whose files only the study's own commands write (see [`latency_files::write_output`]).
pub fn write_output(path: &Path, bytes: &[u8]) -> Result<(), ResultsError> {
    latency_files::write_output(path, bytes, |absolute| {
        results_folder_of(absolute).map(|root| {
            format!("inside the results folder {}, whose files only its study's commands write", root.display())
        })
    })?;
    Ok(())
}

/// A study's results folder.
#[derive(Clone, Debug)]
pub struct ResultsDir {
    root: PathBuf,
}

impl ResultsDir {
    /// Use `root` for a new study: it must not exist or be empty. `resumable` says whether the
    /// command could continue a study there (`run --resume`), for the message.
    pub fn create(root: &Path, resumable: bool) -> Result<ResultsDir, ResultsError> {
        if root.exists() && fs::read_dir(root).map_err(io_err(root))?.next().is_some() {
            let message = if !root.join("journal.jsonl").is_file() {
                format!("{} is not empty and is not a results folder; choose another --out", root.display())
            } else if resumable {
                format!(
                    "{} already holds results; use --resume to continue that study, or choose another --out",
                    root.display()
                )
            } else {
                format!("{} already holds results; choose another --out", root.display())
            };
            return Err(ResultsError::Refused(message));
        }
        fs::create_dir_all(root.join("data")).map_err(io_err(root))?;
        Ok(ResultsDir { root: root.to_path_buf() })
    }

    /// Open an existing results folder (to resume, analyse or report).
    pub fn open(root: &Path) -> Result<ResultsDir, ResultsError> {
        if !root.join("journal.jsonl").is_file() {
            return Err(ResultsError::Refused(format!(
                "{} is not a results folder (no journal.jsonl)",
                root.display()
            )));
        }
        Ok(ResultsDir { root: root.to_path_buf() })
    }

    /// The folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Path of the journal.
    pub fn journal_path(&self) -> PathBuf {
        self.root.join("journal.jsonl")
    }

    /// Take the folder's lock for the life of the returned value; refused, naming the holder,
    /// while another process holds it.
    pub fn lock(&self, command: &str) -> Result<crate::lock::Lock, ResultsError> {
        crate::lock::Lock::acquire(&self.root, command)
    }

    /// Every file under `data/` that is not a hidden temporary file, relative to the folder.
    pub fn data_files(&self) -> Result<Vec<PathBuf>, ResultsError> {
        fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> io::Result<()> {
            for e in fs::read_dir(dir)? {
                let e = e?;
                let p = e.path();
                if e.file_type()?.is_dir() {
                    walk(root, &p, out)?;
                } else {
                    out.push(p.strip_prefix(root).unwrap_or(&p).to_path_buf());
                }
            }
            Ok(())
        }
        let mut out = Vec::new();
        let data = self.root.join("data");
        if data.is_dir() {
            walk(&self.root, &data, &mut out).map_err(io_err(&data))?;
        }
        out.sort();
        Ok(out)
    }

    /// Path of a run's data, relative to the folder; a run of a level has the level's folders
    /// (`pacing_pps=500/frame_size=128`) between the program and the session.
    pub fn run_rel_path(program: &str, level: Option<&str>, session: u32, run: u32) -> PathBuf {
        let level = level.map(|l| format!("{l}/")).unwrap_or_default();
        PathBuf::from(format!("data/program={program}/{level}session={session}/run={run}.parquet"))
    }

    /// Path (relative to the folder) of the reduction of the run at `run_rel` (a path of
    /// [`ResultsDir::run_rel_path`]): the same place under `pairs/` instead of `data/`.
    pub fn reduction_rel_path(run_rel: &Path) -> PathBuf {
        let inside = run_rel.strip_prefix("data").unwrap_or(run_rel);
        Path::new(REDUCTIONS).join(inside).with_extension("pairs")
    }

    /// Move a file that must not be trusted into `quarantine/` (nothing is deleted).
    pub fn quarantine(&self, path: &Path) -> Result<PathBuf, ResultsError> {
        let rel = path.strip_prefix(&self.root).unwrap_or(path);
        let flat = rel.to_string_lossy().replace('/', "__");
        let dir = self.root.join("quarantine");
        fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        let mut target = dir.join(&flat);
        let mut n = 1;
        while target.exists() {
            n += 1;
            target = dir.join(format!("{flat}.{n}"));
        }
        fs::rename(path, &target).map_err(io_err(path))?;
        Ok(target)
    }

    /// What [`ResultsDir::quarantine`] moved aside, by the path each file had (relative to the
    /// folder): its place in `quarantine/` (relative too); the last one moved when several had
    /// the same path.
    pub fn quarantined(&self) -> Result<std::collections::BTreeMap<PathBuf, PathBuf>, ResultsError> {
        let dir = self.root.join("quarantine");
        let mut out = std::collections::BTreeMap::new();
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(io_err(&dir)(e)),
        };
        let mut moved: Vec<(PathBuf, u32, String)> = Vec::new();
        for e in entries {
            let name = e.map_err(io_err(&dir))?.file_name().to_string_lossy().into_owned();
            let (flat, n) = match name.rsplit_once('.') {
                Some((stem, n)) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => {
                    (stem.to_string(), n.parse().unwrap_or(u32::MAX))
                }
                _ => (name.clone(), 1),
            };
            moved.push((PathBuf::from(flat.replace("__", "/")), n, name));
        }
        moved.sort();
        for (rel, _, name) in moved {
            out.insert(rel, Path::new("quarantine").join(name));
        }
        Ok(out)
    }

    /// Remove temporary files left by an interrupted write (they are partial by construction).
    pub fn remove_partial_files(&self) -> Result<usize, ResultsError> {
        let partial: Vec<PathBuf> = self.data_files()?.into_iter().filter(|f| is_partial(f)).collect();
        for f in &partial {
            let path = self.root.join(f);
            fs::remove_file(&path).map_err(io_err(&path))?;
        }
        Ok(partial.len())
    }
}

pub use latency_files::{is_partial, open_regular, read_ahead, read_capped};

/// Write `path` atomically ([`latency_files::write_atomic`]), failing as the results folder does.
pub fn write_atomic(
    path: &Path,
    overwrite: bool,
    write: impl FnOnce(&mut File) -> io::Result<()>,
) -> Result<(), ResultsError> {
    Ok(latency_files::write_atomic(path, overwrite, write)?)
}

/// Write bytes atomically (see [`write_atomic`]).
pub fn write_file(path: &Path, bytes: &[u8], overwrite: bool) -> Result<(), ResultsError> {
    Ok(latency_files::write_file(path, bytes, overwrite)?)
}

/// Format a Unix time (seconds) as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem / 60 % 60, rem % 60)
}

/// Read back a time written by [`utc`] (`YYYY-MM-DDTHH:MM:SSZ`, whole seconds, UTC).
pub fn parse_utc(text: &str) -> Option<u64> {
    let b = text.as_bytes();
    let num = |r: std::ops::Range<usize>| text.get(r)?.parse::<i64>().ok();
    if b.len() != 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' || b[19] != b'Z'
    {
        return None;
    }
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    // Days since 1970-01-01 from the civil date (H. Hinnant's algorithm, the inverse of `utc`'s).
    let y = y - i64::from(m <= 2);
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days * 86_400 + hh * 3600 + mm * 60 + ss).ok().filter(|&s| utc(s) == text)
}

/// Format a Unix time in microseconds as `YYYY-MM-DDTHH:MM:SS.ffffffZ` (RFC 3339), or
/// `YYYY-MM-DDTHH:MM:SSZ` when it is a whole second; none before 1970.
pub fn utc_micros(micros: i64) -> String {
    let (secs, frac) = (micros.div_euclid(1_000_000), micros.rem_euclid(1_000_000));
    let whole = utc(u64::try_from(secs).unwrap_or(0));
    if frac == 0 { whole } else { format!("{}.{frac:06}Z", &whole[..19]) }
}

/// Read back a time written by [`utc_micros`] or [`utc`], in microseconds since the epoch (a
/// fraction of up to six digits).
pub fn parse_utc_micros(text: &str) -> Option<i64> {
    let (whole, frac) = match text.strip_suffix('Z')?.split_once('.') {
        Some((w, f)) if (1..=6).contains(&f.len()) && f.bytes().all(|b| b.is_ascii_digit()) => {
            (format!("{w}Z"), format!("{f:0<6}").parse::<i64>().ok()?)
        }
        Some(_) => return None,
        None => (text.to_string(), 0),
    };
    i64::try_from(parse_utc(&whole)?).ok()?.checked_mul(1_000_000)?.checked_add(frac)
}

/// Microseconds since the Unix epoch.
pub fn now_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// Seconds since the Unix epoch.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formatting_matches_known_dates() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_796_000_000), "2026-11-30T00:53:20Z");
        for secs in [0, 951_782_400, 1_796_000_000, 4_107_542_399] {
            assert_eq!(parse_utc(&utc(secs)), Some(secs));
        }
        for bad in ["2026-02-30T00:00:00Z", "2026-11-30 00:53:20Z", "2026-11-30T24:00:00Z", "1969-12-31T23:59:59Z"] {
            assert_eq!(parse_utc(bad), None, "{bad}");
        }
    }

    #[test]
    fn times_keep_their_microseconds() {
        // 2026-11-30T00:53:20Z is 1,796,000,000 s; 0.000250 s later, and a whole second.
        assert_eq!(utc_micros(1_796_000_000_000_250), "2026-11-30T00:53:20.000250Z");
        assert_eq!(utc_micros(1_796_000_000_000_000), "2026-11-30T00:53:20Z");
        assert_eq!(parse_utc_micros("2026-11-30T00:53:20.000250Z"), Some(1_796_000_000_000_250));
        // A shorter fraction is of a second: .25 is 250,000 µs; no fraction, a whole second.
        assert_eq!(parse_utc_micros("2026-11-30T00:53:20.25Z"), Some(1_796_000_000_250_000));
        assert_eq!(parse_utc_micros("2026-11-30T00:53:20Z"), Some(1_796_000_000_000_000));
        for bad in [
            "2026-11-30T00:53:20.Z",
            "2026-11-30T00:53:20.1234567Z",
            "2026-11-30T00:53:20.12a4Z",
            "2026-11-30T00:53:20.5",
        ] {
            assert_eq!(parse_utc_micros(bad), None, "{bad}");
        }
    }

    #[test]
    fn what_was_quarantined_is_found_by_the_path_it_had() {
        let root = std::env::temp_dir().join(format!("results-quarantined-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let rd = ResultsDir::create(&root, true).unwrap();
        assert!(rd.quarantined().unwrap().is_empty(), "nothing moved yet");
        let run = ResultsDir::run_rel_path("forward", None, 1, 2);
        for _ in 0..2 {
            fs::create_dir_all(root.join(&run).parent().unwrap()).unwrap();
            fs::write(root.join(&run), b"x").unwrap();
            rd.quarantine(&root.join(&run)).unwrap();
        }
        let found = rd.quarantined().unwrap();
        assert_eq!(
            found.into_iter().collect::<Vec<_>>(),
            [(run, PathBuf::from("quarantine/data__program=forward__session=1__run=2.parquet.2"))],
            "the last one moved"
        );
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn atomic_writes_never_overwrite_unless_asked() {
        let dir = std::env::temp_dir().join(format!("results-atomic-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let p = dir.join("a/b.txt");
        write_file(&p, b"one", false).unwrap();
        assert!(matches!(write_file(&p, b"two", false), Err(ResultsError::Refused(_))));
        assert_eq!(fs::read(&p).unwrap(), b"one");
        write_file(&p, b"three", true).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"three");
        let leftovers: Vec<_> = fs::read_dir(dir.join("a")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(leftovers.len(), 1, "{leftovers:?}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_folder_with_results_is_not_reused_without_resume() {
        let dir = std::env::temp_dir().join(format!("results-create-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        ResultsDir::create(&dir, true).unwrap();
        fs::write(dir.join("journal.jsonl"), "").unwrap();
        assert!(matches!(ResultsDir::create(&dir, true), Err(ResultsError::Refused(_))));
        assert!(ResultsDir::open(&dir).is_ok());
        fs::remove_dir_all(&dir).unwrap();
    }
}

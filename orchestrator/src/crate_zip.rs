//! `orchestrate export DIR --format ro-crate --out FILE.zip`: a results folder as one
//! self-contained RO-Crate for an archive: every file of the folder (data, reports, plan, journal,
//! provenance) with `ro-crate-metadata.json` made anew from them, in a zip (entries stored
//! uncompressed: the run files are compressed Parquet already; fixed times, so that the same
//! folder gives the same bytes). Left out: the folder's lock, hidden files and the runs'
//! reductions (as the crate leaves them out), and, named, any file that is or holds a private key
//! or an SSH host or client key, whatever its name.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use latency_results::ResultsError;
use latency_results::rocrate;

/// What the export wrote.
#[derive(Debug, serde::Serialize)]
pub struct CrateZip {
    /// The zip.
    pub out: PathBuf,
    /// Files in it (the metadata included).
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Files of the folder left out, and why.
    pub left_out: Vec<(String, String)>,
}

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum CrateZipError {
    /// The folder.
    #[error(transparent)]
    Results(#[from] ResultsError),
    /// Reading or writing a file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// The zip exists: never overwritten.
    #[error("{0} exists: an export never overwrites a file")]
    Exists(PathBuf),
    /// Beyond a zip without ZIP64 extensions.
    #[error("{0}: more than 4 GiB or 65,535 files, beyond what this export writes (a zip without ZIP64)")]
    TooLarge(PathBuf),
}

/// The error of reading or writing `path`.
fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CrateZipError {
    let path = path.to_path_buf();
    move |source| CrateZipError::Io { path, source }
}

/// Why a file must not leave the testbed's owner: its name or its first bytes say it is a key.
pub fn secret(rel: &str, head: &[u8]) -> Option<&'static str> {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let named = name.starts_with("id_rsa")
        || name.starts_with("id_ecdsa")
        || name.starts_with("id_ed25519")
        || name.starts_with("id_dsa")
        || name.starts_with("ssh_host_")
        || ["authorized_keys", "known_hosts", "ssh_config"].contains(&name)
        || [".pem", ".key", ".p12", ".pfx"].iter().any(|e| name.ends_with(e));
    if named {
        return Some("named as a key or SSH configuration");
    }
    let text = String::from_utf8_lossy(head);
    if text.contains("PRIVATE KEY-----") || text.contains("OPENSSH PRIVATE KEY") {
        return Some("holds a private key");
    }
    if text.lines().any(|l| l.starts_with("ssh-ed25519 ") || l.starts_with("ssh-rsa ") || l.starts_with("ecdsa-sha2-"))
    {
        return Some("holds an SSH key");
    }
    None
}

/// Export the results folder `dir` as a crate zip at `out` (created, never overwritten).
pub fn export(dir: &Path, out: &Path) -> Result<CrateZip, CrateZipError> {
    if out.exists() {
        return Err(CrateZipError::Exists(out.to_path_buf()));
    }
    let rd = latency_results::ResultsDir::open(dir)?;
    let mut kept = Vec::new();
    let mut left_out = Vec::new();
    for f in rocrate::files(rd.root(), &rocrate::Hashed::new())? {
        let path = rd.root().join(&f.rel);
        let mut head = vec![0u8; 4096];
        let n = std::fs::File::open(&path).and_then(|mut h| h.read(&mut head)).map_err(io(&path))?;
        match secret(&f.rel, &head[..n]) {
            Some(why) => left_out.push((f.rel.clone(), why.to_string())),
            None => kept.push(f),
        }
    }
    let prov = latency_results::provenance::Provenance::read(&rd)?;
    let entries = latency_results::journal::read(&rd.journal_path())?;
    let metadata = serde_json::to_vec_pretty(&rocrate::metadata(&prov, &entries, &kept)).map_err(|source| {
        CrateZipError::Results(ResultsError::Json {
            path: dir.join(rocrate::FILE),
            what: "RO-Crate metadata".into(),
            source,
        })
    })?;
    let tmp = out.with_extension("zip.partial");
    let written = write_zip(&tmp, rd.root(), &kept, &metadata).and_then(|bytes| {
        std::fs::hard_link(&tmp, out).map_err(io(out))?;
        Ok(bytes)
    });
    let _ = std::fs::remove_file(&tmp);
    let bytes = written?;
    Ok(CrateZip { out: out.to_path_buf(), files: kept.len() + 1, bytes, left_out })
}

/// A stored (uncompressed) zip of `files` under `root` and the metadata, at `path`.
fn write_zip(path: &Path, root: &Path, files: &[rocrate::FileFacts], metadata: &[u8]) -> Result<u64, CrateZipError> {
    let too_large = || CrateZipError::TooLarge(root.to_path_buf());
    let mut zip = std::io::BufWriter::new(std::fs::File::create_new(path).map_err(io(path))?);
    let mut central = Vec::new();
    let (mut offset, mut bytes, mut count) = (0u64, 0u64, 0u16);
    let mut entry =
        |name: &str, data: &mut dyn Read, size: u64, crc: u32, zip: &mut dyn Write| -> Result<(), CrateZipError> {
            let size32 = u32::try_from(size).map_err(|_| too_large())?;
            let offset32 = u32::try_from(offset).map_err(|_| too_large())?;
            count = count.checked_add(1).ok_or_else(too_large)?;
            let name_len = u16::try_from(name.len()).map_err(|_| too_large())?;
            // Version 2.0, UTF-8 names, stored, 1980-01-01 00:00.
            let mut local = Vec::with_capacity(30 + name.len());
            local.extend(0x0403_4b50u32.to_le_bytes());
            for v in [20u16, 0x0800, 0, 0, 0x0021] {
                local.extend(v.to_le_bytes());
            }
            for v in [crc, size32, size32] {
                local.extend(v.to_le_bytes());
            }
            local.extend(name_len.to_le_bytes());
            local.extend(0u16.to_le_bytes());
            local.extend(name.as_bytes());
            zip.write_all(&local).map_err(io(path))?;
            let copied = std::io::copy(data, zip).map_err(io(path))?;
            if copied != size {
                return Err(CrateZipError::Io {
                    path: root.join(name),
                    source: std::io::Error::other("changed while it was being exported"),
                });
            }
            central.extend(0x0201_4b50u32.to_le_bytes());
            for v in [0x0314u16, 20, 0x0800, 0, 0, 0x0021] {
                central.extend(v.to_le_bytes());
            }
            for v in [crc, size32, size32] {
                central.extend(v.to_le_bytes());
            }
            for v in [name_len, 0, 0, 0, 0] {
                central.extend(v.to_le_bytes());
            }
            central.extend((0o100_644u32 << 16).to_le_bytes());
            central.extend(offset32.to_le_bytes());
            central.extend(name.as_bytes());
            offset += local.len() as u64 + size;
            bytes += size;
            Ok(())
        };
    let crc_of = |p: &Path| -> Result<u32, CrateZipError> {
        let mut h = crc32fast::Hasher::new();
        let mut f = std::fs::File::open(p).map_err(io(p))?;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = f.read(&mut buf).map_err(io(p))?;
            if n == 0 {
                return Ok(h.finalize());
            }
            h.update(&buf[..n]);
        }
    };
    entry(rocrate::FILE, &mut &metadata[..], metadata.len() as u64, crc32fast::hash(metadata), &mut zip)?;
    for f in files {
        let p = root.join(&f.rel);
        let crc = crc_of(&p)?;
        let mut data = std::fs::File::open(&p).map_err(io(&p))?;
        entry(&f.rel, &mut data, f.size, crc, &mut zip)?;
    }
    let cd_offset = u32::try_from(offset).map_err(|_| too_large())?;
    let cd_size = u32::try_from(central.len()).map_err(|_| too_large())?;
    zip.write_all(&central).map_err(io(path))?;
    let mut end = Vec::with_capacity(22);
    end.extend(0x0605_4b50u32.to_le_bytes());
    for v in [0u16, 0, count, count] {
        end.extend(v.to_le_bytes());
    }
    end.extend(cd_size.to_le_bytes());
    end.extend(cd_offset.to_le_bytes());
    end.extend(0u16.to_le_bytes());
    zip.write_all(&end).map_err(io(path))?;
    let file = zip.into_inner().map_err(|e| CrateZipError::Io { path: path.to_path_buf(), source: e.into_error() })?;
    file.sync_all().map_err(io(path))?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_known_by_name_or_by_their_first_bytes() {
        assert!(secret("logs/s1/id_ed25519", b"").is_some());
        assert!(secret("state/hostkeys/ssh_host_ed25519_key.pub", b"").is_some());
        assert!(secret("notes.txt", b"-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blb...").is_some());
        assert!(secret("logs/agent.log", b"line\nssh-ed25519 AAAAC3Nza user@host\n").is_some());
        assert!(secret("data/program=forward/session=1/run=1.parquet", b"PAR1\x15\x04").is_none());
        assert!(secret("report.md", b"# Latency\nthe private key of nothing").is_none());
    }
}

//! Files between this machine and the hosts, each verified by sha256.
//!
//! An upload is skipped when the host already has the same bytes; otherwise they are written to
//! `<remote>.part` and renamed into place only when the host's sha256 of them is the one sent (a
//! mismatch is sent again once, then reported). A download is checked against the host's sha256
//! of the file.

use crate::Doing;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::failed;
use super::session::Hosts;
use crate::TestbedError;
use latency_plan::Plan;
use latency_plan::inventory::Role;
use latency_plan::layout::RemoteLayout;
use latency_plan::template::shell_quote;

/// Seconds a download of a file's bytes may take.
const DOWNLOAD_S: u64 = 300;

/// Prints the sha256 of `remote` (nothing when it is missing).
pub fn sha256_command(remote: &str) -> String {
    format!("sha256sum {} 2>/dev/null | cut -d' ' -f1", shell_quote(remote))
}

/// Writes standard input to `remote`'s partial file and renames it into place if its sha256 is
/// `want` (else removes it); prints the sha256 it found.
pub fn receive_command(remote: &str, want: &str) -> String {
    format!(
        "mkdir -p \"$(dirname {q})\" && cat > {t} && s=$(sha256sum < {t} | cut -d' ' -f1) \
         && if [ \"$s\" = {w} ]; then mv {t} {q}; else rm -f {t}; fi && echo \"$s\"",
        q = shell_quote(remote),
        t = shell_quote(&RemoteLayout::partial(remote)),
        w = shell_quote(want),
    )
}

/// Prints the bytes of `remote`.
pub fn read_command(remote: &str) -> String {
    format!("cat {}", shell_quote(remote))
}

/// Renames `from` to `to`.
pub fn rename_command(from: &str, to: &str) -> String {
    format!("mv {} {}", shell_quote(from), shell_quote(to))
}

/// Makes `remote` executable.
pub fn executable_command(remote: &str) -> String {
    format!("chmod +x {}", shell_quote(remote))
}

/// Upload `local` to `remote` on `role` unless a file with the same sha256 is already there.
pub fn upload(hosts: &Hosts, role: Role, local: &Path, remote: &str) -> Result<(), TestbedError> {
    let name = hosts.name(role);
    let want = latency_plan::digest::sha256_file(local)
        .map_err(|e| failed("local", Doing::Upload, format!("{}: {e}", local.display())))?;
    let have = hosts.run(role, Doing::Upload, &sha256_command(remote), Duration::from_secs(60))?;
    if have.trim() == want {
        return Ok(());
    }
    let bytes = latency_results::read_capped(local, latency_plan::digest::MAX_HASHED_BYTES, "file to upload")
        .map_err(|e| failed("local", Doing::Upload, format!("{}: {e}", local.display())))?;
    let cmd = receive_command(remote, &want);
    let mut mismatch = String::new();
    for attempt in 1..=2 {
        let mut sent = bytes.clone();
        if latency_results::failpoint::hit("corrupt-upload")
            && let Some(b) = sent.last_mut()
        {
            *b ^= 0x01;
        }
        let out = hosts
            .run_with_input(role, &cmd, &sent)
            .map_err(|e| failed(name, Doing::Upload, format!("{remote}: {e}")))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(failed(name, Doing::Upload, format!("{remote}: {}", err.trim())));
        }
        let got = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if got == want {
            return Ok(());
        }
        mismatch = format!("{remote}: checksum mismatch after upload (sent {want}, host has {got})");
        if attempt == 1 {
            eprintln!("warning: {name}: {mismatch}; uploading again");
        }
    }
    Err(failed(name, Doing::Upload, mismatch))
}

/// Read a remote file whole, verified against the host's sha256 of it.
pub fn download(hosts: &Hosts, role: Role, remote: &str) -> Result<Vec<u8>, TestbedError> {
    let sum = hosts.run(role, Doing::Download, &sha256_command(remote), Duration::from_secs(60))?;
    let bytes = hosts.read(role, Doing::Download, &read_command(remote), Duration::from_secs(DOWNLOAD_S))?;
    if latency_plan::digest::sha256_hex(&bytes) != sum.trim() {
        return Err(failed(hosts.name(role), Doing::Download, format!("{remote}: checksum mismatch")));
    }
    Ok(bytes)
}

/// One file to put on a host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upload {
    /// The host.
    pub role: Role,
    /// The local file.
    pub local: PathBuf,
    /// Where it goes.
    pub remote: String,
}

/// What a study needs on the hosts besides the agent, in upload order: the probe `traces` (file
/// name on the host, local file) on the sender; tables and present bitstream images on the
/// receiver.
pub fn study_uploads(plan: &Plan, layout: &RemoteLayout, traces: &[(String, PathBuf)]) -> Vec<Upload> {
    let file_name = |p: &Path| p.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    let mut out: Vec<Upload> = traces
        .iter()
        .map(|(name, local)| Upload { role: Role::Sender, local: local.clone(), remote: layout.trace(name) })
        .collect();
    for p in &plan.programs {
        if let Some(table) = &p.table {
            let remote = layout.table(&p.name, &file_name(table));
            out.push(Upload { role: Role::Receiver, local: table.clone(), remote });
        }
        for b in p.images() {
            if b.present {
                let remote = layout.bitstream(&file_name(&b.file));
                out.push(Upload { role: Role::Receiver, local: b.file.clone(), remote });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::process::{Command, Stdio};

    fn sh(dir: &Path, cmd: &str, input: &[u8]) -> (bool, Vec<u8>) {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        let out = child.wait_with_output().unwrap();
        (out.status.success(), out.stdout)
    }

    #[test]
    fn transfer_commands_keep_hostile_paths_verbatim() {
        let tmp = tempfile::tempdir().unwrap();
        let remote = format!("{}/new 'dir' $(touch pwned)/a \"b\" `id` ;&.pcap", tmp.path().display());
        let bytes = b"probe bytes\n";
        let want = latency_plan::digest::sha256_hex(bytes);
        let text = |v: Vec<u8>| String::from_utf8(v).unwrap();

        // Nothing there yet: no checksum.
        assert_eq!(sh(tmp.path(), &sha256_command(&remote), b""), (true, Vec::new()));
        // Bytes that arrive damaged never take the file's name.
        let (ok, out) = sh(tmp.path(), &receive_command(&remote, &want), b"probe bytez\n");
        assert!(ok);
        assert_eq!(text(out).trim(), latency_plan::digest::sha256_hex(b"probe bytez\n"));
        assert!(!Path::new(&remote).exists() && !Path::new(&RemoteLayout::partial(&remote)).exists());
        // Good bytes are renamed into place.
        let (ok, out) = sh(tmp.path(), &receive_command(&remote, &want), bytes);
        assert!(ok);
        assert_eq!(text(out).trim(), want);
        assert_eq!(std::fs::read(&remote).unwrap(), bytes);
        assert_eq!(text(sh(tmp.path(), &sha256_command(&remote), b"").1).trim(), want);
        assert_eq!(sh(tmp.path(), &read_command(&remote), b"").1, bytes);

        let moved = format!("{remote}.collected-1");
        assert!(sh(tmp.path(), &rename_command(&remote, &moved), b"").0);
        assert!(sh(tmp.path(), &executable_command(&moved), b"").0);
        assert!(!Path::new(&remote).exists() && Path::new(&moved).is_file());
        let made: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(made.len(), 1, "nothing but the upload's folder: {made:?}");
    }

    #[test]
    fn a_study_uploads_its_traces_tables_and_present_images() {
        let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../plans/smoke.yaml"));
        let (plan, _) = latency_plan::load(path, None).unwrap();
        let layout = RemoteLayout::new("/s", "/r");
        let traces = [("forward_1k.pcap".to_string(), PathBuf::from("/local/forward_1k.pcap"))];
        let uploads = study_uploads(&plan, &layout, &traces);
        assert_eq!(
            uploads[0],
            Upload {
                role: Role::Sender,
                local: "/local/forward_1k.pcap".into(),
                remote: "/s/traces/forward_1k.pcap".into()
            }
        );
        let images = plan.programs.iter().flat_map(|p| p.images()).filter(|b| b.present).count();
        assert_eq!(uploads.len(), 1 + images);
        for u in &uploads[1..] {
            assert_eq!(u.role, Role::Receiver);
            assert!(u.remote.starts_with("/r/bitstreams/"), "{u:?}");
        }
    }
}

//! The ESnet SmartNIC stack's clients as the emulated card answers them: `sn-cfg` (device, ports,
//! hosts, switch) and `sn-p4` (tables), with the commands and the output layout of
//! esnet-smartnic-fw's `README.INSTALL.md`, and their failures: a card that is not running (the
//! clients cannot reach the stack's server), a port or host id the card does not have, an
//! entries file with a line that is not an entry.
//!
//! The card's build (`Build: Number`, USR_ACCESS) is the first eight hex digits of the sha256 the
//! emulated card was flashed with, its build status 0 (an emulated build has no time), its profile
//! the emulator's `--profile`.

use std::path::Path;

use crate::control::{ClientError, live_state};
use crate::state::State;

/// What went wrong: the message a client prints, and its exit status.
#[derive(Debug, PartialEq, Eq)]
pub struct Failure {
    /// Exit status (1: the command failed, 2: usage).
    pub code: u8,
    /// Message, on stderr.
    pub message: String,
}

fn usage(message: String) -> Failure {
    Failure { code: 2, message }
}

fn failed(message: String) -> Failure {
    Failure { code: 1, message }
}

/// The running card, or the client's failure to reach the stack's server.
fn card(dir: &Path, tool: &str) -> Result<State, Failure> {
    live_state(dir).map_err(|e: ClientError| failed(format!("{tool}: failed to connect to the server: {e}")))
}

/// The ports a card has: one per CMAC (the profile `U50A` has one).
fn ports(s: &State) -> u32 {
    if s.identity.profile.as_deref() == Some("U50A") { 1 } else { 2 }
}

/// `sn-cfg ARGS…` on the emulated card in `dir`: its output.
pub fn sn_cfg(dir: &Path, args: &[String]) -> Result<String, Failure> {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["show", "device", "info"] => {
            let s = card(dir, "sn-cfg")?;
            let build =
                s.identity.sha256.as_deref().and_then(|h| h.get(..8)).and_then(|h| u32::from_str_radix(h, 16).ok());
            Ok(format!(
                "-----------------------------------------\nDevice ID: 0\nPCI:\n    Bus ID:     0000:00:00.0\n    \
                 Vendor ID:  0x10ee\n    Device ID:  0x903f\nBuild:\n    Number:     {:#010x}\n    Status:     \
                 0x00000000\nCard:\n    Name:                   ALVEO {} (emulated)\n    Profile:                {}\n",
                build.unwrap_or(0),
                s.identity.profile.as_deref().unwrap_or("?"),
                s.identity.profile.as_deref().unwrap_or("?"),
            ))
        }
        ["show", "port", "status"] => {
            let s = card(dir, "sn-cfg")?;
            let up = s.state == crate::state::Phase::Running;
            Ok((0..ports(&s))
                .map(|p| {
                    format!(
                        "-----------------------------------------\nPort ID: {p} on device ID 0\n    Link: {}\n",
                        if up { "up" } else { "down" }
                    )
                })
                .collect())
        }
        ["configure", "port", rest @ ..] => {
            let s = card(dir, "sn-cfg")?;
            let opts = options(rest, &["--port-id", "--state", "--fec", "--loopback"])?;
            check_id(&opts, "--port-id", ports(&s), "port")?;
            if let Some(state) = value(&opts, "--state")
                && !matches!(state, "enable" | "disable")
            {
                return Err(usage(format!("sn-cfg: invalid value '{state}' for '--state' (enable, disable)")));
            }
            Ok(String::new())
        }
        ["configure", "host", rest @ ..] => {
            let s = card(dir, "sn-cfg")?;
            let opts = options(rest, &["--host-id", "--reset-dma-queues", "--dma-queues"])?;
            check_id(&opts, "--host-id", ports(&s), "host")?;
            for (k, v) in &opts {
                if *k == "--dma-queues" && !dma_queues(v) {
                    return Err(usage(format!(
                        "sn-cfg: invalid DMA queues '{v}' (FUNCTION:BASE:COUNT, function pf or vf0-vf2)"
                    )));
                }
            }
            Ok(String::new())
        }
        ["configure", "switch", rest @ ..] => {
            card(dir, "sn-cfg")?;
            let opts = options(rest, &["-i", "-e", "-b"])?;
            for (k, v) in &opts {
                let parts: Vec<&str> = v.split(':').collect();
                let ok = match *k {
                    "-i" => matches!(parts.as_slice(), [_, "physical" | "test", "app" | "bypass" | "drop"]),
                    "-e" => matches!(parts.as_slice(), [_, "physical" | "test"]),
                    _ => matches!(*v, "straight" | "swap"),
                };
                if !ok {
                    return Err(usage(format!("sn-cfg: invalid value '{v}' for '{k}'")));
                }
            }
            Ok(String::new())
        }
        _ => Err(usage(format!("sn-cfg: unrecognized command '{}'", words.join(" ")))),
    }
}

/// `sn-p4 ARGS…` on the emulated card in `dir`: its output.
pub fn sn_p4(dir: &Path, args: &[String]) -> Result<String, Failure> {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["clear", "table"] | ["clear", "table", "--table", _] => {
            card(dir, "sn-p4")?;
            Ok(String::new())
        }
        ["apply", "p4bm", file] => {
            card(dir, "sn-p4")?;
            let text = std::fs::read_to_string(file).map_err(|e| failed(format!("sn-p4: cannot read {file}: {e}")))?;
            let applied = p4bm_entries(&text)
                .map_err(|(line, text)| failed(format!("sn-p4: {file}:{line}: not a p4bm line: `{text}`")))?;
            Ok(format!("applied {applied} table entries\n"))
        }
        _ => Err(usage(format!("sn-p4: unrecognized command '{}'", words.join(" ")))),
    }
}

/// The entries of a p4bm file (`table_add T A KEY => PARAMS`, `table_clear T`, `clear_all`, `#`
/// comments), or the first line that is none of them (its number from 1, its text).
fn p4bm_entries(text: &str) -> Result<usize, (usize, String)> {
    let mut entries = 0;
    for (k, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        let mut w = line.split_whitespace();
        match w.next() {
            None | Some("clear_all") => {}
            Some("table_clear") if w.next().is_some() => {}
            Some("table_add") if w.clone().count() >= 3 && line.contains("=>") => entries += 1,
            _ => return Err((k + 1, line.to_string())),
        }
    }
    Ok(entries)
}

/// `--key value` pairs among `known`; `--reset-dma-queues` stands alone.
fn options<'a>(args: &[&'a str], known: &[&str]) -> Result<Vec<(&'a str, &'a str)>, Failure> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(&k) = it.next() {
        if !known.contains(&k) {
            return Err(usage(format!("sn-cfg: unexpected argument '{k}'")));
        }
        if k == "--reset-dma-queues" {
            out.push((k, ""));
            continue;
        }
        let v = it.next().ok_or_else(|| usage(format!("sn-cfg: '{k}' needs a value")))?;
        out.push((k, *v));
    }
    Ok(out)
}

fn value<'a>(opts: &[(&str, &'a str)], key: &str) -> Option<&'a str> {
    opts.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

/// An id option within the card's `count` ports or hosts (all of them when absent).
fn check_id(opts: &[(&str, &str)], key: &str, count: u32, what: &str) -> Result<(), Failure> {
    match value(opts, key).map(str::parse::<u32>) {
        None => Ok(()),
        Some(Ok(id)) if id < count => Ok(()),
        Some(_) => {
            Err(failed(format!("sn-cfg: invalid {what} id {} (the card has {count})", value(opts, key).unwrap_or(""))))
        }
    }
}

/// `pf:0:1`: a function (pf, vf0–vf2), a base queue and a count.
fn dma_queues(v: &str) -> bool {
    matches!(v.split(':').collect::<Vec<_>>().as_slice(),
        [f, base, count] if matches!(*f, "pf" | "vf0" | "vf1" | "vf2") && base.parse::<u32>().is_ok() && count.parse::<u32>().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn a_card_that_is_not_running_cannot_be_reached() {
        let dir = std::env::temp_dir().join(format!("fpga-emu-esnet-{}", std::process::id()));
        let e = sn_cfg(&dir, &args("show device info")).unwrap_err();
        assert_eq!(e.code, 1);
        assert!(e.message.starts_with("sn-cfg: failed to connect to the server: "), "{}", e.message);
        let e = sn_p4(&dir, &args("clear table")).unwrap_err();
        assert!(e.message.starts_with("sn-p4: failed to connect"), "{}", e.message);
    }

    #[test]
    fn entries_files_are_read_as_p4bm_lines() {
        let tbl =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../p4-programs/forward/forward.tbl"))
                .unwrap();
        assert!(p4bm_entries(&tbl).unwrap() > 0, "the Forward program's table file");
        assert_eq!(p4bm_entries("# c\nclear_all\ntable_clear t\ntable_add t a 1 => \n"), Ok(1));
        assert_eq!(p4bm_entries("table_add t a 1\n"), Err((1, "table_add t a 1".into())), "no `=>`");
        assert_eq!(p4bm_entries("\ninsert t\n"), Err((2, "insert t".into())));
    }

    #[test]
    fn usage_errors_name_the_argument() {
        let dir = Path::new("/nonexistent");
        assert_eq!(sn_cfg(dir, &args("show everything")).unwrap_err().code, 2);
        assert_eq!(sn_p4(dir, &args("table insert")).unwrap_err().code, 2);
        assert!(dma_queues("pf:0:1") && dma_queues("vf2:1:1") && !dma_queues("pf:0") && !dma_queues("qf:0:1"));
        let o = options(&["--port-id", "1", "--state", "enable"], &["--port-id", "--state"]).unwrap();
        assert_eq!(o, [("--port-id", "1"), ("--state", "enable")]);
        assert_eq!(
            options(&["--colour", "x"], &["--state"]).unwrap_err().message,
            "sn-cfg: unexpected argument '--colour'"
        );
        assert!(check_id(&[("--port-id", "1")], "--port-id", 1, "port").is_err(), "a U50 has port 0 only");
    }
}

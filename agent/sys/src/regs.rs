//! Open-NIC-Shell register initialisation and health check through the PCI BAR, in one process
//! (instead of ~260 `pcimem` invocations): QDMA queue configuration of both functions, zeroed
//! RSS indirection tables, CMAC RX/TX enables, and the CMAC RX status check. The register values
//! are plain data; applying and checking them maps the BAR (x86_64 Linux).

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
use std::io;

use serde::Serialize;

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
use crate::bar::Bar;

/// A register write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Write {
    /// Byte offset in the BAR.
    pub offset: usize,
    /// Value.
    pub value: u32,
    /// What it does.
    pub what: &'static str,
}

/// Register values that depend on the testbed.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// QDMA queue configuration of PF0 (`0x1000`): base queue and count.
    pub pf0_queues: u32,
    /// QDMA queue configuration of PF1 (`0x2000`).
    pub pf1_queues: u32,
    /// Entries of each RSS indirection table (`0x1400`, `0x2400`), zeroed so every packet goes to
    /// queue 0 of its function.
    pub indirection_entries: usize,
}

impl Default for Config {
    /// The OCT U280 values: one queue on PF0 (base 0), one on PF1 (base 1), 128-entry tables.
    fn default() -> Self {
        Config { pf0_queues: 0x0000_0001, pf1_queues: 0x0001_0001, indirection_entries: 128 }
    }
}

/// RX status registers of the two CMACs and the value that means "aligned, link up". The check
/// wants exactly this value (as LatencyLab's SETUP.md: `0x00000003`), not merely these bits set:
/// any other bit (a latched error, for instance) fails it.
pub const RX_STATUS: [(usize, u32, &str); 2] = [(0x8204, 0x3, "CMAC0 RX status"), (0xC204, 0x3, "CMAC1 RX status")];

/// The Open-NIC shell's build timestamp (system config register 0x0; hex digits `MMDDhhmm` set
/// by the shell's `build.tcl`): what identifies the image a card runs.
pub const BUILD_TIMESTAMP: usize = 0x0;

/// The card management firmware's board profile (CMS `PROFILE_NAME_REG`, four ASCII bytes such
/// as `U280`): the CMS register map (`REG_MAP` at CMS + 0x28000) at the Open-NIC shell's CMS base
/// 0x300000, + 0x14. Beyond [`WINDOW`]: read only where the BAR is that large.
pub const CMS_PROFILE: usize = 0x0032_8014;

/// The board profile a CMS profile word names: its four bytes as ASCII letters and digits; `None`
/// for anything else (the CMS not started, a shell without it).
pub fn profile_name(word: u32) -> Option<String> {
    let bytes = word.to_be_bytes();
    bytes.iter().all(u8::is_ascii_alphanumeric).then(|| bytes.iter().map(|&b| char::from(b)).collect())
}

/// Size of the register window that must be mapped.
pub const WINDOW: usize = 0x10000;

/// Every write of the initialisation, in order.
pub fn init_writes(c: &Config) -> Vec<Write> {
    let mut w = vec![
        Write { offset: 0x1000, value: c.pf0_queues, what: "PF0 QDMA queues" },
        Write { offset: 0x2000, value: c.pf1_queues, what: "PF1 QDMA queues" },
    ];
    for k in 0..c.indirection_entries {
        w.push(Write { offset: 0x1400 + 4 * k, value: 0, what: "PF0 indirection table" });
        w.push(Write { offset: 0x2400 + 4 * k, value: 0, what: "PF1 indirection table" });
    }
    w.extend([
        Write { offset: 0x8014, value: 1, what: "CMAC0 RX enable" },
        Write { offset: 0x800C, value: 1, what: "CMAC0 TX enable" },
        Write { offset: 0xC014, value: 1, what: "CMAC1 RX enable" },
        Write { offset: 0xC00C, value: 1, what: "CMAC1 TX enable" },
    ]);
    w
}

/// Apply writes to a mapped BAR.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub fn apply(bar: &mut Bar, writes: &[Write]) -> io::Result<()> {
    for w in writes {
        bar.write32(w.offset, w.value)?;
    }
    Ok(())
}

/// Problems found by the health check of a card with `cmacs` CMACs (1 or 2; a U50 has one): a
/// dead BAR (all ones, as after a lost PCIe link) or a CMAC whose RX status is not exactly 0x3.
/// Empty = healthy.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub fn check(bar: &Bar, cmacs: usize) -> io::Result<Vec<String>> {
    let mut problems = Vec::new();
    for &(offset, want, what) in RX_STATUS.iter().take(cmacs) {
        let v = bar.read32(offset)?;
        if v == 0xFFFF_FFFF {
            problems
                .push(format!("{what} ({offset:#06x}) reads 0xffffffff: the BAR is dead (re-enumerate the device)"));
        } else if v != want {
            problems
                .push(format!("{what} ({offset:#06x}) = {v:#010x}, expected exactly {want:#010x} ({})", why(v, want)));
        }
    }
    Ok(problems)
}

/// What an RX status other than the wanted one says.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn why(v: u32, want: u32) -> String {
    if v & want != want { "link down or not aligned?".into() } else { format!("unexpected bits {:#x} set", v & !want) }
}

#[cfg(test)]
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::*;

    fn fake_bar(name: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("bar-{name}-{}", std::process::id()));
        std::fs::write(&p, vec![0u8; WINDOW]).unwrap();
        p
    }

    fn word(bytes: &[u8], offset: usize) -> u32 {
        u32::from_ne_bytes(bytes[offset..offset + 4].try_into().unwrap())
    }

    #[test]
    fn init_writes_the_documented_registers_into_the_bar() {
        let p = fake_bar("init");
        std::fs::write(&p, vec![0xabu8; WINDOW]).unwrap();
        let writes = init_writes(&Config::default());
        // 2 queue registers + 2 × 128 indirection entries + 4 CMAC enables.
        assert_eq!(writes.len(), 262);
        let mut bar = Bar::map(&p, WINDOW).unwrap();
        apply(&mut bar, &writes).unwrap();
        drop(bar);
        let b = std::fs::read(&p).unwrap();
        assert_eq!(word(&b, 0x1000), 1);
        assert_eq!(word(&b, 0x2000), 0x0001_0001);
        assert_eq!(word(&b, 0x1400), 0);
        assert_eq!(word(&b, 0x15FC), 0);
        assert_eq!(word(&b, 0x1600), 0xabababab, "only 128 entries are cleared");
        assert_eq!(word(&b, 0x25FC), 0);
        for o in [0x8014, 0x800C, 0xC014, 0xC00C] {
            assert_eq!(word(&b, o), 1, "{o:#x}");
        }
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn a_cms_profile_word_names_its_board_in_ascii() {
        // cms.c's profile words (esnet-smartnic-fw libopennic).
        assert_eq!(profile_name(0x5532_3830).as_deref(), Some("U280"));
        assert_eq!(profile_name(0x5532_5858).as_deref(), Some("U2XX"));
        assert_eq!(profile_name(0x5535_3041).as_deref(), Some("U50A"));
        assert_eq!(profile_name(0), None, "the CMS not started");
        assert_eq!(profile_name(0xFFFF_FFFF), None, "a dead BAR");
        assert_eq!(profile_name(0xDEAD_BEEF), None);
    }

    #[test]
    fn health_check_reports_dead_bars_and_links_down() {
        let p = fake_bar("check");
        let mut bar = Bar::map(&p, WINDOW).unwrap();
        bar.write32(0x8204, 3).unwrap();
        bar.write32(0xC204, 3).unwrap();
        assert!(check(&bar, 2).unwrap().is_empty());
        bar.write32(0xC204, 1).unwrap();
        // A one-CMAC board (U50) has no CMAC1 to check.
        assert!(check(&bar, 1).unwrap().is_empty());
        assert_eq!(
            check(&bar, 2).unwrap(),
            ["CMAC1 RX status (0xc204) = 0x00000001, expected exactly 0x00000003 (link down or not aligned?)"]
        );
        // Exact, not masked: 0x7 has both wanted bits and one more.
        bar.write32(0xC204, 7).unwrap();
        assert_eq!(
            check(&bar, 2).unwrap(),
            ["CMAC1 RX status (0xc204) = 0x00000007, expected exactly 0x00000003 (unexpected bits 0x4 set)"]
        );
        bar.write32(0x8204, 0xFFFF_FFFF).unwrap();
        assert!(check(&bar, 1).unwrap()[0].contains("the BAR is dead"));
        assert!(bar.read32(0x10000).is_err() && bar.read32(0x8202).is_err());
        drop(bar);
        std::fs::remove_file(p).unwrap();
    }
}

//! What a card says it runs: the identity a bring-up's `readback` step prints as JSON (the agent's
//! `regs identity` on an Open-NIC card, `fpga-emu status` on the emulated testbed) and the identity
//! a bitstream manifest expects. The controller compares the two to skip writing an image the card
//! already runs, and to refuse a bring-up whose card runs another image.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The identity of the image a card runs, as far as the card can tell. Every field is optional:
/// a card reports what it can read, a manifest states what its image is known to have.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardIdentity {
    /// sha256 of the image file the card was written from, where the card can tell (the emulator
    /// records the checksum it was flashed with; a real card cannot hash its configuration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// The Open-NIC shell's build timestamp: system config register 0x0, hex digits `MMDDhhmm`
    /// set by the shell's `build.tcl` (`-build_timestamp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_timestamp: Option<Hex32>,
    /// The ESnet SmartNIC shell's build pipeline number: USR_ACCESS (its syscfg `usr_access`
    /// register, `sn-cfg show device info`'s `Build: Number`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usr_access: Option<Hex32>,
    /// The configured image's USERCODE (the bitstream header's `UserID`), read over JTAG through
    /// the hardware manager (`REGISTER.USERCODE.SLR0`), as ESnet's `check_fpga_version.sh` does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usercode: Option<Hex32>,
    /// The board family, as the card management firmware names it (CMS `PROFILE_NAME_REG`, four
    /// ASCII bytes: `U280`, `U2XX` for a U200 or U250, `U50A`, `U55N` for a U55C or U55N).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
}

impl CardIdentity {
    /// Whether nothing is known.
    pub fn is_empty(&self) -> bool {
        *self == CardIdentity::default()
    }

    /// Whether a card reading `self` is another board than `expected` describes (both name one).
    pub fn other_board(&self, expected: &CardIdentity) -> bool {
        matches!((&self.profile, &expected.profile), (Some(a), Some(b)) if !a.trim().eq_ignore_ascii_case(b.trim()))
    }

    /// Whether a card reading `self` runs the image `expected` describes: `false` on another
    /// board; `None` when they share no field naming the image (sha256, build timestamp,
    /// USR_ACCESS, USERCODE), else whether every shared one agrees.
    pub fn matches(&self, expected: &CardIdentity) -> Option<bool> {
        let sha = match (&self.sha256, &expected.sha256) {
            (Some(a), Some(b)) => Some(a.eq_ignore_ascii_case(b)),
            _ => None,
        };
        let same = |a: Option<Hex32>, b: Option<Hex32>| a.zip(b).map(|(a, b)| a == b);
        let registers = [
            same(self.build_timestamp, expected.build_timestamp),
            same(self.usr_access, expected.usr_access),
            same(self.usercode, expected.usercode),
        ];
        let build = registers.iter().any(Option::is_some).then(|| registers.iter().all(|r| r.unwrap_or(true)));
        // Another board never runs the image; the same board alone does not say which image.
        if self.other_board(expected) {
            return Some(false);
        }
        match (sha, build) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(true) && b.unwrap_or(true)),
        }
    }
}

impl fmt::Display for CardIdentity {
    /// `sha256 ab12…, build_timestamp 0x10140810`; `unknown` when empty.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(s) = &self.sha256 {
            parts.push(format!("sha256 {s}"));
        }
        if let Some(b) = self.build_timestamp {
            parts.push(format!("build_timestamp {b}"));
        }
        if let Some(u) = self.usr_access {
            parts.push(format!("usr_access {u}"));
        }
        if let Some(u) = self.usercode {
            parts.push(format!("usercode {u}"));
        }
        if let Some(p) = &self.profile {
            parts.push(format!("board {p}"));
        }
        if parts.is_empty() { f.write_str("unknown") } else { f.write_str(&parts.join(", ")) }
    }
}

/// A 32-bit register value, written `0x` and eight hex digits; read from such a string (any
/// case, with or without `0x`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hex32(pub u32);

impl Hex32 {
    /// Parse `0x10140810`, `10140810` or `0X1014ABCD`.
    pub fn parse(s: &str) -> Option<Hex32> {
        let s = s.trim();
        let digits = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).unwrap_or(s);
        if digits.is_empty() || digits.len() > 8 {
            return None;
        }
        u32::from_str_radix(digits, 16).ok().map(Hex32)
    }
}

impl fmt::Display for Hex32 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#010x}", self.0)
    }
}

impl Serialize for Hex32 {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Hex32 {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Hex32::parse(&s).ok_or_else(|| serde::de::Error::custom(format!("`{s}` is not a 32-bit hex value")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(sha: Option<&str>, build: Option<u32>) -> CardIdentity {
        CardIdentity { sha256: sha.map(String::from), build_timestamp: build.map(Hex32), ..CardIdentity::default() }
    }

    #[test]
    fn only_shared_fields_are_compared() {
        let card = id(None, Some(0x1014_0810));
        assert_eq!(card.matches(&id(Some("ab"), None)), None, "nothing shared");
        assert_eq!(card.matches(&id(Some("ab"), Some(0x1014_0810))), Some(true));
        assert_eq!(card.matches(&id(None, Some(0x1014_0811))), Some(false));
        assert_eq!(id(Some("AB"), None).matches(&id(Some("ab"), None)), Some(true), "hex of any case");
        assert_eq!(id(Some("ab"), Some(1)).matches(&id(Some("ab"), Some(2))), Some(false), "one differs");
        assert_eq!(CardIdentity::default().matches(&id(Some("ab"), Some(1))), None);
        // The board: another one never matches, whatever else agrees.
        let on = |p: &str| CardIdentity { profile: Some(p.into()), ..id(Some("ab"), None) };
        assert!(on("U2XX").other_board(&on("U280")));
        assert!(!on("u280").other_board(&on("U280")));
        assert!(!id(Some("ab"), None).other_board(&on("U280")), "a card that does not say");
        assert_eq!(on("U2XX").matches(&on("U280")), Some(false));
        assert_eq!(on("U280").matches(&on("U280")), Some(true));
        let board = |p: &str| CardIdentity { profile: Some(p.into()), ..CardIdentity::default() };
        assert_eq!(board("U280").matches(&on("U280")), None, "the board alone does not name the image");
        assert_eq!(on("U280").to_string(), "sha256 ab, board U280");
    }

    #[test]
    fn a_readback_is_read_from_its_json_with_other_fields_ignored() {
        let read = |s: &str| serde_json::from_str::<CardIdentity>(s).ok();
        // The shape `fpga-emu status` prints (its state), and the agent's `regs identity`.
        let emu = r#"{"pid":7,"state":"running","sha256":"de45","bitstream":{"name":"forward"}}"#;
        assert_eq!(read(emu), Some(id(Some("de45"), None)));
        assert_eq!(read("{\"build_timestamp\":\"0x10140810\"}\n"), Some(id(None, Some(0x1014_0810))));
        assert_eq!(read("0x10140810"), None, "not JSON");
        assert_eq!(read(r#"{"build_timestamp":"zz"}"#), None, "malformed field");
        // The ESnet readback: sn-cfg's build status, pipeline number and profile.
        let esnet = read(r#"{"build_timestamp":"0x10140810","usr_access":"0x0000e417","profile":"U280"}"#).unwrap();
        assert_eq!((esnet.usr_access, esnet.profile.as_deref()), (Some(Hex32(0xe417)), Some("U280")));
        let expected = CardIdentity { usr_access: Some(Hex32(0xe418)), ..CardIdentity::default() };
        assert_eq!(esnet.matches(&expected), Some(false), "another pipeline build");
        assert_eq!(serde_json::to_string(&id(None, Some(0xab))).unwrap(), r#"{"build_timestamp":"0x000000ab"}"#);
        // The USERCODE read over JTAG: the bitstream header's UserID, compared with the manifest's.
        let jtag = read(r#"{"usercode":"0XA5A50001","build_timestamp":"0x10140810"}"#).unwrap();
        let with = |u: u32| CardIdentity { usercode: Some(Hex32(u)), ..CardIdentity::default() };
        assert_eq!(jtag.matches(&with(0xa5a5_0001)), Some(true));
        assert_eq!(jtag.matches(&with(0xa5a5_0002)), Some(false), "another image's UserID");
        assert_eq!(jtag.to_string(), "build_timestamp 0x10140810, usercode 0xa5a50001");
    }

    #[test]
    fn hex_values_parse_as_registers_print() {
        assert_eq!(Hex32::parse("0x10140810"), Some(Hex32(0x1014_0810)));
        assert_eq!(Hex32::parse("0XABCDEF01"), Some(Hex32(0xabcd_ef01)));
        assert_eq!(Hex32::parse("ff"), Some(Hex32(0xff)));
        assert_eq!(Hex32::parse("0x"), None);
        assert_eq!(Hex32::parse("0x123456789"), None);
        assert_eq!(Hex32(0x20).to_string(), "0x00000020");
    }
}

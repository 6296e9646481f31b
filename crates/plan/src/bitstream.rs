//! Bitstream manifests (`bitstreams/<name>.yaml`): what an FPGA image is and how to program it.
//! Images are not committed; the manifest says where the file goes and its sha256 proves it.

use std::path::{Path, PathBuf};

use latency_proto::{CardIdentity, Hex32};

use crate::board::{Board, Shell};
use crate::digest;
use crate::yaml::{Decoder, Node, Pos};

latency_proto::words! {
/// How an image is written to the card.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Programming {
    /// `xbflash2 program --spi` into the QSPI flash, then a reboot of the FPGA.
    Qspi = "qspi",
    /// `vivado` hardware manager over JTAG (volatile).
    Jtag = "jtag",
}
}

/// A decoded bitstream manifest.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Bitstream {
    /// Manifest file.
    pub manifest: PathBuf,
    /// Safe name of the bitstream.
    pub name: String,
    /// Where the image file belongs (resolved against the manifest's folder).
    pub file: PathBuf,
    /// Expected sha256 of the image, lowercase hex, or [`UNBUILT`] for an image not built yet
    /// (refused by real hardware: [`crate::refused_on`]).
    pub sha256: String,
    /// Where the manifest gives the sha256.
    #[serde(skip)]
    pub sha256_at: Pos,
    /// Whether the image file is present locally (its checksum was then verified).
    pub present: bool,
    /// The board the image was built for (`au280` or `u280`).
    pub board: Board,
    /// Where the manifest gives the board.
    #[serde(skip)]
    pub board_at: Pos,
    /// The shell the image was built on.
    pub shell: Shell,
    /// Where the manifest gives the shell.
    #[serde(skip)]
    pub shell_at: Pos,
    /// Which build of the shell (a commit, a release), free text.
    pub shell_build: Option<String>,
    /// Pipeline clock in MHz.
    pub clock_mhz: f64,
    /// Vendor worst-case pipeline latency in clock cycles (absent for null images).
    pub vendor_bound_cycles: Option<u32>,
    /// Cycles each packet adds for the headers the program inserts (UG1308's calculation A, as
    /// LatencyLab's `emulator/run_latency.py` derives it from the P4 source: each inserted header's
    /// bits over the bus width, rounded up); none for a program that inserts none.
    pub header_insert_cycles: Option<u32>,
    /// Width of the pipeline's data bus, bits.
    pub bus_bits: u32,
    /// Whether this image bypasses the pipeline on both ports (calibration).
    pub null: bool,
    /// How the card is programmed with it.
    pub programming: Programming,
    /// Where the manifest gives `programming`.
    #[serde(skip)]
    pub programming_at: Pos,
    /// The folder of the program's compiled table driver (`driver`, built with the image by the
    /// P4 framework, run from that folder after every bring-up), relative to the receiver's
    /// `p4_builds` folder; none for images without tables.
    pub table_driver_dir: Option<String>,
    /// What the card reads back while it runs this image (`identity:`), beside the image's sha256
    /// and board: the shell's build timestamp (register 0x0), the ESnet build pipeline number
    /// (`usr_access`) and the bitstream's USERCODE (`usercode`, its header's UserID) where they
    /// are known.
    pub identity: CardIdentity,
}

impl Bitstream {
    /// What a card running this image reads back, as far as the manifest knows: its sha256 (an
    /// image not built yet has none) and its `identity`.
    pub fn identity(&self) -> CardIdentity {
        CardIdentity {
            sha256: (self.sha256 != UNBUILT).then(|| self.sha256.clone()),
            profile: Some(self.board.facts().cms_profile.to_string()),
            ..self.identity.clone()
        }
    }
}

/// Decode a manifest; the image's checksum is verified when the image is present.
pub fn decode(d: &mut Decoder, root: &Node) -> Option<Bitstream> {
    let mut m = d.map(root, "bitstream manifest")?;
    let name = m.required(d, "name", Decoder::ident);
    let file_node = m.req(d, "file");
    let file = file_node.and_then(|n| d.path(n, false));
    let sha256 = m.required(d, "sha256", image_sha256);
    let sha256_at = m.at("sha256").unwrap_or(m.pos);
    let board = m.required(d, "board", decode_board);
    let board_at = m.at("board").unwrap_or(m.pos);
    let shell = m.required(d, "shell", |d, n| d.choice(n, &Shell::WORDS));
    let shell_at = m.at("shell").unwrap_or(m.pos);
    let shell_build = m.optional(d, "shell_build", Decoder::string);
    let clock_mhz = m.required(d, "clock_mhz", |d, n| d.number(n, 1.0..=1000.0));
    let null = m.or(d, "null", false, Decoder::boolean);
    let vendor = m.optional(d, "vendor_bound_cycles", |d, n| d.uint(n, 1..=100_000));
    if let (Some(false), Some(None)) = (null, vendor) {
        d.error(m.pos, "missing key `vendor_bound_cycles` (required unless `null: true`)");
    }
    let insert = m.optional(d, "header_insert_cycles", |d, n| d.uint(n, 1..=10_000));
    let bus_bits = m.or(d, "bus_bits", 512, |d, n| d.uint(n, 8..=4096));
    let programming = m.required(d, "programming", |d, n| d.choice(n, &Programming::WORDS));
    let programming_at = m.at("programming").unwrap_or(m.pos);
    let table_driver_dir = m.optional(d, "table_driver_dir", Decoder::string);
    let identity = m.or(d, "identity", CardIdentity::default(), decode_identity);
    m.done(d);

    let (file, sha256) = (file?, sha256?);
    let present = file.is_file();
    if present && sha256 == UNBUILT {
        d.error(sha256_at, format!("{} is here: put its sha256 in place of `{UNBUILT}`", file.display()));
    } else if present {
        check_sha256(d, file_node?, &file, &sha256);
    }
    Some(Bitstream {
        manifest: d.file().to_path_buf(),
        name: name?,
        file,
        sha256,
        sha256_at,
        present,
        board: board?,
        board_at,
        shell: shell?,
        shell_at,
        shell_build: shell_build?,
        clock_mhz: clock_mhz?,
        vendor_bound_cycles: vendor?,
        header_insert_cycles: insert?,
        bus_bits: bus_bits?,
        null: null?,
        programming: programming?,
        programming_at,
        table_driver_dir: table_driver_dir?,
        identity: identity?,
    })
}

/// A board as manifests name it: `au280` (the shells' build scripts) or `u280`.
pub fn decode_board(d: &mut Decoder, n: &Node) -> Option<Board> {
    let name = d.string(n)?;
    let b = Board::parse(&name);
    if b.is_none() {
        d.error(n.pos, format!("unknown board `{name}`: expected one of {}", Board::accepted()));
    }
    b
}

/// `identity:`: `{ build_timestamp: "0x10140810", usr_access: "0x0000e417", usercode: "0x…" }`,
/// what the card reads back running the image.
fn decode_identity(d: &mut Decoder, n: &Node) -> Option<CardIdentity> {
    let mut m = d.map(n, "identity")?;
    let register = |d: &mut Decoder, v: &Node| {
        let s = d.string(v)?;
        let h = Hex32::parse(&s);
        if h.is_none() {
            d.error(v.pos, format!("`{s}` is not a 32-bit hex value (a register's, e.g. \"0x10140810\")"));
        }
        h
    };
    let build_timestamp = m.optional(d, "build_timestamp", register);
    let usr_access = m.optional(d, "usr_access", register);
    let usercode = m.optional(d, "usercode", register);
    m.done(d);
    Some(CardIdentity {
        build_timestamp: build_timestamp?,
        usr_access: usr_access?,
        usercode: usercode?,
        ..CardIdentity::default()
    })
}

/// The `sha256` of an image not built yet (its program is in `p4-programs/`, the image is not):
/// the simulator and the emulated testbed run it, real hardware refuses it.
pub const UNBUILT: &str = "unbuilt";

/// An image's `sha256`: 64 hex digits (returned lowercase), or [`UNBUILT`].
fn image_sha256(d: &mut Decoder, n: &Node) -> Option<String> {
    if d.is_word(n, UNBUILT) { Some(UNBUILT.to_owned()) } else { sha256_field(d, n) }
}

/// A `sha256` value: 64 hex digits, returned lowercase.
pub fn sha256_field(d: &mut Decoder, n: &Node) -> Option<String> {
    let s = d.string(n)?;
    if s.len() == 64 && s.chars().all(|c| c.is_ascii_hexdigit()) {
        Some(s.to_ascii_lowercase())
    } else {
        d.error(n.pos, "sha256 must be 64 hexadecimal digits");
        None
    }
}

/// Report a checksum mismatch of `file` at the node that names it; whether the file is the one
/// expected.
pub fn check_sha256(d: &mut Decoder, at: &Node, file: &Path, expected: &str) -> bool {
    match digest::sha256_file(file) {
        Ok(actual) if actual == expected => return true,
        Ok(actual) => {
            d.error(at.pos, format!("sha256 mismatch for {}: expected {expected}, file has {actual}", file.display()))
        }
        Err(e) => d.error(at.pos, format!("cannot read {}: {e}", file.display())),
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml;

    fn decoded(identity: &str) -> (Option<Bitstream>, Vec<String>) {
        let path = Path::new("/nonexistent/bitstreams/fwd.yaml");
        let src = format!(
            "name: fwd\nfile: fwd.mcs\nsha256: {}\nboard: au280\nshell: open-nic\nclock_mhz: 250\n\
             vendor_bound_cycles: 55\nprogramming: qspi\n{identity}",
            "AB".repeat(32)
        );
        let root = yaml::parse(path, &src).unwrap();
        let mut d = Decoder::new(path);
        let b = decode(&mut d, &root);
        (b, d.diags.iter().map(|e| format!("{}:{}: {}", e.pos.line, e.pos.col, e.message)).collect())
    }

    #[test]
    fn a_manifest_says_what_the_card_reads_back_running_its_image() {
        let (b, diags) = decoded("identity: { build_timestamp: \"0x10140810\", usercode: \"0xA5A50001\" }\n");
        assert!(diags.is_empty(), "{diags:?}");
        let id = b.unwrap().identity();
        assert_eq!((id.build_timestamp, id.usercode), (Some(Hex32(0x1014_0810)), Some(Hex32(0xa5a5_0001))));
        assert_eq!(id.sha256, Some("ab".repeat(32)), "the image's checksum, lowercase");
        // Without `identity`, the checksum alone.
        let (b, _) = decoded("");
        let id = b.unwrap().identity();
        assert_eq!((id.sha256, id.build_timestamp), (Some("ab".repeat(32)), None));
        assert_eq!(id.profile.as_deref(), Some("U280"), "the board, as its management firmware names it");
    }

    #[test]
    fn an_identity_that_is_not_a_register_value_is_refused_where_it_stands() {
        let (b, diags) = decoded("identity: { build_timestamp: \"Oct 14\" }\n");
        assert!(b.is_none());
        assert_eq!(diags, ["9:30: `Oct 14` is not a 32-bit hex value (a register's, e.g. \"0x10140810\")"]);
        let (_, diags) = decoded("identity: { build_timestamp: 0x10140810 }\n");
        assert_eq!(diags.len(), 1, "{diags:?}");
        assert!(diags[0].starts_with("9:30: ") && diags[0].contains("put the value in quotes"), "{diags:?}");
        let (_, diags) = decoded("identity: { usercode: \"0x1\", userid: \"0x1\" }\n");
        assert!(diags.len() == 1 && diags[0].contains("userid"), "{diags:?}");
    }
}

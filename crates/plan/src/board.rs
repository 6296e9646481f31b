//! Boards, shells and flash methods: what an inventory's card is (`board`), which FPGA shell its
//! images are built on (`shell`), how images reach it (`flash_methods`), and the facts of each
//! that bring-ups, health checks and validation use.
//!
//! Sources (the shells' and tools' own repositories):
//! - CMACs per board: `Xilinx/open-nic-shell` `src/cmac_subsystem/vivado_ip/`: a second CMAC
//!   (`cmac_usplus_1_<board>.tcl`) exists for au200, au250, au280, au55c and au55n; au50 has only
//!   `cmac_usplus_0_au50.tcl`.
//! - FPGA parts: `open-nic-shell` `script/board_settings/*.tcl` (au50, au55c), a U280 fork's
//!   `au280.tcl` (`xcu280-fsvh2892-2L-e`), a U250 board file (`xcu250-figd2104-2l-e`).
//! - QSPI part and user-image offset: ESnet's `program_flash.tcl` (U280: `mt25qu01g-spi-x1_x2_x4`),
//!   open-nic-shell's `build.tcl` (`write_cfgmem … -loadbit "up 0x01002000 …"`), xbflash2 on the
//!   OCT U280 ("Bitstream guard installed on flash @0x1002000").
//! - The card's name: the CMS profile word (`esnet/esnet-smartnic-fw` `libopennic/src/cms.c`,
//!   `cms_profile_get`): 0x55323830 "U280", 0x55325858 "U2XX" (U200/U250), 0x55353041 "U50A",
//!   0x5535354e "U55N" (U55C and U55N).

use serde::Serialize;

latency_proto::words! {
/// An Alveo card.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Board {
    /// Alveo U280: two CMACs, HBM.
    U280 = "u280",
    /// Alveo U250: two CMACs.
    U250 = "u250",
    /// Alveo U55C: two CMACs, HBM.
    U55c = "u55c",
    /// Alveo U50: one CMAC.
    U50 = "u50",
}
}

latency_proto::words! {
/// The FPGA shell an image is built on, which decides the card's register map and its tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Shell {
    /// Xilinx's Open-NIC shell (`Xilinx/open-nic-shell`, driver `onic`): registers in PF0's BAR2.
    OpenNic = "open-nic",
    /// ESnet's SmartNIC shell (`esnet/esnet-smartnic-hw`), driven by `sn-cfg`, `sn-p4` and `regio`.
    EsnetSmartnic = "esnet-smartnic",
}
}

latency_proto::words! {
/// How a testbed puts an image on its card (`flash_methods`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FlashMethod {
    /// The QSPI flash written over PCIe with `xbflash2 program --spi`, the FPGA rebooted from it
    /// with `config-fpga` (the OCT's procedure, as LatencyLab's `flash.py`).
    QspiXbflash2 = "qspi-xbflash2",
    /// A `.bit` loaded over JTAG through `hw_server` (volatile): ESnet's `program_card.sh` (root
    /// port kept powered, functions removed, load, rescan).
    Jtag = "jtag",
    /// The QSPI flash written over JTAG (Vivado's `program_hw_cfgmem` with the board's QSPI part),
    /// the FPGA rebooted from it with `boot_hw_device`: ESnet's `program_flash.tcl`.
    JtagFlash = "jtag-flash",
}
}

impl FlashMethod {
    /// Whether the method writes `programming: qspi` images (an `.mcs`) rather than loading
    /// `programming: jtag` ones (a `.bit`).
    pub fn writes_qspi(self) -> bool {
        self != FlashMethod::Jtag
    }

    /// How a testbed with `methods` writes `programming: qspi` images: the first that writes
    /// QSPI, if any.
    pub fn for_qspi(methods: &[FlashMethod]) -> Option<FlashMethod> {
        methods.iter().copied().find(|m| m.writes_qspi())
    }
}

/// What a board is, as the shells' build scripts and the card management firmware describe it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct BoardFacts {
    /// The FPGA part.
    pub part: &'static str,
    /// The QSPI configuration memory part, as Vivado's `get_cfgmem_parts` names it.
    pub qspi_part: &'static str,
    /// Where the user image starts in the QSPI flash (the factory image sits below it).
    pub mcs_offset: u32,
    /// 100G MACs (CMACs) the shells give the board: its network ports.
    pub cmacs: u8,
    /// The card management firmware's profile (CMS `PROFILE_NAME_REG`, four ASCII bytes) of
    /// this board's family.
    pub cms_profile: &'static str,
}

impl Board {
    /// The board's facts.
    pub const fn facts(self) -> BoardFacts {
        match self {
            Board::U280 => BoardFacts {
                part: "xcu280-fsvh2892-2L-e",
                qspi_part: "mt25qu01g-spi-x1_x2_x4",
                mcs_offset: 0x0100_2000,
                cmacs: 2,
                cms_profile: "U280",
            },
            Board::U250 => BoardFacts {
                part: "xcu250-figd2104-2L-e",
                qspi_part: "mt25qu01g-spi-x1_x2_x4",
                mcs_offset: 0x0100_2000,
                cmacs: 2,
                cms_profile: "U2XX",
            },
            Board::U55c => BoardFacts {
                part: "xcu55c-fsvh2892-2L-e",
                qspi_part: "mt25qu01g-spi-x1_x2_x4",
                mcs_offset: 0x0100_2000,
                cmacs: 2,
                cms_profile: "U55N",
            },
            Board::U50 => BoardFacts {
                part: "xcu50-fsvh2104-2-e",
                qspi_part: "mt25qu01g-spi-x1_x2_x4",
                mcs_offset: 0x0100_2000,
                cmacs: 1,
                cms_profile: "U50A",
            },
        }
    }

    /// The board named `name`, as inventories write it (`u280`) or as the shells' build scripts
    /// and bitstream manifests do (`au280`).
    pub fn parse(name: &str) -> Option<Board> {
        let lower = name.to_ascii_lowercase();
        Board::from_name(lower.strip_prefix('a').filter(|rest| rest.starts_with('u')).unwrap_or(&lower))
    }

    /// The names a manifest or inventory may give, for messages.
    pub fn accepted() -> String {
        Board::ALL.iter().map(|b| format!("`{}` (`a{}`)", b.name(), b.name())).collect::<Vec<_>>().join(", ")
    }

    /// Whether a card whose management firmware reports `profile` may be this board (a profile
    /// names a family: U2XX is a U200 or a U250).
    pub fn has_profile(self, profile: &str) -> bool {
        self.facts().cms_profile.eq_ignore_ascii_case(profile.trim())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boards_are_named_as_inventories_and_build_scripts_name_them() {
        assert_eq!(Board::parse("u280"), Some(Board::U280));
        assert_eq!(Board::parse("au280"), Some(Board::U280));
        assert_eq!(Board::parse("AU55C"), Some(Board::U55c));
        assert_eq!(Board::parse("au50"), Some(Board::U50));
        assert_eq!(Board::parse("a280"), None);
        assert_eq!(Board::parse("u200"), None);
    }

    #[test]
    fn one_cmac_on_a_u50_two_elsewhere_and_profiles_by_family() {
        assert_eq!(Board::ALL.map(|b| b.facts().cmacs), [2, 2, 2, 1]);
        // The profile words of cms.c, as four ASCII bytes.
        assert_eq!(String::from_utf8(0x5532_3830u32.to_be_bytes().to_vec()).unwrap(), "U280");
        assert_eq!(String::from_utf8(0x5532_5858u32.to_be_bytes().to_vec()).unwrap(), "U2XX");
        assert_eq!(String::from_utf8(0x5535_3041u32.to_be_bytes().to_vec()).unwrap(), "U50A");
        assert_eq!(String::from_utf8(0x5535_354eu32.to_be_bytes().to_vec()).unwrap(), "U55N");
        assert!(Board::U250.has_profile("U2XX") && !Board::U280.has_profile("U2XX"));
    }
}

//! Vivado's hardware manager in batch mode (`vivado_lab -mode batch -source SCRIPT -tclargs …`),
//! as far as the emulated card answers it over JTAG: a script that reads the device's
//! `REGISTER.USERCODE.SLR0` gets it, printed the way the controller's script prints it (one JSON
//! line, after the banner Vivado prints first). The USERCODE is the one the card was flashed with
//! (`fpga-emu flash --usercode`), else `0xFFFFFFFF`, a bitstream's default UserID. A card that is
//! not running is not found on the cable; a script that does anything else (loading an image over
//! JTAG: the emulated testbed loads with `fpga-emu flash`) is refused.

use std::path::Path;

use crate::control::live_state;
use crate::esnet::Failure;

/// A bitstream's USERCODE when its build sets none (`BITSTREAM.CONFIG.USERID`'s default).
pub const DEFAULT_USERCODE: u32 = 0xFFFF_FFFF;

/// `vivado ARGS…` on the emulated card in `dir`: what it prints.
pub fn vivado(dir: &Path, args: &[String]) -> Result<String, Failure> {
    let usage = |message: &str| Failure { code: 2, message: format!("vivado: {message}") };
    let failed = |message: String| Failure { code: 1, message: format!("vivado: {message}") };
    if !args.windows(2).any(|w| w[0] == "-mode" && w[1] == "batch") {
        return Err(usage("only `-mode batch` is emulated"));
    }
    let script = args
        .windows(2)
        .find(|w| w[0] == "-source")
        .map(|w| &w[1])
        .ok_or_else(|| usage("`-source SCRIPT` is missing"))?;
    let text = std::fs::read_to_string(script).map_err(|e| failed(format!("{script}: {e}")))?;
    if !text.contains("get_property REGISTER.USERCODE.SLR0") || text.contains("program_hw_devices") {
        return Err(failed(format!(
            "{script}: only reading REGISTER.USERCODE.SLR0 is emulated (the emulated card is loaded with \
             `fpga-emu flash`)"
        )));
    }
    let card = live_state(dir).map_err(|e| failed(format!("no hardware device on the target: {e}")))?;
    let usercode = card.identity.usercode.map_or(DEFAULT_USERCODE, |u| u.0);
    Ok(format!("\n****** Vivado Lab Edition (fpga-emu)\n{{\"usercode\":\"0X{usercode:08X}\"}}\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_usercode_read_of_a_running_card_is_answered() {
        let dir = std::env::temp_dir().join(format!("fpga-emu-vivado-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = |name: &str, text: &str| {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            p.display().to_string()
        };
        let read = script("read.tcl", "open_hw_manager\nputs [get_property REGISTER.USERCODE.SLR0 $dev]\n");
        let load = script("load.tcl", "open_hw_manager\nprogram_hw_devices $dev\n");
        let args = |s: &str| -> Vec<String> { ["-mode", "batch", "-source", s].map(String::from).to_vec() };
        let e = vivado(&dir, &args(&read)).unwrap_err();
        assert!(e.code == 1 && e.message.contains("no hardware device on the target"), "{}", e.message);
        let e = vivado(&dir, &args(&load)).unwrap_err();
        assert!(e.code == 1 && e.message.contains("only reading REGISTER.USERCODE.SLR0"), "{}", e.message);
        assert_eq!(vivado(&dir, &["-source".into(), read]).unwrap_err().code, 2, "not in batch mode");
        assert_eq!(vivado(&dir, &args("/nonexistent.tcl")).unwrap_err().code, 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

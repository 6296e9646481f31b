//! A user-space emulator of the FPGA SmartNIC for the emulated testbed (`testbeds/emulated/`).
//!
//! It sits between two switch-facing links and two host-facing links in the `fpga` network
//! namespace. The pipeline path (switch link A → host link P) applies the loaded "bitstream" — a
//! P4 program's packet behaviour ([`packet`]) and a latency model of hundreds of µs
//! ([`bitstream`]); the bypass path (switch link B → host link B) forwards every frame unchanged
//! and at once. Flashing ([`emulator`], driven through [`control`]) loads another bitstream and
//! takes the host-facing links down for a moment, as the PCIe re-enumeration of a real card would;
//! the state file and a fake register BAR ([`state`]) let the orchestrator's actions verify it;
//! [`esnet`] answers the ESnet SmartNIC stack's clients (`sn-cfg`, `sn-p4`) as such a card would,
//! [`hw_manager`] Vivado's hardware manager reading the card's USERCODE over JTAG.

pub mod bitstream;
pub mod control;
pub mod emulator;
pub mod esnet;
pub mod hw_manager;
pub mod packet;
pub mod state;

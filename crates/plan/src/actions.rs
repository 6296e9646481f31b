//! Host actions: what each step of a session does, on which host, and its built-in command
//! template (`plan/templates/<action>.sh`, modelled on the documented OCT U280 procedure).

use std::borrow::Cow;

use crate::board::{FlashMethod, Shell};

latency_proto::words! {
/// A host action: one step of a session's bring-up, of a run, or of the teardown, declared in
/// execution order. Its name ([`Action::name`]) is what plans, inventories, the journal and the
/// dry run spell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Action {
    /// Write the bitstream to the card's flash (`config-fpga reset` + `xbflash2 program --spi`, or
    /// over JTAG with `jtag-flash`); images whose manifest says `programming: qspi`.
    Flash = "flash",
    /// Load the bitstream over JTAG with Vivado's hardware manager through `hw_server` (volatile,
    /// no boot needed; the card's functions removed before and rescanned after); images whose
    /// manifest says `programming: jtag`.
    FlashJtag = "flash_jtag",
    /// Boot the FPGA from the new image (`config-fpga boot`, or `boot_hw_device` over JTAG).
    Boot = "boot",
    /// Reload the `onic` kernel driver.
    DriverReload = "driver_reload",
    /// Unbind the FPGA functions and remove them from the PCI bus.
    PcieRemove = "pcie_remove",
    /// Rescan the PCI bus and check that the functions are back.
    PcieRescan = "pcie_rescan",
    /// Load the program's tables (table driver).
    TableLoad = "table_load",
    /// Clear `reset_method` so that vfio's bus reset does not kill the shell.
    ResetMethodClear = "reset_method_clear",
    /// Bind the FPGA functions to `vfio-pci`.
    DriverBind = "driver_bind",
    /// Start the receiver agent (a long-running process under `setsid`).
    AgentStart = "agent_start",
    /// Start the receiver's reflector instead (`latency-agent reflect`, `sender: agent`): it
    /// echoes every probe back to the sender's originator.
    ReflectorStart = "reflector_start",
    /// Write QDMA queue config, indirection tables and CMAC enables.
    RegisterInit = "register_init",
    /// Check the BAR is readable and both CMAC RX status registers read 0x3.
    HealthCheck = "health_check",
    /// Read back what the card runs (kept in the provenance, per session).
    Readback = "readback",
    /// Start the sender's hardware-timestamp capture (reflect mode).
    CaptureStart = "capture_start",
    /// Replay the probe trace at the plan's pacing.
    Replay = "replay",
    /// Send the probe trace with the sender's agent, timing each round trip (`sender: agent`).
    Originate = "originate",
    /// Stop the sender's capture.
    CaptureStop = "capture_stop",
    /// Stop the receiver agent.
    AgentStop = "agent_stop",
}
}

latency_proto::words! {
/// Which host an action runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The host that replays probes (and captures reflected ones).
    Sender = "sender",
    /// The host with the FPGA and the agent.
    Receiver = "receiver",
}
}

impl Action {
    /// Host the action runs on.
    pub fn role(self) -> Role {
        match self {
            Action::CaptureStart | Action::Replay | Action::Originate | Action::CaptureStop => Role::Sender,
            _ => Role::Receiver,
        }
    }

    /// Built-in template, following the OCT U280 procedure: the command of
    /// `plan/templates/<action>.sh`, below its leading `#` comment lines; where the testbed writes
    /// QSPI images over JTAG (`qspi` is [`FlashMethod::JtagFlash`]), `flash` and `boot` are those
    /// of `plan/templates/jtag-flash/`; on the ESnet SmartNIC shell, those its tools do differently
    /// are in `plan/templates/esnet-smartnic/`. Where `methods` load images over JTAG, the
    /// readback reads the USERCODE first (`plan/templates/jtag/readback_usercode.sh`).
    pub fn default_template(self, shell: Shell, methods: &[FlashMethod]) -> Cow<'static, str> {
        if self == Action::Readback && methods.contains(&FlashMethod::Jtag) {
            let usercode = command_of(include_str!("templates/jtag/readback_usercode.sh"));
            return Cow::Owned(format!("{usercode} && {}", Action::Readback.default_template(shell, &[])));
        }
        let qspi = FlashMethod::for_qspi(methods).unwrap_or(FlashMethod::QspiXbflash2);
        let esnet = shell == Shell::EsnetSmartnic;
        let file = match self {
            Action::DriverReload if esnet => include_str!("templates/esnet-smartnic/driver_reload.sh"),
            Action::PcieRescan if esnet => include_str!("templates/esnet-smartnic/pcie_rescan.sh"),
            Action::RegisterInit if esnet => include_str!("templates/esnet-smartnic/register_init.sh"),
            Action::HealthCheck if esnet => include_str!("templates/esnet-smartnic/health_check.sh"),
            Action::TableLoad if esnet => include_str!("templates/esnet-smartnic/table_load.sh"),
            Action::Readback if esnet => include_str!("templates/esnet-smartnic/readback.sh"),
            Action::Flash if qspi == FlashMethod::JtagFlash => include_str!("templates/jtag-flash/flash.sh"),
            Action::Boot if qspi == FlashMethod::JtagFlash => include_str!("templates/jtag-flash/boot.sh"),
            Action::Flash => include_str!("templates/flash.sh"),
            Action::FlashJtag => include_str!("templates/flash_jtag.sh"),
            Action::Boot => include_str!("templates/boot.sh"),
            Action::DriverReload => include_str!("templates/driver_reload.sh"),
            Action::PcieRemove => include_str!("templates/pcie_remove.sh"),
            Action::PcieRescan => include_str!("templates/pcie_rescan.sh"),
            Action::TableLoad => include_str!("templates/table_load.sh"),
            Action::ResetMethodClear => include_str!("templates/reset_method_clear.sh"),
            Action::DriverBind => include_str!("templates/driver_bind.sh"),
            Action::AgentStart => include_str!("templates/agent_start.sh"),
            Action::ReflectorStart => include_str!("templates/reflector_start.sh"),
            Action::RegisterInit => include_str!("templates/register_init.sh"),
            Action::HealthCheck => include_str!("templates/health_check.sh"),
            Action::Readback => include_str!("templates/readback.sh"),
            Action::CaptureStart => include_str!("templates/capture_start.sh"),
            Action::Replay => include_str!("templates/replay.sh"),
            Action::Originate => include_str!("templates/originate.sh"),
            Action::CaptureStop => include_str!("templates/capture_stop.sh"),
            Action::AgentStop => include_str!("templates/agent_stop.sh"),
        };
        Cow::Borrowed(command_of(file))
    }
}

/// The command of a template file: its text after the leading comment lines, without the final
/// line break.
fn command_of(file: &'static str) -> &'static str {
    let mut rest = file;
    while rest.starts_with('#') {
        rest = rest.split_once('\n').map_or("", |(_, after)| after);
    }
    rest.trim_end_matches('\n')
}

/// The variables every template may use. Values come from the inventory, the plan and the
/// position in the schedule (see [`Inventory::vars`](crate::Inventory::vars)).
pub const VARIABLES: &[&str] = &[
    "agent",
    "agent_backend",
    "agent_pidfile",
    "bar_file",
    "bitstream",
    "bitstream_sha256",
    "burst",
    "burst_args",
    "capture_file",
    "capture_iface",
    "capture_pidfile",
    "capture_ports",
    "capture_tstamp",
    "cmacs",
    "config_fpga_as",
    "config_fpga_key",
    "devbind",
    "capture_args",
    "echo_args",
    "eal_args",
    "fpga_ifaces",
    "fpga_pci",
    "fpga_pf0",
    "fpga_pf0_sysfs",
    "hw_server",
    "jtag_device",
    "jtag_target",
    "numa_node",
    "onic_module",
    "originate_file",
    "pace_args",
    "pacing_pps",
    "pipeline_core",
    "pipeline_iface",
    "poller_cores",
    "ports_args",
    "probe_format",
    "program",
    "qspi_bar",
    "qspi_part",
    "qspi_pci",
    "reflect_args",
    "replay_core",
    "root_port_sysfs",
    "run",
    "sender_agent",
    "sender_iface",
    "session",
    "session_dir",
    "sn_cfg",
    "sn_p4",
    "table",
    "table_driver",
    "table_driver_dir",
    "trace",
    "vivado",
    "workdir",
    "xbflash2_args",
];

/// The variables whose value is a list of words: they must stand alone in a template.
pub const LIST_VARIABLES: &[&str] = &[
    "burst_args",
    "capture_args",
    "config_fpga_as",
    "eal_args",
    "echo_args",
    "fpga_ifaces",
    "fpga_pci",
    "ports_args",
    "reflect_args",
    "sn_cfg",
    "sn_p4",
    "table",
    "xbflash2_args",
];

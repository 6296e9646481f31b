//! Testbed inventories (`testbeds/<name>.yaml`): the hosts, the receiver's FPGA and NICs, and the
//! command template of every host action.
//!
//! Every action has a built-in template modelled on the documented OCT U280 procedure (flash with
//! `config-fpga` + `xbflash2`, `onic` reload, PCIe remove/rescan, `reset_method` clear, `vfio-pci`
//! bind, table driver, register init, DPDK agent, `tcpreplay`, hardware-timestamp `tcpdump`); an
//! inventory overrides any of them under `actions:`.

mod hosts;
pub mod pci;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

pub use crate::actions::{Action, LIST_VARIABLES, Role, VARIABLES};
use pci::Bdf;

use crate::board::{Board, FlashMethod, Shell};
use crate::layout::RemoteLayout;
use crate::protocol::{Soak, Timing};
use crate::steps::{StepPolicy, decode_steps, default_policy};
use crate::template::{Template, TemplateValue, Vars};
use crate::yaml::{self, Decoder, Node};

/// How a host is reached over SSH.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SshTarget {
    /// A `Host` alias of an ssh_config file (`~/.ssh/config` unless `config` names another); its
    /// options, ProxyJump included, apply.
    Alias {
        /// The alias.
        alias: String,
        /// ssh_config file.
        config: Option<PathBuf>,
    },
    /// An explicit destination.
    Direct {
        /// Host name or address.
        host: String,
        /// Login user.
        user: String,
        /// TCP port.
        port: u16,
        /// Private key file.
        identity: Option<PathBuf>,
        /// known_hosts file checked strictly (the user's default when absent).
        known_hosts: Option<PathBuf>,
    },
}

/// One host of the testbed.
#[derive(Clone, Debug, Serialize)]
pub struct Host {
    /// How to reach it.
    pub ssh: SshTarget,
    /// Folder on the host for uploads and run data.
    pub workdir: String,
}

/// Sender settings.
#[derive(Clone, Debug, Serialize)]
pub struct Sender {
    /// Host.
    pub host: Host,
    /// Interface tcpreplay sends on.
    pub interface: String,
    /// Core tcpreplay is pinned to.
    pub replay_core: u32,
    /// Hardware-timestamping capture interface (reflect mode).
    pub capture_iface: String,
    /// tcpdump's time-stamp type on it (`tcpdump -J -i <iface>` lists them): `adapter_unsynced`,
    /// the adapter's own clock, by default.
    pub capture_tstamp: String,
    /// The agent binary on the sender, for `sender: agent` (in the work folder: the
    /// orchestrator uploads its own build).
    pub agent: String,
}

/// Receiver settings.
#[derive(Clone, Debug, Serialize)]
pub struct Receiver {
    /// Host.
    pub host: Host,
    /// PCI addresses of the FPGA's functions (PF0 first).
    pub fpga_pci: Vec<Bdf>,
    /// Device argument of `xbflash2 -d` (the domain may be left out); required by `qspi-xbflash2`.
    pub qspi_pci: Option<Bdf>,
    /// Vivado's executable (JTAG programming).
    pub vivado: String,
    /// The FPGA's name in Vivado's hardware manager (`get_hw_devices`).
    pub jtag_device: String,
    /// Vivado's hardware server, `host:port` (`connect_hw_server -url`; default `localhost:3121`).
    pub hw_server: String,
    /// The JTAG cable's serial (`get_hw_targets */xilinx_tcf/Xilinx/<serial>`; `*`: the first).
    pub jtag_target: String,
    /// The PCIe root port above the card, which the JTAG methods keep powered and rescan below.
    pub root_port: Option<Bdf>,
    /// The ESnet stack's configuration client, as a command (`[sn-cfg]`; e.g. `[docker, compose,
    /// exec, -T, smartnic-cfg, sn-cfg]` where the stack runs in its containers).
    pub sn_cfg: Vec<String>,
    /// The ESnet stack's P4 table client, as a command (`[sn-p4]`).
    pub sn_p4: Vec<String>,
    /// BAR given to `xbflash2 --bar`.
    pub qspi_bar: u32,
    /// BAR index of the Open-NIC-Shell registers on PF0.
    pub register_bar: u32,
    /// Key file of `config-fpga`; required by `qspi-xbflash2`.
    pub config_fpga_key: Option<String>,
    /// The DPDK the receiver's poll-mode drivers belong to (e.g. `20.11` for the QDMA PMD): an
    /// agent built against another DPDK cannot load them, and is refused before it is uploaded.
    pub dpdk_version: Option<String>,
    /// Folder of the P4 programs' builds on the receiver (bitstream manifests name their table
    /// driver's folder relative to it).
    pub p4_builds: String,
    /// User `config-fpga` runs as (`sudo -u USER`, as LatencyLab's flash.py does with the
    /// invoking user); none: as the SSH user.
    pub config_fpga_user: Option<String>,
    /// Arguments after `--bar N` of `xbflash2 program` (LatencyLab's flash.py passes `3`).
    pub xbflash2_args: Vec<String>,
    /// Path of `onic.ko`; required by the Open-NIC shell.
    pub onic_module: Option<String>,
    /// Kernel netdevs of the FPGA functions while `onic` is bound.
    pub fpga_ifaces: Vec<String>,
    /// Where the inventory gives `fpga_ifaces`.
    #[serde(skip)]
    pub fpga_ifaces_at: Option<yaml::Pos>,
    /// A NIC port of the receiver that captures the bypass copy, on a board with one CMAC (one
    /// FPGA port: the pipeline's): the capture's second port.
    pub bypass_iface: Option<String>,
    /// Where the inventory gives `bypass_iface`.
    #[serde(skip)]
    pub bypass_iface_at: Option<yaml::Pos>,
    /// Path of `dpdk-devbind.py`.
    pub devbind: String,
    /// Command that loads a `table_add` entries file into the P4 tables (VitisNetP4 driver).
    pub table_driver: String,
    /// Path of the `latency-agent` binary on the host.
    pub agent: String,
    /// The agent's receive backend (`dpdk`, `af-packet` or `af-xdp`): `{{ agent_backend }}`.
    pub backend: String,
    /// Poller cores, one per port.
    pub poller_cores: Vec<u32>,
    /// NUMA node of the FPGA.
    pub numa_node: u32,
    /// DPDK EAL arguments of the agent: as given, or built from the fields above (see
    /// [`latency_proto::EalConfig`]).
    pub eal_args: Vec<String>,
    /// PCI address of the reflect NIC (ConnectX-5).
    pub reflect_pci: Option<Bdf>,
    /// Capture options of the agent: descriptor rings, promiscuous mode, service core, and the
    /// destination MAC of reflections (the sender's capture NIC).
    pub capture: latency_proto::capture::CaptureOptions,
    /// What the agent's `--reflect-port` names in reflect mode: the reflect NIC's DPDK port id
    /// (by default the one after the FPGA's functions), or an interface (AF_PACKET backend).
    pub reflect_port: Option<String>,
}

impl Receiver {
    /// The optional key a template variable's value comes from, with what it is, when the
    /// receiver does not give it (see [`Inventory::vars`]).
    fn unset_key(&self, variable: &str) -> Option<(&'static str, &'static str)> {
        let (unset, key, what) = match variable {
            "root_port_sysfs" => (
                self.root_port.is_none(),
                "root_port",
                "the PCIe root port above the card (`lspci -t`), which it keeps powered and rescans below, as ESnet's \
                 program_card.sh",
            ),
            "qspi_pci" => (self.qspi_pci.is_none(), "qspi_pci", "xbflash2's device"),
            "config_fpga_key" => (self.config_fpga_key.is_none(), "config_fpga_key", "config-fpga's key"),
            "onic_module" => (self.onic_module.is_none(), "onic_module", "the Open-NIC driver"),
            _ => return None,
        };
        unset.then_some((key, what))
    }

    /// The interfaces the agent captures on, in port order: the FPGA's, then the bypass NIC port
    /// of a one-CMAC board.
    pub fn capture_ifaces(&self) -> Vec<String> {
        self.fpga_ifaces.iter().chain(&self.bypass_iface).cloned().collect()
    }
}

/// A decoded inventory.
#[derive(Clone, Debug, Serialize)]
pub struct Inventory {
    /// The file.
    pub path: PathBuf,
    /// Safe name.
    pub name: String,
    /// The card (`board`; default `u280`).
    pub board: Board,
    /// Where the inventory gives `board` (its first line when it does not).
    #[serde(skip)]
    pub board_at: yaml::Pos,
    /// The shell its images are built on (`shell`; default `open-nic`).
    pub shell: Shell,
    /// Where the inventory gives `shell` (its first line when it does not).
    #[serde(skip)]
    pub shell_at: yaml::Pos,
    /// How images reach the card (`flash_methods`; default `[qspi-xbflash2]`): `programming:
    /// qspi` images are written with the first that writes QSPI, `programming: jtag` ones need
    /// `jtag`.
    pub flash_methods: Vec<FlashMethod>,
    /// Where the inventory gives `flash_methods` (its first line when it does not).
    #[serde(skip)]
    pub flash_methods_at: yaml::Pos,
    /// Sender.
    pub sender: Sender,
    /// Receiver.
    pub receiver: Receiver,
    /// Template of every action (built-in unless overridden).
    pub actions: BTreeMap<Action, Template>,
    /// Timeout and retries of every action (built-in unless overridden).
    pub steps: BTreeMap<Action, StepPolicy>,
    /// Expected duration of every action, seconds (for `orchestrate plan`).
    pub estimates_s: BTreeMap<Action, f64>,
    /// Whether generated stand-ins of absent published traces may replay here, and images not
    /// built yet (`sha256: unbuilt`) be flashed: true only on testbeds that are not the real
    /// hardware (`stand_in_traces: true`, as the emulated one).
    pub stand_in_traces: bool,
    /// The bring-up steps after which the card's reset mode is drawn anew (`mode_redrawn_by`;
    /// among `flash`, `boot` and `flash_jtag`): a testbed fact. By default writing the flash
    /// (with its boot) and a JTAG load, the bring-ups LatencyLab observed.
    pub mode_redrawn_by: Vec<Action>,
}

/// What redraws the reset mode unless the inventory says otherwise.
pub const DEFAULT_MODE_REDRAWN_BY: [Action; 2] = [Action::Flash, Action::FlashJtag];

/// The steps a bring-up may redraw the reset mode by.
pub const BRING_UP_ACTIONS: [Action; 3] = [Action::Flash, Action::Boot, Action::FlashJtag];

impl Inventory {
    /// How this testbed writes `programming: qspi` images, if it can.
    pub fn qspi_method(&self) -> Option<FlashMethod> {
        FlashMethod::for_qspi(&self.flash_methods)
    }

    /// Whether a bring-up made of `steps` redraws the reset mode on this testbed.
    pub fn redraws_mode(&self, steps: impl IntoIterator<Item = Action>) -> bool {
        steps.into_iter().any(|a| self.mode_redrawn_by.contains(&a))
    }
}

// Beside the inventory rather than in `layout`: the layout names files below two work folders and
// needs nothing else of an inventory, which uses it for its step variables.
impl RemoteLayout {
    /// The layout below the work folders of `inv`'s hosts.
    pub fn of(inv: &Inventory) -> RemoteLayout {
        RemoteLayout::new(&inv.sender.host.workdir, &inv.receiver.host.workdir)
    }
}

impl Serialize for Template {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.source())
    }
}

/// Built-in duration estimates of actions, seconds (from the OCT procedure's sleeps and timings),
/// with QSPI images written by `qspi`: over JTAG, ESnet's documentation gives about 20 minutes
/// per write (xbflash2 over PCIe: 7–10 minutes; 420 s on the OCT).
pub fn default_estimate_with(a: Action, qspi: FlashMethod) -> f64 {
    match (a, qspi) {
        (Action::Flash, FlashMethod::JtagFlash) => 1200.0,
        (Action::Boot, FlashMethod::JtagFlash) => 40.0,
        _ => default_estimate(a),
    }
}

/// Built-in duration estimates of actions, seconds (from the OCT procedure's sleeps and timings).
pub fn default_estimate(a: Action) -> f64 {
    match a {
        Action::Flash => 420.0,
        Action::FlashJtag => 90.0,
        Action::Boot => 30.0,
        Action::DriverReload => 15.0,
        Action::PcieRemove => 3.0,
        Action::PcieRescan => 6.0,
        Action::TableLoad => 3.0,
        Action::AgentStart | Action::ReflectorStart => 5.0,
        Action::RegisterInit | Action::HealthCheck | Action::Readback => 0.1,
        Action::CaptureStart | Action::CaptureStop => 1.0,
        Action::ResetMethodClear | Action::DriverBind | Action::AgentStop => 1.0,
        Action::Replay | Action::Originate => 0.0,
    }
}

impl Inventory {
    /// Variables for one step. `ctx` supplies the schedule-dependent ones.
    pub fn vars(&self, ctx: &StepContext<'_>) -> Vars {
        let r = &self.receiver;
        let s = &self.sender;
        let layout = RemoteLayout::of(self);
        let session_dir = layout.session_dir(ctx.session_name);
        let word = |v: &str| TemplateValue::Word(v.to_string());
        let list = |v: &[String]| TemplateValue::List(v.to_vec());
        let mut v = Vars::new();
        v.insert("agent", word(&r.agent));
        v.insert("agent_backend", word(&r.backend));
        v.insert("agent_pidfile", word(&layout.agent_pidfile()));
        let pf0_sysfs = format!("/sys/bus/pci/devices/{}", r.fpga_pci[0].full());
        v.insert("bar_file", word(&format!("{pf0_sysfs}/resource{}", r.register_bar)));
        v.insert("bitstream", word(&layout.bitstream(ctx.bitstream_file)));
        v.insert("bitstream_sha256", word(ctx.bitstream_sha256));
        v.insert("capture_file", word(&layout.capture_file(ctx.session_name, ctx.run.unwrap_or(0))));
        v.insert("capture_iface", word(&s.capture_iface));
        // The agent's `--ports`: as many of the capture interfaces as the plan captures.
        let capture = r.capture_ifaces();
        let captured = capture[..ctx.ports.min(capture.len())].join(",");
        v.insert("capture_ports", word(&captured));
        v.insert("cmacs", word(&self.board.facts().cmacs.to_string()));
        v.insert("capture_tstamp", word(&s.capture_tstamp));
        v.insert("capture_pidfile", word(&layout.capture_pidfile()));
        if let Some(k) = &r.config_fpga_key {
            v.insert("config_fpga_key", word(k));
        }
        let as_user =
            r.config_fpga_user.as_ref().map_or_else(Vec::new, |u| vec!["sudo".into(), "-u".into(), u.clone()]);
        v.insert("config_fpga_as", list(&as_user));
        v.insert("xbflash2_args", list(&r.xbflash2_args));
        v.insert("devbind", word(&r.devbind));
        // The EAL's arguments go to the DPDK backend only (the level's backend, if a factor sets it).
        let backend = ctx.overrides.iter().find(|(n, _)| *n == "agent_backend").map_or(r.backend.as_str(), |o| o.1);
        v.insert("eal_args", list(if backend == "dpdk" { &r.eal_args } else { &[] }));
        // The kernel backends capture interfaces by name; DPDK its ports 0 and 1 (the FPGA's functions).
        let ports_args = match backend {
            "dpdk" => Vec::new(),
            _ => vec!["--ports".to_string(), captured],
        };
        v.insert("ports_args", list(&ports_args));
        v.insert("fpga_ifaces", list(&r.fpga_ifaces));
        v.insert("fpga_pci", TemplateValue::List(r.fpga_pci.iter().map(Bdf::full).collect()));
        v.insert("fpga_pf0", word(&r.fpga_pci[0].full()));
        v.insert("fpga_pf0_sysfs", word(&pf0_sysfs));
        v.insert("jtag_device", word(&r.jtag_device));
        v.insert("jtag_target", word(&r.jtag_target));
        v.insert("sn_cfg", list(&r.sn_cfg));
        v.insert("sn_p4", list(&r.sn_p4));
        v.insert("hw_server", word(&r.hw_server));
        v.insert("qspi_part", word(self.board.facts().qspi_part));
        if let Some(rp) = &r.root_port {
            v.insert("root_port_sysfs", word(&format!("/sys/bus/pci/devices/{}", rp.full())));
        }
        v.insert("numa_node", word(&r.numa_node.to_string()));
        if let Some(o) = &r.onic_module {
            v.insert("onic_module", word(o));
        }
        v.insert("pacing_pps", word(&ctx.pacing_pps.to_string()));
        // tcpreplay's pacing: even (`--pps`) or the trace's own gaps, sped up (`--multiplier`).
        let pace = match ctx.timing {
            Timing::Pps => format!("--pps={}", ctx.pacing_pps),
            Timing::Trace { multiplier } => format!("--multiplier={multiplier}"),
        };
        v.insert("pace_args", word(&pace));
        // tcpreplay's bursts; nothing for evenly paced probes (the documented command).
        let burst = if ctx.burst > 1 { vec![format!("--pps-multi={}", ctx.burst)] } else { Vec::new() };
        v.insert("burst_args", list(&burst));
        v.insert("burst", word(&ctx.burst.to_string()));
        let cores: Vec<String> = r.poller_cores.iter().map(u32::to_string).collect();
        v.insert("poller_cores", word(&cores.join(",")));
        v.insert("probe_format", word(ctx.probe_format));
        v.insert("program", word(ctx.program));
        v.insert("qspi_bar", word(&r.qspi_bar.to_string()));
        if let Some(q) = &r.qspi_pci {
            v.insert("qspi_pci", word(&q.to_string()));
        }
        let reflect_args = match (&r.reflect_port, r.capture.reflect_dst_mac, ctx.reflect) {
            (Some(p), Some(mac), true) => {
                vec!["--reflect-port".to_string(), p.clone(), "--reflect-dst-mac".into(), mac.to_string()]
            }
            _ => Vec::new(),
        };
        v.insert("reflect_args", list(&reflect_args));
        // AF_PACKET's ring slots hold the session's longest frame, with room for what a program
        // adds, unless the inventory says how long.
        let longest_frame = match backend {
            "af-packet" => r
                .capture
                .longest_frame
                .or(ctx.longest_frame.map(|l| l.saturating_add(latency_proto::capture::FRAME_GROWTH))),
            _ => None,
        };
        let capture =
            latency_proto::capture::CaptureOptions { reflect_dst_mac: None, longest_frame, ..r.capture.clone() };
        let mut capture_args = capture.args();
        if let Some(soak) = ctx.soak {
            capture_args.extend(["--histogram-interval-s".into(), soak.interval_s.to_string()]);
            if !soak.records {
                capture_args.push("--no-records".into());
            }
        }
        v.insert("capture_args", list(&capture_args));
        // The reflector's return path: out of the reflect NIC to the sender's capture NIC.
        let echo_args = match (&r.reflect_port, r.capture.reflect_dst_mac) {
            (Some(p), Some(mac)) => vec!["--tx-port".to_string(), p.clone(), "--dst-mac".into(), mac.to_string()],
            _ => Vec::new(),
        };
        v.insert("echo_args", list(&echo_args));
        v.insert("originate_file", word(&layout.originate_file(ctx.session_name, ctx.run.unwrap_or(0))));
        v.insert("pipeline_iface", word(r.fpga_ifaces.first().map_or("", String::as_str)));
        v.insert("pipeline_core", word(&r.poller_cores.first().map_or(String::new(), u32::to_string)));
        v.insert("sender_agent", word(&s.agent));
        v.insert("replay_core", word(&s.replay_core.to_string()));
        v.insert("run", word(&ctx.run.map_or(String::new(), |r| r.to_string())));
        v.insert("sender_iface", word(&s.interface));
        v.insert("session", word(&ctx.session.to_string()));
        v.insert("session_dir", word(&session_dir));
        let table = ctx.table.and_then(|t| t.split_once('/')).map(|(program, file)| layout.table(program, file));
        v.insert("table", list(&table.into_iter().collect::<Vec<_>>()));
        // A program's own compiled driver runs from its folder (LatencyLab); otherwise the
        // inventory's driver is given the plan's table file.
        let (dir, driver) = match ctx.table_driver_dir {
            Some(d) => (format!("{}/{d}", r.p4_builds), "./driver".to_string()),
            None => (layout.workdir(Role::Receiver).to_string(), r.table_driver.clone()),
        };
        v.insert("table_driver", word(&driver));
        v.insert("table_driver_dir", word(&dir));
        v.insert("trace", word(&layout.trace(ctx.trace_file)));
        v.insert("vivado", word(&r.vivado));
        v.insert("workdir", word(layout.workdir(Role::Receiver)));
        for &(name, value) in ctx.overrides {
            let words = value.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
            v.insert(name, if LIST_VARIABLES.contains(&name) { list(&words) } else { word(value) });
        }
        v
    }
}

/// The agent's receive backends, as `receiver.backend` and an `agent_backend` factor name them.
pub const BACKENDS: [(&str, &str); 3] = [("dpdk", "dpdk"), ("af-packet", "af-packet"), ("af-xdp", "af-xdp")];

/// The schedule-dependent values of a step's variables.
pub struct StepContext<'a> {
    /// Program (or null group) name.
    pub program: &'a str,
    /// Session number, from 1.
    pub session: u32,
    /// `program_sN`.
    pub session_name: &'a str,
    /// Run number, from 1, for run steps.
    pub run: Option<u32>,
    /// Image file name.
    pub bitstream_file: &'a str,
    /// Image sha256.
    pub bitstream_sha256: &'a str,
    /// Table file name, if any.
    pub table: Option<&'a str>,
    /// The image's table driver folder (relative to `p4_builds`), if it has one.
    pub table_driver_dir: Option<&'a str>,
    /// Trace file name.
    pub trace_file: &'a str,
    /// Replay pacing.
    pub pacing_pps: u32,
    /// How the run's probes are timed.
    pub timing: Timing,
    /// Template variables a factor level sets, with their values (they replace the inventory's).
    pub overrides: &'a [(&'static str, &'a str)],
    /// Probes sent back to back in each interval (1: evenly paced).
    pub burst: u32,
    /// Probe id format name.
    pub probe_format: &'a str,
    /// Whether the study reflects probes to the sender.
    pub reflect: bool,
    /// Soak mode, when the plan asks for it.
    pub soak: Option<Soak>,
    /// Capture ports the plan uses (2, or more with `port_pairs`).
    pub ports: usize,
    /// The longest frame the session's runs send, bytes, where known: the AF_PACKET agent's ring
    /// slots hold it and [`FRAME_GROWTH`](latency_proto::capture::FRAME_GROWTH) more, unless the
    /// inventory's `longest_frame` says otherwise.
    pub longest_frame: Option<u16>,
}

/// Decode an inventory file.
pub fn decode(d: &mut Decoder, root: &Node) -> Option<Inventory> {
    let mut m = d.map(root, "inventory")?;
    let m_pos = m.pos;
    let name = m.required(d, "name", Decoder::ident);
    let board = m.or(d, "board", Board::U280, crate::bitstream::decode_board);
    let board_at = m.at("board").unwrap_or(yaml::Pos { line: 1, col: 1 });
    let shell = m.or(d, "shell", Shell::OpenNic, |d, n| d.choice(n, &Shell::WORDS));
    let shell_at = m.at("shell").unwrap_or(yaml::Pos { line: 1, col: 1 });
    let flash_methods = m.or(d, "flash_methods", vec![FlashMethod::QspiXbflash2], decode_flash_methods);
    let flash_methods_at = m.at("flash_methods").unwrap_or(yaml::Pos { line: 1, col: 1 });
    let sender = m.required(d, "sender", hosts::decode_sender);
    let receiver = m.required(d, "receiver", hosts::decode_receiver);
    let receiver_at = m.at("receiver");
    let actions = m.or(d, "actions", BTreeMap::new(), decode_actions);
    let steps = m.or(d, "steps", BTreeMap::new(), decode_steps);
    let estimates = m.or(d, "estimates_s", BTreeMap::new(), decode_estimates);
    let stand_in_traces = m.or(d, "stand_in_traces", false, Decoder::boolean);
    let mode_redrawn_by = m.or(d, "mode_redrawn_by", DEFAULT_MODE_REDRAWN_BY.to_vec(), decode_redrawn_by);
    m.done(d);

    // A one-CMAC board has one FPGA port.
    if let (Some(b), Some(r)) = (board, &receiver)
        && b.facts().cmacs == 1
        && r.fpga_ifaces.len() > 1
    {
        d.error(
            r.fpga_ifaces_at.unwrap_or(m_pos),
            format!(
                "`fpga_ifaces` lists {} interfaces but a {} has one CMAC, so one FPGA port (the pipeline's): capture \
                 the bypass copy on a NIC port with `bypass_iface`",
                r.fpga_ifaces.len(),
                b.name().to_uppercase()
            ),
        );
        return None;
    }
    // ESnet images written over PCIe boot only after a power cycle (esnet-smartnic-fw
    // README.SYSTEM.SETUP.md), which no session can make.
    if let (Some(Shell::EsnetSmartnic), Some(methods)) = (shell, &flash_methods)
        && methods.contains(&FlashMethod::QspiXbflash2)
    {
        d.error(
            flash_methods_at,
            "the esnet-smartnic shell boots an image written over PCIe (`qspi-xbflash2`) only after a power cycle \
             (`ipmitool chassis power cycle`, esnet-smartnic-fw's README.SYSTEM.SETUP.md), which a session cannot \
             make: use `jtag` or `jtag-flash`",
        );
        return None;
    }
    let methods = flash_methods.as_ref()?;
    let qspi = FlashMethod::for_qspi(methods);
    let mut all_actions = BTreeMap::new();
    for a in Action::ALL {
        let t = match actions.as_ref().and_then(|o| o.get(&a)) {
            Some(t) => t.clone(),
            None => Template::parse(a.name(), &a.default_template(shell?, methods)).ok()?,
        };
        all_actions.insert(a, t);
    }
    // Every command this testbed runs has a value for each variable it uses: the receiver gives
    // the optional keys behind them.
    if let Some(r) = &receiver {
        // The flash method a bring-up action belongs to; the shell's own actions have none.
        let method_of = |a: Action| match a {
            Action::Flash | Action::Boot => qspi,
            Action::FlashJtag => methods.contains(&FlashMethod::Jtag).then_some(FlashMethod::Jtag),
            _ => None,
        };
        for a in Action::ALL {
            // The write, boot or load of a method the testbed lacks never runs.
            if BRING_UP_ACTIONS.contains(&a) && method_of(a).is_none() {
                continue;
            }
            let Some((key, what)) = all_actions[&a].variables().find_map(|v| r.unset_key(v)) else { continue };
            let (at, message) = match method_of(a) {
                Some(m) => (flash_methods_at, format!("`{m}` needs `receiver.{key}`, {what}, for its `{a}` command")),
                None => (
                    receiver_at.unwrap_or(m_pos),
                    format!("the {} shell's `{a}` command needs `receiver.{key}`, {what}", shell?),
                ),
            };
            d.error(at, message);
            return None;
        }
    }
    let steps = Action::ALL
        .into_iter()
        .map(|a| (a, steps.as_ref().and_then(|s| s.get(&a)).copied().unwrap_or_else(|| default_policy(a))))
        .collect();
    let estimates_s = Action::ALL
        .into_iter()
        .map(|a| {
            let estimate = || default_estimate_with(a, qspi.unwrap_or(FlashMethod::QspiXbflash2));
            (a, estimates.as_ref().and_then(|e| e.get(&a)).copied().unwrap_or_else(estimate))
        })
        .collect();
    Some(Inventory {
        path: d.file().to_path_buf(),
        name: name?,
        board: board?,
        board_at,
        shell: shell?,
        shell_at,
        flash_methods: flash_methods?,
        flash_methods_at,
        sender: sender?,
        receiver: receiver?,
        actions: all_actions,
        steps,
        estimates_s,
        stand_in_traces: stand_in_traces?,
        mode_redrawn_by: mode_redrawn_by?,
    })
}

fn decode_flash_methods(d: &mut Decoder, n: &Node) -> Option<Vec<FlashMethod>> {
    let items = d.seq(n)?;
    let list: Option<Vec<FlashMethod>> = items.iter().map(|v| d.choice(v, &FlashMethod::WORDS)).collect();
    if items.is_empty() {
        d.error(n.pos, "`flash_methods` needs at least one of `qspi-xbflash2`, `jtag`, `jtag-flash`");
        return None;
    }
    list
}

fn decode_redrawn_by(d: &mut Decoder, n: &Node) -> Option<Vec<Action>> {
    let names: Vec<(&str, Action)> = BRING_UP_ACTIONS.iter().map(|a| (a.name(), *a)).collect();
    let items = d.seq(n)?;
    let list: Vec<Option<Action>> = items.iter().map(|v| d.choice(v, &names)).collect();
    if items.is_empty() {
        d.error(n.pos, "`mode_redrawn_by` needs at least one of `flash`, `boot`, `flash_jtag`");
        return None;
    }
    list.into_iter().collect()
}

fn decode_actions(d: &mut Decoder, n: &Node) -> Option<BTreeMap<Action, Template>> {
    let mut m = d.map(n, "actions")?;
    let (entries, mut ok) = m.among(d, &Action::NAMES, "action");
    let mut out = BTreeMap::new();
    for (i, v) in entries {
        let (a, key) = (Action::ALL[i], Action::ALL[i].name());
        let Some(src) = d.string(v) else {
            ok = false;
            continue;
        };
        match Template::parse(key, &src) {
            Ok(t) => {
                for var in t.variables() {
                    if !VARIABLES.contains(&var) {
                        let hint = yaml::closest(var, VARIABLES)
                            .map(|k| format!(" (did you mean `{k}`?)"))
                            .unwrap_or_default();
                        d.error(v.pos, format!("template of `{key}` uses unknown variable `{var}`{hint}"));
                        ok = false;
                    }
                }
                for m in t.misplaced(|var| LIST_VARIABLES.contains(&var)) {
                    d.error(v.pos, format!("template of `{key}`: {}", m.message));
                    ok = false;
                }
                out.insert(a, t);
            }
            Err(e) => {
                d.error(v.pos, format!("template of `{key}`: {e}"));
                ok = false;
            }
        }
    }
    ok.then_some(out)
}

fn decode_estimates(d: &mut Decoder, n: &Node) -> Option<BTreeMap<Action, f64>> {
    let mut m = d.map(n, "estimates_s")?;
    let (entries, mut ok) = m.among(d, &Action::NAMES, "action");
    let mut out = BTreeMap::new();
    for (i, v) in entries {
        match d.number(v, 0.0..=86_400.0) {
            Some(s) => {
                out.insert(Action::ALL[i], s);
            }
            None => ok = false,
        }
    }
    ok.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_template_parses_uses_known_variables_and_whole_words() {
        for shell in Shell::ALL {
            for method in FlashMethod::ALL {
                for a in Action::ALL {
                    let what = format!("{shell} {method} {}", a.name());
                    let t = Template::parse(a.name(), &a.default_template(shell, &[method])).unwrap();
                    for v in t.variables() {
                        assert!(VARIABLES.contains(&v), "{what}: {v}");
                    }
                    assert_eq!(t.misplaced(|v| LIST_VARIABLES.contains(&v)), [], "{what}");
                    assert!(!t.source().contains('\n'), "{what}: one line");
                }
            }
        }
    }

    #[test]
    fn the_emulated_testbed_templates_keep_the_whole_word_rule() {
        let path = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../testbeds/emulated.yaml"));
        let root = yaml::parse(path, &std::fs::read_to_string(path).unwrap()).unwrap();
        let mut d = Decoder::new(path);
        let mut m = d.map(&root, "inventory").unwrap();
        let node = m.get(&mut d, "actions").unwrap();
        let actions = decode_actions(&mut d, node).unwrap();
        assert!(d.diags.is_empty(), "{:?}", d.diags);
        assert!(actions.len() > 10);
    }

    /// An inventory's template is plain `{{ variable }}` output: minijinja's other syntax, which
    /// could compute a value or take it around the shell-quoting, is refused at its position.
    #[test]
    fn inventory_templates_with_engine_syntax_are_refused_where_they_stand() {
        let path = std::path::Path::new("inv.yaml");
        let src = "actions:\n  replay: tcpreplay -i {{ sender_iface|safe }} {{ trace }}\n  boot: \"{% if run %}reboot{% endif %}\"\n  readback: echo ${#x} {{ agent }}\n";
        let root = yaml::parse(path, src).unwrap();
        let mut d = Decoder::new(path);
        let mut m = d.map(&root, "inventory").unwrap();
        let node = m.get(&mut d, "actions").unwrap();
        assert!(decode_actions(&mut d, node).is_none());
        let got: Vec<String> = d.diags.iter().map(|e| format!("{}:{}: {}", e.pos.line, e.pos.col, e.message)).collect();
        assert_eq!(
            got,
            [
                "2:11: template of `replay`: `{{ sender_iface|safe }}` is not a valid placeholder (it names one \
                 variable: no filters, expressions or whitespace control)",
                "3:9: template of `boot`: `{%` opens a template statement, which command templates do not have \
                 (only `{{ variable }}` placeholders) at `{% if run %}reboot{% endif %}`",
                "4:13: template of `readback`: `{#` opens a template comment, which command templates do not have \
                 (only `{{ variable }}` placeholders) at `{#x} {{ agent }}`",
            ]
        );
    }

    #[test]
    fn action_names_round_trip() {
        for a in Action::ALL {
            assert_eq!(Action::from_name(a.name()), Some(a));
        }
        assert_eq!(Action::from_name("flashh"), None);
    }

    /// The step templates get their paths from the inventory's variables; they must name the
    /// files the testbed itself reads and writes.
    #[test]
    fn the_template_variables_name_the_same_files() {
        let path = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../testbeds/oct-u280.yaml"));
        let mut diags = Vec::new();
        let mut inv = yaml::load_file(path, &mut diags, decode).unwrap();
        inv.sender.host.workdir = "/var/tmp/s".into();
        inv.receiver.host.workdir = "/var/tmp/r".into();
        let l = RemoteLayout::of(&inv);
        let ctx = StepContext {
            program: "forward",
            session: 1,
            session_name: "forward_s1",
            run: Some(2),
            bitstream_file: "forward.mcs",
            bitstream_sha256: "00",
            table: Some("forward/t.txt"),
            table_driver_dir: None,
            trace_file: "forward_500.pcap",
            pacing_pps: 2000,
            timing: Timing::Pps,
            overrides: &[],
            burst: 1,
            probe_format: "latencylab",
            reflect: true,
            soak: None,
            ports: 2,
            longest_frame: Some(212),
        };
        let vars = inv.vars(&ctx);
        let word = |name: &str| match vars.get(name) {
            Some(TemplateValue::Word(w)) => w.clone(),
            other => panic!("{name}: {other:?}"),
        };
        // The template variables are the layout's paths, spelled out here by hand.
        for (name, path) in [
            ("agent_pidfile", "/var/tmp/r/agent.pid"),
            ("capture_pidfile", "/var/tmp/s/capture.pid"),
            ("session_dir", "/var/tmp/r/runs/forward_s1"),
            ("capture_file", "/var/tmp/s/captures/forward_s1-run02.pcap"),
            ("originate_file", "/var/tmp/s/captures/forward_s1-run02.arrows"),
            ("capture_ports", "enp59s0f0,enp59s0f1"),
            ("trace", "/var/tmp/s/traces/forward_500.pcap"),
            ("bitstream", "/var/tmp/r/bitstreams/forward.mcs"),
            ("workdir", "/var/tmp/r"),
        ] {
            assert_eq!(word(name), path, "{name}");
        }
        assert!(matches!(vars.get("table"), Some(TemplateValue::List(t)) if t == &["/var/tmp/r/tables/forward/t.txt"]));
        assert_eq!(l.control_pipe("forward_s1"), "/var/tmp/r/runs/forward_s1/ctl");
        // The EAL's arguments only for the DPDK backend, the inventory's or the level's.
        let eal = |inv: &Inventory, ctx: &StepContext<'_>| match inv.vars(ctx).get("eal_args") {
            Some(TemplateValue::List(a)) => a.len(),
            other => panic!("eal_args: {other:?}"),
        };
        assert!(!inv.receiver.eal_args.is_empty() && eal(&inv, &ctx) == inv.receiver.eal_args.len());
        // AF_PACKET's ring slots: the session's longest frame (212 B) and 64 B for what a program
        // adds, or the inventory's; other backends get no slot size.
        let longest = |inv: &Inventory, ctx: &StepContext<'_>| match inv.vars(ctx).get("capture_args") {
            Some(TemplateValue::List(a)) => {
                a.iter().position(|w| w == "--longest-frame").map(|i| a[i + 1].parse::<u32>().unwrap())
            }
            other => panic!("capture_args: {other:?}"),
        };
        assert_eq!(longest(&inv, &ctx), None);
        inv.receiver.backend = "af-packet".into();
        assert_eq!(eal(&inv, &ctx), 0);
        assert_eq!(longest(&inv, &ctx), Some(276));
        assert_eq!(longest(&inv, &StepContext { longest_frame: None, ..ctx }), None);
        let dpdk = [("agent_backend", "dpdk")];
        assert_eq!(eal(&inv, &StepContext { overrides: &dpdk, ..ctx }), inv.receiver.eal_args.len());
        assert_eq!(longest(&inv, &StepContext { overrides: &dpdk, ..ctx }), None);
        inv.receiver.capture.longest_frame = Some(1500);
        assert_eq!(longest(&inv, &ctx), Some(1500));
        assert_eq!(l.events("forward_s1"), "/var/tmp/r/runs/forward_s1/events.jsonl");
    }
}

//! Testbed inventories (`testbeds/<name>.yaml`): the hosts, the receiver's FPGA and NICs, and the
//! command template of every host action.
//!
//! Every action has a built-in template modelled on the documented OCT U280 procedure (flash with
//! `config-fpga` + `xbflash2`, `onic` reload, PCIe remove/rescan, `reset_method` clear, `vfio-pci`
//! bind, table driver, register init, DPDK agent, `tcpreplay`, hardware-timestamp `tcpdump`); an
//! inventory overrides any of them under `actions:`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use super::template::{Template, TemplateValue, Vars};
use super::yaml::{self, Decoder, Diagnostic, Node, Pos};
use super::{Plan, StepPolicy, decode_steps, default_policy};

/// A host action: one step of a session's bring-up, of a run, or of the teardown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Write the bitstream to the card's flash (`config-fpga reset` + `xbflash2 program --spi`);
    /// images whose manifest says `programming: qspi`.
    Flash,
    /// Load the bitstream over JTAG with Vivado's hardware manager (volatile, no boot needed);
    /// images whose manifest says `programming: jtag`.
    FlashJtag,
    /// Boot the FPGA from the new image (`config-fpga boot`).
    Boot,
    /// Reload the `onic` kernel driver.
    DriverReload,
    /// Unbind the FPGA functions and remove them from the PCI bus.
    PcieRemove,
    /// Rescan the PCI bus and check that the functions are back.
    PcieRescan,
    /// Load the program's tables (table driver).
    TableLoad,
    /// Clear `reset_method` so that vfio's bus reset does not kill the shell.
    ResetMethodClear,
    /// Bind the FPGA functions to `vfio-pci`.
    DriverBind,
    /// Start the receiver agent (a long-running process under `setsid`).
    AgentStart,
    /// Write QDMA queue config, indirection tables and CMAC enables.
    RegisterInit,
    /// Check the BAR is readable and both CMAC RX status registers read 0x3.
    HealthCheck,
    /// Read back what the card runs (kept in the provenance, per session).
    Readback,
    /// Start the sender's hardware-timestamp capture (reflect mode).
    CaptureStart,
    /// Replay the probe trace at the plan's pacing.
    Replay,
    /// Stop the sender's capture.
    CaptureStop,
    /// Stop the receiver agent.
    AgentStop,
}

/// Which host an action runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The host that replays probes (and captures reflected ones).
    Sender,
    /// The host with the FPGA and the agent.
    Receiver,
}

impl Role {
    /// Lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Role::Sender => "sender",
            Role::Receiver => "receiver",
        }
    }
}

impl Action {
    /// Every action, in execution order.
    pub const ALL: [Action; 17] = [
        Action::Flash,
        Action::FlashJtag,
        Action::Boot,
        Action::DriverReload,
        Action::PcieRemove,
        Action::PcieRescan,
        Action::TableLoad,
        Action::ResetMethodClear,
        Action::DriverBind,
        Action::AgentStart,
        Action::RegisterInit,
        Action::HealthCheck,
        Action::Readback,
        Action::CaptureStart,
        Action::Replay,
        Action::CaptureStop,
        Action::AgentStop,
    ];

    /// Name used in plans, inventories and the journal.
    pub fn name(self) -> &'static str {
        match self {
            Action::Flash => "flash",
            Action::FlashJtag => "flash_jtag",
            Action::Boot => "boot",
            Action::DriverReload => "driver_reload",
            Action::PcieRemove => "pcie_remove",
            Action::PcieRescan => "pcie_rescan",
            Action::TableLoad => "table_load",
            Action::ResetMethodClear => "reset_method_clear",
            Action::DriverBind => "driver_bind",
            Action::AgentStart => "agent_start",
            Action::RegisterInit => "register_init",
            Action::HealthCheck => "health_check",
            Action::Readback => "readback",
            Action::CaptureStart => "capture_start",
            Action::Replay => "replay",
            Action::CaptureStop => "capture_stop",
            Action::AgentStop => "agent_stop",
        }
    }

    /// The action called `name`.
    pub fn from_name(name: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Host the action runs on.
    pub fn role(self) -> Role {
        match self {
            Action::CaptureStart | Action::Replay | Action::CaptureStop => Role::Sender,
            _ => Role::Receiver,
        }
    }

    /// Built-in template, following the OCT U280 procedure.
    pub fn default_template(self) -> &'static str {
        match self {
            Action::Flash => {
                "config-fpga reset {{ config_fpga_key }} && printf 'y\\n' | xbflash2 program --spi --image {{ bitstream }} -d {{ qspi_pci }} --bar {{ qspi_bar }}"
            }
            // The Tcl script is written into the work folder and gets the image and the device
            // as arguments, so that no value is ever spliced into Tcl.
            Action::FlashJtag => {
                "printf '%s\\n' 'open_hw_manager' 'connect_hw_server' 'open_hw_target' 'set dev [lindex [get_hw_devices [lindex $argv 1]] 0]' 'current_hw_device $dev' 'set_property PROGRAM.FILE [lindex $argv 0] $dev' 'program_hw_devices $dev' 'close_hw_manager' > {{ workdir }}/program-jtag.tcl && {{ vivado }} -mode batch -nojournal -nolog -notrace -source {{ workdir }}/program-jtag.tcl -tclargs {{ bitstream }} {{ jtag_device }}"
            }
            Action::Boot => "config-fpga boot {{ config_fpga_key }} && sleep 5",
            Action::DriverReload => {
                "rmmod onic 2>/dev/null; insmod {{ onic_module }} RS_FEC_ENABLED=0 && sleep 10 && for i in {{ fpga_ifaces }}; do ip link set \"$i\" up; done"
            }
            Action::PcieRemove => {
                "{{ devbind }} -u {{ fpga_pci }} 2>/dev/null; for d in {{ fpga_pci }}; do echo 1 > /sys/bus/pci/devices/$d/remove; done; sleep 2"
            }
            Action::PcieRescan => {
                "echo 1 > /sys/bus/pci/rescan && sleep 3 && for d in {{ fpga_pci }}; do test -e /sys/bus/pci/devices/$d || { echo \"$d missing after rescan\" >&2; exit 1; }; done && {{ devbind }} -b onic {{ fpga_pci }} && sleep 2"
            }
            Action::TableLoad => "{{ table_driver }} {{ table }}",
            Action::ResetMethodClear => "echo '' > /sys/bus/pci/devices/{{ fpga_pf0 }}/reset_method",
            Action::DriverBind => "modprobe vfio-pci && {{ devbind }} -b vfio-pci {{ fpga_pci }}",
            Action::AgentStart => {
                "mkdir -p {{ session_dir }} && { setsid {{ agent }} capture --backend dpdk --probe-format {{ probe_format }} --cores {{ poller_cores }} --out {{ session_dir }} --control {{ session_dir }}/ctl --pidfile {{ agent_pidfile }} {{ reflect_args }} -- {{ eal_args }} < /dev/null > {{ session_dir }}/events.jsonl 2> {{ session_dir }}/agent.log & }"
            }
            Action::RegisterInit => "{{ agent }} regs init --bar {{ bar_file }}",
            Action::HealthCheck => "{{ agent }} regs check --bar {{ bar_file }}",
            // The Open-NIC shell's build status (system config register 0x0).
            Action::Readback => "{{ agent }} regs read --bar {{ bar_file }} 0x0",
            // Received frames only (the replay may leave by the same port); untagged ones are
            // ignored when the capture is joined. The capture is ready once tcpdump listens; a
            // NIC without the time-stamp type asked for is an error (tcpdump itself would only
            // warn and stamp with the host clock). A small snapshot and a 16 MiB ring keep every
            // reflection even if tcpdump is not scheduled for a while.
            Action::CaptureStart => {
                "mkdir -p \"$(dirname {{ capture_file }})\" && rm -f {{ capture_file }} && { setsid tcpdump -i {{ capture_iface }} -j {{ capture_tstamp }} -Q in --time-stamp-precision=nano --immediate-mode -s 512 -B 16384 -w {{ capture_file }} < /dev/null > /dev/null 2> {{ capture_file }}.log & echo $! > {{ capture_pidfile }}; } && for t in $(seq 500); do if grep -q 'time stamp is not supported' {{ capture_file }}.log; then cat {{ capture_file }}.log >&2; kill $(cat {{ capture_pidfile }}); rm -f {{ capture_pidfile }}; exit 1; fi; grep -q 'listening on' {{ capture_file }}.log && exit 0; sleep 0.01; done; cat {{ capture_file }}.log >&2; exit 1"
            }
            Action::Replay => {
                "taskset -c {{ replay_core }} tcpreplay -q -T nano -i {{ sender_iface }} --pps={{ pacing_pps }} {{ trace }}"
            }
            // Stop the capture and wait until tcpdump has written its file and exited; its
            // closing counts (captured, dropped by kernel) go to the step log.
            Action::CaptureStop => {
                "p=$(cat {{ capture_pidfile }}) && kill -INT \"$p\" && for t in $(seq 500); do s=$(awk '{print $3}' /proc/\"$p\"/stat 2>/dev/null); if [ -z \"$s\" ] || [ \"$s\" = Z ]; then rm -f {{ capture_pidfile }}; tail -n 3 {{ capture_file }}.log; exit 0; fi; sleep 0.01; done; echo \"tcpdump $p did not stop\" >&2; exit 1"
            }
            Action::AgentStop => "kill -TERM $(cat {{ agent_pidfile }}) && rm -f {{ agent_pidfile }}",
        }
    }
}

/// The variables every template may use. Values come from the inventory, the plan and the
/// position in the schedule (see [`Inventory::vars`]).
pub const VARIABLES: &[&str] = &[
    "agent",
    "agent_pidfile",
    "bar_file",
    "bitstream",
    "bitstream_sha256",
    "capture_file",
    "capture_iface",
    "capture_pidfile",
    "capture_tstamp",
    "config_fpga_key",
    "devbind",
    "eal_args",
    "fpga_ifaces",
    "fpga_pci",
    "fpga_pf0",
    "jtag_device",
    "numa_node",
    "onic_module",
    "pacing_pps",
    "poller_cores",
    "probe_format",
    "program",
    "qspi_bar",
    "qspi_pci",
    "reflect_args",
    "replay_core",
    "run",
    "sender_iface",
    "session",
    "session_dir",
    "table",
    "table_driver",
    "trace",
    "vivado",
    "workdir",
];

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
}

/// Receiver settings.
#[derive(Clone, Debug, Serialize)]
pub struct Receiver {
    /// Host.
    pub host: Host,
    /// PCI addresses of the FPGA's functions (PF0 first).
    pub fpga_pci: Vec<String>,
    /// Device argument of `xbflash2 -d`.
    pub qspi_pci: String,
    /// Vivado's executable (JTAG programming).
    pub vivado: String,
    /// The FPGA's name in Vivado's hardware manager (`get_hw_devices`).
    pub jtag_device: String,
    /// BAR given to `xbflash2 --bar`.
    pub qspi_bar: u32,
    /// BAR index of the Open-NIC-Shell registers on PF0.
    pub register_bar: u32,
    /// Key file of `config-fpga`.
    pub config_fpga_key: String,
    /// Path of `onic.ko`.
    pub onic_module: String,
    /// Kernel netdevs of the FPGA functions while `onic` is bound.
    pub fpga_ifaces: Vec<String>,
    /// Path of `dpdk-devbind.py`.
    pub devbind: String,
    /// Command that loads a `table_add` entries file into the P4 tables (VitisNetP4 driver).
    pub table_driver: String,
    /// Path of the `latency-agent` binary on the host.
    pub agent: String,
    /// Poller cores, one per port.
    pub poller_cores: Vec<u32>,
    /// NUMA node of the FPGA.
    pub numa_node: u32,
    /// DPDK EAL arguments of the agent: as given, or built from the fields above (see
    /// [`latency_agent::eal::eal_args_from_inventory`]).
    pub eal_args: Vec<String>,
    /// PCI address of the reflect NIC (ConnectX-5).
    pub reflect_pci: Option<String>,
    /// What the agent's `--reflect-port` names in reflect mode: the reflect NIC's DPDK port id
    /// (by default the one after the FPGA's functions), or an interface (AF_PACKET backend).
    pub reflect_port: Option<String>,
}

/// A decoded inventory.
#[derive(Clone, Debug, Serialize)]
pub struct Inventory {
    /// The file.
    pub path: PathBuf,
    /// Safe name.
    pub name: String,
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
}

impl Serialize for Template {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.source())
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
        Action::AgentStart => 5.0,
        Action::RegisterInit | Action::HealthCheck | Action::Readback => 0.1,
        Action::CaptureStart | Action::CaptureStop => 1.0,
        Action::ResetMethodClear | Action::DriverBind | Action::AgentStop => 1.0,
        Action::Replay => 0.0,
    }
}

impl Inventory {
    /// Folder of a session on the receiver: the agent's run files, `events.jsonl` and its `ctl`
    /// control pipe live there.
    pub fn session_dir(&self, session_name: &str) -> String {
        format!("{}/runs/{session_name}", self.receiver.host.workdir)
    }

    /// The sender's capture of one run's reflected probes (reflect mode).
    pub fn capture_file(&self, session_name: &str, run: u32) -> String {
        format!("{}/captures/{session_name}-run{run:02}.pcap", self.sender.host.workdir)
    }

    /// Variables for one step. `ctx` supplies the schedule-dependent ones.
    pub fn vars(&self, ctx: &StepContext<'_>) -> Vars {
        let r = &self.receiver;
        let s = &self.sender;
        let rwork = &r.host.workdir;
        let swork = &s.host.workdir;
        let session_dir = self.session_dir(ctx.session_name);
        let word = |v: &str| TemplateValue::Word(v.to_string());
        let list = |v: &[String]| TemplateValue::List(v.to_vec());
        let mut v = Vars::new();
        v.insert("agent", word(&r.agent));
        v.insert("agent_pidfile", word(&format!("{rwork}/agent.pid")));
        v.insert("bar_file", word(&format!("/sys/bus/pci/devices/{}/resource{}", r.fpga_pci[0], r.register_bar)));
        v.insert("bitstream", word(&format!("{rwork}/bitstreams/{}", ctx.bitstream_file)));
        v.insert("bitstream_sha256", word(ctx.bitstream_sha256));
        v.insert("capture_file", word(&self.capture_file(ctx.session_name, ctx.run.unwrap_or(0))));
        v.insert("capture_iface", word(&s.capture_iface));
        v.insert("capture_tstamp", word(&s.capture_tstamp));
        v.insert("capture_pidfile", word(&format!("{swork}/capture.pid")));
        v.insert("config_fpga_key", word(&r.config_fpga_key));
        v.insert("devbind", word(&r.devbind));
        v.insert("eal_args", list(&r.eal_args));
        v.insert("fpga_ifaces", list(&r.fpga_ifaces));
        v.insert("fpga_pci", list(&r.fpga_pci));
        v.insert("fpga_pf0", word(&r.fpga_pci[0]));
        v.insert("jtag_device", word(&r.jtag_device));
        v.insert("numa_node", word(&r.numa_node.to_string()));
        v.insert("onic_module", word(&r.onic_module));
        v.insert("pacing_pps", word(&ctx.pacing_pps.to_string()));
        let cores: Vec<String> = r.poller_cores.iter().map(u32::to_string).collect();
        v.insert("poller_cores", word(&cores.join(",")));
        v.insert("probe_format", word(ctx.probe_format));
        v.insert("program", word(ctx.program));
        v.insert("qspi_bar", word(&r.qspi_bar.to_string()));
        v.insert("qspi_pci", word(&r.qspi_pci));
        let reflect_args = match (&r.reflect_port, ctx.reflect) {
            (Some(p), true) => vec!["--reflect-port".to_string(), p.clone()],
            _ => Vec::new(),
        };
        v.insert("reflect_args", list(&reflect_args));
        v.insert("replay_core", word(&s.replay_core.to_string()));
        v.insert("run", word(&ctx.run.map_or(String::new(), |r| r.to_string())));
        v.insert("sender_iface", word(&s.interface));
        v.insert("session", word(&ctx.session.to_string()));
        v.insert("session_dir", word(&session_dir));
        v.insert("table", word(&ctx.table.map_or(String::new(), |t| format!("{rwork}/tables/{t}"))));
        v.insert("table_driver", word(&r.table_driver));
        v.insert("trace", word(&format!("{swork}/traces/{}", ctx.trace_file)));
        v.insert("vivado", word(&r.vivado));
        v.insert("workdir", word(rwork));
        v
    }
}

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
    /// Trace file name.
    pub trace_file: &'a str,
    /// Replay pacing.
    pub pacing_pps: u32,
    /// Probe id format name.
    pub probe_format: &'a str,
    /// Whether the study reflects probes to the sender.
    pub reflect: bool,
}

const KEYS: &[&str] = &["name", "sender", "receiver", "actions", "steps", "estimates_s"];

/// Decode an inventory file.
pub fn decode(d: &mut Decoder, root: &Node) -> Option<Inventory> {
    let mut m = d.map(root, "inventory")?;
    let name = m.req(d, "name").and_then(|n| d.ident(n));
    let sender = m.req(d, "sender").and_then(|n| decode_sender(d, n));
    let receiver = m.req(d, "receiver").and_then(|n| decode_receiver(d, n));
    let actions = match m.get("actions") {
        Some(n) => decode_actions(d, n),
        None => Some(BTreeMap::new()),
    };
    let steps = match m.get("steps") {
        Some(n) => decode_steps(d, n),
        None => Some(BTreeMap::new()),
    };
    let estimates = match m.get("estimates_s") {
        Some(n) => decode_estimates(d, n),
        None => Some(BTreeMap::new()),
    };
    m.finish(d, KEYS);

    let mut all_actions = BTreeMap::new();
    for a in Action::ALL {
        let t = match actions.as_ref().and_then(|o| o.get(&a)) {
            Some(t) => t.clone(),
            None => Template::parse(a.default_template()).ok()?,
        };
        all_actions.insert(a, t);
    }
    let steps = Action::ALL
        .into_iter()
        .map(|a| (a, steps.as_ref().and_then(|s| s.get(&a)).copied().unwrap_or_else(|| default_policy(a))))
        .collect();
    let estimates_s = Action::ALL
        .into_iter()
        .map(|a| (a, estimates.as_ref().and_then(|e| e.get(&a)).copied().unwrap_or_else(|| default_estimate(a))))
        .collect();
    Some(Inventory {
        path: d.file().to_path_buf(),
        name: name?,
        sender: sender?,
        receiver: receiver?,
        actions: all_actions,
        steps,
        estimates_s,
    })
}

fn decode_host(d: &mut Decoder, m: &mut yaml::MapReader<'_>) -> Option<Host> {
    let ssh = m.req(d, "ssh").and_then(|n| decode_ssh(d, n));
    let workdir = match m.get("workdir") {
        Some(n) => d.string(n).and_then(|w| {
            if w.starts_with('/') {
                Some(w)
            } else {
                d.error(n.pos, "`workdir` must be an absolute path on the host");
                None
            }
        }),
        None => Some("/var/tmp/latency".to_string()),
    };
    Some(Host { ssh: ssh?, workdir: workdir? })
}

fn decode_ssh(d: &mut Decoder, n: &Node) -> Option<SshTarget> {
    let mut m = d.map(n, "ssh: `alias`, or `host` + `user`")?;
    let out = if let Some(a) = m.get("alias") {
        let config = m.get("config").map_or(Some(None), |v| d.path(v, true).map(Some));
        d.string(a).zip(config).map(|(alias, config)| SshTarget::Alias { alias, config })
    } else {
        let host = m.req(d, "host").and_then(|v| d.string(v));
        let user = m.req(d, "user").and_then(|v| d.string(v));
        let port = m.get("port").map_or(Some(22), |v| d.int(v, 1..=65535)).map(|p| p as u16);
        let identity = m.get("identity").map_or(Some(None), |v| d.path(v, true).map(Some));
        let known_hosts = m.get("known_hosts").map_or(Some(None), |v| d.path(v, true).map(Some));
        Some(SshTarget::Direct {
            host: host?,
            user: user?,
            port: port?,
            identity: identity?,
            known_hosts: known_hosts?,
        })
    };
    m.finish(d, &["alias", "config", "host", "user", "port", "identity", "known_hosts"]);
    out
}

fn str_list(d: &mut Decoder, n: &Node) -> Option<Vec<String>> {
    let items = d.seq(n)?;
    items.iter().map(|i| d.string(i)).collect::<Vec<_>>().into_iter().collect()
}

fn core_list(d: &mut Decoder, n: &Node) -> Option<Vec<u32>> {
    let items = d.seq(n)?;
    items.iter().map(|i| d.int(i, 0..=4095).map(|c| c as u32)).collect::<Vec<_>>().into_iter().collect()
}

fn pci_list(d: &mut Decoder, n: &Node) -> Option<Vec<String>> {
    let list = str_list(d, n)?;
    let mut ok = !list.is_empty();
    if !ok {
        d.error(n.pos, "at least one PCI address is needed");
    }
    for a in &list {
        if !is_pci_address(a) {
            d.error(n.pos, format!("`{a}` is not a PCI address (DDDD:BB:DD.F)"));
            ok = false;
        }
    }
    ok.then_some(list)
}

/// Whether `s` is a full PCI address `DDDD:BB:DD.F` (hex).
pub fn is_pci_address(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && [0, 1, 2, 3, 5, 6, 8, 9, 11].iter().all(|&i| b[i].is_ascii_hexdigit())
}

fn decode_sender(d: &mut Decoder, n: &Node) -> Option<Sender> {
    let mut m = d.map(n, "sender")?;
    let host = decode_host(d, &mut m);
    let interface = m.req(d, "interface").and_then(|v| d.string(v));
    let replay_core = m.req(d, "replay_core").and_then(|v| d.int(v, 0..=4095)).map(|c| c as u32);
    let capture_tstamp = m.get("capture_tstamp").map_or_else(|| Some("adapter_unsynced".to_string()), |v| d.string(v));
    let capture_iface = m.get("capture_iface").map_or_else(|| interface.clone(), |v| d.string(v));
    m.finish(d, &["ssh", "workdir", "interface", "replay_core", "capture_iface", "capture_tstamp"]);
    Some(Sender {
        host: host?,
        interface: interface?,
        replay_core: replay_core?,
        capture_iface: capture_iface?,
        capture_tstamp: capture_tstamp?,
    })
}

const RECEIVER_KEYS: &[&str] = &[
    "ssh",
    "workdir",
    "fpga_pci",
    "qspi_pci",
    "qspi_bar",
    "vivado",
    "jtag_device",
    "register_bar",
    "config_fpga_key",
    "onic_module",
    "fpga_ifaces",
    "devbind",
    "table_driver",
    "agent",
    "poller_cores",
    "numa_node",
    "eal_args",
    "main_core",
    "dpdk_drivers",
    "reflect_pci",
    "reflect_port",
];

fn decode_receiver(d: &mut Decoder, n: &Node) -> Option<Receiver> {
    let mut m = d.map(n, "receiver")?;
    let host = decode_host(d, &mut m);
    let fpga_pci = m.req(d, "fpga_pci").and_then(|v| pci_list(d, v));
    let qspi_pci = m.req(d, "qspi_pci").and_then(|v| d.string(v));
    let qspi_bar = m.get("qspi_bar").map_or(Some(2), |v| d.int(v, 0..=5)).map(|b| b as u32);
    let register_bar = m.get("register_bar").map_or(Some(2), |v| d.int(v, 0..=5)).map(|b| b as u32);
    let key = m.req(d, "config_fpga_key").and_then(|v| d.string(v));
    let onic = m.req(d, "onic_module").and_then(|v| d.string(v));
    let ifaces = m.get("fpga_ifaces").map_or(Some(Vec::new()), |v| str_list(d, v));
    let devbind = m.get("devbind").map_or(Some("dpdk-devbind.py".into()), |v| d.string(v));
    let vivado = m.get("vivado").map_or(Some("vivado".into()), |v| d.string(v));
    let jtag_device = m.get("jtag_device").map_or(Some("xcu280_0".into()), |v| d.string(v));
    let table_driver = m.get("table_driver").map_or(Some("p4-table-driver".into()), |v| d.string(v));
    let agent = m.get("agent").map_or(Some("latency-agent".into()), |v| d.string(v));
    let cores_node = m.req(d, "poller_cores");
    let cores = cores_node.and_then(|v| core_list(d, v));
    if let (Some(c), Some(node)) = (&cores, cores_node)
        && c.len() != 2
    {
        d.error(node.pos, format!("`poller_cores` needs one core per port (2), found {}", c.len()));
    }
    let numa = m.get("numa_node").map_or(Some(0), |v| d.int(v, 0..=64)).map(|x| x as u32);
    let main_core = m.get("main_core").map_or(Some(None), |v| d.int(v, 0..=4095).map(|c| Some(c as u32)));
    let drivers = m.get("dpdk_drivers").map_or(Some(Vec::new()), |v| str_list(d, v));
    let eal = m.get("eal_args").map(|v| str_list(d, v));
    let reflect = match m.get("reflect_pci") {
        Some(v) => pci_list(d, v).map(|l| l.into_iter().next()),
        None => Some(None),
    };
    // Without literal `eal_args`, the EAL arguments are built from the inventory's own facts.
    let eal = match eal {
        Some(given) => given,
        None => (|| {
            let allow: Vec<String> = fpga_pci.clone()?.into_iter().chain(reflect.clone()?).collect();
            Some(latency_agent::eal::eal_args_from_inventory(
                cores.as_deref()?,
                main_core?,
                numa?,
                &allow,
                &[],
                false,
                None,
                "latency-agent",
                drivers.as_deref()?,
            ))
        })(),
    };
    let reflect_port = match m.get("reflect_port") {
        Some(v) => d.string(v).map(Some),
        None => Some(reflect.clone().flatten().and(fpga_pci.as_ref().map(|f| f.len().to_string()))),
    };
    m.finish(d, RECEIVER_KEYS);
    Some(Receiver {
        host: host?,
        fpga_pci: fpga_pci?,
        qspi_pci: qspi_pci?,
        qspi_bar: qspi_bar?,
        register_bar: register_bar?,
        config_fpga_key: key?,
        onic_module: onic?,
        fpga_ifaces: ifaces?,
        devbind: devbind?,
        vivado: vivado?,
        jtag_device: jtag_device?,
        table_driver: table_driver?,
        agent: agent?,
        poller_cores: cores?,
        numa_node: numa?,
        eal_args: eal?,
        reflect_pci: reflect?,
        reflect_port: reflect_port?,
    })
}

fn action_key(d: &mut Decoder, pos: Pos, key: &str) -> Option<Action> {
    let a = Action::from_name(key);
    if a.is_none() {
        let names: Vec<&str> = Action::ALL.iter().map(|a| a.name()).collect();
        let hint = yaml::closest(key, &names).map(|k| format!(" (did you mean `{k}`?)")).unwrap_or_default();
        d.error(pos, format!("unknown action `{key}`{hint}"));
    }
    a
}

fn decode_actions(d: &mut Decoder, n: &Node) -> Option<BTreeMap<Action, Template>> {
    let mut m = d.map(n, "actions")?;
    let mut out = BTreeMap::new();
    let mut ok = true;
    for (pos, key, v) in m.entries() {
        let (Some(a), Some(src)) = (action_key(d, *pos, key), d.string(v)) else {
            ok = false;
            continue;
        };
        match Template::parse(&src) {
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
    let mut out = BTreeMap::new();
    let mut ok = true;
    for (pos, key, v) in m.entries() {
        match (action_key(d, *pos, key), d.number(v, 0.0..=86_400.0)) {
            (Some(a), Some(s)) => {
                out.insert(a, s);
            }
            _ => ok = false,
        }
    }
    ok.then_some(out)
}

/// Cross-checks between a plan and the inventory it runs on.
pub fn check_plan(plan: &Plan, inv: &Inventory, diags: &mut Vec<Diagnostic>) {
    if plan.protocol.reflect && inv.receiver.reflect_port.is_none() {
        diags.push(Diagnostic {
            file: inv.path.clone(),
            pos: Pos { line: 1, col: 1 },
            message: "plan uses `protocol.reflect` but the receiver has no `reflect_pci` or `reflect_port`".into(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_template_parses_and_uses_known_variables() {
        for a in Action::ALL {
            let t = Template::parse(a.default_template()).unwrap();
            for v in t.variables() {
                assert!(VARIABLES.contains(&v), "{}: {v}", a.name());
            }
        }
    }

    #[test]
    fn action_names_round_trip() {
        for a in Action::ALL {
            assert_eq!(Action::from_name(a.name()), Some(a));
        }
        assert_eq!(Action::from_name("flashh"), None);
    }

    #[test]
    fn pci_addresses() {
        assert!(is_pci_address("0000:3b:00.0"));
        assert!(!is_pci_address("3b:00.0"));
        assert!(!is_pci_address("0000:3b:00.0; reboot"));
    }
}

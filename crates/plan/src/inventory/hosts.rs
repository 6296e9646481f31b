//! Decoding of an inventory's `sender:` and `receiver:`: how each host is reached, and the
//! receiver's FPGA, NICs, cores and tools. Names that end up as command arguments (ssh
//! destinations, interfaces, PCI addresses, DPDK ports) are checked here, each at its own node.

use super::pci::Bdf;
use super::{Host, Receiver, Sender, SshTarget};
use crate::yaml::Decoder;
use crate::yaml::MapReader;
use crate::yaml::Node;
use latency_proto::fastpath::{Check, FastPathPolicy, Verdict};

fn decode_host(d: &mut Decoder, m: &mut MapReader<'_>) -> Option<Host> {
    let ssh = m.required(d, "ssh", decode_ssh);
    let workdir = m.or(d, "workdir", "/var/tmp/latency".to_string(), |d, n| {
        let w = d.string(n)?;
        if w.starts_with('/') {
            Some(w)
        } else {
            d.error(n.pos, "`workdir` must be an absolute path on the host");
            None
        }
    });
    Some(Host { ssh: ssh?, workdir: workdir? })
}

/// A word that becomes an argument of `ssh` on its own (an alias, a host, a user): a leading `-`
/// would make it an option.
fn ssh_word(d: &mut Decoder, n: &Node, what: &str) -> Option<String> {
    let s = d.string(n)?;
    let problem = if s.is_empty() {
        Some("must not be empty")
    } else if s.starts_with('-') {
        Some("must not start with `-` (ssh would read it as an option)")
    } else if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Some("must not contain whitespace or control characters")
    } else {
        None
    };
    match problem {
        Some(p) => {
            d.error(n.pos, format!("ssh {what} `{}` {p}", s.escape_debug()));
            None
        }
        None => Some(s),
    }
}

fn decode_ssh(d: &mut Decoder, n: &Node) -> Option<SshTarget> {
    let mut m = d.map(n, "ssh: `alias`, or `host` + `user`")?;
    let alias = m.optional(d, "alias", |d, v| ssh_word(d, v, "alias"));
    let config = m.optional(d, "config", |d, v| d.path(v, true));
    let host = m.optional(d, "host", |d, v| ssh_word(d, v, "host"));
    let user = m.optional(d, "user", |d, v| ssh_word(d, v, "user"));
    let port = m.optional(d, "port", |d, v| d.uint(v, 1..=65535));
    let identity = m.optional(d, "identity", |d, v| d.path(v, true));
    let known_hosts = m.optional(d, "known_hosts", |d, v| d.path(v, true));
    // An alias names a `Host` of an ssh config, which says everything else.
    let (given, missing) = if m.at("alias").is_some() {
        (&["host", "user", "port", "identity", "known_hosts"][..], &[][..])
    } else {
        (&["config"][..], &["host", "user"][..])
    };
    let mut ok = true;
    for key in given {
        if let Some(pos) = m.at(key) {
            let why = if *key == "config" {
                "is used only with `alias`"
            } else {
                "is not used with `alias`: the ssh config's Host entry gives it"
            };
            d.error(pos, format!("`{key}` {why}"));
            ok = false;
        }
    }
    for key in missing.iter().filter(|k| m.at(k).is_none()) {
        d.error(m.pos, format!("missing key `{key}` (or give `alias`)"));
        ok = false;
    }
    m.done(d);
    if !ok {
        return None;
    }
    match alias? {
        Some(alias) => Some(SshTarget::Alias { alias, config: config? }),
        None => Some(SshTarget::Direct {
            host: host??,
            user: user??,
            port: port?.unwrap_or(22),
            identity: identity?,
            known_hosts: known_hosts?,
        }),
    }
}

/// Why `name` cannot be a Linux network interface name (`dev_valid_name`): at most 15 bytes, not
/// `.` or `..`, no `/`, `:` or whitespace.
fn iface_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("is empty")
    } else if name.len() > 15 {
        Some("is longer than 15 bytes")
    } else if name == "." || name == ".." {
        Some("cannot be `.` or `..`")
    } else if name.chars().any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control()) {
        Some("must not contain `/`, `:`, whitespace or control characters")
    } else {
        None
    }
}

fn iface(d: &mut Decoder, n: &Node) -> Option<String> {
    let s = d.string(n)?;
    match iface_problem(&s) {
        Some(p) => {
            d.error(n.pos, format!("interface name `{}` {p}", s.escape_debug()));
            None
        }
        None => Some(s),
    }
}

/// Every element decoded with `item`, each reporting its own problems.
fn list<T>(d: &mut Decoder, n: &Node, mut item: impl FnMut(&mut Decoder, &Node) -> Option<T>) -> Option<Vec<T>> {
    let items = d.seq(n)?;
    let decoded: Vec<Option<T>> = items.iter().map(|i| item(d, i)).collect();
    decoded.into_iter().collect()
}

fn bdf(d: &mut Decoder, n: &Node, domain_optional: bool) -> Option<Bdf> {
    let s = d.string(n)?;
    Bdf::parse(&s, domain_optional).map_err(|e| d.error(n.pos, e.to_string())).ok()
}

/// A non-empty list of full PCI addresses, each problem at its element.
fn pci_list(d: &mut Decoder, n: &Node) -> Option<Vec<Bdf>> {
    let list = list(d, n, |d, i| bdf(d, i, false))?;
    if list.is_empty() {
        d.error(n.pos, "at least one PCI address is needed");
        return None;
    }
    Some(list)
}

/// The agent's `--reflect-port`: a DPDK port id (a number) or an interface (AF_PACKET backend).
fn reflect_port(d: &mut Decoder, n: &Node) -> Option<String> {
    let s = d.string(n)?;
    if s.is_empty() {
        d.error(n.pos, "`reflect_port` is empty: give the reflect NIC's DPDK port id or an interface name");
        return None;
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        if s.parse::<u16>().is_err() {
            d.error(n.pos, format!("DPDK port id {s} is out of range (0..=65535)"));
            return None;
        }
        return Some(s);
    }
    match iface_problem(&s) {
        Some(p) => {
            let s = s.escape_debug();
            d.error(n.pos, format!("`reflect_port` `{s}` is neither a DPDK port id nor an interface name: it {p}"));
            None
        }
        None => Some(s),
    }
}

pub(super) fn decode_sender(d: &mut Decoder, n: &Node) -> Option<Sender> {
    let mut m = d.map(n, "sender")?;
    let host = decode_host(d, &mut m);
    let interface = m.required(d, "interface", iface);
    let replay_core = m.required(d, "replay_core", |d, v| d.uint(v, 0..=4095));
    let capture_tstamp = m.or(d, "capture_tstamp", "adapter_unsynced".to_string(), Decoder::string);
    let agent = m.or(d, "agent", "latency-agent".into(), Decoder::string);
    let capture_iface = match m.get(d, "capture_iface") {
        Some(v) => iface(d, v),
        None => interface.clone(),
    };
    m.done(d);
    Some(Sender {
        host: host?,
        interface: interface?,
        replay_core: replay_core?,
        capture_iface: capture_iface?,
        capture_tstamp: capture_tstamp?,
        agent: agent?,
    })
}

pub(super) fn decode_receiver(d: &mut Decoder, n: &Node) -> Option<Receiver> {
    let mut m = d.map(n, "receiver")?;
    let host = decode_host(d, &mut m);
    let fpga_pci = m.required(d, "fpga_pci", pci_list);
    let qspi_pci = m.optional(d, "qspi_pci", |d, v| bdf(d, v, true));
    let qspi_bar = m.or(d, "qspi_bar", 2, |d, v| d.uint(v, 0..=5));
    let register_bar = m.or(d, "register_bar", 2, |d, v| d.uint(v, 0..=5));
    let key = m.optional(d, "config_fpga_key", Decoder::string);
    let config_fpga_user = m.optional(d, "config_fpga_user", Decoder::string);
    let dpdk_version = m.optional(d, "dpdk_version", Decoder::string);
    let p4_builds = m.optional(d, "p4_builds", Decoder::string);
    let p4_builds = p4_builds.map(|b| b.or_else(|| host.as_ref().map(|h| h.workdir.clone())).unwrap_or_default());
    let xbflash2_args = m.or(d, "xbflash2_args", vec!["3".to_string()], |d, v| list(d, v, Decoder::string));
    let onic = m.optional(d, "onic_module", Decoder::string);
    let ifaces = m.or(d, "fpga_ifaces", Vec::new(), |d, v| list(d, v, iface));
    let fpga_ifaces_at = m.at("fpga_ifaces");
    let bypass_iface = m.optional(d, "bypass_iface", iface);
    let bypass_iface_at = m.at("bypass_iface");
    let devbind = m.or(d, "devbind", "dpdk-devbind.py".into(), Decoder::string);
    let vivado = m.or(d, "vivado", "vivado".into(), Decoder::string);
    let jtag_device = m.or(d, "jtag_device", "xcu280_0".into(), Decoder::string);
    let hw_server = m.or(d, "hw_server", "localhost:3121".into(), Decoder::string);
    let jtag_target = m.or(d, "jtag_target", "*".into(), Decoder::string);
    let root_port = m.optional(d, "root_port", |d, v| bdf(d, v, true));
    let sn_cfg = m.or(d, "sn_cfg", vec!["sn-cfg".to_string()], |d, v| list(d, v, Decoder::string));
    let sn_p4 = m.or(d, "sn_p4", vec!["sn-p4".to_string()], |d, v| list(d, v, Decoder::string));
    let table_driver = m.or(d, "table_driver", "p4-table-driver".into(), Decoder::string);
    let agent = m.or(d, "agent", "latency-agent".into(), Decoder::string);
    let backend = m.or(d, "backend", "dpdk", |d, v| d.choice(v, &super::BACKENDS));
    let cores_node = m.req(d, "poller_cores");
    let cores = cores_node.and_then(|v| list(d, v, |d, i| d.uint(i, 0..=4095)));
    if let (Some(c), Some(node)) = (&cores, cores_node)
        && c.len() != 2
    {
        d.error(node.pos, format!("`poller_cores` needs one core per port (2), found {}", c.len()));
    }
    let numa = m.or(d, "numa_node", 0, |d, v| d.uint(v, 0..=64));
    let main_core = m.optional(d, "main_core", |d, v| d.uint(v, 0..=4095));
    let drivers = m.or(d, "dpdk_drivers", Vec::new(), |d, v| list(d, v, Decoder::string));
    let eal = m.get(d, "eal_args").map(|v| list(d, v, Decoder::string));
    let reflect = m.optional(d, "reflect_pci", |d, v| pci_list(d, v).and_then(|l| l.into_iter().next()));
    let memory_channels = m.optional(d, "memory_channels", |d, v| d.uint(v, 1..=16));
    let defaults = latency_proto::capture::CaptureOptions::default();
    let rx_ring = m.or(d, "rx_ring", defaults.rx_ring, |d, v| d.uint(v, 64..=16_384));
    let tx_ring = m.or(d, "tx_ring", defaults.tx_ring, |d, v| d.uint(v, 64..=16_384));
    let promiscuous = m.or(d, "promiscuous", false, Decoder::boolean);
    let service_core = m.optional(d, "service_core", |d, v| d.uint(v, 0..=4095));
    let reflect_dst_mac = m.optional(d, "reflect_dst_mac", |d, v| {
        let text = d.string(v)?;
        text.parse::<latency_proto::capture::MacAddr>().map_err(|e| d.error(v.pos, e.to_string())).ok()
    });
    let busy_poll_us = m.optional(d, "busy_poll_us", |d, v| d.uint(v, 1..=1_000_000));
    let fast_path = m.or(d, "fast_path", FastPathPolicy::default(), fast_path_policy);
    let sleep_unpinned = m.or(d, "sleep_unpinned", false, Decoder::boolean);
    let longest_frame = m.optional(d, "longest_frame", |d, v| d.uint(v, 62..=i64::from(u16::MAX)));
    // Without literal `eal_args`, the EAL arguments are built from the inventory's own facts.
    let eal = match eal {
        Some(given) => given,
        None => (|| {
            let config = latency_proto::EalConfig {
                main_core: main_core?,
                poller_cores: cores.clone()?,
                numa_node: numa?,
                pci: fpga_pci.as_ref()?.iter().map(Bdf::full).collect(),
                reflect_pci: reflect.as_ref()?.as_ref().map(Bdf::full),
                file_prefix: "latency-agent".into(),
                drivers: drivers.clone()?,
                memory_channels: memory_channels?,
                ..latency_proto::EalConfig::default()
            };
            Some(config.args())
        })(),
    };
    let default_reflect_port = reflect.flatten().and(fpga_pci.as_ref().map(|f| f.len().to_string()));
    let reflect_port = m.or(d, "reflect_port", default_reflect_port, |d, v| reflect_port(d, v).map(Some));
    m.done(d);
    Some(Receiver {
        host: host?,
        fpga_pci: fpga_pci?,
        qspi_pci: qspi_pci?,
        qspi_bar: qspi_bar?,
        register_bar: register_bar?,
        config_fpga_key: key?,
        config_fpga_user: config_fpga_user?,
        p4_builds: p4_builds?,
        dpdk_version: dpdk_version?,
        xbflash2_args: xbflash2_args?,
        onic_module: onic?,
        fpga_ifaces: ifaces?,
        fpga_ifaces_at,
        bypass_iface: bypass_iface?,
        bypass_iface_at,
        devbind: devbind?,
        vivado: vivado?,
        jtag_device: jtag_device?,
        hw_server: hw_server?,
        jtag_target: jtag_target?,
        root_port: root_port?,
        sn_cfg: sn_cfg?,
        sn_p4: sn_p4?,
        table_driver: table_driver?,
        agent: agent?,
        backend: backend?.to_owned(),
        poller_cores: cores?,
        numa_node: numa?,
        eal_args: eal?,
        reflect_pci: reflect?,
        reflect_port: reflect_port?,
        capture: latency_proto::capture::CaptureOptions {
            rx_ring: rx_ring?,
            tx_ring: tx_ring?,
            promiscuous: promiscuous?,
            service_core: service_core?,
            reflect_dst_mac: reflect_dst_mac?,
            busy_poll_us: busy_poll_us?,
            fast_path: fast_path?,
            sleep_unpinned: sleep_unpinned?,
            longest_frame: longest_frame?,
        },
    })
}

/// `fast_path`: a verdict (`ignore`, `warn`, `refuse`) per fast-path check.
fn fast_path_policy(d: &mut Decoder, n: &Node) -> Option<FastPathPolicy> {
    let mut m = d.map(n, "fast_path")?;
    let (entries, mut ok) = m.among(d, &Check::NAMES, "fast-path check");
    let mut policy = FastPathPolicy::default();
    for (i, v) in entries {
        match d.choice(v, &Verdict::WORDS) {
            Some(verdict) => {
                policy.0.insert(Check::ALL[i], verdict);
            }
            None => ok = false,
        }
    }
    ok.then_some(policy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse;

    fn ssh_problems(src: &str) -> Vec<String> {
        let path = std::path::Path::new("i.yaml");
        let root = parse(path, src).unwrap();
        let mut d = Decoder::new(path);
        let target = decode_ssh(&mut d, &root);
        assert!(target.is_some() || !d.diags.is_empty(), "{src}");
        d.diags.sort();
        d.diags.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn ssh_takes_an_alias_or_a_host_and_user_and_says_which_key_belongs_to_which() {
        assert_eq!(ssh_problems("{alias: a}"), Vec::<String>::new());
        assert_eq!(ssh_problems("{host: h, user: u, port: 2222}"), Vec::<String>::new());
        assert_eq!(
            ssh_problems("{alias: a, host: h, port: 22}"),
            [
                "i.yaml:1:18: `host` is not used with `alias`: the ssh config's Host entry gives it",
                "i.yaml:1:27: `port` is not used with `alias`: the ssh config's Host entry gives it"
            ]
        );
        assert_eq!(
            ssh_problems("{config: /dev/null, user: u}"),
            ["i.yaml:1:1: missing key `host` (or give `alias`)", "i.yaml:1:10: `config` is used only with `alias`"]
        );
        assert_eq!(
            ssh_problems("{alias: a, aliass: b}"),
            ["i.yaml:1:12: unknown key `aliass` (did you mean `alias`?)"]
        );
    }
}

//! Decoding of an inventory's `sender:` and `receiver:`: how each host is reached, and the
//! receiver's FPGA, NICs, cores and tools.

use super::{Host, Receiver, Sender, SshTarget};
use crate::plan::yaml::{self, Decoder, Node};

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

pub(super) fn decode_sender(d: &mut Decoder, n: &Node) -> Option<Sender> {
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

pub(super) fn decode_receiver(d: &mut Decoder, n: &Node) -> Option<Receiver> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_addresses() {
        assert!(is_pci_address("0000:3b:00.0"));
        assert!(!is_pci_address("3b:00.0"));
        assert!(!is_pci_address("0000:3b:00.0; reboot"));
    }
}

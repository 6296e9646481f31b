//! Capture options of the agent (`latency-agent capture`) that a controller chooses per testbed —
//! descriptor ring sizes, promiscuous mode, the core of the service threads, the reflect
//! destination MAC — as one value with the command-line arguments it turns into ([`CaptureOptions::args`]),
//! parsed back by the agent (`clap`, with the `clap` feature); and what the agent reports it got
//! ([`CaptureSetup`], in its `ready` event).
//!
//! The defaults follow LatencyLab's receiver (`p4lat_r2`) and its SETUP.md: 512 RX and TX
//! descriptors (the QDMA poll-mode driver needs RX rings of 512), promiscuous mode off.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::fastpath::{FastPath, FastPathPolicy};

/// Descriptors per RX and per TX queue asked for by default.
pub const DEFAULT_RING: u16 = 512;

/// Bytes a P4 program may add to a frame, which a controller allows for when it sizes the
/// receiver's AF_PACKET ring slots from the longest frame it sends
/// ([`CaptureOptions::longest_frame`]): a VLAN tag (4), a VXLAN encapsulation (50), the INT
/// metadata of five transit hops (12 each).
pub const FRAME_GROWTH: u16 = 64;

/// An Ethernet MAC address, written `aa:bb:cc:dd:ee:ff` (also with `-`; either case).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MacAddr(pub [u8; 6]);

/// Text that is not a MAC address.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a MAC address (expected six hex bytes such as aa:bb:cc:dd:ee:ff)")]
pub struct BadMac(pub String);

impl FromStr for MacAddr {
    type Err = BadMac;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadMac(s.to_owned());
        let sep = if s.contains('-') { '-' } else { ':' };
        let mut out = [0u8; 6];
        let mut parts = s.split(sep);
        for byte in &mut out {
            let part = parts.next().ok_or_else(bad)?;
            if part.len() != 2 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(bad());
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| bad())?;
        }
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(MacAddr(out))
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

impl Serialize for MacAddr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MacAddr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Capture options of the agent, from a host inventory; the command-line options of
/// `latency-agent capture` that carry them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(default, deny_unknown_fields)]
pub struct CaptureOptions {
    /// RX descriptors asked for per receive queue (DPDK; the driver may grant another number,
    /// reported in `ready`). The QDMA driver needs 512.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = DEFAULT_RING))]
    pub rx_ring: u16,
    /// TX descriptors asked for per transmit queue (DPDK).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = DEFAULT_RING))]
    pub tx_ring: u16,
    /// Put the receive ports in promiscuous mode (off, as in LatencyLab's receiver: the FPGA
    /// delivers every frame to its function anyway).
    #[cfg_attr(feature = "clap", arg(long))]
    pub promiscuous: bool,
    /// Pin the writer and control threads to this core, away from the pollers' cores.
    #[cfg_attr(feature = "clap", arg(long))]
    pub service_core: Option<u32>,
    /// Reflect mode: the Ethernet destination written into every reflected frame (the sender's
    /// hardware-timestamping NIC). Required with `--reflect-port`.
    #[cfg_attr(feature = "clap", arg(long))]
    pub reflect_dst_mac: Option<MacAddr>,
    /// AF_XDP: busy-poll each socket's queue for up to this many µs whenever its ring is empty
    /// (`SO_PREFER_BUSY_POLL` and `SO_BUSY_POLL`), instead of waiting for the interrupt.
    #[cfg_attr(feature = "clap", arg(long))]
    pub busy_poll_us: Option<u32>,
    /// What each failed fast-path check does: `check=verdict,...` ([`FastPathPolicy`]; checks
    /// not listed warn).
    #[cfg_attr(feature = "clap", arg(long, default_value = ""))]
    pub fast_path: FastPathPolicy,
    /// Pollers without a core of their own (ports beyond `--cores`) sleep in the kernel while
    /// their port is idle instead of spinning, so that they do not take turns with the pinned
    /// pollers (kernel backends; hosts with fewer cores than ports): their stamps then include a
    /// wake-up.
    #[cfg_attr(feature = "clap", arg(long))]
    #[serde(default)]
    pub sleep_unpinned: bool,
    /// AF_PACKET: the longest frame the receive ports get, bytes. Each ring's slots hold it whole
    /// (2 KiB slots without it: frames of up to 1,982 bytes); a longer frame is counted as dropped.
    /// Shorter slots put more frames in the ring's 16 MiB, and a poller that fell behind drains
    /// them faster (fewer cache lines to fetch from memory). A controller sets it to the longest
    /// frame it sends plus [`FRAME_GROWTH`] unless told otherwise.
    #[cfg_attr(feature = "clap", arg(long))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub longest_frame: Option<u16>,
}

impl Default for CaptureOptions {
    fn default() -> Self {
        CaptureOptions {
            rx_ring: DEFAULT_RING,
            tx_ring: DEFAULT_RING,
            promiscuous: false,
            service_core: None,
            reflect_dst_mac: None,
            busy_poll_us: None,
            fast_path: FastPathPolicy::default(),
            sleep_unpinned: false,
            longest_frame: None,
        }
    }
}

impl CaptureOptions {
    /// The `latency-agent capture` arguments: `--rx-ring N --tx-ring N` always, then
    /// `--promiscuous`, `--service-core N`, `--reflect-dst-mac MAC`, `--busy-poll-us N`,
    /// `--fast-path POLICY`, `--sleep-unpinned` and `--longest-frame N` when set.
    pub fn args(&self) -> Vec<String> {
        let mut args = vec!["--rx-ring".into(), self.rx_ring.to_string(), "--tx-ring".into(), self.tx_ring.to_string()];
        if self.promiscuous {
            args.push("--promiscuous".into());
        }
        if let Some(c) = self.service_core {
            args.extend(["--service-core".into(), c.to_string()]);
        }
        if let Some(m) = self.reflect_dst_mac {
            args.extend(["--reflect-dst-mac".into(), m.to_string()]);
        }
        if let Some(us) = self.busy_poll_us {
            args.extend(["--busy-poll-us".into(), us.to_string()]);
        }
        if !self.fast_path.0.is_empty() {
            args.extend(["--fast-path".into(), self.fast_path.to_string()]);
        }
        if self.sleep_unpinned {
            args.push("--sleep-unpinned".into());
        }
        if let Some(n) = self.longest_frame {
            args.extend(["--longest-frame".into(), n.to_string()]);
        }
        args
    }
}

/// The descriptor rings a port got.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortRings {
    /// The port, as in the `ready` event's `ports` (the reflect port too, when there is one).
    pub port: String,
    /// RX descriptors granted per queue.
    pub rx: u16,
    /// TX descriptors granted per queue.
    pub tx: u16,
}

/// What the kernel granted an AF_XDP socket.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct XdpGrant {
    /// The interface.
    pub port: String,
    /// The queue the socket is bound to.
    pub queue: u32,
    /// The XDP program runs in the driver (native mode), not in the generic stack.
    pub native: bool,
    /// The driver granted zero-copy (copy mode otherwise, as on veth).
    pub zero_copy: bool,
    /// RX ring slots.
    pub rx_ring: u32,
    /// Fill ring slots.
    pub fill_ring: u32,
    /// Bytes per UMEM frame.
    pub frame: u32,
    /// Busy-poll budget, µs, when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_poll_us: Option<u32>,
}

/// What the agent set up, reported in its `ready` event.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureSetup {
    /// Descriptor rings granted by the driver, per port (DPDK; empty with AF_PACKET, whose
    /// kernel ring has no descriptors).
    #[serde(default)]
    pub rings: Vec<PortRings>,
    /// Whether the agent put the receive ports in promiscuous mode.
    #[serde(default)]
    pub promiscuous: bool,
    /// The core the writer and control threads are pinned to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_core: Option<u32>,
    /// The destination MAC of the reflected frames (reflect mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reflect_dst_mac: Option<MacAddr>,
    /// What the kernel granted each AF_XDP socket (AF_XDP backend only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub af_xdp: Vec<XdpGrant>,
    /// The longest frame the AF_PACKET rings' slots hold whole, bytes (AF_PACKET backend only;
    /// longer frames count as dropped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub af_packet_longest_frame: Option<u32>,
    /// The fast path as read back at start, with the policy's findings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fast_path: Option<FastPath>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_addresses_parse_print_and_reject_garbage() {
        let m: MacAddr = "0C:42:A1:de:ad:01".parse().unwrap();
        assert_eq!(m.0, [0x0c, 0x42, 0xa1, 0xde, 0xad, 0x01]);
        assert_eq!(m.to_string(), "0c:42:a1:de:ad:01");
        assert_eq!("0c-42-a1-de-ad-01".parse::<MacAddr>(), Ok(m));
        for bad in
            ["", "0c:42:a1:de:ad", "0c:42:a1:de:ad:01:02", "0c:42:a1:de:ad:1", "0c:42:a1:de:ad:g1", "+c:42:a1:de:ad:01"]
        {
            assert_eq!(bad.parse::<MacAddr>(), Err(BadMac(bad.into())), "{bad}");
        }
        assert_eq!(
            "x".parse::<MacAddr>().unwrap_err().to_string(),
            "`x` is not a MAC address (expected six hex bytes such as aa:bb:cc:dd:ee:ff)"
        );
        assert_eq!(serde_json::to_string(&m).unwrap(), r#""0c:42:a1:de:ad:01""#);
        assert_eq!(serde_json::from_str::<MacAddr>(r#""0c:42:a1:de:ad:01""#).unwrap(), m);
        assert!(serde_json::from_str::<MacAddr>(r#""0c:42""#).is_err());
    }

    #[test]
    fn options_default_to_latencylab_and_turn_into_arguments() {
        let d = CaptureOptions::default();
        assert_eq!((d.rx_ring, d.tx_ring, d.promiscuous), (512, 512, false));
        assert_eq!(d.args(), ["--rx-ring", "512", "--tx-ring", "512"]);
        let o = CaptureOptions {
            rx_ring: 1024,
            promiscuous: true,
            service_core: Some(2),
            reflect_dst_mac: Some("0c:42:a1:de:ad:01".parse().unwrap()),
            sleep_unpinned: true,
            longest_frame: Some(192),
            ..CaptureOptions::default()
        };
        assert_eq!(
            o.args(),
            [
                "--rx-ring",
                "1024",
                "--tx-ring",
                "512",
                "--promiscuous",
                "--service-core",
                "2",
                "--reflect-dst-mac",
                "0c:42:a1:de:ad:01",
                "--sleep-unpinned",
                "--longest-frame",
                "192"
            ]
        );
        let json = serde_json::to_string(&o).unwrap();
        assert_eq!(serde_json::from_str::<CaptureOptions>(&json).unwrap(), o);
        assert_eq!(serde_json::from_str::<CaptureOptions>("{}").unwrap(), d);
        assert!(serde_json::from_str::<CaptureOptions>(r#"{"rx_rings":1}"#).is_err());
    }
}

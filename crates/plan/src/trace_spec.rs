//! What a probe trace is, as a plan names it: a pcap file, a generation spec, or a generated
//! stand-in for an absent published file. A generation spec ([`Generated`]) is a header template
//! with its IP version, transport, VLAN tagging and frame size, checked against what the template's
//! program reads and what a frame can hold; [`crate::trace`] writes and reads the pcaps.

use std::fmt;
use std::path::PathBuf;

use latency_proto::{int, probe};
use serde::{Deserialize, Serialize};

use crate::yaml::Pos;

/// Length of an untagged probe frame (without FCS) unless a plan asks for another; VLAN-tagged
/// frames are 4 bytes longer.
pub const FRAME_LEN: usize = 128;
/// Longest frame a plan may ask for (a jumbo frame, without FCS).
pub const MAX_FRAME_LEN: u32 = 9216;
/// Most probes a generated trace has (plans and `trace generate` accept 1..=MAX_PROBES).
pub const MAX_PROBES: u32 = 10_000_000;

/// VLAN id of RemoveHeader probes.
pub const VLAN_ID: u16 = 100;
/// Ethernet's shortest frame without FCS.
const ETHERNET_MIN: usize = 60;

/// How a probe id is carried in the payload: the wire format the agent parses.
pub use latency_proto::ProbeFormat;

/// Header template of generated probes, matching a program's traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceTemplate {
    /// IPv4/UDP to destinations the Forward table forwards, and some it drops.
    Forward,
    /// IPv4/UDP five-tuples, some present in the CAM.
    FiveTuple,
    /// VLAN-tagged IPv4/UDP (the tag is removed by the program).
    RemoveHeader,
    /// IPv4/UDP with valid header checksums.
    Checksum,
    /// INT-MD over UDP or TCP: DSCP marks the INT shim after the transport header, then the INT-MD
    /// header and the source's hop metadata (one hop), then the probe; to the Forward table's hits.
    Int,
    /// INT-MD over GRE: the INT shim after the GRE header, then the INT-MD header, the source's hop
    /// metadata and the original IPv4 packet carrying the probe; to the Forward table's hits.
    IntGre,
}

/// Every trace template with its name as written in plans.
pub const TEMPLATES: [(&str, TraceTemplate); 6] = [
    ("forward", TraceTemplate::Forward),
    ("five_tuple", TraceTemplate::FiveTuple),
    ("remove_header", TraceTemplate::RemoveHeader),
    ("checksum", TraceTemplate::Checksum),
    ("int", TraceTemplate::Int),
    ("int_gre", TraceTemplate::IntGre),
];

/// The template named `name` (as in plans: `forward`, `five_tuple`, `remove_header`, `checksum`,
/// `int`, `int_gre`).
pub fn template_by_name(name: &str) -> Option<TraceTemplate> {
    TEMPLATES.iter().find(|(n, _)| *n == name).map(|&(_, t)| t)
}

/// The name of a template as written in plans.
pub fn template_name(template: TraceTemplate) -> &'static str {
    TEMPLATES.iter().find(|(_, t)| *t == template).map_or("?", |&(n, _)| n)
}

/// IP version of generated probes (`ip: ipv4 | ipv6`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IpVersion {
    /// IPv4 (20-byte header, no options).
    #[default]
    Ipv4,
    /// IPv6 (40-byte header, no extension headers).
    Ipv6,
}

impl IpVersion {
    /// Every version with its name in plans and on command lines.
    pub const NAMES: [(&'static str, IpVersion); 2] = [("ipv4", IpVersion::Ipv4), ("ipv6", IpVersion::Ipv6)];

    /// The name in plans and on command lines.
    pub fn name(self) -> &'static str {
        word_of(&IpVersion::NAMES, self)
    }
}

/// Transport of generated probes (`transport: udp | tcp`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// UDP (8-byte header).
    #[default]
    Udp,
    /// TCP (20-byte header, PSH+ACK, the probe id as sequence number).
    Tcp,
}

impl Transport {
    /// Every transport with its name in plans and on command lines.
    pub const NAMES: [(&'static str, Transport); 2] = [("udp", Transport::Udp), ("tcp", Transport::Tcp)];

    /// The name in plans and on command lines.
    pub fn name(self) -> &'static str {
        word_of(&Transport::NAMES, self)
    }
}

/// The name `value` has in `names`.
fn word_of<T: PartialEq + Copy>(names: &[(&'static str, T)], value: T) -> &'static str {
    names.iter().find(|(_, v)| *v == value).map_or("?", |(n, _)| n)
}

/// A probe trace.
#[derive(Clone, Debug, Serialize)]
pub struct Trace {
    /// Name (safe identifier).
    pub name: String,
    /// Where the packets come from.
    pub source: TraceSource,
    /// Where the source is named in the plan (`pcap:` or `generate:`).
    #[serde(skip)]
    pub at: Pos,
}

/// A trace given as a file, generated, or generated in place of a published file that is absent.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceSource {
    /// A pcap file, optionally with its sha256 (verified).
    Pcap {
        /// Path of the pcap.
        path: PathBuf,
        /// Expected sha256.
        sha256: Option<String>,
    },
    /// Generated by `orchestrate trace`.
    Generate(Generated),
    /// The plan's pcap is not on this machine: the generated stand-in it declares (same frame
    /// size, VLAN tagging and flows) is replayed instead. Never on real hardware.
    StandIn {
        /// The pcap the plan names, which was not found.
        pcap: PathBuf,
        /// Its sha256, as the plan gives it.
        sha256: Option<String>,
        /// What is replayed instead.
        generate: Generated,
    },
}

/// How a generated trace is made: probes 1..=count of a template's flows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Generated {
    /// Header template.
    pub template: TraceTemplate,
    /// Number of probes.
    pub count: u32,
    /// Probe id format.
    pub probe_id: ProbeFormat,
    /// Bytes of every frame as captured (FCS excluded, a VLAN tag included).
    #[serde(default = "untagged_frame_len")]
    pub frame_len: u32,
    /// 802.1Q VLAN id of every frame; none: untagged.
    #[serde(default)]
    pub vlan: Option<u16>,
    /// IP version.
    #[serde(default)]
    pub ip: IpVersion,
    /// Transport.
    #[serde(default)]
    pub transport: Transport,
}

/// The frame length of a deserialised spec that gives none: an untagged frame's.
fn untagged_frame_len() -> u32 {
    default_frame_len(false)
}

impl TraceSource {
    /// How the replayed trace is generated, unless it is a file.
    pub fn generated(&self) -> Option<&Generated> {
        match self {
            TraceSource::Generate(g) | TraceSource::StandIn { generate: g, .. } => Some(g),
            TraceSource::Pcap { .. } => None,
        }
    }
}

impl Trace {
    /// Number of probes, when known without reading a file.
    pub fn count(&self) -> Option<u32> {
        self.source.generated().map(|g| g.count)
    }

    /// File name of the trace on a host.
    pub fn file_name(&self) -> String {
        format!("{}.pcap", self.name)
    }

    /// In plain words, when a stand-in replaces the plan's pcap.
    pub fn stand_in_note(&self) -> Option<String> {
        stand_in_note(&self.name, &self.source)
    }
}

/// In plain words, when `source` is a stand-in for trace `name`.
pub fn stand_in_note(name: &str, source: &TraceSource) -> Option<String> {
    let TraceSource::StandIn { pcap, generate: g, .. } = source else { return None };
    Some(format!(
        "trace `{name}`: {} is not here, so a generated stand-in replaces it ({}); results with it do not \
         reproduce the published measurement",
        pcap.display(),
        g.describe()
    ))
}

/// The VLAN tag of a template's traffic unless a plan says otherwise: RemoveHeader's probes carry
/// the header the program removes (VLAN 100); the others are untagged.
pub fn default_vlan(template: TraceTemplate) -> Option<u16> {
    (template == TraceTemplate::RemoveHeader).then_some(VLAN_ID)
}

/// The frame length unless a plan asks for another: [`FRAME_LEN`], 4 bytes more when tagged.
pub fn default_frame_len(tagged: bool) -> u32 {
    (FRAME_LEN + if tagged { 4 } else { 0 }) as u32
}

/// Whether a template's program reads IPv6: RemoveHeader and Checksum pass it; Forward's and
/// FiveTuple's tables match IPv4 fields, and the INT programs here parse IPv4.
pub fn takes_ipv6(template: TraceTemplate) -> bool {
    matches!(template, TraceTemplate::RemoveHeader | TraceTemplate::Checksum)
}

/// What a generation spec asks beyond template, count and id format; `None`: as the template's
/// traffic is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    /// 802.1Q tag (`Some(None)`: untagged).
    pub vlan: Option<Option<u16>>,
    /// Bytes of every frame.
    pub frame_len: Option<u32>,
    /// IP version.
    pub ip: IpVersion,
    /// Transport.
    pub transport: Transport,
}

impl Shape {
    /// The shape of an existing spec, every field as it is.
    pub fn of(g: &Generated) -> Shape {
        Shape { vlan: Some(g.vlan), frame_len: Some(g.frame_len), ip: g.ip, transport: g.transport }
    }
}

/// A generation spec that cannot be made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refused {
    /// The frame asked for cannot hold the headers and probe ids.
    TooShort {
        /// Bytes asked for.
        asked: u32,
        /// The shortest that holds them.
        shortest: usize,
    },
    /// IPv6 was asked for a template whose program reads IPv4 only.
    Ipv6 {
        /// The template.
        template: TraceTemplate,
    },
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::TooShort { asked, shortest } => write!(
                f,
                "a frame of {asked} B is too short: at least {shortest} B hold its headers, the probe ids and \
                 Ethernet's 60 B minimum"
            ),
            Refused::Ipv6 { template } => write!(
                f,
                "template `{}` is IPv4 traffic: its program's parser and table read IPv4 (IPv6 is for \
                 remove_header and checksum)",
                template_name(*template)
            ),
        }
    }
}

impl Generated {
    /// Probes 1..=`count` of `template` in `format`, with the template's tagging and the default
    /// frame length, over IPv4 and UDP.
    pub fn new(template: TraceTemplate, count: u32, probe_id: ProbeFormat) -> Generated {
        let vlan = default_vlan(template);
        Generated {
            template,
            count,
            probe_id,
            frame_len: default_frame_len(vlan.is_some()),
            vlan,
            ip: IpVersion::Ipv4,
            transport: Transport::Udp,
        }
    }

    /// Probes 1..=`count` of `template` in `format`, shaped as asked: too short a frame is
    /// refused with the shortest that holds the headers and ids, IPv6 for a template whose program
    /// reads IPv4 only is refused.
    pub fn with(
        template: TraceTemplate,
        count: u32,
        probe_id: ProbeFormat,
        shape: Shape,
    ) -> Result<Generated, Refused> {
        if shape.ip == IpVersion::Ipv6 && !takes_ipv6(template) {
            return Err(Refused::Ipv6 { template });
        }
        let vlan = shape.vlan.unwrap_or_else(|| default_vlan(template));
        let frame_len = shape.frame_len.unwrap_or_else(|| default_frame_len(vlan.is_some()));
        let g = Generated { template, count, probe_id, frame_len, vlan, ip: shape.ip, transport: shape.transport };
        let shortest = g.shortest_frame();
        if (frame_len as usize) < shortest {
            return Err(Refused::TooShort { asked: frame_len, shortest });
        }
        Ok(g)
    }

    /// Bytes of every header of a frame (the payload is the probe id and padding).
    pub fn headers_len(&self) -> usize {
        let ip = match self.ip {
            IpVersion::Ipv4 => 20,
            IpVersion::Ipv6 => 40,
        };
        let l4 = match self.transport {
            Transport::Udp => 8,
            Transport::Tcp => 20,
        };
        let stack = int::SHIM_LEN + int::MD_LEN + 4 * usize::from(int::HOP_WORDS);
        let tunnel = match self.template {
            TraceTemplate::Int => stack,
            TraceTemplate::IntGre => 20 + 4 + stack,
            _ => 0,
        };
        14 + if self.vlan.is_some() { 4 } else { 0 } + tunnel + ip + l4
    }

    /// The shortest frame that holds the headers and the probe id of every probe 1..=`count`, and
    /// is no shorter than Ethernet's minimum (60 B without FCS).
    pub fn shortest_frame(&self) -> usize {
        let needed = self.headers_len() + probe::payload(u64::from(self.count), self.probe_id, 0).len();
        needed.max(ETHERNET_MIN)
    }

    /// In words: `template int, 20000 probes, 212 B frames, VLAN 100`, then `, ipv6/tcp` unless
    /// IPv4 and UDP.
    pub fn describe(&self) -> String {
        let tag = self.vlan.map_or_else(|| "untagged".to_owned(), |v| format!("VLAN {v}"));
        let template = template_name(self.template);
        let mut s = format!("template {template}, {} probes, {} B frames, {tag}", self.count, self.frame_len);
        if (self.ip, self.transport) != (IpVersion::Ipv4, Transport::Udp) {
            s.push_str(&format!(", {}/{}", self.ip.name(), self.transport.name()));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for (name, t) in TEMPLATES {
            assert_eq!(template_by_name(name), Some(t));
            assert_eq!(template_name(t), name);
        }
        assert_eq!(template_by_name("fwd"), None);
    }
}

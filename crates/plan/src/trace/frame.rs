//! The frames of generated probes: flows consistent with the programs' tables, the template's
//! headers in the IP version and transport asked for, and INT-MD stacks
//! ([`latency_proto::int`]) for the INT templates.

use etherparse::{IpDscp, IpHeaders, IpNumber, Ipv4Header, Ipv6Header, PacketBuilder};
use latency_proto::{int, probe};

use crate::probes;
use crate::trace_spec::{Generated, IpVersion, TraceTemplate, Transport};

/// Destination MAC of every probe: broadcast, so that a flooding switch copies it to both ports.
pub const DST_MAC: [u8; 6] = [0xff; 6];
/// Source MAC of every probe (locally administered).
pub const SRC_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x01];
/// Source address of every probe (the FiveTuple table's source).
pub const SRC_IP: [u8; 4] = [10, 0, 0, 100];
/// UDP source port of every probe (the FiveTuple table's source port).
pub const SRC_PORT: u16 = 4000;
/// UDP destination port of probes other than FiveTuple's.
pub const DST_PORT: u16 = 5000;
/// Prefix of the probes' IPv6 addresses: `fd00::<IPv4 address>` (a unique local address holding
/// the IPv4 flow's address in its last 32 bits).
const IPV6_PREFIX: [u8; 12] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
/// Time to live (hop limit) of the probes' IP header.
const TTL: u8 = 64;
/// Window of the probes' TCP header.
const TCP_WINDOW: u16 = 65_535;

/// Addresses and ports of a probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flow {
    /// IPv4 source (IPv6: `fd00::` followed by it).
    pub src: [u8; 4],
    /// IPv4 destination (IPv6: `fd00::` followed by it).
    pub dst: [u8; 4],
    /// UDP source port.
    pub sport: u16,
    /// UDP destination port.
    pub dport: u16,
    /// 802.1Q VLAN id, if the frame is tagged.
    pub vlan: Option<u16>,
}

/// The flow of probe `id` in a trace of `template`, consistent with the programs' tables:
/// Forward probes go to 10.0.0.1–7 (table hits) when [`probes::forwarded`], else to 10.0.1.x
/// (misses); FiveTuple probes use the table's four five-tuples 10.0.0.100:4000 →
/// 10.0.0.(1..4):(5000..5003); the others go to 10.0.0.1–7. Tagged with `vlan` when given.
pub fn flow(template: TraceTemplate, id: u64, vlan: Option<u16>) -> Flow {
    let hit = [10, 0, 0, 1 + (id % 7) as u8];
    let base = Flow { src: SRC_IP, dst: hit, sport: SRC_PORT, dport: DST_PORT, vlan };
    match template {
        TraceTemplate::Forward if probes::forwarded(template, id) => base,
        TraceTemplate::Forward => Flow { dst: [10, 0, 1, (id % 250 + 1) as u8], ..base },
        TraceTemplate::FiveTuple => {
            let k = id % 4;
            Flow { dst: [10, 0, 0, 1 + k as u8], dport: DST_PORT + k as u16, ..base }
        }
        TraceTemplate::RemoveHeader | TraceTemplate::Checksum | TraceTemplate::Int | TraceTemplate::IntGre => base,
    }
}

/// Why a probe's frame cannot be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A VLAN id above 4095.
    #[error("VLAN id {0} does not fit 12 bits")]
    Vlan(u16),
    /// An encapsulated frame longer than an IPv4 packet can be.
    #[error("frame too long for IPv4")]
    TooLong,
    /// A header the packet library refused (its own words).
    #[error("{0}")]
    Header(String),
}

/// The Ethernet frame of probe `id` of `spec`: `spec.frame_len` bytes (longer only if the id does
/// not fit), checksums filled in, the payload from [`probe::payload`] padded with zeros. An INT
/// probe carries the source's stack ([`int::source_stack`]) before its payload (`int`), or before
/// the original IPv4 packet inside GRE (`int_gre`).
pub fn frame(spec: &Generated, id: u64) -> Result<Vec<u8>, FrameError> {
    let f = flow(spec.template, id, spec.vlan);
    let pad = (spec.frame_len as usize).saturating_sub(spec.headers_len());
    let payload = probe::payload(id, spec.probe_id, pad);
    let mut out = Vec::with_capacity(spec.headers_len() + payload.len());
    out.extend_from_slice(&DST_MAC);
    out.extend_from_slice(&SRC_MAC);
    if let Some(vid) = f.vlan {
        if vid > 4095 {
            return Err(FrameError::Vlan(vid));
        }
        out.extend_from_slice(&[0x81, 0x00]);
        out.extend_from_slice(&vid.to_be_bytes());
    }
    out.extend_from_slice(&match spec.ip {
        IpVersion::Ipv4 => [0x08, 0x00],
        IpVersion::Ipv6 => [0x86, 0xdd],
    });
    match spec.template {
        TraceTemplate::Int => {
            let mut inner = int::source_stack(int::Carrier::Transport);
            inner.extend_from_slice(&payload);
            packet(&mut out, spec, &f, id, int::DSCP, &inner)?;
        }
        TraceTemplate::IntGre => {
            let mut gre = vec![0, 0];
            gre.extend_from_slice(&int::GRE_PROTOCOL.to_be_bytes());
            gre.extend(int::source_stack(int::Carrier::Gre(int::ETHERTYPE_IPV4)));
            packet(&mut gre, spec, &f, id, 0, &payload)?;
            let len = u16::try_from(gre.len()).map_err(|_| FrameError::TooLong)?;
            let mut outer = Ipv4Header::new(len, TTL, IpNumber::GRE, f.src, f.dst)
                .map_err(|e| FrameError::Header(e.to_string()))?;
            outer.header_checksum = outer.calc_header_checksum();
            outer.write(&mut out).map_err(|e| FrameError::Header(e.to_string()))?;
            out.extend(gre);
        }
        _ => packet(&mut out, spec, &f, id, 0, &payload)?,
    }
    Ok(out)
}

/// Append the IP packet of `f` carrying `payload` over the spec's IP version and transport, with
/// `dscp` in its DSCP (traffic class) bits; TCP's sequence number is the probe id (mod 2³²).
fn packet(out: &mut Vec<u8>, spec: &Generated, f: &Flow, id: u64, dscp: u8, payload: &[u8]) -> Result<(), FrameError> {
    let v6 = |a: [u8; 4]| {
        let mut b = [0u8; 16];
        b[..12].copy_from_slice(&IPV6_PREFIX);
        b[12..].copy_from_slice(&a);
        b
    };
    let ip = match spec.ip {
        IpVersion::Ipv4 => IpHeaders::Ipv4(
            Ipv4Header {
                source: f.src,
                destination: f.dst,
                time_to_live: TTL,
                dscp: IpDscp::try_new(dscp).map_err(|e| FrameError::Header(e.to_string()))?,
                ..Default::default()
            },
            Default::default(),
        ),
        IpVersion::Ipv6 => IpHeaders::Ipv6(
            Ipv6Header {
                traffic_class: dscp << 2,
                hop_limit: TTL,
                source: v6(f.src),
                destination: v6(f.dst),
                ..Default::default()
            },
            Default::default(),
        ),
    };
    let b = PacketBuilder::ip(ip);
    let written = match spec.transport {
        Transport::Udp => b.udp(f.sport, f.dport).write(out, payload),
        Transport::Tcp => b.tcp(f.sport, f.dport, id as u32, TCP_WINDOW).psh().ack(1).write(out, payload),
    };
    written.map_err(|e| FrameError::Header(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace_spec::{FRAME_LEN, ProbeFormat, Refused, Shape, TraceTemplate};

    #[test]
    fn frames_have_the_fixed_lengths() {
        for t in TraceTemplate::ALL {
            for format in ProbeFormat::ALL {
                for id in [1, 3, 20_000, 10_000_000] {
                    let f = frame(&Generated::new(t, 10_000_000, format), id).unwrap();
                    let expected = if t == TraceTemplate::RemoveHeader { FRAME_LEN + 4 } else { FRAME_LEN };
                    assert_eq!(f.len(), expected, "{t:?} {format} {id}");
                    assert_eq!(probe::parse(&f, format), Some(probe::Probe { id, tag: None }));
                }
            }
        }
    }

    #[test]
    fn frame_size_and_tagging_are_as_asked() {
        // The published Forward trace's mean frame (212 B, tagged) and an untagged one.
        let tagged = Generated {
            frame_len: 212,
            vlan: Some(7),
            ..Generated::new(TraceTemplate::Forward, 20_000, ProbeFormat::Latencylab)
        };
        let f = frame(&tagged, 20_000).unwrap();
        assert_eq!(f.len(), 212);
        assert_eq!(&f[12..16], &[0x81, 0x00, 0x00, 0x07], "802.1Q TPID then VLAN 7");
        assert_eq!(probe::parse(&f, ProbeFormat::Latencylab), Some(probe::Probe { id: 20_000, tag: None }));
        let plain = Generated { vlan: None, frame_len: 208, ..tagged };
        let f = frame(&plain, 3).unwrap();
        assert_eq!((f.len(), &f[12..14]), (208, &[0x08, 0x00][..]), "untagged IPv4");
        // The shortest frame holds 42 B of headers (46 tagged), the 12-byte marker and the 8 digits
        // of 10,000,000, and never less than Ethernet's 60 B.
        let shortest =
            |vlan: Option<u16>, probe_id, count| Generated { vlan, probe_id, count, ..plain }.shortest_frame();
        assert_eq!(shortest(None, ProbeFormat::Latencylab, 10_000_000), 42 + 12 + 8);
        assert_eq!(shortest(Some(7), ProbeFormat::Latencylab, 10_000_000), 46 + 12 + 8);
        assert_eq!(shortest(None, ProbeFormat::Latencylab, 20_000), 60);
        assert_eq!(shortest(Some(7), ProbeFormat::Compact, 1), 60);
        let tight = Generated { frame_len: 62, count: 10_000_000, ..plain };
        assert_eq!(frame(&tight, 10_000_000).unwrap().len(), 62);
    }

    #[test]
    fn flows_match_the_tables() {
        assert_eq!(flow(TraceTemplate::Forward, 1, None).dst, [10, 0, 0, 2]);
        assert_eq!(flow(TraceTemplate::Forward, 3, None).dst, [10, 0, 1, 4]);
        assert_eq!(flow(TraceTemplate::Forward, 7, None).dst, [10, 0, 0, 1]);
        for id in 1..=100 {
            let f = flow(TraceTemplate::FiveTuple, id, None);
            assert_eq!((f.src, f.sport), (SRC_IP, SRC_PORT));
            assert!((1..=4).contains(&f.dst[3]));
            assert_eq!(f.dport, 5000 + u16::from(f.dst[3]) - 1, "table pairs 10.0.0.k with port 4999+k");
            let fwd = flow(TraceTemplate::Forward, id, None);
            assert_eq!(fwd.dst[2] == 0, probes::forwarded(TraceTemplate::Forward, id));
            assert!((1..=250).contains(&fwd.dst[3]));
        }
        assert_eq!(Generated::new(TraceTemplate::RemoveHeader, 5, ProbeFormat::Compact).vlan, Some(100));
        assert_eq!(Generated::new(TraceTemplate::Forward, 5, ProbeFormat::Compact).vlan, None);
    }

    #[test]
    fn ipv6_and_tcp_headers_are_as_asked() {
        let shape = |ip, transport| Shape { ip, transport, frame_len: Some(200), ..Shape::default() };
        let v6 = Generated::with(
            TraceTemplate::Checksum,
            10,
            ProbeFormat::Latencylab,
            shape(IpVersion::Ipv6, Transport::Tcp),
        )
        .unwrap();
        let f = frame(&v6, 9).unwrap();
        assert_eq!((f.len(), &f[12..14]), (200, &[0x86, 0xdd][..]), "IPv6 EtherType");
        assert_eq!((f[14] >> 4, f[14 + 6]), (6, 6), "version 6, next header TCP");
        assert_eq!(&f[14 + 8..14 + 24], &[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 100], "fd00::10.0.0.100");
        let tcp = &f[54..74];
        assert_eq!(
            (u16::from_be_bytes([tcp[0], tcp[1]]), u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]])),
            (4000, 9)
        );
        assert_eq!(tcp[12] >> 4, 5, "20-byte TCP header");
        assert_eq!(probe::parse(&f, ProbeFormat::Latencylab), Some(probe::Probe { id: 9, tag: None }));
        let v4tcp =
            Generated::with(TraceTemplate::Int, 10, ProbeFormat::Compact, shape(IpVersion::Ipv4, Transport::Tcp))
                .unwrap();
        assert_eq!(v4tcp.headers_len(), 14 + 20 + 20 + 28);
        assert_eq!(
            Generated::with(TraceTemplate::Forward, 10, ProbeFormat::Compact, shape(IpVersion::Ipv6, Transport::Udp)),
            Err(Refused::Ipv6 { template: TraceTemplate::Forward })
        );
        let short = Shape { frame_len: Some(100), ..Shape::default() };
        let refused = Generated::with(TraceTemplate::IntGre, 10_000_000, ProbeFormat::Latencylab, short).unwrap_err();
        assert_eq!(refused, Refused::TooShort { asked: 100, shortest: 14 + 20 + 4 + 28 + 20 + 8 + 12 + 8 });
    }

    #[test]
    fn int_probes_carry_the_source_stack_where_the_carrier_says() {
        for transport in [Transport::Udp, Transport::Tcp] {
            let shape = Shape { transport, ..Shape::default() };
            let g = Generated::with(TraceTemplate::Int, 100, ProbeFormat::Latencylab, shape).unwrap();
            let f = frame(&g, 42).unwrap();
            assert_eq!(f.len(), FRAME_LEN);
            assert_eq!(f[15] >> 2, int::DSCP, "DSCP marks INT");
            let shim = 14 + 20 + if transport == Transport::Udp { 8 } else { 20 };
            let s = int::parse(&f, shim).unwrap();
            assert_eq!((s.words, s.hops.len(), s.remaining, s.instructions), (7, 1, 7, 0xE000));
            assert_eq!(
                probe::parse(&f[shim + 28..], ProbeFormat::Latencylab),
                Some(probe::Probe { id: 42, tag: None })
            );
        }
        let g = Generated::with(
            TraceTemplate::IntGre,
            100,
            ProbeFormat::Compact,
            Shape { vlan: Some(Some(5)), ..Shape::default() },
        )
        .unwrap();
        let f = frame(&g, 7).unwrap();
        assert_eq!(f.len(), FRAME_LEN + 4);
        let outer = 18;
        assert_eq!((f[outer + 9], &f[outer + 20..outer + 24]), (47, &[0, 0, 0x88, 0xb5][..]), "GRE carrying INT");
        let s = int::parse(&f, outer + 24).unwrap();
        assert_eq!((s.tail, s.hops.len()), (0x0800, 1));
        let inner = outer + 24 + 28;
        assert_eq!((f[inner], f[inner + 9], &f[inner + 16..inner + 20]), (0x45, 17, &[10, 0, 0, 1][..]));
        assert_eq!(probe::parse(&f[inner..], ProbeFormat::Compact), Some(probe::Probe { id: 7, tag: None }));
    }
}

//! The packet behaviour of each emulated P4 program, as pure functions of a frame.
//!
//! Each mirrors its program in `p4-programs/`: the parsers read Ethernet, an optional 802.1Q tag and
//! the IPv4 header; a frame too short for a header its parser extracts is a parser error.

use std::borrow::Cow;

use latency_proto::int;

/// EtherType of an 802.1Q tag.
pub const ETHERTYPE_VLAN: u16 = 0x8100;
/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// IP protocol number of UDP.
pub const IPPROTO_UDP: u8 = 17;
/// IP protocol number of TCP.
pub const IPPROTO_TCP: u8 = 6;
/// IP protocol number of GRE.
pub const IPPROTO_GRE: u8 = 47;
/// Length of an Ethernet header without tag.
pub const ETH_LEN: usize = 14;
/// Length of an 802.1Q tag.
pub const VLAN_LEN: usize = 4;
/// Length of an IPv4 header without options.
pub const IPV4_LEN: usize = 20;
/// Length of a UDP header.
pub const UDP_LEN: usize = 8;
/// Length of a TCP header without options.
pub const TCP_LEN: usize = 20;
/// Length of a GRE header without options.
pub const GRE_LEN: usize = 4;
/// Node id IntTransit reports in the hops it pushes.
pub const INT_NODE_ID: u32 = 2;

/// What a program does with a frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict<'a> {
    /// The frame leaves the pipeline (possibly rewritten).
    Pass(Cow<'a, [u8]>),
    /// The frame is dropped, for this reason.
    Drop(DropReason),
}

latency_proto::words! {
/// Why a program dropped a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// A header the parser extracts is cut short.
    Truncated = "truncated",
    /// Forward: the frame carries no IPv4 header.
    NotIpv4 = "not_ipv4",
    /// Forward: the IPv4 destination is not in the table (10.0.0.1–10.0.0.7).
    TableMiss = "table_miss",
    /// Checksum: the IPv4 header has options or a version other than 4.
    UnsupportedIpv4 = "unsupported_ipv4",
    /// Checksum: the IPv4 header checksum is wrong.
    BadChecksum = "bad_checksum",
}
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// Where the Ethernet (and optional 802.1Q) headers end and which EtherType follows them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct L2 {
    /// Offset of the layer-3 header.
    pub l3: usize,
    /// EtherType of the layer-3 header (the tag's inner EtherType for a tagged frame).
    pub ethertype: u16,
    /// Whether the frame carries an 802.1Q tag.
    pub tagged: bool,
}

/// Parse the Ethernet header and an optional 802.1Q tag; `None` when either is cut short.
pub fn l2(frame: &[u8]) -> Option<L2> {
    // Bytes 12..14 are the last of the Ethernet header: reading them checks its length.
    let outer = be16(frame, 12)?;
    if outer == ETHERTYPE_VLAN {
        if frame.len() < ETH_LEN + VLAN_LEN {
            return None;
        }
        Some(L2 { l3: ETH_LEN + VLAN_LEN, ethertype: be16(frame, 16)?, tagged: true })
    } else {
        Some(L2 { l3: ETH_LEN, ethertype: outer, tagged: false })
    }
}

/// The frame without its 802.1Q tag (the tag's inner EtherType moves into the Ethernet header), or
/// `None` if the frame has no complete tag. RemoveHeader's action.
pub fn strip_vlan(frame: &[u8]) -> Option<Vec<u8>> {
    let l = l2(frame)?;
    if !l.tagged {
        return None;
    }
    // dst(6) src(6) [0x8100 TCI](4) inner-type …: dropping bytes 12..16 leaves the inner EtherType
    // right after the source address.
    let mut out = Vec::with_capacity(frame.len() - VLAN_LEN);
    out.extend_from_slice(&frame[..12]);
    out.extend_from_slice(&frame[12 + VLAN_LEN..]);
    Some(out)
}

/// RFC 1071 check of a 20-byte IPv4 header, checksum field included: the ones' complement sum of
/// its ten 16-bit words is 0xFFFF for an intact header.
pub fn ipv4_checksum_ok(header: &[u8]) -> bool {
    ipv4_checksum(header) == 0
}

/// The ones' complement of the ones' complement sum of the 16-bit words of `header` (an odd last
/// byte is padded with zero): 0 when a header's checksum field is right, and the value to store in
/// that field when it was zero.
pub fn ipv4_checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = header.chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]))).sum();
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

/// Forward (p4-programs/forward): IPv4 frames to 10.0.0.1–10.0.0.7 pass unchanged; other
/// destinations miss the table and are dropped, as are frames that are not IPv4 and frames whose
/// parsed headers (Ethernet, 802.1Q, IPv4, and UDP when IHL is 5) are cut short.
pub fn forward(frame: &[u8]) -> Verdict<'_> {
    let Some(l) = l2(frame) else { return Verdict::Drop(DropReason::Truncated) };
    if l.ethertype != ETHERTYPE_IPV4 {
        return Verdict::Drop(DropReason::NotIpv4);
    }
    let Some(ip) = frame.get(l.l3..l.l3 + IPV4_LEN) else { return Verdict::Drop(DropReason::Truncated) };
    let ihl = ip[0] & 0x0F;
    if ihl == 5 && ip[9] == IPPROTO_UDP && frame.len() < l.l3 + IPV4_LEN + UDP_LEN {
        return Verdict::Drop(DropReason::Truncated);
    }
    let dst = [ip[16], ip[17], ip[18], ip[19]];
    if forward_table_hit(dst) { Verdict::Pass(Cow::Borrowed(frame)) } else { Verdict::Drop(DropReason::TableMiss) }
}

/// Whether `dst` is an entry of Forward's table (p4-programs/forward/forward.tbl).
pub fn forward_table_hit(dst: [u8; 4]) -> bool {
    matches!(dst, [10, 0, 0, 1..=7])
}

/// Checksum (p4-programs/checksum): IPv4 frames pass when their header checksum is right and are
/// dropped when it is wrong, when the header has options or a version other than 4, or when it is
/// cut short; frames that are not IPv4 pass.
pub fn checksum(frame: &[u8]) -> Verdict<'_> {
    let Some(l) = l2(frame) else { return Verdict::Drop(DropReason::Truncated) };
    if l.ethertype != ETHERTYPE_IPV4 {
        return Verdict::Pass(Cow::Borrowed(frame));
    }
    let Some(ip) = frame.get(l.l3..l.l3 + IPV4_LEN) else { return Verdict::Drop(DropReason::Truncated) };
    if ip[0] != 0x45 {
        return Verdict::Drop(DropReason::UnsupportedIpv4);
    }
    if ipv4_checksum_ok(ip) { Verdict::Pass(Cow::Borrowed(frame)) } else { Verdict::Drop(DropReason::BadChecksum) }
}

/// RemoveHeader (p4-programs/remove_header): a tagged frame leaves without its 802.1Q tag; other
/// frames pass unchanged. Nothing is dropped.
pub fn remove_header(frame: &[u8]) -> Verdict<'_> {
    match strip_vlan(frame) {
        Some(v) => Verdict::Pass(Cow::Owned(v)),
        None => Verdict::Pass(Cow::Borrowed(frame)),
    }
}

/// IntTransit (p4-programs/int_transit): an INT-MD transit hop. A frame carrying an INT-MD stack
/// (IPv4 without options; DSCP [`int::DSCP`] over UDP or TCP without options, or GRE with protocol
/// type [`int::GRE_PROTOCOL`]) leaves with the hop pushed onto its stack ([`int::push`]: node
/// [`INT_NODE_ID`], ports 0 → 1, `hop_latency_ns`), the IPv4 total length, UDP length and the
/// IPv4, UDP and TCP checksums updated (a UDP checksum of 0, "none", stays 0). Other frames pass
/// unchanged; nothing is dropped.
pub fn int_transit(frame: &[u8], hop_latency_ns: u32) -> Verdict<'_> {
    match int_push(frame, hop_latency_ns) {
        Some(out) => Verdict::Pass(Cow::Owned(out)),
        None => Verdict::Pass(Cow::Borrowed(frame)),
    }
}

fn int_push(frame: &[u8], latency: u32) -> Option<Vec<u8>> {
    let l = l2(frame)?;
    let ip = frame.get(l.l3..l.l3 + IPV4_LEN)?;
    if l.ethertype != ETHERTYPE_IPV4 || ip[0] != 0x45 {
        return None;
    }
    let (l4, marked) = (l.l3 + IPV4_LEN, ip[1] >> 2 == int::DSCP);
    let shim = match ip[9] {
        IPPROTO_UDP if marked => l4 + UDP_LEN,
        IPPROTO_TCP if marked && *frame.get(l4 + 12)? >> 4 == 5 => l4 + TCP_LEN,
        IPPROTO_GRE if be16(frame, l4)? == 0 && be16(frame, l4 + 2)? == int::GRE_PROTOCOL => l4 + GRE_LEN,
        _ => return None,
    };
    let mut out = frame.to_vec();
    let hop = int::Hop { node: INT_NODE_ID, ingress_port: 0, egress_port: 1, latency };
    let added = int::push(&mut out, shim, hop)? as u16;
    let total = be16(&out, l.l3 + 2)? + added;
    out[l.l3 + 2..l.l3 + 4].copy_from_slice(&total.to_be_bytes());
    out[l.l3 + 10..l.l3 + 12].fill(0);
    let c = ipv4_checksum(&out[l.l3..l4]);
    out[l.l3 + 10..l.l3 + 12].copy_from_slice(&c.to_be_bytes());
    let segment = usize::from(total) - IPV4_LEN;
    match ip[9] {
        IPPROTO_UDP => {
            out[l4 + 4..l4 + 6].copy_from_slice(&(segment as u16).to_be_bytes());
            if be16(&out, l4 + 6)? != 0 {
                let c = transport_checksum(&out[l.l3..], IPPROTO_UDP, 6);
                out[l4 + 6..l4 + 8].copy_from_slice(&(if c == 0 { 0xFFFF } else { c }).to_be_bytes());
            }
        }
        IPPROTO_TCP => {
            let c = transport_checksum(&out[l.l3..], IPPROTO_TCP, 16);
            out[l4 + 16..l4 + 18].copy_from_slice(&c.to_be_bytes());
        }
        _ => {}
    }
    Some(out)
}

/// The UDP or TCP checksum of the segment after the 20-byte IPv4 header at the start of `packet`
/// (as long as the header's total length says), its checksum field (at `field` in the segment)
/// taken as 0: RFC 768/793, over the pseudo header.
fn transport_checksum(packet: &[u8], protocol: u8, field: usize) -> u16 {
    let total = usize::from(u16::from_be_bytes([packet[2], packet[3]]));
    let mut buf = Vec::with_capacity(12 + total);
    buf.extend_from_slice(&packet[12..20]);
    buf.extend_from_slice(&[0, protocol]);
    buf.extend_from_slice(&((total - IPV4_LEN) as u16).to_be_bytes());
    let at = buf.len() + field;
    buf.extend_from_slice(&packet[IPV4_LEN..total]);
    buf[at..at + 2].fill(0);
    ipv4_checksum(&buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A UDP/IPv4 frame to `dst`, optionally tagged, with a correct IPv4 checksum.
    fn frame(dst: [u8; 4], vlan: Option<u16>) -> Vec<u8> {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&[2, 0, 0, 0, 0, 1]);
        if let Some(v) = vlan {
            f.extend_from_slice(&ETHERTYPE_VLAN.to_be_bytes());
            f.extend_from_slice(&v.to_be_bytes());
        }
        f.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&(20u16 + 8 + 4).to_be_bytes());
        ip[8] = 64;
        ip[9] = IPPROTO_UDP;
        ip[12..16].copy_from_slice(&[10, 0, 0, 100]);
        ip[16..20].copy_from_slice(&dst);
        let c = ipv4_checksum(&ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&ip);
        f.extend_from_slice(&[0x0f, 0xa0, 0x13, 0x88, 0, 12, 0, 0]);
        f.extend_from_slice(b"oct-fpga-id:42");
        f
    }

    #[test]
    fn checksum_of_the_rfc1071_example_header() {
        // The classic example header (Wikipedia, "IPv4 header checksum"): checksum 0xB861.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
            0x00, 0xc7,
        ];
        assert_eq!(ipv4_checksum(&h), 0xB861);
        h[10..12].copy_from_slice(&0xB861u16.to_be_bytes());
        assert!(ipv4_checksum_ok(&h));
        h[8] = 0x3f; // TTL decremented without fixing the checksum
        assert!(!ipv4_checksum_ok(&h));
    }

    #[test]
    fn strip_vlan_removes_exactly_the_tag() {
        let tagged = frame([10, 0, 0, 1], Some(100));
        let untagged = frame([10, 0, 0, 1], None);
        let out = strip_vlan(&tagged).unwrap();
        assert_eq!(out, untagged);
        assert_eq!(out.len(), tagged.len() - 4);
        assert_eq!(be16(&out, 12), Some(ETHERTYPE_IPV4));
        assert_eq!(strip_vlan(&untagged), None);
        // A tag cut short is not stripped (and RemoveHeader passes the frame unchanged).
        assert_eq!(strip_vlan(&tagged[..16]), None);
        assert_eq!(remove_header(&tagged[..16]), Verdict::Pass(Cow::Borrowed(&tagged[..16])));
        assert_eq!(remove_header(&tagged), Verdict::Pass(Cow::Owned(untagged.clone())));
        assert_eq!(remove_header(&untagged), Verdict::Pass(Cow::Borrowed(&untagged[..])));
    }

    #[test]
    fn strip_vlan_keeps_the_probe_marker() {
        let tagged = frame([10, 0, 0, 3], Some(7));
        let out = strip_vlan(&tagged).unwrap();
        let p = latency_proto::probe::parse(&out, latency_proto::probe::ProbeFormat::Latencylab).unwrap();
        assert_eq!(p.id, 42);
    }

    #[test]
    fn forward_filters_on_the_table() {
        for last in 1..=7 {
            let f = frame([10, 0, 0, last], None);
            assert_eq!(forward(&f), Verdict::Pass(Cow::Borrowed(&f[..])), "10.0.0.{last}");
            let t = frame([10, 0, 0, last], Some(100));
            assert!(matches!(forward(&t), Verdict::Pass(_)), "tagged 10.0.0.{last}");
        }
        for dst in [[10, 0, 0, 0], [10, 0, 0, 8], [10, 0, 1, 1], [10, 0, 1, 5], [192, 168, 0, 1]] {
            assert_eq!(forward(&frame(dst, None)), Verdict::Drop(DropReason::TableMiss), "{dst:?}");
        }
    }

    #[test]
    fn forward_drops_non_ipv4_and_truncated_frames() {
        let mut arp = frame([10, 0, 0, 1], None);
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(forward(&arp), Verdict::Drop(DropReason::NotIpv4));
        let f = frame([10, 0, 0, 1], None);
        assert_eq!(forward(&f[..10]), Verdict::Drop(DropReason::Truncated));
        assert_eq!(forward(&f[..30]), Verdict::Drop(DropReason::Truncated));
        // IPv4 complete but the UDP header cut short: a parser error, dropped.
        assert_eq!(forward(&f[..ETH_LEN + IPV4_LEN + 4]), Verdict::Drop(DropReason::Truncated));
    }

    #[test]
    fn checksum_drops_bad_headers_only() {
        let good = frame([10, 0, 0, 2], None);
        assert_eq!(checksum(&good), Verdict::Pass(Cow::Borrowed(&good[..])));
        let tagged = frame([10, 0, 0, 2], Some(100));
        assert!(matches!(checksum(&tagged), Verdict::Pass(_)));
        let mut bad = good.clone();
        bad[ETH_LEN + 11] ^= 0x01;
        assert_eq!(checksum(&bad), Verdict::Drop(DropReason::BadChecksum));
        let mut bad_tagged = tagged.clone();
        bad_tagged[ETH_LEN + VLAN_LEN + 16] = 11; // destination changed, checksum not
        assert_eq!(checksum(&bad_tagged), Verdict::Drop(DropReason::BadChecksum));
        let mut options = good.clone();
        options[ETH_LEN] = 0x46;
        assert_eq!(checksum(&options), Verdict::Drop(DropReason::UnsupportedIpv4));
        let mut arp = good.clone();
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert!(matches!(checksum(&arp), Verdict::Pass(_)));
        assert_eq!(checksum(&good[..ETH_LEN + 10]), Verdict::Drop(DropReason::Truncated));
    }

    /// An INT probe over UDP or TCP (DSCP 0x17), or over GRE, built with etherparse: the source's
    /// stack, then the probe marker.
    fn int_probe(transport: u8) -> Vec<u8> {
        use etherparse::{IpDscp, IpHeaders, IpNumber, Ipv4Header, PacketBuilder};
        let mut payload = int::source_stack(int::Carrier::Transport);
        payload.extend_from_slice(b"oct-fpga-id:42");
        payload.resize(payload.len() + 30, 0);
        let ip = Ipv4Header {
            source: [10, 0, 0, 100],
            destination: [10, 0, 0, 1],
            time_to_live: 64,
            dscp: IpDscp::try_new(int::DSCP).unwrap(),
            ..Default::default()
        };
        let b = PacketBuilder::ethernet2([0xff; 6], [2, 0, 0, 0, 0, 1]).ip(IpHeaders::Ipv4(ip, Default::default()));
        let mut out = Vec::new();
        match transport {
            IPPROTO_UDP => b.udp(4000, 5000).write(&mut out, &payload).unwrap(),
            IPPROTO_TCP => b.tcp(4000, 5000, 42, 65535).psh().ack(1).write(&mut out, &payload).unwrap(),
            _ => {
                let mut inner = Vec::new();
                PacketBuilder::ipv4([10, 0, 0, 100], [10, 0, 0, 1], 64)
                    .udp(4000, 5000)
                    .write(&mut inner, b"oct-fpga-id:42")
                    .unwrap();
                let mut gre = vec![0, 0, 0x88, 0xb5];
                gre.extend(int::source_stack(int::Carrier::Gre(int::ETHERTYPE_IPV4)));
                gre.extend(inner);
                let mut outer =
                    Ipv4Header::new(gre.len() as u16, 64, IpNumber::GRE, [10, 0, 0, 100], [10, 0, 0, 1]).unwrap();
                outer.header_checksum = outer.calc_header_checksum();
                out.extend_from_slice(&[0xff; 6]);
                out.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x00]);
                outer.write(&mut out).unwrap();
                out.extend(gre);
            }
        }
        out
    }

    #[test]
    fn int_transit_pushes_a_hop_and_keeps_every_checksum_valid() {
        use etherparse::{Ipv4HeaderSlice, TcpHeaderSlice, UdpHeaderSlice};
        for proto in [IPPROTO_UDP, IPPROTO_TCP, IPPROTO_GRE] {
            let f = int_probe(proto);
            let Verdict::Pass(out) = int_transit(&f, 251_200) else { panic!("dropped") };
            assert_eq!(out.len(), f.len() + 12, "{proto}: one hop of three words");
            // Checksums as etherparse computes them on the frame that leaves.
            let ip = Ipv4HeaderSlice::from_slice(&out[ETH_LEN..]).unwrap();
            assert_eq!(usize::from(ip.total_len()), out.len() - ETH_LEN);
            assert_eq!(ip.header_checksum(), ip.to_header().calc_header_checksum(), "{proto}");
            let l4 = &out[ETH_LEN + IPV4_LEN..];
            let shim = match proto {
                IPPROTO_UDP => {
                    let udp = UdpHeaderSlice::from_slice(l4).unwrap();
                    assert_eq!(usize::from(udp.length()), l4.len());
                    let sum = udp.to_header().calc_checksum_ipv4(&ip.to_header(), &l4[UDP_LEN..]).unwrap();
                    assert_eq!(udp.checksum(), sum);
                    UDP_LEN
                }
                IPPROTO_TCP => {
                    let tcp = TcpHeaderSlice::from_slice(l4).unwrap();
                    let sum = tcp.to_header().calc_checksum_ipv4(&ip.to_header(), &l4[TCP_LEN..]).unwrap();
                    assert_eq!(tcp.checksum(), sum);
                    TCP_LEN
                }
                _ => GRE_LEN,
            };
            let s = int::parse(l4, shim).unwrap();
            assert_eq!((s.words, s.remaining, s.hops.len()), (10, 6, 2), "{proto}");
            let hop = int::Hop { node: INT_NODE_ID, ingress_port: 0, egress_port: 1, latency: 251_200 };
            assert_eq!(s.hops[0], hop.bytes(), "the transit's hop first");
            assert_eq!(s.hops[1][..4], int::SOURCE_NODE.to_be_bytes(), "then the source's");
            assert_eq!(
                latency_proto::probe::parse(&out, latency_proto::probe::ProbeFormat::Latencylab).unwrap().id,
                42
            );
        }
        // Frames without an INT stack pass unchanged.
        let plain = frame([10, 0, 0, 1], None);
        assert_eq!(int_transit(&plain, 5), Verdict::Pass(Cow::Borrowed(&plain[..])));
        // A full stack is passed with its E flag set and no hop pushed.
        let mut f = int_probe(IPPROTO_UDP);
        f[ETH_LEN + IPV4_LEN + UDP_LEN + int::SHIM_LEN + 3] = 0;
        let Verdict::Pass(out) = int_transit(&f, 5) else { panic!("dropped") };
        assert_eq!(out.len(), f.len());
        assert!(int::parse(&out, ETH_LEN + IPV4_LEN + UDP_LEN).unwrap().exceeded);
    }
}

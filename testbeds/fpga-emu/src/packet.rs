//! The packet behaviour of each emulated P4 program, as pure functions of a frame.
//!
//! Each mirrors its program in `p4-programs/`: the parsers read Ethernet, an optional 802.1Q tag and
//! the IPv4 header; a frame too short for a header its parser extracts is a parser error.

use std::borrow::Cow;

/// EtherType of an 802.1Q tag.
pub const ETHERTYPE_VLAN: u16 = 0x8100;
/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// IP protocol number of UDP.
pub const IPPROTO_UDP: u8 = 17;
/// Length of an Ethernet header without tag.
pub const ETH_LEN: usize = 14;
/// Length of an 802.1Q tag.
pub const VLAN_LEN: usize = 4;
/// Length of an IPv4 header without options.
pub const IPV4_LEN: usize = 20;
/// Length of a UDP header.
pub const UDP_LEN: usize = 8;

/// What a program does with a frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict<'a> {
    /// The frame leaves the pipeline (possibly rewritten).
    Pass(Cow<'a, [u8]>),
    /// The frame is dropped, for this reason.
    Drop(DropReason),
}

/// Why a program dropped a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// A header the parser extracts is cut short.
    Truncated,
    /// Forward: the frame carries no IPv4 header.
    NotIpv4,
    /// Forward: the IPv4 destination is not in the table (10.0.0.1–10.0.0.7).
    TableMiss,
    /// Checksum: the IPv4 header has options or a version other than 4.
    UnsupportedIpv4,
    /// Checksum: the IPv4 header checksum is wrong.
    BadChecksum,
}

impl DropReason {
    /// Short name for counters and logs.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Truncated => "truncated",
            DropReason::NotIpv4 => "not_ipv4",
            DropReason::TableMiss => "table_miss",
            DropReason::UnsupportedIpv4 => "unsupported_ipv4",
            DropReason::BadChecksum => "bad_checksum",
        }
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
}

//! In-band Network Telemetry headers as probes carry them: INT-MD ("embed data", P4.org INT
//! dataplane specification v2.1) over UDP/TCP or over GRE.
//!
//! The one definition that the trace generator (an INT source: shim, INT-MD header and its own hop)
//! and the emulated INT transit program (which pushes a hop) share.
//!
//! - **Over UDP/TCP**: the IPv4 DSCP [`DSCP`] says an INT shim follows the transport header. The
//!   shim (4 B): type 1 (INT-MD) in the top 4 bits, NPT 0 (original payload follows), length, then
//!   16 bits holding the original DSCP in the low 6 (0 for probes).
//! - **Over GRE**: the GRE protocol type [`GRE_PROTOCOL`] says an INT shim follows the GRE header.
//!   The shim (4 B): type 1, G 0, length, then the next protocol (the EtherType of what follows the
//!   stack: 0x0800, the original IPv4 packet). INT over GRE has no assigned protocol type; this is
//!   IEEE 802's local experimental EtherType 1.
//! - The shim's length counts 4-byte words of shim, INT-MD header and stack together.
//! - **INT-MD header** (12 B): version 2, flags D, E (hop count exceeded), M, 12 reserved bits, hop
//!   ML (words each hop pushes, 5 bits), remaining hop count (8 bits), instruction bitmap (16),
//!   domain-specific id, instruction and flags (16 each, 0 here).
//! - **Stack**: newest hop first, right after the INT-MD header. Probes ask for [`INSTRUCTIONS`]:
//!   node id (bit 0), level-1 ingress and egress port ids (bit 1), hop latency (bit 2): 3 words.

/// DSCP marking an INT packet over UDP/TCP.
pub const DSCP: u8 = 0x17;
/// GRE protocol type of an INT shim (IEEE 802 local experimental EtherType 1).
pub const GRE_PROTOCOL: u16 = 0x88B5;
/// EtherType of IPv4: what follows the stack of an INT-over-GRE probe.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// Shim type of INT-MD.
pub const TYPE_MD: u8 = 1;
/// INT-MD header version.
pub const VERSION: u8 = 2;
/// Length of the shim.
pub const SHIM_LEN: usize = 4;
/// Length of the INT-MD header.
pub const MD_LEN: usize = 12;
/// Instruction bitmap of probes: node id, level-1 port ids, hop latency.
pub const INSTRUCTIONS: u16 = 0xE000;
/// Words each hop pushes under [`INSTRUCTIONS`].
pub const HOP_WORDS: u8 = 3;
/// Hops a probe's stack has room for, the source's included.
pub const MAX_HOPS: u8 = 8;
/// Node id of the probes' source.
pub const SOURCE_NODE: u32 = 1;

/// One hop's metadata under [`INSTRUCTIONS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hop {
    /// Node id.
    pub node: u32,
    /// Level-1 ingress port id.
    pub ingress_port: u16,
    /// Level-1 egress port id.
    pub egress_port: u16,
    /// Hop latency (the node's unit; ns for the emulated transit).
    pub latency: u32,
}

impl Hop {
    /// The hop's three words, big-endian.
    pub fn bytes(&self) -> [u8; 4 * HOP_WORDS as usize] {
        let mut b = [0u8; 12];
        b[0..4].copy_from_slice(&self.node.to_be_bytes());
        b[4..6].copy_from_slice(&self.ingress_port.to_be_bytes());
        b[6..8].copy_from_slice(&self.egress_port.to_be_bytes());
        b[8..12].copy_from_slice(&self.latency.to_be_bytes());
        b
    }
}

/// Where an INT stack is carried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Carrier {
    /// After a UDP or TCP header (DSCP [`DSCP`]).
    Transport,
    /// After a GRE header (protocol type [`GRE_PROTOCOL`]), followed by a packet of this EtherType.
    Gre(u16),
}

/// Shim, INT-MD header and stack of a probe as its source sends it: the source's hop alone.
pub fn source_stack(carrier: Carrier) -> Vec<u8> {
    let words = (SHIM_LEN + MD_LEN) / 4 + usize::from(HOP_WORDS);
    let mut out = Vec::with_capacity(words * 4);
    let tail = match carrier {
        Carrier::Transport => 0u16,
        Carrier::Gre(next) => next,
    };
    out.extend_from_slice(&[TYPE_MD << 4, words as u8]);
    out.extend_from_slice(&tail.to_be_bytes());
    out.extend_from_slice(&[VERSION << 4, 0, HOP_WORDS, MAX_HOPS - 1]);
    out.extend_from_slice(&INSTRUCTIONS.to_be_bytes());
    out.extend_from_slice(&[0; 6]);
    out.extend_from_slice(&Hop { node: SOURCE_NODE, ingress_port: 0, egress_port: 1, latency: 0 }.bytes());
    out
}

/// An INT-MD stack as read at the start of a shim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stack {
    /// Shim length, words.
    pub words: u8,
    /// Words per hop.
    pub hop_words: u8,
    /// Remaining hop count.
    pub remaining: u8,
    /// Whether a hop found no room (E flag).
    pub exceeded: bool,
    /// Instruction bitmap.
    pub instructions: u16,
    /// The shim's last 16 bits (original DSCP, or the next protocol over GRE).
    pub tail: u16,
    /// The hops, newest first (each `hop_words` words).
    pub hops: Vec<Vec<u8>>,
}

/// Read the stack whose shim starts at `at`; `None` unless it is a whole INT-MD stack of
/// version 2 whose length is the headers plus whole hops.
pub fn parse(frame: &[u8], at: usize) -> Option<Stack> {
    let h = frame.get(at..at + SHIM_LEN + MD_LEN)?;
    let (words, md) = (h[1], &h[SHIM_LEN..]);
    let hop_words = md[2] & 0x1F;
    if h[0] >> 4 != TYPE_MD || md[0] >> 4 != VERSION || hop_words == 0 {
        return None;
    }
    let stack = frame.get(at + SHIM_LEN + MD_LEN..at + 4 * usize::from(words))?;
    let hop_len = 4 * usize::from(hop_words);
    if stack.len() % hop_len != 0 {
        return None;
    }
    Some(Stack {
        words,
        hop_words,
        remaining: md[3],
        exceeded: md[0] & 0x04 != 0,
        instructions: u16::from_be_bytes([md[4], md[5]]),
        tail: u16::from_be_bytes([h[2], h[3]]),
        hops: stack.chunks(hop_len).map(<[u8]>::to_vec).collect(),
    })
}

/// Push `hop` onto the stack whose shim starts at `at`, as a transit hop does: its words go first
/// in the stack, the shim's length grows and the remaining hop count falls by one. With no hop
/// remaining, the E flag is set and nothing is pushed. Returns the bytes inserted (`None`: no valid
/// stack at `at`, or a hop ML other than [`HOP_WORDS`]).
pub fn push(frame: &mut Vec<u8>, at: usize, hop: Hop) -> Option<usize> {
    let s = parse(frame, at)?;
    if s.hop_words != HOP_WORDS {
        return None;
    }
    let md = at + SHIM_LEN;
    if s.remaining == 0 {
        frame[md] |= 0x04;
        return Some(0);
    }
    let bytes = hop.bytes();
    frame.splice(md + MD_LEN..md + MD_LEN, bytes);
    frame[at + 1] = s.words + HOP_WORDS;
    frame[md + 3] = s.remaining - 1;
    Some(bytes.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_stack_is_the_specification_s_bytes() {
        // Shim: type 1, NPT 0, 7 words (4 + 12 + 12 bytes), original DSCP 0. INT-MD header:
        // version 2, hop ML 3, 7 hops remaining, instructions 0xE000. The source's hop: node 1,
        // ports 0 and 1, latency 0.
        let s = source_stack(Carrier::Transport);
        assert_eq!(
            s,
            [
                0x10, 7, 0, 0, //
                0x20, 0, 3, 7, 0xE0, 0, 0, 0, 0, 0, 0, 0, //
                0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0,
            ]
        );
        let g = source_stack(Carrier::Gre(ETHERTYPE_IPV4));
        assert_eq!((&g[..4], &g[4..]), (&[0x10, 7, 0x08, 0x00][..], &s[4..]));
    }

    #[test]
    fn transit_hops_push_until_the_stack_is_full() {
        let mut f = b"hdr".to_vec();
        f.extend(source_stack(Carrier::Transport));
        f.extend_from_slice(b"payload");
        for k in 2..=MAX_HOPS {
            let hop = Hop { node: u32::from(k), ingress_port: 3, egress_port: 4, latency: 100 * u32::from(k) };
            assert_eq!(push(&mut f, 3, hop), Some(12));
            let s = parse(&f, 3).unwrap();
            assert_eq!(
                (s.words, s.remaining, s.hops.len(), s.exceeded),
                (7 + 3 * (k - 1), MAX_HOPS - k, k as usize, false)
            );
            assert_eq!(s.hops[0], hop.bytes(), "the newest hop first");
            assert_eq!(&f[3 + 4 * usize::from(s.words)..], b"payload");
        }
        let full = f.clone();
        assert_eq!(push(&mut f, 3, Hop { node: 9, ingress_port: 0, egress_port: 0, latency: 0 }), Some(0));
        assert_eq!(f.len(), full.len());
        assert!(parse(&f, 3).unwrap().exceeded);
        assert_eq!(parse(b"hdr", 3), None);
        assert_eq!(
            push(&mut b"hdr\x10\x07".to_vec(), 3, Hop { node: 2, ingress_port: 0, egress_port: 0, latency: 0 }),
            None
        );
    }
}

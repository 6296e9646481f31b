// IntTransit: an INT-MD transit hop (P4.org In-band Network Telemetry dataplane
// specification v2.1, "embed data" mode) that pushes its own metadata onto the
// INT stack of every INT packet it forwards. A header-inserting program: each INT
// packet leaves 12 bytes longer.
//
// INT packets, as the probe generator makes them (orchestrate trace generate
// --template int | int_gre; the layout is defined in proto/src/int.rs):
//   - over UDP or TCP: IPv4 DSCP 0x17, the INT shim right after the transport
//     header (UDP, or TCP without options);
//   - over GRE: IPv4 protocol 47, GRE without options and protocol type 0x88B5,
//     the INT shim right after it, then the original IPv4 packet.
// The shim (type 1 = INT-MD, length in 4-byte words of shim + INT-MD header +
// stack) is followed by the 12-byte INT-MD header (version 2, hop ML, remaining
// hop count, instruction bitmap) and the stack, newest hop first. The program
// handles the instructions the probes carry (bitmap 0xE000: node id, level-1
// ingress and egress port ids, hop latency; hop ML 3) and leaves other INT
// packets, and every other frame, unchanged. Nothing is dropped.
//
// Pushing a hop: int_hop is made valid and emitted right after the INT-MD header,
// so it lands in front of the hops already there. The shim's length grows by 3
// words, the remaining hop count falls by 1 (at 0 the E flag is set instead and
// nothing is pushed), and the lengths that cover the stack grow by 12: IPv4
// totalLen, UDP length and Open-NIC-Shell's tuser_size. The IPv4 header checksum
// is recomputed; the UDP and TCP checksums are updated incrementally (RFC 1624,
// HC' = ~(~HC + ~m + m') over every changed and every added 16-bit word); a UDP
// checksum of 0 (none) stays 0.
//
// The hop: node id NODE_ID, ingress and egress port ids from tuser_src and
// tuser_dst, hop latency 0: xsa.p4's standard metadata carries no timestamp. (The
// emulated program in testbeds/fpga-emu reports the delay it applies instead.)
//
// Vendor bound: CONFIG.TOTAL_LATENCY of the generated IP, to be read once it is
// built (bitstreams/int_transit.yaml holds an estimate until then). Calculation A
// of UG1308 (LatencyLab's emulator/run_latency.py): one inserted header of 96
// bits on a 512-bit bus adds 1 cycle per packet in flight.

#include <core.p4>
#include <xsa.p4>

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;

const bit<16> ETHERTYPE_VLAN   = 0x8100;
const bit<16> ETHERTYPE_IPV4   = 0x0800;
const bit<8>  IPPROTO_TCP      = 6;
const bit<8>  IPPROTO_UDP      = 17;
const bit<8>  IPPROTO_GRE      = 47;
const bit<6>  INT_DSCP         = 0x17;
const bit<16> GRE_PROTOCOL_INT = 0x88B5;
const bit<4>  INT_TYPE_MD      = 1;
const bit<4>  INT_VERSION      = 2;
const bit<5>  HOP_WORDS        = 3;
const bit<16> HOP_BYTES        = 12;
const bit<32> NODE_ID          = 2;

// ---------------------------------------------------------------- headers

header ethernet_t {
    mac_addr_t dstAddr;
    mac_addr_t srcAddr;
    bit<16>    etherType;
}

header vlan_t {
    bit<3>  pcp;
    bit<1>  dei;
    bit<12> vid;
    bit<16> etherType;
}

header ipv4_t {
    bit<4>      version;
    bit<4>      ihl;
    bit<6>      dscp;
    bit<2>      ecn;
    bit<16>     totalLen;
    bit<16>     identification;
    bit<3>      flags;
    bit<13>     fragOffset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdrChecksum;
    ipv4_addr_t srcAddr;
    ipv4_addr_t dstAddr;
}

header udp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<16> length;
    bit<16> checksum;
}

header tcp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<32> seqNo;
    bit<32> ackNo;
    bit<4>  dataOffset;
    bit<4>  res;
    bit<8>  flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgentPtr;
}

header gre_t {
    bit<16> flagsVersion;
    bit<16> protocol;
}

// The INT shim: over UDP/TCP the last 16 bits hold the original DSCP (NPT 0);
// over GRE the top 4 bits are type, G and 3 reserved bits, and the last 16 bits
// the next protocol. Both share this layout of 4 + 4 + 8 + 16 bits.
header int_shim_t {
    bit<4>  int_type;
    bit<4>  flags;
    bit<8>  len;
    bit<16> tail;
}

header int_md_t {
    bit<4>  version;
    bit<1>  d;
    bit<1>  e;
    bit<1>  m;
    bit<12> reserved;
    bit<5>  hop_ml;
    bit<8>  remaining_hop_cnt;
    bit<16> instructions;
    bit<16> ds_id;
    bit<16> ds_instructions;
    bit<16> ds_flags;
}

header int_hop_t {
    bit<32> node_id;
    bit<16> ingress_port_id;
    bit<16> egress_port_id;
    bit<32> hop_latency;
}

// Named `headers` (not headers_t) so that LatencyLab's run_latency.py finds the
// struct for its Calculation A.
struct headers {
    ethernet_t ethernet;
    vlan_t     vlan;
    ipv4_t     ipv4;
    udp_t      udp;
    tcp_t      tcp;
    gre_t      gre;
    int_shim_t int_shim;
    int_md_t   int_md;
    int_hop_t  int_hop;     // made valid by push_hop, emitted right after int_md
}

// Open-NIC-Shell's three 16-bit tuser fields (packet size, source, destination).
struct user_metadata_t {
    bit<16> tuser_size;
    bit<16> tuser_src;
    bit<16> tuser_dst;
}

// ---------------------------------------------------------------- parser

parser IntTransitParser(packet_in packet,
                        out headers hdr,
                        inout user_metadata_t meta,
                        inout standard_metadata_t smeta) {

    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            ETHERTYPE_VLAN : parse_vlan;
            ETHERTYPE_IPV4 : parse_ipv4;
            default        : accept;
        }
    }

    state parse_vlan {
        packet.extract(hdr.vlan);
        transition select(hdr.vlan.etherType) {
            ETHERTYPE_IPV4 : parse_ipv4;
            default        : accept;
        }
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.protocol) {
            (5, IPPROTO_UDP) : parse_udp;
            (5, IPPROTO_TCP) : parse_tcp;
            (5, IPPROTO_GRE) : parse_gre;
            default          : accept;
        }
    }

    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.ipv4.dscp) {
            INT_DSCP : parse_int;
            default  : accept;
        }
    }

    state parse_tcp {
        packet.extract(hdr.tcp);
        transition select(hdr.ipv4.dscp, hdr.tcp.dataOffset) {
            (INT_DSCP, 5) : parse_int;
            default       : accept;
        }
    }

    state parse_gre {
        packet.extract(hdr.gre);
        transition select(hdr.gre.flagsVersion, hdr.gre.protocol) {
            (0, GRE_PROTOCOL_INT) : parse_int;
            default               : accept;
        }
    }

    state parse_int {
        packet.extract(hdr.int_shim);
        packet.extract(hdr.int_md);
        transition accept;
    }
}

// ---------------------------------------------------------------- match-action

control IntTransitControl(inout headers hdr,
                          inout user_metadata_t meta,
                          inout standard_metadata_t smeta) {

    Checksum<bit<16>>(HashAlgorithm_t.ONES_COMPLEMENT16) ipv4_sum;
    Checksum<bit<16>>(HashAlgorithm_t.ONES_COMPLEMENT16) l4_sum;

    // The 16-bit words of the shim and INT-MD header that push_hop changes, before.
    bit<16> shim_word_before = 0;
    bit<16> md_word_before   = 0;
    bit<16> l4_len_before    = 0;

    action push_hop() {
        shim_word_before = hdr.int_shim.int_type ++ hdr.int_shim.flags ++ hdr.int_shim.len;
        md_word_before   = hdr.int_md.reserved[2:0] ++ hdr.int_md.hop_ml ++ hdr.int_md.remaining_hop_cnt;
        l4_len_before    = hdr.ipv4.totalLen - 20;

        hdr.int_hop.setValid();
        hdr.int_hop.node_id         = NODE_ID;
        hdr.int_hop.ingress_port_id = meta.tuser_src;
        hdr.int_hop.egress_port_id  = meta.tuser_dst;
        hdr.int_hop.hop_latency     = 0;

        hdr.int_shim.len              = hdr.int_shim.len + (bit<8>) HOP_WORDS;
        hdr.int_md.remaining_hop_cnt  = hdr.int_md.remaining_hop_cnt - 1;
        hdr.ipv4.totalLen             = hdr.ipv4.totalLen + HOP_BYTES;
        meta.tuser_size               = meta.tuser_size + HOP_BYTES;
    }

    apply {
        if (smeta.parser_error == error.NoError && hdr.int_md.isValid()
                && hdr.int_shim.int_type == INT_TYPE_MD && hdr.int_md.version == INT_VERSION
                && hdr.int_md.hop_ml == HOP_WORDS) {
            if (hdr.int_md.remaining_hop_cnt == 0) {
                hdr.int_md.e = 1;
            } else {
                push_hop();
                bit<16> shim_word = hdr.int_shim.int_type ++ hdr.int_shim.flags ++ hdr.int_shim.len;
                bit<16> md_word   = hdr.int_md.reserved[2:0] ++ hdr.int_md.hop_ml ++ hdr.int_md.remaining_hop_cnt;
                bit<16> l4_len    = hdr.ipv4.totalLen - 20;
                if (hdr.udp.isValid() && hdr.udp.checksum != 0) {
                    // Changed: the shim and INT-MD words, the UDP length field and the
                    // pseudo header's length; added: the hop's six words.
                    l4_sum.apply({ ~hdr.udp.checksum,
                                   ~shim_word_before, shim_word,
                                   ~md_word_before, md_word,
                                   ~hdr.udp.length, l4_len,
                                   ~l4_len_before, l4_len,
                                   hdr.int_hop.node_id,
                                   hdr.int_hop.ingress_port_id,
                                   hdr.int_hop.egress_port_id,
                                   hdr.int_hop.hop_latency },
                                 hdr.udp.checksum);
                    hdr.udp.length = l4_len;
                } else if (hdr.udp.isValid()) {
                    hdr.udp.length = l4_len;
                } else if (hdr.tcp.isValid()) {
                    // Changed: the shim and INT-MD words and the pseudo header's length.
                    l4_sum.apply({ ~hdr.tcp.checksum,
                                   ~shim_word_before, shim_word,
                                   ~md_word_before, md_word,
                                   ~l4_len_before, l4_len,
                                   hdr.int_hop.node_id,
                                   hdr.int_hop.ingress_port_id,
                                   hdr.int_hop.egress_port_id,
                                   hdr.int_hop.hop_latency },
                                 hdr.tcp.checksum);
                }
                // The IPv4 header checksum over the header with its checksum field 0.
                hdr.ipv4.hdrChecksum = 0;
                ipv4_sum.apply({ hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
                                 hdr.ipv4.totalLen, hdr.ipv4.identification, hdr.ipv4.flags,
                                 hdr.ipv4.fragOffset, hdr.ipv4.ttl, hdr.ipv4.protocol,
                                 hdr.ipv4.hdrChecksum, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
                               hdr.ipv4.hdrChecksum);
            }
        }
    }
}

// ---------------------------------------------------------------- deparser

control IntTransitDeparser(packet_out packet,
                           in headers hdr,
                           inout user_metadata_t meta,
                           inout standard_metadata_t smeta) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.vlan);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.tcp);
        packet.emit(hdr.gre);
        packet.emit(hdr.int_shim);
        packet.emit(hdr.int_md);
        packet.emit(hdr.int_hop);
    }
}

XilinxPipeline(
    IntTransitParser(),
    IntTransitControl(),
    IntTransitDeparser()
) main;

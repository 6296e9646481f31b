// Forward: exact match on the IPv4 destination address.
//
// The parser reads Ethernet, an optional 802.1Q tag, IPv4 and UDP. The table
// `ipv4_forward` looks up hdr.ipv4.dstAddr: a hit runs `forward_packet` and the
// packet leaves unchanged; a miss runs the default action `drop_packet`
// (standard_metadata.drop = 1). Frames that are not IPv4, and frames the parser
// flags with an error, are dropped too.
//
// Entries: forward.tbl (10.0.0.1 to 10.0.0.7). The Forward probe trace sends about
// 70 % of its probes to those addresses and about 30 % to 10.0.1.x, which miss and
// are dropped.
//
// Vendor worst-case latency (CONFIG.TOTAL_LATENCY reported by the VitisNetP4 IP):
// 55 cycles at 250 MHz = 220 ns (bitstreams/forward.yaml, vendor_bound_cycles).

#include <core.p4>
#include <xsa.p4>

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;

const bit<16> ETHERTYPE_VLAN = 0x8100;
const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8>  IPPROTO_UDP    = 17;

// ---------------------------------------------------------------- headers

header ethernet_t {
    mac_addr_t dstAddr;
    mac_addr_t srcAddr;
    bit<16>    etherType;
}

header vlan_t {
    bit<3>  pcp;        // priority code point
    bit<1>  dei;        // drop eligible indicator
    bit<12> vid;        // VLAN identifier
    bit<16> etherType;  // EtherType of the encapsulated frame
}

header ipv4_t {
    bit<4>      version;
    bit<4>      ihl;            // header length in 32-bit words
    bit<8>      diffserv;
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

struct headers_t {
    ethernet_t ethernet;
    vlan_t     vlan;
    ipv4_t     ipv4;
    udp_t      udp;
}

// User metadata: the three 16-bit tuser fields Open-NIC-Shell carries with every
// packet on its 250 MHz AXI4-Stream interfaces (packet size in bytes, source,
// destination), in that order. The box_250mhz wrapper connects them to the IP's
// user_metadata_in / user_metadata_out ports. This program leaves them unchanged.
struct user_metadata_t {
    bit<16> tuser_size;
    bit<16> tuser_src;
    bit<16> tuser_dst;
}

// ---------------------------------------------------------------- parser

parser ForwardParser(packet_in packet,
                     out headers_t hdr,
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
        // UDP directly follows the IPv4 header only when it has no options.
        transition select(hdr.ipv4.ihl, hdr.ipv4.protocol) {
            (5, IPPROTO_UDP) : parse_udp;
            default          : accept;
        }
    }

    state parse_udp {
        packet.extract(hdr.udp);
        transition accept;
    }
}

// ---------------------------------------------------------------- match-action

control ForwardControl(inout headers_t hdr,
                       inout user_metadata_t meta,
                       inout standard_metadata_t smeta) {

    action forward_packet() {
        // Hit: the packet continues to the deparser unchanged.
    }

    action drop_packet() {
        smeta.drop = 1;
    }

    table ipv4_forward {
        key            = { hdr.ipv4.dstAddr : exact; }
        actions        = { forward_packet; drop_packet; }
        size           = 1024;
        default_action = drop_packet;
    }

    apply {
        if (smeta.parser_error != error.NoError || !hdr.ipv4.isValid()) {
            drop_packet();
        } else {
            ipv4_forward.apply();
        }
    }
}

// ---------------------------------------------------------------- deparser

control ForwardDeparser(packet_out packet,
                        in headers_t hdr,
                        inout user_metadata_t meta,
                        inout standard_metadata_t smeta) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.vlan);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
    }
}

XilinxPipeline(
    ForwardParser(),
    ForwardControl(),
    ForwardDeparser()
) main;

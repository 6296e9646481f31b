// FiveTuple: exact-match (CAM) lookup on the IPv4/UDP five-tuple.
//
// The parser reads Ethernet, an optional 802.1Q tag, IPv4 and UDP. For UDP packets
// the table `five_tuple` looks up (ipv4.srcAddr, ipv4.dstAddr, ipv4.protocol,
// udp.srcPort, udp.dstPort). A hit on an `InsertVLAN(vid)` entry pushes an 802.1Q
// tag with that VLAN id in front of the existing EtherType (outermost tag, TPID
// 0x8100) and forwards the packet; `forward_packet` forwards it unchanged. A miss
// runs the default action `NoAction`: the packet is forwarded unchanged. Nothing is
// dropped.
//
// Entries: five_tuple.tbl (src 10.0.0.100, dst 10.0.0.1 to 10.0.0.4, protocol 17,
// source port 4000, destination ports 5000 to 5003).
//
// Clocks: the CAM runs at 300 MHz (cam_mem_aclk, CONFIG.CAM_MEM_CLK_FREQ_MHZ 300)
// while the packet pipeline runs at 250 MHz (s_axis_aclk).
// Vendor worst-case latency (CONFIG.TOTAL_LATENCY reported by the VitisNetP4 IP):
// 53 cycles, stated against the 250 MHz pipeline clock = 212 ns
// (bitstreams/five_tuple.yaml, vendor_bound_cycles). UG1308 notes that header
// insertion adds cycles that the calculated figure does not include.

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
    vlan_t     inserted_vlan;   // made valid by InsertVLAN, emitted right after Ethernet
    vlan_t     vlan;            // tag already present on the received frame, if any
    ipv4_t     ipv4;
    udp_t      udp;
}

// User metadata: the three 16-bit tuser fields Open-NIC-Shell carries with every
// packet on its 250 MHz AXI4-Stream interfaces (packet size in bytes, source,
// destination), in that order, connected by the box_250mhz wrapper to the IP's
// user_metadata_in / user_metadata_out ports. InsertVLAN adds the 4 tag bytes to
// tuser_size.
struct user_metadata_t {
    bit<16> tuser_size;
    bit<16> tuser_src;
    bit<16> tuser_dst;
}

// ---------------------------------------------------------------- parser

parser FiveTupleParser(packet_in packet,
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

control FiveTupleControl(inout headers_t hdr,
                         inout user_metadata_t meta,
                         inout standard_metadata_t smeta) {

    action InsertVLAN(bit<12> vid) {
        hdr.inserted_vlan.setValid();
        hdr.inserted_vlan.pcp       = 0;
        hdr.inserted_vlan.dei       = 0;
        hdr.inserted_vlan.vid       = vid;
        hdr.inserted_vlan.etherType = hdr.ethernet.etherType;
        hdr.ethernet.etherType      = ETHERTYPE_VLAN;
        meta.tuser_size             = meta.tuser_size + 4;
    }

    action forward_packet() {
        // Hit without modification.
    }

    table five_tuple {
        key = {
            hdr.ipv4.srcAddr  : exact;
            hdr.ipv4.dstAddr  : exact;
            hdr.ipv4.protocol : exact;
            hdr.udp.srcPort   : exact;
            hdr.udp.dstPort   : exact;
        }
        actions        = { InsertVLAN; forward_packet; NoAction; }
        size           = 1024;
        default_action = NoAction;
    }

    apply {
        if (smeta.parser_error == error.NoError && hdr.udp.isValid()) {
            five_tuple.apply();
        }
    }
}

// ---------------------------------------------------------------- deparser

control FiveTupleDeparser(packet_out packet,
                          in headers_t hdr,
                          inout user_metadata_t meta,
                          inout standard_metadata_t smeta) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.inserted_vlan);
        packet.emit(hdr.vlan);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
    }
}

XilinxPipeline(
    FiveTupleParser(),
    FiveTupleControl(),
    FiveTupleDeparser()
) main;

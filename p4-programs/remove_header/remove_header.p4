// RemoveHeader: strips the 802.1Q VLAN tag.
//
// The parser reads Ethernet and, when the EtherType is 0x8100, the 802.1Q tag;
// everything after it is payload to the pipeline. When a tag is present the
// control copies the tag's inner EtherType back into the Ethernet header, sets the
// tag invalid (so the deparser does not emit it) and subtracts its 4 bytes from
// tuser_size. Untagged frames pass unchanged. Nothing is dropped and the program
// has no table.
//
// Vendor worst-case latency (CONFIG.TOTAL_LATENCY reported by the VitisNetP4 IP):
// 66 cycles at 250 MHz = 264 ns (bitstreams/remove_header.yaml, vendor_bound_cycles).

#include <core.p4>
#include <xsa.p4>

typedef bit<48> mac_addr_t;

const bit<16> ETHERTYPE_VLAN = 0x8100;

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

struct headers_t {
    ethernet_t ethernet;
    vlan_t     vlan;
}

// User metadata: the three 16-bit tuser fields Open-NIC-Shell carries with every
// packet on its 250 MHz AXI4-Stream interfaces (packet size in bytes, source,
// destination), in that order, connected by the box_250mhz wrapper to the IP's
// user_metadata_in / user_metadata_out ports.
struct user_metadata_t {
    bit<16> tuser_size;
    bit<16> tuser_src;
    bit<16> tuser_dst;
}

// ---------------------------------------------------------------- parser

parser RemoveHeaderParser(packet_in packet,
                          out headers_t hdr,
                          inout user_metadata_t meta,
                          inout standard_metadata_t smeta) {

    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            ETHERTYPE_VLAN : parse_vlan;
            default        : accept;
        }
    }

    state parse_vlan {
        packet.extract(hdr.vlan);
        transition accept;
    }
}

// ---------------------------------------------------------------- match-action

control RemoveHeaderControl(inout headers_t hdr,
                            inout user_metadata_t meta,
                            inout standard_metadata_t smeta) {

    action remove_vlan() {
        hdr.ethernet.etherType = hdr.vlan.etherType;   // restore the inner EtherType
        hdr.vlan.setInvalid();
        meta.tuser_size        = meta.tuser_size - 4;
    }

    apply {
        if (hdr.vlan.isValid()) {
            remove_vlan();
        }
    }
}

// ---------------------------------------------------------------- deparser

control RemoveHeaderDeparser(packet_out packet,
                             in headers_t hdr,
                             inout user_metadata_t meta,
                             inout standard_metadata_t smeta) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.vlan);      // not emitted once set invalid
    }
}

XilinxPipeline(
    RemoveHeaderParser(),
    RemoveHeaderControl(),
    RemoveHeaderDeparser()
) main;

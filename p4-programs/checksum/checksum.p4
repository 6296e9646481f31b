// Checksum: verifies the IPv4 header checksum and drops packets where it is wrong.
//
// The parser reads Ethernet, an optional 802.1Q tag and the 20-byte IPv4 header.
// IPv4 headers with options (IHL > 5) or a version other than 4 are flagged with a
// parser error and dropped, since the check covers the 20-byte header only.
//
// The control feeds the ten 16-bit words of the IPv4 header, checksum field
// included, to the VitisNetP4 Checksum extern with the ONES_COMPLEMENT16
// algorithm, which returns the ones' complement of their ones' complement sum
// (RFC 1071). For an intact header that result is 0; any other value means the
// header is corrupt and the packet is dropped (standard_metadata.drop = 1). The
// same result can be computed with explicit arithmetic: add the ten words as
// 32-bit values, fold the carries into the low 16 bits twice, and complement.
// Frames that are not IPv4 pass unchanged. The program has no table.
//
// Vendor worst-case latency (CONFIG.TOTAL_LATENCY reported by the VitisNetP4 IP):
// 109 cycles at 250 MHz = 436 ns (bitstreams/checksum.yaml, vendor_bound_cycles).

#include <core.p4>
#include <xsa.p4>

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;

const bit<16> ETHERTYPE_VLAN = 0x8100;
const bit<16> ETHERTYPE_IPV4 = 0x0800;

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

struct headers_t {
    ethernet_t ethernet;
    vlan_t     vlan;
    ipv4_t     ipv4;
}

// User metadata: the three 16-bit tuser fields Open-NIC-Shell carries with every
// packet on its 250 MHz AXI4-Stream interfaces (packet size in bytes, source,
// destination), in that order, connected by the box_250mhz wrapper to the IP's
// user_metadata_in / user_metadata_out ports. This program leaves them unchanged.
struct user_metadata_t {
    bit<16> tuser_size;
    bit<16> tuser_src;
    bit<16> tuser_dst;
}

error {
    UnsupportedIPv4Header
}

// ---------------------------------------------------------------- parser

parser ChecksumParser(packet_in packet,
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
        verify(hdr.ipv4.version == 4 && hdr.ipv4.ihl == 5, error.UnsupportedIPv4Header);
        transition accept;
    }
}

// ---------------------------------------------------------------- match-action

control ChecksumControl(inout headers_t hdr,
                        inout user_metadata_t meta,
                        inout standard_metadata_t smeta) {

    Checksum<bit<16>>(HashAlgorithm_t.ONES_COMPLEMENT16) ipv4_checksum;
    bit<16> residue = 0;

    action drop_packet() {
        smeta.drop = 1;
    }

    apply {
        if (smeta.parser_error != error.NoError) {
            drop_packet();
        } else if (hdr.ipv4.isValid()) {
            // 160 bits: the whole 20-byte header, checksum field included.
            ipv4_checksum.apply({ hdr.ipv4.version,
                                  hdr.ipv4.ihl,
                                  hdr.ipv4.diffserv,
                                  hdr.ipv4.totalLen,
                                  hdr.ipv4.identification,
                                  hdr.ipv4.flags,
                                  hdr.ipv4.fragOffset,
                                  hdr.ipv4.ttl,
                                  hdr.ipv4.protocol,
                                  hdr.ipv4.hdrChecksum,
                                  hdr.ipv4.srcAddr,
                                  hdr.ipv4.dstAddr },
                                residue);
            if (residue != 0) {
                drop_packet();
            }
        }
    }
}

// ---------------------------------------------------------------- deparser

control ChecksumDeparser(packet_out packet,
                         in headers_t hdr,
                         inout user_metadata_t meta,
                         inout standard_metadata_t smeta) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.vlan);
        packet.emit(hdr.ipv4);
    }
}

XilinxPipeline(
    ChecksumParser(),
    ChecksumControl(),
    ChecksumDeparser()
) main;

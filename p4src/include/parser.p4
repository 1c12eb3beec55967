// Parser and deparser.  Nothing here drops a frame: an unknown EtherType ends parsing
// (the rest is payload) and a short frame ends it with a parser error, which L2 forwarding
// ignores and the congestion point treats as "not a data frame" (no CNM).
#ifndef __PARSER_P4__
#define __PARSER_P4__

#include "headers.p4"

parser QcnParser(packet_in packet,
                 out headers_t hdr,
                 inout local_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_VLAN: parse_vlan;
            ETHERTYPE_CNM: parse_cnm;
            ETHERTYPE_CNTAG: parse_cntag;
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_vlan {
        packet.extract(hdr.vlan);
        transition select(hdr.vlan.ether_type) {
            ETHERTYPE_CNM: parse_cnm;
            ETHERTYPE_CNTAG: parse_cntag;
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_cnm {
        packet.extract(hdr.cnm);
        transition accept;
    }

    state parse_cntag {
        packet.extract(hdr.cntag);
        transition select(hdr.cntag.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        // Only option-less, unfragmented datagrams have the L4 header right after.
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (5, 0, IP_PROTO_TCP): parse_tcp;
            (5, 0, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_tcp {
        packet.extract(hdr.tcp);
        transition accept;
    }

    state parse_udp {
        packet.extract(hdr.udp);
        transition accept;
    }
}

// Headers are re-emitted unchanged, so a data frame leaves byte for byte as it came in; a
// CNM clone emits its new Ethernet and CNM headers, then the sampled frame from its
// EtherType on (msdu_ethertype, then the headers that followed it, then the payload).
control QcnDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.vlan);
        packet.emit(hdr.cnm);
        packet.emit(hdr.msdu_ethertype);
        packet.emit(hdr.cntag);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.tcp);
        packet.emit(hdr.udp);
    }
}

control QcnVerifyChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply { }
}

// Frames are forwarded unmodified, so there is no checksum to recompute.
control QcnComputeChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply { }
}

#endif  // __PARSER_P4__

// Parser and deparser.  Only what the pipeline reads is parsed: Ethernet, the 802.1Q tag,
// the Fb tag, the CN-TAG, the CNM and MAC Control, and IPv4 with the TCP or UDP ports that
// per-flow ECMP hashes (and whose ECN field DCQCN's CP marks); everything after them is
// payload (the CNM's MSDU is the frame's own bytes either way).  BMv2 extracts, re-emits and
// logs each parsed field per frame: IPv4 and its ports cost a frame about a tenth more
// (bench/pipeline_bench.py), so they are parsed only where the controller put IPv4's
// EtherType in flow_ethertypes (per-flow ECMP on, or a port marking ECN).
// Nothing here drops a frame: an unknown EtherType ends parsing and a short frame ends it
// with a parser error, which L2 forwarding ignores and the CP treats as "not a data frame".
#ifndef __PARSER_P4__
#define __PARSER_P4__

#include "headers.p4"

parser QcnParser(packet_in packet,
                 out headers_t hdr,
                 inout local_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    // ETHERTYPE_IPV4 where per-flow ECMP is on or a port marks ECN, else empty (BMv2's
    // Thrift API fills it: PI does not write value sets).
    value_set<bit<16>>(1) flow_ethertypes;

    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_VLAN: parse_vlan;
            ETHERTYPE_CNM: parse_cnm;
            ETHERTYPE_CNTAG: parse_cntag;
            ETHERTYPE_MAC_CONTROL: parse_mac_control;
            ETHERTYPE_FB_TAG: parse_fb_tag;
            flow_ethertypes: parse_ipv4;
            default: accept;
        }
    }

    // Marked before the extract: a MAC Control frame cut short is still one.
    state parse_mac_control {
        meta.pause.mac_control = true;
        packet.extract(hdr.mac_control);
        transition accept;
    }

    state parse_vlan {
        packet.extract(hdr.vlan);
        transition select(hdr.vlan.ether_type) {
            ETHERTYPE_CNM: parse_cnm;
            ETHERTYPE_CNTAG: parse_cntag;
            ETHERTYPE_MAC_CONTROL: tagged_mac_control;
            ETHERTYPE_FB_TAG: parse_fb_tag;
            flow_ethertypes: parse_ipv4;
            default: accept;
        }
    }

    // A CNM under an Fb tag is still a CNM: the edge guard must see it.
    state parse_fb_tag {
        packet.extract(hdr.fb_tag);
        transition select(hdr.fb_tag.ether_type) {
            ETHERTYPE_CNM: parse_cnm;
            flow_ethertypes: parse_ipv4;
            default: accept;
        }
    }

    // 802.3 MAC Control frames are never tagged: this one is dropped as malformed.
    state tagged_mac_control {
        meta.pause.mac_control = true;
        transition accept;
    }

    state parse_cnm {
        packet.extract(hdr.cnm);
        transition accept;
    }

    state parse_cntag {
        packet.extract(hdr.cntag);
        transition select(hdr.cntag.ether_type) {
            flow_ethertypes: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.protocol) {
            (IPV4_IHL_NO_OPTIONS, IP_PROTO_TCP): parse_l4_ports;
            (IPV4_IHL_NO_OPTIONS, IP_PROTO_UDP): parse_l4_ports;
            default: accept;
        }
    }

    state parse_l4_ports {
        packet.extract(hdr.l4_ports);
        transition accept;
    }
}

// Headers are re-emitted unchanged, so a data frame leaves byte for byte as it came in (but
// for the Fb tag three-point edge ports push and remove, control/three_point.p4, and a CE
// mark, control/ecn_marking.p4); a CNM clone emits its new Ethernet and CNM headers, then
// the sampled frame from its EtherType on (msdu_ethertype, then the headers that followed
// it, then the payload).
control QcnDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.mac_control);
        packet.emit(hdr.pause_pad);
        packet.emit(hdr.vlan);
        packet.emit(hdr.fb_tag);
        packet.emit(hdr.cnm);
        packet.emit(hdr.msdu_ethertype);
        packet.emit(hdr.cntag);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.l4_ports);
    }
}

control QcnVerifyChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply { }
}

// Frames are forwarded unmodified but for a CE mark, which updates the IPv4 checksum itself
// (control/ecn_marking.p4): there is no checksum to recompute here.
control QcnComputeChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply { }
}

#endif  // __PARSER_P4__

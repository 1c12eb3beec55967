// Turns the clone of a sampled frame (I2E or E2E) into its 802.1Qau CNM (docs/qcn.md, "CNM
// frame"); qcn/core/frames.py's expected_cnm() builds the same bytes in Python.
//   Ethernet: dst = sampled source, src = CP MAC, type = 0x22E7
//   CNM PDU, then the sampled frame from its EtherType on (after any 802.1Q tag and Fb
//   tag), at most 64 bytes
// The clone holds the sampled frame's parsed headers (an E2E clone is taken before
// deparsing; BMv2 parses an I2E clone again, docs/bmv2.md); re-emitting them after the PDU
// and truncating gives the MSDU without copying payload bytes by hand.
#ifndef __CNM_BUILDER_P4__
#define __CNM_BUILDER_P4__

#include "../include/headers.p4"

control CnmBuilder(inout headers_t hdr,
                   inout local_metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    apply {
        hdr.msdu_ethertype.setValid();
        hdr.msdu_ethertype.ether_type = hdr.ethernet.ether_type;
        hdr.cnm.setValid();
        hdr.cnm.encap_priority = 0;
        // packet_length is the sampled frame's (BMv2 gives an E2E clone the original's).
        hdr.cnm.msdu_len = (bit<16>)standard_metadata.packet_length - MSDU_OFFSET_UNTAGGED;
        if (hdr.vlan.isValid()) {
            hdr.msdu_ethertype.ether_type = hdr.vlan.ether_type;
            hdr.cnm.encap_priority = hdr.vlan.pcp;
            hdr.cnm.msdu_len = (bit<16>)standard_metadata.packet_length - MSDU_OFFSET_TAGGED;
            hdr.vlan.setInvalid();
        }
        // The clone of a frame that arrived with an Fb tag (BMv2 parses an I2E clone
        // again): the MSDU is the frame as its source sent it, from after the tag.
        if (hdr.fb_tag.isValid()) {
            hdr.msdu_ethertype.ether_type = hdr.fb_tag.ether_type;
            hdr.cnm.msdu_len = hdr.cnm.msdu_len - FB_TAG_BYTES;
            hdr.fb_tag.setInvalid();
        }
        if (hdr.cnm.msdu_len > CNM_MAX_MSDU_BYTES) {
            hdr.cnm.msdu_len = CNM_MAX_MSDU_BYTES;
        }
        hdr.cnm.version = CNM_VERSION;
        hdr.cnm.reserved_v = 0;
        hdr.cnm.fb_positive = meta.cnm_fields[CNM_FIELDS_FB_POSITIVE];
        hdr.cnm.qntz_fb = meta.cnm_fields[CNM_FIELDS_QNTZ_FB];
        hdr.cnm.cpid = meta.cnm_fields[CNM_FIELDS_CPID];
        hdr.cnm.qoff = meta.cnm_fields[CNM_FIELDS_QOFF];
        hdr.cnm.qdelta = meta.cnm_fields[CNM_FIELDS_QDELTA];
        hdr.cnm.encap_reserved = 0;
        hdr.cnm.encap_da = hdr.ethernet.dst_addr;

        hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
        hdr.ethernet.src_addr = meta.cnm_fields[CNM_FIELDS_CP_MAC];
        hdr.ethernet.ether_type = ETHERTYPE_CNM;
        truncate(ETH_HEADER_BYTES + CNM_PDU_BYTES + (bit<32>)hdr.cnm.msdu_len);
    }
}

#endif  // __CNM_BUILDER_P4__

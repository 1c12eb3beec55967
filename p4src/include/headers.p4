// Headers and metadata.  The CNM layout mirrors qcn/frames.py's CNM layer.
#ifndef __HEADERS_P4__
#define __HEADERS_P4__

#include "defines.p4"

header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

header vlan_t {
    bit<3>  pcp;
    bit<1>  dei;
    bit<12> vid;
    bit<16> ether_type;
}

// 802.1Qau CN-TAG: a Flow ID a reaction point may put on its frames.
header cntag_t {
    bit<16> flow_id;
    bit<16> ether_type;
}

// 802.1Qau CNM PDU (24 bytes).
header cnm_t {
    bit<4>     version;
    bit<6>     reserved_v;
    bit<6>     qntz_fb;
    bit<64>    cpid;
    bit<16>    qoff;              // signed
    bit<16>    qdelta;            // signed
    bit<3>     encap_priority;
    bit<13>    encap_reserved;
    mac_addr_t encap_da;
    bit<16>    msdu_len;
}

// First two bytes of a CNM's encapsulated MSDU: the sampled frame's EtherType, which the
// rewrite of the Ethernet header to ETHERTYPE_CNM would otherwise lose.
header msdu_ethertype_t {
    bit<16> ether_type;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

header tcp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<32> seq_no;
    bit<32> ack_no;
    bit<4>  data_offset;
    bit<4>  res;
    bit<8>  flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgent_ptr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

struct headers_t {
    ethernet_t       ethernet;
    vlan_t           vlan;
    cnm_t            cnm;
    msdu_ethertype_t msdu_ethertype;
    cntag_t          cntag;
    ipv4_t           ipv4;
    tcp_t            tcp;
    udp_t            udp;
}

// What the CP computed for this frame.  Metadata starts zeroed for every frame, so a
// frame on a port without CP is never a candidate.
struct cp_state_t {
    bit<32> rand;            // the Bernoulli draw, shared by both stages
    bool    candidate;       // stage 1 could not rule out a sample
    bool    byte_interval;   // the port samples by byte interval
    bool    sampled;
    int<32> qoff;
    int<32> qdelta;
    int<32> fb_fp;           // 16 * Fb
    bit<8>  qntz_fb;
    bit<3>  interval_idx;    // sample_interval row: QntzFb >> 3
}

// The @field_list fields are what a sampled frame hands to its CNM clone (kept by
// clone_preserving_field_list).
struct local_metadata_t {
    @field_list(CNM_FIELD_LIST) bit<8>     cnm_qntz_fb;
    @field_list(CNM_FIELD_LIST) bit<16>    cnm_qoff;
    @field_list(CNM_FIELD_LIST) bit<16>    cnm_qdelta;
    @field_list(CNM_FIELD_LIST) bit<32>    cnm_sampled_bytes;
    @field_list(CNM_FIELD_LIST) bit<64>    cnm_cpid;
    @field_list(CNM_FIELD_LIST) mac_addr_t cnm_cp_mac;
    cp_state_t cp;
}

#endif  // __HEADERS_P4__

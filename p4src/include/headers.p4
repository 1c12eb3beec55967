// Headers and metadata.  The CNM layout mirrors qcn/core/frames.py's CNM layer.
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

// Seed 003's Fb tag (docs/qcn.md, "The Fb tag"): the worst Fb a CP on the path measured,
// who measured it, and whether a CP already reflected it.  Pushed at the first switch's
// edge port, removed at the last one's (control/three_point.p4); 16 bytes with its
// EtherType.  The fields after `reflected` are the CNM's, so a reflection point's CNM
// carries what the measuring CP would have sent.
header fb_tag_t {
    bit<1>  reflected;
    bit<9>  reserved;
    bit<6>  qntz_fb;           // 0: Fb = 0 (no CP found congestion)
    bit<64> cpid;              // of the CP that measured qntz_fb (0 while it is 0)
    bit<16> qoff;              // signed, as in the CNM
    bit<16> qdelta;            // signed
    bit<16> ether_type;
}

// 802.1Qau CNM PDU (24 bytes).  fb_positive is the lowest reserved bit, set only by a CP
// in ECM mode for Fb > 0 (docs/schemes.md, "The ECM message").
header cnm_t {
    bit<4>     version;
    bit<5>     reserved_v;
    bit<1>     fb_positive;
    bit<6>     qntz_fb;
    bit<64>    cpid;
    bit<16>    qoff;              // signed
    bit<16>    qdelta;            // signed
    bit<3>     encap_priority;
    bit<13>    encap_reserved;
    mac_addr_t encap_da;
    bit<16>    msdu_len;
}

// 802.3 MAC Control: the opcode and, for a PAUSE, its time in 512-bit quanta.
header mac_control_t {
    bit<16> opcode;
    bit<16> pause_quanta;
}

// The zeros that fill a PAUSE the pipeline builds to the minimum frame.
header pause_pad_t {
    bit<336> zeros;   // 60 - 14 - 4 bytes
}

// First two bytes of a CNM's encapsulated MSDU: the sampled frame's EtherType, which the
// rewrite of the Ethernet header to ETHERTYPE_CNM would otherwise lose.
header msdu_ethertype_t {
    bit<16> ether_type;
}

// IPv4, split only where the pipeline reads or writes it (BMv2 extracts and re-emits field
// by field): the flow's addresses and protocol (per-flow ECMP), the ECN field (DCQCN's
// marking, control/ecn_marking.p4).
header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<6>  dscp;
    bit<2>  ecn;               // ECN_* (defines.p4)
    bit<56> len_to_ttl;        // total length, id, flags, offset, TTL: untouched
    bit<8>  protocol;
    bit<16> checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

// The first four bytes of TCP and UDP: the flow's ports.
header l4_ports_t {
    bit<16> src_port;
    bit<16> dst_port;
}

struct headers_t {
    ethernet_t       ethernet;
    mac_control_t    mac_control;
    pause_pad_t      pause_pad;
    vlan_t           vlan;
    fb_tag_t         fb_tag;
    cnm_t            cnm;
    msdu_ethertype_t msdu_ethertype;
    cntag_t          cntag;
    ipv4_t           ipv4;
    l4_ports_t       l4_ports;
}

// What the admission and the CP computed for this frame.  Metadata starts zeroed for
// every frame, so a frame on a port without CP is never sampled.  BMv2 zeroes every
// metadata field of every frame one by one, so there are as few as the computation allows.
struct cp_state_t {
    bit<32> q;               // the queue the port's CP judges the frame by (packets or bytes)
    bool    admitted;        // counted into its port's occupancy (egress takes it off again)
    bool    refused;         // its port's queue had no room: tail-dropped after the CP
    bool    at_departure;    // the port's CP judges departing frames (enqueue/dequeue depth)
    bit<32> q_bytes;         // the port's queue in bytes, found on arrival (ECN marking's q)
    bit<32> rand;            // Bernoulli: the draw, shared by both stages; byte interval: jitter
    bool    sample;          // stage 1: may be sampled; stage 2: is sampled
    bool    byte_interval;   // the port samples by byte interval
    int<32> qoff;
    int<32> qdelta;
    int<32> fb_fp;           // 16 * Fb
    bit<6>  qntz_fb;
    bit<3>  interval_idx;    // sample_interval row: QntzFb >> 3
    bool    three_point;     // the port's CP is in three-point mode (control/three_point.p4)
    bit<32> reflect_below;   // three-point: a negative Fb is reflected iff a draw is below
    bool    reflect;         // the end reflection point sends this frame's CNM
}

// What 802.3x PAUSE computed for this frame (control/pause.p4).
struct pause_state_t {
    bool    mac_control;     // a MAC Control frame (tagged or not): never forwarded
    bool    counted;         // counted into its input port's buffered bytes
    bit<32> lo_bytes;        // that input's low watermark, for egress
}

// A frame held by a paused port (control/port_hold.p4).
struct hold_state_t {
    bool    numbered;        // met a hold: it leaves in its input's order
    bit<32> number;          // its place in that order
    bit<8>  searched;        // rounds gone out of turn since the port's last lift
    port_t  port;            // the port it waits for
    port_t  ingress_port;    // its input (v1model resets ingress_port on recirculation)
}

// What a sampled frame hands to its CNM clone (clone_preserving_field_list keeps it),
// packed into one field: CNM_FIELDS_* in defines.p4 give the slices, request_cnm packs it
// and CnmBuilder unpacks it.  The sampled frame's length needs no field: the clone's
// packet_length is the original's.
struct local_metadata_t {
    @field_list(CNM_FIELD_LIST) bit<CNM_FIELDS_BITS> cnm_fields;
    @field_list(CNM_FIELD_LIST) bit<PAUSE_FIELDS_BITS> pause_fields;
    @field_list(HOLD_FIELD_LIST) cp_state_t cp;
    @field_list(HOLD_FIELD_LIST) pause_state_t pause;
    // The frame's length as ingress counted it into a queue or an input's buffer, for
    // egress to take off again: BMv2 hands egress the length after ingress pushed or
    // removed an Fb tag (control/three_point.p4), 16 bytes more or less.
    @field_list(HOLD_FIELD_LIST) bit<32> counted_bytes;
    @field_list(HOLD_FIELD_LIST) hold_state_t hold;
    bool go_round;           // egress: the frame's port holds it (recirculated)
    // Per-flow ECMP (control/forwarding.p4): the destination has equal-cost ports here, and
    // which 16 bits of the 5-tuple's CRC-32 choose among them.
    bool    by_flow;
    bit<8>  flow_hash_shift;
    bit<16> flow_hash_window;
}

// The frames a CP may sample: data frames, never a CNM, never a frame the parser could not
// read (a frame too short for Ethernet is a parser error too), never one from a group
// source address.
#define CP_DATA_FRAME (!hdr.cnm.isValid() \
                       && standard_metadata.parser_error == error.NoError \
                       && hdr.ethernet.src_addr[40:40] == 0)

#endif  // __HEADERS_P4__

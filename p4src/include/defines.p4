// Constants and types of the QCN Congestion Point pipeline, each defined once.
// qcn/core/frames.py and qcn/core/params.py hold the Python side; tests/test_p4_program.py checks
// that both agree.
#ifndef __DEFINES_P4__
#define __DEFINES_P4__

typedef bit<48> mac_addr_t;
typedef bit<9>  port_t;

const bit<16> ETHERTYPE_VLAN  = 0x8100;
const bit<16> ETHERTYPE_CNM   = 0x22E7;   // 802.1Qau Congestion Notification Message
const bit<16> ETHERTYPE_CNTAG = 0x22E9;   // 802.1Qau Congestion Notification Tag
const bit<16> ETHERTYPE_MAC_CONTROL = 0x8808;   // 802.3 MAC Control (PAUSE)
// What per-flow ECMP hashes (control/forwarding.p4): an IPv4 header without options over
// TCP or UDP, whose ports follow it at once.  (IPv4's EtherType is the controller's to give
// the parser: include/parser.p4's flow_ethertypes.)
const bit<4> IPV4_IHL_NO_OPTIONS = 5;
const bit<8> IP_PROTO_TCP = 6;
const bit<8> IP_PROTO_UDP = 17;
// IPv4's ECN field (RFC 3168): DCQCN's CP marks CE a frame that is ECN-capable and not yet
// marked, i.e. neither of these: ECT(0) or ECT(1) (control/ecn_marking.p4);
// qcn/core/frames.py's ECN_*.
const bit<2> ECN_NOT_ECT = 0;
const bit<2> ECN_CE = 3;
// A CP port's signal (cp_config's `signal`): QCN's CNMs.  The controller's other codes
// (ECN marks, nothing; qcn.controller.entries.SIGNAL_CODES) sample nothing.
const bit<2> SIGNAL_CNM = 0;
// Seed 003's three-point QCN: the Fb tag data frames carry between the edges (docs/qcn.md,
// "The Fb tag"), under IEEE 802's Local Experimental EtherType 2.
const bit<16> ETHERTYPE_FB_TAG = 0x88B6;
const bit<16> FB_TAG_BYTES = 16;   // what the tag adds to a frame

// 802.3x PAUSE: opcode, destination, and the frame the pipeline sends (the 60-byte minimum
// frame without its FCS; qcn/core/frames.py's PAUSE_FRAME_BYTES).
const bit<16> MAC_CONTROL_OPCODE_PAUSE = 0x0001;
const mac_addr_t PAUSE_DST_ADDR = 0x0180C2000001;
const bit<32> PAUSE_FRAME_BYTES = 60;
// The occupancy register's word (control/admission.p4): frames from this bit up, bytes below.
const bit<8> OCCUPANCY_FRAMES_SHIFT = 32;
// v1model's drop port: mark_to_drop sets egress_spec to it.
const port_t DROP_PORT = 511;

const bit<32> ETH_HEADER_BYTES = 14;
const bit<32> CNM_PDU_BYTES = 24;
const bit<16> CNM_MAX_MSDU_BYTES = 64;
const bit<4>  CNM_VERSION = 0;
// The MSDU starts at the sampled frame's EtherType: after the two MAC addresses, or after
// the 802.1Q tag (whose priority travels in the CNM's encapsulated-priority field).
const bit<16> MSDU_OFFSET_UNTAGGED = 12;
const bit<16> MSDU_OFFSET_TAGGED = 16;

// Fixed-point formats shared with qcn/core/params.py (W_FRAC_BITS, QNTZ_SHIFT, PROB_FRAC_BITS,
// ECN_SLOPE_SHIFT).
const bit<8>  W_FRAC_BITS = 4;
const bit<8>  QNTZ_SHIFT = 48;   // BMv2 takes shift amounts of at most 8 bits
const bit<64> QNTZ_FB_MAX = 63;
const bit<32> PROB_ONE = 0x1000000;   // 2^24
// ECN marking's ramp: ((q - kmin) * ecn_slope) >> ECN_SLOPE_SHIFT, in PROB_ONE's fixed
// point (qcn/core/params.py's ECN_SLOPE_SHIFT).
const bit<8>  ECN_SLOPE_SHIFT = 16;

// v1model instance types (behavioral-model's simple_switch documentation).
const bit<32> INSTANCE_TYPE_INGRESS_CLONE = 1;
const bit<32> INSTANCE_TYPE_EGRESS_CLONE = 2;
const bit<32> INSTANCE_TYPE_RECIRC = 4;

// Broadcast and unknown unicast arriving on port P are flooded through multicast group
// FLOOD_GROUP_BASE + P, which holds every other port (one group per port, so no frame is
// sent back where it came from).  PI implements clone session N as multicast group
// 32768 + N, so the project's own groups stay below 32768 (docs/bmv2.md).
const bit<16> FLOOD_GROUP_BASE = 1;
// CNMs leave through clone session CNM_SESSION_BASE + ingress port of the sampled frame.
const bit<32> CNM_SESSION_BASE = 1;
// The metadata an E2E clone keeps (@field_list index): local_metadata_t.cnm_fields, the
// CNM PDU's per-sample fields and the CP's MAC packed as below (slices of cnm_fields).
const bit<8> CNM_FIELD_LIST = 1;
#define CNM_FIELDS_BITS 151
#define CNM_FIELDS_FB_POSITIVE 150:150
#define CNM_FIELDS_CP_MAC 149:102
#define CNM_FIELDS_CPID 101:38
#define CNM_FIELDS_QOFF 37:22
#define CNM_FIELDS_QDELTA 21:6
#define CNM_FIELDS_QNTZ_FB 5:0
// The same field list's PAUSE part (local_metadata_t.pause_fields): set (the top bit) on a
// frame whose clone becomes a PAUSE, with its pause time in 512-bit quanta.
#define PAUSE_FIELDS_BITS 17
// What a frame going round a paused port's queue keeps (control/port_hold.p4): what its
// first pass computed for egress to undo when it finally leaves, and its place in line.
const bit<8> HOLD_FIELD_LIST = 2;
#define PAUSE_FIELDS_QUANTA 15:0

#endif  // __DEFINES_P4__

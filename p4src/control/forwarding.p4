// Ingress: L2 forwarding on the destination MAC, flooding of broadcast and unknown
// unicast, per-flow ECMP where a destination has equal-cost ports, and the edge-port guard
// (hosts never send CNMs, so one host cannot throttle another).
//
// Per-flow ECMP (docs/topology.md, "Routes"): the destination's entry names its
// per-destination port, for frames without a 5-tuple (CNMs, PAUSEs, other EtherTypes), and
// a shift.  A frame with one takes the CRC-32 of its source and destination address,
// protocol and ports, and 16 bits of it from the shift on choose a member of the
// destination's group: BMv2's selector takes member (window mod group size), members in
// the order the controller created them (by port).  Each switch of a path takes another
// 16 bits (its shift follows its distance to the destination): with the same bits, a
// fat-tree's aggregation switch would send all a ToR gave it to one core.  The simulator
// chooses with the same arithmetic (qcn/core/ecmp.py).
#ifndef __FORWARDING_P4__
#define __FORWARDING_P4__

#include "../include/headers.p4"
#include "../include/size.p4"

control L2Forwarding(inout headers_t hdr,
                     inout local_metadata_t meta,
                     inout standard_metadata_t standard_metadata) {

    counter<port_t>(NUM_PORTS_DEF, CounterType.packets) cnm_edge_drops;

    action forward(port_t port) {
        standard_metadata.egress_spec = port;
    }

    // The destination has equal-cost ports here: ``port`` is the one frames without a
    // 5-tuple take.
    action forward_by_flow(port_t port, bit<8> hash_shift) {
        standard_metadata.egress_spec = port;
        meta.by_flow = true;
        meta.flow_hash_shift = hash_shift;
    }

    action flood() {
        standard_metadata.mcast_grp = FLOOD_GROUP_BASE + (bit<16>)standard_metadata.ingress_port;
    }

    table l2_forwarding {
        key = {
            hdr.ethernet.dst_addr : exact @name("dst_addr");
        }
        actions = {
            forward;
            forward_by_flow;
            @defaultonly flood;
        }
        const default_action = flood();
        size = L2_TABLE_SIZE;
    }

    // The selector hashes nothing itself: its one field is already 16 bits of a hash.
    action_selector(HashAlgorithm.identity, ECMP_MEMBERS_SIZE, 32w16) ecmp_selector;

    // p4c gives every table a default action and warns that BMv2's tables with an action
    // profile take none (tests/test_p4_program.py expects that one warning): a miss here
    // changes nothing, forward_by_flow has set the port.
    table ecmp_forwarding {
        key = {
            hdr.ethernet.dst_addr  : exact @name("dst_addr");
            meta.flow_hash_window  : selector @name("flow_hash");
        }
        actions = {
            forward;
        }
        implementation = ecmp_selector;
        size = L2_TABLE_SIZE;
    }

    // The window of the 5-tuple's CRC-32 this switch chooses by (forward_by_flow's shift).
    action hash_flow() {
        bit<32> flow_hash;
        hash(flow_hash, HashAlgorithm.crc32, 32w0,
             { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
               hdr.l4_ports.src_port, hdr.l4_ports.dst_port },
             64w0x100000000);
        meta.flow_hash_window = (bit<16>)(flow_hash >> meta.flow_hash_shift);
    }

    table flow_hash {
        actions = { hash_flow; }
        const default_action = hash_flow();
    }


    action mark_edge() { }

    action drop_cnm_from_host() {
        cnm_edge_drops.count(standard_metadata.ingress_port);
        mark_to_drop(standard_metadata);
    }

    // Host-facing ports; filled by the controller.
    table edge_port {
        key = {
            standard_metadata.ingress_port : exact @name("ig_port");
        }
        actions = {
            mark_edge;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = EDGE_PORT_TABLE_SIZE;
    }

    // Nested rather than `cnm.isValid() && edge_port.apply().hit` plus an early return:
    // p4c gives BMv2 a synthetic table per such fragment, and data frames would walk them.
    apply {
        if (hdr.cnm.isValid()) {
            if (edge_port.apply().hit) {
                drop_cnm_from_host();
            } else {
                l2_forwarding.apply();
            }
        } else {
            l2_forwarding.apply();
        }
        // (After both: BMv2 takes a table applied twice only with one successor.)  A CNM
        // has no L4 ports parsed, so it keeps its destination's port.
        if (meta.by_flow) {
            if (hdr.l4_ports.isValid()) {
                flow_hash.apply();
                ecmp_forwarding.apply();
            }
        }
    }
}

#endif  // __FORWARDING_P4__

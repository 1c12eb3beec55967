// Ingress: L2 forwarding on the destination MAC, flooding of broadcast and unknown
// unicast, and the edge-port guard (hosts never send CNMs, so one host cannot throttle
// another).
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

    action flood() {
        standard_metadata.mcast_grp = FLOOD_GROUP_BASE + (bit<16>)standard_metadata.ingress_port;
    }

    table l2_forwarding {
        key = {
            hdr.ethernet.dst_addr : exact @name("dst_addr");
        }
        actions = {
            forward;
            @defaultonly flood;
        }
        const default_action = flood();
        size = L2_TABLE_SIZE;
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
    }
}

#endif  // __FORWARDING_P4__

// Seed 003's three-point QCN at the edges of the network (docs/qcn.md, "Three-point QCN").
//
// Ingress, a data frame from a host on a three-point edge port gets an Fb tag holding
// Fb = 0 (what seed 003's reaction point inserts; hosts stay unmodified), in the input
// port's one lookup (control/input_port.p4).  The
// CPs on the path may overwrite the tag's Fb and reflect it (control/congestion_point.p4).
// Ingress, a tagged frame leaving towards a host: FbTagExit removes the tag, so no host
// receives one; on a three-point edge port it is first the end reflection point:
//   reflected bit set: nothing (a CP already told the source);
//   Fb < 0: a CNM to the source with probability reflect_p_base + QntzFb * reflect_p_scale,
//           carrying the Fb, qoff, qdelta and CPID of the CP that measured it;
//   Fb = 0: a CNM with QntzFb 0 with probability p0, under this port's CPID.
// The CNM is the frame's I2E clone, rewritten by CnmBuilder like a CP's: the same format,
// out of the port the frame came in on.  A flooded frame loses its tag in ingress.
// Everything is decided in ingress, so a frame meets at most one clone: a CP that reflects
// sets the reflected bit, and the reflection point then stays silent.
#ifndef __THREE_POINT_P4__
#define __THREE_POINT_P4__

#include "../include/headers.p4"
#include "../include/size.p4"

control FbTagExit(inout headers_t hdr,
                  inout local_metadata_t meta,
                  inout standard_metadata_t standard_metadata) {

    // Reflections sent by each edge port's reflection point (by the port towards the host).
    counter<port_t>(NUM_PORTS_DEF, CounterType.packets) fb_reflections;   // Fb < 0
    counter<port_t>(NUM_PORTS_DEF, CounterType.packets) p0_reflections;   // Fb = 0

    // Restores the EtherType the tag took over, then drops the tag.
    action pop_fb_tag() {
        if (hdr.vlan.isValid()) {
            hdr.vlan.ether_type = hdr.fb_tag.ether_type;
        } else {
            hdr.ethernet.ether_type = hdr.fb_tag.ether_type;
        }
        hdr.fb_tag.setInvalid();
    }

    // The end reflection point.
    action reflect_fb(bit<32> p0_fixed, bit<32> reflect_p_base_fixed,
                      bit<32> reflect_p_scale_fixed, bit<64> cpid, mac_addr_t rp_mac) {
        bit<32> reflect_below = p0_fixed;
        bit<64> measured_by = cpid;
        if (hdr.fb_tag.qntz_fb != 0) {
            reflect_below = reflect_p_base_fixed
                            + (bit<32>)hdr.fb_tag.qntz_fb * reflect_p_scale_fixed;
            measured_by = hdr.fb_tag.cpid;
        }
        random(meta.cp.rand, 0, PROB_ONE - 1);
        meta.cp.reflect = hdr.fb_tag.reflected == 0 && meta.pause_fields == 0
                         && meta.cp.rand < reflect_below;
        if (meta.cp.reflect) {
            meta.cnm_fields = 1w0 ++ rp_mac ++ measured_by ++ hdr.fb_tag.qoff
                              ++ hdr.fb_tag.qdelta ++ hdr.fb_tag.qntz_fb;
        }
        pop_fb_tag();
    }

    // Every host-facing port: pop_fb_tag, or reflect_fb in three-point mode.  No entry (a
    // port towards another switch): the tag stays on.
    table fb_tag_exit {
        key = {
            standard_metadata.egress_spec : exact @name("eg_port");
        }
        actions = {
            pop_fb_tag;
            reflect_fb;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = EDGE_PORT_TABLE_SIZE;
    }

    action send_reflection() {
        if (meta.cnm_fields[CNM_FIELDS_QNTZ_FB] == 0) {
            p0_reflections.count(standard_metadata.egress_spec);
        } else {
            fb_reflections.count(standard_metadata.egress_spec);
        }
        clone_preserving_field_list(CloneType.I2E,
                                    CNM_SESSION_BASE + (bit<32>)standard_metadata.ingress_port,
                                    CNM_FIELD_LIST);
    }

    apply {
        if (standard_metadata.mcast_grp != 0) {
            pop_fb_tag();
        } else {
            fb_tag_exit.apply();
            if (meta.cp.reflect) {
                send_reflection();
            }
        }
    }
}

#endif  // __THREE_POINT_P4__

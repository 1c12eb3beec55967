// qcn-p4: an IEEE 802.1Qau QCN Congestion Point for BMv2 simple_switch (v1model).
//
// Ingress: L2 forwarding (control/forwarding.p4); a unicast frame to a CP port is admitted
//          to that port's queue or tail-dropped (control/admission.p4), and the port's
//          congestion point judges it on arrival, in the same table (control/
//          congestion_point.p4: arrival_cp, the standard's CP; a sampled frame's I2E clone
//          becomes its CNM); on a port whose signal is ECN, DCQCN's CP marks an admitted
//          ECN-capable IPv4 frame CE by the queue it found (control/ecn_marking.p4).
//          Before that, the input port's one lookup (control/input_port.p4): on an input
//          PAUSE guards, the frame is counted into that input's buffer, and past its high
//          watermark an I2E clone becomes a PAUSE out of it (control/pause.p4); on a
//          three-point host port, a data frame gets an Fb tag, which a frame towards a host
//          loses at the end reflection point, after the CP (control/three_point.p4).  MAC
//          Control frames are counted and dropped; a PAUSE holds the port it came in on, if
//          that port honours PAUSE, and a frame going round a held port's queue is sent
//          straight back (control/port_hold.p4).
// Egress:  at a held port's head a counted frame goes round instead of leaving
//          (control/port_hold.p4); otherwise the frame leaves its port's queue
//          (admission.p4); on a port configured to judge departing frames, departure_cp
//          does so with BMv2's depths (E2E clones); a clone of a sampled frame is
//          rewritten into its CNM (control/cnm_builder.p4); a guarded input's count
//          falls, and below its low watermark the E2E clone of the departing frame
//          becomes the PAUSE that lifts the pause (control/pause.p4).
#include <core.p4>
// The v1model whose counters and registers take a typed index (port_t, no casts).
#define V1MODEL_VERSION 20200408
#include <v1model.p4>

#include "include/defines.p4"
#include "include/headers.p4"
#include "include/parser.p4"
#include "control/forwarding.p4"
#include "control/admission.p4"
#include "control/congestion_point.p4"
#include "control/ecn_marking.p4"
#include "control/cnm_builder.p4"
#include "control/pause.p4"
#include "control/three_point.p4"
#include "control/input_port.p4"

// Frames each port took in (recirculated ones not again) and put out (clones included):
// with the kernel's interface counters, where a frame was lost on its way into or out of
// BMv2 (topologies/frame_balance.py).
counter<port_t>(NUM_PORTS_DEF, CounterType.packets) frames_in;
counter<port_t>(NUM_PORTS_DEF, CounterType.packets) frames_out;

control QcnIngress(inout headers_t hdr,
                   inout local_metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    MacControl() mac_control;
    HeldFrameReturn() held_frame_return;
    L2Forwarding() l2;
    InputPort() input_port;
    PauseUncount() pause_uncount;
    CongestionPoint(true, CloneType.I2E) arrival_cp;
    EcnMarking() ecn_cp;
    FbTagExit() fb_tag_exit;
    apply {
        if (standard_metadata.instance_type == INSTANCE_TYPE_RECIRC) {
            // Going round a paused port's queue: judged and counted on its first pass.
            held_frame_return.apply(hdr, meta, standard_metadata);
            return;
        }
        frames_in.count(standard_metadata.ingress_port);
        if (meta.pause.mac_control) {
            mac_control.apply(hdr, meta, standard_metadata);
        } else {
            l2.apply(hdr, meta, standard_metadata);
            // Flooded frames are not counted: their ports are known only after replication.
            if (standard_metadata.mcast_grp == 0) {
                // PAUSE's count of the input and the Fb tag push: one lookup.
                input_port.apply(hdr, meta, standard_metadata);
                if (standard_metadata.egress_spec != DROP_PORT) {
                    // Admission to the port's queue and the arrival CP, in one table.
                    arrival_cp.apply(hdr, meta, standard_metadata);
                    if (!meta.cp.admitted) {
                        if (meta.pause.counted && standard_metadata.egress_spec == DROP_PORT) {
                            pause_uncount.apply(hdr, meta, standard_metadata);
                        }
                    } else if (ECN_CAPABLE_FRAME) {
                        // DCQCN's CP, by the queue the admission found.
                        ecn_cp.apply(hdr, meta, standard_metadata);
                    }
                }
            }
            // After the CP: the end reflection point sees the Fb the CPs left.
            if (hdr.fb_tag.isValid() && standard_metadata.egress_spec != DROP_PORT) {
                fb_tag_exit.apply(hdr, meta, standard_metadata);
            }
        }
    }
}

control QcnEgress(inout headers_t hdr,
                  inout local_metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    Departure() departure;
    PortHold() port_hold;
    PauseRelease() pause_release;
    CongestionPoint(false, CloneType.E2E) departure_cp;
    CnmBuilder() cnm_builder;
    PauseBuilder() pause_builder;
    apply {
        // Clones start with their metadata reset (but for the CNM field list), so only the
        // admitted frame itself is taken off the counts.  One condition first: BMv2 walks
        // each condition and table node per frame.
        if (meta.pause.counted) {
            // A paused port keeps the frame, still counted (control/port_hold.p4).
            port_hold.apply(hdr, meta, standard_metadata);
            if (!meta.go_round) {
                pause_release.apply(hdr, meta, standard_metadata);
            }
        }
        if (meta.go_round) {
            // Going round: nothing leaves.
        } else if (meta.cp.admitted) {
            departure.apply(hdr, meta, standard_metadata);
            if (meta.cp.at_departure && CP_DATA_FRAME) {
                meta.cp.q = (bit<32>)standard_metadata.enq_qdepth;
                standard_metadata.egress_spec = standard_metadata.egress_port;
                departure_cp.apply(hdr, meta, standard_metadata);
            }
        } else if (standard_metadata.instance_type == INSTANCE_TYPE_INGRESS_CLONE
                   || standard_metadata.instance_type == INSTANCE_TYPE_EGRESS_CLONE) {
            if (meta.pause_fields != 0) {
                pause_builder.apply(hdr, meta, standard_metadata);
            } else {
                cnm_builder.apply(hdr, meta, standard_metadata);
            }
        }
        if (!meta.go_round && standard_metadata.egress_spec != DROP_PORT) {
            frames_out.count(standard_metadata.egress_port);
        }
    }
}

V1Switch(QcnParser(), QcnVerifyChecksum(), QcnIngress(), QcnEgress(),
         QcnComputeChecksum(), QcnDeparser()) main;

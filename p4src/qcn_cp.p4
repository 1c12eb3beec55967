// qcn-p4: an IEEE 802.1Qau QCN Congestion Point for BMv2 simple_switch (v1model).
//
// Ingress: L2 forwarding (control/forwarding.p4).
// Egress:  the congestion point of the egress port (control/congestion_point.p4); the E2E
//          clone of a sampled frame is rewritten into its CNM (control/cnm_builder.p4).
#include <core.p4>
// The v1model whose counters and registers take a typed index (port_t, no casts).
#define V1MODEL_VERSION 20200408
#include <v1model.p4>

#include "include/defines.p4"
#include "include/headers.p4"
#include "include/parser.p4"
#include "control/forwarding.p4"
#include "control/congestion_point.p4"
#include "control/cnm_builder.p4"

control QcnIngress(inout headers_t hdr,
                   inout local_metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    L2Forwarding() l2;
    apply {
        l2.apply(hdr, meta, standard_metadata);
    }
}

control QcnEgress(inout headers_t hdr,
                  inout local_metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    CongestionPoint() cp;
    CnmBuilder() cnm_builder;
    apply {
        // The frames a CP may sample: data frames, never a CNM (nor the E2E clone that
        // becomes one), never a frame the parser could not read (a frame too short for
        // Ethernet is a parser error too), never one from a group source address.  One
        // condition, tested first: BMv2 walks each condition and table node per frame.
        if (standard_metadata.instance_type != INSTANCE_TYPE_EGRESS_CLONE
                && !hdr.cnm.isValid()
                && standard_metadata.parser_error == error.NoError
                && hdr.ethernet.src_addr[40:40] == 0) {
            cp.apply(hdr, meta, standard_metadata);
        } else if (standard_metadata.instance_type == INSTANCE_TYPE_EGRESS_CLONE) {
            cnm_builder.apply(hdr, meta, standard_metadata);
        }
    }
}

V1Switch(QcnParser(), QcnVerifyChecksum(), QcnIngress(), QcnEgress(),
         QcnComputeChecksum(), QcnDeparser()) main;

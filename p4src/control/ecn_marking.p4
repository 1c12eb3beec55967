// DCQCN's congestion point (docs/dcqcn.md, "The switch"): a port whose signal is ECN marks
// ECN-capable IPv4 frames CE on a RED-like curve of its queue, instead of sending CNMs.
//
// Per admitted ECN-capable frame (ECN field ECT(0) or ECT(1)) on a port with an entry, q
// the bytes its port's queue held when it arrived (control/admission.p4's count, the same
// the arrival CP judges by):
//   q <= kmin_bytes:          never marked (no draw)
//   kmin_bytes < q <= kmax:   marked iff random(0, PROB_ONE - 1) <
//                             ((q - kmin_bytes) * ecn_slope) >> ECN_SLOPE_SHIFT
//   q > kmax_bytes:           always marked (no draw)
// qcn/core/cp_model.py's ecn_mark_threshold and ecn_marks are the same computation; the
// controller's encoding is CpPortConfig.from_params (ecn_slope = pmax * PROB_ONE *
// 2^ECN_SLOPE_SHIFT / (kmax - kmin)).  On the ramp q - kmin < 2^24 and ecn_slope <= 2^40,
// so the product fits 64 bits.
// A marked frame's IPv4 checksum is computed again (include/parser.p4, QcnComputeChecksum),
// over the 20-byte header the parser reads: a frame with IPv4 options is not marked (the
// caller's condition), nor a non-ECT one, and a CE one stays as it is.  The port's CP still
// counts its frames but samples none (CpPortConfig.from_params: zero probabilities), so an
// ECN port never sends a CNM.  The parser reads IPv4 where the controller put IPv4's
// EtherType in flow_ethertypes: with per-flow ECMP or an ECN port (qcn.controller.agent).
#ifndef __ECN_MARKING_P4__
#define __ECN_MARKING_P4__

#include "../include/headers.p4"
#include "../include/size.p4"

// The frames the pipeline may mark: admitted (counted into its port's queue), IPv4 without
// options, ECN-capable.
#define ECN_CAPABLE_FRAME (hdr.ipv4.isValid() && meta.cp.admitted \
                           && hdr.ipv4.ihl == IPV4_IHL_NO_OPTIONS \
                           && hdr.ipv4.ecn != ECN_NOT_ECT && hdr.ipv4.ecn != ECN_CE)

// Ingress, after the arrival CP (the admission found the queue): the port is egress_spec.
control EcnMarking(inout headers_t hdr,
                   inout local_metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    // Frames each port marked CE.
    counter<port_t>(NUM_PORTS_DEF, CounterType.packets) ecn_marks;

    action mark_ecn(bit<32> kmin_bytes, bit<32> kmax_bytes, bit<64> ecn_slope) {
        bit<32> q = meta.cp.q_bytes;
        bool mark = q > kmax_bytes;
        if (q > kmin_bytes && !mark) {
            // On the ramp: one draw against the threshold.
            random(meta.cp.rand, 0, PROB_ONE - 1);
            bit<64> threshold = ((bit<64>)(q - kmin_bytes) * ecn_slope) >> ECN_SLOPE_SHIFT;
            mark = (bit<64>)meta.cp.rand < threshold;
        }
        if (mark) {
            hdr.ipv4.ecn = ECN_CE;
            meta.cp.ecn_marked = true;
            ecn_marks.count(standard_metadata.egress_spec);
        }
    }

    // One entry per port that marks ECN (cp.signal = "ecn"); no entry: no marking.
    table ecn_marking {
        key = {
            standard_metadata.egress_spec : exact @name("eg_port");
        }
        actions = {
            mark_ecn;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = CP_CONFIG_SIZE;
    }

    apply {
        ecn_marking.apply();
    }
}

#endif  // __ECN_MARKING_P4__

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
// A marked frame's IPv4 checksum is updated for the one 16-bit word the mark changes
// (RFC 1624, eqn. 3), here, for the marked frames alone: v1model's update_checksum, even
// conditional, costs BMv2 work on every frame of every port, marked or not (measured
// 2026-11-28, bench/pipeline_bench.py --instructions: 334,000 instructions per frame of a
// QCN port with it, 300,000 without), and it could not cover a header with options.  A
// non-ECT frame is not marked, and a CE one stays as it is.  The port's CP still counts its
// frames but samples none (zero probabilities, and cp_config's signal), so an ECN port never
// sends a CNM.  The parser reads IPv4 where the controller put IPv4's EtherType in
// flow_ethertypes: with per-flow ECMP or an ECN port (qcn.controller.agent).
#ifndef __ECN_MARKING_P4__
#define __ECN_MARKING_P4__

#include "../include/headers.p4"
#include "../include/size.p4"

// The frames the pipeline may mark, of those its port's queue admitted (qcn_cp.p4): IPv4,
// ECN-capable and not yet marked.
#define ECN_CAPABLE_FRAME (hdr.ipv4.isValid() \
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
            // HC' = ~(~HC + ~m + m') in ones' complement: m the header's first 16 bits
            // before the mark, m' after.
            bit<16> word = hdr.ipv4.version ++ hdr.ipv4.ihl ++ hdr.ipv4.dscp ++ hdr.ipv4.ecn;
            hdr.ipv4.ecn = ECN_CE;
            bit<32> sum = (bit<32>)(~hdr.ipv4.checksum) + (bit<32>)(~word)
                          + (bit<32>)(hdr.ipv4.version ++ hdr.ipv4.ihl ++ hdr.ipv4.dscp
                                      ++ hdr.ipv4.ecn);
            sum = (bit<32>)sum[15:0] + (bit<32>)sum[31:16];
            sum = (bit<32>)sum[15:0] + (bit<32>)sum[31:16];
            hdr.ipv4.checksum = ~sum[15:0];
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

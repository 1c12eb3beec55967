// The QCN Congestion Point of one egress port (docs/qcn.md, "Congestion Point").
//
// The pipeline holds two instances (qcn_cp.p4): arrival_cp in ingress, the standard's CP,
// judging each arriving frame against the occupancy it found (control/admission.p4, in
// packets or bytes); and departure_cp in egress, judging departing frames by BMv2's own
// depths, kept for comparison (cp.depth_at; qcn.core.params.QueueDepth).  A port's entries
// are in one instance's tables, so each frame meets one CP.  The arrival CP's stage 1 is
// also the port's admission (one table per frame, not two: BMv2's cost is per table,
// bench/pipeline_bench.py); its `admission` table holds an entry for every CP port, with
// `admit` alone where departure_cp judges the port.
//
// Per data frame on a port with a stage-1 entry (admission or cp_sampling), every frame
// (at arrival: every frame its queue admits, and with judge_dropped, cp.judge = "arrivals",
// the ones it has no room for too, dropped only after the CP has judged them):
//   q = the caller's meta.cp.q (the occupancy found; in egress enq_qdepth), or deq_qdepth
//       where the port is so configured (the depth the frame leaves behind)
//   last_qdepth = q
//   Bernoulli mode:      r = random(); candidate iff r < p_max = p_base + 63 * p_scale
//   byte-interval mode:  bytes_to_sample -= frame length; candidate iff it ran out
// For a candidate only (stage 2, cp_config):
//   qoff   = q - q_eq;  qdelta = q - q_old
//   fb_fp  = -(qoff * 16 + w_fixed * qdelta)              16 * Fb, so w may be fractional
//   QntzFb = (min(-fb_fp, fbmax_fixed) * fb_multiplier) >> 48   no run-time division
//   sampled: Bernoulli iff r < p_base + QntzFb * p_scale; byte-interval always, and the
//            counter is reloaded from the interval table row QntzFb >> 3, +/- jitter
//   on a sample: q_old = q, and if Fb < 0 an E2E clone becomes the CNM (CnmBuilder)
// Three-point mode (three_point = 1, arrival CP only; seed 003, docs/qcn.md): on a sample
// with Fb < 0 more negative than the frame's Fb tag, the tag takes this Fb and CPID, and
// the CP reflects it (the same CNM) with probability reflect_p_base + QntzFb *
// reflect_p_scale, setting the tag's reflected bit; otherwise the Fb travels on to the
// reflection point at the path's end (control/three_point.p4).
// ECM mode (positive_feedback = 1, docs/schemes.md): a sampled frame with Fb > 0 gets a
// CNM too, flagged fb_positive, its QntzFb the same quantisation of +Fb; the sampling
// still uses the negative QntzFb (0 for Fb >= 0).
// Since p <= p_max, a frame with r >= p_max is not sampled whatever its Fb: the two stages
// make exactly the decisions of computing Fb for every frame, at a fraction of BMv2's
// per-frame work (bench/pipeline_bench.py).
// A CNM is the clone of the sampled frame (of the arriving frame, I2E, in ingress; of the
// departing one, E2E, in egress: the constructor's cnm_clone), out of the port the sampled
// frame came in on; CnmBuilder rewrites it in egress.
// qcn/core/cp_model.py is the same computation in Python, statement for statement.
#ifndef __CONGESTION_POINT_P4__
#define __CONGESTION_POINT_P4__

#include "../include/headers.p4"
#include "../include/size.p4"
#include "admission.p4"

// The port is egress_spec: in ingress where the frame is going; egress sets it to
// egress_port before applying departure_cp (BMv2 resets it in egress).  Read in place: a
// control parameter would cost the arrival CP a copy, one more table and action per frame.
#define port standard_metadata.egress_spec

// at_arrival: this instance judges arriving frames in ingress (its stage 1 is the
// admission); cnm_clone: the clone that becomes a CNM there.  p4c drops the other
// instance's stage-1 table.
control CongestionPoint(inout headers_t hdr,
                        inout local_metadata_t meta,
                        inout standard_metadata_t standard_metadata)
                       (bool at_arrival, CloneType cnm_clone) {

    // Per-port state and telemetry.  Registers are read over Thrift (PI does not
    // implement register access, docs/bmv2.md); counters over P4Runtime.
    // Indexed by port_t itself: a bit<32> index would cost BMv2 a cast per frame.
    register<int<32>, port_t>(NUM_PORTS_DEF) q_old;
    register<int<32>, port_t>(NUM_PORTS_DEF) bytes_to_sample;
    register<bit<32>, port_t>(NUM_PORTS_DEF) last_qdepth;
    counter<port_t>(NUM_PORTS_DEF, CounterType.packets) cp_frames;
    counter<port_t>(NUM_PORTS_DEF, CounterType.packets) cp_samples;
    counter<port_t>(NUM_PORTS_DEF, CounterType.packets) cp_cnms;

    // -- stage 1: every data frame ------------------------------------------------------

    action count_frame(bit<1> dequeue_depth) {
        if (dequeue_depth == 1) {
            meta.cp.q = (bit<32>)standard_metadata.deq_qdepth;
        }
        last_qdepth.write(port, meta.cp.q);
        cp_frames.count(port);
    }

    action sample_bernoulli(bit<32> p_max_fixed, bit<1> dequeue_depth) {
        count_frame(dequeue_depth);
        random(meta.cp.rand, 0, PROB_ONE - 1);
        meta.cp.sample = meta.cp.rand < p_max_fixed;
    }

    action sample_byte_interval(bit<1> dequeue_depth) {
        count_frame(dequeue_depth);
        // qoff holds the bytes left until the sample here (stage 2 recomputes it).
        bytes_to_sample.read(meta.cp.qoff, port);
        meta.cp.qoff = meta.cp.qoff - (int<32>)standard_metadata.packet_length;
        bytes_to_sample.write(port, meta.cp.qoff);  // sample_interval reloads
        meta.cp.sample = meta.cp.qoff <= 0;
        meta.cp.byte_interval = true;
    }

    // Departure CP: the sampling mode and depth source of each port it judges.
    table cp_sampling {
        key = {
            port : exact @name("eg_port");
        }
        actions = {
            sample_bernoulli;
            sample_byte_interval;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = CP_CONFIG_SIZE;
    }

    // Arrival CP: the frame's admission to its port's queue (control/admission.p4), then,
    // for a data frame (admitted, or with judge_dropped any), stage 1 (judged by what it
    // found there); a refused frame is dropped after stage 2.

    // The frame finds q = the port's occupancy (frames, or bytes with bytes_unit), and
    // joins the queue unless that would pass a limit.
    action admit_to_queue(bit<32> limit_pkts, bit<32> limit_bytes, bit<1> bytes_unit) {
        bit<64> occupied;
        occupancy.read(occupied, port);
        meta.cp.q_bytes = occupied[31:0];   // ECN marking's q (control/ecn_marking.p4)
        meta.cp.q = occupied[63:32];
        if (bytes_unit == 1) {
            meta.cp.q = occupied[31:0];
        }
        if (occupied[63:32] < limit_pkts
                && standard_metadata.packet_length <= limit_bytes - occupied[31:0]) {
            meta.cp.admitted = true;
            meta.counted_bytes = standard_metadata.packet_length;
            occupancy.write(port, occupied + (OCCUPANCY_ONE_FRAME
                                              | (bit<64>)standard_metadata.packet_length));
        } else {
            meta.cp.refused = true;
        }
    }

    action admit(bit<32> limit_pkts, bit<32> limit_bytes, bit<1> bytes_unit) {
        admit_to_queue(limit_pkts, limit_bytes, bytes_unit);
        meta.cp.at_departure = true;   // the port's CP is departure_cp
    }

    // judge_dropped (cp.judge = "arrivals"): a data frame the queue has no room for is
    // judged all the same, against the full queue it found, so a port fed far faster than
    // it drains hears its arrivals, not only its departures (docs/qcn.md, "Which frames
    // the CP judges").
    action admit_sample_bernoulli(bit<32> limit_pkts, bit<32> limit_bytes, bit<1> bytes_unit,
                                  bit<32> p_max_fixed, bit<1> judge_dropped) {
        admit_to_queue(limit_pkts, limit_bytes, bytes_unit);
        if ((meta.cp.admitted || judge_dropped == 1) && CP_DATA_FRAME) {
            sample_bernoulli(p_max_fixed, 0);
        }
    }

    action admit_sample_byte_interval(bit<32> limit_pkts, bit<32> limit_bytes,
                                      bit<1> bytes_unit, bit<1> judge_dropped) {
        admit_to_queue(limit_pkts, limit_bytes, bytes_unit);
        if ((meta.cp.admitted || judge_dropped == 1) && CP_DATA_FRAME) {
            sample_byte_interval(0);
        }
    }

    action tail_drop() {
        tail_drops.count(port);
        mark_to_drop(standard_metadata);
    }

    // One entry per CP port; no entry: nothing counted, no CP.
    table admission {
        key = {
            port : exact @name("eg_port");
        }
        actions = {
            admit;
            admit_sample_bernoulli;
            admit_sample_byte_interval;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = CP_CONFIG_SIZE;
    }

    // -- stage 2: sampling candidates ---------------------------------------------------

    action compute_feedback(bit<32> q_eq, bit<32> w_fixed, bit<32> fbmax_fixed,
                            bit<64> fb_multiplier, bit<32> p_base_fixed,
                            bit<32> p_scale_fixed, bit<64> cpid, mac_addr_t cp_mac,
                            bit<1> positive_feedback, bit<1> three_point,
                            bit<32> reflect_p_base_fixed, bit<32> reflect_p_scale_fixed,
                            bit<2> signal) {
        int<32> q = (int<32>)meta.cp.q;
        q_old.read(meta.cp.qdelta, port);
        meta.cp.qoff = q - (int<32>)q_eq;
        meta.cp.qdelta = q - meta.cp.qdelta;
        meta.cp.fb_fp = -((meta.cp.qoff << W_FRAC_BITS) + (int<32>)w_fixed * meta.cp.qdelta);
        // QntzFb = (min(|Fb|, fbmax) * fb_multiplier) >> 48, at most 63, of Fb < 0 (or, in
        // ECM mode, of Fb > 0).
        bit<64> qntz_fb = 0;
        bit<1> positive = 0;
        if (meta.cp.fb_fp < 0) {
            qntz_fb = (bit<64>)(bit<32>)(-meta.cp.fb_fp);
        } else if (positive_feedback == 1 && meta.cp.fb_fp > 0) {
            qntz_fb = (bit<64>)(bit<32>)meta.cp.fb_fp;
            positive = 1;
        }
        if (qntz_fb > (bit<64>)fbmax_fixed) {
            qntz_fb = (bit<64>)fbmax_fixed;
        }
        qntz_fb = (qntz_fb * fb_multiplier) >> QNTZ_SHIFT;
        if (qntz_fb > QNTZ_FB_MAX) {
            qntz_fb = QNTZ_FB_MAX;
        }
        meta.cp.qntz_fb = (bit<6>)qntz_fb;
        // The sampling rate follows congestion only: QntzFb of Fb < 0, else 0.
        bit<6> congestion = meta.cp.qntz_fb;
        if (positive == 1) {
            congestion = 0;
        }
        meta.cp.interval_idx = congestion[5:3];
        // Bernoulli mode: p = p_base + QntzFb * p_scale, in 24-bit fixed point.  Only a
        // port whose signal is CNM samples (an ECN or silent one has p_max 0 as well, so
        // no frame of it comes here; the signal is held here for the controller too).
        meta.cp.sample = signal == SIGNAL_CNM
                         && (meta.cp.byte_interval
                             || meta.cp.rand < p_base_fixed + (bit<32>)congestion * p_scale_fixed);
        // request_cnm adds the per-sample fields; the positive flag travels here too, so
        // the frame needs no metadata field of its own for it.
        meta.cnm_fields = positive ++ cp_mac ++ cpid ++ 38w0;
        // Three-point mode: how likely this CP reflects the Fb itself (docs/qcn.md,
        // "Three-point QCN"), in the same fixed point as the sampling.
        meta.cp.three_point = three_point == 1;
        meta.cp.reflect_below = reflect_p_base_fixed + (bit<32>)congestion * reflect_p_scale_fixed;
    }

    // The port's CP parameters (one entry per CP-enabled egress port, with cp_sampling's).
    table cp_config {
        key = {
            port : exact @name("eg_port");
        }
        actions = {
            compute_feedback;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = CP_CONFIG_SIZE;
    }

    action set_sample_interval(bit<32> base_bytes, bit<32> jitter_span_bytes) {
        random(meta.cp.rand, 0, jitter_span_bytes);
        bytes_to_sample.write(port,
                              (int<32>)(base_bytes - (jitter_span_bytes >> 1) + meta.cp.rand));
    }

    // Byte-interval mode: the 802.1Qau table, 8 rows per port indexed by QntzFb >> 3.
    table sample_interval {
        key = {
            port : exact @name("eg_port");
            meta.cp.interval_idx          : exact @name("idx");
        }
        actions = {
            set_sample_interval;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = SAMPLE_INTERVAL_TABLE_SIZE;
    }

    action record_sample() {
        cp_samples.count(port);
        q_old.write(port, (int<32>)meta.cp.q);
    }

    // The CNM's per-sample fields (cnm_fields), as the CNM and the Fb tag carry them.
    action fill_feedback() {
        // Saturate to the 16-bit signed fields of the CNM (qoff >= -q_eq > -32768).
        if (meta.cp.qoff > 32767) {
            meta.cp.qoff = 32767;
        }
        if (meta.cp.qdelta > 32767) {
            meta.cp.qdelta = 32767;
        } else if (meta.cp.qdelta < -32768) {
            meta.cp.qdelta = -32768;
        }
        meta.cnm_fields[CNM_FIELDS_QOFF] = (bit<16>)(bit<32>)meta.cp.qoff;
        meta.cnm_fields[CNM_FIELDS_QDELTA] = (bit<16>)(bit<32>)meta.cp.qdelta;
        meta.cnm_fields[CNM_FIELDS_QNTZ_FB] = meta.cp.qntz_fb;
    }

    // The clone becomes the CNM (CnmBuilder), out of the port the frame came in on.
    action send_cnm() {
        cp_cnms.count(port);
        clone_preserving_field_list(cnm_clone,
                                    CNM_SESSION_BASE + (bit<32>)standard_metadata.ingress_port,
                                    CNM_FIELD_LIST);
    }

    // A CNM for this frame: the clone carries what CnmBuilder needs.
    action request_cnm() {
        fill_feedback();
        send_cnm();
    }

    // Three-point mode, on a sampled frame whose Fb is more negative than its tag's: the
    // tag takes this CP's Fb and identity, and the CP reflects it itself with probability
    // reflect_below (never when the frame's clone is a PAUSE: v1model clones once).
    action overwrite_fb_tag() {
        fill_feedback();
        hdr.fb_tag.qntz_fb = meta.cp.qntz_fb;
        hdr.fb_tag.cpid = meta.cnm_fields[CNM_FIELDS_CPID];
        hdr.fb_tag.qoff = meta.cnm_fields[CNM_FIELDS_QOFF];
        hdr.fb_tag.qdelta = meta.cnm_fields[CNM_FIELDS_QDELTA];
        random(meta.cp.rand, 0, PROB_ONE - 1);
        hdr.fb_tag.reflected = 0;
        if (meta.cp.rand < meta.cp.reflect_below && meta.pause_fields == 0) {
            hdr.fb_tag.reflected = 1;
        }
    }

    apply {
        if (at_arrival) {
            admission.apply();
        } else {
            cp_sampling.apply();
        }
        if (meta.cp.sample) {
            if (cp_config.apply().hit) {
                if (meta.cp.sample) {
                    record_sample();
                    if (meta.cp.byte_interval) {
                        sample_interval.apply();
                    }
                    if (meta.cp.three_point && hdr.fb_tag.isValid()) {
                        // "More negative" is a larger QntzFb: an equal one keeps the tag's.
                        if (meta.cp.fb_fp < 0 && meta.cp.qntz_fb > hdr.fb_tag.qntz_fb) {
                            overwrite_fb_tag();
                            if (hdr.fb_tag.reflected == 1) {
                                send_cnm();
                            }
                        }
                    // A frame whose clone is a PAUSE (control/pause.p4) gets no CNM; an
                    // untagged frame at a three-point CP has no tag to carry its Fb on.
                    } else if ((meta.cp.fb_fp < 0
                                || meta.cnm_fields[CNM_FIELDS_FB_POSITIVE] == 1)
                               && meta.pause_fields == 0) {
                        request_cnm();
                    }
                }
            }
        }
        // After the CP: its tables are keyed on egress_spec, which the drop overwrites.  A
        // dropped frame's CNM clone still goes (BMv2 clones before it drops).
        if (at_arrival && meta.cp.refused) {
            tail_drop();
        }
    }
}

#undef port

#endif  // __CONGESTION_POINT_P4__

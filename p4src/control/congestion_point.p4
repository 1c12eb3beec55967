// The QCN Congestion Point of one egress port (shared/qcn-spec.md, "Congestion Point").
//
// Per data frame on a port with a cp_config entry:
//   q      = enq_qdepth (packets; BMv2 counts the egress queue only when the port has a
//            queue rate, see shared/bmv2-notes.md)
//   qoff   = q - q_eq;  qdelta = q - q_old
//   fb_fp  = -(qoff * 16 + w_fp * qdelta)              16 * Fb, so w may be fractional
//   QntzFb = (min(-fb_fp, fbmax_fp) * fb_mult) >> 32   no run-time division
//   sample by Bernoulli(p_base + QntzFb * p_scale) or by the byte-interval counter
//   on a sample: q_old = q, and if Fb < 0 an E2E clone becomes the CNM (CnmBuilder)
// qcn/cp_model.py is the same computation in Python, statement for statement.
#ifndef __CONGESTION_POINT_P4__
#define __CONGESTION_POINT_P4__

#include "../include/headers.p4"
#include "../include/size.p4"

control CongestionPoint(inout headers_t hdr,
                        inout local_metadata_t meta,
                        inout standard_metadata_t standard_metadata) {

    // Per-port state and telemetry.  Registers are read over Thrift (PI does not
    // implement register access, shared/bmv2-notes.md); counters over P4Runtime.
    register<bit<32>>(NUM_PORTS_DEF) q_old;
    register<int<32>>(NUM_PORTS_DEF) bytes_to_sample;
    register<bit<32>>(NUM_PORTS_DEF) last_qdepth;
    counter(NUM_PORTS_DEF, CounterType.packets) cp_frames;
    counter(NUM_PORTS_DEF, CounterType.packets) cp_samples;
    counter(NUM_PORTS_DEF, CounterType.packets) cp_cnms;


    action set_cp(bit<32> q_eq_pkts, bit<32> w_fixed, bit<32> fbmax_fixed, bit<64> fb_multiplier,
                  bit<32> p_base_fixed, bit<32> p_scale_fixed, bit<8> sampling,
                  bit<64> cpid, mac_addr_t cp_mac) {
        meta.cp.q_eq = q_eq_pkts;
        meta.cp.w_fp = w_fixed;
        meta.cp.fbmax_fp = fbmax_fixed;
        meta.cp.fb_mult = fb_multiplier;
        meta.cp.p_base_fp = p_base_fixed;
        meta.cp.p_scale_fp = p_scale_fixed;
        meta.cp.sampling_mode = sampling;
        meta.cnm_cpid = cpid;
        meta.cnm_cp_mac = cp_mac;
    }

    // One entry per CP-enabled egress port; no entry: CP off on that port.
    table cp_config {
        key = {
            standard_metadata.egress_port : exact @name("eg_port");
        }
        actions = {
            set_cp;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = CP_CONFIG_SIZE;
    }

    action set_sample_interval(bit<32> base_bytes, bit<32> jitter_span_bytes) {
        meta.cp.interval_base_bytes = base_bytes;
        meta.cp.interval_jitter_span = jitter_span_bytes;
    }

    // Byte-interval mode: the 802.1Qau table, 8 rows per port indexed by QntzFb >> 3.
    table sample_interval {
        key = {
            standard_metadata.egress_port : exact @name("eg_port");
            meta.sample_interval_idx      : exact @name("idx");
        }
        actions = {
            set_sample_interval;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = SAMPLE_INTERVAL_TABLE_SIZE;
    }

    // Locals shared by the actions below (the controller's parameters and the results).
    bit<32> q;
    int<32> qoff;
    int<32> qdelta;
    int<32> fb_fp;
    bit<64> qntz_fb;
    bool sampled;

    // Fb and QntzFb of this frame in one action, with conditional expressions rather
    // than if-statements: p4c gives BMv2 a table per straight-line block, and each table
    // costs per packet (bench/pipeline_bench.py).
    action compute_feedback() {
        bit<32> port = (bit<32>)standard_metadata.egress_port;
        q = (bit<32>)standard_metadata.enq_qdepth;
        last_qdepth.write(port, q);
        cp_frames.count(port);
        bit<32> q_old_val;
        q_old.read(q_old_val, port);
        qoff = (int<32>)q - (int<32>)meta.cp.q_eq;
        qdelta = (int<32>)q - (int<32>)q_old_val;
        fb_fp = -((qoff << W_FRAC_BITS) + (int<32>)meta.cp.w_fp * qdelta);
        bit<32> magnitude = fb_fp < 0 ? (bit<32>)(-fb_fp) : 0;
        magnitude = magnitude > meta.cp.fbmax_fp ? meta.cp.fbmax_fp : magnitude;
        qntz_fb = ((bit<64>)magnitude * meta.cp.fb_mult) >> QNTZ_SHIFT;
        qntz_fb = qntz_fb > QNTZ_FB_MAX ? QNTZ_FB_MAX : qntz_fb;
        // Bernoulli mode: p = p_base + QntzFb * p_scale, in 24-bit fixed point.
        bit<32> r;
        random(r, 0, PROB_ONE - 1);
        sampled = meta.cp.sampling_mode == SAMPLING_BERNOULLI
                  && r < meta.cp.p_base_fp + (bit<32>)qntz_fb * meta.cp.p_scale_fp;
    }

    // Byte-interval mode: count the frame down; when the counter runs out, sample and
    // reload it from the interval table row QntzFb >> 3, +/- jitter.
    action count_bytes(out int<32> left) {
        bytes_to_sample.read(left, (bit<32>)standard_metadata.egress_port);
        left = left - (int<32>)standard_metadata.packet_length;
        sampled = left <= 0;
        meta.sample_interval_idx = (bit<3>)(qntz_fb >> 3);
    }

    action reload_bytes(inout int<32> left) {
        bit<32> jitter;
        random(jitter, 0, meta.cp.interval_jitter_span);
        left = (int<32>)(meta.cp.interval_base_bytes - (meta.cp.interval_jitter_span >> 1) + jitter);
    }

    action record_sample() {
        bit<32> port = (bit<32>)standard_metadata.egress_port;
        cp_samples.count(port);
        q_old.write(port, q);
    }

    // A CNM for this frame: the E2E clone carries what CnmBuilder needs.
    action request_cnm() {
        cp_cnms.count((bit<32>)standard_metadata.egress_port);
        meta.cnm_qntz_fb = (bit<8>)qntz_fb;
        // Saturate to the 16-bit signed fields of the CNM (qoff >= -meta.cp.q_eq > -32768).
        meta.cnm_qoff = (bit<16>)(bit<32>)(qoff > 32767 ? 32767 : qoff);
        meta.cnm_qdelta = (bit<16>)(bit<32>)(qdelta > 32767 ? 32767
                          : (qdelta < -32768 ? -32768 : qdelta));
        meta.cnm_sampled_bytes = standard_metadata.packet_length;
        clone_preserving_field_list(CloneType.E2E,
                                    CNM_SESSION_BASE + (bit<32>)standard_metadata.ingress_port,
                                    CNM_FIELD_LIST);
    }

    apply {
        // Only well-formed unicast-sourced data frames are candidates: never a CNM, never
        // a frame the parser could not read, never a group source address.
        if (!hdr.ethernet.isValid() || hdr.cnm.isValid()
                || standard_metadata.parser_error != error.NoError
                || hdr.ethernet.src_addr[40:40] == 1) {
            return;
        }
        if (!cp_config.apply().hit) {
            return;
        }
        compute_feedback();
        if (meta.cp.sampling_mode == SAMPLING_BYTE_INTERVAL) {
            int<32> left;
            count_bytes(left);
            if (sampled) {
                sample_interval.apply();
                reload_bytes(left);
            }
            bytes_to_sample.write((bit<32>)standard_metadata.egress_port, left);
        }
        if (sampled) {
            record_sample();
            if (fb_fp < 0) {
                request_cnm();
            }
        }
    }
}

#endif  // __CONGESTION_POINT_P4__

// Ingress: what an input port asks of each unicast frame, in one lookup (BMv2 costs ~18k
// instructions per table a frame meets, even one that misses: docs/benchmarks.md).
//   PAUSE (control/pause.p4): the frame is counted into its input's buffer partition or
//     dropped, and past the high watermark its I2E clone becomes a PAUSE out of the input.
//   Three-point QCN (control/three_point.p4): a data frame from a host gets an Fb tag.
// A port has one entry with the actions its settings need; no entry: neither.
#ifndef __INPUT_PORT_P4__
#define __INPUT_PORT_P4__

#include "../include/headers.p4"
#include "../include/size.p4"
#include "pause.p4"

control InputPort(inout headers_t hdr,
                  inout local_metadata_t meta,
                  inout standard_metadata_t standard_metadata) {

    counter<port_t>(NUM_PORTS_DEF, CounterType.packets) pause_drops;

    // -- 802.3x PAUSE: the input's buffered bytes ---------------------------------------

    action watch(bit<32> hi_bytes, bit<32> lo_bytes, bit<32> partition_bytes,
                 bit<48> refresh_us, bit<16> pause_quanta) {
        bit<32> bytes;
        input_bytes.read(bytes, standard_metadata.ingress_port);
        if (standard_metadata.packet_length <= partition_bytes - bytes) {
            bytes = bytes + standard_metadata.packet_length;
            meta.counted_bytes = standard_metadata.packet_length;
            meta.pause.counted = true;
            meta.pause.lo_bytes = lo_bytes;
        }
        input_bytes.write(standard_metadata.ingress_port, bytes);
        bit<48> sent_at;
        pause_sent_at.read(sent_at, standard_metadata.ingress_port);
        bit<48> now = standard_metadata.ingress_global_timestamp;
        if (bytes > hi_bytes && (sent_at == 0 || now - sent_at >= refresh_us)) {
            pause_sent_at.write(standard_metadata.ingress_port, now | 1);
            meta.pause_fields = 1w1 ++ pause_quanta;
            pause_sent.count(standard_metadata.ingress_port);
        }
    }

    // -- three-point QCN: the Fb tag ----------------------------------------------------

    // Fb = 0, not reflected, on data frames only.  A tag a host put on its frame itself is
    // reset: only the network's CPs write Fb.
    action push_fb_tag() {
        if (CP_DATA_FRAME) {
            if (!hdr.fb_tag.isValid()) {
                hdr.fb_tag.setValid();
                if (hdr.vlan.isValid()) {
                    hdr.fb_tag.ether_type = hdr.vlan.ether_type;
                    hdr.vlan.ether_type = ETHERTYPE_FB_TAG;
                } else {
                    hdr.fb_tag.ether_type = hdr.ethernet.ether_type;
                    hdr.ethernet.ether_type = ETHERTYPE_FB_TAG;
                }
            }
            hdr.fb_tag.reflected = 0;
            hdr.fb_tag.reserved = 0;
            hdr.fb_tag.qntz_fb = 0;
            hdr.fb_tag.cpid = 0;
            hdr.fb_tag.qoff = 0;
            hdr.fb_tag.qdelta = 0;
        }
    }

    // -- both settings -----------------------------------------------------------------

    action watch_and_push_fb_tag(bit<32> hi_bytes, bit<32> lo_bytes, bit<32> partition_bytes,
                                 bit<48> refresh_us, bit<16> pause_quanta) {
        push_fb_tag();
        watch(hi_bytes, lo_bytes, partition_bytes, refresh_us, pause_quanta);
    }

    table input_port {
        key = {
            standard_metadata.ingress_port : exact @name("ig_port");
        }
        actions = {
            watch;
            push_fb_tag;
            watch_and_push_fb_tag;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = PAUSE_TABLE_SIZE;
    }

    action partition_drop() {
        pause_drops.count(standard_metadata.ingress_port);
        mark_to_drop(standard_metadata);
    }

    apply {
        switch (input_port.apply().action_run) {
            watch:
            watch_and_push_fb_tag: {
                if (!meta.pause.counted) {
                    partition_drop();
                }
                if (meta.pause_fields != 0) {
                    clone_preserving_field_list(CloneType.I2E,
                        CNM_SESSION_BASE + (bit<32>)standard_metadata.ingress_port,
                        CNM_FIELD_LIST);
                }
            }
        }
    }
}

#endif  // __INPUT_PORT_P4__

// Admission to a CP port's queue: the occupancy the arrival CP judges by, and the tail drop.
//
// BMv2 shows its egress queue only to departing frames, so the pipeline keeps each CP
// port's occupancy itself, in frames and in bytes: ingress adds a frame it admits to the
// port's queue (Admission), egress takes it off as it leaves (Departure).  Each side's
// read-modify-write is one action, and BMv2 gives an action exclusive use of every
// register it touches (docs/bmv2.md, "Register atomicity"), so the two threads never lose
// an update.  The buffer limit is enforced here, against the same occupancy: BMv2's own
// queue is set deeper (the controller), so it never drops a counted frame, which would
// leave the count too high for ever.  Flooded frames and CNM clones are not counted.
#ifndef __ADMISSION_P4__
#define __ADMISSION_P4__

#include "../include/headers.p4"
#include "../include/size.p4"

// Frames and bytes in each port's egress queue, counted by the pipeline (read by Thrift).
register<bit<32>, port_t>(NUM_PORTS_DEF) occupancy_pkts;
register<bit<32>, port_t>(NUM_PORTS_DEF) occupancy_bytes;

control Admission(inout headers_t hdr,
                  inout local_metadata_t meta,
                  inout standard_metadata_t standard_metadata) {

    counter<port_t>(NUM_PORTS_DEF, CounterType.packets) tail_drops;

    // The frame finds q = the port's occupancy (frames, or bytes with bytes_unit), and
    // joins the queue unless that would pass a limit.  at_departure: the port's CP judges
    // departing frames instead (departure_cp, in egress).
    action admit(bit<32> limit_pkts, bit<32> limit_bytes, bit<1> bytes_unit,
                 bit<1> at_departure) {
        bit<32> pkts;
        bit<32> bytes;
        occupancy_pkts.read(pkts, standard_metadata.egress_spec);
        occupancy_bytes.read(bytes, standard_metadata.egress_spec);
        meta.cp.q = pkts;
        if (bytes_unit == 1) {
            meta.cp.q = bytes;
        }
        meta.cp.at_departure = at_departure == 1;
        if (pkts < limit_pkts && standard_metadata.packet_length <= limit_bytes - bytes) {
            meta.cp.admitted = true;
            meta.counted_bytes = standard_metadata.packet_length;
            pkts = pkts + 1;
            bytes = bytes + standard_metadata.packet_length;
        }
        occupancy_pkts.write(standard_metadata.egress_spec, pkts);
        occupancy_bytes.write(standard_metadata.egress_spec, bytes);
    }

    // One entry per CP port, with its cp_sampling entry; no entry: nothing counted.
    table admission {
        key = {
            standard_metadata.egress_spec : exact @name("eg_port");
        }
        actions = {
            admit;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = CP_CONFIG_SIZE;
    }

    action tail_drop() {
        tail_drops.count(standard_metadata.egress_spec);
        mark_to_drop(standard_metadata);
    }

    apply {
        if (admission.apply().hit) {
            if (!meta.cp.admitted) {
                tail_drop();
            }
        }
    }
}

// Egress: an admitted frame leaves its port's queue.
control Departure(inout headers_t hdr,
                  inout local_metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    action leave() {
        bit<32> pkts;
        bit<32> bytes;
        occupancy_pkts.read(pkts, standard_metadata.egress_port);
        occupancy_bytes.read(bytes, standard_metadata.egress_port);
        occupancy_pkts.write(standard_metadata.egress_port, pkts - 1);
        occupancy_bytes.write(standard_metadata.egress_port,
                              bytes - meta.counted_bytes);
    }

    apply {
        leave();
    }
}

#endif  // __ADMISSION_P4__

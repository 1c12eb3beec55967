// Admission to a CP port's queue: the occupancy the arrival CP judges by, and the tail drop.
//
// BMv2 shows its egress queue only to departing frames, so the pipeline keeps each CP
// port's occupancy itself, in frames and in bytes: ingress adds a frame it admits to the
// port's queue (the arrival CP's admit_to_queue, in its stage-1 table, so a frame meets
// one table for both: control/congestion_point.p4), egress takes it off as it leaves
// (Departure).  Each side's read-modify-write is one action, and BMv2 gives an action
// exclusive use of every register it touches (docs/bmv2.md, "Register atomicity"), so the
// two threads never lose an update.  Frames and bytes share one 64-bit word, so each side
// reads and writes one register, not two (BMv2's cost is per operation).  The buffer
// limit is enforced here, against the same occupancy: BMv2's own queue is set deeper (the
// controller), so it never drops a counted frame, which would leave the count too high for
// ever.  Flooded frames and CNM clones are not counted.
#ifndef __ADMISSION_P4__
#define __ADMISSION_P4__

#include "../include/headers.p4"
#include "../include/size.p4"

// Frames and bytes in each CP port's egress queue, counted by the pipeline (read by
// Thrift): frames in the high 32 bits, bytes in the low 32 (OCCUPANCY_FRAMES_SHIFT;
// qcn/core/pipeline.py, split_occupancy).
register<bit<64>, port_t>(NUM_PORTS_DEF) occupancy;
const bit<64> OCCUPANCY_ONE_FRAME = 64w1 << OCCUPANCY_FRAMES_SHIFT;
// Frames a CP port's queue had no room for.
counter<port_t>(NUM_PORTS_DEF, CounterType.packets) tail_drops;

// Egress: an admitted frame leaves its port's queue.
control Departure(inout headers_t hdr,
                  inout local_metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    action leave() {
        bit<64> occupied;
        occupancy.read(occupied, standard_metadata.egress_port);
        occupancy.write(standard_metadata.egress_port,
                        occupied - (OCCUPANCY_ONE_FRAME | (bit<64>)meta.counted_bytes));
    }

    apply {
        leave();
    }
}

#endif  // __ADMISSION_P4__

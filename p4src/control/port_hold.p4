// 802.3x PAUSE honoured by the switch's own ports (docs/pause.md, "Honoured by the
// switch"): a paused port keeps its frames in BMv2's egress queue, where the pipeline's
// counts (its input's buffered bytes, its port's occupancy) still hold them, so an input
// behind a paused output crosses its own watermark and pauses its senders in turn.
//
// BMv2 fixes a frame's departure when the frame is enqueued, so its queue cannot be
// stopped.  Instead a counted frame that reaches the head of a paused port's queue goes
// round: it is recirculated, and ingress sends it straight back to the same port's tail,
// counted as before.  The port's BMv2 queue rate (the controller sets one on every port
// that honours PAUSE) paces the round, so a held port costs the switch what sending at
// its link's rate would.
//
// Order: going round rotates the queue, and a frame arriving during a hold joins the round
// wherever its tail then is.  So each frame that meets a hold gets the next number of its
// (port, input) when it first reaches the head, and once the hold is over a held frame out
// of turn goes round again, once: a hold that frames did not arrive during leaves a
// rotated queue, in order again after one round (a frame queued during the hold that
// reaches the head only after the lift counts as held).  A frame that comes to the head out of
// turn ORDER_SEARCH_ROUNDS times leaves anyway and its input's turn moves past it, and a
// frame that came after the lift leaves as it comes even past held frames of its input
// still going round (both counted: order_late).  Arrivals during a
// long hold join round after round, and keeping their order would cost a round for each
// round they span, paid in the link's own time after every lift; under steady load that
// cost grows with the queue until the port carries less than it is offered (measured:
// docs/pause.md).  The order kept is per input, hence per flow (a flow enters by one
// input); across inputs frames may leave in another order than they came, which no
// transport sees.  A frame BMv2 lost is skipped the same way.
#ifndef __PORT_HOLD_P4__
#define __PORT_HOLD_P4__

#include "../include/headers.p4"
#include "../include/size.p4"

// Rounds a frame may go out of turn after a lift before it leaves anyway.
const bit<8> ORDER_SEARCH_ROUNDS = 8;

// Until when each port is paused (µs, BMv2's timestamps; at or past it: not paused).
register<bit<48>, port_t>(NUM_PORTS_DEF) hold_until;
// Per (port, input), at HELD_INDEX: frames numbered (high 32 bits), and the number whose
// turn it is (low 32): equal when none of the input's held frames is queued.
register<bit<64>, held_index_t>(HELD_PAIRS) held_frames;
// Per port: rounds held frames made while it was paused, and after (out of turn: what
// keeping the order costs); frames that left out of their input's order.
counter<port_t>(NUM_PORTS_DEF, CounterType.packets) hold_rounds;
counter<port_t>(NUM_PORTS_DEF, CounterType.packets) order_rounds;
counter<port_t>(NUM_PORTS_DEF, CounterType.packets) order_late;

// Ingress, for a valid PAUSE: the port it came in on is held for its pause time.
control PauseHonour(inout headers_t hdr,
                    inout local_metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    // quantum_us_fp16: one pause quantum (512 bit times at the port's link rate) in µs,
    // with 16 fractional bits.  A pause time of 0 lifts the hold (until = now).
    action honour(bit<32> quantum_us_fp16) {
        bit<64> hold_us = ((bit<64>)hdr.mac_control.pause_quanta * (bit<64>)quantum_us_fp16)
                          >> 16;
        hold_until.write(standard_metadata.ingress_port,
                         standard_metadata.ingress_global_timestamp + (bit<48>)hold_us);
    }

    // The ports that honour PAUSE (the controller's; a port without an entry only counts it).
    table pause_honour {
        key = {
            standard_metadata.ingress_port : exact @name("ig_port");
        }
        actions = {
            honour;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = PAUSE_TABLE_SIZE;
    }

    apply {
        pause_honour.apply();
    }
}

// Ingress, for a frame going round: back to the port it waits for, from its own input.
control HeldFrameReturn(inout headers_t hdr,
                        inout local_metadata_t meta,
                        inout standard_metadata_t standard_metadata) {
    action go_back() {
        standard_metadata.egress_spec = meta.hold.port;
        standard_metadata.ingress_port = meta.hold.ingress_port;   // v1model reset it
    }

    apply {
        go_back();
    }
}

// Egress, for a counted frame at the head of its port's queue: does it leave, or go round?
control PortHold(inout headers_t hdr,
                 inout local_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    action decide() {
        port_t port = standard_metadata.egress_port;
        held_index_t pair = HELD_INDEX(port, standard_metadata.ingress_port);
        bit<48> until;
        hold_until.read(until, port);
        bit<64> held;
        held_frames.read(held, pair);
        bit<32> numbered = held[63:32];
        bit<32> turn = held[31:0];
        bool paused = standard_metadata.egress_global_timestamp < until;
        if (!meta.hold.numbered) {
            // When it joined the queue, in the 48-bit timestamps (enq_timestamp's 32 bits
            // of µs wrap every 71 minutes): queued before the hold ended, it met the hold
            // though it reached the head only now, and waits for its input's held frames.
            bit<48> enqueued = standard_metadata.egress_global_timestamp
                               - (bit<48>)standard_metadata.deq_timedelta;
            if (paused || enqueued < until && numbered != turn) {
                // It waits, numbered in its input's order.
                meta.hold.numbered = true;
                meta.hold.number = numbered;
                held_frames.write(pair, (numbered + 1) ++ turn);
                meta.go_round = true;
                if (!paused) {
                    order_rounds.count(port);
                }
            } else if (numbered != turn) {
                // It came after the lift and passes held frames of its input still going
                // round: waiting for them would cost a round of the link's time per
                // newcomer, and under steady load the port would carry less than it is
                // offered (docs/pause.md).
                order_late.count(port);
            }
        } else if (paused) {
            meta.hold.searched = 0;
            meta.go_round = true;
        } else {
            // How far ahead of its input's turn (modulo 2^32: the top bit set is behind).
            bit<32> ahead = meta.hold.number - turn;
            if (ahead == 0) {
                held_frames.write(pair, numbered ++ (turn + 1));
            } else if (ahead[31:31] == 1) {
                order_late.count(port);             // left behind: it leaves now
            } else if (meta.hold.searched >= ORDER_SEARCH_ROUNDS) {
                held_frames.write(pair, numbered ++ (meta.hold.number + 1));
                order_late.count(port);             // searched enough: it leaves
            } else {
                meta.hold.searched = meta.hold.searched + 1;
                order_rounds.count(port);
                meta.go_round = true;
            }
        }
        if (paused) {
            hold_rounds.count(port);
        }
    }

    apply {
        decide();
        if (meta.go_round) {
            meta.hold.port = standard_metadata.egress_port;
            meta.hold.ingress_port = standard_metadata.ingress_port;
            recirculate_preserving_field_list(HOLD_FIELD_LIST);
        }
    }
}

#endif  // __PORT_HOLD_P4__

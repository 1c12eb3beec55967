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
// (port, input) when it first reaches the head, and once the hold is over the frames of
// each input leave in that order: one out of turn goes round again.  A frame that never
// met the hold waits behind any held frame of its input still queued.  The order kept is
// per input, hence per flow (a flow enters by one input); across inputs frames may leave
// in another order than they came, which no transport sees, and a frame in turn for its
// input is then almost always at the head, so a lift costs few rounds (docs/pause.md).
// A numbered frame that went missing (BMv2 dropped it) would hold its input's frames for
// ever: after a whole round without the frame whose turn it is, its turn is skipped and
// counted (hold_lost).
#ifndef __PORT_HOLD_P4__
#define __PORT_HOLD_P4__

#include "../include/headers.p4"
#include "../include/size.p4"

// Until when each port is paused (µs, BMv2's timestamps; at or past it: not paused).
register<bit<48>, port_t>(NUM_PORTS_DEF) hold_until;
// Per (port, input), at HELD_INDEX: frames numbered (high 32 bits) and numbered frames
// sent (low 32), equal when none of the input's held frames is queued; and frames out of
// turn since the last one in turn or the port's last PAUSE (low 32 bits, tagged in the high
// 32 with that PAUSE's hold_until: a count from before it is stale).
register<bit<64>, held_index_t>(HELD_PAIRS) held_frames;
register<bit<64>, held_index_t>(HELD_PAIRS) held_misses;
// Rounds held frames made per port: while it was paused, and after (out of turn: what
// keeping the order costs); numbered frames never found again.
counter<port_t>(NUM_PORTS_DEF, CounterType.packets) hold_rounds;
counter<port_t>(NUM_PORTS_DEF, CounterType.packets) order_rounds;
counter<port_t>(NUM_PORTS_DEF, CounterType.packets) hold_lost;

// Ingress, for a valid PAUSE: the port it came in on is held for its pause time.
control PauseHonour(inout headers_t hdr,
                    inout local_metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    // quantum_us_fp16: one pause quantum (512 bit times at the port's link rate) in µs,
    // with 16 fractional bits.  A pause time of 0 lifts the hold (until = now: every PAUSE
    // leaves a value of its own, which PortHold's miss count is tagged with).
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
        bit<32> sent = held[31:0];
        bool paused = standard_metadata.egress_global_timestamp < until;
        if (!meta.hold.numbered) {
            // First time at the head: it waits if the port is paused or held frames of
            // its input are still queued, behind all of them.
            if (paused || numbered != sent) {
                if (!paused) {
                    order_rounds.count(port);
                }
                meta.hold.numbered = true;
                meta.hold.number = numbered;
                held_frames.write(pair, (numbered + 1) ++ sent);
                meta.go_round = true;
            }
        } else if (!paused) {
            bit<64> tagged;
            held_misses.read(tagged, pair);
            bit<32> misses = tagged[31:0];
            if (tagged[63:32] != until[31:0]) {
                misses = 0;
            }
            if (meta.hold.number == sent) {
                held_frames.write(pair, numbered ++ (sent + 1));
                misses = 0;
            } else {
                // More misses since the last PAUSE than a round of the input's held frames
                // (twice, for those on their way round): the frame whose turn it is is
                // gone.  (Counted across PAUSEs, a port paused and lifted many times before
                // that frame came round would skip it while it is still queued.)
                misses = misses + 1;
                if (misses > ((numbered - sent) << 1) + 8) {
                    held_frames.write(pair, numbered ++ (sent + 1));
                    misses = 0;
                    hold_lost.count(port);
                }
                order_rounds.count(port);
                meta.go_round = true;
            }
            held_misses.write(pair, until[31:0] ++ misses);
        } else {
            meta.go_round = true;
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

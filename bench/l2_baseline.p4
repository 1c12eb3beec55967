// Baseline for bench/pipeline_bench.py: plain L2 forwarding on the destination MAC, no
// congestion point -- the same parser front and forwarding table as p4src/, nothing else.
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

struct headers_t { ethernet_t ethernet; }
struct meta_t { }

parser BaselineParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                      inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition accept;
    }
}

control BaselineVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control BaselineIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action forward(bit<9> port) { sm.egress_spec = port; }
    action drop() { mark_to_drop(sm); }
    table l2_forwarding {
        key = { hdr.ethernet.dst_addr : exact @name("dst_addr"); }
        actions = { forward; drop; }
        default_action = drop();
        size = 4096;
    }
    apply { l2_forwarding.apply(); }
}

control BaselineEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { }
}

control BaselineCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control BaselineDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.ethernet); }
}

V1Switch(BaselineParser(), BaselineVerify(), BaselineIngress(), BaselineEgress(),
         BaselineCompute(), BaselineDeparser()) main;

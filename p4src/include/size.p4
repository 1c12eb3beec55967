// Table, counter and register sizes.
#ifndef __SIZE_P4__
#define __SIZE_P4__

#define NUM_PORTS_DEF 512                 // port_t is 9 bits
#define L2_TABLE_SIZE 4096
#define ECMP_MEMBERS_SIZE 512            // one per port (members are ports)
#define CP_CONFIG_SIZE 512
#define SAMPLE_INTERVAL_TABLE_SIZE 4096   // 8 intervals per port
#define EDGE_PORT_TABLE_SIZE 512
#define PAUSE_TABLE_SIZE 512
// A held port keeps order per (port, input) (control/port_hold.p4): ports and inputs
// 0..HELD_PORTS-1 (the controller refuses to hold a port of a switch with more).
#define HELD_PORT_BITS 6
#define HELD_PAIRS 4096                  // 2^(2 * HELD_PORT_BITS)
typedef bit<12> held_index_t;            // 2 * HELD_PORT_BITS
#define HELD_INDEX(port, input) ((held_index_t)(port[5:0] ++ input[5:0]))

#endif  // __SIZE_P4__

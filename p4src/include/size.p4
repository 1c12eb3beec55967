// Table, counter and register sizes.
#ifndef __SIZE_P4__
#define __SIZE_P4__

#define NUM_PORTS_DEF 512                 // port_t is 9 bits
#define L2_TABLE_SIZE 4096
#define CP_CONFIG_SIZE 512
#define SAMPLE_INTERVAL_TABLE_SIZE 4096   // 8 intervals per port
#define EDGE_PORT_TABLE_SIZE 512
#define PAUSE_TABLE_SIZE 512

#endif  // __SIZE_P4__

/* The DPDK headers the latency agent binds to (bindgen input). Compiled with Debian's extra flags
 * from `pkg-config --cflags libdpdk` (`-include rte_config.h -march=corei7`). */
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_log.h>
#include <rte_lcore.h>
#include <rte_cycles.h>
#include <rte_mempool.h>
#include <rte_mbuf.h>
#include <rte_ethdev.h>
#include "helpers.h"

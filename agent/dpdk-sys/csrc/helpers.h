/* Functions for what DPDK offers only as macros (rte_errno, rte_pktmbuf_mtod) or needs C's stdio. */
#ifndef LATENCY_DPDK_HELPERS_H
#define LATENCY_DPDK_HELPERS_H

#include <stdint.h>

struct rte_mbuf;

/* The calling thread's rte_errno. */
int ldpdk_errno(void);

/* Send DPDK's log to stderr (the Linux EAL logs to stdout and syslog by default). Call before
 * rte_eal_init. Returns rte_openlog_stream's result. */
int ldpdk_log_to_stderr(void);

/* rte_pktmbuf_mtod(m, void *): the first byte of the first segment's data. */
void *ldpdk_mbuf_data(struct rte_mbuf *m);

/* Bytes of data in the first segment (data_len). */
uint16_t ldpdk_mbuf_data_len(const struct rte_mbuf *m);

/* Bytes of data in the whole packet, all segments (pkt_len). */
uint32_t ldpdk_mbuf_pkt_len(const struct rte_mbuf *m);

/* Number of segments of the packet. */
uint16_t ldpdk_mbuf_nb_segs(const struct rte_mbuf *m);

#endif

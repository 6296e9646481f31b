#include <stdio.h>

#include <rte_errno.h>
#include <rte_log.h>
#include <rte_mbuf.h>

#include "helpers.h"

int ldpdk_errno(void) { return rte_errno; }

int ldpdk_log_to_stderr(void) { return rte_openlog_stream(stderr); }

void *ldpdk_mbuf_data(struct rte_mbuf *m) { return rte_pktmbuf_mtod(m, void *); }

uint16_t ldpdk_mbuf_data_len(const struct rte_mbuf *m) { return rte_pktmbuf_data_len(m); }

uint32_t ldpdk_mbuf_pkt_len(const struct rte_mbuf *m) { return rte_pktmbuf_pkt_len(m); }

uint16_t ldpdk_mbuf_nb_segs(const struct rte_mbuf *m) { return m->nb_segs; }

//! Raw bindings to DPDK (placeholder until generated).

//! Every format that crosses a process boundary in the latency orchestrator, defined once and used
//! by both its writer and its reader:
//!
//! - [`card`]: what a card says it runs ([`CardIdentity`]), as a bring-up's readback prints it
//!   and a bitstream manifest expects it;
//! - [`schema`]: the Arrow schema of the per-packet records (agent run streams, Parquet run files,
//!   simulator, importer, analysis), with [`Port`] and the column-wise [`RecordBuilder`];
//! - [`probe`]: the probe wire formats (how a probe id and its reflect tag sit in a frame);
//! - [`int`]: the INT-MD headers of INT probes (written by the trace generator, pushed onto by the
//!   emulated INT transit program);
//! - [`control`]: the agent control protocol — the command lines a controller sends
//!   ([`AgentCommand`]) and the JSON-line events the agent answers with ([`AgentEvent`]);
//! - [`meta`]: the key-value metadata keys of a run file;
//! - [`eal`]: the DPDK EAL configuration of the agent and the arguments it turns into;
//! - [`capture`]: the agent's capture options (rings, promiscuous mode, service core, reflect
//!   destination MAC), the arguments they turn into, and what the agent reports it set up;
//! - [`fastpath`]: the receiver's fast path as the agent reads it back (isolated cores, governor,
//!   idle states, busy-poll sysctls, hugepages, interrupt affinity) and the policy judging it;
//! - [`soak`]: the HDR histograms of differentials that long soaks keep instead of records, and
//!   their interval log (`run=<r>.hlog`);
//! - [`pcap`]: classic pcap trace files, read record by record (the agent's originator sends a
//!   trace the controller generated);
//! - [`mod@words`]: enums spelled as words, one name table per enum (the [`words!`] macro).
//!
//! The crate is pure (no OS-specific API, no `unsafe`), so it builds for any target.

pub mod capture;
pub mod card;
pub mod control;
pub mod eal;
pub mod fastpath;
pub mod int;
pub mod meta;
pub mod pcap;
pub mod probe;
pub mod schema;
pub mod soak;
pub mod words;

pub use capture::{CaptureOptions, CaptureSetup, MacAddr, PortRings};
pub use card::{CardIdentity, Hex32};
pub use control::{AgentCommand, AgentEvent, CommandError, RunCounters, TscInfo};
pub use eal::EalConfig;
pub use probe::ProbeFormat;
pub use schema::{Port, RecordBuilder, record_schema, run_file_schema};

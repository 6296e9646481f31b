//! The tool's identity, as provenance records it.

/// Git commit of this build (`unknown` outside a checkout; `-dirty` with local changes).
pub const GIT_COMMIT: &str = env!("LATENCY_GIT_COMMIT");

/// Version of this tool.
pub const TOOL_VERSION: &str = env!("CARGO_PKG_VERSION");

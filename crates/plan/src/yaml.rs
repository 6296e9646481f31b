//! Positioned YAML: a tree with line:column positions, and the decoder that reads it while
//! collecting every diagnostic instead of stopping at the first one.
//!
//! Plans, bitstream manifests and inventories are decoded by hand from this tree (not with serde)
//! so that unknown keys, wrong types and out-of-range values are all reported in one pass, each with
//! its own position.
//!
//! Bottom to top: `tree` (nodes, positions, diagnostics, parsing), `describe` (what a describe
//! pass notes, for the JSON Schemas), [`decoder`] (the [`Decoder`] over nodes) and `file` (one
//! file read and decoded).

pub mod decoder;
mod describe;
mod file;
mod tree;

pub use decoder::{Decoder, MapReader, closest, is_safe_ident, resolve};
pub use file::load_file;
pub(crate) use file::{decode_parsed, read_file};
pub use tree::{Diagnostic, MAX_YAML_BYTES, Node, Pos, Value, parse, read_source};

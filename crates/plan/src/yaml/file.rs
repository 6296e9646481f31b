//! One YAML file read and decoded: its problems appended to the caller's, its value returned only
//! when it has none.

use std::path::Path;

use super::decoder::Decoder;
use super::tree::{self, Diagnostic, Node};

/// Read (within [`MAX_YAML_BYTES`](super::MAX_YAML_BYTES)) and parse one YAML file: its text and
/// its tree.
pub(crate) fn read_file(path: &Path, diags: &mut Vec<Diagnostic>) -> Option<(String, Node)> {
    let parsed = tree::read_source(path).and_then(|src| tree::parse(path, &src).map(|root| (src, root)));
    parsed.map_err(|e| diags.push(e)).ok()
}

/// Decode a parsed file, appending its problems to `diags`; the value only when it has none.
pub(crate) fn decode_parsed<T>(
    path: &Path,
    root: &Node,
    diags: &mut Vec<Diagnostic>,
    decode: impl FnOnce(&mut Decoder, &Node) -> Option<T>,
) -> Option<T> {
    let mut d = Decoder::new(path);
    let out = decode(&mut d, root);
    let ok = d.diags.is_empty();
    diags.append(&mut d.diags);
    out.filter(|_| ok)
}

/// Read and decode one YAML file, appending its problems to `diags`.
pub fn load_file<T>(
    path: &Path,
    diags: &mut Vec<Diagnostic>,
    decode_root: impl FnOnce(&mut Decoder, &Node) -> Option<T>,
) -> Option<T> {
    let (_, root) = read_file(path, diags)?;
    decode_parsed(path, &root, diags, decode_root)
}

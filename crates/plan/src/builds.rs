//! A builds file for `orchestrate bisect`: an ordered list of one program's builds, each a
//! bitstream manifest with the version (commit, tag) it was built from, the first known good and
//! the last known bad.
//!
//! ```yaml
//! program: forward              # the plan's program the builds are of
//! builds:
//!   - { version: 3f2a9c1, bitstream: builds/forward-3f2a9c1.yaml }
//!   - { version: 77b01de, bitstream: builds/forward-77b01de.yaml }
//! ```

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::bitstream::{self, Bitstream};
use crate::yaml::{self, Decoder, Diagnostic, Node, Pos};

/// One build.
#[derive(Clone, Debug, Serialize)]
pub struct Build {
    /// What it was built from (a commit, a tag).
    pub version: String,
    /// Its bitstream manifest.
    pub bitstream: PathBuf,
    /// The manifest, as read.
    #[serde(skip)]
    pub manifest: Bitstream,
    /// Where the file gives it.
    #[serde(skip)]
    pub at: Pos,
}

/// A builds file.
#[derive(Clone, Debug, Serialize)]
pub struct Builds {
    /// The file.
    pub path: PathBuf,
    /// The plan's program the builds are of.
    pub program: String,
    /// The builds, oldest (known good) first, newest (known bad) last.
    pub builds: Vec<Build>,
}

/// Read a builds file: at least two builds, distinct versions, each manifest valid (its problems
/// at their own file, line and column).
pub fn load(path: &Path) -> Result<Builds, Vec<Diagnostic>> {
    let mut diags = Vec::new();
    let Some((program, listed)) = yaml::load_file(path, &mut diags, decode) else { return Err(diags) };
    let mut builds = Vec::new();
    for (version, bitstream, at) in listed {
        if let Some(manifest) = yaml::load_file(&bitstream, &mut diags, bitstream::decode) {
            builds.push(Build { version, bitstream, manifest, at });
        }
    }
    if diags.is_empty() { Ok(Builds { path: path.to_path_buf(), program, builds }) } else { Err(diags) }
}

type Listed = (String, Vec<(String, PathBuf, Pos)>);

fn decode(d: &mut Decoder, root: &Node) -> Option<Listed> {
    let mut m = d.map(root, "builds file")?;
    let program = m.required(d, "program", Decoder::ident);
    let list = m.req(d, "builds");
    m.done(d);
    let items = d.seq(list?)?;
    let mut builds: Vec<(String, PathBuf, Pos)> = Vec::new();
    for item in items {
        let mut b = d.map(item, "build")?;
        let version = b.required(d, "version", Decoder::string);
        let bitstream = b.required(d, "bitstream", |d, v| d.path(v, true));
        b.done(d);
        if let (Some(version), Some(bitstream)) = (version, bitstream) {
            if builds.iter().any(|x| x.0 == version) {
                d.error(item.pos, format!("version `{version}` is listed twice"));
            }
            builds.push((version, bitstream, item.pos));
        }
    }
    if items.len() < 2 {
        d.error(root.pos, "a bisection needs at least two builds: the known good first, the known bad last");
    }
    Some((program?, builds))
}

//! Decoding of a plan's `traces:`. A `pcap:` trace is read through at validation: a file a study
//! could not replay (not a classic pcap, truncated, without probes, with repeated probe ids) is
//! reported at the plan's line, before anything touches a host.

use std::path::Path;

use super::yaml::{self, Decoder, Node};
use super::{ProbeFormat, TraceSource, bitstream};
use crate::trace::TEMPLATES;

/// Decode `traces:`; every name is returned (so that references can be checked) with its source
/// when that decoded.
pub(super) fn decode_traces(d: &mut Decoder, n: &Node) -> Option<Vec<(String, Option<TraceSource>)>> {
    let mut m = d.map(n, "traces by name")?;
    let mut out = Vec::new();
    for (pos, name, v) in m.entries() {
        if !yaml::is_safe_ident(name) {
            d.error(
                *pos,
                format!(
                    "`{name}` is not a safe name: use letters, digits, `_` and `-`, starting with a letter (at most 64)"
                ),
            );
        }
        out.push((name.clone(), decode_trace(d, v)));
    }
    if out.is_empty() {
        d.error(n.pos, "at least one trace is needed");
        return None;
    }
    Some(out)
}

fn decode_trace(d: &mut Decoder, n: &Node) -> Option<TraceSource> {
    let mut m = d.map(n, "trace: `pcap` or `generate`")?;
    let pcap = m.get("pcap");
    let generate = m.get("generate");
    let out = match (pcap, generate) {
        (Some(p), None) => {
            let sha = m.optional(d, "sha256", bitstream::sha256_field);
            let path = d.path(p, true);
            if let Some(path) = &path {
                // A file that is not the one the plan names is not worth reading further.
                let expected = match &sha {
                    Some(Some(sha)) => bitstream::check_sha256(d, p, path, sha),
                    _ => true,
                };
                if expected {
                    check_pcap(d, p, path);
                }
            }
            Some(TraceSource::Pcap { path: path?, sha256: sha? })
        }
        (None, Some(g)) => {
            let mut gm = d.map(g, "trace generation spec")?;
            let template = gm.required(d, "template", |d, v| d.choice(v, &TEMPLATES));
            let count = gm.required(d, "count", |d, v| d.uint(v, 1..=10_000_000));
            let probe_id = gm.or(d, "probe_id", ProbeFormat::Latencylab, |d, v| {
                d.choice(v, &ProbeFormat::ALL.map(|f| (f.name(), f)))
            });
            gm.done(d);
            Some(TraceSource::Generate { template: template?, count: count?, probe_id: probe_id? })
        }
        (Some(_), Some(_)) => {
            d.error(n.pos, "a trace has either `pcap` or `generate`, not both");
            None
        }
        (None, None) => {
            d.error(n.pos, "a trace needs `pcap: <file>` or `generate: {template, count, probe_id}`");
            None
        }
    };
    m.finish(d, &["pcap", "sha256", "generate"]);
    out
}

/// Read the pcap at `path` as a study would replay it and report, at the `pcap:` node `at`, what
/// makes it unusable.
fn check_pcap(d: &mut Decoder, at: &Node, path: &Path) {
    match crate::trace::inspect(path, ProbeFormat::Latencylab) {
        Err(e) => d.error(at.pos, e.to_string()),
        Ok(found) => {
            for problem in found.unusable() {
                d.error(at.pos, format!("{}: {problem}", path.display()));
            }
        }
    }
}

//! Decoding of a plan's `traces:`. A `pcap:` trace is read through at validation: a file a study
//! could not replay (not a classic pcap, truncated, not Ethernet, with records a replay cannot
//! send as they are, without probes, with repeated probe ids) is reported at the plan's line,
//! before anything touches a host.

use std::path::Path;

use crate::bitstream;
use crate::trace;
use crate::trace_spec::{
    Generated, IpVersion, MAX_FRAME_LEN, MAX_PROBES, ProbeFormat, Refused, Shape, TraceSource, TraceTemplate, Transport,
};
use crate::yaml::{self, Decoder, Node};

/// Decode `traces:`; every name is returned (so that references can be checked) with its source
/// when that decoded.
pub(super) fn decode_traces(d: &mut Decoder, n: &Node) -> Option<Vec<(String, Option<TraceSource>, yaml::Pos)>> {
    let mut m = d.map(n, "traces by name")?;
    let mut out = Vec::new();
    for (name, v) in m.names(d) {
        out.push((name.to_string(), decode_trace(d, v), v.pos));
    }
    if out.is_empty() {
        d.error(n.pos, "at least one trace is needed");
        return None;
    }
    Some(out)
}

fn decode_trace(d: &mut Decoder, n: &Node) -> Option<TraceSource> {
    let mut m = d.map(n, "trace: `pcap` or `generate`")?;
    // A published trace may be absent when the plan declares its stand-in.
    let must_exist = m.at("stand_in").is_none();
    let pcap = m.optional(d, "pcap", |d, v| d.path(v, must_exist).map(|path| (path, v)));
    let sha = m.optional(d, "sha256", bitstream::sha256_field);
    let stand_in = m.optional(d, "stand_in", decode_generated);
    let generate = m.optional(d, "generate", decode_generated);
    let (at_pcap, at_sha, at_stand_in) = (m.at("pcap"), m.at("sha256"), m.at("stand_in"));
    let given_generate = m.at("generate").is_some();
    m.done(d);
    match (at_pcap.is_some(), given_generate) {
        (true, false) => {
            let (path, p) = pcap??;
            match stand_in? {
                Some(generate) if !path.exists() => Some(TraceSource::StandIn { pcap: path, sha256: sha?, generate }),
                _ => {
                    // A file that is not the one the plan names is not worth reading further.
                    let expected = match &sha {
                        Some(Some(sha)) => bitstream::check_sha256(d, p, &path, sha),
                        _ => true,
                    };
                    if expected {
                        check_pcap(d, p, &path);
                    }
                    Some(TraceSource::Pcap { path, sha256: sha? })
                }
            }
        }
        (false, true) => {
            if let Some(at) = at_stand_in {
                d.error(at, "`stand_in` replaces an absent `pcap`; a generated trace needs none");
            }
            if let Some(at) = at_sha {
                d.error(at, "`sha256` checks a `pcap` file; a generated trace has none");
            }
            generate?.map(TraceSource::Generate).filter(|_| at_stand_in.is_none() && at_sha.is_none())
        }
        (true, true) => {
            d.error(n.pos, "a trace has either `pcap` or `generate`, not both");
            None
        }
        (false, false) => {
            d.error(n.pos, "a trace needs `pcap: <file>` or `generate: {template, count, probe_id}`");
            None
        }
    }
}

/// A generation spec: `{template, count, probe_id, frame_size, vlan, ip, transport}`.
fn decode_generated(d: &mut Decoder, g: &Node) -> Option<Generated> {
    let mut gm = d.map(g, "trace generation spec")?;
    let template = gm.required(d, "template", |d, v| d.choice(v, &TraceTemplate::WORDS));
    let count = gm.required(d, "count", |d, v| d.uint(v, 1..=i64::from(MAX_PROBES)));
    let probe_id = gm.or(d, "probe_id", ProbeFormat::Latencylab, |d, v| d.choice(v, &ProbeFormat::WORDS));
    // `vlan: <id>` tags every frame, `vlan: none` none; absent: as the template's traffic is.
    let vlan =
        gm.optional(d, "vlan", |d, v| if d.is_word(v, "none") { Some(None) } else { d.uint(v, 1..=4094).map(Some) });
    let frame_size = gm.optional(d, "frame_size", |d, v| d.uint::<u32>(v, 1..=i64::from(MAX_FRAME_LEN)));
    let ip = gm.or(d, "ip", IpVersion::Ipv4, |d, v| d.choice(v, &IpVersion::WORDS));
    let transport = gm.or(d, "transport", Transport::Udp, |d, v| d.choice(v, &Transport::WORDS));
    let (at_ip, at_size) = (gm.at("ip"), gm.at("frame_size"));
    gm.done(d);
    let (template, count, probe_id) = (template?, count?, probe_id?);
    let shape = Shape { vlan: vlan?, frame_len: frame_size?, ip: ip?, transport: transport? };
    match Generated::with(template, count, probe_id, shape) {
        Ok(g) => Some(g),
        Err(refused) => {
            let at = if matches!(refused, Refused::Ipv6 { .. }) { at_ip } else { at_size };
            d.error(at.unwrap_or(g.pos), refused.to_string());
            None
        }
    }
}

/// Read the pcap at `path` as a study would replay it and report, at the `pcap:` node `at`, what
/// makes it unusable.
fn check_pcap(d: &mut Decoder, at: &Node, path: &Path) {
    match trace::inspect(path, ProbeFormat::Latencylab) {
        Err(e) => d.error(at.pos, e.to_string()),
        Ok(found) => {
            for problem in found.unusable() {
                d.error(at.pos, format!("{}: {problem}", path.display()));
            }
        }
    }
}

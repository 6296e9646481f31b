//! Emulated bitstreams: a behaviour (one of the P4 programs, or null) and a latency model.
//!
//! A bitstream is named by what `flash` is given: a spec file (`.yaml`, `.yml` or `.json`:
//! `name`, `behaviour`, optional `delay_us` and `delay_ns_per_byte`), or an image path or bare name
//! whose file stem maps to a behaviour (`bitstreams/bin/forward.mcs` → forward, `rmvhdr.mcs` →
//! remove_header, `golden_nic.mcs` → null). A frame's pipeline delay is `delay_us` plus
//! `delay_ns_per_byte` for each byte of the frame as it enters. The images themselves are never read: the emulator only needs to know
//! which program the orchestrator meant to load.

use std::borrow::Cow;
use std::path::Path;
use std::time::Duration;

use saphyr::{LoadableYamlNode, Yaml};
use serde::{Deserialize, Serialize};

use crate::packet::{self, Verdict};

latency_proto::words! {
/// What the emulated pipeline does with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Behaviour {
    /// Drop IPv4 frames whose destination is not 10.0.0.1–10.0.0.7 (and non-IPv4 frames).
    Forward = "forward",
    /// Pass every frame (the emulation ignores the table's VLAN insertions).
    FiveTuple = "five_tuple",
    /// Strip the 802.1Q tag.
    RemoveHeader = "remove_header",
    /// Drop frames with a bad IPv4 header checksum.
    Checksum = "checksum",
    /// Push an INT-MD hop onto INT probes' stacks (a header-inserting program).
    IntTransit = "int_transit",
    /// Bypass: pass every frame with no delay (the null image).
    Null = "null",
}
}

impl Behaviour {
    /// The behaviour a name or image stem stands for (case-insensitive; `-` and `_` alike), with
    /// the image names of the LatencyLab study as aliases.
    pub fn from_alias(name: &str) -> Option<Behaviour> {
        let n = name.to_ascii_lowercase().replace('-', "_");
        match n.as_str() {
            "forward" => Some(Behaviour::Forward),
            "five_tuple" | "fivetuple" | "5tuple" => Some(Behaviour::FiveTuple),
            "remove_header" | "removeheader" | "rmvhdr" => Some(Behaviour::RemoveHeader),
            "checksum" => Some(Behaviour::Checksum),
            "int_transit" | "inttransit" => Some(Behaviour::IntTransit),
            "null" | "golden_nic" | "golden" | "bypass" => Some(Behaviour::Null),
            _ => None,
        }
    }

    /// Default emulated pipeline delay: hundreds of µs, so that a busy 2-vCPU machine resolves it.
    pub fn default_delay(self) -> Duration {
        Duration::from_micros(match self {
            Behaviour::Forward => 300,
            Behaviour::FiveTuple => 250,
            Behaviour::RemoveHeader => 400,
            Behaviour::Checksum => 600,
            Behaviour::IntTransit => 200,
            Behaviour::Null => 0,
        })
    }

    /// Default delay per byte of the entering frame, ns: 200 for IntTransit (its delay grows with
    /// the frame it realigns behind the inserted hop: 226 µs at 128 B, 405 µs at 1024 B, below the
    /// 500 µs between probes at 2,000 pps, so that the queue never holds two probes), 0 for the
    /// others.
    pub fn default_ns_per_byte(self) -> u64 {
        if self == Behaviour::IntTransit { 200 } else { 0 }
    }

    /// Apply the program to a frame that spends `delay` in the pipeline (IntTransit reports it as
    /// its hop latency).
    pub fn apply(self, frame: &[u8], delay: Duration) -> Verdict<'_> {
        match self {
            Behaviour::IntTransit => packet::int_transit(frame, u32::try_from(delay.as_nanos()).unwrap_or(u32::MAX)),
            Behaviour::Forward => packet::forward(frame),
            Behaviour::RemoveHeader => packet::remove_header(frame),
            Behaviour::Checksum => packet::checksum(frame),
            Behaviour::FiveTuple | Behaviour::Null => Verdict::Pass(Cow::Borrowed(frame)),
        }
    }
}

/// A loaded bitstream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bitstream {
    /// What `flash` was given (path or name), verbatim.
    pub image: String,
    /// Bitstream name (the spec's `name`, else the image's file stem).
    pub name: String,
    /// The program's behaviour.
    pub behaviour: Behaviour,
    /// Pipeline delay.
    #[serde(rename = "delay_us", with = "micros")]
    pub delay: Duration,
    /// Pipeline delay added per byte of the entering frame, ns.
    #[serde(rename = "delay_ns_per_byte", default)]
    pub ns_per_byte: u64,
}

impl Bitstream {
    /// The pipeline delay of a frame of `len` bytes.
    pub fn delay_for(&self, len: usize) -> Duration {
        self.delay + Duration::from_nanos(self.ns_per_byte.saturating_mul(len as u64))
    }
}

/// A duration as whole µs.
mod micros {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_micros() as u64)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_micros)
    }
}

/// A bitstream that cannot be resolved.
#[derive(Debug, thiserror::Error)]
pub enum BitstreamError {
    /// The image's name maps to no behaviour.
    #[error(
        "`{image}`: no emulated behaviour for `{stem}` (known: forward, five_tuple, remove_header/rmvhdr, checksum, int_transit, null/golden_nic)"
    )]
    Unknown {
        /// The image.
        image: String,
        /// Its file stem.
        stem: String,
    },
    /// A spec file cannot be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// A spec file is malformed.
    #[error("{path}: {message}")]
    Spec {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
}

/// Longest delay accepted (1 s): anything longer is a typo.
pub const MAX_DELAY: Duration = Duration::from_secs(1);
/// Largest delay per byte accepted (50 µs: a 9216-byte frame then waits under 0.5 s).
pub const MAX_NS_PER_BYTE: u64 = 50_000;

/// The file stem of `image` with every extension removed (`bin/rmvhdr.mcs` → `rmvhdr`).
pub fn stem(image: &str) -> &str {
    let base = image.rsplit('/').next().unwrap_or(image);
    match base.find('.') {
        Some(0) | None => base,
        Some(i) => &base[..i],
    }
}

/// Resolve what `flash` was given into a bitstream; `delay` overrides the spec's or the default.
pub fn resolve(image: &str, delay: Option<Duration>) -> Result<Bitstream, BitstreamError> {
    let is_spec = [".yaml", ".yml", ".json"].iter().any(|e| image.ends_with(e)) && Path::new(image).is_file();
    let mut b = if is_spec {
        let text =
            std::fs::read_to_string(image).map_err(|source| BitstreamError::Io { path: image.to_string(), source })?;
        parse_spec(image, &text)?
    } else {
        let s = stem(image);
        let behaviour = Behaviour::from_alias(s)
            .ok_or_else(|| BitstreamError::Unknown { image: image.to_string(), stem: s.to_string() })?;
        Bitstream {
            image: image.to_string(),
            name: s.to_string(),
            behaviour,
            delay: behaviour.default_delay(),
            ns_per_byte: behaviour.default_ns_per_byte(),
        }
    };
    if let Some(d) = delay {
        b.delay = d;
    }
    if b.delay > MAX_DELAY {
        return Err(BitstreamError::Spec {
            path: image.to_string(),
            message: format!("delay {} µs is above the 1 s limit", b.delay.as_micros()),
        });
    }
    if b.ns_per_byte > MAX_NS_PER_BYTE {
        return Err(BitstreamError::Spec {
            path: image.to_string(),
            message: format!("delay_ns_per_byte {} is above the {MAX_NS_PER_BYTE} ns limit", b.ns_per_byte),
        });
    }
    Ok(b)
}

/// Parse a spec file's text (YAML; JSON is YAML too): `behaviour` (required), `name` (default: the
/// file stem), `delay_us` and `delay_ns_per_byte` (default: the behaviour's). Unknown keys are
/// errors.
pub fn parse_spec(path: &str, text: &str) -> Result<Bitstream, BitstreamError> {
    let err = |message: String| BitstreamError::Spec { path: path.to_string(), message };
    let docs = Yaml::load_from_str(text).map_err(|e| err(e.to_string()))?;
    let Some(map) = docs.first().and_then(|d| d.as_mapping()) else {
        return Err(err("expected a mapping with `behaviour`, `name`, `delay_us`".into()));
    };
    let (mut name, mut behaviour, mut delay, mut per_byte) = (None, None, None, None);
    let whole = |key: &str, v: &Yaml| {
        v.as_integer()
            .and_then(|i| u64::try_from(i).ok())
            .ok_or_else(|| err(format!("`{key}` must be a non-negative integer")))
    };
    for (k, v) in map {
        let key = k.as_str().unwrap_or("?");
        match key {
            "name" => name = Some(v.as_str().ok_or_else(|| err("`name` must be a string".into()))?.to_string()),
            // `behaviour: null` reads as YAML's null: that is the null image too.
            "behaviour" | "behavior" if v.is_null() => behaviour = Some(Behaviour::Null),
            "behaviour" | "behavior" => {
                let s = v.as_str().ok_or_else(|| err("`behaviour` must be a string".into()))?;
                behaviour = Some(Behaviour::from_alias(s).ok_or_else(|| err(format!("unknown behaviour `{s}`")))?);
            }
            "delay_us" => delay = Some(Duration::from_micros(whole(key, v)?)),
            "delay_ns_per_byte" => per_byte = Some(whole(key, v)?),
            other => {
                return Err(err(format!(
                    "unknown key `{other}` (expected `name`, `behaviour`, `delay_us`, `delay_ns_per_byte`)"
                )));
            }
        }
    }
    let behaviour = behaviour.ok_or_else(|| err("`behaviour` is missing".into()))?;
    Ok(Bitstream {
        image: path.to_string(),
        name: name.unwrap_or_else(|| stem(path).to_string()),
        behaviour,
        delay: delay.unwrap_or_else(|| behaviour.default_delay()),
        ns_per_byte: per_byte.unwrap_or_else(|| behaviour.default_ns_per_byte()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_names_map_to_behaviours() {
        let cases = [
            ("/var/tmp/latency/bitstreams/forward.mcs", Behaviour::Forward, 300),
            ("rmvhdr.mcs", Behaviour::RemoveHeader, 400),
            ("bin/golden_nic.mcs", Behaviour::Null, 0),
            ("checksum", Behaviour::Checksum, 600),
            ("five_tuple.bit", Behaviour::FiveTuple, 250),
            ("Remove-Header.tar.gz", Behaviour::RemoveHeader, 400),
            ("bin/int_transit.mcs", Behaviour::IntTransit, 200),
        ];
        for (image, behaviour, us) in cases {
            let b = resolve(image, None).unwrap();
            assert_eq!((b.behaviour, b.delay), (behaviour, Duration::from_micros(us)), "{image}");
            assert_eq!(b.image, image);
        }
        assert_eq!(resolve("rmvhdr.mcs", None).unwrap().name, "rmvhdr");
        assert!(matches!(resolve("/x/unknown.mcs", None), Err(BitstreamError::Unknown { .. })));
        assert_eq!(resolve("null", Some(Duration::from_micros(5))).unwrap().delay, Duration::from_micros(5));
    }

    #[test]
    fn specs_parse_and_reject_mistakes() {
        let b = parse_spec("/a/fwd.yaml", "behaviour: forward\ndelay_us: 350\n").unwrap();
        assert_eq!((b.name.as_str(), b.behaviour, b.delay.as_micros()), ("fwd", Behaviour::Forward, 350));
        let b = parse_spec("x.json", r#"{"name": "cs", "behaviour": "checksum"}"#).unwrap();
        assert_eq!((b.name.as_str(), b.behaviour, b.delay.as_micros()), ("cs", Behaviour::Checksum, 600));
        // A frame's delay: the fixed part plus the per-byte part of the frame as it enters.
        let int = resolve("int_transit", None).unwrap();
        assert_eq!(int.delay_for(128), Duration::from_nanos(200_000 + 200 * 128));
        assert_eq!(resolve("forward", None).unwrap().delay_for(1500), Duration::from_micros(300));
        let b = parse_spec("i.yaml", "behaviour: int_transit\ndelay_us: 10\ndelay_ns_per_byte: 7\n").unwrap();
        assert_eq!(b.delay_for(1000), Duration::from_micros(17));
        assert!(parse_spec("x.yaml", "behaviour: null\ndelay_ns_per_byte: -1\n").is_err());
        assert!(parse_spec("x.yaml", "delay_us: 3\n").unwrap_err().to_string().contains("`behaviour` is missing"));
        assert!(parse_spec("x.yaml", "behaviour: fwd\n").unwrap_err().to_string().contains("unknown behaviour"));
        assert!(parse_spec("x.yaml", "behaviour: null\ndelay: 3\n").unwrap_err().to_string().contains("unknown key"));
        assert!(parse_spec("x.yaml", "behaviour: null\ndelay_us: -3\n").is_err());
        assert!(parse_spec("x.yaml", "- a\n").is_err());
    }

    #[test]
    fn spec_files_are_read_and_delays_bounded() {
        let dir = std::env::temp_dir().join(format!("fpga-emu-spec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("slow.yaml");
        std::fs::write(&p, "behaviour: remove_header\ndelay_us: 2000000\n").unwrap();
        assert!(resolve(p.to_str().unwrap(), None).unwrap_err().to_string().contains("1 s limit"));
        std::fs::write(&p, "behaviour: remove_header\ndelay_us: 123\n").unwrap();
        let b = resolve(p.to_str().unwrap(), None).unwrap();
        assert_eq!((b.name.as_str(), b.delay.as_micros()), ("slow", 123));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn stems() {
        assert_eq!(stem("/a/b/rmvhdr.mcs"), "rmvhdr");
        assert_eq!(stem("forward"), "forward");
        assert_eq!(stem("x.tar.gz"), "x");
        assert_eq!(stem(".hidden"), ".hidden");
    }
}

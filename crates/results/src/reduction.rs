//! A run's reduction: its records paired on the headline ports (pipeline against bypass) and
//! reduced to what the analysis reads of them: each matched probe's differential in TSC ticks,
//! its hardware-clock differential, its frame length as sent, the copy counts, the first probe
//! and the bypass copies' span (pacing). The engine computes it from the pairing it checks the
//! run with and keeps it beside the run under `pairs/`, so that a study's summary is ready as
//! soon as its last run lands, without decoding and pairing every run file again.
//!
//! A reduction is derived data: it names the run file's sha256 and is used only while that is
//! the journal's; it carries its own checksum (CRC-32 of everything before it); a reduction that
//! is missing, unreadable or stale is made again from the run file. It is written without fsync
//! (a crash leaves at worst a file whose checksum fails, which is then rebuilt).
//!
//! Layout (little-endian): `LATPAIRS`, the header's length (u32) and the header as JSON
//! ([`ReductionHeader`]), then the columns as LEB128 varints: probe ids as gaps from the previous
//! one, differentials zigzag-encoded, hardware-clock differentials zigzag-encoded plus one (0 =
//! none), frame lengths as zigzag gaps from the previous one; last, the CRC-32 (u32).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::ResultsError;
use crate::pairs::{Counts, Paired};

/// Version of the layout; a reduction of another version is made again.
pub const FORMAT: u32 = 1;
const MAGIC: &[u8; 8] = b"LATPAIRS";
/// Largest reduction read (a paper-scale run's is about 100 KB).
pub const MAX_REDUCTION_BYTES: u64 = 1 << 30;

/// Which run a reduction is of, and what it holds besides its columns.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReductionHeader {
    /// Layout version ([`FORMAT`]).
    pub format: u32,
    /// The run and its file.
    #[serde(flatten)]
    pub run: RunIdentity,
    /// Copy counts of the pairing.
    pub counts: Counts,
    /// Probe of the run's earliest record (the first after the idle gap).
    pub first_id: Option<u64>,
    /// Bypass copies and the TSC span between the first and the last.
    pub bypass_span: (u64, u64),
    /// Probe ids of the first and the last bypass copy in time.
    pub bypass_ids: (u64, u64),
    /// Matched probes: the length of every column present.
    pub matched: u64,
    /// Whether the hardware-clock column is present.
    pub hw: bool,
    /// Whether the frame-length column is present.
    pub lens: bool,
}

/// Which run a reduction is of (all empty for a pairing kept in memory only).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunIdentity {
    /// Program or null group.
    pub program: String,
    /// Session number.
    pub session: u32,
    /// Run number.
    pub run: u32,
    /// The run's factor level.
    pub level: Option<String>,
    /// sha256 of the run file.
    pub run_sha256: String,
    /// Records of the run file.
    pub records: u64,
}

/// A run reduced: the header and the matched probes' columns, in probe id order.
#[derive(Clone, Debug, PartialEq)]
pub struct Reduction {
    /// What it is of.
    pub header: ReductionHeader,
    /// (probe id, D in TSC ticks) of every matched probe.
    pub diffs: Vec<(u64, i64)>,
    /// Hardware-clock differential (ns) of each, where both reflections were captured; empty
    /// without hardware stamps.
    pub hw_diffs: Vec<Option<i64>>,
    /// Frame length of each as sent; empty without frame lengths.
    pub lens: Vec<u16>,
}

impl Reduction {
    /// The reduction of a run's pairing (its TSC stamps are not kept).
    pub fn of(paired: Paired, id: RunIdentity) -> Reduction {
        let header = ReductionHeader {
            format: FORMAT,
            run: id,
            counts: paired.counts,
            first_id: paired.first_id,
            bypass_span: paired.bypass_span,
            bypass_ids: paired.bypass_ids,
            matched: paired.diffs.len() as u64,
            hw: !paired.hw_diffs.is_empty(),
            lens: !paired.lens.is_empty(),
        };
        Reduction { header, diffs: paired.diffs, hw_diffs: paired.hw_diffs, lens: paired.lens }
    }

    /// The rate probes arrived at ([`Paired::bypass_pps`]).
    pub fn bypass_pps(&self, tsc_hz: f64) -> Option<f64> {
        crate::pairs::bypass_pps(self.header.bypass_span, self.header.bypass_ids, tsc_hz)
    }

    /// Whether the rate is inferred from probe ids ([`Paired::pacing_inferred`]).
    pub fn pacing_inferred(&self) -> bool {
        crate::pairs::pacing_inferred(self.header.bypass_span, self.header.bypass_ids)
    }

    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let header = serde_json::to_vec(&self.header).expect("the header is plain data");
        let mut out = Vec::with_capacity(header.len() + 16 + self.diffs.len() * 6);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
        out.extend_from_slice(&header);
        let mut previous = 0u64;
        for &(id, _) in &self.diffs {
            put(&mut out, id.wrapping_sub(previous));
            previous = id;
        }
        for &(_, d) in &self.diffs {
            put(&mut out, zigzag(d));
        }
        for h in &self.hw_diffs {
            put(&mut out, h.map_or(0, |h| zigzag(h).wrapping_add(1)));
        }
        let mut previous = 0i64;
        for &l in &self.lens {
            put(&mut out, zigzag(i64::from(l) - previous));
            previous = i64::from(l);
        }
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Read a reduction's bytes; any damage (checksum, layout, version) is an error saying what.
    pub fn decode(bytes: &[u8]) -> Result<Reduction, String> {
        let body = bytes.len().checked_sub(4).map(|n| &bytes[..n]).ok_or("shorter than its checksum")?;
        let crc = u32::from_le_bytes(bytes[body.len()..].try_into().map_err(|_| "no checksum")?);
        if crc32fast::hash(body) != crc {
            return Err("its checksum does not match its contents".into());
        }
        let rest = body.strip_prefix(MAGIC).ok_or("not a reduction (no LATPAIRS magic)")?;
        let (len, rest) = rest.split_first_chunk::<4>().ok_or("truncated header")?;
        let (header, mut rest) = rest.split_at_checked(u32::from_le_bytes(*len) as usize).ok_or("truncated header")?;
        let header: ReductionHeader = serde_json::from_slice(header).map_err(|e| format!("header: {e}"))?;
        if header.format != FORMAT {
            return Err(format!("layout version {}, this build reads {FORMAT}", header.format));
        }
        let n = usize::try_from(header.matched).map_err(|_| "too many probes")?;
        // Every value takes at least one byte: a count beyond the bytes left is damage.
        let columns = 2 + usize::from(header.hw) + usize::from(header.lens);
        if n.saturating_mul(columns) > rest.len() {
            return Err(format!("{n} probes announced, {} bytes of columns", rest.len()));
        }
        let mut diffs = Vec::with_capacity(n);
        let mut id = 0u64;
        for _ in 0..n {
            id = id.wrapping_add(take(&mut rest)?);
            diffs.push((id, 0));
        }
        for d in &mut diffs {
            d.1 = unzigzag(take(&mut rest)?);
        }
        let hw = if header.hw { n } else { 0 };
        let mut hw_diffs = Vec::with_capacity(hw);
        for _ in 0..hw {
            hw_diffs.push(take(&mut rest)?.checked_sub(1).map(unzigzag));
        }
        let mut lens = Vec::with_capacity(if header.lens { n } else { 0 });
        let mut previous = 0i64;
        for _ in 0..if header.lens { n } else { 0 } {
            previous += unzigzag(take(&mut rest)?);
            lens.push(u16::try_from(previous).map_err(|_| "a frame length out of range")?);
        }
        if !rest.is_empty() {
            return Err(format!("{} bytes after the columns", rest.len()));
        }
        Ok(Reduction { header, diffs, hw_diffs, lens })
    }

    /// Write it to `path`, replacing what is there (see the module's notes on durability).
    pub fn write(&self, path: &Path) -> Result<(), ResultsError> {
        Ok(latency_files::write_derived(path, &self.encode())?)
    }

    /// Read the reduction at `path` if it is one of the run `id` names (same run, same run-file
    /// sha256 and records); `None` when it is absent, damaged or of another run or file.
    pub fn read_of(path: &Path, id: &RunIdentity) -> Option<Reduction> {
        let bytes = latency_files::read_capped(path, MAX_REDUCTION_BYTES, "run reduction").ok()?;
        Reduction::decode(&bytes).ok().filter(|r| r.header.run == *id)
    }
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    (v >> 1) as i64 ^ -((v & 1) as i64)
}

fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[inline]
fn take(rest: &mut &[u8]) -> Result<u64, String> {
    // Most values (id gaps, differentials of a few hundred ticks) take one or two bytes.
    let bytes: &[u8] = rest;
    match *bytes {
        [b0, ref tail @ ..] if b0 < 0x80 => {
            *rest = tail;
            return Ok(u64::from(b0));
        }
        [b0, b1, ref tail @ ..] if b1 < 0x80 => {
            *rest = tail;
            return Ok(u64::from(b0 & 0x7f) | u64::from(b1) << 7);
        }
        _ => {}
    }
    let mut v = 0u64;
    for (k, &b) in rest.iter().enumerate().take(10) {
        v |= u64::from(b & 0x7f) << (7 * k);
        if b < 0x80 {
            *rest = &rest[k + 1..];
            return Ok(v);
        }
    }
    Err("a truncated or overlong number".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> RunIdentity {
        RunIdentity {
            program: "forward".into(),
            session: 2,
            run: 3,
            level: Some("rate=1000".into()),
            run_sha256: "ab".repeat(32),
            records: 9,
        }
    }

    fn example() -> Reduction {
        Reduction {
            header: ReductionHeader {
                format: FORMAT,
                run: identity(),
                counts: Counts { matched: 4, pipeline_only: 1, bypass_only: 0, duplicates: 0, unknown_port: 0 },
                first_id: Some(1),
                bypass_span: (4, 3000),
                bypass_ids: (1, 1 << 40),
                matched: 4,
                hw: true,
                lens: true,
            },
            diffs: vec![(1, 300), (2, -40), (7, i64::MAX), (1 << 40, i64::MIN)],
            hw_diffs: vec![Some(0), None, Some(-1), Some(i64::MAX - 1)],
            lens: vec![64, 1518, 60, u16::MAX],
        }
    }

    #[test]
    fn a_reduction_reads_back_as_written_down_to_the_extremes() {
        let r = example();
        let bytes = r.encode();
        assert_eq!(Reduction::decode(&bytes), Ok(r.clone()));
        let mut without = r;
        (without.header.hw, without.header.lens, without.hw_diffs, without.lens) = (false, false, vec![], vec![]);
        assert_eq!(Reduction::decode(&without.encode()), Ok(without));
    }

    /// LEB128 as written out by hand: 7 bits a byte, low bits first, the high bit on every byte
    /// but the last.
    #[test]
    fn numbers_read_back_from_their_bytes_at_every_length() {
        let cases: [(&[u8], u64); 7] = [
            (&[0x00], 0),
            (&[0x7f], 127),
            (&[0x80, 0x01], 128),
            (&[0xff, 0x7f], 16_383),
            (&[0x80, 0x80, 0x01], 16_384),
            (&[0xe5, 0x8e, 0x26], 624_485),
            (&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01], u64::MAX),
        ];
        for (bytes, value) in cases {
            let mut written = Vec::new();
            put(&mut written, value);
            assert_eq!(written, bytes, "{value}");
            let with_more = [bytes, &[0x2a]].concat();
            let mut rest = with_more.as_slice();
            assert_eq!(take(&mut rest), Ok(value), "{bytes:x?}");
            assert_eq!(rest, [0x2a], "{bytes:x?}: the bytes after it are left");
        }
        for cut in [&[0x80][..], &[0x80, 0x80], &[0xff; 11]] {
            assert!(take(&mut &cut[..]).is_err(), "{cut:x?}");
        }
    }

    #[test]
    fn any_damage_is_refused_never_misread() {
        let bytes = example().encode();
        for at in [0, 9, 20, bytes.len() - 7, bytes.len() - 1] {
            let mut b = bytes.clone();
            b[at] ^= 0x10;
            assert_eq!(Reduction::decode(&b), Err("its checksum does not match its contents".to_string()), "byte {at}");
        }
        assert!(Reduction::decode(&bytes[..bytes.len() - 1]).is_err());
        assert!(Reduction::decode(&[]).is_err());
        // A well-checksummed file of another layout version.
        let mut old = example();
        old.header.format = FORMAT + 1;
        assert_eq!(
            Reduction::decode(&old.encode()).unwrap_err(),
            format!("layout version {}, this build reads 1", FORMAT + 1)
        );
    }

    #[test]
    fn only_the_reduction_of_the_same_run_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pairs/run=3.pairs");
        let r = example();
        r.write(&path).unwrap();
        let id = identity();
        assert_eq!(Reduction::read_of(&path, &id), Some(r));
        let other_file = RunIdentity { run_sha256: "cd".repeat(32), ..id.clone() };
        assert_eq!(Reduction::read_of(&path, &other_file), None);
        assert_eq!(Reduction::read_of(&path, &RunIdentity { run: 4, ..id.clone() }), None);
        assert_eq!(Reduction::read_of(&dir.path().join("none.pairs"), &id), None);
    }
}

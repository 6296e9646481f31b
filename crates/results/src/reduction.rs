//! A run's reduction: its records paired on the headline ports (pipeline against bypass) and
//! reduced to what the analysis reads of them: each matched probe's differential in TSC ticks,
//! its hardware-clock differential, its frame length as sent, the copy counts, the first probe
//! and the bypass copies' span (pacing). The engine computes it from the pairing it checks the
//! run with and keeps it beside the run under `pairs/`, so that a study's summary is ready as
//! soon as its last run lands, without decoding and pairing every run file again.
//!
//! A reader takes the columns through [`Columns`], a block of probes at a time, in whatever form
//! it keeps them ([`Reduction`] as written; the analysis its 32-bit columns of ticks).
//!
//! A reduction is derived data: it names the run file's sha256 and is used only while that is
//! the journal's; it carries its own checksum (CRC-32 of everything before it); a reduction that
//! is missing, unreadable or stale is made again from the run file. It is written without fsync
//! (a crash leaves at worst a file whose checksum fails, which is then rebuilt).
//!
//! Layout (little-endian): `LATPAIRS`, the header's length (u32) and the header as JSON
//! ([`ReductionHeader`]), then the columns, each a list of unsigned numbers: probe ids as gaps
//! from the previous one, differentials zigzag-encoded, hardware-clock differentials
//! zigzag-encoded plus one (0 = none), frame lengths as zigzag gaps from the previous one; last,
//! the CRC-32 (u32). A column is cut in blocks of 128 numbers (the last may be shorter),
//! each written as its least number (LEB128), the bytes of each number's excess over it (0, 1,
//! 2, 4 or 8: one byte), and those excesses at that width: a block of equal numbers (the gaps of
//! consecutive ids) takes two bytes, one of nearby differentials a byte or two a number, and a
//! block is read back by a loop the compiler makes vector code of.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::ResultsError;
use crate::pairs::{Counts, Paired};

/// Version of the layout; a reduction of another version is made again.
pub const FORMAT: u32 = 2;
/// Numbers in a block of a column.
const BLOCK: usize = 128;
const MAGIC: &[u8; 8] = b"LATPAIRS";
/// Largest reduction read (a paper-scale run's is about 60 KB).
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

impl ReductionHeader {
    /// The rate probes arrived at ([`Paired::bypass_pps`]).
    pub fn bypass_pps(&self, tsc_hz: f64) -> Option<f64> {
        crate::pairs::bypass_pps(self.bypass_span, self.bypass_ids, tsc_hz)
    }

    /// Whether the rate is inferred from probe ids ([`Paired::pacing_inferred`]).
    pub fn pacing_inferred(&self) -> bool {
        crate::pairs::pacing_inferred(self.bypass_span, self.bypass_ids)
    }
}

/// What a reduction's columns are handed to as they are read ([`Reduction::decode_into`]) or
/// walked ([`Reduction::columns_into`]): the header first, then column by column the matched
/// probes in blocks (in probe id order; `from` is the place of a block's first probe, 0 up): their
/// ids, their D in TSC ticks, their hardware-clock differentials (ns; only when the header says
/// that column is there) and their frame lengths (likewise). So a reader keeps each column in the
/// form it wants, with no copy between.
pub trait Columns {
    /// The header, before any column.
    fn header(&mut self, header: &ReductionHeader);
    /// The ids of probes `from..from + ids.len()` (ascending).
    fn ids(&mut self, from: usize, ids: &[u64]);
    /// Their differentials D, TSC ticks.
    fn diffs(&mut self, from: usize, diffs: &[i64]);
    /// Their hardware-clock differentials, ns, where both reflections were captured.
    fn hw(&mut self, from: usize, hw: &[Option<i64>]);
    /// Their frame lengths as sent.
    fn lens(&mut self, from: usize, lens: &[u16]);
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

    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let header = serde_json::to_vec(&self.header).expect("the header is plain data");
        let mut out = Vec::with_capacity(header.len() + 16 + self.diffs.len() * 6);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
        out.extend_from_slice(&header);
        let mut previous = 0u64;
        put_column(&mut out, self.diffs.iter().map(|&(id, _)| id.wrapping_sub(std::mem::replace(&mut previous, id))));
        put_column(&mut out, self.diffs.iter().map(|&(_, d)| zigzag(d)));
        put_column(&mut out, self.hw_diffs.iter().map(|h| h.map_or(0, |h| zigzag(h).wrapping_add(1))));
        let mut previous = 0i64;
        put_column(
            &mut out,
            self.lens.iter().map(|&l| zigzag(i64::from(l) - std::mem::replace(&mut previous, i64::from(l)))),
        );
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Read a reduction's bytes; any damage (checksum, layout, version) is an error saying what.
    pub fn decode(bytes: &[u8]) -> Result<Reduction, String> {
        let mut columns = Owned::default();
        let header = Reduction::decode_into(bytes, &mut columns)?;
        Ok(columns.with(header))
    }

    /// Read a reduction's bytes into `columns` ([`Columns`]) and return its header; any damage
    /// (checksum, layout, version) is an error saying what, after which `columns` holds part of
    /// the columns at most and is to be dropped.
    pub fn decode_into(bytes: &[u8], columns: &mut impl Columns) -> Result<ReductionHeader, String> {
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
        // A run pairs at most its records; every block takes at least two bytes.
        if header.matched > header.run.records {
            return Err(format!("{n} probes announced for a run of {} records", header.run.records));
        }
        let count = 2 + usize::from(header.hw) + usize::from(header.lens);
        if n.div_ceil(BLOCK).saturating_mul(2 * count) > rest.len() {
            return Err(format!("{n} probes announced, {} bytes of columns", rest.len()));
        }
        columns.header(&header);
        let mut id = 0u64;
        take_column(&mut rest, n, |from, gaps| {
            let mut ids = [0u64; BLOCK];
            for (i, &gap) in ids.iter_mut().zip(gaps) {
                id = id.wrapping_add(gap);
                *i = id;
            }
            columns.ids(from, &ids[..gaps.len()]);
        })?;
        take_column(&mut rest, n, |from, z| columns.diffs(from, &block(z, unzigzag)))?;
        if header.hw {
            take_column(&mut rest, n, |from, h| columns.hw(from, &block(h, |h| h.checked_sub(1).map(unzigzag))))?;
        }
        if header.lens {
            let mut previous = 0i64;
            let mut fits = true;
            take_column(&mut rest, n, |from, z| {
                let mut lens = [0u16; BLOCK];
                for (l, &z) in lens.iter_mut().zip(z) {
                    previous = previous.wrapping_add(unzigzag(z));
                    fits &= u16::try_from(previous).is_ok();
                    *l = previous as u16;
                }
                columns.lens(from, &lens[..z.len()]);
            })?;
            if !fits {
                return Err("a frame length out of range".into());
            }
        }
        if !rest.is_empty() {
            return Err(format!("{} bytes after the columns", rest.len()));
        }
        Ok(header)
    }

    /// Hand its columns to `columns` ([`Columns`]), in blocks as [`Reduction::decode_into`] does.
    pub fn columns_into(&self, columns: &mut impl Columns) {
        columns.header(&self.header);
        let blocks = || self.diffs.chunks(BLOCK).enumerate().map(|(b, p)| (b * BLOCK, p));
        blocks().for_each(|(from, p)| columns.ids(from, &block(p, |p| p.0)));
        blocks().for_each(|(from, p)| columns.diffs(from, &block(p, |p| p.1)));
        self.hw_diffs.chunks(BLOCK).enumerate().for_each(|(b, hw)| columns.hw(b * BLOCK, hw));
        self.lens.chunks(BLOCK).enumerate().for_each(|(b, lens)| columns.lens(b * BLOCK, lens));
    }

    /// Write it to `path`, replacing what is there (see the module's notes on durability).
    pub fn write(&self, path: &Path) -> Result<(), ResultsError> {
        Ok(latency_files::write_derived(path, &self.encode())?)
    }

    /// Read the reduction at `path` if it is one of the run `id` names (same run, same run-file
    /// sha256 and records); `None` when it is absent, damaged or of another run or file.
    pub fn read_of(path: &Path, id: &RunIdentity) -> Option<Reduction> {
        let mut columns = Owned::default();
        let header = Reduction::read_into(path, id, &mut columns)?;
        Some(columns.with(header))
    }

    /// [`Reduction::read_of`] into `columns` ([`Columns`]): its header when it is one of the run
    /// `id` names; `None` (`columns` then to be dropped) when it is absent, damaged or of another
    /// run or file.
    pub fn read_into(path: &Path, id: &RunIdentity, columns: &mut impl Columns) -> Option<ReductionHeader> {
        let bytes = latency_files::read_capped(path, MAX_REDUCTION_BYTES, "run reduction").ok()?;
        Reduction::decode_into(&bytes, columns).ok().filter(|h| h.run == *id)
    }
}

/// The columns as a [`Reduction`] holds them, as they are read.
#[derive(Default)]
struct Owned(Vec<(u64, i64)>, Vec<Option<i64>>, Vec<u16>);

impl Owned {
    fn with(self, header: ReductionHeader) -> Reduction {
        let Owned(diffs, hw_diffs, lens) = self;
        Reduction { header, diffs, hw_diffs, lens }
    }
}

impl Columns for Owned {
    fn header(&mut self, h: &ReductionHeader) {
        let n = h.matched as usize;
        let (hw, lens) = (if h.hw { n } else { 0 }, if h.lens { n } else { 0 });
        *self = Owned(Vec::with_capacity(n), Vec::with_capacity(hw), Vec::with_capacity(lens));
    }

    fn ids(&mut self, _: usize, ids: &[u64]) {
        self.0.extend(ids.iter().map(|&id| (id, 0)));
    }

    fn diffs(&mut self, from: usize, diffs: &[i64]) {
        self.0[from..from + diffs.len()].iter_mut().zip(diffs).for_each(|(p, &d)| p.1 = d);
    }

    fn hw(&mut self, _: usize, hw: &[Option<i64>]) {
        self.1.extend_from_slice(hw);
    }

    fn lens(&mut self, _: usize, lens: &[u16]) {
        self.2.extend_from_slice(lens);
    }
}

/// `values` (at most a block) each made `f` of, as a slice of a block's array.
#[inline(always)]
fn block<T: Copy, U: Copy + Default>(values: &[T], f: impl Fn(T) -> U) -> impl std::ops::Deref<Target = [U]> {
    struct Block<U>([U; BLOCK], usize);
    impl<U> std::ops::Deref for Block<U> {
        type Target = [U];
        fn deref(&self) -> &[U] {
            &self.0[..self.1]
        }
    }
    let mut out = [U::default(); BLOCK];
    out.iter_mut().zip(values).for_each(|(o, &v)| *o = f(v));
    Block(out, values.len())
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

/// Write a column: its numbers in blocks of [`BLOCK`] (see the module's notes).
fn put_column(out: &mut Vec<u8>, numbers: impl Iterator<Item = u64>) {
    let mut block = Vec::with_capacity(BLOCK);
    let mut numbers = numbers.peekable();
    while numbers.peek().is_some() {
        block.clear();
        block.extend(numbers.by_ref().take(BLOCK));
        let least = block.iter().copied().min().unwrap_or(0);
        let width = match block.iter().map(|v| v - least).max().unwrap_or(0) {
            0 => 0,
            1..=0xff => 1,
            0x100..=0xffff => 2,
            0x1_0000..=0xffff_ffff => 4,
            _ => 8,
        };
        put(out, least);
        out.push(width as u8);
        for v in &block {
            out.extend_from_slice(&(v - least).to_le_bytes()[..width]);
        }
    }
}

/// Read a column of `n` numbers, handing each block of them to `set` with its first's place.
fn take_column(rest: &mut &[u8], n: usize, mut set: impl FnMut(usize, &[u64])) -> Result<(), String> {
    let mut numbers = [0u64; BLOCK];
    for start in (0..n).step_by(BLOCK) {
        let len = BLOCK.min(n - start);
        let least = take(rest)?;
        let (&width, tail) = rest.split_first().ok_or("a truncated column")?;
        let (data, tail) = tail.split_at_checked(len * usize::from(width)).ok_or("a truncated column")?;
        let out = &mut numbers[..len];
        fn put(out: &mut [u64], least: u64, excess: impl Iterator<Item = u64>) {
            out.iter_mut().zip(excess).for_each(|(o, e)| *o = least.wrapping_add(e));
        }
        match width {
            0 => out.fill(least),
            1 => put(out, least, data.iter().map(|&b| u64::from(b))),
            2 => put(out, least, data.as_chunks().0.iter().map(|&b| u64::from(u16::from_le_bytes(b)))),
            4 => put(out, least, data.as_chunks().0.iter().map(|&b| u64::from(u32::from_le_bytes(b)))),
            8 => put(out, least, data.as_chunks().0.iter().map(|&b| u64::from_le_bytes(b))),
            w => return Err(format!("a column block {w} bytes wide")),
        }
        set(start, &numbers[..len]);
        *rest = tail;
    }
    Ok(())
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

    /// A column written out by hand: 128 equal gaps, then a block of two differentials.
    #[test]
    fn a_column_is_its_blocks_least_number_width_and_excesses() {
        let numbers: Vec<u64> = [1; 128].into_iter().chain([300, 301]).collect();
        let mut written = Vec::new();
        put_column(&mut written, numbers.iter().copied());
        // 1, width 0; 300 (LEB128 0xac 0x02), width 1, excesses 0 and 1.
        assert_eq!(written, [0x01, 0, 0xac, 0x02, 1, 0, 1]);
        let mut read = vec![0; numbers.len()];
        let mut rest = written.as_slice();
        take_column(&mut rest, numbers.len(), |k, v| read[k..k + v.len()].copy_from_slice(v)).unwrap();
        assert_eq!((read, rest), (numbers, &[][..]));
        // Every width, numbers far apart included.
        for spread in [0u64, 200, 60_000, 1 << 31, u64::MAX - 7] {
            let numbers: Vec<u64> = (0..300u64).map(|k| 7 + (k * 7_919) % (spread.max(1))).collect();
            let mut written = Vec::new();
            put_column(&mut written, numbers.iter().copied());
            let mut read = vec![0; numbers.len()];
            take_column(&mut &written[..], numbers.len(), |k, v| read[k..k + v.len()].copy_from_slice(v)).unwrap();
            assert_eq!(read, numbers, "spread {spread}");
        }
        for bad in [&[0x01, 3, 0][..], &[0x01, 1, 0], &[0x80]] {
            assert!(take_column(&mut &bad[..], 2, |_, _| ()).is_err(), "{bad:x?}");
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
            format!("layout version {}, this build reads {FORMAT}", FORMAT + 1)
        );
        // Well-checksummed files announcing more probes than the run has records, or than their
        // columns can hold (two bytes a block at least).
        let mut more = example();
        more.header.matched = 10;
        assert_eq!(Reduction::decode(&more.encode()).unwrap_err(), "10 probes announced for a run of 9 records");
        more.header.run.records = 100_000;
        more.header.matched = 100_000;
        let err = Reduction::decode(&more.encode()).unwrap_err();
        assert!(err.starts_with("100000 probes announced, ") && err.ends_with(" bytes of columns"), "{err}");
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

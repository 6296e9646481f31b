//! LatencyLab run CSVs: parsing, the import rules applied to their rows (see the parent module),
//! and the records they become.

use std::collections::BTreeMap;
use std::path::Path;

use arrow_array::RecordBatch;
use latency_proto::{Port, RecordBuilder};

use super::{ImportError, Quirks};

/// The columns of a LatencyLab run CSV.
pub const HEADER: [&str; 7] =
    ["pkt_id", "tx_ts_ns", "rx1_ts_ns", "rx2_ts_ns", "latency_rx1_ns", "latency_rx2_ns", "diff_latency_ns"];

/// Why a line of a LatencyLab CSV (a run's or a hardware-clock file's) is refused; the import
/// names the file and the line ([`ImportError::Csv`]).
#[derive(Debug, thiserror::Error)]
pub enum CsvFault {
    /// Bytes that are not UTF-8.
    #[error("not UTF-8 text")]
    NotUtf8,
    /// A Git LFS pointer checked out in place of the data.
    #[error("a Git LFS pointer, not the data (run `git lfs pull` in the LatencyLab checkout)")]
    LfsPointer,
    /// A first line other than the expected header.
    #[error("expected the header `{}`, found `{found}`", .expected.join(","))]
    Header {
        /// The header's columns.
        expected: &'static [&'static str],
        /// The first line as written.
        found: String,
    },
    /// A line with another number of fields than the header.
    #[error("expected {expected} comma-separated fields, found {found}")]
    Fields {
        /// The header's.
        expected: usize,
        /// The line's.
        found: usize,
    },
    /// A field that must be a whole number ≥ 0.
    #[error("{column}: `{value}` is not a whole number ≥ 0")]
    NotUnsigned {
        /// Its column.
        column: &'static str,
        /// The field, trimmed.
        value: String,
    },
    /// A field that must be a whole number.
    #[error("{column}: `{value}` is not a whole number")]
    NotWhole {
        /// Its column.
        column: &'static str,
        /// The field, trimmed.
        value: String,
    },
    /// A hardware-clock file's run number beyond any run's.
    #[error("run: {0} is out of range")]
    RunOutOfRange(i64),
    /// The csv reader failed (not expected of text already checked as UTF-8, read unquoted).
    #[error(transparent)]
    Read(::csv::Error),
}

/// The [`ImportError`] of the csv reader's error `e` while reading `path`.
pub(super) fn read_error(path: &Path) -> impl Fn(::csv::Error) -> ImportError + '_ {
    move |e| {
        let line = e.position().map_or(1, |p| usize::try_from(p.line()).unwrap_or(usize::MAX));
        ImportError::Csv { path: path.to_path_buf(), line, fault: CsvFault::Read(e) }
    }
}

/// The lines of a LatencyLab CSV as the import reads them, split into fields by the csv crate.
///
/// LatencyLab writes plain numbers: a `"` is data, not a quote (a quoted number is refused by
/// the number's check, as it always was), and a line is one record. Lines end at `\n` (a `\r`
/// before it is trimmed with the field's white space), and a byte-order mark before the first
/// line is not part of it. The csv reader skips an empty line, which the import refuses as a
/// line of one empty field: so the table ends at its first empty line, returned as such.
pub(super) struct Lines<'a> {
    text: &'a str,
    reader: ::csv::Reader<&'a [u8]>,
    record: ::csv::StringRecord,
    /// The number of the first empty line (0 once returned: the end).
    blank: Option<u64>,
}

impl<'a> Lines<'a> {
    /// The lines of `text`.
    pub(super) fn new(text: &'a str) -> Self {
        let text = text.trim_start_matches('\u{feff}');
        let blank = if text.starts_with('\n') {
            Some(1)
        } else {
            text.find("\n\n").map(|at| text[..at].matches('\n').count() as u64 + 2)
        };
        let reader = ::csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .quoting(false)
            .terminator(::csv::Terminator::Any(b'\n'))
            .from_reader(text.as_bytes());
        Lines { text, reader, record: ::csv::StringRecord::new(), blank }
    }

    /// The first line as written (without its line break; empty when there is none): read
    /// before [`Lines::next`].
    pub(super) fn header(&mut self) -> Result<String, ::csv::Error> {
        let Some((_, record)) = self.next()? else { return Ok(String::new()) };
        let mut line = record.iter().collect::<Vec<&str>>().join(",");
        // `\r\n` ends a line, a last `\r` without `\n` is data.
        if self.text.contains('\n') && line.ends_with('\r') {
            line.pop();
        }
        Ok(line)
    }

    /// The next line: its number (from 1) and its fields, untrimmed; `None` at the end.
    pub(super) fn next(&mut self) -> Result<Option<(usize, &::csv::StringRecord)>, ::csv::Error> {
        if self.blank == Some(0) {
            return Ok(None);
        }
        let more = self.reader.read_record(&mut self.record)?;
        // Where the record starts, before any empty lines the reader skipped.
        let line = self.record.position().map_or(1, ::csv::Position::line);
        if let Some(blank) = self.blank.filter(|&b| !more || line >= b) {
            self.blank = Some(0);
            self.record = ::csv::StringRecord::from(vec![""]);
            return Ok(Some((usize::try_from(blank).unwrap_or(usize::MAX), &self.record)));
        }
        Ok(more.then_some((usize::try_from(line).unwrap_or(usize::MAX), &self.record)))
    }
}

/// One CSV data row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// `pkt_id`.
    pub id: u64,
    /// `rx1_ts_ns`: pipeline arrival.
    pub rx1: u64,
    /// `rx2_ts_ns`: bypass arrival.
    pub rx2: u64,
    /// `diff_latency_ns`.
    pub diff: i64,
    /// Line in the file, from 1 (the header is line 1).
    pub line: usize,
}

/// Parse a LatencyLab run CSV (`path` only names it in errors).
pub fn parse_csv(path: &Path, bytes: &[u8]) -> Result<Vec<Row>, ImportError> {
    let err = |line: usize, fault: CsvFault| ImportError::Csv { path: path.to_path_buf(), line, fault };
    // The whole file first, so that a bad byte is reported at its line before any other fault.
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count() + 1;
        err(line, CsvFault::NotUtf8)
    })?;
    let read = read_error(path);
    let mut lines = Lines::new(text);
    let header = lines.header().map_err(&read)?;
    if header.starts_with("version https://git-lfs") {
        return Err(err(1, CsvFault::LfsPointer));
    }
    if !header.split(',').map(str::trim).eq(HEADER) {
        return Err(err(1, CsvFault::Header { expected: &HEADER, found: header }));
    }
    let mut rows = Vec::new();
    while let Some((n, record)) = lines.next().map_err(&read)? {
        let fields: Vec<&str> = record.iter().map(str::trim).collect();
        if fields.len() != HEADER.len() {
            return Err(err(n, CsvFault::Fields { expected: HEADER.len(), found: fields.len() }));
        }
        let unsigned = |k: usize| {
            fields[k]
                .parse::<u64>()
                .map_err(|_| err(n, CsvFault::NotUnsigned { column: HEADER[k], value: fields[k].into() }))
        };
        let signed = |k: usize| {
            fields[k]
                .parse::<i64>()
                .map_err(|_| err(n, CsvFault::NotWhole { column: HEADER[k], value: fields[k].into() }))
        };
        let row = Row { id: unsigned(0)?, rx1: unsigned(2)?, rx2: unsigned(3)?, diff: signed(6)?, line: n };
        // The unused columns are checked too: a shifted or garbled line must not pass.
        for k in [1, 4, 5] {
            signed(k)?;
        }
        rows.push(row);
    }
    Ok(rows)
}

/// Indices, ascending, of a longest non-decreasing subsequence of `stamps`. Where several are
/// equally long, the one with the larger stamps is taken.
pub fn monotonic_chain(stamps: &[u64]) -> Vec<usize> {
    // Scanned from the end: heads[k] starts the chain of length k + 1 with the largest first stamp
    // seen so far, so the first stamps of heads do not increase with k.
    let mut heads: Vec<usize> = Vec::new();
    let mut next = vec![usize::MAX; stamps.len()];
    for (i, &v) in stamps.iter().enumerate().rev() {
        let k = heads.partition_point(|&h| stamps[h] >= v);
        if k > 0 {
            next[i] = heads[k - 1];
        }
        if k == heads.len() {
            heads.push(i);
        } else {
            heads[k] = i;
        }
    }
    let mut chain = Vec::with_capacity(heads.len());
    let mut i = heads.last().copied().unwrap_or(usize::MAX);
    while i != usize::MAX {
        chain.push(i);
        i = next[i];
    }
    chain
}

/// Rows kept from one file and what happened to the others.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Filtered {
    /// Kept rows, in id order.
    pub rows: Vec<Row>,
    /// Counts.
    pub quirks: Quirks,
}

/// Apply the import rules (see the module documentation) to one file's rows.
pub fn filter(rows: Vec<Row>, probes: u64) -> Filtered {
    let mut q = Quirks { rows: rows.len() as u64, ..Quirks::default() };
    for r in &rows {
        q.negative_diffs += u64::from(r.diff < 0);
        let mismatch = (i128::from(r.rx1) - i128::from(r.rx2) - i128::from(r.diff)).unsigned_abs();
        if mismatch > 0 {
            q.diff_mismatch += 1;
            q.diff_mismatch_max_ns = q.diff_mismatch_max_ns.max(u64::try_from(mismatch).unwrap_or(u64::MAX));
        }
    }
    let (mut valid, invalid): (Vec<Row>, Vec<Row>) = rows.into_iter().partition(|r| (1..=probes).contains(&r.id));
    q.invalid_ids = invalid.len() as u64;
    // Duplicates sort by stamp so that they never break the order among themselves.
    valid.sort_by_key(|r| (r.id, r.rx2, r.line));
    let stamps: Vec<u64> = valid.iter().map(|r| r.rx2).collect();
    let mut kept: Vec<Row> = monotonic_chain(&stamps).into_iter().map(|i| valid[i]).collect();
    q.misparsed = (valid.len() - kept.len()) as u64;
    kept.sort_by_key(|r| (r.id, r.line));
    let before = kept.len();
    kept.dedup_by_key(|r| r.id);
    q.duplicates = (before - kept.len()) as u64;
    q.kept = kept.len() as u64;
    q.negative_diffs_kept = kept.iter().filter(|r| r.rx1 < r.rx2).count() as u64;
    q.first_after_gap = kept.iter().filter(|r| r.rx1 == 0 || r.rx2 == 0).count() as u64;
    Filtered { rows: kept, quirks: q }
}

/// The records of kept rows: P and B per row, in stamp order, `seq` counting arrivals per port.
/// With hardware-clock differentials `hw` (R by probe id), a probe that has one gets `hw_ns` = R
/// on its pipeline record and 0 on its bypass record, so that `hw_P − hw_B = R`.
pub fn records(rows: &[Row], hw: Option<&BTreeMap<u64, i64>>) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let mut recs: Vec<(u64, u8, u64)> =
        rows.iter().flat_map(|r| [(r.rx1, Port::Pipeline as u8, r.id), (r.rx2, Port::Bypass as u8, r.id)]).collect();
    recs.sort_unstable();
    let mut seq = [0u64; 2];
    let mut b = RecordBuilder::with_capacity(recs.len());
    for (tsc, port, id) in recs {
        let (p, s) = if port == Port::Pipeline as u8 { (Port::Pipeline, 0) } else { (Port::Bypass, 1) };
        let r = hw.and_then(|h| h.get(&id)).copied();
        b.push(id, p, tsc, seq[s], 0, r.map(|r| if p == Port::Pipeline { r } else { 0 }));
        seq[s] += 1;
    }
    b.finish()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The hand parser the csv crate replaced, kept to show the diagnostics did not change.
    fn hand_parsed(path: &Path, bytes: &[u8]) -> Result<Vec<Row>, String> {
        let err = |line: usize, message: String| format!("{}:{line}: {message}", path.display());
        let text = std::str::from_utf8(bytes).map_err(|e| {
            let line = bytes[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count() + 1;
            err(line, "not UTF-8 text".into())
        })?;
        let mut lines = text.lines();
        let header = lines.next().unwrap_or("").trim_start_matches('\u{feff}');
        if header.starts_with("version https://git-lfs") {
            return Err(err(
                1,
                "a Git LFS pointer, not the data (run `git lfs pull` in the LatencyLab checkout)".into(),
            ));
        }
        if !header.split(',').map(str::trim).eq(HEADER) {
            return Err(err(1, format!("expected the header `{}`, found `{header}`", HEADER.join(","))));
        }
        let mut rows = Vec::new();
        for (i, line) in lines.enumerate() {
            let n = i + 2;
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            if fields.len() != HEADER.len() {
                return Err(err(
                    n,
                    format!("expected {} comma-separated fields, found {}", HEADER.len(), fields.len()),
                ));
            }
            let unsigned = |k: usize| {
                fields[k]
                    .parse::<u64>()
                    .map_err(|_| err(n, format!("{}: `{}` is not a whole number ≥ 0", HEADER[k], fields[k])))
            };
            let signed = |k: usize| {
                fields[k]
                    .parse::<i64>()
                    .map_err(|_| err(n, format!("{}: `{}` is not a whole number", HEADER[k], fields[k])))
            };
            let row = Row { id: unsigned(0)?, rx1: unsigned(2)?, rx2: unsigned(3)?, diff: signed(6)?, line: n };
            for k in [1, 4, 5] {
                signed(k)?;
            }
            rows.push(row);
        }
        Ok(rows)
    }

    /// Text made of the pieces that matter to splitting CSV lines (line breaks, white space,
    /// quotes, byte-order marks, empty lines), valid rows and headers, and bad bytes.
    pub(in crate::import) fn tricky_csv(header: &'static str, row: &'static str) -> impl Strategy<Value = Vec<u8>> {
        let piece = prop::sample::select(vec![
            header,
            row,
            "\n",
            "\n",
            "\n",
            "\r\n",
            "\r",
            ",",
            " ",
            "\t",
            "\u{feff}",
            "\u{a0}",
            "\u{3000}",
            "\"",
            "\"1\"",
            "0",
            "-7",
            "x",
            "18446744073709551616",
            "version https://git-lfs.github.com/spec/v1",
            "\u{ff}",
        ]);
        (prop::collection::vec(piece, 0..24), any::<bool>(), 0usize..64).prop_map(|(pieces, bad_byte, at)| {
            let mut bytes = pieces.concat().into_bytes();
            if bad_byte {
                bytes.insert(at.min(bytes.len()), 0xff);
            }
            bytes
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        #[test]
        fn the_csv_crate_reads_what_the_hand_parser_read(
            lead in prop::sample::select(vec!["", "pkt_id,tx_ts_ns,rx1_ts_ns,rx2_ts_ns,latency_rx1_ns,latency_rx2_ns,diff_latency_ns\n"]),
            body in tricky_csv(" pkt_id ,tx_ts_ns,rx1_ts_ns,rx2_ts_ns,latency_rx1_ns,latency_rx2_ns,diff_latency_ns\r", "3,0,150, 2 ,0,-1,148\t"),
        ) {
            let bytes = [lead.as_bytes(), &body].concat();
            let p = Path::new("d/f_run01.csv");
            prop_assert_eq!(parse_csv(p, &bytes).map_err(|e| e.to_string()), hand_parsed(p, &bytes));
        }
    }

    #[test]
    fn empty_lines_line_breaks_and_byte_order_marks_as_the_hand_parser_read_them() {
        let h = HEADER.join(",");
        let p = Path::new("f.csv");
        for text in [
            String::new(),
            "\n".into(),
            "\r".into(),
            "\u{feff}\u{feff}\n".into(),
            format!("\n{h}\n"),
            format!("\u{feff}{h}\r\n1,0,2,1,0,0,1\r\n"),
            format!("{h}\r"),
            format!("{h}\r\r\n"),
            format!("{h}\n1,0,2,1,0,0,1\n\n"),
            format!("{h}\n1,0,2,1,0,0,1\n\n2,0,2,1,0,0,1\n"),
            format!("{h}\n1,0,2,1,0,0,1\n\r\n2,0,2,1,0,0,1"),
            format!("{h}\n1,0,2,1,0,0,1\n\"2\",0,2,1,0,0,1\n"),
            format!("{h}\n1,0,2\r,1,0,0,1\n"),
            format!("{h}\n1,0,2,1,0,0,1,\n"),
        ] {
            assert_eq!(
                parse_csv(p, text.as_bytes()).map_err(|e| e.to_string()),
                hand_parsed(p, text.as_bytes()),
                "{text:?}"
            );
        }
    }

    const MS: u64 = 2_000_000;

    /// A hand-made run of a 40-probe trace at 2 ms pacing: probe i has bypass stamp (i − 1) × 2 ms
    /// and arrives 150 ns later on the pipeline port (row 1: the zero stamp of the first probe).
    fn csv(rows: &[(u64, u64, i64)]) -> String {
        let mut s = HEADER.join(",") + "\n";
        for &(id, rx2, diff) in rows {
            s += &format!("{id},0,{},{rx2},0,0,{diff}\n", rx2.saturating_add_signed(diff));
        }
        s
    }

    fn ids(f: &Filtered) -> Vec<u64> {
        f.rows.iter().map(|r| r.id).collect()
    }

    #[test]
    fn chain_keeps_the_longest_monotonic_run_and_drops_the_lower_stamp_on_a_tie() {
        assert_eq!(monotonic_chain(&[]), Vec::<usize>::new());
        assert_eq!(monotonic_chain(&[0, 10, 5, 20]), vec![0, 1, 3]);
        assert_eq!(monotonic_chain(&[0, 1, 100, 3, 4]), vec![0, 1, 3, 4]);
        assert_eq!(monotonic_chain(&[0, 5, 5, 7]), vec![0, 1, 2, 3], "equal stamps are in order");
    }

    #[test]
    fn misparsed_ids_are_found_by_their_out_of_order_stamps() {
        let p = |i: u64| (i - 1) * MS;
        let text = csv(&[
            (1, 0, 148), // first probe after the gap: rx2 = 0, kept
            (2, p(2), 150),
            // probe 3 recorded as 38 (one digit too many): in the trace, but its stamps are probe 3's
            (4, p(4), 150),
            (5, p(5), -12), // negative differential, kept
            (6, p(6), 150),
            (7, p(7), 150),
            (5, p(5), 150), // duplicate id with consistent stamps: the first is kept
            (38, p(3), 150),
            (41, p(41), 150), // beyond the trace: invalid
        ]);
        let rows = parse_csv(Path::new("x.csv"), text.as_bytes()).unwrap();
        let f = filter(rows, 40);
        assert_eq!(ids(&f), vec![1, 2, 4, 5, 6, 7]);
        assert_eq!(f.rows[3].diff, -12, "the first copy of a duplicated id is kept");
        let q = f.quirks;
        assert_eq!((q.rows, q.kept, q.invalid_ids, q.misparsed, q.duplicates), (9, 6, 1, 1, 1));
        assert_eq!((q.negative_diffs, q.negative_diffs_kept, q.first_after_gap, q.diff_mismatch), (1, 1, 1, 0));
    }

    #[test]
    fn a_row_with_too_late_stamps_does_not_take_the_following_rows_with_it() {
        // Id 3 carries probe 9's stamps: "below the previous row" would drop 4..=8 as well.
        let p = |i: u64| (i - 1) * MS;
        let text = csv(&[(1, 0, 148), (2, p(2), 150), (3, p(9), 150), (4, p(4), 150), (5, p(5), 150), (6, p(6), 150)]);
        let f = filter(parse_csv(Path::new("x.csv"), text.as_bytes()).unwrap(), 40);
        assert_eq!(ids(&f), vec![1, 2, 4, 5, 6]);
        assert_eq!(f.quirks.misparsed, 1);
    }

    #[test]
    fn diff_column_disagreeing_with_the_stamps_is_counted() {
        let text = format!("{}\n1,0,148,0,0,0,148\n2,0,2000152,2000000,0,0,151\n", HEADER.join(","));
        let f = filter(parse_csv(Path::new("x.csv"), text.as_bytes()).unwrap(), 40);
        assert_eq!((f.quirks.diff_mismatch, f.quirks.diff_mismatch_max_ns), (1, 1));
    }

    #[test]
    fn records_are_in_stamp_order_with_per_port_sequence_numbers() {
        use arrow_array::cast::AsArray;
        use arrow_array::types::{UInt8Type, UInt64Type};
        let rows =
            [Row { id: 1, rx1: 148, rx2: 0, diff: 148, line: 2 }, Row { id: 2, rx1: 90, rx2: 100, diff: -10, line: 3 }];
        let b = records(&rows, None).unwrap();
        assert_eq!(b.column(0).as_primitive::<UInt64Type>().values(), &[1, 2, 2, 1]);
        assert_eq!(b.column(1).as_primitive::<UInt8Type>().values(), &[1, 0, 1, 0]);
        assert_eq!(b.column(2).as_primitive::<UInt64Type>().values(), &[0, 90, 100, 148]);
        assert_eq!(b.column(3).as_primitive::<UInt64Type>().values(), &[0, 0, 1, 1]);
    }

    #[test]
    fn csv_errors_name_the_file_and_line() {
        let p = Path::new("d/f_run01.csv");
        let text = format!("{}\n1,0,148,0,0,0,148\n2,0,x,1,0,0,1\n", HEADER.join(","));
        assert_eq!(
            parse_csv(p, text.as_bytes()).unwrap_err().to_string(),
            "d/f_run01.csv:3: rx1_ts_ns: `x` is not a whole number ≥ 0"
        );
        let e = parse_csv(p, b"pkt_id,rx\n").unwrap_err().to_string();
        assert!(e.starts_with("d/f_run01.csv:1: expected the header"), "{e}");
        let e = parse_csv(p, format!("{}\n1,2,3\n", HEADER.join(",")).as_bytes()).unwrap_err().to_string();
        assert_eq!(e, "d/f_run01.csv:2: expected 7 comma-separated fields, found 3");
        let e = parse_csv(p, b"version https://git-lfs.github.com/spec/v1\n").unwrap_err().to_string();
        assert!(e.contains("git lfs pull"), "{e}");
    }
}

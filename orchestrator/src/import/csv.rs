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
    let err = |line: usize, message: String| ImportError::Csv { path: path.to_path_buf(), line, message };
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count() + 1;
        err(line, "not UTF-8 text".into())
    })?;
    let mut lines = text.lines();
    let header = lines.next().unwrap_or("").trim_start_matches('\u{feff}');
    if header.starts_with("version https://git-lfs") {
        return Err(err(1, "a Git LFS pointer, not the data (run `git lfs pull` in the LatencyLab checkout)".into()));
    }
    if !header.split(',').map(str::trim).eq(HEADER) {
        return Err(err(1, format!("expected the header `{}`, found `{header}`", HEADER.join(","))));
    }
    let mut rows = Vec::new();
    for (i, line) in lines.enumerate() {
        let n = i + 2;
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if fields.len() != HEADER.len() {
            return Err(err(n, format!("expected {} comma-separated fields, found {}", HEADER.len(), fields.len())));
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
mod tests {
    use super::*;

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

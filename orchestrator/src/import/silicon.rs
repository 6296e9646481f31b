//! LatencyLab's hardware-clock data: `data/silicon/silicon_<TAG>_s<n>.csv` (or one run of it,
//! `silicon_<TAG>_s<n>_run<NN>.csv`), columns `run,pkt_id,silicon_diff_ns` — the differential
//! `R = hw_P − hw_B` of each probe as the sender's ConnectX-5 clock re-timed its two reflections.
//!
//! The file has the TSC files' probe-id faults (ids misread from the payload, ids beyond the
//! trace). It carries no stamps to find a misread id by, so it is joined by run and probe id to the
//! TSC rows the import kept: a misread id's TSC row was dropped, and so its silicon value finds no
//! row. Rows with an id outside the trace or repeated within a run are dropped and counted. The
//! absolute sender stamps are not published: a joined probe's records get `hw_ns` = R on the
//! pipeline copy and 0 on the bypass copy, so that the analysis reads `hw_P − hw_B = R`.

use std::collections::BTreeMap;
use std::path::Path;

pub use latency_results::provenance::SiliconFile;

use super::csv::{CsvFault, Lines, read_error};
use super::layout::TAGS;
use super::{ImportError, io_err, layout};
use latency_plan::digest;

/// The header of a silicon CSV.
pub const HEADER: [&str; 3] = ["run", "pkt_id", "silicon_diff_ns"];

/// R (ns) by run and probe id, of one session.
pub type ByRun = BTreeMap<u32, BTreeMap<u64, i64>>;

/// Silicon files by (index into the tags, session).
pub type Silicon = BTreeMap<(usize, u32), (SiliconFile, ByRun)>;

/// Every silicon file under `src/data/silicon`.
pub fn discover(src: &Path, probes: u64) -> Result<Silicon, ImportError> {
    let dir = src.join("data").join("silicon");
    let mut out = Silicon::new();
    if !dir.is_dir() {
        return Ok(out);
    }
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .map_err(io_err(&dir))?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    names.sort();
    for name in names {
        let Some((tag, session)) = file_name(&name) else { continue };
        let Some(t) = TAGS.iter().position(|x| x.tag == tag) else {
            return Err(layout(&dir.join(&name), format!("unknown LatencyLab tag `{tag}`")));
        };
        let path = dir.join(&name);
        let bytes = latency_results::read_capped(&path, super::MAX_CSV_BYTES, "silicon CSV").map_err(io_err(&path))?;
        let (file, runs) = parse(&path, &bytes, probes)?;
        let entry = out.entry((t, session)).or_default();
        if !entry.0.source.is_empty() {
            return Err(layout(
                &path,
                format!("a second silicon file for {tag}_s{session} (after {})", entry.0.source),
            ));
        }
        *entry =
            (SiliconFile { source: format!("data/silicon/{name}"), sha256: digest::sha256_hex(&bytes), ..file }, runs);
    }
    Ok(out)
}

/// `silicon_<TAG>_s<n>.csv` or `silicon_<TAG>_s<n>_run<NN>.csv` → (tag, session).
fn file_name(name: &str) -> Option<(&str, u32)> {
    let stem = name.strip_prefix("silicon_")?.strip_suffix(".csv")?;
    let stem = match stem.rsplit_once("_run") {
        Some((s, run)) if !run.is_empty() && run.bytes().all(|b| b.is_ascii_digit()) => s,
        _ => stem,
    };
    let (tag, session) = stem.rsplit_once("_s")?;
    Some((tag, session.parse().ok()?))
}

/// Parse one silicon CSV (`path` names it in errors).
pub fn parse(path: &Path, bytes: &[u8], probes: u64) -> Result<(SiliconFile, ByRun), ImportError> {
    let err = |line: usize, fault: CsvFault| ImportError::Csv { path: path.to_path_buf(), line, fault };
    let text = std::str::from_utf8(bytes).map_err(|_| err(1, CsvFault::NotUtf8))?;
    let read = read_error(path);
    let mut lines = Lines::new(text);
    let header = lines.header().map_err(&read)?;
    if !header.split(',').map(str::trim).eq(HEADER) {
        return Err(err(1, CsvFault::Header { expected: &HEADER, found: header }));
    }
    let mut file = SiliconFile::default();
    let mut seen: BTreeMap<(u32, u64), Option<i64>> = BTreeMap::new();
    while let Some((n, record)) = lines.next().map_err(&read)? {
        let fields: Vec<&str> = record.iter().map(str::trim).collect();
        let [run, id, diff] = fields[..] else {
            return Err(err(n, CsvFault::Fields { expected: HEADER.len(), found: fields.len() }));
        };
        let number = |k: usize, v: &str| {
            v.parse::<i64>().map_err(|_| err(n, CsvFault::NotWhole { column: HEADER[k], value: v.into() }))
        };
        let (run, id, diff) = (number(0, run)?, number(1, id)?, number(2, diff)?);
        let run = u32::try_from(run).map_err(|_| err(n, CsvFault::RunOutOfRange(run)))?;
        file.rows += 1;
        let Some(id) = u64::try_from(id).ok().filter(|i| (1..=probes).contains(i)) else {
            file.invalid_ids += 1;
            continue;
        };
        seen.entry((run, id)).and_modify(|v| *v = None).or_insert(Some(diff));
    }
    let mut runs = ByRun::new();
    for ((run, id), diff) in seen {
        if let Some(d) = diff {
            runs.entry(run).or_default().insert(id, d);
        }
    }
    file.duplicates = file.rows - file.invalid_ids - runs.values().map(|r| r.len() as u64).sum::<u64>();
    Ok((file, runs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The hand parser the csv crate replaced, kept to show the diagnostics did not change.
    fn hand_parsed(path: &Path, bytes: &[u8], probes: u64) -> Result<(SiliconFile, ByRun), String> {
        let err = |line: usize, message: String| format!("{}:{line}: {message}", path.display());
        let text = std::str::from_utf8(bytes).map_err(|_| err(1, "not UTF-8 text".into()))?;
        let mut lines = text.lines();
        let header = lines.next().unwrap_or("").trim_start_matches('\u{feff}');
        if !header.split(',').map(str::trim).eq(HEADER) {
            return Err(err(1, format!("expected the header `{}`, found `{header}`", HEADER.join(","))));
        }
        let mut file = SiliconFile::default();
        let mut seen: BTreeMap<(u32, u64), Option<i64>> = BTreeMap::new();
        for (i, line) in lines.enumerate() {
            let n = i + 2;
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            let [run, id, diff] = fields[..] else {
                return Err(err(n, format!("expected 3 comma-separated fields, found {}", fields.len())));
            };
            let number = |k: usize, v: &str| {
                v.parse::<i64>().map_err(|_| err(n, format!("{}: `{v}` is not a whole number", HEADER[k])))
            };
            let (run, id, diff) = (number(0, run)?, number(1, id)?, number(2, diff)?);
            let run = u32::try_from(run).map_err(|_| err(n, format!("run: {run} is out of range")))?;
            file.rows += 1;
            let Some(id) = u64::try_from(id).ok().filter(|i| (1..=probes).contains(i)) else {
                file.invalid_ids += 1;
                continue;
            };
            seen.entry((run, id)).and_modify(|v| *v = None).or_insert(Some(diff));
        }
        let mut runs = ByRun::new();
        for ((run, id), diff) in seen {
            if let Some(d) = diff {
                runs.entry(run).or_default().insert(id, d);
            }
        }
        file.duplicates = file.rows - file.invalid_ids - runs.values().map(|r| r.len() as u64).sum::<u64>();
        Ok((file, runs))
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        #[test]
        fn the_csv_crate_reads_what_the_hand_parser_read(
            lead in prop::sample::select(vec!["", "run,pkt_id,silicon_diff_ns\n"]),
            body in crate::import::csv::tests::tricky_csv("run , pkt_id,silicon_diff_ns\r", "4, 2,-102\t"),
        ) {
            let bytes = [lead.as_bytes(), &body].concat();
            let p = Path::new("s.csv");
            prop_assert_eq!(parse(p, &bytes, 20).map_err(|e| e.to_string()), hand_parsed(p, &bytes, 20));
        }
    }

    #[test]
    fn file_names_give_tag_and_session() {
        assert_eq!(file_name("silicon_FWD_s1.csv"), Some(("FWD", 1)));
        assert_eq!(file_name("silicon_FWD_s1_run04.csv"), Some(("FWD", 1)));
        assert_eq!(file_name("silicon_NF_s12.csv"), Some(("NF", 12)));
        assert_eq!(file_name("notes.txt"), None);
    }

    #[test]
    fn invalid_and_repeated_ids_are_dropped_and_counted() {
        let csv = "run,pkt_id,silicon_diff_ns\n4,1,-102\n4,2,25\n4,20178,3\n4,2,26\n5,2,30\n4,3,154\n";
        let (f, runs) = parse(Path::new("s.csv"), csv.as_bytes(), 20_000).unwrap();
        assert_eq!((f.rows, f.invalid_ids, f.duplicates), (6, 1, 2));
        assert_eq!(runs[&4], BTreeMap::from([(1, -102), (3, 154)]));
        assert_eq!(runs[&5], BTreeMap::from([(2, 30)]));
        let e = parse(Path::new("s.csv"), b"run,pkt_id,silicon_diff_ns\n4,x,1\n", 10).unwrap_err();
        assert_eq!(e.to_string(), "s.csv:2: pkt_id: `x` is not a whole number");
    }
}

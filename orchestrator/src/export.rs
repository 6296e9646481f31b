//! `orchestrate export`: a results folder in the layout other tools read.
//!
//! `latencylab-csv` writes LatencyLab's TSC files, `data/tsc/{programs,null}/<TAG>_s<n>/
//! f_run<NN>.csv`, with its header `pkt_id,tx_ts_ns,rx1_ts_ns,rx2_ts_ns,latency_rx1_ns,
//! latency_rx2_ns,diff_latency_ns`: one row per probe seen on both ports, in probe-id order, paired
//! as the analysis pairs them (`latency_results::pairs`: the first copy on each port); `rx1`
//! (pipeline) and `rx2` (bypass) in whole ns from the run's first stamp, `diff_latency_ns` =
//! `rx1 − rx2`, the `tx` and `latency_*` columns 0 as LatencyLab writes them. Only runs the journal
//! records as complete and whose files match it are exported. Tags are LatencyLab's for its
//! programs and traces (FWD, FT, RH, CS; NF, NT, NR, NC), else the group's name.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use latency_analysis::AnalysisError;
use latency_analysis::load;
use latency_results::ResultsDir;
use latency_results::SessionKind;
use latency_results::index::Group;
use latency_results::index::Index;
use latency_results::journal;
use latency_results::pairs;
use latency_results::provenance::Provenance;

/// Export formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// LatencyLab's per-run TSC CSV files.
    LatencylabCsv,
}

/// The header of LatencyLab's TSC files.
pub const HEADER: &str = "pkt_id,tx_ts_ns,rx1_ts_ns,rx2_ts_ns,latency_rx1_ns,latency_rx2_ns,diff_latency_ns";

/// What an export wrote.
#[derive(Debug, serde::Serialize)]
pub struct Exported {
    /// Files written, relative to the output folder.
    pub files: Vec<String>,
    /// Rows written.
    pub rows: u64,
    /// Runs not exported, with the reason (as the analysis names them).
    pub skipped: Vec<String>,
}

/// LatencyLab's tag of a group (the import's tag table), else the group's name.
pub fn tag(group: &Group) -> String {
    crate::import::tag_of(group.kind, &group.program, &group.trace).map_or_else(|| group.program.clone(), str::to_owned)
}

/// Export the results folder `dir` as LatencyLab CSV files under `out` (created; files that exist
/// are an error, nothing is overwritten).
pub fn latencylab_csv(dir: &ResultsDir, out: &Path) -> Result<Exported, AnalysisError> {
    let prov = Provenance::read(dir)?;
    let index = Index::from(&prov);
    let entries = journal::read(&dir.journal_path())?;
    let (files, skipped) = load::run_files(dir, &index.groups, &entries)?;
    let ns_per_tick = 1e9 / index.tsc_hz;
    let mut written = Exported { files: Vec::new(), rows: 0, skipped };
    for f in &files {
        let g = &index.groups[f.group];
        let batches = match load::read_verified(f, g) {
            Ok(b) => b,
            Err(why) => {
                written.skipped.push(why.to_string());
                continue;
            }
        };
        let (text, rows) = csv(&batches, ns_per_tick);
        let kind = if g.kind == SessionKind::Null { "null" } else { "programs" };
        let rel: PathBuf =
            ["data", "tsc", kind, &format!("{}_s{}", tag(g), f.session), &format!("f_run{:02}.csv", f.run)]
                .iter()
                .collect();
        latency_results::write_file(&out.join(&rel), text.as_bytes(), false)?;
        written.files.push(rel.to_string_lossy().into_owned());
        written.rows += rows;
    }
    Ok(written)
}

/// One run's CSV text and its number of rows: the run's pairs as the analysis pairs them (the
/// first copy of each probe on each port), stamps from the run's first one.
fn csv(batches: &[arrow_array::RecordBatch], ns_per_tick: f64) -> (String, u64) {
    let paired = pairs::pair(batches);
    let base = paired.first_tsc.unwrap_or(0);
    let ns = |tsc: u64| (tsc.saturating_sub(base) as f64 * ns_per_tick).round() as i64;
    let mut text = format!("{HEADER}\n");
    for (&(id, _), &(p, b)) in paired.diffs.iter().zip(&paired.stamps) {
        let (rx1, rx2) = (ns(p), ns(b));
        let _ = writeln!(text, "{id},0,{rx1},{rx2},0,0,{}", rx1 - rx2);
    }
    (text, paired.stamps.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use latency_proto::{Port, RecordBuilder};

    #[test]
    fn rows_are_the_pairs_in_id_order_from_the_runs_first_stamp() {
        // 2 GHz: a tick is 0.5 ns. Probe 3 arrives first (tick 1000, the base); probe 1 has a
        // second bypass copy (the first counts) and probe 2 no pipeline copy; a record of port 2
        // is neither copy.
        let mut b = RecordBuilder::default();
        b.push(3, Port::Bypass, 1000, 0, 64, None);
        b.push(3, Port::Pipeline, 1301, 0, 64, None);
        b.push(1, Port::Bypass, 2000, 1, 64, None);
        b.push(1, Port::Pipeline, 2100, 1, 64, None);
        b.push(1, Port::Bypass, 2500, 2, 64, None);
        b.push(2, Port::Bypass, 3000, 3, 64, None);
        b.push_index(4, 2, 10, 0, 64, None);
        let (text, rows) = csv(&[b.finish().unwrap()], 0.5);
        assert_eq!(rows, 2);
        // Each stamp rounded on its own (150.5 → 151), the difference of the rounded stamps.
        assert_eq!(text, format!("{HEADER}\n1,0,550,500,0,0,50\n3,0,151,0,0,0,151\n"));
        assert_eq!(csv(&[], 1.0), (format!("{HEADER}\n"), 0));
    }
}

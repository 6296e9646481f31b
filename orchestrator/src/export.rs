//! `orchestrate export`: a results folder in the layout other tools read.
//!
//! `latencylab-csv` writes LatencyLab's TSC files, `data/tsc/{programs,null}/<TAG>_s<n>/
//! f_run<NN>.csv`, with its header `pkt_id,tx_ts_ns,rx1_ts_ns,rx2_ts_ns,latency_rx1_ns,
//! latency_rx2_ns,diff_latency_ns`: one row per probe seen on both ports, in probe-id order; `rx1`
//! (pipeline) and `rx2` (bypass) in whole ns from the run's first stamp, `diff_latency_ns` =
//! `rx1 − rx2`, the `tx` and `latency_*` columns 0 as LatencyLab writes them. Only runs the journal
//! records as complete and whose files match it are exported. Tags are LatencyLab's for its
//! programs and traces (FWD, FT, RH, CS; NF, NT, NR, NC), else the group's name.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::types::{UInt8Type, UInt64Type};
use latency_proto::schema::col;

use latency_analysis::AnalysisError;
use latency_analysis::load;
use latency_results::ResultsDir;
use latency_results::SessionKind;
use latency_results::index::Group;
use latency_results::index::Index;
use latency_results::journal;
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
                written.skipped.push(why);
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

/// One run's CSV text and its number of rows.
fn csv(batches: &[arrow_array::RecordBatch], ns_per_tick: f64) -> (String, u64) {
    // First stamp of each probe on each port, and the run's first stamp.
    let mut first: std::collections::BTreeMap<u64, [Option<u64>; 2]> = std::collections::BTreeMap::new();
    let mut base = u64::MAX;
    for b in batches {
        let (Some(ids), Some(ports), Some(tscs)) =
            (b.column_by_name(col::PROBE_ID), b.column_by_name(col::PORT), b.column_by_name(col::TSC))
        else {
            continue;
        };
        let (ids, ports, tscs) = (
            ids.as_primitive::<UInt64Type>().values(),
            ports.as_primitive::<UInt8Type>().values(),
            tscs.as_primitive::<UInt64Type>().values(),
        );
        for k in 0..ids.len() {
            let Some(slot) = first.entry(ids[k]).or_default().get_mut(usize::from(ports[k])) else { continue };
            if slot.is_none_or(|t| tscs[k] < t) {
                *slot = Some(tscs[k]);
            }
            base = base.min(tscs[k]);
        }
    }
    let mut text = format!("{HEADER}\n");
    let mut rows = 0;
    let ns = |tsc: u64| ((tsc - base) as f64 * ns_per_tick).round() as i64;
    for (id, stamps) in &first {
        if let [Some(p), Some(b)] = stamps {
            let (rx1, rx2) = (ns(*p), ns(*b));
            let _ = writeln!(text, "{id},0,{rx1},{rx2},0,0,{}", rx1 - rx2);
            rows += 1;
        }
    }
    (text, rows)
}

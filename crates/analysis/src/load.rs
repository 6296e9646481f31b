//! Which run files the analysis trusts, and reading them: only runs the journal records as
//! complete, each verified against the journal's sha256 and record count and its metadata against
//! its place in the tree; anything else under `data/` is reported, never counted.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use arrow_schema::DataType;
use bytes::Bytes;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::error::AnalysisError;
use crate::runs::{Making, RunPairs};
use latency_plan::PortPair;
use latency_plan::digest;
use latency_results::ResultsDir;
use latency_results::event::Entry;
use latency_results::index::{Group, Index};
use latency_results::journal;
use latency_results::pairs;
use latency_results::reduction::{Reduction, RunIdentity};
use latency_results::runfile::RunMetadata;

pub use latency_results::runfile::MAX_RUN_FILE_BYTES;

/// A run the journal records as complete: where it is and what it must hold.
#[derive(Clone, Debug)]
pub struct RunFile {
    /// Index into the study's groups.
    pub group: usize,
    /// Session number.
    pub session: u32,
    /// Run number.
    pub run: u32,
    /// The run's factor level (studies with factors).
    pub level: Option<String>,
    /// Absolute path.
    pub path: PathBuf,
    /// Path relative to the results folder (for messages).
    pub rel: String,
    /// sha256 the journal recorded.
    pub sha256: String,
    /// Records the journal recorded.
    pub records: u64,
    /// Whether a histogram log was recorded with it (soak mode).
    pub histogram: bool,
    /// Absolute path of its reduction (`pairs/…`).
    pub reduction: PathBuf,
}

impl RunFile {
    /// Which run it is, as its reduction names it.
    fn identity(&self, group: &Group) -> RunIdentity {
        RunIdentity {
            program: group.program.clone(),
            session: self.session,
            run: self.run,
            level: self.level.clone(),
            run_sha256: self.sha256.clone(),
            records: self.records,
        }
    }
}

/// The runs to analyse, in (group, session, run) order, and what was found under `data/` that is
/// not one of them (stray files, and completed runs of unknown groups).
pub fn run_files(
    dir: &ResultsDir,
    groups: &[Group],
    entries: &[Entry],
) -> Result<(Vec<RunFile>, Vec<String>), AnalysisError> {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    // Histogram logs the journal recorded with their runs (soak mode; read by `analysis::soak`).
    let mut logs = BTreeSet::new();
    for ((program, session, run), c) in journal::completed(entries) {
        let Some(group) = groups.iter().position(|g| g.program == program) else {
            problems.push(format!("{}: run of `{program}`, which is not a group of this study; not analysed", c.path));
            continue;
        };
        let expected = ResultsDir::run_rel_path(&program, c.level.as_deref(), session, run);
        if Path::new(&c.path) != expected {
            problems.push(format!(
                "{}: the journal records run {run} of {program} session {session} at this path, not at {}; not analysed",
                c.path,
                expected.display()
            ));
            continue;
        }
        if c.histogram_sha256.is_some() {
            logs.insert(expected.with_extension(latency_results::HISTOGRAM_EXTENSION));
        }
        out.push(RunFile {
            group,
            session,
            run,
            level: c.level,
            path: dir.root().join(&expected),
            rel: c.path,
            sha256: c.sha256,
            records: c.records,
            histogram: c.histogram_sha256.is_some(),
            reduction: dir.root().join(ResultsDir::reduction_rel_path(&expected)),
        });
    }
    out.sort_by_key(|r| (r.group, r.session, r.run));
    let mut known: BTreeSet<PathBuf> = out.iter().map(|r| PathBuf::from(&r.rel)).collect();
    known.append(&mut logs);
    for f in dir.data_files()? {
        if !known.contains(&f) && !latency_results::is_partial(&f) {
            problems
                .push(format!("{}: not a run the journal records as complete (stray file); not analysed", f.display()));
        }
    }
    Ok((out, problems))
}

/// A run paired on the headline ports, and on each further pair asked for.
pub type RunAndPairs = (RunPairs, Vec<RunPairs>);

/// Whether an analysis reads the runs' reductions ([`latency_results::reduction`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reductions {
    /// Read those of the run files the journal names; make the others again from the run files.
    Kept,
    /// Decode and pair every run file, and write nothing (`orchestrate verify`, which trusts
    /// nothing in the folder).
    Ignored,
}

/// Every run, in parallel, paired on the headline ports (pipeline against bypass) and then on
/// each of `others`: the one run loader of the analysis and of the history's per-probe estimates.
/// With [`Reductions::Kept`], a run whose reduction is kept (`pairs/`, of this very run file) is
/// read from it, once its run file's sha256 is checked against the journal; any other is read from
/// its run file, paired, and its reduction made again. A further port pair always reads the run
/// file.
pub fn paired_runs(
    index: &Index,
    files: &[RunFile],
    others: &[PortPair],
    reductions: Reductions,
) -> Vec<Result<RunAndPairs, Unreadable>> {
    let exclude = index.analysis.exclude_first_after_gap;
    let shared = crate::runs::SharedIds::default();
    // The files asked of the disk ahead of the threads that read them, in the order they do (a
    // study copied from its testbed is not in the cache yet).
    let _ahead = std::thread::Builder::new().spawn({
        let paths: Vec<PathBuf> = files.iter().flat_map(|f| [f.reduction.clone(), f.path.clone()]).collect();
        move || latency_results::read_ahead(paths)
    });
    par_map(files, |f| {
        let group = &index.groups[f.group];
        let making = Making {
            group: f.group,
            session: f.session,
            tsc_hz: index.tsc_hz,
            exclude_first: exclude,
            lens: group.bound_model.is_some(),
            shared: &shared,
        };
        let of = |r: &Reduction| RunPairs::of(r, &making);
        let id = f.identity(group);
        let kept = match reductions {
            Reductions::Kept => RunPairs::read(&f.reduction, &id, &making),
            Reductions::Ignored => None,
        };
        let was_kept = kept.is_some();
        if let Some(run) = kept.filter(|_| others.is_empty()) {
            return checked_file(f).map(|()| (run, Vec::new()));
        }
        let batches = read_verified(f, group)?;
        let headline = Reduction::of(pairs::pair(&batches), id.clone());
        if !was_kept && reductions == Reductions::Kept {
            // Derived data: a folder that cannot be written to is analysed all the same.
            let _ = headline.write(&f.reduction);
        }
        let further = others.iter().map(|&p| of(&Reduction::of(pairs::pair_ports(&batches, p), id.clone()))).collect();
        Ok((of(&headline), further))
    })
}

/// Why a run file is not analysed; each names the file as the journal does.
#[derive(Debug, thiserror::Error)]
pub enum Unreadable {
    /// The file cannot be read.
    #[error("{rel}: {source}")]
    Read {
        /// The file, relative to the results folder.
        rel: String,
        /// The error.
        source: std::io::Error,
    },
    /// Its checksum is not the journal's.
    #[error(
        "{rel}: checksum {} differs from the journal's {} (the file was changed after the run); not analysed",
        .actual.get(..12).unwrap_or(.actual.as_str()),
        .recorded.get(..12).unwrap_or(.recorded.as_str())
    )]
    Checksum {
        /// The file.
        rel: String,
        /// Its sha256.
        actual: String,
        /// The journal's.
        recorded: String,
    },
    /// The Parquet decoder panicked on it.
    #[error("{rel}: corrupt Parquet file: {source}")]
    Corrupt {
        /// The file.
        rel: String,
        /// The panic's message.
        source: latency_results::runfile::DecoderPanicked,
    },
    /// The Parquet decoder refused it.
    #[error("{rel}: {source}")]
    Parquet {
        /// The file.
        rel: String,
        /// The error.
        source: parquet::errors::ParquetError,
    },
    /// Its records cannot be read.
    #[error("{rel}: {source}")]
    Arrow {
        /// The file.
        rel: String,
        /// The error.
        source: arrow_schema::ArrowError,
    },
    /// Its metadata cannot be read.
    #[error("{rel}: {source}")]
    Metadata {
        /// The file.
        rel: String,
        /// The error.
        source: latency_results::runfile::MetadataError,
    },
    /// Its metadata names another run than its place in the tree.
    #[error(
        "{rel}: its metadata says program {} session {} run {}, its place says program {} session {} run {}",
        .metadata.0, .metadata.1, .metadata.2, .place.0, .place.1, .place.2
    )]
    Misplaced {
        /// The file.
        rel: String,
        /// (program, session, run) of its metadata.
        metadata: (String, u32, u32),
        /// (program, session, run) of its place.
        place: (String, u32, u32),
    },
    /// Its metadata names another factor level than its place.
    #[error(
        "{rel}: its metadata says level {}, its place says level {}",
        .metadata.as_deref().unwrap_or("none"),
        .place.as_deref().unwrap_or("none")
    )]
    OtherLevel {
        /// The file.
        rel: String,
        /// Its metadata's level.
        metadata: Option<String>,
        /// Its place's level.
        place: Option<String>,
    },
    /// A column is not of the record schema's type.
    #[error("{rel}: column `{column}` is {have}, the record schema says {want}")]
    ColumnType {
        /// The file.
        rel: String,
        /// The column.
        column: &'static str,
        /// Its type.
        have: DataType,
        /// The record schema's.
        want: DataType,
    },
    /// A required column is missing.
    #[error("{rel}: column `{column}` is missing: not a run file in the record schema")]
    MissingColumn {
        /// The file.
        rel: String,
        /// The column.
        column: &'static str,
    },
    /// It holds another number of records than the journal recorded.
    #[error("{rel}: {records} records, the journal recorded {recorded}")]
    Records {
        /// The file.
        rel: String,
        /// Records in the file.
        records: u64,
        /// Records the journal recorded.
        recorded: u64,
    },
}

/// Read a run file, check it against the journal (sha256, records) and its metadata against its
/// place in the tree, and return the columns the analysis needs.
pub fn read_verified(r: &RunFile, group: &Group) -> Result<Vec<RecordBatch>, Unreadable> {
    let bytes = checked_bytes(r)?;
    latency_results::runfile::guarded(|| decode_checked(r, group, bytes))
        .unwrap_or_else(|source| Err(Unreadable::Corrupt { rel: r.rel.clone(), source }))
}

/// A run file's bytes, once their sha256 is the journal's.
fn checked_bytes(r: &RunFile) -> Result<Vec<u8>, Unreadable> {
    let rel = || r.rel.clone();
    let bytes = latency_results::read_capped(&r.path, MAX_RUN_FILE_BYTES, "run file")
        .map_err(|source| Unreadable::Read { rel: rel(), source })?;
    journals_checksum(r, digest::sha256_hex(&bytes))?;
    Ok(bytes)
}

/// Check a run file's sha256 against the journal's, streaming it (its bytes are not needed).
fn checked_file(r: &RunFile) -> Result<(), Unreadable> {
    let actual = digest::sha256_file(&r.path).map_err(|source| Unreadable::Read { rel: r.rel.clone(), source })?;
    journals_checksum(r, actual)
}

/// That `actual` is the sha256 the journal recorded for the run file, else the error naming both.
fn journals_checksum(r: &RunFile, actual: String) -> Result<(), Unreadable> {
    if actual != r.sha256 {
        return Err(Unreadable::Checksum { rel: r.rel.clone(), actual, recorded: r.sha256.clone() });
    }
    Ok(())
}

/// Decode a run file's bytes (already checked against the journal's sha256).
fn decode_checked(r: &RunFile, group: &Group, bytes: Vec<u8>) -> Result<Vec<RecordBatch>, Unreadable> {
    let rel = || r.rel.clone();
    let parquet = |source| Unreadable::Parquet { rel: rel(), source };
    let builder = ParquetRecordBatchReaderBuilder::try_new(Bytes::from(bytes)).map_err(parquet)?;
    let meta = RunMetadata::from_kv(builder.metadata().file_metadata().key_value_metadata().map_or(&[], |v| v))
        .map_err(|source| Unreadable::Metadata { rel: rel(), source })?;
    if (meta.program.as_str(), meta.session, meta.run) != (group.program.as_str(), r.session, r.run) {
        return Err(Unreadable::Misplaced {
            rel: rel(),
            metadata: (meta.program, meta.session, meta.run),
            place: (group.program.clone(), r.session, r.run),
        });
    }
    if meta.level != r.level {
        return Err(Unreadable::OtherLevel { rel: rel(), metadata: meta.level, place: r.level.clone() });
    }
    let schema = builder.schema().clone();
    let fields = latency_proto::record_schema();
    // Frame lengths are required only where a header-inserting program's bound is evaluated per
    // probe; read wherever present, for the run's reduction.
    let lengths_required = group.bound_model.is_some();
    let wanted = [
        (latency_proto::schema::col::PROBE_ID, true),
        (latency_proto::schema::col::PORT, true),
        (latency_proto::schema::col::TSC, true),
        (latency_proto::schema::col::HW_NS, true),
        (latency_proto::schema::col::FRAME_LEN, lengths_required),
    ];
    let mut indices = Vec::new();
    for (name, required) in wanted {
        let Some(want) = fields.field_with_name(name).ok() else { continue };
        match schema.index_of(name) {
            Ok(i) => {
                let have: &DataType = schema.field(i).data_type();
                if have != want.data_type() {
                    return Err(Unreadable::ColumnType {
                        rel: rel(),
                        column: name,
                        have: have.clone(),
                        want: want.data_type().clone(),
                    });
                }
                indices.push(i);
            }
            Err(_) if want.is_nullable() || !required => {}
            Err(_) => return Err(Unreadable::MissingColumn { rel: rel(), column: name }),
        }
    }
    let mask = ProjectionMask::roots(builder.parquet_schema(), indices);
    let reader = builder.with_projection(mask).with_batch_size(1 << 16).build().map_err(parquet)?;
    let batches: Vec<RecordBatch> =
        reader.collect::<Result<_, _>>().map_err(|source| Unreadable::Arrow { rel: rel(), source })?;
    let records: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
    if records != r.records {
        return Err(Unreadable::Records { rel: rel(), records, recorded: r.records });
    }
    Ok(batches)
}

pub use latency_results::par_map;

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{StringArray, UInt8Array, UInt64Array};
    use arrow_schema::{DataType, Field, Schema};
    use parquet::arrow::ArrowWriter;

    use super::*;
    use latency_results::SessionKind;

    fn group() -> Group {
        Group {
            program: "p".into(),
            kind: SessionKind::Program,
            trace: "t".into(),
            null_trace: None,
            bitstream: "p".into(),
            clock_mhz: 250.0,
            vendor_bound_cycles: None,
            bound_model: None,
            probes: 2,
        }
    }

    /// A run file whose `tsc` column holds strings: a schema error naming the column, never a
    /// panic in a worker thread.
    #[test]
    fn a_column_of_the_wrong_type_is_a_schema_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data/program=p/session=1/run=1.parquet");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let schema = Arc::new(Schema::new(vec![
            Field::new("probe_id", DataType::UInt64, false),
            Field::new("port", DataType::UInt8, false),
            Field::new("tsc", DataType::Utf8, false),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(UInt64Array::from(vec![1, 1])),
                Arc::new(UInt8Array::from(vec![0, 1])),
                Arc::new(StringArray::from(vec!["100", "200"])),
            ],
        )
        .unwrap();
        let props = parquet::file::properties::WriterProperties::builder()
            .set_key_value_metadata(Some(latency_results::runfile::RunMetadata::example("p", 1, 1).to_kv()))
            .build();
        let mut w = ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), schema, Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let run = RunFile {
            group: 0,
            session: 1,
            run: 1,
            level: None,
            path: path.clone(),
            rel: "data/program=p/session=1/run=1.parquet".into(),
            sha256: digest::sha256_hex(&bytes),
            records: 2,
            histogram: false,
            reduction: dir.path().join("pairs/program=p/session=1/run=1.pairs"),
        };
        let e = read_verified(&run, &group()).unwrap_err().to_string();
        assert_eq!(e, "data/program=p/session=1/run=1.parquet: column `tsc` is Utf8, the record schema says UInt64");
        let e = latency_results::runfile::read(&path).unwrap_err().to_string();
        assert!(e.contains("unexpected schema"), "{e}");
    }
}

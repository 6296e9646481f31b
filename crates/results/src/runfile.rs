//! Run data files: the agent's records as Parquet (zstd), with the run's provenance in the file's
//! key-value metadata, readable by pandas, polars, DuckDB and Spark as a hive-partitioned tree.

use std::path::Path;
use std::sync::Arc;

use arrow_array::{RecordBatch, UInt32Array};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;

use super::ResultsError;
use crate::SessionKind;
pub use crate::error::{DecoderPanicked, MetadataError};
use crate::error::{RATE, is_rate};

use latency_proto::meta;
pub use latency_proto::meta::META_PREFIX;
use latency_proto::schema::col;

/// Declares [`RunMetadata`] with each field stated once, beside its key in
/// [`latency_proto::meta`]; the value is the field's text form (`Display` / `FromStr`).
macro_rules! run_metadata {
    ($($(#[doc = $doc:literal])* $field:ident: $ty:ty = $key:path,)* ; $($(#[doc = $odoc:literal])* $opt:ident = $okey:path,)*) => {
        /// A run's provenance, kept in its Parquet file's key-value metadata (`latency.*` keys).
        #[derive(Clone, Debug, PartialEq)]
        pub struct RunMetadata {
            $($(#[doc = $doc])* pub $field: $ty,)*
            $($(#[doc = $odoc])* pub $opt: Option<String>,)*
        }

        impl RunMetadata {
            /// The key-value pairs written into the file.
            pub fn to_kv(&self) -> Vec<KeyValue> {
                let mut kv = vec![$(KeyValue::new($key.to_string(), self.$field.to_string()),)*];
                $(if let Some(v) = &self.$opt {
                    kv.push(KeyValue::new($okey.to_string(), v.clone()));
                })*
                kv
            }

            /// Read the pairs back; a missing or malformed key is an error naming it.
            pub fn from_kv(kv: &[KeyValue]) -> Result<RunMetadata, MetadataError> {
                let get = |k: &str| kv.iter().find(|e| e.key == k).and_then(|e| e.value.clone());
                Ok(RunMetadata {
                    $($field: {
                        let v = get($key).ok_or(MetadataError::Missing { key: $key })?;
                        v.parse::<$ty>()
                            .map_err(|e| MetadataError::Invalid { key: $key, value: v.clone(), source: Box::new(e) })?
                    },)*
                    $($opt: get($okey),)*
                })
            }
        }
    };
}

run_metadata! {
    /// Study name.
    study: String = meta::STUDY,
    /// sha256 of the plan.
    plan_hash: String = meta::PLAN_HASH,
    /// Program or null group.
    program: String = meta::PROGRAM,
    /// Program or null calibration.
    kind: SessionKind = meta::KIND,
    /// Session number.
    session: u32 = meta::SESSION,
    /// Run number.
    run: u32 = meta::RUN,
    /// Attempt that produced the file.
    attempt: u32 = meta::ATTEMPT,
    /// Bitstream name.
    bitstream: String = meta::BITSTREAM,
    /// sha256 of the bitstream (empty when unknown, e.g. imports).
    bitstream_sha256: String = meta::BITSTREAM_SHA256,
    /// Trace name.
    trace: String = meta::TRACE,
    /// Probes per run.
    probes: u64 = meta::PROBES,
    /// Testbed name.
    testbed: String = meta::TESTBED,
    /// Seed.
    seed: u64 = meta::SEED,
    /// TSC ticks per second of the stamps.
    tsc_hz: f64 = meta::TSC_HZ,
    /// Tool version.
    tool_version: String = meta::TOOL_VERSION,
    ;
    /// Studies with factors: the run's level (its folders in the tree).
    level = meta::LEVEL,
    /// Imports: the source file, relative to the source folder.
    source = meta::SOURCE,
    /// Imports: sha256 of the source file.
    source_sha256 = meta::SOURCE_SHA256,
}

/// Write a run's records to `path` atomically (never over an existing file), with the run number
/// as a last column ([`latency_proto::run_file_schema`]); returns the file's sha256 (hex), taken
/// from the bytes as they are written. `metadata` goes into the Parquet footer. `durable`: on the
/// disk (fsync of the file and its folder) before this returns; otherwise only renamed into place,
/// for runs that can be made again identical ([`latency_files::write_derived`]).
///
/// The encoding was chosen by measurement (`make bench-codecs`): the
/// counters (probe id, TSC, sequence, hardware stamp) delta-encoded (`DELTA_BINARY_PACKED`), then
/// zstd level 1; against plain zstd 1 at paper scale, files 31 % smaller, written in half the time
/// and decoded in less than half the time; every reader the results format promises (pyarrow,
/// DuckDB, Spark) reads both.
pub fn write(
    path: &Path,
    batches: &[RecordBatch],
    metadata: &RunMetadata,
    durable: bool,
) -> Result<String, ResultsError> {
    let parquet = |source| ResultsError::Parquet { path: path.to_path_buf(), source };
    let mut props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).map_err(parquet)?))
        .set_dictionary_enabled(false)
        .set_max_row_group_row_count(Some(1 << 20))
        .set_key_value_metadata(Some(metadata.to_kv()));
    for c in [col::PROBE_ID, col::TSC, col::SEQ, col::HW_NS] {
        props = props.set_column_encoding(ColumnPath::from(c), Encoding::DELTA_BINARY_PACKED);
    }
    let schema = latency_proto::run_file_schema();
    let mut bytes = Vec::new();
    let mut w = ArrowWriter::try_new(&mut bytes, Arc::clone(&schema), Some(props.build())).map_err(parquet)?;
    for b in batches {
        let mut columns = b.columns().to_vec();
        columns.push(Arc::new(UInt32Array::from(vec![metadata.run; b.num_rows()])));
        let b = RecordBatch::try_new(Arc::clone(&schema), columns)
            .map_err(|source| ResultsError::Arrow { path: path.to_path_buf(), source })?;
        w.write(&b).map_err(parquet)?;
    }
    w.close().map_err(parquet)?;
    if durable {
        super::write_file(path, &bytes, false)?;
    } else if path.exists() {
        return Err(latency_files::FileError::Exists(path.to_path_buf()).into());
    } else {
        latency_files::write_derived(path, &bytes)?;
    }
    Ok(latency_plan::digest::sha256_hex(&bytes))
}

/// Largest run file read (a paper-scale run is about 1 MB; a soak's longest runs stay far below).
pub const MAX_RUN_FILE_BYTES: u64 = 4 << 30;

/// A run file's records and its metadata.
pub type RunFile = (Vec<RecordBatch>, RunMetadata);

/// Read a run file back: its batches (in the record schema: the run column, or a file written
/// before it existed, gives the same) and its metadata.
pub fn read(path: &Path) -> Result<RunFile, ResultsError> {
    let parquet = |source| ResultsError::Parquet { path: path.to_path_buf(), source };
    let arrow = |source| ResultsError::Arrow { path: path.to_path_buf(), source };
    let f = latency_files::open_regular(path, MAX_RUN_FILE_BYTES, "run file").map_err(super::io_err(path))?;
    guarded(|| {
        let builder = ParquetRecordBatchReaderBuilder::try_new(f).map_err(parquet)?;
        let meta = RunMetadata::from_kv(builder.metadata().file_metadata().key_value_metadata().map_or(&[], |v| v))
            .map_err(|source| ResultsError::Metadata { path: path.to_path_buf(), source })?;
        if !is_rate(meta.tsc_hz) {
            let (key, value) = (meta::TSC_HZ.to_string(), meta.tsc_hz);
            return Err(ResultsError::Impossible { path: path.to_path_buf(), key, value, expected: RATE });
        }
        let schema = builder.schema().clone();
        let expected = latency_proto::record_schema();
        let with_run = schema.fields() == latency_proto::run_file_schema().fields();
        if !with_run && schema.fields() != expected.fields() {
            return Err(ResultsError::Schema { path: path.to_path_buf(), found: format!("{schema:?}") });
        }
        let reader = builder.with_batch_size(1 << 16).build().map_err(parquet)?;
        let records: Vec<usize> = (0..expected.fields().len()).collect();
        let mut batches = Vec::new();
        for b in reader {
            let b = b.map_err(arrow)?;
            let b = if with_run { b.project(&records).map_err(arrow)? } else { b };
            batches.push(b.with_schema(Arc::clone(&expected)).map_err(arrow)?);
        }
        Ok((batches, meta))
    })
    .unwrap_or_else(|source| Err(ResultsError::Corrupt { path: path.to_path_buf(), source }))
}

thread_local! {
    /// Set while this thread decodes an untrusted file (see [`guarded`]).
    static DECODING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Run `decode` on the contents of an untrusted file, turning a panic of the decoder into an
/// error (its message). The Parquet decoder asserts on some corrupt metadata instead of returning
/// an error; such a file must be reported, not crash the analysis. The panic message of a decoder
/// guarded here is not printed (every other panic still is).
pub fn guarded<T>(decode: impl FnOnce() -> T) -> Result<T, DecoderPanicked> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !DECODING.with(std::cell::Cell::get) {
                previous(info);
            }
        }));
    });
    let was = DECODING.with(|d| d.replace(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(decode));
    DECODING.with(|d| d.set(was));
    result.map_err(|panic| {
        DecoderPanicked(
            panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "the decoder failed".into()),
        )
    })
}

impl RunMetadata {
    /// Metadata of run `run` of `program` session `session` with placeholder values (study `t`,
    /// bitstream `nf`, trace `tr`, 2 probes on `sim`), for tests and examples.
    pub fn example(program: &str, session: u32, run: u32) -> RunMetadata {
        RunMetadata {
            study: "t".into(),
            plan_hash: "ab".into(),
            program: program.into(),
            kind: SessionKind::Program,
            session,
            run,
            attempt: 2,
            bitstream: "nf".into(),
            bitstream_sha256: String::new(),
            trace: "tr".into(),
            probes: 2,
            testbed: "sim".into(),
            seed: 3,
            tsc_hz: 2.9e9,
            tool_version: "0.1.0".into(),
            level: None,
            source: None,
            source_sha256: Some("cd".into()),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::types::UInt64Type;
    use latency_proto::{Port, RecordBuilder};

    pub(crate) fn meta() -> RunMetadata {
        RunMetadata { kind: SessionKind::Null, ..RunMetadata::example("x", 1, 1) }
    }

    #[test]
    fn round_trip_keeps_records_schema_and_metadata() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("data/program=x/session=1/run=1.parquet");
        let mut b = RecordBuilder::with_capacity(3);
        b.push(1, Port::Bypass, 100, 0, 128, None);
        b.push(1, Port::Pipeline, 532, 0, 128, None);
        b.push(2, Port::Bypass, 5_780_100, 1, 128, Some(7));
        let batch = b.finish().unwrap();
        let sha256 = write(&p, std::slice::from_ref(&batch), &meta(), true).unwrap();
        assert_eq!(sha256, latency_plan::digest::sha256_file(&p).unwrap(), "the sha256 of the bytes on disk");
        let (back, m) = read(&p).unwrap();
        assert_eq!(back, vec![batch]);
        assert_eq!(m, meta());
        assert_eq!(back[0].column(2).as_primitive::<UInt64Type>().values(), &[100, 532, 5_780_100]);
        for durable in [true, false] {
            assert!(write(&p, &back, &meta(), durable).is_err(), "existing run files are never overwritten");
        }
        assert_eq!(std::fs::read_dir(p.parent().unwrap()).unwrap().count(), 1, "no temporary file left");
        // Written without waiting for the disk, the same bytes.
        let q = dir.path().join("data/program=x/session=1/run=2.parquet");
        assert_eq!(write(&q, &back, &meta(), false).unwrap(), sha256);
        std::fs::write(&p, b"PAR1 truncated").unwrap();
        assert!(read(&p).is_err());
    }

    #[test]
    fn metadata_keys_are_prefixed_and_a_bad_value_is_named() {
        let kv = meta().to_kv();
        assert!(kv.iter().all(|k| meta::short_name(&k.key).is_some()));
        let keys: Vec<&str> = kv.iter().map(|k| k.key.as_str()).collect();
        let want: Vec<&str> = meta::ALL
            .iter()
            .copied()
            .filter(|k| ![meta::SOURCE, meta::LEVEL, meta::SCHEMA_VERSION].contains(k))
            .collect();
        assert_eq!(keys, want, "every key of the run-file metadata, in order");
        assert!(kv.iter().any(|k| k.key == "latency.kind" && k.value.as_deref() == Some("null")));
        assert!(!kv.iter().any(|k| k.key == "latency.source"));
        let mut bad = kv.clone();
        bad.retain(|k| k.key != "latency.session");
        assert_eq!(RunMetadata::from_kv(&bad).unwrap_err().to_string(), "metadata key `latency.session` is missing");
        for k in &mut bad {
            if k.key == "latency.run" {
                k.value = Some("x".into());
            }
        }
        bad.push(KeyValue::new("latency.session".into(), "1".to_string()));
        assert!(RunMetadata::from_kv(&bad).unwrap_err().to_string().starts_with("metadata key `latency.run`: `x`"));
    }

    /// Files written by pyarrow and DuckDB are Snappy-compressed by default: readable.
    #[test]
    fn a_snappy_compressed_run_file_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.parquet");
        let mut b = RecordBuilder::with_capacity(2);
        b.push(7, Port::Bypass, 10, 0, 64, None);
        b.push(7, Port::Pipeline, 25, 0, 64, None);
        let batch = b.finish().unwrap();
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_key_value_metadata(Some(meta().to_kv()))
            .build();
        let f = std::fs::File::create(&path).unwrap();
        let mut w = ArrowWriter::try_new(f, latency_proto::record_schema(), Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let (back, m) = read(&path).unwrap();
        assert_eq!((back, m), (vec![batch], meta()));
    }
}

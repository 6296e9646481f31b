//! Run data files: the agent's records as Parquet (zstd), with the run's provenance in the file's
//! key-value metadata, readable by pandas, polars, DuckDB and Spark as a hive-partitioned tree.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow_array::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use super::{ResultsError, write_atomic};

/// Write a run's records to `path` atomically (never over an existing file). `metadata` goes into
/// the Parquet footer.
pub fn write(path: &Path, batches: &[RecordBatch], metadata: &[(String, String)]) -> Result<(), ResultsError> {
    let fmt = |e: parquet::errors::ParquetError| std::io::Error::other(e.to_string());
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(
            ZstdLevel::try_new(1)
                .map_err(|e| ResultsError::Format { path: path.to_path_buf(), message: e.to_string() })?,
        ))
        .set_dictionary_enabled(false)
        .set_max_row_group_row_count(Some(1 << 20))
        .set_key_value_metadata(Some(
            metadata.iter().map(|(k, v)| KeyValue { key: k.clone(), value: Some(v.clone()) }).collect(),
        ))
        .build();
    write_atomic(path, false, |f| {
        let mut w = ArrowWriter::try_new(f, latency_agent::record_schema(), Some(props)).map_err(fmt)?;
        for b in batches {
            w.write(b).map_err(fmt)?;
        }
        w.close().map_err(fmt)?;
        Ok(())
    })
}

/// A run file's records and its key-value metadata.
pub type RunFile = (Vec<RecordBatch>, Vec<(String, String)>);

/// Read a run file back: its batches (in the record schema) and its key-value metadata.
pub fn read(path: &Path) -> Result<RunFile, ResultsError> {
    let fmt = |e: &dyn std::fmt::Display| ResultsError::Format { path: path.to_path_buf(), message: e.to_string() };
    let f = File::open(path).map_err(super::io_err(path))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(f).map_err(|e| fmt(&e))?;
    let meta: Vec<(String, String)> = builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .map(|kv| kv.iter().filter_map(|k| Some((k.key.clone(), k.value.clone()?))).collect())
        .unwrap_or_default();
    let schema = builder.schema().clone();
    let expected = latency_agent::record_schema();
    if schema.fields() != expected.fields() {
        return Err(fmt(&format!("unexpected schema {schema:?}")));
    }
    let reader = builder.with_batch_size(1 << 16).build().map_err(|e| fmt(&e))?;
    let mut batches = Vec::new();
    for b in reader {
        let b = b.map_err(|e| fmt(&e))?;
        batches.push(b.with_schema(Arc::clone(&expected)).map_err(|e| fmt(&e))?);
    }
    Ok((batches, meta))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::types::UInt64Type;
    use latency_agent::{Port, RecordBuilder};

    #[test]
    fn round_trip_keeps_records_schema_and_metadata() {
        let dir = std::env::temp_dir().join(format!("runfile-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let p = dir.join("data/program=x/session=1/run=1.parquet");
        let mut b = RecordBuilder::with_capacity(3);
        b.push(1, Port::Bypass, 100, 0, 128, None);
        b.push(1, Port::Pipeline, 532, 0, 128, None);
        b.push(2, Port::Bypass, 5_780_100, 1, 128, Some(7));
        let batch = b.finish().unwrap();
        write(&p, std::slice::from_ref(&batch), &[("latency.study".into(), "t".into())]).unwrap();
        let (back, meta) = read(&p).unwrap();
        assert_eq!(back, vec![batch]);
        assert!(meta.contains(&("latency.study".to_string(), "t".to_string())));
        assert_eq!(back[0].column(2).as_primitive::<UInt64Type>().values(), &[100, 532, 5_780_100]);
        assert!(write(&p, &back, &[]).is_err(), "existing run files are never overwritten");
        std::fs::write(&p, b"PAR1 truncated").unwrap();
        assert!(read(&p).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

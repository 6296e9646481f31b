//! How run files are encoded, chosen by measurement (`make bench-codecs`): the run files of a
//! results folder written again with each candidate encoding and compression, then read back as
//! the analysis reads them (probe id, port, TSC, hardware stamp); bytes, write and read time of
//! each, side by side in one run.
//!
//! usage: run_file_codecs RESULTS_FOLDER

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::{WriterProperties, WriterPropertiesBuilder};
use parquet::schema::types::ColumnPath;

fn main() {
    let dir = std::env::args().nth(1).expect("usage: run_file_codecs RESULTS_FOLDER");
    let dir = latency_results::ResultsDir::open(std::path::Path::new(&dir)).expect("a results folder");
    let files = dir.data_files().expect("its data files");
    let runs: Vec<_> = files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "parquet"))
        .map(|f| latency_results::runfile::read(&dir.root().join(f)).expect("a run file"))
        .collect();
    let records: usize = runs.iter().flat_map(|(b, _)| b).map(|b| b.num_rows()).sum();
    println!("codecs: {} run files, {records} records", runs.len());
    let delta = |b: WriterPropertiesBuilder| {
        ["probe_id", "tsc", "seq", "hw_ns"]
            .into_iter()
            .fold(b, |b, c| b.set_column_encoding(ColumnPath::from(c), Encoding::DELTA_BINARY_PACKED))
    };
    let zstd = |l| Compression::ZSTD(ZstdLevel::try_new(l).unwrap());
    let candidates: Vec<(&str, Compression, bool)> = vec![
        ("plain, zstd 1", zstd(1), false),
        ("plain, zstd 3", zstd(3), false),
        ("plain, lz4", Compression::LZ4_RAW, false),
        ("plain, snappy", Compression::SNAPPY, false),
        ("delta, none", Compression::UNCOMPRESSED, true),
        ("delta, lz4", Compression::LZ4_RAW, true),
        ("delta, snappy", Compression::SNAPPY, true),
        ("delta, zstd 1", zstd(1), true),
        ("delta, zstd 3", zstd(3), true),
    ];
    let schema = latency_proto::run_file_schema();
    for (name, compression, deltas) in candidates {
        let t = Instant::now();
        let mut written = Vec::new();
        for (batches, meta) in &runs {
            let b = WriterProperties::builder()
                .set_compression(compression)
                .set_dictionary_enabled(false)
                .set_max_row_group_row_count(Some(1 << 20))
                .set_key_value_metadata(Some(meta.to_kv()));
            let props = if deltas { delta(b) } else { b }.build();
            let mut buf = Vec::new();
            let mut w = ArrowWriter::try_new(&mut buf, Arc::clone(&schema), Some(props)).unwrap();
            for b in batches {
                let mut columns = b.columns().to_vec();
                columns.push(Arc::new(arrow_array::UInt32Array::from(vec![meta.run; b.num_rows()])));
                w.write(&arrow_array::RecordBatch::try_new(Arc::clone(&schema), columns).unwrap()).unwrap();
            }
            w.close().unwrap();
            written.push(Bytes::from(buf));
        }
        let write_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let mut read = 0;
        for bytes in &written {
            let builder = ParquetRecordBatchReaderBuilder::try_new(bytes.clone()).unwrap();
            let mask = ProjectionMask::roots(builder.parquet_schema(), [0, 1, 2, 5]);
            for b in builder.with_projection(mask).with_batch_size(1 << 16).build().unwrap() {
                read += b.unwrap().num_rows();
            }
        }
        assert_eq!(read, records);
        let bytes: usize = written.iter().map(Bytes::len).sum();
        println!(
            "codecs: {name:<14} {:>7.1} MB  write {write_s:.2} s  read {:.2} s (one thread)",
            bytes as f64 / 1e6,
            t.elapsed().as_secs_f64()
        );
    }
}

//! The results history: finished studies in hive-partitioned Parquet tables, in a local folder or
//! an S3-compatible bucket (through `object_store`).
//!
//! ```text
//! <store>/rows/date=YYYY-MM-DD/study=<id>/part-0.parquet       (history::row::Row)
//! <store>/estimates/date=YYYY-MM-DD/study=<id>/part-0.parquet  (history::row::Estimate)
//! ```
//!
//! Adding writes the estimates first and the rows last, the rows only if they are not there yet
//! (a create-only put: an atomic rename on a folder, a conditional PUT on S3). A study is in the
//! history exactly when its rows object exists: an add killed half-way leaves at most estimates
//! without rows, which no reader of the history counts and the next add of that study replaces.
//! The id depends only on the study (name, start, plan and run data), so adding it again changes
//! nothing.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutPayload};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use latency_analysis as analysis;
use latency_analysis::AnalysisError;
use latency_results::ResultsDir;
use latency_results::SessionKind;
use latency_results::history::row::{self, Estimate, Row};
use latency_results::history::table::{ColumnError, Micros};
use latency_results::provenance::Provenance;

/// Why the history could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store's URL cannot be used.
    #[error("history store `{url}`: {message}")]
    Url {
        /// The URL.
        url: String,
        /// What is wrong.
        message: String,
    },
    /// An object could not be read or written.
    #[error("history store `{url}`: {path}: {source}")]
    Object {
        /// The store's URL.
        url: String,
        /// The object.
        path: String,
        /// What failed.
        source: object_store::Error,
    },
    /// A table could not be encoded, or an object is not a Parquet file.
    #[error("history store `{url}`: {path}: {source}")]
    Parquet {
        /// The store's URL.
        url: String,
        /// The object.
        path: String,
        /// The error.
        source: parquet::errors::ParquetError,
    },
    /// A table's records could not be built or read.
    #[error("history store `{url}`: {path}: {source}")]
    Arrow {
        /// The store's URL.
        url: String,
        /// The object.
        path: String,
        /// The error.
        source: arrow_schema::ArrowError,
    },
    /// An object holds something else than the history's tables.
    #[error("history store `{url}`: {path}: {source}")]
    Columns {
        /// The store's URL.
        url: String,
        /// The object.
        path: String,
        /// The column that is missing or of another type.
        source: ColumnError,
    },
    /// The results folder could not be read or analysed.
    #[error(transparent)]
    Analysis(#[from] AnalysisError),
    /// The results folder holds no finished study.
    #[error("{dir}: {message}")]
    Unfinished {
        /// The folder.
        dir: String,
        /// Why it cannot be added.
        message: String,
    },
}

/// A study in the store: its partition values.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct StudyKey {
    /// `YYYY-MM-DD` of its start (UTC).
    pub date: String,
    /// Its id ([`row::study_id`]).
    pub study: String,
}

/// A row read back, with its study.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredRow {
    /// The study.
    pub key: StudyKey,
    /// The row.
    pub row: Row,
}

/// What `add` did (`history add` prints it as a JSON line).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Added {
    /// The study's key.
    pub key: StudyKey,
    /// Whether it was in the store already (then nothing was written).
    pub already: bool,
    /// Rows written.
    pub rows: usize,
    /// Estimates written.
    pub estimates: usize,
}

/// A history store.
pub struct Store {
    inner: Arc<dyn ObjectStore>,
    url: String,
    rt: tokio::runtime::Runtime,
}

impl Store {
    /// Open `url`: `s3://bucket[/prefix]` (credentials, region and endpoint from the usual
    /// `AWS_*` variables; `AWS_ALLOW_HTTP=true` for a plain-HTTP endpoint), else a local folder
    /// (created if missing; `file://` accepted).
    pub fn open(url: &str) -> Result<Store, StoreError> {
        Store::open_with(url, std::env::vars())
    }

    /// Open `url` with the `AWS_*` settings among `vars` (instead of the environment's).
    pub fn open_with(url: &str, vars: impl IntoIterator<Item = (String, String)>) -> Result<Store, StoreError> {
        let bad = |message: String| StoreError::Url { url: url.to_string(), message };
        let inner: Arc<dyn ObjectStore> = if let Some(rest) = url.strip_prefix("s3://") {
            // TLS on ring; an error only says a provider is installed already.
            let _ = rustls::crypto::ring::default_provider().install_default();
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(bad("no bucket: expected s3://BUCKET[/PREFIX]".into()));
            }
            let mut builder = object_store::aws::AmazonS3Builder::new();
            for (key, value) in vars {
                if key.starts_with("AWS_")
                    && let Ok(k) = key.to_ascii_lowercase().parse()
                {
                    builder = builder.with_config(k, value);
                }
            }
            let s3 = builder.with_bucket_name(bucket).build().map_err(|e| bad(e.to_string()))?;
            let prefix = prefix.trim_matches('/');
            if prefix.is_empty() { Arc::new(s3) } else { Arc::new(object_store::prefix::PrefixStore::new(s3, prefix)) }
        } else if url.contains("://") && !url.starts_with("file://") {
            return Err(bad("expected s3://BUCKET[/PREFIX] or a folder".into()));
        } else {
            let dir = url.strip_prefix("file://").unwrap_or(url);
            std::fs::create_dir_all(dir).map_err(|e| bad(e.to_string()))?;
            Arc::new(object_store::local::LocalFileSystem::new_with_prefix(dir).map_err(|e| bad(e.to_string()))?)
        };
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| bad(e.to_string()))?;
        Ok(Store { inner, url: url.to_string(), rt })
    }

    /// The store's URL, as given.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn object_err(&self, path: &ObjectPath) -> impl FnOnce(object_store::Error) -> StoreError + '_ {
        let path = path.to_string();
        move |source| StoreError::Object { url: self.url.clone(), path, source }
    }

    fn parquet_err(&self, path: &ObjectPath) -> impl Fn(parquet::errors::ParquetError) -> StoreError + '_ {
        let path = path.to_string();
        move |source| StoreError::Parquet { url: self.url.clone(), path: path.clone(), source }
    }

    fn arrow_err(&self, path: &ObjectPath) -> impl Fn(arrow_schema::ArrowError) -> StoreError + '_ {
        let path = path.to_string();
        move |source| StoreError::Arrow { url: self.url.clone(), path: path.clone(), source }
    }

    /// Add the finished study in `dir` (analysed first if its summary is not current).
    pub fn add(&self, dir: &ResultsDir) -> Result<Added, StoreError> {
        let prov = Provenance::read(dir).map_err(AnalysisError::from)?;
        let unfinished = |message: &str| StoreError::Unfinished {
            dir: dir.root().display().to_string(),
            message: message.to_string(),
        };
        if prov.ended.is_none() {
            return Err(unfinished("the study has not ended (interrupted or still running): resume it first"));
        }
        let secs = latency_results::parse_utc(&prov.started)
            .ok_or_else(|| unfinished(&format!("provenance.json: start time `{}` is not UTC", prov.started)))?;
        let summary = analysis::current_summary(dir)?;
        let key = StudyKey { date: prov.started[..10].to_string(), study: row::study_id(&prov, &summary) };
        let rows_path = table_path("rows", &key);
        match self.rt.block_on(self.inner.head(&rows_path)) {
            Ok(_) => return Ok(Added { key, already: true, rows: 0, estimates: 0 }),
            Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(self.object_err(&rows_path)(e)),
        }
        let report = dir.root().join("report.html");
        let report = report.is_file().then(|| std::path::absolute(&report).unwrap_or(report).display().to_string());
        let rows = row::rows(&summary, &prov, Micros(secs as i64 * 1_000_000), report);
        let estimates = estimates(dir)?;

        let written = self.put_study(&key, &rows, &estimates)?;
        Ok(Added {
            key,
            already: !written,
            rows: if written { rows.len() } else { 0 },
            estimates: if written { estimates.len() } else { 0 },
        })
    }

    /// Write a study's tables: the estimates, then the rows unless they exist (then `false`: the
    /// study was there already).
    pub fn put_study(&self, key: &StudyKey, rows: &[Row], estimates: &[Estimate]) -> Result<bool, StoreError> {
        let est_path = table_path("estimates", key);
        let bytes = self.parquet(&est_path, Estimate::to_batch(estimates))?;
        self.rt.block_on(self.inner.put(&est_path, bytes)).map_err(self.object_err(&est_path))?;
        if latency_results::failpoint::hit("history-add-killed") {
            std::process::abort();
        }
        let rows_path = table_path("rows", key);
        let bytes = self.parquet(&rows_path, Row::to_batch(rows))?;
        match self.rt.block_on(self.inner.put_opts(&rows_path, bytes, PutMode::Create.into())) {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(self.object_err(&rows_path)(e)),
        }
    }

    fn parquet(
        &self,
        path: &ObjectPath,
        batch: Result<arrow_array::RecordBatch, arrow_schema::ArrowError>,
    ) -> Result<PutPayload, StoreError> {
        let parquet = self.parquet_err(path);
        let batch = batch.map_err(self.arrow_err(path))?;
        let zstd = ZstdLevel::try_new(3).map_err(&parquet)?;
        let props = WriterProperties::builder().set_compression(Compression::ZSTD(zstd)).build();
        let mut w = ArrowWriter::try_new(Vec::new(), batch.schema(), Some(props)).map_err(&parquet)?;
        w.write(&batch).map_err(&parquet)?;
        Ok(w.into_inner().map_err(&parquet)?.into())
    }

    /// The studies in the store (those whose rows exist), in (date, id) order.
    pub fn studies(&self) -> Result<Vec<StudyKey>, StoreError> {
        let prefix = ObjectPath::from("rows");
        let metas: Vec<_> =
            self.rt.block_on(self.inner.list(Some(&prefix)).try_collect()).map_err(self.object_err(&prefix))?;
        let mut keys: Vec<StudyKey> = metas.iter().filter_map(|m| study_key(&m.location)).collect();
        keys.sort();
        keys.dedup();
        Ok(keys)
    }

    /// Every row of every study in the store, in (date, id) order.
    pub fn rows(&self) -> Result<Vec<StoredRow>, StoreError> {
        let keys = self.studies()?;
        let read = futures_util::stream::iter(keys.iter().map(|k| async move {
            let rows: Vec<Row> = self.read_table(&table_path("rows", k), Row::from_batch).await?;
            Ok::<_, StoreError>(rows.into_iter().map(|row| StoredRow { key: k.clone(), row }).collect::<Vec<_>>())
        }))
        .buffered(16)
        .try_collect::<Vec<_>>();
        Ok(self.rt.block_on(read)?.into_iter().flatten().collect())
    }

    /// The per-probe estimates of one study.
    pub fn estimates(&self, key: &StudyKey) -> Result<Vec<Estimate>, StoreError> {
        self.rt.block_on(self.read_table(&table_path("estimates", key), Estimate::from_batch))
    }

    async fn read_table<T>(
        &self,
        path: &ObjectPath,
        decode: fn(&arrow_array::RecordBatch) -> Result<Vec<T>, ColumnError>,
    ) -> Result<Vec<T>, StoreError> {
        let get = self.inner.get(path).await.map_err(self.object_err(path))?;
        let bytes: Bytes = get.bytes().await.map_err(self.object_err(path))?;
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .and_then(|b| b.with_batch_size(1 << 16).build())
            .map_err(self.parquet_err(path))?;
        let mut out = Vec::new();
        for batch in reader {
            let batch = batch.map_err(self.arrow_err(path))?;
            let columns = |source| StoreError::Columns { url: self.url.clone(), path: path.to_string(), source };
            out.extend(decode(&batch).map_err(columns)?);
        }
        Ok(out)
    }
}

/// `<table>/date=…/study=…/part-0.parquet`.
fn table_path(table: &str, key: &StudyKey) -> ObjectPath {
    ObjectPath::from(format!("{table}/date={}/study={}/part-0.parquet", key.date, key.study))
}

/// The key of a rows object's path (`None` for anything else found under `rows/`).
fn study_key(path: &ObjectPath) -> Option<StudyKey> {
    let parts: Vec<_> = path.parts().collect();
    let [_, date, study, file] = parts.as_slice() else { return None };
    let date = date.as_ref().strip_prefix("date=")?;
    let study = study.as_ref().strip_prefix("study=")?;
    (file.as_ref() == "part-0.parquet").then(|| StudyKey { date: date.into(), study: study.into() })
}

/// The study's estimates as rows of the `estimates` table.
fn estimates(dir: &ResultsDir) -> Result<Vec<Estimate>, StoreError> {
    let mut out = Vec::new();
    for s in analysis::estimates::probe_estimates(dir)? {
        let kind = if s.kind == SessionKind::Null { "null" } else { "program" };
        out.extend(s.estimates.iter().map(|&(probe, estimate_ns)| Estimate {
            program: s.program.clone(),
            level: s.level.clone(),
            kind: kind.into(),
            session: s.session,
            probe,
            estimate_ns,
        }));
    }
    Ok(out)
}

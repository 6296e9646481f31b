//! The results history: finished studies in hive-partitioned Parquet tables, in a local folder or
//! an S3-compatible bucket (through `object_store`).
//!
//! ```text
//! <store>/rows/date=YYYY-MM-DD/study=<id>/part-0.parquet       (history::row::Row)
//! <store>/estimates/date=YYYY-MM-DD/study=<id>/part-0.parquet  (history::row::Estimate)
//! ```
//!
//! Only adding a study creates a store ([`Store::create`]: a folder store's folder is made with its
//! first object); reading one that is not there is an error ([`Store::open`]), so a mistyped URL
//! never reads as an empty history.
//!
//! Adding takes only a study the history can trust ([`admit`]); it writes the
//! estimates first and the rows last, the rows only if they are not there yet (a create-only put:
//! an atomic rename on a folder, a conditional PUT on S3). A study is in the history exactly when
//! its rows object exists: an add killed half-way leaves at most estimates without rows, which no
//! reader of the history counts and the next add of that study replaces. The id depends only on
//! the study (name, start, plan and run data), so adding it again finds it: it is there already
//! when its tables read back and hold what the folder gives; a table that cannot be read
//! (truncated, not Parquet) is rewritten; a study stored with other figures is left as it is and
//! the add refused.

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutPayload};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use latency_results::ResultsDir;
use latency_results::history::row::{Annotation, Confirmation, Estimate, HEADLINE, Row};
use latency_results::history::table::ColumnError;
use latency_results::history::table::Micros;

use crate::admit::{self, Study};
use crate::error::Refusal;
// The store's errors and keys, where its users have always found them.
pub use crate::error::StoreError;
use crate::identity::StudyIdentity;
pub use crate::identity::StudyKey;

/// A row read back, with its study.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredRow {
    /// The study.
    pub key: StudyKey,
    /// The row.
    pub row: Row,
}

impl StoredRow {
    /// The identity of its study (which series it belongs to).
    pub fn identity(&self) -> StudyIdentity {
        StudyIdentity::of_row(&self.row)
    }
}

/// What `add` did (`history add` prints it as a JSON line).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Added {
    /// The study's key.
    pub key: StudyKey,
    /// The series it belongs to (`name`, `testbed`).
    #[serde(flatten)]
    pub identity: StudyIdentity,
    /// Whether it was in the store already, its tables read back as the folder gives them (then
    /// nothing was written).
    pub already: bool,
    /// Rows written.
    pub rows: usize,
    /// Estimates written.
    pub estimates: usize,
    /// The tables that were in the store but could not be read (truncated, not Parquet), and were
    /// written again: `rows`, `estimates`.
    #[serde(default)]
    pub repaired: Vec<String>,
    /// Why each of them could not be read.
    #[serde(skip)]
    pub damage: Vec<String>,
}

/// Where a store keeps its objects.
enum Place {
    /// A local folder (created with the first object written).
    Folder(PathBuf),
    /// A bucket and prefix on S3.
    S3,
}

/// A history store.
pub struct Store {
    inner: Arc<dyn ObjectStore>,
    place: Place,
    url: String,
    rt: tokio::runtime::Runtime,
}

/// A table of a study as found in the store.
enum Stored<T> {
    /// Not there.
    Missing,
    /// There, but it cannot be read as the table.
    Damaged(StoreError),
    /// Read back.
    Found(Vec<T>),
}

impl Store {
    /// Open the store at `url`, which must be there: `s3://bucket[/prefix]` (credentials, region
    /// and endpoint from the usual `AWS_*` variables; `AWS_ALLOW_HTTP=true` for a plain-HTTP
    /// endpoint), there once an object is under the prefix; else a local folder (`file://`
    /// accepted), there when the folder exists. A store that is not there is a
    /// [`StoreError::Url`] naming it: only [`Store::create`] makes one.
    pub fn open(url: &str) -> Result<Store, StoreError> {
        Store::open_with(url, std::env::vars())
    }

    /// [`Store::open`] with the `AWS_*` settings among `vars` (instead of the environment's).
    pub fn open_with(url: &str, vars: impl IntoIterator<Item = (String, String)>) -> Result<Store, StoreError> {
        let store = Store::connect(url, vars)?;
        store.check_there()?;
        Ok(store)
    }

    /// Open the store at `url` to add studies to it, creating it if it is not there (a folder
    /// store's folder is made with the first object written, so a refused study leaves none).
    pub fn create(url: &str) -> Result<Store, StoreError> {
        Store::create_with(url, std::env::vars())
    }

    /// [`Store::create`] with the `AWS_*` settings among `vars`.
    pub fn create_with(url: &str, vars: impl IntoIterator<Item = (String, String)>) -> Result<Store, StoreError> {
        Store::connect(url, vars)
    }

    fn connect(url: &str, vars: impl IntoIterator<Item = (String, String)>) -> Result<Store, StoreError> {
        let bad = |message: String| StoreError::Url { url: url.to_string(), message };
        let (inner, place): (Arc<dyn ObjectStore>, Place) = if let Some(rest) = url.strip_prefix("s3://") {
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
            let inner: Arc<dyn ObjectStore> = if prefix.is_empty() {
                Arc::new(s3)
            } else {
                Arc::new(object_store::prefix::PrefixStore::new(s3, prefix))
            };
            (inner, Place::S3)
        } else if url.contains("://") && !url.starts_with("file://") {
            return Err(bad("expected s3://BUCKET[/PREFIX] or a folder".into()));
        } else {
            let dir = url.strip_prefix("file://").unwrap_or(url);
            if dir.is_empty() {
                return Err(bad("no folder named".into()));
            }
            let dir = std::path::absolute(dir).map_err(|e| bad(e.to_string()))?;
            // The file system from its root, under the folder's path: objects are written (and
            // their folders made) where they belong, whether the folder exists yet or not.
            let prefix = ObjectPath::from_absolute_path(&dir).map_err(|e| bad(e.to_string()))?;
            let local = object_store::local::LocalFileSystem::new();
            (Arc::new(object_store::prefix::PrefixStore::new(local, prefix)), Place::Folder(dir))
        };
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| bad(e.to_string()))?;
        Ok(Store { inner, place, url: url.to_string(), rt })
    }

    /// Whether the store is there (see [`Store::open`]).
    fn check_there(&self) -> Result<(), StoreError> {
        let missing = |what: &str| StoreError::Url {
            url: self.url.clone(),
            message: format!(
                "no history store: {what} (only `orchestrate history add DIR --store {}` creates one)",
                self.url
            ),
        };
        match &self.place {
            Place::Folder(dir) if dir.is_dir() => Ok(()),
            Place::Folder(dir) if dir.exists() => Err(missing(&format!("{} is not a folder", dir.display()))),
            Place::Folder(dir) => Err(missing(&format!("the folder {} does not exist", dir.display()))),
            Place::S3 => {
                for table in ["rows", "estimates"] {
                    let prefix = ObjectPath::from(table);
                    match self.rt.block_on(self.inner.list(Some(&prefix)).next()) {
                        Some(Ok(_)) => return Ok(()),
                        None | Some(Err(object_store::Error::NotFound { .. })) => {}
                        Some(Err(e)) => return Err(self.object_err(&prefix)(e)),
                    }
                }
                Err(missing("nothing is under this prefix (or its bucket is not there)"))
            }
        }
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

    /// Add the study of the results folder `dir` (analysed first if its summary is not current),
    /// if the history takes it ([`admit::study`]): written when it is not in the store; its
    /// damaged tables rewritten when it is; nothing written when its tables read back as the
    /// folder gives them (`already`), or when they hold other figures (refused,
    /// [`Refusal::Differs`]).
    pub fn add(&self, dir: &ResultsDir) -> Result<Added, StoreError> {
        let study = admit::study(dir)?;
        self.put(dir, &study, true)
    }

    fn put(&self, dir: &ResultsDir, study: &Study, first: bool) -> Result<Added, StoreError> {
        let key = &study.key;
        let (rows_path, est_path) = (table_path("rows", key), table_path("estimates", key));
        let added = |already, rows, estimates, repaired, damage| Added {
            key: key.clone(),
            identity: study.identity.clone(),
            already,
            rows,
            estimates,
            repaired,
            damage,
        };
        let stored_rows = self.rt.block_on(self.stored(&rows_path, Row::from_batch))?;
        if matches!(stored_rows, Stored::Missing) {
            if self.put_study(key, &study.rows, &study.estimates)? {
                return Ok(added(false, study.rows.len(), study.estimates.len(), Vec::new(), Vec::new()));
            }
            // Another add of the study wrote its rows meanwhile: see what it wrote.
            if first {
                return self.put(dir, study, false);
            }
        }
        let stored_estimates = self.rt.block_on(self.stored(&est_path, Estimate::from_batch))?;
        let differs = |what: String| StoreError::Unfinished {
            dir: dir.root().display().to_string(),
            reason: Box::new(Refusal::Differs {
                dir: dir.root().display().to_string(),
                url: self.url.clone(),
                date: key.date.clone(),
                study: key.study.clone(),
                what,
            }),
        };
        if let Stored::Found(stored) = &stored_rows
            && let Some(what) = rows_differ(stored, &study.rows)
        {
            return Err(differs(what));
        }
        if let Stored::Found(stored) = &stored_estimates
            && let Some(what) = estimates_differ(stored, &study.estimates)
        {
            return Err(differs(what));
        }
        let (mut repaired, mut damage) = (Vec::new(), Vec::new());
        let (mut rows, mut estimates) = (0, 0);
        // Estimates first, rows last, as a first add writes them.
        if !matches!(stored_estimates, Stored::Found(_)) {
            self.put_table(&est_path, Estimate::to_batch(&study.estimates))?;
            repaired.push("estimates".to_string());
            damage.push(describe(&stored_estimates, &est_path));
            estimates = study.estimates.len();
        }
        if !matches!(stored_rows, Stored::Found(_)) {
            self.put_table(&rows_path, Row::to_batch(&study.rows))?;
            repaired.push("rows".to_string());
            damage.push(describe(&stored_rows, &rows_path));
            rows = study.rows.len();
        }
        Ok(added(repaired.is_empty(), rows, estimates, repaired, damage))
    }

    /// A table of a study as the store holds it.
    async fn stored<T>(
        &self,
        path: &ObjectPath,
        decode: fn(&arrow_array::RecordBatch) -> Result<Vec<T>, ColumnError>,
    ) -> Result<Stored<T>, StoreError> {
        match self.read_table(path, decode).await {
            Ok(found) => Ok(Stored::Found(found)),
            Err(StoreError::Object { source: object_store::Error::NotFound { .. }, .. }) => Ok(Stored::Missing),
            Err(e) if e.is_damaged_table() => Ok(Stored::Damaged(e)),
            Err(e) => Err(e),
        }
    }

    /// Write a study's tables: the estimates, then the rows unless they exist (then `false`: the
    /// study was there already).
    pub fn put_study(&self, key: &StudyKey, rows: &[Row], estimates: &[Estimate]) -> Result<bool, StoreError> {
        let est_path = table_path("estimates", key);
        self.put_table(&est_path, Estimate::to_batch(estimates))?;
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
        self.keys("rows")
    }

    /// Write a table's Parquet object at `path`, replacing any.
    fn put_table(
        &self,
        path: &ObjectPath,
        batch: Result<arrow_array::RecordBatch, arrow_schema::ArrowError>,
    ) -> Result<(), StoreError> {
        let bytes = self.parquet(path, batch)?;
        self.rt.block_on(self.inner.put(path, bytes)).map_err(self.object_err(path))?;
        Ok(())
    }

    /// Every row of `table` (`annotations`, `confirmations`), in (date, id) order of its study.
    fn table_rows<T: Send>(
        &self,
        table: &str,
        decode: fn(&arrow_array::RecordBatch) -> Result<Vec<T>, ColumnError>,
    ) -> Result<Vec<T>, StoreError> {
        let keys = self.keys(table)?;
        let read = futures_util::stream::iter(
            keys.iter().map(|k| async move { self.read_table(&table_path(table, k), decode).await }),
        )
        .buffered(16)
        .try_collect::<Vec<_>>();
        Ok(self.rt.block_on(read)?.into_iter().flatten().collect())
    }

    /// The studies `table` holds a part of, in (date, id) order.
    fn keys(&self, table: &str) -> Result<Vec<StudyKey>, StoreError> {
        let prefix = ObjectPath::from(table);
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

    /// Acknowledge `study` (its id, as `history list` gives it) with `reason`: the `annotations`
    /// table's row of that study, replacing any earlier one; [`StoreError::Url`] when the store
    /// has no such study.
    pub fn annotate(&self, study: &str, reason: &str) -> Result<StudyKey, StoreError> {
        let studies = self.studies()?;
        let Some(key) = studies.iter().find(|k| k.study == study).cloned() else {
            return Err(StoreError::Url {
                url: self.url.clone(),
                message: format!("no study `{study}` (`orchestrate history list` gives the ids); nothing annotated"),
            });
        };
        let row = Annotation {
            study: study.to_string(),
            reason: reason.to_string(),
            time: Micros(latency_results::now_micros()),
        };
        let path = table_path("annotations", &key);
        self.put_table(&path, Annotation::to_batch(&[row]))?;
        Ok(key)
    }

    /// Record that study `by` re-measured night `night` (both ids in the store): the
    /// `confirmations` table's row of `by`; [`StoreError::Url`] when either is missing.
    pub fn confirm(&self, by: &str, night: &str) -> Result<StudyKey, StoreError> {
        let studies = self.studies()?;
        let find = |id: &str| studies.iter().find(|k| k.study == id).cloned();
        let (Some(key), Some(_)) = (find(by), find(night)) else {
            return Err(StoreError::Url {
                url: self.url.clone(),
                message: format!("no study `{by}` or `{night}` in the store; no confirmation recorded"),
            });
        };
        let row = Confirmation {
            study: by.to_string(),
            confirms: night.to_string(),
            time: Micros(latency_results::now_micros()),
        };
        let path = table_path("confirmations", &key);
        self.put_table(&path, Confirmation::to_batch(&[row]))?;
        Ok(key)
    }

    /// Every confirmation in the store, in (date, id) order of its study.
    pub fn confirmations(&self) -> Result<Vec<Confirmation>, StoreError> {
        self.table_rows("confirmations", Confirmation::from_batch)
    }

    /// Every annotation in the store, in (date, id) order of its study.
    pub fn annotations(&self) -> Result<Vec<Annotation>, StoreError> {
        self.table_rows("annotations", Annotation::from_batch)
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

/// Why a table was written again.
fn describe<T>(stored: &Stored<T>, path: &ObjectPath) -> String {
    match stored {
        Stored::Damaged(e) => e.to_string(),
        _ => format!("{path}: not there"),
    }
}

/// Whether two figures are the same: equal, both not numbers, or within a few units of their last
/// place (`summary.json` is read back by a parser that may differ from the written value in its
/// last bit, so a study added from its analysis and again from its summary file is the same).
fn same_figure(a: f64, b: f64) -> bool {
    a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

/// Whether two cells of a row (as JSON) are the same: figures by [`same_figure`], also inside a
/// column of JSON text (`quantiles_json`); anything else (text, counts, nulls) exactly.
fn same_cell(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            x.as_f64().zip(y.as_f64()).is_some_and(|(x, y)| same_figure(x, y))
        }
        (Value::String(x), Value::String(y)) if x != y => {
            match (serde_json::from_str::<Value>(x), serde_json::from_str::<Value>(y)) {
                (Ok(x @ (Value::Object(_) | Value::Array(_))), Ok(y)) => same_cell(&x, &y),
                _ => false,
            }
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_cell(v, w)))
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(v, w)| same_cell(v, w)),
        _ => a == b,
    }
}

/// The first difference between the rows the store holds and the folder's (the `report` column,
/// a path on the adding machine, aside), if any.
fn rows_differ(stored: &[Row], ours: &[Row]) -> Option<String> {
    if stored.len() != ours.len() {
        return Some(format!("{} rows in the store, {} from the results folder", stored.len(), ours.len()));
    }
    for (a, b) in stored.iter().zip(ours) {
        // As JSON, so that NaN figures (null) compare equal and the column can be named.
        let (Ok(serde_json::Value::Object(a_cols)), Ok(serde_json::Value::Object(b_cols))) =
            (serde_json::to_value(a), serde_json::to_value(b))
        else {
            return Some(format!("program {}: its row cannot be compared", a.program));
        };
        for (column, value) in &a_cols {
            let theirs = b_cols.get(column).unwrap_or(&serde_json::Value::Null);
            if column != "report" && !same_cell(value, theirs) {
                let level = a.level.as_ref().map(|l| format!(" at {l}")).unwrap_or_default();
                let mode = if a.mode == HEADLINE { "headline".to_string() } else { format!("mode {}", a.mode) };
                return Some(format!(
                    "program {}{level} {mode}: `{column}` is {value} in the store, {theirs} from the results folder",
                    a.program
                ));
            }
        }
    }
    None
}

/// The first difference between the estimates the store holds and the folder's, if any.
fn estimates_differ(stored: &[Estimate], ours: &[Estimate]) -> Option<String> {
    if stored.len() != ours.len() {
        return Some(format!("{} estimates in the store, {} from the results folder", stored.len(), ours.len()));
    }
    let same = |a: &Estimate, b: &Estimate| {
        (&a.program, &a.level, &a.kind, a.session, a.probe) == (&b.program, &b.level, &b.kind, b.session, b.probe)
            && same_figure(a.estimate_ns, b.estimate_ns)
    };
    let (a, b) = stored.iter().zip(ours).find(|(a, b)| !same(a, b))?;
    Some(format!(
        "estimate of {} session {} probe {}: {} ns in the store, {} ns from the results folder",
        a.program, a.session, a.probe, a.estimate_ns, b.estimate_ns
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use latency_results::history::table::Micros;
    use latency_results::summary::Quantiles;

    fn row(p50_ns: f64) -> Row {
        Row {
            name: "nightly".into(),
            time: Micros(1_790_000_000_000_000),
            ended: None,
            plan_hash: "0".repeat(64),
            tool_version: "0".into(),
            git_commit: String::new(),
            testbed: "sim".into(),
            host_facts: "{}".into(),
            seed: u64::MAX,
            report: None,
            program: "forward".into(),
            level: None,
            mode: HEADLINE.into(),
            bitstream_sha256: String::new(),
            p50_ns,
            p50_ci95_lo_ns: Some(12.5),
            p50_ci95_hi_ns: None,
            p99_ns: f64::NAN,
            p99_ci95_lo_ns: None,
            p99_ci95_hi_ns: None,
            quantiles_json: serde_json::to_string(&[(50.0, p50_ns), (99.0, 170.0)].into_iter().collect::<Quantiles>())
                .unwrap(),
            null_offset_ns: 24.0,
            reproducibility_ns: 0.0,
            sessions: 1,
            probes: 2000,
            failed_runs: 0,
            problems: 0,
            healthy: true,
            vendor_violations: None,
        }
    }

    #[test]
    fn rows_differ_by_their_figures_not_by_the_last_bit_of_a_parse_nor_by_the_report() {
        let p50 = 13.866782006920413_f64;
        let next = f64::from_bits(p50.to_bits() - 1);
        assert_eq!(rows_differ(&[row(p50)], &[row(next)]), None);
        let mut moved = row(p50);
        moved.report = Some("/elsewhere/report.html".into());
        assert_eq!(rows_differ(&[row(p50)], &[moved]), None);
        let what = rows_differ(&[row(1.0)], &[row(p50)]).unwrap();
        assert!(what.contains("`p50_ns` is 1.0 in the store, 13.866782006920413 from the results folder"), "{what}");
        let mut seed = row(p50);
        seed.seed -= 1;
        assert!(rows_differ(&[row(p50)], &[seed]).unwrap().contains("`seed`"));
        assert!(rows_differ(&[row(p50)], &[]).unwrap().contains("1 rows in the store, 0"));
    }

    #[test]
    fn a_folder_that_does_not_exist_is_no_store_until_a_study_is_written() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("TYPO");
        for url in [dir.display().to_string(), format!("file://{}", dir.display())] {
            let Err(e) = Store::open(&url) else { panic!("{url} opened") };
            assert!(matches!(e, StoreError::Url { .. }), "{e:?}");
            let text = e.to_string();
            assert!(text.contains(&url) && text.contains("no history store"), "{text}");
        }
        let store = Store::create(&dir.display().to_string()).unwrap();
        assert!(!dir.exists(), "created only with its first object");
        let key = StudyKey { date: "2026-11-01".into(), study: "s".into() };
        assert!(store.put_study(&key, &[], &[]).unwrap());
        let store = Store::open(&dir.display().to_string()).unwrap();
        assert_eq!(store.studies().unwrap(), [key]);
        std::fs::write(tmp.path().join("file"), b"").unwrap();
        let Err(e) = Store::open(&tmp.path().join("file").display().to_string()) else { panic!("a file opened") };
        assert!(e.to_string().contains("is not a folder"), "{e}");
    }
}

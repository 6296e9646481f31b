//! Arrow schema of the per-packet records the agent writes for each run.
//!
//! One row per packet copy seen by the receiver:
//!
//! | column      | type           | meaning |
//! |-------------|----------------|---------|
//! | `probe_id`  | UInt64         | id parsed from the probe payload |
//! | `port`      | UInt8          | 0 = pipeline copy (port P), 1 = bypass copy (port B) |
//! | `tsc`       | UInt64         | CPU TSC read right after the packet was dequeued |
//! | `seq`       | UInt64         | arrival sequence number on its port, from 0, per run |
//! | `frame_len` | UInt16         | frame length in bytes as received |
//! | `hw_ns`     | Int64 (null)   | reflect mode: sender adapter hardware-clock stamp in ns |
//!
//! TSC stamps are converted to ns with the TSC rate recorded in the run's provenance.
//!
//! A results folder's run files ([`run_file_schema`]) add the run number as a last column, `run`
//! (UInt32, the same in every row): their path names the program and session as hive partitions
//! (`program=…/session=…/run=R.parquet`), and a file name is no partition, so readers such as
//! DuckDB, pyarrow datasets and Spark see the run only as a column.

use std::sync::{Arc, OnceLock};

use arrow_array::builder::NullBufferBuilder;
use arrow_array::{ArrayRef, Int64Array, RecordBatch, UInt8Array, UInt16Array, UInt64Array};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef};

use crate::meta;

/// Version of the record schema, stored in the schema metadata under [`meta::SCHEMA_VERSION`].
pub const SCHEMA_VERSION: &str = "1";

/// Column names, in schema order.
pub mod col {
    /// Probe id column.
    pub const PROBE_ID: &str = "probe_id";
    /// Port column (see [`super::Port`]).
    pub const PORT: &str = "port";
    /// TSC stamp column.
    pub const TSC: &str = "tsc";
    /// Per-port arrival sequence column.
    pub const SEQ: &str = "seq";
    /// Frame length column.
    pub const FRAME_LEN: &str = "frame_len";
    /// Reflect-mode hardware-clock stamp column.
    pub const HW_NS: &str = "hw_ns";
    /// Run number column of run files.
    pub const RUN: &str = "run";
}

/// Which receiver port a packet copy arrived on. A capture on more than two ports (a multi-hop
/// path) numbers the further ports 2, 3, … in the `port` column, in the order they were given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Port {
    /// The copy that crossed the P4 pipeline.
    Pipeline = 0,
    /// The copy that took the bypass.
    Bypass = 1,
}

impl Port {
    /// Decode the `port` column value.
    pub fn from_u8(v: u8) -> Option<Port> {
        match v {
            0 => Some(Port::Pipeline),
            1 => Some(Port::Bypass),
            _ => None,
        }
    }
}

/// The schema of a results folder's run files: the record schema and the run number.
pub fn run_file_schema() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    SCHEMA
        .get_or_init(|| {
            let records = record_schema();
            let mut fields: Vec<Field> = records.fields().iter().map(|f| f.as_ref().clone()).collect();
            fields.push(Field::new(col::RUN, DataType::UInt32, false));
            Arc::new(Schema::new(fields).with_metadata(records.metadata().clone()))
        })
        .clone()
}

/// The record schema (shared, built once).
pub fn record_schema() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    SCHEMA
        .get_or_init(|| {
            let fields = vec![
                Field::new(col::PROBE_ID, DataType::UInt64, false),
                Field::new(col::PORT, DataType::UInt8, false),
                Field::new(col::TSC, DataType::UInt64, false),
                Field::new(col::SEQ, DataType::UInt64, false),
                Field::new(col::FRAME_LEN, DataType::UInt16, false),
                Field::new(col::HW_NS, DataType::Int64, true),
            ];
            Arc::new(Schema::new(fields).with_metadata([(meta::SCHEMA_VERSION, SCHEMA_VERSION)]))
        })
        .clone()
}

/// Column-wise builder of record batches in [`record_schema`]: one plain vector per column, which
/// [`RecordBuilder::finish`] hands to Arrow without copying, so that appending a record costs a
/// few stores (the agent appends one per packet).
pub struct RecordBuilder {
    /// Records each column has room for again after [`RecordBuilder::finish`].
    capacity: usize,
    probe_id: Vec<u64>,
    port: Vec<u8>,
    tsc: Vec<u64>,
    seq: Vec<u64>,
    frame_len: Vec<u16>,
    /// `hw_ns`' values (0 where null, as Arrow's builders write) and which are not null.
    hw_ns: Vec<i64>,
    hw_ns_valid: NullBufferBuilder,
}

impl Default for RecordBuilder {
    fn default() -> Self {
        RecordBuilder::with_capacity(0)
    }
}

impl RecordBuilder {
    /// A builder with room for `n` records, and again for `n` after each
    /// [`RecordBuilder::finish`] (more records than that are appended all the same).
    pub fn with_capacity(n: usize) -> Self {
        RecordBuilder {
            capacity: n,
            probe_id: Vec::with_capacity(n),
            port: Vec::with_capacity(n),
            tsc: Vec::with_capacity(n),
            seq: Vec::with_capacity(n),
            frame_len: Vec::with_capacity(n),
            hw_ns: Vec::with_capacity(n),
            hw_ns_valid: NullBufferBuilder::new(n),
        }
    }

    /// Append one record.
    #[inline]
    pub fn push(&mut self, probe_id: u64, port: Port, tsc: u64, seq: u64, frame_len: u16, hw_ns: Option<i64>) {
        self.push_index(probe_id, port as u8, tsc, seq, frame_len, hw_ns);
    }

    /// Append one record of the port numbered `port` (0 pipeline, 1 bypass, 2… further ports).
    #[inline]
    pub fn push_index(&mut self, probe_id: u64, port: u8, tsc: u64, seq: u64, frame_len: u16, hw_ns: Option<i64>) {
        self.probe_id.push(probe_id);
        self.port.push(port);
        self.tsc.push(tsc);
        self.seq.push(seq);
        self.frame_len.push(frame_len);
        self.hw_ns.push(hw_ns.unwrap_or(0));
        self.hw_ns_valid.append(hw_ns.is_some());
    }

    /// Records appended since the last [`RecordBuilder::finish`].
    pub fn len(&self) -> usize {
        self.probe_id.len()
    }

    /// Whether no record is pending.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Take the pending records as one batch (the builder is left empty, with its room).
    pub fn finish(&mut self) -> Result<RecordBatch, ArrowError> {
        fn take<T>(column: &mut Vec<T>, capacity: usize) -> Vec<T> {
            std::mem::replace(column, Vec::with_capacity(capacity))
        }
        let n = self.capacity;
        let columns: Vec<ArrayRef> = vec![
            Arc::new(UInt64Array::from(take(&mut self.probe_id, n))),
            Arc::new(UInt8Array::from(take(&mut self.port, n))),
            Arc::new(UInt64Array::from(take(&mut self.tsc, n))),
            Arc::new(UInt64Array::from(take(&mut self.seq, n))),
            Arc::new(UInt16Array::from(take(&mut self.frame_len, n))),
            Arc::new(Int64Array::try_new(take(&mut self.hw_ns, n).into(), self.hw_ns_valid.finish())?),
        ];
        RecordBatch::try_new(record_schema(), columns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Array;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int64Type, UInt8Type, UInt64Type};

    #[test]
    fn builder_round_trips_values_in_schema_order() {
        let mut b = RecordBuilder::with_capacity(2);
        b.push(7, Port::Pipeline, 1000, 0, 84, None);
        b.push(7, Port::Bypass, 900, 0, 84, Some(-5));
        let batch = b.finish().unwrap();
        assert_eq!(batch.schema(), record_schema());
        assert_eq!(record_schema().metadata()[meta::SCHEMA_VERSION], SCHEMA_VERSION);
        assert_eq!(batch.num_rows(), 2);
        assert_eq!(batch.column(1).as_primitive::<UInt8Type>().values(), &[0, 1]);
        assert_eq!(batch.column(2).as_primitive::<UInt64Type>().values(), &[1000, 900]);
        let hw = batch.column(5).as_primitive::<Int64Type>();
        assert!(hw.is_null(0));
        assert_eq!(hw.value(1), -5);
        assert!(b.is_empty());
    }

    /// One record: probe id, port, TSC, seq, frame length, hardware stamp.
    type Record = (u64, u8, u64, u64, u16, Option<i64>);

    /// The batch Arrow's own builders make of `records`, as `RecordBuilder` did before it kept
    /// plain vectors.
    fn with_arrow_builders(records: &[Record]) -> RecordBatch {
        use arrow_array::builder::{Int64Builder, UInt8Builder, UInt16Builder, UInt64Builder};
        let (mut id, mut port, mut tsc) = (UInt64Builder::new(), UInt8Builder::new(), UInt64Builder::new());
        let (mut seq, mut len, mut hw) = (UInt64Builder::new(), UInt16Builder::new(), Int64Builder::new());
        for &(i, p, t, s, l, h) in records {
            id.append_value(i);
            port.append_value(p);
            tsc.append_value(t);
            seq.append_value(s);
            len.append_value(l);
            hw.append_option(h);
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(id.finish()),
            Arc::new(port.finish()),
            Arc::new(tsc.finish()),
            Arc::new(seq.finish()),
            Arc::new(len.finish()),
            Arc::new(hw.finish()),
        ];
        RecordBatch::try_new(record_schema(), columns).unwrap()
    }

    #[test]
    fn builder_makes_the_batches_of_arrow_builders_and_is_reused() {
        let mut b = RecordBuilder::with_capacity(4);
        // Past its capacity, without hw_ns, with some, with all: the same batch each time.
        let batches: [Vec<Record>; 4] = [
            (0..10).map(|k| (k, (k % 3) as u8, 1000 + k, k, 64, None)).collect(),
            (0..3).map(|k| (k, 1, k, k, 128, (k == 1).then_some(-7))).collect(),
            (0..5).map(|k| (k, 0, k, k, 1500, Some(k as i64))).collect(),
            vec![],
        ];
        for records in &batches {
            for &(i, p, t, s, l, h) in records {
                b.push_index(i, p, t, s, l, h);
            }
            assert_eq!(b.len(), records.len());
            let batch = b.finish().unwrap();
            let expected = with_arrow_builders(records);
            assert_eq!(batch, expected);
            // Null where Arrow's builders have nulls, no null buffer where they have none.
            assert_eq!(batch.column(5).nulls(), expected.column(5).nulls());
            assert!(b.is_empty());
        }
    }

    #[test]
    fn port_codes_are_stable() {
        assert_eq!(Port::from_u8(0), Some(Port::Pipeline));
        assert_eq!(Port::from_u8(1), Some(Port::Bypass));
        assert_eq!(Port::from_u8(2), None);
    }
}

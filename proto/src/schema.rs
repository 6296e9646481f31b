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

use arrow_array::builder::{ArrayBuilder, Int64Builder, UInt8Builder, UInt16Builder, UInt64Builder};
use arrow_array::{ArrayRef, RecordBatch};
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

/// Column-wise builder of record batches in [`record_schema`].
#[derive(Default)]
pub struct RecordBuilder {
    probe_id: UInt64Builder,
    port: UInt8Builder,
    tsc: UInt64Builder,
    seq: UInt64Builder,
    frame_len: UInt16Builder,
    hw_ns: Int64Builder,
}

impl RecordBuilder {
    /// A builder with room for `n` records.
    pub fn with_capacity(n: usize) -> Self {
        RecordBuilder {
            probe_id: UInt64Builder::with_capacity(n),
            port: UInt8Builder::with_capacity(n),
            tsc: UInt64Builder::with_capacity(n),
            seq: UInt64Builder::with_capacity(n),
            frame_len: UInt16Builder::with_capacity(n),
            hw_ns: Int64Builder::with_capacity(n),
        }
    }

    /// Append one record.
    #[inline]
    pub fn push(&mut self, probe_id: u64, port: Port, tsc: u64, seq: u64, frame_len: u16, hw_ns: Option<i64>) {
        self.push_index(probe_id, port as u8, tsc, seq, frame_len, hw_ns);
    }

    /// Append one record of the port numbered `port` (0 pipeline, 1 bypass, 2… further ports).
    pub fn push_index(&mut self, probe_id: u64, port: u8, tsc: u64, seq: u64, frame_len: u16, hw_ns: Option<i64>) {
        self.probe_id.append_value(probe_id);
        self.port.append_value(port);
        self.tsc.append_value(tsc);
        self.seq.append_value(seq);
        self.frame_len.append_value(frame_len);
        self.hw_ns.append_option(hw_ns);
    }

    /// Records appended since the last [`RecordBuilder::finish`].
    pub fn len(&self) -> usize {
        self.probe_id.len()
    }

    /// Whether no record is pending.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Take the pending records as one batch (the builder is left empty).
    pub fn finish(&mut self) -> Result<RecordBatch, ArrowError> {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.probe_id.finish()),
            Arc::new(self.port.finish()),
            Arc::new(self.tsc.finish()),
            Arc::new(self.seq.finish()),
            Arc::new(self.frame_len.finish()),
            Arc::new(self.hw_ns.finish()),
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

    #[test]
    fn port_codes_are_stable() {
        assert_eq!(Port::from_u8(0), Some(Port::Pipeline));
        assert_eq!(Port::from_u8(1), Some(Port::Bypass));
        assert_eq!(Port::from_u8(2), None);
    }
}

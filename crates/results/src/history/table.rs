//! One typed definition per history table: `table!` declares a row struct with each column
//! stated once, and from it the Arrow schema, the writer (rows → record batch) and the reader
//! (record batch → rows, by column name, with a message naming a missing or mistyped column).

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, TimestampMicrosecondType, UInt32Type, UInt64Type};
use arrow_array::{
    Array, ArrayRef, BooleanArray, Float64Array, StringArray, TimestampMicrosecondArray, UInt32Array, UInt64Array,
};
use arrow_schema::{DataType, TimeUnit};

/// Microseconds since 1970-01-01 UTC, stored as a UTC timestamp (DuckDB's `TIMESTAMPTZ`,
/// Spark's `timestamp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Micros(pub i64);

impl Micros {
    /// The time as `YYYY-MM-DDTHH:MM:SS.ffffffZ`, `YYYY-MM-DDTHH:MM:SSZ` when a whole second
    /// ([`crate::utc_micros`]).
    pub fn utc(self) -> String {
        crate::utc_micros(self.0)
    }
}

/// In JSON, the time as text ([`Micros::utc`]).
impl serde::Serialize for Micros {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.utc())
    }
}

/// A column's value type: its Arrow type, how a column of it is built and how one value is read.
pub trait Cell: Sized {
    /// The Arrow type.
    fn data_type() -> DataType;
    /// Whether the column may hold nulls.
    const NULLABLE: bool = false;
    /// The column of `values`.
    fn array<'a>(values: impl Iterator<Item = &'a Self>) -> ArrayRef
    where
        Self: 'a;
    /// Value `i` of `a` (already checked to be of [`Cell::data_type`]); `None` for a null where
    /// none may be.
    fn get(a: &dyn Array, i: usize) -> Option<Self>;
}

macro_rules! cell {
    ($t:ty, $dt:expr, $arr:ty, $as:ident $(::<$p:ty>)?, |$a:ident, $i:ident| $read:expr) => {
        impl Cell for $t {
            fn data_type() -> DataType {
                $dt
            }
            fn array<'a>(values: impl Iterator<Item = &'a Self>) -> ArrayRef {
                Arc::new(<$arr>::from_iter(values.map(|v| Some(v.clone()))))
            }
            fn get(a: &dyn Array, i: usize) -> Option<Self> {
                let $a = a.$as$(::<$p>)?();
                let $i = i;
                (!$a.is_null($i)).then(|| $read)
            }
        }

        impl Cell for Option<$t> {
            fn data_type() -> DataType {
                $dt
            }
            const NULLABLE: bool = true;
            fn array<'a>(values: impl Iterator<Item = &'a Self>) -> ArrayRef {
                Arc::new(<$arr>::from_iter(values.cloned()))
            }
            fn get(a: &dyn Array, i: usize) -> Option<Self> {
                Some(<$t as Cell>::get(a, i))
            }
        }
    };
}

cell!(String, DataType::Utf8, StringArray, as_string::<i32>, |a, i| a.value(i).to_string());
cell!(f64, DataType::Float64, Float64Array, as_primitive::<Float64Type>, |a, i| a.value(i));
cell!(u64, DataType::UInt64, UInt64Array, as_primitive::<UInt64Type>, |a, i| a.value(i));
cell!(u32, DataType::UInt32, UInt32Array, as_primitive::<UInt32Type>, |a, i| a.value(i));
cell!(bool, DataType::Boolean, BooleanArray, as_boolean, |a, i| a.value(i));

impl Cell for Micros {
    fn data_type() -> DataType {
        DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
    }
    fn array<'a>(values: impl Iterator<Item = &'a Self>) -> ArrayRef {
        Arc::new(TimestampMicrosecondArray::from_iter_values(values.map(|v| v.0)).with_timezone("UTC"))
    }
    fn get(a: &dyn Array, i: usize) -> Option<Self> {
        let a = a.as_primitive::<TimestampMicrosecondType>();
        (!a.is_null(i)).then(|| Micros(a.value(i)))
    }
}

impl Cell for Option<Micros> {
    fn data_type() -> DataType {
        Micros::data_type()
    }
    const NULLABLE: bool = true;
    fn array<'a>(values: impl Iterator<Item = &'a Self>) -> ArrayRef {
        Arc::new(TimestampMicrosecondArray::from_iter(values.map(|v| v.map(|m| m.0))).with_timezone("UTC"))
    }
    fn get(a: &dyn Array, i: usize) -> Option<Self> {
        Some(Micros::get(a, i))
    }
}

/// Declares a table's row struct, each column once: `schema()`, `to_batch(&[Row])` and
/// `from_batch(&RecordBatch)` follow from it.
macro_rules! table {
    ($(#[doc = $doc:literal])* pub struct $name:ident { $($(#[doc = $fdoc:literal])* pub $f:ident: $t:ty,)* }) => {
        $(#[doc = $doc])*
        #[derive(Clone, Debug, PartialEq, serde::Serialize)]
        pub struct $name {
            $($(#[doc = $fdoc])* pub $f: $t,)*
        }

        impl $name {
            /// The table's Arrow schema.
            pub fn schema() -> arrow_schema::Schema {
                use $crate::history::table::Cell;
                arrow_schema::Schema::new(vec![
                    $(arrow_schema::Field::new(stringify!($f), <$t as Cell>::data_type(), <$t as Cell>::NULLABLE),)*
                ])
            }

            /// `rows` as one record batch.
            pub fn to_batch(rows: &[Self]) -> Result<arrow_array::RecordBatch, arrow_schema::ArrowError> {
                use $crate::history::table::Cell;
                arrow_array::RecordBatch::try_new(
                    std::sync::Arc::new(Self::schema()),
                    vec![$(<$t as Cell>::array(rows.iter().map(|r| &r.$f)),)*],
                )
            }

            /// The rows of `batch`, its columns found by name; a missing, mistyped or null
            /// column is an error naming it, except that a nullable column a table written
            /// before it existed lacks reads as nulls.
            pub fn from_batch(
                batch: &arrow_array::RecordBatch,
            ) -> Result<Vec<Self>, $crate::history::table::ColumnError> {
                use $crate::history::table::Cell;
                $(
                    let $f = match batch.column_by_name(stringify!($f)) {
                        None if <$t as Cell>::NULLABLE => {
                            arrow_array::new_null_array(&<$t as Cell>::data_type(), batch.num_rows())
                        }
                        c => c.filter(|c| c.data_type() == &<$t as Cell>::data_type()).cloned().ok_or_else(|| {
                            $crate::history::table::ColumnError::Missing {
                                column: stringify!($f),
                                data_type: <$t as Cell>::data_type(),
                            }
                        })?,
                    };
                )*
                (0..batch.num_rows())
                    .map(|i| {
                        Ok(Self {
                            $($f: <$t as Cell>::get($f.as_ref(), i)
                                .ok_or($crate::history::table::ColumnError::Null { column: stringify!($f), row: i })?,)*
                        })
                    })
                    .collect()
            }
        }
    };
}

/// Why a history table's batch cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ColumnError {
    /// A column is missing or of another type.
    #[error("column `{column}` is missing or not {data_type}")]
    Missing {
        /// The column.
        column: &'static str,
        /// Its type in the table's definition.
        data_type: arrow_schema::DataType,
    },
    /// A row has no value in a column that needs one.
    #[error("column `{column}`: row {row} is null")]
    Null {
        /// The column.
        column: &'static str,
        /// The row.
        row: usize,
    },
}

pub(crate) use table;

#[cfg(test)]
mod tests {
    table! {
        /// A table of every cell type.
        pub struct T {
            /// Text.
            pub s: String,
            /// Optional number.
            pub x: Option<f64>,
            /// Count.
            pub n: u64,
            /// Small count.
            pub k: u32,
            /// Flag.
            pub b: bool,
            /// Time.
            pub t: super::Micros,
            /// Optional text.
            pub o: Option<String>,
            /// Optional time.
            pub e: Option<super::Micros>,
        }
    }

    #[test]
    fn rows_go_through_a_record_batch_unchanged_and_a_missing_column_is_named() {
        let rows = vec![
            T {
                s: "a".into(),
                x: Some(1.5),
                n: u64::MAX,
                k: 7,
                b: true,
                t: super::Micros(1_796_000_000_000_000),
                o: None,
                e: Some(super::Micros(1_796_000_000_000_250)),
            },
            T { s: String::new(), x: None, n: 0, k: 0, b: false, t: super::Micros(0), o: Some("lvl".into()), e: None },
        ];
        let batch = T::to_batch(&rows).unwrap();
        assert!(batch.schema().field_with_name("x").unwrap().is_nullable());
        assert!(!batch.schema().field_with_name("s").unwrap().is_nullable());
        assert_eq!(T::from_batch(&batch).unwrap(), rows);
        assert_eq!(rows[0].t.utc(), "2026-11-30T00:53:20Z");
        let without = batch.project(&[0, 1, 2, 3, 4, 6, 7]).unwrap();
        let err = T::from_batch(&without).unwrap_err().to_string();
        assert!(err.contains("column `t`"), "{err}");
        // A table written before an optional column existed reads it as nulls.
        let older = batch.project(&[0, 1, 2, 3, 4, 5, 6]).unwrap();
        let read = T::from_batch(&older).unwrap();
        assert!(read.iter().all(|r| r.e.is_none()) && read[1] == rows[1], "{read:?}");
    }
}

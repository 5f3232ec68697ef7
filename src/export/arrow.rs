//! A query's [`ResultSet`] as an Arrow [`RecordBatch`], and a cursor's rows as a stream of
//! them ([`Rows::record_batches`]), for embedders that want columnar results (to hand to
//! Polars, DuckDB, or a Parquet writer) without walking rows.
//!
//! Each column gets the narrowest Arrow type that holds all its values exactly:
//!
//! | values | Arrow type |
//! |---|---|
//! | whole numbers within 64 bits, signed | `Int64` |
//! | whole numbers, some beyond | `Decimal128(38, 0)` |
//! | measured quantities (any float) | `Float64` (whole numbers in the column as floats) |
//! | names, or a mix of text and numbers | `Utf8` (numbers as the table shows them) |
//! | only nulls | `Null` |
//!
//! Nulls stay nulls; every field is nullable.
//!
//! ```
//! use mtfdb::results::{ResultSet, Value};
//! let mut r = ResultSet::new(["rank", "bytes", "share", "name"]);
//! r.push(vec![Value::Int(0), Value::Int(4096), Value::Float(0.5), Value::Text("P0".into())]);
//! r.push(vec![Value::Int(1), Value::Null, Value::Float(0.25), Value::Text("P1".into())]);
//! let batch = r.to_record_batch()?;
//! assert_eq!(batch.num_rows(), 2);
//! assert_eq!(batch.schema().field(0).data_type(), &arrow::datatypes::DataType::Int64);
//! assert_eq!(batch.column(1).null_count(), 1);
//! # Ok::<(), mtfdb::Error>(())
//! ```

use std::sync::Arc;

use arrow::array::{
    ArrayRef, Decimal128Builder, Float64Builder, Int64Builder, NullArray, StringBuilder,
};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};

use crate::error::{Error, Result};
use crate::query::catalog::ColumnType;
use crate::query::Rows;
use crate::results::{ResultSet, Value};

/// The Arrow type a column of these values converts to (see the module documentation).
pub fn column_type<'v>(values: impl Iterator<Item = &'v Value>) -> DataType {
    let (mut ints, mut wide, mut floats, mut texts) = (false, false, false, false);
    for v in values {
        match v {
            Value::Null => {}
            Value::Int(i) => {
                ints = true;
                wide |= i64::try_from(*i).is_err();
            }
            Value::Float(_) => floats = true,
            Value::Text(_) => texts = true,
        }
    }
    match (ints, wide, floats, texts) {
        (_, _, _, true) => DataType::Utf8,
        (_, _, true, false) => DataType::Float64,
        (true, true, false, false) => DataType::Decimal128(38, 0),
        (true, false, false, false) => DataType::Int64,
        _ => DataType::Null,
    }
}

/// `r` as one Arrow record batch, a column per result column, rows in order.
pub fn to_record_batch(r: &ResultSet) -> Result<RecordBatch> {
    batch_of(&r.columns, &r.rows, None).map(|(batch, _)| batch)
}

/// How wide a type is in the order a column widens through as values come: a column of
/// nulls takes any type, whole numbers widen to 128-bit decimals, numbers to floats, and
/// anything to text (the order [`column_type`] chooses by).
fn breadth(t: &DataType) -> u8 {
    match t {
        DataType::Null => 0,
        DataType::Int64 => 1,
        DataType::Decimal128(..) => 2,
        DataType::Float64 => 3,
        _ => 4,
    }
}

/// The narrowest type that holds the values of both `a` and `b`.
fn widest(a: DataType, b: DataType) -> DataType {
    if breadth(&b) > breadth(&a) {
        b
    } else {
        a
    }
}

/// `rows` (of `columns`) as a record batch, each column of the type its values need, or
/// wider where `at_least` says so; with the types it chose.
fn batch_of(
    columns: &[String],
    rows: &[Vec<Value>],
    at_least: Option<&[DataType]>,
) -> Result<(RecordBatch, Vec<DataType>)> {
    let mut fields = Vec::with_capacity(columns.len());
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(columns.len());
    let mut types = Vec::with_capacity(columns.len());
    for (c, name) in columns.iter().enumerate() {
        let column = || {
            rows.iter()
                .map(move |row| row.get(c).unwrap_or(&Value::Null))
        };
        let mut t = column_type(column());
        if let Some(earlier) = at_least.and_then(|types| types.get(c)) {
            t = widest(earlier.clone(), t);
        }
        let array: ArrayRef = match &t {
            DataType::Int64 => {
                let mut b = Int64Builder::with_capacity(rows.len());
                for v in column() {
                    match v {
                        Value::Int(i) => b.append_option(i64::try_from(*i).ok()),
                        _ => b.append_null(),
                    }
                }
                Arc::new(b.finish())
            }
            DataType::Decimal128(p, s) => {
                let mut b = Decimal128Builder::with_capacity(rows.len())
                    .with_precision_and_scale(*p, *s)
                    .map_err(|e| Error::Usage(format!("column {name:?}: {e}")))?;
                for v in column() {
                    match v {
                        Value::Int(i) => b.append_value(*i),
                        _ => b.append_null(),
                    }
                }
                Arc::new(b.finish())
            }
            DataType::Float64 => {
                let mut b = Float64Builder::with_capacity(rows.len());
                for v in column() {
                    match v {
                        Value::Float(f) => b.append_value(*f),
                        Value::Int(i) => b.append_value(*i as f64),
                        _ => b.append_null(),
                    }
                }
                Arc::new(b.finish())
            }
            DataType::Utf8 => {
                let mut b = StringBuilder::new();
                for v in column() {
                    match v {
                        Value::Null => b.append_null(),
                        Value::Text(t) => b.append_value(t),
                        other => b.append_value(other.render()),
                    }
                }
                Arc::new(b.finish())
            }
            _ => Arc::new(NullArray::new(rows.len())),
        };
        fields.push(Field::new(name, t.clone(), true));
        arrays.push(array);
        types.push(t);
    }
    let options = RecordBatchOptions::new().with_row_count(Some(rows.len()));
    let batch = RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), arrays, &options)
        .map_err(|e| Error::Usage(format!("the result as an Arrow record batch: {e}")))?;
    Ok((batch, types))
}

/// A cursor's rows as Arrow record batches of at most a given number of rows each, read as
/// they are asked for (memory follows one batch, not the result): what
/// [`Rows::record_batches`] returns.
///
/// Every batch of a cursor has one schema: a selection of rows takes its columns' types from
/// its target ([`Rows::column_types`]: `Int64` for whole numbers, `Utf8` for text, a column
/// of nulls included), and a result computed whole (an aggregate, an analysis) from all its
/// values, as [`to_record_batch`] does. The one exception: a selection's value that its type
/// cannot hold (a whole number beyond 64 bits) widens the column from that batch on, as
/// [`to_record_batch`] would type it; batches never narrow.
pub struct RecordBatches<'s> {
    rows: Rows<'s>,
    max_rows: usize,
    types: Option<Vec<DataType>>,
    /// Whether a batch was handed out.
    started: bool,
    /// Whether an error or the end was reached.
    done: bool,
}

impl Iterator for RecordBatches<'_> {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Result<RecordBatch>> {
        if self.done {
            return None;
        }
        let mut values = Vec::with_capacity(self.max_rows.min(1 << 16));
        while values.len() < self.max_rows {
            match self.rows.next() {
                Some(Ok(row)) => values.push(row.into_values()),
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(e));
                }
                None => {
                    self.done = true;
                    break;
                }
            }
        }
        // An empty result is one empty batch, so that its schema reaches the reader.
        if values.is_empty() && self.started {
            return None;
        }
        self.started = true;
        let made = batch_of(self.rows.columns(), &values, self.types.as_deref());
        Some(made.map(|(batch, types)| {
            self.types = Some(types);
            batch
        }))
    }
}

impl<'s> Rows<'s> {
    /// The remaining rows as Arrow record batches of at most `max_rows` rows each (at least
    /// one), converted as [`ResultSet::to_record_batch`] converts, a batch at a time; see
    /// [`RecordBatches`] for how a column's type is chosen. A result with no row is one
    /// empty batch.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = mtfdb::Database::open(dir.path().join("db")).unwrap();
    /// # db.import(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/traces/stencil2d-16.mtf"), Some("paper")).unwrap();
    /// let mut session = mtfdb::Session::new(db);
    /// let mut rows = 0;
    /// for batch in session.query("SELECT SENDS FOR PROCESS(0)")?.record_batches(100) {
    ///     let batch = batch?;
    ///     assert!(batch.num_rows() <= 100);
    ///     rows += batch.num_rows();
    /// }
    /// assert!(rows > 0);
    /// # Ok::<(), mtfdb::Error>(())
    /// ```
    pub fn record_batches(self, max_rows: usize) -> RecordBatches<'s> {
        let types = match (self.column_types(), self.computed_rows()) {
            (Some(kinds), _) => Some(
                kinds
                    .iter()
                    .map(|k| match k {
                        ColumnType::Integer => DataType::Int64,
                        ColumnType::Text => DataType::Utf8,
                    })
                    .collect(),
            ),
            // Computed whole, the rows are all there to choose each column's type from.
            (None, Some(rows)) => Some(
                (0..self.columns().len())
                    .map(|c| column_type(rows.iter().map(|r| r.get(c).unwrap_or(&Value::Null))))
                    .collect(),
            ),
            (None, None) => None,
        };
        RecordBatches {
            rows: self,
            max_rows: max_rows.max(1),
            types,
            started: false,
            done: false,
        }
    }
}

impl ResultSet {
    /// This result as an Arrow [`RecordBatch`] ([`crate::export::arrow`] says how each
    /// column's type is chosen).
    ///
    /// ```
    /// let mut r = mtfdb::results::ResultSet::new(["n"]);
    /// r.push(vec![mtfdb::results::Value::Int(i128::from(u64::MAX))]);
    /// let batch = r.to_record_batch()?;
    /// assert_eq!(batch.schema().field(0).data_type(), &arrow::datatypes::DataType::Decimal128(38, 0));
    /// # Ok::<(), mtfdb::Error>(())
    /// ```
    pub fn to_record_batch(&self) -> Result<RecordBatch> {
        to_record_batch(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{Float64Type, Int64Type};

    #[test]
    fn every_value_kind_converts_and_nulls_stay() {
        let mut r = ResultSet::new(["i", "wide", "f", "mixed", "t", "none"]);
        r.push(vec![
            Value::Int(-3),
            Value::Int(i128::from(u64::MAX) + 5),
            Value::Float(1.5),
            Value::Int(2),
            Value::Text("a".into()),
            Value::Null,
        ]);
        r.push(vec![
            Value::Null,
            Value::Int(1),
            Value::Int(2),
            Value::Text("b".into()),
            Value::Null,
            Value::Null,
        ]);
        let b = to_record_batch(&r).unwrap();
        let types: Vec<DataType> = b
            .schema()
            .fields()
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        assert_eq!(
            types,
            [
                DataType::Int64,
                DataType::Decimal128(38, 0),
                DataType::Float64,
                DataType::Utf8,
                DataType::Utf8,
                DataType::Null
            ]
        );
        assert_eq!(b.column(0).as_primitive::<Int64Type>().value(0), -3);
        assert!(b.column(0).is_null(1));
        assert_eq!(
            b.column(1)
                .as_primitive::<arrow::datatypes::Decimal128Type>()
                .value(0),
            i128::from(u64::MAX) + 5
        );
        assert_eq!(b.column(2).as_primitive::<Float64Type>().value(1), 2.0);
        assert_eq!(b.column(3).as_string::<i32>().value(0), "2");
        assert!(b.column(4).is_null(1));
        assert_eq!(b.num_rows(), 2);
        let empty = to_record_batch(&ResultSet::new(["x"])).unwrap();
        assert_eq!(empty.num_rows(), 0);
    }
}

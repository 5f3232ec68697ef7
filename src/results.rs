//! Results: one typed [`ResultSet`] (named columns, rows of [`Value`]s) that queries, analyses,
//! export and the command line share, and the one place it is formatted as an aligned table,
//! CSV or JSON, whole or row by row ([`RowSink`], [`csv_row`], [`json_element`]).

use std::fmt::Write;
use std::sync::Arc;

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};

use crate::error::{Error, NameKind, Result};

/// One cell of a result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Value {
    /// No value (a field the row's kind does not have).
    Null,
    /// A whole number (ranks, counts, bytes, nanoseconds): every 64-bit size or time, and
    /// sums of them, exactly.
    Int(i128),
    /// A measured or averaged quantity.
    Float(f64),
    /// A name.
    Text(String),
}

impl Value {
    /// The value as text, as a table or CSV shows it.
    pub fn render(&self) -> String {
        match self {
            Value::Null => String::new(),
            Value::Int(v) => v.to_string(),
            Value::Float(v) => {
                if v.fract() == 0.0 && v.abs() < 1e15 {
                    format!("{v:.1}")
                } else {
                    // Six decimals at most, without trailing zeros (a whole number keeps
                    // its ".0": 9223372037284272128.0, never "…128.").
                    let text = format!("{v:.6}");
                    let text = text.trim_end_matches('0');
                    match text.strip_suffix('.') {
                        Some(whole) => format!("{whole}.0"),
                        None => text.to_string(),
                    }
                }
            }
            Value::Text(s) => s.clone(),
        }
    }

    fn is_numeric(&self) -> bool {
        matches!(self, Value::Int(_) | Value::Float(_))
    }
}

impl From<u64> for Value {
    fn from(v: u64) -> Value {
        Value::Int(i128::from(v))
    }
}

impl From<u128> for Value {
    /// Exact up to 2^127 - 1, which no count or sum of a trace reaches (2^32 operations of at
    /// most 2^64 - 1 bytes each stay under 2^96); beyond, the largest value.
    fn from(v: u128) -> Value {
        Value::Int(i128::try_from(v).unwrap_or(i128::MAX))
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Value {
        Value::Int(i128::from(v))
    }
}

impl From<u32> for Value {
    fn from(v: u32) -> Value {
        Value::Int(i128::from(v))
    }
}

impl From<i32> for Value {
    fn from(v: i32) -> Value {
        Value::Int(i128::from(v))
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Float(v)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::Text(v.to_string())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Value {
        Value::Text(v)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::Null, Into::into)
    }
}

/// The rows a query returned, with named columns.
///
/// ```
/// use mtfdb::results::{ResultSet, Value};
/// let mut r = ResultSet::new(["rank", "bytes"]);
/// r.push(vec![Value::Int(0), Value::Int(4096)]);
/// assert_eq!(r.to_csv(), "rank,bytes\n0,4096\n");
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResultSet {
    /// Column names.
    pub columns: Vec<String>,
    /// Rows, each as long as `columns`.
    pub rows: Vec<Vec<Value>>,
}

impl ResultSet {
    /// An empty result with these columns.
    pub fn new<S: Into<String>>(columns: impl IntoIterator<Item = S>) -> ResultSet {
        ResultSet {
            columns: columns.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row; it must have one value per column.
    pub fn push(&mut self, row: Vec<Value>) {
        debug_assert_eq!(row.len(), self.columns.len(), "row width");
        self.rows.push(row);
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The index of a column by name (case-insensitive).
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns
            .iter()
            .position(|c| c.eq_ignore_ascii_case(name))
    }

    /// An aligned text table: numbers right-aligned, text left-aligned.
    pub fn to_table(&self) -> String {
        self.to_table_with(&[], true)
    }

    /// [`to_table`](Self::to_table) with column `i` at least `min_widths[i]` characters wide
    /// (the shell's `.width`), and without the header and its rule when `headers` is false.
    pub fn to_table_with(&self, min_widths: &[usize], headers: bool) -> String {
        let cells: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| r.iter().map(Value::render).collect())
            .collect();
        // A row shorter than the columns (a caller's mistake) prints empty cells, never panics.
        let cell = |r: &[String], c: usize| r.get(c).map_or(0, |v| v.chars().count());
        let widths: Vec<usize> = (0..self.columns.len())
            .map(|c| {
                cells
                    .iter()
                    .map(|r| cell(r, c))
                    .chain([self.columns[c].chars().count()])
                    .chain(min_widths.get(c).copied())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let numeric: Vec<bool> = (0..self.columns.len())
            .map(|c| {
                self.rows
                    .iter()
                    .any(|r| r.get(c).is_some_and(Value::is_numeric))
            })
            .collect();
        let mut out = String::new();
        let line = |out: &mut String, vals: &[String]| {
            let parts: Vec<String> = (0..widths.len())
                .map(|c| {
                    let v = vals.get(c).map_or("", String::as_str);
                    pad(v, widths[c], numeric[c])
                })
                .collect();
            let _ = writeln!(out, "{}", parts.join("  ").trim_end());
        };
        if headers {
            line(&mut out, &self.columns);
            let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
            let _ = writeln!(out, "{}", rule.join("  "));
        }
        for row in &cells {
            line(&mut out, row);
        }
        out
    }

    /// CSV with a header line (RFC 4180 quoting).
    pub fn to_csv(&self) -> String {
        let mut out = csv_line(self.columns.iter().map(String::as_str));
        for row in &self.rows {
            out.push_str(&csv_row(row));
        }
        out
    }

    /// A JSON array of objects, one per row, keyed by column name.
    pub fn to_json(&self) -> String {
        // Values are numbers, strings and nulls, and keys strings: serializing cannot fail, and
        // if it ever did the message stands in the output instead of a panic.
        serde_json::to_string_pretty(self)
            .unwrap_or_else(|e| format!("{{\"error\": {:?}}}", e.to_string()))
    }
}

/// One CSV line (RFC 4180 quoting), with its line end.
pub fn csv_line<'a>(cells: impl Iterator<Item = &'a str>) -> String {
    let quoted: Vec<String> = cells
        .map(|s| {
            if s.contains([',', '"', '\n', '\r']) {
                format!("\"{}\"", s.replace('"', "\"\""))
            } else {
                s.to_string()
            }
        })
        .collect();
    let mut out = quoted.join(",");
    out.push('\n');
    out
}

/// A row as one CSV line.
pub fn csv_row(row: &[Value]) -> String {
    let cells: Vec<String> = row.iter().map(Value::render).collect();
    csv_line(cells.iter().map(String::as_str))
}

/// A row as the JSON object [`ResultSet::to_json`] prints for it, indented as an element of
/// its array: a writer can print a result's rows one by one, exactly as `to_json` would.
pub fn json_element(columns: &[String], row: &[Value]) -> String {
    let object = serde_json::to_string_pretty(&JsonRow(columns, row))
        .unwrap_or_else(|e| format!("{{\"error\": {:?}}}", e.to_string()));
    let mut out = String::with_capacity(object.len() + 16);
    for (i, line) in object.lines().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str("  ");
        out.push_str(line);
    }
    out
}

/// One row as a JSON object keyed by column name.
struct JsonRow<'a>(&'a [String], &'a [Value]);

impl Serialize for JsonRow<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0.iter().zip(self.1) {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// `text` padded with spaces to `width` characters, on the left when `right` (numbers), else
/// on the right. Any width works (the standard formatter's width stops at 65,535).
pub fn pad(text: &str, width: usize, right: bool) -> String {
    let fill = width.saturating_sub(text.chars().count());
    let mut out = String::with_capacity(text.len() + fill);
    if right {
        out.extend(std::iter::repeat_n(' ', fill));
        out.push_str(text);
    } else {
        out.push_str(text);
        out.extend(std::iter::repeat_n(' ', fill));
    }
    out
}

impl Serialize for ResultSet {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.rows.len()))?;
        for row in &self.rows {
            seq.serialize_element(&JsonRow(&self.columns, row))?;
        }
        seq.end()
    }
}

impl<'a> IntoIterator for &'a ResultSet {
    type Item = &'a Vec<Value>;
    type IntoIter = std::slice::Iter<'a, Vec<Value>>;
    fn into_iter(self) -> Self::IntoIter {
        self.rows.iter()
    }
}

/// Where a statement's rows go as they are produced: the CLI writes them out as they come, a
/// [`ResultSet`] collects them.
pub trait RowSink {
    /// The result's column names, once, before any row.
    fn columns(&mut self, columns: &[String]) -> Result<()>;
    /// One row, its values in column order.
    fn row(&mut self, row: Vec<Value>) -> Result<()>;
    /// A whole result at once (for statements computed whole).
    fn result(&mut self, result: ResultSet) -> Result<()> {
        self.columns(&result.columns)?;
        for row in result.rows {
            self.row(row)?;
        }
        Ok(())
    }
}

impl RowSink for ResultSet {
    fn columns(&mut self, columns: &[String]) -> Result<()> {
        self.columns = columns.to_vec();
        Ok(())
    }

    fn row(&mut self, row: Vec<Value>) -> Result<()> {
        self.rows.push(row);
        Ok(())
    }

    fn result(&mut self, result: ResultSet) -> Result<()> {
        *self = result;
        Ok(())
    }
}

/// One row of a result, as a cursor ([`Rows`](crate::query::Rows)) hands it out: its values in
/// column order, read by position or by column name as typed values.
///
/// ```
/// use std::sync::Arc;
/// use mtfdb::results::{Row, Value};
/// let columns: Arc<[String]> = Arc::from(vec!["rank".to_string(), "operation".to_string()]);
/// let row = Row::new(columns, vec![Value::Int(3), "MPI_Send".into()]);
/// assert_eq!(row.get::<u32>(0)?, 3);
/// assert_eq!(row.get::<String>("operation")?, "MPI_Send");
/// assert!(row.get::<u64>("operation").is_err()); // text is not a number
/// # Ok::<(), mtfdb::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    columns: Arc<[String]>,
    values: Vec<Value>,
}

impl Row {
    /// A row of `values` under `columns` (shared by every row of a result).
    pub fn new(columns: Arc<[String]>, values: Vec<Value>) -> Row {
        Row { columns, values }
    }

    /// The result's column names.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// The values, in column order.
    pub fn values(&self) -> &[Value] {
        &self.values
    }

    /// The values, in column order, taken out of the row.
    pub fn into_values(self) -> Vec<Value> {
        self.values
    }

    /// The value in `column` (a position from 0, or a name, case-insensitive).
    pub fn value(&self, column: impl ColumnIndex) -> Result<&Value> {
        let i = column.position(&self.columns)?;
        self.values
            .get(i)
            .ok_or_else(|| no_column(&i.to_string(), &self.columns))
    }

    /// The value in `column` (a position from 0, or a name, case-insensitive) as a `T`; an
    /// [`Error::ColumnType`] when it does not convert (text read as a number, a null read as
    /// anything but an `Option`, a number out of `T`'s range).
    pub fn get<T: FromValue>(&self, column: impl ColumnIndex) -> Result<T> {
        let i = column.position(&self.columns)?;
        let value = self
            .values
            .get(i)
            .ok_or_else(|| no_column(&i.to_string(), &self.columns))?;
        T::from_value(value).ok_or_else(|| {
            let name = self.columns.get(i).map_or("?", String::as_str);
            Error::ColumnType {
                column: name.to_string(),
                message: format!(
                    "column {name} holds {}, which is not {}",
                    describe(value),
                    T::EXPECTED
                ),
            }
        })
    }
}

/// A value as an error message names it.
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Int(v) => format!("the integer {v}"),
        Value::Float(v) => format!("the number {v}"),
        Value::Text(s) => format!("the text {s:?}"),
    }
}

fn no_column(name: &str, columns: &[String]) -> Error {
    Error::unknown(
        NameKind::Column,
        name,
        format!(
            "the result has no column {name}; its columns are {}",
            columns.join(", ")
        ),
    )
}

/// How [`Row::get`] names a column: by position from 0 (`usize`) or by name (`&str`,
/// case-insensitive, as [`ResultSet::column`]).
pub trait ColumnIndex {
    /// The column's position among `columns`, or an [`Error::UnknownName`] listing them.
    fn position(&self, columns: &[String]) -> Result<usize>;
}

impl ColumnIndex for usize {
    fn position(&self, columns: &[String]) -> Result<usize> {
        if *self < columns.len() {
            Ok(*self)
        } else {
            Err(no_column(&self.to_string(), columns))
        }
    }
}

impl ColumnIndex for &str {
    fn position(&self, columns: &[String]) -> Result<usize> {
        columns
            .iter()
            .position(|c| c.eq_ignore_ascii_case(self))
            .ok_or_else(|| no_column(self, columns))
    }
}

/// A Rust type a [`Value`] converts to, for [`Row::get`]: the integers (when the value is an
/// integer in their range), `f64` (a float, or an integer), `String` (text), [`Value`] itself,
/// and `Option<T>` (null as `None`).
pub trait FromValue: Sized {
    /// What the type accepts, as an error message says it: `"an integer from 0 to 2^64 - 1"`.
    const EXPECTED: &'static str;
    /// The value as this type, or `None` when it does not convert.
    fn from_value(value: &Value) -> Option<Self>;
}

/// The integer types: an [`Value::Int`] within their range.
macro_rules! integer_from_value {
    ($($t:ty => $expected:literal),* $(,)?) => {$(
        impl FromValue for $t {
            const EXPECTED: &'static str = $expected;
            fn from_value(value: &Value) -> Option<$t> {
                match value {
                    Value::Int(v) => <$t>::try_from(*v).ok(),
                    _ => None,
                }
            }
        }
    )*};
}

integer_from_value! {
    i128 => "an integer",
    i64 => "an integer from -2^63 to 2^63 - 1 (i64)",
    u64 => "an integer from 0 to 2^64 - 1 (u64)",
    i32 => "an integer from -2^31 to 2^31 - 1 (i32)",
    u32 => "an integer from 0 to 2^32 - 1 (u32)",
    usize => "an integer from 0 to usize::MAX (usize)",
}

impl FromValue for f64 {
    const EXPECTED: &'static str = "a number (f64)";
    /// A float, or an integer as the nearest float.
    fn from_value(value: &Value) -> Option<f64> {
        match value {
            Value::Float(v) => Some(*v),
            Value::Int(v) => Some(*v as f64),
            _ => None,
        }
    }
}

impl FromValue for String {
    const EXPECTED: &'static str = "text (String)";
    fn from_value(value: &Value) -> Option<String> {
        match value {
            Value::Text(s) => Some(s.clone()),
            _ => None,
        }
    }
}

impl FromValue for Value {
    const EXPECTED: &'static str = "a value";
    fn from_value(value: &Value) -> Option<Value> {
        Some(value.clone())
    }
}

impl<T: FromValue> FromValue for Option<T> {
    const EXPECTED: &'static str = T::EXPECTED;
    /// `None` for null, else the value as a `T`.
    fn from_value(value: &Value) -> Option<Option<T>> {
        match value {
            Value::Null => Some(None),
            v => T::from_value(v).map(Some),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ResultSet {
        let mut r = ResultSet::new(["rank", "name", "bytes"]);
        r.push(vec![Value::Int(0), "P0".into(), Value::Int(123_456)]);
        r.push(vec![Value::Int(12), "P,12".into(), Value::Null]);
        r
    }

    #[test]
    fn table_aligns_numbers_right_and_text_left() {
        assert_eq!(
            sample().to_table(),
            "rank  name   bytes\n----  ----  ------\n   0  P0    123456\n  12  P,12\n"
        );
    }

    #[test]
    fn csv_quotes_what_needs_quoting() {
        assert_eq!(
            sample().to_csv(),
            "rank,name,bytes\n0,P0,123456\n12,\"P,12\",\n"
        );
    }

    #[test]
    fn json_is_an_array_of_objects() {
        let v: serde_json::Value = serde_json::from_str(&sample().to_json()).unwrap();
        assert_eq!(v[0]["bytes"], 123_456);
        assert_eq!(v[1]["name"], "P,12");
        assert!(v[1]["bytes"].is_null());
    }

    #[test]
    fn cells_of_any_width_print() {
        let long = "x".repeat(70_000);
        let mut r = ResultSet::new(["name", "n"]);
        r.push(vec![long.clone().into(), Value::Int(u64::MAX.into())]);
        r.push(vec!["a".into(), Value::Int(1)]);
        let table = r.to_table();
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[2], format!("{long}  18446744073709551615"));
        assert_eq!(lines[3].chars().count(), 70_000 + 2 + 20);
        assert!(lines[3].starts_with("a ") && lines[3].ends_with(" 1"));
    }

    #[test]
    fn floats_render_compactly() {
        assert_eq!(Value::Float(2.0).render(), "2.0");
        assert_eq!(Value::Float(0.125).render(), "0.125");
        assert_eq!(Value::Float(1.0 / 3.0).render(), "0.333333");
        assert_eq!(
            Value::Float(9.223372037284272e18).render(),
            "9223372037284272128.0"
        );
    }
}

//! Results: one typed [`ResultSet`] (named columns, rows of [`Value`]s) that queries, analyses,
//! export and the command line share, and the one place it is formatted as an aligned table,
//! CSV or JSON, whole or row by row ([`RowSink`], [`csv_row`], [`json_element`]); and the one
//! place text is made safe for a terminal ([`printable`], [`printable_lines`]).

use std::borrow::Cow;
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
#[derive(Debug, Clone, Default)]
pub struct ResultSet {
    /// Column names.
    pub columns: Vec<String>,
    /// Rows, each as long as `columns`.
    pub rows: Vec<Vec<Value>>,
    /// How many of the last rows are summaries of the others (`total` of `STATISTICS`, `run`
    /// of `SIMULATE`): a statement's `WHERE`, `ORDER BY` and `LIMIT` over the result leave
    /// them last ([`crate::query`]'s relational tail). Not part of the result's value: two
    /// results with the same columns and rows are equal.
    pub totals: usize,
}

impl PartialEq for ResultSet {
    fn eq(&self, other: &ResultSet) -> bool {
        self.columns == other.columns && self.rows == other.rows
    }
}

impl ResultSet {
    /// An empty result with these columns.
    pub fn new<S: Into<String>>(columns: impl IntoIterator<Item = S>) -> ResultSet {
        ResultSet {
            columns: columns.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
            totals: 0,
        }
    }

    /// Appends a summary row of the rows before it (a `total`), which stays last.
    pub fn push_total(&mut self, row: Vec<Value>) {
        self.push(row);
        self.totals += 1;
    }

    /// Takes the summary rows out (those [`push_total`](Self::push_total) appended), leaving
    /// the others.
    pub fn take_totals(&mut self) -> Vec<Vec<Value>> {
        let n = self.totals.min(self.rows.len());
        self.totals = 0;
        self.rows.split_off(self.rows.len() - n)
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

    /// An aligned text table: numbers right-aligned, text left-aligned, durations and sizes
    /// with their units ([`ColumnUnit`]).
    pub fn to_table(&self) -> String {
        self.to_table_with(&[], true)
    }

    /// [`to_table`](Self::to_table) with column `i` at least `min_widths[i]` characters wide
    /// (the shell's `.width`), and without the header and its rule when `headers` is false.
    pub fn to_table_with(&self, min_widths: &[usize], headers: bool) -> String {
        self.to_table_styled(min_widths, headers, true)
    }

    /// [`to_table_with`](Self::to_table_with), with durations and sizes in units a person
    /// reads (`235.1 ms`, `16.0 KiB`) when `units`, else the exact values CSV and JSON carry
    /// (the shell's `.units off`, the command line's `--units off`).
    ///
    /// Every name and cell is shown as [`printable`] shows it (a trace's names may hold
    /// terminal controls), and the widths are those of the text shown.
    pub fn to_table_styled(&self, min_widths: &[usize], headers: bool, units: bool) -> String {
        let shown = |text: String| {
            if text.contains(is_terminal_control) {
                printable(&text).into_owned()
            } else {
                text
            }
        };
        let column_units: Vec<ColumnUnit> = self
            .columns
            .iter()
            .map(|c| {
                if units {
                    ColumnUnit::of(c)
                } else {
                    ColumnUnit::Plain
                }
            })
            .collect();
        let cells: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| {
                r.iter()
                    .enumerate()
                    .map(|(c, v)| {
                        shown(
                            column_units
                                .get(c)
                                .map_or_else(|| v.render(), |u| u.render(v)),
                        )
                    })
                    .collect()
            })
            .collect();
        let names: Vec<String> = self.columns.iter().map(|c| shown(c.clone())).collect();
        // A row shorter than the columns (a caller's mistake) prints empty cells, never panics.
        let cell = |r: &[String], c: usize| r.get(c).map_or(0, |v| v.chars().count());
        let widths: Vec<usize> = (0..self.columns.len())
            .map(|c| {
                cells
                    .iter()
                    .map(|r| cell(r, c))
                    .chain([names[c].chars().count()])
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
            line(&mut out, &names);
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

    /// A JSON array of objects, one per row, keyed by column name; every character a terminal
    /// would act on ([`is_terminal_control`]) is written as a `\u` escape of four hex digits
    /// (`\u001b`), which parses back to the same text.
    pub fn to_json(&self) -> String {
        // Values are numbers, strings and nulls, and keys strings: serializing cannot fail, and
        // if it ever did the message stands in the output instead of a panic.
        let json = serde_json::to_string_pretty(self)
            .unwrap_or_else(|e| format!("{{\"error\": {:?}}}", e.to_string()));
        json_text(json)
    }
}

/// What a column's values measure, as its name says: a table prints them with their unit.
/// Names ending `_ns` are nanoseconds and `_s` seconds; names ending `bytes` or starting
/// `bytes_`, and `size`, `sent`, `received` are bytes; an aggregate's column (`sum(size)`,
/// `avg(duration)`) measures what its argument does, `count(*)` nothing. Everything else is
/// printed as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnUnit {
    /// Durations in nanoseconds: `235.1 ms`.
    Nanoseconds,
    /// Durations in seconds (a float): `1.708 s`.
    Seconds,
    /// Sizes in bytes: `16.0 KiB`.
    Bytes,
    /// No unit: printed as it is.
    Plain,
}

impl ColumnUnit {
    /// The unit of the column named `column`.
    pub fn of(column: &str) -> ColumnUnit {
        let lower = column.to_ascii_lowercase();
        // An aggregate's column measures its argument: `sum(duration_ns)` → `duration_ns`.
        let base = match (lower.find('('), lower.strip_suffix(')')) {
            (Some(open), Some(inner)) if open < inner.len() => &inner[open + 1..],
            _ => lower.as_str(),
        };
        if base.ends_with("_ns") || matches!(base, "duration" | "wait" | "skew") {
            ColumnUnit::Nanoseconds
        } else if base.ends_with("_s") {
            ColumnUnit::Seconds
        } else if base.ends_with("bytes")
            || base.starts_with("bytes_")
            || matches!(base, "size" | "sent" | "received")
        {
            ColumnUnit::Bytes
        } else {
            ColumnUnit::Plain
        }
    }

    /// Whether the column is a duration (nanoseconds or seconds).
    pub fn is_duration(self) -> bool {
        matches!(self, ColumnUnit::Nanoseconds | ColumnUnit::Seconds)
    }

    /// A cell of such a column as a table shows it: a number with its unit (through
    /// [`crate::units`]), anything else as [`Value::render`] does.
    pub fn render(self, v: &Value) -> String {
        let number = match v {
            Value::Int(i) => *i as f64,
            Value::Float(f) if f.is_finite() => *f,
            _ => return v.render(),
        };
        match self {
            ColumnUnit::Nanoseconds => crate::units::duration(number),
            ColumnUnit::Seconds => crate::units::duration(number * 1e9),
            ColumnUnit::Bytes => match v {
                Value::Int(i) => match u64::try_from(*i) {
                    Ok(b) => crate::units::bytes(b),
                    Err(_) => v.render(),
                },
                _ if number >= 0.0 && number < u64::MAX as f64 => {
                    crate::units::bytes(number.round() as u64)
                }
                _ => v.render(),
            },
            ColumnUnit::Plain => v.render(),
        }
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
    let object = json_text(
        serde_json::to_string_pretty(&JsonRow(columns, row))
            .unwrap_or_else(|e| format!("{{\"error\": {:?}}}", e.to_string())),
    );
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

/// Whether a terminal would act on `c` rather than show it, or show nothing for it: the C0
/// controls (ESC starts the sequences that set a window's title, clear the screen or write the
/// clipboard), DEL, the C1 controls (U+0080 to U+009F, CSI among them), the line and paragraph
/// separators, and the invisible format characters: the bidirectional overrides, embeddings,
/// isolates and marks (U+202A to U+202E, U+2066 to U+2069, U+200E, U+200F, U+061C) that reorder
/// what follows them, zero-width spaces and joiners, the soft hyphen, the byte order mark, the
/// interlinear annotation characters and the tag characters.
pub fn is_terminal_control(c: char) -> bool {
    matches!(
        c,
        '\u{0}'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{ad}'
            | '\u{61c}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{e0000}'..='\u{e007f}'
    )
}

/// `text` as a terminal may show it: each character [`is_terminal_control`] is written
/// visibly, as Rust writes it in a string literal: `\t`, `\n` and `\r`, the other ASCII
/// controls as `\x1b` (two hex digits), and the rest as `\u{202e}`. Everything else, the
/// backslash included, is shown as it is. Tables, `mtfdb info` and `mtfdb traces`, the shell and
/// error messages show names through this; CSV and JSON carry the exact text instead.
///
/// ```
/// use mtfdb::results::printable;
/// assert_eq!(printable("node\u{1b}]0;owned\u{7}"), "node\\x1b]0;owned\\x07");
/// assert_eq!(printable("abc\u{202e}fed"), "abc\\u{202e}fed");
/// assert_eq!(printable("MPI_Send"), "MPI_Send");
/// ```
pub fn printable(text: &str) -> Cow<'_, str> {
    escape_controls(text, false)
}

/// [`printable`] for text of several lines (a report, an error message): its line feeds stay
/// line feeds, every other control is written visibly.
pub fn printable_lines(text: &str) -> Cow<'_, str> {
    escape_controls(text, true)
}

/// The escaping of [`printable`] and [`printable_lines`], keeping line feeds when `lines`.
fn escape_controls(text: &str, lines: bool) -> Cow<'_, str> {
    let unsafe_char = |c: char| is_terminal_control(c) && !(lines && c == '\n');
    // Most text has nothing to escape: it is shown without a copy.
    let Some(first) = text.find(unsafe_char) else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len() + 8);
    out.push_str(&text[..first]);
    for c in text[first..].chars() {
        match c {
            c if !unsafe_char(c) => out.push(c),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c.is_ascii() => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

/// JSON text with every character [`is_terminal_control`] that serde_json leaves as it is (DEL,
/// the C1 controls, the format characters) written as a `\u` escape of four hex digits (`\u202e`; a surrogate pair past
/// U+FFFF). Such characters can stand only inside a JSON string, where the escape means the
/// same character: the document parses to the same values, and shows safely on a terminal.
fn json_text(json: String) -> String {
    // serde_json escapes the C0 controls in strings already: those left are the document's
    // own line feeds.
    let raw = |c: char| c > '\u{1f}' && is_terminal_control(c);
    if !json.contains(raw) {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if raw(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
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
            sample().to_table_styled(&[], true, false),
            "rank  name   bytes\n----  ----  ------\n   0  P0    123456\n  12  P,12\n"
        );
    }

    #[test]
    fn a_table_prints_durations_and_sizes_with_units_and_csv_and_json_exactly() {
        let mut r = ResultSet::new([
            "rank",
            "wait_ns",
            "bytes_sent",
            "end_s",
            "sum(size)",
            "count(*)",
            "share",
        ]);
        r.push(vec![
            Value::Int(0),
            Value::Int(235_100_000),
            Value::Int(16 * 1024),
            Value::Float(1.708),
            Value::Int(512),
            Value::Int(40_000),
            Value::Float(0.5),
        ]);
        r.push(vec![
            Value::Int(1),
            Value::Int(999),
            Value::Null,
            Value::Float(0.000_002_5),
            Value::Int(3 * 1024 * 1024 + 512 * 1024),
            Value::Int(7),
            Value::Float(0.25),
        ]);
        assert_eq!(
            r.to_table(),
            [
                "rank   wait_ns  bytes_sent    end_s  sum(size)  count(*)  share",
                "----  --------  ----------  -------  ---------  --------  -----",
                "   0  235.1 ms    16.0 KiB  1.708 s      512 B     40000    0.5",
                "   1    999 ns               2.5 µs    3.5 MiB         7   0.25",
                "",
            ]
            .join("\n")
        );
        // Exact values: the raw table, CSV and JSON.
        let raw = r.to_table_styled(&[], true, false);
        assert!(raw.contains("235100000") && raw.contains("16384"), "{raw}");
        assert!(r
            .to_csv()
            .contains("0,235100000,16384,1.708,512,40000,0.5\n"));
        let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(v[0]["wait_ns"], 235_100_000);
        assert_eq!(v[1]["sum(size)"], 3 * 1024 * 1024 + 512 * 1024);
    }

    #[test]
    fn a_column_measures_what_its_name_says() {
        use ColumnUnit::*;
        for (name, unit) in [
            ("duration_ns", Nanoseconds),
            ("avg(duration)", Nanoseconds),
            ("sum(on_path_ns)", Nanoseconds),
            ("MAX(WAIT)", Nanoseconds),
            ("start_s", Seconds),
            ("bytes_received", Bytes),
            ("fan_in_bytes", Bytes),
            ("size", Bytes),
            ("sum(sent)", Bytes),
            ("count(*)", Plain),
            ("rank", Plain),
            ("messages", Plain),
            ("share", Plain),
        ] {
            assert_eq!(ColumnUnit::of(name), unit, "{name}");
        }
        // A negative size or text stays as it is.
        assert_eq!(Bytes.render(&Value::Int(-3)), "-3");
        assert_eq!(Nanoseconds.render(&"run".into()), "run");
        assert_eq!(Nanoseconds.render(&Value::Null), "");
    }

    #[test]
    fn summary_rows_are_taken_out_and_put_back_last() {
        let mut r = ResultSet::new(["rank", "n"]);
        r.push(vec![Value::Int(0), Value::Int(1)]);
        r.push(vec![Value::Int(1), Value::Int(2)]);
        r.push_total(vec!["total".into(), Value::Int(3)]);
        assert_eq!(r.totals, 1);
        let plain = ResultSet {
            totals: 0,
            ..r.clone()
        };
        assert_eq!(r, plain, "equal results whatever their summaries");
        let footer = r.take_totals();
        assert_eq!(footer, vec![vec![Value::from("total"), Value::Int(3)]]);
        assert_eq!((r.len(), r.totals), (2, 0));
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

    /// Names a hostile trace could hold: OSC 0 (window title), OSC 52 (clipboard), a screen
    /// clear, a BEL, a CR that rewinds the line, and a right-to-left override.
    const HOSTILE: &str =
        "n\u{1b}]0;title\u{7}\u{1b}]52;c;aGk=\u{7}\u{1b}[2J\r\u{202e}x\u{9b}\u{7f}\n";

    #[test]
    fn printable_escapes_every_control_visibly_and_nothing_else() {
        assert_eq!(
            printable(HOSTILE),
            "n\\x1b]0;title\\x07\\x1b]52;c;aGk=\\x07\\x1b[2J\\r\\u{202e}x\\u{9b}\\x7f\\n"
        );
        assert_eq!(
            printable("\t\u{0}\u{200e}\u{200f}\u{2066}\u{2069}\u{feff}\u{e0041}"),
            "\\t\\x00\\u{200e}\\u{200f}\\u{2066}\\u{2069}\\u{feff}\\u{e0041}"
        );
        // Printable text, non-ASCII and backslashes included, is shown as it is, uncopied.
        for plain in ["MPI_Send", "Ranks größer 3 → 4", "C:\\trace\\x1b", "日本"] {
            assert!(
                matches!(printable(plain), Cow::Borrowed(p) if p == plain),
                "{plain}"
            );
        }
        // Several lines keep their line feeds and nothing else.
        assert_eq!(printable_lines("a\nb\r\u{1b}c"), "a\nb\\r\\x1bc");
    }

    #[test]
    fn a_table_escapes_names_and_cells_and_measures_the_escaped_text() {
        let mut r = ResultSet::new(["c\u{1b}[31m".to_string(), "n".to_string()]);
        r.push(vec![HOSTILE.into(), Value::Int(1)]);
        r.push(vec!["ok".into(), Value::Int(22)]);
        let table = r.to_table();
        assert!(
            !table.contains(|c: char| c != '\n' && is_terminal_control(c)),
            "{table:?}"
        );
        let escaped = printable(HOSTILE);
        let width = escaped.chars().count();
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 4, "{table:?}");
        assert_eq!(lines[0], format!("{:<width$}   n", "c\\x1b[31m"));
        assert_eq!(lines[1], format!("{}  --", "-".repeat(width)));
        assert_eq!(lines[2], format!("{escaped}   1"));
        assert_eq!(lines[3], format!("{:<width$}  22", "ok"));
    }

    #[test]
    fn csv_and_json_carry_the_exact_text() {
        let mut r = ResultSet::new(["name"]);
        r.push(vec![HOSTILE.into()]);
        let json = r.to_json();
        // Nothing a terminal acts on is left raw, and the JSON parses back to the exact name.
        assert!(
            !json.contains(|c: char| c != '\n' && is_terminal_control(c)),
            "{json}"
        );
        assert!(json.contains("\\u001b]52;c;aGk=\\u0007") && json.contains("\\u202e"));
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v[0]["name"], HOSTILE);
        let element: serde_json::Value =
            serde_json::from_str(&json_element(&r.columns, &r.rows[0])).unwrap();
        assert_eq!(element["name"], HOSTILE);
        // CSV quotes the field (it holds a CR and a LF) and keeps every byte.
        let csv = r.to_csv();
        assert_eq!(csv, format!("name\n\"{HOSTILE}\"\n"));
        let json_tag: serde_json::Value = serde_json::from_str(
            &ResultSet {
                columns: vec!["t".into()],
                rows: vec![vec!["\u{e0041}".into()]],
                totals: 0,
            }
            .to_json(),
        )
        .unwrap();
        assert_eq!(json_tag[0]["t"], "\u{e0041}");
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

//! The cursor: a statement's rows as an iterator of typed [`Row`]s. A selection of rows without
//! `ORDER BY` is read a chunk at a time as the rows are asked for, and stops reading at its
//! `LIMIT` or when the cursor is dropped; every other statement is computed as
//! [`Session::run`](super::Session::run) computes it (a top-k for `ORDER BY … LIMIT k`, the
//! groups of an aggregate) and its rows handed out one by one.

use std::sync::Arc;

use super::catalog::ColumnType;
use super::exec::Scan;
use crate::error::Result;
use crate::results::{ResultSet, Row, Value};

/// The rows of a statement, as [`Session::query`](super::Session::query) returns them: an
/// iterator of `Result<Row>` (an error, such as a damaged chunk or a cancel, ends it), with the
/// result's [`columns`](Rows::columns) known before the first row.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = mtfdb::Database::open(dir.path().join("db")).unwrap();
/// # db.import(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/traces/stencil2d-16.mtf"), Some("paper")).unwrap();
/// let mut session = mtfdb::Session::new(db);
/// let mut sends = 0u64;
/// for row in session.query("SELECT SENDS FOR PROCESS(0)")? {
///     let row = row?;
///     let bytes: u64 = row.get("bytes_sent")?;
///     let peer: Option<u32> = row.get("peer")?;
///     assert!(bytes > 0 && peer.is_some());
///     sends += 1;
/// }
/// assert!(sends > 0);
/// # Ok::<(), mtfdb::Error>(())
/// ```
pub struct Rows<'s> {
    columns: Arc<[String]>,
    /// The columns' types, where the statement's target fixes them.
    types: Option<Vec<ColumnType>>,
    source: Source<'s>,
}

/// Where a cursor's rows come from.
enum Source<'s> {
    /// A result computed whole.
    Computed(std::vec::IntoIter<Vec<Value>>),
    /// A selection read as it is asked for, with the rows its `LIMIT` still lets through.
    Scan {
        scan: Box<Scan<'s>>,
        left: Option<usize>,
    },
    /// Past the last row or an error.
    Done,
}

impl<'s> Rows<'s> {
    /// The rows of a result computed whole.
    pub(crate) fn computed(result: ResultSet) -> Rows<'s> {
        Rows {
            columns: result.columns.into(),
            types: None,
            source: Source::Computed(result.rows.into_iter()),
        }
    }

    /// The rows `scan` reads, at most `limit` of them, in `columns` (names and types).
    pub(crate) fn scanning(
        columns: Vec<(String, ColumnType)>,
        scan: Scan<'s>,
        limit: Option<usize>,
    ) -> Rows<'s> {
        Rows {
            types: Some(columns.iter().map(|c| c.1).collect()),
            columns: columns.into_iter().map(|c| c.0).collect(),
            source: Source::Scan {
                scan: Box::new(scan),
                left: limit,
            },
        }
    }

    /// The result's column names.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// The columns' types, when the statement's target fixes them (a selection of rows, as
    /// `DESCRIBE` lists them); `None` for a result computed whole (aggregates, analyses), whose
    /// values say their types.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = mtfdb::Database::open(dir.path().join("db")).unwrap();
    /// # db.import(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/traces/stencil2d-16.mtf"), Some("paper")).unwrap();
    /// use mtfdb::query::catalog::ColumnType;
    /// let mut session = mtfdb::Session::new(db);
    /// let rows = session.query("SELECT MESSAGES LIMIT 1")?;
    /// let sender = rows.columns().iter().position(|c| c == "sender").unwrap();
    /// assert_eq!(rows.column_types().unwrap()[sender], ColumnType::Integer);
    /// # Ok::<(), mtfdb::Error>(())
    /// ```
    pub fn column_types(&self) -> Option<&[ColumnType]> {
        self.types.as_deref()
    }

    /// Every remaining row, collected into a [`ResultSet`] (the same one
    /// [`Session::run`](super::Session::run) returns for the statement). To collect the rows
    /// themselves: `rows.collect::<mtfdb::Result<Vec<_>>>()`.
    pub fn into_result_set(self) -> Result<ResultSet> {
        let mut result = ResultSet::new(self.columns.iter().cloned());
        for row in self {
            result.push(row?.into_values());
        }
        Ok(result)
    }

    /// The rows still to come of a result computed whole (`None` for one read as it is
    /// asked for).
    pub(crate) fn computed_rows(&self) -> Option<&[Vec<Value>]> {
        match &self.source {
            Source::Computed(rows) => Some(rows.as_slice()),
            _ => None,
        }
    }

    /// The next row's values, or `None` after the last.
    fn next_values(&mut self) -> Result<Option<Vec<Value>>> {
        match &mut self.source {
            Source::Computed(rows) => Ok(rows.next()),
            Source::Scan { left: Some(0), .. } | Source::Done => Ok(None),
            Source::Scan { scan, left } => {
                let values = scan.next_values()?;
                if let (Some(l), Some(_)) = (left.as_mut(), &values) {
                    *l -= 1;
                }
                Ok(values)
            }
        }
    }
}

impl Iterator for Rows<'_> {
    type Item = Result<Row>;

    fn next(&mut self) -> Option<Result<Row>> {
        match self.next_values() {
            Ok(Some(values)) => Some(Ok(Row::new(self.columns.clone(), values))),
            Ok(None) => {
                // The scan's chunk and ids go as soon as the rows end.
                self.source = Source::Done;
                None
            }
            Err(e) => {
                self.source = Source::Done;
                Some(Err(e))
            }
        }
    }
}

//! Writing a query's rows to standard output as they come, as CSV or JSON, byte for byte as
//! [`ResultSet::to_csv`](mtfdb::results::ResultSet::to_csv) and `to_json` print a whole result.

use std::io::{BufWriter, Stdout, Write};

use mtfdb::results::{csv_line, csv_row, json_element, RowSink, Value};
use mtfdb::{Error, Result};

use crate::STDOUT;

/// A [`RowSink`] that prints each row when it arrives.
pub struct RowWriter {
    out: BufWriter<Stdout>,
    json: bool,
    columns: Vec<String>,
    rows: u64,
}

impl RowWriter {
    /// A writer of CSV, or of JSON when `json`.
    pub fn new(json: bool) -> RowWriter {
        RowWriter {
            out: BufWriter::new(std::io::stdout()),
            json,
            columns: Vec::new(),
            rows: 0,
        }
    }

    fn write(&mut self, text: &str) -> Result<()> {
        self.out
            .write_all(text.as_bytes())
            .map_err(|e| Error::io(STDOUT, e))
    }

    /// Ends the output (JSON's closing bracket) and flushes it.
    pub fn finish(mut self) -> Result<()> {
        if self.json {
            let end = if self.rows == 0 { "[]\n" } else { "\n]\n" };
            self.write(end)?;
        }
        self.out.flush().map_err(|e| Error::io(STDOUT, e))
    }
}

impl RowSink for RowWriter {
    fn columns(&mut self, columns: &[String]) -> Result<()> {
        self.columns = columns.to_vec();
        if self.json {
            return Ok(());
        }
        self.write(&csv_line(columns.iter().map(String::as_str)))
    }

    fn row(&mut self, row: Vec<Value>) -> Result<()> {
        let text = if self.json {
            let sep = if self.rows == 0 { "[\n" } else { ",\n" };
            format!("{sep}{}", json_element(&self.columns, &row))
        } else {
            csv_row(&row)
        };
        self.rows += 1;
        self.write(&text)
    }
}

//! What the command line says of a trace's anomalies: the rows `SELECT ANOMALIES` lists and
//! the counts `mtfdb info` gives, as a user reads them.

use std::path::Path;

use super::contents::mtfdb;

/// One row of `SELECT ANOMALIES`: (class, rank, operation, time_ns).
pub type Row = (String, String, String, String);

/// The anomaly rows of trace `name` in the database at `db` as `mtfdb query` prints them,
/// and `mtfdb info`'s text.
pub fn reported(db: &Path, name: &str) -> (Vec<Row>, String) {
    let (ok, csv, err) = mtfdb(
        db,
        &[
            "query",
            "--trace",
            name,
            "--format",
            "csv",
            "SELECT ANOMALIES",
        ],
    );
    assert!(ok, "{err}");
    let rows = csv
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.splitn(7, ',').collect();
            (
                f[1].to_string(),
                f[2].to_string(),
                f[3].to_string(),
                f[5].to_string(),
            )
        })
        .collect();
    let (ok, info, err) = mtfdb(db, &["info", name]);
    assert!(ok, "{err}");
    (rows, info)
}

/// The count `mtfdb info` gives the anomalies of `kind`.
pub fn info_count(info: &str, kind: &str) -> Option<u64> {
    info.lines().find_map(|l| {
        let rest = l.trim().strip_prefix(kind)?;
        rest.trim().replace(',', "").parse().ok()
    })
}

/// A row of `SELECT ANOMALIES`.
pub fn row(class: &str, rank: &str, operation: &str, time: &str) -> Row {
    (class.into(), rank.into(), operation.into(), time.into())
}

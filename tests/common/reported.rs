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

/// The recorded values of `trace`'s anomalies of `rule`, in order.
pub fn rule_values(trace: &mtfdb::Trace, rule: mtfdb::model::Rule) -> Vec<Option<u64>> {
    trace
        .anomalies()
        .unwrap()
        .into_iter()
        .filter_map(|a| match a {
            mtfdb::model::Anomaly::BrokenRule { rule: r, value, .. } if r == rule => Some(value),
            _ => None,
        })
        .collect()
}

/// Imports `source` as trace `name` with `mtfdb import` and checks what a user is told of
/// `rule`: the import's summary and `info` count `at.len()` of its kind, `SELECT ANOMALIES`
/// lists exactly `at` (rank, call, time) of its class, and each keeps `value`. Returns the
/// trace for the checks of what the fault left intact.
pub fn assert_rule_reported(
    db: &Path,
    source: &Path,
    name: &str,
    rule: mtfdb::model::Rule,
    at: &[(&str, &str, &str)],
    value: Option<u64>,
    label: &str,
) -> mtfdb::Trace {
    let (class, kind, n) = (rule.class(), rule.kind_name(), at.len());
    let (ok, out, err) = mtfdb(db, &["import", source.to_str().unwrap(), "--name", name]);
    assert!(ok, "{label}: {err}");
    assert!(out.contains(&format!("{n} {kind}")), "{label}: {out}");
    let (rows, info) = reported(db, name);
    let of_class: Vec<&Row> = rows.iter().filter(|r| r.0 == class).collect();
    let expected: Vec<Row> = at
        .iter()
        .map(|&(rank, call, time)| row(class, rank, call, time))
        .collect();
    assert_eq!(
        of_class,
        expected.iter().collect::<Vec<_>>(),
        "{label}: {rows:?}"
    );
    assert_eq!(info_count(&info, kind), Some(n as u64), "{label}: {info}");
    let trace = mtfdb::Database::open(db).unwrap().trace(name).unwrap();
    assert_eq!(rule_values(&trace, rule), vec![value; n], "{label}");
    trace
}

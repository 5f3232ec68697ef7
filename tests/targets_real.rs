//! The record targets on every real trace in `../shared/traces`: `SELECT … FROM ROUTINE
//! CALLS`, `REQUESTS`, `COLLECTIVE INSTANCES` and `ANOMALIES` count what the import counted
//! (what `mtfdb info` reports), and their sums and groups equal what DuckDB computes from the
//! trace's Parquet export (skipped, saying so, without python3's duckdb).

mod common;

use common::{duckdb, real_traces, temp_db};
use mtfdb::{Session, Value};

/// A result's rows as text, for comparing with DuckDB's JSON values.
fn texts(rows: &[Vec<Value>]) -> Vec<Vec<String>> {
    rows.iter()
        .map(|r| r.iter().map(Value::render).collect())
        .collect()
}

fn json_texts(rows: &[Vec<serde_json::Value>]) -> Vec<Vec<String>> {
    rows.iter()
        .map(|r| {
            r.iter()
                .map(|v| match v {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect()
        })
        .collect()
}

#[test]
fn record_targets_on_the_real_traces_agree_with_info_and_the_parquet_export() {
    let Some(files) = real_traces() else {
        return;
    };
    let (dir, db) = temp_db();
    let exports = dir.path().join("exports");
    let mut session = Session::new(db);
    // (the statement, the SQL over the export that must give its rows)
    let mut asked: Vec<(String, String, Vec<Vec<String>>)> = Vec::new();
    let mut totals = [0u64; 4];
    for (i, file) in files.iter().enumerate() {
        let name = format!("t{i}");
        session.database().import(file, Some(&name)).unwrap();
        let trace = session.database().trace(&name).unwrap();
        mtfdb::export::parquet::export_parquet(&trace, &exports.join(&name)).unwrap();
        session.use_trace(&name).unwrap();
        let summary = trace.summary();
        let anomalies: u64 = summary.anomalies.iter().map(|(_, n)| n).sum();
        let count = |session: &mut Session, target: &str| -> u64 {
            let r = session
                .run(&format!("SELECT COUNT(*) FROM {target}"))
                .unwrap();
            match r.rows[0][0] {
                Value::Int(n) => n as u64,
                ref v => panic!("{v:?}"),
            }
        };
        let counts = [
            (count(&mut session, "ROUTINE CALLS"), summary.routine_calls),
            (count(&mut session, "REQUESTS"), summary.request_links),
            (
                count(&mut session, "COLLECTIVE INSTANCES"),
                summary.collective_instances,
            ),
            (count(&mut session, "ANOMALIES"), anomalies),
        ];
        for (k, (got, info)) in counts.into_iter().enumerate() {
            assert_eq!(got, info, "{}: target {k}", file.display());
            totals[k] += got;
        }
        // Every row streams through the cursor too.
        let rows = session
            .query("SELECT COLLECTIVE INSTANCES")
            .unwrap()
            .count() as u64;
        assert_eq!(rows, summary.collective_instances, "{}", file.display());
        // Anomalies by class: the counts info prints, by their kind names.
        let by_class = session
            .run("SELECT COUNT(*) FROM ANOMALIES GROUP BY CLASS")
            .unwrap();
        assert_eq!(
            by_class.len(),
            summary.anomalies.len(),
            "{}",
            file.display()
        );
        let t = format!("'{name}'");
        for (statement, sql) in [
            (
                "SELECT SUM(DURATION), COUNT(*) FROM ROUTINE CALLS GROUP BY ROUTINE".to_string(),
                format!(
                    "SELECT routine, SUM(end_ns - start_ns), COUNT(*) FROM routine_calls \
                     WHERE trace = {t} GROUP BY routine ORDER BY routine"
                ),
            ),
            (
                "SELECT COUNT(*), SUM(SENT), SUM(RECEIVED), MAX(DURATION) FROM COLLECTIVE \
                 INSTANCES GROUP BY OPERATION"
                    .to_string(),
                format!(
                    "SELECT operation, COUNT(*), SUM(send_bytes), SUM(recv_bytes), \
                     MAX(end_ns - start_ns) FROM collectives WHERE trace = {t} \
                     GROUP BY operation ORDER BY operation"
                ),
            ),
            (
                "SELECT COUNT(*) FROM REQUESTS GROUP BY OPERATION".to_string(),
                format!(
                    "SELECT o.operation, COUNT(*) FROM requests q JOIN operations o \
                     ON o.trace = q.trace AND o.id = q.request_op WHERE q.trace = {t} \
                     GROUP BY o.operation ORDER BY o.operation"
                ),
            ),
            (
                "SELECT COUNT(*) FROM ANOMALIES GROUP BY CLASS".to_string(),
                format!(
                    "SELECT kind, COUNT(*) FROM anomalies WHERE trace = {t} GROUP BY kind \
                     ORDER BY kind"
                ),
            ),
        ] {
            let ours = texts(&session.run(&statement).unwrap().rows);
            asked.push((format!("{}: {statement}", file.display()), sql, ours));
        }
    }
    // The real traces have every kind of record between them.
    assert!(totals.iter().all(|&n| n > 0), "{totals:?}");
    let queries: Vec<String> = asked.iter().map(|(_, sql, _)| sql.clone()).collect();
    let Some(answers) = duckdb(&exports, &queries) else {
        return;
    };
    for ((what, sql, ours), theirs) in asked.iter().zip(answers) {
        let theirs = theirs.unwrap_or_else(|e| panic!("{what}\n{sql}\nDuckDB: {e}"));
        // An empty table is no group for DuckDB, and none for mtfdb either (grouped).
        assert_eq!(ours, &json_texts(&theirs), "{what}\n{sql}");
    }
}

//! The cursor API: `Session::query` returns the rows `Session::run` returns, as typed rows
//! read as the cursor advances; typed getters convert or refuse with an error, never a panic.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use mtfdb::{Database, Error, NameKind, ResultSet, Row, Session, Value};

const EXAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/examples/traces/stencil2d-16.mtf"
);

fn session(dir: &tempfile::TempDir) -> Session {
    let db = Database::open(dir.path().join("db")).unwrap();
    db.import(EXAMPLE, Some("wrf16")).unwrap();
    Session::new(db)
}

fn through_cursor(s: &mut Session, q: &str) -> ResultSet {
    s.query(q)
        .unwrap_or_else(|e| panic!("{q}: {e}"))
        .into_result_set()
        .unwrap_or_else(|e| panic!("{q}: {e}"))
}

#[test]
fn the_cursor_returns_what_run_returns() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(&dir);
    for q in [
        "SELECT ALL OPERATIONS",
        "SELECT ALL MESSAGES IN COMM(C1)",
        "SELECT SENDS AMONG PROCESSES(0-5) WHERE SIZE > 100",
        "SELECT ALL OPERATIONS FOR PROCESS(3) LIMIT 10",
        "SELECT ALL OPERATIONS LIMIT 0",
        "SELECT ALL OPERATIONS ORDER BY duration_ns DESC LIMIT 5",
        "SELECT ALL MESSAGES ORDER BY size, id",
        "SELECT COUNT(*), SUM(SIZE) FROM MESSAGES GROUP BY PROCESS",
        "SELECT FAN_IN FOR ALL PROCESSES",
        "EXPLAIN SELECT ALL OPERATIONS FOR PROCESS(2)",
        "EXPLAIN ANALYZE SELECT ALL OPERATIONS FOR PROCESS(2) LIMIT 3",
        "SHOW PROCESSES",
    ] {
        let whole = s.run(q).unwrap();
        let cursor = through_cursor(&mut s, q);
        assert_eq!(cursor, whole, "{q}");
    }
    // The selections above are not all empty, nor all cut short.
    assert_eq!(
        through_cursor(&mut s, "SELECT ALL OPERATIONS").len() as u64,
        s.database().trace("wrf16").unwrap().summary().operations
    );
}

#[test]
fn limit_stops_the_cursor_and_columns_come_first() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(&dir);
    let rows = s.query("SELECT ALL MESSAGES LIMIT 7").unwrap();
    assert_eq!(
        rows.columns(),
        [
            "id",
            "sender",
            "receiver",
            "comm",
            "tag",
            "size",
            "send_time_ns",
            "recv_time_ns"
        ]
    );
    let rows: Vec<Row> = rows.collect::<mtfdb::Result<_>>().unwrap();
    assert_eq!(rows.len(), 7);
    let none = s.query("SELECT ALL MESSAGES LIMIT 0").unwrap();
    assert_eq!(none.columns().len(), 8);
    assert_eq!(none.count(), 0);
}

#[test]
fn rows_are_read_as_the_cursor_advances() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(&dir);
    let cancel = s.cancel_flag();
    let mut rows = s.query("SELECT ALL OPERATIONS").unwrap();
    assert!(rows.next().unwrap().is_ok());
    // The first chunk was read for the first row; the later chunks are read only now, and
    // the cancel set in between stops them.
    cancel.store(true, Ordering::Relaxed);
    let rest: Vec<mtfdb::Result<Row>> = rows.collect();
    assert!(
        matches!(rest.last(), Some(Err(Error::Cancelled))),
        "the cursor read every row before it was asked for them"
    );
    assert_eq!(
        rest.iter().filter(|r| r.is_err()).count(),
        1,
        "one error ends it"
    );
    cancel.store(false, Ordering::Relaxed);
    // The next statement runs as usual.
    assert!(s.query("SELECT ALL OPERATIONS LIMIT 1").unwrap().count() == 1);
}

#[test]
fn typed_getters_read_by_position_and_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(&dir);
    let whole = s
        .run("SELECT ALL OPERATIONS FOR PROCESS(3) LIMIT 20")
        .unwrap();
    let rows: Vec<Row> = s
        .query("SELECT ALL OPERATIONS FOR PROCESS(3) LIMIT 20")
        .unwrap()
        .collect::<mtfdb::Result<_>>()
        .unwrap();
    assert_eq!(rows.len(), 20);
    for (row, values) in rows.iter().zip(&whole.rows) {
        assert_eq!(row.values(), &values[..]);
        assert_eq!(row.get::<u32>("rank").unwrap(), 3);
        assert_eq!(row.get::<i64>(1).unwrap(), 3);
        assert_eq!(
            row.get::<u64>("RANK").unwrap(),
            3,
            "names are case-insensitive"
        );
        let id: u64 = row.get("id").unwrap();
        assert_eq!(Value::Int(id.into()), values[0]);
        let start: u64 = row.get("start_ns").unwrap();
        let end: u64 = row.get("end_ns").unwrap();
        assert_eq!(row.get::<u64>("duration_ns").unwrap(), end - start);
        assert_eq!(row.get::<f64>("duration_ns").unwrap(), (end - start) as f64);
        let operation: String = row.get("operation").unwrap();
        assert_eq!(Value::Text(operation), values[3]);
        let root: Option<u32> = row.get("root").unwrap();
        assert_eq!(Value::from(root), values[12]);
        let peer: Option<u32> = row.get("peer").unwrap();
        assert!(peer.is_none_or(|p| p < 16 && p != 3));
        assert_eq!(row.get::<Value>("comm").unwrap(), values[7]);
    }
}

#[test]
fn a_value_of_the_wrong_type_is_an_error_not_a_panic() {
    let columns: Arc<[String]> = ["rank", "operation", "root", "average", "big"]
        .map(String::from)
        .into();
    let row = Row::new(
        columns,
        vec![
            Value::Int(-1),
            "MPI_Send".into(),
            Value::Null,
            Value::Float(2.5),
            Value::Int(1 << 40),
        ],
    );
    let column_of = |e: Error| match e {
        Error::ColumnType { column, message } => {
            assert!(message.contains(&column), "{message}");
            column
        }
        other => panic!("not a type error: {other}"),
    };
    assert_eq!(
        column_of(row.get::<u64>("operation").unwrap_err()),
        "operation"
    );
    assert_eq!(column_of(row.get::<String>("rank").unwrap_err()), "rank");
    assert_eq!(column_of(row.get::<u64>("rank").unwrap_err()), "rank");
    assert_eq!(row.get::<i32>("rank").unwrap(), -1);
    assert_eq!(column_of(row.get::<u32>("root").unwrap_err()), "root");
    assert_eq!(row.get::<Option<u32>>("root").unwrap(), None);
    assert_eq!(row.get::<Option<i64>>(0).unwrap(), Some(-1));
    assert_eq!(column_of(row.get::<i64>("average").unwrap_err()), "average");
    assert_eq!(row.get::<f64>("average").unwrap(), 2.5);
    assert_eq!(column_of(row.get::<u32>("big").unwrap_err()), "big");
    assert_eq!(row.get::<u64>("big").unwrap(), 1 << 40);
    for missing in [row.get::<u64>("bytes"), row.get::<u64>(5)] {
        match missing {
            Err(Error::UnknownName {
                what: NameKind::Column,
                message,
                ..
            }) => assert!(message.contains("rank, operation, root"), "{message}"),
            other => panic!("not an unknown column: {other:?}"),
        }
    }
}

#[test]
fn a_statement_that_cannot_run_fails_before_any_row() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(&dir);
    assert!(matches!(
        s.query("SELECT ALL MESSAGES IN COMM(nope)"),
        Err(Error::UnknownName {
            what: NameKind::Communicator,
            ..
        })
    ));
    assert!(matches!(s.query("SELECT"), Err(Error::Syntax(_))));
}

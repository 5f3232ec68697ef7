//! A trace without timestamps (as FACT collects them: each rank's order of events only) keeps
//! its structure: the same trace with and without times gives the same loop nests, patterns
//! and topology; its times read as null; what needs times says so.

use std::path::{Path, PathBuf};

use mtfdb::query::Session;
use mtfdb::results::Value;
use mtfdb::Database;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/untimed")
        .join(name)
}

fn rows(s: &mut Session, statement: &str) -> Vec<Vec<Value>> {
    s.run(statement)
        .unwrap_or_else(|e| panic!("{statement}: {e}"))
        .rows
}

/// A session on the fixture `name`, imported as `name` into a database of its own.
fn session(dir: &Path, name: &str) -> Session {
    let db = Database::open(dir.join(name)).unwrap();
    db.import(fixture(&format!("{name}.mtf")), Some(name))
        .unwrap();
    let mut s = Session::new(db);
    s.use_trace(name).unwrap();
    s
}

/// Sessions on the timed and the untimed fixture.
fn both() -> (tempfile::TempDir, Session, Session) {
    let dir = tempfile::tempdir().unwrap();
    let timed = session(dir.path(), "timed");
    let untimed = session(dir.path(), "untimed");
    (dir, timed, untimed)
}

#[test]
fn loops_patterns_and_topology_are_the_same_without_times() {
    let (_dir, mut timed, mut untimed) = both();
    for statement in [
        "SELECT LOOPS FOR PROCESS(0)",
        "SELECT LOOPS FOR PROCESS(1)",
        "SELECT GLOBAL MODEL",
        "SELECT PATTERNS FOR PROCESS(0)",
        "SELECT PATTERNS FOR PROCESS(1)",
        "SELECT PATTERNS FOR PROCESS(0) WITH TANDEMS OFF, DELIMITERS OFF",
        "SELECT TOPOLOGY",
        "SELECT LOGICAL TRACE FOR PROCESS(0)",
        "SELECT COUNT(*) FROM OPERATIONS GROUP BY PROCESS",
    ] {
        let expected = rows(&mut timed, statement);
        assert!(!expected.is_empty(), "{statement}");
        assert_eq!(rows(&mut untimed, statement), expected, "{statement}");
    }
    // The loop found is the program's: five calls of step.
    let nest: Vec<Vec<Value>> = [
        "main(",
        "for i0 in 0..5 { step( S1 R1 MPI_Allreduce ) }",
        ")",
        "-- 27 events, 55 bytes of model",
        "-- main loop: 5 iterations, one step call each",
    ]
    .iter()
    .map(|l| vec![Value::Text(l.to_string())])
    .collect();
    assert_eq!(rows(&mut untimed, "SELECT LOOPS FOR PROCESS(0)"), nest);
    // Communication patterns alike but for their times, which are null.
    let (with, without) = (
        rows(&mut timed, "SELECT COMMUNICATION PATTERNS"),
        rows(&mut untimed, "SELECT COMMUNICATION PATTERNS"),
    );
    assert_eq!(with.len(), without.len());
    assert!(!with.is_empty());
    for (a, b) in with.iter().zip(&without) {
        assert_eq!((&a[..5], &a[7..]), (&b[..5], &b[7..]));
        assert_eq!(&b[5..7], &[Value::Null, Value::Null]);
    }
}

#[test]
fn an_untimed_trace_shows_its_times_as_null() {
    let (_dir, _, mut untimed) = both();
    let ops = untimed
        .run("SELECT ALL OPERATIONS FOR PROCESS(0) LIMIT 3")
        .unwrap();
    assert_eq!(ops.rows.len(), 3);
    for column in ["start_ns", "end_ns", "duration_ns"] {
        let c = ops.column(column).unwrap();
        assert!(ops.rows.iter().all(|r| r[c] == Value::Null), "{column}");
    }
    let messages = untimed.run("SELECT ALL MESSAGES").unwrap();
    assert_eq!(messages.rows.len(), 10);
    let c = messages.column("send_time_ns").unwrap();
    assert!(messages.rows.iter().all(|r| r[c] == Value::Null));
    // The record targets too: every column of time or duration is null, the rest is there.
    for (target, times) in [
        ("ROUTINE CALLS", &["start_ns", "end_ns", "duration_ns"][..]),
        (
            "COLLECTIVE INSTANCES",
            &["start_ns", "end_ns", "duration_ns", "skew_ns"][..],
        ),
    ] {
        let r = untimed.run(&format!("SELECT {target}")).unwrap();
        assert!(!r.rows.is_empty(), "{target}");
        for column in times {
            let c = r
                .column(column)
                .unwrap_or_else(|| panic!("{target}: {column} in {:?}", r.columns));
            assert!(
                r.rows.iter().all(|row| row[c] == Value::Null),
                "{target} {column}"
            );
        }
        assert!(
            r.rows
                .iter()
                .all(|row| row.iter().any(|v| *v != Value::Null)),
            "{target}"
        );
    }
    // Counting needs no times.
    let counts = rows(
        &mut untimed,
        "SELECT COUNT(*) FROM ROUTINE CALLS GROUP BY ROUTINE",
    );
    assert!(!counts.is_empty());
}

#[test]
fn an_untimed_trace_stays_untimed_through_parquet_and_gxl_and_draws_no_timeline() {
    let (dir, _, mut untimed) = both();
    let db = untimed.database();
    let trace = db.trace("untimed").unwrap();
    let out = dir.path().join("pq");
    mtfdb::export::parquet::export_parquet(&trace, &out).unwrap();
    let gxl = dir.path().join("copy.gxl");
    mtfdb::export::export_file(&trace, mtfdb::export::Format::Gxl, &gxl).unwrap();
    // A timeline would take the order for times: refused, and nothing is written.
    let json = dir.path().join("copy.json");
    let e = mtfdb::export::export_file(&trace, mtfdb::export::Format::Chrome, &json)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("a Chrome (Perfetto) timeline needs times"),
        "{e}"
    );
    assert!(!json.exists());
    drop(trace);
    db.import(&out, Some("from-parquet")).unwrap();
    db.import(&gxl, Some("from-gxl")).unwrap();
    let before = rows(&mut untimed, "SELECT LOOPS FOR PROCESS(1)");
    for copy in ["from-parquet", "from-gxl"] {
        assert!(
            untimed.database().trace(copy).unwrap().header().untimed,
            "{copy}"
        );
        untimed.use_trace(copy).unwrap();
        assert_eq!(
            rows(&mut untimed, "SELECT LOOPS FOR PROCESS(1)"),
            before,
            "{copy}"
        );
        let e = untimed.run("SELECT PHASES").unwrap_err().to_string();
        assert!(e.contains("needs times"), "{copy}: {e}");
    }
}

#[test]
fn what_needs_times_says_so() {
    let (_dir, _, mut untimed) = both();
    let tail = "needs times, and trace \"untimed\" has none: its source recorded the order of \
                its events only (loops, patterns and topology work on order alone)";
    for (statement, what) in [
        ("SELECT PHASES", "SELECT PHASES"),
        ("SHOW PHASE TREE", "SHOW PHASE TREE"),
        ("SELECT CRITICAL PATH", "SELECT CRITICAL PATH"),
        ("SIMULATE", "SIMULATE"),
        ("SELECT NETWORK MODEL", "SELECT NETWORK MODEL"),
        ("SELECT WAIT STATES", "SELECT WAIT STATES"),
        ("SELECT ALL OPERATIONS IN PHASE 1", "IN PHASE"),
        ("SELECT ALL MESSAGES BETWEEN TIME 0 AND 1", "BETWEEN TIME"),
        (
            "SELECT SUM(DURATION) FROM ROUTINE CALLS GROUP BY ROUTINE",
            "an aggregate of DURATION",
        ),
        (
            "SELECT AVG(DURATION) FROM OPERATIONS",
            "an aggregate of DURATION",
        ),
        ("SELECT HISTOGRAM OF DURATION", "HISTOGRAM OF DURATION"),
        ("SELECT MPI TIME", "MPI TIME"),
        (
            "SELECT ALL OPERATIONS WHERE DURATION > 5",
            "WHERE on DURATION or SKEW",
        ),
        (
            "SELECT COLLECTIVE INSTANCES WHERE SKEW > 0",
            "WHERE on DURATION or SKEW",
        ),
    ] {
        let e = untimed.run(statement).unwrap_err().to_string();
        assert!(e.ends_with(&format!("{what} {tail}")), "{statement}: {e}");
    }
}

#[test]
fn an_untimed_trace_round_trips_through_mtf_text() {
    let (dir, _, mut untimed) = both();
    let db = untimed.database();
    let file = dir.path().join("copy.mtf");
    mtfdb::export::export_file(
        &db.trace("untimed").unwrap(),
        mtfdb::export::Format::MtfText,
        &file,
    )
    .unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.starts_with("MTF 1\nuntimed\n"), "{text}");
    assert!(text.contains("\n0 - - Init\n"), "{text}");
    db.import(&file, Some("copy")).unwrap();
    assert!(db.trace("copy").unwrap().header().untimed);
    let before = rows(&mut untimed, "SELECT LOOPS FOR PROCESS(1)");
    untimed.use_trace("copy").unwrap();
    assert_eq!(rows(&mut untimed, "SELECT LOOPS FOR PROCESS(1)"), before);
}

#[test]
fn a_time_in_an_untimed_trace_is_refused_where_it_stands() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.mtf");
    std::fs::write(
        &file,
        "MTF 1\nuntimed\nprocess 0 P0\ncommunicator 0 w 0\n0 - - Init\n0 10 20 Finalize\n",
    )
    .unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    let e = db.import(&file, Some("t")).unwrap_err().to_string();
    assert!(
        e.contains("t.mtf:6:3") && e.contains("expected - for the time (the trace is untimed)"),
        "{e}"
    );
}

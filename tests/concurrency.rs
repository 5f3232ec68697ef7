//! Many readers and one writer at once: reading processes never wait and never err while a
//! writer imports and drops, every answer is that of some committed state; processes killed
//! at random leave exactly the committed traces and no lock; a session sees, at each
//! statement, what others committed before it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod common;

use common::{mtfdb_output as mtfdb, succeeded as ok, text, EXAMPLE_TRACE as EXAMPLE};
use mtfdb::query::Session;
use mtfdb::Database;

/// A database holding the example as `a`, and a generated ring trace's file to import as `b`.
fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    ok(mtfdb(&db, &["import", EXAMPLE, "--name", "a"]));
    let ring = dir.path().join("ring.mtf");
    ok(mtfdb(
        &db,
        &[
            "gen",
            "ring",
            "--ranks",
            "8",
            "--iterations",
            "20",
            "-o",
            ring.to_str().unwrap(),
        ],
    ));
    (dir, db, ring)
}

const STATEMENT: &str = "SELECT COUNT(*), SUM(SIZE) FROM MESSAGES GROUP BY PROCESS";

fn query(db: &Path, trace: &str) -> Output {
    mtfdb(
        db,
        &["query", STATEMENT, "--trace", trace, "--format", "csv"],
    )
}

#[test]
fn eight_reading_processes_see_only_committed_states_while_a_writer_imports_and_drops() {
    let (_dir, db, ring) = setup();
    // The answers of each committed state, computed alone.
    let answer_a = ok(query(&db, "a"));
    let traces_without_b = ok(mtfdb(&db, &["traces"]));
    ok(mtfdb(
        &db,
        &["import", ring.to_str().unwrap(), "--name", "b"],
    ));
    let answer_b = ok(query(&db, "b"));
    let traces_with_b = ok(mtfdb(&db, &["traces"]));
    ok(mtfdb(&db, &["drop", "b"]));
    assert_ne!(traces_with_b, traces_without_b);

    let writing = Arc::new(AtomicBool::new(true));
    let writer = {
        let (db, ring, writing) = (db.clone(), ring.clone(), writing.clone());
        std::thread::spawn(move || {
            let mut landed = 0;
            for _ in 0..6 {
                ok(mtfdb(
                    &db,
                    &["import", ring.to_str().unwrap(), "--name", "b"],
                ));
                std::thread::sleep(Duration::from_millis(50));
                ok(mtfdb(&db, &["drop", "b"]));
                landed += 2;
            }
            writing.store(false, Ordering::SeqCst);
            landed
        })
    };
    let readers: Vec<_> = (0..8)
        .map(|r| {
            let (db, writing) = (db.clone(), writing.clone());
            let (answer_a, answer_b) = (answer_a.clone(), answer_b.clone());
            let (with_b, without_b) = (traces_with_b.clone(), traces_without_b.clone());
            std::thread::spawn(move || {
                let mut seen = [0usize; 3];
                let mut i = r;
                while writing.load(Ordering::SeqCst) {
                    match i % 3 {
                        0 => assert_eq!(ok(query(&db, "a")), answer_a, "reader {r}"),
                        1 => {
                            let t = ok(mtfdb(&db, &["traces"]));
                            assert!(t == with_b || t == without_b, "reader {r}: {t}");
                        }
                        _ => {
                            // b whole, or (in a state without b) no such trace: nothing else.
                            let o = query(&db, "b");
                            if o.status.success() {
                                assert_eq!(text(&o.stdout), answer_b, "reader {r}");
                            } else {
                                let err = text(&o.stderr);
                                assert!(err.contains("no trace named \"b\""), "reader {r}: {err}");
                            }
                        }
                    }
                    seen[i % 3] += 1;
                    i += 1;
                }
                seen
            })
        })
        .collect();
    let landed = writer.join().unwrap();
    let mut statements = 0;
    for r in readers {
        statements += r.join().unwrap().iter().sum::<usize>();
    }
    assert_eq!(landed, 12, "every import and drop landed");
    assert!(statements >= 8, "the readers ran {statements} statements");
    assert_eq!(ok(mtfdb(&db, &["traces"])), traces_without_b);
    ok(mtfdb(&db, &["check"]));
}

/// Whether another process holds the write lock of `db`.
fn lock_held(db: &Path) -> bool {
    let f = std::fs::File::options()
        .write(true)
        .create(true)
        .truncate(false)
        .open(db.join("LOCK"))
        .unwrap();
    rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err()
}

#[test]
fn readers_and_writers_killed_at_random_leave_the_committed_traces_and_no_lock() {
    let (_dir, db, ring) = setup();
    let answer_a = ok(query(&db, "a"));
    ok(mtfdb(
        &db,
        &["import", ring.to_str().unwrap(), "--name", "c"],
    ));
    let answer_c = ok(query(&db, "c"));
    let mut present = true;
    // A small deterministic generator (splitmix64) for the moments and victims.
    let mut state = 0x5eed_u64;
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let spawn = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_mtfdb"))
            .arg("--db")
            .arg(&db)
            .args(args)
            .env_remove("MTFDB_DB")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    for trial in 0..60 {
        let ring_path = ring.to_str().unwrap();
        let writer_args: Vec<&str> = if present {
            vec!["drop", "c"]
        } else {
            vec!["import", ring_path, "--name", "c"]
        };
        let mut writer = spawn(&writer_args);
        let mut readers: Vec<_> = (0..3)
            .map(|i| match i {
                0 => spawn(&["query", STATEMENT, "--trace", "a"]),
                1 => spawn(&["traces"]),
                _ => spawn(&["query", "SELECT PATTERNS FOR PROCESS(0)", "--trace", "a"]),
            })
            .collect();
        std::thread::sleep(Duration::from_millis(next() % 40));
        let kill_writer = next() % 4 != 0;
        if kill_writer {
            let _ = writer.kill();
        }
        let finished = writer.wait().unwrap().success();
        for r in readers.iter_mut() {
            if next() % 2 == 0 {
                let _ = r.kill();
            }
            let _ = r.wait();
        }
        assert!(!lock_held(&db), "trial {trial}: a lock was left behind");
        // The database holds exactly a committed state: `c` whole, or no `c`.
        let traces = ok(mtfdb(&db, &["traces"]));
        let now = traces.contains("\nc ") || traces.lines().any(|l| l.starts_with("c "));
        if finished {
            assert_eq!(
                now, !present,
                "trial {trial}: the writer finished: {traces}"
            );
        }
        present = now;
        assert_eq!(ok(query(&db, "a")), answer_a, "trial {trial}");
        if present {
            assert_eq!(ok(query(&db, "c")), answer_c, "trial {trial}");
        }
        // Nothing damaged (a segment a writer killed mid-commit left is only recoverable).
        let check = mtfdb(&db, &["check"]);
        assert!(
            text(&check.stdout).contains(": 0 damaged"),
            "trial {trial}: {}",
            text(&check.stdout)
        );
    }
}

#[test]
fn a_session_reads_at_each_statement_what_others_committed_before_it() {
    let (_dir, db, ring) = setup();
    let mut session = Session::new(Database::open(&db).unwrap());
    session.use_trace("a").unwrap();
    let count = |s: &mut Session, q: &str| -> u64 {
        let mut rows = s.query(q).unwrap();
        rows.next().unwrap().unwrap().get(0).unwrap()
    };
    assert_eq!(count(&mut session, "SELECT COUNT(*) FROM MESSAGES"), 1440);
    // Another process replaces `a` with another trace of the same name, and adds a view.
    ok(mtfdb(&db, &["drop", "a"]));
    ok(mtfdb(
        &db,
        &["import", ring.to_str().unwrap(), "--name", "a"],
    ));
    ok(mtfdb(
        &db,
        &[
            "query",
            "CREATE VIEW late AS SELECT ALL MESSAGES WHERE SENDER = 0",
            "--trace",
            "a",
        ],
    ));
    let ring_messages = count(&mut session, "SELECT COUNT(*) FROM MESSAGES");
    assert_ne!(ring_messages, 1440, "the next statement reads the new `a`");
    let in_view = count(&mut session, "SELECT COUNT(*) FROM MESSAGES IN VIEW late");
    assert!(in_view > 0 && in_view < ring_messages);
    // A view this session makes is there for its next statement, without reopening.
    session
        .run("CREATE VIEW mine AS SELECT ALL MESSAGES WHERE RECEIVER = 0")
        .unwrap();
    let mine = count(&mut session, "SELECT COUNT(*) FROM MESSAGES IN VIEW mine");
    assert!(mine > 0);
    let listed = ok(mtfdb(&db, &["query", "SHOW VIEWS", "--trace", "a"]));
    assert!(
        listed.contains("mine") && listed.contains("late"),
        "{listed}"
    );
}

#[test]
fn a_trace_open_in_a_reader_stays_whole_while_another_process_drops_it() {
    let (_dir, db, _ring) = setup();
    ok(mtfdb(
        &db,
        &[
            "query",
            "CREATE VIEW big AS SELECT ALL MESSAGES WHERE SIZE > 1000",
            "--trace",
            "a",
        ],
    ));
    let handle = Database::open(&db).unwrap();
    let trace = handle.trace("a").unwrap();
    let messages = trace.messages().unwrap().len();
    ok(mtfdb(&db, &["drop", "a"]));
    // The files are gone from the folder, but this reader's snapshot holds them.
    assert!(std::fs::read_dir(db.join("stored"))
        .unwrap()
        .next()
        .is_none());
    assert_eq!(trace.messages().unwrap().len(), messages);
    assert!(trace
        .view("big")
        .unwrap()
        .is_some_and(|v| !v.ids.is_empty()));
    assert!(!trace.is_current().unwrap());
}

//! The hostile cases of issue 15 that need more than a statement: the `mtfdb` command's sharp
//! edges (closed pipes, mistyped paths, folders that hold other files, statements that start
//! with `-`, piped scripts, Ctrl-C), inputs with a byte order mark or a truncated OTF2 anchor,
//! names wider than the table printer's old limit, and `info` on byte sums past 2^64 - 1.
//! The statements' own hostile cases are in `tests/corpus/issue15.test`.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mtfdb::gen::{GenConfig, Scenario};
use mtfdb::query::Session;
use mtfdb::{Database, Error, NameKind, SourceFormat};

fn corpus(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(path)
}

fn example() -> &'static str {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/traces/stencil2d-16.mtf"
    )
}

fn mtfdb(db: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mtfdb"));
    c.arg("--db").arg(db).env_remove("MTFDB_DB");
    c
}

fn run(db: &Path, args: &[&str]) -> Output {
    mtfdb(db).args(args).output().expect("mtfdb runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(o: Output) -> String {
    assert!(
        o.status.success(),
        "mtfdb failed: {}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    text(&o.stdout)
}

/// `mtfdb repl` with `script` piped on its standard input.
fn script(db: &Path, script: &str) -> Output {
    let mut child = mtfdb(db)
        .arg("repl")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// A database holding the bundled example as `w`.
fn example_db(dir: &Path) -> PathBuf {
    let db = dir.join("db");
    ok(run(&db, &["import", example(), "--name", "w"]));
    db
}

#[test]
fn a_closed_stdout_ends_every_command_quietly_with_status_0() {
    let dir = tempfile::tempdir().unwrap();
    let db = example_db(dir.path());
    // `mtfdb query … | head -1`: about a megabyte of rows, of which the reader takes one line.
    let mut child = mtfdb(&db)
        .args(["query", "SELECT ALL OPERATIONS", "--format", "csv"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("id,rank,thread,operation"), "{first}");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stderr), "");

    // The reader gone before anything is written: traces, info, the shell, import's report.
    for args in [
        vec!["traces"],
        vec!["info", "w"],
        vec!["query", "SHOW PROCESSES"],
        vec!["repl"],
        vec!["import", example(), "--name", "again"],
    ] {
        let mut child = mtfdb(&db)
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(b"SHOW PROCESSES;\nSHOW OPERATIONS;\n");
        }
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert_eq!(text(&out.stderr), "", "{args:?}");
    }
}

#[test]
fn commands_that_only_read_never_create_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("tarces.mtfdb");
    for args in [
        vec!["traces"],
        vec!["info", "w"],
        vec!["query", "SELECT FAN_IN"],
        vec!["repl"],
        vec!["drop", "w"],
    ] {
        let o = run(&typo, &args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert_eq!(
            text(&o.stderr),
            format!(
                "error: no database at {0} (no such directory; `mtfdb --db {0} import FILE` creates one)\n",
                typo.display()
            ),
            "{args:?}"
        );
        assert!(!typo.exists(), "{args:?} created {}", typo.display());
    }
    // Nor its parent folders.
    let deep = dir.path().join("a/b/c.mtfdb");
    assert_eq!(run(&deep, &["traces"]).status.code(), Some(1));
    assert!(!dir.path().join("a").exists());
    // The library's read-only open says the same, by kind.
    match Database::open_existing(&typo) {
        Err(Error::UnknownName {
            what: NameKind::Database,
            ..
        }) => {}
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("opened a database that does not exist"),
    }
    assert!(!typo.exists());
}

#[test]
fn import_creates_a_database_only_where_asked_and_never_in_a_folder_of_other_files() {
    let dir = tempfile::tempdir().unwrap();
    // A folder that holds something else.
    let other = dir.path().join("photos");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("cat.jpg"), b"not a database").unwrap();
    let o = run(&other, &["import", example()]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        text(&o.stderr),
        format!(
            "error: database {}: is a folder that holds other files, not an mtfdb database (give a new path, or an existing database)\n",
            other.display()
        )
    );
    let entries: Vec<_> = std::fs::read_dir(&other).unwrap().collect();
    assert_eq!(
        entries.len(),
        1,
        "nothing was written into {}",
        other.display()
    );
    // A path whose folder does not exist: nothing is created.
    let missing = dir.path().join("no/such/folder/db");
    let o = run(&missing, &["import", example()]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        text(&o.stderr),
        format!(
            "error: database {}: cannot be created: the folder {} does not exist\n",
            missing.display(),
            dir.path().join("no/such/folder").display()
        )
    );
    assert!(!dir.path().join("no").exists());
    // Where asked: a new path in an existing folder, or an empty folder.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    for db in [dir.path().join("new.mtfdb"), empty] {
        ok(run(&db, &["import", example(), "--name", "w"]));
        assert!(ok(run(&db, &["traces"])).contains("\nw "));
    }
}

#[test]
fn a_byte_order_mark_before_mtf_1_is_read_by_detection_and_parser() {
    let file = corpus("mtf/bom.mtf");
    assert!(std::fs::read(&file)
        .unwrap()
        .starts_with(b"\xEF\xBB\xBFMTF 1\n"));
    assert_eq!(SourceFormat::detect(&file).unwrap(), SourceFormat::MtfText);
    let (_dir, db) = common::temp_db();
    let info = db.import(&file, None).unwrap();
    assert_eq!(
        (
            info.name.as_str(),
            info.summary.operations,
            info.summary.messages
        ),
        ("bom", 2, 1)
    );
}

#[test]
fn an_otf2_anchor_missing_its_last_bytes_is_refused_as_otf2_print_refuses_it() {
    // The corpus archive: the fixture pingpong-isend with its anchor cut by 3 bytes.
    let (_dir, db) = common::temp_db();
    let anchor = corpus("otf2/anchor-cut-3/traces.otf2");
    let err = db.import(&anchor, Some("cut")).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: byte 158: bad anchor file: the anchor file ends inside its end-of-file marker (1 bytes needed, 0 left)",
            anchor.display()
        )
    );
    assert!(db.traces().unwrap().is_empty());
    // Every cut of the fixture's anchor, against otf2-print's verdict when it is installed:
    // the last two bytes (after the end-of-file marker) are not needed, the others are.
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/otf2/pingpong-isend");
    let full = std::fs::read(fixture.join("traces.otf2")).unwrap();
    let have_otf2_print = Command::new("otf2-print").arg("--help").output().is_ok();
    for cut in 1..=24 {
        let dir = tempfile::tempdir().unwrap();
        let archive = dir.path().join("a");
        copy_dir(&fixture, &archive);
        std::fs::write(archive.join("traces.otf2"), &full[..full.len() - cut]).unwrap();
        let ours = db.import(archive.join("traces.otf2"), Some(&format!("cut{cut}")));
        assert_eq!(
            ours.is_ok(),
            cut <= 2,
            "cut {cut}: {ours:?}",
            ours = ours.as_ref().err()
        );
        if let Err(e) = &ours {
            assert!(matches!(e, Error::Input(_)), "cut {cut}: {e:?}");
        }
        if have_otf2_print {
            let theirs = Command::new("otf2-print")
                .arg(archive.join("traces.otf2"))
                .output()
                .unwrap();
            assert_eq!(ours.is_ok(), theirs.status.success(), "cut {cut}");
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let dest = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &dest);
        } else {
            std::fs::copy(&p, &dest).unwrap();
        }
    }
}

#[test]
fn a_statement_that_starts_with_a_dash_is_a_statement_not_an_option() {
    let dir = tempfile::tempdir().unwrap();
    let db = example_db(dir.path());
    let out = ok(run(
        &db,
        &[
            "query",
            "-- messages of the example\nSELECT COUNT(*) FROM MESSAGES",
            "--format",
            "csv",
        ],
    ));
    assert_eq!(out, "count(*)\n1440\n");
    // A statement that is only a dash is a syntax error of the language, not of the options.
    let o = run(&db, &["query", "-x"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).starts_with("error: at column 1: unexpected character \"-\"")
            || text(&o.stderr).starts_with("error: at column 1: expected a statement"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn a_piped_script_numbers_its_errors_by_the_lines_of_the_script() {
    let dir = tempfile::tempdir().unwrap();
    let db = example_db(dir.path());
    // .bail off: every error is reported and the script goes on.
    let lines = ".bail off\nSELECT COUNT(*) FROM MESSAGES;\n\n-- two lines\nSELECT COUNT(*)\n  FROM MESAGES;\n.mode csv\nSELECT ALL MESSAGES IN VIEW nope;\n.mode tabel\nSELECT COUNT(*) FROM MESSAGES;\n";
    let out = script(&db, lines);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "error: at line 6, column 8: expected what to select after FROM (MESSAGES, OPERATIONS, SENDS, RECEIVES, POINT_TO_POINT_OPERATIONS, COLLECTIVE_OPERATIONS, CPU BURSTS, ROUTINE CALLS, REQUESTS, COLLECTIVE INSTANCES, ANOMALIES, METRICS, a collective such as BROADCAST, or an MPI name such as MPI_Isend; SHOW TABLES lists them), found \"MESAGES\"\n    FROM MESAGES\n         ^\n\
         error: line 8: no view named \"nope\" in trace \"w\" (it has none)\n  in: SELECT ALL MESSAGES IN VIEW nope\n\
         error: line 9: unknown mode \"tabel\"; use table, csv, json or svg\n\
         error: 3 statements failed (reported above)\n"
    );
    // The statements around the errors ran.
    assert!(
        text(&out.stdout).ends_with("count(*)\n1440\n"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn names_wider_than_65535_characters_print_in_every_table() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let file = corpus("mtf/long-names.mtf");
    ok(run(
        &db,
        &["import", file.to_str().unwrap(), "--name", "long"],
    ));
    let name = |c: char| c.to_string().repeat(70_000);
    for (statement, wide) in [
        ("SHOW PROCESSES", name('P')),
        ("SELECT LOOPS FOR PROCESS(0)", name('r')),
        ("SELECT STATISTICS FOR ALL PROCESSES", name('C')),
        ("SHOW OPERATIONS", name('C')),
        ("SELECT OPERATIONS FOR PROCESS(0)", name('C')),
    ] {
        let out = ok(run(&db, &["query", statement]));
        assert!(out.contains(&wide), "{statement}");
        // Every line of the table is as wide as the widest cell (right-trimmed lines aside).
        assert!(
            out.lines().any(|l| l.chars().count() >= 70_000),
            "{statement}"
        );
        assert!(
            out.ends_with(" rows)\n") || out.ends_with(" row)\n"),
            "{statement}"
        );
    }
    let out = ok(run(&db, &["info", "long"]));
    assert!(out.contains(&name('P')));
    let listing = ok(run(&db, &["traces"]));
    assert!(listing.starts_with("name "), "{listing}");
    // The shell goes on after such a table.
    let out = script(
        &db,
        "SHOW PROCESSES;\n.mode csv\nSELECT COUNT(*) FROM MESSAGES;\n",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).ends_with("count(*)\n2\n"));
}

#[test]
fn info_never_wraps_a_byte_sum_past_2_64() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let file = corpus("mtf/extremes.mtf");
    ok(run(&db, &["import", file.to_str().unwrap()]));
    let info = ok(run(&db, &["info", "extremes"]));
    assert!(
        info.contains(
            "messages (matched send/receive pairs): 5, more than 18,446,744,073,709,551,615 B (a sum past 2^64 - 1; see the value overflow anomalies)\n"
        ),
        "{info}"
    );
    assert!(info.contains("  value overflow "), "{info}");
    // The exact sum is one statement away.
    let sum = ok(run(
        &db,
        &["query", "SELECT SUM(SIZE) FROM MESSAGES", "--format", "csv"],
    ));
    assert_eq!(sum, "sum(size)\n46116860186421362686\n");
}

/// A trace large enough that reading and sorting all its operations takes seconds.
fn large_db(dir: &Path) -> PathBuf {
    let path = dir.join("db");
    let db = Database::open(&path).unwrap();
    common::import_generated(
        &db,
        &GenConfig {
            scenario: Scenario::Stencil2d,
            ranks: 64,
            iterations: 300,
            seed: 1,
            shuffle_ranks: false,
            delays: Vec::new(),
            network: None,
        },
        "big",
    );
    path
}

/// Ctrl-C stops a statement within a fraction of a second, in the library (the flag the
/// shell's handler sets) and in the command (SIGINT), and leaves the views as they were.
#[test]
fn ctrl_c_stops_a_running_statement_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = large_db(dir.path());
    const LONG: &str = "SELECT ALL OPERATIONS ORDER BY duration_ns DESC, id";
    {
        let mut session = Session::new(Database::open(&path).unwrap());
        session.run("USE TRACE big").unwrap();
        session
            .run("CREATE VIEW before AS SELECT BROADCAST")
            .unwrap();
        let flag = Arc::new(AtomicBool::new(false));
        session.set_cancel_flag(flag.clone());
        for statement in [
            LONG,
            "CREATE VIEW slow AS SELECT OPERATIONS WHERE DURATION > 0",
        ] {
            let setter = {
                let flag = flag.clone();
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(30));
                    flag.store(true, Ordering::SeqCst);
                    Instant::now()
                })
            };
            let outcome = session.run(statement);
            let stopped = Instant::now();
            let set_at = setter.join().unwrap();
            // Either it was stopped, promptly, or it had finished before Ctrl-C came (a fast
            // machine finishes a small analysis within the timer's 30 ms).
            match outcome {
                Err(Error::Cancelled) => {
                    let late = stopped.saturating_duration_since(set_at);
                    assert!(late < Duration::from_millis(500), "{statement}: {late:?}");
                }
                other => assert!(
                    stopped <= set_at,
                    "{statement}: not stopped by Ctrl-C: {:?}",
                    other.map(|r| r.len())
                ),
            }
        }
        flag.store(false, Ordering::SeqCst);
        let views = session.run("SHOW VIEWS").unwrap();
        assert_eq!(views.len(), 1, "only the view made before: {views:?}");
    }
    // The command: SIGINT while the statement runs.
    let mut child = mtfdb(&path)
        .args(["query", LONG, "--format", "csv"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read what it writes, as a terminal would: a statement that is already writing rows
    // when Ctrl-C comes must not block on a full pipe.
    let mut stdout = child.stdout.take().unwrap();
    let drain = std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    std::thread::sleep(Duration::from_millis(300));
    let signalled = Instant::now();
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    let late = signalled.elapsed();
    drain.join().unwrap().unwrap();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert_eq!(stderr, "error: cancelled\n");
    assert!(late < Duration::from_millis(800), "{late:?}");
    let views = ok(run(&path, &["query", "SHOW VIEWS", "--format", "csv"]));
    assert_eq!(
        views,
        "name,rows,of,definition\nbefore,19264,operations,SELECT MPI_Bcast\n"
    );
}

/// Ctrl-C while a result is being written stops the writing: the library looks at the flag
/// every 4,096 rows, so a sink that sets it at its first row of a sorted result (computed
/// whole, then written) gets exactly 4,096 rows and the statement ends cancelled.
#[test]
fn ctrl_c_while_rows_are_written_stops_the_writing() {
    use mtfdb::results::{RowSink, Value};
    struct Interrupting {
        flag: Arc<AtomicBool>,
        rows: usize,
    }
    impl RowSink for Interrupting {
        fn columns(&mut self, _: &[String]) -> mtfdb::Result<()> {
            Ok(())
        }
        fn row(&mut self, _: Vec<Value>) -> mtfdb::Result<()> {
            self.rows += 1;
            self.flag.store(true, Ordering::SeqCst);
            Ok(())
        }
    }
    let (_dir, db) = common::generated_db(&GenConfig::new(Scenario::Stencil2d, 16, 50));
    let mut session = Session::new(db);
    session.run("USE TRACE t").unwrap();
    let mut sink = Interrupting {
        flag: session.cancel_flag(),
        rows: 0,
    };
    let outcome = session.run_into(
        "SELECT ALL OPERATIONS ORDER BY duration_ns DESC, id",
        &mut sink,
    );
    assert!(matches!(outcome, Err(Error::Cancelled)), "{outcome:?}");
    assert_eq!(sink.rows, 4096);
    // The next statement runs: the flag is cleared when it starts.
    let mut sink = Interrupting {
        flag: Arc::new(AtomicBool::new(false)),
        rows: 0,
    };
    session
        .run_into("SELECT ALL OPERATIONS LIMIT 10", &mut sink)
        .unwrap();
    assert_eq!(sink.rows, 10);
}

/// Under a file size limit (`ulimit -f`), with SIGXFSZ left as the shell found it (its
/// default kills the process without a word), an import and an export that write past the
/// limit end with status 1 and a message naming the file and saying "File too large".
#[test]
fn a_file_size_limit_is_an_error_that_says_so_not_a_silent_death() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let db = example_db(dir.path());
    let out = dir.path().join("w.gxl");
    let copy = dir.path().join("copy");
    for (what, args) in [
        ("export", vec!["export", "w", "-o", out.to_str().unwrap()]),
        ("import", vec!["import", example(), "--name", "again"]),
    ] {
        // 64 blocks: 32 KiB in dash, 64 KiB in bash; the GXL and the stored trace are larger.
        let mut script = format!(
            "ulimit -f 64; exec '{}' --db '{}'",
            env!("CARGO_BIN_EXE_mtfdb"),
            if what == "import" { &copy } else { &db }.display()
        );
        for a in &args {
            script.push_str(&format!(" '{a}'"));
        }
        let o = Command::new("sh").args(["-c", &script]).output().unwrap();
        let err = text(&o.stderr);
        assert_eq!(o.status.signal(), None, "{what}: killed by a signal");
        assert_eq!(o.status.code(), Some(1), "{what}: {err}");
        assert!(
            err.starts_with("error: ") && err.contains("File too large"),
            "{what}: {err}"
        );
        let file = if what == "import" { &copy } else { &out };
        assert!(err.contains(&file.display().to_string()), "{what}: {err}");
    }
}

/// A token of 2,000,000 characters in a damaged input (a number, a name, a field, stray
/// text) is quoted in the import's error by its first 60 characters and its length, and the
/// line shown under the message by its start: the message stays a few lines long, whichever
/// format and whichever check found the fault.
#[test]
fn an_import_error_quotes_a_huge_token_by_its_start_and_its_length() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let huge = |c: char| c.to_string().repeat(2_000_000);
    let mtf = std::fs::read_to_string(corpus("mtf/anomalies.mtf")).unwrap();
    let mut cases: Vec<(PathBuf, &str)> = Vec::new();
    // MTF text: a number the parser refuses, and a routine name the import's checks refuse.
    let path = dir.path().join("number.mtf");
    let content = mtf.replacen("Send c=0", &format!("Send c={}", huge('9')), 1);
    std::fs::write(&path, content).unwrap();
    cases.push((path, "found \"999999"));
    let path = dir.path().join("leave.mtf");
    let content = mtf.replacen(
        "0 1600 leave main",
        &format!("0 1600 leave {}", huge('m')),
        1,
    );
    std::fs::write(&path, content).unwrap();
    cases.push((path, "unbalanced leave: leave mmmmmm"));
    // OTF v1: a number of two million digits in an events stream.
    let otf1 = dir.path().join("otf1");
    copy_dir(&fixtures.join("otf1/subgroup"), &otf1);
    let events = otf1.join("sub.2.events");
    let content = std::fs::read_to_string(&events).unwrap();
    let content = content.replacen("S4L64T5C10", &format!("S4L{}T5C10", huge('9')), 1);
    std::fs::write(&events, content).unwrap();
    cases.push((otf1.join("sub.otf"), "sub.2.events:"));
    // Paraver: a .row line that is one huge word.
    let paraver = dir.path().join("paraver");
    copy_dir(&fixtures.join("paraver"), &paraver);
    let row = paraver.join("multi.row");
    let content = std::fs::read_to_string(&row).unwrap();
    std::fs::write(&row, content.replacen("LEVEL", &huge('L'), 1)).unwrap();
    cases.push((paraver.join("multi.prv"), "found \"LLLLLL"));
    // GXL: stray text between two nodes.
    let db = example_db(dir.path());
    let gxl = dir.path().join("w.gxl");
    ok(run(&db, &["export", "w", "-o", gxl.to_str().unwrap()]));
    let content = std::fs::read_to_string(&gxl).unwrap();
    let content = content.replacen("</node>", &format!("</node>{}", huge('T')), 1);
    std::fs::write(&gxl, content).unwrap();
    cases.push((gxl, "text outside a value: \"TTTTTT"));
    // DUMPI: a meta file whose rank count is two million digits.
    let meta = dir.path().join("run.meta");
    std::fs::write(
        &meta,
        format!("hostname=h\nfileprefix=run\nnumprocs={}\n", huge('7')),
    )
    .unwrap();
    cases.push((meta, "numprocs must be a number of ranks, found \"777777"));
    for (input, needle) in cases {
        let o = run(
            &dir.path().join("fresh"),
            &["import", input.to_str().unwrap()],
        );
        let err = text(&o.stderr);
        assert!(!o.status.success(), "{}", input.display());
        assert!(err.len() < 1500, "{} bytes: {}", err.len(), &err[..1500]);
        assert!(err.contains(needle), "{needle} not in {err}");
        assert!(err.contains(" characters)"), "{err}");
        let name = input.parent().unwrap().display().to_string();
        assert!(err.contains(&name), "{name} not in {err}");
    }
}

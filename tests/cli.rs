//! The `mtfdb` command as a user runs it: gen → import → traces → info → drop, the database
//! path rules, errors with exit codes, and an import killed half-way.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use mtfdb::Database;

mod common;

use common::mtfdb_output as mtfdb;

/// A database in a fresh directory holding the bundled example as `wrf16`.
fn example_db() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/traces/stencil2d-16.mtf"
    );
    ok(mtfdb(&db, &["import", example, "--name", "wrf16"]));
    (dir, db)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

fn ok(o: Output) -> String {
    assert!(
        o.status.success(),
        "mtfdb failed:\n{}{}",
        stdout(&o),
        stderr(&o)
    );
    stdout(&o)
}

#[test]
fn gen_import_traces_info_drop() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("traces.mtfdb");
    let trace = dir.path().join("wrf16.mtf");
    let truth = dir.path().join("truth.json");
    let t = trace.to_str().unwrap();
    let out = ok(mtfdb(
        &db,
        &[
            "gen",
            "stencil2d",
            "--ranks",
            "16",
            "--iterations",
            "50",
            "-o",
            t,
            "--truth",
            truth.to_str().unwrap(),
        ],
    ));
    assert!(out.starts_with(&format!("wrote {t} (")), "{out}");
    let truth: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&truth).unwrap()).unwrap();

    let out = ok(mtfdb(&db, &["import", t, "--name", "wrf16"]));
    assert!(
        out.starts_with(&format!(
            "imported {t} as \"wrf16\": {} operations, {} messages",
            truth["operations"], truth["messages"]
        )),
        "{out}"
    );

    let out = ok(mtfdb(&db, &["traces"]));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert!(lines[0].starts_with("name"));
    assert!(lines[2].starts_with("wrf16"), "{out}");
    assert_eq!(lines[3], "(1 row)");

    let info = ok(mtfdb(&db, &["info", "wrf16"]));
    // 50 iterations of a 4x4 grid: 48 messages per iteration.
    assert!(info.contains("processes: 16\n"), "{info}");
    assert!(info.contains("processors: 4\n"), "{info}");
    assert!(info.contains("  C1 (id 0): 16 members: 0-15\n"), "{info}");
    assert!(
        info.contains("messages (matched send/receive pairs): 2,400, "),
        "{info}"
    );
    let isends = truth["ops_by_kind"]["MPI_Isend"].as_u64().unwrap();
    assert_eq!(isends, 2400);
    assert!(
        info.contains(&format!("  {:<28} {:>14}\n", "MPI_Isend", "2,400")),
        "{info}"
    );
    assert!(
        info.contains("unmatched operations: 0 sends never received, 0 receives never matched\n"),
        "{info}"
    );
    assert!(info.contains("anomalies: none\n"), "{info}");
    assert!(info.contains("\non disk: "), "{info}");

    let out = mtfdb(&db, &["info", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "error: no trace named \"nope\" in the database (it holds: wrf16)\n"
    );

    assert_eq!(
        ok(mtfdb(&db, &["drop", "wrf16"])),
        "dropped trace \"wrf16\"\n"
    );
    assert_eq!(
        ok(mtfdb(&db, &["traces"])),
        "no traces (import one with `mtfdb import FILE`)\n"
    );
}

#[test]
fn the_database_path_comes_from_db_then_mtfdb_db_then_the_current_directory() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("ring.mtf");
    ok(mtfdb(
        &dir.path().join("x"),
        &[
            "gen",
            "ring",
            "--ranks",
            "4",
            "--iterations",
            "3",
            "-o",
            trace.to_str().unwrap(),
        ],
    ));
    let from_env = dir.path().join("env.mtfdb");
    let o = Command::new(env!("CARGO_BIN_EXE_mtfdb"))
        .args(["import", trace.to_str().unwrap()])
        .env("MTFDB_DB", &from_env)
        .current_dir(dir.path())
        .output()
        .unwrap();
    ok(o);
    assert!(Database::open(&from_env).unwrap().trace("ring").is_ok());
    let o = Command::new(env!("CARGO_BIN_EXE_mtfdb"))
        .args(["import", trace.to_str().unwrap(), "--name", "here"])
        .env_remove("MTFDB_DB")
        .current_dir(dir.path())
        .output()
        .unwrap();
    ok(o);
    assert!(Database::open(dir.path().join("mtfdb.db"))
        .unwrap()
        .trace("here")
        .is_ok());
}

#[test]
fn user_errors_exit_non_zero_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let missing = dir.path().join("missing.mtf");
    let o = mtfdb(&db, &["import", missing.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        format!("error: {}: no such file\n", missing.display())
    );

    let bad = dir.path().join("bad.mtf");
    std::fs::write(
        &bad,
        "MTF 1\nprocess 0 P0\nprocess 1 P1\ncommunicator 0 C1 0-1\n0 10 20 Send c=0 to=1 tag=1 b=8\n1 5 9 Recv c=3 from=0 rtag=1 rb=8\n",
    )
    .unwrap();
    let o = mtfdb(&db, &["import", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.starts_with(&format!("error: {}:6:", bad.display())),
        "{err}"
    );
    assert!(err.contains("unknown communicator"), "{err}");
    // Nothing of the rejected trace is visible.
    assert_eq!(
        ok(mtfdb(&db, &["traces"])),
        "no traces (import one with `mtfdb import FILE`)\n"
    );

    let o = mtfdb(
        &db,
        &[
            "gen",
            "bt",
            "--ranks",
            "10",
            "-o",
            dir.path().join("bt.mtf").to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).starts_with("error: "), "{}", stderr(&o));
}

#[test]
fn an_import_killed_half_way_leaves_no_trace_and_keeps_the_earlier_ones() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let small = dir.path().join("small.mtf");
    let big = dir.path().join("big.mtf");
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
            small.to_str().unwrap(),
        ],
    ));
    // Large enough that the import takes well over a second.
    ok(mtfdb(
        &db,
        &[
            "gen",
            "stencil2d",
            "--ranks",
            "64",
            "--iterations",
            "3000",
            "-o",
            big.to_str().unwrap(),
        ],
    ));
    ok(mtfdb(
        &db,
        &["import", small.to_str().unwrap(), "--name", "kept"],
    ));
    let kept_before = Database::open(&db)
        .unwrap()
        .trace("kept")
        .unwrap()
        .info()
        .summary;

    let mut child = Command::new(env!("CARGO_BIN_EXE_mtfdb"))
        .arg("--db")
        .arg(&db)
        .args(["import", big.to_str().unwrap(), "--name", "killed"])
        .spawn()
        .unwrap();
    // Kill it once it has written many chunks of its own, well before the end (the whole
    // trace takes about 21 MB in format 7).
    let size = |p: &Path| -> u64 { walk(p) };
    let before = size(&db);
    let started = Instant::now();
    while size(&db) < before + 8 * 1024 * 1024 && started.elapsed() < Duration::from_secs(60) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the import finished before it could be killed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();

    // The killed import left its half-written partial segment behind, named by no catalog
    // entry and locked by nobody; readers leave it, the next writer removes it.
    let partials = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(db.join("segments"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "partial"))
            .collect()
    };
    let segment = partials();
    assert_eq!(segment.len(), 1, "the killed import's partial segment");
    let segment = segment[0].clone();
    drop(Database::open(&db).unwrap());

    let reopened = Database::open(&db).unwrap();
    let names: Vec<String> = reopened
        .traces()
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, vec!["kept".to_string()]);
    assert_eq!(reopened.trace("kept").unwrap().info().summary, kept_before);
    assert_eq!(
        reopened.trace("kept").unwrap().messages().unwrap().len() as u64,
        kept_before.messages
    );
    drop(reopened);
    // The name is free and a complete import works; as the next writer, it removed the
    // killed import's file.
    ok(mtfdb(
        &db,
        &["import", small.to_str().unwrap(), "--name", "killed"],
    ));
    assert!(!segment.exists(), "removed by the next writer");
}

fn walk(p: &Path) -> u64 {
    let mut total = 0;
    if let Ok(entries) = std::fs::read_dir(p) {
        for e in entries.flatten() {
            let Ok(m) = e.metadata() else { continue };
            total += if m.is_dir() { walk(&e.path()) } else { m.len() };
        }
    }
    total
}

#[test]
fn info_counts_and_lists_the_anomalies_real_traces_have() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let file = dir.path().join("truncated.mtf");
    // Rank 1 never receives the second send, never completes its Irecv, and never finalizes.
    std::fs::write(
        &file,
        "MTF 1\nprocess 0 P0\nprocess 1 P1\ncommunicator 0 C1 0-1\n\
         0 0 5 Init\n1 0 5 Init\n\
         0 10 20 Send c=0 to=1 tag=1 b=64\n1 12 30 Recv c=0 from=0 rtag=1 rb=64\n\
         0 40 50 Send c=0 to=1 tag=1 b=64\n\
         1 45 46 Irecv c=0 from=0 rtag=9 rb=8 req=3\n\
         0 90 99 Finalize\n",
    )
    .unwrap();
    ok(mtfdb(&db, &["import", file.to_str().unwrap()]));
    let info = ok(mtfdb(&db, &["info", "truncated"]));
    assert!(
        info.contains("messages (matched send/receive pairs): 1, 64 B\n"),
        "{info}"
    );
    assert!(
        info.contains("unmatched operations: 1 sends never received, 1 receives never matched\n"),
        "{info}"
    );
    assert!(
        info.contains(&format!("  {:<36} {:>10}\n", "missing MPI_Finalize", 1)),
        "{info}"
    );
    assert!(
        info.contains(&format!("  {:<36} {:>10}\n", "request never completed", 1)),
        "{info}"
    );
    assert!(
        info.contains("      e.g. rank 1 never called MPI_Finalize\n"),
        "{info}"
    );
    assert!(
        info.contains("send from rank 0 to rank 1 (communicator 0, tag 1) was never received"),
        "{info}"
    );
    assert!(
        info.contains("receive by rank 1 from rank 0 (communicator 0, tag 9) matched no send"),
        "{info}"
    );
    assert!(
        info.contains("request 3 of rank 1 was never completed by a Wait or Test"),
        "{info}"
    );
}

#[test]
fn an_import_that_runs_out_of_space_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let small = dir.path().join("small.mtf");
    let big = dir.path().join("big.mtf");
    ok(mtfdb(
        &db,
        &[
            "gen",
            "ring",
            "--ranks",
            "4",
            "--iterations",
            "10",
            "-o",
            small.to_str().unwrap(),
        ],
    ));
    ok(mtfdb(
        &db,
        &[
            "gen",
            "stencil2d",
            "--ranks",
            "64",
            "--iterations",
            "1000",
            "-o",
            big.to_str().unwrap(),
        ],
    ));
    ok(mtfdb(
        &db,
        &["import", small.to_str().unwrap(), "--name", "kept"],
    ));
    // A file-size limit makes every write past 4 MiB fail as a full disk would (the signal
    // that would kill the process is ignored, so the write returns an error instead).
    let script = format!(
        "trap '' XFSZ; ulimit -f 4096; exec '{}' --db '{}' import '{}' --name full",
        env!("CARGO_BIN_EXE_mtfdb"),
        db.display(),
        big.display()
    );
    let o = Command::new("sh").args(["-c", &script]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let err = stderr(&o);
    assert!(
        err.starts_with(&format!(
            "error: storage error: writing {}/import-",
            db.join("segments").display()
        )) && err.contains(".partial failed: File too large (os error 27); "),
        "{err}"
    );
    assert!(
        err.trim_end().ends_with(
            "the import was abandoned and nothing of it was kept (the other traces are untouched)"
        ),
        "{err}"
    );
    let reopened = Database::open(&db).unwrap();
    let names: Vec<String> = reopened
        .traces()
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, vec!["kept".to_string()]);
    assert_eq!(
        reopened.trace("kept").unwrap().messages().unwrap().len() as u64,
        4 * 10
    );
}

#[test]
fn query_prints_tables_csv_and_json_and_picks_the_trace() {
    let (_dir, db) = example_db();
    let csv = ok(mtfdb(
        &db,
        &[
            "query",
            "SELECT ALL MESSAGES BETWEEN PROCESS(1,2) IN COMM(C1)",
            "--format",
            "csv",
        ],
    ));
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "id,sender,receiver,comm,tag,size,send_time_ns,recv_time_ns"
    );
    assert_eq!(lines.len(), 1 + 60, "30 iterations, one message each way");
    let json = ok(mtfdb(
        &db,
        &[
            "query",
            "SELECT FAN_IN FOR ALL PROCESSES",
            "--trace",
            "wrf16",
            "--format",
            "json",
        ],
    ));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 16);
    assert_eq!(v[5]["senders"], 4, "rank 5 is inside the 4x4 grid");
    let table = ok(mtfdb(
        &db,
        &["query", "SELECT BROADCAST FOR PROCESS(1) IN COMM(C1)"],
    ));
    assert!(table.ends_with("(31 rows)\n"), "{table}");

    let o = mtfdb(&db, &["query", "SELECT BROADCAST FOR PROCES(1)"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "error: at column 22: expected a process selector after FOR, found \"PROCES\"\n  SELECT BROADCAST FOR PROCES(1)\n                       ^\n"
    );
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/traces/stencil2d-16.mtf"
    );
    ok(mtfdb(&db, &["import", example, "--name", "again"]));
    let o = mtfdb(&db, &["query", "SELECT FAN_IN"]);
    assert_eq!(
        stderr(&o),
        "error: the database holds several traces; choose one with --trace NAME or USE TRACE name: again, wrf16\n"
    );
}

#[test]
fn demo_runs_the_papers_queries_and_a_piped_script_runs_in_the_shell() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("demo.db");
    let out = ok(mtfdb(&db, &["demo"]));
    for q in [
        "SELECT ALL MESSAGES IN COMM(C1)",
        "SELECT ALL MESSAGES BETWEEN PROCESS(1,2) IN COMM(C1)",
        "SELECT POINT_TO_POINT_OPERATIONS BETWEEN PROCESS(1,2) IN COMM(C1)",
        "SELECT COLLECTIVE_OPERATIONS AMONG ALL PROCESSES IN COMM(C1)",
        "SELECT BROADCAST FOR PROCESS(1) IN COMM(C1)",
        "SELECT STATISTICS FOR ALL PROCESSES",
    ] {
        assert!(out.contains(q), "demo shows {q}:\n{out}");
    }
    assert!(
        out.contains("(17 rows)"),
        "the statistics table has 16 processes and a totals row"
    );

    let o = common::mtfdb_repl(
        &db,
        ".mode csv\nSELECT COUNT(*)\n  FROM MESSAGES WHERE SIZE > 64 KiB;\nCREATE VIEW r0 AS SELECT OPERATIONS FOR PROCESS(0);\nSHOW VIEWS;\n",
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.starts_with("count(*)\n720\nview,rows\nr0,"), "{text}");
    assert!(text.contains("\nname,rows,of,definition\nr0,"), "{text}");
}

/// `query --format csv|json` writes rows as they come; what it prints is byte for byte what
/// the library's whole result prints, for selections (with and without ORDER BY and LIMIT,
/// empty ones included), aggregates and other statements.
#[test]
fn streamed_csv_and_json_equal_the_whole_result() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/traces/stencil2d-16.mtf"
    );
    ok(mtfdb(&db, &["import", example, "--name", "s"]));
    let statements = [
        "SELECT ALL OPERATIONS LIMIT 50",
        "SELECT ALL MESSAGES",
        "SELECT ALL OPERATIONS FOR PROCESS(3) ORDER BY duration_ns DESC LIMIT 5",
        "SELECT ALL MESSAGES ORDER BY size",
        "SELECT ALL OPERATIONS LIMIT 0",
        "SELECT ALL MESSAGES WHERE SIZE > 18446744073709551615",
        "SELECT COUNT(*) FROM OPERATIONS GROUP BY PROCESS",
        "SELECT STATISTICS FOR ALL PROCESSES",
    ];
    let wholes: Vec<mtfdb::results::ResultSet> = {
        let mut session = mtfdb::query::Session::new(Database::open_existing(&db).unwrap());
        session.use_trace("s").unwrap();
        statements.iter().map(|s| session.run(s).unwrap()).collect()
    };
    for (statement, whole) in statements.into_iter().zip(wholes) {
        let csv = ok(mtfdb(
            &db,
            &["query", statement, "--trace", "s", "--format", "csv"],
        ));
        assert_eq!(csv, whole.to_csv(), "{statement}");
        let json = ok(mtfdb(
            &db,
            &["query", statement, "--trace", "s", "--format", "json"],
        ));
        assert_eq!(json, format!("{}\n", whole.to_json()), "{statement}");
    }
}

#[test]
fn pictures_and_the_report_are_written_whole_from_the_command_and_the_shell() {
    let (dir, db) = example_db();
    let svg = dir.path().join("matrix.svg");
    let said = ok(mtfdb(
        &db,
        &[
            "query",
            "SELECT COMMUNICATION MATRIX OF COUNT",
            "--format",
            "svg",
            "-o",
            svg.to_str().unwrap(),
        ],
    ));
    assert!(
        said.starts_with(&format!("wrote {}", svg.display())),
        "{said}"
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    // 4x4 grid: 24 neighbour pairs, each way.
    assert_eq!(text.matches("class=\"cell\"").count(), 48);
    // Without -o, the picture goes to standard output.
    let out = ok(mtfdb(&db, &["query", "SELECT MPI TIME", "--format", "svg"]));
    assert!(out.starts_with("<?xml") && out.matches("class=\"bar\"").count() == 16);
    // -o with a table writes the table.
    let table = dir.path().join("fan.txt");
    ok(mtfdb(
        &db,
        &["query", "SELECT FAN_IN", "-o", table.to_str().unwrap()],
    ));
    assert!(std::fs::read_to_string(&table)
        .unwrap()
        .ends_with("(16 rows)\n"));

    // A statement without a picture, and an unwritable path: status 1, no file, the earlier
    // picture untouched.
    let o = mtfdb(
        &db,
        &[
            "query",
            "SELECT STATISTICS",
            "--format",
            "svg",
            "-o",
            svg.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("has no picture"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&svg).unwrap(), text);
    let nowhere = dir.path().join("no/such/dir/m.svg");
    let o = mtfdb(
        &db,
        &[
            "query",
            "SELECT COMMUNICATION MATRIX",
            "--format",
            "svg",
            "-o",
            nowhere.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no/such/dir/m.svg"), "{}", stderr(&o));
    assert!(!nowhere.exists());

    // The report.
    let html = dir.path().join("r.html");
    let said = ok(mtfdb(
        &db,
        &["report", "wrf16", "-o", html.to_str().unwrap()],
    ));
    assert!(said.contains("wrote the report of \"wrf16\""), "{said}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.matches("<svg").count() >= 5, "pictures inline");
    assert!(
        !page.contains("src=\"http") && !page.contains("<link"),
        "self-contained"
    );
    let o = mtfdb(&db, &["report", "nope", "-o", html.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("nope"));

    // The shell: .mode svg needs .output; each statement's picture replaces the file (with
    // .bail off, the script goes on past the first error).
    let pic = dir.path().join("shell.svg");
    let script = format!(
        ".bail off\n.mode svg\nSELECT PHASES;\n.output {}\nSELECT PHASES;\nSELECT TOPOLOGY;\n",
        pic.display()
    );
    let o = common::mtfdb_repl(&db, &script, &[]);
    assert!(
        stderr(&o).contains(".mode svg writes each statement's picture to a file"),
        "{}",
        stderr(&o)
    );
    let shown = std::fs::read_to_string(&pic).unwrap();
    assert!(shown.contains("SELECT TOPOLOGY") && shown.contains("class=\"rank\""));
}

#[test]
fn traces_and_info_print_as_csv_and_json_with_the_numbers_a_query_prints() {
    let (_dir, db) = example_db();
    let csv = ok(mtfdb(&db, &["traces", "--format", "csv"]));
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "name,processes,operations,messages,format,source");
    assert!(lines[1].starts_with("wrf16,16,"), "{csv}");
    // The same counts, printed by the same formatter, as a query gives.
    let count = ok(mtfdb(
        &db,
        &["query", "SELECT COUNT(*) FROM MESSAGES", "--format", "csv"],
    ));
    let messages = count.lines().nth(1).unwrap();
    assert_eq!(lines[1].split(',').nth(3), Some(messages), "{csv}");

    let json: serde_json::Value =
        serde_json::from_str(&ok(mtfdb(&db, &["traces", "--format", "json"]))).unwrap();
    assert_eq!(json[0]["name"], "wrf16");
    assert_eq!(json[0]["processes"], 16);

    let info: serde_json::Value =
        serde_json::from_str(&ok(mtfdb(&db, &["info", "wrf16", "--format", "json"]))).unwrap();
    let item = |name: &str| {
        info.as_array()
            .unwrap()
            .iter()
            .find(|r| r["item"] == name)
            .map(|r| r["value"].clone())
    };
    assert_eq!(item("processes"), Some(16.into()));
    assert_eq!(item("messages").unwrap().to_string(), messages);

    let o = mtfdb(&db, &["traces", "--format", "svg"]);
    assert!(!o.status.success());
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "error: traces has no picture; use --format table, csv or json\n"
    );
}

#[test]
fn read_only_commands_create_no_database_at_a_mistyped_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("mistyped");
    for args in [
        vec!["traces"],
        vec!["info", "t"],
        vec!["query", "SHOW TRACES"],
        vec!["export", "t", "-o", "t.mtf"],
        vec!["report", "t"],
    ] {
        let o = mtfdb(&missing, &args);
        assert!(!o.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.starts_with(&format!("error: no database at {}", missing.display())),
            "{args:?}: {err}"
        );
        assert!(!missing.exists(), "{args:?} created {}", missing.display());
    }
}

#[test]
fn gen_leaves_an_existing_file_alone_when_its_arguments_are_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("keep.mtf");
    std::fs::write(&out, "earlier\n").unwrap();
    let o = mtfdb(
        &dir.path().join("db"),
        &[
            "gen",
            "ring",
            "--ranks",
            "4",
            "--iterations",
            "2",
            "--delay",
            "9:0:1ms",
            "-o",
        ]
        .into_iter()
        .chain([out.to_str().unwrap()])
        .collect::<Vec<_>>(),
    );
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("rank 9"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "earlier\n");
    // Nothing else is left beside it (no temporary file).
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn version_completions_and_man_page_name_every_subcommand() {
    let db = Path::new("unused");
    let version = ok(mtfdb(db, &["--version"]));
    assert_eq!(version, format!("mtfdb {}\n", env!("CARGO_PKG_VERSION")));
    let subcommands = [
        "gen",
        "import",
        "traces",
        "info",
        "query",
        "demo",
        "repl",
        "export",
        "report",
        "drop",
        "completions",
        "man",
    ];
    for (shell, entry) in [
        ("bash", "mtfdb,{})"),
        ("zsh", "'{}:"),
        ("fish", "needs_command\" -f -a \"{}\""),
    ] {
        let script = ok(mtfdb(db, &["completions", shell]));
        for sub in subcommands {
            let needle = entry.replace("{}", sub);
            assert!(
                script.contains(&needle),
                "{shell} completions lack {needle}"
            );
        }
    }
    // bash parses the bash script.
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("mtfdb.bash");
    std::fs::write(&script, ok(mtfdb(db, &["completions", "bash"]))).unwrap();
    let bash = Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    assert!(
        bash.status.success(),
        "{}",
        String::from_utf8_lossy(&bash.stderr)
    );

    let man = ok(mtfdb(db, &["man"]));
    assert!(man.contains(".TH mtfdb 1"), "{man}");
    for sub in subcommands {
        assert!(
            man.contains(&format!("\n.TP\nmtfdb\\-{sub}(1)\n")),
            "the man page lacks {sub}"
        );
    }
    assert!(!db.exists());
}

/// A cell a table prints with its unit (`1.708 ms`, `16.0 KiB`) as the number it stands for,
/// with how far its rounding may be from the exact value.
fn read_unit(cell: &str) -> (f64, f64) {
    let (value, unit) = cell
        .trim()
        .split_once(' ')
        .unwrap_or_else(|| panic!("no unit in {cell:?}"));
    let v: f64 = value.parse().unwrap();
    let (scale, decimals) = match unit {
        "ns" => (1.0, 3),
        "µs" => (1e3, 3),
        "ms" => (1e6, 3),
        "s" => (1e9, 3),
        "B" => (1.0, 0),
        "KiB" => (1024.0, 1),
        "MiB" => (1024.0 * 1024.0, 1),
        "GiB" => (1024.0 * 1024.0 * 1024.0, 1),
        other => panic!("unknown unit {other:?} in {cell:?}"),
    };
    // The unit that reads best: no 0.2 ms for 200 µs, no 2000 ms for 2 s.
    assert!(
        (1.0..1024.0).contains(&v) || scale == 1.0,
        "{cell:?} is not in the unit that reads best"
    );
    (v * scale, 0.5 * scale / 10f64.powi(decimals))
}

/// The cells of a table's line `n` (0 is the header): runs of text two spaces apart.
fn table_cells(table: &str, n: usize) -> Vec<String> {
    table
        .lines()
        .nth(n)
        .unwrap()
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn a_table_prints_durations_and_sizes_with_units_and_units_off_and_csv_the_exact_values() {
    let (_dir, db) = example_db();
    for (query, columns) in [
        // rank, mpi_time_ns, calls, span_ns, mpi_share: two durations.
        ("SELECT MPI TIME FOR PROCESS(5)", vec![1usize, 3]),
        // rank, fan_in_bytes, message_bytes, collective_bytes, …: sizes.
        ("SELECT FAN_IN FOR PROCESS(5)", vec![1, 2]),
    ] {
        let csv = ok(mtfdb(&db, &["query", query, "--format", "csv"]));
        let exact: Vec<&str> = csv.lines().nth(1).unwrap().split(',').collect();
        let table = ok(mtfdb(&db, &["query", query]));
        let shown = table_cells(&table, 2);
        let raw = ok(mtfdb(&db, &["query", query, "--units", "off"]));
        let raw_cells = table_cells(&raw, 2);
        for &c in &columns {
            let want: f64 = exact[c].parse().unwrap();
            let (got, rounding) = read_unit(&shown[c]);
            assert!(
                (got - want).abs() <= rounding + 1e-9,
                "{query}: column {c} shows {:?} for {want}",
                shown[c]
            );
            // Without units the table shows the exact value CSV has.
            assert_eq!(raw_cells[c], exact[c], "{query}: {raw}");
        }
    }
    let o = mtfdb(&db, &["query", "SELECT MPI TIME", "--units", "maybe"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("\"maybe\" is neither on nor off"),
        "{}",
        stderr(&o)
    );
}

//! Names from a trace reach the terminal as text, never as controls: a trace whose names hold
//! ESC sequences (a window title, OSC 52 to the clipboard, a screen clear), BEL, CR and a
//! right-to-left override goes through every human-facing printer (query tables, `info`,
//! `traces`, the shell, error messages), which show each control escaped (`\x1b`, `\r`,
//! `\u{202e}`) and measure columns on the escaped text; CSV and JSON carry the exact names.

use std::path::{Path, PathBuf};
use std::process::Output;

mod common;

use common::{mtfdb_output as mtfdb, mtfdb_repl};

/// OSC 0: sets the terminal window's title.
const TITLE: &str = "\u{1b}]0;owned\u{7}";
/// OSC 52: writes "hi" to the clipboard.
const CLIPBOARD: &str = "\u{1b}]52;c;aGk=\u{7}";
/// CSI 2 J: clears the screen.
const CLEAR: &str = "\u{1b}[2J";
/// RIGHT-TO-LEFT OVERRIDE: shows what follows reversed.
const RLO: &str = "\u{202e}";

/// The hostile names, as the trace holds them and as a terminal is shown them.
struct Names {
    trace: String,
    node: String,
    p0: String,
    p1: String,
    comm: String,
    op: String,
}

fn names() -> Names {
    Names {
        // No CR or space: the shell's `.use` takes it as typed (CR is in a process's name).
        trace: format!("t{CLIPBOARD}{RLO}"),
        node: format!("node{TITLE}"),
        p0: format!("P0{CLIPBOARD}"),
        p1: format!("P1\r{RLO}"),
        comm: format!("comm{CLEAR}\u{7}"),
        op: format!("Evil{TITLE}"),
    }
}

/// The same names as the printers escape them.
fn escaped() -> Names {
    Names {
        trace: "t\\x1b]52;c;aGk=\\x07\\u{202e}".into(),
        node: "node\\x1b]0;owned\\x07".into(),
        p0: "P0\\x1b]52;c;aGk=\\x07".into(),
        p1: "P1\\r\\u{202e}".into(),
        comm: "comm\\x1b[2J\\x07".into(),
        op: "Evil\\x1b]0;owned\\x07".into(),
    }
}

/// A folder with a database holding, under the hostile trace name, an MTF trace whose
/// processor, processes, communicator, MPI call, scenario and comment hold controls, imported
/// from a file whose own name holds a screen clear; returns the folder and the database.
fn hostile_db() -> (tempfile::TempDir, PathBuf) {
    let n = names();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    // MTF quotes carry any character but `"`, `\` and LF; CR is written `\r`.
    let mtf = |s: &str| format!("\"{}\"", s.replace('\r', "\\r"));
    let text = format!(
        "MTF 1\nscenario {}\ncomment {}\nprocessor 0 {}\nprocess 0 {} on 0\nprocess 1 {} on 0\n\
         communicator 0 world 0-1\ncommunicator 1 {} 0-1\n\
         0 0 10 Init\n1 0 10 Init\n\
         0 20 30 Send c=1 to=1 tag=5 b=8\n1 20 30 Recv c=1 from=0 rtag=5 rb=8\n\
         0 40 50 {}\n0 60 70 Finalize\n1 60 70 Finalize\n",
        mtf(&format!("scenario{CLEAR}")),
        mtf(&format!("comment{TITLE}")),
        mtf(&n.node),
        mtf(&n.p0),
        mtf(&n.p1),
        mtf(&n.comm),
        mtf(&n.op),
    );
    let file = dir.path().join(format!("evil{CLEAR}.mtf"));
    std::fs::write(&file, text).unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_mtfdb"))
        .arg("--db")
        .arg(&db)
        .arg("import")
        .arg(&file)
        .arg("--name")
        .arg(&n.trace)
        .env_remove("MTFDB_DB")
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    check_terminal_safe("the import's message", &o.stdout);
    (dir, db)
}

/// The characters a terminal would act on, found by an independent rule: the C0 and C1
/// controls and DEL (but the line feed that ends a line), and the bidirectional controls.
fn raw_controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|&c| {
            (c.is_control() && c != '\n')
                || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
        .collect()
}

/// Asserts that `bytes` (what reached standard output or error) holds no raw control, and
/// returns them as text.
fn check_terminal_safe(what: &str, bytes: &[u8]) -> String {
    let text = String::from_utf8(bytes.to_vec()).expect("UTF-8 output");
    let raw = raw_controls(&text);
    assert!(
        raw.is_empty(),
        "{what} holds raw controls {raw:?}:\n{text:?}"
    );
    text
}

fn run(db: &Path, args: &[&str]) -> Output {
    let o = mtfdb(db, args);
    assert!(o.status.success(), "mtfdb {args:?}: {o:?}");
    check_terminal_safe(&format!("stderr of {args:?}"), &o.stderr);
    o
}

/// Asserts that every line of an aligned table (header, rule, rows; not the row count) is as
/// long as the others: its widths were measured on the text shown. (The last column of the
/// tables checked is a number, aligned right, so no line is shortened by trimming.)
fn check_aligned(table: &str) {
    let lines: Vec<&str> = table.lines().take_while(|l| !l.starts_with('(')).collect();
    assert!(lines.len() >= 3, "{table}");
    let widths: Vec<usize> = lines.iter().map(|l| l.chars().count()).collect();
    assert!(
        widths.iter().all(|w| *w == widths[0]),
        "line widths {widths:?} in\n{table}"
    );
}

#[test]
fn query_tables_show_trace_names_escaped_and_aligned() {
    let (_dir, db) = hostile_db();
    let (n, e) = (names(), escaped());
    let processes = run(&db, &["query", "SHOW PROCESSES", "--trace", &n.trace]);
    let out = check_terminal_safe("SHOW PROCESSES", &processes.stdout);
    for shown in [&e.p0, &e.p1, &e.node] {
        assert!(out.contains(shown.as_str()), "{shown} in\n{out}");
    }
    check_aligned(&out);
    let communicators = run(&db, &["query", "SHOW COMMUNICATORS", "--trace", &n.trace]);
    let out = check_terminal_safe("SHOW COMMUNICATORS", &communicators.stdout);
    assert!(out.contains(&format!("{}  ", e.comm)), "{out}");
    let operations = run(&db, &["query", "SHOW OPERATIONS", "--trace", &n.trace]);
    let out = check_terminal_safe("SHOW OPERATIONS", &operations.stdout);
    assert!(out.contains(&e.op), "{out}");
    check_aligned(&out);
    // The same name in a statement's result: grouped by operation.
    let grouped = run(
        &db,
        &[
            "query",
            "SELECT COUNT(*) FROM OPERATIONS GROUP BY OPERATION",
            "--trace",
            &n.trace,
        ],
    );
    let out = check_terminal_safe("GROUP BY OPERATION", &grouped.stdout);
    assert!(out.contains(&e.op), "{out}");
    check_aligned(&out);
}

#[test]
fn info_and_traces_show_names_escaped() {
    let (_dir, db) = hostile_db();
    let (n, e) = (names(), escaped());
    let info = run(&db, &["info", &n.trace]);
    let out = check_terminal_safe("info", &info.stdout);
    for shown in [&e.trace, &e.node, &e.p0, &e.p1, &e.comm, &e.op] {
        assert!(out.contains(shown.as_str()), "{shown} in\n{out}");
    }
    for shown in [
        "scenario: scenario\\x1b[2J\n",
        "comments: comment\\x1b]0;owned\\x07\n",
        "evil\\x1b[2J.mtf",
    ] {
        assert!(out.contains(shown), "{shown} in\n{out}");
    }
    // Names are padded as shown: P1's 12 characters fill its 12-wide column exactly.
    assert!(
        out.contains(&format!("  rank 1     {} on {}", e.p1, e.node)),
        "{out}"
    );

    let traces = run(&db, &["traces"]);
    let out = check_terminal_safe("traces", &traces.stdout);
    assert!(out.contains(&e.trace), "{out}");
    assert!(out.contains("evil\\x1b[2J.mtf"), "{out}");
}

#[test]
fn errors_quoting_a_name_show_it_escaped() {
    let (_dir, db) = hostile_db();
    let o = mtfdb(&db, &["info", &format!("nope{CLIPBOARD}")]);
    assert!(!o.status.success());
    let err = check_terminal_safe("the error of info", &o.stderr);
    // The library's messages quote a name as Rust does (`\u{1b}`); the trace names they list
    // are shown as tables show them.
    assert!(err.contains("nope\\u{1b}]52;c;aGk=\\u{7}"), "{err}");
    assert!(err.contains(&escaped().trace), "{err}");
    let o = mtfdb(
        &db,
        &[
            "query",
            &format!("SELECT ALL MESSAGES IN COMM(\"x{TITLE}\")"),
            "--trace",
            &names().trace,
        ],
    );
    assert!(!o.status.success());
    // The message names the communicator as it was written: shown escaped.
    let err = check_terminal_safe("the error of a query", &o.stderr);
    assert!(err.contains("x\\x1b]0;owned\\x07"), "{err}");
}

#[test]
fn the_shell_shows_names_and_errors_escaped() {
    let (_dir, db) = hostile_db();
    let (n, e) = (names(), escaped());
    // `.use` takes the name as typed (it holds no space); the shell's own messages, its tables
    // and its errors all quote names.
    let script = format!(
        ".bail off\n.use {}\n.traces\nSHOW PROCESSES;\nSHOW COMMUNICATORS;\n.use nope{CLIPBOARD}\n",
        n.trace
    );
    let o = mtfdb_repl(&db, &script, &[]);
    let out = check_terminal_safe("the shell's output", &o.stdout);
    let err = check_terminal_safe("the shell's errors", &o.stderr);
    assert!(out.contains(&format!("using trace {}\n", e.trace)), "{out}");
    for shown in [&e.trace, &e.p0, &e.p1, &e.node, &e.comm] {
        assert!(out.contains(shown.as_str()), "{shown} in\n{out}");
    }
    assert!(err.contains("nope\\u{1b}]52;c;aGk=\\u{7}"), "{err}");
}

/// The fields of a CSV text (RFC 4180: quoted fields may hold commas, quotes doubled, CR and
/// LF), as rows.
fn read_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => field.push(c),
        }
    }
    assert!(
        !quoted && field.is_empty() && row.is_empty(),
        "CSV ends a line"
    );
    rows
}

#[test]
fn csv_and_json_carry_the_exact_names() {
    let (_dir, db) = hostile_db();
    let n = names();
    let processes = |format: &str| {
        let o = run(
            &db,
            &[
                "query",
                "SHOW PROCESSES",
                "--trace",
                &n.trace,
                "--format",
                format,
            ],
        );
        String::from_utf8(o.stdout).unwrap()
    };
    // JSON: the controls serde_json leaves raw (the override) are \u escapes too, so that it
    // is safe on a terminal as well; it parses back to the exact names.
    let json = processes("json");
    assert!(raw_controls(&json).is_empty(), "{json:?}");
    let rows: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(rows[0]["name"], n.p0.as_str());
    assert_eq!(rows[1]["name"], n.p1.as_str());
    assert_eq!(rows[0]["processor"], n.node.as_str());
    // CSV: data, quoted where it must be, every character kept.
    let csv = read_csv(&processes("csv"));
    assert_eq!(csv[0], ["rank", "name", "processor", "operations"]);
    assert_eq!(csv[1][1], n.p0);
    assert_eq!(csv[2][1], n.p1);
    assert_eq!(csv[1][2], n.node);
    // `traces` prints a whole result (not row by row): the same, for the trace's name.
    let traces = run(&db, &["traces", "--format", "json"]);
    let rows: serde_json::Value = serde_json::from_slice(&traces.stdout).unwrap();
    assert_eq!(rows[0]["name"], n.trace.as_str());
    let traces = run(&db, &["traces", "--format", "csv"]);
    let csv = read_csv(&String::from_utf8(traces.stdout).unwrap());
    assert_eq!(csv[1][0], n.trace);
    // Each operation's name, in a statement's rows.
    let o = run(
        &db,
        &[
            "query",
            "SELECT COUNT(*) FROM OPERATIONS GROUP BY OPERATION",
            "--trace",
            &n.trace,
            "--format",
            "json",
        ],
    );
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let ops: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["operation"].as_str())
        .collect();
    assert!(ops.contains(&n.op.as_str()), "{ops:?}");
}

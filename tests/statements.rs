//! Statement tests as data: every `tests/statements/*.test` file (and the query corpus,
//! `tests/corpus/*.test`) is a list of statements with their expected results or errors, in
//! the style of sqllogictest, run against a small database: the trace `small` (a generated
//! 16-rank stencil, world communicator `C1`), the trace `extremes`
//! (`tests/corpus/mtf/extremes.mtf`, values at the edges of their ranges) and the trace
//! `anomalies` (`tests/corpus/mtf/anomalies.mtf`, three processes with one of several
//! anomalies).
//!
//! The format, one record per paragraph (records are separated by blank lines; `#` starts a
//! comment line):
//!
//! ```text
//! statement ok
//! USE TRACE small
//!
//! query
//! SELECT COUNT(*) FROM MESSAGES WHERE SIZE > 18446744073709551616
//! ----
//! count(*)
//! 0
//!
//! query rows 60
//! SELECT ALL MESSAGES BETWEEN PROCESS(1,2)
//!
//! statement error syntax: at column 22: expected a process selector after FOR, found "PROCES"
//! SELECT BROADCAST FOR PROCES(1)
//! ```
//!
//! `query` compares the result as CSV (header and rows); `query rows N` its row count only;
//! `statement error KIND: MESSAGE` the error's kind (`syntax`, `unknown view`, `limit
//! nesting-depth`, `usage`, …) and the first line of its message. A statement may span lines;
//! `{N*text}` in it (and in what is expected) stands for `text` repeated N times, for the very
//! long statements of the hostile cases. Every failure is reported with its file and line; with `MTFDB_BLESS=1` the
//! test prints each record with the results it got, to write new cases from, and
//! `MTFDB_STATEMENTS=NAME` runs only the files whose path contains NAME.

mod common;

use std::path::{Path, PathBuf};

use mtfdb::gen::{GenConfig, Scenario};
use mtfdb::query::Session;
use mtfdb::results::ResultSet;
use mtfdb::{Database, Error, Limit, NameKind};

/// One record of a statement file.
#[derive(Debug)]
struct Record {
    /// 1-based line of its header.
    line: usize,
    expect: Expect,
    sql: String,
}

#[derive(Debug)]
enum Expect {
    Ok,
    Error(String),
    Rows(usize),
    Result(String),
}

/// `{N*text}` expanded (N digits; any other `{` is kept as it is).
fn expand(sql: &str) -> String {
    let mut out = String::new();
    let mut rest = sql;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let repeat = (digits > 0 && after[digits..].starts_with('*'))
            .then(|| after[digits + 1..].find('}').map(|end| (digits, end)))
            .flatten();
        match repeat {
            Some((digits, end)) => {
                let n: usize = after[..digits].parse().expect("a repetition count");
                out.push_str(&after[digits + 1..digits + 1 + end].repeat(n));
                rest = &after[digits + 2 + end..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn parse_file(text: &str) -> Vec<Record> {
    let lines: Vec<&str> = text.lines().collect();
    let mut records = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let header = lines[i].trim_end();
        if header.trim().is_empty() || header.starts_with('#') {
            i += 1;
            continue;
        }
        let line = i + 1;
        let expect = if header == "statement ok" {
            Expect::Ok
        } else if let Some(e) = header.strip_prefix("statement error ") {
            Expect::Error(expand(e))
        } else if let Some(n) = header.strip_prefix("query rows ") {
            Expect::Rows(n.trim().parse().expect("query rows N"))
        } else if header == "query" {
            Expect::Result(String::new())
        } else {
            panic!("line {line}: unknown record header {header:?}");
        };
        i += 1;
        let mut sql = Vec::new();
        while i < lines.len() && !lines[i].trim().is_empty() && lines[i] != "----" {
            sql.push(lines[i]);
            i += 1;
        }
        let mut expect = expect;
        if i < lines.len() && lines[i] == "----" {
            i += 1;
            let mut csv = String::new();
            while i < lines.len() && !lines[i].is_empty() {
                csv.push_str(lines[i]);
                csv.push('\n');
                i += 1;
            }
            expect = Expect::Result(expand(&csv));
        }
        assert!(!sql.is_empty(), "line {line}: a record without a statement");
        records.push(Record {
            line,
            expect,
            sql: expand(&sql.join("\n")),
        });
    }
    records
}

/// An error's kind, as the files name it.
fn kind(e: &Error) -> String {
    match e {
        Error::Syntax(_) => "syntax".into(),
        Error::UnknownName { what, .. } => format!(
            "unknown {}",
            match what {
                NameKind::Process => "process",
                NameKind::Communicator => "communicator",
                NameKind::View => "view",
                NameKind::Phase => "phase",
                NameKind::Pattern => "pattern",
                NameKind::Column => "column",
                NameKind::Database => "database",
                NameKind::Format => "format",
                NameKind::Counter => "counter",
                _ => "other",
            }
        ),
        Error::NoSuchTrace { .. } => "unknown trace".into(),
        Error::LimitExceeded { limit, .. } => format!(
            "limit {}",
            match limit {
                Limit::NestingDepth => "nesting-depth",
                Limit::HistogramBins => "histogram-bins",
                Limit::NameLength => "name-length",
                Limit::ValueRange => "value-range",
                _ => "other",
            }
        ),
        Error::Usage(_) => "usage".into(),
        Error::Unsupported(_) => "unsupported".into(),
        Error::Cancelled => "cancelled".into(),
        other => format!("other ({other:?})"),
    }
}

/// `KIND: first line of the message`.
fn error_text(e: &Error) -> String {
    format!(
        "{}: {}",
        kind(e),
        e.to_string().lines().next().unwrap_or("")
    )
}

/// The result as a record's expected block: CSV without its trailing blank line.
fn csv(r: &ResultSet) -> String {
    r.to_csv()
}

/// A fresh database with the two traces.
fn database(dir: &Path) -> Database {
    let db = Database::open(dir.join("db")).unwrap();
    common::import_generated(
        &db,
        &GenConfig {
            scenario: Scenario::Stencil2d,
            ranks: 16,
            iterations: 8,
            seed: 1,
            shuffle_ranks: false,
            delays: Vec::new(),
            network: None,
        },
        "small",
    );
    db.import(corpus().join("mtf/extremes.mtf"), Some("extremes"))
        .unwrap();
    db.import(corpus().join("mtf/anomalies.mtf"), Some("anomalies"))
        .unwrap();
    db
}

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

/// Runs every record of `file`; returns the failures.
fn run_file(file: &Path, bless: bool) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut session = Session::new(database(dir.path()));
    let mut failures = Vec::new();
    let name = file.display();
    for r in parse_file(&text) {
        let outcome = session.run(&r.sql);
        let at = format!("{name}:{}", r.line);
        if bless {
            print_record(&r, &outcome);
        }
        let problem = match (&r.expect, &outcome) {
            (Expect::Ok, Ok(_)) => None,
            (Expect::Error(want), Err(e)) if *want == error_text(e) => None,
            (Expect::Error(want), Err(e)) => Some(format!(
                "expected error\n  {want}\ngot\n  {}",
                error_text(e)
            )),
            (Expect::Error(want), Ok(res)) => {
                Some(format!("expected error\n  {want}\ngot {} rows", res.len()))
            }
            (Expect::Rows(n), Ok(res)) if res.len() == *n => None,
            (Expect::Rows(n), Ok(res)) => Some(format!("expected {n} rows, got {}", res.len())),
            (Expect::Result(want), Ok(res)) if *want == csv(res) => None,
            (Expect::Result(want), Ok(res)) => Some(format!("expected\n{want}got\n{}", csv(res))),
            (_, Err(e)) => Some(format!("failed: {}", error_text(e))),
        };
        if let Some(p) = problem {
            failures.push(format!(
                "{at}: {}\n{}\n",
                r.sql.chars().take(300).collect::<String>(),
                p
            ));
        }
    }
    failures
}

/// With `MTFDB_BLESS=1`: the record as it would be written with what it got.
fn print_record(r: &Record, outcome: &Result<ResultSet, Error>) {
    let sql = &r.sql;
    match (outcome, &r.expect) {
        (Ok(_), Expect::Ok) => println!("statement ok\n{sql}\n"),
        (Ok(res), Expect::Rows(_)) => println!("query rows {}\n{sql}\n", res.len()),
        (Ok(res), _) => println!("query\n{sql}\n----\n{}", csv(res)),
        (Err(e), _) => println!("statement error {}\n{sql}\n", error_text(e)),
    }
}

fn statement_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in [
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/statements"),
        corpus(),
    ] {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "test") {
                files.push(p);
            }
        }
    }
    files.sort();
    files
}

#[test]
fn every_statement_file_gives_its_expected_results_and_errors() {
    let bless = std::env::var_os("MTFDB_BLESS").is_some();
    // `MTFDB_STATEMENTS=extremes` runs only the files whose path contains it.
    let only = std::env::var("MTFDB_STATEMENTS").unwrap_or_default();
    let files: Vec<PathBuf> = statement_files()
        .into_iter()
        .filter(|f| f.display().to_string().contains(&only))
        .collect();
    assert!(bless || !only.is_empty() || files.len() >= 4, "{files:?}");
    let mut failures = Vec::new();
    let mut records = 0;
    for f in &files {
        records += parse_file(&std::fs::read_to_string(f).unwrap()).len();
        failures.extend(run_file(f, bless));
    }
    assert!(
        bless || !only.is_empty() || records > 200,
        "{records} records"
    );
    assert!(
        failures.is_empty(),
        "{} of {records} records failed:\n\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The grammar file's examples and `tests/statements/grammar.test` stay the same list: every
/// example runs there with its expected result or error.
#[test]
fn every_grammar_example_is_a_statement_case() {
    let grammar =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("grammar/query.ebnf"))
            .unwrap();
    let begin = grammar.find("BEGIN EXAMPLES").unwrap();
    let end = grammar.find("END EXAMPLES").unwrap();
    let examples: Vec<&str> = grammar[begin..end]
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("--"))
        .collect();
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/statements/grammar.test");
    let cases: Vec<String> = parse_file(&std::fs::read_to_string(file).unwrap())
        .into_iter()
        .map(|r| r.sql)
        .collect();
    let missing: Vec<&&str> = examples
        .iter()
        .filter(|e| !cases.iter().any(|c| c == *e))
        .collect();
    assert!(examples.len() > 100, "{} examples", examples.len());
    assert!(
        missing.is_empty(),
        "grammar examples without a case: {missing:#?}"
    );
}

#[test]
fn the_file_format_reads_records_and_repetitions() {
    let records = parse_file(
        "# c\nstatement ok\nUSE TRACE small\n\nquery rows 3\nSELECT\n  {3*NOT }SIZE > 1\n\nquery\nSELECT 1\n----\na\n{ 1 }{x}{2*ab}\n\nstatement error usage: x\nDROP VIEW v\n",
    );
    assert_eq!(records.len(), 4);
    assert_eq!(records[1].sql, "SELECT\n  NOT NOT NOT SIZE > 1");
    assert!(matches!(records[1].expect, Expect::Rows(3)));
    assert!(matches!(&records[2].expect, Expect::Result(c) if c == "a\n{ 1 }{x}abab\n"));
    assert!(matches!(&records[3].expect, Expect::Error(e) if e == "usage: x"));
    assert_eq!(records[3].line, 15);
}

//! `mtfdb repl`: the interactive shell. Statements end with `;` and may span lines; lines
//! starting with `.` are meta commands. History is kept across sessions; Tab completes
//! keywords, MPI operation names, communicator, view and trace names; Ctrl-C stops the running
//! query, not the session. Without a terminal on standard input it runs the script it is given.

use std::borrow::Cow;
use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::time::Instant;

use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::DefaultHistory;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Context, Editor, Helper};

use mtfdb::model::OpKind;
use mtfdb::query::{parse_script, query_error, Session};
use mtfdb::{Database, Error};

use crate::{emit, is_closed_stdout, OutputFormat};

/// Rows a table shows before it is cut, with a note saying how many were left out.
const MAX_TABLE_ROWS: usize = 200;

const KEYWORDS: &[&str] = &[
    "SELECT",
    "ALL",
    "MESSAGES",
    "POINT_TO_POINT_OPERATIONS",
    "SENDS",
    "RECEIVES",
    "COLLECTIVE_OPERATIONS",
    "OPERATIONS",
    "BROADCAST",
    "BARRIER",
    "GATHER",
    "SCATTER",
    "REDUCE",
    "ALLREDUCE",
    "ALLGATHER",
    "ALLTOALL",
    "SCAN",
    "REDUCE_SCATTER",
    "BETWEEN",
    "AMONG",
    "FOR",
    "PROCESS",
    "PROCESSES",
    "IN",
    "COMM",
    "WORLD",
    "VIEW",
    "TIME",
    "AND",
    "OR",
    "NOT",
    "WHERE",
    "SIZE",
    "TAG",
    "SENDER",
    "RECEIVER",
    "DURATION",
    "PEER",
    "ROOT",
    "WAIT",
    "STATES",
    "LATE",
    "SENDERS",
    "CRITICAL",
    "PATH",
    "SUMMARY",
    "SIMULATE",
    "NETWORK",
    "LATENCY",
    "OVERHEAD",
    "GAP",
    "BANDWIDTH",
    "EAGER",
    "CPU",
    "BURSTS",
    "OPERATION",
    "ROUTINE",
    "PATTERN",
    "PATTERNS",
    "PHASE",
    "PHASES",
    "TREE",
    "MATCH",
    "ERRORS",
    "THRESHOLD",
    "ENVELOPE",
    "REFRESH",
    "LOOPS",
    "GLOBAL",
    "MODEL",
    "TOPOLOGY",
    "LOGICAL",
    "WITH",
    "FAN_IN",
    "FAN_OUT",
    "STATISTICS",
    "COMMUNICATION",
    "MATRIX",
    "OF",
    "BYTES",
    "COUNT",
    "HISTOGRAM",
    "BINS",
    "LOG2",
    "MPI",
    "SUM",
    "AVG",
    "MIN",
    "MAX",
    "FROM",
    "GROUP",
    "BY",
    "ORDER",
    "ASC",
    "DESC",
    "LIMIT",
    "EXPLAIN",
    "SHOW",
    "TRACES",
    "COMMUNICATORS",
    "VIEWS",
    "USE",
    "TRACE",
    "CREATE",
    "DROP",
    "AS",
    "KiB",
    "MiB",
    "GiB",
    "ms",
    "us",
    "ns",
];

const META: &[&str] = &[
    ".help", ".open", ".import", ".traces", ".use", ".mode", ".output", ".timer", ".quit", ".exit",
];

const HELP: &str = "\
Statements end with ';' and may span lines. Examples:
  SELECT ALL MESSAGES BETWEEN PROCESS(1,2) IN COMM(C1);
  SELECT COLLECTIVE_OPERATIONS AMONG ALL PROCESSES IN COMM(C1) LIMIT 20;
  SELECT MPI_Isend FOR PROCESSES(3-6) BETWEEN TIME 10 ms AND 20 ms WHERE SIZE > 64 KiB;
  SELECT FAN_IN FOR ALL PROCESSES ORDER BY fan_in_bytes DESC;
  SELECT STATISTICS FOR ALL PROCESSES;
  SELECT COMMUNICATION MATRIX OF COUNT;
  SELECT COUNT(*), SUM(SIZE) FROM MESSAGES GROUP BY PROCESS;
  SELECT WAIT STATES GROUP BY PROCESS;   SELECT LATE SENDERS ORDER BY WAIT DESC LIMIT 10;
  SELECT OPERATIONS WHERE WAIT > 1 ms;   SELECT CRITICAL PATH [SUMMARY];
  CREATE VIEW big AS SELECT ALL MESSAGES WHERE SIZE >= 1 MiB;   SELECT COUNT(*) FROM MESSAGES IN VIEW big;
  EXPLAIN SELECT BROADCAST FOR PROCESS(1);
  SHOW TRACES | PROCESSES | COMMUNICATORS | OPERATIONS | VIEWS;   USE TRACE name;
Patterns and phases (computed once, then read back; REFRESH PATTERNS recomputes):
  SELECT PATTERNS FOR PROCESS(3);   SELECT COMMUNICATION PATTERNS [WITH ENVELOPE];
  SELECT MESSAGES IN PATTERN 2;     MATCH PATTERN (P0: S1 R1; P1: R0 S0) WITH ERRORS 1;
  SELECT PHASES [WITH THRESHOLD 0.5];   SHOW PHASE TREE;
  SELECT STATISTICS FOR ALL PROCESSES IN PHASE 1;
Loops and topology:
  SELECT LOOPS FOR PROCESS(5);   SELECT GLOBAL MODEL;
  SELECT TOPOLOGY [IN COMM(c)] [IN PHASE k];   SELECT LOGICAL TRACE [FOR PROCESS(n)];
Meta commands:
  .help                 this text
  .open PATH            open another database
  .import FILE [NAME]   import a trace file
  .traces               list the traces
  .use NAME             query trace NAME
  .mode table|csv|json|svg  how results print (svg: a picture of each statement)
  .output [FILE]        write results to FILE (a picture replaces it), or back to the screen
  .timer on|off         show each statement's time
  .quit                 leave (also Ctrl-D)
";

/// Completion and multi-line input.
struct ReplHelper {
    words: Vec<String>,
}

impl Completer for ReplHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let start = line[..pos]
            .rfind(|c: char| c.is_whitespace() || c == '(' || c == ',')
            .map_or(0, |i| i + 1);
        let prefix = &line[start..pos];
        if prefix.is_empty() {
            return Ok((start, Vec::new()));
        }
        let mut out: Vec<Pair> = self
            .words
            .iter()
            .filter(|w| w.len() >= prefix.len() && w[..prefix.len()].eq_ignore_ascii_case(prefix))
            .map(|w| Pair {
                display: w.clone(),
                replacement: w.clone(),
            })
            .collect();
        out.dedup_by(|a, b| a.display == b.display);
        Ok((start, out))
    }
}

impl Hinter for ReplHelper {
    type Hint = String;
}

impl Highlighter for ReplHelper {
    fn highlight_prompt<'b, 's: 'b, 'p: 'b>(
        &'s self,
        prompt: &'p str,
        _default: bool,
    ) -> Cow<'b, str> {
        Cow::Borrowed(prompt)
    }
}

impl Validator for ReplHelper {
    fn validate(&self, ctx: &mut ValidationContext<'_>) -> rustyline::Result<ValidationResult> {
        let input = ctx.input().trim();
        if input.is_empty() || input.starts_with('.') || input.ends_with(';') {
            Ok(ValidationResult::Valid(None))
        } else {
            Ok(ValidationResult::Incomplete)
        }
    }
}

impl Helper for ReplHelper {}

/// The shell's state: the session and how results print.
struct Shell {
    session: Session,
    mode: OutputFormat,
    /// `.output FILE`: where results go instead of standard output.
    output: Option<std::path::PathBuf>,
    timer: bool,
}

impl Shell {
    /// Words Tab completes: keywords, MPI names, and the names in the database.
    fn words(&self) -> Vec<String> {
        let mut words: Vec<String> = KEYWORDS.iter().map(|s| s.to_string()).collect();
        words.extend(META.iter().map(|s| s.to_string()));
        words.extend(
            OpKind::ALL
                .iter()
                .filter_map(|k| k.mpi_name())
                .map(str::to_string),
        );
        if let Ok(traces) = self.session.database().traces() {
            for t in traces {
                if let Ok(trace) = self.session.database().trace(&t.name) {
                    words.extend(trace.header().communicators.iter().map(|c| c.name.clone()));
                    words.extend(
                        trace
                            .views()
                            .unwrap_or_default()
                            .into_iter()
                            .map(|(n, _)| n),
                    );
                }
                words.push(t.name);
            }
        }
        words.sort();
        words.dedup();
        words
    }

    /// Runs one meta command; false when the shell should end.
    fn meta(&mut self, line: &str) -> Result<bool, Error> {
        let mut parts = line.split_whitespace();
        let cmd = parts.next().unwrap_or("");
        let args: Vec<&str> = parts.collect();
        match (cmd, args.as_slice()) {
            (".quit" | ".exit", _) => return Ok(false),
            (".help", _) => emit(HELP)?,
            (".open", [path]) => {
                let mut session = Session::new(Database::open_existing(path)?);
                session.set_cancel_flag(self.session.cancel_flag());
                self.session = session;
                emit!("opened {path}\n")?;
            }
            (".import", [file]) | (".import", [file, _]) => {
                let name = args.get(1).copied();
                self.session.close_trace();
                let info = self.session.database().import(file, name)?;
                emit!(
                    "imported {file} as {:?}: {} operations, {} messages\n",
                    info.name,
                    info.summary.operations,
                    info.summary.messages
                )?;
            }
            (".traces", []) => self.statement("SHOW TRACES", None)?,
            (".use", [name]) => {
                self.session.use_trace(name)?;
                emit!("using trace {name}\n")?;
            }
            (".mode", [m]) => {
                self.mode = match *m {
                    "table" => OutputFormat::Table,
                    "csv" => OutputFormat::Csv,
                    "json" => OutputFormat::Json,
                    "svg" => OutputFormat::Svg,
                    other => {
                        return Err(Error::Usage(format!(
                            "unknown mode {other:?}; use table, csv, json or svg"
                        )))
                    }
                }
            }
            (".output", []) => self.output = None,
            (".output", [path]) => {
                // Fail now, not at the first result, when the file cannot be written.
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| Error::io(path, e))?;
                self.output = Some(path.into());
            }
            (".timer", [on]) => {
                self.timer = match *on {
                    "on" => true,
                    "off" => false,
                    other => {
                        return Err(Error::Usage(format!(
                            ".timer takes on or off, not {other:?}"
                        )))
                    }
                }
            }
            _ => {
                return Err(Error::Usage(format!(
                    "unknown or malformed meta command {line:?}; .help lists them"
                )))
            }
        }
        Ok(true)
    }

    /// Runs the statements of `text` and prints each result. In a script, `first_line` is the
    /// script's line on which `text` starts, and errors name the script's lines: a syntax
    /// error its line and column, a statement that fails its first line.
    fn statement(&mut self, text: &str, first_line: Option<usize>) -> Result<(), Error> {
        let shift = first_line.map_or(0, |l| l.saturating_sub(1));
        let statements = parse_script(text).map_err(|e| query_error(e.shifted(shift)))?;
        for (stmt, range) in statements {
            let started = Instant::now();
            if self.mode == OutputFormat::Svg && is_query(&stmt) {
                let picture = self.picture(&text[range.clone()]);
                match (picture, first_line) {
                    (Ok(()), _) => {}
                    (Err(e), Some(first)) => {
                        let line = first + text[..range.start].matches('\n').count();
                        return Err(at_line(line, e));
                    }
                    (Err(e), None) => return Err(e),
                }
                continue;
            }
            let result = match (self.session.execute(&stmt), first_line) {
                (Ok(r), _) => r,
                (Err(e), Some(first)) => {
                    let line = first + text[..range.start].matches('\n').count();
                    return Err(at_line(line, e));
                }
                (Err(e), None) => return Err(e),
            };
            let elapsed = started.elapsed();
            if let Some(path) = &self.output {
                self.write_output(path.clone(), &result)?;
            } else if self.mode == OutputFormat::Table && result.len() > MAX_TABLE_ROWS {
                let mut shown = result.clone();
                shown.rows.truncate(MAX_TABLE_ROWS);
                emit!(
                    "{}… {} more rows not shown (add LIMIT, or .mode csv to print them all)\n({} rows)\n",
                    shown.to_table(),
                    result.len() - MAX_TABLE_ROWS,
                    result.len()
                )?;
            } else {
                emit(&self.mode.render(&result))?;
            }
            if self.timer {
                emit!("time: {:.3} ms\n", elapsed.as_secs_f64() * 1e3)?;
            }
        }
        Ok(())
    }
}

/// Whether `stmt` asks a question of the trace (rather than `USE TRACE`, views, `SHOW`).
fn is_query(stmt: &mtfdb::query::Statement) -> bool {
    use mtfdb::query::Statement;
    matches!(stmt, Statement::Select(_) | Statement::Analysis(_))
}

impl Shell {
    /// `.mode svg`: the picture of `statement`, written to the `.output` file.
    fn picture(&mut self, statement: &str) -> Result<(), Error> {
        let Some(path) = self.output.clone() else {
            return Err(Error::Usage(
                ".mode svg writes each statement's picture to a file: name it with .output FILE"
                    .into(),
            ));
        };
        mtfdb::export::svg::write_statement_svg(&mut self.session, statement, &path)?;
        emit!("wrote {}\n", path.display())
    }

    /// Appends `result`, printed in the current mode, to the `.output` file.
    fn write_output(
        &self,
        path: std::path::PathBuf,
        result: &mtfdb::ResultSet,
    ) -> Result<(), Error> {
        use std::io::Write;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(self.mode.render(result).as_bytes()))
            .map_err(|e| Error::io(&path, e))
    }
}

impl Shell {
    /// Runs a script in order: meta lines as they come, statements as each `;` completes one.
    /// An error is reported and the script goes on; it then ends with the first error.
    fn script(&mut self, script: &str) -> Result<(), Error> {
        let mut first_error: Option<Error> = None;
        let mut pending = String::new();
        // The script's line on which `pending` starts.
        let mut pending_line = 1;
        // Reports an error and goes on; a closed output or a Ctrl-C ends the script.
        let report = |r: Result<(), Error>, first_error: &mut Option<Error>| -> Result<(), Error> {
            match r {
                Err(e) if is_closed_stdout(&e) || matches!(e, Error::Cancelled) => Err(e),
                Err(e) => {
                    eprintln!("error: {e}");
                    first_error.get_or_insert(e);
                    Ok(())
                }
                Ok(()) => Ok(()),
            }
        };
        for (i, line) in script.lines().enumerate() {
            if pending.trim().is_empty() && line.trim_start().starts_with('.') {
                let r = self
                    .meta(line.trim())
                    .map(|_| ())
                    .map_err(|e| at_line(i + 1, e));
                report(r, &mut first_error)?;
                pending.clear();
                continue;
            }
            if pending.trim().is_empty() {
                pending.clear();
                pending_line = i + 1;
            }
            pending.push_str(line);
            pending.push('\n');
            if pending.trim_end().ends_with(';') {
                let r = self.statement(&pending, Some(pending_line));
                report(r, &mut first_error)?;
                pending.clear();
            }
        }
        if !pending.trim().is_empty() {
            let r = self.statement(&pending, Some(pending_line));
            report(r, &mut first_error)?;
        }
        match first_error {
            Some(_) => Err(Error::Usage(
                "the script stopped with errors (reported above)".into(),
            )),
            None => Ok(()),
        }
    }
}

fn history_path() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".mtfdb_history"))
}

/// `error` of the statement on line `line` of a script: a syntax error already names its line;
/// others are prefixed with it.
fn at_line(line: usize, error: Error) -> Error {
    match error {
        Error::Syntax(_) | Error::Cancelled => error,
        Error::Io { .. } if is_closed_stdout(&error) => error,
        other => Error::Usage(format!("line {line}: {other}")),
    }
}

/// Runs the shell on `db` (interactive on a terminal, a script otherwise).
pub fn run(db: Database, trace: Option<&str>) -> Result<(), Error> {
    let mut session = Session::new(db);
    session.set_cancel_flag(crate::cancel_flag());
    if let Some(t) = trace {
        session.use_trace(t)?;
    }
    run_session(session)
}

/// Runs the shell on an open session.
pub fn run_session(session: Session) -> Result<(), Error> {
    let mut shell = Shell {
        session,
        mode: OutputFormat::Table,
        output: None,
        timer: true,
    };
    if !std::io::stdin().is_terminal() {
        shell.timer = false;
        let mut script = String::new();
        std::io::stdin()
            .read_to_string(&mut script)
            .map_err(|e| Error::io("<stdin>", e))?;
        return shell.script(&script);
    }
    // Ctrl-C while a statement runs cancels it (the handler is installed with the session's
    // flag); at the prompt the editor handles it.

    let mut editor: Editor<ReplHelper, DefaultHistory> =
        Editor::new().map_err(|e| Error::Usage(format!("cannot start the line editor: {e}")))?;
    editor.set_helper(Some(ReplHelper {
        words: shell.words(),
    }));
    let history = history_path();
    if let Some(h) = &history {
        let _ = editor.load_history(h);
    }
    emit!(
        "mtfdb {} — statements end with ';', .help for help, .quit to leave\n",
        env!("CARGO_PKG_VERSION")
    )?;
    loop {
        match editor.readline("mtfdb> ") {
            Ok(line) => {
                let line = line.trim().to_string();
                if line.is_empty() {
                    continue;
                }
                let _ = editor.add_history_entry(line.as_str());
                let outcome = if line.starts_with('.') {
                    shell.meta(&line)
                } else {
                    shell.statement(&line, None).map(|_| true)
                };
                // A Ctrl-C that stopped the statement is spent; the next one stops the next.
                shell
                    .session
                    .cancel_flag()
                    .store(false, std::sync::atomic::Ordering::SeqCst);
                match outcome {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(e) if is_closed_stdout(&e) => return Err(e),
                    Err(e) => eprintln!("error: {e}"),
                }
                if let Some(h) = editor.helper_mut() {
                    h.words = shell.words();
                }
            }
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(Error::Usage(format!("reading input failed: {e}"))),
        }
    }
    if let Some(h) = &history {
        let _ = editor.save_history(h);
    }
    Ok(())
}

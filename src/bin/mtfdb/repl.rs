//! `mtfdb repl`: the interactive shell. Statements end with `;` and may span lines (the prompt
//! then reads `   ...> `); lines starting with `.` are meta commands, and one typed while a
//! statement is unfinished first runs that statement, as a `;` would. History is saved as each
//! line is entered; Tab completes by context (`complete`); Ctrl-C stops the running statement,
//! not the session. Without a terminal on standard input it runs the script it is given and
//! stops at the first error (`.bail on`). In safe mode (`--safe`, `.safe on`) it refuses every
//! meta command that reaches outside the database, as sqlite3's `-safe` does. Names from a trace
//! are shown through `printable`, and so are the errors that quote them.

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::time::Instant;

use rustyline::config::Config;
use rustyline::error::ReadlineError;
use rustyline::history::DefaultHistory;
use rustyline::Editor;

use mtfdb::model::OpKind;
use mtfdb::query::{parse_script, query_error, Session};
use mtfdb::results::{is_terminal_control, printable, printable_lines, ResultSet};
use mtfdb::{Database, Error};

use crate::complete::ReplHelper;
use crate::{emit, is_closed_stdout, OutputFormat};

/// Each meta command with its arguments and what it does: `.help` prints these, Tab completes
/// their names.
const META: &[(&str, &str, &str)] = &[
    (
        ".bail",
        "on|off",
        "stop a script at its first error (on by default when piped)",
    ),
    (".exit", "", "leave (also .quit, Ctrl-D)"),
    (
        ".headers",
        "on|off",
        "print the column names above the rows",
    ),
    (".help", "", "this text"),
    (".import", "FILE [NAME]", "import a trace file"),
    (
        ".maxrows",
        "N",
        "rows a table shows without a pager (0: all)",
    ),
    (
        ".mode",
        "table|csv|json|svg",
        "how results print (svg: a picture of each statement)",
    ),
    (".once", "FILE", "write the next result to FILE"),
    (".open", "PATH", "open another database"),
    (
        ".output",
        "[FILE]",
        "write results to FILE, or back to the screen",
    ),
    (
        ".pager",
        "on|off",
        "page results longer than the screen ($PAGER, else less -S)",
    ),
    (".quit", "", "leave (also .exit, Ctrl-D)"),
    (
        ".read",
        "FILE",
        "run the statements and meta commands in FILE",
    ),
    (
        ".safe",
        "on",
        "refuse .shell .system .output/.once FILE .open .import .read, for good",
    ),
    (
        ".schema",
        "TARGET",
        "the columns of a target (DESCRIBE TARGET)",
    ),
    (
        ".shell",
        "CMD",
        "run CMD in the system shell (also .system)",
    ),
    (".show", "", "the current settings"),
    (
        ".system",
        "CMD",
        "run CMD in the system shell (also .shell)",
    ),
    (
        ".tables",
        "",
        "what a statement can select from (SHOW TABLES)",
    ),
    (".timer", "on|off", "print each statement's time"),
    (".traces", "", "list the traces"),
    (
        ".units",
        "on|off",
        "durations and sizes in tables with units (235.1 ms), or exact",
    ),
    (".use", "NAME", "query trace NAME"),
    (
        ".width",
        "N ...",
        "minimum widths of a table's columns (none: reset)",
    ),
];

/// Rows a table shows, when no pager takes it, before it is cut (`.maxrows`).
const DEFAULT_MAX_ROWS: usize = 200;

/// History entries kept across sessions.
const HISTORY_SIZE: usize = 10_000;

const EXAMPLES: &str = "\
Statements end with ';' and may span lines. Examples:
  SHOW TABLES;   DESCRIBE MESSAGES;
  SELECT ALL MESSAGES BETWEEN PROCESS(1,2) IN COMM(C1);
  SELECT MPI_Isend FOR PROCESSES(3-6) BETWEEN TIME 10 ms AND 20 ms WHERE SIZE > 64 KiB;
  SELECT FAN_IN FOR ALL PROCESSES ORDER BY fan_in_bytes DESC;
  SELECT COUNT(*), SUM(SIZE) FROM MESSAGES GROUP BY PROCESS;
  SELECT WAIT STATES GROUP BY PROCESS;   SELECT CRITICAL PATH [SUMMARY];
  CREATE VIEW big AS SELECT ALL MESSAGES WHERE SIZE >= 1 MiB;
  SELECT PATTERNS FOR PROCESS(3);   SELECT PHASES;   SELECT LOOPS FOR PROCESS(5);
  SHOW TRACES | PROCESSES | COMMUNICATORS | OPERATIONS | VIEWS;   USE TRACE name;
A line starting with '.' while a statement is unfinished runs that statement first.
Meta commands:
";

/// `.help`'s text: examples, then each meta command on one line.
fn help() -> String {
    let mut out = EXAMPLES.to_string();
    for (name, args, what) in META {
        out.push_str(&format!("  {:<30}{what}\n", format!("{name} {args}")));
    }
    out
}

/// The meta commands safe mode refuses, each with what it would reach outside the database:
/// as sqlite3's `-safe`, every command that runs a program, or reads or writes a file other
/// than the database. (`.output` alone, back to the screen, is allowed.)
const UNSAFE: &[(&str, &str)] = &[
    (".shell", "it runs a command in the system shell"),
    (".system", "it runs a command in the system shell"),
    (".output", "it writes to a file or a pipe"),
    (".once", "it writes to a file or a pipe"),
    (".open", "it opens a database other than this one"),
    (".import", "it reads a file"),
    (".read", "it reads a file"),
];

/// Whether a line is a meta command.
fn is_meta(line: &str) -> bool {
    line.trim_start().starts_with('.')
}

/// What the shell does after a line.
#[derive(PartialEq)]
enum Flow {
    Continue,
    Quit,
}

/// The shell's state: the session, how results print, and the unfinished statement.
struct Shell {
    session: Session,
    mode: OutputFormat,
    /// `.output FILE`: where results go instead of standard output.
    output: Option<PathBuf>,
    /// `.once FILE`: where the next result goes.
    once: Option<PathBuf>,
    timer: bool,
    headers: bool,
    /// `.units`: durations and sizes in tables with their units (`235.1 ms`), else exact.
    units: bool,
    widths: Vec<usize>,
    max_rows: usize,
    pager: bool,
    bail: bool,
    /// Safe mode: the meta commands of [`UNSAFE`] are refused. Once on, it stays on.
    safe: bool,
    /// Whether the last meta command was refused by safe mode: a refusal is reported and the
    /// script goes on, whatever `.bail` says (nothing ran, so nothing is left half done).
    refused: bool,
    /// Whether a person types at a terminal (the pager applies only then).
    interactive: bool,
    /// The script being read (`.read FILE`), for errors; `None` on standard input.
    source: Option<String>,
    /// The statement typed so far, without its `;`, and the script's line it starts on.
    pending: String,
    pending_line: usize,
}

impl Shell {
    /// Names Tab completes: MPI calls, and the traces, communicators and views in the database.
    fn names(&self) -> Vec<String> {
        let mut words: Vec<String> = OpKind::ALL
            .iter()
            .filter_map(|k| k.mpi_name())
            .map(str::to_string)
            .collect();
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
        // A name with a control in it cannot be typed, and would reach the terminal raw in
        // the list of completions.
        words.retain(|w| !w.contains(is_terminal_control));
        words.sort();
        words.dedup();
        words
    }

    fn has_pending(&self) -> bool {
        !self.pending.trim().is_empty()
    }

    /// Takes line `number` of the input: a meta command runs, a statement line is added to the
    /// pending statement, which runs once a line ends with `;`. The caller runs the pending
    /// statement first ([`finish_pending`](Self::finish_pending)) when a meta line comes.
    fn feed(&mut self, line: &str, number: usize) -> Result<Flow, Error> {
        self.refused = false;
        if is_meta(line) {
            return self
                .meta(line.trim())
                .map_err(|e| self.located_meta(number, e));
        }
        if !self.has_pending() {
            self.pending.clear();
            self.pending_line = number;
        }
        self.pending.push_str(line);
        self.pending.push('\n');
        if self.pending.trim_end().ends_with(';') {
            self.finish_pending()?;
        }
        Ok(Flow::Continue)
    }

    /// Runs the pending statement, if any.
    fn finish_pending(&mut self) -> Result<(), Error> {
        let text = std::mem::take(&mut self.pending);
        if text.trim().is_empty() {
            return Ok(());
        }
        self.statement(&text, self.pending_line)
    }

    /// A meta command's error, naming the script's line.
    fn located_meta(&self, line: usize, error: Error) -> Error {
        match (&self.source, self.interactive) {
            _ if keeps_identity(&error) => error,
            (Some(file), _) => Error::Usage(format!("{file}: line {line}: {error}")),
            (None, false) => Error::Usage(format!("line {line}: {error}")),
            (None, true) => error,
        }
    }

    /// A statement's error, naming the script's line and the statement.
    fn located_statement(&self, line: usize, statement: &str, error: Error) -> Error {
        if keeps_identity(&error) || (self.interactive && self.source.is_none()) {
            return error;
        }
        let file = self
            .source
            .as_ref()
            .map_or(String::new(), |f| format!("{f}: "));
        let statement = one_line(statement);
        match error {
            // A syntax error names its line and column and shows the line already.
            Error::Syntax(_) if file.is_empty() => error,
            Error::Syntax(_) => Error::Usage(format!("{file}{error}")),
            other => Error::Usage(format!("{file}line {line}: {other}\n  in: {statement}")),
        }
    }

    /// Runs one meta command.
    fn meta(&mut self, line: &str) -> Result<Flow, Error> {
        let (cmd, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let rest = rest.trim();
        let args: Vec<&str> = rest.split_whitespace().collect();
        if self.safe && !(cmd == ".output" && args.is_empty()) {
            if let Some((_, why)) = UNSAFE.iter().find(|(name, _)| *name == cmd) {
                self.refused = true;
                return Err(Error::Usage(format!(
                    "{cmd} is refused in safe mode: {why}, and safe mode keeps a script to this database"
                )));
            }
        }
        match (cmd, args.as_slice()) {
            (".quit" | ".exit", _) => return Ok(Flow::Quit),
            (".help", _) => emit(&help())?,
            (".open", [path]) => {
                let same = std::fs::canonicalize(path).ok()
                    == std::fs::canonicalize(self.session.database().path()).ok();
                if same {
                    emit!("{} is already open\n", printable(path))?;
                } else {
                    let mut session = Session::new(Database::open_existing(path)?);
                    session.set_cancel_flag(self.session.cancel_flag());
                    self.session = session;
                    emit!("opened {}\n", printable(path))?;
                }
            }
            (".import", [file]) | (".import", [file, _]) => {
                let name = args.get(1).copied();
                self.session.close_trace();
                let info = self.session.database().import(file, name)?;
                emit!(
                    "imported {} as \"{}\": {} operations, {} messages\n",
                    printable(file),
                    printable(&info.name),
                    info.summary.operations,
                    info.summary.messages
                )?;
            }
            (".traces", []) => self.statement("SHOW TRACES;", 1)?,
            (".tables", []) => self.statement("SHOW TABLES;", 1)?,
            (".schema", [_, ..]) => self.statement(&format!("DESCRIBE {rest};"), 1)?,
            (".use", [name]) => {
                self.session.use_trace(name)?;
                emit!("using trace {}\n", printable(name))?;
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
            (".output", [path]) => self.output = Some(created(path)?),
            (".once", [path]) => self.once = Some(created(path)?),
            (".read", [path]) => return self.read(path),
            (".timer", [on]) => self.timer = switch(".timer", on)?,
            (".headers", [on]) => self.headers = switch(".headers", on)?,
            (".units", [on]) => self.units = switch(".units", on)?,
            (".bail", [on]) => self.bail = switch(".bail", on)?,
            (".pager", [on]) => self.pager = switch(".pager", on)?,
            (".safe", [on]) => {
                let on = switch(".safe", on)?;
                if self.safe && !on {
                    // A refusal as the others: reported, and the script goes on safely.
                    self.refused = true;
                    return Err(Error::Usage(
                        "safe mode stays on until the shell ends: .safe off is refused".into(),
                    ));
                }
                self.safe = on;
            }
            (".width", widths) => {
                self.widths = widths
                    .iter()
                    .map(|w| {
                        w.parse().map_err(|_| {
                            Error::Usage(format!(".width takes column widths, not {w:?}"))
                        })
                    })
                    .collect::<Result<_, _>>()?
            }
            (".maxrows", [n]) => {
                self.max_rows = n.parse().map_err(|_| {
                    Error::Usage(format!(".maxrows takes a number of rows, not {n:?}"))
                })?
            }
            (".show", []) => emit(&self.settings())?,
            (".shell" | ".system", [_, ..]) => {
                let status = std::process::Command::new("sh")
                    .arg("-c")
                    .arg(rest)
                    .status()
                    .map_err(|e| Error::Usage(format!("cannot run the shell: {e}")))?;
                if !status.success() {
                    return Err(Error::Usage(format!("`{rest}` ended with {status}")));
                }
            }
            _ => {
                return Err(Error::Usage(format!(
                    "unknown or malformed meta command {line:?}; .help lists them"
                )))
            }
        }
        Ok(Flow::Continue)
    }

    /// `.show`: each setting and its value.
    fn settings(&self) -> String {
        let on = |b: bool| if b { "on" } else { "off" };
        let file = |p: &Option<PathBuf>| {
            p.as_ref().map_or("stdout".into(), |p| {
                printable(&p.display().to_string()).into_owned()
            })
        };
        let widths: Vec<String> = self.widths.iter().map(usize::to_string).collect();
        let widths = if widths.is_empty() {
            "(as wide as the values)".to_string()
        } else {
            widths.join(" ")
        };
        format!(
            "database: {}\n    mode: {}\n  output: {}\n headers: {}\n   units: {}\n   width: {}\n maxrows: {}\n   pager: {}\n   timer: {}\n    bail: {}\n    safe: {}\n",
            printable(&self.session.database().path().display().to_string()),
            self.mode.name(),
            file(&self.output),
            on(self.headers),
            on(self.units),
            widths,
            self.max_rows,
            on(self.pager),
            on(self.timer),
            on(self.bail),
            on(self.safe),
        )
    }

    /// Runs the statements of `text`, which starts on the script's line `first_line`, and
    /// prints each result.
    fn statement(&mut self, text: &str, first_line: usize) -> Result<(), Error> {
        let shift = first_line.saturating_sub(1);
        let statements = parse_script(text)
            .map_err(|e| self.located_statement(first_line, text, query_error(e.shifted(shift))))?;
        for (stmt, range) in statements {
            let line = first_line + text[..range.start].matches('\n').count();
            let located = |shell: &Shell, e| shell.located_statement(line, &text[range.clone()], e);
            let started = Instant::now();
            if self.mode == OutputFormat::Svg && is_query(&stmt) {
                self.picture(&text[range.clone()])
                    .map_err(|e| located(self, e))?;
                continue;
            }
            let result = self.session.execute(&stmt).map_err(|e| located(self, e))?;
            let elapsed = started.elapsed();
            self.show(&result)?;
            if self.timer {
                emit!("time: {:.3} ms\n", elapsed.as_secs_f64() * 1e3)?;
            }
        }
        Ok(())
    }

    /// Prints `result`: to the `.once` or `.output` file, else through the pager when it is
    /// longer than the screen, else cut at `.maxrows` rows in a table.
    fn show(&mut self, result: &ResultSet) -> Result<(), Error> {
        if let Some(path) = self.once.take() {
            return append(&path, &self.render(result));
        }
        if let Some(path) = &self.output {
            return append(path, &self.render(result));
        }
        // A result has at least a line per row: a longer one than the screen is paged.
        if self.interactive && self.pager && crate::pager::longer_than_screen(result.len()) {
            let text = self.render(result);
            if crate::pager::page(&text)? {
                return Ok(());
            }
            eprintln!("(no pager: set $PAGER, or install less)");
            return emit(&text);
        }
        let tabular = matches!(self.mode, OutputFormat::Table | OutputFormat::Svg);
        if tabular && self.max_rows > 0 && result.len() > self.max_rows {
            let mut shown = result.clone();
            shown.rows.truncate(self.max_rows);
            return emit!(
                "{}… {} more rows not shown (.maxrows {} cuts; add LIMIT, or .mode csv to print them all)\n({} rows)\n",
                shown.to_table_styled(&self.widths, self.headers, self.units),
                result.len() - self.max_rows,
                self.max_rows,
                result.len()
            );
        }
        emit(&self.render(result))
    }

    /// `result` as the current mode, headers and widths print it.
    fn render(&self, result: &ResultSet) -> String {
        self.mode
            .render_with(result, &self.widths, self.headers, self.units)
    }

    /// `.mode svg`: the picture of `statement`, written to the `.once` or `.output` file.
    fn picture(&mut self, statement: &str) -> Result<(), Error> {
        let Some(path) = self.once.take().or_else(|| self.output.clone()) else {
            return Err(Error::Usage(
                ".mode svg writes each statement's picture to a file: name it with .output FILE or .once FILE"
                    .into(),
            ));
        };
        mtfdb::export::svg::write_statement_svg(&mut self.session, statement, &path)?;
        emit!("wrote {}\n", printable(&path.display().to_string()))
    }

    /// `.read FILE`: runs the script in FILE; its errors name the file and line.
    fn read(&mut self, path: &str) -> Result<Flow, Error> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let outer = self.source.replace(path.to_string());
        let outer_pending = std::mem::take(&mut self.pending);
        let result = self.script(&text);
        self.source = outer;
        self.pending = outer_pending;
        result
    }

    /// Runs a script line by line. With `.bail on` the first error ends it; otherwise each
    /// error is reported and the script goes on, then ends with an error saying how many.
    fn script(&mut self, script: &str) -> Result<Flow, Error> {
        let mut errors = 0;
        for (i, line) in script.lines().enumerate() {
            let number = i + 1;
            let mut flow = Flow::Continue;
            if is_meta(line) && self.has_pending() {
                let r = self.finish_pending();
                self.report(r, &mut errors)?;
            }
            let r = self.feed(line, number).map(|f| flow = f);
            self.report(r, &mut errors)?;
            if flow == Flow::Quit {
                return Ok(Flow::Quit);
            }
        }
        let r = self.finish_pending();
        self.report(r, &mut errors)?;
        match errors {
            0 => Ok(Flow::Continue),
            n => Err(Error::Usage(format!(
                "{}{n} statement{} failed (reported above)",
                self.source
                    .as_ref()
                    .map_or(String::new(), |f| format!("{f}: ")),
                if n == 1 { "" } else { "s" }
            ))),
        }
    }

    /// In a script: an error ends it when `.bail` is on (or on a closed output or Ctrl-C);
    /// otherwise, and for a command safe mode refused, it is printed and counted.
    fn report(&mut self, r: Result<(), Error>, errors: &mut usize) -> Result<(), Error> {
        let refused = std::mem::take(&mut self.refused);
        match r {
            Err(e) if is_closed_stdout(&e) || matches!(e, Error::Cancelled) => Err(e),
            Err(e) if self.bail && !refused => Err(e),
            Err(e) => {
                eprintln!("error: {}", printable_lines(&e.to_string()));
                *errors += 1;
                Ok(())
            }
            Ok(()) => Ok(()),
        }
    }
}

/// Errors passed on unchanged: Ctrl-C and a closed standard output end what runs.
fn keeps_identity(error: &Error) -> bool {
    matches!(error, Error::Cancelled) || is_closed_stdout(error)
}

/// `statement` on one line, shortened for an error message.
fn one_line(statement: &str) -> String {
    let words: Vec<&str> = statement.split_whitespace().collect();
    let joined = words.join(" ");
    match joined.char_indices().nth(100) {
        Some((i, _)) => format!("{}…", &joined[..i]),
        None => joined,
    }
}

/// `on` or `off` as a meta command's switch.
fn switch(command: &str, value: &str) -> Result<bool, Error> {
    match value {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(Error::Usage(format!(
            "{command} takes on or off, not {other:?}"
        ))),
    }
}

/// Creates (or empties) the file at `path` for `.output`/`.once`: fails now, not at the first
/// result, when it cannot be written.
fn created(path: &str) -> Result<PathBuf, Error> {
    std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    Ok(path.into())
}

/// Appends `text` to the file at `path`.
fn append(path: &std::path::Path, text: &str) -> Result<(), Error> {
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| Error::io(path, e))
}

/// Whether `stmt` asks a question of the trace (rather than `USE TRACE`, views, `SHOW`).
fn is_query(stmt: &mtfdb::query::Statement) -> bool {
    use mtfdb::query::Statement;
    matches!(
        stmt,
        Statement::Select(_) | Statement::Analysis(_) | Statement::Relation(..)
    )
}

fn history_path() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".mtfdb_history"))
}

/// Runs the shell on `db` (interactive on a terminal, a script otherwise), in safe mode from
/// the start when `safe` (`mtfdb repl --safe`).
pub fn run(db: Database, trace: Option<&str>, safe: bool) -> Result<(), Error> {
    let mut session = Session::new(db);
    session.set_cancel_flag(crate::cancel_flag());
    if let Some(t) = trace {
        session.use_trace(t)?;
    }
    run_session(session, safe)
}

/// Runs the shell on an open session, in safe mode from the start when `safe`.
pub fn run_session(session: Session, safe: bool) -> Result<(), Error> {
    let interactive = std::io::stdin().is_terminal();
    let mut shell = Shell {
        session,
        mode: OutputFormat::Table,
        output: None,
        once: None,
        timer: interactive,
        headers: true,
        units: true,
        widths: Vec::new(),
        max_rows: DEFAULT_MAX_ROWS,
        pager: true,
        bail: !interactive,
        safe,
        refused: false,
        interactive,
        source: None,
        pending: String::new(),
        pending_line: 1,
    };
    if !interactive {
        let mut script = String::new();
        std::io::stdin()
            .read_to_string(&mut script)
            .map_err(|e| Error::io("<stdin>", e))?;
        return shell.script(&script).map(|_| ());
    }
    interactive_loop(&mut shell)
}

/// The prompt loop on a terminal.
fn interactive_loop(shell: &mut Shell) -> Result<(), Error> {
    let config = Config::builder()
        .max_history_size(HISTORY_SIZE)
        .map_err(|e| Error::Usage(format!("the line editor's history: {e}")))?
        .auto_add_history(false)
        .build();
    let mut editor: Editor<ReplHelper, DefaultHistory> = Editor::with_config(config)
        .map_err(|e| Error::Usage(format!("cannot start the line editor: {e}")))?;
    editor.set_helper(Some(ReplHelper::new(
        META.iter().map(|(name, _, _)| *name).collect(),
        shell.names(),
        std::io::stdout().is_terminal(),
    )));
    let history = history_path();
    if let Some(h) = &history {
        let _ = editor.load_history(h);
    }
    emit!(
        "mtfdb {} — statements end with ';', .help for help, .quit to leave\n",
        env!("CARGO_PKG_VERSION")
    )?;
    loop {
        let prompt = if shell.has_pending() {
            "   ...> "
        } else {
            "mtfdb> "
        };
        let line = match editor.readline(prompt) {
            Ok(line) => line,
            // Ctrl-C at the prompt drops the unfinished statement.
            Err(ReadlineError::Interrupted) => {
                shell.pending.clear();
                continue;
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(Error::Usage(format!("reading input failed: {e}"))),
        };
        if line.trim().is_empty() {
            continue;
        }
        // Saved now, so that a killed terminal loses nothing.
        let _ = editor.add_history_entry(line.as_str());
        if let Some(h) = &history {
            let _ = editor.append_history(h);
        }
        if is_meta(&line) && shell.has_pending() {
            shown(&shell.finish_pending().map(|_| Flow::Continue))?;
        }
        let outcome = shell.feed(&line, 1);
        // A Ctrl-C that stopped the statement is spent; the next one stops the next.
        shell
            .session
            .cancel_flag()
            .store(false, std::sync::atomic::Ordering::SeqCst);
        shown(&outcome)?;
        if matches!(outcome, Ok(Flow::Quit)) {
            break;
        }
        if let Some(h) = editor.helper_mut() {
            h.names = shell.names();
        }
    }
    Ok(())
}

/// Prints the error of what the user typed; a closed standard output ends the shell.
fn shown(outcome: &Result<Flow, Error>) -> Result<(), Error> {
    match outcome {
        Err(e) if is_closed_stdout(e) => Err(Error::io(
            crate::STDOUT,
            std::io::Error::from(std::io::ErrorKind::BrokenPipe),
        )),
        Err(e) => {
            eprintln!("error: {}", printable_lines(&e.to_string()));
            Ok(())
        }
        Ok(_) => Ok(()),
    }
}

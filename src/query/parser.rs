//! The parser: text to [`Statement`]. Tokens come from the nom lexer (`lexer.rs`); the
//! statement grammar (`grammar/query.ebnf`) is a recursive descent over them, so that every error
//! names the exact column, what was expected there and what was found, in the user's words.

use std::fmt;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::ast::*;
use super::lexer::{tokenize, Kind, Token};
use super::relation::{Literal, Predicate, ResultAggregate, ResultGroup, Tail};
use crate::analysis::profile::ProfileBy;
use crate::analysis::replay::network::{Change, NetworkChange, NetworkModel};
use crate::error::Limit;
use crate::model::OpKind;

/// The most bins `HISTOGRAM … BINS n` may ask for.
pub const MAX_BINS: u32 = 10_000;

/// The longest name, in characters, a view may be given (a stored name is shown in tables).
pub const MAX_NAME_CHARS: usize = 255;

/// A statement that does not parse: where, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueryError {
    /// 1-based line: within [`QueryError::statement`], counted from
    /// [`QueryError::first_line`] (so within the script, for a statement of a script).
    pub line: usize,
    /// 1-based column (in characters) within that line.
    pub column: usize,
    /// What was expected and what was found.
    pub message: String,
    /// The statement's text, as given to [`parse_statement`] (for [`parse_script`]: the failing
    /// statement, without the text around it).
    pub statement: String,
    /// The line on which [`QueryError::statement`] starts: 1 for [`parse_statement`], the
    /// script's line for [`parse_script`].
    pub first_line: usize,
    /// The limit the statement went past, when that is the error (nesting depth, histogram
    /// bins, name length); `None` for a syntax error.
    pub limit: Option<Limit>,
}

impl std::error::Error for QueryError {}

/// ```text
/// error at column 22: expected a process selector after FOR, found "PROCES"
///   SELECT BROADCAST FOR PROCES(1)
///                        ^
/// ```
impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error {}", Located(self))
    }
}

/// A [`QueryError`] without the leading "error ": `at column 22: expected … found "PROCES"`,
/// then the statement with a caret (for callers that print their own "error: ").
pub struct Located<'a>(pub &'a QueryError);

impl fmt::Display for Located<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = self.0;
        let lines: Vec<&str> = e.statement.lines().collect();
        if lines.len() > 1 || e.first_line > 1 {
            write!(f, "at line {}, column {}: {}", e.line, e.column, e.message)?;
        } else {
            write!(f, "at column {}: {}", e.column, e.message)?;
        }
        if let Some(text) = lines.get(e.line.saturating_sub(e.first_line.max(1))) {
            // Tabs stay tabs under the text, so the caret lines up in any terminal.
            let pad: String = text
                .chars()
                .take(e.column.saturating_sub(1))
                .map(|c| if c == '\t' { '\t' } else { ' ' })
                .collect();
            let short = e
                .column
                .saturating_sub(1)
                .saturating_sub(pad.chars().count());
            write!(f, "\n  {text}\n  {pad}{}^", " ".repeat(short))?;
        }
        Ok(())
    }
}

impl QueryError {
    /// The same error for a statement that starts `lines` lines further down (a statement a
    /// caller took out of a longer script).
    pub fn shifted(mut self, lines: usize) -> QueryError {
        self.line += lines;
        self.first_line += lines;
        self
    }

    /// The error for byte offset `at` of `text`.
    fn at(text: &str, at: usize, message: String) -> QueryError {
        let before = &text[..at.min(text.len())];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].trim_end_matches('\r').chars().count() + 1;
        QueryError {
            line,
            column,
            message,
            statement: text.trim_end_matches(['\n', '\r']).to_string(),
            first_line: 1,
            limit: None,
        }
    }
}

/// Parses one statement. A single trailing `;` is allowed.
///
/// ```
/// use mtfdb::query::{parse_statement, Statement, SelectBody, Target, Scope, ProcessSelector};
/// let Statement::Select(s) = parse_statement("SELECT BROADCAST FOR PROCESS(1)").unwrap() else {
///     unreachable!()
/// };
/// let SelectBody::Rows(sel) = s.body else { unreachable!() };
/// assert_eq!(sel.target, Target::Operation(mtfdb::model::OpKind::Bcast));
/// assert_eq!(sel.filter.scope, Some(Scope::For(ProcessSelector::Process(1))));
/// ```
pub fn parse_statement(text: &str) -> Result<Statement, QueryError> {
    let tokens = tokenize(text).map_err(|e| QueryError::at(text, e.at, e.message))?;
    let mut p = Parser {
        tokens,
        pos: 0,
        end: 0,
        depth: 0,
        counters: true,
        clock_at: None,
        having: None,
    };
    p.end = p.tokens.last().map_or(0, |t| t.end);
    let result = p.statement().and_then(|s| {
        p.eat_symbol(";");
        if p.peek().is_some() {
            p.trailing()?;
        }
        Ok(s)
    });
    result.map_err(|f| QueryError {
        limit: f.limit,
        ..QueryError::at(text, f.at, f.message)
    })
}

/// Parses a script: statements separated by `;` (outside quotes and `--` comments). Returns each
/// statement with the byte range of its text in `script` (trimmed, without the `;`). Empty
/// statements and statements of comments only are skipped. The first error stops the parse; its
/// line counts within the script, its column within that line.
pub fn parse_script(script: &str) -> Result<Vec<(Statement, Range<usize>)>, QueryError> {
    let mut out = Vec::new();
    for range in split_statements(script) {
        let piece = &script[range.clone()];
        if piece.trim().is_empty() {
            continue;
        }
        let start = range.start + (piece.len() - piece.trim_start().len());
        let end = range.start + piece.trim_end().len();
        let text = &script[start..end];
        match tokenize(text) {
            Ok(t) if t.is_empty() => continue,
            _ => {}
        }
        let line = script[..start].matches('\n').count();
        out.push((
            parse_statement(text).map_err(|e| e.shifted(line))?,
            start..end,
        ));
    }
    Ok(out)
}

/// Byte ranges of the pieces of `script` between `;`s outside quotes and comments.
fn split_statements(script: &str) -> Vec<Range<usize>> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut quote: Option<char> = None;
    let mut comment = false;
    let mut prev = '\0';
    // A `;` inside parentheses separates the processes of a MATCH PATTERN template.
    let mut depth = 0usize;
    for (i, c) in script.char_indices() {
        if comment {
            if c == '\n' {
                comment = false;
            }
        } else if let Some(q) = quote {
            if c == q {
                quote = None;
            }
        } else if c == '\'' || c == '"' {
            quote = Some(c);
        } else if c == '-' && prev == '-' {
            comment = true;
        } else if c == '(' {
            depth += 1;
        } else if c == ')' {
            depth = depth.saturating_sub(1);
        } else if c == ';' && depth == 0 {
            pieces.push(start..i);
            start = i + 1;
        }
        prev = if c == '-' && prev == '-' { '\0' } else { c };
    }
    pieces.push(start..script.len());
    pieces
}

/// The rank in `S3`, `R12`, `P0` (one of `prefixes`, either case, then digits only).
fn rank_after(text: &str, prefixes: &[&str]) -> Option<u32> {
    let (head, digits) = text.split_at_checked(1)?;
    if !prefixes.iter().any(|p| p.eq_ignore_ascii_case(head)) || digits.is_empty() {
        return None;
    }
    if !digits.bytes().all(|b| b.is_ascii_digit()) || (digits.len() > 1 && digits.starts_with('0'))
    {
        return None;
    }
    digits.parse().ok()
}

/// True when `name` reads back as that same name without quotes.
/// Words a counter cannot be named bare, because a statement reads them as a field, a measure
/// or `NOT` where a counter may stand: such a counter is written quoted (`'SIZE'`).
const NOT_COUNTERS: &[&str] = &[
    "SIZE", "DURATION", "SENT", "RECEIVED", "TAG", "SENDER", "RECEIVER", "PEER", "ROOT", "COMM",
    "WAIT", "DEPTH", "MEMBERS", "SKEW", "NOT",
];

/// Whether a counter named `name` is written bare: a word that is no field nor measure.
pub(crate) fn is_bare_counter(name: &str) -> bool {
    matches!(tokenize(name).as_deref(), Ok([t]) if t.kind == Kind::Word && t.text == name)
        && !NOT_COUNTERS.iter().any(|k| name.eq_ignore_ascii_case(k))
}

pub(crate) fn is_bare_name(name: &str) -> bool {
    matches!(tokenize(name).as_deref(), Ok([t]) if t.kind == Kind::Word && t.text == name)
        && !name.eq_ignore_ascii_case("WORLD")
        && !name.eq_ignore_ascii_case("MPI_COMM_WORLD")
}

/// A parse failure at a byte offset.
struct Fail {
    at: usize,
    message: String,
    /// Set when a limit, not the syntax, is what failed.
    limit: Option<Limit>,
}

type PResult<T> = Result<T, Fail>;

/// What a `GROUP BY` among a statement's clauses groups by, if it may have one.
enum Grouping<'x> {
    /// No `GROUP BY` here.
    None,
    /// An aggregate's keys.
    Keys(&'x mut Vec<GroupKey>),
    /// `WAIT STATES`' one key.
    Waits(&'x mut Option<WaitGroup>),
}

/// Words that end a value: a word after a number is a unit unless it is one of these.
const CLAUSE_WORDS: &[&str] = &[
    "AND", "OR", "NOT", "IN", "FOR", "AMONG", "BETWEEN", "WHERE", "GROUP", "ORDER", "LIMIT",
    "FROM", "ASC", "DESC", "WITH", "HAVING",
];

/// The parameters `SIMULATE WITH` takes.
const NETWORK_PARAMETERS: &[&str] = &["LATENCY", "OVERHEAD", "GAP", "BANDWIDTH", "EAGER", "CPU"];
const NETWORK_HELP: &str =
    "a network parameter: LATENCY, OVERHEAD, GAP, BANDWIDTH, EAGER LIMIT or CPU";

const TARGET_HELP: &str = "MESSAGES, OPERATIONS, SENDS, RECEIVES, POINT_TO_POINT_OPERATIONS, \
     COLLECTIVE_OPERATIONS, CPU BURSTS, ROUTINE CALLS, REQUESTS, COLLECTIVE INSTANCES, ANOMALIES, METRICS, \
     a collective such as BROADCAST, or an MPI name such as MPI_Isend; SHOW TABLES lists them";

const SIZE_UNITS: &[(&str, u64)] = &[
    ("B", 1),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("KB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
];

const TIME_UNITS: &[(&str, u64)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
];

struct Parser<'a> {
    tokens: Vec<Token<'a>>,
    pos: usize,
    /// Byte offset just past the last token: where "end of statement" is reported.
    end: usize,
    /// Parentheses and `NOT`s open around the current token in a `WHERE` condition.
    depth: usize,
    /// Whether the rows the clauses being read select may carry hardware counters (calls),
    /// so that a `WHERE` may name one: false after a target whose rows are not calls.
    counters: bool,
    /// Where the last clauses' `WITH CLOCK CORRECTION` began, to refuse it on a statement
    /// that reads no wait state.
    clock_at: Option<usize>,
    /// The `HAVING` of the last statistic or aggregate read, which makes it a relation.
    having: Option<Predicate>,
}

impl<'a> Parser<'a> {
    // ---- token helpers ----------------------------------------------------------------------

    fn peek(&self) -> Option<Token<'a>> {
        self.tokens.get(self.pos).copied()
    }

    fn peek_at(&self, n: usize) -> Option<Token<'a>> {
        self.tokens.get(self.pos + n).copied()
    }

    fn is_keyword(&self, kw: &str) -> bool {
        self.peek().is_some_and(|t| t.is_keyword(kw))
    }

    fn is_symbol(&self, s: &str) -> bool {
        self.peek().is_some_and(|t| t.is_symbol(s))
    }

    fn eat_keyword(&mut self, kw: &str) -> bool {
        let yes = self.is_keyword(kw);
        if yes {
            self.pos += 1;
        }
        yes
    }

    fn eat_symbol(&mut self, s: &str) -> bool {
        let yes = self.is_symbol(s);
        if yes {
            self.pos += 1;
        }
        yes
    }

    /// The current token, consumed; callers have peeked it (at the end, the last token
    /// again, so that a wrong call reports a position instead of panicking).
    fn bump(&mut self) -> Token<'a> {
        let t = self
            .tokens
            .get(self.pos)
            .or(self.tokens.last())
            .copied()
            .unwrap_or(Token {
                kind: Kind::Symbol,
                text: "",
                start: self.end,
                end: self.end,
            });
        self.pos += 1;
        t
    }

    /// Where the current token starts (or the end of the statement).
    fn here(&self) -> usize {
        self.peek().map_or(self.end, |t| t.start)
    }

    /// The current token as the user wrote it, for messages.
    fn found(&self) -> String {
        match self.peek() {
            None => "end of statement".to_string(),
            Some(t) if t.kind == Kind::Quoted => format!("'{}'", t.text),
            Some(t) => format!("\"{}\"", t.text),
        }
    }

    fn fail<T>(&self, message: String) -> PResult<T> {
        self.fail_at(self.here(), message)
    }

    fn fail_at<T>(&self, at: usize, message: String) -> PResult<T> {
        Err(Fail {
            at,
            message,
            limit: None,
        })
    }

    /// A limit exceeded at byte offset `at`.
    fn beyond<T>(&self, at: usize, limit: Limit, message: String) -> PResult<T> {
        Err(Fail {
            at,
            message,
            limit: Some(limit),
        })
    }

    /// `expected {what}, found …` at the current token.
    fn expected<T>(&self, what: &str) -> PResult<T> {
        self.fail(format!("expected {what}, found {}", self.found()))
    }

    fn expect_keyword(&mut self, kw: &str, context: &str) -> PResult<()> {
        if self.eat_keyword(kw) {
            Ok(())
        } else {
            self.expected(&format!("{kw} {context}"))
        }
    }

    fn expect_symbol(&mut self, s: &str, context: &str) -> PResult<()> {
        if self.eat_symbol(s) {
            Ok(())
        } else {
            self.expected(&format!("\"{s}\" {context}"))
        }
    }

    /// A whole number token; `what` names it in messages (`LIMIT needs a whole number`).
    fn whole_number(&mut self, what: &str) -> PResult<u64> {
        match self.peek() {
            Some(t) if t.kind == Kind::Number && !t.text.contains('.') => {
                let n = t
                    .text
                    .parse::<u64>()
                    .or_else(|_| self.fail(format!("number too large: \"{}\"", t.text)))?;
                self.pos += 1;
                Ok(n)
            }
            _ => self.fail(format!(
                "{what} needs a whole number, found {}",
                self.found()
            )),
        }
    }

    fn small_number(&mut self, what: &str) -> PResult<u32> {
        let at = self.here();
        let n = self.whole_number(what)?;
        u32::try_from(n).or_else(|_| self.fail_at(at, format!("{what} is too large: {n}")))
    }

    /// A name: a bare word or a quoted name.
    fn name(&mut self, what: &str) -> PResult<String> {
        match self.peek() {
            Some(t) if matches!(t.kind, Kind::Word | Kind::Quoted) => {
                self.pos += 1;
                Ok(t.text.to_string())
            }
            _ => self.expected(what),
        }
    }

    /// Reports tokens left after a complete statement.
    fn trailing(&self) -> PResult<()> {
        let Some(t) = self.peek() else {
            return Ok(());
        };
        let clause = ["BETWEEN", "AMONG", "FOR", "IN", "WHERE", "GROUP", "HAVING"]
            .iter()
            .find(|k| t.is_keyword(k));
        match clause {
            Some(k) if self.pos > 0 && self.after_order_or_limit() => {
                self.fail(format!("{k} must come before ORDER BY and LIMIT"))
            }
            _ if t.is_keyword("ORDER") && self.after_limit() => {
                self.fail("ORDER BY must come before LIMIT".to_string())
            }
            _ => self.fail(format!("unexpected {} after the statement", self.found())),
        }
    }

    fn after_order_or_limit(&self) -> bool {
        self.tokens[..self.pos]
            .iter()
            .any(|t| t.is_keyword("ORDER") || t.is_keyword("LIMIT"))
    }

    fn after_limit(&self) -> bool {
        self.tokens[..self.pos]
            .iter()
            .any(|t| t.is_keyword("LIMIT"))
    }

    // ---- statements -------------------------------------------------------------------------

    fn statement(&mut self) -> PResult<Statement> {
        if self.is_keyword("SELECT") {
            if let Some(grouped) = self.aggregates_of_analysis(false)? {
                return Ok(grouped);
            }
            if let Some(analysis) = self.analysis_select()? {
                return self.with_tail(Statement::Analysis(analysis));
            }
            self.pos += 1;
            let select = self.select(true)?;
            Ok(self.with_having(Statement::Select(select)))
        } else if self.eat_keyword("MATCH") {
            self.expect_keyword("PATTERN", "after MATCH")?;
            let template = self.template()?;
            let mut analysis = Analysis::Match {
                template,
                options: TemplateParams::default(),
            };
            self.analysis_options(&mut analysis)?;
            self.with_tail(Statement::Analysis(analysis))
        } else if self.eat_keyword("REFRESH") {
            self.expect_keyword("PATTERNS", "after REFRESH")?;
            self.with_tail(Statement::Analysis(Analysis::Refresh))
        } else if self.is_keyword("SHOW") && self.peek_at(1).is_some_and(|t| t.is_keyword("PHASE"))
        {
            self.pos += 2;
            self.expect_keyword("TREE", "after SHOW PHASE")?;
            let mut analysis = Analysis::PhaseTree(PhaseParams::default());
            self.analysis_options(&mut analysis)?;
            self.with_tail(Statement::Analysis(analysis))
        } else if self.eat_keyword("EXPLAIN") {
            if self.eat_keyword("ANALYZE") {
                self.expect_keyword("SELECT", "after EXPLAIN ANALYZE")?;
                let select = self.select(true)?;
                return Ok(self.with_having(Statement::ExplainAnalyze(select)));
            }
            if self.eat_keyword("SQL") {
                if !self.is_keyword("SELECT") {
                    return self.expected("SELECT after EXPLAIN SQL");
                }
                let at = self.here();
                if let Some(analysis) = self.analysis_select()? {
                    return self.fail_at(
                        at,
                        format!(
                            "EXPLAIN SQL: {analysis} needs mtfdb's analyses; export the trace \
                             (mtfdb export NAME --format parquet) and read its patterns, phases \
                             or wait_states tables instead"
                        ),
                    );
                }
                self.pos += 1;
                let select = self.select(true)?;
                if self.having.is_some() {
                    return self.fail_at(
                        at,
                        "EXPLAIN SQL translates no HAVING: it filters the computed result, \
                         which SQL over the export would compute with its own query"
                            .to_string(),
                    );
                }
                return Ok(Statement::ExplainSql(select));
            }
            if self.is_keyword("SELECT") {
                if let Some(grouped) = self.aggregates_of_analysis(true)? {
                    return Ok(grouped);
                }
                if let Some(analysis) = self.analysis_select()? {
                    return self.with_tail(Statement::ExplainAnalysis(analysis));
                }
                self.pos += 1;
                let select = self.select(true)?;
                return Ok(self.with_having(Statement::Explain(select)));
            }
            let analysis = ["SIMULATE", "MATCH", "REFRESH"]
                .iter()
                .any(|k| self.is_keyword(k))
                || (self.is_keyword("SHOW")
                    && self.peek_at(1).is_some_and(|t| t.is_keyword("PHASE")));
            if !analysis {
                return self.expected("SELECT (or an analysis such as SIMULATE) after EXPLAIN");
            }
            match self.statement()? {
                Statement::Analysis(analysis) => Ok(Statement::ExplainAnalysis(analysis)),
                Statement::Relation(source, tail) => match *source {
                    Statement::Analysis(analysis) => Ok(Statement::Relation(
                        Box::new(Statement::ExplainAnalysis(analysis)),
                        tail,
                    )),
                    _ => self.expected("SELECT (or an analysis such as SIMULATE) after EXPLAIN"),
                },
                _ => self.expected("SELECT (or an analysis such as SIMULATE) after EXPLAIN"),
            }
        } else if self.eat_keyword("DESCRIBE") {
            if self.is_keyword("SELECT") {
                let at = self.here();
                return match self.analysis_select()? {
                    Some(a) if super::catalog::analysis_columns(&a).is_some() => {
                        Ok(Statement::DescribeAnalysis(a))
                    }
                    _ => self.fail_at(
                        at,
                        "DESCRIBE SELECT takes PROFILE, TIME PROFILE or COMMUNICATION OVER TIME \
                         (DESCRIBE <target> the record targets)"
                            .to_string(),
                    ),
                };
            }
            Ok(Statement::Describe(self.target("after DESCRIBE")?))
        } else if self.eat_keyword("SHOW") {
            let what = [
                ("TABLES", ShowWhat::Tables),
                ("TRACES", ShowWhat::Traces),
                ("PROCESSES", ShowWhat::Processes),
                ("COMMUNICATORS", ShowWhat::Communicators),
                ("OPERATIONS", ShowWhat::Operations),
                ("VIEWS", ShowWhat::Views),
            ]
            .into_iter()
            .find(|(k, _)| self.is_keyword(k));
            match what {
                Some((_, w)) => {
                    self.pos += 1;
                    Ok(Statement::Show(w))
                }
                None => self.expected(
                    "TABLES, TRACES, PROCESSES, COMMUNICATORS, OPERATIONS, VIEWS or PHASE TREE \
                     after SHOW",
                ),
            }
        } else if self.eat_keyword("SIMULATE") {
            let simulate = self.simulate()?;
            self.with_tail(Statement::Analysis(simulate))
        } else if self.eat_keyword("USE") {
            self.expect_keyword("TRACE", "after USE")?;
            Ok(Statement::UseTrace(
                self.name("a trace name after USE TRACE")?,
            ))
        } else if self.eat_keyword("CREATE") {
            self.expect_keyword("VIEW", "after CREATE")?;
            let at = self.here();
            let name = self.name("a view name after CREATE VIEW")?;
            let chars = name.chars().count();
            if chars > MAX_NAME_CHARS {
                return self.beyond(
                    at,
                    Limit::NameLength,
                    format!(
                        "a view name has at most {MAX_NAME_CHARS} characters, this one {chars}"
                    ),
                );
            }
            self.expect_keyword("AS", "after the view name")?;
            self.expect_keyword("SELECT", "after AS")?;
            let at = self.here();
            let select = self.select(false)?;
            match select.body {
                SelectBody::Rows(selection) => Ok(Statement::CreateView { name, selection }),
                _ => self.fail_at(
                    at,
                    "a view stores a selection: CREATE VIEW … AS SELECT <target> …, \
                     not an aggregate or a statistic"
                        .to_string(),
                ),
            }
        } else if self.eat_keyword("DROP") {
            self.expect_keyword("VIEW", "after DROP")?;
            Ok(Statement::DropView(
                self.name("a view name after DROP VIEW")?,
            ))
        } else {
            self.expected(
                "a statement (SELECT, EXPLAIN, SHOW, DESCRIBE, USE TRACE, CREATE VIEW, DROP VIEW, \
                 MATCH PATTERN, REFRESH PATTERNS)",
            )
        }
    }

    // ---- pattern and phase statements -------------------------------------------------------

    /// `SELECT PATTERNS FOR PROCESS(n)`, `SELECT COMMUNICATION PATTERNS`, `SELECT PHASES …`,
    /// with their parameters; `None` (nothing consumed) for any other SELECT.
    fn analysis_select(&mut self) -> PResult<Option<Analysis>> {
        let Some(mut analysis) = self.analysis_head()? else {
            return Ok(None);
        };
        self.analysis_options(&mut analysis)?;
        Ok(Some(analysis))
    }

    /// An analysis `SELECT` up to its `WITH`, its parameters at their defaults.
    fn analysis_head(&mut self) -> PResult<Option<Analysis>> {
        let next = self.peek_at(1);
        let word = |k: &str| next.is_some_and(|t| t.is_keyword(k));
        if word("PATTERNS") {
            self.pos += 2;
            self.expect_keyword("FOR", "after SELECT PATTERNS")?;
            let at = self.here();
            match self.selector("FOR")? {
                ProcessSelector::Process(rank) => Ok(Some(Analysis::ProcessPatterns {
                    rank,
                    options: PatternParams::default(),
                })),
                _ => self.fail_at(
                    at,
                    "process patterns are per process: SELECT PATTERNS FOR PROCESS(n)".to_string(),
                ),
            }
        } else if word("COMMUNICATION") && self.peek_at(2).is_some_and(|t| t.is_keyword("PATTERNS"))
        {
            self.pos += 3;
            Ok(Some(Analysis::CommunicationPatterns {
                options: PatternParams::default(),
            }))
        } else if word("PHASES") {
            self.pos += 2;
            Ok(Some(Analysis::Phases(PhaseParams::default())))
        } else if word("LOOPS") {
            self.pos += 2;
            self.expect_keyword("FOR", "after SELECT LOOPS")?;
            let at = self.here();
            match self.selector("FOR")? {
                ProcessSelector::Process(rank) => {
                    Ok(Some(Analysis::Loops(rank, LoopParams::default())))
                }
                _ => self.fail_at(
                    at,
                    "loop nests are per process: SELECT LOOPS FOR PROCESS(n) (SELECT GLOBAL MODEL merges them)"
                        .to_string(),
                ),
            }
        } else if word("GLOBAL") {
            self.pos += 2;
            self.expect_keyword("MODEL", "after SELECT GLOBAL")?;
            Ok(Some(Analysis::GlobalModel(LoopParams::default())))
        } else if word("NETWORK") {
            self.pos += 2;
            self.expect_keyword("MODEL", "after SELECT NETWORK")?;
            Ok(Some(Analysis::FitNetwork))
        } else if word("PROFILE") {
            self.pos += 2;
            let by = if self.eat_keyword("BY") {
                if self.eat_keyword("ROUTINE") {
                    ProfileBy::Routine
                } else if self.eat_keyword("CALL") {
                    self.expect_keyword("PATH", "after SELECT PROFILE BY CALL")?;
                    ProfileBy::CallPath
                } else {
                    return self.expected("ROUTINE or CALL PATH after SELECT PROFILE BY");
                }
            } else {
                ProfileBy::Routine
            };
            let per_process = if self.eat_keyword("PER") {
                self.expect_keyword("PROCESS", "after PER")?;
                true
            } else {
                false
            };
            Ok(Some(Analysis::Profile {
                by,
                per_process,
                scope: self.analysis_scope()?,
            }))
        } else if word("TIME") && self.peek_at(2).is_some_and(|t| t.is_keyword("PROFILE")) {
            self.pos += 3;
            let bins = self.time_bins("SELECT TIME PROFILE")?;
            Ok(Some(Analysis::TimeProfile {
                bins,
                scope: self.analysis_scope()?,
            }))
        } else if word("COMMUNICATION") && self.peek_at(2).is_some_and(|t| t.is_keyword("OVER")) {
            self.pos += 3;
            self.expect_keyword("TIME", "after SELECT COMMUNICATION OVER")?;
            let bins = self.time_bins("SELECT COMMUNICATION OVER TIME")?;
            Ok(Some(Analysis::CommunicationOverTime {
                bins,
                scope: self.analysis_scope()?,
            }))
        } else if word("CRITICAL") {
            self.pos += 2;
            self.expect_keyword("PATH", "after SELECT CRITICAL")?;
            Ok(Some(Analysis::CriticalPath {
                summary: self.eat_keyword("SUMMARY"),
                clock: ClockCorrection::None,
            }))
        } else if word("DELAY") {
            self.pos += 2;
            self.expect_keyword("COSTS", "after SELECT DELAY")?;
            let rank = if self.eat_keyword("FOR") {
                let at = self.here();
                match self.selector("FOR")? {
                    ProcessSelector::Process(rank) => Some(rank),
                    _ => {
                        return self.fail_at(
                            at,
                            "delay costs are selected by delaying process: SELECT DELAY COSTS \
                             FOR PROCESS(n)"
                                .to_string(),
                        )
                    }
                }
            } else {
                None
            };
            Ok(Some(Analysis::DelayCosts {
                rank,
                clock: ClockCorrection::None,
            }))
        } else if word("TOPOLOGY") {
            self.pos += 2;
            let (mut comm, mut phase) = (None, None);
            while self.eat_keyword("IN") {
                let at = self.here();
                match self.within()? {
                    Within::Comm(c) if comm.is_none() => comm = Some(c),
                    Within::Phase(k) if phase.is_none() => phase = Some(k),
                    _ => {
                        return self.fail_at(
                            at,
                            "SELECT TOPOLOGY takes at most one IN COMM(c) and one IN PHASE k"
                                .to_string(),
                        )
                    }
                }
            }
            Ok(Some(Analysis::Topology {
                comm,
                phase,
                options: TopologyParams::default(),
            }))
        } else if word("LOGICAL") {
            self.pos += 2;
            self.expect_keyword("TRACE", "after SELECT LOGICAL")?;
            let rank =
                if self.eat_keyword("FOR") {
                    let at = self.here();
                    match self.selector("FOR")? {
                        ProcessSelector::Process(rank) => Some(rank),
                        _ => return self.fail_at(
                            at,
                            "a logical trace is one process's: SELECT LOGICAL TRACE FOR PROCESS(n)"
                                .to_string(),
                        ),
                    }
                } else {
                    None
                };
            Ok(Some(Analysis::LogicalTrace {
                rank,
                loops: LoopParams::default(),
                topology: TopologyParams::default(),
            }))
        } else {
            Ok(None)
        }
    }

    /// `BINS n` after a time-binned statement: 1 to [`MAX_BINS`] bins.
    fn time_bins(&mut self, statement: &str) -> PResult<u32> {
        self.expect_keyword("BINS", &format!("after {statement}"))?;
        let at = self.here();
        let n = self.small_number("BINS")?;
        if n == 0 {
            return self.fail_at(at, "BINS needs at least 1 bin, found 0".to_string());
        }
        if n > MAX_BINS {
            return self.beyond(
                at,
                Limit::HistogramBins,
                format!("{statement} has at most {MAX_BINS} bins, BINS asks for {n}"),
            );
        }
        Ok(n)
    }

    /// A profile's `[FOR <selector>] [BETWEEN TIME a AND b]`, in either order.
    fn analysis_scope(&mut self) -> PResult<AnalysisScope> {
        let mut scope = AnalysisScope::default();
        loop {
            if scope.ranks.is_none() && self.eat_keyword("FOR") {
                scope.ranks = Some(self.selector("FOR")?);
            } else if scope.time.is_none()
                && self.is_keyword("BETWEEN")
                && self.peek_at(1).is_some_and(|t| t.is_keyword("TIME"))
            {
                self.pos += 2;
                scope.time = Some(self.time_window()?);
            } else {
                return Ok(scope);
            }
        }
    }

    /// `[WITH name value, …]`: each name one of `names` and given at most once; `value`
    /// parses what follows the name (the name consumed; `at` is where it began). The one
    /// parameter list of the language: `SIMULATE`'s network and the analyses' parameters.
    fn with_list(
        &mut self,
        names: &[&'static str],
        help: &str,
        mut value: impl FnMut(&mut Self, &'static str, usize) -> PResult<()>,
    ) -> PResult<()> {
        if !self.eat_keyword("WITH") {
            return Ok(());
        }
        let mut seen: Vec<&str> = Vec::new();
        loop {
            let at = self.here();
            let Some(word) = self.peek().filter(|t| t.kind == Kind::Word) else {
                return self.expected(help);
            };
            let name = word.text.to_ascii_uppercase();
            let Some(&parameter) = names.iter().find(|p| **p == name) else {
                return self.expected(help);
            };
            if seen.contains(&parameter) {
                return self.fail_at(
                    at,
                    format!("{} is given twice", super::options::spelled(parameter)),
                );
            }
            seen.push(parameter);
            self.pos += 1;
            value(self, parameter, at)?;
            if !self.eat_symbol(",") {
                return Ok(());
            }
        }
    }

    /// After `SIMULATE`: `[WITH parameter value, …]`, each parameter at most once, the others
    /// at their defaults.
    /// A value is absolute, or `x2`, `x0.5`: a factor on the network fitted to the trace.
    fn network(&mut self) -> PResult<NetworkChange> {
        let mut net = NetworkChange::default();
        self.with_list(NETWORK_PARAMETERS, NETWORK_HELP, |p, parameter, at| {
            let after = format!("after {parameter}");
            let scale = if parameter == "EAGER" {
                None
            } else {
                p.factor()?
            };
            if let Some(x) = scale {
                match parameter {
                    "LATENCY" => net.latency = Change::Scale(x),
                    "OVERHEAD" => net.overhead = Change::Scale(x),
                    "GAP" => net.gap = Change::Scale(x),
                    "BANDWIDTH" => net.bandwidth = Change::Scale(x),
                    _ => net.cpu = Some(x),
                }
                return Ok(());
            }
            match parameter {
                "LATENCY" => net.latency = Change::Set(p.time(&after)?),
                "OVERHEAD" => net.overhead = Change::Set(p.time(&after)?),
                "GAP" => net.gap = Change::Set(p.time(&after)?),
                "BANDWIDTH" => {
                    let bytes = p.byte_count(&after)?;
                    p.expect_symbol("/", "in a bandwidth such as 12 GB/s")?;
                    if !(p.eat_keyword("s") || p.eat_keyword("sec")) {
                        return p.expected("s after / in a bandwidth such as 12 GB/s");
                    }
                    if bytes == 0 {
                        return p.fail_at(at, "the bandwidth must be above 0".to_string());
                    }
                    net.bandwidth = Change::Set(bytes);
                }
                "EAGER" => {
                    p.expect_keyword("LIMIT", "after EAGER")?;
                    net.eager_limit = match p.factor()? {
                        Some(x) => Change::Scale(x),
                        None => Change::Set(p.byte_count("after EAGER LIMIT")?),
                    };
                }
                _ => {
                    let at = p.here();
                    let cpu = p
                        .peek()
                        .filter(|t| t.kind == Kind::Number)
                        .and_then(|t| t.text.parse::<f64>().ok())
                        .filter(|c| c.is_finite() && *c > 0.0);
                    let Some(cpu) = cpu else {
                        return p.fail_at(
                            at,
                            "CPU takes how many times faster the CPU is, such as 2.0".to_string(),
                        );
                    };
                    p.pos += 1;
                    net.cpu = Some(cpu);
                }
            }
            Ok(())
        })?;
        Ok(net)
    }

    /// `x2`, `x0.5`: a relative value's factor (consumed), finite and above 0; `None` (nothing
    /// consumed) for any other token.
    fn factor(&mut self) -> PResult<Option<f64>> {
        let Some(t) = self.peek().filter(|t| t.kind == Kind::Word) else {
            return Ok(None);
        };
        let Some(digits) = t.text.strip_prefix(['x', 'X']) else {
            return Ok(None);
        };
        if !digits.starts_with(|c: char| c.is_ascii_digit()) {
            return Ok(None);
        }
        match digits.parse::<f64>() {
            Ok(x) if x.is_finite() && x > 0.0 => {
                self.pos += 1;
                Ok(Some(x))
            }
            _ => self.fail(format!(
                "a relative value is x and a factor above 0, such as x2 or x0.5, found {}",
                t.text
            )),
        }
    }

    /// An analysis's `[WITH name value, …]`, setting its parameters
    /// ([`options::parameters`](super::options::parameters) says which it takes).
    fn analysis_options(&mut self, analysis: &mut Analysis) -> PResult<()> {
        let names = super::options::parameters(analysis);
        if names.is_empty() {
            return Ok(());
        }
        let spelled: Vec<&str> = names.iter().map(|n| super::options::spelled(n)).collect();
        let help = format!(
            "a parameter of {}: {}",
            super::options::statement_name(analysis),
            match spelled.split_last() {
                Some((last, [])) => last.to_string(),
                Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
                None => String::new(),
            }
        );
        self.with_list(names, &help, |p, name, _| {
            let after = format!("after {}", super::options::spelled(name));
            match (&mut *analysis, name) {
                (
                    Analysis::ProcessPatterns { options, .. }
                    | Analysis::CommunicationPatterns { options }
                    | Analysis::Phases(PhaseParams {
                        patterns: options, ..
                    })
                    | Analysis::PhaseTree(PhaseParams {
                        patterns: options, ..
                    }),
                    "DELIMITERS" | "TANDEMS" | "ENVELOPE",
                ) => {
                    let on = p.on_off(name == "ENVELOPE", &after)?;
                    match name {
                        "DELIMITERS" => options.delimiters = on,
                        "TANDEMS" => options.tandems = on,
                        _ => options.envelope = on,
                    }
                }
                (Analysis::Phases(phases) | Analysis::PhaseTree(phases), "THRESHOLD") => {
                    let at = p.here();
                    let t = p.thousandths(&after)?;
                    phases.threshold = i32::try_from(t).or_else(|_| {
                        p.fail_at(
                            at,
                            format!(
                                "the threshold {} is too large",
                                super::options::thousandths(t)
                            ),
                        )
                    })?;
                }
                (Analysis::Phases(phases) | Analysis::PhaseTree(phases), _) => {
                    p.expect_keyword("ARITHMETIC", "after THESIS")?;
                    phases.thesis_compat = p.on_off(true, "after THESIS ARITHMETIC")?;
                }
                (Analysis::Match { options, .. }, "ERRORS") => {
                    options.errors = p.small_number(&format!("WITH {name}"))?;
                }
                (Analysis::Match { options, .. }, _) => {
                    options.ngram =
                        p.count_to("NGRAM", "an n-gram size", TemplateParams::MAX_NGRAM)?;
                }
                (
                    Analysis::Loops(_, loops)
                    | Analysis::GlobalModel(loops)
                    | Analysis::LogicalTrace { loops, .. },
                    "BODY",
                ) => {
                    p.expect_keyword("LIMIT", "after BODY")?;
                    loops.max_body =
                        p.count_to("BODY LIMIT", "a loop body length", LoopParams::MAX)?;
                }
                (
                    Analysis::Topology {
                        options: topology, ..
                    }
                    | Analysis::LogicalTrace { topology, .. },
                    _,
                ) => {
                    let at = p.here();
                    let t = p.thousandths(&after)?;
                    if !(0..=1000).contains(&t) {
                        return p.fail_at(
                            at,
                            format!(
                                "a topology threshold is a share of the largest pair's \
                                 traffic, from 0 to 1, found {}",
                                super::options::thousandths(t)
                            ),
                        );
                    }
                    topology.threshold = t as u32;
                }
                (Analysis::CriticalPath { clock, .. }, _) => *clock = p.clock_correction()?,
                (Analysis::DelayCosts { clock, .. }, _) => *clock = p.clock_correction()?,
                // `parameters` gives no other name to any other analysis.
                _ => return p.expected("a known parameter"),
            }
            Ok(())
        })
    }

    /// The whole number after parameter `name`, which is `what`, from 1 to `max`.
    fn count_to(&mut self, name: &str, what: &str, max: u32) -> PResult<u32> {
        let at = self.here();
        let n = self.small_number(&format!("WITH {name}"))?;
        if !(1..=max).contains(&n) {
            return self.fail_at(at, format!("{name} is {what} from 1 to {max}, found {n}"));
        }
        Ok(n)
    }

    /// `ON` or `OFF` after a switch; nothing at all means `ON` when `bare` allows it (`WITH
    /// ENVELOPE`, `WITH THESIS ARITHMETIC`).
    fn on_off(&mut self, bare: bool, after: &str) -> PResult<bool> {
        if self.eat_keyword("ON") {
            Ok(true)
        } else if self.eat_keyword("OFF") {
            Ok(false)
        } else if bare {
            Ok(true)
        } else {
            self.expected(&format!("ON or OFF {after}"))
        }
    }

    /// After `CLOCK`: `CORRECTION` and a correction's name (`none`, `offsets`,
    /// `interpolate` or `clc`, any case).
    fn clock_correction(&mut self) -> PResult<ClockCorrection> {
        self.expect_keyword("CORRECTION", "after CLOCK")?;
        let at = self.here();
        let Some(word) = self.peek().filter(|t| t.kind == Kind::Word) else {
            let names: Vec<&str> = ClockCorrection::ALL.iter().map(|c| c.name()).collect();
            return self.expected(&format!(
                "a clock correction after CLOCK CORRECTION ({})",
                names.join(", ")
            ));
        };
        match ClockCorrection::named(word.text) {
            Some(c) => {
                self.pos += 1;
                Ok(c)
            }
            None => self.fail_at(at, ClockCorrection::unknown(word.text)),
        }
    }

    /// A number of bytes that fits 64 bits (a plain number is bytes).
    fn byte_count(&mut self, after: &str) -> PResult<u64> {
        let (v, num, shown) = self.quantity(Dimension::Size, after)?;
        match v.and_then(|v| u64::try_from(v).ok()) {
            Some(v) => Ok(v),
            None => self.fail_at(num.start, format!("number too large: \"{shown}\"")),
        }
    }

    /// A decimal number with at most three decimals, in thousandths (`-1.25` is -1250).
    fn thousandths(&mut self, after: &str) -> PResult<i64> {
        let negative = self.eat_symbol("-");
        let at = self.here();
        let text = match self.peek() {
            Some(t) if t.kind == Kind::Number => t.text,
            _ => return self.expected(&format!("a number {after} (such as 0.5)")),
        };
        let value = match scaled(text, 1000).map(|v| v.map(i64::try_from)) {
            Some(Ok(Ok(v))) => v,
            Some(Err(())) => {
                return self.fail_at(
                    at,
                    format!("a threshold has at most three decimals, found {text}"),
                )
            }
            _ => return self.fail_at(at, format!("the threshold {text} is too large")),
        };
        self.pos += 1;
        Ok(if negative { -value } else { value })
    }

    /// `(P0: S1 S4; P1: R0 S2 S5)`.
    fn template(&mut self) -> PResult<Vec<TemplateProcess>> {
        self.expect_symbol("(", "after MATCH PATTERN")?;
        let mut processes: Vec<TemplateProcess> = Vec::new();
        loop {
            let at = self.here();
            let rank = match self.peek() {
                Some(t) if t.kind == Kind::Word => rank_after(t.text, &["P"]),
                _ => None,
            };
            let Some(rank) = rank else {
                return self.expected("a process such as P0 in the template");
            };
            if processes.iter().any(|p| p.rank == rank) {
                return self.fail_at(at, format!("P{rank} appears twice in the template"));
            }
            self.pos += 1;
            self.expect_symbol(":", &format!("after P{rank}"))?;
            let mut events = Vec::new();
            while let Some(t) = self.peek().filter(|t| t.kind == Kind::Word) {
                events.push(self.template_event(t)?);
            }
            if events.is_empty() {
                return self.expected(&format!(
                    "the events of P{rank} (S<rank>, R<rank> or a collective such as MPI_Bcast(0))"
                ));
            }
            processes.push(TemplateProcess { rank, events });
            if self.eat_symbol(";") {
                continue;
            }
            self.expect_symbol(")", "after the template's events")?;
            return Ok(processes);
        }
    }

    fn template_event(&mut self, t: Token<'_>) -> PResult<TemplateEvent> {
        if let Some(r) = rank_after(t.text, &["S"]) {
            self.pos += 1;
            return Ok(TemplateEvent::Send(r));
        }
        if let Some(r) = rank_after(t.text, &["R"]) {
            self.pos += 1;
            return Ok(TemplateEvent::Receive(r));
        }
        let kind = match Self::target_word(t) {
            Some(Ok(Target::Operation(kind))) if kind.is_collective() => kind,
            _ => {
                return self.fail(format!(
                    "expected a template event (S<rank>, R<rank> or a collective such as \
                     MPI_Bcast(0)), found \"{}\"",
                    t.text
                ))
            }
        };
        self.pos += 1;
        let root = if kind.is_rooted() {
            self.expect_symbol("(", &format!("after {} (its root)", t.text))?;
            let root = self.small_number("the root")?;
            self.expect_symbol(")", "after the root")?;
            Some(root)
        } else {
            None
        };
        Ok(TemplateEvent::Collective(kind, root))
    }

    /// Everything after `SELECT`. `full` allows ORDER BY and LIMIT (not in a view).
    fn select(&mut self, full: bool) -> PResult<Select> {
        self.clock_at = None;
        let select = self.select_clauses(full)?;
        self.check_clock(&select)?;
        Ok(select)
    }

    /// `WITH CLOCK CORRECTION` names the clocks of the wait states a statement reads: it is
    /// refused on one that reads none (a correction that changes nothing would say the
    /// answer depends on it).
    fn check_clock(&self, select: &Select) -> PResult<()> {
        let (Some(at), filter) = (self.clock_at, select.body.filter()) else {
            return Ok(());
        };
        let reads_waits = match &select.body {
            SelectBody::Statistic { statistic, .. } => {
                matches!(statistic, Statistic::WaitStates(_) | Statistic::LateSenders)
            }
            _ => {
                super::exec::uses_wait(filter.predicate.as_ref())
                    || super::exec::orders_by_wait(select)
            }
        };
        if reads_waits {
            return Ok(());
        }
        self.fail_at(
            at,
            "WITH CLOCK CORRECTION sets the clocks wait states are computed on, and this \
             statement reads none: it applies to WAIT STATES, LATE SENDERS and to a selection \
             of operations that reads WAIT (in WHERE or ORDER BY)"
                .to_string(),
        )
    }

    fn select_clauses(&mut self, full: bool) -> PResult<Select> {
        let body = if self.at_aggregate() {
            let mut aggregates = vec![self.aggregate()?];
            while self.eat_symbol(",") {
                if !self.at_aggregate() {
                    return self
                        .expected("an aggregate (COUNT(*), SUM, AVG, MIN, MAX) after \",\"");
                }
                aggregates.push(self.aggregate()?);
            }
            let after = if self.eat_keyword("FROM") {
                "after FROM"
            } else {
                "after the aggregates"
            };
            let target = self.target(after)?;
            self.counters = target.has_counters();
            let mut group_by = Vec::new();
            let filter = self.filter(Grouping::Keys(&mut group_by))?;
            SelectBody::Aggregate {
                aggregates,
                selection: Selection { target, filter },
                group_by,
            }
        } else if let Some(statistic) = self.statistic()? {
            let target = match statistic {
                Statistic::Matrix(_) | Statistic::Histogram { .. } => {
                    if self.eat_keyword("FROM") {
                        Some(self.target("after FROM")?)
                    } else if self.at_target() {
                        Some(self.target("")?)
                    } else {
                        None
                    }
                }
                _ => None,
            };
            // The rows the clauses select: the target's, else operations or messages.
            self.counters = match statistic {
                Statistic::Matrix(_) | Statistic::Histogram { .. } => {
                    target.is_some_and(Target::has_counters)
                }
                Statistic::Statistics | Statistic::WaitStates(_) | Statistic::LateSenders => true,
                Statistic::FanIn | Statistic::FanOut | Statistic::MpiTime => false,
            };
            let mut wait_group = None;
            let filter = if matches!(statistic, Statistic::WaitStates(_)) {
                self.filter(Grouping::Waits(&mut wait_group))?
            } else {
                self.filter(Grouping::None)?
            };
            let statistic = match statistic {
                Statistic::WaitStates(_) => Statistic::WaitStates(wait_group),
                other => other,
            };
            SelectBody::Statistic {
                statistic,
                target,
                filter,
            }
        } else {
            let target = self.target("after SELECT")?;
            self.counters = target.has_counters();
            let filter = self.filter(Grouping::None)?;
            SelectBody::Rows(Selection { target, filter })
        };
        let mut select = Select {
            body,
            order_by: Vec::new(),
            limit: None,
        };
        if !full {
            if self.is_keyword("ORDER") || self.is_keyword("LIMIT") {
                return self.fail("a view cannot have ORDER BY or LIMIT".to_string());
            }
            return Ok(select);
        }
        if self.is_keyword("HAVING") {
            if matches!(select.body, SelectBody::Rows(_)) {
                return self.fail(
                    "HAVING filters a computed result (an aggregate, a statistic or an \
                     analysis); rows are selected with WHERE"
                        .to_string(),
                );
            }
            self.pos += 1;
            self.counters = true;
            self.having = Some(self.result_or("after HAVING")?);
        }
        if self.eat_keyword("ORDER") {
            self.expect_keyword("BY", "after ORDER")?;
            loop {
                select.order_by.push(self.order_key()?);
                if !self.eat_symbol(",") {
                    break;
                }
            }
        }
        if self.eat_keyword("LIMIT") {
            select.limit = Some(self.whole_number("LIMIT")?);
        }
        Ok(select)
    }

    // ---- targets ----------------------------------------------------------------------------

    /// The target a word names, if any: `Err` for a word that looks like an operation but is not.
    fn target_word(t: Token<'_>) -> Option<Result<Target, String>> {
        if t.kind != Kind::Word {
            return None;
        }
        let w = t.text;
        let fixed = [
            ("MESSAGES", Target::Messages),
            ("POINT_TO_POINT_OPERATIONS", Target::PointToPoint),
            ("SENDS", Target::Sends),
            ("RECEIVES", Target::Receives),
            ("COLLECTIVE_OPERATIONS", Target::Collectives),
            ("OPERATIONS", Target::Operations),
            ("BROADCAST", Target::Operation(OpKind::Bcast)),
        ];
        if let Some((_, target)) = fixed.iter().find(|(k, _)| w.eq_ignore_ascii_case(k)) {
            return Some(Ok(*target));
        }
        if w.len() > 4 && w[..4].eq_ignore_ascii_case("MPI_") {
            return Some(match OpKind::from_mpi_name(&format!("MPI_{}", &w[4..])) {
                Some(k) => Ok(Target::Operation(k)),
                None => Err(format!("unknown MPI operation \"{w}\"")),
            });
        }
        match OpKind::from_mpi_name(w) {
            Some(k) if k.is_collective() => Some(Ok(Target::Operation(k))),
            Some(k) => Some(Err(format!(
                "\"{w}\" is not a target; write {} for that operation",
                k.mpi_name().unwrap_or("its MPI name")
            ))),
            None => None,
        }
    }

    fn at_target(&self) -> bool {
        let at = usize::from(self.is_keyword("ALL"));
        self.cpu_bursts_at(at)
            || self.record_target_at(at).is_some()
            || self.peek_at(at).and_then(Self::target_word).is_some()
    }

    /// The record target (`ROUTINE CALLS`, `REQUESTS`, `COLLECTIVE INSTANCES`, `ANOMALIES`,
    /// as the catalog spells them) that starts `n` tokens ahead, with its length in words.
    fn record_target_at(&self, n: usize) -> Option<(Target, usize)> {
        super::catalog::RECORD_TARGETS
            .iter()
            .find(|(words, _)| {
                words
                    .iter()
                    .enumerate()
                    .all(|(i, w)| self.peek_at(n + i).is_some_and(|t| t.is_keyword(w)))
            })
            .map(|(words, target)| (*target, words.len()))
    }

    /// Whether `CPU BURSTS` starts `n` tokens ahead.
    fn cpu_bursts_at(&self, n: usize) -> bool {
        self.peek_at(n).is_some_and(|t| t.is_keyword("CPU"))
            && self.peek_at(n + 1).is_some_and(|t| t.is_keyword("BURSTS"))
    }

    fn target(&mut self, after: &str) -> PResult<Target> {
        let all = self.eat_keyword("ALL");
        if self.cpu_bursts_at(0) {
            self.pos += 2;
            return Ok(Target::CpuBursts);
        }
        if let Some((target, words)) = self.record_target_at(0) {
            self.pos += words;
            return Ok(target);
        }
        match self.peek().and_then(Self::target_word) {
            Some(Ok(t)) => {
                self.pos += 1;
                Ok(t)
            }
            Some(Err(message)) => self.fail(message),
            None if all => self.expected(&format!("what to select after ALL ({TARGET_HELP})")),
            None if after.is_empty() => self.expected(&format!("what to select ({TARGET_HELP})")),
            None => self.expected(&format!("what to select {after} ({TARGET_HELP})")),
        }
    }

    // ---- aggregates -------------------------------------------------------------------------

    fn at_aggregate(&self) -> bool {
        ["COUNT", "SUM", "AVG", "MIN", "MAX"]
            .iter()
            .any(|k| self.is_keyword(k))
            && self.peek_at(1).is_some_and(|t| t.is_symbol("("))
    }

    fn aggregate(&mut self) -> PResult<Aggregate> {
        let name = self.bump().text.to_ascii_uppercase();
        self.bump(); // "("
        let agg = if name == "COUNT" {
            if !self.eat_symbol("*") {
                return self.fail(format!("COUNT takes *: COUNT(*), found {}", self.found()));
            }
            Aggregate::Count
        } else {
            let measure = match self.measure() {
                Some(m) => m,
                None => match self.counter()? {
                    Some(name) => Measure::Counter(name),
                    None => {
                        return self.fail(format!(
                            "{name} needs SIZE, DURATION, SENT, RECEIVED or a counter of the \
                             trace (SELECT METRICS lists them), found {}",
                            self.found()
                        ))
                    }
                },
            };
            match name.as_str() {
                "SUM" => Aggregate::Sum(measure),
                "AVG" => Aggregate::Avg(measure),
                "MIN" => Aggregate::Min(measure),
                _ => Aggregate::Max(measure),
            }
        };
        self.expect_symbol(")", &format!("to close {name}("))?;
        Ok(agg)
    }

    /// What an aggregate measures, consumed: `SIZE`, `DURATION`, `SENT` or `RECEIVED`.
    fn measure(&mut self) -> Option<Measure> {
        let m = [
            ("SIZE", Measure::Size),
            ("DURATION", Measure::Duration),
            ("SENT", Measure::Sent),
            ("RECEIVED", Measure::Received),
        ]
        .into_iter()
        .find(|(k, _)| self.is_keyword(k))?
        .1;
        self.pos += 1;
        Some(m)
    }

    /// A counter's name, consumed: a word that is no field nor measure of the language, or a
    /// quoted name (`'perf::CYCLES'`); checked against the trace's counters when the
    /// statement runs.
    fn counter(&mut self) -> PResult<Option<CounterName>> {
        let Some(t) = self.peek().filter(|t| {
            t.kind == Kind::Quoted
                || (t.kind == Kind::Word && !NOT_COUNTERS.iter().any(|k| t.is_keyword(k)))
        }) else {
            return Ok(None);
        };
        let (text, at) = (t.text, t.start);
        let Some(name) = CounterName::new(text) else {
            return self.fail_at(
                at,
                format!(
                    "a counter name has at most {} bytes, {text:?} has {}",
                    CounterName::MAX,
                    text.len()
                ),
            );
        };
        self.pos += 1;
        Ok(Some(name))
    }

    // ---- statistics -------------------------------------------------------------------------

    fn statistic(&mut self) -> PResult<Option<Statistic>> {
        let stat = if self.eat_keyword("FAN_IN") || self.eat_keyword("FAN-IN") {
            Statistic::FanIn
        } else if self.eat_keyword("FAN_OUT") || self.eat_keyword("FAN-OUT") {
            Statistic::FanOut
        } else if self.eat_keyword("STATISTICS") {
            Statistic::Statistics
        } else if self.eat_keyword("COMMUNICATION") {
            self.expect_keyword("MATRIX", "after COMMUNICATION")?;
            let mut measure = MatrixMeasure::Bytes;
            if self.eat_keyword("OF") {
                if self.eat_keyword("BYTES") {
                    measure = MatrixMeasure::Bytes;
                } else if self.eat_keyword("COUNT") {
                    measure = MatrixMeasure::Count;
                } else {
                    return self.expected("BYTES or COUNT after COMMUNICATION MATRIX OF");
                }
            }
            Statistic::Matrix(measure)
        } else if self.eat_keyword("HISTOGRAM") {
            self.expect_keyword("OF", "after HISTOGRAM")?;
            let Some(of) = self.measure() else {
                return self.expected("SIZE, DURATION, SENT or RECEIVED after HISTOGRAM OF");
            };
            let bins = if self.eat_keyword("LOG2") {
                Bins::Log2
            } else if self.eat_keyword("BINS") {
                let at = self.here();
                let n = self.small_number("BINS")?;
                if n == 0 {
                    return self.fail_at(at, "BINS needs at least 1 bin, found 0".to_string());
                }
                if n > MAX_BINS {
                    return self.beyond(
                        at,
                        Limit::HistogramBins,
                        format!("a histogram has at most {MAX_BINS} bins, BINS asks for {n}"),
                    );
                }
                Bins::Count(n)
            } else {
                Bins::Log2
            };
            Statistic::Histogram { of, bins }
        } else if self.is_keyword("MPI") && self.peek_at(1).is_some_and(|t| t.is_keyword("TIME")) {
            self.pos += 2;
            Statistic::MpiTime
        } else if self.is_keyword("WAIT") && self.peek_at(1).is_some_and(|t| t.is_keyword("STATES"))
        {
            self.pos += 2;
            Statistic::WaitStates(None)
        } else if self.eat_keyword("LATE") {
            self.expect_keyword("SENDERS", "after LATE")?;
            Statistic::LateSenders
        } else {
            return Ok(None);
        };
        Ok(Some(stat))
    }

    // ---- clauses ----------------------------------------------------------------------------

    /// Scope, `IN`, time window and `WHERE` in any order (and `GROUP BY` where `grouping`
    /// takes one), each at most once except `IN`.
    fn filter(&mut self, mut grouping: Grouping<'_>) -> PResult<Filter> {
        let mut filter = Filter::default();
        loop {
            let at = self.here();
            if self.is_keyword("BETWEEN") {
                let next = self.peek_at(1);
                if next.is_some_and(|t| t.is_keyword("TIME")) {
                    if filter.time.is_some() {
                        return self.fail("only one time window may be given".to_string());
                    }
                    self.pos += 2;
                    filter.time = Some(self.time_window()?);
                } else if next.is_some_and(|t| t.is_keyword("PROCESS") || t.is_keyword("PROCESSES"))
                {
                    self.no_second_scope(&filter)?;
                    self.pos += 1;
                    filter.scope = Some(self.between()?);
                } else {
                    self.pos += 1;
                    return self.expected("PROCESS(a,b) or TIME after BETWEEN");
                }
            } else if self.is_keyword("AMONG") || self.is_keyword("FOR") {
                self.no_second_scope(&filter)?;
                let kw = self.bump().text.to_ascii_uppercase();
                let selector = self.selector(&kw)?;
                filter.scope = Some(if kw == "FOR" {
                    Scope::For(selector)
                } else {
                    Scope::Among(selector)
                });
            } else if self.eat_keyword("IN") {
                filter.within.push(self.within()?);
            } else if self.is_keyword("WHERE") {
                if filter.predicate.is_some() {
                    return self.fail(
                        "only one WHERE may be given; join conditions with AND or OR".into(),
                    );
                }
                self.pos += 1;
                filter.predicate = Some(self.or_expr("after WHERE")?);
            } else if self.is_keyword("WITH") {
                if self.clock_at.is_some() {
                    return self.fail("only one WITH may be given".to_string());
                }
                self.clock_at = Some(at);
                let mut clock = ClockCorrection::None;
                self.with_list(&["CLOCK"], "CLOCK CORRECTION after WITH", |p, _, _| {
                    clock = p.clock_correction()?;
                    Ok(())
                })?;
                filter.clock = clock;
            } else if self.is_keyword("GROUP") {
                match &mut grouping {
                    Grouping::None => return self.fail(
                        "GROUP BY needs aggregates: SELECT COUNT(*), SUM(SIZE) FROM … GROUP BY …"
                            .to_string(),
                    ),
                    Grouping::Keys(keys) if !keys.is_empty() => {
                        return self.fail("only one GROUP BY may be given".to_string())
                    }
                    Grouping::Waits(Some(_)) => {
                        return self.fail("only one GROUP BY may be given".to_string())
                    }
                    Grouping::Keys(keys) => {
                        self.pos += 1;
                        self.expect_keyword("BY", "after GROUP")?;
                        loop {
                            keys.push(self.group_key()?);
                            if !self.eat_symbol(",") {
                                break;
                            }
                        }
                    }
                    Grouping::Waits(by) => {
                        self.pos += 1;
                        self.expect_keyword("BY", "after GROUP")?;
                        **by = Some(self.wait_group()?);
                    }
                }
            } else {
                return Ok(filter);
            }
            debug_assert!(self.here() > at || self.peek().is_none());
        }
    }

    fn no_second_scope(&self, filter: &Filter) -> PResult<()> {
        if filter.scope.is_some() {
            return self.fail(format!(
                "a query takes one scope (BETWEEN PROCESS, AMONG or FOR), found a second: {}",
                self.found()
            ));
        }
        Ok(())
    }

    /// One of `choices`' keywords, consumed, as its value; else `expected {what}`.
    fn keyword_of<T: Copy>(&mut self, choices: &[(&str, T)], what: &str) -> PResult<T> {
        match choices.iter().find(|(k, _)| self.is_keyword(k)) {
            Some((_, v)) => {
                self.pos += 1;
                Ok(*v)
            }
            None => self.expected(what),
        }
    }

    fn group_key(&mut self) -> PResult<GroupKey> {
        self.keyword_of(
            &[
                ("PROCESS", GroupKey::Process),
                ("PEER", GroupKey::Peer),
                ("OPERATION", GroupKey::Operation),
                ("TAG", GroupKey::Tag),
                ("COMM", GroupKey::Comm),
                ("ROUTINE", GroupKey::Routine),
                ("CLASS", GroupKey::Class),
            ],
            "PROCESS, PEER, OPERATION, TAG, COMM, ROUTINE or CLASS after GROUP BY",
        )
    }

    fn wait_group(&mut self) -> PResult<WaitGroup> {
        self.keyword_of(
            &[
                ("PROCESS", WaitGroup::Process),
                ("OPERATION", WaitGroup::Operation),
                ("ROUTINE", WaitGroup::Routine),
                ("PHASE", WaitGroup::Phase),
            ],
            "PROCESS, OPERATION, ROUTINE or PHASE after WAIT STATES GROUP BY",
        )
    }

    fn order_key(&mut self) -> PResult<OrderKey> {
        let column = if self.at_aggregate() {
            OrderColumn::Aggregate(self.aggregate()?)
        } else {
            match self.peek() {
                Some(t) if t.kind == Kind::Number => {
                    let at = self.here();
                    let n = self.small_number("a column position")?;
                    if n == 0 {
                        return self.fail_at(at, "column positions count from 1".to_string());
                    }
                    OrderColumn::Position(n)
                }
                Some(t) if matches!(t.kind, Kind::Word | Kind::Quoted) => {
                    self.pos += 1;
                    OrderColumn::Name(t.text.to_ascii_lowercase())
                }
                _ => return self.expected("a column to order by"),
            }
        };
        let descending = if self.eat_keyword("DESC") {
            true
        } else {
            self.eat_keyword("ASC");
            false
        };
        Ok(OrderKey { column, descending })
    }

    // ---- processes and communicators --------------------------------------------------------

    fn selector(&mut self, after: &str) -> PResult<ProcessSelector> {
        if self.is_keyword("PROCESS") {
            let kw = "PROCESS";
            self.pos += 1;
            self.expect_symbol("(", "after PROCESS")?;
            let ranges = self.rank_list(kw)?;
            Ok(match ranges.as_slice() {
                [r] if r.first == r.last => ProcessSelector::Process(r.first),
                _ => ProcessSelector::List(ranges),
            })
        } else if self.eat_keyword("PROCESSES") {
            if self.eat_symbol("(") {
                Ok(ProcessSelector::List(self.rank_list("PROCESSES")?))
            } else if self.eat_keyword("IN") {
                if !self.is_keyword("COMM") {
                    return self.expected("COMM(…) after PROCESSES IN");
                }
                Ok(ProcessSelector::InComm(self.comm()?))
            } else {
                self.expected("\"(\" or IN COMM(…) after PROCESSES")
            }
        } else if self.eat_keyword("ALL") {
            self.expect_keyword("PROCESSES", "after ALL")?;
            Ok(ProcessSelector::All)
        } else {
            self.expected(&format!("a process selector after {after}"))
        }
    }

    fn rank(&mut self, opener: &str) -> PResult<u32> {
        match self.peek() {
            Some(t) if t.kind == Kind::Number && t.text.contains('.') => self.fail(format!(
                "a process rank is a whole number, found \"{}\"",
                t.text
            )),
            Some(t) if t.kind == Kind::Number => match t.text.parse::<u32>() {
                Ok(n) => {
                    self.pos += 1;
                    Ok(n)
                }
                Err(_) => self.fail(format!("process rank too large: \"{}\"", t.text)),
            },
            _ => self.expected(&format!("a process rank (a whole number) in {opener}(")),
        }
    }

    /// `a[-b] {, a[-b]} )`, after the opening parenthesis.
    fn rank_list(&mut self, opener: &str) -> PResult<Vec<RankRange>> {
        let mut ranges = Vec::new();
        loop {
            let at = self.here();
            let first = self.rank(opener)?;
            let mut last = first;
            if self.eat_symbol("-") {
                last = self.rank(opener)?;
                if last < first {
                    return self
                        .fail_at(at, format!("a range must go up: {opener}({first}-{last})"));
                }
            }
            ranges.push(RankRange { first, last });
            if !self.eat_symbol(",") {
                break;
            }
        }
        self.expect_symbol(")", &format!("to close {opener}("))?;
        Ok(ranges)
    }

    /// `PROCESS(a,b)` after BETWEEN (also `PROCESSES(a,b)`).
    fn between(&mut self) -> PResult<Scope> {
        let kw = self.bump().text.to_ascii_uppercase();
        self.expect_symbol("(", &format!("after {kw}"))?;
        let a = self.rank(&kw)?;
        if !self.eat_symbol(",") {
            return self.expected(&format!("\",\" and a second process: BETWEEN {kw}(a,b)"));
        }
        let b = self.rank(&kw)?;
        self.expect_symbol(")", &format!("to close {kw}("))?;
        Ok(Scope::Between(a, b))
    }

    /// `COMM(x)`.
    fn comm(&mut self) -> PResult<CommRef> {
        self.expect_keyword("COMM", "")?;
        self.expect_symbol("(", "after COMM")?;
        let comm = self.comm_value("in COMM(")?;
        self.expect_symbol(")", "to close COMM(")?;
        Ok(comm)
    }

    /// A communicator's name, id, or `WORLD`.
    fn comm_value(&mut self, context: &str) -> PResult<CommRef> {
        match self.peek() {
            Some(t) if t.kind == Kind::Word => {
                self.pos += 1;
                Ok(
                    if t.text.eq_ignore_ascii_case("WORLD")
                        || t.text.eq_ignore_ascii_case("MPI_COMM_WORLD")
                    {
                        CommRef::World
                    } else {
                        CommRef::Name(t.text.to_string())
                    },
                )
            }
            Some(t) if t.kind == Kind::Quoted => {
                self.pos += 1;
                Ok(CommRef::Name(t.text.to_string()))
            }
            Some(t) if t.kind == Kind::Number => {
                Ok(CommRef::Id(self.small_number("a communicator id")?))
            }
            _ => self.expected(&format!("a communicator name or number {context}")),
        }
    }

    fn within(&mut self) -> PResult<Within> {
        if self.is_keyword("COMM") {
            Ok(Within::Comm(self.comm()?))
        } else if self.eat_keyword("VIEW") {
            Ok(Within::View(self.name("a view name after IN VIEW")?))
        } else if self.eat_keyword("PHASE") {
            Ok(Within::Phase(self.small_number("PHASE")?))
        } else if self.eat_keyword("PATTERN") {
            Ok(Within::Pattern(self.small_number("PATTERN")?))
        } else {
            self.expected("COMM(…), VIEW, PHASE or PATTERN after IN")
        }
    }

    // ---- numbers with units -----------------------------------------------------------------

    /// A number and its optional unit, in base units (bytes or nanoseconds); `after` says where
    /// it was expected, for messages. `None` for a whole number past 2^128 - 1; with the
    /// number's token and its text with its unit, for messages.
    fn quantity(
        &mut self,
        dim: Dimension,
        after: &str,
    ) -> PResult<(Option<u128>, Token<'a>, String)> {
        let Some(num) = self.peek().filter(|t| t.kind == Kind::Number) else {
            return self.expected(&format!("{} {after}", dim.what()));
        };
        self.pos += 1;
        let mut scale = dim.default_scale();
        let mut shown = num.text.to_string();
        if let Some(t) = self.peek().filter(|t| is_unit_candidate(num, *t)) {
            let Some((unit, s)) = dim.units().iter().find(|(u, _)| *u == t.text) else {
                return self.fail(format!(
                    "unknown {} \"{}\" ({})",
                    dim.unit_word(),
                    t.text,
                    dim.unit_help()
                ));
            };
            scale = *s;
            shown = format!("{} {unit}", num.text);
            self.pos += 1;
        }
        match scaled_wide(num.text, scale) {
            Ok(v) => Ok((v, num, shown)),
            Err(()) => self.fail_at(
                num.start,
                format!(
                    "{} is not a whole number of {}: \"{shown}\"",
                    dim.what(),
                    dim.base()
                ),
            ),
        }
    }

    /// A `WHERE` constant: an optional `-`, a number and, for sizes and durations, its unit;
    /// in base units. Any magnitude is kept exactly up to ±(2^127 - 1) and clamped there
    /// beyond, which compares the same with every column.
    fn constant(&mut self, field: Field, after: &str) -> PResult<i128> {
        let negative =
            self.is_symbol("-") && self.peek_at(1).is_some_and(|t| t.kind == Kind::Number);
        if negative {
            self.pos += 1;
        }
        let magnitude = match field {
            Field::Size | Field::Sent | Field::Received => self.quantity(Dimension::Size, after)?.0,
            Field::Duration | Field::Wait | Field::Skew => self.quantity(Dimension::Time, after)?.0,
            _ => {
                let num = match self.peek() {
                    Some(t) if t.kind == Kind::Number && !t.text.contains('.') => t,
                    _ => {
                        return self.fail(format!(
                            "{field} needs a whole number, found {}",
                            self.found()
                        ))
                    }
                };
                self.pos += 1;
                if let Some(t) = self.peek().filter(|t| is_unit_candidate(num, *t)) {
                    return self.fail(format!(
                        "{field} takes a plain number, found unit \"{}\"",
                        t.text
                    ));
                }
                scaled_wide(num.text, 1).ok().flatten()
            }
        };
        let clamped = magnitude.map_or(i128::MAX, |m| i128::try_from(m).unwrap_or(i128::MAX));
        Ok(if negative { -clamped } else { clamped })
    }

    /// A point in time (of a time window): nanoseconds that fit 64 bits.
    fn time(&mut self, after: &str) -> PResult<u64> {
        let (v, num, shown) = self.quantity(Dimension::Time, after)?;
        match v.and_then(|v| u64::try_from(v).ok()) {
            Some(v) => Ok(v),
            None => self.fail_at(num.start, format!("number too large: \"{shown}\"")),
        }
    }

    /// After `BETWEEN TIME`: `a AND b` or `(a, b)`.
    fn time_window(&mut self) -> PResult<TimeWindow> {
        let at = self.here();
        let (start, end) = if self.eat_symbol("(") {
            let start = self.time("after BETWEEN TIME(")?;
            self.expect_symbol(",", "between the two times")?;
            let end = self.time("after \",\"")?;
            self.expect_symbol(")", "to close TIME(")?;
            (start, end)
        } else {
            let start = self.time("after BETWEEN TIME")?;
            self.expect_keyword("AND", "between the two times")?;
            let end = self.time("after AND")?;
            (start, end)
        };
        if end < start {
            return self.fail_at(
                at,
                format!(
                    "a time window must go forward: {} is after {}",
                    TimeText(start),
                    TimeText(end)
                ),
            );
        }
        Ok(TimeWindow { start, end })
    }

    // ---- predicates -------------------------------------------------------------------------

    fn or_expr(&mut self, after: &str) -> PResult<Expr> {
        let first = self.and_expr(after)?;
        if !self.is_keyword("OR") {
            return Ok(first);
        }
        let mut items = vec![first];
        while self.eat_keyword("OR") {
            items.push(self.and_expr("after OR")?);
        }
        Ok(Expr::Or(items))
    }

    fn and_expr(&mut self, after: &str) -> PResult<Expr> {
        let first = self.unary(after)?;
        if !self.is_keyword("AND") {
            return Ok(first);
        }
        let mut items = vec![first];
        while self.eat_keyword("AND") {
            items.push(self.unary("after AND")?);
        }
        Ok(Expr::And(items))
    }

    fn unary(&mut self, after: &str) -> PResult<Expr> {
        // `NOT`s in a row are read in a loop, so that the limit, not the stack, stops them.
        let mut nots = Vec::new();
        while self.is_keyword("NOT") {
            nots.push(self.here());
            self.nest()?;
            self.pos += 1;
        }
        let inner = if self.is_symbol("(") {
            self.nest()?;
            self.pos += 1;
            let e = self.or_expr("after \"(\"");
            self.depth -= 1;
            let e = e?;
            self.expect_symbol(")", "to close \"(\"")?;
            e
        } else {
            let after = if nots.is_empty() { after } else { "after NOT" };
            Expr::Compare(self.comparison(after)?)
        };
        self.depth -= nots.len();
        Ok(nots.iter().fold(inner, |e, _| Expr::Not(Box::new(e))))
    }

    /// Enters one more level of `(` or `NOT`, refusing to go past [`MAX_NESTING`].
    fn nest(&mut self) -> PResult<()> {
        if self.depth >= MAX_NESTING {
            let at = self.here();
            return self.beyond(
                at,
                Limit::NestingDepth,
                format!(
                    "a condition nests at most {MAX_NESTING} levels of parentheses and NOT; \
                     this one goes deeper"
                ),
            );
        }
        self.depth += 1;
        Ok(())
    }

    fn comparison(&mut self, after: &str) -> PResult<Comparison> {
        let field = [
            ("SIZE", Field::Size),
            ("TAG", Field::Tag),
            ("SENDER", Field::Sender),
            ("RECEIVER", Field::Receiver),
            ("DURATION", Field::Duration),
            ("PEER", Field::Peer),
            ("ROOT", Field::Root),
            ("COMM", Field::Comm),
            ("WAIT", Field::Wait),
            ("SENT", Field::Sent),
            ("RECEIVED", Field::Received),
            ("DEPTH", Field::Depth),
            ("MEMBERS", Field::Members),
            ("SKEW", Field::Skew),
        ]
        .into_iter()
        .find(|(k, _)| self.is_keyword(k));
        let field = match field {
            Some((_, field)) => {
                self.pos += 1;
                field
            }
            None => match self.counters {
                true => match self.counter()? {
                    Some(name) => Field::Counter(name),
                    None => {
                        return self.expected(&format!(
                            "a condition {after} (on SIZE, SENT, RECEIVED, TAG, SENDER, RECEIVER, \
                             DURATION, PEER, ROOT, COMM, WAIT, DEPTH, MEMBERS, SKEW or a counter \
                             of the trace)"
                        ))
                    }
                },
                false => {
                    return self.expected(&format!(
                        "a condition {after} (on SIZE, SENT, RECEIVED, TAG, SENDER, RECEIVER, \
                         DURATION, PEER, ROOT, COMM, WAIT, DEPTH, MEMBERS or SKEW)"
                    ))
                }
            },
        };
        let op = match self
            .peek()
            .filter(|t| t.kind == Kind::Symbol)
            .map(|t| t.text)
        {
            Some("<") => CmpOp::Lt,
            Some("<=") => CmpOp::Le,
            Some("=") => CmpOp::Eq,
            Some("!=") | Some("<>") => CmpOp::Ne,
            Some(">=") => CmpOp::Ge,
            Some(">") => CmpOp::Gt,
            _ => {
                return self.expected(&format!("a comparison (<, <=, =, !=, >=, >) after {field}"))
            }
        };
        let op_token = self.bump();
        let op_text = op_token.text;
        let after_op = format!("after {field} {op_text}");
        let value = match field {
            Field::Comm => {
                if !matches!(op, CmpOp::Eq | CmpOp::Ne) {
                    return self.fail_at(
                        op_token.start,
                        "COMM can only be compared with = or !=".to_string(),
                    );
                }
                Value::Comm(self.comm_value(&after_op)?)
            }
            _ => Value::Number(self.constant(field, &after_op)?),
        };
        Ok(Comparison { field, op, value })
    }
}

/// Words read as a unit after a number even when a space separates them, so that a wrong unit
/// is reported as one (`SIZE > 10 kb`). Any word written right after a number (`10kb`) is a
/// unit too.
const UNIT_LIKE: &[&str] = &[
    "b", "byte", "bytes", "k", "kb", "kib", "m", "mb", "mib", "g", "gb", "gib", "t", "tb", "tib",
    "ns", "us", "ms", "s", "sec", "secs", "second", "seconds", "nsec", "usec", "msec", "min",
    "mins", "minute", "minutes", "h", "hr", "hour", "hours",
];

/// True when the word `t` after the number `num` is meant as the number's unit.
fn is_unit_candidate(num: Token<'_>, t: Token<'_>) -> bool {
    t.kind == Kind::Word
        && !CLAUSE_WORDS.iter().any(|k| t.is_keyword(k))
        && (t.start == num.end || UNIT_LIKE.iter().any(|u| t.text.eq_ignore_ascii_case(u)))
}

/// What a number with a unit measures.
#[derive(Clone, Copy)]
enum Dimension {
    /// Bytes; a plain number is bytes.
    Size,
    /// Nanoseconds; a plain number is seconds.
    Time,
}

impl Dimension {
    fn units(self) -> &'static [(&'static str, u64)] {
        match self {
            Dimension::Size => SIZE_UNITS,
            Dimension::Time => TIME_UNITS,
        }
    }

    fn default_scale(self) -> u64 {
        match self {
            Dimension::Size => 1,
            Dimension::Time => 1_000_000_000,
        }
    }

    fn what(self) -> &'static str {
        match self {
            Dimension::Size => "a size",
            Dimension::Time => "a time",
        }
    }

    fn base(self) -> &'static str {
        match self {
            Dimension::Size => "bytes",
            Dimension::Time => "nanoseconds",
        }
    }

    fn unit_word(self) -> &'static str {
        match self {
            Dimension::Size => "unit",
            Dimension::Time => "time unit",
        }
    }

    fn unit_help(self) -> &'static str {
        match self {
            Dimension::Size => "use B, KiB, MiB, GiB, KB, MB, GB",
            Dimension::Time => "use ns, us, ms, s",
        }
    }
}

/// A point in time as the query language writes one in `BETWEEN TIME`, for callers outside a
/// statement (`export --from 1.5ms`): a decimal number of seconds, or a number with one of the
/// units ns, us, ms, s (`1.5ms`, `200 us`); in nanoseconds. The error says why the text is not
/// one (no number, an unknown unit, not a whole number of nanoseconds, past 2^64 - 1 ns).
pub(crate) fn time_in_ns(text: &str) -> std::result::Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = (&text[..split], text[split..].trim_start());
    let digits = number
        .split_once('.')
        .map_or(number.len(), |(a, b)| a.len() + b.len());
    if digits == 0 || number.matches('.').count() > 1 {
        return Err(format!(
            "{text:?} is not a time: write seconds (1.5) or a number with a unit (1.5ms; {})",
            Dimension::Time.unit_help()
        ));
    }
    let scale = if unit.is_empty() {
        Dimension::Time.default_scale()
    } else {
        match TIME_UNITS.iter().find(|(u, _)| *u == unit) {
            Some((_, s)) => *s,
            None => {
                return Err(format!(
                    "unknown time unit {unit:?} in {text:?} ({})",
                    Dimension::Time.unit_help()
                ))
            }
        }
    };
    // `.5` is half a second, as `0.5`.
    let number = format!("0{number}");
    match scaled(&number, scale) {
        Some(Ok(ns)) => Ok(ns),
        Some(Err(())) => Err(format!("{text:?} is not a whole number of nanoseconds")),
        None => Err(format!("{text:?} is too large a time (past 2^64 - 1 ns)")),
    }
}

/// `text` (digits with an optional fraction) times `scale`: `None` on overflow, `Some(Err)` when
/// the result is not a whole number.
fn scaled(text: &str, scale: u64) -> Option<Result<u64, ()>> {
    match scaled_wide(text, scale) {
        Err(()) => Some(Err(())),
        Ok(v) => v.and_then(|v| u64::try_from(v).ok()).map(Ok),
    }
}

/// `text` (digits with an optional fraction) times `scale`, in 128 bits: `Ok(None)` past
/// 2^128 - 1, `Err` when the result is not a whole number.
fn scaled_wide(text: &str, scale: u64) -> Result<Option<u128>, ()> {
    let (int, frac) = text.split_once('.').unwrap_or((text, ""));
    let frac = frac.trim_end_matches('0');
    let Some(whole) = int
        .parse::<u128>()
        .ok()
        .and_then(|i| i.checked_mul(u128::from(scale)))
    else {
        // Only digits reach here: the number is past 128 bits, whatever its fraction.
        return Ok(None);
    };
    if frac.is_empty() {
        return Ok(Some(whole));
    }
    if frac.len() > 30 {
        return Err(());
    }
    let digits: u128 = frac.parse().map_err(|_| ())?;
    let denom = 10u128.pow(frac.len() as u32);
    let num = digits.checked_mul(u128::from(scale)).ok_or(())?;
    if num % denom != 0 {
        return Err(());
    }
    Ok(whole.checked_add(num / denom))
}

// ---- the relational tail ----------------------------------------------------------------------

impl Parser<'_> {
    /// After a statement that computes its result whole: `[WHERE …] [ORDER BY …] [LIMIT n]`
    /// over the result's columns, which makes it a [`Statement::Relation`]; the statement
    /// itself when none follows.
    fn with_tail(&mut self, source: Statement) -> PResult<Statement> {
        let tail = self.tail(None)?;
        Ok(if tail.is_empty() {
            source
        } else {
            Statement::Relation(Box::new(source), tail)
        })
    }

    /// A statistic or aggregate read with `HAVING` (kept aside by `select_clauses`) as a
    /// relation: its `ORDER BY` and `LIMIT` move to the tail, after the `HAVING`.
    fn with_having(&mut self, source: Statement) -> Statement {
        let Some(having) = self.having.take() else {
            return source;
        };
        let take = |s: &mut Select| Tail {
            having: Some(having),
            order_by: std::mem::take(&mut s.order_by),
            limit: s.limit.take(),
            ..Tail::default()
        };
        match source {
            Statement::Select(mut s) => {
                let tail = take(&mut s);
                Statement::Relation(Box::new(Statement::Select(s)), tail)
            }
            Statement::Explain(mut s) => {
                let tail = take(&mut s);
                Statement::Relation(Box::new(Statement::Explain(s)), tail)
            }
            Statement::ExplainAnalyze(mut s) => {
                let tail = take(&mut s);
                Statement::Relation(Box::new(Statement::ExplainAnalyze(s)), tail)
            }
            other => other,
        }
    }

    /// `SELECT COUNT(*), SUM(col) FROM <analysis> [WHERE …] [GROUP BY col, …] [HAVING …]
    /// [ORDER BY …] [LIMIT n]` at a `SELECT`; `None`, nothing consumed, when the aggregates
    /// are not followed by `FROM` and an analysis (an aggregate of stored rows).
    fn aggregates_of_analysis(&mut self, explain: bool) -> PResult<Option<Statement>> {
        let start = self.pos;
        if !(self.peek_at(1).is_some_and(|t| {
            ["COUNT", "SUM", "AVG", "MIN", "MAX"]
                .iter()
                .any(|k| t.is_keyword(k))
        }) && self.peek_at(2).is_some_and(|t| t.is_symbol("(")))
        {
            return Ok(None);
        }
        self.pos += 1;
        let mut aggregates = Vec::new();
        loop {
            match self.result_aggregate() {
                Some(a) => aggregates.push(a),
                None => {
                    self.pos = start;
                    return Ok(None);
                }
            }
            if !self.eat_symbol(",") {
                break;
            }
        }
        // `analysis_select` reads the word after the token it starts on: here, `FROM`.
        if !self.is_keyword("FROM") {
            self.pos = start;
            return Ok(None);
        }
        let analysis = if self.peek_at(1).is_some_and(|t| t.is_keyword("SIMULATE")) {
            self.pos += 2;
            self.simulate()?
        } else {
            match self.analysis_select()? {
                Some(analysis) => analysis,
                None => {
                    self.pos = start;
                    return Ok(None);
                }
            }
        };
        let tail = self.tail(Some(aggregates))?;
        let source = if explain {
            Statement::ExplainAnalysis(analysis)
        } else {
            Statement::Analysis(analysis)
        };
        Ok(Some(Statement::Relation(Box::new(source), tail)))
    }

    /// After `SIMULATE`: its network and `AS TRACE name`.
    fn simulate(&mut self) -> PResult<Analysis> {
        let change = self.network()?;
        let at = self.here();
        let as_trace = if self.eat_keyword("AS") {
            self.expect_keyword("TRACE", "after SIMULATE … AS")?;
            Some(self.name("a trace name after AS TRACE")?)
        } else {
            None
        };
        if change.is_relative() {
            if as_trace.is_some() {
                return self.fail_at(
                    at,
                    "AS TRACE stores a replay on a network given in absolute values; \
                     SELECT NETWORK MODEL gives the fitted one to start from"
                        .to_string(),
                );
            }
            return Ok(Analysis::WhatIf { change });
        }
        Ok(Analysis::Simulate {
            network: change.apply(&NetworkModel::default()),
            as_trace,
        })
    }

    /// `COUNT(*)`, `SUM(col)`, … over a result's column; `None` when the tokens are not one.
    fn result_aggregate(&mut self) -> Option<ResultAggregate> {
        let name = self.peek()?.text.to_ascii_uppercase();
        if !self.peek_at(1)?.is_symbol("(") {
            return None;
        }
        let arg = self.peek_at(2)?;
        if !self.peek_at(3)?.is_symbol(")") {
            return None;
        }
        let column = match arg.kind {
            Kind::Word | Kind::Quoted => arg.text.to_ascii_lowercase(),
            _ => String::new(),
        };
        let a = match name.as_str() {
            "COUNT" if arg.is_symbol("*") => ResultAggregate::Count,
            _ if column.is_empty() => return None,
            "SUM" => ResultAggregate::Sum(column),
            "AVG" => ResultAggregate::Avg(column),
            "MIN" => ResultAggregate::Min(column),
            "MAX" => ResultAggregate::Max(column),
            _ => return None,
        };
        self.pos += 4;
        Some(a)
    }

    /// The tail's clauses; `GROUP BY` and `HAVING` only with `aggregates`.
    fn tail(&mut self, aggregates: Option<Vec<ResultAggregate>>) -> PResult<Tail> {
        let mut tail = Tail::default();
        // `ORDER BY SUM(col)` reads `col` as a counter's name would be read.
        self.counters = true;
        if self.eat_keyword("WHERE") {
            tail.filter = Some(self.result_or("after WHERE")?);
        }
        match aggregates {
            Some(aggregates) => {
                let mut keys = Vec::new();
                if self.eat_keyword("GROUP") {
                    self.expect_keyword("BY", "after GROUP")?;
                    loop {
                        keys.push(self.result_column("a column of the result after GROUP BY")?);
                        if !self.eat_symbol(",") {
                            break;
                        }
                    }
                }
                tail.group = Some(ResultGroup { aggregates, keys });
                if self.eat_keyword("HAVING") {
                    tail.having = Some(self.result_or("after HAVING")?);
                }
            }
            None if self.is_keyword("GROUP") => {
                return self.fail(
                    "GROUP BY over an analysis's result needs aggregates: SELECT COUNT(*), \
                     SUM(column) FROM <analysis> GROUP BY column"
                        .to_string(),
                )
            }
            None if self.is_keyword("HAVING") => {
                return self.fail(
                    "HAVING filters groups: SELECT COUNT(*) FROM <analysis> GROUP BY column \
                     HAVING …; an analysis's own rows are filtered with WHERE"
                        .to_string(),
                )
            }
            None => {}
        }
        if self.eat_keyword("ORDER") {
            self.expect_keyword("BY", "after ORDER")?;
            loop {
                tail.order_by.push(self.order_key()?);
                if !self.eat_symbol(",") {
                    break;
                }
            }
        }
        if self.eat_keyword("LIMIT") {
            tail.limit = Some(self.whole_number("LIMIT")?);
        }
        Ok(tail)
    }

    /// A column of a result: a name (bare or quoted), or an aggregate's column (`COUNT(*)`,
    /// `SUM(on_path_ns)`), lower-cased.
    fn result_column(&mut self, what: &str) -> PResult<String> {
        let start = self.pos;
        if let Some(a) = self.result_aggregate() {
            return Ok(a.to_string().to_ascii_lowercase().replace('\'', ""));
        }
        self.pos = start;
        match self.peek() {
            Some(t) if matches!(t.kind, Kind::Word | Kind::Quoted) => {
                self.pos += 1;
                Ok(t.text.to_ascii_lowercase())
            }
            _ => self.expected(what),
        }
    }

    fn result_or(&mut self, after: &str) -> PResult<Predicate> {
        let first = self.result_and(after)?;
        if !self.is_keyword("OR") {
            return Ok(first);
        }
        let mut items = vec![first];
        while self.eat_keyword("OR") {
            items.push(self.result_and("after OR")?);
        }
        Ok(Predicate::Or(items))
    }

    fn result_and(&mut self, after: &str) -> PResult<Predicate> {
        let first = self.result_unary(after)?;
        if !self.is_keyword("AND") {
            return Ok(first);
        }
        let mut items = vec![first];
        while self.eat_keyword("AND") {
            items.push(self.result_unary("after AND")?);
        }
        Ok(Predicate::And(items))
    }

    fn result_unary(&mut self, after: &str) -> PResult<Predicate> {
        let mut nots = 0;
        while self.is_keyword("NOT") {
            self.nest()?;
            self.pos += 1;
            nots += 1;
        }
        let inner = if self.is_symbol("(") {
            self.nest()?;
            self.pos += 1;
            let e = self.result_or("after \"(\"");
            self.depth -= 1;
            let e = e?;
            self.expect_symbol(")", "to close \"(\"")?;
            e
        } else {
            let after = if nots == 0 { after } else { "after NOT" };
            self.result_comparison(after)?
        };
        self.depth -= nots;
        Ok((0..nots).fold(inner, |e, _| Predicate::Not(Box::new(e))))
    }

    /// `column op value` or `column IS [NOT] NULL`.
    fn result_comparison(&mut self, after: &str) -> PResult<Predicate> {
        let column = self.result_column(&format!("a column of the result {after}"))?;
        if self.eat_keyword("IS") {
            let negated = self.eat_keyword("NOT");
            self.expect_keyword("NULL", "after IS")?;
            return Ok(Predicate::IsNull { column, negated });
        }
        let op = match self
            .peek()
            .filter(|t| t.kind == Kind::Symbol)
            .map(|t| t.text)
        {
            Some("<") => CmpOp::Lt,
            Some("<=") => CmpOp::Le,
            Some("=") => CmpOp::Eq,
            Some("!=") | Some("<>") => CmpOp::Ne,
            Some(">=") => CmpOp::Ge,
            Some(">") => CmpOp::Gt,
            _ => {
                return self.expected(&format!(
                    "a comparison (<, <=, =, !=, >=, >) or IS NULL after {column}"
                ))
            }
        };
        self.pos += 1;
        let value = self.literal(&format!("after {column} {}", op.symbol()))?;
        Ok(Predicate::Compare { column, op, value })
    }

    /// A constant: a number (with a time or size unit, or none), a quoted name or a word.
    fn literal(&mut self, after: &str) -> PResult<Literal> {
        let negative =
            self.is_symbol("-") && self.peek_at(1).is_some_and(|t| t.kind == Kind::Number);
        if negative {
            self.pos += 1;
        }
        let Some(t) = self.peek() else {
            return self.expected(&format!("a number or a name {after}"));
        };
        match t.kind {
            Kind::Quoted => {
                self.pos += 1;
                return Ok(Literal::Text(t.text.to_string()));
            }
            Kind::Word if t.is_keyword("NULL") => {
                return self.fail(
                    "a comparison with NULL is never true: write column IS NULL or IS NOT NULL"
                        .to_string(),
                )
            }
            Kind::Word => {
                self.pos += 1;
                return Ok(Literal::Text(t.text.to_string()));
            }
            Kind::Number => {}
            Kind::Symbol => return self.expected(&format!("a number or a name {after}")),
        }
        self.pos += 1;
        let sign = |v: i128| if negative { -v } else { v };
        let too_large = format!("number too large: \"{}\"", t.text);
        if let Some(u) = self.peek().filter(|u| is_unit_candidate(t, *u)) {
            let time = TIME_UNITS.iter().find(|(name, _)| *name == u.text);
            let size = SIZE_UNITS.iter().find(|(name, _)| *name == u.text);
            let (scale, duration) = match (time, size) {
                (Some((_, s)), _) => (*s, true),
                (_, Some((_, s))) => (*s, false),
                _ => {
                    return self.fail(format!(
                        "unknown unit \"{}\" (ns, us, ms, s for a duration; B, KiB, MiB, GiB, \
                         KB, MB, GB for a size)",
                        u.text
                    ))
                }
            };
            self.pos += 1;
            let v = match scaled_wide(t.text, scale) {
                Ok(Some(v)) => match i128::try_from(v) {
                    Ok(v) => v,
                    Err(_) => return self.fail_at(t.start, too_large),
                },
                Ok(None) => return self.fail_at(t.start, too_large),
                Err(()) => {
                    return self.fail_at(
                        t.start,
                        format!(
                            "not a whole number of {}: \"{} {}\"",
                            if duration { "nanoseconds" } else { "bytes" },
                            t.text,
                            u.text
                        ),
                    )
                }
            };
            return Ok(if duration {
                Literal::Duration(sign(v))
            } else {
                Literal::Bytes(sign(v))
            });
        }
        let (int, frac) = t.text.split_once('.').unwrap_or((t.text, ""));
        let digits = format!("{int}{frac}");
        match digits.parse::<i128>() {
            Ok(units) if frac.len() <= 30 => Ok(Literal::Number {
                units: sign(units),
                scale: frac.len() as u32,
            }),
            _ => self.fail_at(t.start, too_large),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_is_exact() {
        assert_eq!(scaled("1.2", 1_000_000_000), Some(Ok(1_200_000_000)));
        assert_eq!(scaled("0.5", 1_000_000_000), Some(Ok(500_000_000)));
        assert_eq!(scaled("1.5", 1024), Some(Ok(1536)));
        assert_eq!(scaled("0.1", 1), Some(Err(())));
        assert_eq!(scaled("0.10", 10), Some(Ok(1)));
        assert_eq!(scaled("18446744073709551615", 1), Some(Ok(u64::MAX)));
        assert_eq!(scaled("18446744073709551616", 1), None);
        assert_eq!(scaled("20000000000", 1_000_000_000), None);
    }

    #[test]
    fn script_splitting_respects_quotes_and_comments() {
        let s = "SELECT ALL MESSAGES; -- a; comment\nUSE TRACE 'a;b';;\n";
        assert_eq!(split_statements(s).len(), 4);
        let parsed = parse_script(s).unwrap();
        assert_eq!(parsed.len(), 2);
        assert_eq!(&s[parsed[0].1.clone()], "SELECT ALL MESSAGES");
        assert_eq!(&s[parsed[1].1.clone()], "-- a; comment\nUSE TRACE 'a;b'");
        assert_eq!(parsed[1].0, Statement::UseTrace("a;b".into()));
    }

    #[test]
    fn bare_names() {
        assert!(is_bare_name("C1"));
        assert!(is_bare_name("wrf-16"));
        assert!(!is_bare_name("world"));
        assert!(!is_bare_name("16procs"));
        assert!(!is_bare_name("a b"));
        assert!(!is_bare_name(""));
    }
}

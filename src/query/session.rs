//! The session: a user's conversation with a database (the current trace, kept open between
//! statements; views; `SHOW`), which parses each statement and hands it to the planner and
//! the operators.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::ast::{Select, SelectBody, ShowWhat, Statement};
use super::cursor::Rows;
use super::exec::selected_catalog_columns;
use super::plan::Engine;
use super::usage;
use crate::error::{Error, Limit, NameKind, Result};
use crate::results::{ResultSet, RowSink, Value};
use crate::{Database, Trace};

/// A syntax error as the crate's error: "at column 22: expected …" with the statement and a
/// caret (the CLI adds its own "error: ").
pub fn query_error(e: super::QueryError) -> Error {
    match e.limit {
        Some(limit) => Error::limit(limit, super::parser::Located(&e).to_string()),
        None => Error::Syntax(Box::new(e)),
    }
}

/// A user's conversation with a database: the current trace, and statements run one by one.
///
/// ```no_run
/// let db = mtfdb::Database::open("traces.mtfdb")?;
/// let mut session = mtfdb::query::Session::new(db);
/// let fan_in = session.run("SELECT FAN_IN FOR ALL PROCESSES")?;
/// print!("{}", fan_in.to_table());
/// # Ok::<(), mtfdb::Error>(())
/// ```
pub struct Session {
    pub(super) db: Database,
    pub(super) current: Option<String>,
    pub(super) cancel: Arc<AtomicBool>,
    /// The trace last queried, kept open (its metadata decoded) between statements.
    pub(super) open: Option<Trace>,
}

impl Session {
    /// A session on `db`, with no trace chosen yet (a query then uses the only trace).
    pub fn new(db: Database) -> Session {
        Session {
            db,
            current: None,
            cancel: Arc::new(AtomicBool::new(false)),
            open: None,
        }
    }

    /// The flag that cancels the running statement when set (it is cleared when the next
    /// statement starts).
    pub fn cancel_flag(&self) -> Arc<AtomicBool> {
        self.cancel.clone()
    }

    /// Makes `flag` the one that cancels this session's statements (a process-wide Ctrl-C
    /// flag, say); the trace kept open follows it too.
    pub fn set_cancel_flag(&mut self, flag: Arc<AtomicBool>) {
        if let Some(t) = &mut self.open {
            t.set_cancel(flag.clone());
        }
        self.cancel = flag;
    }

    /// The database.
    pub fn database(&self) -> &Database {
        &self.db
    }

    /// Chooses the trace later statements query.
    pub fn use_trace(&mut self, name: &str) -> Result<()> {
        self.open = Some(self.open_trace(name)?);
        self.current = Some(name.to_string());
        Ok(())
    }

    /// Opens trace `name`, stopped by this session's cancellation flag.
    pub(super) fn open_trace(&self, name: &str) -> Result<Trace> {
        let mut trace = self.db.trace(name)?;
        trace.set_cancel(self.cancel.clone());
        Ok(trace)
    }

    /// Begins a statement: clears the cancellation flag, and lets go of the trace kept open
    /// since the last statement if another process (or this one) committed a change to it
    /// since, so that the statement reads the state committed when it began.
    fn begin_statement(&mut self) -> Result<()> {
        self.cancel.store(false, Ordering::Relaxed);
        if let Some(open) = &self.open {
            if !open.is_current()? {
                self.open = None;
            }
        }
        Ok(())
    }

    /// Lets go of the trace kept open between statements (and of its caches).
    pub fn close_trace(&mut self) {
        self.open = None;
    }

    /// The current trace, opened once and kept while it stays current.
    pub(crate) fn trace(&mut self) -> Result<&Trace> {
        Ok(self.open_current()?.0)
    }

    /// The current trace, opened once and kept while it stays current, with the flag that
    /// cancels statements (borrowed together, as a cursor holds both).
    fn open_current(&mut self) -> Result<(&Trace, &AtomicBool)> {
        let name = self.current_trace()?;
        let open = match self.open.take() {
            Some(t) if t.name() == name => t,
            _ => self.open_trace(&name)?,
        };
        Ok((self.open.insert(open), &self.cancel))
    }

    /// The trace statements query: the chosen one, else the only one.
    pub fn current_trace(&self) -> Result<String> {
        if let Some(t) = &self.current {
            return Ok(t.clone());
        }
        let traces = self.db.trace_names()?;
        match traces.len() {
            1 => Ok(traces.into_iter().next().unwrap_or_default()),
            0 => Err(usage("the database holds no traces; import one first (mtfdb import FILE)")),
            _ => Err(usage(format!(
                "the database holds several traces; choose one with --trace NAME or USE TRACE name: {}",
                traces.join(", ")
            ))),
        }
    }

    /// Parses and runs one statement, returning its result.
    pub fn run(&mut self, text: &str) -> Result<ResultSet> {
        let stmt = super::parse_statement(text).map_err(query_error)?;
        self.execute(&stmt)
    }

    /// Runs one statement and returns a cursor over its rows, typed getters on each
    /// ([`Row::get`](crate::results::Row::get)). A `SELECT` of rows without `ORDER BY` is read
    /// as the cursor is advanced, a chunk at a time, and stops reading at its `LIMIT` or when
    /// the cursor is dropped; `ORDER BY … LIMIT k` holds only the k first rows; other
    /// statements are computed, then handed out row by row. The cursor's rows are those
    /// [`Session::run`] returns.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = mtfdb::Database::open(dir.path().join("db")).unwrap();
    /// # db.import(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/traces/stencil2d-16.mtf"), Some("paper")).unwrap();
    /// let mut session = mtfdb::Session::new(db);
    /// let rows = session.query("SELECT COUNT(*) FROM OPERATIONS GROUP BY PROCESS")?;
    /// assert_eq!(rows.columns(), ["process", "count(*)"]);
    /// for row in rows {
    ///     let row = row?;
    ///     let (rank, count): (u32, u64) = (row.get(0)?, row.get("count(*)")?);
    ///     assert!(rank < 16 && count > 0);
    /// }
    /// # Ok::<(), mtfdb::Error>(())
    /// ```
    pub fn query(&mut self, text: &str) -> Result<Rows<'_>> {
        let stmt = super::parse_statement(text).map_err(query_error)?;
        self.query_statement(&stmt)
    }

    /// [`Session::query`] of a parsed statement.
    pub fn query_statement(&mut self, stmt: &Statement) -> Result<Rows<'_>> {
        let select = match stmt {
            Statement::Select(select) if select.order_by.is_empty() => select,
            _ => return Ok(Rows::computed(self.execute(stmt)?)),
        };
        let SelectBody::Rows(selection) = &select.body else {
            return Ok(Rows::computed(self.execute(stmt)?));
        };
        self.begin_statement()?;
        let (trace, cancel) = self.open_current()?;
        let engine = Engine::with_cancel(trace, cancel);
        let mut selected = engine.select_ids(selection)?;
        engine.read_counters(selection, &mut selected)?;
        let columns = selected_catalog_columns(&selected);
        let scan = engine.scan(selection, &mut selected)?;
        let limit = select
            .limit
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        Ok(Rows::scanning(columns, scan, limit))
    }

    /// The cells with traffic of a `SELECT COMMUNICATION MATRIX …` statement: what
    /// [`Session::run`] returns as a row per sender and a column per receiver, kept sparse (a
    /// picture of 16,384 ranks needs its pairs, not 2^28 cells).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = mtfdb::Database::open(dir.path().join("db")).unwrap();
    /// # db.import(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/traces/stencil2d-16.mtf"), Some("paper")).unwrap();
    /// let mut session = mtfdb::Session::new(db);
    /// let m = session.matrix_cells("SELECT COMMUNICATION MATRIX OF COUNT FOR PROCESSES(0-3)")?;
    /// assert_eq!(m.ranks, [0, 1, 2, 3]);
    /// assert!(m.cells.iter().all(|&(s, r, n)| s < 4 && r < 4 && n > 0));
    /// # Ok::<(), mtfdb::Error>(())
    /// ```
    pub fn matrix_cells(&mut self, text: &str) -> Result<crate::analysis::stats::MatrixCells> {
        let stmt = super::parse_statement(text).map_err(query_error)?;
        let Statement::Select(Select {
            body:
                SelectBody::Statistic {
                    statistic: super::ast::Statistic::Matrix(of),
                    target,
                    filter,
                },
            ..
        }) = &stmt
        else {
            return Err(Error::Usage(format!(
                "{:?} is not a SELECT COMMUNICATION MATRIX statement",
                text.trim()
            )));
        };
        self.begin_statement()?;
        let cancel = self.cancel.clone();
        let trace = self.trace()?;
        Ok(Engine::with_cancel(trace, &cancel)
            .matrix_cells(*of, *target, filter)?
            .0)
    }

    /// The topology of the current trace's traffic, as `SELECT TOPOLOGY [IN COMM c] [IN
    /// PHASE k] [WITH THRESHOLD x]` identifies it.
    pub fn topology(
        &mut self,
        comm: Option<&super::ast::CommRef>,
        phase: Option<u32>,
        params: &crate::analysis::structure::TopologyParams,
    ) -> Result<crate::analysis::structure::TopologyResult> {
        self.begin_statement()?;
        let trace = self.trace()?;
        super::analyses::topology_of(trace, comm, phase, params)
    }

    /// Runs one statement and hands its rows to `sink` as they come: a `SELECT` of rows is
    /// written while it is read and stops reading at its `LIMIT`, and `ORDER BY … LIMIT k` holds
    /// only the k first rows; other statements are computed and then handed over whole.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = mtfdb::Database::open(dir.path().join("db")).unwrap();
    /// # db.import(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/traces/stencil2d-16.mtf"), Some("paper")).unwrap();
    /// let mut session = mtfdb::query::Session::new(db);
    /// session.use_trace("paper").unwrap();
    /// let mut first = mtfdb::ResultSet::new(Vec::<String>::new());
    /// session.run_into("SELECT ALL OPERATIONS LIMIT 2", &mut first).unwrap();
    /// assert_eq!(first.len(), 2);
    /// ```
    pub fn run_into(&mut self, text: &str, sink: &mut dyn RowSink) -> Result<()> {
        let stmt = super::parse_statement(text).map_err(query_error)?;
        self.begin_statement()?;
        let cancel = self.cancel.clone();
        // Writing a large result (every operation sorted, a row per rank) takes a while too:
        // Ctrl-C stops it as it stops the reading.
        let mut sink = Cancellable {
            sink,
            cancel: &cancel,
            rows: 0,
        };
        let Statement::Select(select) = &stmt else {
            return sink.result(self.execute(&stmt)?);
        };
        let trace = self.trace()?;
        Engine::with_cancel(trace, &cancel).select_into(select, &mut sink)
    }

    /// Runs a parsed statement.
    pub fn execute(&mut self, stmt: &Statement) -> Result<ResultSet> {
        self.begin_statement()?;
        let cancel = self.cancel.clone();
        let out = match stmt {
            Statement::UseTrace(name) => {
                self.use_trace(name)?;
                let mut r = ResultSet::new(["trace"]);
                r.push(vec![name.clone().into()]);
                r
            }
            Statement::Show(ShowWhat::Traces) => self.show_traces()?,
            Statement::Show(ShowWhat::Tables) => super::catalog::show_tables(),
            Statement::Describe(target) => {
                // With a current trace, the rows of calls list its counters too.
                let metrics = match (&self.current, target.has_counters()) {
                    (Some(_), true) => self.trace()?.metrics()?,
                    _ => Vec::new(),
                };
                super::catalog::describe(*target, &metrics)
            }
            Statement::DescribeAnalysis(a) => super::catalog::describe_analysis(a),
            Statement::Show(what) => self.show(*what)?,
            Statement::Select(s) => {
                let trace = self.trace()?;
                Engine::with_cancel(trace, &cancel).select(s, false)?
            }
            Statement::Explain(s) => {
                let trace = self.trace()?;
                Engine::with_cancel(trace, &cancel)
                    .plan_only()
                    .select(s, true)?
            }
            Statement::ExplainAnalysis(a) => self.explain_analysis(a)?,
            Statement::ExplainSql(s) => {
                let trace = self.trace()?;
                let sql = super::sql::select_sql(&Engine::with_cancel(trace, &cancel), s)?;
                let mut r = ResultSet::new(["sql"]);
                for line in sql.lines() {
                    r.push(vec![line.to_string().into()]);
                }
                r
            }
            Statement::ExplainAnalyze(s) => {
                let trace = self.trace()?;
                Engine::with_cancel(trace, &cancel).select(s, true)?
            }
            Statement::CreateView { name, selection } => {
                let chars = name.chars().count();
                if chars > super::parser::MAX_NAME_CHARS {
                    return Err(Error::limit(
                        Limit::NameLength,
                        format!(
                            "a view name has at most {} characters, this one {chars}",
                            super::parser::MAX_NAME_CHARS
                        ),
                    ));
                }
                let trace = self.open_trace(&self.current_trace()?)?;
                let view = Engine::with_cancel(&trace, &cancel).view_ids(selection)?;
                // A Ctrl-C during the selection leaves the views as they were.
                trace.check_cancel()?;
                trace.put_view(name, &view)?;
                let mut r = ResultSet::new(["view", "rows"]);
                r.push(vec![name.clone().into(), view.ids.len().into()]);
                r
            }
            Statement::Analysis(a) => self.analysis(a)?,
            Statement::Relation(source, tail) => self.relation(source, tail)?,
            Statement::DropView(name) => {
                let trace = self.db.trace(&self.current_trace()?)?;
                if !trace.drop_view(name)? {
                    return Err(Error::unknown(
                        NameKind::View,
                        name,
                        format!("no view named {name:?} in trace {:?}", trace.name()),
                    ));
                }
                let mut r = ResultSet::new(["dropped view"]);
                r.push(vec![name.clone().into()]);
                r
            }
        };
        Ok(out)
    }

    /// A computed result narrowed by its tail; the `EXPLAIN` of one lists the tail's steps
    /// after the statement's (they run on the result, so they estimate no rows).
    fn relation(&mut self, source: &Statement, tail: &super::relation::Tail) -> Result<ResultSet> {
        let result = match source {
            Statement::Analysis(_) | Statement::Select(_) => self.execute(source)?,
            Statement::ExplainAnalysis(_)
            | Statement::Explain(_)
            | Statement::ExplainAnalyze(_) => {
                let mut plan = self.execute(source)?;
                let analyze = matches!(source, Statement::ExplainAnalyze(_));
                for text in super::relation::steps(tail) {
                    let step = plan.len() as u64 + 1;
                    plan.push(vec![
                        step.into(),
                        format!("then {text}").into(),
                        Value::Null,
                        Value::Null,
                    ]);
                    debug_assert!(!analyze || plan.columns.len() == 4);
                }
                return Ok(plan);
            }
            other => {
                return Err(usage(format!(
                    "WHERE, GROUP BY, HAVING, ORDER BY and LIMIT apply to a computed result, \
                     not to {other}"
                )))
            }
        };
        super::relation::apply(result, tail, Some(&self.cancel))
    }

    /// `SHOW TRACES`: every trace of the database with its counts.
    fn show_traces(&self) -> Result<ResultSet> {
        let mut r = ResultSet::new([
            "name",
            "processes",
            "operations",
            "messages",
            "format",
            "source",
        ]);
        for t in self.db.traces()? {
            r.push(vec![
                t.name.into(),
                (t.processes as u64).into(),
                t.summary.operations.into(),
                t.summary.messages.into(),
                t.format.into(),
                t.source.into(),
            ]);
        }
        Ok(r)
    }

    fn show(&self, what: ShowWhat) -> Result<ResultSet> {
        let trace = self.open_trace(&self.current_trace()?)?;
        let h = trace.header();
        Ok(match what {
            ShowWhat::Traces => self.show_traces()?,
            ShowWhat::Tables => super::catalog::show_tables(),
            ShowWhat::Processes => {
                let counts = trace.operations_per_rank();
                let mut r = ResultSet::new(["rank", "name", "processor", "operations"]);
                for p in &h.processes {
                    let node = p
                        .processor
                        .and_then(|id| h.processors.iter().find(|q| q.id == id))
                        .map(|q| q.name.clone());
                    r.push(vec![
                        p.rank.into(),
                        p.name.clone().into(),
                        node.into(),
                        counts.get(p.rank as usize).copied().into(),
                    ]);
                }
                r
            }
            ShowWhat::Communicators => {
                let mut r = ResultSet::new(["id", "name", "size", "members"]);
                for c in &h.communicators {
                    let members: Vec<String> = c.members.iter().map(|m| m.to_string()).collect();
                    r.push(vec![
                        c.id.into(),
                        c.name.clone().into(),
                        (c.members.len() as u64).into(),
                        members.join(",").into(),
                    ]);
                }
                r
            }
            ShowWhat::Operations => {
                let mut r = ResultSet::new(["operation", "count"]);
                for (k, n) in &trace.summary().by_kind {
                    r.push(vec![trace.kind_name(*k).into(), (*n).into()]);
                }
                r
            }
            ShowWhat::Views => {
                let mut r = ResultSet::new(["name", "rows", "of", "definition"]);
                for (name, v) in trace.views()? {
                    r.push(vec![
                        name.into(),
                        v.ids.len().into(),
                        if v.messages { "messages" } else { "operations" }.into(),
                        v.definition.into(),
                    ]);
                }
                r
            }
        })
    }
}

/// A sink that ends the statement with [`Error::Cancelled`] when the cancellation flag is
/// set, looked at every [`Cancellable::EVERY`] rows.
struct Cancellable<'a> {
    sink: &'a mut dyn RowSink,
    cancel: &'a AtomicBool,
    rows: usize,
}

impl Cancellable<'_> {
    /// Rows written between two looks at the flag.
    const EVERY: usize = 4096;
}

impl RowSink for Cancellable<'_> {
    fn columns(&mut self, columns: &[String]) -> Result<()> {
        self.sink.columns(columns)
    }

    fn row(&mut self, row: Vec<Value>) -> Result<()> {
        if self.rows.is_multiple_of(Self::EVERY) && self.cancel.load(Ordering::Relaxed) {
            return Err(Error::Cancelled);
        }
        self.rows += 1;
        self.sink.row(row)
    }
}

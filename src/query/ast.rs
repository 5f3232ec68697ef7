//! The query language's abstract syntax tree: what [`parse_statement`](super::parse_statement)
//! produces and what the planner consumes. The grammar is in `grammar/query.ebnf`.
//!
//! Conventions, the same as the model's: ranks are world ranks counted from 0, times and
//! durations are integer nanoseconds, sizes are bytes. Names of communicators, views and traces
//! are kept exactly as written (they are case-sensitive); keywords are not kept.
//!
//! Every type prints as canonical query text ([`fmt::Display`]), and parsing that text gives the
//! same tree back.

use std::fmt;

use serde::{Deserialize, Serialize};

pub use crate::analysis::clock::ClockCorrection;
pub use crate::analysis::detection::{
    PatternParams, PhaseParams, TemplateEvent, TemplateParams, TemplateProcess,
};
pub use crate::analysis::structure::{LoopParams, TopologyParams};
use crate::model::{CommId, OpKind, Rank, Time};

/// One statement of the language.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Statement {
    /// `SELECT …`: a selection, an aggregate or a statistic.
    Select(Select),
    /// `EXPLAIN SELECT …`: show the plan of the query without running it: it reads no rows,
    /// runs no analysis and writes nothing.
    Explain(Select),
    /// `EXPLAIN ANALYZE SELECT …`: run the query and show its plan with the rows each step
    /// actually kept.
    ExplainAnalyze(Select),
    /// `EXPLAIN SQL <select>`: the statement as standard SQL over the tables of the Parquet
    /// export, one row per line of SQL; runs nothing.
    ExplainSql(Select),
    /// `EXPLAIN` of an analysis statement (`EXPLAIN SELECT PHASES`, `EXPLAIN SIMULATE …`): what
    /// it would read and compute, and which stored results spare the work; nothing runs and
    /// nothing is written.
    ExplainAnalysis(Analysis),
    /// `SHOW TRACES | PROCESSES | COMMUNICATORS | OPERATIONS | VIEWS | TABLES`.
    Show(ShowWhat),
    /// `DESCRIBE <target>`: the columns a selection of that target returns, with their types,
    /// units and meanings (from [`catalog`](super::catalog)); needs no trace.
    Describe(Target),
    /// `DESCRIBE SELECT PROFILE …` (or `TIME PROFILE`, `COMMUNICATION OVER TIME`): the columns
    /// of the analysis's rows, with their types, units and meanings; needs no trace.
    DescribeAnalysis(Analysis),
    /// `USE TRACE name`: the trace later statements query.
    UseTrace(String),
    /// `CREATE VIEW name AS SELECT <target> <filters>`: store the selection as a view.
    CreateView {
        /// The view's name, as written.
        name: String,
        /// The selection the view stores.
        selection: Selection,
    },
    /// `DROP VIEW name`.
    DropView(String),
    /// Pattern and phase detection: `SELECT PATTERNS …`, `SELECT COMMUNICATION PATTERNS`,
    /// `MATCH PATTERN …`, `SELECT PHASES …`, `SHOW PHASE TREE`, `REFRESH PATTERNS`.
    Analysis(Analysis),
    /// A computed result narrowed by the relational tail (`WHERE`, `GROUP BY`, `HAVING`,
    /// `ORDER BY`, `LIMIT` over its columns; see [`relation`](super::relation)): the source is
    /// an analysis (`SELECT CRITICAL PATH ORDER BY duration_ns DESC LIMIT 5`), a statistic or an
    /// aggregate with `HAVING`, or the `EXPLAIN` of one (which then lists the tail's steps).
    Relation(Box<Statement>, super::relation::Tail),
}

/// The statements of pattern and phase detection (thesis chapters 4 and 5), loop models,
/// topology and replay. Each analysis's parameters (`WITH name value, …`) are its own typed
/// value, at its defaults when the statement does not set them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Analysis {
    /// `SELECT PATTERNS FOR PROCESS(n) [WITH …]`: the process patterns of one rank
    /// (maximal repeats of its event sequence) with their lengths, occurrences and positions.
    ProcessPatterns {
        /// The world rank.
        rank: Rank,
        /// Routine delimiters, tandem removal, envelope.
        options: PatternParams,
    },
    /// `SELECT COMMUNICATION PATTERNS [WITH …]`: process patterns joined across processes
    /// through matched messages and collective instances, with their processes and occurrences.
    CommunicationPatterns {
        /// Routine delimiters, tandem removal, envelope.
        options: PatternParams,
    },
    /// `MATCH PATTERN (P0: S1 S4; P1: R0 S2 S5) [WITH ERRORS k, NGRAM q]`: where a template
    /// occurs, with at most `errors` edits per process.
    Match {
        /// The template's events, per process.
        template: Vec<TemplateProcess>,
        /// The edits accepted and the matcher's n-gram size.
        options: TemplateParams,
    },
    /// `SELECT PHASES [WITH …]`: the leaves of the segmentation tree.
    Phases(PhaseParams),
    /// `SHOW PHASE TREE [WITH …]`: the whole segmentation tree.
    PhaseTree(PhaseParams),
    /// `REFRESH PATTERNS`: recompute patterns and phases instead of reading stored results.
    Refresh,
    /// `SELECT LOOPS FOR PROCESS(n) [WITH BODY LIMIT k]`: the loop nest of one process's
    /// events (NLR).
    Loops(Rank, LoopParams),
    /// `SELECT GLOBAL MODEL [WITH BODY LIMIT k]`: the processes' loop nests merged, loops
    /// annotated with the ranks they cover.
    GlobalModel(LoopParams),
    /// `SELECT TOPOLOGY [IN COMM(c)] [IN PHASE k] [WITH THRESHOLD x]`: the communication
    /// topology (family, dimensions, rank → coordinates, traffic dropped).
    Topology {
        /// Only messages on this communicator.
        comm: Option<CommRef>,
        /// Only messages of this phase.
        phase: Option<u32>,
        /// The share of the largest pair's traffic below which a pair is dropped.
        options: TopologyParams,
    },
    /// `SELECT LOGICAL TRACE [FOR PROCESS(n)] [WITH BODY LIMIT k, THRESHOLD x]`: a process's
    /// trace with peers as directions.
    LogicalTrace {
        /// The process (the one with the most neighbours when absent).
        rank: Option<Rank>,
        /// How its loop nest is found.
        loops: LoopParams,
        /// How the topology its peers are directions in is identified.
        topology: TopologyParams,
    },
    /// `SELECT CRITICAL PATH [SUMMARY]`: the segments of the run's critical path (rank, time,
    /// computation or the MPI call), or with `SUMMARY` its length, each rank's share and the
    /// critical-path imbalance per activity.
    CriticalPath {
        /// The summary instead of the segments.
        summary: bool,
        /// `WITH CLOCK CORRECTION c`: the path (and the wait states it follows) on clocks
        /// corrected by `c`, its segments in corrected times.
        clock: ClockCorrection,
    },
    /// `SELECT DELAY COSTS [FOR PROCESS(n)] [WITH CLOCK CORRECTION c]`: the root causes of the
    /// wait states (Scalasca's delay costs): per delaying rank, activity (computation or
    /// the MPI call) and call path, the waiting its delays caused directly (short-term) and
    /// through the waits they caused (long-term); see [`crate::analysis::delay_costs`].
    DelayCosts {
        /// Only the delays of this rank.
        rank: Option<Rank>,
        /// `WITH CLOCK CORRECTION c`: the wait states and intervals on corrected clocks.
        clock: ClockCorrection,
    },
    /// `SIMULATE [WITH LATENCY 1.5 us, OVERHEAD 0.4 us, GAP 0 ns, BANDWIDTH 12 GB/s, EAGER
    /// LIMIT 64 KiB, CPU 2.0] [AS TRACE name]`: replays the trace on the network model and
    /// predicts each rank's end and time in MPI, and the run time, beside the measured ones;
    /// with `AS TRACE`, stores the simulated run as a trace.
    Simulate {
        /// The network.
        network: crate::analysis::replay::network::NetworkModel,
        /// The name to store the simulated run under.
        as_trace: Option<String>,
    },
    /// `SELECT NETWORK MODEL`: the latency, overhead and bandwidth fitted to the trace's own
    /// message times, with the fit's error.
    FitNetwork,
    /// `SIMULATE WITH BANDWIDTH x2, LATENCY x0.5, …`: a what-if relative to the network fitted
    /// to the trace; each rank's prediction beside the fitted network's replay and the
    /// measurement.
    WhatIf {
        /// The changes to the fitted network.
        change: crate::analysis::replay::network::NetworkChange,
    },
    /// `SELECT PROFILE [BY ROUTINE | BY CALL PATH] [PER PROCESS] [FOR …] [BETWEEN TIME …]`:
    /// calls, inclusive, exclusive, MPI and computation time per routine (or call path), over
    /// all ranks or per rank.
    Profile {
        /// Per routine name or per call path.
        by: crate::analysis::profile::ProfileBy,
        /// One row per rank and routine instead of one per routine.
        per_process: bool,
        /// The ranks and time window.
        scope: AnalysisScope,
    },
    /// `SELECT TIME PROFILE BINS n [FOR …] [BETWEEN TIME …]`: per time bin, each routine's
    /// and MPI call's exclusive time summed over ranks.
    TimeProfile {
        /// How many bins.
        bins: u32,
        /// The ranks and time window.
        scope: AnalysisScope,
    },
    /// `SELECT COMMUNICATION OVER TIME BINS n [FOR …] [BETWEEN TIME …]`: per time bin, the
    /// messages sent and their bytes.
    CommunicationOverTime {
        /// How many bins.
        bins: u32,
        /// The ranks and time window.
        scope: AnalysisScope,
    },
}

/// The ranks and time window of a profile or time-binned statement: `FOR <selector>` and
/// `BETWEEN TIME a AND b`, each optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnalysisScope {
    /// `FOR …`: only these ranks.
    pub ranks: Option<ProcessSelector>,
    /// `BETWEEN TIME a AND b`: only time inside the window.
    pub time: Option<TimeWindow>,
}

impl fmt::Display for AnalysisScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(r) = &self.ranks {
            write!(f, " FOR {r}")?;
        }
        if let Some(w) = &self.time {
            write!(f, " {w}")?;
        }
        Ok(())
    }
}

/// What `SHOW` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ShowWhat {
    /// `SHOW TRACES`: the traces in the database.
    Traces,
    /// `SHOW PROCESSES`: the processes of the current trace.
    Processes,
    /// `SHOW COMMUNICATORS`: the communicators of the current trace.
    Communicators,
    /// `SHOW OPERATIONS`: the operation kinds present in the current trace, with counts.
    Operations,
    /// `SHOW VIEWS`: the views of the current trace.
    Views,
    /// `SHOW TABLES`: every target a statement can select from, one line each; needs no
    /// trace.
    Tables,
}

/// A `SELECT` statement: what it computes, then its ordering and limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Select {
    /// What the query returns.
    pub body: SelectBody,
    /// `ORDER BY k1 [ASC|DESC], k2 …`; empty when absent.
    pub order_by: Vec<OrderKey>,
    /// `LIMIT n`.
    pub limit: Option<u64>,
}

/// The three shapes of a `SELECT`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SelectBody {
    /// `SELECT <target> <filters>`: the matching rows (messages or operations).
    Rows(Selection),
    /// `SELECT COUNT(*), SUM(SIZE) [FROM] <target> <filters> [GROUP BY …]`.
    Aggregate {
        /// The aggregates, in the order written (never empty).
        aggregates: Vec<Aggregate>,
        /// The rows they aggregate.
        selection: Selection,
        /// `GROUP BY k1, k2 …`; empty for one row over the whole selection.
        group_by: Vec<GroupKey>,
    },
    /// `SELECT FAN_IN …`, `SELECT COMMUNICATION MATRIX …` and the other statistics.
    Statistic {
        /// Which statistic.
        statistic: Statistic,
        /// The rows it is computed over, when the statistic takes one (`COMMUNICATION MATRIX` and
        /// `HISTOGRAM` only; `None` means their default, all messages). The fixed statistics
        /// (`FAN_IN`, `FAN_OUT`, `STATISTICS`, `MPI TIME`) never have one.
        target: Option<Target>,
        /// Scope, `IN` clauses, time window and `WHERE`.
        filter: Filter,
    },
}

impl SelectBody {
    /// The clauses of the statement.
    pub fn filter(&self) -> &Filter {
        match self {
            SelectBody::Rows(selection) | SelectBody::Aggregate { selection, .. } => {
                &selection.filter
            }
            SelectBody::Statistic { filter, .. } => filter,
        }
    }
}

/// A target and the clauses that narrow it: the unit a view stores.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Selection {
    /// What kind of rows.
    pub target: Target,
    /// Which of them.
    pub filter: Filter,
}

/// The clauses that may follow a target, in any order. All present clauses must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Filter {
    /// `BETWEEN PROCESS(a,b)`, `AMONG …` or `FOR …`; at most one.
    pub scope: Option<Scope>,
    /// `IN COMM(c)`, `IN VIEW v`, `IN PHASE n`, `IN PATTERN n`, in the order written; all apply.
    pub within: Vec<Within>,
    /// `BETWEEN TIME a AND b`.
    pub time: Option<TimeWindow>,
    /// `WHERE …`.
    pub predicate: Option<Expr>,
    /// `WITH CLOCK CORRECTION c`: the clocks the wait states the statement reads (`WAIT
    /// STATES`, `LATE SENDERS`, `WAIT` in `WHERE` or `ORDER BY`) are computed on; the other
    /// clauses still select by the stored times. [`ClockCorrection::None`] (the default):
    /// the stored times.
    #[serde(default)]
    pub clock: ClockCorrection,
}

impl Filter {
    /// True when no clause is present.
    pub fn is_empty(&self) -> bool {
        self.scope.is_none()
            && self.within.is_empty()
            && self.time.is_none()
            && self.predicate.is_none()
            && self.clock == ClockCorrection::None
    }
}

/// What a query selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Target {
    /// `[ALL] MESSAGES`: matched point-to-point messages (one row per send/receive pair).
    Messages,
    /// `POINT_TO_POINT_OPERATIONS`: every send and receive operation.
    PointToPoint,
    /// `SENDS`: every sending operation (`MPI_Send`, `MPI_Isend`, …, `MPI_Sendrecv`).
    Sends,
    /// `RECEIVES`: every receiving operation (`MPI_Recv`, `MPI_Irecv`, `MPI_Sendrecv`, …).
    Receives,
    /// `COLLECTIVE_OPERATIONS`: every collective operation, blocking or not.
    Collectives,
    /// One operation kind: `BROADCAST`, `GATHER`, … or any MPI name such as `MPI_Isend`.
    /// The parser never produces `OpKind::Other`.
    Operation(OpKind),
    /// `OPERATIONS`: every operation.
    Operations,
    /// `CPU BURSTS`: the computation between a location's consecutive MPI calls (PHANTOM's
    /// `CPU_Burst`), one row per call after the first, selected through the call it precedes.
    CpuBursts,
    /// `ROUTINE CALLS`: every call of a user routine (enter to leave), with its depth.
    RoutineCalls,
    /// `REQUESTS`: every non-blocking operation with the Wait/Test that completed it.
    Requests,
    /// `COLLECTIVE INSTANCES`: every instance of a collective (its members' calls together).
    CollectiveInstances,
    /// `ANOMALIES`: what the import found wrong or missing in the trace.
    Anomalies,
    /// `METRICS`: the counters the trace recorded (hardware counters such as PAPI's), one row
    /// per counter.
    Metrics,
}

impl Target {
    /// Whether the target's rows are read from one of the store's record tables (routine
    /// calls, request links, collective instances, anomalies) rather than through the
    /// operation or message indexes.
    pub fn is_record(self) -> bool {
        matches!(
            self,
            Target::RoutineCalls
                | Target::Requests
                | Target::CollectiveInstances
                | Target::Anomalies
                | Target::Metrics
        )
    }

    /// Whether the target's rows are calls that carry hardware counters: operations (every
    /// operation target) and routine calls.
    pub fn has_counters(self) -> bool {
        matches!(
            self,
            Target::Operations
                | Target::PointToPoint
                | Target::Sends
                | Target::Receives
                | Target::Collectives
                | Target::Operation(_)
                | Target::RoutineCalls
        )
    }
}

/// Which processes a scope names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProcessSelector {
    /// `PROCESS(n)`: world rank n.
    Process(Rank),
    /// `PROCESSES(3-6)`, `PROCESSES(1,4,7)`, `PROCESSES(1,3-5)` (also `PROCESS(1,2)`): the union
    /// of the ranges, in the order written (duplicates and overlaps are kept as written).
    List(Vec<RankRange>),
    /// `ALL PROCESSES`.
    All,
    /// `PROCESSES IN COMM(c)`: the members of a communicator.
    InComm(CommRef),
}

/// An inclusive range of world ranks, `first <= last`; a single rank has `first == last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RankRange {
    /// The first rank.
    pub first: Rank,
    /// The last rank (included).
    pub last: Rank,
}

impl RankRange {
    /// The range holding one rank.
    pub fn single(rank: Rank) -> RankRange {
        RankRange {
            first: rank,
            last: rank,
        }
    }
}

/// A communicator as a query names it: `COMM(C1)`, `COMM(3)`, `COMM(WORLD)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CommRef {
    /// By name, as written (case-sensitive): `COMM(C1)`, `COMM('my comm')`.
    Name(String),
    /// By the id the trace declares: `COMM(3)`.
    Id(CommId),
    /// `COMM(WORLD)` or `COMM(MPI_COMM_WORLD)` (either case).
    World,
}

/// The scope of a query: whose messages or operations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Scope {
    /// `BETWEEN PROCESS(a,b)`: messages (or operations) between the two ranks, both directions.
    Between(Rank, Rank),
    /// `AMONG <selector>`: messages whose sender and receiver are both in the set (operations of
    /// the set, for operation targets).
    Among(ProcessSelector),
    /// `FOR <selector>`: operations performed by the set (messages sent or received by it).
    For(ProcessSelector),
}

/// One `IN …` clause.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Within {
    /// `IN COMM(c)`: operations and messages on that communicator.
    Comm(CommRef),
    /// `IN VIEW name`: rows of a stored view.
    View(String),
    /// `IN PHASE n`: rows of an execution phase (phase detection).
    Phase(u32),
    /// `IN PATTERN n`: rows of a communication pattern's occurrences (pattern detection).
    Pattern(u32),
}

/// `BETWEEN TIME a AND b`, in nanoseconds on the trace's own clock (the times rows carry, not
/// offsets from its first event); `start <= end`. An operation is in the window when it
/// overlaps it, a message when its flight (send to receive) does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TimeWindow {
    /// The window's start, in nanoseconds.
    pub start: Time,
    /// The window's end, in nanoseconds.
    pub end: Time,
}

/// A `WHERE` condition. Precedence when parsing: `NOT` binds tighter than `AND`, which binds
/// tighter than `OR`. A chain `a AND b AND c` is one [`Expr::And`] of its operands (so that a
/// chain of any length is a flat list, never a deep tree); parentheses and `NOT` nest, up to
/// [`MAX_NESTING`] levels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Expr {
    /// `field op value`.
    Compare(Comparison),
    /// `a AND b AND …`: every operand holds (at least two operands).
    And(Vec<Expr>),
    /// `a OR b OR …`: some operand holds (at least two operands).
    Or(Vec<Expr>),
    /// `NOT a`.
    Not(Box<Expr>),
}

/// The deepest nesting of parentheses and `NOT` a `WHERE` condition may have; deeper is an
/// [`Error::LimitExceeded`](crate::Error::LimitExceeded), well before the stack is at risk.
pub const MAX_NESTING: usize = 100;

impl Expr {
    /// `a AND b`, joining chains: `(a AND b) AND c` is the chain `a AND b AND c`, as parsing
    /// its text gives.
    pub fn and(a: Expr, b: Expr) -> Expr {
        Expr::join(a, b, true)
    }

    /// `a OR b`, joining chains like [`Expr::and`].
    pub fn or(a: Expr, b: Expr) -> Expr {
        Expr::join(a, b, false)
    }

    /// `NOT a`.
    pub fn negate(a: Expr) -> Expr {
        Expr::Not(Box::new(a))
    }

    fn join(a: Expr, b: Expr, and: bool) -> Expr {
        let mut items = match (a, and) {
            (Expr::And(v), true) | (Expr::Or(v), false) => v,
            (other, _) => vec![other],
        };
        match (b, and) {
            (Expr::And(v), true) | (Expr::Or(v), false) => items.extend(v),
            (other, _) => items.push(other),
        }
        if and {
            Expr::And(items)
        } else {
            Expr::Or(items)
        }
    }

    /// How deeply parentheses and `NOT` nest in its canonical text (its [`fmt::Display`]): the
    /// most `NOT`s and parenthesized chains around any comparison. This is what the parser
    /// counts against [`MAX_NESTING`].
    pub fn depth(&self) -> usize {
        // Iterative, so that it is safe on any tree a caller may have built.
        let mut deepest = 0;
        let mut stack = vec![(self, 0usize)];
        while let Some((e, d)) = stack.pop() {
            deepest = deepest.max(d);
            match e {
                Expr::Compare(_) => {}
                Expr::Not(a) => {
                    // `NOT (a AND b)`: the chain's parentheses are one more level.
                    let paren = usize::from(matches!(**a, Expr::And(_) | Expr::Or(_)));
                    stack.push((a, d + 1 + paren));
                }
                Expr::And(items) => stack.extend(
                    items
                        .iter()
                        .map(|x| (x, d + usize::from(matches!(x, Expr::And(_) | Expr::Or(_))))),
                ),
                Expr::Or(items) => stack.extend(
                    items
                        .iter()
                        .map(|x| (x, d + usize::from(matches!(x, Expr::Or(_))))),
                ),
            }
        }
        deepest
    }
}

/// `SIZE > 1 KiB`, `TAG = 7`, `COMM = C1`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Comparison {
    /// The field compared.
    pub field: Field,
    /// The comparison.
    pub op: CmpOp,
    /// The value: [`Value::Comm`] for [`Field::Comm`], [`Value::Number`] for every other field.
    pub value: Value,
}

/// A field a `WHERE` condition can test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Field {
    /// `SIZE`: bytes (a message's size; an operation's send or receive size).
    Size,
    /// `TAG`: the message tag.
    Tag,
    /// `SENDER`: the sending world rank.
    Sender,
    /// `RECEIVER`: the receiving world rank.
    Receiver,
    /// `DURATION`: nanoseconds (an operation's end minus start; a message's receive end minus
    /// send start is the planner's choice).
    Duration,
    /// `PEER`: the other rank of a point-to-point operation.
    Peer,
    /// `ROOT`: the root rank of a rooted collective.
    Root,
    /// `COMM`: the communicator.
    Comm,
    /// `WAIT`: nanoseconds an operation waited for a late partner (its wait state, 0 when it
    /// did not wait); operations only.
    Wait,
    /// `SENT`: bytes sent (an operation's send size, a collective instance's total; a
    /// message's size).
    Sent,
    /// `RECEIVED`: bytes received (an operation's receive size, a collective instance's
    /// total; a message's size).
    Received,
    /// `DEPTH`: a routine call's nesting depth (0 for an outermost call).
    Depth,
    /// `MEMBERS`: how many calls a collective instance joins.
    Members,
    /// `SKEW`: nanoseconds between the first and the last member's start of a collective
    /// instance.
    Skew,
    /// A hardware counter of the trace by its name (`PAPI_TOT_CYC > 100000`): a call's value
    /// of it (operations and routine calls). Resolved when the statement runs; a call without
    /// a sample has none, and a comparison with it is unknown, as SQL's NULL is.
    Counter(CounterName),
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CmpOp {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `=`
    Eq,
    /// `!=` (also written `<>`)
    Ne,
    /// `>=`
    Ge,
    /// `>`
    Gt,
}

impl CmpOp {
    /// The operator's text.
    pub fn symbol(self) -> &'static str {
        match self {
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Eq => "=",
            CmpOp::Ne => "!=",
            CmpOp::Ge => ">=",
            CmpOp::Gt => ">",
        }
    }

    /// Whether `left op right` holds.
    pub fn holds<T: PartialOrd>(self, left: T, right: T) -> bool {
        match self {
            CmpOp::Lt => left < right,
            CmpOp::Le => left <= right,
            CmpOp::Eq => left == right,
            CmpOp::Ne => left != right,
            CmpOp::Ge => left >= right,
            CmpOp::Gt => left > right,
        }
    }
}

/// The right-hand side of a comparison, already in base units.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Value {
    /// Bytes for `SIZE`, nanoseconds for `DURATION` and `WAIT`, a world rank for `SENDER`, `RECEIVER`,
    /// `PEER` and `ROOT`, the tag for `TAG`. Any whole number may be written, negative or
    /// past 2^64 - 1, and compares exactly with every column (`SIZE > 18446744073709551616` is
    /// false for every row, `SIZE > -1` true); a number past ±(2^127 - 1) is taken as that
    /// bound, which compares the same with every column.
    Number(i128),
    /// A communicator, for `COMM`.
    Comm(CommRef),
}

/// An aggregate column: `COUNT(*)`, `SUM(SIZE)`, `AVG(DURATION)`, …
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Aggregate {
    /// `COUNT(*)`: the number of rows.
    Count,
    /// `SUM(m)`.
    Sum(Measure),
    /// `AVG(m)`.
    Avg(Measure),
    /// `MIN(m)`.
    Min(Measure),
    /// `MAX(m)`.
    Max(Measure),
}

impl Aggregate {
    /// The counter the aggregate reads, if it reads one.
    pub fn counter(self) -> Option<CounterName> {
        match self {
            Aggregate::Sum(Measure::Counter(n))
            | Aggregate::Avg(Measure::Counter(n))
            | Aggregate::Min(Measure::Counter(n))
            | Aggregate::Max(Measure::Counter(n)) => Some(n),
            _ => None,
        }
    }
}

/// What an aggregate or a histogram measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Measure {
    /// `SIZE`, in bytes.
    Size,
    /// `DURATION`, in nanoseconds.
    Duration,
    /// `SENT`: bytes sent.
    Sent,
    /// `RECEIVED`: bytes received.
    Received,
    /// A hardware counter of the trace by its name (`PAPI_TOT_CYC`, as `SELECT METRICS`
    /// lists it): its value over each operation or routine call. The name is resolved when
    /// the statement runs, against the trace's counters; only aggregates take it.
    Counter(CounterName),
}

/// A counter's name as a statement spells it, kept inline so that [`Measure`] stays `Copy`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CounterName {
    len: u8,
    bytes: [u8; CounterName::MAX],
}

impl CounterName {
    /// The longest name a statement can give a counter, in bytes.
    pub const MAX: usize = 64;

    /// `name`, if it is at most [`CounterName::MAX`] bytes.
    pub fn new(name: &str) -> Option<CounterName> {
        let len = name.len();
        if len > Self::MAX {
            return None;
        }
        let mut bytes = [0; Self::MAX];
        bytes[..len].copy_from_slice(name.as_bytes());
        Some(CounterName {
            len: len as u8,
            bytes,
        })
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        // Built from a `&str` cut at its own length: always UTF-8.
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or("")
    }
}

/// A counter's name as a statement writes it: bare when the parser reads it back as that
/// counter, else quoted (`'perf::CYCLES'`, or a counter named like a field: `'SIZE'`).
impl fmt::Display for CounterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.as_str();
        if super::parser::is_bare_counter(s) {
            f.write_str(s)
        } else if s.contains('\'') {
            write!(f, "\"{s}\"")
        } else {
            write!(f, "'{s}'")
        }
    }
}

impl fmt::Debug for CounterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl Serialize for CounterName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for CounterName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        CounterName::new(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "a counter name has at most {} bytes",
                CounterName::MAX
            ))
        })
    }
}

impl Measure {
    /// Every measure, in declaration order (for tests and tools that enumerate the language).
    pub const ALL: [Measure; 4] = [
        Measure::Size,
        Measure::Duration,
        Measure::Sent,
        Measure::Received,
    ];
}

/// A `GROUP BY` key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum GroupKey {
    /// `PROCESS`: the rank performing the operation (the sender, for messages).
    Process,
    /// `PEER`: the other rank (the receiver, for messages).
    Peer,
    /// `OPERATION`: the operation kind.
    Operation,
    /// `TAG`.
    Tag,
    /// `COMM`: the communicator.
    Comm,
    /// `ROUTINE`: a routine call's routine.
    Routine,
    /// `CLASS`: an anomaly's class.
    Class,
}

impl GroupKey {
    /// Every key, in declaration order (for tests and tools that enumerate the language).
    pub const ALL: [GroupKey; 7] = [
        GroupKey::Process,
        GroupKey::Peer,
        GroupKey::Operation,
        GroupKey::Tag,
        GroupKey::Comm,
        GroupKey::Routine,
        GroupKey::Class,
    ];
}

/// A statistic statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Statistic {
    /// `FAN_IN`: bytes received per process (message bytes plus collective receive sizes).
    FanIn,
    /// `FAN_OUT`: bytes sent per process (message bytes plus collective send sizes).
    FanOut,
    /// `STATISTICS`: one row per process with the count of each operation kind, bytes sent and
    /// received, and a totals row (the MTF paper's Table 6).
    Statistics,
    /// `COMMUNICATION MATRIX [OF BYTES | OF COUNT]`; bytes when not written.
    Matrix(MatrixMeasure),
    /// `HISTOGRAM OF SIZE|DURATION [BINS n | LOG2]`.
    Histogram {
        /// What is binned.
        of: Measure,
        /// How.
        bins: Bins,
    },
    /// `MPI TIME`: time inside MPI per process.
    MpiTime,
    /// `WAIT STATES [GROUP BY …]`: the waiting time of the selected operations per wait kind
    /// (or per group, by kind), with its share of their time in MPI.
    WaitStates(Option<WaitGroup>),
    /// `LATE SENDERS`: the messages whose receive (or the Wait completing it) waited for a
    /// late send, with that wait.
    LateSenders,
}

/// A `GROUP BY` key of `WAIT STATES`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WaitGroup {
    /// `PROCESS`: the rank that waited.
    Process,
    /// `OPERATION`: the MPI call that waited.
    Operation,
    /// `ROUTINE`: the innermost user routine enclosing the call.
    Routine,
    /// `PHASE`: the detected phase holding the call.
    Phase,
}

/// What a communication matrix cell holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MatrixMeasure {
    /// `OF BYTES` (the default).
    Bytes,
    /// `OF COUNT`: messages.
    Count,
}

/// How a histogram bins its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Bins {
    /// `LOG2` (also the default when neither is written): powers of two.
    Log2,
    /// `BINS n`: n equal-width bins between the minimum and the maximum; n >= 1.
    Count(u32),
}

/// An `ORDER BY` key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderKey {
    /// The column.
    pub column: OrderColumn,
    /// `DESC` (`ASC` is the default).
    pub descending: bool,
}

/// A column to order by; the planner checks it names a column of the result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum OrderColumn {
    /// A column by name, lower-cased (`ORDER BY SIZE` gives `size`, `ORDER BY bytes_sent` gives
    /// `bytes_sent`).
    Name(String),
    /// An aggregate of the statement: `ORDER BY SUM(SIZE)`.
    Aggregate(Aggregate),
    /// A 1-based column position: `ORDER BY 2`.
    Position(u32),
}

// ---------------------------------------------------------------------------------------------
// Canonical text.

/// `CLOCK CORRECTION OFFSETS`: the clock option as `WITH` writes it.
pub(crate) fn clock_setting(c: ClockCorrection) -> String {
    format!("CLOCK CORRECTION {}", c.name().to_ascii_uppercase())
}

/// Prints a name bare when it reads back as the same name, quoted otherwise.
pub(crate) struct NameText<'a>(pub &'a str);

impl fmt::Display for NameText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        if super::parser::is_bare_name(s) {
            f.write_str(s)
        } else if s.contains('\'') {
            write!(f, "\"{s}\"")
        } else {
            write!(f, "'{s}'")
        }
    }
}

impl fmt::Display for Statement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Statement::Select(s) => write!(f, "{s}"),
            Statement::Explain(s) => write!(f, "EXPLAIN {s}"),
            Statement::ExplainAnalyze(s) => write!(f, "EXPLAIN ANALYZE {s}"),
            Statement::ExplainSql(s) => write!(f, "EXPLAIN SQL {s}"),
            Statement::ExplainAnalysis(a) => write!(f, "EXPLAIN {a}"),
            Statement::Show(w) => write!(f, "SHOW {w}"),
            Statement::Describe(t) => write!(f, "DESCRIBE {t}"),
            Statement::DescribeAnalysis(a) => write!(f, "DESCRIBE {a}"),
            Statement::UseTrace(name) => write!(f, "USE TRACE {}", NameText(name)),
            Statement::CreateView { name, selection } => {
                write!(f, "CREATE VIEW {} AS SELECT {selection}", NameText(name))
            }
            Statement::DropView(name) => write!(f, "DROP VIEW {}", NameText(name)),
            Statement::Analysis(a) => write!(f, "{a}"),
            Statement::Relation(source, tail) => match &tail.group {
                // `SELECT COUNT(*), SUM(x) FROM CRITICAL PATH …`: the aggregates go first.
                Some(g) => {
                    let text = source.to_string();
                    let (explain, text) = match text.strip_prefix("EXPLAIN ") {
                        Some(rest) => ("EXPLAIN ", rest),
                        None => ("", text.as_str()),
                    };
                    let rest = text.strip_prefix("SELECT ").unwrap_or(text);
                    write!(
                        f,
                        "{explain}SELECT {} FROM {rest}{tail}",
                        super::relation::aggregates_text(g)
                    )
                }
                None => write!(f, "{source}{tail}"),
            },
        }
    }
}

impl fmt::Display for Analysis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Analysis::ProcessPatterns { rank, .. } => {
                write!(f, "SELECT PATTERNS FOR PROCESS({rank})")?
            }
            Analysis::CommunicationPatterns { .. } => {
                f.write_str("SELECT COMMUNICATION PATTERNS")?
            }
            Analysis::Match { template, .. } => {
                f.write_str("MATCH PATTERN (")?;
                for (i, p) in template.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "P{}:", p.rank)?;
                    for e in &p.events {
                        write!(f, " {e}")?;
                    }
                }
                f.write_str(")")?;
            }
            Analysis::Phases(_) => f.write_str("SELECT PHASES")?,
            Analysis::PhaseTree(_) => f.write_str("SHOW PHASE TREE")?,
            Analysis::Refresh => f.write_str("REFRESH PATTERNS")?,
            Analysis::Loops(rank, _) => write!(f, "SELECT LOOPS FOR PROCESS({rank})")?,
            Analysis::GlobalModel(_) => f.write_str("SELECT GLOBAL MODEL")?,
            Analysis::Topology { comm, phase, .. } => {
                f.write_str("SELECT TOPOLOGY")?;
                if let Some(c) = comm {
                    write!(f, " IN {c}")?;
                }
                if let Some(k) = phase {
                    write!(f, " IN PHASE {k}")?;
                }
            }
            Analysis::CriticalPath { summary, .. } => {
                f.write_str("SELECT CRITICAL PATH")?;
                if *summary {
                    f.write_str(" SUMMARY")?;
                }
            }
            Analysis::DelayCosts { rank, .. } => {
                f.write_str("SELECT DELAY COSTS")?;
                if let Some(r) = rank {
                    write!(f, " FOR PROCESS({r})")?;
                }
            }
            Analysis::Simulate { network, as_trace } => {
                write!(f, "SIMULATE WITH {network}")?;
                if let Some(name) = as_trace {
                    write!(f, " AS TRACE {}", NameText(name))?;
                }
            }
            Analysis::FitNetwork => f.write_str("SELECT NETWORK MODEL")?,
            Analysis::WhatIf { change } => write!(f, "SIMULATE WITH {change}")?,
            Analysis::Profile {
                by,
                per_process,
                scope,
            } => {
                f.write_str("SELECT PROFILE")?;
                if *by == crate::analysis::profile::ProfileBy::CallPath {
                    f.write_str(" BY CALL PATH")?;
                }
                if *per_process {
                    f.write_str(" PER PROCESS")?;
                }
                write!(f, "{scope}")?;
            }
            Analysis::TimeProfile { bins, scope } => {
                write!(f, "SELECT TIME PROFILE BINS {bins}{scope}")?
            }
            Analysis::CommunicationOverTime { bins, scope } => {
                write!(f, "SELECT COMMUNICATION OVER TIME BINS {bins}{scope}")?
            }
            Analysis::LogicalTrace { rank, .. } => {
                f.write_str("SELECT LOGICAL TRACE")?;
                if let Some(r) = rank {
                    write!(f, " FOR PROCESS({r})")?;
                }
            }
        }
        // The parameters set away from their defaults (SIMULATE prints its network above).
        let set: Vec<String> = super::options::settings(self)
            .into_iter()
            .filter(|s| !s.default)
            .map(|s| s.text)
            .collect();
        if !set.is_empty() {
            write!(f, " WITH {}", set.join(", "))?;
        }
        Ok(())
    }
}

impl fmt::Display for ShowWhat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ShowWhat::Traces => "TRACES",
            ShowWhat::Processes => "PROCESSES",
            ShowWhat::Communicators => "COMMUNICATORS",
            ShowWhat::Operations => "OPERATIONS",
            ShowWhat::Views => "VIEWS",
            ShowWhat::Tables => "TABLES",
        })
    }
}

impl fmt::Display for Select {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SELECT {}", self.body)?;
        for (i, key) in self.order_by.iter().enumerate() {
            f.write_str(if i == 0 { " ORDER BY " } else { ", " })?;
            write!(f, "{key}")?;
        }
        if let Some(n) = self.limit {
            write!(f, " LIMIT {n}")?;
        }
        Ok(())
    }
}

impl fmt::Display for SelectBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SelectBody::Rows(selection) => write!(f, "{selection}"),
            SelectBody::Aggregate {
                aggregates,
                selection,
                group_by,
            } => {
                for (i, a) in aggregates.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{a}")?;
                }
                write!(f, " FROM {selection}")?;
                for (i, key) in group_by.iter().enumerate() {
                    f.write_str(if i == 0 { " GROUP BY " } else { ", " })?;
                    write!(f, "{key}")?;
                }
                Ok(())
            }
            SelectBody::Statistic {
                statistic,
                target,
                filter,
            } => {
                write!(f, "{statistic}")?;
                if let Some(t) = target {
                    write!(f, " FROM {t}")?;
                }
                write!(f, "{filter}")
            }
        }
    }
}

impl fmt::Display for Selection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.target, self.filter)
    }
}

/// Each present clause, with a leading space.
impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(scope) = &self.scope {
            write!(f, " {scope}")?;
        }
        for w in &self.within {
            write!(f, " {w}")?;
        }
        if let Some(t) = &self.time {
            write!(f, " {t}")?;
        }
        if let Some(p) = &self.predicate {
            write!(f, " WHERE {p}")?;
        }
        if self.clock != ClockCorrection::None {
            write!(f, " WITH {}", clock_setting(self.clock))?;
        }
        Ok(())
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Messages => f.write_str("ALL MESSAGES"),
            Target::PointToPoint => f.write_str("POINT_TO_POINT_OPERATIONS"),
            Target::Sends => f.write_str("SENDS"),
            Target::Receives => f.write_str("RECEIVES"),
            Target::Collectives => f.write_str("COLLECTIVE_OPERATIONS"),
            Target::Operations => f.write_str("OPERATIONS"),
            Target::CpuBursts => f.write_str("CPU BURSTS"),
            Target::RoutineCalls => f.write_str("ROUTINE CALLS"),
            Target::Requests => f.write_str("REQUESTS"),
            Target::CollectiveInstances => f.write_str("COLLECTIVE INSTANCES"),
            Target::Anomalies => f.write_str("ANOMALIES"),
            Target::Metrics => f.write_str("METRICS"),
            Target::Operation(k) => match k.mpi_name() {
                Some(name) => f.write_str(name),
                None => write!(f, "{k:?}"),
            },
        }
    }
}

impl fmt::Display for RankRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

impl fmt::Display for ProcessSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProcessSelector::Process(r) => write!(f, "PROCESS({r})"),
            ProcessSelector::List(ranges) => {
                f.write_str("PROCESSES(")?;
                for (i, r) in ranges.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{r}")?;
                }
                f.write_str(")")
            }
            ProcessSelector::All => f.write_str("ALL PROCESSES"),
            ProcessSelector::InComm(c) => write!(f, "PROCESSES IN {c}"),
        }
    }
}

impl fmt::Display for CommRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommRef::Name(n) => write!(f, "COMM({})", NameText(n)),
            CommRef::Id(id) => write!(f, "COMM({id})"),
            CommRef::World => f.write_str("COMM(WORLD)"),
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Between(a, b) => write!(f, "BETWEEN PROCESS({a},{b})"),
            Scope::Among(s) => write!(f, "AMONG {s}"),
            Scope::For(s) => write!(f, "FOR {s}"),
        }
    }
}

impl fmt::Display for Within {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Within::Comm(c) => write!(f, "IN {c}"),
            Within::View(v) => write!(f, "IN VIEW {}", NameText(v)),
            Within::Phase(n) => write!(f, "IN PHASE {n}"),
            Within::Pattern(n) => write!(f, "IN PATTERN {n}"),
        }
    }
}

/// Prints nanoseconds with the largest unit that divides them exactly.
pub(crate) struct TimeText(pub Time);

impl fmt::Display for TimeText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0;
        for (unit, scale) in [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)] {
            if ns != 0 && ns.is_multiple_of(scale) {
                return write!(f, "{} {unit}", ns / scale);
            }
        }
        write!(f, "{ns} ns")
    }
}

/// Prints bytes with the largest binary unit that divides them exactly.
pub(crate) struct SizeText(pub u64);

impl fmt::Display for SizeText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        for (unit, scale) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
            if b != 0 && b.is_multiple_of(scale) {
                return write!(f, "{} {unit}", b / scale);
            }
        }
        write!(f, "{b}")
    }
}

impl fmt::Display for TimeWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "BETWEEN TIME {} AND {}",
            TimeText(self.start),
            TimeText(self.end)
        )
    }
}

impl Expr {
    fn fmt_operand(&self, f: &mut fmt::Formatter<'_>, parenthesize: bool) -> fmt::Result {
        if parenthesize {
            write!(f, "({self})")
        } else {
            write!(f, "{self}")
        }
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Compare(c) => write!(f, "{c}"),
            Expr::And(items) => {
                for (i, e) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" AND ")?;
                    }
                    e.fmt_operand(f, matches!(e, Expr::Or(..) | Expr::And(..)))?;
                }
                Ok(())
            }
            Expr::Or(items) => {
                for (i, e) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" OR ")?;
                    }
                    e.fmt_operand(f, matches!(e, Expr::Or(..)))?;
                }
                Ok(())
            }
            Expr::Not(e) => {
                f.write_str("NOT ")?;
                e.fmt_operand(f, matches!(**e, Expr::Or(..) | Expr::And(..)))
            }
        }
    }
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} ", self.field, self.op.symbol())?;
        match (&self.value, self.field) {
            (Value::Number(n), Field::Size | Field::Sent | Field::Received) => {
                match u64::try_from(*n) {
                    Ok(n) => write!(f, "{}", SizeText(n)),
                    Err(_) => write!(f, "{n}"),
                }
            }
            (Value::Number(n), Field::Duration | Field::Wait | Field::Skew) => {
                match u64::try_from(*n) {
                    Ok(n) => write!(f, "{}", TimeText(n)),
                    Err(_) => write!(f, "{n} ns"),
                }
            }
            (Value::Number(n), _) => write!(f, "{n}"),
            (Value::Comm(CommRef::Name(n)), _) => write!(f, "{}", NameText(n)),
            (Value::Comm(CommRef::Id(id)), _) => write!(f, "{id}"),
            (Value::Comm(CommRef::World), _) => f.write_str("WORLD"),
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Field::Size => "SIZE",
            Field::Tag => "TAG",
            Field::Sender => "SENDER",
            Field::Receiver => "RECEIVER",
            Field::Duration => "DURATION",
            Field::Peer => "PEER",
            Field::Root => "ROOT",
            Field::Comm => "COMM",
            Field::Wait => "WAIT",
            Field::Sent => "SENT",
            Field::Received => "RECEIVED",
            Field::Depth => "DEPTH",
            Field::Members => "MEMBERS",
            Field::Skew => "SKEW",
            Field::Counter(name) => return write!(f, "{name}"),
        })
    }
}

impl fmt::Display for Measure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Measure::Size => "SIZE",
            Measure::Duration => "DURATION",
            Measure::Sent => "SENT",
            Measure::Received => "RECEIVED",
            Measure::Counter(name) => return write!(f, "{name}"),
        })
    }
}

impl fmt::Display for Aggregate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Aggregate::Count => f.write_str("COUNT(*)"),
            Aggregate::Sum(m) => write!(f, "SUM({m})"),
            Aggregate::Avg(m) => write!(f, "AVG({m})"),
            Aggregate::Min(m) => write!(f, "MIN({m})"),
            Aggregate::Max(m) => write!(f, "MAX({m})"),
        }
    }
}

impl fmt::Display for GroupKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GroupKey::Process => "PROCESS",
            GroupKey::Peer => "PEER",
            GroupKey::Operation => "OPERATION",
            GroupKey::Tag => "TAG",
            GroupKey::Comm => "COMM",
            GroupKey::Routine => "ROUTINE",
            GroupKey::Class => "CLASS",
        })
    }
}

impl fmt::Display for Statistic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Statistic::FanIn => f.write_str("FAN_IN"),
            Statistic::FanOut => f.write_str("FAN_OUT"),
            Statistic::Statistics => f.write_str("STATISTICS"),
            Statistic::Matrix(MatrixMeasure::Bytes) => f.write_str("COMMUNICATION MATRIX OF BYTES"),
            Statistic::Matrix(MatrixMeasure::Count) => f.write_str("COMMUNICATION MATRIX OF COUNT"),
            Statistic::Histogram { of, bins } => match bins {
                Bins::Log2 => write!(f, "HISTOGRAM OF {of} LOG2"),
                Bins::Count(n) => write!(f, "HISTOGRAM OF {of} BINS {n}"),
            },
            Statistic::MpiTime => f.write_str("MPI TIME"),
            Statistic::WaitStates(None) => f.write_str("WAIT STATES"),
            Statistic::WaitStates(Some(by)) => write!(f, "WAIT STATES GROUP BY {by}"),
            Statistic::LateSenders => f.write_str("LATE SENDERS"),
        }
    }
}

impl fmt::Display for WaitGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WaitGroup::Process => "PROCESS",
            WaitGroup::Operation => "OPERATION",
            WaitGroup::Routine => "ROUTINE",
            WaitGroup::Phase => "PHASE",
        })
    }
}

impl fmt::Display for OrderKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.column {
            OrderColumn::Name(n) => write!(f, "{}", NameText(n))?,
            OrderColumn::Aggregate(a) => write!(f, "{a}")?,
            OrderColumn::Position(p) => write!(f, "{p}")?,
        }
        if self.descending {
            f.write_str(" DESC")?;
        }
        Ok(())
    }
}

//! The catalog: every target a statement can select from and the columns its rows carry, in
//! one table. The rows the engine returns (`exec`), `SHOW TABLES`, `DESCRIBE <target>` and
//! the parser's names of the record targets all read it, so that what a user is told is what
//! a statement returns.

use super::ast::Target;
use crate::results::ResultSet;

/// The type of a column's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    /// A whole number (ids, ranks, times, sizes, counts).
    Integer,
    /// Text (names).
    Text,
}

impl ColumnType {
    /// The type as `DESCRIBE` prints it.
    pub fn name(self) -> &'static str {
        match self {
            ColumnType::Integer => "integer",
            ColumnType::Text => "text",
        }
    }
}

/// One column of a target's rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    /// The column's name in results (what `ORDER BY` names).
    pub name: &'static str,
    /// Its values' type.
    pub kind: ColumnType,
    /// The unit (`ns`, `bytes`, `rank`, `id`), empty when it has none.
    pub unit: &'static str,
    /// What it holds, in one line; "(may be null)" says when some rows have none.
    pub meaning: &'static str,
}

const fn int(name: &'static str, unit: &'static str, meaning: &'static str) -> Column {
    Column {
        name,
        kind: ColumnType::Integer,
        unit,
        meaning,
    }
}

const fn text(name: &'static str, meaning: &'static str) -> Column {
    Column {
        name,
        kind: ColumnType::Text,
        unit: "",
        meaning,
    }
}

/// The columns of an operation (every operation target).
pub const OPERATION_COLUMNS: &[Column] = &[
    int("id", "id", "the operation's id"),
    int("rank", "rank", "the world rank that called it"),
    int("thread", "", "the thread (location) within the process"),
    text("operation", "the MPI call"),
    int("start_ns", "ns", "when the call started"),
    int("end_ns", "ns", "when the call ended"),
    int("duration_ns", "ns", "end minus start"),
    text("comm", "its communicator (may be null)"),
    int(
        "peer",
        "rank",
        "the destination or source of a point-to-point call (may be null)",
    ),
    int("tag", "", "the send or receive tag (may be null)"),
    int(
        "bytes_sent",
        "bytes",
        "bytes sent (a collective's send size)",
    ),
    int(
        "bytes_received",
        "bytes",
        "bytes received (a collective's receive size)",
    ),
    int(
        "root",
        "rank",
        "the root of a rooted collective (may be null)",
    ),
    text("datatype", "the MPI datatype the call named (may be null)"),
];

/// The column an operation row gains when its statement reads `WAIT`.
pub const WAIT_COLUMN: Column = int(
    "wait_ns",
    "ns",
    "time waited for a late partner (only when the statement reads WAIT)",
);

/// The columns of a matched message.
pub const MESSAGE_COLUMNS: &[Column] = &[
    int("id", "id", "the message's id"),
    int("sender", "rank", "the sending world rank"),
    int("receiver", "rank", "the receiving world rank"),
    text("comm", "its communicator"),
    int("tag", "", "the tag"),
    int("size", "bytes", "the payload, as sent"),
    int("send_time_ns", "ns", "when the send started"),
    int("recv_time_ns", "ns", "when the receive ended"),
];

/// The columns of a CPU burst.
pub const BURST_COLUMNS: &[Column] = &[
    int("id", "id", "the id of the call the burst precedes"),
    int("rank", "rank", "the world rank"),
    int("thread", "", "the thread (location)"),
    int("start_ns", "ns", "when the previous call ended"),
    int("end_ns", "ns", "when the next call started"),
    int("duration_ns", "ns", "the computation's length"),
    text("before", "the MPI call the burst precedes"),
];

/// The columns of a routine call.
pub const ROUTINE_CALL_COLUMNS: &[Column] = &[
    int("id", "id", "the call's position in the store"),
    int("rank", "rank", "the world rank"),
    int("thread", "", "the thread (location)"),
    text("routine", "the routine's name"),
    int("depth", "", "nesting depth, 0 for an outermost call"),
    int("start_ns", "ns", "when the routine was entered"),
    int("end_ns", "ns", "when it was left"),
    int("duration_ns", "ns", "end minus start (inclusive time)"),
];

/// The columns of `SELECT PROFILE` by routine (`PER PROCESS` adds `rank` first; by call path
/// `call_path` replaces `routine`).
pub const PROFILE_COLUMNS: &[Column] = &[
    int("rank", "rank", "the world rank (PER PROCESS only)"),
    text(
        "routine",
        "the routine or MPI call, (process) for the rank outside any call",
    ),
    text(
        "call_path",
        "BY CALL PATH: the calls from the outermost in, main > solve > MPI_Send",
    ),
    text("kind", "process, routine or MPI"),
    int("calls", "", "calls (the process: its locations)"),
    int("inclusive_ns", "ns", "enter to leave, summed over calls"),
    int(
        "exclusive_ns",
        "ns",
        "inclusive less the inclusive time of the calls directly inside",
    ),
    int(
        "mpi_ns",
        "ns",
        "time in MPI calls inside, at any depth (an MPI call's: all of it)",
    ),
    int(
        "computation_ns",
        "ns",
        "exclusive time not in MPI (0 for an MPI call)",
    ),
];

/// The columns of `SELECT TIME PROFILE BINS n`.
pub const TIME_PROFILE_COLUMNS: &[Column] = &[
    int("bin", "", "the bin, from 0"),
    int("start_ns", "ns", "the bin's start"),
    int("end_ns", "ns", "the bin's end (the next bin's start)"),
    text(
        "routine",
        "the routine or MPI call, (process) outside any call",
    ),
    text("kind", "process, routine or MPI"),
    int(
        "time_ns",
        "ns",
        "its exclusive time in the bin, summed over ranks",
    ),
];

/// The columns of `SELECT COMMUNICATION OVER TIME BINS n`.
pub const COMM_OVER_TIME_COLUMNS: &[Column] = &[
    int("bin", "", "the bin, from 0"),
    int("start_ns", "ns", "the bin's start"),
    int("end_ns", "ns", "the bin's end (the next bin's start)"),
    int("messages", "", "messages whose send started in the bin"),
    int("bytes", "bytes", "their bytes"),
];

/// The columns `SELECT PROFILE` leaves out: `rank` unless per process, and `call_path` or
/// `routine` by what it groups by.
pub(crate) fn profile_leave_out(
    by: crate::analysis::profile::ProfileBy,
    per_process: bool,
) -> Vec<&'static str> {
    let mut out = vec![match by {
        crate::analysis::profile::ProfileBy::Routine => "call_path",
        crate::analysis::profile::ProfileBy::CallPath => "routine",
    }];
    if !per_process {
        out.push("rank");
    }
    out
}

/// The columns of an analysis's rows, for the analyses the catalogue describes (`None` for
/// the others).
pub(crate) fn analysis_columns(a: &super::ast::Analysis) -> Option<Vec<Column>> {
    use super::ast::Analysis;
    let (columns, leave_out) = match a {
        Analysis::Profile {
            by, per_process, ..
        } => (PROFILE_COLUMNS, profile_leave_out(*by, *per_process)),
        Analysis::TimeProfile { .. } => (TIME_PROFILE_COLUMNS, Vec::new()),
        Analysis::CommunicationOverTime { .. } => (COMM_OVER_TIME_COLUMNS, Vec::new()),
        _ => return None,
    };
    Some(
        columns
            .iter()
            .filter(|c| !leave_out.contains(&c.name))
            .copied()
            .collect(),
    )
}

/// `DESCRIBE SELECT PROFILE …`: one row per column of the analysis's rows.
pub(crate) fn describe_analysis(a: &super::ast::Analysis) -> ResultSet {
    let mut r = ResultSet::new(["column", "type", "unit", "meaning"]);
    for c in analysis_columns(a).unwrap_or_default() {
        r.push(vec![
            c.name.into(),
            c.kind.name().into(),
            (!c.unit.is_empty()).then_some(c.unit).into(),
            c.meaning.into(),
        ]);
    }
    r
}

/// The names of `columns`, except those `leave_out` names (the variants of one result).
pub(crate) fn column_names(columns: &[Column], leave_out: &[&str]) -> Vec<&'static str> {
    columns
        .iter()
        .map(|c| c.name)
        .filter(|n| !leave_out.contains(n))
        .collect()
}

/// The columns of a request: a non-blocking operation and the Wait/Test that completed it.
pub const REQUEST_COLUMNS: &[Column] = &[
    int("id", "id", "the link's position in the store"),
    int("rank", "rank", "the world rank"),
    text(
        "operation",
        "the non-blocking call (MPI_Isend, MPI_Irecv, MPI_Ibcast, …)",
    ),
    int("request_op", "id", "that call's operation id"),
    int("start_ns", "ns", "when the non-blocking call started"),
    int("end_ns", "ns", "when it returned"),
    text(
        "completed_by",
        "the Wait/Test call that completed the request",
    ),
    int("completion_op", "id", "that call's operation id"),
    int("completion_start_ns", "ns", "when the Wait/Test started"),
    int("completion_end_ns", "ns", "when it returned"),
    int(
        "gap_ns",
        "ns",
        "from the call's return to the Wait/Test's start: the time left to overlap (0 if none)",
    ),
    int(
        "duration_ns",
        "ns",
        "from the call's start to the Wait/Test's end: the request's lifetime",
    ),
];

/// The columns of a collective instance.
pub const INSTANCE_COLUMNS: &[Column] = &[
    int("id", "id", "the instance's number, in the store's order"),
    text("operation", "the collective as called"),
    text("comm", "its communicator"),
    int("root", "rank", "the root of a rooted collective (may be null)"),
    int("members", "", "how many calls it joins"),
    int("start_ns", "ns", "the first member's start"),
    int("end_ns", "ns", "the last member's end"),
    int("duration_ns", "ns", "end minus start"),
    int(
        "skew_ns",
        "ns",
        "the last member's start minus the first's: how long the earliest waited for the last to arrive",
    ),
    int("bytes_sent", "bytes", "bytes sent by all members"),
    int("bytes_received", "bytes", "bytes received by all members"),
];

/// The columns of an anomaly.
pub const ANOMALY_COLUMNS: &[Column] = &[
    int(
        "id",
        "id",
        "the anomaly's position, in the order the import found them",
    ),
    text(
        "class",
        "the kind of anomaly (UnmatchedSend, IncompleteCollective, …)",
    ),
    int("rank", "rank", "the process concerned (may be null)"),
    text("operation", "the MPI call concerned (may be null)"),
    int("op", "id", "the operation concerned (may be null)"),
    int(
        "time_ns",
        "ns",
        "when: the time it names, else its operation's start (may be null)",
    ),
    text("message", "what is wrong, with the anomaly's fields"),
];

/// The columns of a counter (a hardware counter such as PAPI's).
pub const METRIC_COLUMNS: &[Column] = &[
    int("id", "id", "the counter's position among the trace's counters"),
    text("name", "its name (PAPI_TOT_CYC, …)"),
    text("description", "what it counts, as the tracer describes it"),
    text("unit", "the unit of its values (# for a plain count)"),
    text("source", "where it comes from: PAPI, rusage, user or other"),
    text(
        "mode",
        "its OTF2 metric mode (ACCUMULATED_START, ABSOLUTE_POINT, …)",
    ),
    text(
        "per_call",
        "what a call keeps of it: the delta over the call (accumulated counters) or the value at its end (absolute, relative)",
    ),
    text("value_type", "the type of its samples (UINT64, INT64, DOUBLE)"),
    int("base", "", "values are multiples of base^exponent units (2 or 10)"),
    int("exponent", "", "see base"),
];

/// The column each counter of a trace adds to the rows of its calls (operations and routine
/// calls), in the order of `metrics`, the same in query results and in the Parquet export:
/// the counter's name in lowercase with every character but a letter, a digit or `_` made
/// `_` (`PAPI_TOT_CYC` is `papi_tot_cyc`, `perf::CYCLES` is `perf__cycles`), so that it is a
/// plain SQL name; `counter_` before a name that is empty or starts with a digit; and `_` and
/// the counter's id (its row in `SELECT METRICS`) after a name another column has already.
pub fn counter_columns(metrics: &[crate::model::Metric]) -> Vec<String> {
    let mut taken: Vec<String> = OPERATION_COLUMNS
        .iter()
        .chain(ROUTINE_CALL_COLUMNS)
        .chain([&WAIT_COLUMN])
        .map(|c| c.name.to_string())
        .collect();
    for table in ["operations", "routine_calls"] {
        if let Some(schema) = crate::export::parquet::schema(table) {
            taken.extend(schema.fields().iter().map(|f| f.name().clone()));
        }
    }
    let mut out = Vec::with_capacity(metrics.len());
    for (id, m) in metrics.iter().enumerate() {
        let mut name: String = m
            .name
            .chars()
            .map(|c| match c.to_ascii_lowercase() {
                c @ ('a'..='z' | '0'..='9' | '_') => c,
                _ => '_',
            })
            .collect();
        if name.chars().next().is_none_or(|c| c.is_ascii_digit()) {
            name = format!("counter_{name}");
        }
        while taken.contains(&name) {
            name = format!("{name}_{id}");
        }
        taken.push(name.clone());
        out.push(name);
    }
    out
}

/// A target as `SHOW TABLES` lists it.
#[derive(Debug, Clone, Copy)]
pub struct TableEntry {
    /// How a statement names it.
    pub name: &'static str,
    /// What one row is.
    pub rows: &'static str,
    /// The target, when the name is one (the MPI-name family is not).
    pub target: Option<Target>,
}

/// Every target a statement can select from, in the order `SHOW TABLES` lists them.
pub const TABLES: &[TableEntry] = &[
    TableEntry {
        name: "MESSAGES",
        rows: "a matched point-to-point message (send and receive together)",
        target: Some(Target::Messages),
    },
    TableEntry {
        name: "OPERATIONS",
        rows: "an MPI call",
        target: Some(Target::Operations),
    },
    TableEntry {
        name: "POINT_TO_POINT_OPERATIONS",
        rows: "a send or receive call",
        target: Some(Target::PointToPoint),
    },
    TableEntry {
        name: "SENDS",
        rows: "a sending call (MPI_Send, MPI_Isend, …, MPI_Sendrecv)",
        target: Some(Target::Sends),
    },
    TableEntry {
        name: "RECEIVES",
        rows: "a receiving call (MPI_Recv, MPI_Irecv, …, MPI_Sendrecv)",
        target: Some(Target::Receives),
    },
    TableEntry {
        name: "COLLECTIVE_OPERATIONS",
        rows: "a member's call of a collective",
        target: Some(Target::Collectives),
    },
    TableEntry {
        name: "MPI_<name> | BROADCAST | <collective>",
        rows: "a call of that one MPI operation (SHOW OPERATIONS lists the trace's)",
        target: None,
    },
    TableEntry {
        name: "CPU BURSTS",
        rows: "the computation between a location's consecutive calls",
        target: Some(Target::CpuBursts),
    },
    TableEntry {
        name: "ROUTINE CALLS",
        rows: "a call of a user routine, enter to leave",
        target: Some(Target::RoutineCalls),
    },
    TableEntry {
        name: "REQUESTS",
        rows: "a non-blocking call and the Wait/Test that completed it",
        target: Some(Target::Requests),
    },
    TableEntry {
        name: "COLLECTIVE INSTANCES",
        rows: "one instance of a collective: its members' calls together",
        target: Some(Target::CollectiveInstances),
    },
    TableEntry {
        name: "ANOMALIES",
        rows: "something the import found wrong or missing",
        target: Some(Target::Anomalies),
    },
    TableEntry {
        name: "METRICS",
        rows: "a counter the trace recorded (a hardware counter such as PAPI's)",
        target: Some(Target::Metrics),
    },
];

/// The record targets as a statement writes them, word by word (the parser reads them here).
pub(crate) const RECORD_TARGETS: &[(&[&str], Target)] = &[
    (&["ROUTINE", "CALLS"], Target::RoutineCalls),
    (&["REQUESTS"], Target::Requests),
    (&["COLLECTIVE", "INSTANCES"], Target::CollectiveInstances),
    (&["ANOMALIES"], Target::Anomalies),
    (&["METRICS"], Target::Metrics),
];

/// The columns of `target`'s rows (an operation row gains [`WAIT_COLUMN`] when its statement
/// reads `WAIT`).
pub fn columns(target: Target) -> &'static [Column] {
    match target {
        Target::Messages => MESSAGE_COLUMNS,
        Target::CpuBursts => BURST_COLUMNS,
        Target::RoutineCalls => ROUTINE_CALL_COLUMNS,
        Target::Requests => REQUEST_COLUMNS,
        Target::CollectiveInstances => INSTANCE_COLUMNS,
        Target::Anomalies => ANOMALY_COLUMNS,
        Target::Metrics => METRIC_COLUMNS,
        Target::Operations
        | Target::PointToPoint
        | Target::Sends
        | Target::Receives
        | Target::Collectives
        | Target::Operation(_) => OPERATION_COLUMNS,
    }
}

/// `SHOW TABLES`: one row per target.
pub(crate) fn show_tables() -> ResultSet {
    let mut r = ResultSet::new(["target", "rows"]);
    for t in TABLES {
        r.push(vec![t.name.into(), t.rows.into()]);
    }
    r
}

/// `DESCRIBE <target>`: one row per column; the rows of calls (operations, routine calls) list
/// a column per counter of `metrics` (the current trace's, none without one) after theirs.
pub(crate) fn describe(target: Target, metrics: &[crate::model::Metric]) -> ResultSet {
    let mut r = ResultSet::new(["column", "type", "unit", "meaning"]);
    for c in columns(target) {
        r.push(vec![
            c.name.into(),
            c.kind.name().into(),
            (!c.unit.is_empty()).then_some(c.unit).into(),
            c.meaning.into(),
        ]);
    }
    if target.has_counters() {
        for (m, name) in metrics.iter().zip(counter_columns(metrics)) {
            let per_call = match m.values {
                crate::model::MetricValues::Accumulated => "its delta over the call",
                _ => "its value at the call's end",
            };
            r.push(vec![
                name.into(),
                ColumnType::Integer.name().into(),
                (!m.unit.is_empty()).then(|| m.unit.clone()).into(),
                format!(
                    "counter {}: {per_call}, in raw counts of its unit (null where the call has no sample)",
                    m.name
                )
                .into(),
            ]);
        }
    }
    // Operation rows gain the wait column when their statement reads WAIT.
    if columns(target) == OPERATION_COLUMNS {
        let c = WAIT_COLUMN;
        r.push(vec![
            c.name.into(),
            c.kind.name().into(),
            (!c.unit.is_empty()).then_some(c.unit).into(),
            c.meaning.into(),
        ]);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::{parse_statement, Statement};

    /// Each target `SHOW TABLES` names is what the parser reads from that name, and
    /// `DESCRIBE` of it lists its rows' columns.
    #[test]
    fn every_listed_target_parses_from_its_name() {
        for entry in TABLES {
            let Some(target) = entry.target else {
                continue;
            };
            let parsed = parse_statement(&format!("DESCRIBE {}", entry.name)).unwrap();
            assert_eq!(parsed, Statement::Describe(target), "{}", entry.name);
            let described = describe(target, &[]);
            let names: Vec<String> = described
                .rows
                .iter()
                .map(|r| r[0].render())
                .filter(|n| n != WAIT_COLUMN.name)
                .collect();
            let expected: Vec<&str> = columns(target).iter().map(|c| c.name).collect();
            assert_eq!(names, expected, "{}", entry.name);
        }
        for (words, target) in RECORD_TARGETS {
            assert!(
                TABLES
                    .iter()
                    .any(|t| t.name == words.join(" ") && t.target == Some(*target)),
                "{words:?}"
            );
        }
    }
}

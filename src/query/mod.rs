//! The query layer: the language ([`ast`], parsed by [`parse_statement`]; the grammar, with
//! examples that the tests parse, is `grammar/query.ebnf`) and the [`Session`] that runs it
//! over the current trace, returning the typed [`ResultSet`](crate::results::ResultSet) or
//! streaming rows ([`Session::run_into`]).
//!
//! Inside, a statement goes through name resolution (`names`), planning into bitmap algebra
//! over the store's indexes (`plan`, whose steps `EXPLAIN` prints), and the operators that read
//! and filter rows, aggregate, order and limit them (`exec`); statistics (`statistic`) and
//! analyses (`analyses`) render their findings as rows.

// No input reaches a panic: `unwrap` and `expect` are denied here outside tests, and this
// module has no exception (every former one became an error).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod analyses;
pub mod ast;
pub mod catalog;
mod cursor;
mod exec;
mod keywords;
mod lexer;
mod names;
mod options;
pub mod parser;
mod plan;
pub mod relation;
mod session;
mod sql;
mod sql_records;
mod statistic;
mod waits;

pub use ast::{
    Aggregate, Bins, ClockCorrection, CmpOp, CommRef, Comparison, Expr, Field, Filter, GroupKey,
    MatrixMeasure, Measure, OrderColumn, OrderKey, ProcessSelector, RankRange, Scope, Select,
    SelectBody, Selection, ShowWhat, Statement, Statistic, Target, TimeWindow, WaitGroup, Within,
};
pub use cursor::Rows;
pub use keywords::{COLLECTIVE_WORDS, KEYWORDS};
pub use session::{query_error, Session};

use crate::error::Error;
pub use parser::{parse_script, parse_statement, QueryError};

/// Refuses `what` on a trace whose source recorded the order of its events but no times
/// ([`TraceHeader::untimed`](crate::model::TraceHeader::untimed)).
pub(crate) fn needs_times(trace: &crate::Trace, what: &str) -> Result<(), Error> {
    if trace.header().untimed {
        Err(usage(format!(
            "{what} needs times, and trace {:?} has none: its source recorded the order of \
             its events only (loops, patterns and topology work on order alone)",
            trace.name()
        )))
    } else {
        Ok(())
    }
}

/// A statement the language accepts but the trace or the clauses cannot serve, as the crate's
/// error.
pub(crate) fn usage(msg: impl Into<String>) -> Error {
    Error::Usage(msg.into())
}

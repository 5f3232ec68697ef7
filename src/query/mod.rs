//! The query layer: the language ([`ast`], parsed by [`parse_statement`]; the grammar, with
//! examples that the tests parse, is `grammar/query.ebnf`), the [`Engine`] that plans and runs
//! it over the store's bitmap indexes, the [`Session`] that keeps the current trace, and the
//! typed [`ResultSet`](crate::results::ResultSet) it returns.

// No input reaches a panic: `unwrap` and `expect` are denied here outside tests, and this
// module has no exception (every former one became an error).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod ast;
mod engine;
mod lexer;
pub mod parser;

pub use ast::{
    Aggregate, Bins, CmpOp, CommRef, Comparison, Expr, Field, Filter, GroupKey, MatrixMeasure,
    Measure, OrderColumn, OrderKey, ProcessSelector, RankRange, Scope, Select, SelectBody,
    Selection, ShowWhat, Statement, Statistic, Target, TimeWindow, Within,
};
pub use engine::{query_error, Engine, PlanStep, Session};
pub use parser::{parse_script, parse_statement, QueryError};

//! The query layer: the language (ast, parser), its results, and the engine that runs it.

pub mod ast;
mod engine;
mod lexer;
mod parser;
mod result;

pub use engine::{query_error, Engine, PlanStep, Session};
pub use parser::{parse_script, parse_statement, QueryError};
pub use result::{ResultSet, Value};

//! The query language: its syntax tree ([`ast`]) and parser ([`parser`]). The grammar, with
//! examples that the tests parse, is `grammar/query.ebnf`.

pub mod ast;
mod lexer;
pub mod parser;

pub use ast::*;
pub use parser::{parse_script, parse_statement, QueryError};

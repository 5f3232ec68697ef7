//! The one error type of the library. Every error a user can cause says where and why.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// A position in an input file, for error messages: `file:line:column`, or a byte offset
/// for binary formats.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    /// The file's path as the user gave it.
    pub file: String,
    /// 1-based line (0 for binary inputs).
    pub line: u64,
    /// 1-based column (for binary inputs: the byte offset).
    pub column: u64,
    /// The rule broken, in a few words (`syntax`, `unknown communicator`, `time goes backwards`, …).
    pub rule: String,
    /// What was wrong, and what was expected.
    pub message: String,
    /// The offending text (the line), shown under the message with a caret.
    pub text: String,
    /// Whether the bytes are wrong or the file ends before its data does.
    pub fault: InputFault,
}

/// What kind of fault an [`InputError`] reports: bytes that cannot be decoded, or a file
/// that ends before its data does (a partial copy, whose reader may keep what came before).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum InputFault {
    /// The input does not follow its format (or a rule mtfdb's own formats keep).
    Invalid,
    /// The file ends inside its data.
    Truncated,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(
                f,
                "{}: byte {}: {}: {}",
                self.file, self.column, self.rule, self.message
            )?;
        } else {
            write!(
                f,
                "{}:{}:{}: {}: {}",
                self.file, self.line, self.column, self.rule, self.message
            )?;
        }
        if !self.text.is_empty() {
            let caret = " ".repeat(self.column.saturating_sub(1) as usize);
            write!(f, "\n    {}\n    {}^", self.text, caret)?;
        }
        Ok(())
    }
}

/// Everything that can go wrong in mtfdb, by kind, so that a program can match on what
/// happened: a query's syntax ([`Error::Syntax`], with its line and column), a name that names
/// nothing ([`Error::UnknownName`], [`Error::NoSuchTrace`]), a limit ([`Error::LimitExceeded`]),
/// damaged storage ([`Error::Corrupt`]), I/O ([`Error::Io`], [`Error::Storage`]), an input that
/// cannot be read ([`Error::Input`], [`Error::Unsupported`]), a cancelled statement
/// ([`Error::Cancelled`]). New kinds may be added: match with a `_` arm.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// An input file broke the format or a metamodel rule; the import was rejected.
    #[error("{0}")]
    Input(Box<InputError>),
    /// An input mtfdb does not read: a format it does not recognise, or a variant of one it
    /// does not support.
    #[error("{0}")]
    Unsupported(String),
    /// A statement of the query language that does not parse: where (line, column) and why.
    #[error("{}", crate::query::parser::Located(.0))]
    Syntax(Box<crate::query::QueryError>),
    /// A statement or a call names something the trace or the database does not have: a
    /// process, a communicator, a view, a phase, a pattern, a result column.
    #[error("{message}")]
    UnknownName {
        /// What kind of thing was named.
        what: NameKind,
        /// The name (or number) as given.
        name: String,
        /// The whole message, with what does exist.
        message: String,
    },
    /// A request beyond one of mtfdb's documented limits (nesting depth, histogram bins, name
    /// length, …), or a result that does not fit its type (a sum past 2^127 - 1).
    #[error("{message}")]
    LimitExceeded {
        /// Which limit.
        limit: Limit,
        /// The whole message, with the limit's value.
        message: String,
    },
    /// A trace item broke a metamodel rule at the import seam
    /// ([`crate::ingest::ValidatingSink`]); a reader that knows where the item came from
    /// turns it into an [`Error::Input`] at that place.
    #[error("{0}")]
    Rule(Box<crate::ingest::validate::Violation>),
    /// The database could not be used (wrong format version, locked, not a database, …).
    #[error("database {}: {message}", path.display())]
    Database {
        /// The database path.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// Stored data failed a check (checksum, decoding): the database is damaged.
    #[error("corrupt database: {0}")]
    Corrupt(String),
    /// The storage engine reported an error (disk full, I/O).
    #[error("storage error: {0}")]
    Storage(String),
    /// No trace by that name.
    #[error("no trace named {name:?} in the database{}", list_names(available))]
    NoSuchTrace {
        /// The name asked for.
        name: String,
        /// The traces that do exist.
        available: Vec<String>,
    },
    /// A trace by that name exists already.
    #[error("a trace named {0:?} already exists (drop it first, or import under another --name)")]
    TraceExists(String),
    /// The user cancelled the running statement (Ctrl-C).
    #[error("cancelled")]
    Cancelled,
    /// One stage of an import stopped because another failed; that other stage's error is
    /// the one reported (the import never returns this one when it knows the cause).
    #[error("the import pipeline stopped")]
    PipelineStopped,
    /// A request that cannot be carried out as asked (bad argument).
    #[error("{0}")]
    Usage(String),
    /// A result's value read as a type it does not convert to
    /// ([`Row::get`](crate::results::Row::get)): text as a number, null as anything but an
    /// `Option`, a number outside the type's range.
    #[error("{message}")]
    ColumnType {
        /// The column's name.
        column: String,
        /// The whole message: the value found and the type asked for.
        message: String,
    },
}

/// What an [`Error::UnknownName`] names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum NameKind {
    /// A world rank the trace does not have.
    Process,
    /// A communicator, by name or id.
    Communicator,
    /// A stored view.
    View,
    /// An execution phase, by number.
    Phase,
    /// A communication pattern, by number.
    Pattern,
    /// A column of a result (`ORDER BY`).
    Column,
    /// A database directory that does not exist.
    Database,
    /// A trace format (`--format`).
    Format,
    /// A hardware counter of a trace (`SUM(PAPI_TOT_CYC)`), by name.
    Counter,
}

/// Which limit an [`Error::LimitExceeded`] hit; each is documented in `grammar/query.ebnf`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Limit {
    /// Nesting of parentheses and `NOT` in a `WHERE` condition.
    NestingDepth,
    /// `HISTOGRAM … BINS n`.
    HistogramBins,
    /// The length of a view's or trace's name.
    NameLength,
    /// A value that does not fit its type.
    ValueRange,
}

fn list_names(names: &[String]) -> String {
    if names.is_empty() {
        " (it holds none)".to_string()
    } else {
        format!(" (it holds: {})", names.join(", "))
    }
}

impl Error {
    /// An [`Error::UnknownName`].
    pub fn unknown(what: NameKind, name: impl Into<String>, message: impl Into<String>) -> Error {
        Error::UnknownName {
            what,
            name: name.into(),
            message: message.into(),
        }
    }

    /// An [`Error::LimitExceeded`].
    pub fn limit(limit: Limit, message: impl Into<String>) -> Error {
        Error::LimitExceeded {
            limit,
            message: message.into(),
        }
    }

    /// An [`Error::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// An [`Error::Input`].
    pub fn input(
        file: impl Into<String>,
        line: u64,
        column: u64,
        rule: impl Into<String>,
        message: impl Into<String>,
        text: impl Into<String>,
    ) -> Error {
        Error::Input(Box::new(InputError {
            file: file.into(),
            line,
            column,
            rule: rule.into(),
            message: message.into(),
            text: text.into(),
            fault: InputFault::Invalid,
        }))
    }

    /// An [`Error::Input`] about a binary `file` that ends at byte `offset` inside the data
    /// (rule `truncated file`, [`InputFault::Truncated`]).
    pub fn truncated(file: impl Into<String>, offset: u64, message: impl Into<String>) -> Error {
        Error::Input(Box::new(InputError {
            file: file.into(),
            line: 0,
            column: offset,
            rule: "truncated file".to_string(),
            message: message.into(),
            text: String::new(),
            fault: InputFault::Truncated,
        }))
    }

    /// Whether the error says that a file ends before its data does (a partial copy), rather
    /// than that its bytes cannot be decoded.
    pub fn is_truncated(&self) -> bool {
        matches!(self, Error::Input(i) if i.fault == InputFault::Truncated)
    }
}

/// A sled error in words, without sled's debug forms (`backtrace ()`, `Some(Inline(…))`):
/// only the old catalog of a format-7 database is read with sled ([`crate::store`]).
pub(crate) fn sled_words(e: &sled::Error) -> String {
    match e {
        sled::Error::Io(io) => os_message(io),
        sled::Error::Corruption { .. } => "its data is damaged".to_string(),
        sled::Error::CollectionNotFound(_) => "a part of it is missing".to_string(),
        sled::Error::Unsupported(what) => what.clone(),
        sled::Error::ReportableBug(_) => "sled failed reading it".to_string(),
    }
}

/// An I/O error in words ("No space left on device (os error 28)"); sled wraps the
/// operating system's error so that its own display shows only the debug form.
fn os_message(io: &std::io::Error) -> String {
    if let Some(code) = io.raw_os_error() {
        return std::io::Error::from_raw_os_error(code).to_string();
    }
    let text = io.to_string();
    if text.starts_with("Os {") {
        // sled re-wraps the OS error as its debug text; its kind still says what happened.
        io.kind().to_string()
    } else {
        text
    }
}

/// The library's result type.
pub type Result<T> = std::result::Result<T, Error>;

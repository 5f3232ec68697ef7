//! # mtfdb
//!
//! An embedded query database engine for MPI communication traces, built on the MTF
//! metamodel (Alawneh and Hamou-Lhadj). Traces are imported from their source format,
//! validated, matched (messages, requests, collective instances) and stored as checksummed
//! column chunks with roaring bitmap indexes; the query language selects, aggregates and
//! analyses them.
//!
//! ```no_run
//! use mtfdb::Database;
//! let db = Database::open("traces.mtfdb")?;
//! db.import("wrf16.mtf", Some("wrf16"))?;
//! for trace in db.traces()? {
//!     println!("{}: {} operations", trace.name, trace.summary.operations);
//! }
//! # Ok::<(), mtfdb::Error>(())
//! ```
//!
//! A [`Session`] runs statements on the current trace: [`Session::run`] returns a whole
//! [`ResultSet`], [`Session::query`] a cursor ([`Rows`]) of typed [`Row`]s read as it is
//! advanced, [`Session::run_into`] hands rows to a [`RowSink`] as they come.
//!
//! ```no_run
//! let mut session = mtfdb::Session::new(mtfdb::Database::open("traces.mtfdb")?);
//! session.use_trace("wrf16")?;
//! for row in session.query("SELECT ALL MESSAGES IN COMM(C1) LIMIT 10")? {
//!     let row = row?;
//!     let (sender, bytes): (u32, u64) = (row.get("sender")?, row.get("size")?);
//!     println!("{sender}: {bytes} bytes");
//! }
//! # Ok::<(), mtfdb::Error>(())
//! ```
//!
//! The API is what this page lists: the database and its traces, the session and its cursor,
//! results, errors, the metamodel ([`model`]), the query language ([`query`]) and export
//! ([`export`]).

mod anomaly_text;
mod by_rank;
mod database;
mod error;
pub mod export;
mod grouping;
pub mod model;
pub mod query;
pub mod results;
pub mod units;

// Internals, not part of the API: public only so that the command line, the tests and the
// benches can reach the pieces they exercise directly (the storage layer, the readers, the
// analyses, the scenario generators). They may change at any time.
#[doc(hidden)]
pub mod analysis;
#[doc(hidden)]
pub mod gen;
#[doc(hidden)]
pub mod hash;
#[doc(hidden)]
pub mod import;
#[doc(hidden)]
pub mod ingest;
#[doc(hidden)]
pub mod store;

/// One stored trace: its metadata, rows and bitmap indexes.
pub use database::Trace;
/// A database of imported traces, and how traces get into it.
pub use database::{default_database_path, Database, SourceFormat, TraceInfo};
/// The one error type, with what a program matches on.
pub use error::{Error, InputError, InputFault, Limit, NameKind, Result};
/// The interface a program that produces events itself imports them through
/// ([`Database::import_events`]), with what an import reports and checks.
pub use ingest::{EventSink, Policy, Progress, ValidatingSink};
/// A session on a database, and the cursor its queries return.
pub use query::{Rows, Session};
/// Typed results: a whole result, one row of a cursor, and the conversions of its values.
pub use results::{ColumnIndex, FromValue, ResultSet, Row, RowSink, Value};
/// The bitmap indexes [`Trace::index`] reads.
pub use store::IndexDim;

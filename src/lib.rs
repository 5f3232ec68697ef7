//! # mtfdb
//!
//! An embedded query database engine for MPI communication traces, built on the MTF
//! metamodel (Alawneh and Hamou-Lhadj). Traces are imported from their source format,
//! validated, matched (messages, requests, collective instances) and stored in sled as
//! checksummed column chunks with roaring bitmap indexes.
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

pub mod analysis;
pub mod database;
pub mod error;
pub mod export;
pub mod gen;
pub mod hash;
pub mod import;
pub mod ingest;
pub mod model;
pub mod query;
pub mod results;
pub mod store;

pub use database::{Database, SourceFormat, Trace, TraceInfo};
pub use error::{Error, InputError, Limit, NameKind, Result};
pub use results::{ResultSet, RowSink, Value};

//! The query layer: results (and, as it lands, the language, its planner and executor).

mod result;

pub use result::{ResultSet, Value};

//! Analyses over stored traces. They read through the same [`Trace`](crate::Trace) API as
//! queries do, chunk by chunk.

pub mod comm_patterns;
pub mod process_events;
pub mod stats;

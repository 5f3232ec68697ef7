//! Analyses over stored traces. They read through the same [`Trace`](crate::Trace) API as
//! queries do, chunk by chunk; [`phases`] works on a sequence of pattern instances already
//! extracted.

pub mod comm_patterns;
pub mod phases;
pub mod process_events;
pub mod stats;

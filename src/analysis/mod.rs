//! Analyses over stored traces. They read through the same [`Trace`](crate::Trace) API as
//! queries do, chunk by chunk; [`patterns`] and [`phases`] are pure: they work on symbol
//! sequences that [`process_events`] and [`detection`] read out of a trace.

pub mod comm_patterns;
pub mod detection;
pub mod patterns;
pub mod phases;
pub mod process_events;
pub mod stats;

//! Analyses over stored traces. They read through the same [`Trace`](crate::Trace) API as
//! queries do, chunk by chunk, except [`patterns`], which is pure: it works on symbol
//! sequences that a caller has read out of a trace.

pub mod patterns;
pub mod stats;

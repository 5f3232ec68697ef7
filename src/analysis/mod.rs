//! Analyses over stored traces. They read through the same [`Trace`](crate::Trace) API as
//! queries do, chunk by chunk; [`patterns`] and [`phases`] are pure: they work on symbol
//! sequences that [`process_events`] and [`detection`] read out of a trace. [`topology`] is
//! pure as well: it identifies the communication topology of a rank-to-rank byte matrix.

pub mod clock;
pub mod comm_patterns;
pub mod critical_path;
pub mod delay_costs;
pub mod detection;
pub mod global_model;
pub mod loops;
mod op_times;
pub mod patterns;
pub mod phases;
pub mod process_events;
pub mod profile;
pub mod rank_classes;
pub mod replay;
pub mod stats;
pub mod structure;
pub mod time_bins;
pub mod topology;
pub mod waits;

//! Hardware and software counters a trace recorded (OTF2 metric members: PAPI counters,
//! rusage values, user metrics), and how a call's value of each is kept.

use serde::{Deserialize, Serialize};

/// What a counter's samples mean, after OTF2's metric value property.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetricValues {
    /// A count that only grows (a PAPI counter): a call keeps its delta over the call.
    Accumulated,
    /// A value at a point in time (temperature, rate): a call keeps the value at its end.
    Absolute,
    /// A value relative to something the trace does not say: a call keeps the value at its
    /// end.
    Relative,
}

impl MetricValues {
    /// The name the METRICS target shows.
    pub fn name(self) -> &'static str {
        match self {
            MetricValues::Accumulated => "accumulated",
            MetricValues::Absolute => "absolute",
            MetricValues::Relative => "relative",
        }
    }
}

/// One counter of a trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metric {
    /// Its name (`PAPI_TOT_CYC`): the column it adds to operations and routine calls.
    pub name: String,
    /// What it counts, as the tracer describes it.
    pub description: String,
    /// The unit of its values (`#` for a plain count).
    pub unit: String,
    /// Where it comes from: `PAPI`, `rusage`, `user`, `other`.
    pub source: String,
    /// Its OTF2 metric mode as `otf2-print` names it (`ACCUMULATED_START`, …).
    pub mode: String,
    /// What a sample means, and so what a call keeps.
    pub values: MetricValues,
    /// The type of its samples (`UINT64`, `INT64`, `DOUBLE`).
    pub value_type: String,
    /// The unit's scale: values are multiples of `base ^ exponent` units (base 2 or 10).
    pub base: u8,
    /// See `base`.
    pub exponent: i64,
}

//! Hardware counters (OTF2 metric members, PAPI's among them): the counters the definitions
//! declare, each location's latest samples, and the value each call keeps.
//!
//! Score-P records a `Metric` event of a synchronous metric class just before each Enter and
//! Leave, at the same time. A call keeps, per counter:
//! - accumulated counters (OTF2_METRIC_VALUE_ACCUMULATED): the delta over the call, the
//!   counter's value at the Leave minus its value at the Enter. With START or POINT timing a
//!   sample is the count so far; with LAST timing it counts since the previous sample and
//!   with NEXT timing until the next one, so those samples are summed per location first.
//! - absolute and relative values (a temperature, a rate): the value sampled at the Leave,
//!   since a difference of them means nothing.
//!
//! A call has no value of a counter when its Enter or Leave had no sample of it at its time
//! (asynchronous metrics, metric instances recorded by other locations, a call closed at the
//! end of its location). Integer samples are kept as 64-bit signed values (an unsigned count
//! past 2^63 wraps); DOUBLE samples are kept rounded to whole units.
//!
//! Memory: per location, one value per counter; per open call, its values at the Enter.

use std::sync::Arc;

use super::defs::Definitions;
use crate::hash::FxHashMap;
use crate::model::{Metric, MetricValues, Time};

/// OTF2_Type of DOUBLE and FLOAT values (the others are integers).
const TYPE_FLOAT: u8 = 9;
const TYPE_DOUBLE: u8 = 10;
/// OTF2_MetricTiming (the high half-byte of the mode).
const TIMING_LAST: u8 = 2 << 4;
const TIMING_NEXT: u8 = 3 << 4;

/// The counters of a trace, in the order the sink gets them (by metric member id).
#[derive(Debug)]
pub(crate) struct MetricTable {
    /// The definitions the sink gets.
    pub metrics: Vec<Metric>,
    /// Per counter: its OTF2 metric mode.
    modes: Vec<u8>,
    /// Per metric class or instance id: each of its values' counter (None: an undefined member).
    classes: FxHashMap<u32, Vec<Option<usize>>>,
}

impl MetricTable {
    /// The counters `defs` declare; `None` when it declares none.
    pub fn new(defs: &Definitions) -> Option<Arc<MetricTable>> {
        if defs.metric_members.is_empty() {
            return None;
        }
        let mut ids: Vec<u32> = defs.metric_members.keys().copied().collect();
        ids.sort_unstable();
        let index: FxHashMap<u32, usize> = ids.iter().enumerate().map(|(i, &id)| (id, i)).collect();
        let mut metrics = Vec::with_capacity(ids.len());
        let mut modes = Vec::with_capacity(ids.len());
        for id in &ids {
            let m = &defs.metric_members[id];
            modes.push(m.mode);
            metrics.push(Metric {
                name: defs.string(m.name).to_string(),
                description: defs.string(m.description).to_string(),
                unit: defs.string(m.unit).to_string(),
                source: source_name(m.source).to_string(),
                mode: mode_name(m.mode),
                values: values_of(m.mode),
                value_type: type_name(m.value_type).to_string(),
                base: if m.base == 0 { 2 } else { 10 },
                exponent: m.exponent,
            });
        }
        let classes = defs
            .metric_classes
            .iter()
            .map(|(&id, c)| {
                let members = c.members.iter().map(|m| index.get(m).copied()).collect();
                (id, members)
            })
            .collect();
        Some(Arc::new(MetricTable {
            metrics,
            modes,
            classes,
        }))
    }
}

fn values_of(mode: u8) -> MetricValues {
    match mode & 0x0f {
        1 => MetricValues::Absolute,
        2 => MetricValues::Relative,
        _ => MetricValues::Accumulated,
    }
}

fn source_name(source: u8) -> &'static str {
    match source {
        1 => "PAPI",
        2 => "rusage",
        3 => "user",
        _ => "other",
    }
}

fn mode_name(mode: u8) -> String {
    let value = match mode & 0x0f {
        0 => "ACCUMULATED",
        1 => "ABSOLUTE",
        2 => "RELATIVE",
        _ => return format!("mode {mode}"),
    };
    let timing = match mode & 0xf0 {
        0 => "START",
        0x10 => "POINT",
        TIMING_LAST => "LAST",
        TIMING_NEXT => "NEXT",
        _ => return format!("mode {mode}"),
    };
    format!("{value}_{timing}")
}

fn type_name(t: u8) -> &'static str {
    match t {
        1 => "UINT8",
        2 => "UINT16",
        3 => "UINT32",
        4 => "UINT64",
        5 => "INT8",
        6 => "INT16",
        7 => "INT32",
        8 => "INT64",
        TYPE_FLOAT => "FLOAT",
        TYPE_DOUBLE => "DOUBLE",
        _ => "unknown",
    }
}

/// A call's values, one per counter of its trace.
pub(crate) type CallValues = Box<[Option<i64>]>;

/// One location's latest samples.
#[derive(Debug)]
pub(crate) struct LocationMetrics {
    table: Arc<MetricTable>,
    /// Per counter: its value at its last sample (a count so far for accumulated counters),
    /// and when that was.
    last: Vec<Option<(Time, i64)>>,
    /// Per counter with LAST or NEXT timing: the sum of its samples so far.
    sum: Vec<i64>,
}

impl LocationMetrics {
    /// No samples yet.
    pub fn new(table: Arc<MetricTable>) -> LocationMetrics {
        let n = table.metrics.len();
        LocationMetrics {
            table,
            last: vec![None; n],
            sum: vec![0; n],
        }
    }

    /// A `Metric` record of class or instance `metric` at `time` with `values` (their OTF2
    /// type and raw bits). A class not defined, or a value of a member not defined, is
    /// skipped.
    pub fn sample(&mut self, metric: u32, values: &[(u8, u64)], time: Time) {
        let Some(members) = self.table.classes.get(&metric) else {
            return;
        };
        for (&(kind, bits), member) in values.iter().zip(members) {
            let Some(i) = *member else { continue };
            let v = match kind {
                TYPE_DOUBLE => f64::from_bits(bits).round() as i64,
                TYPE_FLOAT => f32::from_bits(bits as u32).round() as i64,
                _ => bits as i64,
            };
            let mode = self.table.modes[i];
            let value = if values_of(mode) != MetricValues::Accumulated {
                v
            } else {
                match mode & 0xf0 {
                    TIMING_LAST => {
                        self.sum[i] = self.sum[i].wrapping_add(v);
                        self.sum[i]
                    }
                    TIMING_NEXT => {
                        let before = self.sum[i];
                        self.sum[i] = before.wrapping_add(v);
                        before
                    }
                    _ => v,
                }
            };
            self.last[i] = Some((time, value));
        }
    }

    /// The values sampled at `time` (an Enter's or a Leave's), `None` if there is none.
    pub fn at(&self, time: Time) -> Option<CallValues> {
        let values: CallValues = self
            .last
            .iter()
            .map(|l| l.filter(|&(t, _)| t == time).map(|(_, v)| v))
            .collect();
        values.iter().any(Option::is_some).then_some(values)
    }

    /// What a call that started with `enter` values and ends at `time` keeps (see the module
    /// doc); `None` when it keeps nothing.
    pub fn call(&self, enter: Option<&CallValues>, time: Time) -> Option<CallValues> {
        let leave = self.at(time)?;
        let values: CallValues = leave
            .iter()
            .enumerate()
            .map(|(i, &at_leave)| {
                if values_of(self.table.modes[i]) != MetricValues::Accumulated {
                    return at_leave;
                }
                let at_enter = enter.and_then(|e| e[i])?;
                Some(at_leave?.wrapping_sub(at_enter))
            })
            .collect();
        values.iter().any(Option::is_some).then_some(values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::otf2::defs::{MetricClass, MetricMember};

    /// Three counters: accumulated with START, LAST and NEXT timing, and an absolute one.
    fn table() -> Arc<MetricTable> {
        let mut defs = Definitions::default();
        for (id, mode) in [(0u32, 0u8), (1, TIMING_LAST), (2, TIMING_NEXT), (3, 0x11)] {
            let member = MetricMember {
                name: u32::MAX,
                description: u32::MAX,
                unit: u32::MAX,
                source: 1,
                mode,
                value_type: 4,
                base: 1,
                exponent: 0,
            };
            defs.metric_members.insert(id, member);
        }
        let members = vec![0, 1, 2, 3];
        defs.metric_classes.insert(7, MetricClass { members });
        MetricTable::new(&defs).unwrap()
    }

    #[test]
    fn a_call_keeps_deltas_of_accumulated_counters_and_the_last_value_of_others() {
        let mut m = LocationMetrics::new(table());
        let raw = |v: &[u64]| v.iter().map(|&v| (4u8, v)).collect::<Vec<_>>();
        m.sample(7, &raw(&[100, 5, 7, 40]), 10);
        let enter = m.at(10);
        assert_eq!(
            enter.as_deref(),
            Some(&[Some(100), Some(5), Some(0), Some(40)][..])
        );
        // A nested call's samples in between count for LAST and NEXT timing.
        m.sample(7, &raw(&[130, 20, 9, 41]), 12);
        m.sample(7, &raw(&[150, 4, 3, 45]), 15);
        let call = m.call(enter.as_ref(), 15);
        // START: 150 - 100; LAST: 20 + 4 after the Enter; NEXT: 7 + 9 before the Leave.
        assert_eq!(
            call.as_deref(),
            Some(&[Some(50), Some(24), Some(16), Some(45)][..])
        );
        // No sample at the Leave's time: nothing kept.
        assert!(m.call(enter.as_ref(), 16).is_none());
        // No values at the Enter: the absolute value only.
        assert_eq!(
            m.call(None, 15).as_deref(),
            Some(&[None, None, None, Some(45)][..])
        );
    }
}

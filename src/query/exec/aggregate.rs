//! Aggregation: rows folded into their groups as they are read (memory holds the groups, not
//! the rows), and the scan of all messages that reads only the columns the groups and sizes
//! need, on every core.

use std::collections::BTreeMap;

use rayon::prelude::*;

use super::counters::counter_of;
use super::order::compare_values;
use super::{measure, Row};
use crate::error::{Error, Limit, Result};
use crate::hash::FxHashMap;
use crate::model::CommId;
use crate::query::ast::{Aggregate, GroupKey, Measure, Selection, Target};
use crate::query::plan::{Engine, Selected};
use crate::results::{ResultSet, Value};
use crate::store::{MessageColumns, MessageField};

/// Calls `f` with each row of `rows` and its value of group key `key` (a rank, a tag or a
/// communicator id): one loop per key, so that reading the key is not decided row by row.
#[inline]
fn for_each_key(
    messages: &MessageColumns,
    key: &GroupKey,
    rows: std::ops::Range<usize>,
    mut f: impl FnMut(usize, i64),
) {
    match key {
        GroupKey::Process => rows.for_each(|r| f(r, messages.sender(r).into())),
        GroupKey::Peer => rows.for_each(|r| f(r, messages.receiver(r).into())),
        GroupKey::Tag => rows.for_each(|r| f(r, messages.tag(r).into())),
        // Only process, peer, tag and comm reach this scan (`is_message_scan`).
        GroupKey::Comm | GroupKey::Operation | GroupKey::Routine | GroupKey::Class => {
            rows.for_each(|r| f(r, messages.comm(r).into()))
        }
    }
}

impl<'a> Engine<'a> {
    pub(crate) fn aggregate(
        &self,
        selection: &Selection,
        selected: &mut Selected,
        aggregates: &[Aggregate],
        group_by: &[GroupKey],
    ) -> Result<ResultSet> {
        let mut columns: Vec<String> = group_by
            .iter()
            .map(|k| k.to_string().to_lowercase())
            .collect();
        columns.extend(aggregates.iter().map(|a| a.to_string().to_lowercase()));
        // Per aggregate, the trace's counter it reads, if any (resolved before any row is read;
        // the rows then carry their counters).
        let target = selection.target;
        if aggregates.iter().any(|a| a.counter().is_some()) {
            self.read_counters(selection, selected)?;
        }
        let counter_index: Vec<Option<usize>> = aggregates
            .iter()
            .map(|a| {
                a.counter()
                    .map(|name| {
                        let what = a.to_string();
                        self.counter_index(target, selected.counters.as_deref(), name, &what)
                    })
                    .transpose()
            })
            .collect::<Result<_>>()?;
        let empty = || -> Vec<Fold> {
            counter_index
                .iter()
                .map(|c| match c {
                    Some(_) => Fold::Counter(CounterAcc::default()),
                    None => Fold::Measure(Acc::default()),
                })
                .collect()
        };
        let mut groups: BTreeMap<Vec<GroupValue>, Vec<Fold>> = BTreeMap::new();
        // Rows are folded into their groups as they are read: memory holds the groups.
        self.each_row(selection, selected, |row| {
            let row = &row;
            let key: Vec<GroupValue> = group_by.iter().map(|k| self.group_value(row, *k)).collect();
            let folds = groups.entry(key).or_insert_with(empty);
            for ((fold, a), counter) in folds.iter_mut().zip(aggregates).zip(&counter_index) {
                match (fold, counter) {
                    (Fold::Counter(acc), Some(c)) => {
                        // A call without a sample of the counter is NULL: skipped.
                        if let Some(v) = counter_of(row, *c) {
                            acc.add(v);
                        }
                    }
                    (Fold::Measure(acc), _) => acc.add(match a {
                        Aggregate::Count => 0,
                        Aggregate::Sum(m)
                        | Aggregate::Avg(m)
                        | Aggregate::Min(m)
                        | Aggregate::Max(m) => measure(row, *m),
                    }),
                    (Fold::Counter(_), None) => {}
                }
            }
            Ok(true)
        })?;
        if groups.is_empty() && group_by.is_empty() {
            groups.insert(Vec::new(), empty());
        }
        let mut r = ResultSet::new(columns);
        for (key, folds) in groups {
            let mut row: Vec<Value> = key.into_iter().map(GroupValue::into_value).collect();
            for (fold, a) in folds.iter().zip(aggregates) {
                row.push(match fold {
                    Fold::Measure(acc) => acc.value(*a)?,
                    Fold::Counter(acc) => acc.value(*a),
                });
            }
            r.push(row);
        }
        Ok(r)
    }

    /// Whether an aggregate is a plain scan of all messages that column reads can answer.
    pub(crate) fn is_message_scan(
        &self,
        aggregates: &[Aggregate],
        selection: &Selection,
        group_by: &[GroupKey],
    ) -> bool {
        // Sizes only (SENT and RECEIVED of a message are its size too, but are left to the
        // row path so that this path stays one accumulator per group).
        selection.target == Target::Messages
            && selection.filter.is_empty()
            && group_by.iter().all(|k| {
                matches!(
                    k,
                    GroupKey::Process | GroupKey::Peer | GroupKey::Tag | GroupKey::Comm
                )
            })
            && aggregates.iter().all(|a| {
                matches!(
                    a,
                    Aggregate::Count
                        | Aggregate::Sum(Measure::Size)
                        | Aggregate::Avg(Measure::Size)
                        | Aggregate::Min(Measure::Size)
                        | Aggregate::Max(Measure::Size)
                )
            })
    }

    /// Aggregates every message reading only the columns the groups and sizes need, chunk by
    /// chunk on every core.
    pub(crate) fn message_scan_aggregate(
        &self,
        aggregates: &[Aggregate],
        group_by: &[GroupKey],
    ) -> Result<ResultSet> {
        let key_field = |k: &GroupKey| match k {
            GroupKey::Process => MessageField::Sender,
            GroupKey::Peer => MessageField::Receiver,
            GroupKey::Tag => MessageField::Tag,
            GroupKey::Comm | GroupKey::Operation | GroupKey::Routine | GroupKey::Class => {
                MessageField::Comm
            }
        };
        let mut wanted: Vec<MessageField> = group_by.iter().map(key_field).collect();
        wanted.push(MessageField::Bytes);
        let chunks = self.trace.message_chunk_count();
        type Groups = BTreeMap<Vec<i64>, Vec<Acc>>;
        // Chunks are scanned in parallel (rayon), each into its own groups, merged at the end.
        // Every aggregate of this path measures SIZE, so one accumulator per group serves them
        // all; it is copied per aggregate at the end.
        let scan_chunk = |chunk: u32| -> Result<Groups> {
            self.check_cancel()?;
            let messages = self.trace.message_columns(chunk, &wanted)?;
            let rows = messages.rows();
            // Keys are small integers (ranks, tags, communicator ids) in practice: index a dense
            // table by their mixed-radix code (each key counted from its least value, 0 at most)
            // when it stays small, else hash the key.
            let (least, radix): (Vec<i64>, Vec<u64>) = group_by
                .iter()
                .map(|k| {
                    let (mut lo, mut hi) = (0i64, 0i64);
                    for_each_key(&messages, k, 0..rows, |_, v| {
                        lo = lo.min(v);
                        hi = hi.max(v);
                    });
                    (lo, hi.abs_diff(lo) + 1)
                })
                .unzip();
            let space = radix
                .iter()
                .try_fold(1u64, |acc, r| acc.checked_mul(*r))
                .filter(|s| *s <= 1 << 16);
            let mut groups: Groups = BTreeMap::new();
            if let Some(space) = space {
                let mut dense = vec![Acc::default(); space as usize];
                // The rows' codes, a block of rows at a time, a key at a time.
                const BLOCK: usize = 1024;
                let mut codes = [0u64; BLOCK];
                for first in (0..rows).step_by(BLOCK) {
                    let block = first..rows.min(first + BLOCK);
                    codes.fill(0);
                    for ((k, rad), &lo) in group_by.iter().zip(&radix).zip(&least) {
                        for_each_key(&messages, k, block.clone(), |r, v| {
                            let code = &mut codes[r - first];
                            *code = *code * rad + v.abs_diff(lo);
                        });
                    }
                    for (r, &code) in block.zip(&codes) {
                        dense[code as usize].add(messages.bytes(r));
                    }
                }
                for (code, acc) in dense.into_iter().enumerate().filter(|(_, a)| a.count > 0) {
                    let mut key = vec![0i64; radix.len()];
                    let mut rest = code as u64;
                    for i in (0..radix.len()).rev() {
                        key[i] = least[i].wrapping_add((rest % radix[i]) as i64);
                        rest /= radix[i];
                    }
                    groups.insert(key, vec![acc; aggregates.len()]);
                }
            } else {
                let mut hashed: FxHashMap<Vec<i64>, Acc> = FxHashMap::default();
                let mut key = Vec::with_capacity(group_by.len());
                for r in 0..rows {
                    let size = messages.bytes(r);
                    key.clear();
                    for k in group_by {
                        for_each_key(&messages, k, r..r + 1, |_, v| key.push(v));
                    }
                    match hashed.get_mut(&key) {
                        Some(acc) => acc.add(size),
                        None => {
                            let mut acc = Acc::default();
                            acc.add(size);
                            hashed.insert(key.clone(), acc);
                        }
                    }
                }
                groups.extend(
                    hashed
                        .into_iter()
                        .map(|(k, acc)| (k, vec![acc; aggregates.len()])),
                );
            }
            Ok(groups)
        };
        let partials: Vec<Result<Groups>> = (0..chunks).into_par_iter().map(scan_chunk).collect();
        let mut merged: Groups = BTreeMap::new();
        for part in partials {
            for (k, accs) in part? {
                match merged.get_mut(&k) {
                    Some(into) => into.iter_mut().zip(&accs).for_each(|(a, b)| a.merge(b)),
                    None => {
                        merged.insert(k, accs);
                    }
                }
            }
        }
        if merged.is_empty() && group_by.is_empty() {
            merged.insert(Vec::new(), vec![Acc::default(); aggregates.len()]);
        }
        let mut columns: Vec<String> = group_by
            .iter()
            .map(|k| k.to_string().to_lowercase())
            .collect();
        columns.extend(aggregates.iter().map(|a| a.to_string().to_lowercase()));
        let mut rows: Vec<Vec<Value>> = Vec::with_capacity(merged.len());
        for (key, accs) in merged {
            let mut row: Vec<Value> = key
                .iter()
                .zip(group_by)
                .map(|(&v, k)| match k {
                    GroupKey::Tag => Value::Int(i128::from(v)),
                    GroupKey::Comm | GroupKey::Operation => match CommId::try_from(v) {
                        Ok(c) => Value::Text(self.comm_name(c)),
                        Err(_) => Value::Int(i128::from(v)),
                    },
                    _ => Value::Int(i128::from(v)),
                })
                .collect();
            for (acc, a) in accs.iter().zip(aggregates) {
                row.push(acc.value(*a)?);
            }
            rows.push(row);
        }
        // Groups come out in the order of their stored codes; order them by their values.
        rows.sort_by(|a, b| {
            a.iter()
                .zip(b)
                .map(|(x, y)| compare_values(x, y))
                .find(|o| o.is_ne())
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        let mut r = ResultSet::new(columns);
        for row in rows {
            r.push(row);
        }
        Ok(r)
    }

    fn group_value(&self, row: &Row, key: GroupKey) -> GroupValue {
        match (row, key) {
            (Row::Op(_, o, _), GroupKey::Process) => GroupValue::Int(i64::from(o.rank)),
            (Row::Msg(_, m), GroupKey::Process) => GroupValue::Int(i64::from(m.sender)),
            (Row::Op(_, o, _), GroupKey::Peer) => o
                .dest
                .or(o.source)
                .map_or(GroupValue::None, |p| GroupValue::Int(i64::from(p))),
            (Row::Msg(_, m), GroupKey::Peer) => GroupValue::Int(i64::from(m.receiver)),
            (Row::Op(_, o, _), GroupKey::Operation) => {
                GroupValue::Text(self.trace.kind_name(o.kind))
            }
            (Row::Msg(..), GroupKey::Operation) => GroupValue::Text("message".into()),
            (Row::Op(_, o, _), GroupKey::Tag) => o
                .send_tag
                .or(o.recv_tag)
                .map_or(GroupValue::None, |t| GroupValue::Int(i64::from(t))),
            (Row::Msg(_, m), GroupKey::Tag) => GroupValue::Int(i64::from(m.tag)),
            (Row::Op(_, o, _), GroupKey::Comm) => o
                .comm
                .map_or(GroupValue::None, |c| GroupValue::Text(self.comm_name(c))),
            (Row::Msg(_, m), GroupKey::Comm) => GroupValue::Text(self.comm_name(m.comm)),
            (Row::Burst(_, b), GroupKey::Process) => GroupValue::Int(i64::from(b.rank)),
            (Row::Burst(_, b), GroupKey::Operation) => {
                GroupValue::Text(self.trace.kind_name(b.before))
            }
            (
                Row::Burst(..),
                GroupKey::Peer
                | GroupKey::Tag
                | GroupKey::Comm
                | GroupKey::Routine
                | GroupKey::Class,
            ) => GroupValue::None,
            (Row::Op(..) | Row::Msg(..), GroupKey::Routine | GroupKey::Class) => GroupValue::None,
            (Row::Record(_, r), key) => {
                let text = |t: Option<String>| t.map_or(GroupValue::None, GroupValue::Text);
                let int = |i: Option<i64>| i.map_or(GroupValue::None, GroupValue::Int);
                match key {
                    GroupKey::Process => int(r.rank.map(i64::from)),
                    GroupKey::Peer => int(r.peer.map(i64::from)),
                    GroupKey::Tag => int(r.tag.map(i64::from)),
                    GroupKey::Operation => text(r.operation.clone()),
                    GroupKey::Comm => text(r.comm.map(|c| self.comm_name(c))),
                    GroupKey::Routine => text(r.routine.clone()),
                    GroupKey::Class => text(r.class.map(str::to_string)),
                }
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum GroupValue {
    None,
    Int(i64),
    Text(String),
}

impl GroupValue {
    fn into_value(self) -> Value {
        match self {
            GroupValue::None => Value::Null,
            GroupValue::Int(i) => Value::Int(i128::from(i)),
            GroupValue::Text(s) => Value::Text(s),
        }
    }
}

/// What one aggregate of one group has folded so far.
#[derive(Debug, Clone)]
enum Fold {
    /// A measure of the rows (or their count).
    Measure(Acc),
    /// A counter's values.
    Counter(CounterAcc),
}

/// A counter's values in a group: only the calls that have one (a call without a sample is
/// NULL, as in SQL). Signed: a counter of absolute samples may be negative.
#[derive(Debug, Clone, Default)]
struct CounterAcc {
    count: u64,
    sum: i128,
    min: i64,
    max: i64,
}

impl CounterAcc {
    fn add(&mut self, v: i64) {
        if self.count == 0 {
            (self.min, self.max) = (v, v);
        }
        self.count += 1;
        self.sum += i128::from(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// The aggregate's value: NULL when no call of the group has a sample.
    fn value(&self, a: Aggregate) -> Value {
        if self.count == 0 {
            return Value::Null;
        }
        match a {
            Aggregate::Count => self.count.into(),
            Aggregate::Sum(_) => Value::Int(self.sum),
            Aggregate::Avg(_) => Value::Float(self.sum as f64 / self.count as f64),
            Aggregate::Min(_) => Value::Int(i128::from(self.min)),
            Aggregate::Max(_) => Value::Int(i128::from(self.max)),
        }
    }
}

#[derive(Debug, Clone)]
struct Acc {
    count: u64,
    sum: u128,
    /// Meaningful only when `count > 0`.
    min: u64,
    max: u64,
}

impl Default for Acc {
    fn default() -> Acc {
        Acc {
            count: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }
}

impl Acc {
    fn merge(&mut self, o: &Acc) {
        self.count += o.count;
        self.sum += o.sum;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }

    #[inline]
    fn add(&mut self, v: u64) {
        self.count += 1;
        self.sum += u128::from(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// The mean of the values added: the float nearest the exact mean `sum / count`, kept
    /// within [min, max] (a float rounds to 2048 near 2^64: the mean of two sizes of
    /// 2^64 - 1 would print as 2^64, more than either), never above max; a whole mean no
    /// float holds exactly is given as that integer instead.
    fn mean(&self) -> Value {
        if self.count == 0 {
            return Value::Null;
        }
        let n = u128::from(self.count);
        let (whole, rest) = (self.sum / n, self.sum % n);
        if rest == 0 && (whole as f64) as u128 != whole {
            // whole <= max < 2^64: it fits.
            return Value::Int(whole as i128);
        }
        let mut mean = whole as f64 + rest as f64 / n as f64;
        // Compared exactly, as integers and a fraction (max as a float may round up).
        let above = |m: f64, v: u64| {
            let w = m as u128;
            w > u128::from(v) || (w == u128::from(v) && m.fract() > 0.0)
        };
        let below = |m: f64, v: u64| (m as u128) < u128::from(v);
        while above(mean, self.max) {
            mean = mean.next_down();
        }
        while below(mean, self.min) && !above(mean.next_up(), self.max) {
            mean = mean.next_up();
        }
        Value::Float(mean)
    }

    fn value(&self, a: Aggregate) -> Result<Value> {
        Ok(match a {
            Aggregate::Count => self.count.into(),
            Aggregate::Sum(_) => Value::Int(i128::try_from(self.sum).map_err(|_| {
                Error::limit(
                    Limit::ValueRange,
                    format!("{a} is {}, past 2^127 - 1", self.sum),
                )
            })?),
            Aggregate::Avg(_) => self.mean(),
            Aggregate::Min(_) => (self.count > 0).then_some(self.min).into(),
            Aggregate::Max(_) => (self.count > 0).then_some(self.max).into(),
        })
    }
}

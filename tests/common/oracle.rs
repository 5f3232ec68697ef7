//! The naive evaluator: what a selection must select, found by scanning a trace's rows in
//! memory with the language's documented meaning, independently of the engine's bitmaps,
//! chunk pruning and row reads. Shared by the differential oracle (`tests/query_oracle.rs`)
//! and the fuzz harness (`tests/fuzz.rs`).

use std::collections::BTreeSet;

use mtfdb::model::{Message, OpKind, Operation, Rank};
use mtfdb::query::ast::Value as Operand;
use mtfdb::query::{CmpOp, Expr, Field, ProcessSelector, Scope, Selection, Target};
use mtfdb::Trace;

/// A trace's rows, read once.
pub struct Model {
    /// Every operation with its id.
    pub ops: Vec<(u64, Operation)>,
    /// Every message with its id.
    pub messages: Vec<(u32, Message)>,
    /// Number of ranks.
    pub ranks: u32,
    /// The last time of the trace.
    pub span: u64,
}

/// Reads every row of `trace`.
pub fn model_of(trace: &Trace) -> Model {
    let ranks = trace.header().processes.len() as u32;
    let mut ops = Vec::new();
    for r in 0..ranks {
        ops.extend(trace.process_operations(r).unwrap());
    }
    let messages: Vec<(u32, Message)> = trace
        .messages()
        .unwrap()
        .into_iter()
        .enumerate()
        .map(|(i, m)| (i as u32, m))
        .collect();
    let span = trace.summary().last_time.unwrap_or(0);
    Model {
        ops,
        messages,
        ranks,
        span,
    }
}

/// The ranks a selector names (communicator members: every rank, in the generated traces'
/// world communicator).
pub fn ranks_of(s: &ProcessSelector, n: u32) -> BTreeSet<Rank> {
    match s {
        ProcessSelector::Process(r) => [*r].into(),
        ProcessSelector::List(v) => v.iter().flat_map(|r| r.first..=r.last).collect(),
        ProcessSelector::All | ProcessSelector::InComm(_) => (0..n).collect(),
    }
}

/// True when every rank `s` names is below `n` (the engine refuses the others).
pub fn selector_valid(s: &ProcessSelector, n: u32) -> bool {
    match s {
        ProcessSelector::Process(r) => *r < n,
        ProcessSelector::List(v) => v.iter().all(|r| r.first.max(r.last) < n),
        ProcessSelector::All | ProcessSelector::InComm(_) => true,
    }
}

/// True when the scope names only ranks of the trace.
pub fn scope_valid(scope: Option<&Scope>, n: u32) -> bool {
    match scope {
        None => true,
        Some(Scope::Between(a, b)) => *a < n && *b < n,
        Some(Scope::Among(s)) | Some(Scope::For(s)) => selector_valid(s, n),
    }
}

fn kind_matches(t: Target, k: OpKind) -> bool {
    match t {
        Target::Messages | Target::Operations => true,
        Target::PointToPoint => k.is_send() || k.is_receive(),
        Target::Sends => k.is_send(),
        Target::Receives => k.is_receive(),
        Target::Collectives => k.is_collective(),
        Target::Operation(want) => k == want,
    }
}

/// A field on an operation, as the language documents it, exactly (128 bits hold every
/// 64-bit size and time and every 32-bit rank and tag).
pub fn op_field(o: &Operation, f: Field) -> Option<i128> {
    match f {
        Field::Size => Some(i128::from(o.send_bytes.max(o.recv_bytes))),
        Field::Tag => o.send_tag.or(o.recv_tag).map(i128::from),
        Field::Sender => if o.kind.is_send() {
            Some(o.rank)
        } else {
            o.source
        }
        .map(i128::from),
        Field::Receiver => {
            if o.kind.is_send() {
                o.dest.map(i128::from)
            } else if o.kind.is_receive() {
                Some(i128::from(o.rank))
            } else {
                None
            }
        }
        Field::Duration => Some(i128::from(o.end) - i128::from(o.start)),
        Field::Peer => o.dest.or(o.source).map(i128::from),
        Field::Root => o.root.map(i128::from),
        Field::Comm => o.comm.map(i128::from),
    }
}

/// A field on a message.
pub fn msg_field(m: &Message, f: Field) -> Option<i128> {
    match f {
        Field::Size => Some(i128::from(m.bytes)),
        Field::Tag => Some(i128::from(m.tag)),
        Field::Sender => Some(i128::from(m.sender)),
        Field::Receiver | Field::Peer => Some(i128::from(m.receiver)),
        Field::Duration => Some(i128::from(m.recv_time.saturating_sub(m.send_time))),
        Field::Root => None,
        Field::Comm => Some(i128::from(m.comm)),
    }
}

/// Whether `e` holds for a row whose fields `value` gives (numbers only).
pub fn holds(e: &Expr, value: &dyn Fn(Field) -> Option<i128>) -> bool {
    match e {
        Expr::And(items) => items.iter().all(|x| holds(x, value)),
        Expr::Or(items) => items.iter().any(|x| holds(x, value)),
        Expr::Not(a) => !holds(a, value),
        Expr::Compare(c) => {
            let Operand::Number(n) = c.value else {
                panic!("numbers only here")
            };
            match value(c.field) {
                Some(v) => match c.op {
                    CmpOp::Lt => v < n,
                    CmpOp::Le => v <= n,
                    CmpOp::Eq => v == n,
                    CmpOp::Ne => v != n,
                    CmpOp::Ge => v >= n,
                    CmpOp::Gt => v > n,
                },
                None => c.op == CmpOp::Ne,
            }
        }
    }
}

/// The ids a selection selects, by a full scan of `model`. Its `IN` clauses may only be
/// `IN COMM(0)` and views that hold every row of their kind.
pub fn naive(model: &Model, sel: &Selection) -> BTreeSet<u64> {
    let f = &sel.filter;
    let n = model.ranks;
    let in_comm0 = f
        .within
        .iter()
        .any(|w| matches!(w, mtfdb::query::Within::Comm(_)));
    let in_window = |start: u64, end: u64| f.time.is_none_or(|w| start <= w.end && end >= w.start);
    if sel.target == Target::Messages {
        model
            .messages
            .iter()
            .filter(|(_, m)| {
                let scope_ok = match &f.scope {
                    None => true,
                    Some(Scope::Between(a, b)) => {
                        (m.sender, m.receiver) == (*a, *b) || (m.sender, m.receiver) == (*b, *a)
                    }
                    Some(Scope::Among(s)) => {
                        let set = ranks_of(s, n);
                        set.contains(&m.sender) && set.contains(&m.receiver)
                    }
                    Some(Scope::For(s)) => {
                        let set = ranks_of(s, n);
                        set.contains(&m.sender) || set.contains(&m.receiver)
                    }
                };
                scope_ok
                    && (!in_comm0 || m.comm == 0)
                    && in_window(m.send_time, m.recv_time.max(m.send_time))
                    && f.predicate
                        .as_ref()
                        .is_none_or(|p| holds(p, &|fl| msg_field(m, fl)))
            })
            .map(|(id, _)| u64::from(*id))
            .collect()
    } else {
        model
            .ops
            .iter()
            .filter(|(_, o)| {
                let peers: Vec<Rank> = [o.dest, o.source, o.root].into_iter().flatten().collect();
                let scope_ok = match &f.scope {
                    None => true,
                    Some(Scope::Between(a, b)) => {
                        (o.rank == *a && peers.contains(b)) || (o.rank == *b && peers.contains(a))
                    }
                    Some(Scope::Among(s)) => {
                        let set = ranks_of(s, n);
                        set.contains(&o.rank)
                            && [o.dest, o.source]
                                .into_iter()
                                .flatten()
                                .all(|p| set.contains(&p))
                    }
                    Some(Scope::For(s)) => ranks_of(s, n).contains(&o.rank),
                };
                kind_matches(sel.target, o.kind)
                    && scope_ok
                    && (!in_comm0 || o.comm == Some(0))
                    && in_window(o.start, o.end)
                    && f.predicate
                        .as_ref()
                        .is_none_or(|p| holds(p, &|fl| op_field(o, fl)))
            })
            .map(|(id, _)| *id)
            .collect()
    }
}

/// The `id` column of a result, as a set; panics on a repeated id.
pub fn ids_of(result: &mtfdb::query::ResultSet) -> BTreeSet<u64> {
    let id = result.column("id").expect("an id column");
    let got: BTreeSet<u64> = result
        .rows
        .iter()
        .map(|r| match &r[id] {
            mtfdb::query::Value::Int(i) => u64::try_from(*i).expect("ids are unsigned"),
            v => panic!("{v:?}"),
        })
        .collect();
    assert_eq!(got.len(), result.len(), "no row twice");
    got
}

/// The constants at the edges of the columns' ranges, and past them, that every random
/// statement draws from: 0, 2^31, 2^63, 2^64 - 1, 2^64 and far beyond, and their negatives.
pub const EXTREMES: &[i128] = &[
    0,
    1,
    -1,
    1 << 31,
    (1 << 31) - 1,
    -(1 << 31),
    (1 << 32) - 1,
    1 << 63,
    (1 << 63) - 1,
    -(1 << 63),
    u64::MAX as i128,
    1 << 64,
    (1 << 64) + 1,
    -(1 << 64),
    i128::MAX,
    -i128::MAX,
];

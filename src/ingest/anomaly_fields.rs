//! The fields of an anomaly as the exchange formats carry it (an MTF text `anomaly` line, a
//! GXL `Anomaly` node), both ways: which fields each [`Anomaly`] class writes ([`fields`]),
//! and how a reader builds the anomaly back from them ([`build`]). One table of names for
//! every format, so that what is written always reads back.
//!
//! ```text
//! anomaly CrossedLeave rank=0 thread=1 time=500 routine=solve innermost=exchange
//! anomaly CallWithoutRecords op=2.0:17 rank=2 name=MPI_Iallgather
//! anomaly SkippedRecord rank=3 what="a message to a location that is not a rank"
//! ```
//!
//! The class is the [`Anomaly`] variant's name and the keys its field names; an operation is
//! named by its position (the index-th operation of a rank and thread in the file, from 0:
//! `rank[.thread]:index` in MTF text, a `tup` in GXL), since ids are the import's to give.

use crate::model::{Anomaly, OpKind, OpPosition, Rank, Rule, StrId};

/// A field's value as the writer renders it.
pub(crate) enum Val {
    /// An unsigned integer.
    Num(u64),
    /// A signed integer.
    Int(i64),
    /// An interned name, written as a name token.
    Str(StrId),
    /// An MPI call, written as an operation line writes its call.
    Kind(OpKind),
    /// The anomaly's `i`-th operation (in [`Anomaly::ops`] order), written as its position.
    Op(usize),
    /// Free text, written as a name token.
    Text(String),
}

/// The class of `a` and its fields, in the order they are written. `None` fields are left
/// out.
pub(crate) fn fields(a: &Anomaly) -> (&'static str, Vec<(&'static str, Val)>) {
    use Val::*;
    let rank = |r: Rank| ("rank", Num(r.into()));
    match a {
        Anomaly::UnmatchedSend {
            rank: r,
            dest,
            comm,
            tag,
            ..
        } => (
            "UnmatchedSend",
            vec![
                ("op", Op(0)),
                rank(*r),
                ("dest", Num((*dest).into())),
                ("comm", Num((*comm).into())),
                ("tag", Int((*tag).into())),
            ],
        ),
        Anomaly::UnmatchedReceive {
            rank: r,
            source,
            comm,
            tag,
            ..
        } => (
            "UnmatchedReceive",
            vec![
                ("op", Op(0)),
                rank(*r),
                ("source", Num((*source).into())),
                ("comm", Num((*comm).into())),
                ("tag", Int((*tag).into())),
            ],
        ),
        Anomaly::RequestNeverCompleted {
            rank: r, request, ..
        } => (
            "RequestNeverCompleted",
            vec![("op", Op(0)), rank(*r), ("request", Num(*request))],
        ),
        Anomaly::UnknownRequest {
            rank: r, request, ..
        } => (
            "UnknownRequest",
            vec![("op", Op(0)), rank(*r), ("request", Num(*request))],
        ),
        Anomaly::IncompleteCollective {
            kind,
            comm,
            present,
            expected,
        } => (
            "IncompleteCollective",
            vec![
                ("kind", Kind(*kind)),
                ("comm", Num((*comm).into())),
                ("present", Num((*present).into())),
                ("expected", Num((*expected).into())),
            ],
        ),
        Anomaly::WaitBeforeRequest { rank: r, .. } => (
            "WaitBeforeRequest",
            vec![("op", Op(0)), ("request_op", Op(1)), rank(*r)],
        ),
        Anomaly::UnresolvedWildcard { rank: r, .. } => {
            ("UnresolvedWildcard", vec![("op", Op(0)), rank(*r)])
        }
        Anomaly::RootMismatch {
            rank: r,
            kind,
            comm,
            ..
        } => (
            "RootMismatch",
            vec![
                ("op", Op(0)),
                rank(*r),
                ("kind", Kind(*kind)),
                ("comm", Num((*comm).into())),
            ],
        ),
        Anomaly::MissingFinalize { rank: r } => ("MissingFinalize", vec![rank(*r)]),
        Anomaly::UnclosedRoutine { rank: r, routine } => (
            "UnclosedRoutine",
            vec![rank(*r), ("routine", Str(*routine))],
        ),
        Anomaly::CrossedLeave {
            rank: r,
            thread,
            time,
            routine,
            innermost,
        } => (
            "CrossedLeave",
            vec![
                rank(*r),
                ("thread", Num((*thread).into())),
                ("time", Num(*time)),
                ("routine", Str(*routine)),
                ("innermost", Str(*innermost)),
            ],
        ),
        Anomaly::LeaveWithoutEnter {
            rank: r,
            thread,
            time,
            routine,
        } => (
            "LeaveWithoutEnter",
            vec![
                rank(*r),
                ("thread", Num((*thread).into())),
                ("time", Num(*time)),
                ("routine", Str(*routine)),
            ],
        ),
        Anomaly::CallWithoutRecords { rank: r, name, .. } => (
            "CallWithoutRecords",
            vec![("op", Op(0)), rank(*r), ("name", Str(*name))],
        ),
        Anomaly::LengthMismatch { sent, received, .. } => (
            "LengthMismatch",
            vec![
                ("send_op", Op(0)),
                ("recv_op", Op(1)),
                ("sent", Num(*sent)),
                ("received", Num(*received)),
            ],
        ),
        Anomaly::DatatypeMismatch { sent, received, .. } => (
            "DatatypeMismatch",
            vec![
                ("send_op", Op(0)),
                ("recv_op", Op(1)),
                ("sent", Str(*sent)),
                ("received", Str(*received)),
            ],
        ),
        Anomaly::CallBeforeInit { rank: r, calls, .. } => (
            "CallBeforeInit",
            vec![("op", Op(0)), rank(*r), ("calls", Num(*calls))],
        ),
        Anomaly::CallAfterFinalize { rank: r, calls, .. } => (
            "CallAfterFinalize",
            vec![("op", Op(0)), rank(*r), ("calls", Num(*calls))],
        ),
        Anomaly::CollectiveSizeMismatch {
            rank: r,
            kind,
            comm,
            bytes,
            expected,
            ..
        } => (
            "CollectiveSizeMismatch",
            vec![
                ("op", Op(0)),
                rank(*r),
                ("kind", Kind(*kind)),
                ("comm", Num((*comm).into())),
                ("bytes", Num(*bytes)),
                ("expected", Num(*expected)),
            ],
        ),
        Anomaly::BarrierWithoutOverlap { comm, gap, .. } => (
            "BarrierWithoutOverlap",
            vec![
                ("op", Op(0)),
                ("leave_op", Op(1)),
                ("comm", Num((*comm).into())),
                ("gap", Num(*gap)),
            ],
        ),
        Anomaly::ValueOverflow { rank: r, what } => {
            let mut f: Vec<(&str, Val)> = r.map(rank).into_iter().collect();
            f.push(("what", Text(what.clone())));
            ("ValueOverflow", f)
        }
        Anomaly::SkippedRecord {
            rank: r,
            time,
            what,
        } => {
            let mut f: Vec<(&str, Val)> = r.map(rank).into_iter().collect();
            if let Some(t) = time {
                f.push(("time", Num(*t)));
            }
            f.push(("what", Text(what.clone())));
            ("SkippedRecord", f)
        }
        Anomaly::MissingRankData {
            rank: r,
            thread,
            file,
            announced,
            read,
            cut_at,
        } => {
            let mut f = vec![
                rank(*r),
                ("thread", Num((*thread).into())),
                ("file", Text(file.clone())),
            ];
            if let Some(n) = announced {
                f.push(("announced", Num(*n)));
            }
            f.push(("read", Num(*read)));
            if let Some(at) = cut_at {
                f.push(("cut_at", Num(*at)));
            }
            ("MissingRankData", f)
        }
        Anomaly::PeerDataMissing {
            rank: r,
            peer,
            comm,
            ..
        } => (
            "PeerDataMissing",
            vec![
                ("op", Op(0)),
                rank(*r),
                ("peer", Num((*peer).into())),
                ("comm", Num((*comm).into())),
            ],
        ),
        Anomaly::BrokenRule {
            rule,
            rank: r,
            thread,
            time,
            op,
            comm,
            value,
        } => {
            let mut f: Vec<(&str, Val)> = Vec::new();
            if op.is_some() {
                f.push(("op", Op(0)));
            }
            if let Some(r) = r {
                f.push(rank(*r));
            }
            if r.is_some() || *thread != 0 {
                f.push(("thread", Num((*thread).into())));
            }
            if let Some(t) = time {
                f.push(("time", Num(*t)));
            }
            if let Some(c) = comm {
                f.push(("comm", Num((*c).into())));
            }
            if let Some(v) = value {
                f.push(("value", Num(*v)));
            }
            (rule.class(), f)
        }
        Anomaly::ClockConditionViolated {
            sender,
            receiver,
            messages,
            worst,
            time,
        } => (
            "ClockConditionViolated",
            vec![
                ("sender", Num((*sender).into())),
                ("receiver", Num((*receiver).into())),
                ("messages", Num(*messages)),
                ("worst", Num(*worst)),
                ("time", Num(*time)),
            ],
        ),
        Anomaly::ReceiveNotRecorded {
            rank: r,
            dest,
            comm,
            tag,
            ..
        } => (
            "ReceiveNotRecorded",
            vec![
                ("op", Op(0)),
                rank(*r),
                ("dest", Num((*dest).into())),
                ("comm", Num((*comm).into())),
                ("tag", Int((*tag).into())),
            ],
        ),
    }
}

/// Every anomaly class, for error messages.
pub(crate) const CLASSES: &str = "UnmatchedSend, UnmatchedReceive, RequestNeverCompleted, \
UnknownRequest, IncompleteCollective, WaitBeforeRequest, UnresolvedWildcard, RootMismatch, \
MissingFinalize, UnclosedRoutine, CrossedLeave, LeaveWithoutEnter, CallWithoutRecords, \
LengthMismatch, DatatypeMismatch, CallBeforeInit, CallAfterFinalize, CollectiveSizeMismatch, \
BarrierWithoutOverlap, ValueOverflow, SkippedRecord, MissingRankData, PeerDataMissing, ClockConditionViolated, ReceiveNotRecorded, and one class \
per broken rule: \
DuplicateDeclaration, UnknownProcessor, EmptyCommunicator, UnknownMember, DuplicateMember, \
UnknownRank, EndBeforeStart, TimeGoesBackwards, RoutineTimeGoesBackwards, UnknownCommunicator, \
RankOutsideCommunicator, MissingCommunicator, MissingDestination, MissingSource, \
PeerOutsideCommunicator, UnexpectedRoot, MissingRoot, RootOutsideCommunicator, BytesOnBarrier";

/// The parsed fields of one anomaly line, read by key; each getter reports a missing or
/// malformed field as the parser's error `E`.
pub(crate) trait Fields<E> {
    /// An unsigned integer field.
    fn num(&mut self, key: &str) -> Result<u64, E>;
    /// An unsigned integer field that may be absent.
    fn opt_num(&mut self, key: &str) -> Result<Option<u64>, E>;
    /// A field that fits 32 bits, unsigned.
    fn u32(&mut self, key: &str) -> Result<u32, E>;
    /// A field that fits 32 bits, unsigned, and may be absent.
    fn opt_u32(&mut self, key: &str) -> Result<Option<u32>, E>;
    /// A 32-bit signed integer field.
    fn i32(&mut self, key: &str) -> Result<i32, E>;
    /// A name field, interned.
    fn name(&mut self, key: &str) -> Result<StrId, E>;
    /// An MPI call field.
    fn kind(&mut self, key: &str) -> Result<OpKind, E>;
    /// An operation position field; positions are collected in the order they are read.
    fn op(&mut self, key: &str) -> Result<OpPosition, E>;
    /// A free text field.
    fn text(&mut self, key: &str) -> Result<String, E>;
}

/// The anomaly of class `class` from its fields (with placeholder operation ids: the
/// positions read through [`Fields::op`] name the operations, in [`Anomaly::ops`] order).
/// `None` for an unknown class.
pub(crate) fn build<E>(class: &[u8], f: &mut impl Fields<E>) -> Result<Option<Anomaly>, E> {
    Ok(Some(match class {
        b"UnmatchedSend" => {
            f.op("op")?;
            Anomaly::UnmatchedSend {
                op: 0,
                rank: f.u32("rank")?,
                dest: f.u32("dest")?,
                comm: f.u32("comm")?,
                tag: f.i32("tag")?,
            }
        }
        b"UnmatchedReceive" => {
            f.op("op")?;
            Anomaly::UnmatchedReceive {
                op: 0,
                rank: f.u32("rank")?,
                source: f.u32("source")?,
                comm: f.u32("comm")?,
                tag: f.i32("tag")?,
            }
        }
        b"RequestNeverCompleted" => {
            f.op("op")?;
            Anomaly::RequestNeverCompleted {
                op: 0,
                rank: f.u32("rank")?,
                request: f.num("request")?,
            }
        }
        b"UnknownRequest" => {
            f.op("op")?;
            Anomaly::UnknownRequest {
                op: 0,
                rank: f.u32("rank")?,
                request: f.num("request")?,
            }
        }
        b"IncompleteCollective" => Anomaly::IncompleteCollective {
            kind: f.kind("kind")?,
            comm: f.u32("comm")?,
            present: f.u32("present")?,
            expected: f.u32("expected")?,
        },
        b"WaitBeforeRequest" => {
            f.op("op")?;
            f.op("request_op")?;
            Anomaly::WaitBeforeRequest {
                op: 0,
                request_op: 0,
                rank: f.u32("rank")?,
            }
        }
        b"UnresolvedWildcard" => {
            f.op("op")?;
            Anomaly::UnresolvedWildcard {
                op: 0,
                rank: f.u32("rank")?,
            }
        }
        b"RootMismatch" => {
            f.op("op")?;
            Anomaly::RootMismatch {
                op: 0,
                rank: f.u32("rank")?,
                kind: f.kind("kind")?,
                comm: f.u32("comm")?,
            }
        }
        b"MissingFinalize" => Anomaly::MissingFinalize {
            rank: f.u32("rank")?,
        },
        b"UnclosedRoutine" => Anomaly::UnclosedRoutine {
            rank: f.u32("rank")?,
            routine: f.name("routine")?,
        },
        b"CrossedLeave" => Anomaly::CrossedLeave {
            rank: f.u32("rank")?,
            thread: f.u32("thread")?,
            time: f.num("time")?,
            routine: f.name("routine")?,
            innermost: f.name("innermost")?,
        },
        b"LeaveWithoutEnter" => Anomaly::LeaveWithoutEnter {
            rank: f.u32("rank")?,
            thread: f.u32("thread")?,
            time: f.num("time")?,
            routine: f.name("routine")?,
        },
        b"CallWithoutRecords" => {
            f.op("op")?;
            Anomaly::CallWithoutRecords {
                op: 0,
                rank: f.u32("rank")?,
                name: f.name("name")?,
            }
        }
        b"LengthMismatch" => {
            f.op("send_op")?;
            f.op("recv_op")?;
            Anomaly::LengthMismatch {
                send_op: 0,
                recv_op: 0,
                sent: f.num("sent")?,
                received: f.num("received")?,
            }
        }
        b"DatatypeMismatch" => {
            f.op("send_op")?;
            f.op("recv_op")?;
            Anomaly::DatatypeMismatch {
                send_op: 0,
                recv_op: 0,
                sent: f.name("sent")?,
                received: f.name("received")?,
            }
        }
        b"CallBeforeInit" => {
            f.op("op")?;
            Anomaly::CallBeforeInit {
                op: 0,
                rank: f.u32("rank")?,
                calls: f.num("calls")?,
            }
        }
        b"CallAfterFinalize" => {
            f.op("op")?;
            Anomaly::CallAfterFinalize {
                op: 0,
                rank: f.u32("rank")?,
                calls: f.num("calls")?,
            }
        }
        b"CollectiveSizeMismatch" => {
            f.op("op")?;
            Anomaly::CollectiveSizeMismatch {
                op: 0,
                rank: f.u32("rank")?,
                kind: f.kind("kind")?,
                comm: f.u32("comm")?,
                bytes: f.num("bytes")?,
                expected: f.num("expected")?,
            }
        }
        b"BarrierWithoutOverlap" => {
            f.op("op")?;
            f.op("leave_op")?;
            Anomaly::BarrierWithoutOverlap {
                op: 0,
                leave_op: 0,
                comm: f.u32("comm")?,
                gap: f.num("gap")?,
            }
        }
        b"ValueOverflow" => Anomaly::ValueOverflow {
            rank: f.opt_u32("rank")?,
            what: f.text("what")?,
        },
        b"SkippedRecord" => Anomaly::SkippedRecord {
            rank: f.opt_u32("rank")?,
            time: f.opt_num("time")?,
            what: f.text("what")?,
        },
        b"MissingRankData" => Anomaly::MissingRankData {
            rank: f.u32("rank")?,
            thread: f.u32("thread")?,
            file: f.text("file")?,
            announced: f.opt_num("announced")?,
            read: f.num("read")?,
            cut_at: f.opt_num("cut_at")?,
        },
        b"PeerDataMissing" => {
            f.op("op")?;
            Anomaly::PeerDataMissing {
                op: 0,
                rank: f.u32("rank")?,
                peer: f.u32("peer")?,
                comm: f.u32("comm")?,
            }
        }
        b"ReceiveNotRecorded" => {
            f.op("op")?;
            Anomaly::ReceiveNotRecorded {
                op: 0,
                rank: f.u32("rank")?,
                dest: f.u32("dest")?,
                comm: f.u32("comm")?,
                tag: f.i32("tag")?,
            }
        }
        b"ClockConditionViolated" => Anomaly::ClockConditionViolated {
            sender: f.u32("sender")?,
            receiver: f.u32("receiver")?,
            messages: f.num("messages")?,
            worst: f.num("worst")?,
            time: f.num("time")?,
        },
        other => {
            let Some(rule) = Rule::from_class(other) else {
                return Ok(None);
            };
            let op = if rule.names_op() {
                f.op("op")?;
                Some(0)
            } else {
                None
            };
            Anomaly::BrokenRule {
                rule,
                rank: f.opt_u32("rank")?,
                thread: f.opt_u32("thread")?.unwrap_or(0),
                time: f.opt_num("time")?,
                op,
                comm: f.opt_u32("comm")?,
                value: f.opt_num("value")?,
            }
        }
    }))
}

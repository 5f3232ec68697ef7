//! What a trace holds, compared across a round trip (`tests/export.rs` through MTF text and
//! GXL, `tests/parquet.rs` through Parquet): every operation, routine call, message, link,
//! collective and anomaly with ids replaced by what does not depend on the import's order,
//! the statistics' answers, `info`, and the hand-built trace that uses every field.

use std::collections::BTreeMap;
use std::path::Path;

use mtfdb::ingest::EventSink;
use mtfdb::model::{
    flags, Anomaly, Communicator, Location, LocationKind, OpKind, OpPosition, Operation, Process,
    Processor, RoutineEvent, TraceHeader, ANY_TAG,
};
use mtfdb::query::Session;
use mtfdb::Trace;

// ---------------------------------------------------------------------------------------
// Everything a trace holds, with ids replaced by what does not depend on the import's order:
// operations by position (rank, thread, index), names instead of string ids.

/// The position of every operation id, from the chunk directory.
pub fn position(t: &Trace, id: u64) -> OpPosition {
    let (chunk, row) = ((id >> 16) as u32, id & 0xffff);
    let info = t.op_chunks().iter().find(|c| c.chunk == chunk).unwrap();
    OpPosition {
        rank: info.rank,
        thread: info.thread,
        index: info.first_row + row,
    }
}

pub fn name(t: &Trace, id: u32) -> String {
    t.string(id).unwrap().to_string()
}

/// An anomaly with its operations by position and its strings by text.
pub fn anomaly_text(t: &Trace, a: &Anomaly) -> String {
    let positions: Vec<OpPosition> = a.ops().iter().map(|&id| position(t, id)).collect();
    let mut a = a.map_ops(|_| Ok::<_, ()>(0)).unwrap();
    let mut named = Vec::new();
    match &mut a {
        Anomaly::UnclosedRoutine { routine, .. } | Anomaly::LeaveWithoutEnter { routine, .. } => {
            named.push(name(t, std::mem::take(routine)))
        }
        Anomaly::CrossedLeave {
            routine, innermost, ..
        } => {
            named.push(name(t, std::mem::take(routine)));
            named.push(name(t, std::mem::take(innermost)));
        }
        Anomaly::CallWithoutRecords { name: n, .. } => named.push(name(t, std::mem::take(n))),
        Anomaly::DatatypeMismatch { sent, received, .. } => {
            named.push(name(t, std::mem::take(sent)));
            named.push(name(t, std::mem::take(received)));
        }
        Anomaly::IncompleteCollective { kind, .. }
        | Anomaly::RootMismatch { kind, .. }
        | Anomaly::CollectiveSizeMismatch { kind, .. } => {
            named.push(t.kind_name(std::mem::replace(kind, OpKind::Init)))
        }
        _ => {}
    }
    format!("{a:?} at {positions:?} names {named:?}")
}

/// An operation with its call and datatype by name (`Other` ids differ between imports).
pub fn op_text(t: &Trace, op: &Operation) -> String {
    let mut o = op.clone();
    let kind = t.kind_name(op.kind);
    let datatype = op.datatype.map(|d| name(t, d));
    o.kind = OpKind::Init;
    o.datatype = None;
    format!("{kind} {datatype:?} {o:?}")
}

#[derive(Debug, PartialEq)]
pub struct Contents {
    header: TraceHeader,
    strings: Vec<String>,
    summary: String,
    traffic: String,
    pairs: String,
    /// Operations per location, in stored order.
    operations: BTreeMap<(u32, u32), Vec<String>>,
    routine_calls: Vec<String>,
    messages: Vec<String>,
    links: Vec<(OpPosition, OpPosition)>,
    collectives: Vec<String>,
    anomalies: Vec<String>,
}

pub fn contents(t: &Trace) -> Contents {
    let s = t.summary();
    let mut by_kind: Vec<(String, u64)> = s
        .by_kind
        .iter()
        .map(|(k, n)| (t.kind_name(*k), *n))
        .collect();
    by_kind.sort();
    let summary = format!(
        "{} ops {by_kind:?}, {} messages {} bytes, {} instances, {} links, {} calls, anomalies {:?}, {:?}..{:?}",
        s.operations,
        s.messages,
        s.message_bytes,
        s.collective_instances,
        s.request_links,
        s.routine_calls,
        s.anomalies,
        s.first_time,
        s.last_time
    );
    let mut operations: BTreeMap<(u32, u32), Vec<String>> = BTreeMap::new();
    let mut chunks = t.op_chunks().to_vec();
    chunks.sort_by_key(|c| (c.rank, c.thread, c.first_row));
    for c in &chunks {
        let list = operations.entry((c.rank, c.thread)).or_default();
        assert_eq!(
            list.len() as u64,
            c.first_row,
            "chunks cover their location"
        );
        for (_, op) in t.chunk_operations(c).unwrap() {
            list.push(op_text(t, &op));
        }
    }
    let mut routine_calls: Vec<String> = t
        .routine_calls()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{}.{} {} depth {} {}..{}",
                c.rank,
                c.thread,
                name(t, c.routine),
                c.depth,
                c.start,
                c.end
            )
        })
        .collect();
    routine_calls.sort();
    let mut messages: Vec<String> = t
        .messages()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{}->{} c{} tag {} {} B {}..{} {:?} {:?}",
                m.sender,
                m.receiver,
                m.comm,
                m.tag,
                m.bytes,
                m.send_time,
                m.recv_time,
                position(t, m.send_op),
                position(t, m.recv_op)
            )
        })
        .collect();
    messages.sort();
    let mut links: Vec<(OpPosition, OpPosition)> = t
        .request_links()
        .unwrap()
        .iter()
        .map(|l| (position(t, l.request_op), position(t, l.completion_op)))
        .collect();
    links.sort();
    let mut collectives: Vec<String> = t
        .collective_instances()
        .unwrap()
        .iter()
        .map(|c| {
            let mut members: Vec<OpPosition> = c.ops.iter().map(|&id| position(t, id)).collect();
            members.sort();
            format!(
                "{} c{} root {:?} {}..{} {}/{} B {members:?}",
                t.kind_name(c.kind),
                c.comm,
                c.root,
                c.start,
                c.end,
                c.send_bytes,
                c.recv_bytes
            )
        })
        .collect();
    collectives.sort();
    let mut anomalies: Vec<String> = t
        .anomalies()
        .unwrap()
        .iter()
        .map(|a| anomaly_text(t, a))
        .collect();
    anomalies.sort();
    Contents {
        header: t.header().clone(),
        strings: (0..)
            .map_while(|id| t.string(id).map(str::to_string))
            .collect(),
        summary,
        traffic: format!("{:?}", t.traffic()),
        pairs: format!("{:?}", t.pairs()),
        operations,
        routine_calls,
        messages,
        links,
        collectives,
        anomalies,
    }
}

/// The answers to the statistics queries the round trip must keep.
pub fn answers(s: &mut Session, trace: &str) -> Vec<String> {
    s.use_trace(trace).unwrap();
    [
        "SELECT COMMUNICATION MATRIX OF COUNT",
        "SELECT STATISTICS FOR ALL PROCESSES",
    ]
    .iter()
    .map(|q| {
        let r = s.run(q).unwrap_or_else(|e| panic!("{q} on {trace}: {e}"));
        format!("{q}: {:?} {:?}", r.columns, r.rows)
    })
    .collect()
}

/// `mtfdb info NAME` as the binary prints it, without what names the trace or depends on
/// its ids (its first line, examples of anomalies that name operation ids, the bytes on
/// disk), lines sorted.
pub fn info_lines(db: &Path, trace: &str) -> Vec<String> {
    let (ok, text, err) = mtfdb(db, &["info", trace]);
    assert!(ok, "{err}");
    let mut lines: Vec<String> = text
        .lines()
        .skip(1)
        .filter(|l| {
            !l.trim_start().starts_with("e.g. operation")
                && !l.contains("--anomalies")
                && !l.starts_with("on disk:")
        })
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}

/// Feeds the hand-built trace: 3 ranks, a second thread, names with quotes, control
/// characters, XML markup and 10,000 characters, wildcards, requests, a Test that completed
/// nothing, collectives with roots and sizes on a sub-communicator, an incomplete one,
/// routine calls nested, zero-length and never left, non-MPI locations, and anomalies of
/// its source (one equal to one matching finds, one of a class matching also finds).
pub fn rich_trace(sink: &mut dyn EventSink) -> mtfdb::Result<()> {
    let process = |rank, name: &str, processor| Process {
        rank,
        name: name.to_string(),
        processor,
    };
    let long = format!("{}ü\t#=,", "x".repeat(5000));
    let header = TraceHeader {
        scenario: "rich \"round trip\"\nwith <xml> & a tab\t".into(),
        trace_name: "rich".into(),
        comments: "line one\nline two".into(),
        processors: vec![Processor {
            id: 7,
            name: "node 7, rack=\"a\"".into(),
        }],
        processes: vec![
            process(0, "P0 \"zero\"", Some(7)),
            process(1, &long, Some(7)),
            process(2, "", None),
        ],
        communicators: vec![
            Communicator {
                id: 0,
                name: "MPI_COMM_WORLD".into(),
                members: vec![0, 1, 2],
            },
            Communicator {
                id: 5,
                name: "odd \"comm\"\n".into(),
                members: vec![2, 0],
            },
            Communicator {
                id: 9,
                name: "self".into(),
                members: vec![1],
            },
        ],
        locations: Vec::new(),
        untimed: false,
    };
    sink.header(&header)?;
    let strings = [
        "main".to_string(),
        "MPI_DOUBLE".into(),
        "solve<int, \"x\">".into(),
        "MPI_Comm_rank".into(),
        "MPI_Send".into(),
        String::new(),
        "a\nb\u{7}".into(),
        "crossed".into(),
        "r".repeat(10_000),
        // A text twice in the table, the second never used: both come back.
        "MPI_DOUBLE".into(),
    ];
    for (id, s) in strings.iter().enumerate() {
        sink.string(id as u32, s)?;
    }
    let op = |rank, kind, start, end| Operation::new(rank, kind, start, end);
    let routine = |rank, thread, time, routine, enter| RoutineEvent {
        rank,
        thread,
        time,
        routine,
        enter,
    };
    let p2p = |mut o: Operation, comm, peer: Option<u32>, tag, bytes| {
        o.comm = Some(comm);
        if o.kind.is_send() {
            (o.dest, o.send_tag, o.send_bytes) = (peer, Some(tag), bytes);
        } else {
            (o.source, o.recv_tag, o.recv_bytes) = (peer, Some(tag), bytes);
        }
        o
    };
    let coll = |mut o: Operation, comm, root| {
        (o.comm, o.root, o.send_bytes, o.recv_bytes, o.datatype) =
            (Some(comm), root, 8, 8, Some(1));
        o
    };
    // Rank 0, thread 0.
    sink.operation(&op(0, OpKind::Init, 0, 10))?;
    sink.routine(&routine(0, 0, 11, 0, true))?;
    let mut isend = p2p(op(0, OpKind::Isend, 20, 25), 0, Some(1), 7, 1024);
    (isend.datatype, isend.request) = (Some(1), Some(1));
    sink.operation(&isend)?;
    sink.routine(&routine(0, 0, 30, 2, true))?;
    sink.operation(&coll(op(0, OpKind::Bcast, 31, 40), 5, Some(2)))?;
    sink.routine(&routine(0, 0, 41, 8, true))?;
    sink.routine(&routine(0, 0, 41, 8, false))?;
    sink.routine(&routine(0, 0, 50, 2, false))?;
    let mut wait = op(0, OpKind::Wait, 60, 70);
    wait.completes = vec![1];
    sink.operation(&wait)?;
    sink.operation(&p2p(op(0, OpKind::Send, 71, 72), 0, Some(2), -5, 16))?;
    sink.operation(&op(0, OpKind::Finalize, 80, 90))?;
    sink.routine(&routine(0, 0, 90, 0, false))?;
    // Rank 0, thread 1: other calls, one named like a fixed kind, in a call never left.
    let mut comm_rank = op(0, OpKind::Other(3), 5, 6);
    (comm_rank.thread, comm_rank.flags) = (1, flags::WITHOUT_RECORDS);
    sink.operation(&comm_rank)?;
    sink.routine(&routine(0, 1, 7, 5, true))?;
    let mut other_send = op(0, OpKind::Other(4), 8, 9);
    other_send.thread = 1;
    sink.operation(&other_send)?;
    // Rank 1.
    sink.operation(&op(1, OpKind::Init, 0, 10))?;
    let mut test = op(1, OpKind::Test, 11, 12);
    test.flags = flags::NOT_COMPLETED;
    sink.operation(&test)?;
    let mut irecv = p2p(op(1, OpKind::Irecv, 13, 14), 0, Some(0), 7, 1024);
    (irecv.flags, irecv.datatype, irecv.request) =
        (flags::ANY_SOURCE | flags::ANY_TAG, Some(1), Some(9));
    sink.operation(&irecv)?;
    let mut testsome = op(1, OpKind::Testsome, 30, 35);
    testsome.completes = vec![9];
    sink.operation(&testsome)?;
    sink.operation(&coll(op(1, OpKind::Allreduce, 40, 50), 0, None))?;
    sink.routine(&routine(1, 0, 51, 6, true))?;
    sink.routine(&routine(1, 0, 52, 6, false))?;
    let mut wildcard = p2p(op(1, OpKind::Recv, 60, 61), 9, None, 3, 0);
    wildcard.flags = flags::ANY_SOURCE;
    sink.operation(&wildcard)?;
    let mut any_tag = p2p(op(1, OpKind::Recv, 62, 63), 9, Some(1), ANY_TAG, 0);
    any_tag.flags = flags::ANY_TAG;
    sink.operation(&any_tag)?;
    sink.operation(&op(1, OpKind::Finalize, 70, 80))?;
    // Rank 2: no Finalize.
    sink.operation(&op(2, OpKind::Init, 0, 10))?;
    sink.operation(&coll(op(2, OpKind::Bcast, 31, 45), 5, Some(2)))?;
    sink.operation(&p2p(op(2, OpKind::Recv, 50, 51), 0, Some(0), 99, 4))?;
    // What the source found.
    let at = |rank, thread, index| OpPosition {
        rank,
        thread,
        index,
    };
    sink.anomaly(&Anomaly::CrossedLeave {
        rank: 0,
        thread: 0,
        time: 50,
        routine: 7,
        innermost: 2,
    })?;
    sink.anomaly(&Anomaly::LeaveWithoutEnter {
        rank: 1,
        thread: 0,
        time: 52,
        routine: 7,
    })?;
    sink.anomaly_at(
        &Anomaly::CallWithoutRecords {
            op: 0,
            rank: 0,
            name: 4,
        },
        &[at(0, 1, 1)],
    )?;
    sink.anomaly(&Anomaly::SkippedRecord {
        rank: Some(2),
        time: Some(3),
        what: "a record of kind 0x1f & <stuff>".into(),
    })?;
    sink.anomaly(&Anomaly::ValueOverflow {
        rank: None,
        what: "bytes of rank 0's collectives".into(),
    })?;
    sink.anomaly_at(
        &Anomaly::LengthMismatch {
            send_op: 0,
            recv_op: 0,
            sent: 1024,
            received: 1000,
        },
        &[at(0, 0, 1), at(1, 0, 2)],
    )?;
    sink.anomaly(&Anomaly::MissingFinalize { rank: 2 })?;
    sink.anomaly_at(
        &Anomaly::RequestNeverCompleted {
            op: 0,
            rank: 0,
            request: 77,
        },
        &[at(0, 0, 1)],
    )?;
    sink.locations(&[
        Location {
            name: "CUDA[0:13] <stream> & \"x\"".into(),
            kind: LocationKind::Accelerator,
            group: "GPU 0".into(),
            rank: Some(0),
            thread: Some(2),
            regions: 12,
            events: 40,
        },
        Location::new("uncore\u{1}reader", LocationKind::Metric),
        Location {
            group: "python".into(),
            ..Location::new("python main", LocationKind::Process)
        },
    ])?;
    sink.finish()
}

/// Runs the `mtfdb` binary on the database `db`: (success, stdout, stderr).
pub fn mtfdb(db: &Path, args: &[&str]) -> (bool, String, String) {
    let out = super::mtfdb_output(db, args);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

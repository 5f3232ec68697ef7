//! `mtfdb export`: a stored trace written as MTF text or GXL and imported again is the same
//! trace (header, every operation, routine call, message, request link, collective instance
//! and anomaly, ids aside), gives the same answers to the statistics queries and to `info`,
//! and exporting the copy gives the same bytes. For generated scenarios, a hand-built trace
//! that uses every field and anomaly class, and every trace in `../shared/traces` that imports.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use mtfdb::export::{export_file, Format};
use mtfdb::gen::{GenConfig, Scenario};
use mtfdb::ingest::EventSink;
use mtfdb::model::{
    flags, Anomaly, Communicator, Location, LocationKind, OpKind, OpPosition, Operation, Process,
    Processor, RoutineEvent, TraceHeader, ANY_TAG,
};
use mtfdb::query::Session;
use mtfdb::{Database, Trace};

use common::import_generated;

const FORMATS: [Format; 2] = [Format::MtfText, Format::Gxl];

// ---------------------------------------------------------------------------------------
// Everything a trace holds, with ids replaced by what does not depend on the import's order:
// operations by position (rank, thread, index), names instead of string ids.

/// The position of every operation id, from the chunk directory.
fn position(t: &Trace, id: u64) -> OpPosition {
    let (chunk, row) = ((id >> 16) as u32, id & 0xffff);
    let info = t.op_chunks().iter().find(|c| c.chunk == chunk).unwrap();
    OpPosition {
        rank: info.rank,
        thread: info.thread,
        index: info.first_row + row,
    }
}

fn name(t: &Trace, id: u32) -> String {
    t.string(id).unwrap().to_string()
}

/// An anomaly with its operations by position and its strings by text.
fn anomaly_text(t: &Trace, a: &Anomaly) -> String {
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
        Anomaly::IncompleteCollective { kind, .. } | Anomaly::RootMismatch { kind, .. } => {
            named.push(t.kind_name(std::mem::replace(kind, OpKind::Init)))
        }
        _ => {}
    }
    format!("{a:?} at {positions:?} names {named:?}")
}

/// An operation with its call and datatype by name (`Other` ids differ between imports).
fn op_text(t: &Trace, op: &Operation) -> String {
    let mut o = op.clone();
    let kind = t.kind_name(op.kind);
    let datatype = op.datatype.map(|d| name(t, d));
    o.kind = OpKind::Init;
    o.datatype = None;
    format!("{kind} {datatype:?} {o:?}")
}

#[derive(Debug, PartialEq)]
struct Contents {
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

fn contents(t: &Trace) -> Contents {
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
fn answers(s: &mut Session, trace: &str) -> Vec<String> {
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
fn info_lines(db: &Path, trace: &str) -> Vec<String> {
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

/// Exports trace `name` of the database at `db` in `format`, imports the file as a new
/// trace, and checks that both are the same trace, answer the same, and export to the same
/// bytes. Returns the exported file's text.
fn round_trip(db: &Path, name: &str, format: Format, dir: &Path) -> String {
    let ext = format.name();
    let file = dir.join(format!("{name}.{ext}"));
    let copy = format!("{name}.{ext}-copy");
    {
        let database = Database::open(db).unwrap();
        let original = database.trace(name).unwrap();
        let stored = original.stored_bytes().unwrap();
        export_file(&original, format, &file).unwrap();
        assert_eq!(
            original.stored_bytes().unwrap(),
            stored,
            "export wrote to the store"
        );
        database
            .import(&file, Some(&copy))
            .unwrap_or_else(|e| panic!("{name} as {ext}: {e}"));
        let imported = database.trace(&copy).unwrap();
        assert_eq!(contents(&imported), contents(&original), "{name} as {ext}");
        let again = dir.join(format!("{name}-again.{ext}"));
        export_file(&imported, format, &again).unwrap();
        assert!(
            std::fs::read(&again).unwrap() == std::fs::read(&file).unwrap(),
            "{name}: export, import, export gave other bytes as {ext}"
        );
    }
    let mut session = Session::new(Database::open(db).unwrap());
    assert_eq!(
        answers(&mut session, &copy),
        answers(&mut session, name),
        "{name} as {ext}"
    );
    drop(session);
    let (a, b) = (info_lines(db, &copy), info_lines(db, name));
    let only = |x: &[String], y: &[String]| -> Vec<String> {
        x.iter()
            .filter(|l| !y.contains(l))
            .map(|l| l.chars().take(200).collect())
            .collect()
    };
    assert!(
        a == b,
        "{name} as {ext}: info differs: only in the copy {:?}, only in the original {:?}",
        only(&a, &b),
        only(&b, &a)
    );
    String::from_utf8(std::fs::read(&file).unwrap()).unwrap()
}

// ---------------------------------------------------------------------------------------
// Generated scenarios

#[test]
fn generated_scenarios_come_back_the_same_from_mtf_text_and_gxl() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    for (i, scenario) in Scenario::ALL.into_iter().enumerate() {
        let mut config = GenConfig::new(scenario, 16, 5);
        config.shuffle_ranks = i % 2 == 1;
        let name = scenario.to_string();
        let truth = {
            let database = Database::open(&db).unwrap();
            import_generated(&database, &config, &name)
        };
        for format in FORMATS {
            let text = round_trip(&db, &name, format, dir.path());
            // The file holds the generator's operations and routine events, one item each.
            let items = match format {
                Format::MtfText => text
                    .lines()
                    .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
                    .count() as u64,
                Format::Gxl => {
                    let ops = text
                        .lines()
                        .filter(|l| l.starts_with("<node id=\"o"))
                        .count() as u64;
                    let calls = text
                        .lines()
                        .filter(|l| l.starts_with("<node id=\"r"))
                        .count() as u64;
                    ops + 2 * calls
                }
                Format::Chrome => unreachable!("nothing reads a Chrome export back"),
                // A folder of tables, not a file: tests/parquet.rs.
                Format::Parquet => unreachable!("not one of FORMATS"),
            };
            assert_eq!(
                items,
                truth.operations + truth.routine_events,
                "{name} {format:?}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// A hand-built trace with every field, odd names, threads, locations and anomalies

/// Feeds the hand-built trace: 3 ranks, a second thread, names with quotes, control
/// characters, XML markup and 10,000 characters, wildcards, requests, a Test that completed
/// nothing, collectives with roots and sizes on a sub-communicator, an incomplete one,
/// routine calls nested, zero-length and never left, non-MPI locations, and anomalies of
/// its source (one equal to one matching finds, one of a class matching also finds).
fn rich_trace(sink: &mut dyn EventSink) -> mtfdb::Result<()> {
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

/// The anomalies the hand-built trace's source reported.
const SOURCE_ANOMALIES: u64 = 8;

#[test]
fn every_field_name_thread_location_and_anomaly_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    {
        let database = Database::open(&db).unwrap();
        database
            .import_events("rich", |sink| rich_trace(sink))
            .unwrap();
        let t = database.trace("rich").unwrap();
        let s = t.summary();
        // What the import found itself, beside the source's anomalies.
        for (kind, n) in [
            ("send never received", 1),
            ("receive never matched", 1),
            ("incomplete collective", 1),
            ("wildcard receive never resolved", 2),
            ("missing MPI_Finalize", 2),
            ("routine never left", 1),
            ("crossed routine leave", 1),
            ("request never completed", 1),
            ("MPI call without its records", 2),
        ] {
            assert_eq!(s.anomaly_count(kind), n, "{kind}");
        }
        assert_eq!((s.messages, s.request_links, s.routine_calls), (1, 2, 5));
        assert_eq!(t.header().locations.len(), 3);
    }
    let text = round_trip(&db, "rich", Format::MtfText, dir.path());
    let anomaly_lines: Vec<&str> = text.lines().filter(|l| l.starts_with("anomaly ")).collect();
    assert_eq!(
        anomaly_lines.len() as u64,
        SOURCE_ANOMALIES + 1,
        "{anomaly_lines:#?}"
    );
    for line in [
        "anomaly CrossedLeave rank=0 thread=0 time=50 routine=crossed innermost=\"solve<int, \\\"x\\\">\"",
        "anomaly CallWithoutRecords op=0.1:1 rank=0 name=MPI_Send",
        "anomaly LengthMismatch send_op=0:1 recv_op=1:2 sent=1024 received=1000",
        "anomaly MissingFinalize rank=2",
        "anomaly RequestNeverCompleted op=0:1 rank=0 request=77",
        "anomaly UnclosedRoutine rank=0 routine=\"\"",
    ] {
        assert!(anomaly_lines.contains(&line), "{line} not in {anomaly_lines:#?}");
    }
    assert!(text.contains("location uncore\u{1}reader metric\n"));
    // The call recorded without its records keeps its flag; the import finds the anomaly.
    assert!(text.contains("\n0.1 5 6 MPI_Comm_rank rec=0\n"));
    let gxl = round_trip(&db, "rich", Format::Gxl, dir.path());
    let derived = gxl
        .matches("<attr name=\"derived\"><bool>true</bool>")
        .count() as u64;
    let source = gxl
        .matches("<attr name=\"derived\"><bool>false</bool>")
        .count() as u64;
    assert_eq!((derived, source), (7, SOURCE_ANOMALIES + 1));
    assert!(gxl.contains("<string>uncore&#x1;reader</string>"));
    assert!(gxl.contains("<string>CUDA[0:13] &lt;stream&gt; &amp; &quot;x&quot;</string>"));
}

// ---------------------------------------------------------------------------------------
// Every real trace that imports

/// Where the real traces are: `../shared/traces` beside the crate.
fn shared_traces() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/traces");
    dir.is_dir().then_some(dir)
}

/// Every folder under `dir` (itself included), sorted, parents before children.
fn folders(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    entries.sort();
    for e in entries {
        out.extend(folders(&e));
    }
    out
}

/// Imports every trace under `root` that `Database::import` accepts (a folder, or else each
/// file of a folder), under a name made of its path; returns the names, and prints what it
/// skipped and why.
fn import_every_trace(db: &Database, root: &Path) -> Vec<(String, PathBuf)> {
    let mut imported: Vec<(String, PathBuf)> = Vec::new();
    for folder in folders(root) {
        if imported.iter().any(|(_, p)| folder.starts_with(p)) {
            continue;
        }
        let name = |p: &Path| {
            p.strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace(['/', '\\'], "_")
        };
        let files: Vec<PathBuf> = {
            let mut f: Vec<PathBuf> = std::fs::read_dir(&folder)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.is_file())
                .collect();
            f.sort();
            f
        };
        if files.is_empty() {
            continue;
        }
        match db.import(&folder, Some(&name(&folder))) {
            Ok(_) => {
                imported.push((name(&folder), folder.clone()));
                continue;
            }
            Err(e) => println!("skipped folder {}: {e}", folder.display()),
        }
        for file in files {
            match db.import(&file, Some(&name(&file))) {
                Ok(_) => imported.push((name(&file), file.clone())),
                Err(e) => println!(
                    "skipped {}: {}",
                    file.display(),
                    e.to_string().lines().next().unwrap_or_default()
                ),
            }
        }
    }
    imported
}

#[test]
fn every_real_trace_that_imports_comes_back_the_same_from_mtf_text_and_gxl() {
    let Some(root) = shared_traces() else {
        println!("skipped: ../shared/traces is absent");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let traces = import_every_trace(&Database::open(&db).unwrap(), &root);
    let names: Vec<&str> = traces.iter().map(|(n, _)| n.as_str()).collect();
    println!("round trips of: {names:?}");
    // Every trace of every format there: a reader that regresses fails here, not silently.
    for must in [
        "dumpi_testtrace",
        "otf1_jacobi",
        "paraver_lulesh_lulesh_7+1_with_uncores_sockets1+2.chop8.prv",
        "paraver_qsort_qsort_beo3.prv",
        "otf2_casita_1_ocl_deps",
        "otf2_casita_1_scorep-ompt-host-nested",
        "otf2_casita_1_xeonphi_jacobi_01",
        "otf2_casita_2_cuda_simple",
        "otf2_casita_2_jacobi_blame_cpu_015",
        "otf2_casita_4_mpi_ls_barr",
        "otf2_ping-pong",
        "otf2_ping-pong-papi",
        "otf2_mi300-hip",
    ] {
        assert!(names.contains(&must), "{must} did not import: {names:?}");
    }
    for (name, path) in &traces {
        for format in FORMATS {
            println!("{} as {}", path.display(), format.name());
            round_trip(&db, name, format, dir.path());
        }
    }
}

// ---------------------------------------------------------------------------------------
// Many routine calls: the enter order is sorted through a temporary file

#[test]
fn routine_calls_past_the_in_memory_sort_come_back_in_order() {
    // Two ranks, each a `main` around 75,000 `outer` calls, each holding a zero-length
    // `inner` call: 300,002 calls, more than one sort run (262,144). `main` is left last,
    // so the store's last chunk holds the call that must be entered first.
    const ITERATIONS: u64 = 75_000;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    {
        let database = Database::open(&db).unwrap();
        database
            .import_events("calls", |sink| {
                sink.header(&TraceHeader::world(2, "MPI_COMM_WORLD"))?;
                for (id, s) in ["main", "outer", "inner"].iter().enumerate() {
                    sink.string(id as u32, s)?;
                }
                let ev = |rank, time, routine, enter| RoutineEvent {
                    rank,
                    thread: 0,
                    time,
                    routine,
                    enter,
                };
                for rank in 0..2 {
                    sink.routine(&ev(rank, 0, 0, true))?;
                }
                for i in 0..ITERATIONS {
                    let t = 10 * i + 1;
                    for rank in 0..2u32 {
                        sink.routine(&ev(rank, t, 1, true))?;
                        sink.routine(&ev(rank, t, 2, true))?;
                        if i % 1000 == 0 {
                            // A message inside the zero-length call, at its time.
                            let mut op = Operation::new(rank, OpKind::Send, t, t);
                            if rank == 1 {
                                op.kind = OpKind::Recv;
                                (op.comm, op.source, op.recv_tag) = (Some(0), Some(0), Some(1));
                            } else {
                                (op.comm, op.dest, op.send_tag) = (Some(0), Some(1), Some(1));
                            }
                            sink.operation(&op)?;
                        }
                        sink.routine(&ev(rank, t, 2, false))?;
                        sink.routine(&ev(rank, t + 5, 1, false))?;
                    }
                }
                for rank in 0..2 {
                    sink.routine(&ev(rank, 10 * ITERATIONS, 0, false))?;
                }
                sink.finish()
            })
            .unwrap();
        let t = database.trace("calls").unwrap();
        assert_eq!(t.summary().routine_calls, 2 * (1 + 2 * ITERATIONS));
        assert_eq!(t.summary().messages, ITERATIONS / 1000);
    }
    let text = round_trip(&db, "calls", Format::MtfText, dir.path());
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    assert_eq!(
        &lines[..4],
        [
            "0 0 enter main",
            "1 0 enter main",
            "0 1 enter outer",
            "0 1 enter inner"
        ]
    );
    assert_eq!(
        &lines[4..6],
        ["0 1 1 Send c=0 to=1 tag=1", "0 1 leave inner"]
    );
}

// ---------------------------------------------------------------------------------------
// The command line, and damaged GXL

fn mtfdb(db: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mtfdb"))
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_export_command_writes_either_format_and_says_what_it_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    {
        let database = Database::open(&db).unwrap();
        import_generated(&database, &GenConfig::new(Scenario::Ring, 4, 3), "ring");
    }
    let gxl = dir.path().join("ring.gxl");
    let (ok, out, err) = mtfdb(&db, &["export", "ring", "-o", gxl.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(
        out.starts_with(&format!("exported \"ring\" to {} (gxl): ", gxl.display())),
        "{out}"
    );
    assert!(std::fs::read_to_string(&gxl)
        .unwrap()
        .contains("<gxl xmlns:xlink="));
    let text = dir.path().join("ring.txt");
    let (ok, _, err) = mtfdb(
        &db,
        &[
            "export",
            "ring",
            "--format",
            "mtf",
            "-o",
            text.to_str().unwrap(),
        ],
    );
    assert!(ok, "{err}");
    assert!(std::fs::read_to_string(&text)
        .unwrap()
        .starts_with("MTF 1\n"));
    let (ok, _, err) = mtfdb(&db, &["export", "ring", "-o", "ring.out"]);
    assert!(!ok);
    assert_eq!(
        err,
        "error: ring.out: say which format to write with --format mtf, gxl, parquet or chrome\n"
    );
    let (ok, _, err) = mtfdb(&db, &["export", "ring", "--format", "xml", "-o", "x"]);
    assert!(!ok);
    assert!(
        err.contains(
            "unknown export format \"xml\"; mtfdb exports to: mtf (MTF text), gxl (GXL graph)"
        ),
        "{err}"
    );
    // Both files import, detected from their content.
    let (ok, _, err) = mtfdb(&db, &["import", gxl.to_str().unwrap(), "--name", "g"]);
    assert!(ok, "{err}");
    let (ok, _, err) = mtfdb(&db, &["import", text.to_str().unwrap(), "--name", "m"]);
    assert!(ok, "{err}");
}

#[test]
fn damaged_gxl_is_refused_at_its_byte_offset_and_leaves_the_database_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let database = Database::open(&db).unwrap();
    import_generated(&database, &GenConfig::new(Scenario::Ring, 4, 2), "ring");
    let good = dir.path().join("ring.gxl");
    export_file(&database.trace("ring").unwrap(), Format::Gxl, &good).unwrap();
    let text = std::fs::read_to_string(&good).unwrap();
    let bad = dir.path().join("bad.gxl");
    let attempt = |content: &str| {
        std::fs::write(&bad, content).unwrap();
        let e = database.import(&bad, Some("bad")).unwrap_err().to_string();
        assert!(
            database.trace("bad").is_err(),
            "nothing of a failed import remains"
        );
        e
    };
    let path = bad.display().to_string();
    // Cut in the middle of an operation node.
    let op = text.find("<node id=\"o").unwrap();
    let e = attempt(&text[..op + 40]);
    assert!(e.starts_with(&format!("{path}: byte ")), "{e}");
    assert!(
        e.contains("the file ends inside a node") || e.contains("XML"),
        "{e}"
    );
    // An operation without its start time.
    let at = text[op..].find("<attr name=\"startTime\">").unwrap() + op;
    let end = text[at..].find("</attr>").unwrap() + at + "</attr>".len();
    let e = attempt(&format!("{}{}", &text[..at], &text[end..]));
    assert_eq!(
        e.lines().next().unwrap(),
        format!(
            "{path}: byte {op}: bad node: the {} node {:?} has no attribute startTime",
            node_class(&text[op..]),
            node_id(&text[op..])
        ),
    );
    // A number that is not one.
    let e = attempt(&text.replacen(
        "<attr name=\"rank\"><int>0</int>",
        "<attr name=\"rank\"><int>zero</int>",
        2,
    ));
    assert!(e.contains("bad node: the attribute rank of the Process node \"PRC0\" is not an int of 0 to 2^32-1"), "{e}");
    // Not XML at all after the root.
    let e = attempt("<gxl><graph id=\"g\"><node id=\"x\"><attr name=\"a\"><int>1</int></attrr></node></graph></gxl>");
    assert!(e.contains(": bad XML: the XML does not parse"), "{e}");
    // A declaration after the events.
    let processor = "<node id=\"PRCR9\"><type xlink:href=\"mtf.gxl#Processor\"/><attr name=\"processorId\"><int>9</int></attr><attr name=\"processorName\"><string>late</string></attr></node>\n";
    let close = text.find("</graph>").unwrap();
    let e = attempt(&format!("{}{processor}{}", &text[..close], &text[close..]));
    assert!(
        e.contains(&format!(
            "byte {close}: declaration after events: a Processor node (PRCR9)"
        )),
        "{e}"
    );
    assert_eq!(database.trace_names().unwrap(), vec!["ring"]);
}

/// The type of the node `text` starts with.
fn node_class(text: &str) -> String {
    let start = text.find("mtf.gxl#").unwrap() + "mtf.gxl#".len();
    let end = text[start..].find('"').unwrap() + start;
    text[start..end].to_string()
}

/// The id of the node `text` starts with.
fn node_id(text: &str) -> String {
    let start = text.find("id=\"").unwrap() + 4;
    let end = text[start..].find('"').unwrap() + start;
    text[start..end].to_string()
}

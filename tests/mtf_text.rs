//! The MTF text format: parsing, writing, round trips and every validation rule.

use std::io::Read;
use std::path::Path;

use mtfdb::ingest::mtf_text::{
    parse_file, parse_reader, parse_reader_with, MtfWriter, ParseOptions, ParseStats,
};
use mtfdb::ingest::{EventSink, Policy, ValidatingSink};
use mtfdb::model::{
    flags, Anomaly, Communicator, Location, LocationKind, OpKind, OpPosition, Operation, Process,
    Processor, RoutineEvent, TraceHeader,
};
use mtfdb::{Error, Result};

/// Everything a parse delivered, in order.
#[derive(Debug, Default, PartialEq)]
struct Collect {
    header: Option<TraceHeader>,
    headers: u32,
    strings: Vec<String>,
    ops: Vec<Operation>,
    routines: Vec<RoutineEvent>,
    /// Anomalies with the positions of the operations they name.
    anomalies: Vec<(Anomaly, Vec<OpPosition>)>,
    /// Locations reported at the end.
    locations: Vec<Vec<Location>>,
    order: Vec<Item>,
    finished: u32,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Item {
    Str(u32),
    Op(usize),
    Routine(usize),
    Anomaly(usize),
    Locations(usize),
}

impl EventSink for Collect {
    fn header(&mut self, header: &TraceHeader) -> Result<()> {
        assert!(self.order.is_empty(), "the header comes first");
        self.headers += 1;
        self.header = Some(header.clone());
        Ok(())
    }
    fn string(&mut self, id: u32, text: &str) -> Result<()> {
        assert_eq!(
            id as usize,
            self.strings.len(),
            "string ids are dense and in order"
        );
        self.strings.push(text.to_string());
        self.order.push(Item::Str(id));
        Ok(())
    }
    fn operation(&mut self, op: &Operation) -> Result<()> {
        for id in [
            op.datatype,
            if let OpKind::Other(id) = op.kind {
                Some(id)
            } else {
                None
            },
        ]
        .into_iter()
        .flatten()
        {
            assert!(
                (id as usize) < self.strings.len(),
                "string {id} defined before use"
            );
        }
        self.order.push(Item::Op(self.ops.len()));
        self.ops.push(op.clone());
        Ok(())
    }
    fn routine(&mut self, event: &RoutineEvent) -> Result<()> {
        assert!((event.routine as usize) < self.strings.len());
        self.order.push(Item::Routine(self.routines.len()));
        self.routines.push(*event);
        Ok(())
    }
    fn anomaly(&mut self, anomaly: &Anomaly) -> Result<()> {
        self.anomaly_at(anomaly, &[])
    }
    fn anomaly_at(&mut self, anomaly: &Anomaly, at: &[OpPosition]) -> Result<()> {
        assert_eq!(anomaly.ops().len(), at.len(), "a position per operation");
        self.order.push(Item::Anomaly(self.anomalies.len()));
        self.anomalies.push((anomaly.clone(), at.to_vec()));
        Ok(())
    }
    fn locations(&mut self, locations: &[Location]) -> Result<()> {
        self.order.push(Item::Locations(self.locations.len()));
        self.locations.push(locations.to_vec());
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        self.finished += 1;
        Ok(())
    }
}

impl Collect {
    /// Feeds what was collected to another sink, in the same order.
    fn replay(&self, sink: &mut impl EventSink) -> Result<()> {
        sink.header(self.header.as_ref().unwrap())?;
        for item in &self.order {
            match *item {
                Item::Str(id) => sink.string(id, &self.strings[id as usize])?,
                Item::Op(i) => sink.operation(&self.ops[i])?,
                Item::Routine(i) => sink.routine(&self.routines[i])?,
                Item::Anomaly(i) => {
                    let (a, at) = &self.anomalies[i];
                    if at.is_empty() {
                        sink.anomaly(a)?
                    } else {
                        sink.anomaly_at(a, at)?
                    }
                }
                Item::Locations(i) => sink.locations(&self.locations[i])?,
            }
        }
        sink.finish()
    }
}

/// Parses `text` through the import's seam, strictly, as an import of MTF text does.
fn parse(text: &str) -> Result<(Collect, ParseStats)> {
    let mut c = Collect::default();
    let stats = parse_reader(
        text.as_bytes(),
        "t.mtf",
        &mut ValidatingSink::new(&mut c, Policy::Strict),
    )?;
    Ok((c, stats))
}

fn parse_ok(text: &str) -> Collect {
    match parse(text) {
        Ok((c, _)) => c,
        Err(e) => panic!("{e}"),
    }
}

/// The first line of the error's display (`file:line:col: rule: message`).
fn error_of(text: &str) -> String {
    match parse(text) {
        Ok(_) => panic!("parsed without error:\n{text}"),
        Err(e) => e.to_string().lines().next().unwrap().to_string(),
    }
}

fn write(c: &Collect) -> String {
    let mut w = MtfWriter::new(Vec::new());
    c.replay(&mut w).unwrap();
    String::from_utf8(w.into_inner().unwrap()).unwrap()
}

// ---------------------------------------------------------------------------------------
// The grammar's example

fn grammar_example() -> String {
    let g = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("grammar/mtf.ebnf"))
        .unwrap();
    let start = g.find("BEGIN EXAMPLE\n").unwrap() + "BEGIN EXAMPLE\n".len();
    let end = g.find("END EXAMPLE").unwrap();
    g[start..end].to_string()
}

#[test]
fn grammar_example_parses_with_exact_counts() {
    let (c, stats) = parse(&grammar_example()).unwrap();
    let h = c.header.as_ref().unwrap();
    assert_eq!(c.headers, 1);
    assert_eq!(c.finished, 1);
    assert_eq!(h.scenario, "ring example, 4 processes, 1 KiB messages");
    assert_eq!(h.trace_name, "ring4");
    assert_eq!(h.comments, "hand-written example of the MTF text format");
    assert_eq!(h.processors.len(), 2);
    assert_eq!(
        h.processors[1],
        Processor {
            id: 1,
            name: "node02".into()
        }
    );
    assert_eq!(h.processes.len(), 4);
    assert_eq!(
        h.processes[2],
        Process {
            rank: 2,
            name: "P2".into(),
            processor: Some(1)
        }
    );
    assert_eq!(h.communicators.len(), 2);
    assert_eq!(h.communicators[0].members, vec![0, 1, 2, 3]);
    assert_eq!(
        h.communicators[1],
        Communicator {
            id: 1,
            name: "evens".into(),
            members: vec![0, 2]
        }
    );
    assert_eq!(
        h.locations,
        vec![Location {
            name: "CUDA[0:7]".into(),
            kind: LocationKind::Accelerator,
            group: "GPU 0 of node01".into(),
            rank: Some(0),
            thread: Some(2),
            regions: 3,
            events: 6,
        }]
    );
    assert_eq!(c.ops.len(), 29);
    assert_eq!(c.routines.len(), 2);
    assert_eq!(
        c.strings,
        vec![
            "exchange",
            "MPI_BYTE",
            "MPI_DOUBLE",
            "Comm_rank",
            "MPI_Comm_rank"
        ]
    );
    assert_eq!(stats.operations, 29);
    assert_eq!(stats.routine_events, 2);
    assert_eq!(stats.strings, 5);
    assert_eq!(
        c.anomalies,
        vec![
            (
                Anomaly::SkippedRecord {
                    rank: Some(1),
                    time: Some(300),
                    what: "a metric record of an undeclared counter".into()
                },
                vec![]
            ),
            (
                Anomaly::CallWithoutRecords {
                    op: 0,
                    rank: 0,
                    name: 4
                },
                vec![OpPosition {
                    rank: 0,
                    thread: 1,
                    index: 0
                }]
            ),
        ]
    );
    assert!(
        c.locations.is_empty(),
        "declared locations are the header's"
    );
    assert_eq!(c.ops.iter().filter(|o| o.thread == 1).count(), 1);
    assert_eq!(
        c.ops.iter().filter(|o| o.kind == OpKind::Other(3)).count(),
        1
    );
    assert!(c.ops[..4].iter().all(|o| o.kind == OpKind::Init));

    // 0 110 130 Isend c=0 to=1 tag=7 b=1024 dt=MPI_BYTE req=1, inside `exchange`.
    let mut isend = Operation::new(0, OpKind::Isend, 110, 130);
    isend.comm = Some(0);
    isend.dest = Some(1);
    isend.send_tag = Some(7);
    isend.send_bytes = 1024;
    isend.datatype = Some(1);
    isend.request = Some(1);
    isend.depth = 1;
    assert_eq!(c.ops[4], isend);
    // 0 131 190 Recv c=0 from=*3 rtag=7 rb=1024 dt=MPI_BYTE
    let recv = &c.ops[5];
    assert_eq!(
        (recv.source, recv.flags, recv.recv_tag, recv.recv_bytes),
        (Some(3), flags::ANY_SOURCE, Some(7), 1024)
    );
    assert_eq!(c.ops[6].completes, vec![1]);
    // 2 120 180 Irecv c=0 from=* rtag=* dt=MPI_BYTE req=5
    let irecv = c.ops.iter().find(|o| o.kind == OpKind::Irecv).unwrap();
    assert_eq!((irecv.source, irecv.recv_tag), (None, None));
    assert_eq!(irecv.flags, flags::ANY_SOURCE | flags::ANY_TAG);
    let tests: Vec<_> = c.ops.iter().filter(|o| o.kind == OpKind::Test).collect();
    assert_eq!(tests.len(), 2);
    assert_eq!((tests[0].flags, tests[1].flags), (flags::NOT_COMPLETED, 0));
    let sendrecv = c.ops.iter().find(|o| o.kind == OpKind::Sendrecv).unwrap();
    assert_eq!(
        (
            sendrecv.dest,
            sendrecv.source,
            sendrecv.send_bytes,
            sendrecv.recv_bytes
        ),
        (Some(0), Some(2), 1024, 1024)
    );
    let bcasts: Vec<_> = c.ops.iter().filter(|o| o.kind == OpKind::Bcast).collect();
    assert_eq!(
        bcasts
            .iter()
            .map(|o| (o.rank, o.root, o.comm))
            .collect::<Vec<_>>(),
        vec![(0, Some(0), Some(1)), (2, Some(0), Some(1))]
    );
    assert_eq!(
        c.routines[0],
        RoutineEvent {
            rank: 0,
            thread: 0,
            time: 100,
            routine: 0,
            enter: true
        }
    );
    assert_eq!(
        c.routines[1],
        RoutineEvent {
            rank: 0,
            thread: 0,
            time: 200,
            routine: 0,
            enter: false
        }
    );
    assert_eq!(c.ops.iter().filter(|o| o.depth == 1).count(), 3);
}

#[test]
fn grammar_example_survives_write_and_parse() {
    let first = parse_ok(&grammar_example());
    let written = write(&first);
    let second = parse_ok(&written);
    assert_eq!(second, first);
    // Writing is canonical: a second write gives the same bytes.
    assert_eq!(write(&second), written);
}

// ---------------------------------------------------------------------------------------
// Round trip of a hand-built trace that uses every field and flag

fn hand_built() -> Collect {
    let mut c = Collect {
        header: Some(TraceHeader {
            scenario: "stencil \"big\" run\twith a tab".into(),
            trace_name: "rt-1".into(),
            comments: "line one\nline two # not a comment\\".into(),
            processors: vec![
                Processor {
                    id: 4,
                    name: "node 04".into(),
                },
                Processor {
                    id: 9,
                    name: "n9".into(),
                },
            ],
            processes: vec![
                Process {
                    rank: 0,
                    name: "P0".into(),
                    processor: Some(4),
                },
                Process {
                    rank: 1,
                    name: "rank=1".into(),
                    processor: None,
                },
                Process {
                    rank: 2,
                    name: "".into(),
                    processor: Some(9),
                },
                Process {
                    rank: 3,
                    name: "naïve".into(),
                    processor: Some(9),
                },
                Process {
                    rank: 4,
                    name: "P4".into(),
                    processor: Some(4),
                },
                Process {
                    rank: 5,
                    name: "P5".into(),
                    processor: Some(4),
                },
            ],
            communicators: vec![
                Communicator {
                    id: 0,
                    name: "MPI_COMM_WORLD".into(),
                    members: (0..6).collect(),
                },
                Communicator {
                    id: 70000,
                    name: "reversed".into(),
                    members: vec![5, 4, 3, 1],
                },
                Communicator {
                    id: 3,
                    name: "odd, mixed".into(),
                    members: vec![1, 3, 5, 0],
                },
            ],
            untimed: false,
            locations: vec![
                Location {
                    name: "CUDA[0:13] \"stream\" #2".into(),
                    kind: LocationKind::Accelerator,
                    group: "rank=0's GPU".into(),
                    rank: Some(0),
                    thread: Some(3),
                    regions: 12,
                    events: 40,
                },
                Location::new("uncore reader", LocationKind::Metric),
            ],
        }),
        ..Collect::default()
    };
    let strings = [
        "main",
        "MPI_DOUBLE",
        "struct point",
        "MPI_Comm_rank",
        "solve(int, double)",
        "MPI_Send",
        "x",
    ];
    for (i, s) in strings.iter().enumerate() {
        c.strings.push(s.to_string());
        c.order.push(Item::Str(i as u32));
    }
    let add_op = |c: &mut Collect, op: Operation| {
        c.order.push(Item::Op(c.ops.len()));
        c.ops.push(op);
    };
    let enter = |c: &mut Collect, rank, thread, time, routine, enter| {
        c.order.push(Item::Routine(c.routines.len()));
        c.routines.push(RoutineEvent {
            rank,
            thread,
            time,
            routine,
            enter,
        });
    };
    enter(&mut c, 0, 0, 5, 0, true);
    let mut o = Operation::new(0, OpKind::Isend, 10, 12);
    o.comm = Some(0);
    o.dest = Some(1);
    o.send_tag = Some(-3);
    o.send_bytes = u64::MAX;
    o.datatype = Some(1);
    o.request = Some(u64::MAX - 1);
    o.depth = 1;
    add_op(&mut c, o);
    let mut o = Operation::new(1, OpKind::Irecv, 0, 0);
    o.comm = Some(0);
    o.flags = flags::ANY_SOURCE | flags::ANY_TAG;
    o.recv_bytes = 8;
    o.datatype = Some(2);
    o.request = Some(0);
    add_op(&mut c, o);
    let mut o = Operation::new(1, OpKind::Testsome, 3, 4);
    o.completes = vec![0, 17, 3];
    o.flags = flags::NOT_COMPLETED;
    add_op(&mut c, o);
    let mut o = Operation::new(1, OpKind::Sendrecv, 5, 9);
    o.comm = Some(3);
    o.dest = Some(5);
    o.source = Some(3);
    o.send_tag = Some(i32::MAX);
    o.recv_tag = Some(i32::MIN);
    o.flags = flags::ANY_SOURCE | flags::ANY_TAG;
    o.send_bytes = 1;
    o.recv_bytes = 2;
    add_op(&mut c, o);
    let mut o = Operation::new(3, OpKind::Recv, 100, 200);
    o.comm = Some(3);
    o.source = Some(1);
    o.recv_tag = Some(-1);
    o.flags = flags::ANY_TAG;
    add_op(&mut c, o);
    add_op(&mut c, Operation::new(2, OpKind::Other(3), 7, 7));
    enter(&mut c, 2, 3, 8, 4, true);
    let mut o = Operation::new(2, OpKind::Other(5), 9, 10);
    o.thread = 3;
    o.depth = 1;
    add_op(&mut c, o);
    let mut o = Operation::new(2, OpKind::Other(6), 9, 10);
    o.thread = 3;
    o.depth = 1;
    add_op(&mut c, o);
    enter(&mut c, 2, 3, 11, 4, false);
    let mut o = Operation::new(4, OpKind::Ireduce, 50, 60);
    o.comm = Some(70000);
    o.root = Some(1);
    o.send_bytes = 80;
    o.recv_bytes = 0;
    o.datatype = Some(1);
    o.request = Some(42);
    add_op(&mut c, o);
    let mut o = Operation::new(4, OpKind::Iprobe, 61, 61);
    o.comm = Some(0);
    o.source = Some(0);
    o.recv_tag = Some(5);
    o.flags = flags::NOT_COMPLETED;
    add_op(&mut c, o);
    let mut o = Operation::new(5, OpKind::Barrier, 0, 1);
    o.comm = Some(70000);
    add_op(&mut c, o);
    let mut o = Operation::new(0, OpKind::Waitall, 20, 30);
    o.completes = vec![u64::MAX - 1];
    o.depth = 1;
    add_op(&mut c, o);
    enter(&mut c, 0, 0, 31, 0, false);
    add_op(&mut c, Operation::new(0, OpKind::Finalize, 40, 41));
    c
}

#[test]
fn round_trip_of_every_field_flag_thread_and_name() {
    let original = hand_built();
    let text = write(&original);
    let parsed = parse_ok(&text);
    assert_eq!(parsed.header, original.header);
    assert_eq!(parsed.strings, original.strings);
    assert_eq!(parsed.ops, original.ops);
    assert_eq!(parsed.routines, original.routines);
    assert_eq!(parsed.finished, 1);
    // Strings are defined in first-use order, interleaved with the items that use them.
    let first_uses: Vec<usize> = (0..7)
        .map(|id| {
            parsed
                .order
                .iter()
                .position(|i| *i == Item::Str(id))
                .unwrap()
        })
        .collect();
    assert_eq!(first_uses, vec![0, 2, 4, 9, 11, 13, 15]);

    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "MTF 1");
    assert_eq!(lines[1], r#"scenario "stencil \"big\" run\twith a tab""#);
    assert_eq!(
        lines[3],
        r#"comment "line one\nline two # not a comment\\""#
    );
    assert!(lines.contains(&r#"process 1 "rank=1""#));
    assert!(lines.contains(&"communicator 0 MPI_COMM_WORLD 0-5"));
    assert!(lines.contains(&"communicator 70000 reversed 5-3,1"));
    assert!(lines.contains(&r#"communicator 3 "odd, mixed" 1,3,5,0"#));
    assert!(lines.contains(&"0 10 12 Isend c=0 to=1 tag=-3 b=18446744073709551615 dt=MPI_DOUBLE req=18446744073709551614"));
    assert!(lines.contains(&r#"1 0 0 Irecv c=0 from=* rtag=* rb=8 dt="struct point" req=0"#));
    assert!(lines.contains(&"1 3 4 Testsome done=0,17,3 flag=0"));
    assert!(lines
        .contains(&"1 5 9 Sendrecv c=3 to=5 from=*3 tag=2147483647 rtag=*-2147483648 b=1 rb=2"));
    assert!(lines.contains(&"2 7 7 MPI_Comm_rank"));
    assert!(lines.contains(&r#"2.3 8 enter "solve(int, double)""#));
    assert!(lines.contains(&r#"2.3 9 10 "MPI_Send""#));
    assert!(lines.contains(&"4 61 61 Iprobe c=0 from=0 rtag=5 flag=0"));
    assert!(lines.contains(
        &r#"location "CUDA[0:13] \"stream\" #2" accelerator group="rank=0's GPU" rank=0 thread=3 regions=12 events=40"#
    ));
    assert!(lines.contains(&r#"location "uncore reader" metric"#));
}

/// One anomaly of every class, with the extremes of its fields, after the hand-built
/// trace's operations (whose positions they name).
fn every_anomaly_class(c: &mut Collect) {
    let p = |rank, thread, index| OpPosition {
        rank,
        thread,
        index,
    };
    let name = |c: &mut Collect, text: &str| match c.strings.iter().position(|s| s == text) {
        Some(i) => i as u32,
        None => {
            c.strings.push(text.to_string());
            let id = c.strings.len() as u32 - 1;
            c.order.push(Item::Str(id));
            id
        }
    };
    let solve = name(c, "solve(int, double)");
    let main = name(c, "main");
    let odd = name(c, "a \"b\"\n=c, #d");
    let other = name(c, "MPI_Send");
    let list: Vec<(Anomaly, Vec<OpPosition>)> = vec![
        (
            Anomaly::UnmatchedSend {
                op: 0,
                rank: 0,
                dest: 1,
                comm: 70000,
                tag: i32::MIN,
            },
            vec![p(0, 0, 0)],
        ),
        (
            Anomaly::UnmatchedReceive {
                op: 0,
                rank: 1,
                source: 3,
                comm: 3,
                tag: -1,
            },
            vec![p(1, 0, 1)],
        ),
        (
            Anomaly::RequestNeverCompleted {
                op: 0,
                rank: 0,
                request: u64::MAX,
            },
            vec![p(0, 0, 0)],
        ),
        (
            Anomaly::UnknownRequest {
                op: 0,
                rank: 1,
                request: 17,
            },
            vec![p(1, 0, 2)],
        ),
        (
            Anomaly::IncompleteCollective {
                kind: OpKind::Other(other),
                comm: 0,
                present: 1,
                expected: u32::MAX,
            },
            vec![],
        ),
        (
            Anomaly::IncompleteCollective {
                kind: OpKind::Ibcast,
                comm: 3,
                present: 2,
                expected: 4,
            },
            vec![],
        ),
        (
            Anomaly::WaitBeforeRequest {
                op: 0,
                request_op: 0,
                rank: 1,
            },
            vec![p(1, 0, 2), p(1, 0, 0)],
        ),
        (
            Anomaly::UnresolvedWildcard { op: 0, rank: 1 },
            vec![p(1, 0, 0)],
        ),
        (
            Anomaly::RootMismatch {
                op: 0,
                rank: 2,
                kind: OpKind::Bcast,
                comm: 0,
            },
            vec![p(2, 3, 0)],
        ),
        (Anomaly::MissingFinalize { rank: 5 }, vec![]),
        (
            Anomaly::UnclosedRoutine {
                rank: 2,
                routine: solve,
            },
            vec![],
        ),
        (
            Anomaly::CrossedLeave {
                rank: 2,
                thread: 3,
                time: u64::MAX,
                routine: main,
                innermost: odd,
            },
            vec![],
        ),
        (
            Anomaly::LeaveWithoutEnter {
                rank: 0,
                thread: 0,
                time: 0,
                routine: odd,
            },
            vec![],
        ),
        (
            Anomaly::CallWithoutRecords {
                op: 0,
                rank: 2,
                name: other,
            },
            vec![p(2, 3, 0)],
        ),
        (
            Anomaly::LengthMismatch {
                send_op: 0,
                recv_op: 0,
                sent: 8,
                received: 0,
            },
            vec![p(0, 0, 0), p(1, 0, 0)],
        ),
        (
            Anomaly::ValueOverflow {
                rank: None,
                what: String::new(),
            },
            vec![],
        ),
        (
            Anomaly::ValueOverflow {
                rank: Some(4),
                what: "sum of bytes".into(),
            },
            vec![],
        ),
        (
            Anomaly::SkippedRecord {
                rank: None,
                time: None,
                what: "x".into(),
            },
            vec![],
        ),
        (
            Anomaly::SkippedRecord {
                rank: Some(3),
                time: Some(12),
                what: "a \"quoted\" what\n".into(),
            },
            vec![],
        ),
        (
            Anomaly::MissingRankData {
                rank: 3,
                thread: 0,
                file: "run/traces/3.evt".into(),
                announced: None,
                read: 0,
                cut_at: None,
            },
            vec![],
        ),
        (
            Anomaly::MissingRankData {
                rank: 1,
                thread: 2,
                file: "a \"cut\" file.events.z".into(),
                announced: Some(u64::MAX),
                read: 17,
                cut_at: Some(4096),
            },
            vec![],
        ),
        (
            Anomaly::PeerDataMissing {
                op: 0,
                rank: 0,
                peer: 3,
                comm: 0,
            },
            vec![p(0, 0, 0)],
        ),
    ];
    for entry in list {
        c.order.push(Item::Anomaly(c.anomalies.len()));
        c.anomalies.push(entry);
    }
}

#[test]
fn anomalies_of_every_class_and_late_locations_survive_write_and_parse() {
    let mut original = hand_built();
    every_anomaly_class(&mut original);
    original.order.push(Item::Locations(0));
    original.locations.push(vec![Location::new(
        "thread 7 = \"late\"",
        LocationKind::CpuThread,
    )]);
    let text = write(&original);
    let parsed = parse_ok(&text);
    assert_eq!(parsed.anomalies, original.anomalies);
    assert_eq!(parsed.ops, original.ops);
    // Late locations come with the header's, which they replace.
    let mut all = original.header.as_ref().unwrap().locations.clone();
    all.extend(original.locations[0].clone());
    assert_eq!(parsed.locations, vec![all]);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.contains(&"anomaly WaitBeforeRequest op=1:2 request_op=1:0 rank=1"));
    assert!(lines.contains(&"anomaly CallWithoutRecords op=2.3:0 rank=2 name=MPI_Send"));
    assert!(lines.contains(
        &"anomaly IncompleteCollective kind=\"MPI_Send\" comm=0 present=1 expected=4294967295"
    ));
    assert!(lines.contains(&"anomaly IncompleteCollective kind=Ibcast comm=3 present=2 expected=4"));
    assert!(lines.contains(&r#"anomaly SkippedRecord rank=3 time=12 what="a \"quoted\" what\n""#));
    assert!(lines.contains(&r#"anomaly ValueOverflow what="""#));
    assert!(lines.contains(&"anomaly MissingRankData rank=3 thread=0 file=run/traces/3.evt read=0"));
    assert!(lines.contains(&"anomaly PeerDataMissing op=0:0 rank=0 peer=3 comm=0"));
    assert!(lines.contains(&r#"location "thread 7 = \"late\"" cpu-thread"#));
}

#[test]
fn anomaly_and_location_lines_are_checked() {
    let head =
        "MTF 1\nprocess 0 P0\nprocess 1 P1\ncommunicator 0 W 0-1\n0 1 2 Send c=0 to=1 tag=0\n";
    let err = |tail: &str| error_of(&format!("{head}{tail}"));
    assert_eq!(
        err("anomaly Bogus rank=0\n"),
        "t.mtf:6:9: syntax: unknown anomaly class \"Bogus\" (the classes are UnmatchedSend, UnmatchedReceive, RequestNeverCompleted, UnknownRequest, IncompleteCollective, WaitBeforeRequest, UnresolvedWildcard, RootMismatch, MissingFinalize, UnclosedRoutine, CrossedLeave, LeaveWithoutEnter, CallWithoutRecords, LengthMismatch, DatatypeMismatch, CallBeforeInit, CallAfterFinalize, CollectiveSizeMismatch, BarrierWithoutOverlap, ValueOverflow, SkippedRecord, MissingRankData, PeerDataMissing, ClockConditionViolated, ReceiveNotRecorded, and one class per broken rule: DuplicateDeclaration, UnknownProcessor, EmptyCommunicator, UnknownMember, DuplicateMember, UnknownRank, EndBeforeStart, TimeGoesBackwards, RoutineTimeGoesBackwards, UnknownCommunicator, RankOutsideCommunicator, MissingCommunicator, MissingDestination, MissingSource, PeerOutsideCommunicator, UnexpectedRoot, MissingRoot, RootOutsideCommunicator, BytesOnBarrier)"
    );
    assert_eq!(
        err("anomaly MissingFinalize\n"),
        "t.mtf:6:9: syntax: the anomaly MissingFinalize needs the field rank="
    );
    assert_eq!(
        err("anomaly MissingFinalize rank=0 rank=1\n"),
        "t.mtf:6:32: syntax: the field rank= appears twice"
    );
    assert_eq!(
        err("anomaly MissingFinalize rank=0 tag=1\n"),
        "t.mtf:6:32: syntax: unknown field \"tag\" (the fields here are those of the class's variant in model::Anomaly)"
    );
    assert_eq!(
        err("anomaly MissingFinalize rank=x\n"),
        "t.mtf:6:30: syntax: expected an unsigned integer below 2^32, found \"x\""
    );
    assert_eq!(
        err("anomaly UnresolvedWildcard op=0:1 rank=0\n"),
        "t.mtf:6:31: unknown operation: names operation 1 of rank 0 thread 0, but 1 operations of it precede this line"
    );
    assert_eq!(
        err("anomaly UnresolvedWildcard op=1.2:0 rank=1\n"),
        "t.mtf:6:31: unknown operation: names operation 0 of rank 1 thread 2, but 0 operations of it precede this line"
    );
    assert_eq!(
        err("anomaly UnresolvedWildcard op=0 rank=0\n"),
        "t.mtf:6:31: syntax: expected an operation position rank[.thread]:index, found \"0\""
    );
    assert_eq!(
        err("location gpu accelerator rank=2\n"),
        "t.mtf:6:31: unknown rank: location \"gpu\" belongs to rank 2, but the trace declares 2 processes"
    );
    assert_eq!(
        err("location gpu gpu\n"),
        "t.mtf:6:14: syntax: expected a location kind (cpu-thread, accelerator, metric, process, other), found \"gpu\""
    );
    assert_eq!(
        error_of("MTF 1\nprocess 0 P0\nlocation t cpu-thread rank=1\n"),
        "t.mtf:3:28: unknown rank: location \"t\" belongs to rank 1, but the trace declares 1 processes"
    );
    assert_eq!(
        err("location t cpu-thread events=-1\n"),
        "t.mtf:6:30: syntax: expected a count, found \"-1\""
    );
    // An anomaly line may come right after the header.
    let c = parse_ok("MTF 1\nprocess 0 P0\nanomaly MissingFinalize rank=0\n");
    assert_eq!(
        c.anomalies,
        vec![(Anomaly::MissingFinalize { rank: 0 }, vec![])]
    );
    assert_eq!(c.headers, 1);
}

#[test]
fn writer_rejects_an_undefined_string() {
    let mut w = MtfWriter::new(Vec::new());
    w.header(&TraceHeader::default()).unwrap();
    let err = w
        .operation(&Operation::new(0, OpKind::Other(9), 0, 0))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "MTF writer: string 9 is used before it is defined"
    );
}

#[test]
fn write_and_parse_a_file_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.mtf");
    let original = hand_built();
    let mut w = MtfWriter::create(&path).unwrap();
    original.replay(&mut w).unwrap();
    drop(w);
    let mut parsed = Collect::default();
    let stats = parse_file(&path, &mut ValidatingSink::new(&mut parsed, Policy::Strict)).unwrap();
    assert_eq!(parsed.ops, original.ops);
    assert_eq!(stats.operations, 13);
    assert_eq!(stats.routine_events, 4);
    assert_eq!(stats.bytes, std::fs::metadata(&path).unwrap().len());
    let missing = parse_file(&dir.path().join("nope.mtf"), &mut Collect::default()).unwrap_err();
    assert!(matches!(missing, Error::Io { .. }));
}

// ---------------------------------------------------------------------------------------
// Line handling

const SMALL: &str = "MTF 1\nprocess 0 P0\nprocess 1 P1\ncommunicator 0 world 0-1\n0 0 10 Send c=0 to=1 b=4\n1 0 12 Recv c=0 from=0 rb=4\n";

#[test]
fn crlf_line_endings() {
    let crlf = SMALL.replace('\n', "\r\n");
    assert_eq!(parse_ok(&crlf), parse_ok(SMALL));
    let c = parse_ok(&crlf);
    assert_eq!(c.header.as_ref().unwrap().processes[1].name, "P1");
    assert_eq!(c.ops[1].recv_bytes, 4);
}

#[test]
fn byte_order_mark() {
    assert_eq!(parse_ok(&format!("\u{feff}{SMALL}")), parse_ok(SMALL));
}

#[test]
fn final_line_without_newline() {
    let text = SMALL.trim_end_matches('\n');
    let (c, stats) = parse(text).unwrap();
    assert_eq!(c.ops.len(), 2);
    assert_eq!(c.ops[1], parse_ok(SMALL).ops[1]);
    assert_eq!(stats.lines, 6);
}

/// A reader that hands out at most `n` bytes per call.
struct Trickle<'a>(&'a [u8], usize);

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.0.len().min(buf.len()).min(self.1);
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

#[test]
fn lines_longer_than_the_read_buffer() {
    let done: Vec<String> = (0..5000).map(|i| i.to_string()).collect();
    let long_comment = "#".repeat(10_000);
    let text = format!(
        "MTF 1\n{long_comment}\nprocess 0 P0\ncommunicator 0 w 0\n0 0 1 Waitall done={}\n0 2 3 Barrier c=0 {long_comment}\n",
        done.join(",")
    );
    for (buffer_size, trickle) in [(16, 7), (64, 1000), (100_000, 100_000)] {
        let mut c = Collect::default();
        let options = ParseOptions { buffer_size };
        let stats = parse_reader_with(
            Trickle(text.as_bytes(), trickle),
            "long.mtf",
            &mut c,
            &options,
        )
        .unwrap();
        assert_eq!(c.ops.len(), 2);
        assert_eq!(c.ops[0].completes.len(), 5000);
        assert_eq!(c.ops[0].completes[4999], 4999);
        assert_eq!(c.ops[1].kind, OpKind::Barrier);
        assert_eq!(stats.lines, 6);
        assert_eq!(stats.bytes, text.len() as u64);
    }
}

#[test]
fn comments_and_blank_lines_anywhere() {
    let text = "# leading comment\n\n   \nMTF 1   # version\n# c\n\t\nprocess 0 P0 # trailing\n  communicator 0 w 0\n\n# between events\n0 0 1 Init # done\n  0 2 3 Finalize\n\t# last\n";
    let (c, stats) = parse(text).unwrap();
    assert_eq!(c.ops.len(), 2);
    assert_eq!(c.ops[1].kind, OpKind::Finalize);
    assert_eq!(c.header.unwrap().processes[0].name, "P0");
    assert_eq!(stats.lines, 13);
}

#[test]
fn call_names_in_every_spelling() {
    let text = "MTF 1\nprocess 0 P0\n0 0 1 MPI_INIT\n0 1 2 mpi_comm_rank\n0 2 3 COMM_RANK\n0 3 4 \"Init\"\n0 4 5 finalize\n";
    let c = parse_ok(text);
    let kinds: Vec<OpKind> = c.ops.iter().map(|o| o.kind).collect();
    assert_eq!(
        kinds,
        vec![
            OpKind::Init,
            OpKind::Other(0),
            OpKind::Other(1),
            OpKind::Other(2),
            OpKind::Finalize
        ]
    );
    assert_eq!(c.strings, vec!["mpi_comm_rank", "COMM_RANK", "Init"]);
}

#[test]
fn header_only_files() {
    let c = parse_ok("MTF 1\nscenario s\nprocess 0 P0\n");
    assert_eq!(c.headers, 1);
    assert_eq!(c.finished, 1);
    assert!(c.ops.is_empty());
    let c = parse_ok("MTF 1");
    assert_eq!(c.header, Some(TraceHeader::default()));
}

#[test]
fn processes_may_be_declared_in_any_order() {
    let c = parse_ok("MTF 1\nprocess 2 c\nprocess 0 a\nprocess 1 b\n");
    let names: Vec<_> = c
        .header
        .unwrap()
        .processes
        .iter()
        .map(|p| p.name.clone())
        .collect();
    assert_eq!(names, vec!["a", "b", "c"]);
}

#[test]
fn several_comment_declarations_are_joined() {
    let c = parse_ok("MTF 1\ncomment one\ncomment \"two words\"\ncomment three\n");
    assert_eq!(c.header.unwrap().comments, "one\ntwo words\nthree");
}

// ---------------------------------------------------------------------------------------
// Errors: every rule, with its exact message, line and column

#[test]
fn empty_and_missing_header() {
    assert_eq!(
        error_of(""),
        "t.mtf:1:1: missing version: the file is empty: expected the version line `MTF 1`"
    );
    assert_eq!(
        error_of("# only a comment\n\n"),
        "t.mtf:1:1: missing version: the file holds only blank lines and comments: expected the version line `MTF 1`"
    );
    assert_eq!(
        error_of("# c\nprocess 0 P0\n"),
        "t.mtf:2:1: missing version: expected the version line `MTF 1` first, found \"process\""
    );
    assert_eq!(
        error_of("MTF one\n"),
        "t.mtf:1:5: syntax: expected a version number, found \"one\""
    );
    assert_eq!(
        error_of("MTF 1\nMTF 1\n"),
        "t.mtf:2:1: duplicate declaration: the version line appears twice"
    );
}

#[test]
fn unsupported_version() {
    assert_eq!(
        error_of("# future\n  MTF 2\n"),
        "t.mtf:2:7: unsupported version: unsupported MTF version 2 (this mtfdb reads version 1)"
    );
}

/// A valid header: ranks 0-2, processor 0, communicators 0 (all) and 5 (0 and 2).
const HEAD: &str = "MTF 1\ntrace t\nprocessor 0 n0\nprocess 0 P0 on 0\nprocess 1 P1 on 0\nprocess 2 P2\ncommunicator 0 world 0-2\ncommunicator 5 pair 0,2\n";

/// The error for HEAD followed by `events` (the first event is on line 9).
fn event_error(events: &str) -> String {
    error_of(&format!("{HEAD}{events}"))
}

#[test]
fn full_error_display_has_the_line_and_a_caret() {
    let err = parse(&format!("{HEAD}0 0 10 Barrier c=9\n")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "t.mtf:9:16: unknown communicator: communicator 9 is not declared\n    0 0 10 Barrier c=9\n                   ^"
    );
    let Error::Input(input) = err else {
        panic!("not an input error")
    };
    assert_eq!(
        (input.line, input.column, input.rule.as_str()),
        (9, 16, "unknown communicator")
    );
}

#[test]
fn syntax_errors_say_what_was_expected() {
    assert_eq!(
        event_error("0 100 abc Send\n"),
        "t.mtf:9:7: syntax: expected an integer end time, found \"abc\""
    );
    assert_eq!(
        event_error("0 1x 5 Init\n"),
        "t.mtf:9:3: syntax: expected an integer start time, found \"1x\""
    );
    assert_eq!(
        event_error("0.x 1 5 Init\n"),
        "t.mtf:9:3: syntax: expected a thread number after the rank's '.', found \"x\""
    );
    assert_eq!(
        event_error("0 1 5\n"),
        "t.mtf:9:6: syntax: expected an MPI call name, found end of line"
    );
    assert_eq!(
        event_error("0 1 5 Send c=x\n"),
        "t.mtf:9:14: syntax: expected a communicator id after c=, found \"x\""
    );
    assert_eq!(
        event_error("0 1 5 Send c=0 to=1 zz=3\n"),
        "t.mtf:9:21: syntax: unknown field \"zz\" (the fields are c, to, from, tag, rtag, b, rb, dt, root, req, done, flag, rec, cap)"
    );
    assert_eq!(
        event_error("0 1 5 Send c=0 to=1 to=2\n"),
        "t.mtf:9:21: syntax: the field to= appears twice"
    );
    assert_eq!(
        event_error("0 1 5 Send c=0 banana\n"),
        "t.mtf:9:16: syntax: expected a field such as c=0 (key=value), found \"banana\""
    );
    assert_eq!(
        event_error("0 1 5 Test done=1,,2\n"),
        "t.mtf:9:19: syntax: expected a request id in done=, found \",2\""
    );
    assert_eq!(
        event_error("0 1 5 Send c=0 to=1 dt= b=1\n"),
        "t.mtf:9:24: syntax: expected a datatype name after dt=, found a space"
    );
    assert_eq!(
        event_error("0 1 5 Test flag=2\n"),
        "t.mtf:9:17: syntax: expected 0 or 1 after flag=, found \"2\""
    );
    assert_eq!(
        event_error("0 1 5 Recv c=0 from=*x\n"),
        "t.mtf:9:21: syntax: expected a source rank, '*' or '*rank' after from=, found \"*x\""
    );
    assert_eq!(
        event_error("0 1 5 Recv c=0 from=0 rtag=*y\n"),
        "t.mtf:9:28: syntax: expected an integer tag, '*' or '*tag' after rtag=, found \"*y\""
    );
    assert_eq!(
        event_error("0 1 enter \"unclosed\n"),
        "t.mtf:9:11: syntax: expected a closing '\"' for this string, found \"\\\"unclosed\""
    );
    assert_eq!(
        event_error("0 1 enter a b\n"),
        "t.mtf:9:13: syntax: expected the end of the line, found \"b\""
    );
    assert_eq!(event_error("x 1 2 Init\n"), "t.mtf:9:1: syntax: expected a declaration (scenario, trace, comment, untimed, processor, process, communicator, string, location) or an event, found \"x\"");
    assert_eq!(
        error_of("MTF 1\nprocess 0\n"),
        "t.mtf:2:10: syntax: expected a space before a process name, found end of line"
    );
    assert_eq!(
        error_of("MTF 1\nprocess 0 P0 on x\n"),
        "t.mtf:2:17: syntax: expected a processor id after `on`, found \"x\""
    );
    assert_eq!(
        error_of("MTF 1\ncommunicator 1 c 0-\n"),
        "t.mtf:2:20: syntax: expected the last rank of a range, found end of line"
    );
    assert_eq!(
        error_of("MTF 1\ncommunicator 1 c 0;1\n"),
        "t.mtf:2:19: syntax: expected ',', '-' or the end of the member list, found \";1\""
    );
    assert_eq!(error_of("MTF 1\nwhatever 1\n"), "t.mtf:2:1: syntax: expected a declaration (scenario, trace, comment, untimed, processor, process, communicator, string, location) or an event, found \"whatever\"");
    assert_eq!(
        error_of("MTF 1\ncommunicator 1 c 0-4294967295\n"),
        "t.mtf:2:18: syntax: the range 0-4294967295 is too large (at most 16777216 members)"
    );
}

#[test]
fn duplicate_declarations() {
    assert_eq!(
        error_of("MTF 1\nprocessor 0 a\nprocessor 0 b\n"),
        "t.mtf:3:11: duplicate declaration: processor 0 is declared twice"
    );
    assert_eq!(
        error_of("MTF 1\nprocess 1 a\nprocess 0 b\nprocess 1 c\n"),
        "t.mtf:4:9: duplicate declaration: process rank 1 is declared twice"
    );
    assert_eq!(
        error_of("MTF 1\nprocess 0 a\ncommunicator 3 x 0\ncommunicator 3 y 0\n"),
        "t.mtf:4:14: duplicate declaration: communicator 3 is declared twice"
    );
    assert_eq!(
        error_of("MTF 1\ntrace a\ntrace b\n"),
        "t.mtf:3:1: duplicate declaration: the trace is declared twice (first on line 2)"
    );
    assert_eq!(
        error_of("MTF 1\nscenario a\nscenario b\n"),
        "t.mtf:3:1: duplicate declaration: the scenario is declared twice (first on line 2)"
    );
}

#[test]
fn header_rules() {
    assert_eq!(
        error_of("MTF 1\nprocess 0 a\nprocess 1 b\nprocess 3 c\n0 0 1 Init\n"),
        "t.mtf:4:9: ranks not contiguous: process rank 3 is out of range: 3 processes are declared, so ranks must be 0-2"
    );
    assert_eq!(
        error_of("MTF 1\nprocess 0 a\nprocess 1 b\ncommunicator 0 w 0,1,4-6\n"),
        "t.mtf:4:22: unknown rank: communicator 0 (w) lists rank 4, which is not a declared process (ranks are 0-1)"
    );
    assert_eq!(
        error_of("MTF 1\nprocess 0 a\nprocess 1 b\ncommunicator 0 w 0-1,1\n"),
        "t.mtf:4:22: duplicate member: communicator 0 (w) lists rank 1 twice"
    );
    assert_eq!(
        error_of("MTF 1\nprocessor 0 n\nprocess 0 a on 0\nprocess 1 b on 7\n"),
        "t.mtf:4:16: unknown processor: process 1 runs on processor 7, which is not declared"
    );
    assert_eq!(
        event_error("0 0 1 Init\nprocess 3 P3\n"),
        "t.mtf:10:1: declaration after events: a process declaration after the first event (line 9); declarations come before the events"
    );
}

#[test]
fn event_rules() {
    let cases: &[(&str, &str)] = &[
        ("3 0 10 Init\n", "t.mtf:9:1: unknown rank: rank 3 is not a declared process (ranks are 0-2)"),
        ("0 0 10 Barrier c=9\n", "t.mtf:9:16: unknown communicator: communicator 9 is not declared"),
        ("1 0 10 Barrier c=5\n", "t.mtf:9:16: not a member: MPI_Barrier on communicator 5 (pair) by rank 1, which is not one of its members"),
        ("0 0 10 Send to=1\n", "t.mtf:9:8: missing communicator: MPI_Send names no communicator"),
        ("0 0 10 Send c=0 tag=1 b=8\n", "t.mtf:9:8: missing destination: MPI_Send names no destination"),
        ("0 0 10 Irecv c=0 rtag=1 req=4\n", "t.mtf:9:8: missing source: MPI_Irecv names no source"),
        ("0 0 10 Send c=5 to=1\n", "t.mtf:9:17: peer not in communicator: destination 1 is not a member of communicator 5 (pair)"),
        ("2 0 10 Recv c=5 from=1\n", "t.mtf:9:17: peer not in communicator: source 1 is not a member of communicator 5 (pair)"),
        ("0 0 10 Send c=0 to=8\n", "t.mtf:9:17: unknown rank: destination 8 is not a declared process (ranks are 0-2)"),
        ("0 0 10 Bcast c=5 root=1 b=8\n", "t.mtf:9:18: root not in communicator: root 1 is not a member of communicator 5 (pair)"),
        ("0 0 10 Bcast c=0 b=8\n", "t.mtf:9:8: missing root: MPI_Bcast names no root"),
        ("0 0 10 Allgather c=0 root=0\n", "t.mtf:9:22: unexpected root: MPI_Allgather has no root (Table 3.1, rules 11-12)"),
        ("0 0 10 Ialltoall c=0 b=4 rb=4 root=2 req=1\n", "t.mtf:9:31: unexpected root: MPI_Ialltoall has no root (Table 3.1, rules 11-12)"),
        ("0 0 10 Send c=0 to=1 root=0\n", "t.mtf:9:22: unexpected root: MPI_Send has no root"),
        ("0 0 10 Barrier c=0 rb=4\n", "t.mtf:9:20: bytes on a barrier: MPI_Barrier carries no data (Table 3.1, rule 8), found 4 bytes"),
        ("0 0 10 Barrier c=0 b=4\n", "t.mtf:9:20: bytes on a barrier: MPI_Barrier carries no data (Table 3.1, rule 8), found 4 bytes"),
        ("0 10 5 Init\n", "t.mtf:9:6: end before start: end 5 is before start 10"),
        ("1 700 800 Init\n2 0 1 Init\n1 500 900 Finalize\n", "t.mtf:11:3: time goes backwards: start 500 is before the previous event's start 700 on rank 1"),
        ("1.2 700 800 Init\n1 0 1 Init\n1.2 500 enter f\n", "t.mtf:11:5: time goes backwards: time 500 is before the previous event's start 700 on rank 1 thread 2"),
        ("0 5 enter f\n0 6 enter g\n0 7 leave f\n", "t.mtf:11:11: unbalanced leave: leave f does not match the innermost entered routine g on rank 0"),
        ("0 5 leave main\n", "t.mtf:9:11: unbalanced leave: leave main without a routine entered on rank 0"),
        ("0 0 10 \"MPI_Thing\" c=5\n1 0 10 \"MPI_Thing\" c=5\n", "t.mtf:10:20: not a member: MPI_Thing on communicator 5 (pair) by rank 1, which is not one of its members"),
    ];
    for (events, expected) in cases {
        assert_eq!(&event_error(events), expected, "events: {events}");
    }
}

#[test]
fn any_source_receives_and_threads_are_accepted() {
    let c = parse_ok(&format!(
        "{HEAD}0 0 10 Irecv c=0 from=* req=1\n0.1 0 1 Init\n0.1 2 enter f\n0.1 3 4 Send c=0 to=2\n0 11 12 Wait done=1\n0.1 5 leave f\n"
    ));
    assert_eq!(c.ops.len(), 4);
    assert_eq!(c.ops[2].depth, 1);
    assert_eq!(c.ops[3].depth, 0);
}

// ---------------------------------------------------------------------------------------
// Property: any valid trace survives write → parse exactly

mod property {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn arb_name() -> impl Strategy<Value = String> {
        prop_oneof![
            "[A-Za-z_][A-Za-z0-9_:<>]{0,12}",
            any::<String>().prop_map(|s| s.chars().take(10).collect()),
            Just("MPI_Send".to_string()),
            Just("isend".to_string()),
            Just("enter".to_string()),
            Just("12".to_string()),
            Just(String::new()),
            Just("a \"b\" \\ c # d = e, f\r\n\tg".to_string()),
        ]
    }

    #[derive(Debug, Clone)]
    struct ArbOp {
        rank: u32,
        thread: u32,
        gap: u64,
        dur: u64,
        kind: usize,
        name: String,
        dt: Option<String>,
        dest: Option<u32>,
        source: Option<u32>,
        tags: (Option<i32>, Option<i32>),
        bytes: (u64, u64),
        req: Option<u64>,
        done: Vec<u64>,
        flags: u8,
    }

    fn arb_op() -> impl Strategy<Value = ArbOp> {
        (
            (
                0u32..4,
                prop_oneof![Just(0u32), 0u32..3, Just(u32::MAX)],
                0u64..1000,
                any::<u32>(),
                0usize..8,
            ),
            (
                arb_name(),
                proptest::option::of(arb_name()),
                proptest::option::of(0u32..4),
                proptest::option::of(0u32..4),
            ),
            (
                proptest::option::of(any::<i32>()),
                proptest::option::of(any::<i32>()),
                any::<u64>(),
                0u64..100,
            ),
            (
                proptest::option::of(any::<u64>()),
                proptest::collection::vec(any::<u64>(), 0..4),
                0u8..8,
            ),
        )
            .prop_map(
                |(
                    (rank, thread, gap, dur, kind),
                    (name, dt, dest, source),
                    (t1, t2, b, rb),
                    (req, done, flags),
                )| ArbOp {
                    rank,
                    thread,
                    gap,
                    dur: dur.into(),
                    kind,
                    name,
                    dt,
                    dest,
                    source,
                    tags: (t1, t2),
                    bytes: (b, rb),
                    req,
                    done,
                    flags,
                },
            )
    }

    fn build(ops: &[ArbOp], names: &[String]) -> Collect {
        let n = 4;
        let mut c = Collect {
            header: Some(TraceHeader {
                scenario: names[0].clone(),
                trace_name: names[1].clone(),
                comments: names[2].clone(),
                processors: vec![Processor {
                    id: 1,
                    name: names[3].clone(),
                }],
                processes: (0..n)
                    .map(|r| Process {
                        rank: r,
                        name: names[(r as usize + 4) % names.len()].clone(),
                        processor: Some(1),
                    })
                    .collect(),
                communicators: vec![Communicator {
                    id: 0,
                    name: names[5 % names.len()].clone(),
                    members: vec![3, 1, 0, 2],
                }],
                untimed: false,
                locations: vec![Location {
                    group: names[6 % names.len()].clone(),
                    rank: Some(2),
                    ..Location::new(&names[3], LocationKind::CpuThread)
                }],
            }),
            ..Collect::default()
        };
        let mut ids: HashMap<String, u32> = HashMap::new();
        let mut intern = |c: &mut Collect, s: &str| -> u32 {
            if let Some(&id) = ids.get(s) {
                return id;
            }
            let id = c.strings.len() as u32;
            ids.insert(s.to_string(), id);
            c.strings.push(s.to_string());
            c.order.push(Item::Str(id));
            id
        };
        let kinds = [
            OpKind::Init,
            OpKind::Wait,
            OpKind::Send,
            OpKind::Recv,
            OpKind::Allreduce,
            OpKind::Bcast,
            OpKind::Iprobe,
        ];
        let mut clock = 0u64;
        for a in ops {
            clock += a.gap;
            let kind = match kinds.get(a.kind) {
                Some(&k) => k,
                None => OpKind::Other(intern(&mut c, &a.name)),
            };
            let mut op = Operation::new(a.rank, kind, clock, clock + a.dur);
            op.thread = a.thread;
            op.comm = Some(0);
            op.dest = a.dest;
            op.source = a.source;
            op.send_tag = a.tags.0;
            op.recv_tag = a.tags.1;
            op.send_bytes = a.bytes.0;
            op.recv_bytes = a.bytes.1;
            op.datatype = a.dt.as_deref().map(|d| intern(&mut c, d));
            op.request = a.req;
            op.completes = a.done.clone();
            op.flags = a.flags;
            if kind == OpKind::Send && op.dest.is_none() {
                op.dest = Some(a.rank);
            }
            if kind == OpKind::Recv && op.source.is_none() && op.flags & flags::ANY_SOURCE == 0 {
                op.source = Some(0);
            }
            if kind == OpKind::Bcast {
                op.root = Some(a.dest.unwrap_or(2));
            }
            c.order.push(Item::Op(c.ops.len()));
            c.ops.push(op);
        }
        c
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]
        #[test]
        fn write_then_parse_is_exact(ops in proptest::collection::vec(arb_op(), 0..40), names in proptest::collection::vec(arb_name(), 6..8)) {
            let original = build(&ops, &names);
            let text = write(&original);
            let parsed = match parse(&text) {
                Ok((c, _)) => c,
                Err(e) => return Err(TestCaseError::fail(format!("{e}\n{text}"))),
            };
            prop_assert_eq!(&parsed.header, &original.header);
            prop_assert_eq!(&parsed.strings, &original.strings);
            prop_assert_eq!(&parsed.ops, &original.ops);
            prop_assert_eq!(&parsed.order, &original.order);
        }
    }
}

#[test]
fn declared_strings_keep_their_ids_and_undeclared_ones_follow_in_first_use_order() {
    let c = parse_ok(
        "MTF 1\nprocess 0 P0\nstring solve\nstring \"\"\nstring solve\n\
         0 1 enter main\n0 2 enter solve\n0 3 4 Comm_rank dt=\"\"\n0 5 leave solve\n0 6 leave main\n",
    );
    assert_eq!(c.strings, vec!["solve", "", "solve", "main", "Comm_rank"]);
    // A declared name used later means its first id.
    assert_eq!(c.routines[1].routine, 0);
    assert_eq!(c.ops[0].datatype, Some(1));
    assert_eq!(c.ops[0].kind, OpKind::Other(4));
    // The writer declares a whole table so that the parse gives the same ids back.
    let mut w = MtfWriter::new(Vec::new());
    w.header(c.header.as_ref().unwrap()).unwrap();
    w.strings(&c.strings).unwrap();
    for op in &c.ops {
        w.operation(op).unwrap();
    }
    w.finish().unwrap();
    let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
    assert!(
        text.contains("string solve\nstring \"\"\nstring solve\nstring main\nstring Comm_rank\n")
    );
    assert_eq!(parse_ok(&text).strings, c.strings);
    assert_eq!(
        error_of("MTF 1\nprocess 0 P0\n0 1 2 Init\nstring x\n"),
        "t.mtf:4:1: declaration after events: a string declaration after the first event (line 3); declarations come before the events"
    );
}

#[test]
fn a_call_without_its_records_is_marked_rec_0() {
    // A quoted call is Other(name), as the OTF2 reader keeps such calls.
    let c = parse_ok("MTF 1\nprocess 0 P0\n0 1 2 \"MPI_Iallgather\" rec=0\n");
    assert_eq!(c.ops[0].flags, flags::WITHOUT_RECORDS);
    assert_eq!(c.ops[0].kind, OpKind::Other(0));
    assert_eq!(
        write(&c).lines().last(),
        Some("0 1 2 \"MPI_Iallgather\" rec=0")
    );
    assert_eq!(
        error_of("MTF 1\nprocess 0 P0\n0 1 2 Init rec=1\n"),
        "t.mtf:3:16: syntax: expected 0 after rec= (a call recorded without its records), found \"1\""
    );
}

#[test]
fn a_receive_buffer_capacity_is_marked_cap_1() {
    // rb= is the buffer the receive posted (as DUMPI records it): a shorter message is legal.
    let text = "MTF 1\nprocess 0 P0\nprocess 1 P1\ncommunicator 0 C0 0,1\n\
                0 10 20 Send c=0 to=1 tag=1 b=8\n1 5 30 Recv c=0 from=0 rtag=1 rb=800 cap=1\n";
    let c = parse_ok(text);
    assert_eq!(c.ops[1].flags, flags::RECV_CAPACITY);
    assert_eq!(
        write(&c).lines().last(),
        Some("1 5 30 Recv c=0 from=0 rtag=1 rb=800 cap=1")
    );
    assert_eq!(
        error_of("MTF 1\nprocess 0 P0\n0 1 2 Init cap=0\n"),
        "t.mtf:3:16: syntax: expected 1 after cap= (rb= is the receive buffer's capacity), found \"0\""
    );
}

#[test]
fn a_rank_of_2_31_is_refused_at_once_without_a_table_of_its_size() {
    // Found by the fuzzer (kept in tests/corpus/mtf/rank-2-31.mtf): the reader counted
    // operations per rank in a table as long as the largest rank seen, and filled 16 GiB
    // before the rank was refused. Only declared ranks are counted now.
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/corpus/mtf/rank-2-31.mtf"
    ))
    .unwrap();
    assert_eq!(
        error_of(&text),
        "t.mtf:6:1: unknown rank: rank 2147483648 is not a declared process (ranks are 0-1)"
    );
}

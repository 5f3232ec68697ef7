//! Table 3.1's structural rules broken by a foreign trace (issue #40): the import keeps the
//! item, repairs it so that nothing after the seam is wrong, and reports it as an anomaly of
//! the rule's class with its rank and time, counted by `mtfdb info` and listed by
//! `SELECT ANOMALIES`. Each rule is fed as a foreign reader feeds it (through
//! `Database::import_foreign_events`, the lenient seam of OTF2, OTF v1, DUMPI and Paraver) and,
//! where the official OTF2 writer can write it, as a real OTF2 archive; MTF text still refuses
//! every one (tests/seam.rs).

use std::path::{Path, PathBuf};

use mtfdb::ingest::mtf_text::parse_reader;
use mtfdb::ingest::EventSink;
use mtfdb::model::{
    Anomaly, Communicator, OpKind, Operation, Processor, RoutineEvent, Rule, TraceHeader,
};
use mtfdb::{Database, Result};

mod common;
use common::contents::mtfdb;
use common::reported::{info_count, reported, row, Row};

/// Everything a source produced, in order, to be replayed into another sink.
#[derive(Default)]
struct Recorded {
    header: Option<TraceHeader>,
    items: Vec<Item>,
}

enum Item {
    Str(u32, String),
    Op(Operation),
    Routine(RoutineEvent),
}

impl EventSink for Recorded {
    fn header(&mut self, header: &TraceHeader) -> Result<()> {
        self.header = Some(header.clone());
        Ok(())
    }
    fn string(&mut self, id: u32, text: &str) -> Result<()> {
        self.items.push(Item::Str(id, text.to_string()));
        Ok(())
    }
    fn operation(&mut self, op: &Operation) -> Result<()> {
        self.items.push(Item::Op(op.clone()));
        Ok(())
    }
    fn routine(&mut self, event: &RoutineEvent) -> Result<()> {
        self.items.push(Item::Routine(*event));
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

impl Recorded {
    /// The items of an MTF text trace, unchecked (as a foreign reader decodes them).
    fn of(text: &str) -> Recorded {
        let mut recorded = Recorded::default();
        parse_reader(text.as_bytes(), "t.mtf", &mut recorded).unwrap();
        recorded
    }

    fn replay(&self, sink: &mut dyn EventSink) -> Result<()> {
        sink.header(self.header.as_ref().unwrap())?;
        for item in &self.items {
            match item {
                Item::Str(id, text) => sink.string(*id, text)?,
                Item::Op(op) => sink.operation(op)?,
                Item::Routine(r) => sink.routine(r)?,
            }
        }
        sink.finish()
    }
}

const HEAD: &str = "MTF 1\nprocess 0 P0\nprocess 1 P1\nprocess 2 P2\ncommunicator 0 C1 0-2\ncommunicator 5 pair 0,2\n";

/// An operation as stored: rank, call, start, end, destination, bytes sent and received.
type OpRow = (u32, OpKind, u64, u64, Option<u32>, u64, u64);
/// A broken rule as the anomaly says it: rule, rank, time, value recorded.
type Broken = (Rule, Option<u32>, Option<u64>, Option<u64>);
/// A header fault as the anomaly says it: rule, rank, communicator, value recorded.
type HeaderBroken = (Rule, Option<u32>, Option<u32>, Option<u64>);

/// Imports `recorded` as a foreign reader would, into a fresh database at `dir/db`.
fn import_foreign(dir: &Path, name: &str, recorded: &Recorded) -> mtfdb::Trace {
    let db = Database::open(dir.join("db")).unwrap();
    db.import_foreign_events(name, |sink| recorded.replay(sink))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    db.trace(name).unwrap()
}

/// (class, the trace's events, the anomaly's row: rank, call, time)
const CASES: &[(Rule, &str, (&str, &str, &str))] = &[
    (Rule::UnknownRank, "9 1 2 Barrier c=0\n", ("", "", "1")),
    (
        Rule::EndBeforeStart,
        "0 5 3 Barrier c=0\n",
        ("0", "MPI_Barrier", "5"),
    ),
    (
        Rule::TimeGoesBackwards,
        "0 10 12 Barrier c=0\n0 5 6 Barrier c=0\n",
        ("0", "MPI_Barrier", "10"),
    ),
    (
        Rule::RoutineTimeGoesBackwards,
        "1 10 enter solve\n1 5 leave solve\n",
        ("1", "", "10"),
    ),
    (
        Rule::UnknownCommunicator,
        "0 1 2 Barrier c=3\n",
        ("0", "MPI_Barrier", "1"),
    ),
    (
        Rule::RankOutsideCommunicator,
        "1 1 2 Barrier c=5\n",
        ("1", "MPI_Barrier", "1"),
    ),
    (
        Rule::MissingCommunicator,
        "0 1 2 Send to=1 tag=1 b=8\n",
        ("0", "MPI_Send", "1"),
    ),
    (
        Rule::MissingDestination,
        "0 1 2 Send c=0 tag=1 b=8\n",
        ("0", "MPI_Send", "1"),
    ),
    (
        Rule::MissingSource,
        "2 3 4 Recv c=0 rtag=1 rb=8\n",
        ("2", "MPI_Recv", "3"),
    ),
    (
        Rule::PeerOutsideCommunicator,
        "0 1 2 Send c=5 to=1 tag=1 b=8\n",
        ("0", "MPI_Send", "1"),
    ),
    (
        Rule::UnexpectedRoot,
        "0 1 2 Barrier c=0 root=0\n",
        ("0", "MPI_Barrier", "1"),
    ),
    (
        Rule::MissingRoot,
        "0 1 2 Bcast c=0 b=8\n",
        ("0", "MPI_Bcast", "1"),
    ),
    (
        Rule::RootOutsideCommunicator,
        "2 7 8 Bcast c=5 root=1 b=8\n",
        ("2", "MPI_Bcast", "7"),
    ),
    (
        Rule::BytesOnBarrier,
        "0 1 2 Barrier c=0 b=8\n",
        ("0", "MPI_Barrier", "1"),
    ),
];

#[test]
fn every_rule_a_foreign_source_breaks_is_kept_as_an_anomaly_of_its_class() {
    for (rule, events, (rank, call, time)) in CASES {
        let dir = tempfile::tempdir().unwrap();
        let name = rule.class();
        let trace = import_foreign(dir.path(), name, &Recorded::of(&format!("{HEAD}{events}")));
        let broken: Vec<Anomaly> = trace
            .anomalies()
            .unwrap()
            .into_iter()
            .filter(|a| matches!(a, Anomaly::BrokenRule { .. }))
            .collect();
        assert_eq!(broken.len(), 1, "{name}: {broken:?}");
        drop(trace);
        let (rows, info) = reported(&dir.path().join("db"), name);
        let of_class: Vec<&Row> = rows.iter().filter(|r| r.0 == *name).collect();
        assert_eq!(of_class, vec![&row(name, rank, call, time)], "{name}");
        assert_eq!(
            info_count(&info, rule.kind_name()),
            Some(1),
            "{name}: {info}"
        );
    }
}

#[test]
fn the_repairs_keep_matching_ordering_and_bytes_right() {
    let dir = tempfile::tempdir().unwrap();
    // Rank 0 sends to rank 1 on "pair" (which rank 1 is not in) with tag 1, and rank 1
    // receives from rank 0 on the world with the same tag: they must not be paired. A
    // barrier with bytes, a call going back in time and one ending before its start.
    let events = "0 1 2 Send c=5 to=1 tag=1 b=8\n1 1 3 Recv c=0 from=0 rtag=1 rb=8\n\
                  0 10 12 Barrier c=0 b=4 rb=4\n1 10 12 Barrier c=0\n2 10 12 Barrier c=0\n\
                  2 20 30 Barrier c=5\n2 15 16 Barrier c=5\n0 30 25 Barrier c=5\n";
    let trace = import_foreign(dir.path(), "t", &Recorded::of(&format!("{HEAD}{events}")));
    let s = trace.summary();
    assert_eq!(
        s.messages, 0,
        "a send outside its communicator is never matched"
    );
    let ops: Vec<OpRow> = (0..3)
        .flat_map(|r| trace.process_operations(r).unwrap())
        .map(|(_, o)| {
            (
                o.rank,
                o.kind,
                o.start,
                o.end,
                o.dest,
                o.send_bytes,
                o.recv_bytes,
            )
        })
        .collect();
    use OpKind::*;
    assert_eq!(
        ops,
        vec![
            (0, Send, 1, 2, None, 8, 0),
            (0, Barrier, 10, 12, None, 0, 0),
            (0, Barrier, 30, 30, None, 0, 0),
            (1, Recv, 1, 3, None, 0, 8),
            (1, Barrier, 10, 12, None, 0, 0),
            (2, Barrier, 10, 12, None, 0, 0),
            (2, Barrier, 20, 30, None, 0, 0),
            (2, Barrier, 20, 20, None, 0, 0),
        ]
    );
    // The world barrier is one complete instance; the pair's barriers of rank 2 and 0 too.
    assert_eq!(s.collective_instances, 3);
    let values: Vec<Broken> = trace
        .anomalies()
        .unwrap()
        .into_iter()
        .filter_map(|a| match a {
            Anomaly::BrokenRule {
                rule,
                rank,
                time,
                value,
                ..
            } => Some((rule, rank, time, value)),
            _ => None,
        })
        .collect();
    assert_eq!(
        values,
        vec![
            (Rule::PeerOutsideCommunicator, Some(0), Some(1), Some(1)),
            (Rule::BytesOnBarrier, Some(0), Some(10), Some(4)),
            (Rule::TimeGoesBackwards, Some(2), Some(20), Some(15)),
            (Rule::EndBeforeStart, Some(0), Some(30), Some(25)),
        ]
    );
}

#[test]
fn the_header_faults_a_reader_can_meet_are_repaired_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let mut recorded = Recorded::of(&format!("{HEAD}0 1 2 Barrier c=0\n"));
    let h = recorded.header.as_mut().unwrap();
    h.processors = vec![
        Processor {
            id: 0,
            name: "n0".into(),
        },
        Processor {
            id: 0,
            name: "n0 again".into(),
        },
    ];
    h.processes[1].processor = Some(4);
    let comm = |id, members: Vec<u32>| Communicator {
        id,
        name: format!("c{id}"),
        members,
    };
    h.communicators.push(comm(5, vec![1]));
    h.communicators.push(comm(6, vec![]));
    h.communicators.push(comm(7, vec![0, 0, 9]));
    let trace = import_foreign(dir.path(), "h", &recorded);
    let comms: Vec<(u32, Vec<u32>)> = trace
        .header()
        .communicators
        .iter()
        .map(|c| (c.id, c.members.clone()))
        .collect();
    assert_eq!(
        comms,
        vec![(0, vec![0, 1, 2]), (5, vec![0, 2]), (7, vec![0])]
    );
    assert_eq!(trace.header().processors.len(), 1);
    assert_eq!(trace.header().processes[1].processor, None);
    let rules: Vec<HeaderBroken> = trace
        .anomalies()
        .unwrap()
        .into_iter()
        .filter_map(|a| match a {
            Anomaly::BrokenRule {
                rule,
                rank,
                comm,
                value,
                ..
            } => Some((rule, rank, comm, value)),
            _ => None,
        })
        .collect();
    assert_eq!(
        rules,
        vec![
            (Rule::DuplicateDeclaration, None, None, Some(0)),
            (Rule::UnknownProcessor, Some(1), None, Some(4)),
            (Rule::DuplicateDeclaration, None, Some(5), Some(5)),
            (Rule::EmptyCommunicator, None, Some(6), None),
            (Rule::DuplicateMember, None, Some(7), Some(0)),
            (Rule::UnknownMember, None, Some(7), Some(9)),
        ]
    );
    drop(trace);
    let (rows, info) = reported(&dir.path().join("db"), "h");
    for (class, n) in [
        ("DuplicateDeclaration", 2),
        ("UnknownProcessor", 1),
        ("EmptyCommunicator", 1),
        ("UnknownMember", 1),
        ("DuplicateMember", 1),
    ] {
        assert_eq!(rows.iter().filter(|r| r.0 == class).count(), n, "{class}");
        let kind = Rule::from_class(class.as_bytes()).unwrap().kind_name();
        assert_eq!(info_count(&info, kind), Some(n as u64), "{class}: {info}");
    }
}

#[test]
fn a_header_without_ranks_in_order_is_still_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut recorded = Recorded::of(&format!("{HEAD}0 1 2 Barrier c=0\n"));
    recorded.header.as_mut().unwrap().processes[2].rank = 7;
    let db = Database::open(dir.path().join("db")).unwrap();
    let err = db
        .import_foreign_events("bad", |sink| recorded.replay(sink))
        .unwrap_err();
    assert!(err.to_string().starts_with("ranks not contiguous"), "{err}");
    assert!(db.trace_names().unwrap().is_empty());
}

/// An OTF2 fixture written by tests/fixtures/otf2/make_rule_cases.py.
fn otf2_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/otf2")
        .join(name)
        .join("traces.otf2")
}

#[test]
fn otf2_archives_that_break_rules_import_with_the_anomalies() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    // Oracle (otf2-print): rank 0's barrier at 100 records Sent: 4, Received: 4, rank 1's
    // Root: 1; rank 0's Bcast at 200 records Root: NONE.
    let (ok, out, err) = mtfdb(
        &db,
        &[
            "import",
            otf2_fixture("rules-broken").to_str().unwrap(),
            "--name",
            "b",
        ],
    );
    assert!(ok, "{err}");
    assert!(
        out.trim_end()
            .ends_with("; 3 anomalies: 1 bytes on a barrier, 1 missing root, 1 unexpected root"),
        "{out}"
    );
    let (rows, info) = reported(&db, "b");
    assert_eq!(
        rows,
        vec![
            row("UnexpectedRoot", "1", "MPI_Barrier", "100"),
            row("BytesOnBarrier", "0", "MPI_Barrier", "100"),
            row("MissingRoot", "0", "MPI_Bcast", "200"),
        ]
    );
    assert_eq!(info_count(&info, "bytes on a barrier"), Some(1));
    assert_eq!(info_count(&info, "missing root"), Some(1));
    assert_eq!(info_count(&info, "unexpected root"), Some(1));
    // The barrier keeps no bytes, and the message beside it is matched.
    let trace = Database::open(&db).unwrap().trace("b").unwrap();
    assert_eq!(trace.summary().messages, 1);
    assert_eq!(trace.summary().collective_instances, 2);
    let barrier_bytes: u64 = (0..2)
        .flat_map(|r| trace.process_operations(r).unwrap())
        .filter(|(_, o)| o.kind == OpKind::Barrier)
        .map(|(_, o)| o.send_bytes + o.recv_bytes)
        .sum();
    assert_eq!(barrier_bytes, 0);

    // Rank 2 calls an Allreduce at 100 and a send at 200 on "pair" (ranks 0 and 1); every
    // rank's Allreduce at 150 names root 1 (otf2-print: Root: 1).
    let (ok, out, err) = mtfdb(
        &db,
        &[
            "import",
            otf2_fixture("rules-comms").to_str().unwrap(),
            "--name",
            "c",
        ],
    );
    assert!(ok, "{err}");
    assert!(
        out.trim_end()
            .ends_with("; 6 anomalies: 3 unexpected root, 2 not a member, 1 receive never matched"),
        "{out}"
    );
    let (rows, info) = reported(&db, "c");
    assert_eq!(
        rows,
        vec![
            row("RankOutsideCommunicator", "2", "MPI_Allreduce", "100"),
            row("UnexpectedRoot", "2", "MPI_Allreduce", "150"),
            row("UnexpectedRoot", "0", "MPI_Allreduce", "150"),
            row("UnexpectedRoot", "1", "MPI_Allreduce", "150"),
            row("RankOutsideCommunicator", "2", "MPI_Send", "200"),
            row("UnmatchedReceive", "0", "MPI_Recv", "200"),
        ]
    );
    assert_eq!(info_count(&info, "not a member"), Some(2));
    assert_eq!(info_count(&info, "unexpected root"), Some(3));
}

#[test]
fn a_repaired_trace_round_trips_through_mtf_text_strictly() {
    // Every rule at once, as a foreign reader hands it over; the export is MTF text, which
    // the strict reader takes back with the same operations and anomalies.
    let events: String = CASES
        .iter()
        .filter(|(rule, _, _)| *rule != Rule::RoutineTimeGoesBackwards)
        .enumerate()
        .map(|(i, (_, e, _))| {
            // Each case's times, shifted after the previous case's.
            e.lines()
                .map(|l| {
                    let f: Vec<&str> = l.splitn(4, ' ').collect();
                    let t = |x: &str| x.parse::<u64>().unwrap() + 100 * i as u64;
                    format!("{} {} {} {}\n", f[0], t(f[1]), t(f[2]), f[3])
                })
                .collect::<String>()
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let trace = import_foreign(dir.path(), "all", &Recorded::of(&format!("{HEAD}{events}")));
    let broken = |t: &mtfdb::Trace| -> Vec<String> {
        t.anomalies()
            .unwrap()
            .iter()
            .filter(|a| matches!(a, Anomaly::BrokenRule { .. }))
            .map(|a| t.anomaly_text(a))
            .collect()
    };
    let before = broken(&trace);
    assert_eq!(before.len(), CASES.len() - 1, "{before:#?}");
    let ops = |t: &mtfdb::Trace| -> Vec<String> {
        (0..3)
            .flat_map(|r| t.process_operations(r).unwrap())
            .map(|(_, o)| format!("{o:?}"))
            .collect()
    };
    let ops_before = ops(&trace);
    drop(trace);
    let db = dir.path().join("db");
    let mtf = dir.path().join("all.mtf");
    let (ok, _, err) = mtfdb(&db, &["export", "all", "-o", mtf.to_str().unwrap()]);
    assert!(ok, "{err}");
    let (ok, _, err) = mtfdb(&db, &["import", mtf.to_str().unwrap(), "--name", "back"]);
    assert!(ok, "{err}");
    let back = Database::open(&db).unwrap().trace("back").unwrap();
    assert_eq!(broken(&back), before);
    assert_eq!(ops(&back), ops_before);
}

#[test]
fn otf2_names_the_reader_cannot_translate_are_kept_as_broken_rules() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    // Oracle (otf2-print): rank 0's send at 100 names communicator 9 (INVALID), rank 1's send
    // at 200 receiver 5 (INVALID), both Bcasts at 300 root 7 (INVALID), rank 0's region 99
    // at 400 (INVALID), and a send and receive at 500 that match.
    let (ok, out, err) = mtfdb(
        &db,
        &[
            "import",
            otf2_fixture("rules-translate").to_str().unwrap(),
            "--name",
            "t",
        ],
    );
    assert!(ok, "{err}");
    let (rows, info) = reported(&db, "t");
    let classes: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|r| (r.0.as_str(), r.1.as_str(), r.3.as_str()))
        .collect();
    for expected in [
        ("UnknownCommunicator", "0", "100"),
        ("PeerOutsideCommunicator", "1", "200"),
        ("RootOutsideCommunicator", "0", "300"),
        ("RootOutsideCommunicator", "1", "300"),
        ("SkippedRecord", "0", "400"),
        ("SkippedRecord", "0", "410"),
    ] {
        assert!(
            classes.contains(&expected),
            "{expected:?} in {rows:?}\n{out}"
        );
    }
    assert_eq!(info_count(&info, "unknown communicator"), Some(1), "{info}");
    let trace = Database::open(&db).unwrap().trace("t").unwrap();
    let broken: Vec<(Rule, Option<u64>)> = trace
        .anomalies()
        .unwrap()
        .into_iter()
        .filter_map(|a| match a {
            Anomaly::BrokenRule { rule, value, .. } => Some((rule, value)),
            _ => None,
        })
        .collect();
    assert!(
        broken.contains(&(Rule::UnknownCommunicator, Some(9))),
        "{broken:?}"
    );
    assert!(
        broken.contains(&(Rule::PeerOutsideCommunicator, Some(5))),
        "{broken:?}"
    );
    assert!(
        broken.contains(&(Rule::RootOutsideCommunicator, Some(7))),
        "{broken:?}"
    );
    // The calls are kept, outside matching; the good message matches.
    assert_eq!(trace.summary().messages, 1);
    assert_eq!(trace.summary().kind_count(OpKind::Send), 3);
    assert_eq!(trace.summary().kind_count(OpKind::Bcast), 2);
}

#[test]
fn paraver_traces_that_break_rules_import_with_the_anomalies() {
    // Two tasks; communicator 1 is both, communicator 2 task 1 alone. Both barriers (type
    // 50000002 value 8) record 4 bytes each way; task 2 calls MPI_Allreduce (value 10) on
    // communicator 2, of which it is no member.
    let prv = "#Paraver (29/11/2026 at 10:00):1000_ns:1(2):1:2(1:1,1:1),2\n\
c:1:1:2:1:2\n\
c:1:2:1:1\n\
2:1:1:1:1:100:50000002:8:50100001:4:50100002:4:50100004:1\n\
2:2:1:2:1:100:50000002:8:50100001:4:50100002:4:50100004:1\n\
2:1:1:1:1:110:50000002:0\n\
2:2:1:2:1:120:50000002:0\n\
2:2:1:2:1:200:50000002:10:50100001:8:50100002:8:50100004:2\n\
2:2:1:2:1:210:50000002:0\n";
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rules.prv");
    std::fs::write(&file, prv).unwrap();
    let db = dir.path().join("db");
    let (ok, out, err) = mtfdb(&db, &["import", file.to_str().unwrap(), "--name", "p"]);
    assert!(ok, "{err}");
    assert!(out.contains("2 bytes on a barrier"), "{out}");
    let (rows, info) = reported(&db, "p");
    let classes: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|r| (r.0.as_str(), r.1.as_str(), r.3.as_str()))
        .collect();
    for expected in [
        ("BytesOnBarrier", "0", "100"),
        ("BytesOnBarrier", "1", "100"),
        ("RankOutsideCommunicator", "1", "200"),
    ] {
        assert!(classes.contains(&expected), "{expected:?} in {rows:?}");
    }
    assert_eq!(info_count(&info, "bytes on a barrier"), Some(2), "{info}");
    assert_eq!(info_count(&info, "not a member"), Some(1), "{info}");
    // The barrier is one instance with no bytes.
    let trace = Database::open(&db).unwrap().trace("p").unwrap();
    assert_eq!(trace.summary().collective_instances, 1);
    let barrier_bytes: u64 = (0..2)
        .flat_map(|r| trace.process_operations(r).unwrap())
        .filter(|(_, o)| o.kind == OpKind::Barrier)
        .map(|(_, o)| o.send_bytes + o.recv_bytes)
        .sum();
    assert_eq!(barrier_bytes, 0);
}

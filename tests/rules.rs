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

    // Rank 2 calls an Allreduce at 100 and a send at 200 on "pair" (ranks 0 and 1); the
    // Allreduce of all three at 150 names root 1 (otf2-print: Root: 1).
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
    // The Allreduce of all three stays one instance, without the root.
    let trace = Database::open(&db).unwrap().trace("c").unwrap();
    assert_eq!(trace.summary().collective_instances, 1);
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

// ---------------------------------------------------------------------------------------
// Every rule each foreign reader can meet, in a trace of its format (issue #40): the trace
// imports through the command line, the anomaly has its class, rank and time in `SELECT
// ANOMALIES`, `mtfdb info` and the import's summary count it, and the rest of the trace is
// intact. docs/formats.md ("Table 3.1 rules by reader") says why the others cannot occur.

/// One rule broken in a trace that is otherwise the run every case of its reader shares.
struct RuleCase {
    /// The case (an OTF2 fixture under `rules-cases/`, the trace's name).
    case: &'static str,
    /// The rule broken.
    rule: Rule,
    /// What `otf2-print` prints of the fault, whitespace squeezed (OTF2 only; a case whose
    /// fault is in the definitions starts with `-G `).
    oracle: &'static str,
    /// Every anomaly reported: class, rank, call, time (as `SELECT ANOMALIES` prints them).
    anomalies: &'static [(&'static str, &'static str, &'static str, &'static str)],
    /// The value the anomaly of `rule` records.
    value: Option<u64>,
    /// The MPI calls by name besides the shared run's.
    calls: &'static [(&'static str, u64)],
    /// Matched messages (the shared run's one, and the case's).
    messages: u64,
    /// Collective instances (the shared run's MPI_Allreduce, and the case's).
    instances: u64,
}

/// The MPI calls of the run every case shares.
const SHARED_CALLS: [(&str, u64); 5] = [
    ("MPI_Init", 3),
    ("MPI_Send", 1),
    ("MPI_Recv", 1),
    ("MPI_Allreduce", 3),
    ("MPI_Finalize", 3),
];

/// Imports `path` as the trace `c.case` into `db` with `mtfdb import` and checks what the
/// case says: the anomalies, their counts in `info` and in the import's summary, the value
/// of the rule's, and the rest of the trace (its message 0 -> 1 of 64 bytes, its calls, its
/// collective instances).
fn assert_rule_case(db: &Path, path: &Path, c: &RuleCase) {
    let name = c.case;
    let (ok, out, err) = mtfdb(db, &["import", path.to_str().unwrap(), "--name", name]);
    assert!(ok, "{name}: {err}");
    let (mut rows, info) = reported(db, name);
    rows.sort();
    let mut expected: Vec<Row> = c
        .anomalies
        .iter()
        .map(|&(class, rank, call, time)| row(class, rank, call, time))
        .collect();
    expected.sort();
    assert_eq!(rows, expected, "{name}: SELECT ANOMALIES");
    assert!(
        rows.iter().any(|r| r.0 == c.rule.class()),
        "{name}: {rows:?}"
    );
    for class in rows.iter().map(|r| r.0.as_str()) {
        let n = rows.iter().filter(|r| r.0 == class).count();
        let kind = match Rule::from_class(class.as_bytes()) {
            Some(rule) => rule.kind_name(),
            None => continue,
        };
        assert_eq!(info_count(&info, kind), Some(n as u64), "{name}: {info}");
        assert!(out.contains(&format!("{n} {kind}")), "{name}: {out}");
    }
    let trace = Database::open(db).unwrap().trace(name).unwrap();
    let values = common::reported::rule_values(&trace, c.rule);
    assert!(
        !values.is_empty() && values.iter().all(|&v| v == c.value),
        "{name}: {values:?}"
    );
    // The rest of the trace: the shared message matched, the calls, the instances.
    let pairs: Vec<(u32, u32, u64, u64)> = trace
        .pairs()
        .iter()
        .map(|p| (p.sender, p.receiver, p.messages, p.bytes))
        .collect();
    assert!(
        pairs.iter().any(|p| p.0 == 0 && p.1 == 1 && p.3 >= 64),
        "{name}: {pairs:?}"
    );
    assert_eq!(trace.summary().messages, c.messages, "{name}: {pairs:?}");
    let mut calls: std::collections::BTreeMap<String, u64> = SHARED_CALLS
        .iter()
        .map(|&(call, n)| (call.to_string(), n))
        .collect();
    for &(call, n) in c.calls {
        *calls.entry(call.to_string()).or_default() += n;
    }
    assert_eq!(common::otf2_print::calls_of(&trace), calls, "{name}: calls");
    assert_eq!(
        trace.summary().collective_instances,
        c.instances,
        "{name}: collective instances"
    );
}

/// The OTF2 cases (tests/fixtures/otf2/make_rule_cases.py, `rules-cases/`): the fault at 300.
const OTF2_CASES: &[RuleCase] = &[
    RuleCase {
        case: "dup-comm",
        rule: Rule::DuplicateDeclaration,
        oracle: "-G COMM 1 Name: \"pair again\" <16>, Group: \"\" <3>",
        anomalies: &[("DuplicateDeclaration", "", "", "")],
        value: Some(1),
        // The message on "pair" goes to world rank 1, as its first definition says.
        calls: &[("MPI_Send", 1), ("MPI_Recv", 1)],
        messages: 2,
        instances: 1,
    },
    RuleCase {
        case: "unknown-processor",
        rule: Rule::UnknownProcessor,
        oracle: "-G LOCATION_GROUP 2 Name: \"MPI Rank 2\" <11>, Type: PROCESS, Parent: INVALID <7>",
        anomalies: &[("UnknownProcessor", "2", "", "")],
        value: Some(7),
        calls: &[],
        messages: 1,
        instances: 1,
    },
    RuleCase {
        case: "empty-comm",
        rule: Rule::EmptyCommunicator,
        oracle: "-G GROUP 2 Name: \"\" <13>, Type: COMM_GROUP, Paradigm: MPI, Flags: NONE, 0 Members",
        anomalies: &[
            ("EmptyCommunicator", "", "", ""),
            ("UnknownCommunicator", "2", "MPI_Barrier", "300"),
        ],
        value: None,
        calls: &[("MPI_Barrier", 1)],
        messages: 1,
        instances: 1,
    },
    RuleCase {
        case: "unknown-member",
        rule: Rule::UnknownMember,
        oracle: "-G 2 Members: 0 (\"Master thread\" <0>), 5 (INVALID)",
        // Rank 1 of "pair" is the world rank 5 its group lists, which is no process.
        anomalies: &[
            ("UnknownMember", "", "", ""),
            ("PeerOutsideCommunicator", "0", "MPI_Send", "300"),
        ],
        value: Some(5),
        calls: &[("MPI_Send", 1)],
        messages: 1,
        instances: 1,
    },
    RuleCase {
        case: "dup-member",
        rule: Rule::DuplicateMember,
        oracle: "-G 3 Members: 0 (\"Master thread\" <0>), 1 (\"Master thread\" <1>), 0 (\"Master thread\" <0>)",
        anomalies: &[("DuplicateMember", "", "", "")],
        value: Some(0),
        calls: &[("MPI_Barrier", 2)],
        messages: 1,
        instances: 2,
    },
    RuleCase {
        case: "end-before-start",
        rule: Rule::EndBeforeStart,
        oracle: "LEAVE 2 290 Region: \"MPI_Comm_rank\" <6>",
        anomalies: &[("EndBeforeStart", "2", "MPI_Comm_rank", "300")],
        value: Some(290),
        calls: &[("MPI_Comm_rank", 1)],
        messages: 1,
        instances: 1,
    },
    RuleCase {
        case: "time-backwards",
        rule: Rule::TimeGoesBackwards,
        oracle: "ENTER 2 290 Region: \"MPI_Comm_rank\" <6>",
        anomalies: &[("TimeGoesBackwards", "2", "MPI_Comm_rank", "300")],
        value: Some(290),
        calls: &[("MPI_Comm_rank", 1)],
        messages: 1,
        instances: 1,
    },
    RuleCase {
        case: "routine-backwards",
        rule: Rule::RoutineTimeGoesBackwards,
        oracle: "ENTER 2 290 Region: \"work\" <8>",
        anomalies: &[("RoutineTimeGoesBackwards", "2", "", "300")],
        value: Some(290),
        calls: &[("MPI_Comm_rank", 1)],
        messages: 1,
        instances: 1,
    },
    RuleCase {
        case: "unknown-comm",
        rule: Rule::UnknownCommunicator,
        oracle: "MPI_SEND 2 301 Receiver: 0 (INVALID), Communicator: INVALID <9>",
        anomalies: &[("UnknownCommunicator", "2", "MPI_Send", "300")],
        value: Some(9),
        calls: &[("MPI_Send", 1)],
        messages: 1,
        instances: 1,
    },
    RuleCase {
        case: "rank-outside",
        rule: Rule::RankOutsideCommunicator,
        oracle: "MPI_COLLECTIVE_END 2 301 Operation: BARRIER, Communicator: \"pair\" <1>",
        anomalies: &[("RankOutsideCommunicator", "2", "MPI_Barrier", "300")],
        value: Some(1),
        calls: &[("MPI_Barrier", 1)],
        messages: 1,
        instances: 1,
    },
    RuleCase {
        case: "missing-comm",
        rule: Rule::MissingCommunicator,
        oracle: "MPI_COLLECTIVE_END 2 301 Operation: BARRIER, Communicator: UNDEFINED",
        anomalies: &[("MissingCommunicator", "2", "MPI_Barrier", "300")],
        value: None,
        calls: &[("MPI_Barrier", 1)],
        messages: 1,
        instances: 1,
    },
    RuleCase {
        case: "missing-dest",
        rule: Rule::MissingDestination,
        oracle: "MPI_SEND 2 301 Receiver: UNDEFINED, Communicator: \"MPI_COMM_WORLD\" <0>",
        anomalies: &[("MissingDestination", "2", "MPI_Send", "300")],
        value: None,
        calls: &[("MPI_Send", 1)],
        messages: 1,
        instances: 1,
    },
    RuleCase {
        case: "peer-outside",
        rule: Rule::PeerOutsideCommunicator,
        oracle: "MPI_SEND 2 301 Receiver: 5 (INVALID), Communicator: \"MPI_COMM_WORLD\" <0>",
        anomalies: &[("PeerOutsideCommunicator", "2", "MPI_Send", "300")],
        value: Some(5),
        calls: &[("MPI_Send", 1)],
        messages: 1,
        instances: 1,
    },
    RuleCase {
        case: "unexpected-root",
        rule: Rule::UnexpectedRoot,
        oracle: "MPI_COLLECTIVE_END 1 301 Operation: BARRIER, Communicator: \"MPI_COMM_WORLD\" <0>, Root: 1",
        anomalies: &[("UnexpectedRoot", "1", "MPI_Barrier", "300")],
        value: Some(1),
        calls: &[("MPI_Barrier", 3)],
        messages: 1,
        instances: 2,
    },
    RuleCase {
        case: "missing-root",
        rule: Rule::MissingRoot,
        oracle: "MPI_COLLECTIVE_END 2 301 Operation: BCAST, Communicator: \"MPI_COMM_WORLD\" <0>, Root: NONE",
        anomalies: &[("MissingRoot", "2", "MPI_Bcast", "300")],
        value: None,
        calls: &[("MPI_Bcast", 3)],
        messages: 1,
        instances: 2,
    },
    RuleCase {
        case: "root-outside",
        rule: Rule::RootOutsideCommunicator,
        oracle: "MPI_COLLECTIVE_END 2 301 Operation: BCAST, Communicator: \"MPI_COMM_WORLD\" <0>, Root: 7 (INVALID)",
        anomalies: &[("RootOutsideCommunicator", "2", "MPI_Bcast", "300")],
        value: Some(7),
        calls: &[("MPI_Bcast", 3)],
        messages: 1,
        instances: 2,
    },
    RuleCase {
        case: "bytes-on-barrier",
        rule: Rule::BytesOnBarrier,
        oracle: "MPI_COLLECTIVE_END 2 301 Operation: BARRIER, Communicator: \"MPI_COMM_WORLD\" <0>, Root: NONE, Sent: 4, Received: 4",
        anomalies: &[("BytesOnBarrier", "2", "MPI_Barrier", "300")],
        value: Some(4),
        calls: &[("MPI_Barrier", 3)],
        messages: 1,
        instances: 2,
    },
];

/// `otf2-print`'s text of `anchor` (its definitions with `-G`), whitespace squeezed.
fn otf2_printed(args: &[&str], anchor: &Path) -> String {
    common::otf2_print::run(args, anchor)
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn otf2_archives_break_each_rule_they_can_express() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let oracle = common::otf2_print::available();
    for c in OTF2_CASES {
        let anchor = otf2_fixture(&format!("rules-cases/{}", c.case));
        if oracle {
            // The fault is in the archive as the reference reader prints it.
            let (args, text): (&[&str], &str) = match c.oracle.strip_prefix("-G ") {
                Some(defs) => (&["-G"], defs),
                None => (&[], c.oracle),
            };
            let printed = otf2_printed(args, &anchor);
            assert!(printed.contains(text), "{}: {text}\n{printed}", c.case);
        }
        assert_rule_case(&db, &anchor, c);
    }
    // Every rule is met but the ones docs/formats.md says OTF2 cannot express.
    let met: Vec<Rule> = OTF2_CASES.iter().map(|c| c.rule).collect();
    let unmet: Vec<Rule> = Rule::ALL.into_iter().filter(|r| !met.contains(r)).collect();
    assert_eq!(unmet, vec![Rule::UnknownRank, Rule::MissingSource]);
}

/// A Paraver trace of the run every Paraver case shares, 3 tasks of one thread (`tasks`
/// overrides the header's task list): MPI_Init at 10, a message of 64 bytes from task 1 to
/// task 2 with tag 5 at 100, an MPI_Allreduce of all three on the world (communicator 1) at
/// 200, MPI_Finalize at 900; with the communicator lines `comms` after the world's and the
/// records `fault` at 300. Extrae's numbering: MPI calls are event types 50000001 (Send 1,
/// Recv 2), 50000002 (Bcast 7, Barrier 8, Allreduce 10) and 50000003 (Comm_rank 19, Init 31,
/// Finalize 32); a collective's sizes, root flag and communicator 50100001 to 50100004; user
/// functions 60000019.
fn paraver_case(tasks: Option<&str>, comms: &[&str], fault: &str) -> String {
    let tasks = tasks.unwrap_or("3(1:1,1:1,1:1)");
    let mut prv = format!(
        "#Paraver (29/11/2026 at 10:00):1000_ns:1(3):1:{tasks},{}\nc:1:1:3:1:2:3\n",
        comms.len() + 1
    );
    for c in comms {
        prv.push_str(c);
        prv.push('\n');
    }
    let each = |line: &str| {
        (1..=3)
            .map(|t| format!("2:1:1:{t}:1:{line}\n"))
            .collect::<String>()
    };
    prv += &each("10:50000003:31");
    prv += &each("15:50000003:0");
    prv += "2:1:1:1:1:100:50000001:1\n2:1:1:2:1:100:50000001:2\n\
            3:1:1:1:1:100:105:1:1:2:1:100:115:64:5\n\
            2:1:1:1:1:110:50000001:0\n2:1:1:2:1:120:50000001:0\n";
    prv += &each("200:50000002:10:50100001:8:50100002:8:50100004:1");
    prv += &each("210:50000002:0");
    prv += fault;
    prv += &each("900:50000003:32");
    prv += &each("910:50000003:0");
    prv
}

/// The Paraver cases: (header's tasks, more communicator lines, the records at 300, case).
#[allow(clippy::type_complexity)]
const PARAVER_CASES: &[(Option<&str>, &[&str], &str, RuleCase)] = &[
    (
        None,
        // Communicator 2 is declared twice; tasks 1 and 2 call MPI_Barrier on it, which
        // its first line gives them both.
        &["c:1:2:2:1:2", "c:1:2:2:2:3"],
        "2:1:1:1:1:300:50000002:8:50100004:2\n2:1:1:2:1:300:50000002:8:50100004:2\n\
         2:1:1:1:1:310:50000002:0\n2:1:1:2:1:310:50000002:0\n",
        RuleCase {
            case: "dup-comm",
            rule: Rule::DuplicateDeclaration,
            oracle: "",
            anomalies: &[("DuplicateDeclaration", "", "", "")],
            value: Some(2),
            calls: &[("MPI_Barrier", 2)],
            messages: 1,
            instances: 2,
        },
    ),
    (
        // Task 3 runs on node 2 of a header that declares 1 (processor 1, counted from 0).
        Some("3(1:1,1:1,1:2)"),
        &[],
        "",
        RuleCase {
            case: "unknown-processor",
            rule: Rule::UnknownProcessor,
            oracle: "",
            anomalies: &[("UnknownProcessor", "2", "", "")],
            value: Some(1),
            calls: &[],
            messages: 1,
            instances: 1,
        },
    ),
    (
        None,
        // Communicator 2 has no task; task 3 calls MPI_Barrier on it.
        &["c:1:2:0"],
        "2:1:1:3:1:300:50000002:8:50100004:2\n2:1:1:3:1:310:50000002:0\n",
        RuleCase {
            case: "empty-comm",
            rule: Rule::EmptyCommunicator,
            oracle: "",
            anomalies: &[
                ("EmptyCommunicator", "", "", ""),
                ("UnknownCommunicator", "2", "MPI_Barrier", "300"),
            ],
            value: None,
            calls: &[("MPI_Barrier", 1)],
            messages: 1,
            instances: 1,
        },
    ),
    (
        None,
        // Communicator 2 lists tasks 1 and 5 (of 3); task 1 broadcasts on it as its root,
        // alone in it once task 5 is left out.
        &["c:1:2:2:1:5"],
        "2:1:1:1:1:300:50000002:7:50100001:8:50100002:8:50100003:1:50100004:2\n\
         2:1:1:1:1:310:50000002:0\n",
        RuleCase {
            case: "unknown-member",
            rule: Rule::UnknownMember,
            oracle: "",
            anomalies: &[("UnknownMember", "", "", "")],
            value: Some(4),
            calls: &[("MPI_Bcast", 1)],
            messages: 1,
            instances: 2,
        },
    ),
    (
        None,
        &["c:1:2:3:1:2:1"],
        "2:1:1:1:1:300:50000002:8:50100004:2\n2:1:1:2:1:300:50000002:8:50100004:2\n\
         2:1:1:1:1:310:50000002:0\n2:1:1:2:1:310:50000002:0\n",
        RuleCase {
            case: "dup-member",
            rule: Rule::DuplicateMember,
            oracle: "",
            anomalies: &[("DuplicateMember", "", "", "")],
            value: Some(0),
            calls: &[("MPI_Barrier", 2)],
            messages: 1,
            instances: 2,
        },
    ),
    (
        None,
        &[],
        // MPI_Comm_rank closes at 290, before it opened.
        "2:1:1:3:1:300:50000003:19\n2:1:1:3:1:290:50000003:0\n",
        RuleCase {
            case: "end-before-start",
            rule: Rule::EndBeforeStart,
            oracle: "",
            anomalies: &[("EndBeforeStart", "2", "MPI_Comm_rank", "300")],
            value: Some(290),
            calls: &[("MPI_Comm_rank", 1)],
            messages: 1,
            instances: 1,
        },
    ),
    (
        None,
        &[],
        // Task 3 enters function 1 at 300, then MPI_Comm_rank opens at 290.
        "2:1:1:3:1:300:60000019:1\n2:1:1:3:1:290:50000003:19\n\
         2:1:1:3:1:305:50000003:0\n2:1:1:3:1:310:60000019:0\n",
        RuleCase {
            case: "time-backwards",
            rule: Rule::TimeGoesBackwards,
            oracle: "",
            anomalies: &[("TimeGoesBackwards", "2", "MPI_Comm_rank", "300")],
            value: Some(290),
            calls: &[("MPI_Comm_rank", 1)],
            messages: 1,
            instances: 1,
        },
    ),
    (
        None,
        &[],
        // MPI_Comm_rank from 300 to 305, then function 1 entered at 290.
        "2:1:1:3:1:300:50000003:19\n2:1:1:3:1:305:50000003:0\n\
         2:1:1:3:1:290:60000019:1\n2:1:1:3:1:310:60000019:0\n",
        RuleCase {
            case: "routine-backwards",
            rule: Rule::RoutineTimeGoesBackwards,
            oracle: "",
            anomalies: &[("RoutineTimeGoesBackwards", "2", "", "300")],
            value: Some(290),
            calls: &[("MPI_Comm_rank", 1)],
            messages: 1,
            instances: 1,
        },
    ),
    (
        None,
        &[],
        "2:1:1:3:1:300:50000002:8:50100004:7\n2:1:1:3:1:310:50000002:0\n",
        RuleCase {
            case: "unknown-comm",
            rule: Rule::UnknownCommunicator,
            oracle: "",
            anomalies: &[("UnknownCommunicator", "2", "MPI_Barrier", "300")],
            value: Some(7),
            calls: &[("MPI_Barrier", 1)],
            messages: 1,
            instances: 1,
        },
    ),
    (
        None,
        &["c:1:2:2:1:2"],
        "2:1:1:3:1:300:50000002:8:50100004:2\n2:1:1:3:1:310:50000002:0\n",
        RuleCase {
            case: "rank-outside",
            rule: Rule::RankOutsideCommunicator,
            oracle: "",
            anomalies: &[("RankOutsideCommunicator", "2", "MPI_Barrier", "300")],
            value: Some(2),
            calls: &[("MPI_Barrier", 1)],
            messages: 1,
            instances: 1,
        },
    ),
    (
        None,
        &[],
        // Task 3 sends to task 5 of an application of 3: the send keeps no peer; the
        // receive side belongs to no process.
        "2:1:1:3:1:300:50000001:1\n3:1:1:3:1:300:305:1:1:5:1:300:305:16:6\n\
         2:1:1:3:1:310:50000001:0\n",
        RuleCase {
            case: "peer-outside",
            rule: Rule::PeerOutsideCommunicator,
            oracle: "",
            anomalies: &[
                ("PeerOutsideCommunicator", "2", "MPI_Send", "300"),
                ("UnknownRank", "", "", "300"),
            ],
            value: Some(4),
            calls: &[("MPI_Send", 1)],
            messages: 1,
            instances: 1,
        },
    ),
    (
        None,
        &[],
        // An event of task 5 of an application of 3.
        "2:1:1:5:1:300:50000003:19\n",
        RuleCase {
            case: "unknown-rank",
            rule: Rule::UnknownRank,
            oracle: "",
            anomalies: &[("UnknownRank", "", "", "300")],
            value: Some(4),
            calls: &[],
            messages: 1,
            instances: 1,
        },
    ),
    (
        None,
        &[],
        // Task 2's MPI_Barrier carries the root flag.
        "2:1:1:1:1:300:50000002:8:50100004:1\n2:1:1:2:1:300:50000002:8:50100003:1:50100004:1\n\
         2:1:1:3:1:300:50000002:8:50100004:1\n2:1:1:1:1:310:50000002:0\n\
         2:1:1:2:1:310:50000002:0\n2:1:1:3:1:310:50000002:0\n",
        RuleCase {
            case: "unexpected-root",
            rule: Rule::UnexpectedRoot,
            oracle: "",
            anomalies: &[("UnexpectedRoot", "1", "MPI_Barrier", "300")],
            value: Some(1),
            calls: &[("MPI_Barrier", 3)],
            messages: 1,
            instances: 2,
        },
    ),
    (
        None,
        &[],
        // An MPI_Bcast whose calls carry no root flag: no member names the root.
        "2:1:1:1:1:300:50000002:7:50100001:8:50100002:8:50100004:1\n\
         2:1:1:2:1:300:50000002:7:50100001:8:50100002:8:50100004:1\n\
         2:1:1:3:1:300:50000002:7:50100001:8:50100002:8:50100004:1\n\
         2:1:1:1:1:310:50000002:0\n2:1:1:2:1:310:50000002:0\n2:1:1:3:1:310:50000002:0\n",
        RuleCase {
            case: "missing-root",
            rule: Rule::MissingRoot,
            oracle: "",
            anomalies: &[
                ("MissingRoot", "0", "MPI_Bcast", "300"),
                ("MissingRoot", "1", "MPI_Bcast", "300"),
                ("MissingRoot", "2", "MPI_Bcast", "300"),
            ],
            value: None,
            calls: &[("MPI_Bcast", 3)],
            messages: 1,
            instances: 2,
        },
    ),
    (
        None,
        &[],
        // Old-style global-operation records of an MPI_Bcast (operation 1) on communicator 1:
        // tasks 1 and 2 name root 0, task 3 root 7 (the communicator has 3 ranks).
        "4:1:1:1:1:300:1:8:8:1:0\n4:1:1:2:1:300:1:8:8:1:0\n4:1:1:3:1:300:1:8:8:1:7\n",
        RuleCase {
            case: "root-outside",
            rule: Rule::RootOutsideCommunicator,
            oracle: "",
            anomalies: &[("RootOutsideCommunicator", "2", "MPI_Bcast", "300")],
            value: Some(7),
            calls: &[("MPI_Bcast", 3)],
            messages: 1,
            instances: 2,
        },
    ),
    (
        None,
        &[],
        "2:1:1:1:1:300:50000002:8:50100004:1\n2:1:1:2:1:300:50000002:8:50100004:1\n\
         2:1:1:3:1:300:50000002:8:50100001:4:50100002:4:50100004:1\n\
         2:1:1:1:1:310:50000002:0\n2:1:1:2:1:310:50000002:0\n2:1:1:3:1:310:50000002:0\n",
        RuleCase {
            case: "bytes-on-barrier",
            rule: Rule::BytesOnBarrier,
            oracle: "",
            anomalies: &[("BytesOnBarrier", "2", "MPI_Barrier", "300")],
            value: Some(4),
            calls: &[("MPI_Barrier", 3)],
            messages: 1,
            instances: 2,
        },
    ),
];

#[test]
fn paraver_traces_break_each_rule_they_can_express() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    for (tasks, comms, fault, c) in PARAVER_CASES {
        let prv = dir.path().join(format!("{}.prv", c.case));
        std::fs::write(&prv, paraver_case(*tasks, comms, fault)).unwrap();
        assert_rule_case(&db, &prv, c);
    }
    // Every rule is met but the ones docs/formats.md says Paraver cannot express.
    let met: Vec<Rule> = PARAVER_CASES.iter().map(|c| c.3.rule).collect();
    let unmet: Vec<Rule> = Rule::ALL.into_iter().filter(|r| !met.contains(r)).collect();
    assert_eq!(
        unmet,
        vec![
            Rule::MissingCommunicator,
            Rule::MissingDestination,
            Rule::MissingSource
        ]
    );
}

#[test]
fn otf2_ranks_the_definitions_give_no_location_import_without_one() {
    // Oracle (otf2-print -G): MPI's locations group lists "Master thread" <0>, <1>, INVALID
    // <7>, <1> again and <3>, whose location group is INVALID <9>.
    let anchor = otf2_fixture("rules-unplaced");
    if common::otf2_print::available() {
        let printed = otf2_printed(&["-G"], &anchor);
        assert!(printed.contains("5 Members: \"Master thread\" <0>, \"Master thread\" <1>, INVALID <7>, \"Master thread\" <1>, \"Master thread\" <3>"), "{printed}");
        assert!(printed.contains("LOCATION 3 Name: \"Master thread\" <6>, Type: CPU_THREAD, # Events: 7, Group: INVALID <9>"), "{printed}");
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (ok, _, err) = mtfdb(&db, &["import", anchor.to_str().unwrap(), "--name", "u"]);
    assert!(ok, "{err}");
    let (rows, info) = reported(&db, "u");
    // Rank 2's location is not in the archive: its data is missing, and rank 0's send to it
    // waited for it. Rank 3 repeats rank 1's location: it has none, and never finalized.
    assert_eq!(
        rows,
        vec![
            row("MissingRankData", "2", "", ""),
            row("SkippedRecord", "3", "", ""),
            row("PeerDataMissing", "0", "MPI_Send", "200"),
            row("MissingFinalize", "3", "", ""),
        ]
    );
    assert_eq!(
        info_count(&info, "rank's event data missing"),
        Some(1),
        "{info}"
    );
    let trace = Database::open(&db).unwrap().trace("u").unwrap();
    let names: Vec<&str> = trace
        .header()
        .processes
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(names, ["MPI Rank 0", "MPI Rank 1", "P2", "P3", "P4"]);
    let files: Vec<String> = trace
        .anomalies()
        .unwrap()
        .into_iter()
        .filter_map(|a| match a {
            Anomaly::MissingRankData { rank, file, .. } => Some(format!("{rank} {file}")),
            _ => None,
        })
        .collect();
    assert_eq!(
        files,
        [format!(
            "2 {}",
            anchor.with_file_name("traces/7.evt").display()
        )]
    );
    // Rank 4 (location 3, of an undefined process) keeps its events: its message from rank
    // 0 is matched.
    let pairs: Vec<(u32, u32, u64, u64)> = trace
        .pairs()
        .iter()
        .map(|p| (p.sender, p.receiver, p.messages, p.bytes))
        .collect();
    assert_eq!(pairs, [(0, 4, 1, 8)]);
    assert_eq!(trace.process_operations(4).unwrap().len(), 3);
}

//! The import seam: every source gets the same rules. Each rule violation fed to the library's
//! `Database::import_events` gives the same rule and message as the MTF text reader gives for
//! the same trace, and the database is left as it was; the lenient policy of foreign formats
//! repairs what tracers habitually break and reports it.

use mtfdb::ingest::mtf_text::parse_reader;
use mtfdb::ingest::{EventSink, Policy, ValidatingSink};
use mtfdb::model::{Anomaly, Location, Operation, RoutineEvent, TraceHeader};
use mtfdb::{Error, Result};

mod common;
use common::temp_db;

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
    fn anomaly(&mut self, _: &Anomaly) -> Result<()> {
        Ok(())
    }
    fn locations(&mut self, _: &[Location]) -> Result<()> {
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

impl Recorded {
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

/// (what is wrong, the trace's event lines, the rule broken)
const VIOLATIONS: &[(&str, &str, &str)] = &[
    (
        "a send to an undeclared rank",
        "0 1 2 Send c=0 to=7 tag=1 b=8\n",
        "unknown rank",
    ),
    (
        "an operation by an undeclared rank",
        "9 1 2 Barrier c=0\n",
        "unknown rank",
    ),
    (
        "an end before its start",
        "0 5 3 Barrier c=0\n",
        "end before start",
    ),
    (
        "a routine exit with no entry",
        "0 4 leave solve\n",
        "unbalanced leave",
    ),
    (
        "a crossed routine exit",
        "0 1 enter a\n0 2 enter b\n0 3 leave a\n",
        "unbalanced leave",
    ),
    (
        "an undeclared communicator",
        "0 1 2 Barrier c=3\n",
        "unknown communicator",
    ),
    (
        "a rank outside its communicator",
        "1 1 2 Barrier c=5\n",
        "not a member",
    ),
    (
        "a send without a destination",
        "0 1 2 Send c=0 tag=1 b=8\n",
        "missing destination",
    ),
    (
        "a receive without a source",
        "0 1 2 Recv c=0 rtag=1 rb=8\n",
        "missing source",
    ),
    (
        "a peer outside the communicator",
        "0 1 2 Send c=5 to=1 tag=1 b=8\n",
        "peer not in communicator",
    ),
    (
        "a root on a Barrier",
        "0 1 2 Barrier c=0 root=0\n",
        "unexpected root",
    ),
    (
        "a Bcast without a root",
        "0 1 2 Bcast c=0 b=8\n",
        "missing root",
    ),
    (
        "a root outside the communicator",
        "0 1 2 Bcast c=5 root=1 b=8\n",
        "root not in communicator",
    ),
    (
        "bytes on a Barrier",
        "0 1 2 Barrier c=0 b=8\n",
        "bytes on a barrier",
    ),
    (
        "a rank's time going backwards",
        "0 10 12 Barrier c=0\n0 5 6 Barrier c=0\n",
        "time goes backwards",
    ),
    (
        "a send with no communicator",
        "0 1 2 Send to=1 tag=1 b=8\n",
        "missing communicator",
    ),
];

#[test]
fn every_rule_violation_gets_the_same_error_from_the_library_as_from_mtf_text() {
    for (what, events, rule) in VIOLATIONS {
        let text = format!("{HEAD}{events}");
        // The MTF text reader, through the seam, as an import of a file does.
        let mut sink = Recorded::default();
        let text_err = parse_reader(
            text.as_bytes(),
            "t.mtf",
            &mut ValidatingSink::new(&mut sink, Policy::Strict),
        )
        .expect_err(what);
        let Error::Input(input) = &text_err else {
            panic!("{what}: {text_err:?}")
        };
        assert_eq!(input.rule, *rule, "{what}: {text_err}");
        assert_eq!(input.file, "t.mtf");
        assert!(input.line >= 6, "{what}: placed at line {}", input.line);

        // The same items, produced by code and fed to the library.
        let mut recorded = Recorded::default();
        parse_reader(text.as_bytes(), "t.mtf", &mut recorded).unwrap();
        let (_dir, db) = temp_db();
        let lib_err = db
            .import_events("t", |sink| recorded.replay(sink))
            .expect_err(what);
        let Error::Rule(v) = &lib_err else {
            panic!("{what}: {lib_err:?}")
        };
        assert_eq!(v.rule, input.rule, "{what}");
        assert_eq!(v.message, input.message, "{what}");
        // Nothing of the refused import is kept.
        assert!(db.trace_names().unwrap().is_empty(), "{what}");
    }
}

#[test]
fn the_lenient_seam_repairs_broken_nesting_and_reports_it() {
    // The same crossed and unentered leaves, as a foreign format's reader would hand them over.
    let text = format!(
        "{HEAD}0 1 enter a\n0 2 enter b\n0 3 leave a\n0 4 leave b\n0 5 10 Barrier c=0\n1 5 10 Barrier c=0\n2 5 10 Barrier c=0\n"
    );
    let mut recorded = Recorded::default();
    parse_reader(text.as_bytes(), "t.mtf", &mut recorded).unwrap();
    let mut out = Recorded::default();
    let mut anomalies = Vec::new();
    struct Tap<'a> {
        inner: &'a mut Recorded,
        anomalies: &'a mut Vec<Anomaly>,
    }
    impl EventSink for Tap<'_> {
        fn header(&mut self, h: &TraceHeader) -> Result<()> {
            self.inner.header(h)
        }
        fn string(&mut self, id: u32, text: &str) -> Result<()> {
            self.inner.string(id, text)
        }
        fn operation(&mut self, op: &Operation) -> Result<()> {
            self.inner.operation(op)
        }
        fn routine(&mut self, e: &RoutineEvent) -> Result<()> {
            self.inner.routine(e)
        }
        fn anomaly(&mut self, a: &Anomaly) -> Result<()> {
            self.anomalies.push(a.clone());
            Ok(())
        }
        fn finish(&mut self) -> Result<()> {
            Ok(())
        }
    }
    let mut tap = Tap {
        inner: &mut out,
        anomalies: &mut anomalies,
    };
    recorded
        .replay(&mut ValidatingSink::new(&mut tap, Policy::Lenient))
        .unwrap();
    // a = string 0, b = string 1: leaving a closes b first, then a; b's own leave is dropped.
    assert_eq!(
        anomalies,
        vec![
            Anomaly::CrossedLeave {
                rank: 0,
                thread: 0,
                time: 3,
                routine: 0,
                innermost: 1
            },
            Anomaly::LeaveWithoutEnter {
                rank: 0,
                thread: 0,
                time: 4,
                routine: 1
            }
        ]
    );
    let leaves: Vec<(u32, u64)> = out
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Routine(r) if !r.enter => Some((r.routine, r.time)),
            _ => None,
        })
        .collect();
    assert_eq!(leaves, vec![(1, 3), (0, 3)]);
}

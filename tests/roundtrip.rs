//! Every generator scenario survives MTF text write → parse exactly: the same header and the
//! same operations and routine events, field for field, in the same order (string ids are
//! compared by the names they stand for, since the parser numbers names in first-use order).

use mtfdb::gen::{generate, GenConfig, Scenario};
use mtfdb::ingest::mtf_text::{parse_reader, MtfWriter};
use mtfdb::ingest::EventSink;
use mtfdb::model::{OpKind, Operation, RoutineEvent, TraceHeader};
use mtfdb::Result;

/// One item of a stream with its string ids replaced by the names they stand for.
#[derive(Debug, Clone, PartialEq)]
enum Item {
    Operation {
        op: Operation,
        datatype: Option<String>,
        call: Option<String>,
    },
    Routine {
        event: RoutineEvent,
        routine: String,
    },
}

#[derive(Default)]
struct Recorder {
    header: Option<TraceHeader>,
    strings: Vec<String>,
    items: Vec<Item>,
    finished: bool,
}

impl Recorder {
    fn name(&self, id: u32) -> String {
        self.strings[id as usize].clone()
    }
}

impl EventSink for Recorder {
    fn header(&mut self, header: &TraceHeader) -> Result<()> {
        self.header = Some(header.clone());
        Ok(())
    }

    fn string(&mut self, id: u32, text: &str) -> Result<()> {
        if self.strings.len() <= id as usize {
            self.strings.resize(id as usize + 1, String::new());
        }
        self.strings[id as usize] = text.to_string();
        Ok(())
    }

    fn operation(&mut self, op: &Operation) -> Result<()> {
        let mut op = op.clone();
        let datatype = op.datatype.take().map(|id| self.name(id));
        let call = match op.kind {
            OpKind::Other(id) => {
                op.kind = OpKind::Other(0);
                Some(self.name(id))
            }
            _ => None,
        };
        // The writer leaves depth out; the parser derives it from enter/leave lines.
        op.depth = 0;
        self.items.push(Item::Operation { op, datatype, call });
        Ok(())
    }

    fn routine(&mut self, event: &RoutineEvent) -> Result<()> {
        let mut event = *event;
        let routine = self.name(event.routine);
        event.routine = 0;
        self.items.push(Item::Routine { event, routine });
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        self.finished = true;
        Ok(())
    }
}

#[test]
fn every_scenario_survives_write_then_parse() {
    for scenario in Scenario::ALL {
        for shuffle in [false, true] {
            let config = GenConfig {
                scenario,
                ranks: 16,
                iterations: 6,
                seed: 3,
                shuffle_ranks: shuffle,
                delays: Vec::new(),
                network: None,
            };
            let mut original = Recorder::default();
            let truth = generate(&config, &mut original).unwrap();

            let mut text = MtfWriter::new(Vec::new());
            generate(&config, &mut text).unwrap();
            let text = text.into_inner().unwrap();

            let mut parsed = Recorder::default();
            let stats = parse_reader(&text[..], "roundtrip.mtf", &mut parsed).unwrap();
            let label = format!("{scenario} shuffle={shuffle}");
            assert!(parsed.finished, "{label}");
            assert_eq!(parsed.header, original.header, "{label}: header");
            assert_eq!(
                stats.operations, truth.operations,
                "{label}: operations parsed"
            );
            assert_eq!(
                stats.routine_events, truth.routine_events,
                "{label}: routine events parsed"
            );
            assert_eq!(parsed.items.len(), original.items.len(), "{label}: items");
            for (i, (a, b)) in parsed.items.iter().zip(&original.items).enumerate() {
                assert_eq!(a, b, "{label}: item {i}");
            }
        }
    }
}

//! Pictures (`--format svg`): every picture of the generated scenarios and of the real traces
//! parses as XML and holds what it must, checked against the generator's ground truth and
//! against the statements' own rows: a cell per rank pair with traffic, a box per call in a
//! timeline window, a band per phase, a mark per pattern occurrence, the legend's range equal
//! to the data's.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use mtfdb::export::svg::statement_svg;
use mtfdb::gen::{GenConfig, Scenario};
use mtfdb::{Session, Value};
use quick_xml::events::Event;

/// One element of an SVG: its name and attributes.
#[derive(Debug, Clone)]
struct Mark {
    name: String,
    attributes: BTreeMap<String, String>,
    /// The text directly inside it (a label's).
    text: String,
}

impl Mark {
    fn attr(&self, name: &str) -> &str {
        self.attributes
            .get(name)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("{} has no {name}: {:?}", self.name, self.attributes))
    }

    fn number(&self, name: &str) -> f64 {
        self.attr(name).parse().unwrap()
    }
}

/// Parses `svg` as XML (failing on any malformed part) and returns its elements in order.
fn parse_svg(svg: &str) -> Vec<Mark> {
    let mut reader = quick_xml::Reader::from_str(svg);
    let mut marks = Vec::new();
    loop {
        match reader.read_event().expect("well-formed XML") {
            Event::Eof => break,
            Event::Start(e) | Event::Empty(e) => {
                let name = String::from_utf8(e.name().as_ref().to_vec()).unwrap();
                let attributes = e
                    .attributes()
                    .map(|a| {
                        let a = a.expect("a well-formed attribute");
                        (
                            String::from_utf8(a.key.as_ref().to_vec()).unwrap(),
                            a.unescape_value().unwrap().to_string(),
                        )
                    })
                    .collect();
                marks.push(Mark {
                    name,
                    attributes,
                    text: String::new(),
                });
            }
            Event::Text(t) => {
                if let Some(last) = marks.last_mut() {
                    last.text.push_str(&t.unescape().unwrap());
                }
            }
            _ => {}
        }
    }
    assert!(
        marks.first().is_some_and(|m| m.name == "svg"),
        "an <svg> root"
    );
    marks
}

fn of_class<'a>(marks: &'a [Mark], class: &str) -> Vec<&'a Mark> {
    marks
        .iter()
        .filter(|m| m.attributes.get("class").is_some_and(|c| c == class))
        .collect()
}

fn int(v: &Value) -> u64 {
    match v {
        Value::Int(i) => u64::try_from(*i).unwrap(),
        other => panic!("not a count: {other:?}"),
    }
}

fn session_of(config: &GenConfig) -> (tempfile::TempDir, Session, mtfdb::gen::GroundTruth) {
    let (dir, db) = common::temp_db();
    let truth = common::import_generated(&db, config, "t");
    (dir, Session::new(db), truth)
}

#[test]
fn the_matrix_has_a_cell_per_pair_with_traffic_and_the_legend_spans_the_data() {
    for scenario in Scenario::ALL {
        let (_dir, mut session, truth) = session_of(&GenConfig::new(scenario, 16, 4));
        for (statement, value_of) in [
            (
                "SELECT COMMUNICATION MATRIX OF COUNT",
                (|p: &mtfdb::gen::PairTruth| p.messages) as fn(&mtfdb::gen::PairTruth) -> u64,
            ),
            ("SELECT COMMUNICATION MATRIX", |p| p.bytes),
        ] {
            let svg = statement_svg(&mut session, statement).unwrap();
            let marks = parse_svg(&svg);
            let cells: BTreeMap<(u32, u32), u64> = of_class(&marks, "cell")
                .iter()
                .map(|c| {
                    (
                        (
                            c.attr("data-sender").parse().unwrap(),
                            c.attr("data-receiver").parse().unwrap(),
                        ),
                        c.attr("data-value").parse().unwrap(),
                    )
                })
                .collect();
            let expected: BTreeMap<(u32, u32), u64> = truth
                .pairs
                .iter()
                .map(|p| ((p.sender, p.receiver), value_of(p)))
                .collect();
            assert_eq!(cells, expected, "{scenario:?}: {statement}");
            assert_eq!(of_class(&marks, "cell").len(), truth.pairs.len());
            if expected.is_empty() {
                continue;
            }
            let legend = marks
                .iter()
                .find(|m| m.attributes.get("class").is_some_and(|c| c == "legend"))
                .expect("a legend");
            let (lo, hi) = (
                *expected.values().min().unwrap() as f64,
                *expected.values().max().unwrap() as f64,
            );
            assert_eq!(
                (legend.number("data-min"), legend.number("data-max")),
                (lo, hi)
            );
        }
    }
}

#[test]
fn a_matrix_of_many_ranks_draws_blocks_that_keep_every_byte() {
    let (_dir, mut session, truth) = session_of(&GenConfig::new(Scenario::Stencil2d, 1024, 2));
    let svg = statement_svg(&mut session, "SELECT COMMUNICATION MATRIX").unwrap();
    let marks = parse_svg(&svg);
    let cells = of_class(&marks, "cell");
    assert!(cells.len() <= 410 * 410);
    assert!(
        cells.len() < truth.pairs.len(),
        "ranks were drawn in blocks"
    );
    let bytes: u64 = cells.iter().map(|c| c.number("data-value") as u64).sum();
    let pairs: u64 = cells.iter().map(|c| c.number("data-pairs") as u64).sum();
    assert_eq!(bytes, truth.message_bytes);
    assert_eq!(pairs, truth.pairs.len() as u64);
    // A restriction to a few ranks draws exactly their pairs.
    let svg = statement_svg(
        &mut session,
        "SELECT COMMUNICATION MATRIX FOR PROCESSES(0-63)",
    )
    .unwrap();
    let inside = truth
        .pairs
        .iter()
        .filter(|p| p.sender < 64 && p.receiver < 64)
        .count();
    assert_eq!(of_class(&parse_svg(&svg), "cell").len(), inside);
}

/// The start of rank 0's `k`th call of `call`.
fn start_of(session: &mut Session, call: &str, k: usize) -> u64 {
    let r = session
        .run(&format!("SELECT {call} FOR PROCESS(0)"))
        .unwrap();
    let at = r.column("start_ns").unwrap();
    int(&r.rows[k][at])
}

#[test]
fn a_timeline_window_has_a_box_per_call_and_a_line_per_message() {
    for scenario in [Scenario::Stencil2d, Scenario::Ring, Scenario::Bt] {
        let (_dir, mut session, _) = session_of(&GenConfig::new(scenario, 16, 6));
        let call = match scenario {
            Scenario::Ring => "MPI_Send",
            _ => "MPI_Isend",
        };
        let t = start_of(&mut session, call, 3);
        let (a, b) = (t - 20_000, t + 30_000);
        let statement =
            format!("SELECT OPERATIONS FOR PROCESSES(0-15) BETWEEN TIME {a} ns AND {b} ns");
        let rows = session.run(&statement).unwrap();
        assert!(rows.len() > 10, "{scenario:?}: the window holds calls");
        let marks = parse_svg(&statement_svg(&mut session, &statement).unwrap());
        let boxes = of_class(&marks, "op");
        // A 50 µs window on 1,100 pixels: every call of 50 ns or more is its own box.
        let op = rows.column("operation").unwrap();
        let start = rows.column("start_ns").unwrap();
        let end = rows.column("end_ns").unwrap();
        let wide = rows
            .rows
            .iter()
            .filter(|r| int(&r[end]).min(b) - int(&r[start]).max(a) >= 50)
            .count();
        let single = boxes.iter().filter(|m| m.attr("data-ops") == "1").count();
        assert!(
            single >= wide,
            "{scenario:?}: {single} boxes of one call, {wide} wide calls"
        );
        let drawn: u64 = boxes.iter().map(|m| m.number("data-ops") as u64).sum();
        assert_eq!(
            drawn,
            rows.len() as u64,
            "{scenario:?}: every call is drawn"
        );
        let calls: BTreeSet<String> = rows.rows.iter().map(|r| r[op].render()).collect();
        let drawn_calls: BTreeSet<String> = boxes
            .iter()
            .map(|m| m.attr("data-call").to_string())
            .collect();
        assert!(drawn_calls.is_subset(&calls));
        // Messages: those with both ends inside the window, each a line.
        let messages = session
            .run(&format!(
                "SELECT MESSAGES FOR PROCESSES(0-15) BETWEEN TIME {a} ns AND {b} ns"
            ))
            .unwrap();
        let (s, r) = (
            messages.column("send_time_ns").unwrap(),
            messages.column("recv_time_ns").unwrap(),
        );
        let inside = messages
            .rows
            .iter()
            .filter(|m| (a..=b).contains(&int(&m[s])) && (a..=b).contains(&int(&m[r])))
            .count() as u64;
        let lines: u64 = of_class(&marks, "message")
            .iter()
            .map(|m| m.number("data-messages") as u64)
            .sum();
        assert_eq!(lines, inside, "{scenario:?}: a line per message");
        assert!(inside > 0, "{scenario:?}: the window holds messages");
    }
}

#[test]
fn a_timeline_of_many_ranks_and_calls_is_bounded_by_its_pixels() {
    let (_dir, mut session, truth) = session_of(&GenConfig::new(Scenario::Stencil2d, 1024, 4));
    let svg = statement_svg(&mut session, "SELECT OPERATIONS").unwrap();
    let marks = parse_svg(&svg);
    let boxes = of_class(&marks, "op");
    let drawn: u64 = boxes.iter().map(|m| m.number("data-ops") as u64).sum();
    assert_eq!(drawn, truth.operations);
    let lanes = of_class(&marks, "lane-label").len();
    assert!(lanes <= 380, "{lanes} lane labels");
    assert!(boxes.len() < 380 * 1100, "{} boxes", boxes.len());
    // Collective members are joined.
    assert!(!of_class(&marks, "collective").is_empty());
}

#[test]
fn the_histogram_has_a_bar_per_bin_with_its_count() {
    let (_dir, mut session, truth) = session_of(&GenConfig::new(Scenario::Cg, 16, 4));
    for statement in [
        "SELECT HISTOGRAM OF SIZE",
        "SELECT HISTOGRAM OF SIZE BINS 7",
        "SELECT HISTOGRAM OF DURATION FROM OPERATIONS",
    ] {
        let rows = session.run(statement).unwrap();
        let marks = parse_svg(&statement_svg(&mut session, statement).unwrap());
        let bins = of_class(&marks, "bin");
        assert_eq!(bins.len(), rows.len(), "{statement}");
        for (bin, row) in bins.iter().zip(&rows.rows) {
            assert_eq!(bin.attr("data-low"), row[0].render());
            assert_eq!(bin.attr("data-count"), row[2].render());
        }
        let total: u64 = bins.iter().map(|b| b.number("data-count") as u64).sum();
        if statement.contains("SIZE") {
            assert_eq!(total, truth.messages, "{statement}");
        } else {
            assert_eq!(total, truth.operations, "{statement}");
        }
    }
}

#[test]
fn phases_draw_a_band_per_phase_and_a_mark_per_pattern_occurrence() {
    for scenario in [Scenario::Stencil2d, Scenario::Sweep, Scenario::Lu] {
        let (_dir, mut session, _) = session_of(&GenConfig::new(scenario, 16, 8));
        let phases = session.run("SELECT PHASES").unwrap();
        let patterns = session.run("SELECT COMMUNICATION PATTERNS").unwrap();
        for statement in ["SELECT PHASES", "SELECT COMMUNICATION PATTERNS"] {
            let marks = parse_svg(&statement_svg(&mut session, statement).unwrap());
            let bands = of_class(&marks, "phase");
            assert_eq!(bands.len(), phases.len(), "{scenario:?} {statement}");
            for (band, row) in bands.iter().zip(&phases.rows) {
                assert_eq!(band.attr("data-phase"), row[0].render());
                let start = match row[phases.column("start_s").unwrap()] {
                    Value::Float(s) => s,
                    ref other => panic!("{other:?}"),
                };
                assert!((band.number("data-start-ns") / 1e9 - start).abs() < 1e-6);
            }
            for row in &patterns.rows {
                let id = row[0].render();
                let marked: u64 = of_class(&marks, "occurrence")
                    .iter()
                    .filter(|m| m.attr("data-pattern") == id)
                    .map(|m| m.number("data-occurrences") as u64)
                    .sum();
                assert_eq!(marked, int(&row[2]), "{scenario:?}: pattern {id}");
            }
        }
    }
}

#[test]
fn the_topology_puts_every_rank_at_its_place_with_its_edges_kept() {
    for (scenario, ranks, kept) in [
        (Scenario::Stencil2d, 16, 24), // 4x4 grid
        (Scenario::Ring, 8, 8),
        (Scenario::Bt, 16, 48), // 6-point stencil on a 4x4 torus
    ] {
        let (_dir, mut session, truth) = session_of(&GenConfig::new(scenario, ranks, 4));
        let marks = parse_svg(&statement_svg(&mut session, "SELECT TOPOLOGY").unwrap());
        assert_eq!(of_class(&marks, "rank").len(), ranks as usize);
        let undirected: BTreeSet<(u32, u32)> = truth
            .pairs
            .iter()
            .map(|p| (p.sender.min(p.receiver), p.sender.max(p.receiver)))
            .collect();
        let edges = of_class(&marks, "edge-kept").len() + of_class(&marks, "edge-dropped").len();
        assert_eq!(edges, undirected.len(), "{scenario:?}");
        assert_eq!(of_class(&marks, "edge-kept").len(), kept, "{scenario:?}");
    }
}

#[test]
fn bars_hold_the_values_of_their_rows() {
    let (_dir, mut session, _) = session_of(&common::delayed_run(Scenario::Stencil2d));
    for (statement, column) in [
        ("SELECT MPI TIME", "mpi_time_ns"),
        ("SELECT WAIT STATES", "total_ns"),
        ("SELECT FAN_IN FOR ALL PROCESSES", "message_bytes"),
        (
            "SELECT SUM(SIZE) FROM MESSAGES GROUP BY PROCESS",
            "sum(size)",
        ),
    ] {
        let rows = session.run(statement).unwrap();
        let at = rows.column(column).unwrap();
        let marks = parse_svg(&statement_svg(&mut session, statement).unwrap());
        let bars: Vec<&Mark> = of_class(&marks, "bar")
            .into_iter()
            .filter(|b| b.attr("data-series") == column)
            .collect();
        assert_eq!(bars.len(), rows.len(), "{statement}");
        for (bar, row) in bars.iter().zip(&rows.rows) {
            let expected = match &row[at] {
                Value::Int(v) => *v as f64,
                Value::Float(v) => *v,
                other => panic!("{other:?}"),
            };
            assert_eq!(bar.number("data-value"), expected, "{statement}");
            assert_eq!(bar.attr("data-label"), row[0].render());
        }
    }
    // Wait states per rank, stacked by kind: the late sender of the delayed rank shows.
    let marks =
        parse_svg(&statement_svg(&mut session, "SELECT WAIT STATES GROUP BY PROCESS").unwrap());
    assert!(of_class(&marks, "bar")
        .iter()
        .any(|b| b.attr("data-series") == "late_sender_ns" && b.number("data-value") > 1e6));
}

#[test]
fn the_critical_path_is_drawn_segment_by_segment() {
    let (_dir, mut session, _) = session_of(&common::delayed_run(Scenario::Stencil2d));
    let path = session.run("SELECT CRITICAL PATH").unwrap();
    let marks = parse_svg(&statement_svg(&mut session, "SELECT CRITICAL PATH").unwrap());
    let drawn: u64 = of_class(&marks, "op")
        .iter()
        .map(|m| m.number("data-ops") as u64)
        .sum();
    assert_eq!(drawn, path.len() as u64);
    let rank = path.column("rank").unwrap();
    let changes = path
        .rows
        .windows(2)
        .filter(|w| w[0][rank] != w[1][rank])
        .count();
    assert_eq!(of_class(&marks, "path-step").len(), changes);
}

/// Every statement with a picture, on every scenario: the SVG parses, has its marks, and the
/// marks add up to the statement's rows.
#[test]
fn every_picture_of_every_scenario_draws_its_rows() {
    for scenario in Scenario::ALL {
        let (_dir, mut session, truth) = session_of(&GenConfig::new(scenario, 16, 6));
        let count = |marks: &[Mark], class: &str, attribute: &str| -> u64 {
            of_class(marks, class)
                .iter()
                .map(|m| m.number(attribute) as u64)
                .sum()
        };
        let draw = |session: &mut Session, statement: &str| {
            parse_svg(
                &statement_svg(session, statement)
                    .unwrap_or_else(|e| panic!("{scenario:?}: {statement}: {e}")),
            )
        };
        let marks = draw(&mut session, "SELECT OPERATIONS");
        assert_eq!(
            count(&marks, "op", "data-ops"),
            truth.operations,
            "{scenario:?}"
        );
        let marks = draw(&mut session, "SELECT MESSAGES");
        assert_eq!(
            count(&marks, "message", "data-messages"),
            truth.messages,
            "{scenario:?}"
        );
        let bursts = session.run("SELECT CPU BURSTS").unwrap().len() as u64;
        let marks = draw(&mut session, "SELECT CPU BURSTS");
        assert_eq!(count(&marks, "op", "data-ops"), bursts, "{scenario:?}");
        let marks = draw(&mut session, "SELECT HISTOGRAM OF DURATION FROM OPERATIONS");
        assert_eq!(
            count(&marks, "bin", "data-count"),
            truth.operations,
            "{scenario:?}"
        );
        let marks = draw(&mut session, "SELECT MPI TIME");
        assert_eq!(of_class(&marks, "bar").len(), 16, "{scenario:?}");
        let marks = draw(
            &mut session,
            "SELECT COUNT(*) FROM OPERATIONS GROUP BY OPERATION",
        );
        let by_call: u64 = of_class(&marks, "bar")
            .iter()
            .map(|b| b.number("data-value") as u64)
            .sum();
        assert_eq!(by_call, truth.operations, "{scenario:?}");
        for statement in [
            "SELECT PHASES",
            "SELECT COMMUNICATION PATTERNS",
            "SELECT WAIT STATES GROUP BY OPERATION",
            "SELECT CRITICAL PATH",
            "SELECT FAN_OUT FOR ALL PROCESSES",
        ] {
            draw(&mut session, statement);
        }
        match statement_svg(&mut session, "SELECT TOPOLOGY") {
            Ok(svg) => assert_eq!(of_class(&parse_svg(&svg), "rank").len(), 16),
            Err(e) => assert!(e.to_string().contains("no topology to draw"), "{e}"),
        }
    }
}

#[test]
fn a_statement_without_a_picture_says_which_have_one() {
    let (_dir, mut session, _) = session_of(&GenConfig::new(Scenario::Ring, 4, 2));
    for statement in [
        "SELECT STATISTICS",
        "SHOW TRACES",
        "SELECT COUNT(*) FROM MESSAGES",
    ] {
        let err = statement_svg(&mut session, statement)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("has no picture") && err.contains("COMMUNICATION MATRIX"),
            "{err}"
        );
    }
    let err = statement_svg(
        &mut session,
        "SELECT COUNT(*) FROM MESSAGES GROUP BY PROCESS, PEER",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("GROUP BY on one key"), "{err}");
    let err = statement_svg(&mut session, "SELECT NOTHING")
        .unwrap_err()
        .to_string();
    assert!(err.contains("column 8"), "{err}");
}

#[test]
fn every_real_trace_draws_every_picture() {
    let Some(files) = common::real_traces() else {
        return;
    };
    for file in files {
        let (_dir, db) = common::temp_db();
        db.import(&file, Some("t")).unwrap();
        let trace = db.trace("t").unwrap();
        let pairs = trace.pairs().iter().filter(|p| p.messages > 0).count();
        let ranks = trace.header().processes.len();
        let (first, last) = (
            trace.summary().first_time.unwrap_or(0),
            trace.summary().last_time.unwrap_or(0),
        );
        let operations = trace.summary().operations;
        let mut session = Session::new(db);
        let name = file.display();
        let marks = parse_svg(&statement_svg(&mut session, "SELECT COMMUNICATION MATRIX").unwrap());
        if ranks <= 410 {
            assert_eq!(of_class(&marks, "cell").len(), pairs, "{name}");
        }
        // A timeline of the whole run holds every call.
        let marks = parse_svg(&statement_svg(&mut session, "SELECT OPERATIONS").unwrap());
        let drawn: u64 = of_class(&marks, "op")
            .iter()
            .map(|m| m.number("data-ops") as u64)
            .sum();
        assert_eq!(drawn, operations, "{name}");
        // A window of a tenth of the run.
        let to = first + (last - first) / 10;
        let window = format!("SELECT OPERATIONS BETWEEN TIME {first} ns AND {to} ns");
        let rows = session.run(&window).unwrap().len() as u64;
        let marks = parse_svg(&statement_svg(&mut session, &window).unwrap());
        let drawn: u64 = of_class(&marks, "op")
            .iter()
            .map(|m| m.number("data-ops") as u64)
            .sum();
        assert_eq!(drawn, rows, "{name}");
        match statement_svg(&mut session, "SELECT TOPOLOGY") {
            Ok(svg) => assert_eq!(of_class(&parse_svg(&svg), "rank").len(), ranks, "{name}"),
            Err(e) => assert!(e.to_string().contains("no topology to draw"), "{name}: {e}"),
        }
        for statement in [
            "SELECT HISTOGRAM OF DURATION FROM OPERATIONS",
            "SELECT MPI TIME",
            "SELECT WAIT STATES",
            "SELECT CRITICAL PATH",
            "SELECT PHASES",
        ] {
            let phases = statement == "SELECT PHASES";
            match statement_svg(&mut session, statement) {
                Ok(svg) => {
                    let marks = parse_svg(&svg);
                    if phases {
                        let n = session.run(statement).unwrap().len();
                        assert_eq!(of_class(&marks, "phase").len(), n, "{name}");
                    }
                }
                Err(e) => panic!("{name}: {statement}: {e}"),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Pictures never invent (#42)

/// A small random number generator with a seed, for windows a test can repeat.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The plot's time range and pixels, as the timeline's `messages` group states them.
struct Plot {
    t0: f64,
    t1: f64,
    x0: f64,
    x1: f64,
}

impl Plot {
    fn of(marks: &[Mark]) -> Plot {
        let g = of_class(marks, "messages")[0];
        Plot {
            t0: g.number("data-t0"),
            t1: g.number("data-t1"),
            x0: g.number("data-x0"),
            x1: g.number("data-x1"),
        }
    }

    /// Where time `t` is drawn.
    fn x(&self, t: u64) -> f64 {
        self.x0 + (t as f64 - self.t0) / (self.t1 - self.t0).max(1.0) * (self.x1 - self.x0)
    }
}

/// The first and last time of the trace `t` of `session`.
fn run_span(session: &Session) -> (u64, u64) {
    let trace = session.database().trace("t").unwrap();
    let s = trace.summary();
    (s.first_time.unwrap(), s.last_time.unwrap())
}

/// The messages of `statement`'s window: (sender, receiver, send time, receive time).
fn messages_of(session: &mut Session, statement: &str) -> Vec<(u64, u64, u64, u64)> {
    let r = session.run(statement).unwrap();
    let at = |c: &str| r.column(c).unwrap();
    let (s, d, ts, tr) = (
        at("sender"),
        at("receiver"),
        at("send_time_ns"),
        at("recv_time_ns"),
    );
    r.rows
        .iter()
        .map(|m| (int(&m[s]), int(&m[d]), int(&m[ts]), int(&m[tr])))
        .collect()
}

/// Every message line of `marks` is where messages are (both ends within a pixel of a
/// message between its two ranks), every message has its line within a pixel, and the lines
/// count every message once. Returns how many lines were drawn.
fn lines_are_where_messages_are(
    marks: &[Mark],
    messages: &[(u64, u64, u64, u64)],
    what: &str,
) -> usize {
    let plot = Plot::of(marks);
    let lines = of_class(marks, "message");
    let near = |line: &Mark, m: &(u64, u64, u64, u64)| {
        line.number("data-sender") as u64 == m.0
            && line.number("data-receiver") as u64 == m.1
            && (plot.x(m.2) - line.number("x1")).abs() <= 1.0
            && (plot.x(m.3) - line.number("x2")).abs() <= 1.0
    };
    for line in &lines {
        assert!(
            messages.iter().any(|m| near(line, m)),
            "{what}: a line where no message is: {:?}",
            line.attributes
        );
    }
    for m in messages {
        assert!(
            lines.iter().any(|l| near(l, m)),
            "{what}: message {m:?} has no line within a pixel"
        );
    }
    let counted: u64 = lines.iter().map(|l| l.number("data-messages") as u64).sum();
    assert_eq!(counted, messages.len() as u64, "{what}: every message once");
    lines.len()
}

#[test]
fn message_lines_are_drawn_within_a_pixel_of_their_messages_and_nowhere_else() {
    let (_dir, mut session, truth) = session_of(&GenConfig::new(Scenario::Cg, 16, 8));
    let (first, last) = run_span(&session);
    let mut rng = Lcg(7);
    let mut windows = vec![(first, last)];
    for _ in 0..12 {
        let a = first + ((last - first) as f64 * rng.next()) as u64;
        let b = a + (((last - a) as f64) * rng.next().powi(3)) as u64 + 1_000;
        windows.push((a, b.min(last)));
    }
    for (a, b) in windows {
        let window = format!("BETWEEN TIME {a} ns AND {b} ns");
        let marks =
            parse_svg(&statement_svg(&mut session, &format!("SELECT MESSAGES {window}")).unwrap());
        // The timeline draws the messages with both ends inside its window.
        let messages: Vec<_> = messages_of(&mut session, &format!("SELECT MESSAGES {window}"))
            .into_iter()
            .filter(|m| (a..=b).contains(&m.2) && (a..=b).contains(&m.3))
            .collect();
        lines_are_where_messages_are(&marks, &messages, &window);
        // The same with the calls, whose lanes the lines then join.
        let marks = parse_svg(
            &statement_svg(&mut session, &format!("SELECT OPERATIONS {window}")).unwrap(),
        );
        lines_are_where_messages_are(&marks, &messages, &window);
    }
    assert!(truth.messages > 0);
}

#[test]
fn past_the_line_limit_every_message_is_counted_in_density_cells_and_none_is_moved() {
    // 64 ranks, 300 iterations: more distinct lines than a picture draws.
    let (_dir, mut session, truth) = session_of(&GenConfig::new(Scenario::Cg, 64, 300));
    let svg = statement_svg(&mut session, "SELECT MESSAGES").unwrap();
    let marks = parse_svg(&svg);
    assert!(of_class(&marks, "message").is_empty(), "no line is drawn");
    let cells = of_class(&marks, "message-density");
    assert!(!cells.is_empty());
    let sum = |a: &str| -> u64 { cells.iter().map(|c| c.number(a) as u64).sum() };
    assert_eq!(sum("data-sent"), truth.messages);
    assert_eq!(sum("data-received"), truth.messages);
    // The note says what was merged.
    let note = marks
        .iter()
        .find(|m| m.attributes.get("class").is_some_and(|c| c == "note"))
        .unwrap();
    assert!(
        note.text.contains("density cells") && note.text.contains("messages drawn as"),
        "{}",
        note.text
    );
    // Each message is counted in a cell of its sender at its send time, and of its receiver
    // at its receive time: cells are in time, never moved.
    let messages = messages_of(&mut session, "SELECT MESSAGES");
    let mut by_rank: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
    for c in &cells {
        by_rank
            .entry(c.number("data-rank") as u64)
            .or_default()
            .push((
                c.number("data-from-ns") as u64,
                c.number("data-to-ns") as u64,
            ));
    }
    let within = |rank: u64, t: u64| {
        by_rank
            .get(&rank)
            .is_some_and(|cells| cells.iter().any(|&(a, b)| a <= t && t <= b))
    };
    for m in messages.iter().step_by(7) {
        assert!(within(m.0, m.2), "send of {m:?} in a cell of its sender");
        assert!(
            within(m.1, m.3),
            "receive of {m:?} in a cell of its receiver"
        );
    }
}

#[test]
fn tick_labels_are_unique_over_a_thousand_random_windows() {
    let (_dir, mut session, _) = session_of(&GenConfig::new(Scenario::Stencil2d, 4, 6));
    let (first, last) = run_span(&session);
    let mut rng = Lcg(42);
    for i in 0..1000 {
        // Widths from 10 ns to the whole run, anywhere in it (deep windows included).
        let width = (10f64 * ((last - first) as f64 / 10.0).powf(rng.next())) as u64;
        let a = first + ((last - first - width.min(last - first)) as f64 * rng.next()) as u64;
        let statement = format!("SELECT OPERATIONS BETWEEN TIME {a} ns AND {} ns", a + width);
        let marks = parse_svg(&statement_svg(&mut session, &statement).unwrap());
        let labels: Vec<&str> = of_class(&marks, "tick-label")
            .iter()
            .map(|m| m.text.as_str())
            .collect();
        assert!(labels.len() >= 2, "{i}: {statement}: {labels:?}");
        let unique: BTreeSet<&str> = labels.iter().copied().collect();
        assert_eq!(unique.len(), labels.len(), "{i}: {statement}: {labels:?}");
    }
}

/// The legend's swatches: (name, colour).
fn swatches(marks: &[Mark]) -> Vec<(String, String)> {
    of_class(marks, "key-swatch")
        .iter()
        .map(|m| (m.attr("data-name").to_string(), m.attr("fill").to_string()))
        .collect()
}

#[test]
fn every_call_in_a_legend_has_its_own_swatch() {
    let mut traces: Vec<(String, tempfile::TempDir, Session)> = Vec::new();
    for scenario in Scenario::ALL {
        let (dir, session, _) = session_of(&GenConfig::new(scenario, 16, 2));
        traces.push((scenario.to_string(), dir, session));
    }
    // Real traces with many kinds of calls, where there are.
    if let Some(files) = common::real_traces() {
        for file in files {
            let (dir, db) = common::temp_db();
            if db.import(&file, Some("t")).is_ok() {
                traces.push((file.display().to_string(), dir, Session::new(db)));
            }
        }
    }
    let mut most = 0;
    for (name, _dir, mut session) in traces {
        let marks = parse_svg(&statement_svg(&mut session, "SELECT OPERATIONS").unwrap());
        let key = swatches(&marks);
        let calls = session
            .run("SELECT COUNT(*) FROM OPERATIONS GROUP BY OPERATION")
            .unwrap()
            .len();
        // Every call drawn is in the legend (with computation and routines beside them).
        assert!(
            key.len() >= calls,
            "{name}: {} swatches, {calls} calls",
            key.len()
        );
        let colours: BTreeSet<&String> = key.iter().map(|(_, c)| c).collect();
        assert_eq!(colours.len(), key.len(), "{name}: {key:?}");
        most = most.max(key.len());
    }
    assert!(most >= 5, "a legend of many calls was checked");
}

#[test]
fn the_critical_path_draws_its_computation_as_clearly_as_its_steps() {
    let (_dir, mut session, _) = session_of(&common::delayed_run(Scenario::Stencil2d));
    let path = session.run("SELECT CRITICAL PATH").unwrap();
    let marks = parse_svg(&statement_svg(&mut session, "SELECT CRITICAL PATH").unwrap());
    let boxes = of_class(&marks, "op");
    let computing: Vec<&&Mark> = boxes
        .iter()
        .filter(|m| m.attr("data-call") == "computation")
        .collect();
    assert!(!computing.is_empty());
    let step_width = of_class(&marks, "path-step")
        .iter()
        .map(|m| m.number("stroke-width"))
        .fold(0.0, f64::max);
    for m in &computing {
        // A strong colour, not computation's pale grey elsewhere, a lane tall.
        assert_eq!(m.attr("fill"), "#e6550d");
        assert!(m.number("height") >= 2.0 * step_width, "{:?}", m.attributes);
    }
    // The path's own row holds every segment once; the delay (10 ms of computation on rank
    // 5) is on it, as wide as its time.
    let row = of_class(&marks, "path-row");
    let drawn: u64 = row.iter().map(|m| m.number("data-ops") as u64).sum();
    assert_eq!(drawn, path.len() as u64);
    let plot = Plot::of(&marks);
    let delay = row
        .iter()
        .filter(|m| m.attr("data-call") == "computation" && m.attr("data-rank") == "5")
        .map(|m| m.number("width"))
        .fold(0.0, f64::max);
    let ten_ms = plot.x(plot.t0 as u64 + 10_000_000) - plot.x0;
    assert!(
        delay >= ten_ms * 0.99,
        "{delay} px for the delay, 10 ms is {ten_ms} px"
    );
    let note = marks
        .iter()
        .find(|m| m.attributes.get("class").is_some_and(|c| c == "note"))
        .unwrap();
    assert!(note.text.contains("computing"), "{}", note.text);
}

#[test]
fn a_timeline_of_calls_draws_the_computation_between_them() {
    let (_dir, mut session, _) = session_of(&GenConfig::new(Scenario::Stencil2d, 16, 6));
    let t = start_of(&mut session, "MPI_Isend", 3);
    let a = t.saturating_sub(200_000);
    let window = format!("BETWEEN TIME {a} ns AND {} ns", t + 400_000);
    let marks =
        parse_svg(&statement_svg(&mut session, &format!("SELECT OPERATIONS {window}")).unwrap());
    // The CPU bursts of the calls of the window, as SELECT CPU BURSTS selects them (those
    // of no time draw nothing).
    let r = session.run(&format!("SELECT CPU BURSTS {window}")).unwrap();
    let (rank, start, end) = (
        r.column("rank").unwrap(),
        r.column("start_ns").unwrap(),
        r.column("end_ns").unwrap(),
    );
    let bursts: BTreeSet<(u64, u64, u64)> = r
        .rows
        .iter()
        .map(|b| (int(&b[rank]), int(&b[start]), int(&b[end])))
        .filter(|&(_, s, e)| e > s)
        .collect();
    let computation = of_class(&marks, "computation");
    let drawn: u64 = computation
        .iter()
        .map(|m| m.number("data-bursts") as u64)
        .sum();
    assert!(!bursts.is_empty());
    assert_eq!(drawn, bursts.len() as u64);
    // None drawn where the ranks do not compute: each one drawn alone is a burst.
    for m in computation.iter().filter(|m| m.attr("data-bursts") == "1") {
        let b = (
            m.number("data-rank") as u64,
            m.number("data-start-ns") as u64,
            m.number("data-end-ns") as u64,
        );
        assert!(bursts.contains(&b), "{b:?} is no burst");
    }
    // Calls and computation together cover most of each lane: one iteration is not blank.
    let plot = Plot::of(&marks);
    let mut covered: BTreeMap<String, f64> = BTreeMap::new();
    for class in ["op", "computation"] {
        for m in of_class(&marks, class) {
            *covered.entry(m.attr("data-rank").to_string()).or_default() += m.number("width");
        }
    }
    for (rank, w) in covered {
        assert!(
            w >= 0.9 * (plot.x1 - plot.x0),
            "rank {rank}: {w} px covered"
        );
    }
    // A choice of calls draws no computation: its gaps are other calls.
    let marks = parse_svg(
        &statement_svg(
            &mut session,
            &format!("SELECT OPERATIONS {window} WHERE DURATION > 1000"),
        )
        .unwrap(),
    );
    assert!(of_class(&marks, "computation").is_empty());
}

#[test]
fn a_timeline_of_a_real_trace_draws_its_user_routines() {
    let Some(files) = common::real_traces() else {
        return;
    };
    let mut checked = 0;
    for file in files {
        let (_dir, db) = common::temp_db();
        if db.import(&file, Some("t")).is_err() {
            continue;
        }
        let trace = db.trace("t").unwrap();
        let calls = trace.summary().routine_calls;
        if calls == 0 || trace.summary().operations == 0 {
            continue;
        }
        // Routine calls drawn are those of ranks with calls drawn.
        let mut ranks = BTreeSet::new();
        for p in &trace.header().processes {
            if !trace.process_operations(p.rank).unwrap().is_empty() {
                ranks.insert(p.rank);
            }
        }
        let want = trace
            .routine_calls()
            .unwrap()
            .iter()
            .filter(|c| ranks.contains(&c.rank))
            .count() as u64;
        let mut session = Session::new(db);
        let marks = parse_svg(&statement_svg(&mut session, "SELECT OPERATIONS").unwrap());
        let drawn: u64 = of_class(&marks, "routine")
            .iter()
            .map(|m| m.number("data-calls") as u64)
            .sum();
        assert_eq!(drawn, want, "{}", file.display());
        checked += 1;
    }
    assert!(checked > 0, "a real trace with routines was drawn");
}

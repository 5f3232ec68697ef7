//! Every analysis parameter of the language changes what its analysis finds the way it
//! should, `EXPLAIN` shows each one's effective value, and results stored under one set of
//! parameters are never read back for another.

mod common;

use common::hand_made_db;
use mtfdb::analysis::{detection, structure};
use mtfdb::query::Session;
use mtfdb::results::Value;
use mtfdb::Database;

fn session(db: Database) -> Session {
    let mut s = Session::new(db);
    s.use_trace("t").unwrap();
    s
}

/// Each row's cells as text.
fn rows(s: &mut Session, statement: &str) -> Vec<Vec<String>> {
    s.run(statement)
        .unwrap_or_else(|e| panic!("{statement}: {e}"))
        .rows
        .iter()
        .map(|r| r.iter().map(Value::render).collect())
        .collect()
}

/// Rank 0 calls `step` four times, each sending twice to rank 1 and receiving once from it;
/// rank 1 does the mirror image.
fn steps_trace() -> String {
    let mut events = String::new();
    let mut t = 0u64;
    for _ in 0..4 {
        events.push_str(&format!("0 {t} enter step\n1 {t} enter step\n"));
        for (k, (a, b)) in [(0, 1), (0, 1), (1, 0)].into_iter().enumerate() {
            let s = t + 10 * (k as u64 + 1);
            events.push_str(&format!(
                "{a} {s} {} Send c=0 to={b} tag=0 b=8\n{b} {s} {} Recv c=0 from={a} rtag=0 rb=8\n",
                s + 5,
                s + 6
            ));
        }
        t += 100;
        events.push_str(&format!(
            "0 {} leave step\n1 {} leave step\n",
            t - 10,
            t - 10
        ));
    }
    events
}

/// Rank 0 sends to rank `r + 1` for each symbol `r` of `symbols`, at 10 ns intervals.
fn sends_trace(symbols: &[u32]) -> (u32, String) {
    let ranks = symbols.iter().max().unwrap() + 2;
    let mut events = String::new();
    for (i, r) in symbols.iter().enumerate() {
        let (t, to) = (10 * i as u64, r + 1);
        events.push_str(&format!(
            "0 {t} {} Send c=0 to={to} tag=0 b=8\n{to} {t} {} Recv c=0 from=0 rtag=0 rb=8\n",
            t + 5,
            t + 6
        ));
    }
    (ranks, events)
}

/// A ring of four ranks (1 KiB to the next) with 10 bytes from rank 0 to rank 2 besides:
/// 1% of the largest pair's traffic.
fn ring_with_a_whisper() -> String {
    let mut events = String::new();
    for r in 0..4u32 {
        events.push_str(&format!(
            "{r} 0 10 Send c=0 to={} tag=0 b=1024\n",
            (r + 1) % 4
        ));
    }
    for r in 0..4u32 {
        let from = (r + 3) % 4;
        events.push_str(&format!("{r} 20 30 Recv c=0 from={from} rtag=0 rb=1024\n"));
    }
    events.push_str("0 40 50 Send c=0 to=2 tag=1 b=10\n2 40 50 Recv c=0 from=0 rtag=1 rb=10\n");
    events
}

#[test]
fn tandem_removal_and_routine_delimiters_change_the_process_patterns() {
    let (_dir, db) = hand_made_db(2, "", &steps_trace());
    let mut s = session(db);
    // Tandem removal folds the two sends into one event counted twice.
    assert_eq!(
        rows(&mut s, "SELECT PATTERNS FOR PROCESS(0)"),
        vec![vec!["1", "(S1)×2 R1", "2", "4", "1, 4, 7, 10"]]
    );
    // Off, the repeated call stays.
    assert_eq!(
        rows(&mut s, "SELECT PATTERNS FOR PROCESS(0) WITH TANDEMS OFF"),
        vec![vec!["1", "S1 S1 R1", "3", "4", "1, 4, 7, 10"]]
    );
    // Without the step calls as delimiters the whole run is one tandem (S1 S1 R1)×4, folded
    // to one copy: nothing repeats any more.
    assert!(rows(&mut s, "SELECT PATTERNS FOR PROCESS(0) WITH DELIMITERS OFF").is_empty());
    assert_eq!(
        rows(
            &mut s,
            "SELECT PATTERNS FOR PROCESS(0) WITH DELIMITERS OFF, TANDEMS OFF"
        ),
        vec![vec!["1", "S1 S1 R1", "3", "4", "1, 4, 7, 10"]]
    );
    // The defaults' result is still the one stored under the defaults.
    assert_eq!(
        rows(
            &mut s,
            "SELECT PATTERNS FOR PROCESS(0) WITH TANDEMS ON, DELIMITERS ON"
        ),
        vec![vec!["1", "(S1)×2 R1", "2", "4", "1, 4, 7, 10"]]
    );
}

#[test]
fn thesis_arithmetic_changes_the_segmentation_tree() {
    let (_dir, db) = hand_made_db(2, "", &steps_trace());
    let mut s = session(db);
    assert_eq!(
        rows(&mut s, "SHOW PHASE TREE"),
        vec![
            vec!["phase tree: 1 segments, 1 leaves (mode correct, s0 0)"],
            vec!["S0 [1..4] len=4 D=0.000 pc=1 tau=0.500 s=-1.000 leaf"],
        ]
    );
    // The thesis's tables' D̂ = -1/(2l) for a single pattern, s = -1 - 1/(2·log2 l).
    assert_eq!(
        rows(&mut s, "SHOW PHASE TREE WITH THESIS ARITHMETIC"),
        vec![
            vec!["phase tree: 1 segments, 1 leaves (mode thesis-compat, s0 0)"],
            vec!["S0 [1..4] len=4 D=-0.125 pc=3 tau=0.500 s=-1.250 leaf"],
        ]
    );
}

#[test]
fn the_body_limit_bounds_the_loops_found_and_keys_the_stored_nests() {
    let (_dir, db) = hand_made_db(2, "", &steps_trace());
    let mut s = session(db);
    let unrolled = vec![
        vec!["step( S1 S1 R1 )"],
        vec!["step( S1 S1 R1 )"],
        vec!["step( S1 S1 R1 )"],
        vec!["step( S1 S1 R1 )"],
        vec!["-- 20 events, 68 bytes of model"],
    ];
    // The body `step( S1 S1 R1 )` has five terms: the entry, three events, the exit.
    assert_eq!(
        rows(&mut s, "SELECT LOOPS FOR PROCESS(0) WITH BODY LIMIT 4"),
        unrolled
    );
    let looped = vec![
        vec!["for i0 in 0..4 { step( S1 S1 R1 ) }"],
        vec!["-- 20 events, 36 bytes of model"],
        vec!["-- main loop: 4 iterations, one step call each"],
    ];
    assert_eq!(
        rows(&mut s, "SELECT LOOPS FOR PROCESS(0) WITH BODY LIMIT 5"),
        looped
    );
    // Computed after K = 4 was stored, the default (64) is not read from K = 4's result,
    // nor the other way round.
    assert_eq!(rows(&mut s, "SELECT LOOPS FOR PROCESS(0)"), looped);
    assert_eq!(
        rows(&mut s, "SELECT LOOPS FOR PROCESS(0) WITH BODY LIMIT 4"),
        unrolled
    );
    let trace = s.database().trace("t").unwrap();
    for (k, first) in [
        (4, "step( S1 S1 R1 )"),
        (64, "for i0 in 0..4 { step( S1 S1 R1 ) }"),
    ] {
        let key = structure::loops_key("loops", &structure::LoopParams { max_body: k });
        let stored = trace
            .result::<structure::LoopsResult>(&key)
            .unwrap()
            .unwrap();
        assert_eq!(stored.max_body, k);
        assert!(stored.processes[0].nest.starts_with(first), "K = {k}");
    }
    // The global model takes it too.
    let model = rows(&mut s, "SELECT GLOBAL MODEL WITH BODY LIMIT 4");
    assert!(model.iter().all(|r| !r[0].contains("for ")), "{model:?}");
    let model = rows(&mut s, "SELECT GLOBAL MODEL");
    assert!(model.iter().any(|r| r[0].contains("for ")), "{model:?}");
}

#[test]
fn the_ngram_size_changes_what_the_matcher_finds() {
    // Template 1 3 3 in 2 1 1 3 1 3 0 0 3, one edit: with q = 2 the shift to the first
    // shared 2-gram skips the window at 1, with q = 3 no 3-gram is shared and every window
    // is verified.
    let (ranks, events) = sends_trace(&[2, 1, 1, 3, 1, 3, 0, 0, 3]);
    let (_dir, db) = hand_made_db(ranks, "", &events);
    let mut s = session(db);
    let edits = |s: &mut Session, statement: &str| -> Vec<String> {
        rows(s, statement)
            .into_iter()
            .map(|r| r[2].clone())
            .collect()
    };
    let template = "MATCH PATTERN (P0: S2 S4 S4) WITH ERRORS 1";
    assert_eq!(edits(&mut s, template), vec!["1"]);
    assert_eq!(edits(&mut s, &format!("{template}, NGRAM 2")), vec!["1"]);
    assert_eq!(
        edits(&mut s, &format!("{template}, NGRAM 3")),
        vec!["1", "1"]
    );
    // Exact occurrences only by default: none.
    assert!(rows(&mut s, "MATCH PATTERN (P0: S2 S4 S4)").is_empty());
}

#[test]
fn the_topology_threshold_decides_which_traffic_counts() {
    let (_dir, db) = hand_made_db(4, "", &ring_with_a_whisper());
    let mut s = session(db);
    let first = |s: &mut Session, statement: &str| rows(s, statement)[0].clone();
    // 5% by default: the 10 bytes are dropped and the ring is found.
    let ring = first(&mut s, "SELECT TOPOLOGY");
    assert_eq!(ring[0], "ring of 4", "{ring:?}");
    assert_eq!(ring[2], "0.002435", "10 of 4,106 bytes dropped");
    assert_eq!(first(&mut s, "SELECT TOPOLOGY WITH THRESHOLD 0.05"), ring);
    // With no threshold they count, and a ring no longer fits.
    let kept = first(&mut s, "SELECT TOPOLOGY WITH THRESHOLD 0");
    assert_ne!(kept[0], "ring of 4", "{kept:?}");
    assert_eq!(kept[2], "0.0");
    // Each is stored under its own threshold.
    assert_eq!(first(&mut s, "SELECT TOPOLOGY"), ring);
}

#[test]
fn explain_shows_every_parameter_with_its_default() {
    let (_dir, db) = hand_made_db(2, "", &steps_trace());
    let mut s = session(db);
    let first_step = |s: &mut Session, statement: &str| rows(s, statement)[0][1].clone();
    for (statement, with) in [
        (
            "EXPLAIN SELECT PHASES",
            "with THRESHOLD 0 (default), THESIS ARITHMETIC OFF (default), DELIMITERS ON \
             (default), TANDEMS ON (default), ENVELOPE OFF (default)",
        ),
        (
            "EXPLAIN SHOW PHASE TREE WITH THESIS ARITHMETIC, THRESHOLD -0.5",
            "with THRESHOLD -0.5, THESIS ARITHMETIC ON, DELIMITERS ON (default), TANDEMS ON \
             (default), ENVELOPE OFF (default)",
        ),
        (
            "EXPLAIN SELECT COMMUNICATION PATTERNS WITH TANDEMS OFF",
            "with DELIMITERS ON (default), TANDEMS OFF, ENVELOPE OFF (default)",
        ),
        (
            "EXPLAIN SELECT PATTERNS FOR PROCESS(1) WITH ENVELOPE",
            "with DELIMITERS ON (default), TANDEMS ON (default), ENVELOPE ON",
        ),
        (
            "EXPLAIN MATCH PATTERN (P0: S1 R1)",
            "with ERRORS 0 (default), NGRAM 2 (default)",
        ),
        (
            "EXPLAIN SELECT LOOPS FOR PROCESS(0)",
            "with BODY LIMIT 64 (default)",
        ),
        (
            "EXPLAIN SELECT GLOBAL MODEL WITH BODY LIMIT 8",
            "with BODY LIMIT 8",
        ),
        ("EXPLAIN SELECT TOPOLOGY", "with THRESHOLD 0.05 (default)"),
        (
            "EXPLAIN SELECT LOGICAL TRACE",
            "with BODY LIMIT 64 (default), THRESHOLD 0.05 (default)",
        ),
    ] {
        assert_eq!(first_step(&mut s, statement), with, "{statement}");
    }
    // EXPLAIN computed nothing: the phases are still absent.
    let trace = s.database().trace("t").unwrap();
    let stored = detection::stored_phases(&trace, &detection::PhaseParams::default()).unwrap();
    assert!(stored.is_none());
}

#[test]
fn statements_print_back_the_parameters_they_set() {
    for (text, printed) in [
        (
            "select phases with thesis arithmetic",
            "SELECT PHASES WITH THESIS ARITHMETIC ON",
        ),
        ("SELECT PHASES WITH THRESHOLD 0", "SELECT PHASES"),
        (
            "SELECT COMMUNICATION PATTERNS WITH ENVELOPE, DELIMITERS OFF",
            "SELECT COMMUNICATION PATTERNS WITH DELIMITERS OFF, ENVELOPE ON",
        ),
        (
            "MATCH PATTERN (P0: S1) WITH NGRAM 3, ERRORS 2",
            "MATCH PATTERN (P0: S1) WITH ERRORS 2, NGRAM 3",
        ),
        (
            "SELECT LOGICAL TRACE FOR PROCESS(2) WITH THRESHOLD 0.1, BODY LIMIT 9",
            "SELECT LOGICAL TRACE FOR PROCESS(2) WITH BODY LIMIT 9, THRESHOLD 0.1",
        ),
        (
            "SELECT TOPOLOGY IN PHASE 2 WITH THRESHOLD 0.125",
            "SELECT TOPOLOGY IN PHASE 2 WITH THRESHOLD 0.125",
        ),
    ] {
        let statement = mtfdb::query::parse_statement(text).unwrap();
        assert_eq!(statement.to_string(), printed);
        assert_eq!(mtfdb::query::parse_statement(printed).unwrap(), statement);
    }
}

#[test]
fn a_wrong_parameter_says_which_ones_the_statement_takes() {
    for (text, message) in [
        (
            "SELECT LOOPS FOR PROCESS(0) WITH NGRAM 3",
            "expected a parameter of SELECT LOOPS: BODY LIMIT, found \"NGRAM\"",
        ),
        (
            "SELECT PHASES WITH ERRORS 1",
            "expected a parameter of SELECT PHASES: THRESHOLD, THESIS ARITHMETIC, DELIMITERS, \
             TANDEMS or ENVELOPE, found \"ERRORS\"",
        ),
        (
            "SELECT PATTERNS FOR PROCESS(0) WITH TANDEMS MAYBE",
            "expected ON or OFF after TANDEMS, found \"MAYBE\"",
        ),
        (
            "SELECT PATTERNS FOR PROCESS(0) WITH TANDEMS OFF, TANDEMS ON",
            "TANDEMS is given twice",
        ),
        (
            "MATCH PATTERN (P0: S1) WITH NGRAM 0",
            "NGRAM is an n-gram size from 1 to 64, found 0",
        ),
        (
            "SELECT GLOBAL MODEL WITH BODY LIMIT 5000",
            "BODY LIMIT is a loop body length from 1 to 4096, found 5000",
        ),
        (
            "SELECT TOPOLOGY WITH THRESHOLD 1.5",
            "a topology threshold is a share of the largest pair's traffic, from 0 to 1, \
             found 1.5",
        ),
        (
            "SELECT GLOBAL MODEL WITH BODY 5",
            "expected LIMIT after BODY, found \"5\"",
        ),
    ] {
        let e = mtfdb::query::parse_statement(text).unwrap_err();
        assert_eq!(e.message, message, "{text}");
    }
}

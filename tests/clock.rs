//! The tracer's clock (issue 40, goal 5): one MPI trace written with the official OTF2 library
//! (`tests/fixtures/otf2/make_clock_cases.py`) with every clock true, with a constant offset
//! per rank, with an offset and a drift per rank, and with a step in one rank's clock. The
//! script computes from its own records which pairs' messages are received before they were
//! sent; the unskewed trace's wait states are the oracle of every correction, through the
//! library and through the query language's `WITH CLOCK CORRECTION`.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::otf2_print;

use mtfdb::analysis::clock::{self, ClockCorrection, ClockMap};
use mtfdb::analysis::waits::{
    stored_wait_states, wait_states_with, waits_key, WaitKind, WaitStates,
};
use mtfdb::model::{Anomaly, OpKind, Operation, TraceHeader};
use mtfdb::query::Session;
use mtfdb::results::ResultSet;
use mtfdb::{Database, SourceFormat, Trace};

/// The fixtures, written into a fresh folder, or `None` when the otf2 Python package is not
/// installed (the test says it skipped).
fn fixtures() -> Option<(tempfile::TempDir, serde_json::Value)> {
    if !otf2_print::writer_available() {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    otf2_print::write_with(
        "tests/fixtures/otf2/make_clock_cases.py",
        &[dir.path().as_os_str()],
    );
    let expected =
        serde_json::from_slice(&std::fs::read(dir.path().join("expected.json")).unwrap()).unwrap();
    Some((dir, expected))
}

fn import(db: &Database, dir: &Path, variant: &str, correction: ClockCorrection) -> Trace {
    let name = format!("{variant}-{correction}");
    db.import_corrected(
        dir.join(variant),
        Some(&name),
        SourceFormat::Otf2,
        correction,
        &mut |_| {},
    )
    .unwrap();
    db.trace(&name).unwrap()
}

/// The trace's clock anomalies as (sender, receiver, messages, worst).
fn clock_anomalies(trace: &Trace) -> Vec<(u64, u64, u64, u64)> {
    trace
        .anomalies()
        .unwrap()
        .into_iter()
        .filter_map(|a| match a {
            Anomaly::ClockConditionViolated {
                sender,
                receiver,
                messages,
                worst,
                ..
            } => Some((sender.into(), receiver.into(), messages, worst)),
            _ => None,
        })
        .collect()
}

fn expected_pairs(expected: &serde_json::Value, variant: &str) -> Vec<(u64, u64, u64, u64)> {
    expected["violations"][variant]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let n = |k: &str| p[k].as_u64().unwrap();
            (n("sender"), n("receiver"), n("messages"), n("worst"))
        })
        .collect()
}

/// A wait's operation as (rank, index among the rank's operations): operation ids depend on
/// the order the import met the ranks' chunks, which the clocks change.
type Position = (u32, usize);

/// Each waiting operation's (kind, time, partner) by position: what must not depend on the
/// clocks.
fn by_op(trace: &Trace, waits: &WaitStates) -> Vec<(Position, WaitKind, u64, u32)> {
    let positions = positions(trace);
    let mut out: Vec<_> = waits
        .waits
        .iter()
        .map(|w| (positions[&w.op], w.kind, w.time, w.partner))
        .collect();
    out.sort_unstable();
    out
}

fn positions(trace: &Trace) -> std::collections::HashMap<u64, Position> {
    let mut out = std::collections::HashMap::new();
    for p in &trace.header().processes {
        for (i, (id, _)) in trace
            .process_operations(p.rank)
            .unwrap()
            .into_iter()
            .enumerate()
        {
            out.insert(id, (p.rank, i));
        }
    }
    out
}

/// Asserts that every operation waits as in `truth` (of the trace `truth_trace`) within
/// `tolerance` ns (a wait of at most `tolerance` may appear or vanish), of the same kind.
fn assert_waits_close(
    trace: &Trace,
    waits: &WaitStates,
    truth_trace: &Trace,
    truth: &WaitStates,
    tolerance: u64,
) {
    assert_eq!(waits.inconsistent, 0);
    let ours: std::collections::BTreeMap<Position, (WaitKind, u64)> = by_op(trace, waits)
        .into_iter()
        .map(|(p, k, t, _)| (p, (k, t)))
        .collect();
    let theirs: std::collections::BTreeMap<Position, (WaitKind, u64)> = by_op(truth_trace, truth)
        .into_iter()
        .map(|(p, k, t, _)| (p, (k, t)))
        .collect();
    for at in ours.keys().chain(theirs.keys()) {
        let (a, b) = (ours.get(at), theirs.get(at));
        let time = |w: Option<&(WaitKind, u64)>| w.map_or(0, |w| w.1);
        assert!(
            time(a).abs_diff(time(b)) <= tolerance,
            "operation {at:?}: {a:?} against {b:?}"
        );
        if let (Some(a), Some(b)) = (a, b) {
            if b.1 > tolerance {
                assert_eq!(a.0, b.0, "operation {at:?}");
            }
        }
    }
}

#[test]
fn messages_received_before_they_were_sent_are_reported_per_pair() {
    let Some((dir, expected)) = fixtures() else {
        return;
    };
    let db = Database::open(dir.path().join("db")).unwrap();
    for variant in ["unskewed", "offsets", "drift", "step"] {
        let trace = import(&db, dir.path(), variant, ClockCorrection::None);
        let want = expected_pairs(&expected, variant);
        assert_eq!(clock_anomalies(&trace), want, "{variant}");
        // The analysis finds the same pairs in the stored times.
        let found: Vec<_> = clock::check(&trace, None)
            .unwrap()
            .iter()
            .map(|p| (p.sender.into(), p.receiver.into(), p.messages, p.worst))
            .collect();
        assert_eq!(found, want, "{variant}");
        // The wait-state analysis counts them as messages it can tell no wait of.
        let inconsistent: u64 = want.iter().map(|p| p.2).sum();
        assert_eq!(
            stored_wait_states(&trace, false).unwrap().inconsistent,
            inconsistent
        );
    }
    // Four pairs in each skewed variant: the ranks whose clocks are ahead send to the ones
    // behind.
    assert_eq!(expected_pairs(&expected, "offsets").len(), 4);
    assert!(expected_pairs(&expected, "unskewed").is_empty());
    // Queryable as anomalies, at the sender: rank 3 sends to ranks 0 and 2.
    let mut session = mtfdb::query::Session::new(db);
    session.use_trace("offsets-none").unwrap();
    let rows = session.run("SELECT ANOMALIES FOR PROCESS(3)").unwrap();
    let table = rows.to_table();
    let clock_rows = table
        .lines()
        .filter(|l| l.contains("ClockConditionViolated"));
    assert_eq!(clock_rows.count(), 2, "{table}");
}

#[test]
fn offsets_from_the_messages_give_the_unskewed_wait_states_exactly() {
    let Some((dir, expected)) = fixtures() else {
        return;
    };
    let db = Database::open(dir.path().join("db")).unwrap();
    let unskewed = import(&db, dir.path(), "unskewed", ClockCorrection::None);
    let truth = by_op(&unskewed, &stored_wait_states(&unskewed, false).unwrap());
    let totals = stored_wait_states(&unskewed, false).unwrap().totals();
    assert!(totals[WaitKind::LateSender.index()] > 0);
    assert!(totals[WaitKind::LateReceiver.index()] > 0);
    assert!(totals[WaitKind::WaitAtNxN.index()] > 0);
    let skewed = import(&db, dir.path(), "offsets", ClockCorrection::None);
    // Each direction of each pair has messages at exactly the minimal latency, so the offsets
    // are exact: the wait states are the same to the ns.
    let map = ClockMap::estimate(&skewed, ClockCorrection::Offsets).unwrap();
    let offsets: Vec<i64> = map.ranks.iter().map(|c| c.offset as i64).collect();
    let written: Vec<i64> = expected["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_i64().unwrap())
        .collect();
    assert_eq!(offsets, written);
    assert_eq!(map.latency, expected["latency"].as_u64().unwrap());
    assert_eq!(map.unresolved, 0);
    assert_eq!(
        by_op(&skewed, &wait_states_with(&skewed, &map).unwrap()),
        truth
    );
    // The skewed trace as stored differs: the correction is what makes them equal.
    assert_ne!(
        by_op(&skewed, &stored_wait_states(&skewed, false).unwrap()),
        truth
    );
    // Corrected at import: the stored times give the same wait states, no pair is reported,
    // and the map applied is stored with the trace.
    let corrected = import(&db, dir.path(), "offsets", ClockCorrection::Offsets);
    assert_eq!(
        by_op(&corrected, &stored_wait_states(&corrected, false).unwrap()),
        truth
    );
    assert!(clock_anomalies(&corrected).is_empty());
    let applied: ClockMap = corrected.result(clock::APPLIED_KEY).unwrap().unwrap();
    assert_eq!(applied, map);
    // The scratch trace of the first pass is gone.
    assert!(!db.trace_names().unwrap().iter().any(|n| n.contains('~')));
}

/// The drift variant's times are written rounded to the ns and corrected and rounded again
/// (1 ns at each end of a wait); the drift is estimated from two anchors about 0.8 ms apart,
/// each exact to about 1 ns, so to about 2.5 ppm, which over the 1.7 ms run moves a time by up
/// to 4 ns, and a wait, a difference of two times of two ranks, by up to 2 x (1 + 4) = 10 ns.
const DRIFT_TOLERANCE_NS: u64 = 10;

#[test]
fn interpolation_gives_the_unskewed_wait_states_within_the_clocks_precision() {
    let Some((dir, expected)) = fixtures() else {
        return;
    };
    let db = Database::open(dir.path().join("db")).unwrap();
    let unskewed = import(&db, dir.path(), "unskewed", ClockCorrection::None);
    let truth = stored_wait_states(&unskewed, false).unwrap();
    let drifted = import(&db, dir.path(), "drift", ClockCorrection::None);
    let map = ClockMap::estimate(&drifted, ClockCorrection::Interpolate).unwrap();
    for (rank, clock) in map.ranks.iter().enumerate() {
        let ppm = expected["drift_ppm"][rank].as_f64().unwrap();
        assert!(
            (clock.drift * 1e6 - ppm).abs() < 2.5,
            "rank {rank}: {clock:?}"
        );
    }
    let waits = wait_states_with(&drifted, &map).unwrap();
    assert_waits_close(&drifted, &waits, &unskewed, &truth, DRIFT_TOLERANCE_NS);
    // Constant offsets leave the drift: some wait is off by more than the tolerance.
    let offsets = ClockMap::estimate(&drifted, ClockCorrection::Offsets).unwrap();
    let off: Vec<u64> = by_op(&drifted, &wait_states_with(&drifted, &offsets).unwrap())
        .into_iter()
        .map(|w| w.2)
        .collect();
    let exact: Vec<u64> = by_op(&unskewed, &truth).into_iter().map(|w| w.2).collect();
    assert!(
        off.len() != exact.len()
            || off
                .iter()
                .zip(&exact)
                .any(|(a, b)| a.abs_diff(*b) > DRIFT_TOLERANCE_NS)
    );
    // At import, and through the controlled logical clock, which has nothing left to move.
    for correction in [ClockCorrection::Interpolate, ClockCorrection::Clc] {
        let corrected = import(&db, dir.path(), "drift", correction);
        let waits = stored_wait_states(&corrected, false).unwrap();
        assert_waits_close(&corrected, &waits, &unskewed, &truth, DRIFT_TOLERANCE_NS);
        assert!(clock_anomalies(&corrected).is_empty(), "{correction}");
    }
}

#[test]
fn the_controlled_logical_clock_leaves_no_receive_before_its_send() {
    let Some((dir, _)) = fixtures() else {
        return;
    };
    let db = Database::open(dir.path().join("db")).unwrap();
    let stepped = import(&db, dir.path(), "step", ClockCorrection::None);
    // No line fits a clock that steps: interpolation leaves messages received before they
    // were sent.
    let line = ClockMap::estimate(&stepped, ClockCorrection::Interpolate).unwrap();
    assert!(line.unresolved > 0);
    assert!(!clock::check(&stepped, Some(&line)).unwrap().is_empty());
    let clc = ClockMap::estimate(&stepped, ClockCorrection::Clc).unwrap();
    assert!(clc.moved > 0);
    assert_eq!(clc.unresolved, 0);
    assert!(clock::check(&stepped, Some(&clc)).unwrap().is_empty());
    assert_eq!(wait_states_with(&stepped, &clc).unwrap().inconsistent, 0);
    // Every receive still ends at least the minimal latency after its send started.
    let corrected = import(&db, dir.path(), "step", ClockCorrection::Clc);
    assert!(clock_anomalies(&corrected).is_empty());
    assert_eq!(
        stored_wait_states(&corrected, false).unwrap().inconsistent,
        0
    );
    for m in corrected.messages().unwrap() {
        assert!(m.recv_time >= m.send_time + clc.latency, "{m:?}");
    }
    // Local order is kept: each rank's operations still start in order.
    for rank in 0..4 {
        let ops = corrected.process_operations(rank).unwrap();
        assert!(ops.windows(2).all(|w| w[0].1.start <= w[1].1.start));
        assert_eq!(ops.len(), stepped.process_operations(rank).unwrap().len());
    }
}

fn dumpi() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/traces/dumpi/testtrace")
}

/// The shared DUMPI trace (4 ranks, one clock per node): no message is received before it was
/// sent, and no pair of ranks exchanges messages both ways, so no offset can be estimated:
/// every clock is kept and the wait states are the same under every correction.
#[test]
fn the_dumpi_test_trace_keeps_its_clocks() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    db.import(dumpi(), Some("dumpi")).unwrap();
    let trace = db.trace("dumpi").unwrap();
    assert!(clock_anomalies(&trace).is_empty());
    assert!(clock::check(&trace, None).unwrap().is_empty());
    let truth = stored_wait_states(&trace, false).unwrap();
    assert!(truth.totals()[WaitKind::WaitAtBarrier.index()] > 0);
    for correction in [
        ClockCorrection::Offsets,
        ClockCorrection::Interpolate,
        ClockCorrection::Clc,
    ] {
        let map = ClockMap::estimate(&trace, correction).unwrap();
        assert_eq!(map.unrelated, vec![1, 2, 3], "{correction}");
        assert_eq!(map.moved, 0);
        assert_eq!(
            by_op(&trace, &wait_states_with(&trace, &map).unwrap()),
            by_op(&trace, &truth)
        );
    }
}

#[test]
fn the_clock_command_and_the_import_option() {
    let Some((dir, _)) = fixtures() else {
        return;
    };
    let db = dir.path().join("cli-db");
    let mtfdb = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_mtfdb"))
            .arg("--db")
            .arg(&db)
            .args(args)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let skewed = dir.path().join("offsets").display().to_string();
    let (ok, _, err) = mtfdb(&["import", &skewed, "--name", "raw"]);
    assert!(ok, "{err}");
    let (ok, out, err) = mtfdb(&["clock", "raw", "--correction", "offsets"]);
    assert!(ok, "{err}");
    assert!(out.contains("times as recorded"), "{out}");
    assert!(
        out.contains("messages received before they were sent: 96 in 4 pair(s)"),
        "{out}"
    );
    assert!(out.contains("     3     120000      0.000"), "{out}");
    let (ok, _, err) = mtfdb(&[
        "import",
        &skewed,
        "--name",
        "fixed",
        "--clock-correction",
        "offsets",
    ]);
    assert!(ok, "{err}");
    let (ok, out, _) = mtfdb(&["clock", "fixed", "--correction", "none"]);
    assert!(ok);
    assert!(
        out.contains("times corrected at import with offsets"),
        "{out}"
    );
    assert!(
        out.contains("messages received before they were sent: 0 in 0 pair(s)"),
        "{out}"
    );
    // A correction that does not exist is a usage error naming the ones that do.
    let (ok, _, err) = mtfdb(&[
        "import",
        &skewed,
        "--name",
        "x",
        "--clock-correction",
        "ntp",
    ]);
    assert!(!ok);
    assert!(
        err.contains("unknown clock correction \"ntp\": none, offsets, interpolate or clc"),
        "{err}"
    );
    // The name is checked before the source is read twice.
    let (ok, _, err) = mtfdb(&[
        "import",
        &skewed,
        "--name",
        "fixed",
        "--clock-correction",
        "clc",
    ]);
    assert!(!ok);
    assert!(err.contains("fixed"), "{err}");

    // The statement's option through `mtfdb query` (the shell runs the same parser): the
    // skewed trace with offsets gives the unskewed trace's wait states.
    let truth = dir.path().join("unskewed").display().to_string();
    let (ok, _, err) = mtfdb(&["import", &truth, "--name", "truth"]);
    assert!(ok, "{err}");
    let query = |trace: &str, statement: &str| {
        mtfdb(&["query", statement, "--trace", trace, "--format", "csv"])
    };
    let (ok, want, err) = query("truth", "SELECT WAIT STATES GROUP BY PROCESS");
    assert!(ok, "{err}");
    let (ok, got, err) = query(
        "raw",
        "SELECT WAIT STATES WITH CLOCK CORRECTION offsets GROUP BY PROCESS",
    );
    assert!(ok, "{err}");
    assert_eq!(got, want);
    assert_eq!(want.lines().count(), 5, "{want}");
    let (ok, stored, _) = query("raw", "SELECT WAIT STATES GROUP BY PROCESS");
    assert!(ok);
    assert_ne!(stored, want);
    let (ok, _, err) = query("raw", "SELECT WAIT STATES WITH CLOCK CORRECTION ntp");
    assert!(!ok);
    assert!(
        err.contains("unknown clock correction \"ntp\": none, offsets, interpolate or clc"),
        "{err}"
    );
    // The report's wait states on corrected clocks, their statements saying so.
    let html = dir.path().join("report.html");
    let (ok, _, err) = mtfdb(&[
        "report",
        "raw",
        "-o",
        html.to_str().unwrap(),
        "--clock-correction",
        "offsets",
    ]);
    assert!(ok, "{err}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("SELECT WAIT STATES WITH CLOCK CORRECTION offsets</code>"),
        "{page}"
    );
    assert!(page.contains(
        "SELECT OPERATIONS WHERE WAIT &gt; 0 WITH CLOCK CORRECTION offsets ORDER BY WAIT DESC \
         LIMIT 20</code>"
    ));
    assert!(page.contains("SELECT DELAY COSTS WITH CLOCK CORRECTION offsets</code>"));
}

/// `statement`'s result on trace `trace`.
fn run(session: &mut Session, trace: &str, statement: &str) -> ResultSet {
    session.use_trace(trace).unwrap();
    session
        .run(statement)
        .unwrap_or_else(|e| panic!("{statement}: {e}"))
}

/// The cells of `columns`, row by row, as text.
fn cells(r: &ResultSet, columns: &[&str]) -> Vec<Vec<String>> {
    let at: Vec<usize> = columns
        .iter()
        .map(|c| {
            r.column(c)
                .unwrap_or_else(|| panic!("no column {c} in {:?}", r.columns))
        })
        .collect();
    r.rows
        .iter()
        .map(|row| at.iter().map(|&i| row[i].render()).collect())
        .collect()
}

/// Each waiting operation's wait (ns) by position, from the rows of `SELECT OPERATIONS WHERE
/// WAIT > 0 …`.
fn waits_by_position(trace: &Trace, rows: &ResultSet) -> BTreeMap<Position, u64> {
    let positions = positions(trace);
    cells(rows, &["id", "wait_ns"])
        .into_iter()
        .map(|c| {
            (
                positions[&c[0].parse::<u64>().unwrap()],
                c[1].parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn wait_state_statements_take_the_offsets_and_give_the_unskewed_trace_s() {
    let Some((dir, _)) = fixtures() else {
        return;
    };
    let db = Database::open(dir.path().join("db")).unwrap();
    let unskewed = import(&db, dir.path(), "unskewed", ClockCorrection::None);
    let skewed = import(&db, dir.path(), "offsets", ClockCorrection::None);
    let (truth, raw) = ("unskewed-none", "offsets-none");
    let mut session = Session::new(db);
    let with = " WITH CLOCK CORRECTION offsets";
    // EXPLAIN names the map and the wait states it would compute first, and computes nothing.
    let explain = |session: &mut Session| {
        run(session, raw, &format!("EXPLAIN SELECT WAIT STATES{with}")).to_csv()
    };
    let plan = explain(&mut session);
    assert!(
        plan.contains("estimate the clock map (offsets) from the messages and synchronizing collectives (then stored)"),
        "{plan}"
    );
    assert!(
        plan.contains("wait state analysis on clocks corrected by offsets runs first"),
        "{plan}"
    );
    assert!(skewed
        .result::<WaitStates>(&waits_key(ClockCorrection::Offsets))
        .unwrap()
        .is_none());

    // WAIT STATES, by kind and by process: equal to the unskewed trace's, share included
    // (offsets move no duration).
    for statement in ["SELECT WAIT STATES", "SELECT WAIT STATES GROUP BY PROCESS"] {
        let want = run(&mut session, truth, statement);
        let got = run(&mut session, raw, &format!("{statement}{with}"));
        assert_eq!(got.to_csv(), want.to_csv(), "{statement}");
        // Without the option: the stored times, as the library computes them.
        let stored = run(&mut session, raw, statement);
        assert_ne!(stored.to_csv(), want.to_csv(), "{statement}");
    }
    let plan = explain(&mut session);
    assert!(
        plan.contains("read the stored clock map (offsets)"),
        "{plan}"
    );
    assert!(
        plan.contains("read the stored wait states on clocks corrected by offsets"),
        "{plan}"
    );
    let stored = run(&mut session, raw, "SELECT WAIT STATES GROUP BY PROCESS");
    let per_rank: Vec<Vec<String>> = stored_wait_states(&skewed, false)
        .unwrap()
        .per_rank(4)
        .iter()
        .map(|row| row.iter().map(u64::to_string).collect())
        .collect();
    let kinds: Vec<String> = WaitKind::ALL
        .iter()
        .map(|k| format!("{}_ns", k.name().replace(' ', "_").to_lowercase()))
        .collect();
    let kinds: Vec<&str> = kinds.iter().map(String::as_str).collect();
    assert_eq!(cells(&stored, &kinds), per_rank);

    // LATE SENDERS: the same messages waited for, as long (ids depend on the import's order,
    // which the clocks change: compared by what the message is).
    let key = ["sender", "receiver", "tag", "size", "operation", "wait_ns"];
    let late = |session: &mut Session, trace: &str, statement: &str| {
        let mut rows = cells(&run(session, trace, statement), &key);
        rows.sort();
        rows
    };
    let want = late(&mut session, truth, "SELECT LATE SENDERS");
    assert!(want.len() > 20, "{}", want.len());
    assert_eq!(
        late(&mut session, raw, &format!("SELECT LATE SENDERS{with}")),
        want
    );
    assert_ne!(late(&mut session, raw, "SELECT LATE SENDERS"), want);

    // WAIT in WHERE: the same operations wait as long.
    let want = run(&mut session, truth, "SELECT OPERATIONS WHERE WAIT > 0");
    let got = run(
        &mut session,
        raw,
        &format!("SELECT OPERATIONS WHERE WAIT > 0{with}"),
    );
    assert_eq!(
        waits_by_position(&skewed, &got),
        waits_by_position(&unskewed, &want)
    );
    let statement = "SELECT COUNT(*), SUM(DURATION) FROM OPERATIONS WHERE WAIT > 1 us";
    assert_eq!(
        run(
            &mut session,
            raw,
            &format!("{statement}{with} GROUP BY PROCESS")
        )
        .to_csv(),
        run(
            &mut session,
            truth,
            &format!("{statement} GROUP BY PROCESS")
        )
        .to_csv()
    );

    // The critical path follows the corrected waits: the same path, each time moved by the
    // map's shift (rank 0's clock plus it).
    let summary = "SELECT CRITICAL PATH SUMMARY";
    let want = run(&mut session, truth, summary);
    assert_eq!(
        run(&mut session, raw, &format!("{summary}{with}")).to_csv(),
        want.to_csv()
    );
    assert_ne!(run(&mut session, raw, summary).to_csv(), want.to_csv());
    let segments = ["rank", "duration_ns", "activity"];
    let want = run(&mut session, truth, "SELECT CRITICAL PATH");
    let got = run(&mut session, raw, &format!("SELECT CRITICAL PATH{with}"));
    assert_eq!(cells(&got, &segments), cells(&want, &segments));
    let shift = ClockMap::estimate(&skewed, ClockCorrection::Offsets)
        .unwrap()
        .shift;
    let starts = |r: &ResultSet| -> Vec<u64> {
        cells(r, &["start_ns"])
            .iter()
            .map(|c| c[0].parse().unwrap())
            .collect()
    };
    let moved: Vec<u64> = starts(&want).iter().map(|t| t + shift).collect();
    assert_eq!(starts(&got), moved);

    // A name no correction has is refused with the names that exist, where it stands.
    session.use_trace(raw).unwrap();
    let err = session
        .run("SELECT WAIT STATES WITH CLOCK CORRECTION ntp")
        .unwrap_err();
    assert!(matches!(err, mtfdb::Error::Syntax(_)), "{err:?}");
    assert!(
        err.to_string().contains(
            "at column 42: unknown clock correction \"ntp\": none, offsets, interpolate or clc"
        ),
        "{err}"
    );
    // ... and so is a correction on a statement that reads no wait state.
    let err = session
        .run("SELECT COUNT(*) FROM MESSAGES WITH CLOCK CORRECTION offsets")
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("WITH CLOCK CORRECTION sets the clocks wait states are computed on"),
        "{err}"
    );
}

#[test]
fn wait_state_statements_interpolate_within_the_clocks_precision() {
    let Some((dir, _)) = fixtures() else {
        return;
    };
    let db = Database::open(dir.path().join("db")).unwrap();
    let unskewed = import(&db, dir.path(), "unskewed", ClockCorrection::None);
    let drifted = import(&db, dir.path(), "drift", ClockCorrection::None);
    let mut session = Session::new(db);
    let want = waits_by_position(
        &unskewed,
        &run(
            &mut session,
            "unskewed-none",
            "SELECT OPERATIONS WHERE WAIT > 0",
        ),
    );
    let got = waits_by_position(
        &drifted,
        &run(
            &mut session,
            "drift-none",
            "SELECT OPERATIONS WHERE WAIT > 0 WITH CLOCK CORRECTION interpolate",
        ),
    );
    let off = |got: &BTreeMap<Position, u64>| -> u64 {
        want.keys()
            .chain(got.keys())
            .map(|at| {
                let (a, b) = (got.get(at).copied(), want.get(at).copied());
                a.unwrap_or(0).abs_diff(b.unwrap_or(0))
            })
            .max()
            .unwrap_or(0)
    };
    assert!(off(&got) <= DRIFT_TOLERANCE_NS, "{}", off(&got));
    // The statement's waits are the library's under the same map.
    let map = ClockMap::estimate(&drifted, ClockCorrection::Interpolate).unwrap();
    let library: BTreeMap<Position, u64> =
        by_op(&drifted, &wait_states_with(&drifted, &map).unwrap())
            .into_iter()
            .map(|(at, _, t, _)| (at, t))
            .collect();
    assert_eq!(got, library);
    // Offsets alone leave the drift, and the stored times the whole skew.
    for statement in [
        "SELECT OPERATIONS WHERE WAIT > 0 WITH CLOCK CORRECTION offsets",
        "SELECT OPERATIONS WHERE WAIT > 0",
    ] {
        let other = waits_by_position(&drifted, &run(&mut session, "drift-none", statement));
        assert!(off(&other) > DRIFT_TOLERANCE_NS, "{statement}");
    }
}

#[test]
fn wait_state_statements_on_the_controlled_logical_clock_see_no_receive_before_its_send() {
    let Some((dir, _)) = fixtures() else {
        return;
    };
    let db = Database::open(dir.path().join("db")).unwrap();
    let stepped = import(&db, dir.path(), "step", ClockCorrection::None);
    let mut session = Session::new(db);
    let statement = "SELECT WAIT STATES GROUP BY PROCESS";
    let got = run(
        &mut session,
        "step-none",
        &format!("{statement} WITH CLOCK CORRECTION clc"),
    );
    // The statement stored the wait states it read, apart from the stored times' ones: on the
    // controlled logical clock no receive ends before its send began.
    let clc: WaitStates = stepped
        .result(&waits_key(ClockCorrection::Clc))
        .unwrap()
        .expect("stored by the statement");
    assert_eq!(clc.inconsistent, 0);
    let map = ClockMap::estimate(&stepped, ClockCorrection::Clc).unwrap();
    assert!(map.moved > 0);
    assert_eq!(clc, wait_states_with(&stepped, &map).unwrap());
    let per_rank =
        |w: &WaitStates| -> Vec<u64> { w.per_rank(4).iter().map(|r| r.iter().sum()).collect() };
    let totals: Vec<u64> = cells(&got, &["total_ns"])
        .iter()
        .map(|c| c[0].parse().unwrap())
        .collect();
    assert_eq!(totals, per_rank(&clc));
    // Without the option, the stored times: receives before their sends, counted apart.
    let stored = stored_wait_states(&stepped, false).unwrap();
    assert!(stored.inconsistent > 0);
    let totals: Vec<u64> = cells(&run(&mut session, "step-none", statement), &["total_ns"])
        .iter()
        .map(|c| c[0].parse().unwrap())
        .collect();
    assert_eq!(totals, per_rank(&stored));
    assert_ne!(per_rank(&stored), per_rank(&clc));
}

/// The Paraver cut fixture: rank 0's Isend at 20 ns matches rank 1's Irecv over [10, 12],
/// whose message arrived after the trace's last Wait or Test (no request link). Its stored
/// receive time is the Irecv's end, before the send: that proves nothing of the clocks, and
/// neither the import nor `mtfdb clock` reports it.
#[test]
fn a_receive_no_wait_completed_is_not_judged_by_the_clock_check() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let cut = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/paraver/cut.prv");
    {
        let db = Database::open(&path).unwrap();
        db.import(&cut, Some("cut")).unwrap();
        let trace = db.trace("cut").unwrap();
        let messages = trace.messages().unwrap();
        assert_eq!(messages.len(), 1);
        let m = messages[0];
        assert_eq!(
            (m.sender, m.receiver, m.send_time, m.recv_time),
            (0, 1, 20, 12)
        );
        assert!(trace.request_links().unwrap().is_empty());
        assert!(clock_anomalies(&trace).is_empty());
        assert!(clock::check(&trace, None).unwrap().is_empty());
        // Nor does a correction take it for a clock out of step.
        let map = ClockMap::estimate(&trace, ClockCorrection::Clc).unwrap();
        assert_eq!((map.moved, map.unresolved), (0, 0));
    }
    let out = Command::new(env!("CARGO_BIN_EXE_mtfdb"))
        .arg("--db")
        .arg(&path)
        .args(["clock", "cut", "--correction", "none"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("messages received before they were sent: 0 in 0 pair(s)"),
        "{text}"
    );
    assert!(
        text.contains(
            "not judged, as at import: 1 message(s) whose MPI_Irecv no Wait or Test completed"
        ),
        "{text}"
    );
}

/// A trace built through the library: rank 1's clock is 700 ns ahead, one message each way at
/// 50 ns of latency, and an `MPI_Irecv` of rank 1 without a request (no Wait can complete it)
/// whose send starts after the Irecv returned. Taken as evidence, that message would say rank
/// 1's clock is 230 ns ahead; it is left out, and the offset is exact.
#[test]
fn uncompleted_receives_do_not_move_the_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    let skew = [0u64, 700];
    db.import_foreign_events("irecv", |sink| {
        use mtfdb::ingest::EventSink;
        sink.header(&TraceHeader::world(2, "C1"))?;
        // (rank, kind, true start, true end, peer, tag)
        let calls = [
            (0, OpKind::Send, 1_000, 1_060, 1, 1),
            (0, OpKind::Recv, 1_900, 2_050, 1, 2),
            (0, OpKind::Send, 3_000, 3_010, 1, 3),
            (1, OpKind::Recv, 900, 1_050, 0, 1),
            (1, OpKind::Send, 2_000, 2_060, 0, 2),
            (1, OpKind::Irecv, 2_100, 2_110, 0, 3),
        ];
        for (rank, kind, start, end, peer, tag) in calls {
            let at = |t: u64| t + skew[rank as usize];
            let mut op = Operation::new(rank, kind, at(start), at(end));
            op.comm = Some(0);
            if kind == OpKind::Send {
                (op.dest, op.send_tag, op.send_bytes) = (Some(peer), Some(tag), 8);
            } else {
                (op.source, op.recv_tag, op.recv_bytes) = (Some(peer), Some(tag), 8);
            }
            sink.operation(&op)?;
        }
        sink.finish()
    })
    .unwrap();
    let trace = db.trace("irecv").unwrap();
    let m: Vec<_> = trace
        .messages()
        .unwrap()
        .iter()
        .map(|m| (m.sender, m.receiver, m.send_time, m.recv_time))
        .collect();
    assert_eq!(
        m,
        vec![
            (0, 1, 1_000, 1_750),
            (1, 0, 2_700, 2_050),
            (0, 1, 3_000, 2_810)
        ]
    );
    // Rank 1, ahead, sends to rank 0: received 650 ns before it was sent. The message to the
    // uncompleted Irecv, received "190 ns before", is not judged, at import or after.
    assert_eq!(clock_anomalies(&trace), vec![(1, 0, 1, 650)]);
    let found: Vec<_> = clock::check(&trace, None)
        .unwrap()
        .iter()
        .map(|p| (p.sender.into(), p.receiver.into(), p.messages, p.worst))
        .collect();
    assert_eq!(found, clock_anomalies(&trace));
    let map = ClockMap::estimate(&trace, ClockCorrection::Offsets).unwrap();
    assert_eq!(map.ranks[1].offset, 700.0);
    assert_eq!(map.latency, 50);
    assert_eq!(map.unresolved, 0);
}

/// A trace whose ranks exchange no message but meet at barriers and allreduces (as EZTrace's
/// traces do, whose non-blocking receives carry no envelope): the collectives link the ranks'
/// clocks. Every member enters an instance at the same true time and leaves 400 ns later, so
/// the offsets are exact; a pair that messages link keeps the messages' estimate.
#[test]
fn synchronizing_collectives_link_the_clocks_messages_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    let skew = [0u64, 38_000_000, 5_000, 900_000];
    db.import_foreign_events("coll", |sink| {
        use mtfdb::ingest::EventSink;
        sink.header(&TraceHeader::world(4, "C1"))?;
        for rank in 0..4u32 {
            let at = |t: u64| t + skew[rank as usize];
            for i in 0..6u64 {
                // Each rank works a different time before the instance (the last to enter
                // is a different rank each time), and all leave together.
                let enter = 10_000 * (i + 1) + 500 * ((rank as u64 + i) % 4);
                let leave = 10_000 * (i + 1) + 2_000;
                let kind = if i % 2 == 0 {
                    OpKind::Barrier
                } else {
                    OpKind::Allreduce
                };
                let mut op = Operation::new(rank, kind, at(enter), at(leave));
                op.comm = Some(0);
                if kind == OpKind::Allreduce {
                    (op.send_bytes, op.recv_bytes) = (8, 8);
                }
                sink.operation(&op)?;
            }
        }
        sink.finish()
    })
    .unwrap();
    let trace = db.trace("coll").unwrap();
    assert_eq!(trace.summary().messages, 0);
    assert!(
        trace
            .summary()
            .anomaly_count("barrier members do not overlap")
            > 0,
        "the skew shows"
    );
    let map = ClockMap::estimate(&trace, ClockCorrection::Offsets).unwrap();
    let offsets: Vec<f64> = map.ranks.iter().map(|c| c.offset).collect();
    assert_eq!(offsets, vec![0.0, 38_000_000.0, 5_000.0, 900_000.0]);
    assert!(map.unrelated.is_empty());
    // Messages give no latency here: the collectives' waits are none.
    assert_eq!(map.latency, 0);
    // Imported with the correction, every barrier's members overlap.
    let corrected = import_collectives_corrected(&db, &trace);
    assert_eq!(
        corrected
            .summary()
            .anomaly_count("barrier members do not overlap"),
        0
    );
}

/// `trace` exported to MTF text and imported again with the offsets correction.
fn import_collectives_corrected(db: &Database, trace: &Trace) -> Trace {
    let file = tempfile::NamedTempFile::new().unwrap();
    mtfdb::export::export_file(trace, mtfdb::export::Format::MtfText, file.path()).unwrap();
    db.import_corrected(
        file.path(),
        Some("coll-offsets"),
        SourceFormat::MtfText,
        ClockCorrection::Offsets,
        &mut |_| {},
    )
    .unwrap();
    db.trace("coll-offsets").unwrap()
}

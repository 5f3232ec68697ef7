//! The tracer's clock (issue 40, goal 5): one MPI trace written with the official OTF2 library
//! (`tests/fixtures/otf2/make_clock_cases.py`) with every clock true, with a constant offset
//! per rank, with an offset and a drift per rank, and with a step in one rank's clock. The
//! script computes from its own records which pairs' messages are received before they were
//! sent; the unskewed trace's wait states are the oracle of every correction.

use std::path::{Path, PathBuf};
use std::process::Command;

use mtfdb::analysis::clock::{self, ClockCorrection, ClockMap};
use mtfdb::analysis::waits::{stored_wait_states, wait_states_with, WaitKind, WaitStates};
use mtfdb::model::Anomaly;
use mtfdb::{Database, SourceFormat, Trace};

/// The fixtures, written into a fresh folder, or `None` when the otf2 Python package is not
/// installed (the test says it skipped).
fn fixtures() -> Option<(tempfile::TempDir, serde_json::Value)> {
    let have_writer = Command::new("python3")
        .args(["-c", "import _otf2"])
        .status()
        .is_ok_and(|s| s.success());
    if !have_writer {
        eprintln!("skipped: the otf2 Python package (pip install otf2) is not installed");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/otf2/make_clock_cases.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
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
}

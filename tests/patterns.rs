//! Pattern and phase detection end to end: on generated traces the communication patterns and
//! their occurrences are the structures the generator emitted; a trace made of three distinct
//! program phases is cut into exactly those phases, each named by its routine; the query
//! statements read stored results back and filter by pattern and phase.

mod common;

use common::{import_generated, temp_db};

use mtfdb::analysis::detection::{self, PatternParams, PhaseParams};
use mtfdb::gen::{GenConfig, Scenario};
use mtfdb::ingest::EventSink;
use mtfdb::model::{OpKind, Operation, Rank, RoutineEvent, StrId, TraceHeader};
use mtfdb::query::Session;
use mtfdb::results::Value;
use mtfdb::Database;

/// Communication patterns found, as sorted (occurrences, processes) pairs.
fn found_patterns(db: &Database, name: &str) -> Vec<(u64, u32)> {
    let trace = db.trace(name).unwrap();
    let found = detection::patterns(&trace, &PatternParams::default(), false).unwrap();
    let mut out: Vec<(u64, u32)> = found
        .patterns
        .iter()
        .map(|p| (p.occurrences.len() as u64, p.processes.len() as u32))
        .collect();
    out.sort_unstable();
    out
}

#[test]
fn generated_traces_give_the_communication_patterns_the_generator_emitted() {
    for (scenario, ranks, iterations) in [
        (Scenario::Stencil2d, 16, 24),
        (Scenario::Sweep, 16, 6),
        (Scenario::Lu, 16, 7),
        (Scenario::Bt, 16, 9),
        (Scenario::Sweep, 6, 4),
        (Scenario::Bt, 9, 5),
    ] {
        let (_dir, db) = temp_db();
        let config = GenConfig::new(scenario, ranks, iterations);
        let truth = import_generated(&db, &config, "t");
        // A structure is a pattern when every process has at least two events in it and it
        // recurs (the thesis's minimum length 2, frequency above 1).
        let mut expected: Vec<(u64, u32)> = truth
            .patterns
            .values()
            .filter(|p| p.min_events >= 2 && p.occurrences >= 2)
            .map(|p| (p.occurrences, p.processes))
            .collect();
        expected.sort_unstable();
        assert!(
            !expected.is_empty(),
            "{scenario:?}: the generator emitted no pattern"
        );
        assert_eq!(
            found_patterns(&db, "t"),
            expected,
            "{scenario:?} on {ranks} ranks: {:?}",
            truth.patterns
        );

        // The phases line up with the program's routines: every pattern is in the solve loop
        // (init has MPI_Init only, setup one Bcast, finalize MPI_Finalize), so every phase lies
        // within the solve calls and is named by a routine of the loop; together the phases
        // take every instance once, in order.
        let trace = db.trace("t").unwrap();
        let phases = detection::phases(&trace, &PhaseParams::default(), false).unwrap();
        let solve_id = (0..).find(|&i| trace.string(i) == Some("solve")).unwrap();
        let solves: Vec<_> = trace
            .routine_calls()
            .unwrap()
            .into_iter()
            .filter(|c| c.routine == solve_id)
            .collect();
        let first_solve = solves.iter().map(|c| c.start).min().unwrap();
        let last_solve = solves.iter().map(|c| c.end).max().unwrap();
        let mut next = 1;
        for p in &phases.phases {
            assert_eq!(p.first, next, "{scenario:?}: phases in order");
            next = p.last + 1;
            assert!(
                p.start >= first_solve && p.end <= last_solve,
                "{scenario:?}: phase {} ({}..{}) outside solve ({first_solve}..{last_solve})",
                p.number,
                p.start,
                p.end
            );
            let routine = p.routine.split(' ').next().unwrap_or("");
            assert!(
                !["main", "init", "setup", "finalize", ""].contains(&routine),
                "{scenario:?}: phase {} is named {:?}",
                p.number,
                p.routine
            );
        }
        // Together the phases hold every point-to-point call of the loop (all of them are in it)
        // and none of MPI_Init, the setup broadcast or MPI_Finalize.
        let mut in_phases = roaring::RoaringTreemap::new();
        for p in &phases.phases {
            in_phases |= p.op_ids();
        }
        let mut by_kind: std::collections::BTreeMap<OpKind, u64> = Default::default();
        for (_, op) in trace.operations(&in_phases).unwrap() {
            *by_kind.entry(op.kind).or_default() += 1;
        }
        for kind in [OpKind::Isend, OpKind::Irecv, OpKind::Send, OpKind::Recv] {
            assert_eq!(
                by_kind.get(&kind).copied().unwrap_or(0),
                truth.count(kind),
                "{scenario:?}: {kind:?} in the phases"
            );
        }
        for kind in [OpKind::Init, OpKind::Finalize] {
            assert!(
                !by_kind.contains_key(&kind),
                "{scenario:?}: {kind:?} in a phase"
            );
        }
        let setup_bcasts = u64::from(ranks);
        assert_eq!(
            by_kind.get(&OpKind::Bcast).copied().unwrap_or(0),
            truth.count(OpKind::Bcast) - setup_bcasts,
            "{scenario:?}: the loop's broadcasts only"
        );
        let instances: u64 = truth
            .patterns
            .values()
            .filter(|p| p.min_events >= 2 && p.occurrences >= 2)
            .map(|p| p.occurrences)
            .sum();
        assert_eq!(
            u64::from(next - 1),
            instances,
            "{scenario:?}: every instance in a phase"
        );
    }
}

/// A trace of three program phases on 4 ranks, each phase 30 calls of its routine: `ring`
/// (each rank sends to the next and receives from the previous), `pairs` (0↔1 and 2↔3) and
/// `reduce` (Allreduce then Bcast).
fn three_phases(sink: &mut dyn EventSink) -> mtfdb::Result<()> {
    three_phases_of(sink, 30)
}

/// [`three_phases`] with `calls` calls of each routine: every call is 2 operations per rank.
fn three_phases_of(sink: &mut dyn EventSink, calls: u32) -> mtfdb::Result<()> {
    let n: Rank = 4;
    sink.header(&TraceHeader::world(n, "world"))?;
    let names = ["ring", "pairs", "reduce"];
    for (i, name) in names.iter().enumerate() {
        sink.string(i as StrId, name)?;
    }
    let mut t = 0u64;
    let mut tag = 0i32;
    let p2p = |sink: &mut dyn EventSink, from: Rank, to: Rank, tag: i32, t: u64| {
        let mut send = Operation::new(from, OpKind::Send, t, t + 5);
        (send.comm, send.dest, send.send_tag, send.send_bytes) = (Some(0), Some(to), Some(tag), 64);
        sink.operation(&send)?;
        let mut recv = Operation::new(to, OpKind::Recv, t + 1, t + 6);
        (recv.comm, recv.source, recv.recv_tag, recv.recv_bytes) =
            (Some(0), Some(from), Some(tag), 64);
        sink.operation(&recv)
    };
    for (phase, _) in names.iter().enumerate() {
        for _ in 0..calls {
            for rank in 0..n {
                sink.routine(&RoutineEvent {
                    rank,
                    thread: 0,
                    time: t,
                    routine: phase as StrId,
                    enter: true,
                })?;
            }
            t += 10;
            match phase {
                0 => {
                    // Sends first, in rank order; each receive follows its send.
                    for r in 0..n {
                        p2p(sink, r, (r + 1) % n, tag, t)?;
                        t += 10;
                    }
                }
                1 => {
                    for (a, b) in [(0, 1), (2, 3)] {
                        p2p(sink, a, b, tag, t)?;
                        t += 10;
                        p2p(sink, b, a, tag, t)?;
                        t += 10;
                    }
                }
                _ => {
                    for kind in [OpKind::Allreduce, OpKind::Bcast] {
                        for r in 0..n {
                            let mut op = Operation::new(r, kind, t, t + 5);
                            op.comm = Some(0);
                            op.send_bytes = 8;
                            op.recv_bytes = 8;
                            if kind == OpKind::Bcast {
                                op.root = Some(0);
                            }
                            sink.operation(&op)?;
                        }
                        t += 10;
                    }
                }
            }
            tag += 1;
            for rank in 0..n {
                sink.routine(&RoutineEvent {
                    rank,
                    thread: 0,
                    time: t,
                    routine: phase as StrId,
                    enter: false,
                })?;
            }
            t += 10;
        }
    }
    sink.finish()
}

#[test]
fn three_program_phases_are_cut_at_their_boundaries_and_named_by_their_routines() {
    let (_dir, db) = temp_db();
    db.import_events("phased", |sink| three_phases(sink))
        .unwrap();
    let trace = db.trace("phased").unwrap();
    let patterns = detection::patterns(&trace, &PatternParams::default(), false).unwrap();
    let counts: Vec<u64> = patterns
        .patterns
        .iter()
        .map(|p| p.occurrences.len() as u64)
        .collect();
    // The two pair exchanges share no message: two patterns, as the thesis finds for BT's
    // disconnected X-Solve patterns.
    assert_eq!(counts, vec![30, 30, 30, 30]);
    let shapes: Vec<&str> = patterns.patterns.iter().map(|p| p.shape.as_str()).collect();
    assert_eq!(
        shapes,
        vec![
            "P0: S1 R3 | P1: R0 S2 | P2: R1 S3 | P3: R2 S0",
            "P0: S1 R1 | P1: R0 S0",
            "P2: S3 R3 | P3: R2 S2",
            "P0: MPI_Allreduce MPI_Bcast(0) | P1: MPI_Allreduce MPI_Bcast(0) | P2: MPI_Allreduce MPI_Bcast(0) | P3: MPI_Allreduce MPI_Bcast(0)",
        ]
    );
    let phases = detection::phases(&trace, &PhaseParams::default(), false).unwrap();
    let got: Vec<(u32, u32, Vec<u32>, &str)> = phases
        .phases
        .iter()
        .map(|p| (p.first, p.last, p.patterns.clone(), p.routine.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            (1, 30, vec![1], "ring (30 calls)"),
            (31, 90, vec![2, 3], "pairs (30 calls)"),
            (91, 120, vec![4], "reduce (30 calls)"),
        ]
    );
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => i64::try_from(*i).expect("a test value fits 64 bits"),
        other => panic!("not an integer: {other:?}"),
    }
}

/// Phases of many operations per rank: each rank's operations span several stored chunks,
/// some wholly inside one phase, some across a boundary; every phase holds exactly the
/// operations and messages of its routine's calls.
#[test]
fn phases_spanning_many_chunks_per_rank_hold_exactly_their_calls() {
    let calls = 40_000u32;
    let (_dir, db) = temp_db();
    db.import_events("phased", |sink| three_phases_of(sink, calls))
        .unwrap();
    let trace = db.trace("phased").unwrap();
    // 240,000 operations per rank: several chunks each.
    assert!(
        trace.op_chunks().len() >= 4 * 3,
        "{}",
        trace.op_chunks().len()
    );
    let mut s = Session::new(db);
    s.run("USE TRACE phased").unwrap();
    assert_eq!(s.run("SELECT PHASES").unwrap().len(), 3);
    let count = |s: &mut Session, q: &str| int(&s.run(q).unwrap().rows[0][0]);
    // Each call: 8 operations over the 4 ranks, in every phase.
    for phase in 1..=3 {
        assert_eq!(
            count(
                &mut s,
                &format!("SELECT COUNT(*) FROM OPERATIONS IN PHASE {phase}")
            ),
            8 * i64::from(calls),
            "phase {phase}"
        );
    }
    // Ring and pairs: 4 messages per call; the reduce phase has none.
    let messages: Vec<i64> = (1..=3)
        .map(|k| {
            count(
                &mut s,
                &format!("SELECT COUNT(*) FROM MESSAGES IN PHASE {k}"),
            )
        })
        .collect();
    assert_eq!(
        messages,
        vec![4 * i64::from(calls), 4 * i64::from(calls), 0]
    );
    let r = s
        .run("SELECT STATISTICS FOR ALL PROCESSES IN PHASE 2")
        .unwrap();
    let total = r.rows.last().unwrap().clone();
    let col = |name: &str| r.columns.iter().position(|c| c == name).unwrap();
    assert_eq!(int(&total[col("MPI_Send")]), 4 * i64::from(calls));
    assert_eq!(int(&total[col("MPI_Recv")]), 4 * i64::from(calls));
}

#[test]
fn the_statements_read_stored_results_and_filter_by_pattern_and_phase() {
    let (dir, db) = temp_db();
    db.import_events("phased", |sink| three_phases(sink))
        .unwrap();
    drop(db);
    let db = Database::open(dir.path().join("db")).unwrap();
    let mut s = Session::new(db);
    let r = s.run("SELECT COMMUNICATION PATTERNS").unwrap();
    assert_eq!(r.len(), 4);
    // Stored: asking again reads the catalogue back (the same run, to its timing), and a
    // refresh computes it anew.
    let trace = s.database().trace("phased").unwrap();
    let params = PatternParams::default();
    let first = detection::patterns(&trace, &params, false).unwrap();
    assert_eq!(detection::patterns(&trace, &params, false).unwrap(), first);
    let again = detection::patterns(&trace, &params, true).unwrap();
    assert_eq!(again.patterns, first.patterns);
    assert_ne!(again.seconds, first.seconds);
    assert_eq!(int(&r.rows[0][2]), 30);
    // With the envelope, the point-to-point calls differ (each call uses a new tag), so only
    // the collectives repeat.
    let r = s
        .run("SELECT COMMUNICATION PATTERNS WITH ENVELOPE")
        .unwrap();
    assert_eq!(r.len(), 1);
    assert_eq!(int(&r.rows[0][2]), 30);
    assert!(
        r.rows[0][7]
            .render()
            .starts_with("P0: MPI_Allreduce[16 B] MPI_Bcast(0)[16 B] | P1:"),
        "{:?}",
        r.rows[0][7]
    );
    let r = s.run("SELECT PATTERNS FOR PROCESS(1)").unwrap();
    let sequences: Vec<String> = r.rows.iter().map(|row| row[1].render()).collect();
    assert_eq!(
        sequences,
        vec!["R0 S2", "R0 S0", "MPI_Allreduce MPI_Bcast(0)"]
    );
    assert!(r.rows.iter().all(|row| int(&row[3]) == 30));

    // The ring's messages: 4 per call, 30 calls.
    let r = s.run("SELECT COUNT(*) FROM MESSAGES IN PATTERN 1").unwrap();
    assert_eq!(int(&r.rows[0][0]), 120);
    let r = s
        .run("SELECT COUNT(*) FROM OPERATIONS IN PATTERN 3")
        .unwrap();
    assert_eq!(int(&r.rows[0][0]), 120);
    let r = s
        .run("SELECT COUNT(*) FROM OPERATIONS IN PATTERN 4")
        .unwrap();
    assert_eq!(int(&r.rows[0][0]), 240);

    let r = s.run("SELECT PHASES").unwrap();
    assert_eq!(r.len(), 3);
    // Phase 1 holds the ring: 4 sends and 4 receives per call.
    let r = s.run("SELECT COUNT(*) FROM OPERATIONS IN PHASE 1").unwrap();
    assert_eq!(int(&r.rows[0][0]), 240);
    // Phase 2 holds the pairs: 4 messages per call.
    let r = s.run("SELECT COUNT(*) FROM MESSAGES IN PHASE 2").unwrap();
    assert_eq!(int(&r.rows[0][0]), 120);
    let r = s
        .run("SELECT STATISTICS FOR ALL PROCESSES IN PHASE 3")
        .unwrap();
    let total = r.rows.last().unwrap().clone();
    let columns = r.columns.clone();
    let col = |name: &str| columns.iter().position(|c| c == name).unwrap();
    assert_eq!(int(&total[col("MPI_Allreduce")]), 120);
    assert_eq!(int(&total[col("MPI_Bcast")]), 120);
    assert_eq!(int(&total[col("MPI_Send")]), 0);

    let tree = s.run("SHOW PHASE TREE").unwrap();
    assert!(tree.len() >= 5, "{tree:?}");
    let r = s.run("REFRESH PATTERNS").unwrap();
    assert_eq!(int(&r.rows[0][1]), 4);
    assert_eq!(int(&r.rows[1][1]), 3);

    // Approximate matching: the ring with one event changed still matches with one error.
    let exact = s
        .run("MATCH PATTERN (P0: S1 R3; P1: R0 S2; P2: R1 S3; P3: R2 S0)")
        .unwrap();
    assert_eq!(exact.len(), 30);
    assert!(exact.rows.iter().all(|row| int(&row[2]) == 0));
    let none = s
        .run("MATCH PATTERN (P0: S1 R2; P1: R0 S2; P2: R1 S3; P3: R2 S0)")
        .unwrap();
    assert_eq!(none.len(), 0);
    let fuzzy = s
        .run("MATCH PATTERN (P0: S1 R2; P1: R0 S2; P2: R1 S3; P3: R2 S0) WITH ERRORS 1")
        .unwrap();
    assert_eq!(fuzzy.len(), 30);
    assert!(fuzzy.rows.iter().all(|row| int(&row[2]) == 1));

    // Errors a user can cause.
    let e = s
        .run("SELECT MESSAGES IN PATTERN 9")
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "no communication pattern 9: the trace has 4 (SELECT COMMUNICATION PATTERNS lists them)"
    );
    let e = s.run("SELECT MESSAGES IN PHASE 7").unwrap_err().to_string();
    assert_eq!(e, "no phase 7: the trace has 3 (SELECT PHASES lists them)");
}

/// A ping-pong is one long tandem repeat: tandem removal folds it to one copy, and the copies
/// are the pattern's occurrences (8 rounds → 8 occurrences, not none).
#[test]
fn a_ping_pong_is_a_pattern_of_its_rounds() {
    let (_dir, db) = temp_db();
    db.import_events("pingpong", |sink| {
        sink.header(&TraceHeader::world(2, "world"))?;
        let mut t = 0;
        for round in 0..8 {
            for (from, to) in [(0, 1), (1, 0)] {
                let mut send = Operation::new(from, OpKind::Send, t, t + 5);
                (send.comm, send.dest, send.send_tag, send.send_bytes) =
                    (Some(0), Some(to), Some(round), 1 << round);
                sink.operation(&send)?;
                let mut recv = Operation::new(to, OpKind::Recv, t + 1, t + 6);
                (recv.comm, recv.source, recv.recv_tag, recv.recv_bytes) =
                    (Some(0), Some(from), Some(round), 1 << round);
                sink.operation(&recv)?;
                t += 10;
            }
        }
        sink.finish()
    })
    .unwrap();
    let trace = db.trace("pingpong").unwrap();
    let found = detection::patterns(&trace, &PatternParams::default(), false).unwrap();
    assert_eq!(found.patterns.len(), 1);
    let p = &found.patterns[0];
    assert_eq!(p.shape, "P0: S1 R1 | P1: R0 S0");
    assert_eq!((p.occurrences.len(), p.events), (8, 4));
    assert_eq!(p.message_ids().len(), 16);
    assert_eq!(
        found.processes[0].patterns[0].positions,
        vec![1, 3, 5, 7, 9, 11, 13, 15]
    );
}

/// Each process's own patterns are stored apart from the communication patterns: what phases,
/// `SELECT COMMUNICATION PATTERNS` and `IN PATTERN n` read leaves them out, `SELECT PATTERNS FOR
/// PROCESS(n)` reads them too, and when they are missing they are detected again.
#[test]
fn each_process_own_patterns_are_stored_apart_and_read_when_asked() {
    let (_dir, db) = temp_db();
    import_generated(&db, &GenConfig::new(Scenario::Ring, 8, 10), "t");
    let trace = db.trace("t").unwrap();
    let params = PatternParams::default();
    let full = detection::patterns(&trace, &params, false).unwrap();
    assert_eq!(full.processes.len(), 8);
    assert!(full.processes.iter().all(|p| !p.patterns.is_empty()));
    let communication = detection::communication_patterns(&trace, &params, false).unwrap();
    assert!(communication.processes.is_empty());
    assert_eq!(communication.patterns, full.patterns);
    assert_eq!(detection::patterns(&trace, &params, false).unwrap(), full);
    // Only the process patterns dropped: detected again, the same.
    let dropped = trace
        .drop_results("patterns/delimiters=true,tandems=true,envelope=false/processes")
        .unwrap();
    assert_eq!(dropped, 1);
    let again = detection::patterns(&trace, &params, false).unwrap();
    assert_eq!(again.processes, full.processes);
    assert_eq!(again.patterns, full.patterns);
    drop(trace);
    let mut s = Session::new(db);
    s.run("USE TRACE t").unwrap();
    let rows = s.run("SELECT PATTERNS FOR PROCESS(3)").unwrap();
    assert_eq!(rows.len(), full.processes[3].patterns.len());
}

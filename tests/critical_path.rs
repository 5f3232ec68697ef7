//! The critical path: exact segments on hand-made traces written as MTF text, and on every
//! generator scenario with a delay injected, that it runs through the delayed rank and spans
//! the run.

mod common;

use common::hand_made_db;
use mtfdb::analysis::critical_path::{
    critical_path, stored_critical_path, Activity, CriticalPath, Segment,
};
use mtfdb::model::{OpKind, Rank, Time};
use mtfdb::Trace;

/// The path as (rank, start, end, "computation" or the MPI name).
fn listed(path: &CriticalPath) -> Vec<(Rank, Time, Time, &'static str)> {
    path.segments
        .iter()
        .map(|s| {
            let what = match s.activity {
                Activity::Computation => "computation",
                Activity::Mpi { kind, .. } => kind.mpi_name().unwrap(),
            };
            (s.rank, s.start, s.end, what)
        })
        .collect()
}

#[test]
fn a_late_sender_moves_the_path_to_the_sender_when_the_send_started() {
    // Rank 1's receive over [100, 900] waits until rank 0 starts sending at 600: the path
    // holds the receive from 600 on, and before that rank 0's computation since its Init.
    let (_dir, db) = hand_made_db(
        2,
        "",
        "0 0 50 Init\n\
         0 600 650 Send c=0 to=1 tag=1 b=8\n\
         1 10 40 Init\n\
         1 100 900 Recv c=0 from=0 rtag=1 rb=8\n",
    );
    let path = critical_path(&db.trace("t").unwrap()).unwrap();
    assert_eq!(
        listed(&path),
        vec![
            (0, 0, 50, "MPI_Init"),
            (0, 50, 600, "computation"),
            (1, 600, 900, "MPI_Recv"),
        ]
    );
    assert_eq!(path.length(), 900);
    assert_eq!(path.per_rank(2), vec![600, 300]);
    // Averages per rank without waits: computation (550 + 70) / 2, Init (50 + 30) / 2, Send
    // (50 + 0) / 2, Recv (0 + 800 - 500) / 2.
    assert_eq!(
        path.averages,
        vec![
            (None, 310),
            (Some(OpKind::Init), 40),
            (Some(OpKind::Send), 25),
            (Some(OpKind::Recv), 150),
        ]
    );
    // On the path: computation 550 (240 above average), Init 50 (10), Recv 300 (150).
    assert_eq!(path.imbalance(), 240 + 10 + 150);
}

#[test]
fn a_barrier_moves_the_path_to_the_last_member_to_enter() {
    // Rank 0 leaves the barrier last (820) after waiting from 100 for rank 2, the last to
    // enter (700); rank 2 computed since its Init ended at 20.
    let (_dir, db) = hand_made_db(
        3,
        "",
        "0 0 10 Init\n\
         0 100 820 Barrier c=0\n\
         1 5 15 Init\n\
         1 300 800 Barrier c=0\n\
         2 0 20 Init\n\
         2 700 810 Barrier c=0\n",
    );
    let path = critical_path(&db.trace("t").unwrap()).unwrap();
    assert_eq!(
        listed(&path),
        vec![
            (2, 0, 20, "MPI_Init"),
            (2, 20, 700, "computation"),
            (0, 700, 820, "MPI_Barrier"),
        ]
    );
    assert_eq!(path.per_rank(3), vec![120, 0, 700]);
}

#[test]
fn the_path_follows_a_chain_of_late_senders_through_computation_and_calls() {
    // Rank 0 computes and sends to rank 1 at 1000; rank 1 receives, computes until 2000 and
    // sends to rank 2, which has been waiting since 200 and finishes last. Rank 1's Recv and
    // rank 2's are on the path from their senders' starts; the sends are not (they start
    // where the path leaves the sender).
    let (_dir, db) = hand_made_db(
        3,
        "",
        "0 0 100 Init\n\
         0 1000 1050 Send c=0 to=1 tag=1 b=8\n\
         1 0 100 Init\n\
         1 150 1100 Recv c=0 from=0 rtag=1 rb=8\n\
         1 2000 2040 Send c=0 to=2 tag=1 b=8\n\
         2 0 100 Init\n\
         2 200 2100 Recv c=0 from=1 rtag=1 rb=8\n",
    );
    let path = critical_path(&db.trace("t").unwrap()).unwrap();
    assert_eq!(
        listed(&path),
        vec![
            (0, 0, 100, "MPI_Init"),
            (0, 100, 1000, "computation"),
            (1, 1000, 1100, "MPI_Recv"),
            (1, 1100, 2000, "computation"),
            (2, 2000, 2100, "MPI_Recv"),
        ]
    );
    assert_eq!(path.per_rank(3), vec![1000, 1000, 100]);
}

#[test]
fn the_root_of_a_gather_passes_the_path_to_the_last_member_not_the_first() {
    // Rank 0, the root, enters at 100; rank 1 at 200 (the first, whom Scalasca's early reduce
    // waits for) and rank 2 at 900 after computing. The root leaves last, at 1000.
    let (_dir, db) = hand_made_db(
        3,
        "",
        "0 0 10 Init\n\
         0 100 1000 Gather c=0 b=8 rb=24 root=0\n\
         1 0 10 Init\n\
         1 200 250 Gather c=0 b=8 root=0\n\
         2 0 10 Init\n\
         2 900 950 Gather c=0 b=8 root=0\n",
    );
    let path = critical_path(&db.trace("t").unwrap()).unwrap();
    assert_eq!(
        listed(&path),
        vec![
            (2, 0, 10, "MPI_Init"),
            (2, 10, 900, "computation"),
            (0, 900, 1000, "MPI_Gather"),
        ]
    );
}

#[test]
fn a_rank_without_calls_before_the_instant_computed_from_the_first_start() {
    // Rank 1 makes no call before its Send at 500: a late sender whose send starts there
    // leaves the path on rank 1's computation back to the trace's first start (0, rank 0's
    // Recv).
    let (_dir, db) = hand_made_db(
        2,
        "",
        "0 0 800 Recv c=0 from=1 rtag=1 rb=8\n\
         1 500 550 Send c=0 to=0 tag=1 b=8\n",
    );
    let path = critical_path(&db.trace("t").unwrap()).unwrap();
    assert_eq!(
        listed(&path),
        vec![(1, 0, 500, "computation"), (0, 500, 800, "MPI_Recv")]
    );
}

#[test]
fn the_stored_path_is_the_computed_one() {
    let (_dir, db) = hand_made_db(
        2,
        "",
        "0 0 50 Init\n\
         0 600 650 Send c=0 to=1 tag=1 b=8\n\
         1 10 40 Init\n\
         1 100 900 Recv c=0 from=0 rtag=1 rb=8\n",
    );
    let trace = db.trace("t").unwrap();
    let computed = critical_path(&trace).unwrap();
    assert_eq!(stored_critical_path(&trace, false).unwrap(), computed);
    assert_eq!(
        trace.result::<CriticalPath>("critical-path").unwrap(),
        Some(computed.clone())
    );
    assert_eq!(stored_critical_path(&trace, true).unwrap(), computed);
}

/// Every segment starts where the previous one ended, and lies within what its rank did then:
/// an MPI segment within its own call (of its rank), a computation segment between the rank's
/// calls (overlapping none).
fn assert_contiguous_and_within_events(trace: &Trace, path: &CriticalPath, what: &str) {
    for pair in path.segments.windows(2) {
        assert_eq!(pair[0].end, pair[1].start, "{what}: {pair:?}");
    }
    let ranks = trace.header().processes.len() as u32;
    let ops: Vec<Vec<(u64, Time, Time)>> = (0..ranks)
        .map(|r| {
            trace
                .process_operations(r)
                .unwrap()
                .into_iter()
                .map(|(id, op)| (id, op.start, op.end))
                .collect()
        })
        .collect();
    for s in &path.segments {
        assert!(s.start < s.end, "{what}: {s:?}");
        let calls = &ops[s.rank as usize];
        match s.activity {
            Activity::Mpi { op, .. } => {
                let &(_, start, end) = calls.iter().find(|c| c.0 == op).unwrap();
                assert!(
                    start <= s.start && s.end <= end,
                    "{what}: {s:?} in {start}..{end}"
                );
            }
            Activity::Computation => {
                let inside = calls.iter().find(|c| c.1 < s.end && s.start < c.2);
                assert_eq!(inside, None, "{what}: {s:?}");
            }
        }
    }
}

/// `gen --delay 5:6:10ms` on every scenario: the path is contiguous and within its ranks'
/// events, spans the run's operations exactly, on rank 5 holds the delayed computation (the
/// gap from its last call of iteration 5 to its first of iteration 6, covering at least 10 ms
/// of iteration 6), and is 10 ms longer and 15/16 of that more imbalanced than without the
/// delay.
#[test]
fn the_path_runs_through_the_delayed_rank_and_spans_the_run_in_every_scenario() {
    use mtfdb::gen::{GenConfig, Scenario};
    // The delay of `common::delayed_run`.
    const DELAY: Time = 10_000_000;
    for scenario in Scenario::ALL {
        let config = common::delayed_run(scenario);
        let (_dir, db) = common::generated_db(&config);
        let trace = db.trace("t").unwrap();
        let path = critical_path(&trace).unwrap();
        assert_contiguous_and_within_events(&trace, &path, &scenario.to_string());

        let ops: Vec<_> = (0..16)
            .flat_map(|r| trace.process_operations(r).unwrap())
            .collect();
        let first = ops.iter().map(|(_, op)| op.start).min().unwrap();
        let last = ops.iter().map(|(_, op)| op.end).max().unwrap();
        assert_eq!(path.segments.first().unwrap().start, first, "{scenario}");
        assert_eq!(path.segments.last().unwrap().end, last, "{scenario}");
        assert_eq!(path.length(), last - first, "{scenario}");
        // Routine events (main) lie outside the operations: the path spans operations only.
        let summary = trace.summary();
        assert!(summary.first_time.unwrap() < first, "{scenario}");
        assert!(summary.last_time.unwrap() > last, "{scenario}");
        assert_eq!(path.per_rank(16).iter().sum::<Time>(), last - first);

        let solve: Vec<_> = trace
            .routine_calls()
            .unwrap()
            .into_iter()
            .filter(|c| c.rank == 5 && trace.string(c.routine) == Some("solve"))
            .collect();
        assert_eq!(solve.len(), 12, "{scenario}");
        let (previous, iteration) = (solve[5], solve[6]);
        // The gap holding the delay starts at rank 5's last call of iteration 5 (or later) and
        // ends at its first call of iteration 6; the path may hold other computation of rank 5
        // in iteration 6 besides.
        let overlap = |s: &&Segment| {
            s.end
                .min(iteration.end)
                .saturating_sub(s.start.max(iteration.start))
        };
        let delayed = path
            .segments
            .iter()
            .find(|s| s.rank == 5 && s.activity == Activity::Computation && overlap(s) >= DELAY);
        let Some(delayed) = delayed else {
            panic!("{scenario}: no 10 ms of rank 5's computation in iteration 6 on the path");
        };
        assert!(
            delayed.start >= previous.start
                && delayed.end > iteration.start
                && delayed.end <= iteration.end,
            "{scenario}: {delayed:?} in iterations 5-6 ({}..{})",
            previous.start,
            iteration.end
        );
        let (_base_dir, base_db) = common::generated_db(&GenConfig::new(scenario, 16, 12));
        let base_trace = base_db.trace("t").unwrap();
        let base = critical_path(&base_trace).unwrap();
        assert_contiguous_and_within_events(&base_trace, &base, &format!("{scenario} undelayed"));
        // Against the same run without the delay (same seed, same jitter): the run and the path
        // are 10 ms longer, and the imbalance grows by 15/16 of it: the path holds the whole
        // delay as computation, the average rank 1/16 of it. To within twice the largest
        // compute jitter, as in tests/waits.rs.
        const SLACK: i64 = 250_000;
        let longer = path.length() as i64 - base.length() as i64;
        assert!(
            (longer - DELAY as i64).abs() <= SLACK,
            "{scenario}: {longer} ns longer"
        );
        let more = path.imbalance() as i64 - base.imbalance() as i64;
        assert!(
            (more - (DELAY * 15 / 16) as i64).abs() <= SLACK,
            "{scenario}: imbalance {} ns, {more} ns more",
            path.imbalance()
        );
    }
}

/// `SELECT CRITICAL PATH [SUMMARY]`: the rows are the library's path, segment by segment, and
/// the summary its length, imbalance, ranks' shares and activities; the delayed rank of a
/// generated stencil carries the delay on the path.
#[test]
fn the_critical_path_statements_give_the_librarys_path() {
    use mtfdb::gen::Scenario;
    use mtfdb::query::Session;
    let config = common::delayed_run(Scenario::Stencil2d);
    let (_dir, db) = common::generated_db(&config);
    let path = critical_path(&db.trace("t").unwrap()).unwrap();
    let mut s = Session::new(db);
    s.run("USE TRACE t").unwrap();
    let rows: Vec<(u64, u64, u64, String)> = s
        .query("SELECT CRITICAL PATH")
        .unwrap()
        .map(|row| {
            let row = row.unwrap();
            (
                row.get::<u64>("rank").unwrap(),
                row.get::<u64>("start_ns").unwrap(),
                row.get::<u64>("end_ns").unwrap(),
                row.get::<String>("activity").unwrap(),
            )
        })
        .collect();
    let expected: Vec<(u64, u64, u64, String)> = path
        .segments
        .iter()
        .map(|seg| {
            let activity = match seg.activity {
                Activity::Computation => "computation".to_string(),
                Activity::Mpi { kind, .. } => kind.mpi_name().unwrap().to_string(),
            };
            (u64::from(seg.rank), seg.start, seg.end, activity)
        })
        .collect();
    assert_eq!(rows, expected);

    let summary = s.run("SELECT CRITICAL PATH SUMMARY").unwrap();
    let part = |name: &str| -> Vec<mtfdb::results::Value> {
        summary
            .rows
            .iter()
            .find(|r| r[0] == mtfdb::results::Value::Text(name.to_string()))
            .unwrap_or_else(|| panic!("no {name} row"))
            .clone()
    };
    use mtfdb::results::Value::Int;
    assert_eq!(part("path")[1], Int(i128::from(path.length())));
    assert_eq!(part("path")[4], Int(i128::from(path.imbalance())));
    let on_path = path.per_rank(16);
    assert_eq!(part("rank 5")[1], Int(i128::from(on_path[5])));
    assert!(
        on_path[5] >= 10_000_000,
        "rank 5 carries the delay: {on_path:?}"
    );
    // The imbalance is at least most of the delay: the other ranks computed 10 ms less.
    assert!(path.imbalance() >= 9_000_000, "{}", path.imbalance());
    // Every rank on the path has a row, and the ranks' times add up to the length.
    let ranks_total: i128 = summary
        .rows
        .iter()
        .filter(|r| matches!(&r[0], mtfdb::results::Value::Text(t) if t.starts_with("rank ")))
        .map(|r| match r[1] {
            Int(t) => t,
            _ => panic!("a rank's time is a number"),
        })
        .sum();
    assert_eq!(ranks_total, i128::from(path.length()));
}

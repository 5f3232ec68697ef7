//! The query engine end to end: the MTF paper's Figure 4 queries, run verbatim on the bundled
//! example, return exactly the rows computed independently from the generator's ground truth
//! and from a naive scan of the stored rows; statistics, aggregates, views and EXPLAIN.

use std::collections::BTreeMap;

use mtfdb::gen::{generate, GenConfig, GroundTruth, Scenario};
use mtfdb::model::OpKind;
use mtfdb::query::Session;
use mtfdb::results::{ResultSet, Value};
use mtfdb::Database;

const EXAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/examples/traces/stencil2d-16.mtf"
);

/// The bundled example's ground truth: the generator run that wrote it.
fn example_truth() -> GroundTruth {
    let mut sink = mtfdb::gen::NullSink;
    generate(&GenConfig::new(Scenario::Stencil2d, 16, 30), &mut sink).unwrap()
}

fn session(dir: &tempfile::TempDir) -> Session {
    let db = Database::open(dir.path().join("db")).unwrap();
    db.import(EXAMPLE, Some("wrf16")).unwrap();
    Session::new(db)
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => i64::try_from(*i).expect("a test value fits 64 bits"),
        other => panic!("not an integer: {other:?}"),
    }
}

fn text(v: &Value) -> &str {
    match v {
        Value::Text(s) => s,
        other => panic!("not text: {other:?}"),
    }
}

fn col(r: &ResultSet, name: &str) -> usize {
    r.column(name)
        .unwrap_or_else(|| panic!("no column {name} in {:?}", r.columns))
}

#[test]
fn the_five_figure_4_queries_run_verbatim_and_return_the_ground_truth() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(&dir);
    let truth = example_truth();
    assert_eq!(
        s.database().trace("wrf16").unwrap().summary().operations,
        truth.operations
    );

    // Example 1: all messages in communicator C1.
    let r = s.run("SELECT ALL MESSAGES IN COMM(C1)").unwrap();
    assert_eq!(r.len() as u64, truth.messages);
    let bytes: i64 = r.rows.iter().map(|row| int(&row[col(&r, "size")])).sum();
    assert_eq!(bytes as u64, truth.message_bytes);
    assert!(r.rows.iter().all(|row| text(&row[col(&r, "comm")]) == "C1"));

    // Example 2: messages between processes 1 and 2, both directions.
    let r = s
        .run("SELECT ALL MESSAGES BETWEEN PROCESS(1,2) IN COMM(C1)")
        .unwrap();
    let (p12, p21) = (truth.pair(1, 2).unwrap(), truth.pair(2, 1).unwrap());
    assert_eq!(r.len() as u64, p12.messages + p21.messages);
    let mut per_pair: BTreeMap<(i64, i64), (u64, i64)> = BTreeMap::new();
    for row in &r.rows {
        let e = per_pair
            .entry((int(&row[col(&r, "sender")]), int(&row[col(&r, "receiver")])))
            .or_default();
        e.0 += 1;
        e.1 += int(&row[col(&r, "size")]);
    }
    assert_eq!(per_pair[&(1, 2)], (p12.messages, p12.bytes as i64));
    assert_eq!(per_pair[&(2, 1)], (p21.messages, p21.bytes as i64));
    assert_eq!(per_pair.len(), 2);

    // Example 3: point-to-point operations between 1 and 2: each message has a send on one
    // side and a receive on the other.
    let r = s
        .run("SELECT POINT_TO_POINT_OPERATIONS BETWEEN PROCESS(1,2) IN COMM(C1)")
        .unwrap();
    assert_eq!(r.len() as u64, 2 * (p12.messages + p21.messages));
    for row in &r.rows {
        let (rank, peer) = (int(&row[col(&r, "rank")]), int(&row[col(&r, "peer")]));
        assert!(
            (rank, peer) == (1, 2) || (rank, peer) == (2, 1),
            "{rank} -> {peer}"
        );
        assert!(["MPI_Isend", "MPI_Irecv"].contains(&text(&row[col(&r, "operation")])));
    }

    // Example 4: collective operations among all processes in C1.
    let r = s
        .run("SELECT COLLECTIVE_OPERATIONS AMONG ALL PROCESSES IN COMM(C1)")
        .unwrap();
    let collectives: u64 = truth
        .ops_by_kind
        .iter()
        .filter(|(k, _)| OpKind::from_mpi_name(k).unwrap().is_collective())
        .map(|(_, n)| n)
        .sum();
    assert_eq!(r.len() as u64, collectives);

    // Example 5: the broadcasts process 1 performed.
    let r = s
        .run("SELECT BROADCAST FOR PROCESS(1) IN COMM(C1)")
        .unwrap();
    assert_eq!(r.len() as u64, truth.per_rank[1].count(OpKind::Bcast));
    assert_eq!(r.len(), 31);
    assert!(r
        .rows
        .iter()
        .all(|row| int(&row[col(&r, "rank")]) == 1
            && text(&row[col(&r, "operation")]) == "MPI_Bcast"));
}

#[test]
fn statistics_fan_in_and_aggregates_agree_with_the_ground_truth() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(&dir);
    let truth = example_truth();

    let r = s.run("SELECT FAN_IN FOR ALL PROCESSES").unwrap();
    assert_eq!(r.len(), 16);
    for row in &r.rows {
        let rank = int(&row[0]) as usize;
        assert_eq!(
            int(&row[col(&r, "fan_in_bytes")]) as u64,
            truth.per_rank[rank].fan_in()
        );
    }
    let r = s.run("select fan_out for processes(3-6)").unwrap();
    let ranks: Vec<i64> = r.rows.iter().map(|row| int(&row[0])).collect();
    assert_eq!(ranks, vec![3, 4, 5, 6]);
    for row in &r.rows {
        assert_eq!(
            int(&row[1]) as u64,
            truth.per_rank[int(&row[0]) as usize].fan_out()
        );
    }

    let r = s.run("SELECT STATISTICS FOR ALL PROCESSES").unwrap();
    assert_eq!(r.len(), 17);
    let totals = &r.rows[16];
    assert_eq!(
        int(&totals[col(&r, "bytes_sent")]),
        int(&totals[col(&r, "bytes_received")])
    );

    // Messages per sender, grouped: the ground truth's pairs summed by sender.
    let r = s
        .run("SELECT COUNT(*), SUM(SIZE) FROM MESSAGES GROUP BY PROCESS")
        .unwrap();
    assert_eq!(r.len(), 16);
    for row in &r.rows {
        let rank = int(&row[0]) as u32;
        assert_eq!(
            int(&row[1]) as u64,
            truth.per_rank[rank as usize].p2p_sent_messages
        );
        assert_eq!(
            int(&row[2]) as u64,
            truth.per_rank[rank as usize].p2p_sent_bytes
        );
    }

    // A size predicate: north-south messages are 81,920 bytes, east-west 61,440.
    let big = s
        .run("SELECT COUNT(*) FROM MESSAGES WHERE SIZE > 64 KiB")
        .unwrap();
    let ns: u64 = truth
        .pairs
        .iter()
        .filter(|p| p.bytes / p.messages == 81_920)
        .map(|p| p.messages)
        .sum();
    assert_eq!(int(&big.rows[0][0]) as u64, ns);

    // The communication matrix of counts equals the pairs.
    let m = s.run("SELECT COMMUNICATION MATRIX OF COUNT").unwrap();
    for p in &truth.pairs {
        assert_eq!(
            int(&m.rows[p.sender as usize][p.receiver as usize + 1]) as u64,
            p.messages
        );
    }
}

#[test]
fn time_windows_keep_exactly_the_overlapping_operations() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(&dir);
    let trace = s.database().trace("wrf16").unwrap();
    let ops = trace.process_operations(5).unwrap();
    let (t1, t2) = (20_000_000u64, 30_000_000u64);
    let expected = ops
        .iter()
        .filter(|(_, o)| o.start <= t2 && o.end >= t1)
        .count();
    assert!(expected > 0 && expected < ops.len());
    drop(trace);
    let r = s
        .run("SELECT OPERATIONS FOR PROCESS(5) BETWEEN TIME 20 ms AND 30 ms")
        .unwrap();
    assert_eq!(r.len(), expected);
    let r2 = s
        .run("SELECT OPERATIONS FOR PROCESS(5) BETWEEN TIME 0.02 AND 0.03")
        .unwrap();
    assert_eq!(r2, r);
}

#[test]
fn views_are_stored_bitmaps_that_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(&dir);
    let r = s
        .run("CREATE VIEW corner AS SELECT OPERATIONS FOR PROCESS(0)")
        .unwrap();
    let rows = int(&r.rows[0][1]);
    assert_eq!(
        rows as u64,
        s.database()
            .trace("wrf16")
            .unwrap()
            .process_operations(0)
            .unwrap()
            .len() as u64
    );
    drop(s);
    let mut s = Session::new(Database::open(dir.path().join("db")).unwrap());
    let v = s.run("SHOW VIEWS").unwrap();
    assert_eq!(text(&v.rows[0][0]), "corner");
    let isends = s.run("SELECT MPI_Isend IN VIEW corner").unwrap();
    assert_eq!(
        isends.len(),
        2 * 30,
        "rank 0 is a corner: 2 neighbours, 30 iterations"
    );
    let err = s.run("SELECT ALL MESSAGES IN VIEW corner").unwrap_err();
    assert_eq!(
        err.to_string(),
        "view \"corner\" holds operations, but this query selects messages"
    );
    s.run("DROP VIEW corner").unwrap();
    let err = s.run("SELECT OPERATIONS IN VIEW corner").unwrap_err();
    assert_eq!(
        err.to_string(),
        "no view named \"corner\" in trace \"wrf16\" (it has none)"
    );
}

#[test]
fn explain_shows_the_bitmaps_and_the_rows_they_keep() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(&dir);
    let r = s
        .run("EXPLAIN SELECT MPI_Isend FOR PROCESS(5) IN COMM(C1) WHERE SIZE > 64 KiB")
        .unwrap();
    let steps: Vec<&str> = r.rows.iter().map(|row| text(&row[1])).collect();
    assert!(steps[0].starts_with("all operations"), "{steps:?}");
    assert_eq!(
        steps[1],
        "only the 1 chunk the time window and processes can touch"
    );
    assert_eq!(steps[2], "AND kind index [MPI_Isend]");
    assert_eq!(steps[3], "AND Process index [5]");
    assert_eq!(steps[4], "AND Comm index [0]");
    // Rank 5 is inner (4 neighbours): 120 Isends, of which the 60 north-south ones are 80 KiB.
    assert_eq!(int(&r.rows[4][2]), 120);
    // EXPLAIN reads no rows: the last step has no actual count.
    assert_eq!(r.rows.last().unwrap()[3], Value::Null);
    // EXPLAIN ANALYZE runs it: the same steps, with the rows actually kept.
    let a = s
        .run("EXPLAIN ANALYZE SELECT MPI_Isend FOR PROCESS(5) IN COMM(C1) WHERE SIZE > 64 KiB")
        .unwrap();
    let analyzed: Vec<&str> = a.rows.iter().map(|row| text(&row[1])).collect();
    assert_eq!(analyzed, steps);
    assert_eq!(a.rows.last().unwrap()[3], Value::Int(60));
}

/// The bytes of every file below `dir`, by path: what a statement may not change.
fn files_of(dir: &std::path::Path) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let path = e.path();
        if path.is_dir() {
            out.extend(files_of(&path));
        } else {
            out.insert(path.clone(), std::fs::read(&path).unwrap());
        }
    }
    out
}

#[test]
fn explain_of_any_statement_reads_no_rows_runs_no_analysis_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db_path = dir.path().join("db");
    {
        let db = Database::open(&db_path).unwrap();
        db.import_events("t", |sink| {
            generate(&GenConfig::new(Scenario::Stencil2d, 16, 24), sink).map(|_| ())
        })
        .unwrap();
    }
    let statements = [
        "SELECT ALL OPERATIONS",
        "SELECT ALL MESSAGES FOR PROCESS(3) ORDER BY size DESC LIMIT 5",
        "SELECT COUNT(*) FROM OPERATIONS GROUP BY PROCESS",
        "SELECT SUM(SIZE) FROM MESSAGES GROUP BY TAG",
        "SELECT OPERATIONS IN PATTERN 1",
        "SELECT MESSAGES IN PHASE 1",
        "SELECT STATISTICS FOR ALL PROCESSES",
        "SELECT STATISTICS FOR ALL PROCESSES IN PHASE 1",
        "SELECT MPI TIME",
        "SELECT FAN_IN FOR ALL PROCESSES",
        "SELECT COMMUNICATION MATRIX OF BYTES",
        "SELECT COMMUNICATION MATRIX OF COUNT FOR PROCESSES(0-3)",
        "SELECT HISTOGRAM OF SIZE BINS 4",
        "SELECT WAIT STATES",
        "SELECT WAIT STATES FOR PROCESSES(0-3) BETWEEN TIME 0 AND 1 GROUP BY PROCESS",
        "SELECT WAIT STATES IN PHASE 1 GROUP BY ROUTINE",
        "SELECT WAIT STATES GROUP BY PHASE",
        "SELECT LATE SENDERS ORDER BY WAIT DESC LIMIT 4",
        "SELECT OPERATIONS WHERE WAIT > 1 ms",
        "SELECT ALL OPERATIONS ORDER BY wait DESC LIMIT 3",
        // Analyses: their plan, nothing computed or stored.
        "SELECT COMMUNICATION PATTERNS",
        "SELECT PATTERNS FOR PROCESS(2)",
        "SELECT PHASES",
        "SHOW PHASE TREE",
        "REFRESH PATTERNS",
        "MATCH PATTERN (P0: S1)",
        "SELECT LOOPS FOR PROCESS(1)",
        "SELECT GLOBAL MODEL",
        "SELECT TOPOLOGY",
        "SELECT LOGICAL TRACE",
        "SELECT CRITICAL PATH SUMMARY",
        "SIMULATE WITH CPU 2 AS TRACE sim",
        "SELECT NETWORK MODEL",
    ];
    let before = files_of(&db_path);
    let mut s = Session::new(Database::open_existing(&db_path).unwrap());
    s.use_trace("t").unwrap();
    for statement in statements {
        let plan = s.run(&format!("EXPLAIN {statement}")).unwrap();
        assert!(!plan.is_empty(), "{statement}");
        // No step counted rows it read.
        assert!(
            plan.rows.iter().all(|row| row[3] == Value::Null),
            "{statement}: {:?}",
            plan.rows
        );
    }
    // Patterns and phases were neither detected nor stored: the plan says they would run.
    let plan = s.run("EXPLAIN SELECT OPERATIONS IN PATTERN 1").unwrap();
    assert!(
        plan.rows
            .iter()
            .any(|row| text(&row[1]).contains("pattern detection runs first")),
        "{:?}",
        plan.rows
    );
    drop(s);
    // The segments and the manifest are byte for byte as they were. (sled rewrites its own
    // log and snapshot files when it is opened and closed, writes or not: what it holds is
    // checked below instead.)
    let after = files_of(&db_path);
    let catalog = db_path.join("catalog");
    let changed: Vec<_> = after
        .iter()
        .filter(|(p, bytes)| !p.starts_with(&catalog) && before.get(*p) != Some(bytes))
        .map(|(p, _)| p.clone())
        .collect();
    assert!(changed.is_empty(), "EXPLAIN changed {changed:?}");
    let outside = |files: &std::collections::BTreeMap<std::path::PathBuf, Vec<u8>>| {
        files.keys().filter(|p| !p.starts_with(&catalog)).count()
    };
    assert_eq!(
        outside(&before),
        outside(&after),
        "EXPLAIN added or removed files"
    );
    // Nothing was stored in sled either: no pattern or phase result, no view.
    let mut s = Session::new(Database::open_existing(&db_path).unwrap());
    s.use_trace("t").unwrap();
    for (statement, analysis) in [
        (
            "EXPLAIN SELECT OPERATIONS IN PATTERN 1",
            "pattern detection runs first",
        ),
        (
            "EXPLAIN SELECT OPERATIONS IN PHASE 1",
            "phase detection runs first",
        ),
    ] {
        let plan = s.run(statement).unwrap();
        assert!(
            plan.rows.iter().any(|row| text(&row[1]).contains(analysis)),
            "{statement}: {:?}",
            plan.rows
        );
    }
    assert!(s.run("SHOW VIEWS").unwrap().is_empty());
    // EXPLAIN SIMULATE … AS TRACE stored no trace.
    assert_eq!(s.database().trace_names().unwrap(), vec!["t".to_string()]);
    // Nor wait states: the plan says the analysis would run first.
    let plan = s.run("EXPLAIN SELECT WAIT STATES GROUP BY PHASE").unwrap();
    for step in [
        "wait state analysis runs first (nothing stored yet)",
        "group by phase: phase detection runs first (nothing stored yet)",
    ] {
        assert!(
            plan.rows.iter().any(|row| text(&row[1]) == step),
            "{step}: {:?}",
            plan.rows
        );
    }
    // Once the patterns are stored, EXPLAIN uses them.
    s.run("SELECT COMMUNICATION PATTERNS").unwrap();
    let plan = s.run("EXPLAIN SELECT OPERATIONS IN PATTERN 1").unwrap();
    assert!(
        plan.rows
            .iter()
            .any(|row| text(&row[1]) == "AND pattern 1's occurrences (stored)"),
        "{:?}",
        plan.rows
    );
}

#[test]
fn user_errors_name_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(&dir);
    let cases = [
        ("SELECT ALL MESSAGES IN COMM(C9)", "no communicator C9 in trace \"wrf16\"; it has: C1 (id 0)"),
        ("SELECT OPERATIONS FOR PROCESS(16)", "process 16 is not in trace \"wrf16\", whose ranks are 0-15"),
        ("USE TRACE nope", "no trace named \"nope\" in the database (it holds: wrf16)"),
        (
            "SELECT FAN_IN FOR ALL PROCESSES WHERE SIZE > 1",
            "FAN_IN is computed per process over the whole trace; it takes FOR or AMONG a set of processes only",
        ),
        (
            // The stencil's iterations are one homogeneous phase.
            "SELECT OPERATIONS IN PHASE 2",
            "no phase 2: the trace has 1 (SELECT PHASES lists them)",
        ),
    ];
    for (query, message) in cases {
        assert_eq!(s.run(query).unwrap_err().to_string(), message, "{query}");
    }
    let two = Database::open(dir.path().join("db2")).unwrap();
    two.import(EXAMPLE, Some("a")).unwrap();
    two.import(EXAMPLE, Some("b")).unwrap();
    let err = Session::new(two).run("SELECT FAN_IN").unwrap_err();
    assert_eq!(
        err.to_string(),
        "the database holds several traces; choose one with --trace NAME or USE TRACE name: a, b"
    );
}

#[test]
fn the_engine_agrees_with_a_naive_scan_on_every_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    for scenario in Scenario::ALL {
        db.import_events(&scenario.to_string(), |sink| {
            let ranks = if scenario == Scenario::Cg { 16 } else { 9 };
            generate(
                &GenConfig {
                    scenario,
                    ranks,
                    iterations: 3,
                    seed: 5,
                    shuffle_ranks: true,
                    delays: Vec::new(),
                    network: None,
                },
                sink,
            )
            .map(|_| ())
        })
        .unwrap();
    }
    let mut s = Session::new(db);
    for scenario in Scenario::ALL {
        s.use_trace(&scenario.to_string()).unwrap();
        let trace = s.database().trace(&scenario.to_string()).unwrap();
        let messages = trace.messages().unwrap();
        let n = trace.header().processes.len() as u32;
        for (a, b) in [(0, 1), (1, 2), (0, n - 1)] {
            let naive = messages
                .iter()
                .filter(|m| (m.sender, m.receiver) == (a, b) || (m.sender, m.receiver) == (b, a))
                .count();
            let r = s
                .run(&format!("SELECT ALL MESSAGES BETWEEN PROCESS({a},{b})"))
                .unwrap();
            assert_eq!(r.len(), naive, "{scenario}: messages between {a} and {b}");
            let naive_among = messages
                .iter()
                .filter(|m| m.sender <= b && m.receiver <= b)
                .count();
            let r = s
                .run(&format!("SELECT ALL MESSAGES AMONG PROCESSES(0-{b})"))
                .unwrap();
            assert_eq!(r.len(), naive_among, "{scenario}: messages among 0-{b}");
        }
        let mut all_ops = Vec::new();
        for rank in 0..n {
            all_ops.extend(trace.process_operations(rank).unwrap());
        }
        let naive = all_ops
            .iter()
            .filter(|(_, o)| o.kind.is_send() && o.send_bytes >= 4096)
            .count();
        let r = s.run("SELECT SENDS WHERE SIZE >= 4 KiB").unwrap();
        assert_eq!(r.len(), naive, "{scenario}: sends of at least 4 KiB");
        let naive = all_ops
            .iter()
            .filter(|(_, o)| o.kind.is_collective() && o.end - o.start <= 10_000)
            .count();
        let r = s
            .run("SELECT COLLECTIVE_OPERATIONS WHERE NOT DURATION > 10 us")
            .unwrap();
        assert_eq!(r.len(), naive, "{scenario}: short collectives");
    }
}

#[test]
fn the_column_scan_of_all_messages_agrees_with_the_row_path() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(&dir);
    for groups in [
        "TAG",
        "PROCESS",
        "PEER",
        "COMM",
        "PROCESS, TAG",
        "PEER, PROCESS",
    ] {
        let fast = s.run(&format!("SELECT COUNT(*), SUM(SIZE), AVG(SIZE), MIN(SIZE), MAX(SIZE) FROM MESSAGES GROUP BY {groups}")).unwrap();
        // A predicate that holds for every message sends the query down the row path.
        let rows = s
            .run(&format!(
                "SELECT COUNT(*), SUM(SIZE), AVG(SIZE), MIN(SIZE), MAX(SIZE) FROM MESSAGES WHERE SIZE >= 0 GROUP BY {groups}"
            ))
            .unwrap();
        assert_eq!(fast, rows, "GROUP BY {groups}");
        assert!(!fast.is_empty());
    }
    let total = s.run("SELECT SUM(SIZE) FROM MESSAGES").unwrap();
    assert_eq!(int(&total.rows[0][0]) as u64, example_truth().message_bytes);
    let plan = s
        .run("EXPLAIN SELECT SUM(SIZE) FROM MESSAGES GROUP BY TAG")
        .unwrap();
    assert_eq!(
        text(&plan.rows[0][1]),
        "scan only the needed columns of the message chunks (1), in parallel"
    );
}

// ---- wait states -----------------------------------------------------------------------------

/// Three ranks, all inside `main`: rank 0 sends to 1 at 600 (inside `exchange`) and to 2 at
/// 800, then enters a barrier at 900 and calls `MPI_Finalize` outside any routine; rank 1's
/// `MPI_Recv` (inside `recv_halo`) is posted at 100 and waits 500 ns; rank 2's `MPI_Wait` on
/// its `MPI_Irecv` starts at 200 and waits 600 ns; the barrier's last member enters at 960, so
/// rank 0 waits 60 ns and rank 1 10 ns. Time in MPI: rank 0 210 ns, rank 1 850, rank 2 800.
const WAITS_TRACE: &str = "MTF 1
processor 0 node0
process 0 P0 on 0
process 1 P1 on 0
process 2 P2 on 0
communicator 0 world 0-2
0 0 enter main
0 10 enter exchange
0 600 650 Send c=0 to=1 tag=1 b=8
0 800 850 Send c=0 to=2 tag=2 b=16
0 900 leave exchange
0 900 1000 Barrier c=0
0 1100 leave main
0 1200 1210 Finalize
1 0 enter main
1 50 enter recv_halo
1 100 900 Recv c=0 from=0 rtag=1 rb=8
1 900 leave recv_halo
1 950 1000 Barrier c=0
1 1100 leave main
2 0 enter main
2 100 110 Irecv c=0 from=0 rtag=2 rb=16 req=1
2 200 950 Wait done=1
2 960 1000 Barrier c=0
2 1100 leave main
";

fn waits_session(dir: &tempfile::TempDir) -> Session {
    let path = dir.path().join("t.mtf");
    std::fs::write(&path, WAITS_TRACE).unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    db.import(&path, Some("t")).unwrap();
    Session::new(db)
}

fn rows_of(r: &ResultSet) -> Vec<Vec<Value>> {
    r.rows.clone()
}

/// A row of `WAIT STATES GROUP BY …`: the key, the six kinds' ns, the total and the share of
/// `mpi` ns.
fn group_row(key: Value, kinds: [u64; 6], mpi: u64) -> Vec<Value> {
    let total: u64 = kinds.iter().sum();
    let mut row = vec![key];
    row.extend(kinds.iter().map(|k| Value::from(*k)));
    row.push(total.into());
    row.push((total as f64 / mpi as f64).into());
    row
}

#[test]
fn wait_states_total_the_waits_of_the_selected_operations_per_kind() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = waits_session(&dir);
    let kind_row = |kind: &str, waits: u64, ns: u64, mpi: u64| -> Vec<Value> {
        vec![
            kind.into(),
            waits.into(),
            ns.into(),
            (if mpi == 0 {
                0.0
            } else {
                ns as f64 / mpi as f64
            })
            .into(),
        ]
    };
    let r = s.run("SELECT WAIT STATES").unwrap();
    assert_eq!(r.columns, ["kind", "waits", "total_ns", "share"]);
    assert_eq!(
        rows_of(&r),
        vec![
            kind_row("late sender", 2, 1100, 1860),
            kind_row("late receiver", 0, 0, 1860),
            kind_row("wait at barrier", 2, 70, 1860),
            kind_row("wait at NxN", 0, 0, 1860),
            kind_row("late broadcast", 0, 0, 1860),
            kind_row("early reduce", 0, 0, 1860),
            kind_row("total", 4, 1170, 1860),
        ]
    );
    // FOR, BETWEEN TIME: rank 2's operations overlapping [900, 2000] are its Wait (750 ns in
    // MPI, 600 waited) and its barrier (40 ns, no wait).
    let r = s
        .run("SELECT WAIT STATES FOR PROCESS(2) BETWEEN TIME 900 ns AND 2000 ns")
        .unwrap();
    assert_eq!(r.rows[0], kind_row("late sender", 1, 600, 790));
    assert_eq!(r.rows[6], kind_row("total", 1, 600, 790));
    // WHERE selects the operations too: rank 0's two sends (50 ns each) and barrier (100 ns)
    // and rank 1's barrier (50 ns), not rank 2's (40 ns).
    let r = s
        .run("SELECT WAIT STATES WHERE DURATION >= 50 ns AND DURATION <= 100 ns")
        .unwrap();
    assert_eq!(r.rows[2], kind_row("wait at barrier", 2, 70, 250));
    assert_eq!(r.rows[6], kind_row("total", 2, 70, 250));
}

#[test]
fn wait_states_group_by_process_operation_routine_and_phase() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = waits_session(&dir);
    let r = s.run("SELECT WAIT STATES GROUP BY PROCESS").unwrap();
    assert_eq!(
        r.columns,
        [
            "process",
            "late_sender_ns",
            "late_receiver_ns",
            "wait_at_barrier_ns",
            "wait_at_nxn_ns",
            "late_broadcast_ns",
            "early_reduce_ns",
            "total_ns",
            "share"
        ]
    );
    assert_eq!(
        rows_of(&r),
        vec![
            group_row(0u64.into(), [0, 0, 60, 0, 0, 0], 210),
            group_row(1u64.into(), [500, 0, 10, 0, 0, 0], 850),
            group_row(2u64.into(), [600, 0, 0, 0, 0, 0], 800),
        ]
    );
    // The set restricts the rows; ORDER BY and LIMIT apply as anywhere.
    let r = s
        .run(
            "SELECT WAIT STATES FOR PROCESSES(1-2) GROUP BY PROCESS ORDER BY total_ns DESC LIMIT 1",
        )
        .unwrap();
    assert_eq!(
        rows_of(&r),
        vec![group_row(2u64.into(), [600, 0, 0, 0, 0, 0], 800)]
    );
    let r = s.run("SELECT WAIT STATES GROUP BY OPERATION").unwrap();
    assert_eq!(r.columns[0], "operation");
    assert_eq!(
        rows_of(&r),
        vec![
            group_row("MPI_Barrier".into(), [0, 0, 70, 0, 0, 0], 190),
            group_row("MPI_Finalize".into(), [0; 6], 10),
            group_row("MPI_Irecv".into(), [0; 6], 10),
            group_row("MPI_Recv".into(), [500, 0, 0, 0, 0, 0], 800),
            group_row("MPI_Send".into(), [0; 6], 100),
            group_row("MPI_Wait".into(), [600, 0, 0, 0, 0, 0], 750),
        ]
    );
    // The innermost routine around each call; MPI_Finalize is outside every routine.
    let r = s.run("SELECT WAIT STATES GROUP BY ROUTINE").unwrap();
    assert_eq!(r.columns[0], "routine");
    assert_eq!(
        rows_of(&r),
        vec![
            group_row("exchange".into(), [0; 6], 100),
            group_row("main".into(), [600, 0, 70, 0, 0, 0], 950),
            group_row("recv_halo".into(), [500, 0, 0, 0, 0, 0], 800),
            group_row(Value::Null, [0; 6], 10),
        ]
    );
    // Three ranks of a few calls have no phase: every operation is in the empty group.
    assert!(s.run("SELECT PHASES").unwrap().is_empty());
    let r = s.run("SELECT WAIT STATES GROUP BY PHASE").unwrap();
    assert_eq!(r.columns[0], "phase");
    assert_eq!(
        rows_of(&r),
        vec![group_row(Value::Null, [1100, 0, 70, 0, 0, 0], 1860)]
    );
}

#[test]
fn late_senders_list_each_message_a_receive_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = waits_session(&dir);
    let late = |id: u64, receiver: u64, tag: u64, size: u64, op: u64, name: &str, wait: u64| {
        vec![
            Value::from(id),
            0u64.into(),
            receiver.into(),
            tag.into(),
            size.into(),
            op.into(),
            name.into(),
            wait.into(),
        ]
    };
    let recv = late(0, 1, 1, 8, 1 << 16, "MPI_Recv", 500);
    let wait = late(1, 2, 2, 16, (2 << 16) + 1, "MPI_Wait", 600);
    let r = s.run("SELECT LATE SENDERS").unwrap();
    assert_eq!(
        r.columns,
        [
            "id",
            "sender",
            "receiver",
            "tag",
            "size",
            "waiting_op",
            "operation",
            "wait_ns"
        ]
    );
    assert_eq!(rows_of(&r), vec![recv.clone(), wait.clone()]);
    let r = s.run("SELECT LATE SENDERS ORDER BY WAIT DESC").unwrap();
    assert_eq!(rows_of(&r), vec![wait.clone(), recv.clone()]);
    let r = s
        .run("SELECT LATE SENDERS ORDER BY WAIT DESC LIMIT 1")
        .unwrap();
    assert_eq!(rows_of(&r), vec![wait.clone()]);
    // The clauses select the waiting operations.
    let r = s.run("SELECT LATE SENDERS FOR PROCESS(1)").unwrap();
    assert_eq!(rows_of(&r), vec![recv.clone()]);
    let r = s
        .run("SELECT LATE SENDERS BETWEEN TIME 920 ns AND 2000 ns")
        .unwrap();
    assert_eq!(rows_of(&r), vec![wait]);
    assert!(s
        .run("SELECT LATE SENDERS FOR PROCESS(0)")
        .unwrap()
        .is_empty());
}

#[test]
fn wait_is_a_column_and_a_field_of_operations_read_only_when_used() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = waits_session(&dir);
    // Without WAIT, operation rows are as they were and nothing is computed or stored.
    let r = s.run("SELECT OPERATIONS FOR PROCESS(1)").unwrap();
    assert!(!r.columns.iter().any(|c| c == "wait_ns"));
    let trace = s.database().trace("t").unwrap();
    let stored = |t: &mtfdb::Trace| {
        t.result::<mtfdb::analysis::waits::WaitStates>(mtfdb::analysis::waits::WAITS_KEY)
            .unwrap()
    };
    assert!(stored(&trace).is_none());
    let r = s.run("SELECT OPERATIONS WHERE WAIT > 50 ns").unwrap();
    let (id, wait) = (col(&r, "id"), col(&r, "wait_ns"));
    let got: Vec<(i64, i64)> = r
        .rows
        .iter()
        .map(|row| (int(&row[id]), int(&row[wait])))
        .collect();
    assert_eq!(got, vec![(2, 60), (1 << 16, 500), ((2 << 16) + 1, 600)]);
    // Stored once: the next statement reads them back.
    assert!(stored(&s.database().trace("t").unwrap()).is_some());
    // Time units as for DURATION; 0 for the operations that did not wait.
    let r = s.run("SELECT OPERATIONS WHERE WAIT >= 0.5 us").unwrap();
    assert_eq!(r.len(), 2);
    let r = s
        .run("SELECT COUNT(*) FROM OPERATIONS WHERE WAIT = 0")
        .unwrap();
    assert_eq!(int(&r.rows[0][0]), 5);
    // ORDER BY wait alone adds the column.
    let r = s
        .run("SELECT OPERATIONS FOR PROCESS(1) ORDER BY wait DESC LIMIT 1")
        .unwrap();
    assert_eq!(int(&r.rows[0][col(&r, "wait_ns")]), 500);
    // The streaming cursor has the column too.
    let rows = s.query("SELECT OPERATIONS WHERE WAIT > 500 ns").unwrap();
    assert_eq!(rows.columns().last().map(String::as_str), Some("wait_ns"));
    let waits: Vec<u64> = rows.map(|r| r.unwrap().get("wait_ns").unwrap()).collect();
    assert_eq!(waits, vec![600]);
    // Messages have no wait.
    let e = s.run("SELECT MESSAGES WHERE WAIT > 0").unwrap_err();
    assert!(
        e.to_string()
            .contains("WAIT is the waiting time of an operation"),
        "{e}"
    );
}

/// `gen --delay`: rank 5 computes 10 ms longer in iteration 6 of the 4x4 stencil; its four
/// mesh neighbours wait for it as late senders.
#[test]
fn an_injected_delay_shows_in_wait_states_and_late_senders() {
    use mtfdb::gen::Delay;
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    let config = GenConfig {
        delays: vec![Delay {
            rank: 5,
            iteration: 6,
            duration: 10_000_000,
        }],
        ..GenConfig::new(Scenario::Stencil2d, 16, 12)
    };
    db.import_events("t", |sink| generate(&config, sink).map(|_| ()))
        .unwrap();
    let mut s = Session::new(db);
    let r = s.run("SELECT WAIT STATES GROUP BY PROCESS").unwrap();
    let late = col(&r, "late_sender_ns");
    let waited: Vec<i64> = r
        .rows
        .iter()
        .filter(|row| int(&row[late]) >= 10_000_000)
        .map(|row| int(&row[0]))
        .collect();
    assert_eq!(waited, vec![1, 4, 6, 9]);
    // The message from rank 5 to each of them in iteration 6: the 7th of the 12 it sends.
    let mut expected = BTreeMap::new();
    for to in [1, 4, 6, 9] {
        let m = s
            .run(&format!(
                "SELECT ALL MESSAGES WHERE SENDER = 5 AND RECEIVER = {to} ORDER BY send_time_ns"
            ))
            .unwrap();
        assert_eq!(m.len(), 12, "one message from 5 to {to} per iteration");
        expected.insert(int(&m.rows[6][0]), to);
    }
    let r = s
        .run("SELECT LATE SENDERS ORDER BY WAIT DESC LIMIT 4")
        .unwrap();
    let got: BTreeMap<i64, i64> = r
        .rows
        .iter()
        .map(|row| {
            assert_eq!(int(&row[col(&r, "sender")]), 5);
            assert!(int(&row[col(&r, "wait_ns")]) >= 9_750_000, "{row:?}");
            (int(&row[0]), int(&row[col(&r, "receiver")]))
        })
        .collect();
    assert_eq!(got, expected);
    // Grouped by phase, the waits add up to the ungrouped total.
    let total = s.run("SELECT WAIT STATES").unwrap();
    let total_ns = int(&total.rows[6][2]);
    let by_phase = s.run("SELECT WAIT STATES GROUP BY PHASE").unwrap();
    let sum: i64 = by_phase
        .rows
        .iter()
        .map(|row| int(&row[col(&by_phase, "total_ns")]))
        .sum();
    assert_eq!(sum, total_ns);
}

// ---- limits past the input -------------------------------------------------------------------

/// `ORDER BY … LIMIT n` with n at or past 2^63 − 1 is the whole sorted answer, the same rows
/// in the same order as without the limit, on a trace of over 200,000 messages: the top-k's
/// bound (2n + 1024) once wrapped to 1022 there, so it sorted everything it held at every
/// row and took minutes on this many.
#[test]
fn order_by_with_a_limit_past_the_input_is_the_whole_sorted_answer() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    let config = GenConfig::new(Scenario::Ring, 64, 3200);
    db.import_events("ring", |sink| generate(&config, sink).map(|_| ()))
        .unwrap();
    let messages = db.trace("ring").unwrap().summary().messages;
    assert!(messages >= 200_000, "{messages} messages");
    let mut s = Session::new(db);
    s.run("USE TRACE ring").unwrap();
    for query in [
        "SELECT ALL MESSAGES ORDER BY size DESC, send_time_ns DESC",
        "SELECT ALL OPERATIONS ORDER BY duration_ns DESC",
        "SELECT LATE SENDERS ORDER BY WAIT DESC",
    ] {
        let whole = s.run(query).unwrap();
        assert!(whole.len() >= 1000, "{query}: {} rows", whole.len());
        for limit in ["9223372036854775807", "18446744073709551615"] {
            let limited = s.run(&format!("{query} LIMIT {limit}")).unwrap();
            assert!(limited == whole, "{query} LIMIT {limit}");
        }
        // A limit inside the input still cuts the same order.
        let five = s.run(&format!("{query} LIMIT 5")).unwrap();
        assert_eq!(five.rows, whole.rows[..5].to_vec(), "{query} LIMIT 5");
    }
}

// ---- means of huge values --------------------------------------------------------------------

/// `AVG(SIZE)` lies between `MIN(SIZE)` and `MAX(SIZE)` however large the sizes: two
/// messages of 2^64 − 1 bytes average exactly that (as a float it printed 2^64, more than
/// either), and a mean that is not whole is the float nearest it within the range.
#[test]
fn the_mean_of_the_largest_sizes_is_never_past_the_largest() {
    let dir = tempfile::tempdir().unwrap();
    let max = u64::MAX;
    let trace = format!(
        "MTF 1
processor 0 node0
process 0 P0 on 0
process 1 P1 on 0
communicator 0 world 0-1
0 10 20 Send c=0 to=1 tag=1 b={max}
0 30 40 Send c=0 to=1 tag=2 b={max}
0 50 60 Send c=0 to=1 tag=3 b={}
1 10 20 Recv c=0 from=0 rtag=1 rb={max}
1 30 40 Recv c=0 from=0 rtag=2 rb={max}
1 50 60 Recv c=0 from=0 rtag=3 rb={}
",
        max - 1,
        max - 1
    );
    let path = dir.path().join("t.mtf");
    std::fs::write(&path, trace).unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    db.import(&path, Some("t")).unwrap();
    let mut s = Session::new(db);
    let r = s
        .run("SELECT AVG(SIZE), MIN(SIZE), MAX(SIZE) FROM MESSAGES WHERE TAG <= 2")
        .unwrap();
    assert_eq!(r.rows[0][0].render(), max.to_string());
    assert_eq!(r.rows[0][2].render(), max.to_string());
    // Three sizes: the exact mean is 2^64 − 1 − 1/3, which no float holds; the one given is
    // no more than the largest size.
    let r = s
        .run("SELECT AVG(SIZE), MIN(SIZE), MAX(SIZE) FROM MESSAGES")
        .unwrap();
    let Value::Float(mean) = r.rows[0][0] else {
        panic!("{:?}", r.rows[0][0]);
    };
    assert!(
        (mean as u128) < u128::from(max),
        "{}",
        r.rows[0][0].render()
    );
    assert!(mean >= (max - 4096) as f64, "{}", r.rows[0][0].render());
    let rendered: u128 = r.rows[0][0]
        .render()
        .trim_end_matches(".0")
        .parse()
        .unwrap();
    assert!(rendered <= u128::from(max), "{rendered}");
    // Small sizes average as before, as floats.
    let r = s.run("SELECT AVG(DURATION) FROM OPERATIONS").unwrap();
    assert_eq!(r.rows[0][0].render(), "10.0");
}

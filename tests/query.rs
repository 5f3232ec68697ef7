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

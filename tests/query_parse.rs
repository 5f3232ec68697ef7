//! The query language's syntax: exact trees for the MTF paper's queries and every form of the
//! grammar, the grammar file's examples, exact error positions and messages, and canonical text
//! that parses back to the same tree.

use mtfdb::model::OpKind;
use mtfdb::query::ast::Value;
use mtfdb::query::*;

fn select(text: &str) -> Select {
    match parse_statement(text) {
        Ok(Statement::Select(s)) => s,
        other => panic!("{text}: expected a SELECT, got {other:?}"),
    }
}

/// The selection of a plain `SELECT <target> …` without ORDER BY or LIMIT.
fn rows(text: &str) -> Selection {
    let s = select(text);
    assert_eq!((s.order_by.len(), s.limit), (0, None), "{text}");
    match s.body {
        SelectBody::Rows(sel) => sel,
        other => panic!("{text}: expected rows, got {other:?}"),
    }
}

fn filter(text: &str) -> Filter {
    rows(text).filter
}

fn predicate(text: &str) -> Expr {
    filter(&format!("SELECT ALL MESSAGES WHERE {text}"))
        .predicate
        .expect("a predicate")
}

fn cmp(field: Field, op: CmpOp, n: u64) -> Expr {
    Expr::Compare(Comparison {
        field,
        op,
        value: Value::Number(n.into()),
    })
}

fn and(a: Expr, b: Expr) -> Expr {
    Expr::and(a, b)
}

fn or(a: Expr, b: Expr) -> Expr {
    Expr::or(a, b)
}

fn not(a: Expr) -> Expr {
    Expr::negate(a)
}

fn c1() -> Within {
    Within::Comm(CommRef::Name("C1".into()))
}

fn err(text: &str) -> QueryError {
    match parse_statement(text) {
        Err(e) => e,
        Ok(s) => panic!("{text}: expected an error, parsed {s:?}"),
    }
}

// ---- the five Figure 4 queries, verbatim -------------------------------------------------------

#[test]
fn figure4_queries_parse_to_exact_trees() {
    let expected = [
        (
            "SELECT ALL MESSAGES IN COMM(C1)",
            Selection {
                target: Target::Messages,
                filter: Filter {
                    within: vec![c1()],
                    ..Filter::default()
                },
            },
        ),
        (
            "SELECT ALL MESSAGES BETWEEN PROCESS(1,2) IN COMM(C1)",
            Selection {
                target: Target::Messages,
                filter: Filter {
                    scope: Some(Scope::Between(1, 2)),
                    within: vec![c1()],
                    ..Filter::default()
                },
            },
        ),
        (
            "SELECT POINT_TO_POINT_OPERATIONS BETWEEN PROCESS(1,2) IN COMM(C1)",
            Selection {
                target: Target::PointToPoint,
                filter: Filter {
                    scope: Some(Scope::Between(1, 2)),
                    within: vec![c1()],
                    ..Filter::default()
                },
            },
        ),
        (
            "SELECT COLLECTIVE_OPERATIONS AMONG ALL PROCESSES IN COMM(C1)",
            Selection {
                target: Target::Collectives,
                filter: Filter {
                    scope: Some(Scope::Among(ProcessSelector::All)),
                    within: vec![c1()],
                    ..Filter::default()
                },
            },
        ),
        (
            "SELECT BROADCAST FOR PROCESS(1) IN COMM(C1)",
            Selection {
                target: Target::Operation(OpKind::Bcast),
                filter: Filter {
                    scope: Some(Scope::For(ProcessSelector::Process(1))),
                    within: vec![c1()],
                    ..Filter::default()
                },
            },
        ),
    ];
    for (text, selection) in expected {
        assert_eq!(
            parse_statement(text).unwrap(),
            Statement::Select(Select {
                body: SelectBody::Rows(selection),
                order_by: vec![],
                limit: None,
            }),
            "{text}"
        );
    }
}

#[test]
fn keywords_are_case_insensitive_and_names_are_not() {
    assert_eq!(
        parse_statement("select all messages between process(1,2) in comm(C1)").unwrap(),
        parse_statement("SELECT ALL MESSAGES BETWEEN PROCESS(1,2) IN COMM(C1)").unwrap()
    );
    assert_eq!(
        parse_statement("Select Broadcast For Process(1) In Comm(C1)").unwrap(),
        parse_statement("SELECT BROADCAST FOR PROCESS(1) IN COMM(C1)").unwrap()
    );
    assert_eq!(
        filter("select all messages in comm(c1)").within,
        vec![Within::Comm(CommRef::Name("c1".into()))]
    );
    assert_eq!(
        rows("select mpi_isend").target,
        Target::Operation(OpKind::Isend)
    );
    assert_eq!(
        parse_statement("use trace WRF16").unwrap(),
        Statement::UseTrace("WRF16".into())
    );
}

#[test]
fn whitespace_newlines_comments_and_semicolon() {
    let text = "-- Figure 4, example 2\nSELECT ALL MESSAGES\n    BETWEEN PROCESS( 1 , 2 ) -- both ways\n\tIN COMM(C1) ;";
    assert_eq!(
        parse_statement(text).unwrap(),
        parse_statement("SELECT ALL MESSAGES BETWEEN PROCESS(1,2) IN COMM(C1)").unwrap()
    );
}

// ---- selectors ----------------------------------------------------------------------------------

#[test]
fn every_process_selector() {
    let scope = |text: &str| filter(&format!("SELECT OPERATIONS FOR {text}")).scope;
    let range = |first, last| RankRange { first, last };
    let cases = [
        ("PROCESS(0)", ProcessSelector::Process(0)),
        ("PROCESS(15)", ProcessSelector::Process(15)),
        ("PROCESSES(3-6)", ProcessSelector::List(vec![range(3, 6)])),
        (
            "PROCESSES(1,4,7)",
            ProcessSelector::List(vec![range(1, 1), range(4, 4), range(7, 7)]),
        ),
        (
            "PROCESSES(1,3-5)",
            ProcessSelector::List(vec![range(1, 1), range(3, 5)]),
        ),
        ("PROCESSES(5)", ProcessSelector::List(vec![range(5, 5)])),
        ("PROCESSES(4-4)", ProcessSelector::List(vec![range(4, 4)])),
        (
            "PROCESS(1,2)",
            ProcessSelector::List(vec![range(1, 1), range(2, 2)]),
        ),
        ("ALL PROCESSES", ProcessSelector::All),
        (
            "PROCESSES IN COMM(C1)",
            ProcessSelector::InComm(CommRef::Name("C1".into())),
        ),
        (
            "PROCESSES IN COMM(7)",
            ProcessSelector::InComm(CommRef::Id(7)),
        ),
        (
            "processes in comm(world)",
            ProcessSelector::InComm(CommRef::World),
        ),
    ];
    for (text, selector) in cases {
        assert_eq!(scope(text), Some(Scope::For(selector)), "{text}");
    }
}

#[test]
fn communicator_references() {
    let within = |text: &str| filter(&format!("SELECT ALL MESSAGES IN {text}")).within;
    assert_eq!(within("COMM(C1)"), vec![c1()]);
    assert_eq!(within("COMM(3)"), vec![Within::Comm(CommRef::Id(3))]);
    assert_eq!(within("COMM(WORLD)"), vec![Within::Comm(CommRef::World)]);
    assert_eq!(
        within("COMM(MPI_COMM_WORLD)"),
        vec![Within::Comm(CommRef::World)]
    );
    assert_eq!(
        within("COMM(mpi_comm_world)"),
        vec![Within::Comm(CommRef::World)]
    );
    assert_eq!(
        within("COMM('world')"),
        vec![Within::Comm(CommRef::Name("world".into()))]
    );
    assert_eq!(
        within("COMM(\"row comm\")"),
        vec![Within::Comm(CommRef::Name("row comm".into()))]
    );
    assert_eq!(
        within("COMM(C1) IN VIEW hot IN PHASE 3 IN PATTERN 12"),
        vec![
            c1(),
            Within::View("hot".into()),
            Within::Phase(3),
            Within::Pattern(12)
        ]
    );
}

// ---- targets ------------------------------------------------------------------------------------

#[test]
fn every_target() {
    let cases = [
        ("ALL MESSAGES", Target::Messages),
        ("MESSAGES", Target::Messages),
        ("POINT_TO_POINT_OPERATIONS", Target::PointToPoint),
        ("ALL POINT_TO_POINT_OPERATIONS", Target::PointToPoint),
        ("SENDS", Target::Sends),
        ("RECEIVES", Target::Receives),
        ("COLLECTIVE_OPERATIONS", Target::Collectives),
        ("OPERATIONS", Target::Operations),
        ("ALL OPERATIONS", Target::Operations),
        ("BROADCAST", Target::Operation(OpKind::Bcast)),
        ("BCAST", Target::Operation(OpKind::Bcast)),
        ("BARRIER", Target::Operation(OpKind::Barrier)),
        ("GATHER", Target::Operation(OpKind::Gather)),
        ("SCATTER", Target::Operation(OpKind::Scatter)),
        ("REDUCE", Target::Operation(OpKind::Reduce)),
        ("ALLREDUCE", Target::Operation(OpKind::Allreduce)),
        ("ALLGATHER", Target::Operation(OpKind::Allgather)),
        ("ALLTOALL", Target::Operation(OpKind::Alltoall)),
        ("SCAN", Target::Operation(OpKind::Scan)),
        ("REDUCE_SCATTER", Target::Operation(OpKind::ReduceScatter)),
        ("GATHERV", Target::Operation(OpKind::Gatherv)),
        ("SCATTERV", Target::Operation(OpKind::Scatterv)),
        ("IBCAST", Target::Operation(OpKind::Ibcast)),
        ("MPI_Isend", Target::Operation(OpKind::Isend)),
        ("MPI_ISEND", Target::Operation(OpKind::Isend)),
        ("mpi_waitall", Target::Operation(OpKind::Waitall)),
        ("MPI_Comm_split", Target::Operation(OpKind::CommSplit)),
        ("MPI_Ialltoallw", Target::Operation(OpKind::Ialltoallw)),
        ("CPU BURSTS", Target::CpuBursts),
        ("ROUTINE CALLS", Target::RoutineCalls),
        ("routine calls", Target::RoutineCalls),
        ("REQUESTS", Target::Requests),
        ("COLLECTIVE INSTANCES", Target::CollectiveInstances),
        ("ALL COLLECTIVE INSTANCES", Target::CollectiveInstances),
        ("ANOMALIES", Target::Anomalies),
    ];
    for (text, target) in cases {
        assert_eq!(rows(&format!("SELECT {text}")).target, target, "{text}");
    }
}

#[test]
fn the_record_targets_take_every_clause_and_their_fields() {
    let s = select(
        "SELECT SUM(DURATION), SUM(SENT), MAX(RECEIVED) FROM ROUTINE CALLS FOR PROCESSES(0-3) \
         BETWEEN TIME 1 ms AND 2 ms WHERE DEPTH >= 1 AND SKEW > 2 us AND MEMBERS != 4 \
         AND SENT > 1 KiB AND RECEIVED <= 2 KiB GROUP BY ROUTINE, CLASS ORDER BY 1 LIMIT 3",
    );
    let SelectBody::Aggregate {
        aggregates,
        selection,
        group_by,
    } = &s.body
    else {
        panic!("{s:?}")
    };
    assert_eq!(
        aggregates,
        &[
            Aggregate::Sum(Measure::Duration),
            Aggregate::Sum(Measure::Sent),
            Aggregate::Max(Measure::Received)
        ]
    );
    assert_eq!(selection.target, Target::RoutineCalls);
    assert_eq!(group_by, &[GroupKey::Routine, GroupKey::Class]);
    assert_eq!(
        selection.filter.predicate,
        Some(Expr::And(vec![
            cmp(Field::Depth, CmpOp::Ge, 1),
            cmp(Field::Skew, CmpOp::Gt, 2_000),
            cmp(Field::Members, CmpOp::Ne, 4),
            cmp(Field::Sent, CmpOp::Gt, 1024),
            cmp(Field::Received, CmpOp::Le, 2048),
        ]))
    );
    assert_eq!(
        s.to_string(),
        "SELECT SUM(DURATION), SUM(SENT), MAX(RECEIVED) FROM ROUTINE CALLS FOR PROCESSES(0-3) \
         BETWEEN TIME 1 ms AND 2 ms WHERE DEPTH >= 1 AND SKEW > 2 us AND MEMBERS != 4 \
         AND SENT > 1 KiB AND RECEIVED <= 2 KiB GROUP BY ROUTINE, CLASS ORDER BY 1 LIMIT 3"
    );
    assert_eq!(
        err("SELECT SUM(DEPTH) FROM ROUTINE CALLS").message,
        "SUM needs SIZE, DURATION, SENT, RECEIVED or a counter of the trace (SELECT METRICS lists them), found \"DEPTH\""
    );
    assert_eq!(
        err("SELECT ROUTINE").message,
        "expected what to select after SELECT (MESSAGES, OPERATIONS, SENDS, RECEIVES, \
         POINT_TO_POINT_OPERATIONS, COLLECTIVE_OPERATIONS, CPU BURSTS, ROUTINE CALLS, REQUESTS, \
         COLLECTIVE INSTANCES, ANOMALIES, METRICS, a collective such as BROADCAST, or an MPI name such as \
         MPI_Isend; SHOW TABLES lists them), found \"ROUTINE\""
    );
}

#[test]
fn every_operation_kind_by_its_mpi_name() {
    for kind in OpKind::ALL {
        let name = kind.mpi_name().unwrap();
        assert_eq!(
            rows(&format!("SELECT {name}")).target,
            Target::Operation(*kind)
        );
        if kind.is_collective() {
            assert_eq!(
                rows(&format!("SELECT {}", &name[4..])).target,
                Target::Operation(*kind),
                "{name} without MPI_"
            );
        }
    }
}

// ---- scopes, time windows, units ------------------------------------------------------------------

#[test]
fn every_scope() {
    let scope = |text: &str| filter(&format!("SELECT ALL MESSAGES {text}")).scope;
    assert_eq!(scope("BETWEEN PROCESS(1,2)"), Some(Scope::Between(1, 2)));
    assert_eq!(scope("BETWEEN PROCESSES(4, 0)"), Some(Scope::Between(4, 0)));
    assert_eq!(
        scope("AMONG PROCESSES(0-3)"),
        Some(Scope::Among(ProcessSelector::List(vec![RankRange {
            first: 0,
            last: 3
        }])))
    );
    assert_eq!(
        scope("FOR ALL PROCESSES"),
        Some(Scope::For(ProcessSelector::All))
    );
    assert_eq!(scope(""), None);
}

#[test]
fn time_windows_in_nanoseconds() {
    let time = |text: &str| {
        filter(&format!("SELECT ALL MESSAGES BETWEEN TIME {text}"))
            .time
            .map(|w| (w.start, w.end))
    };
    assert_eq!(time("0.5 AND 1.2"), Some((500_000_000, 1_200_000_000)));
    assert_eq!(time("500 ms AND 1.2 s"), Some((500_000_000, 1_200_000_000)));
    assert_eq!(time("500ms AND 1.2s"), Some((500_000_000, 1_200_000_000)));
    assert_eq!(time("(0.5, 1.2)"), Some((500_000_000, 1_200_000_000)));
    assert_eq!(time("(500 ms, 1.2 s)"), Some((500_000_000, 1_200_000_000)));
    assert_eq!(time("250 us AND 900000 ns"), Some((250_000, 900_000)));
    assert_eq!(
        time("1.5us AND 2.000000001 s"),
        Some((1_500, 2_000_000_001))
    );
    assert_eq!(time("0 AND 0"), Some((0, 0)));
    assert_eq!(time("7 AND 7 s"), Some((7_000_000_000, 7_000_000_000)));
    assert_eq!(
        time("18446744073 AND 18446744073.709551615"),
        Some((18_446_744_073_000_000_000, u64::MAX))
    );
}

#[test]
fn size_units() {
    let size = |text: &str| predicate(&format!("SIZE > {text}"));
    let cases = [
        ("1024", 1024),
        ("1024 B", 1024),
        ("1 KiB", 1024),
        ("1KiB", 1024),
        ("1.5 KiB", 1536),
        ("2 MiB", 2 << 20),
        ("3 GiB", 3 << 30),
        ("1 KB", 1_000),
        ("2.5 MB", 2_500_000),
        ("4 GB", 4_000_000_000),
        ("0", 0),
    ];
    for (text, bytes) in cases {
        assert_eq!(size(text), cmp(Field::Size, CmpOp::Gt, bytes), "{text}");
    }
}

#[test]
fn every_predicate_form() {
    let cases = [
        ("SIZE < 10", cmp(Field::Size, CmpOp::Lt, 10)),
        ("SIZE <= 10", cmp(Field::Size, CmpOp::Le, 10)),
        ("SIZE = 10", cmp(Field::Size, CmpOp::Eq, 10)),
        ("SIZE != 10", cmp(Field::Size, CmpOp::Ne, 10)),
        ("SIZE <> 10", cmp(Field::Size, CmpOp::Ne, 10)),
        ("SIZE >= 10", cmp(Field::Size, CmpOp::Ge, 10)),
        ("SIZE>10", cmp(Field::Size, CmpOp::Gt, 10)),
        ("TAG = 7", cmp(Field::Tag, CmpOp::Eq, 7)),
        ("SENDER = 1", cmp(Field::Sender, CmpOp::Eq, 1)),
        ("RECEIVER != 2", cmp(Field::Receiver, CmpOp::Ne, 2)),
        (
            "DURATION > 10 ms",
            cmp(Field::Duration, CmpOp::Gt, 10_000_000),
        ),
        (
            "DURATION > 1.5",
            cmp(Field::Duration, CmpOp::Gt, 1_500_000_000),
        ),
        ("DURATION < 30us", cmp(Field::Duration, CmpOp::Lt, 30_000)),
        ("PEER = 4", cmp(Field::Peer, CmpOp::Eq, 4)),
        ("ROOT = 0", cmp(Field::Root, CmpOp::Eq, 0)),
        (
            "COMM = C1",
            Expr::Compare(Comparison {
                field: Field::Comm,
                op: CmpOp::Eq,
                value: Value::Comm(CommRef::Name("C1".into())),
            }),
        ),
        (
            "COMM != WORLD",
            Expr::Compare(Comparison {
                field: Field::Comm,
                op: CmpOp::Ne,
                value: Value::Comm(CommRef::World),
            }),
        ),
        (
            "comm = 2",
            Expr::Compare(Comparison {
                field: Field::Comm,
                op: CmpOp::Eq,
                value: Value::Comm(CommRef::Id(2)),
            }),
        ),
    ];
    for (text, expr) in cases {
        assert_eq!(predicate(text), expr, "{text}");
    }
}

#[test]
fn not_binds_tighter_than_and_which_binds_tighter_than_or() {
    let a = || cmp(Field::Tag, CmpOp::Eq, 1);
    let b = || cmp(Field::Tag, CmpOp::Eq, 2);
    let c = || cmp(Field::Tag, CmpOp::Eq, 3);
    assert_eq!(
        predicate("TAG = 1 OR TAG = 2 AND TAG = 3"),
        or(a(), and(b(), c()))
    );
    assert_eq!(
        predicate("TAG = 1 AND TAG = 2 OR TAG = 3"),
        or(and(a(), b()), c())
    );
    assert_eq!(predicate("NOT TAG = 1 AND TAG = 2"), and(not(a()), b()));
    assert_eq!(predicate("NOT (TAG = 1 AND TAG = 2)"), not(and(a(), b())));
    assert_eq!(
        predicate("(TAG = 1 OR TAG = 2) AND TAG = 3"),
        and(or(a(), b()), c())
    );
    assert_eq!(
        predicate("TAG = 1 AND TAG = 2 AND TAG = 3"),
        and(and(a(), b()), c())
    );
    assert_eq!(
        predicate("TAG = 1 OR TAG = 2 OR TAG = 3"),
        or(or(a(), b()), c())
    );
    assert_eq!(predicate("NOT NOT TAG = 1"), not(not(a())));
    assert_eq!(
        predicate("TAG = 1 OR NOT TAG = 2 AND TAG = 3"),
        or(a(), and(not(b()), c()))
    );
}

#[test]
fn clauses_come_in_any_order() {
    let expected = Filter {
        scope: Some(Scope::For(ProcessSelector::Process(0))),
        within: vec![c1()],
        time: Some(TimeWindow {
            start: 0,
            end: 2_000_000_000,
        }),
        predicate: Some(cmp(Field::Size, CmpOp::Gt, 1024)),
        clock: ClockCorrection::None,
    };
    let parts = [
        "FOR PROCESS(0)",
        "IN COMM(C1)",
        "BETWEEN TIME 0 AND 2",
        "WHERE SIZE > 1 KiB",
    ];
    // Every permutation of the four clauses.
    let mut count = 0;
    for i in 0..4 {
        for j in 0..4 {
            for k in 0..4 {
                for l in 0..4 {
                    let mut idx = [i, j, k, l];
                    idx.sort_unstable();
                    if idx != [0, 1, 2, 3] {
                        continue;
                    }
                    let text = format!(
                        "SELECT ALL MESSAGES {} {} {} {}",
                        parts[i], parts[j], parts[k], parts[l]
                    );
                    assert_eq!(filter(&text), expected, "{text}");
                    count += 1;
                }
            }
        }
    }
    assert_eq!(count, 24);
}

// ---- statistics, aggregates, ordering --------------------------------------------------------------

#[test]
fn statistics_statements() {
    let stat = |text: &str| match select(text).body {
        SelectBody::Statistic {
            statistic,
            target,
            filter,
        } => (statistic, target, filter),
        other => panic!("{text}: {other:?}"),
    };
    let all = Filter {
        scope: Some(Scope::For(ProcessSelector::All)),
        ..Filter::default()
    };
    assert_eq!(
        stat("SELECT FAN_IN FOR ALL PROCESSES"),
        (Statistic::FanIn, None, all.clone())
    );
    assert_eq!(
        stat("SELECT FAN_OUT"),
        (Statistic::FanOut, None, Filter::default())
    );
    assert_eq!(stat("SELECT fan-in").0, Statistic::FanIn);
    assert_eq!(
        stat("SELECT STATISTICS FOR ALL PROCESSES"),
        (Statistic::Statistics, None, all)
    );
    assert_eq!(
        stat("SELECT COMMUNICATION MATRIX").0,
        Statistic::Matrix(MatrixMeasure::Bytes)
    );
    assert_eq!(
        stat("SELECT COMMUNICATION MATRIX OF COUNT IN COMM(C1)"),
        (
            Statistic::Matrix(MatrixMeasure::Count),
            None,
            Filter {
                within: vec![c1()],
                ..Filter::default()
            }
        )
    );
    assert_eq!(
        stat("SELECT COMMUNICATION MATRIX OF BYTES FROM SENDS").1,
        Some(Target::Sends)
    );
    assert_eq!(
        stat("SELECT HISTOGRAM OF SIZE").0,
        Statistic::Histogram {
            of: Measure::Size,
            bins: Bins::Log2
        }
    );
    assert_eq!(
        stat("SELECT HISTOGRAM OF SIZE BINS 20 MESSAGES FOR PROCESS(3)"),
        (
            Statistic::Histogram {
                of: Measure::Size,
                bins: Bins::Count(20)
            },
            Some(Target::Messages),
            Filter {
                scope: Some(Scope::For(ProcessSelector::Process(3))),
                ..Filter::default()
            }
        )
    );
    assert_eq!(
        stat("SELECT HISTOGRAM OF DURATION LOG2 FROM MPI_Wait").1,
        Some(Target::Operation(OpKind::Wait))
    );
    assert_eq!(
        stat("SELECT MPI TIME FOR PROCESSES(0-3)").0,
        Statistic::MpiTime
    );
}

#[test]
fn aggregates_group_by_order_by_limit() {
    let s = select("SELECT COUNT(*), SUM(SIZE) MESSAGES FOR ALL PROCESSES GROUP BY PEER");
    let expected_body = SelectBody::Aggregate {
        aggregates: vec![Aggregate::Count, Aggregate::Sum(Measure::Size)],
        selection: Selection {
            target: Target::Messages,
            filter: Filter {
                scope: Some(Scope::For(ProcessSelector::All)),
                ..Filter::default()
            },
        },
        group_by: vec![GroupKey::Peer],
    };
    assert_eq!(s.body, expected_body);
    assert_eq!(
        select("SELECT COUNT(*), SUM(SIZE) FROM MESSAGES FOR ALL PROCESSES GROUP BY PEER").body,
        expected_body
    );
    let s = select(
        "SELECT AVG(SIZE), MIN(DURATION), MAX(SIZE), AVG(DURATION) FROM SENDS \
         GROUP BY PROCESS, OPERATION, TAG, COMM ORDER BY SUM(SIZE) DESC, tag, 2 ASC LIMIT 10",
    );
    assert_eq!(
        s,
        Select {
            body: SelectBody::Aggregate {
                aggregates: vec![
                    Aggregate::Avg(Measure::Size),
                    Aggregate::Min(Measure::Duration),
                    Aggregate::Max(Measure::Size),
                    Aggregate::Avg(Measure::Duration),
                ],
                selection: Selection {
                    target: Target::Sends,
                    filter: Filter::default(),
                },
                group_by: vec![
                    GroupKey::Process,
                    GroupKey::Operation,
                    GroupKey::Tag,
                    GroupKey::Comm
                ],
            },
            order_by: vec![
                OrderKey {
                    column: OrderColumn::Aggregate(Aggregate::Sum(Measure::Size)),
                    descending: true
                },
                OrderKey {
                    column: OrderColumn::Name("tag".into()),
                    descending: false
                },
                OrderKey {
                    column: OrderColumn::Position(2),
                    descending: false
                },
            ],
            limit: Some(10),
        }
    );
    let s = select("SELECT ALL MESSAGES ORDER BY Size DESC LIMIT 5");
    assert_eq!(
        s.order_by,
        vec![OrderKey {
            column: OrderColumn::Name("size".into()),
            descending: true
        }]
    );
    assert_eq!(s.limit, Some(5));
    assert_eq!(select("SELECT FAN_IN LIMIT 0").limit, Some(0));
}

#[test]
fn other_statements() {
    let cases = [
        ("SHOW TRACES", Statement::Show(ShowWhat::Traces)),
        ("show processes", Statement::Show(ShowWhat::Processes)),
        (
            "SHOW COMMUNICATORS",
            Statement::Show(ShowWhat::Communicators),
        ),
        ("SHOW OPERATIONS", Statement::Show(ShowWhat::Operations)),
        ("SHOW VIEWS;", Statement::Show(ShowWhat::Views)),
        ("show tables", Statement::Show(ShowWhat::Tables)),
        (
            "DESCRIBE ROUTINE CALLS",
            Statement::Describe(Target::RoutineCalls),
        ),
        ("describe requests;", Statement::Describe(Target::Requests)),
        (
            "DESCRIBE collective instances",
            Statement::Describe(Target::CollectiveInstances),
        ),
        ("DESCRIBE ANOMALIES", Statement::Describe(Target::Anomalies)),
        (
            "DESCRIBE MPI_Isend",
            Statement::Describe(Target::Operation(OpKind::Isend)),
        ),
        ("USE TRACE wrf16", Statement::UseTrace("wrf16".into())),
        (
            "USE TRACE 'my trace'",
            Statement::UseTrace("my trace".into()),
        ),
        ("DROP VIEW big", Statement::DropView("big".into())),
        (
            "CREATE VIEW big AS SELECT ALL MESSAGES WHERE SIZE > 1 MiB",
            Statement::CreateView {
                name: "big".into(),
                selection: Selection {
                    target: Target::Messages,
                    filter: Filter {
                        predicate: Some(cmp(Field::Size, CmpOp::Gt, 1 << 20)),
                        ..Filter::default()
                    },
                },
            },
        ),
        (
            "EXPLAIN SELECT FAN_IN LIMIT 3",
            Statement::Explain(Select {
                body: SelectBody::Statistic {
                    statistic: Statistic::FanIn,
                    target: None,
                    filter: Filter::default(),
                },
                order_by: vec![],
                limit: Some(3),
            }),
        ),
    ];
    for (text, statement) in cases {
        assert_eq!(parse_statement(text).unwrap(), statement, "{text}");
    }
}

// ---- the grammar's examples -----------------------------------------------------------------------

fn grammar_examples() -> Vec<&'static str> {
    let grammar = include_str!("../grammar/query.ebnf");
    let begin = grammar
        .find("BEGIN EXAMPLES")
        .expect("BEGIN EXAMPLES marker");
    let end = grammar.find("END EXAMPLES").expect("END EXAMPLES marker");
    grammar[begin..end]
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("--"))
        .collect()
}

#[test]
fn every_grammar_example_parses() {
    let examples = grammar_examples();
    assert!(examples.len() >= 80, "{} examples", examples.len());
    for text in &examples {
        if let Err(e) = parse_statement(text) {
            panic!("grammar example does not parse:\n{e}");
        }
    }
    // The Figure 4 queries open the block, verbatim.
    assert_eq!(
        &examples[..5],
        &[
            "SELECT ALL MESSAGES IN COMM(C1)",
            "SELECT ALL MESSAGES BETWEEN PROCESS(1,2) IN COMM(C1)",
            "SELECT POINT_TO_POINT_OPERATIONS BETWEEN PROCESS(1,2) IN COMM(C1)",
            "SELECT COLLECTIVE_OPERATIONS AMONG ALL PROCESSES IN COMM(C1)",
            "SELECT BROADCAST FOR PROCESS(1) IN COMM(C1)",
        ]
    );
}

#[test]
fn canonical_text_parses_back_to_the_same_tree() {
    for text in grammar_examples() {
        let ast = parse_statement(text).unwrap();
        let canonical = ast.to_string();
        assert_eq!(
            parse_statement(&canonical).unwrap(),
            ast,
            "{text}\n  printed as {canonical}"
        );
        // Canonical text is a fixed point.
        assert_eq!(parse_statement(&canonical).unwrap().to_string(), canonical);
    }
}

#[test]
fn canonical_text_samples() {
    let canon = |text: &str| parse_statement(text).unwrap().to_string();
    assert_eq!(
        canon("select all messages between process(1,2) in comm(C1)"),
        "SELECT ALL MESSAGES BETWEEN PROCESS(1,2) IN COMM(C1)"
    );
    assert_eq!(
        canon("SELECT MESSAGES BETWEEN TIME 500 ms AND 1.2 s WHERE SIZE > 1536 OR TAG = 3 AND NOT SIZE < 1 MiB"),
        "SELECT ALL MESSAGES BETWEEN TIME 500 ms AND 1200 ms WHERE SIZE > 1536 OR TAG = 3 AND NOT SIZE < 1 MiB"
    );
    assert_eq!(
        canon("SELECT MESSAGES WHERE (TAG = 1 OR TAG = 2) AND TAG = 3"),
        "SELECT ALL MESSAGES WHERE (TAG = 1 OR TAG = 2) AND TAG = 3"
    );
    assert_eq!(
        canon("SELECT count(*),sum(size) messages group by peer"),
        "SELECT COUNT(*), SUM(SIZE) FROM ALL MESSAGES GROUP BY PEER"
    );
    assert_eq!(
        canon("SELECT broadcast in comm('world') in comm(world)"),
        "SELECT MPI_Bcast IN COMM('world') IN COMM(WORLD)"
    );
    assert_eq!(
        canon("CREATE VIEW \"it's\" AS SELECT SENDS"),
        "CREATE VIEW \"it's\" AS SELECT SENDS"
    );
}

#[test]
fn serde_round_trip() {
    for text in grammar_examples() {
        let ast = parse_statement(text).unwrap();
        let json = serde_json::to_string(&ast).unwrap();
        let back: Statement = serde_json::from_str(&json).unwrap();
        assert_eq!(back, ast, "{text}");
    }
}

// ---- scripts ----------------------------------------------------------------------------------------

#[test]
fn scripts_split_on_semicolons_outside_quotes_and_comments() {
    let script =
        "USE TRACE 'a;b';\n-- next; one\nSELECT FAN_IN\n  FOR ALL PROCESSES;\n\n;SHOW VIEWS";
    let parsed = parse_script(script).unwrap();
    let texts: Vec<&str> = parsed.iter().map(|(_, r)| &script[r.clone()]).collect();
    assert_eq!(
        texts,
        vec![
            "USE TRACE 'a;b'",
            "-- next; one\nSELECT FAN_IN\n  FOR ALL PROCESSES",
            "SHOW VIEWS"
        ]
    );
    assert_eq!(parsed[0].0, Statement::UseTrace("a;b".into()));
    assert_eq!(parsed[2].0, Statement::Show(ShowWhat::Views));
    assert_eq!(parse_script("  ;; -- nothing\n").unwrap(), vec![]);

    let e = parse_script("SHOW TRACES; SELECT ALL MESSAGES\nWHERE SIZE > 1 kb;").unwrap_err();
    assert_eq!((e.line, e.column), (2, 16));
    assert_eq!(e.statement, "SELECT ALL MESSAGES\nWHERE SIZE > 1 kb");
}

// ---- errors -------------------------------------------------------------------------------------------

const TARGET_HELP: &str = "MESSAGES, OPERATIONS, SENDS, RECEIVES, POINT_TO_POINT_OPERATIONS, \
     COLLECTIVE_OPERATIONS, CPU BURSTS, ROUTINE CALLS, REQUESTS, COLLECTIVE INSTANCES, ANOMALIES, METRICS, \
     a collective such as BROADCAST, or an MPI name such as MPI_Isend; SHOW TABLES lists them";

#[test]
fn wait_statements_parse_with_their_clauses_in_any_order() {
    let stat = |text: &str| match parse_statement(text).unwrap() {
        Statement::Select(Select {
            body: SelectBody::Statistic {
                statistic, filter, ..
            },
            order_by,
            limit,
        }) => (statistic, filter, order_by, limit),
        other => panic!("{text}: {other:?}"),
    };
    let (statistic, filter, ..) =
        stat("SELECT WAIT STATES FOR PROCESS(1) GROUP BY ROUTINE IN PHASE 2 BETWEEN TIME 1 AND 2");
    assert_eq!(statistic, Statistic::WaitStates(Some(WaitGroup::Routine)));
    assert_eq!(filter.scope, Some(Scope::For(ProcessSelector::Process(1))));
    assert_eq!(filter.within, vec![Within::Phase(2)]);
    assert_eq!(
        filter.time,
        Some(TimeWindow {
            start: 1_000_000_000,
            end: 2_000_000_000
        })
    );
    assert_eq!(stat("select wait states").0, Statistic::WaitStates(None));
    let (statistic, _, order_by, limit) = stat("SELECT LATE SENDERS ORDER BY WAIT DESC LIMIT 4");
    assert_eq!(statistic, Statistic::LateSenders);
    assert_eq!(
        order_by,
        vec![OrderKey {
            column: OrderColumn::Name("wait".into()),
            descending: true
        }]
    );
    assert_eq!(limit, Some(4));
    let Statement::Select(s) = parse_statement("SELECT OPERATIONS WHERE WAIT > 1 ms").unwrap()
    else {
        panic!()
    };
    let SelectBody::Rows(sel) = &s.body else {
        panic!()
    };
    assert_eq!(
        sel.filter.predicate,
        Some(Expr::Compare(Comparison {
            field: Field::Wait,
            op: CmpOp::Gt,
            value: Value::Number(1_000_000)
        }))
    );
    assert_eq!(s.to_string(), "SELECT OPERATIONS WHERE WAIT > 1 ms");
    let errors = [
        ("SELECT WAIT STATES GROUP BY TAG", 29, "expected PROCESS, OPERATION, ROUTINE or PHASE after WAIT STATES GROUP BY, found \"TAG\""),
        ("SELECT WAIT STATES GROUP BY PROCESS GROUP BY PHASE", 37, "only one GROUP BY may be given"),
        ("SELECT LATE SENDERS GROUP BY PROCESS", 21, "GROUP BY needs aggregates: SELECT COUNT(*), SUM(SIZE) FROM … GROUP BY …"),
        ("SELECT LATE RECEIVERS", 13, "expected SENDERS after LATE, found \"RECEIVERS\""),
        ("SELECT OPERATIONS WHERE WAIT > 1 kb", 34, "unknown time unit \"kb\" (use ns, us, ms, s)"),
    ];
    for (text, column, message) in errors {
        let e = parse_statement(text).unwrap_err();
        assert_eq!((e.column, e.message.as_str()), (column, message), "{text}");
    }
}

#[test]
fn clock_correction_is_an_option_of_what_reads_wait_states() {
    let clock = |text: &str| -> ClockCorrection {
        match parse_statement(text) {
            Ok(Statement::Select(s)) | Ok(Statement::Explain(s)) => s.body.filter().clock,
            Ok(Statement::CreateView { selection, .. }) => selection.filter.clock,
            Ok(Statement::Analysis(ast::Analysis::CriticalPath { clock, .. })) => clock,
            other => panic!("{text}: {other:?}"),
        }
    };
    // Among the clauses, in any order and any case; a name in any case.
    assert_eq!(
        clock("SELECT WAIT STATES WITH CLOCK CORRECTION offsets"),
        ClockCorrection::Offsets
    );
    assert_eq!(
        clock("SELECT WAIT STATES with clock correction CLC GROUP BY PROCESS FOR PROCESS(1)"),
        ClockCorrection::Clc
    );
    assert_eq!(
        clock("SELECT LATE SENDERS FOR PROCESS(1) WITH CLOCK CORRECTION interpolate ORDER BY WAIT DESC LIMIT 4"),
        ClockCorrection::Interpolate
    );
    assert_eq!(
        clock("SELECT COUNT(*) FROM OPERATIONS WHERE WAIT > 1 us WITH CLOCK CORRECTION offsets GROUP BY PROCESS"),
        ClockCorrection::Offsets
    );
    assert_eq!(
        clock("SELECT OPERATIONS WITH CLOCK CORRECTION offsets ORDER BY wait DESC"),
        ClockCorrection::Offsets
    );
    assert_eq!(
        clock("CREATE VIEW w AS SELECT OPERATIONS WHERE WAIT > 0 WITH CLOCK CORRECTION offsets"),
        ClockCorrection::Offsets
    );
    assert_eq!(
        clock("SELECT CRITICAL PATH SUMMARY WITH CLOCK CORRECTION offsets"),
        ClockCorrection::Offsets
    );
    assert_eq!(
        clock("SELECT WAIT STATES WITH CLOCK CORRECTION none"),
        ClockCorrection::None
    );
    assert_eq!(clock("SELECT WAIT STATES"), ClockCorrection::None);
    // Canonical text names it after the other clauses; `none` is the default, not printed.
    for (text, canonical) in [
        (
            "SELECT WAIT STATES WITH CLOCK CORRECTION offsets GROUP BY PROCESS FOR PROCESS(1)",
            "SELECT WAIT STATES GROUP BY PROCESS FOR PROCESS(1) WITH CLOCK CORRECTION OFFSETS",
        ),
        (
            "SELECT COUNT(*) FROM OPERATIONS WITH CLOCK CORRECTION clc WHERE WAIT > 1 us",
            "SELECT COUNT(*) FROM OPERATIONS WHERE WAIT > 1 us WITH CLOCK CORRECTION CLC",
        ),
        (
            "SELECT CRITICAL PATH WITH CLOCK CORRECTION interpolate",
            "SELECT CRITICAL PATH WITH CLOCK CORRECTION INTERPOLATE",
        ),
        (
            "SELECT WAIT STATES WITH CLOCK CORRECTION none",
            "SELECT WAIT STATES",
        ),
    ] {
        let ast = parse_statement(text).unwrap();
        assert_eq!(ast.to_string(), canonical, "{text}");
        assert_eq!(parse_statement(canonical).unwrap(), ast, "{canonical}");
    }
    let refused = "WITH CLOCK CORRECTION sets the clocks wait states are computed on, and this \
         statement reads none: it applies to WAIT STATES, LATE SENDERS and to a selection of \
         operations that reads WAIT (in WHERE or ORDER BY)";
    let errors = [
        ("SELECT WAIT STATES WITH CLOCK CORRECTION ntp", 42, "unknown clock correction \"ntp\": none, offsets, interpolate or clc"),
        ("SELECT CRITICAL PATH WITH CLOCK CORRECTION ntp", 44, "unknown clock correction \"ntp\": none, offsets, interpolate or clc"),
        ("SELECT WAIT STATES WITH CLOCK CORRECTION", 41, "expected a clock correction after CLOCK CORRECTION (none, offsets, interpolate, clc), found end of statement"),
        ("SELECT WAIT STATES WITH CLOCK offsets", 31, "expected CORRECTION after CLOCK, found \"offsets\""),
        ("SELECT WAIT STATES WITH TANDEMS OFF", 25, "expected CLOCK CORRECTION after WITH, found \"TANDEMS\""),
        ("SELECT WAIT STATES WITH CLOCK CORRECTION clc WITH CLOCK CORRECTION none", 46, "only one WITH may be given"),
        ("SELECT WAIT STATES WITH CLOCK CORRECTION clc, CLOCK CORRECTION none", 47, "CLOCK CORRECTION is given twice"),
        ("SELECT MESSAGES WITH CLOCK CORRECTION offsets", 17, refused),
        ("SELECT OPERATIONS WHERE DURATION > 1 ms WITH CLOCK CORRECTION offsets", 41, refused),
        ("SELECT FAN_IN WITH CLOCK CORRECTION offsets", 15, refused),
        ("CREATE VIEW v AS SELECT OPERATIONS WITH CLOCK CORRECTION clc", 36, refused),
        ("SELECT PHASES WITH CLOCK CORRECTION offsets", 20, "expected a parameter of SELECT PHASES: THRESHOLD, THESIS ARITHMETIC, DELIMITERS, TANDEMS or ENVELOPE, found \"CLOCK\""),
    ];
    for (text, column, message) in errors {
        let e = parse_statement(text).unwrap_err();
        assert_eq!((e.column, e.message.as_str()), (column, message), "{text}");
    }
}

#[test]
fn malformed_queries_give_exact_columns_and_messages() {
    let condition = "(on SIZE, SENT, RECEIVED, TAG, SENDER, RECEIVER, DURATION, PEER, ROOT, COMM, WAIT, DEPTH, MEMBERS or SKEW)";
    let cases: Vec<(&str, usize, String)> = vec![
        ("SELECT BROADCAST FOR PROCES(1)", 22, "expected a process selector after FOR, found \"PROCES\"".into()),
        ("SELECT BROADCAST FOR PROCESS(1", 31, "expected \")\" to close PROCESS(, found end of statement".into()),
        ("SELECT ALL MESSAGES WHERE SIZE > 10 kb", 37, "unknown unit \"kb\" (use B, KiB, MiB, GiB, KB, MB, GB)".into()),
        ("SELECT ALL MESSAGES WHERE SIZE > 10kb", 36, "unknown unit \"kb\" (use B, KiB, MiB, GiB, KB, MB, GB)".into()),
        ("SELECT ALL MESSAGES LIMIT ten", 27, "LIMIT needs a whole number, found \"ten\"".into()),
        ("SELECT ALL MESSAGES LIMIT 2.5", 27, "LIMIT needs a whole number, found \"2.5\"".into()),
        ("SELECT OPERATIONS FOR PROCESSES(6-3)", 33, "a range must go up: PROCESSES(6-3)".into()),
        ("SELECT ALL MESSAGES FOO", 21, "unexpected \"FOO\" after the statement".into()),
        ("", 1, "expected a statement (SELECT, EXPLAIN, SHOW, DESCRIBE, USE TRACE, CREATE VIEW, DROP VIEW, MATCH PATTERN, REFRESH PATTERNS), found end of statement".into()),
        ("INSERT INTO x", 1, "expected a statement (SELECT, EXPLAIN, SHOW, DESCRIBE, USE TRACE, CREATE VIEW, DROP VIEW, MATCH PATTERN, REFRESH PATTERNS), found \"INSERT\"".into()),
        ("SELECT PATTERNS FOR ALL PROCESSES", 21, "process patterns are per process: SELECT PATTERNS FOR PROCESS(n)".into()),
        ("SELECT PATTERNS PROCESS(1)", 17, "expected FOR after SELECT PATTERNS, found \"PROCESS\"".into()),
        ("SELECT COMMUNICATION PATTERNS WITH TAGS", 36, "expected a parameter of SELECT COMMUNICATION PATTERNS: DELIMITERS, TANDEMS or ENVELOPE, found \"TAGS\"".into()),
        ("MATCH PATTERN P0: S1", 15, "expected \"(\" after MATCH PATTERN, found \"P0\"".into()),
        ("MATCH PATTERN (X0: S1)", 16, "expected a process such as P0 in the template, found \"X0\"".into()),
        ("MATCH PATTERN (P0 S1)", 19, "expected \":\" after P0, found \"S1\"".into()),
        ("MATCH PATTERN (P0: )", 20, "expected the events of P0 (S<rank>, R<rank> or a collective such as MPI_Bcast(0)), found \")\"".into()),
        ("MATCH PATTERN (P0: S1; P0: R1)", 24, "P0 appears twice in the template".into()),
        ("MATCH PATTERN (P0: S1 Q2)", 23, "expected a template event (S<rank>, R<rank> or a collective such as MPI_Bcast(0)), found \"Q2\"".into()),
        ("MATCH PATTERN (P0: MPI_Send)", 20, "expected a template event (S<rank>, R<rank> or a collective such as MPI_Bcast(0)), found \"MPI_Send\"".into()),
        ("MATCH PATTERN (P0: MPI_Bcast S1)", 30, "expected \"(\" after MPI_Bcast (its root), found \"S1\"".into()),
        ("MATCH PATTERN (P0: S1) WITH ERRORS", 35, "WITH ERRORS needs a whole number, found end of statement".into()),
        ("SELECT PHASES WITH THRESHOLD high", 30, "expected a number after THRESHOLD (such as 0.5), found \"high\"".into()),
        ("SELECT PHASES WITH THRESHOLD 0.1234", 30, "a threshold has at most three decimals, found 0.1234".into()),
        ("SHOW PHASE", 11, "expected TREE after SHOW PHASE, found end of statement".into()),
        ("REFRESH PHASES", 9, "expected PATTERNS after REFRESH, found \"PHASES\"".into()),
        ("SELECT", 7, format!("expected what to select after SELECT ({TARGET_HELP}), found end of statement")),
        ("SELECT ALL PROCESSES", 12, format!("expected what to select after ALL ({TARGET_HELP}), found \"PROCESSES\"")),
        ("SELECT MPI_Foo", 8, "unknown MPI operation \"MPI_Foo\"".into()),
        ("SELECT SEND FOR PROCESS(1)", 8, "\"SEND\" is not a target; write MPI_Send for that operation".into()),
        ("SELECT ALL MESSAGES BETWEEN 1 AND 2", 29, "expected PROCESS(a,b) or TIME after BETWEEN, found \"1\"".into()),
        ("SELECT ALL MESSAGES BETWEEN PROCESS(1)", 38, "expected \",\" and a second process: BETWEEN PROCESS(a,b), found \")\"".into()),
        ("SELECT ALL MESSAGES IN COMM C1", 29, "expected \"(\" after COMM, found \"C1\"".into()),
        ("SELECT ALL MESSAGES IN COMM()", 29, "expected a communicator name or number in COMM(, found \")\"".into()),
        ("SELECT ALL MESSAGES IN COMM(C1", 31, "expected \")\" to close COMM(, found end of statement".into()),
        ("SELECT ALL MESSAGES IN TRACE x", 24, "expected COMM(…), VIEW, PHASE or PATTERN after IN, found \"TRACE\"".into()),
        ("SELECT ALL MESSAGES IN PHASE one", 30, "PHASE needs a whole number, found \"one\"".into()),
        ("SELECT ALL MESSAGES BETWEEN TIME 1 sec AND 2", 36, "unknown time unit \"sec\" (use ns, us, ms, s)".into()),
        ("SELECT ALL MESSAGES BETWEEN TIME 1 TO 2", 36, "expected AND between the two times, found \"TO\"".into()),
        ("SELECT ALL MESSAGES BETWEEN TIME AND 2", 34, "expected a time after BETWEEN TIME, found \"AND\"".into()),
        ("SELECT ALL MESSAGES BETWEEN TIME(1, 2", 38, "expected \")\" to close TIME(, found end of statement".into()),
        ("SELECT ALL MESSAGES BETWEEN TIME 2 AND 1", 34, "a time window must go forward: 2 s is after 1 s".into()),
        ("SELECT ALL MESSAGES BETWEEN TIME 0.5 ns AND 1", 34, "a time is not a whole number of nanoseconds: \"0.5 ns\"".into()),
        ("SELECT ALL MESSAGES WHERE FOO > 1", 27, format!("expected a condition after WHERE {condition}, found \"FOO\"")),
        ("SELECT ALL MESSAGES WHERE SIZE 10", 32, "expected a comparison (<, <=, =, !=, >=, >) after SIZE, found \"10\"".into()),
        ("SELECT ALL MESSAGES WHERE SIZE >", 33, "expected a size after SIZE >, found end of statement".into()),
        ("SELECT ALL MESSAGES WHERE (SIZE > 1", 36, "expected \")\" to close \"(\", found end of statement".into()),
        ("SELECT ALL MESSAGES WHERE SIZE > 1 AND", 39, format!("expected a condition after AND {condition}, found end of statement")),
        ("SELECT ALL MESSAGES WHERE TAG = 1 KiB", 35, "TAG takes a plain number, found unit \"KiB\"".into()),
        ("SELECT ALL MESSAGES WHERE TAG = x", 33, "TAG needs a whole number, found \"x\"".into()),
        ("SELECT ALL MESSAGES WHERE SIZE > 0.5 B", 34, "a size is not a whole number of bytes: \"0.5 B\"".into()),
        ("SELECT ALL MESSAGES BETWEEN TIME 0 AND 99999999999 s", 40, "number too large: \"99999999999 s\"".into()),
        ("SELECT ALL MESSAGES WHERE SIZE > - 1 KiB x", 42, "unexpected \"x\" after the statement".into()),
        ("SELECT ALL MESSAGES WHERE TAG > -x", 33, "TAG needs a whole number, found \"-\"".into()),
        ("SELECT HISTOGRAM OF SIZE BINS 10001", 31, "a histogram has at most 10000 bins, BINS asks for 10001".into()),
        ("SELECT ALL MESSAGES WHERE COMM > C1", 32, "COMM can only be compared with = or !=".into()),
        ("SELECT ALL MESSAGES WHERE SIZE > 1 WHERE TAG = 1", 36, "only one WHERE may be given; join conditions with AND or OR".into()),
        ("SELECT ALL MESSAGES FOR PROCESS(1) AMONG ALL PROCESSES", 36, "a query takes one scope (BETWEEN PROCESS, AMONG or FOR), found a second: \"AMONG\"".into()),
        ("SELECT ALL MESSAGES BETWEEN TIME 0 AND 1 BETWEEN TIME 2 AND 3", 42, "only one time window may be given".into()),
        ("SELECT ALL MESSAGES LIMIT 5 ORDER BY size", 29, "ORDER BY must come before LIMIT".into()),
        ("SELECT ALL MESSAGES ORDER BY size WHERE SIZE > 1", 35, "WHERE must come before ORDER BY and LIMIT".into()),
        ("SELECT ALL MESSAGES ORDER size", 27, "expected BY after ORDER, found \"size\"".into()),
        ("SELECT ALL MESSAGES ORDER BY", 29, "expected a column to order by, found end of statement".into()),
        ("SELECT ALL MESSAGES GROUP BY TAG", 21, "GROUP BY needs aggregates: SELECT COUNT(*), SUM(SIZE) FROM … GROUP BY …".into()),
        ("SELECT COUNT(*) FROM MESSAGES GROUP BY SIZE", 40, "expected PROCESS, PEER, OPERATION, TAG, COMM, ROUTINE or CLASS after GROUP BY, found \"SIZE\"".into()),
        ("SELECT COUNT(SIZE) FROM MESSAGES", 14, "COUNT takes *: COUNT(*), found \"SIZE\"".into()),
        ("SELECT SUM(*) FROM MESSAGES", 12, "SUM needs SIZE, DURATION, SENT, RECEIVED or a counter of the trace (SELECT METRICS lists them), found \"*\"".into()),
        ("SELECT COUNT(*) FOR ALL PROCESSES", 17, format!("expected what to select after the aggregates ({TARGET_HELP}), found \"FOR\"")),
        ("SELECT COUNT(*), FROM MESSAGES", 18, "expected an aggregate (COUNT(*), SUM, AVG, MIN, MAX) after \",\", found \"FROM\"".into()),
        ("SHOW TABLE", 6, "expected TABLES, TRACES, PROCESSES, COMMUNICATORS, OPERATIONS, VIEWS or PHASE TREE after SHOW, found \"TABLE\"".into()),
        ("USE wrf16", 5, "expected TRACE after USE, found \"wrf16\"".into()),
        ("USE TRACE", 10, "expected a trace name after USE TRACE, found end of statement".into()),
        ("CREATE VIEW v AS SELECT FAN_IN", 25, "a view stores a selection: CREATE VIEW … AS SELECT <target> …, not an aggregate or a statistic".into()),
        ("CREATE VIEW v AS SELECT ALL MESSAGES LIMIT 3", 38, "a view cannot have ORDER BY or LIMIT".into()),
        ("CREATE VIEW v SELECT SENDS", 15, "expected AS after the view name, found \"SELECT\"".into()),
        ("DROP TABLE v", 6, "expected VIEW after DROP, found \"TABLE\"".into()),
        ("EXPLAIN SHOW TRACES", 9, "expected SELECT (or an analysis such as SIMULATE) after EXPLAIN, found \"SHOW\"".into()),
        ("SELECT HISTOGRAM OF SIZE BINS 0", 31, "BINS needs at least 1 bin, found 0".into()),
        ("SELECT HISTOGRAM SIZE", 18, "expected OF after HISTOGRAM, found \"SIZE\"".into()),
        ("SELECT COMMUNICATION MATRIX OF SIZE", 32, "expected BYTES or COUNT after COMMUNICATION MATRIX OF, found \"SIZE\"".into()),
        ("SELECT COMMUNICATION MATRICES", 22, "expected MATRIX after COMMUNICATION, found \"MATRICES\"".into()),
        ("SELECT OPERATIONS FOR PROCESS(1.5)", 31, "a process rank is a whole number, found \"1.5\"".into()),
        ("SELECT OPERATIONS FOR PROCESS(99999999999)", 31, "process rank too large: \"99999999999\"".into()),
        ("SELECT OPERATIONS FOR PROCESSES()", 33, "expected a process rank (a whole number) in PROCESSES(, found \")\"".into()),
        ("SELECT OPERATIONS FOR PROCESSES(1;2)", 34, "expected \")\" to close PROCESSES(, found \";\"".into()),
        ("SELECT OPERATIONS FOR PROCESSES", 32, "expected \"(\" or IN COMM(…) after PROCESSES, found end of statement".into()),
        ("SELECT OPERATIONS FOR PROCESSES IN VIEW v", 36, "expected COMM(…) after PROCESSES IN, found \"VIEW\"".into()),
        ("SELECT OPERATIONS FOR ALL", 26, "expected PROCESSES after ALL, found end of statement".into()),
        ("SELECT ALL MESSAGES # x", 21, "unexpected character \"#\"".into()),
        ("USE TRACE 'abc", 11, "unterminated quoted name: expected a closing '".into()),
        ("SELECT ALL MESSAGES;;", 21, "unexpected \";\" after the statement".into()),
    ];
    assert!(cases.len() >= 25);
    for (text, column, message) in &cases {
        let e = err(text);
        assert_eq!(
            (e.line, e.column, e.message.as_str()),
            (1, *column, message.as_str()),
            "{text}"
        );
        assert_eq!(e.statement, *text);
    }
}

#[test]
fn errors_on_later_lines_count_lines_and_columns() {
    let e = err("SELECT ALL MESSAGES\n  WHERE SIZE > 1 kb");
    assert_eq!((e.line, e.column), (2, 18));
    assert_eq!(
        e.to_string(),
        concat!(
            "error at line 2, column 18: unknown unit \"kb\" (use B, KiB, MiB, GiB, KB, MB, GB)\n",
            "    WHERE SIZE > 1 kb\n",
            "  ",
            "                 ^"
        )
    );
    let e = err("SELECT ALL MESSAGES\r\nFOR PROCES(1)\r\n");
    assert_eq!((e.line, e.column), (2, 5));
}

#[test]
fn error_display_puts_a_caret_under_the_column() {
    let e = err("SELECT BROADCAST FOR PROCES(1)");
    assert_eq!(
        e.to_string(),
        "error at column 22: expected a process selector after FOR, found \"PROCES\"\n  \
         SELECT BROADCAST FOR PROCES(1)\n                       ^"
    );
    // Columns count characters, not bytes; tabs stay tabs under the text.
    let e = err("SELECT\tALL MESSAGES WHERE TAG = 'é'");
    assert_eq!(e.column, 33);
    assert_eq!(e.message, "TAG needs a whole number, found 'é'");
    let e = err("SELECT\tALL MESSAGES WHERE TAG = 'é' é");
    assert_eq!(e.column, 37);
    assert_eq!(e.message, "unexpected character \"é\"");
    assert_eq!(
        e.to_string().lines().last().unwrap(),
        format!("  {}\t{}^", "      ", " ".repeat(29))
    );
    let e = err("SELECT ALL MESSAGES WHERE");
    assert_eq!(
        e.to_string().lines().last().unwrap(),
        format!("  {}^", " ".repeat(25))
    );
}

// ---- properties -----------------------------------------------------------------------------------

mod properties {
    use mtfdb::model::OpKind;
    use mtfdb::query::ast::Value;
    use mtfdb::query::*;
    use proptest::prelude::*;

    /// Names as users write them: bare words (any case) and quoted names with spaces or `;`.
    fn name() -> impl Strategy<Value = String> {
        prop_oneof![
            "[A-Za-z_][A-Za-z0-9_]{0,8}",
            "[A-Za-z0-9 ;.-]{0,8}",
            Just("WORLD".to_string()),
            Just("select".to_string()),
        ]
    }

    fn comm() -> impl Strategy<Value = CommRef> {
        prop_oneof![
            Just(CommRef::World),
            (0..1000u32).prop_map(CommRef::Id),
            name().prop_map(CommRef::Name),
        ]
    }

    fn selector() -> impl Strategy<Value = ProcessSelector> {
        let range = (0..64u32, 0..8u32).prop_map(|(first, n)| RankRange {
            first,
            last: first + n,
        });
        prop_oneof![
            (0..64u32).prop_map(ProcessSelector::Process),
            prop::collection::vec(range, 1..4).prop_map(ProcessSelector::List),
            Just(ProcessSelector::All),
            comm().prop_map(ProcessSelector::InComm),
        ]
    }

    fn scope() -> impl Strategy<Value = Scope> {
        prop_oneof![
            (0..64u32, 0..64u32).prop_map(|(a, b)| Scope::Between(a, b)),
            selector().prop_map(Scope::Among),
            selector().prop_map(Scope::For),
        ]
    }

    fn within() -> impl Strategy<Value = Within> {
        prop_oneof![
            comm().prop_map(Within::Comm),
            name().prop_map(Within::View),
            any::<u32>().prop_map(Within::Phase),
            any::<u32>().prop_map(Within::Pattern),
        ]
    }

    fn op() -> impl Strategy<Value = CmpOp> {
        prop_oneof![
            Just(CmpOp::Lt),
            Just(CmpOp::Le),
            Just(CmpOp::Eq),
            Just(CmpOp::Ne),
            Just(CmpOp::Ge),
            Just(CmpOp::Gt),
        ]
    }

    /// Numbers that print with and without units.
    fn number() -> impl Strategy<Value = i128> {
        prop_oneof![
            any::<u64>().prop_map(i128::from),
            (0..5000i128),
            (0..5000i128).prop_map(|n| n << 10),
            (0..5000i128).prop_map(|n| n * 1_000_000),
            // Negative, and past 64 bits: kept exactly (i128::MIN has no text of its own).
            any::<i128>().prop_map(|n| n.max(-i128::MAX)),
        ]
    }

    fn comparison() -> impl Strategy<Value = Expr> {
        let numeric = prop_oneof![
            Just(Field::Size),
            Just(Field::Tag),
            Just(Field::Sender),
            Just(Field::Receiver),
            Just(Field::Duration),
            Just(Field::Peer),
            Just(Field::Root),
            Just(Field::Wait),
            Just(Field::Sent),
            Just(Field::Received),
            Just(Field::Depth),
            Just(Field::Members),
            Just(Field::Skew),
        ];
        prop_oneof![
            (numeric, op(), number()).prop_map(|(field, op, n)| Expr::Compare(Comparison {
                field,
                op,
                value: Value::Number(n)
            })),
            (prop::bool::ANY, comm()).prop_map(|(eq, c)| Expr::Compare(Comparison {
                field: Field::Comm,
                op: if eq { CmpOp::Eq } else { CmpOp::Ne },
                value: Value::Comm(c)
            })),
        ]
    }

    fn expr() -> impl Strategy<Value = Expr> {
        comparison().prop_recursive(4, 24, 2, |inner| {
            prop_oneof![
                (inner.clone(), inner.clone()).prop_map(|(a, b)| Expr::and(a, b)),
                (inner.clone(), inner.clone()).prop_map(|(a, b)| Expr::or(a, b)),
                inner.prop_map(Expr::negate),
            ]
        })
    }

    fn target() -> impl Strategy<Value = Target> {
        prop_oneof![
            Just(Target::Messages),
            Just(Target::PointToPoint),
            Just(Target::Sends),
            Just(Target::Receives),
            Just(Target::Collectives),
            Just(Target::Operations),
            Just(Target::CpuBursts),
            Just(Target::RoutineCalls),
            Just(Target::Requests),
            Just(Target::CollectiveInstances),
            Just(Target::Anomalies),
            prop::sample::select(OpKind::ALL).prop_map(Target::Operation),
        ]
    }

    /// Whether a condition reads `WAIT` (a selection takes `WITH CLOCK CORRECTION` then).
    fn reads_wait(e: &Expr) -> bool {
        match e {
            Expr::Compare(c) => c.field == Field::Wait,
            Expr::And(v) | Expr::Or(v) => v.iter().any(reads_wait),
            Expr::Not(e) => reads_wait(e),
        }
    }

    /// Clauses with a clock correction where the statement reads wait states (`waits`: it
    /// does whatever its condition reads), none elsewhere.
    fn filter_for(waits: bool) -> impl Strategy<Value = Filter> {
        (
            filter(),
            prop::sample::select(ClockCorrection::ALL.to_vec()),
        )
            .prop_map(move |(mut f, clock)| {
                if waits || f.predicate.as_ref().is_some_and(reads_wait) {
                    f.clock = clock;
                }
                f
            })
    }

    fn filter() -> impl Strategy<Value = Filter> {
        (
            prop::option::of(scope()),
            prop::collection::vec(within(), 0..3),
            prop::option::of((any::<u64>(), any::<u64>(), 0..4usize)),
            prop::option::of(expr()),
        )
            .prop_map(|(scope, within, time, predicate)| Filter {
                scope,
                within,
                time: time.map(|(a, b, unit)| {
                    // Some windows in round units, some arbitrary.
                    let scale = [1, 1_000, 1_000_000, 1_000_000_000][unit];
                    let (a, b) = ((a % 100_000) * scale, (b % 100_000) * scale);
                    TimeWindow {
                        start: a.min(b),
                        end: a.max(b),
                    }
                }),
                predicate,
                clock: ClockCorrection::None,
            })
    }

    fn selection() -> impl Strategy<Value = Selection> {
        (target(), filter_for(false)).prop_map(|(target, filter)| Selection { target, filter })
    }

    fn aggregate() -> impl Strategy<Value = Aggregate> {
        let m = prop::sample::select(Measure::ALL.to_vec());
        prop_oneof![
            Just(Aggregate::Count),
            m.clone().prop_map(Aggregate::Sum),
            m.clone().prop_map(Aggregate::Avg),
            m.clone().prop_map(Aggregate::Min),
            m.prop_map(Aggregate::Max),
        ]
    }

    fn body() -> impl Strategy<Value = SelectBody> {
        let group = prop::sample::select(GroupKey::ALL.to_vec());
        let measure = prop::sample::select(Measure::ALL.to_vec());
        let bins = prop_oneof![Just(Bins::Log2), (1..1000u32).prop_map(Bins::Count)];
        let statistic = prop_oneof![
            Just(Statistic::FanIn),
            Just(Statistic::FanOut),
            Just(Statistic::Statistics),
            Just(Statistic::MpiTime),
            Just(Statistic::Matrix(MatrixMeasure::Bytes)),
            Just(Statistic::Matrix(MatrixMeasure::Count)),
            (measure, bins).prop_map(|(of, bins)| Statistic::Histogram { of, bins }),
            prop::option::of(prop::sample::select(vec![
                WaitGroup::Process,
                WaitGroup::Operation,
                WaitGroup::Routine,
                WaitGroup::Phase,
            ]))
            .prop_map(Statistic::WaitStates),
            Just(Statistic::LateSenders),
        ];
        prop_oneof![
            selection().prop_map(SelectBody::Rows),
            (
                prop::collection::vec(aggregate(), 1..4),
                selection(),
                prop::collection::vec(group, 0..3)
            )
                .prop_map(|(aggregates, selection, group_by)| SelectBody::Aggregate {
                    aggregates,
                    selection,
                    group_by
                }),
            (statistic, prop::option::of(target()), filter_for(true)).prop_map(
                |(statistic, target, mut filter)| {
                    if !matches!(statistic, Statistic::WaitStates(_) | Statistic::LateSenders) {
                        filter.clock = ClockCorrection::None;
                    }
                    SelectBody::Statistic {
                        statistic,
                        target: match statistic {
                            Statistic::Matrix(_) | Statistic::Histogram { .. } => target,
                            _ => None,
                        },
                        filter,
                    }
                }
            ),
        ]
    }

    fn select() -> impl Strategy<Value = Select> {
        let column = prop_oneof![
            "[a-z_][a-z0-9_]{0,8}".prop_map(OrderColumn::Name),
            aggregate().prop_map(OrderColumn::Aggregate),
            (1..20u32).prop_map(OrderColumn::Position),
        ];
        let key = (column, prop::bool::ANY)
            .prop_map(|(column, descending)| OrderKey { column, descending });
        (
            body(),
            prop::collection::vec(key, 0..3),
            prop::option::of(any::<u64>()),
        )
            .prop_map(|(body, order_by, limit)| Select {
                body,
                order_by,
                limit,
            })
    }

    fn statement() -> impl Strategy<Value = Statement> {
        prop_oneof![
            4 => select().prop_map(Statement::Select),
            1 => select().prop_map(Statement::Explain),
            1 => prop::sample::select(vec![
                ShowWhat::Traces,
                ShowWhat::Processes,
                ShowWhat::Communicators,
                ShowWhat::Operations,
                ShowWhat::Tables,
                ShowWhat::Views
            ])
            .prop_map(Statement::Show),
            1 => name().prop_map(Statement::UseTrace),
            1 => (name(), selection())
                .prop_map(|(name, selection)| Statement::CreateView { name, selection }),
            1 => name().prop_map(Statement::DropView),
            1 => target().prop_map(Statement::Describe),
        ]
    }

    /// Token soup from the language's own words ([`KEYWORDS`]) and the numbers, units, names
    /// and symbols between them, to reach deep error paths.
    fn soup() -> impl Strategy<Value = String> {
        let others = [
            "(", ")", ",", "-", "1", "2.5", "C1", ">", "<=", "KiB", "ms", "kb", "(*)", "'q'", "\n",
            "--", ";", "é", "MPI_X",
        ];
        let words =
            prop::sample::select(KEYWORDS.iter().copied().chain(others).collect::<Vec<_>>());
        prop::collection::vec(words, 0..14).prop_map(|w| w.join(" "))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(600))]

        #[test]
        fn display_then_parse_gives_the_same_tree(ast in statement()) {
            let text = ast.to_string();
            match parse_statement(&text) {
                Ok(back) => prop_assert_eq!(back, ast, "{}", text),
                Err(e) => prop_assert!(false, "canonical text does not parse:\n{}", e),
            }
        }

        #[test]
        fn any_input_gives_a_tree_or_a_located_error(text in prop_oneof![soup(), "\\PC{0,40}"]) {
            if let Err(e) = parse_statement(&text) {
                let lines: Vec<&str> = e.statement.lines().collect();
                prop_assert!(e.line >= 1 && e.column >= 1);
                prop_assert!(e.line <= lines.len().max(1));
                let width = lines.get(e.line - 1).map_or(0, |l| l.chars().count());
                prop_assert!(e.column <= width + 1, "{:?}: {}", text, e);
                prop_assert!(!e.message.contains("Tag") && !e.message.contains("nom"));
                let _ = e.to_string();
            }
        }
    }
}

#[test]
fn pattern_and_phase_statements_parse() {
    use mtfdb::query::ast::{
        Analysis, PatternParams, PhaseParams, TemplateEvent, TemplateParams, TemplateProcess,
    };
    let analysis = |text: &str| match parse_statement(text).unwrap() {
        Statement::Analysis(a) => a,
        other => panic!("{text}: {other:?}"),
    };
    assert_eq!(
        analysis("SELECT PATTERNS FOR PROCESS(3)"),
        Analysis::ProcessPatterns {
            rank: 3,
            options: PatternParams::default()
        }
    );
    assert_eq!(
        analysis("SELECT PATTERNS FOR PROCESS(3) WITH ENVELOPE"),
        Analysis::ProcessPatterns {
            rank: 3,
            options: PatternParams {
                envelope: true,
                ..PatternParams::default()
            }
        }
    );
    assert_eq!(
        analysis("select communication patterns"),
        Analysis::CommunicationPatterns {
            options: PatternParams::default()
        }
    );
    assert_eq!(
        analysis("SELECT COMMUNICATION PATTERNS WITH ENVELOPE"),
        Analysis::CommunicationPatterns {
            options: PatternParams {
                envelope: true,
                ..PatternParams::default()
            }
        }
    );
    assert_eq!(
        analysis("MATCH PATTERN (P0: S1 S4; P1: R0 S2 MPI_Bcast(0) allreduce) WITH ERRORS 1"),
        Analysis::Match {
            template: vec![
                TemplateProcess {
                    rank: 0,
                    events: vec![TemplateEvent::Send(1), TemplateEvent::Send(4)],
                },
                TemplateProcess {
                    rank: 1,
                    events: vec![
                        TemplateEvent::Receive(0),
                        TemplateEvent::Send(2),
                        TemplateEvent::Collective(OpKind::Bcast, Some(0)),
                        TemplateEvent::Collective(OpKind::Allreduce, None),
                    ],
                },
            ],
            options: TemplateParams {
                errors: 1,
                ngram: 2
            },
        }
    );
    let phases = |threshold: i32| PhaseParams {
        threshold,
        ..PhaseParams::default()
    };
    assert_eq!(analysis("SELECT PHASES"), Analysis::Phases(phases(0)));
    assert_eq!(
        analysis("SELECT PHASES WITH THRESHOLD 0.5"),
        Analysis::Phases(phases(500))
    );
    assert_eq!(
        analysis("SHOW PHASE TREE WITH THRESHOLD -1.25"),
        Analysis::PhaseTree(phases(-1250))
    );
    assert_eq!(analysis("REFRESH PATTERNS"), Analysis::Refresh);
    // SELECT COMMUNICATION MATRIX is still the statistic.
    assert!(matches!(
        parse_statement("SELECT COMMUNICATION MATRIX").unwrap(),
        Statement::Select(_)
    ));
    // A template's ";" does not split a script.
    let script = parse_script("MATCH PATTERN (P0: S1; P1: R0); SHOW PHASE TREE").unwrap();
    assert_eq!(script.len(), 2);
    assert_eq!(script[0].0.to_string(), "MATCH PATTERN (P0: S1; P1: R0)");
    assert_eq!(script[1].0.to_string(), "SHOW PHASE TREE");
}

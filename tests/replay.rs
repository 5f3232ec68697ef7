//! The replay on a model network (`SIMULATE`): traces generated with `--network` follow the
//! LogGP model exactly, so replaying them with the same model gives back every operation's
//! times, to the nanosecond; other models move the prediction as the formulas say.

mod common;

use mtfdb::analysis::replay::network::NetworkModel;
use mtfdb::analysis::replay::{replay_trace, simulate};
use mtfdb::gen::{GenConfig, Scenario};
use mtfdb::ingest::EventSink;
use mtfdb::model::{OpKind, Operation, Time, TraceHeader};
use mtfdb::Database;

use common::temp_db;

/// A network whose eager limit every generated message stays under, with a gap.
fn network() -> NetworkModel {
    "1.2us,300ns,50ns,0.25,64KiB".parse().unwrap()
}

fn generated(db: &Database, scenario: Scenario, ranks: u32, net: NetworkModel) -> String {
    let mut config = GenConfig::new(scenario, ranks, 3);
    config.network = Some(net);
    let name = format!("{scenario}-{ranks}");
    common::import_generated(db, &config, &name);
    name
}

/// Replays `name` on `net`; returns how many operations were replayed and those whose
/// simulated times differ from the measured ones.
fn differences(db: &Database, name: &str, net: &NetworkModel) -> (u64, Vec<String>) {
    let trace = db.trace(name).unwrap();
    let mut count = 0;
    let mut differ = Vec::new();
    let unresolved = replay_trace(&trace, net, &mut |r| {
        count += 1;
        if r.measured != r.simulated && differ.len() < 5 {
            differ.push(format!(
                "op {} of rank {}: measured {:?}, simulated {:?}",
                r.op, r.rank, r.measured, r.simulated
            ));
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(unresolved.calls, 0, "{name}");
    (count, differ)
}

#[test]
fn every_generated_scenario_replays_to_the_nanosecond_on_its_own_network() {
    let (_dir, db) = temp_db();
    let net = network();
    for ranks in [16, 256] {
        for scenario in Scenario::ALL {
            let name = generated(&db, scenario, ranks, net);
            let operations = db.trace(&name).unwrap().summary().operations;
            let (count, differ) = differences(&db, &name, &net);
            assert_eq!(count, operations, "{name}: every operation is replayed");
            assert!(differ.is_empty(), "{name}: {differ:#?}");
        }
    }
}

/// With ranks renumbered, a sub-communicator's members (cg) and the world's (alltoall) are in
/// another order than the generator's positions: the pairwise exchange must follow each
/// communicator's own rank order for its members' staggered exits to replay exactly.
#[test]
fn shuffled_ranks_replay_to_the_nanosecond_and_show_the_overhead() {
    let (_dir, db) = temp_db();
    let net = network();
    for scenario in [Scenario::Alltoall, Scenario::Cg] {
        let mut config = GenConfig::new(scenario, 16, 3);
        config.network = Some(net);
        config.shuffle_ranks = true;
        config.seed = 7;
        let name = format!("{scenario}-shuffled");
        common::import_generated(&db, &config, &name);
        let operations = db.trace(&name).unwrap().summary().operations;
        let (count, differ) = differences(&db, &name, &net);
        assert_eq!(count, operations, "{name}");
        assert!(differ.is_empty(), "{name}: {differ:#?}");
        let fit = mtfdb::analysis::replay::fit::fit_network(&db.trace(&name).unwrap()).unwrap();
        let model = fit.model.expect("two sizes at least");
        assert!(fit.overhead_known, "{name}");
        assert_eq!(
            (model.latency, model.overhead),
            (net.latency, net.overhead),
            "{name}"
        );
    }
}

#[test]
fn a_trace_replayed_on_another_network_differs_from_its_measured_times() {
    let (_dir, db) = temp_db();
    let net = network();
    let name = generated(&db, Scenario::Ring, 16, net);
    let slower = NetworkModel {
        latency: net.latency + 1,
        ..net
    };
    let (_, differ) = differences(&db, &name, &slower);
    assert!(!differ.is_empty());
    // The default generator's timing is not LogGP: its replay does not match either.
    let (_dir2, db2) = temp_db();
    common::import_generated(&db2, &GenConfig::new(Scenario::Ring, 16, 3), "ring");
    assert!(!differences(&db2, "ring", &net).1.is_empty());
}

#[test]
fn rendezvous_messages_replay_exactly() {
    let (_dir, db) = temp_db();
    // Every message above the eager limit: each send waits for its receive.
    let net = NetworkModel {
        eager_limit: 0,
        ..network()
    };
    for scenario in Scenario::ALL {
        for ranks in [16, 256] {
            let name = generated(&db, scenario, ranks, net);
            let (count, differ) = differences(&db, &name, &net);
            assert!(count > 0);
            assert!(differ.is_empty(), "{name}: {differ:#?}");
        }
    }
}

/// A trace of `p` ranks that each call collective `kind` once, entering at `10 * rank` ns,
/// with the given bytes sent and received per member.
fn one_collective(db: &Database, kind: OpKind, p: u32, bytes: (u64, u64)) -> String {
    let name = format!("{kind:?}-{p}");
    db.import_events(&name, |sink| {
        sink.header(&TraceHeader::world(p, "world"))?;
        for rank in 0..p {
            let start = 10 * Time::from(rank);
            let mut op = Operation::new(rank, kind, start, start + 5_000);
            op.comm = Some(0);
            (op.send_bytes, op.recv_bytes) = bytes;
            if kind.is_rooted() {
                op.root = Some(0);
            }
            sink.operation(&op)?;
        }
        sink.finish()
    })
    .unwrap();
    name
}

#[test]
fn each_collective_algorithm_takes_its_formula_and_moves_with_the_parameters() {
    let (_dir, db) = temp_db();
    // (kind, bytes sent and received per member, the algorithm's time for 16 members given
    // one round's fixed cost `r` = L + 2o and the wire time `t(m)` of m bytes: log2(16) = 4
    // rounds, or p - 1 = 15 for the pairwise exchange).
    type Formula = fn(u64, &dyn Fn(u64) -> u64) -> u64;
    let cases: Vec<(OpKind, (u64, u64), Formula)> = vec![
        (OpKind::Barrier, (0, 0), |r, _| 4 * r),
        (OpKind::Bcast, (800, 800), |r, t| 4 * (r + t(800))),
        (OpKind::Reduce, (800, 800), |r, t| 4 * (r + t(800))),
        (OpKind::Allreduce, (800, 800), |r, t| 4 * (r + t(800))),
        (OpKind::Allgather, (800, 16 * 800), |r, t| {
            4 * r + t(15 * 800)
        }),
        (OpKind::Gather, (800, 0), |r, t| 4 * r + t(15 * 800)),
        (OpKind::Scatter, (0, 800), |r, t| 4 * r + t(15 * 800)),
        (OpKind::Alltoall, (16 * 800, 16 * 800), |r, t| {
            15 * (r + t(800))
        }),
    ];
    // The base network (1 byte per ns), twice its latency, twice its bandwidth.
    let networks: [(&str, u64, u64); 3] = [
        ("1000,100,0,1GB/s,64KiB", 1_200, 1),
        ("2000,100,0,1GB/s,64KiB", 2_200, 1),
        ("1000,100,0,2GB/s,64KiB", 1_200, 2),
    ];
    for (kind, bytes, formula) in cases {
        let name = one_collective(&db, kind, 16, bytes);
        let trace = db.trace(&name).unwrap();
        for (spec, round, bytes_per_ns) in networks {
            let net: NetworkModel = spec.parse().unwrap();
            let predicted = simulate(&trace, &net).unwrap();
            assert_eq!(predicted.unresolved, 0);
            assert_eq!(predicted.run.0, 150 + 5_000, "{kind:?}: measured");
            // The last member enters at 150 ns; everyone leaves the algorithm's time later.
            let expected = 150 + formula(round, &|m| m / bytes_per_ns);
            assert_eq!(predicted.run.1, expected, "{kind:?} on {spec}");
        }
    }
}

/// A trace of one Alltoall on a communicator of `members` (world ranks, in communicator-rank
/// order, so that who sends to whom follows the communicator, not the world), member `i`
/// entering at `entries[i]` and sending `block` bytes to each member.
fn one_alltoall(db: &Database, name: &str, members: &[u32], entries: &[Time], block: u64) {
    let p = members.len() as u32;
    db.import_events(name, |sink| {
        let mut header = TraceHeader::world(p, "world");
        header.communicators.push(mtfdb::model::Communicator {
            id: 1,
            name: "shuffled".into(),
            members: members.to_vec(),
        });
        sink.header(&header)?;
        for (&rank, &start) in members.iter().zip(entries) {
            let mut op = Operation::new(rank, OpKind::Alltoall, start, start + 100_000);
            op.comm = Some(1);
            (op.send_bytes, op.recv_bytes) = (block * u64::from(p), block * u64::from(p));
            sink.operation(&op)?;
        }
        sink.finish()
    })
    .unwrap();
}

#[test]
fn an_alltoalls_members_leave_when_their_own_rounds_end() {
    let (_dir, db) = temp_db();
    // 1 byte per ns: b = L + T(m) = 1,000 + 800; a round with both overheads 2,000.
    let net: NetworkModel = "1000,100,0,1GB/s,64KiB".parse().unwrap();
    let (b, h) = (1_800, 2_000);
    // Five members in communicator order 4, 2, 0, 1, 3 (world ranks); the third (world rank
    // 0) enters 50 us after the others, who enter 10 ns apart.
    let members = [4, 2, 0, 1, 3];
    let entries = [0, 10, 50_000, 30, 40];
    one_alltoall(&db, "late", &members, &entries, 800);
    let trace = db.trace("late").unwrap();
    let mut ends = std::collections::BTreeMap::new();
    replay_trace(&trace, &net, &mut |r| {
        ends.insert(r.rank, r.simulated.1);
        Ok(())
    })
    .unwrap();
    // p = 5: s = 5·4/2 mod 5 = 0, so the member whose chain starts at the late one is the
    // late one itself: it leaves 4 rounds after entering; every other member's chain starts
    // at an early member, and leaves one b sooner.
    let last = 50_000 + 4 * h;
    let expected: std::collections::BTreeMap<u32, Time> = members
        .iter()
        .map(|&r| (r, if r == 0 { last } else { last - b }))
        .collect();
    assert_eq!(ends, expected);
    // These exits, in communicator order, show `o`.
    let exits: Vec<Time> = members.iter().map(|r| ends[r]).collect();
    assert_eq!(
        mtfdb::analysis::replay::network::overhead_of_exchange(&entries, &exits),
        Some(100)
    );
    // Entering together, everyone leaves after p - 1 full rounds: L and o are not apart.
    one_alltoall(&db, "together", &members, &[0; 5], 800);
    let trace = db.trace("together").unwrap();
    let mut together = Vec::new();
    replay_trace(&trace, &net, &mut |r| {
        together.push(r.simulated.1);
        Ok(())
    })
    .unwrap();
    assert_eq!(together, vec![4 * h; 5]);
    assert_eq!(
        mtfdb::analysis::replay::network::overhead_of_exchange(&[0; 5], &together),
        None
    );
}

#[test]
fn the_network_model_fitted_to_a_generated_trace_is_the_generators() {
    let (_dir, db) = temp_db();
    let net = network();
    let within = |got: f64, want: f64| (got - want).abs() <= 0.01 * want;
    for ranks in [16, 256] {
        for scenario in Scenario::ALL {
            let name = generated(&db, scenario, ranks, net);
            let trace = db.trace(&name).unwrap();
            let fit = mtfdb::analysis::replay::fit::fit_network(&trace).unwrap();
            let model = fit.model.expect("two sizes at least");
            assert!(
                within(fit.ns_per_byte, 1e9 / net.bandwidth as f64),
                "{name}: G {}",
                fit.ns_per_byte
            );
            assert!(
                within(model.bandwidth as f64, net.bandwidth as f64),
                "{name}"
            );
            // The Alltoall scenario has no point-to-point call: its exchanges' staggered
            // exits tell `o` from `L`.
            assert!(fit.overhead_known, "{name}");
            assert!(
                within(model.latency as f64, net.latency as f64),
                "{name}: {model:?}"
            );
            assert_eq!(model.overhead, net.overhead, "{name}");
            assert!(fit.error < 1e-6, "{name}: {}", fit.error);
        }
    }
}

fn number(v: &mtfdb::results::Value) -> f64 {
    match v {
        mtfdb::results::Value::Int(i) => *i as f64,
        mtfdb::results::Value::Float(f) => *f,
        other => panic!("not a number: {other:?}"),
    }
}

#[test]
fn simulate_in_the_language_predicts_what_if_and_prints_back() {
    use mtfdb::query::{parse_statement, Session};
    let (_dir, db) = temp_db();
    let net = network();
    let name = generated(&db, Scenario::Stencil2d, 16, net);
    let mut s = Session::new(db);
    s.run(&format!("USE TRACE \"{name}\"")).unwrap();
    let statement = format!("SIMULATE WITH {net}");
    // The statement prints back as it parses.
    let parsed = parse_statement(&statement).unwrap();
    assert_eq!(parse_statement(&parsed.to_string()).unwrap(), parsed);
    // On its own network: every rank's end and time in MPI as measured, no error.
    let r = s.run(&statement).unwrap();
    assert_eq!(r.len(), 17);
    for row in &r.rows {
        assert_eq!(number(&row[1]), number(&row[2]), "{row:?}");
        assert_eq!(number(&row[3]), number(&row[4]), "{row:?}");
        assert_eq!(number(&row[5]), 0.0);
    }
    let run = |s: &mut Session, q: &str| {
        let r = s.run(q).unwrap();
        let last = r.rows.last().unwrap().clone();
        (number(&last[1]), number(&last[2]), number(&last[4]))
    };
    let (measured, same, mpi) = run(&mut s, &statement);
    assert_eq!(measured, same);
    // What if: a CPU twice as fast shortens the run; a slower network lengthens the time in
    // MPI; twice the bandwidth never makes it longer.
    let faster_cpu = run(&mut s, &format!("SIMULATE WITH {}, CPU 2.0", params(&net)));
    assert!(
        faster_cpu.1 < 0.6 * measured,
        "{faster_cpu:?} vs {measured}"
    );
    let slow = run(
        &mut s,
        "SIMULATE WITH LATENCY 20 us, OVERHEAD 300 ns, BANDWIDTH 1 GB/s",
    );
    assert!(slow.2 > mpi && slow.1 > measured, "{slow:?}");
    let wide = run(
        &mut s,
        &format!("SIMULATE WITH {}", params(&net)).replace("4 GB/s", "8 GB/s"),
    );
    assert!(wide.1 <= measured && wide.2 <= mpi, "{wide:?}");
    // The fitted model, and its statement, which replays to the measured times again.
    let r = s.run("SELECT NETWORK MODEL").unwrap();
    let value = |name: &str| {
        r.rows
            .iter()
            .find(|row| row[0].render() == name)
            .map(|row| row[1].clone())
            .unwrap()
    };
    assert_eq!(number(&value("latency")), net.latency as f64);
    assert_eq!(number(&value("bandwidth")), net.bandwidth as f64);
    let fitted = value("statement").render();
    assert!(
        fitted.starts_with("SIMULATE WITH LATENCY 1200 ns"),
        "{fitted}"
    );
    // A network so slow its times pass 2^64 ns is an error, not a wrapped number.
    let e = s
        .run("SIMULATE WITH LATENCY 1000000000 s")
        .unwrap_err()
        .to_string();
    assert!(e.contains("past 2^64 ns"), "{e}");
    // Mistakes say where.
    for (bad, says) in [
        ("SIMULATE WITH LATENCY", "a time after LATENCY"),
        ("SIMULATE WITH BANDWIDTH 2 GB", "\"/\" in a bandwidth"),
        ("SIMULATE WITH CPU 0", "CPU takes how many times faster"),
        ("SIMULATE WITH GAP 1 ns, GAP 2 ns", "GAP is given twice"),
        ("SIMULATE WITH SPEED 3", "a network parameter"),
    ] {
        let e = s.run(bad).unwrap_err().to_string();
        assert!(e.contains(says), "{bad}: {e}");
    }
}

/// `net`'s parameters as `SIMULATE WITH` takes them, without the CPU factor.
fn params(net: &NetworkModel) -> String {
    let text = net.to_string();
    text[..text.find(", CPU").unwrap()].to_string()
}

#[test]
fn a_simulated_run_stored_as_a_trace_answers_every_query_and_replays_to_itself() {
    use mtfdb::query::Session;
    let (_dir, db) = temp_db();
    let net = network();
    let name = generated(&db, Scenario::Stencil2d, 16, net);
    let original = db.trace(&name).unwrap().summary().clone();
    let mut s = Session::new(db);
    s.run(&format!("USE TRACE \"{name}\"")).unwrap();
    let r = s
        .run(&format!(
            "SIMULATE WITH {}, CPU 2 AS TRACE fast",
            params(&net)
        ))
        .unwrap();
    let predicted = r.rows.last().unwrap().clone();
    let info = s.database().traces().unwrap();
    let info = info.iter().find(|t| t.name == "fast").unwrap();
    assert_eq!(info.format, "simulated");
    assert!(
        info.source.starts_with("SIMULATE WITH LATENCY 1200 ns") && info.source.contains("CPU 2"),
        "{}",
        info.source
    );
    let fast = s.database().trace("fast").unwrap();
    // The same operations, messages and collectives, matched again by the import.
    assert_eq!(fast.summary().operations, original.operations);
    assert_eq!(fast.summary().messages, original.messages);
    assert_eq!(fast.summary().message_bytes, original.message_bytes);
    assert_eq!(
        fast.summary().collective_instances,
        original.collective_instances
    );
    drop(fast);
    // Its time in MPI is the one predicted; replayed on the same network (its computation
    // already shortened), it is its own prediction.
    s.run("USE TRACE fast").unwrap();
    let again = s.run(&format!("SIMULATE WITH {}", params(&net))).unwrap();
    let run = again.rows.last().unwrap();
    assert_eq!(number(&run[3]), number(&predicted[4]));
    for row in &again.rows {
        assert_eq!(number(&row[1]), number(&row[2]), "{row:?}");
        assert_eq!(number(&row[5]), 0.0);
    }
    // Every query works on it.
    assert!(!s.run("SELECT WAIT STATES").unwrap().is_empty());
    assert_eq!(
        number(&s.run("SELECT COUNT(*) FROM MESSAGES").unwrap().rows[0][0]),
        original.messages as f64
    );
    // A name taken is refused, and nothing changes.
    let e = s.run("SIMULATE AS TRACE fast").unwrap_err().to_string();
    assert!(
        e.contains("already exists") && e.contains("AS TRACE other"),
        "{e}"
    );
}

/// Every location's CPU bursts computed from its operations read whole, in order: (id of the
/// call after the burst, rank, start, end).
fn bursts_by_hand(trace: &mtfdb::Trace) -> Vec<(u64, u32, Time, Time)> {
    let mut last_end: std::collections::HashMap<(u32, u32), Time> = Default::default();
    let mut chunks: Vec<_> = trace.op_chunks().to_vec();
    chunks.sort_by_key(|c| (c.rank, c.thread, c.first_row));
    let mut out = Vec::new();
    for info in &chunks {
        for (id, op) in trace.chunk_operations(info).unwrap() {
            if let Some(&end) = last_end.get(&(op.rank, op.thread)) {
                out.push((id, op.rank, end, op.start));
            }
            last_end.insert((op.rank, op.thread), op.end);
        }
    }
    out.sort_unstable();
    out
}

#[test]
fn cpu_bursts_are_the_gaps_between_a_locations_calls() {
    use mtfdb::query::Session;
    let (_dir, db) = temp_db();
    // 16 ranks of 4,000 iterations: every rank's calls span several stored chunks.
    common::import_generated(&db, &GenConfig::new(Scenario::Stencil2d, 16, 4_000), "s");
    let trace = db.trace("s").unwrap();
    assert!(trace.op_chunks().len() > 16, "several chunks per rank");
    let expected = bursts_by_hand(&trace);
    assert_eq!(expected.len() as u64, trace.summary().operations - 16);
    drop(trace);
    let mut s = Session::new(db);
    s.run("USE TRACE s").unwrap();
    let r = s.run("SELECT CPU BURSTS").unwrap();
    let mut got: Vec<(u64, u32, Time, Time)> = r
        .rows
        .iter()
        .map(|row| {
            (
                number(&row[0]) as u64,
                number(&row[1]) as u32,
                number(&row[3]) as Time,
                number(&row[4]) as Time,
            )
        })
        .collect();
    got.sort_unstable();
    assert_eq!(got, expected);
    // Sums per process, and a condition on the duration.
    let r = s
        .run("SELECT SUM(DURATION), COUNT(*) FROM CPU BURSTS GROUP BY PROCESS")
        .unwrap();
    for row in &r.rows {
        let rank = number(&row[0]) as u32;
        let mine: Vec<_> = expected.iter().filter(|b| b.1 == rank).collect();
        assert_eq!(
            number(&row[1]) as u64,
            mine.iter().map(|b| b.3 - b.2).sum::<u64>()
        );
        assert_eq!(number(&row[2]) as usize, mine.len());
    }
    let long = expected.iter().filter(|b| b.3 - b.2 > 1_000_000).count();
    let r = s
        .run("SELECT COUNT(*) FROM CPU BURSTS WHERE DURATION > 1 ms")
        .unwrap();
    assert_eq!(number(&r.rows[0][0]) as usize, long);
    let r = s.run("SELECT CPU BURSTS FOR PROCESS(3) LIMIT 4").unwrap();
    assert_eq!(r.len(), 4);
    assert!(r.rows.iter().all(|row| number(&row[1]) == 3.0));
    let e = s
        .run("CREATE VIEW b AS SELECT CPU BURSTS")
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot be stored as a view"), "{e}");
}

#[test]
fn calls_whose_partner_cannot_come_are_counted_not_hidden() {
    use mtfdb::query::Session;
    let (_dir, db) = temp_db();
    // Each rank receives before it sends what the other waits for: the trace's clocks say it
    // happened, but no replay can order it. One receive keeps its measured duration.
    db.import_events("crossed", |sink| {
        sink.header(&TraceHeader::world(2, "world"))?;
        let p2p = |sink: &mut dyn EventSink, kind, rank, peer, tag, t: Time| {
            let mut op = Operation::new(rank, kind, t, t + 1_000);
            op.comm = Some(0);
            if kind == OpKind::Send {
                (op.dest, op.send_tag, op.send_bytes) = (Some(peer), Some(tag), 8);
            } else {
                (op.source, op.recv_tag, op.recv_bytes) = (Some(peer), Some(tag), 8);
            }
            sink.operation(&op)
        };
        p2p(sink, OpKind::Recv, 0, 1, 0, 0)?;
        p2p(sink, OpKind::Send, 0, 1, 1, 2_000)?;
        p2p(sink, OpKind::Recv, 1, 0, 1, 100)?;
        p2p(sink, OpKind::Send, 1, 0, 0, 2_100)?;
        sink.finish()
    })
    .unwrap();
    let mut s = Session::new(db);
    s.run("USE TRACE crossed").unwrap();
    let r = s.run("SIMULATE").unwrap();
    let unresolved = r
        .columns
        .iter()
        .position(|c| c == "unresolved_calls")
        .unwrap();
    let counts: Vec<f64> = r.rows.iter().map(|row| number(&row[unresolved])).collect();
    // Rank 0's receive (the earliest parked) is the one; the run row sums them.
    assert_eq!(counts, vec![1.0, 0.0, 1.0]);
}

#[test]
fn the_replay_holds_the_messages_in_flight_not_the_traces() {
    let (_dir, db) = temp_db();
    common::import_generated(&db, &GenConfig::new(Scenario::Stencil2d, 16, 2_000), "long");
    let trace = db.trace("long").unwrap();
    let messages = trace.summary().messages;
    let stats = replay_trace(&trace, &NetworkModel::default(), &mut |_| Ok(())).unwrap();
    println!(
        "{messages} messages, at most {} held at once",
        stats.peak_messages
    );
    assert!(messages > 90_000);
    // A few iterations' halo messages at most, whatever the length of the run.
    assert!(stats.peak_messages < 1_000, "{}", stats.peak_messages);
}

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

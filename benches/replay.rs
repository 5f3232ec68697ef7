//! The replay on a model network (`SIMULATE`): how fast it goes against reading the same
//! operations.
//!
//! A generated `stencil2d` of about 10M operations (16 ranks; `MTFDB_BENCH_EVENTS` picks
//! another size, `MTFDB_BENCH_RANKS` other rank counts) is imported once into a database under
//! `target/` (not committed). Baseline, in the same run: reading every operation's start, end,
//! call and sizes, the columns the replay reads. Then the replay of every operation on the
//! default network (`SIMULATE`'s defaults). Best of three runs of each; the rate is
//! operations per second, the ratio the replay's time over the read's. The bench allocates
//! with mimalloc, as the `mtfdb` binary that runs `SIMULATE` does.
//!
//! `cargo bench --bench replay`.

mod common;

/// The `mtfdb` binary's allocator, so that the rate is the one `SIMULATE` runs at.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use mtfdb::analysis::replay::network::NetworkModel;
use mtfdb::analysis::replay::replay_trace;
use mtfdb::gen::{iterations_for_events, GenConfig, Scenario};
use mtfdb::store::OperationField;

fn main() {
    let events = common::env_list("MTFDB_BENCH_EVENTS", &[10_000_000u64])[0];
    let ranks: Vec<u32> = common::env_list("MTFDB_BENCH_RANKS", &[16, 1_024]);
    println!(
        "replay of a stencil2d of about {events} operations on the default network, {} cores; \
         best of 3",
        common::cores()
    );
    println!(
        "{:>6} {:>11} {:>9} {:>12} {:>9} {:>12} {:>8} {:>10}",
        "ranks",
        "operations",
        "read s",
        "read ops/s",
        "replay s",
        "replay ops/s",
        "x read",
        "unresolved"
    );
    for n in ranks {
        let iterations = iterations_for_events(Scenario::Stencil2d, n, events)
            .unwrap()
            .max(2);
        let dir = common::data_dir().join(format!("replay-{n}"));
        let (db, _) = common::generated_db(
            &dir,
            "stencil",
            &GenConfig::new(Scenario::Stencil2d, n, iterations),
        );
        let trace = db.trace("stencil").unwrap();
        let operations = trace.summary().operations;
        let fields = [
            OperationField::Start,
            OperationField::End,
            OperationField::Kind,
            OperationField::SendBytes,
            OperationField::RecvBytes,
        ];
        let (rows, read) = common::best(3, || {
            let mut rows = 0u64;
            for info in trace.op_chunks() {
                let c = trace.operation_columns(info.chunk, &fields).unwrap();
                for row in 0..c.rows() {
                    rows += u64::from(c.end(row) >= c.start(row) && c.kind(row).is_some());
                }
            }
            rows
        });
        assert_eq!(rows, operations);
        let net = NetworkModel::default();
        let ((replayed, unresolved), replay) = common::best(3, || {
            let mut replayed = 0u64;
            let unresolved = replay_trace(&trace, &net, &mut |_| {
                replayed += 1;
                Ok(())
            })
            .unwrap();
            (replayed, unresolved.calls)
        });
        assert_eq!(replayed, operations);
        println!(
            "{n:>6} {operations:>11} {read:>9.3} {:>11.2}M {replay:>9.3} {:>11.2}M {:>7.2}x {unresolved:>10}",
            operations as f64 / read / 1e6,
            operations as f64 / replay / 1e6,
            replay / read,
        );
        drop(trace);
        drop(db);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

//! Importing every generator scenario gives exactly the generator's ground truth: operation
//! counts by kind, matched messages per pair with their bytes, collective instances, routine
//! calls, fan-in and fan-out per process, time span, and no anomalies.

mod common;

use common::import_generated;
use std::collections::BTreeMap;

use mtfdb::gen::{generate, GenConfig, GroundTruth, Scenario};
use mtfdb::model::{OpKind, Rank};
use mtfdb::store::IndexDim;
use mtfdb::{Database, Trace};

/// Per (sender, receiver): (messages, bytes), from the stored message table.
fn stored_pairs(trace: &Trace) -> BTreeMap<(Rank, Rank), (u64, u64)> {
    let mut pairs = BTreeMap::new();
    for m in trace.messages().unwrap() {
        let e = pairs.entry((m.sender, m.receiver)).or_insert((0, 0));
        e.0 += 1;
        e.1 += m.bytes;
    }
    pairs
}

/// Fan-out and fan-in per rank as the MTF paper defines them: message bytes plus collective
/// send/receive sizes, computed from the stored rows.
fn stored_fans(trace: &Trace, ranks: usize) -> (Vec<u64>, Vec<u64>) {
    let (mut out, mut inn) = (vec![0u64; ranks], vec![0u64; ranks]);
    for m in trace.messages().unwrap() {
        out[m.sender as usize] += m.bytes;
        inn[m.receiver as usize] += m.bytes;
    }
    for rank in 0..ranks as Rank {
        for (_, op) in trace.process_operations(rank).unwrap() {
            if op.kind.is_collective() {
                out[rank as usize] += op.send_bytes;
                inn[rank as usize] += op.recv_bytes;
            }
        }
    }
    (out, inn)
}

fn check_against_truth(trace: &Trace, truth: &GroundTruth) {
    let s = trace.summary();
    let label = &truth.trace_name;
    assert_eq!(s.operations, truth.operations, "{label}: operations");
    let by_kind: BTreeMap<String, u64> = s
        .by_kind
        .iter()
        .map(|(k, n)| (trace.kind_name(*k), *n))
        .collect();
    assert_eq!(by_kind, truth.ops_by_kind, "{label}: operations by kind");
    assert_eq!(s.messages, truth.messages, "{label}: messages");
    assert_eq!(
        s.message_bytes, truth.message_bytes,
        "{label}: message bytes"
    );
    let expected_pairs: BTreeMap<(Rank, Rank), (u64, u64)> = truth
        .pairs
        .iter()
        .map(|p| ((p.sender, p.receiver), (p.messages, p.bytes)))
        .collect();
    assert_eq!(
        stored_pairs(trace),
        expected_pairs,
        "{label}: messages per pair"
    );
    assert_eq!(
        s.collective_instances,
        truth.collectives.values().sum::<u64>(),
        "{label}: collective instances"
    );
    let mut instances: BTreeMap<String, u64> = BTreeMap::new();
    for c in trace.collective_instances().unwrap() {
        assert_eq!(
            c.ops.len(),
            trace.header().communicator(c.comm).unwrap().members.len(),
            "{label}: complete instance"
        );
        *instances.entry(trace.kind_name(c.kind)).or_default() += 1;
    }
    assert_eq!(instances, truth.collectives, "{label}: instances by kind");
    assert_eq!(
        s.routine_calls, truth.routine_calls,
        "{label}: routine calls"
    );
    assert!(
        s.anomalies.is_empty(),
        "{label}: anomalies {:?}",
        s.anomalies
    );
    assert_eq!(s.first_time, Some(truth.first_time), "{label}: first time");
    assert_eq!(s.last_time, Some(truth.last_time), "{label}: last time");
    let ranks = truth.ranks as usize;
    let (fan_out, fan_in) = stored_fans(trace, ranks);
    for r in &truth.per_rank {
        assert_eq!(
            fan_out[r.rank as usize],
            r.fan_out(),
            "{label}: fan-out of rank {}",
            r.rank
        );
        assert_eq!(
            fan_in[r.rank as usize],
            r.fan_in(),
            "{label}: fan-in of rank {}",
            r.rank
        );
        let indexed = trace.index(IndexDim::Process, r.rank).unwrap().len();
        assert_eq!(
            indexed, r.operations,
            "{label}: process index of rank {}",
            r.rank
        );
    }
    // Every non-blocking request is linked to the Wait that completed it.
    let nonblocking: u64 = s
        .by_kind
        .iter()
        .filter(|(k, _)| k.is_nonblocking())
        .map(|(_, n)| n)
        .sum();
    assert_eq!(s.request_links, nonblocking, "{label}: request links");
}

#[test]
fn every_scenario_imports_to_its_ground_truth() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    for scenario in Scenario::ALL {
        for shuffle in [false, true] {
            let config = GenConfig {
                scenario,
                ranks: 16,
                iterations: 9,
                seed: 7,
                shuffle_ranks: shuffle,
                delays: Vec::new(),
                network: None,
            };
            let name = format!("{scenario}-{shuffle}");
            let truth = import_generated(&db, &config, &name);
            check_against_truth(&db.trace(&name).unwrap(), &truth);
        }
    }
    assert_eq!(db.traces().unwrap().len(), 2 * Scenario::ALL.len());
}

#[test]
fn stencil2d_16_has_the_wrf_counts_of_table_3_8() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    let truth = import_generated(&db, &GenConfig::new(Scenario::Stencil2d, 16, 40), "wrf16");
    let trace = db.trace("wrf16").unwrap();
    // A 4x4 grid: corners have 2 neighbours, edges 3, inner ranks 4 (Table 3.8's 2140/3210/4280 Waits).
    let isends = trace.index(IndexDim::Kind, OpKind::Isend.code()).unwrap();
    let waits = trace.index(IndexDim::Kind, OpKind::Wait.code()).unwrap();
    for (rank, neighbours) in [(0u32, 2u64), (1, 3), (5, 4), (15, 2)] {
        let mine = trace.index(IndexDim::Process, rank).unwrap();
        assert_eq!(
            (&isends & &mine).len(),
            neighbours * 40,
            "Isends of rank {rank}"
        );
        assert_eq!(
            (&waits & &mine).len(),
            2 * neighbours * 40,
            "Waits of rank {rank}"
        );
    }
    assert_eq!(trace.summary().messages, 48 * 40);
    check_against_truth(&trace, &truth);
}

#[test]
fn a_trace_larger_than_a_chunk_per_rank_matches_across_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    // 4 ranks x ~9.4 operations x 10,000 iterations: each rank spans two operation chunks.
    let config = GenConfig::new(Scenario::Stencil2d, 4, 10_000);
    let truth = import_generated(&db, &config, "big");
    let trace = db.trace("big").unwrap();
    assert!(trace.op_chunks().iter().filter(|c| c.rank == 0).count() >= 2);
    check_against_truth(&trace, &truth);
}

#[test]
fn every_scenario_imported_from_mtf_text_gives_its_ground_truth() {
    use mtfdb::ingest::mtf_text::MtfWriter;
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    for scenario in Scenario::ALL {
        let config = GenConfig {
            scenario,
            ranks: 16,
            iterations: 7,
            seed: 11,
            shuffle_ranks: true,
            delays: Vec::new(),
            network: None,
        };
        let file = dir.path().join(format!("{scenario}.mtf"));
        let mut writer = MtfWriter::create(&file).unwrap();
        let truth = generate(&config, &mut writer).unwrap();
        writer.into_inner().unwrap();
        let info = db.import(&file, None).unwrap();
        assert_eq!(info.name, scenario.to_string());
        assert_eq!(info.format, "mtf");
        check_against_truth(&db.trace(&info.name).unwrap(), &truth);
    }
}

/// A rank's chunks, found through the per-rank directory, are exactly those the whole
/// directory lists for it, in chunk order; a rank the trace does not have has none.
#[test]
fn op_chunks_of_a_rank_are_its_chunks_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    // Enough iterations that each rank's operations fill several chunks.
    let config = GenConfig::new(Scenario::Stencil2d, 4, 8_000);
    import_generated(&db, &config, "t");
    let trace = db.trace("t").unwrap();
    let mut several = false;
    for rank in 0..5 {
        let scanned: Vec<u32> = trace
            .op_chunks()
            .iter()
            .filter(|c| c.rank == rank)
            .map(|c| c.chunk)
            .collect();
        let direct: Vec<u32> = trace.op_chunks_of(rank).map(|c| c.chunk).collect();
        assert_eq!(direct, scanned, "rank {rank}");
        assert_eq!(direct.is_empty(), rank == 4, "rank {rank}");
        several |= direct.len() > 1;
    }
    assert!(several, "a rank with several chunks");
}

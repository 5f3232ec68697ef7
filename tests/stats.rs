//! The MTF paper's statistics over stored traces, checked against the generator's ground truth:
//! fan-in and fan-out, the per-process table (Table 6), the communication matrix, size
//! histograms and time in MPI.

mod common;

use common::import_generated;
use mtfdb::analysis::stats::{
    communication_matrix, fan_table, mpi_time, process_traffic, size_histogram, statistics_table,
    Bins, Direction, MatrixOf,
};
use mtfdb::gen::{GenConfig, Scenario};
use mtfdb::model::Rank;
use mtfdb::results::Value;
use mtfdb::Database;

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => i64::try_from(*i).expect("a test value fits 64 bits"),
        other => panic!("not an integer: {other:?}"),
    }
}

#[test]
fn fan_in_and_fan_out_equal_the_ground_truth_for_every_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    for scenario in Scenario::ALL {
        let config = GenConfig {
            scenario,
            ranks: 16,
            iterations: 5,
            seed: 2,
            shuffle_ranks: true,
            delays: Vec::new(),
            network: None,
        };
        let truth = import_generated(&db, &config, &scenario.to_string());
        let trace = db.trace(&scenario.to_string()).unwrap();
        let traffic = process_traffic(&trace).unwrap();
        let ranks: Vec<Rank> = (0..16).collect();
        let fan_in = fan_table(&traffic, &ranks, Direction::In);
        let fan_out = fan_table(&traffic, &ranks, Direction::Out);
        for r in &truth.per_rank {
            let i = r.rank as usize;
            assert_eq!(
                int(&fan_in.rows[i][1]) as u64,
                r.fan_in(),
                "{scenario}: fan-in of {}",
                r.rank
            );
            assert_eq!(
                int(&fan_out.rows[i][1]) as u64,
                r.fan_out(),
                "{scenario}: fan-out of {}",
                r.rank
            );
            assert_eq!(
                int(&fan_in.rows[i][4]) as u64,
                r.p2p_recv_messages,
                "{scenario}: messages in"
            );
            assert_eq!(
                int(&fan_out.rows[i][4]) as u64,
                r.p2p_sent_messages,
                "{scenario}: messages out"
            );
            let partners = truth.pairs.iter().filter(|p| p.receiver == r.rank).count();
            assert_eq!(
                int(&fan_in.rows[i][5]) as usize,
                partners,
                "{scenario}: senders of {}",
                r.rank
            );
        }
    }
}

#[test]
fn the_statistics_table_has_the_shape_of_the_papers_table_6() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    let info = db
        .import(
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/examples/traces/stencil2d-16.mtf"
            ),
            Some("wrf16"),
        )
        .unwrap();
    assert_eq!(info.processes, 16);
    let trace = db.trace("wrf16").unwrap();
    let ranks: Vec<Rank> = (0..16).collect();
    let t = statistics_table(&trace, &ranks).unwrap();
    assert_eq!(t.len(), 17, "16 processes and a totals row");
    let col = |name: &str| {
        t.column(name)
            .unwrap_or_else(|| panic!("no column {name}: {:?}", t.columns))
    };
    let (isend, irecv, wait) = (col("MPI_Isend"), col("MPI_Irecv"), col("MPI_Wait"));
    let (bcast, gather, scatterv) = (col("MPI_Bcast"), col("MPI_Gather"), col("MPI_Scatterv"));
    // A 4x4 grid, 30 iterations: corners 2 neighbours, edges 3, inner ranks 4.
    let neighbours = |r: usize| {
        let (x, y) = (r % 4, r / 4);
        [x > 0, x < 3, y > 0, y < 3].iter().filter(|b| **b).count() as i64
    };
    for r in 0..16 {
        let row = &t.rows[r];
        assert_eq!(int(&row[0]), r as i64);
        assert_eq!(int(&row[isend]), 30 * neighbours(r), "Isends of {r}");
        assert_eq!(int(&row[irecv]), 30 * neighbours(r), "Irecvs of {r}");
        assert_eq!(int(&row[wait]), 2 * 30 * neighbours(r), "Waits of {r}");
        // Every process takes part in every collective: 30 + the setup Bcast, 7 Gathers, 3 Scattervs.
        assert_eq!(
            (int(&row[bcast]), int(&row[gather]), int(&row[scatterv])),
            (31, 7, 3),
            "collectives of {r}"
        );
    }
    let totals = &t.rows[16];
    assert_eq!(totals[0], Value::Text("total".into()));
    let sum = |c: usize| (0..16).map(|r| int(&t.rows[r][c])).sum::<i64>();
    for (c, total) in totals.iter().enumerate().skip(1) {
        assert_eq!(int(total), sum(c), "total of {}", t.columns[c]);
    }
    // Bytes sent and received balance, as in Table 6.
    let (sent, received) = (col("bytes_sent"), col("bytes_received"));
    assert_eq!(int(&totals[sent]), int(&totals[received]));
    assert!(int(&totals[sent]) > 0);
}

#[test]
fn the_communication_matrix_equals_the_pairs_of_the_ground_truth() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    let truth = import_generated(&db, &GenConfig::new(Scenario::Bt, 16, 4), "bt");
    let trace = db.trace("bt").unwrap();
    let ranks: Vec<Rank> = (0..16).collect();
    let messages = trace.messages().unwrap();
    let bytes = communication_matrix(&messages, &ranks, MatrixOf::Bytes);
    let count = communication_matrix(&messages, &ranks, MatrixOf::Count);
    for s in 0..16u32 {
        for d in 0..16u32 {
            let (n, b) = truth.pair(s, d).map_or((0, 0), |p| (p.messages, p.bytes));
            assert_eq!(
                int(&count.rows[s as usize][d as usize + 1]) as u64,
                n,
                "count {s}->{d}"
            );
            assert_eq!(
                int(&bytes.rows[s as usize][d as usize + 1]) as u64,
                b,
                "bytes {s}->{d}"
            );
        }
        // BT: six partners each.
        let partners = (1..=16)
            .filter(|&c| int(&count.rows[s as usize][c]) > 0)
            .count();
        assert_eq!(partners, 6, "partners of {s}");
    }
}

#[test]
fn histograms_keep_every_size_in_its_bin() {
    let sizes = [0u64, 1, 3, 4, 7, 8, 1000, 1024, 1025];
    let log2 = size_histogram(&sizes, Bins::Log2);
    let rows: Vec<(i64, i64, i64)> = log2
        .rows
        .iter()
        .map(|r| (int(&r[0]), int(&r[1]), int(&r[2])))
        .collect();
    assert_eq!(
        rows,
        vec![
            (0, 1, 1),
            (1, 2, 1),
            (2, 4, 1),
            (4, 8, 2),
            (8, 16, 1),
            (16, 32, 0),
            (32, 64, 0),
            (64, 128, 0),
            (128, 256, 0),
            (256, 512, 0),
            (512, 1024, 1),
            (1024, 2048, 2)
        ]
    );
    let linear = size_histogram(&[10, 20, 30, 40, 50], Bins::Linear(2));
    let rows: Vec<(i64, i64, i64)> = linear
        .rows
        .iter()
        .map(|r| (int(&r[0]), int(&r[1]), int(&r[2])))
        .collect();
    assert_eq!(rows, vec![(10, 31, 3), (31, 52, 2)]);
    assert!(size_histogram(&[], Bins::Log2).is_empty());
}

#[test]
fn mpi_time_sums_the_durations_of_each_process_s_calls() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    import_generated(&db, &GenConfig::new(Scenario::Ring, 4, 10), "ring");
    let trace = db.trace("ring").unwrap();
    let t = mpi_time(&trace, &[0, 3]).unwrap();
    for (row, rank) in t.rows.iter().zip([0u32, 3]) {
        let ops = trace.process_operations(rank).unwrap();
        let busy: u64 = ops.iter().map(|(_, o)| o.end - o.start).sum();
        assert_eq!(int(&row[1]) as u64, busy);
        assert_eq!(int(&row[2]) as usize, ops.len());
        let span = ops.iter().map(|(_, o)| o.end).max().unwrap() - ops[0].1.start;
        assert_eq!(int(&row[3]) as u64, span);
    }
}

//! `SELECT TIME PROFILE BINS n` and `SELECT COMMUNICATION OVER TIME BINS n`: each bin's times
//! add up to its width times the ranks running through it, a call spanning bins gives each
//! its part, and the bins' sums are the unbinned profile's and messages' totals. And the
//! relative what-if, `SIMULATE WITH BANDWIDTH x2`, against the fitted network changed by hand.

mod common;

use std::collections::BTreeMap;

use mtfdb::analysis::replay::network::NetworkModel;
use mtfdb::gen::{GenConfig, Scenario};
use mtfdb::query::ast::Analysis;
use mtfdb::query::Session;
use mtfdb::results::{ResultSet, Value};

fn int(r: &ResultSet, row: &[Value], column: &str) -> u64 {
    let i = r
        .column(column)
        .unwrap_or_else(|| panic!("no {column} in {:?}", r.columns));
    row[i].render().parse().unwrap()
}

fn text(r: &ResultSet, row: &[Value], column: &str) -> String {
    row[r.column(column).unwrap()].render()
}

/// Per bin: (start, end, routine → time).
type Binned = BTreeMap<u64, (u64, u64, BTreeMap<String, u64>)>;

fn binned(s: &mut Session, statement: &str) -> Binned {
    let r = s.run(statement).unwrap();
    let mut out = Binned::new();
    for row in &r.rows {
        let bin = out.entry(int(&r, row, "bin")).or_insert((
            int(&r, row, "start_ns"),
            int(&r, row, "end_ns"),
            BTreeMap::new(),
        ));
        let before = bin
            .2
            .insert(text(&r, row, "routine"), int(&r, row, "time_ns"));
        assert!(before.is_none(), "one row per bin and routine");
    }
    out
}

#[test]
fn a_hand_made_trace_bins_to_the_nanosecond() {
    // Rank 0 runs 100-300 (main; exchange 110-170 with a send 120-150; a barrier 200-260);
    // rank 1 runs 50-260 (a receive 50-140, a barrier 180-260), no routine.
    let events = "0 100 enter main\n\
        0 110 enter exchange\n\
        0 120 150 Send c=0 to=1 tag=7 b=1024 dt=MPI_BYTE\n\
        0 170 leave exchange\n\
        0 200 260 Barrier c=0\n\
        0 300 leave main\n\
        1 50 140 Recv c=0 from=0 rtag=7 rb=1024 dt=MPI_BYTE\n\
        1 180 260 Barrier c=0\n";
    let (_dir, db) = common::hand_made_db(2, "", events);
    let mut s = Session::new(db);
    s.run("USE TRACE t").unwrap();
    let b = binned(&mut s, "SELECT TIME PROFILE BINS 2");
    let times = |pairs: &[(&str, u64)]| -> BTreeMap<String, u64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    };
    // 50 to 300 in two bins: [50, 175) and [175, 300].
    assert_eq!(
        b[&0],
        (
            50,
            175,
            times(&[
                ("MPI_Recv", 90),
                ("(process)", 35),
                ("MPI_Send", 30),
                ("exchange", 30),
                ("main", 15),
            ])
        )
    );
    assert_eq!(
        b[&1],
        (
            175,
            300,
            times(&[("MPI_Barrier", 140), ("main", 65), ("(process)", 5)])
        )
    );
    let r = s.run("SELECT COMMUNICATION OVER TIME BINS 2").unwrap();
    let rows: Vec<[u64; 5]> = r
        .rows
        .iter()
        .map(|row| ["bin", "start_ns", "end_ns", "messages", "bytes"].map(|c| int(&r, row, c)))
        .collect();
    assert_eq!(rows, vec![[0, 50, 175, 1, 1024], [1, 175, 300, 0, 0]]);
    // Scoped: rank 1 alone sent nothing; a window bins itself.
    let r = s
        .run("SELECT COMMUNICATION OVER TIME BINS 1 FOR PROCESS(1)")
        .unwrap();
    assert_eq!(int(&r, &r.rows[0], "messages"), 0);
    let b = binned(
        &mut s,
        "SELECT TIME PROFILE BINS 3 FOR PROCESS(0) BETWEEN TIME 130 ns AND 160 ns",
    );
    assert_eq!(b[&0], (130, 140, times(&[("MPI_Send", 10)])));
    assert_eq!(b[&1], (140, 150, times(&[("MPI_Send", 10)])));
    assert_eq!(b[&2], (150, 160, times(&[("exchange", 10)])));
}

#[test]
fn bins_add_up_to_their_width_and_to_the_unbinned_profile() {
    let config = common::delayed_run(Scenario::Stencil2d);
    let (_dir, db) = common::generated_db(&config);
    let trace = db.trace("t").unwrap();
    let mut s = Session::new(db);
    s.run("USE TRACE t").unwrap();
    let ranks = 16u64;
    // Each rank's span, from the per-rank profile's process rows.
    let p = s.run("SELECT PROFILE PER PROCESS").unwrap();
    let spans: Vec<u64> = p
        .rows
        .iter()
        .filter(|row| text(&p, row, "routine") == "(process)")
        .map(|row| int(&p, row, "inclusive_ns"))
        .collect();
    assert_eq!(spans.len() as u64, ranks);
    let first_last: Vec<(u64, u64)> = (0..ranks as u32)
        .map(|rank| {
            let ops = trace.process_operations(rank).unwrap();
            let calls: Vec<_> = trace
                .routine_calls()
                .unwrap()
                .into_iter()
                .filter(|c| c.rank == rank)
                .collect();
            let first = ops
                .iter()
                .map(|o| o.1.start)
                .chain(calls.iter().map(|c| c.start))
                .min()
                .unwrap();
            let last = ops
                .iter()
                .map(|o| o.1.end)
                .chain(calls.iter().map(|c| c.end))
                .max()
                .unwrap();
            (first, last)
        })
        .collect();
    for n in [1u32, 7, 100] {
        let b = binned(&mut s, &format!("SELECT TIME PROFILE BINS {n}"));
        assert!(b.len() <= n as usize);
        for (k, (start, end, times)) in &b {
            // The ranks running through the whole bin each give it its width.
            let covering = first_last
                .iter()
                .filter(|(f, l)| f <= start && end <= l)
                .count() as u64;
            let partial: u64 = first_last
                .iter()
                .filter(|(f, l)| !(f <= start && end <= l))
                .map(|(f, l)| end.min(l).saturating_sub(*start.max(f)))
                .sum();
            let sum: u64 = times.values().sum();
            assert_eq!(sum, (end - start) * covering + partial, "bin {k} of {n}");
        }
        // Totals per routine equal the unbinned exclusive times.
        let mut totals: BTreeMap<String, u64> = BTreeMap::new();
        for (_, _, times) in b.values() {
            for (name, t) in times {
                *totals.entry(name.clone()).or_default() += t;
            }
        }
        let p = s.run("SELECT PROFILE").unwrap();
        for row in &p.rows {
            let name = text(&p, row, "routine");
            let exclusive = int(&p, row, "exclusive_ns");
            assert_eq!(
                totals.get(&name).copied().unwrap_or(0),
                exclusive,
                "{name} in {n} bins"
            );
        }
        let r = s
            .run(&format!("SELECT COMMUNICATION OVER TIME BINS {n}"))
            .unwrap();
        let messages: u64 = r.rows.iter().map(|row| int(&r, row, "messages")).sum();
        let bytes: u64 = r.rows.iter().map(|row| int(&r, row, "bytes")).sum();
        assert_eq!(r.rows.len(), n as usize);
        assert_eq!(messages, trace.summary().messages, "{n} bins");
        assert_eq!(bytes, trace.summary().message_bytes, "{n} bins");
    }
}

#[test]
fn a_relative_what_if_is_the_fitted_network_changed() {
    let (_dir, db) = common::temp_db();
    let net: NetworkModel = "1.2us,300ns,50ns,0.25,64KiB".parse().unwrap();
    let mut config = GenConfig::new(Scenario::Stencil2d, 16, 3);
    config.network = Some(net);
    common::import_generated(&db, &config, "t");
    let trace = db.trace("t").unwrap();
    let fitted = mtfdb::analysis::replay::fit::fit_network(&trace)
        .unwrap()
        .model
        .unwrap();
    let mut s = Session::new(db);
    s.run("USE TRACE t").unwrap();
    let what_if = s.run("SIMULATE WITH BANDWIDTH x2").unwrap();
    let doubled = NetworkModel {
        bandwidth: fitted.bandwidth * 2,
        ..fitted
    };
    // The same, given absolutely, and the fitted network unchanged.
    let mut absolute = |network: NetworkModel| {
        let statement = Analysis::Simulate {
            network,
            as_trace: None,
        }
        .to_string();
        s.run(&statement).unwrap()
    };
    let on_doubled = absolute(doubled);
    let on_fitted = absolute(fitted);
    assert_eq!(what_if.rows.len(), on_doubled.rows.len());
    for ((w, d), f) in what_if
        .rows
        .iter()
        .zip(&on_doubled.rows)
        .zip(&on_fitted.rows)
    {
        let rank = text(&what_if, w, "rank");
        assert_eq!(rank, text(&on_doubled, d, "rank"));
        assert_eq!(
            int(&what_if, w, "predicted_end_ns"),
            int(&on_doubled, d, "predicted_end_ns"),
            "rank {rank}"
        );
        assert_eq!(
            int(&what_if, w, "predicted_mpi_ns"),
            int(&on_doubled, d, "predicted_mpi_ns"),
            "rank {rank}"
        );
        assert_eq!(
            int(&what_if, w, "fitted_end_ns"),
            int(&on_fitted, f, "predicted_end_ns"),
            "rank {rank}"
        );
        assert_eq!(
            int(&what_if, w, "measured_end_ns"),
            int(&on_fitted, f, "measured_end_ns"),
            "rank {rank}"
        );
    }
    // Twice the bandwidth is never slower than the fitted network.
    let run = what_if.rows.last().unwrap();
    assert!(int(&what_if, run, "predicted_end_ns") <= int(&what_if, run, "fitted_end_ns"));
    // A factor is above 0; AS TRACE takes absolute values.
    let e = s.run("SIMULATE WITH LATENCY x0").unwrap_err().to_string();
    assert!(e.contains("x2 or x0.5"), "{e}");
    let e = s
        .run("SIMULATE WITH BANDWIDTH x2 AS TRACE faster")
        .unwrap_err()
        .to_string();
    assert!(e.contains("absolute"), "{e}");
}

//! `SELECT DELAY COSTS` (Scalasca's root causes of wait states) on generated traces with
//! injected delays, timed by a network model (`gen --network`) so that every MPI call follows
//! the model exactly. The expected costs are computed here from the generator's timing
//! model, not from the analysis.

mod common;

use mtfdb::analysis::delay_costs::{delay_costs, DelayCost, DelayCosts};
use mtfdb::analysis::replay::network::NetworkModel;
use mtfdb::analysis::waits::{wait_states, WaitKind};
use mtfdb::gen::{Delay, GenConfig, Scenario};
use mtfdb::model::{OpKind, Rank, Time};
use mtfdb::Trace;

const MS: Time = 1_000_000;

fn delayed(
    scenario: Scenario,
    ranks: u32,
    iterations: u32,
    delays: &[(Rank, u32, Time)],
) -> GenConfig {
    GenConfig {
        delays: delays
            .iter()
            .map(|&(rank, iteration, duration)| Delay {
                rank,
                iteration,
                duration,
            })
            .collect(),
        network: Some(NetworkModel::default()),
        ..GenConfig::new(scenario, ranks, iterations)
    }
}

/// The start of every call of `kind` per rank, in time order.
fn entries(trace: &Trace, ranks: u32, kind: OpKind) -> Vec<Vec<Time>> {
    (0..ranks)
        .map(|r| {
            let mut v: Vec<Time> = trace
                .process_operations(r)
                .unwrap()
                .into_iter()
                .filter(|(_, o)| o.kind == kind)
                .map(|(_, o)| o.start)
                .collect();
            v.sort_unstable();
            v
        })
        .collect()
}

/// The row of `rank`'s computation in `path`.
fn computation<'a>(costs: &'a DelayCosts, rank: Rank, path: &str) -> Option<&'a DelayCost> {
    costs
        .rows
        .iter()
        .find(|c| c.rank == rank && c.activity.is_none() && c.call_path == path)
}

/// Every wait's time is a delay's cost or unexplained, to the nanosecond.
fn assert_conserved(trace: &Trace, costs: &DelayCosts) {
    let waiting: Time = wait_states(trace)
        .unwrap()
        .waits
        .iter()
        .map(|w| w.time)
        .sum();
    assert_eq!(costs.waiting, waiting);
    let attributed: Time = costs.rows.iter().map(DelayCost::total).sum();
    assert_eq!(attributed + costs.unexplained, waiting, "{costs:#?}");
}

/// The alltoall scenario: per iteration every rank computes 500 us (plus jitter and any
/// injected delay) in `main/solve` and enters `transpose { MPI_Alltoall }`, then `checksum {
/// MPI_Allreduce }`. On the network model every member leaves an Allreduce (recursive
/// doubling) at the same instant `E`, and routine events come at fixed offsets after a call
/// (15 ns apart), so rank `r` enters the next Alltoall at `E + 60 + burst_r`. The Alltoall's
/// synchronization interval of waiting rank `r` and the last rank `L` is `[E, entry)` on both,
/// with the same routine steps: the only category in which `L` spent more is its computation
/// in `main/solve`, by `entry_L - entry_r`, which is `r`'s wait at N x N. So each Alltoall
/// wait is a short-term cost of the last rank's computation in `main/solve`, whole, and no
/// wait there propagates (nobody waited before it in the interval).
///
/// The Allreduce that follows is entered `45` ns after each member's own Alltoall end (leave
/// `transpose`, enter `checksum`): the pairwise exchange lets members leave at different
/// times, and the interval since the Alltoall holds the same steps on every member, so no
/// delay explains those waits (Scalasca's would point at the Alltoall's algorithm).
fn expected_alltoall_costs(trace: &Trace, ranks: u32) -> (Vec<Time>, Vec<u64>) {
    let alltoall = entries(trace, ranks, OpKind::Alltoall);
    let mut short = vec![0; ranks as usize];
    let mut waits = vec![0u64; ranks as usize];
    let iterations = alltoall[0].len();
    for k in 0..iterations {
        let at_k: Vec<Time> = alltoall.iter().map(|e| e[k]).collect();
        let entry = |r: usize| at_k[r];
        let last = (0..ranks as usize).max_by_key(|&r| (entry(r), r)).unwrap();
        for r in 0..ranks as usize {
            // wait_at_nxn(r) = min(entry_L, its end) - entry_r = entry_L - entry_r.
            let wait = entry(last) - entry(r);
            if wait > 0 {
                short[last] += wait;
                waits[last] += 1;
            }
        }
    }
    (short, waits)
}

fn allreduce_waiting(trace: &Trace) -> Time {
    wait_states(trace)
        .unwrap()
        .waits
        .iter()
        .filter(|w| w.kind == WaitKind::WaitAtNxN)
        .filter(|w| {
            let ids: roaring::RoaringTreemap = std::iter::once(w.op).collect();
            trace.operations(&ids).unwrap()[0].1.kind == OpKind::Allreduce
        })
        .map(|w| w.time)
        .sum()
}

fn check_alltoall(config: &GenConfig) -> DelayCosts {
    let (_dir, db) = common::generated_db(config);
    let trace = db.trace("t").unwrap();
    let costs = delay_costs(&trace).unwrap();
    assert_conserved(&trace, &costs);
    let (short, waits) = expected_alltoall_costs(&trace, config.ranks);
    for rank in 0..config.ranks {
        let row = computation(&costs, rank, "main/solve");
        let (got_short, got_long, got_waits) =
            row.map_or((0, 0, 0), |c| (c.short_term, c.long_term, c.waits));
        assert_eq!(got_short, short[rank as usize], "rank {rank}: {costs:#?}");
        assert_eq!(got_long, 0, "rank {rank}: nothing propagates");
        assert_eq!(got_waits, waits[rank as usize], "rank {rank}");
    }
    assert_eq!(costs.unexplained, allreduce_waiting(&trace), "{costs:#?}");
    costs
}

/// One delay: rank 2 computes 1 ms longer in iteration 1 of 4. Its computation in
/// `main/solve` is the costliest delay, by at least the 3 ranks' 1 ms wait each in that
/// iteration (its jitter against theirs can only add: it was last), and every Alltoall wait is
/// costed to the nanosecond as above.
#[test]
fn one_delay_costs_each_waiting_rank_its_wait_at_the_alltoall() {
    let config = delayed(Scenario::Alltoall, 4, 4, &[(2, 1, MS)]);
    let costs = check_alltoall(&config);
    let top = &costs.rows[0];
    assert_eq!(
        (top.rank, top.activity, top.call_path.as_str()),
        (2, None, "main/solve")
    );
    // 3 ranks wait for the delay, less at most one jitter of 500/16 us each.
    assert!(top.short_term >= 3 * (MS - 31_250), "{top:?}");
}

/// Two delays on different ranks in different iterations (rank 1 by 1 ms in iteration 1,
/// rank 3 by 2 ms in iteration 2): each is costed to its own rank, the larger first.
#[test]
fn two_delays_are_costed_to_their_own_ranks() {
    let config = delayed(Scenario::Alltoall, 4, 4, &[(1, 1, MS), (3, 2, 2 * MS)]);
    let costs = check_alltoall(&config);
    let top: Vec<(Rank, Option<OpKind>)> = costs
        .rows
        .iter()
        .take(2)
        .map(|c| (c.rank, c.activity))
        .collect();
    assert_eq!(top, vec![(3, None), (1, None)], "{costs:#?}");
    assert!(costs.rows[0].short_term >= 3 * (2 * MS - 31_250));
    assert!(costs.rows[1].short_term >= 3 * (MS - 31_250));
}

/// A delay that propagates: in the ring (even positions Send right then Recv left, odd ones
/// Recv left then Send right, then an Allreduce), rank 1 computing 1 ms longer in iteration 1
/// sends late to rank 2, which waits as a late sender in its Recv; rank 2 then enters the
/// Allreduce last, `L + o` after its message arrived, and the other ranks wait there for rank
/// 2, whose interval holds that wait. So rank 1's computation has a short-term cost (rank 2's
/// late-sender wait, less the share of rank 1's `o` in its own Recv and of the jitter, both
/// far below the delay) and a long-term one: the waits at the Allreduce that rank 2's wait
/// propagated into. The jitter of the ring's computation (up to 100/16 us) enters these
/// shares, so they are checked within it; the conservation of the waiting time is exact.
#[test]
fn a_delay_propagates_through_a_late_sender_into_the_allreduce() {
    const D: Time = MS;
    let config = delayed(Scenario::Ring, 4, 3, &[(1, 1, D)]);
    let (_dir, db) = common::generated_db(&config);
    let trace = db.trace("t").unwrap();
    let costs = delay_costs(&trace).unwrap();
    assert_conserved(&trace, &costs);
    let states = wait_states(&trace).unwrap();
    let recv = entries(&trace, 4, OpKind::Recv);
    let send = entries(&trace, 4, OpKind::Send);
    // Iteration 1: rank 2's Recv from rank 1 waits from its start until rank 1's Send starts.
    let late_sender = send[1][1] - recv[2][1];
    assert!(late_sender >= D - 2 * 6_250, "{late_sender}");
    let w = states
        .waits
        .iter()
        .find(|w| w.rank == 2 && w.kind == WaitKind::LateSender && w.start == recv[2][1])
        .expect("rank 2 waits for rank 1");
    assert_eq!(w.time, late_sender);
    assert_eq!(w.partner, 1);
    let top = &costs.rows[0];
    assert_eq!(
        (top.rank, top.activity, top.call_path.as_str()),
        (1, None, "main/solve"),
        "{costs:#?}"
    );
    // Short-term: at least rank 2's late-sender wait less what rank 2's own computation
    // (its jitter, at most 100/16 us) takes of it.
    assert!(top.short_term >= late_sender - 6_250, "{top:?}");
    // Long-term: ranks 0, 1 and 3 wait at the Allreduce of iteration 1 for rank 2, each about
    // D; most of each wait is rank 2's propagated late-sender wait.
    let allreduce = entries(&trace, 4, OpKind::Allreduce);
    let last = allreduce[2][1];
    assert!(
        (0..4).all(|r| allreduce[r][1] <= last),
        "rank 2 enters last"
    );
    let caused: Time = [0, 1, 3].iter().map(|&r| last - allreduce[r][1]).sum();
    assert!(
        top.long_term >= caused - 3 * 2 * 6_250 - 3 * 2 * 1_000,
        "{top:?} vs {caused}"
    );
    // At most those, and what the Allreduces of the other iterations waited (where the ring's
    // jitter passes small waits along the same chain).
    let elsewhere: Time = [0, 2]
        .iter()
        .map(|&k| {
            let last = (0..4).map(|r| allreduce[r][k]).max().unwrap();
            (0..4).map(|r| last - allreduce[r][k]).sum::<Time>()
        })
        .sum();
    assert!(
        top.long_term <= caused + elsewhere,
        "{top:?} vs {caused} + {elsewhere}"
    );
}

/// The statement: rows with units in their names, sorted by total cost, `FOR PROCESS(n)`
/// keeping one delaying rank, stored like the other analyses, and `EXPLAIN` saying so.
#[test]
fn the_statement_lists_the_costs_and_explains_itself() {
    let config = delayed(Scenario::Alltoall, 4, 4, &[(2, 1, MS)]);
    let (_dir, db) = common::generated_db(&config);
    let mut session = mtfdb::Session::new(db);
    session.use_trace("t").unwrap();
    let plan = session.run("EXPLAIN SELECT DELAY COSTS").unwrap();
    assert!(
        format!("{plan:?}").contains("wait state analysis"),
        "{plan:?}"
    );
    let all = session.run("SELECT DELAY COSTS").unwrap();
    assert_eq!(
        all.columns,
        [
            "rank",
            "activity",
            "call_path",
            "short_term_ns",
            "long_term_ns",
            "total_ns",
            "waits"
        ]
    );
    let total = |row: &Vec<mtfdb::results::Value>| row[5].render().parse::<u64>().unwrap();
    assert!(all.rows.windows(2).all(|w| total(&w[0]) >= total(&w[1])));
    assert_eq!(all.rows[0][0].render(), "2");
    assert_eq!(all.rows[0][1].render(), "computation");
    assert_eq!(all.rows[0][2].render(), "main/solve");
    let plan = session.run("EXPLAIN SELECT DELAY COSTS").unwrap();
    assert!(
        format!("{plan:?}").contains("read the stored delay costs"),
        "{plan:?}"
    );
    let one = session.run("SELECT DELAY COSTS FOR PROCESS(2)").unwrap();
    assert!(!one.rows.is_empty());
    assert!(one.rows.iter().all(|r| r[0].render() == "2"));
    let err = session.run("SELECT DELAY COSTS FOR PROCESSES(1,2)");
    assert!(err.is_err());
}

//! Wait states (Scalasca's definitions) on hand-made traces: every rule with its waiting time
//! to the nanosecond, on traces written as MTF text and imported like any other.

mod common;

use common::{hand_made_db, temp_db};
use mtfdb::analysis::waits::{wait_states, Wait, WaitKind, WaitStates};
use mtfdb::model::Rank;
use mtfdb::Database;

/// A trace of `ranks` ranks (world communicator 0, plus `extra` communicator lines) whose
/// events are `events`, imported into a fresh database.
fn waits_of(ranks: u32, extra: &str, events: &str) -> (WaitStates, Vec<(Rank, String, u64)>) {
    let (states, listed, _) = waits_and_messages(ranks, extra, events);
    (states, listed)
}

/// [`waits_of`], with the number of matched messages.
fn waits_and_messages(
    ranks: u32,
    extra: &str,
    events: &str,
) -> (WaitStates, Vec<(Rank, String, u64)>, u64) {
    let (_dir, db) = hand_made_db(ranks, extra, events);
    let states = analyse(&db);
    let listed = list(&db, &states);
    let messages = db.trace("t").unwrap().summary().messages;
    (states, listed, messages)
}

fn analyse(db: &Database) -> WaitStates {
    wait_states(&db.trace("t").unwrap()).unwrap()
}

/// Each wait as (rank, "kind of call", time), in operation order.
fn list(db: &Database, states: &WaitStates) -> Vec<(Rank, String, u64)> {
    let trace = db.trace("t").unwrap();
    states
        .waits
        .iter()
        .map(|w: &Wait| {
            let ids = std::iter::once(w.op).collect();
            let (_, op) = trace.operations(&ids).unwrap().pop().unwrap();
            (
                w.rank,
                format!("{} {}", w.kind, op.kind.mpi_name().unwrap()),
                w.time,
            )
        })
        .collect()
}

fn wait(rank: Rank, what: &str, time: u64) -> (Rank, String, u64) {
    (rank, what.to_string(), time)
}

#[test]
fn a_late_sender_makes_a_blocking_receive_wait_until_the_send_starts() {
    // Rank 1 posts its receive at 100; rank 0 starts sending at 600. Rank 2's receive is
    // posted at 1000, after rank 0's second send started (800): no wait.
    let (states, waits) = waits_of(
        3,
        "",
        "0 600 650 Send c=0 to=1 tag=1 b=8\n\
         0 800 850 Send c=0 to=2 tag=1 b=8\n\
         1 100 900 Recv c=0 from=0 rtag=1 rb=8\n\
         2 1000 1100 Recv c=0 from=0 rtag=1 rb=8\n",
    );
    assert_eq!(waits, vec![wait(1, "late sender MPI_Recv", 500)]);
    assert_eq!(states.waits[0].partner, 0);
    assert_eq!(states.waits[0].kind, WaitKind::LateSender);
    assert_eq!(states.totals(), [500, 0, 0, 0, 0, 0]);
    assert_eq!(states.inconsistent, 0);
}

#[test]
fn a_send_that_starts_after_the_receive_ended_is_no_wait_but_an_inconsistency() {
    let (states, waits) = waits_of(
        2,
        "",
        "0 2000 2100 Send c=0 to=1 tag=1 b=8\n\
         1 100 900 Recv c=0 from=0 rtag=1 rb=8\n",
    );
    assert_eq!(waits, vec![]);
    assert_eq!(states.inconsistent, 1);
}

#[test]
fn a_waitall_over_several_receives_waits_for_the_latest_send() {
    // Rank 2 posts two Irecvs and waits for both over [300, 2000]; rank 0 sends at 500 and
    // rank 1 at 1200: the Waitall waited 900 ns, for rank 1.
    let (states, waits) = waits_of(
        3,
        "",
        "0 500 550 Send c=0 to=2 tag=1 b=8\n\
         1 1200 1250 Send c=0 to=2 tag=1 b=8\n\
         2 100 110 Irecv c=0 from=0 rtag=1 rb=8 req=1\n\
         2 120 130 Irecv c=0 from=1 rtag=1 rb=8 req=2\n\
         2 300 2000 Waitall done=1,2\n",
    );
    assert_eq!(waits, vec![wait(2, "late sender MPI_Waitall", 900)]);
    assert_eq!(states.waits[0].partner, 1);
}

#[test]
fn test_calls_never_wait_and_a_wait_on_an_irecv_does() {
    // Request 1 is completed by a Test (no wait, though its send started later), request 2
    // by a Wait over [650, 1000] for a send that started at 950 (300 ns).
    let (_, waits) = waits_of(
        2,
        "",
        "0 500 520 Send c=0 to=1 tag=1 b=8\n\
         0 950 960 Send c=0 to=1 tag=2 b=8\n\
         1 100 110 Irecv c=0 from=0 rtag=1 rb=8 req=1\n\
         1 120 130 Irecv c=0 from=0 rtag=2 rb=8 req=2\n\
         1 140 150 Test flag=0\n\
         1 200 600 Test done=1\n\
         1 650 1000 Wait done=2\n",
    );
    assert_eq!(waits, vec![wait(1, "late sender MPI_Wait", 300)]);
}

#[test]
fn a_blocking_send_waits_for_a_late_receiver_unless_it_was_eager() {
    // Rank 0's Ssend over [100, 700] completes after rank 1 posts its receive at 400: 300 ns.
    // Its Send over [800, 850] ended before rank 1's receive was posted (900): eager, no
    // wait. The Bsend never waits.
    let (states, waits) = waits_of(
        2,
        "",
        "0 100 700 Ssend c=0 to=1 tag=1 b=8\n\
         0 800 850 Send c=0 to=1 tag=2 b=8\n\
         0 860 990 Bsend c=0 to=1 tag=3 b=8\n\
         1 400 710 Recv c=0 from=0 rtag=1 rb=8\n\
         1 900 910 Recv c=0 from=0 rtag=2 rb=8\n\
         1 920 1000 Recv c=0 from=0 rtag=3 rb=8\n",
    );
    assert_eq!(waits, vec![wait(0, "late receiver MPI_Ssend", 300)]);
    assert_eq!(states.waits[0].partner, 1);
}

#[test]
fn collectives_wait_for_the_last_member_the_root_or_the_first_sender() {
    // Barrier: members enter at 100, 300, 700 and all leave at 800.
    // Allreduce on the sub-communicator {1, 2} only: enter at 1000 and 1400.
    // Bcast rooted at 2: the root enters at 2500, the others at 2000 and 2600.
    // Reduce rooted at 0: the root enters at 3000, the others at 3400 and 3600.
    let (states, waits) = waits_of(
        3,
        "communicator 1 pair 1-2\n",
        "0 100 800 Barrier c=0\n\
         1 300 800 Barrier c=0\n\
         2 700 800 Barrier c=0\n\
         1 1000 1500 Allreduce c=1 b=8 rb=8\n\
         2 1400 1500 Allreduce c=1 b=8 rb=8\n\
         0 2000 2700 Bcast c=0 rb=8 root=2\n\
         1 2600 2700 Bcast c=0 rb=8 root=2\n\
         2 2500 2700 Bcast c=0 b=24 rb=8 root=2\n\
         0 3000 3700 Reduce c=0 b=8 rb=24 root=0\n\
         1 3400 3450 Reduce c=0 b=8 root=0\n\
         2 3600 3650 Reduce c=0 b=8 root=0\n",
    );
    let mut sorted = waits.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        vec![
            wait(0, "early reduce MPI_Reduce", 400),
            wait(0, "late broadcast MPI_Bcast", 500),
            wait(0, "wait at barrier MPI_Barrier", 600),
            wait(1, "wait at NxN MPI_Allreduce", 400),
            wait(1, "wait at barrier MPI_Barrier", 400),
        ]
    );
    // Rank 1 entered the Bcast after the root: no wait. Rank 2 is the last of each.
    assert_eq!(
        states.per_rank(3),
        vec![[0, 0, 600, 0, 500, 400], [0, 0, 400, 400, 0, 0], [0; 6]]
    );
}

#[test]
fn the_wait_of_a_non_blocking_collective_waits_for_the_last_member() {
    // Iallreduce started at 100 and 900; rank 0 waits over [200, 1200]: 700 ns.
    let (_, waits) = waits_of(
        2,
        "",
        "0 100 110 Iallreduce c=0 b=8 rb=8 req=1\n\
         1 900 910 Iallreduce c=0 b=8 rb=8 req=1\n\
         0 200 1200 Wait done=1\n\
         1 950 1200 Wait done=1\n",
    );
    assert_eq!(waits, vec![wait(0, "wait at NxN MPI_Wait", 700)]);
}

#[test]
fn a_message_to_itself_waits_by_the_same_rule() {
    // Rank 0 posts an Irecv from itself, sends later, then waits: the send started before
    // the wait, so no wait. Rank 1 receives from itself with a Sendrecv: none either.
    let (states, waits, messages) = waits_and_messages(
        2,
        "",
        "0 100 110 Irecv c=0 from=0 rtag=1 rb=8 req=1\n\
         0 200 210 Isend c=0 to=0 tag=1 b=8 req=2\n\
         0 300 400 Waitall done=1,2\n\
         1 100 300 Sendrecv c=0 to=1 tag=5 b=8 from=1 rtag=5 rb=8\n",
    );
    assert_eq!(messages, 2, "both messages to self are matched");
    assert_eq!(waits, vec![]);
    assert_eq!(states.inconsistent, 0);
}

#[test]
fn no_rank_waits_longer_than_it_spends_in_mpi() {
    use mtfdb::gen::{GenConfig, Scenario};
    for scenario in Scenario::ALL {
        let (_dir, db) = common::generated_db(&GenConfig::new(scenario, 16, 6));
        let trace = db.trace("t").unwrap();
        let states = wait_states(&trace).unwrap();
        let per_rank = states.per_rank(16);
        for (rank, waits) in per_rank.iter().enumerate() {
            let in_mpi: u64 = trace
                .process_operations(rank as Rank)
                .unwrap()
                .iter()
                .map(|(_, op)| op.end - op.start)
                .sum();
            let waited: u64 = waits.iter().sum();
            assert!(
                waited <= in_mpi,
                "{scenario}: rank {rank} waited {waited} ns of {in_mpi} in MPI"
            );
        }
        // Every wait lies within its own operation.
        for w in &states.waits {
            let ids = std::iter::once(w.op).collect();
            let (_, op) = trace.operations(&ids).unwrap().pop().unwrap();
            assert!(w.time <= op.end - op.start, "{scenario}: {w:?} in {op:?}");
        }
        assert!(
            states.totals().iter().sum::<u64>() > 0,
            "{scenario}: somebody waits"
        );
        assert_eq!(states.inconsistent, 0, "{scenario}");
    }
}

/// Every real trace in `../shared/traces` (OTF2, OTF v1, DUMPI, Paraver): its waits are
/// non-negative by construction, each lies within its own call, and no rank waits longer than
/// it spends in MPI; its critical path spans the run without a gap. Skipped with a message when
/// the traces are not beside this checkout.
#[test]
fn real_traces_wait_within_their_time_in_mpi() {
    let Some(files) = common::real_traces() else {
        return;
    };
    let mut waited_somewhere = false;
    for file in files {
        let (_dir, db) = temp_db();
        db.import(&file, Some("t")).unwrap();
        let trace = db.trace("t").unwrap();
        let states = wait_states(&trace).unwrap();
        let ranks = trace.header().processes.len() as u32;
        for (rank, waits) in states.per_rank(ranks).iter().enumerate() {
            let in_mpi: u64 = trace
                .process_operations(rank as Rank)
                .unwrap()
                .iter()
                .map(|(_, op)| op.end - op.start)
                .sum();
            let waited: u64 = waits.iter().sum();
            assert!(
                waited <= in_mpi,
                "{}: rank {rank} waited {waited} ns of {in_mpi} in MPI",
                file.display()
            );
        }
        for w in &states.waits {
            let ids = std::iter::once(w.op).collect();
            let (_, op) = trace.operations(&ids).unwrap().pop().unwrap();
            assert!(
                w.time > 0 && w.time <= op.end - op.start,
                "{}: {w:?} in {op:?}",
                file.display()
            );
        }
        // The critical path over these waits tiles the run, from the first operation's start
        // to the last one's end, and every rank's share of it is within the run.
        let path = mtfdb::analysis::critical_path::critical_path(&trace).unwrap();
        let ops: Vec<(u64, u64)> = trace
            .op_chunks()
            .iter()
            .flat_map(|info| trace.chunk_operations(info).unwrap())
            .map(|(_, op)| (op.start, op.end))
            .collect();
        if let (Some(first), Some(last)) =
            (ops.iter().map(|o| o.0).min(), ops.iter().map(|o| o.1).max())
        {
            assert_eq!(path.length(), last - first, "{}", file.display());
            for pair in path.segments.windows(2) {
                assert_eq!(pair[0].end, pair[1].start, "{}", file.display());
            }
            assert!(path.imbalance() <= path.length(), "{}", file.display());
        }
        waited_somewhere |= !states.waits.is_empty();
        eprintln!(
            "{}: {} waits, {:?} ns by kind, {} inconsistent",
            file.display(),
            states.waits.len(),
            states.totals(),
            states.inconsistent
        );
    }
    assert!(waited_somewhere, "some real trace waits");
}

/// Total waiting time per rank of a generated trace.
fn per_rank_waits(config: &mtfdb::gen::GenConfig) -> Vec<u64> {
    let (_dir, db) = common::generated_db(config);
    let states = wait_states(&db.trace("t").unwrap()).unwrap();
    states
        .per_rank(config.ranks)
        .iter()
        .map(|w| w.iter().sum())
        .collect()
}

/// `gen --delay`: rank 5 computes 10 ms longer in iteration 6. Against the same trace without
/// the delay (same seed, so the same jitter), rank by rank:
/// - the delayed rank itself waits no more;
/// - in the scenarios whose iterations end in an N x N collective or pass data along chains
///   (ring, sweep, lu, bt, cg, alltoall), every other rank waits 10 ms more in all, for the
///   delayed rank or for a partner that waited for it;
/// - in stencil2d, its four mesh neighbours (1, 4, 6, 9 on the 4x4 grid) wait 10 ms more (late
///   sender), and nobody else: the Gather and Scatterv that follow are rooted, and by
///   Scalasca's rules their non-roots never wait while the root waits for the *first*
///   non-root, not the late one.
///
/// To within twice the largest compute jitter (a wait the run without the delay already had
/// in the same call is absorbed into the longer one).
#[test]
fn an_injected_delay_makes_exactly_the_ranks_that_depend_on_it_wait_that_long() {
    use mtfdb::gen::{GenConfig, Scenario};
    const DELAY: i64 = 10_000_000;
    // stencil2d's 2 ms compute has up to 125 us of jitter.
    const SLACK: i64 = 250_000;
    for scenario in Scenario::ALL {
        let base = GenConfig::new(scenario, 16, 12);
        let delayed = common::delayed_run(scenario);
        let (before, after) = (per_rank_waits(&base), per_rank_waits(&delayed));
        for rank in 0..16 {
            let more = after[rank] as i64 - before[rank] as i64;
            let waits_for_it =
                rank != 5 && (scenario != Scenario::Stencil2d || [1, 4, 6, 9].contains(&rank));
            let expected = if waits_for_it { DELAY } else { 0 };
            assert!(
                (more - expected).abs() <= SLACK,
                "{scenario}: rank {rank} waits {more} ns more, expected {expected}"
            );
        }
    }
}

/// Several `--delay`s add up: rank 5 computes 10 ms longer in iteration 3 and rank 9 in
/// iteration 8. In the scenarios that pass a delay to every rank (all but stencil2d, see the
/// test above), each other rank waits 20 ms more, and each delayed rank 10 ms more (for the
/// other's delay), to within twice the compute jitter.
#[test]
fn several_injected_delays_add_up_rank_by_rank() {
    use mtfdb::gen::{Delay, GenConfig, Scenario};
    const DELAY: i64 = 10_000_000;
    const SLACK: i64 = 250_000;
    for scenario in Scenario::ALL {
        if scenario == Scenario::Stencil2d {
            continue;
        }
        let base = GenConfig::new(scenario, 16, 12);
        let delay = |rank, iteration| Delay {
            rank,
            iteration,
            duration: DELAY as u64,
        };
        let delayed = GenConfig {
            delays: vec![delay(5, 3), delay(9, 8)],
            ..base.clone()
        };
        let (before, after) = (per_rank_waits(&base), per_rank_waits(&delayed));
        for rank in 0..16 {
            let more = after[rank] as i64 - before[rank] as i64;
            let expected = if rank == 5 || rank == 9 {
                DELAY
            } else {
                2 * DELAY
            };
            assert!(
                (more - expected).abs() <= 2 * SLACK,
                "{scenario}: rank {rank} waits {more} ns more, expected {expected}"
            );
        }
    }
}

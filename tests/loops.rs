//! Loop-nest models of generated traces: each rank's NLR model expands back to its exact
//! event sequence (communication events and routine entries and exits) and its main loop
//! runs the generator's iterations; the global model projects back onto every rank and
//! covers all of them with one main loop.

mod common;

use common::generated_db;

use mtfdb::analysis::loops::{expand, merge, merge_communicating, GlobalItem, Item, LoopNest};
use mtfdb::analysis::process_events::{Alphabet, EventKey};
use mtfdb::analysis::structure::{self, MainLoop};
use mtfdb::gen::{generate, GenConfig, NullSink, Scenario};
use mtfdb::model::OpKind;

/// Every rank's symbols and local model of the generated trace, as `SELECT LOOPS` makes them.
fn models(config: &GenConfig) -> (Alphabet, Vec<(Vec<u32>, LoopNest)>) {
    let (_dir, db) = generated_db(config);
    let trace = db.trace("t").unwrap();
    let (alphabet, streams) = mtfdb::analysis::process_events::extract_with_calls(&trace).unwrap();
    let (nest_alphabet, nests) =
        structure::loop_nests(&trace, &structure::LoopParams::default()).unwrap();
    assert_eq!(nest_alphabet.len(), alphabet.len());
    let models = streams
        .into_iter()
        .zip(nests)
        .map(|((rank, symbols), (nest_rank, nest))| {
            assert_eq!(rank, nest_rank);
            (symbols, nest)
        })
        .collect();
    (alphabet, models)
}

/// The symbol of `routine(`.
fn enter(alphabet: &Alphabet, routine: &str) -> u32 {
    (0..alphabet.len() as u32)
        .find(|&s| {
            matches!(alphabet.key(s), EventKey::Enter(_)) && alphabet.routine(s) == Some(routine)
        })
        .unwrap_or_else(|| panic!("no {routine}( in the alphabet"))
}

/// (ranks, iterations) each scenario runs with (bt needs a square, cg a power of two);
/// multiples of 8 so that stencil2d's period of 8 iterations divides them.
const RUNS: [(u32, u32); 2] = [(16, 24), (64, 40)];

#[test]
fn every_rank_runs_one_main_loop_over_the_generator_iterations() {
    for scenario in Scenario::ALL {
        for (ranks, iterations) in RUNS {
            let config = GenConfig::new(scenario, ranks, iterations);
            let truth = generate(&config, &mut NullSink).unwrap();
            let period = u64::from(truth.period);
            let (alphabet, models) = models(&config);
            assert_eq!(models.len(), ranks as usize);
            let solve = enter(&alphabet, "solve");
            for (rank, (symbols, nest)) in models.iter().enumerate() {
                let what = format!("{scenario} on {ranks} ranks, rank {rank}");
                assert_eq!(&expand(nest), symbols, "{what}");
                // main( init( ) setup( MPI_Bcast(0) ), the loop, finalize( ) ).
                let loops: Vec<&Item> = nest
                    .items
                    .iter()
                    .filter(|i| matches!(i, Item::Loop { .. }))
                    .collect();
                assert_eq!(loops.len(), 1, "{what}");
                assert_eq!(nest.items.len(), 10, "{what}");
                let Item::Loop { count, body } = &nest.items[6] else {
                    panic!("{what}: the seventh item is no loop");
                };
                assert_eq!(*count, u64::from(iterations) / period, "{what}");
                // The body is `period` whole solve calls: from the first `solve(` on, as
                // many events as `period` iterations hold.
                let first = symbols.iter().position(|&s| s == solve).unwrap();
                let body = expand(&LoopNest {
                    items: body.clone(),
                });
                assert_eq!(body[0], solve, "{what}");
                assert_eq!(body, symbols[first..first + body.len()], "{what}");
                let main = MainLoop::of(nest, &alphabet).unwrap();
                assert_eq!(
                    main,
                    MainLoop {
                        count: u64::from(iterations) / period,
                        routine: Some("solve".into()),
                        calls_per_iteration: period,
                    },
                    "{what}"
                );
                assert_eq!(
                    main.count * main.calls_per_iteration,
                    u64::from(iterations),
                    "{what}"
                );
            }
        }
    }
}

#[test]
fn stencil2d_nests_its_io_rounds_inside_the_main_loop() {
    // Iteration i is the halo exchange and a Bcast, a Gather too when i % 4 == 3 and a
    // Scatterv when i % 8 == 7: eight iterations are `3 plain, 1 with a Gather, 3 plain,
    // 1 with a Gather and a Scatterv`, which is the main loop's body.
    let config = GenConfig::new(Scenario::Stencil2d, 16, 64);
    let (alphabet, models) = models(&config);
    let gather = alphabet
        .get(&EventKey::Collective(OpKind::Gather, Some(0)))
        .unwrap();
    let scatterv = alphabet
        .get(&EventKey::Collective(OpKind::Scatterv, Some(0)))
        .unwrap();
    let solve = enter(&alphabet, "solve");
    for (rank, (_, nest)) in models.iter().enumerate() {
        let (count, body) = nest.main_loop().unwrap();
        assert_eq!(count, 8, "rank {rank}");
        let loops: Vec<(usize, u64)> = body
            .iter()
            .enumerate()
            .filter_map(|(at, i)| match i {
                Item::Loop { count, .. } => Some((at, *count)),
                Item::Symbol(_) => None,
            })
            .collect();
        assert_eq!(loops.len(), 2, "rank {rank}");
        assert_eq!(
            (loops[0].0, loops[0].1, loops[1].1),
            (0, 3, 3),
            "rank {rank}"
        );
        assert_eq!(body[0], body[loops[1].0], "rank {rank}");
        // Between the two loops, one iteration with a Gather; after the second, one with a
        // Gather and a Scatterv; each a whole solve call.
        let plain = |items: &[Item]| -> Vec<u32> {
            items
                .iter()
                .map(|i| match i {
                    Item::Symbol(s) => *s,
                    Item::Loop { .. } => panic!("rank {rank}: a loop inside an iteration"),
                })
                .collect()
        };
        let fourth = plain(&body[1..loops[1].0]);
        let eighth = plain(&body[loops[1].0 + 1..]);
        for (what, it, has_scatterv) in [("4th", &fourth, false), ("8th", &eighth, true)] {
            assert_eq!(it[0], solve, "rank {rank}, {what}");
            assert_eq!(it.iter().filter(|&&s| s == gather).count(), 1, "{what}");
            assert_eq!(it.contains(&scatterv), has_scatterv, "rank {rank}, {what}");
        }
    }
}

/// The loops of a global model, nested, with their counts and ranks.
fn loops_only(items: &[GlobalItem]) -> String {
    items
        .iter()
        .filter_map(|item| match item {
            GlobalItem::Loop { count, ranks, body } => {
                Some(format!("for {count} @{ranks:?} {{ {} }}", loops_only(body)))
            }
            GlobalItem::Event { .. } => None,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn the_global_model_covers_every_rank_with_one_main_loop() {
    for scenario in Scenario::ALL {
        let (ranks, iterations) = (16, 32);
        let config = GenConfig::new(scenario, ranks, iterations);
        let period = generate(&config, &mut NullSink).unwrap().period;
        let (alphabet, models) = models(&config);
        let role = |s| structure::role(&alphabet, s);
        let global = merge(
            models.iter().enumerate().map(|(r, (_, n))| (r as u32, n)),
            role,
        );
        for (rank, (symbols, _)) in models.iter().enumerate() {
            assert_eq!(
                &global.project(rank as u32),
                symbols,
                "{scenario} rank {rank}"
            );
        }
        // Every loop of these programs communicates (a collective at least), so coalescing
        // only communicating loops makes the same loops; only the order of events of
        // different ranks, which means nothing, follows the other merge order.
        let communicating = merge_communicating(
            models.iter().enumerate().map(|(r, (_, n))| (r as u32, n)),
            role,
        );
        assert_eq!(
            loops_only(&communicating.items),
            loops_only(&global.items),
            "{scenario}"
        );
        for rank in 0..ranks {
            assert_eq!(communicating.project(rank), global.project(rank));
        }
        let all: Vec<u32> = (0..ranks).collect();
        let bcast = alphabet
            .get(&EventKey::Collective(OpKind::Bcast, Some(0)))
            .unwrap();
        // Every top-level item covers every rank: the calls and the setup broadcast are one
        // event of all ranks, and there is one loop.
        for item in &global.items {
            assert_eq!(item.ranks(), all, "{scenario}");
        }
        assert_eq!(global.items.len(), 10, "{scenario}");
        assert_eq!(
            global.items[4],
            GlobalItem::Event {
                symbol: bcast,
                ranks: all.clone()
            },
            "{scenario}"
        );
        let loops: Vec<u64> = global
            .items
            .iter()
            .filter_map(|i| match i {
                GlobalItem::Loop { count, .. } => Some(*count),
                GlobalItem::Event { .. } => None,
            })
            .collect();
        assert_eq!(loops, vec![u64::from(iterations / period)], "{scenario}");
    }
}

#[test]
fn ring_global_model_text() {
    let config = GenConfig::new(Scenario::Ring, 4, 200);
    let (alphabet, models) = models(&config);
    let global = merge(
        models.iter().enumerate().map(|(r, (_, n))| (r as u32, n)),
        |s| structure::role(&alphabet, s),
    );
    assert_eq!(
        global.render(|s| alphabet.name(s)),
        "main( init( ) setup( MPI_Bcast(0) ) @0-3\n\
         for i0 in 0..200 @0-3 {\n  \
           solve( exchange( @0-3\n  \
           S1 R3 @0\n  \
           R0 S2 @1\n  \
           S3 R1 @2\n  \
           R2 S0 @3\n  \
           ) reduce( MPI_Allreduce ) ) @0-3\n\
         }\n\
         finalize( ) ) @0-3\n"
    );
}

/// Events per rank (min, max) and bytes of a rank's model text (min, max).
type Sizes = (usize, usize, usize, usize);

/// Model size as P1's Table I gives it: per rank, events and bytes of the model's text;
/// returns (min events, max events, min bytes, max bytes) over the ranks. Each rank's event
/// count is checked against the generator's: an entry and an exit per routine call, a send
/// or receive per message, one event per collective call.
fn model_sizes(scenario: Scenario, ranks: u32, iterations: u32) -> Sizes {
    let config = GenConfig::new(scenario, ranks, iterations);
    let truth = generate(&config, &mut NullSink).unwrap();
    let (alphabet, models) = models(&config);
    for (rank, (symbols, _)) in models.iter().enumerate() {
        let t = &truth.per_rank[rank];
        let collectives: u64 = t
            .ops_by_kind
            .iter()
            .filter(|(name, _)| OpKind::from_mpi_name(name).is_some_and(|k| k.is_collective()))
            .map(|(_, n)| n)
            .sum();
        let events = 2 * t.routine_calls + t.p2p_sent_messages + t.p2p_recv_messages + collectives;
        assert_eq!(symbols.len() as u64, events, "{scenario} rank {rank}");
    }
    let events = models.iter().map(|(s, _)| s.len());
    let nesting = structure::nesting(&alphabet);
    let bytes = models
        .iter()
        .map(|(_, n)| n.render_nested(|s| alphabet.name(s), &nesting).len());
    (
        events.clone().min().unwrap(),
        events.max().unwrap(),
        bytes.clone().min().unwrap(),
        bytes.max().unwrap(),
    )
}

#[test]
fn model_sizes_per_scenario() {
    // P1's Table I for the generated traces: scenario, ranks, iterations, then per rank the
    // events (min, max) and the bytes of the model's text (min, max). The text does not
    // grow with the iterations (only the digits of the count); it grows a little with the
    // ranks as peers' numbers get longer.
    let expected: [(Scenario, u32, u32, Sizes); 14] = [
        (Scenario::Stencil2d, 16, 2000, (22759, 30759, 369, 433)),
        (Scenario::Ring, 16, 2000, (18009, 18009, 123, 125)),
        (Scenario::Sweep, 16, 2000, (58009, 90009, 189, 253)),
        (Scenario::Lu, 16, 2000, (34009, 50009, 145, 177)),
        (Scenario::Bt, 16, 2000, (32009, 32009, 131, 139)),
        (Scenario::Cg, 16, 2000, (24009, 28009, 142, 154)),
        (Scenario::Alltoall, 16, 2000, (16009, 16009, 133, 133)),
        (Scenario::Stencil2d, 64, 2000, (22759, 30759, 369, 449)),
        (Scenario::Ring, 64, 2000, (18009, 18009, 123, 125)),
        (Scenario::Sweep, 64, 2000, (58009, 90009, 189, 269)),
        (Scenario::Lu, 64, 2000, (34009, 50009, 145, 185)),
        (Scenario::Bt, 64, 2000, (32009, 32009, 135, 143)),
        (Scenario::Cg, 64, 2000, (28009, 32009, 148, 162)),
        (Scenario::Alltoall, 64, 2000, (16009, 16009, 133, 133)),
    ];
    for (scenario, ranks, iterations, sizes) in expected {
        let got = model_sizes(scenario, ranks, iterations);
        assert_eq!(got, sizes, "{scenario} on {ranks} ranks");
    }
}

mod executable {
    //! The model is executable, whatever the scenario, size, seed and numbering: every
    //! rank's nest expands to its exact events, the global model projects onto each rank's
    //! exact events, and the messages the projections send are the generator's.

    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// A scenario with a rank count it runs on (bt a square, cg a power of two, ring ≥ 2).
    fn scenario_and_ranks() -> impl Strategy<Value = (Scenario, u32)> {
        prop_oneof![
            (2u32..40).prop_map(|n| (Scenario::Stencil2d, n)),
            (2u32..40).prop_map(|n| (Scenario::Ring, n)),
            (1u32..40).prop_map(|n| (Scenario::Sweep, n)),
            (1u32..40).prop_map(|n| (Scenario::Lu, n)),
            (2u32..7).prop_map(|k| (Scenario::Bt, k * k)),
            (1u32..6).prop_map(|k| (Scenario::Cg, 1 << k)),
            (2u32..40).prop_map(|n| (Scenario::Alltoall, n)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn every_generated_trace_is_regenerated_by_its_models(
            (scenario, ranks) in scenario_and_ranks(),
            iterations in 1u32..30,
            seed in 0u64..1000,
            shuffle in any::<bool>(),
        ) {
            let config = GenConfig {
                seed,
                shuffle_ranks: shuffle,
                delays: Vec::new(),
                ..GenConfig::new(scenario, ranks, iterations)
            };
            let truth = generate(&config, &mut NullSink).unwrap();
            let (alphabet, models) = models(&config);
            let global = structure::merge_nests(
                &alphabet,
                &models
                    .iter()
                    .enumerate()
                    .map(|(r, (_, n))| (r as u32, n.clone()))
                    .collect::<Vec<_>>(),
            );
            let mut sent: BTreeMap<(u32, u32), u64> = BTreeMap::new();
            for (rank, (symbols, nest)) in models.iter().enumerate() {
                prop_assert_eq!(&expand(nest), symbols, "{} rank {}", scenario, rank);
                let projected = global.project(rank as u32);
                prop_assert_eq!(&projected, symbols, "{} rank {}", scenario, rank);
                for s in projected {
                    if let EventKey::Send(q) = alphabet.key(s) {
                        *sent.entry((rank as u32, q)).or_default() += 1;
                    }
                }
            }
            let want: BTreeMap<(u32, u32), u64> = truth
                .pairs
                .iter()
                .map(|p| ((p.sender, p.receiver), p.messages))
                .collect();
            prop_assert_eq!(sent, want);
        }
    }
}

/// A 4x4 grid whose ranks exchange with their neighbours 9 times between Allreduces, as
/// classes of ranks with peers as offsets: the pairwise merges take classes that talk to each
/// other first, so every class ends up in the one main loop (paired by rank order, the corner
/// 3 and the left edge {4, 8} do not talk, and the edge's loop stayed apart for good).
#[test]
fn classes_of_a_grid_merge_into_one_main_loop() {
    use mtfdb::analysis::loops::{merge_classes, nlr, Peer, Role};
    use std::collections::BTreeMap;
    let offsets = [1i64, -1, 4, -4];
    // Symbols: 2i sends at offsets[i], 2i + 1 receives; 8 the Allreduce; 9 and 10 a routine.
    let role = |s: u32| match s {
        0..=7 if s.is_multiple_of(2) => Role::Send(Peer::Offset(offsets[s as usize / 2])),
        0..=7 => Role::Receive(Peer::Offset(offsets[s as usize / 2])),
        8 => Role::Collective,
        _ => Role::Local,
    };
    let sequence = |rank: i64| -> Vec<u32> {
        let (x, y) = (rank % 4, rank / 4);
        let exists = |d: i64| match d {
            1 => x < 3,
            -1 => x > 0,
            4 => y < 3,
            _ => y > 0,
        };
        let mut one = vec![9];
        one.extend(
            (0..4)
                .filter(|&i| exists(offsets[i]))
                .map(|i| 2 * i as u32 + 1),
        );
        one.extend((0..4).filter(|&i| exists(offsets[i])).map(|i| 2 * i as u32));
        let mut out = Vec::new();
        for _ in 0..20 {
            for _ in 0..9 {
                out.extend(&one);
                out.push(10);
            }
            out.extend(&one);
            out.extend([8, 10]);
        }
        out
    };
    let mut classes: BTreeMap<Vec<u32>, Vec<u32>> = BTreeMap::new();
    for rank in 0..16 {
        classes.entry(sequence(rank)).or_default().push(rank as u32);
    }
    assert_eq!(classes.len(), 9);
    let nests: Vec<(Vec<u32>, LoopNest)> = classes
        .into_iter()
        .map(|(seq, ranks)| (ranks, nlr(&seq, 64)))
        .collect();
    let global = merge_classes(nests.iter().map(|(r, n)| (&r[..], n)), role);
    let all: Vec<u32> = (0..16).collect();
    // Every loop, at any depth, is every rank's (NLR peels the first iteration off the
    // outer loop: 9 inner iterations, one more, then 19 outer ones of 10).
    fn loops_cover(items: &[GlobalItem], all: &[u32]) -> usize {
        items
            .iter()
            .map(|item| match item {
                GlobalItem::Loop { ranks, body, .. } => {
                    assert_eq!(ranks, all);
                    1 + loops_cover(body, all)
                }
                GlobalItem::Event { .. } => 0,
            })
            .sum()
    }
    assert_eq!(
        loops_cover(&global.items, &all),
        3,
        "{}",
        global.render(|s| s.to_string())
    );
    for rank in 0..16 {
        assert_eq!(global.project(rank as u32), sequence(rank), "rank {rank}");
    }
}

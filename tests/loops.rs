//! Loop-nest models of generated traces: each rank's NLR model expands back to its exact
//! event sequence and its main loop runs the generator's iterations; the global model
//! projects back onto every rank and covers all of them with one main loop.

mod common;

use common::import_generated;

use mtfdb::analysis::loops::{
    expand, merge, merge_communicating, nlr, GlobalItem, Item, LoopNest, DEFAULT_MAX_BODY,
};
use mtfdb::analysis::process_events::{self, Alphabet, EventKey};
use mtfdb::gen::{GenConfig, Scenario};
use mtfdb::model::OpKind;
use mtfdb::Database;

/// Every rank's symbols and local model of the generated trace, delimiters off.
fn models(config: &GenConfig) -> (Alphabet, Vec<(Vec<u32>, LoopNest)>) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    import_generated(&db, config, "t");
    let trace = db.trace("t").unwrap();
    let (alphabet, events) = process_events::extract(&trace, false, false).unwrap();
    let models = events
        .into_iter()
        .map(|p| {
            let nest = nlr(&p.symbols, DEFAULT_MAX_BODY);
            (p.symbols, nest)
        })
        .collect();
    (alphabet, models)
}

fn is_collective(alphabet: &Alphabet, symbol: u32) -> bool {
    matches!(alphabet.key(symbol), EventKey::Collective(..))
}

/// Rank counts each scenario runs on (bt needs a square, cg a power of two).
const RANK_COUNTS: [u32; 2] = [16, 64];

/// Every scenario but stencil2d: its Gather every 4th and Scatterv every 8th iteration
/// make its trace periodic over 8 iterations, see the test below.
const ONE_ITERATION_PERIOD: [Scenario; 6] = [
    Scenario::Ring,
    Scenario::Sweep,
    Scenario::Lu,
    Scenario::Bt,
    Scenario::Cg,
    Scenario::Alltoall,
];

#[test]
fn every_rank_is_the_setup_broadcast_then_one_loop_of_the_generator_iterations() {
    for scenario in ONE_ITERATION_PERIOD {
        for (ranks, iterations) in RANK_COUNTS.into_iter().zip([10u64, 25]) {
            let config = GenConfig::new(scenario, ranks, iterations as u32);
            let (alphabet, models) = models(&config);
            assert_eq!(models.len(), ranks as usize);
            let bcast = alphabet
                .get(&EventKey::Collective(OpKind::Bcast, Some(0)))
                .unwrap();
            for (rank, (symbols, nest)) in models.iter().enumerate() {
                let what = format!("{scenario} on {ranks} ranks, rank {rank}");
                assert_eq!(&expand(nest), symbols, "{what}");
                assert_eq!(nest.items.len(), 2, "{what}");
                assert_eq!(nest.items[0], Item::Symbol(bcast), "{what}");
                let per = (symbols.len() as u64 - 1) / iterations;
                assert_eq!(per * iterations, symbols.len() as u64 - 1, "{what}");
                let Item::Loop { count, body } = &nest.items[1] else {
                    panic!("{what}: no loop");
                };
                assert_eq!(*count, iterations, "{what}");
                let body = LoopNest {
                    items: body.clone(),
                };
                assert_eq!(expand(&body), symbols[1..1 + per as usize], "{what}");
                assert_eq!(nest.main_loop().unwrap().0, iterations, "{what}");
            }
        }
    }
}

#[test]
fn stencil2d_is_one_loop_over_eight_iterations() {
    // Iteration i of the solve loop is the halo exchange and a Bcast, then a Gather when
    // i % 4 == 3 and a Scatterv when i % 8 == 7: the trace repeats every 8 iterations. NLR
    // finds 4 halo iterations first (the setup Bcast in front of them), so its main loop
    // starts at iteration 4 and leaves the last 4 iterations after it:
    // `for 0..4 { Bcast halo }; Bcast; for 0..n/8-1 { Gather; for 0..4 { halo Bcast };
    // Gather Scatterv; for 0..4 { halo Bcast } }; Gather; for 0..4 { halo Bcast };
    // Gather Scatterv`.
    for ranks in RANK_COUNTS {
        for iterations in [64u64, 128] {
            let config = GenConfig::new(Scenario::Stencil2d, ranks, iterations as u32);
            let (alphabet, models) = models(&config);
            let gather = alphabet
                .get(&EventKey::Collective(OpKind::Gather, Some(0)))
                .unwrap();
            for (rank, (symbols, nest)) in models.iter().enumerate() {
                let what =
                    format!("stencil2d on {ranks} ranks, {iterations} iterations, rank {rank}");
                assert_eq!(&expand(nest), symbols, "{what}");
                assert_eq!(nest.items.len(), 7, "{what}");
                let (count, body) = nest.main_loop().unwrap();
                assert_eq!(count, iterations / 8 - 1, "{what}");
                let per8 = (symbols.len() as u64 - 1) / (iterations / 8);
                let body_events: u64 = body.iter().map(Item::events).sum();
                assert_eq!(body_events, per8, "{what}");
                let scatterv = alphabet
                    .get(&EventKey::Collective(OpKind::Scatterv, Some(0)))
                    .unwrap();
                assert_eq!(body.len(), 5, "{what}");
                assert_eq!(body[0], Item::Symbol(gather), "{what}");
                assert!(matches!(&body[1], Item::Loop { count: 4, .. }), "{what}");
                assert_eq!(body[2], Item::Symbol(gather), "{what}");
                assert_eq!(body[3], Item::Symbol(scatterv), "{what}");
                assert_eq!(body[4], body[1], "{what}");
            }
        }
    }
}

#[test]
fn the_global_model_covers_every_rank_with_one_main_loop() {
    for scenario in Scenario::ALL {
        // stencil2d's main loop runs 8 iterations of the solve loop at a time.
        let iterations = if scenario == Scenario::Stencil2d {
            64
        } else {
            16
        };
        let ranks = 16;
        let config = GenConfig::new(scenario, ranks, iterations as u32);
        let (alphabet, models) = models(&config);
        let global = merge(
            models.iter().enumerate().map(|(r, (_, n))| (r as u32, n)),
            |s| is_collective(&alphabet, s),
        );
        for (rank, (symbols, _)) in models.iter().enumerate() {
            assert_eq!(
                &global.project(rank as u32),
                symbols,
                "{scenario} rank {rank}"
            );
        }
        // Every loop of these programs communicates (a collective at least), so coalescing
        // only communicating loops changes nothing.
        let communicating = merge_communicating(
            models.iter().enumerate().map(|(r, (_, n))| (r as u32, n)),
            |s| is_collective(&alphabet, s),
            |s| match alphabet.key(s) {
                EventKey::Send(p) | EventKey::Receive(p) => Some(p),
                EventKey::Collective(..) => None,
            },
        );
        assert_eq!(communicating, global, "{scenario}");
        let all: Vec<u32> = (0..ranks).collect();
        let bcast = alphabet
            .get(&EventKey::Collective(OpKind::Bcast, Some(0)))
            .unwrap();
        // Every top-level item covers every rank.
        for item in &global.items {
            assert_eq!(item.ranks(), all, "{scenario}");
        }
        let loops: Vec<u64> = global
            .items
            .iter()
            .filter_map(|i| match i {
                GlobalItem::Loop { count, .. } => Some(*count),
                GlobalItem::Event { .. } => None,
            })
            .collect();
        if scenario == Scenario::Stencil2d {
            assert_eq!(loops, vec![4, iterations / 8 - 1, 4], "{scenario}");
        } else {
            assert_eq!(
                global.items[0],
                GlobalItem::Event {
                    symbol: bcast,
                    ranks: all.clone()
                },
                "{scenario}"
            );
            assert_eq!(global.items.len(), 2, "{scenario}");
            assert_eq!(loops, vec![iterations], "{scenario}");
        }
    }
}

#[test]
fn ring_global_model_text() {
    let config = GenConfig::new(Scenario::Ring, 4, 200);
    let (alphabet, models) = models(&config);
    let global = merge(
        models.iter().enumerate().map(|(r, (_, n))| (r as u32, n)),
        |s| is_collective(&alphabet, s),
    );
    assert_eq!(
        global.render(|s| alphabet.name(s)),
        "MPI_Bcast(0) @0-3\n\
         for i0 in 0..200 @0-3 {\n  \
           S1 R3 @0\n  \
           R0 S2 @1\n  \
           S3 R1 @2\n  \
           R2 S0 @3\n  \
           MPI_Allreduce @0-3\n\
         }\n"
    );
}

/// Events per rank (min, max) and bytes of a rank's model text (min, max).
type Sizes = (usize, usize, usize, usize);

/// Model size as P1's Table I gives it: per rank, events and bytes of the model's text;
/// returns (min events, max events, min bytes, max bytes) over the ranks.
fn model_sizes(scenario: Scenario, ranks: u32, iterations: u32) -> Sizes {
    let (alphabet, models) = models(&GenConfig::new(scenario, ranks, iterations));
    let events = models.iter().map(|(s, _)| s.len());
    let bytes = models
        .iter()
        .map(|(_, n)| n.render(|s| alphabet.name(s)).len());
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
        (Scenario::Stencil2d, 16, 2000, (10751, 18751, 306, 370)),
        (Scenario::Ring, 16, 2000, (6001, 6001, 55, 57)),
        (Scenario::Sweep, 16, 2000, (34001, 66001, 97, 161)),
        (Scenario::Lu, 16, 2000, (18001, 34001, 73, 105)),
        (Scenario::Bt, 16, 2000, (24001, 24001, 71, 79)),
        (Scenario::Cg, 16, 2000, (12001, 16001, 75, 87)),
        (Scenario::Alltoall, 16, 2000, (4001, 4001, 62, 62)),
        (Scenario::Stencil2d, 64, 2000, (10751, 18751, 306, 386)),
        (Scenario::Ring, 64, 2000, (6001, 6001, 55, 57)),
        (Scenario::Sweep, 64, 2000, (34001, 66001, 97, 177)),
        (Scenario::Lu, 64, 2000, (18001, 34001, 73, 113)),
        (Scenario::Bt, 64, 2000, (24001, 24001, 75, 83)),
        (Scenario::Cg, 64, 2000, (16001, 20001, 81, 95)),
        (Scenario::Alltoall, 64, 2000, (4001, 4001, 62, 62)),
    ];
    for (scenario, ranks, iterations, sizes) in expected {
        let got = model_sizes(scenario, ranks, iterations);
        assert_eq!(got, sizes, "{scenario} on {ranks} ranks");
    }
}

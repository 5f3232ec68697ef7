//! Loop recognition and topology identification benchmark.
//!
//! NLR: the process streams of a generated `bt` trace (16 ranks; its communication events and
//! routine entries and exits, read out of the store once, as `SELECT LOOPS` reads them), each
//! compressed into a loop nest with balanced bodies. Baseline
//! in the same run: one pass over the same streams that hashes every symbol (the floor of any
//! per-event work). Reported in events per second per stream (P1 measured 80,000 to 1.3M).
//!
//! Global model: the 1,024 loop nests of a generated `stencil2d` trace (1,024 ranks, 24
//! iterations) merged into one model. Baseline in the same run: reading the streams out of
//! the store and making the nests.
//!
//! Topology: a 1,024-rank 3D torus (8x8x16) and a 529-rank 2D grid (23x23, the 5-point
//! stencil), both randomly renumbered. Baseline in the same run: building the renumbered
//! matrix the identification reads. P2 reported about 4,000 s with VF2 on the 529-rank case.
//!
//! Best of three runs each. `cargo bench --bench structure`.

mod common;

use mtfdb::analysis::{loops, process_events, structure, topology};
use mtfdb::gen::{GenConfig, Scenario};

const RUNS: usize = 3;

fn best<T>(run: impl FnMut() -> T) -> (T, f64) {
    common::best(RUNS, run)
}

fn main() {
    let data = common::data_dir();
    println!(
        "loop recognition and topology benchmark, on {} cores; best of {RUNS}",
        common::cores()
    );

    // NLR on real process streams.
    let iterations = 50_000;
    let dir = data.join("structure-bt");
    let config = GenConfig::new(Scenario::Bt, 16, iterations);
    let (db, _) = common::generated_db(&dir, "bt", &config);
    let trace = db.trace("bt").unwrap();
    let (alphabet, streams) = process_events::extract_with_calls(&trace).unwrap();
    let nesting = structure::nesting(&alphabet);
    let events: usize = streams.iter().map(|(_, s)| s.len()).sum();
    let (_, scan) = best(|| {
        let hash = streams
            .iter()
            .map(|s| {
                std::hint::black_box(&s.1).iter().fold(0u64, |h, &x| {
                    h.rotate_left(5) ^ u64::from(x).wrapping_mul(0x9e37_79b9)
                })
            })
            .fold(0, u64::wrapping_add);
        std::hint::black_box(hash)
    });
    let (nests, nlr) = best(|| {
        streams
            .iter()
            .map(|(_, s)| loops::nlr_nested(s, loops::DEFAULT_MAX_BODY, nesting.clone()))
            .collect::<Vec<_>>()
    });
    let main_loop = nests[0].main_loop().map_or(0, |(count, _)| count);
    assert_eq!(
        main_loop,
        u64::from(iterations),
        "the main loop counts the iterations"
    );
    let model_bytes: usize = nests
        .iter()
        .map(|n| n.render(|s| s.to_string()).len())
        .sum();
    println!(
        "NLR: {} streams, {events} events: scan (baseline) {scan:.3} s, NLR {nlr:.3} s = {:.1} M events/s, {:.1}x the scan; model {model_bytes} bytes of text in all",
        streams.len(),
        events as f64 / nlr / 1e6,
        nlr / scan
    );
    drop(trace);
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);

    // The global merge of many processes.
    let ranks = 1024;
    let dir = data.join("structure-stencil");
    let config = GenConfig::new(Scenario::Stencil2d, ranks, 24);
    let (db, _) = common::generated_db(&dir, "stencil", &config);
    let trace = db.trace("stencil").unwrap();
    let ((alphabet, nests), read) =
        best(|| structure::loop_nests(&trace, &structure::LoopParams::default()).unwrap());
    let (model, merge) = best(|| structure::merge_nests(&alphabet, &nests));
    // P1's merge of every rank as its own process, for comparison.
    let (per_rank, merge_per_rank) = best(|| {
        loops::merge_communicating(nests.iter().map(|(r, n)| (*r, n)), |s| {
            structure::role(&alphabet, s)
        })
    });
    let events: u64 = nests.iter().map(|(_, n)| n.events()).sum();
    for items in [&model.model.items, &per_rank.items] {
        let loops = items
            .iter()
            .filter(|i| matches!(i, loops::GlobalItem::Loop { .. }))
            .count();
        assert_eq!(loops, 1, "one main loop");
        assert!(
            items.iter().all(|i| i.ranks().len() == ranks as usize),
            "every top-level item covers every rank"
        );
    }
    println!(
        "global model of {ranks} ranks ({events} events): reading and NLR (baseline) {read:.3} s, merge of {} classes of ranks {merge:.3} s ({:.2}x), {} bytes of model text; every rank merged as its own process {merge_per_rank:.3} s ({:.2}x), {} bytes",
        model.classes,
        merge / read,
        model.render().len(),
        merge_per_rank / read,
        per_rank.render(|s| alphabet.name(s)).len()
    );
    drop(trace);
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);

    // Topology of two large renumbered references.
    let (matrices, build) = best(|| topology::benchmark_matrices(7));
    for (name, matrix) in &matrices {
        let (found, secs) = best(|| topology::identify(matrix, &Default::default()));
        let found = found.expect("identified");
        assert_eq!(&found.to_string(), name);
        println!(
            "topology of {} ranks: {found} in {secs:.4} s (building both matrices, the baseline: {build:.4} s; {:.2}x)",
            matrix.ranks(),
            secs / build
        );
    }
}

//! Pattern and phase detection benchmark: a generated `stencil2d` trace of at least 5M events
//! (4 ranks, so that it holds more than 100,000 communication-pattern instances), imported once
//! into a database under `target/` (not committed).
//!
//! Baseline, measured in the same run: reading every process's operations out of the store
//! (what any analysis of the stored trace must pay). Pattern detection (events in the thesis's
//! alphabet, tandem removal, maximal repeats per process, communication patterns joined through
//! the messages and collectives) is timed without storing its result, and reported in trace
//! events per second and as a ratio to that read. Phase detection is timed on the resulting
//! sequence of pattern instances: the segmentation alone, and with the phases' routines.
//! Best of three runs each. For reference, the thesis needed 360 s for 5.3M events (about
//! 15,000 events/s) on a 2012 laptop.
//!
//! `cargo bench --bench patterns`; `MTFDB_BENCH_EVENTS=10000000` picks another size.

mod common;

use mtfdb::analysis::detection::{self, PatternParams, PhaseParams};
use mtfdb::gen::{iterations_for_events, GenConfig, Scenario};

const RANKS: u32 = 4;
const RUNS: usize = 3;

fn best<T>(run: impl FnMut() -> T) -> (T, f64) {
    common::best(RUNS, run)
}

fn main() {
    let data = common::data_dir();
    println!(
        "pattern and phase detection benchmark: stencil2d, {RANKS} ranks, on {} cores; best of {RUNS}",
        common::cores()
    );
    println!(
        "{:>10} {:>10} {:>9} {:>8} {:>9} {:>12} {:>8} {:>10} {:>10} {:>10}",
        "events",
        "comm ev",
        "read s",
        "detect s",
        "ratio",
        "events/s",
        "patterns",
        "instances",
        "segment s",
        "phases s"
    );
    for events in common::sizes(&[5_000_000]) {
        let iterations = iterations_for_events(Scenario::Stencil2d, RANKS, events).unwrap();
        let config = GenConfig::new(Scenario::Stencil2d, RANKS, iterations);
        let dir = data.join(format!("patterns-{events}"));
        let (db, truth) = common::generated_db(&dir, "bench", &config);
        let trace = db.trace("bench").unwrap();

        let (_, read_secs) = best(|| {
            let mut n = 0usize;
            for rank in 0..RANKS {
                n += trace.process_operations(rank).unwrap().len();
            }
            n
        });
        let params = PatternParams::default();
        let (found, detect_secs) = best(|| detection::detect_patterns(&trace, &params).unwrap());
        // The detection found what the generator emitted.
        let emitted: u64 = truth
            .patterns
            .values()
            .filter(|p| p.min_events >= 2 && p.occurrences >= 2)
            .map(|p| p.occurrences)
            .sum();
        let instances = found.instances().len() as u64;
        assert_eq!(instances, emitted, "pattern instances");

        let phase_params = PhaseParams::default();
        let (phases, phases_secs) =
            best(|| detection::detect_phases(&trace, &found, &phase_params).unwrap());
        println!(
            "{:>10} {:>10} {:>9.2} {:>8.2} {:>8.2}x {:>12.0} {:>8} {:>10} {:>10.3} {:>10.3}",
            truth.events,
            found.events,
            read_secs,
            detect_secs,
            detect_secs / read_secs,
            truth.events as f64 / detect_secs,
            found.patterns.len(),
            instances,
            phases.seconds,
            phases_secs
        );
        drop(trace);
        drop(db);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

//! Wait-state benchmark: the wait states and the critical path of a large trace (10M events by
//! default: a 64-rank stencil2d generated in memory and imported, not committed), as a user's
//! first `SELECT WAIT STATES` and critical path compute them (the path computes the wait states
//! it follows, so its step includes them).
//!
//! Baseline, measured in the same run: reading every operation of the trace through the
//! library (`Trace::chunk_operations` over every chunk), the floor of any analysis that looks
//! at each operation once. Each measured step runs in a child process (this bench again), so
//! that its peak memory is its own; the best of three runs is kept (the machine is shared).
//!
//! `cargo bench --bench waits`; `MTFDB_BENCH_EVENTS=2000000` picks another size.

mod common;

use std::process::Command;
use std::time::Instant;

use mtfdb::gen::{iterations_for_events, GenConfig, Scenario};
use mtfdb::Database;

const RANKS: u32 = 64;
/// Set in a child: what it does (`generate`, `read` or `waits`).
const STEP: &str = "MTFDB_BENCH_WAITS_STEP";

fn main() {
    let events = common::sizes(&[10_000_000])[0];
    let dir = common::data_dir().join("waits-db");
    match std::env::var(STEP).as_deref() {
        Ok("generate") => {
            let iterations = iterations_for_events(Scenario::Stencil2d, RANKS, events).unwrap();
            let config = GenConfig::new(Scenario::Stencil2d, RANKS, iterations);
            common::generated_db(&dir, "big", &config);
            return;
        }
        Ok(step) => {
            let db = Database::open_existing(&dir).unwrap();
            let trace = db.trace("big").unwrap();
            let started = Instant::now();
            let what = match step {
                "read" => {
                    let mut n = 0u64;
                    for info in trace.op_chunks() {
                        n += trace.chunk_operations(info).unwrap().len() as u64;
                    }
                    format!("{n} operations")
                }
                "waits" => {
                    let states = mtfdb::analysis::waits::wait_states(&trace).unwrap();
                    format!(
                        "{} waits, {} ns",
                        states.waits.len(),
                        states.totals().iter().sum::<u64>()
                    )
                }
                "path" => {
                    let path = mtfdb::analysis::critical_path::critical_path(&trace).unwrap();
                    format!(
                        "{} segments, {} ns long, {} ns imbalance",
                        path.segments.len(),
                        path.length(),
                        path.imbalance()
                    )
                }
                other => panic!("unknown step {other}"),
            };
            println!("{:.6} {what}", started.elapsed().as_secs_f64());
            return;
        }
        Err(_) => {}
    }
    let generated = Command::new(std::env::current_exe().unwrap())
        .env(STEP, "generate")
        .status()
        .unwrap();
    assert!(generated.success(), "generating the trace failed");
    let summary = Database::open_existing(&dir)
        .unwrap()
        .trace("big")
        .unwrap()
        .summary()
        .clone();
    let events = summary.operations + 2 * summary.routine_calls;
    println!(
        "wait-state benchmark: stencil2d, {RANKS} ranks, {events} events, {} operations, {} messages, on {} cores",
        summary.operations,
        summary.messages,
        common::cores()
    );
    println!(
        "{:<44} {:>9} {:>12} {:>10} {:>10}",
        "step (best of 3, in a child)", "seconds", "M events/s", "x read", "peak MiB"
    );
    let mut read_secs = None;
    for (step, label) in [
        ("read", "baseline: read every operation"),
        ("waits", "wait states (all kinds)"),
        ("path", "wait states and the critical path"),
    ] {
        let mut best: Option<(f64, u64, String)> = None;
        for _ in 0..3 {
            let out = std::env::temp_dir().join(format!("mtfdb-bench-waits-{step}.out"));
            let run = common::run_child(
                Command::new(std::env::current_exe().unwrap())
                    .env(STEP, step)
                    .stdout(std::fs::File::create(&out).unwrap()),
            );
            assert!(run.success, "step {step} failed");
            let text = std::fs::read_to_string(&out).unwrap();
            let (secs, what) = text.trim().split_once(' ').unwrap();
            let secs: f64 = secs.parse().unwrap();
            if best.as_ref().is_none_or(|(b, _, _)| secs < *b) {
                best = Some((secs, run.peak_kib, what.to_string()));
            }
        }
        let (secs, peak_kib, what) = best.unwrap();
        let base = *read_secs.get_or_insert(secs);
        println!(
            "{label:<44} {secs:>9.3} {:>12.1} {:>9.2}x {:>10.0}   ({what})",
            events as f64 / secs / 1e6,
            secs / base,
            peak_kib as f64 / 1024.0
        );
    }
}

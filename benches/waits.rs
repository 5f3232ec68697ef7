//! Wait-state benchmark: the analyses that look operations up by id (wait states, critical
//! path), `SELECT REQUESTS` and the whole `mtfdb report`, on generated CG runs (the shape whose
//! messages visit every rank in every iteration: the chunk cache of old thrashed on it), as
//! time per event, so that "time per event flat across sizes" can be read off.
//!
//! Baseline, measured in the same run on the same trace: a bare scan of the columns the
//! analyses decode (Start, End and Kind of every operation, through the scan seam on every
//! core), the floor of any analysis that looks at each operation once. Each measured step runs
//! in a child process (this bench again), so that its peak memory is its own; the best of
//! `MTFDB_BENCH_RUNS` runs (3) is kept (the machine is shared).
//!
//! `cargo bench --bench waits`: CG at 256 ranks and 10M events. `MTFDB_BENCH_LARGE=1` adds
//! 256 ranks at 50M events and 4,096 ranks at 50M events (minutes each: generating and
//! importing them is most of it). `MTFDB_BENCH_EVENTS=2000000` replaces the sizes (256 ranks).

mod common;

use std::process::Command;
use std::time::Instant;

use mtfdb::gen::{iterations_for_events, GenConfig, Scenario};
use mtfdb::results::{RowSink, Value};
use mtfdb::store::scan::{Order, Projection, ScanFilter, ScanRequest};
use mtfdb::store::OperationField::{End, Kind, Start};
use mtfdb::{Database, Session};

/// Set in a child: what it does (`generate`, or a step), and on which configuration.
const STEP: &str = "MTFDB_BENCH_WAITS_STEP";
const RANKS: &str = "MTFDB_BENCH_WAITS_RANKS";
const EVENTS: &str = "MTFDB_BENCH_WAITS_EVENTS";

/// Counts a statement's rows without keeping them.
struct Count(u64);

impl RowSink for Count {
    fn columns(&mut self, _: &[String]) -> mtfdb::Result<()> {
        Ok(())
    }
    fn row(&mut self, _: Vec<Value>) -> mtfdb::Result<()> {
        self.0 += 1;
        Ok(())
    }
}

fn db_dir(ranks: u32, events: u64) -> std::path::PathBuf {
    common::data_dir().join(format!("waits-cg-{ranks}-{events}"))
}

/// The child's work: generate the trace, or time one step on it.
fn child(step: &str) {
    let ranks: u32 = std::env::var(RANKS).unwrap().parse().unwrap();
    let events: u64 = std::env::var(EVENTS).unwrap().parse().unwrap();
    let dir = db_dir(ranks, events);
    if step == "generate" {
        let iterations = iterations_for_events(Scenario::Cg, ranks, events).unwrap();
        common::generated_db(
            &dir,
            "big",
            &GenConfig::new(Scenario::Cg, ranks, iterations),
        );
        return;
    }
    let db = Database::open_existing(&dir).unwrap();
    let trace = db.trace("big").unwrap();
    let started = Instant::now();
    let what = match step {
        "scan" => {
            let scan = trace
                .scan(&ScanRequest {
                    projection: Projection::Operations(&[Start, End, Kind]),
                    filter: ScanFilter::default(),
                    order: Order::Id,
                })
                .unwrap();
            let (n, ends) = scan
                .par_fold(
                    || (0u64, 0u64),
                    |(n, ends), batch| {
                        let ops = batch.operations().unwrap();
                        let last = batch.rows().map(|r| ops.end(r)).max().unwrap_or(0);
                        Ok((n + batch.kept() as u64, ends.max(last)))
                    },
                    |a, b| (a.0 + b.0, a.1.max(b.1)),
                )
                .unwrap();
            format!("{n} operations, last end {ends}")
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
        "requests" => {
            let mut session = Session::new(db);
            session.use_trace("big").unwrap();
            let mut rows = Count(0);
            session.run_into("SELECT REQUESTS", &mut rows).unwrap();
            format!("{} requests", rows.0)
        }
        "report" => {
            let mut session = Session::new(db);
            session.use_trace("big").unwrap();
            let html = mtfdb::export::report::report(&mut session).unwrap();
            let failed = html.matches("Not available").count();
            format!("{} bytes, {failed} sections not available", html.len())
        }
        other => panic!("unknown step {other}"),
    };
    println!("{:.6} {what}", started.elapsed().as_secs_f64());
}

fn main() {
    if let Ok(step) = std::env::var(STEP) {
        child(&step);
        return;
    }
    let mut configs: Vec<(u32, u64)> = common::sizes(&[10_000_000])
        .into_iter()
        .map(|e| (256, e))
        .collect();
    if std::env::var("MTFDB_BENCH_LARGE").is_ok_and(|v| v == "1") {
        configs.extend([(256, 50_000_000), (4096, 50_000_000)]);
    }
    let runs: usize = common::env_list("MTFDB_BENCH_RUNS", &[3])[0];
    println!(
        "wait-state benchmark: generated CG, best of {runs} runs per step in a child, on {} cores",
        common::cores()
    );
    println!(
        "{:<8} {:>11} {:<36} {:>9} {:>9} {:>8} {:>9}",
        "ranks", "events", "step", "seconds", "ns/event", "x scan", "peak MiB"
    );
    for (ranks, events) in configs {
        let configured = |cmd: &mut Command| {
            cmd.env(RANKS, ranks.to_string())
                .env(EVENTS, events.to_string());
        };
        let dir = db_dir(ranks, events);
        if Database::open_existing(&dir)
            .and_then(|db| db.trace("big"))
            .is_err()
        {
            let mut cmd = Command::new(std::env::current_exe().unwrap());
            configured(&mut cmd);
            let generated = cmd.env(STEP, "generate").status().unwrap();
            assert!(generated.success(), "generating the trace failed");
        }
        let summary = Database::open_existing(&dir)
            .unwrap()
            .trace("big")
            .unwrap()
            .summary()
            .clone();
        let events = summary.operations + 2 * summary.routine_calls;
        let mut scan_secs = None;
        for (step, label) in [
            ("scan", "baseline: scan Start, End, Kind"),
            ("waits", "wait states (all kinds)"),
            ("path", "wait states and the critical path"),
            ("requests", "SELECT REQUESTS"),
            ("report", "mtfdb report (every section)"),
        ] {
            let mut best: Option<(f64, u64, String)> = None;
            for _ in 0..runs {
                let out = std::env::temp_dir().join(format!("mtfdb-bench-waits-{step}.out"));
                let mut cmd = Command::new(std::env::current_exe().unwrap());
                configured(&mut cmd);
                let run = common::run_child(
                    cmd.env(STEP, step)
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
            let base = *scan_secs.get_or_insert(secs);
            println!(
                "{ranks:<8} {events:>11} {label:<36} {secs:>9.3} {:>9.1} {:>7.1}x {:>9.0}   ({what})",
                secs * 1e9 / events as f64,
                secs / base,
                peak_kib as f64 / 1024.0
            );
        }
    }
}

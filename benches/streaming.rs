//! Streaming benchmark: how long a query takes and how much memory it holds on a large trace
//! (20M events by default: a 64-rank stencil2d generated in memory, not committed), run by the
//! `mtfdb` binary as a user runs it, output going to a file:
//!
//! - `SELECT ALL OPERATIONS LIMIT 1`: reads one chunk, whatever the trace's size;
//! - `SELECT ALL OPERATIONS` as CSV: every row, written as it is read;
//! - `… ORDER BY duration_ns DESC LIMIT 5`: a top-k over every row;
//! - `SELECT COUNT(*) FROM OPERATIONS GROUP BY PROCESS`: an aggregate holding its groups.
//!
//! Peak memory is the child's maximum resident set (`wait4`). The trace is generated and
//! imported by a child too (this bench run again), since a child's maximum counts what it
//! shared with its parent before `exec`. The baseline, measured in the
//! same run, is reading the trace's whole database folder from the page cache (the I/O floor
//! of any query that looks at every row); each query's ratio is its time over that read.
//!
//! `cargo bench --bench streaming`; `MTFDB_BENCH_EVENTS=5000000` picks another size.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use mtfdb::gen::{iterations_for_events, GenConfig, Scenario};

const RANKS: u32 = 64;

/// Runs `mtfdb` with `args`, its standard output into `out`; returns seconds and peak KiB.
fn run(args: &[&str], out: &Path) -> (f64, u64) {
    let run = common::run_child(
        Command::new(env!("CARGO_BIN_EXE_mtfdb"))
            .args(args)
            .stdout(std::fs::File::create(out).unwrap())
            .stderr(Stdio::inherit()),
    );
    assert!(run.success, "mtfdb {args:?} failed");
    (run.secs, run.peak_kib)
}

/// Reads every file below `dir` (the baseline), through a 1 MiB buffer: this process must
/// stay small, since a child's peak counts its parent's (see `run`).
fn read_all(dir: &Path) -> u64 {
    use std::io::Read;
    let mut total = 0;
    let mut buf = vec![0u8; 1 << 20];
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let path = e.path();
        if path.is_dir() {
            total += read_all(&path);
            continue;
        }
        let mut f = std::fs::File::open(&path).unwrap();
        loop {
            let n = f.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            total += n as u64;
        }
    }
    total
}

/// Set in the child that generates the trace.
const GENERATE: &str = "MTFDB_STREAMING_BENCH_GENERATE";

fn main() {
    let events = common::sizes(&[20_000_000])[0];
    let data = common::data_dir();
    let dir = data.join("streaming-db");
    if std::env::var_os(GENERATE).is_some() {
        let iterations = iterations_for_events(Scenario::Stencil2d, RANKS, events).unwrap();
        let config = GenConfig::new(Scenario::Stencil2d, RANKS, iterations);
        common::generated_db(&dir, "big", &config);
        return;
    }
    let generated = Command::new(std::env::current_exe().unwrap())
        .env(GENERATE, "1")
        .status()
        .unwrap();
    assert!(generated.success(), "generating the trace failed");
    let summary = mtfdb::Database::open_existing(&dir)
        .unwrap()
        .trace("big")
        .unwrap()
        .summary()
        .clone();
    let (events, operations) = (
        summary.operations + 2 * summary.routine_calls,
        summary.operations,
    );
    let (bytes, read_secs) = common::best(3, || read_all(&dir));
    println!(
        "streaming benchmark: stencil2d, {RANKS} ranks, {events} events, {operations} operations, on {} cores",
        common::cores()
    );
    println!(
        "baseline: reading the database folder ({:.0} MiB) from the page cache: {read_secs:.3} s",
        bytes as f64 / (1 << 20) as f64
    );
    println!(
        "{:<58} {:>9} {:>10} {:>11} {:>12}",
        "statement (--format csv, best of 3)", "seconds", "x read", "peak MiB", "output MiB"
    );
    let out = data.join("streaming-out.csv");
    let db_arg = dir.to_str().unwrap();
    for statement in [
        "SELECT ALL OPERATIONS LIMIT 1",
        "SELECT ALL OPERATIONS",
        "SELECT ALL OPERATIONS ORDER BY duration_ns DESC LIMIT 5",
        "SELECT COUNT(*) FROM OPERATIONS GROUP BY PROCESS",
    ] {
        let args = [
            "--db", db_arg, "query", statement, "--trace", "big", "--format", "csv",
        ];
        let ((_, peak_kib), secs) = common::best(3, || run(&args, &out));
        let written = std::fs::metadata(&out).unwrap().len();
        println!(
            "{statement:<58} {secs:>9.3} {:>9.1}x {:>11.0} {:>12.1}",
            secs / read_secs,
            peak_kib as f64 / 1024.0,
            written as f64 / (1 << 20) as f64
        );
    }
    let _ = std::fs::remove_file(&out);
}

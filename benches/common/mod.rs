//! What the benchmarks share: the sizes to run, where their data goes, a database holding a
//! generated trace, and reading the `mtfdb` binary's report.

// Each bench is its own crate and uses only some of these.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Instant;

use mtfdb::gen::{generate, GenConfig, GroundTruth};
use mtfdb::Database;

/// Event counts from `MTFDB_BENCH_EVENTS` (comma-separated), else `default`.
pub fn sizes(default: &[u64]) -> Vec<u64> {
    env_list("MTFDB_BENCH_EVENTS", default)
}

/// A comma-separated list of numbers from the environment variable `var`, else `default`.
pub fn env_list<T: std::str::FromStr + Clone>(var: &str, default: &[T]) -> Vec<T> {
    std::env::var(var)
        .ok()
        .map(|s| {
            s.split(',')
                .map(|x| {
                    x.trim()
                        .parse()
                        .unwrap_or_else(|_| panic!("{var}: {x:?} is not a number"))
                })
                .collect()
        })
        .unwrap_or_else(|| default.to_vec())
}

/// The folder benchmark inputs are written to (under `target/`, never committed).
pub fn data_dir() -> PathBuf {
    let data = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-data");
    std::fs::create_dir_all(&data).unwrap();
    data
}

/// The number of cores, for the report's first line.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Bytes of every file below `path`.
pub fn dir_size(path: &Path) -> u64 {
    let mut total = 0;
    if let Ok(entries) = std::fs::read_dir(path) {
        for e in entries.flatten() {
            let m = e.metadata().unwrap();
            total += if m.is_dir() {
                dir_size(&e.path())
            } else {
                m.len()
            };
        }
    }
    total
}

/// The peak memory `mtfdb import --stats` printed, in KiB.
pub fn peak_kib(stdout: &str) -> u64 {
    stdout
        .lines()
        .find_map(|l| {
            l.strip_prefix("peak memory: ")
                .and_then(|r| r.split_whitespace().next())
                .and_then(|v| v.parse().ok())
        })
        .expect("import --stats reports peak memory in KiB")
}

/// Runs `run` `runs` times; returns the output and the time of the fastest run (the machine
/// is shared, so the best of a few is the least disturbed).
pub fn best<T>(runs: usize, mut run: impl FnMut() -> T) -> (T, f64) {
    let mut best: Option<(T, f64)> = None;
    for _ in 0..runs.max(1) {
        let started = Instant::now();
        let out = run();
        let secs = started.elapsed().as_secs_f64();
        if best.as_ref().is_none_or(|(_, b)| secs < *b) {
            best = Some((out, secs));
        }
    }
    best.expect("at least one run")
}

/// A fresh database in `dir` (whatever was there is removed) holding the trace `config`
/// generates, as `name`; with the generator's ground truth.
pub fn generated_db(dir: &Path, name: &str, config: &GenConfig) -> (Database, GroundTruth) {
    let _ = std::fs::remove_dir_all(dir);
    let db = Database::open(dir).unwrap();
    let mut truth = None;
    db.import_events(name, |sink| {
        truth = Some(generate(config, sink)?);
        Ok(())
    })
    .unwrap();
    (db, truth.expect("generated"))
}

//! What the benchmarks share: the sizes to run, where their data goes, a database holding a
//! generated trace, reading the `mtfdb` binary's report, and timing a child process with its
//! peak memory.

// Each bench is its own crate and uses only some of these.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use mtfdb::gen::{generate, GenConfig, GroundTruth};
use mtfdb::Database;

/// Writes (or reuses) an OTF2 archive in `dir` of `ranks` ranks and about `events` events
/// with the official OTF2 library (`benches/otf2_gen.py`, the `otf2` PyPI package); returns
/// the generator's counts (JSON: events, messages, the anchor's path, …), cached in
/// `counts.json`, or why it could not run.
pub fn otf2_archive(dir: &Path, ranks: u64, events: u64) -> Result<serde_json::Value, String> {
    let counts = dir.join("counts.json");
    if let Ok(text) = std::fs::read_to_string(&counts) {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
            // Archives cached by an older generator lack the chunk size: written again.
            if v["event_chunk"].is_u64() {
                return Ok(v);
            }
        }
    }
    let _ = std::fs::remove_dir_all(dir);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/otf2_gen.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(dir)
        .args(["--events", &events.to_string()])
        .args(["--ranks", &ranks.to_string()])
        .output()
        .map_err(|e| format!("python3: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "otf2_gen.py failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
    std::fs::write(&counts, &line).map_err(|e| e.to_string())?;
    serde_json::from_str(&line).map_err(|e| e.to_string())
}

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

/// The part of Linux's `struct rusage` before `ru_maxrss` is two `timeval`s.
#[repr(C)]
struct Rusage {
    utime: [i64; 2],
    stime: [i64; 2],
    maxrss: i64,
    rest: [i64; 13],
}

extern "C" {
    fn wait4(pid: i32, status: *mut i32, options: i32, rusage: *mut Rusage) -> i32;
}

/// What a child process took.
#[derive(Clone, Copy, Debug)]
pub struct ChildRun {
    /// Wall time from spawn to exit.
    pub secs: f64,
    /// Processor time, user and system, over all its threads.
    pub cpu_secs: f64,
    /// Its maximum resident set in KiB (`ru_maxrss` from `wait4`).
    pub peak_kib: u64,
    /// It exited with status 0.
    pub success: bool,
}

/// Runs `cmd` (its standard streams as the caller set them) to its end. The child starts as a
/// copy of this process and its peak counts that copy's, so the calling bench must stay small
/// (it only spawns and measures).
pub fn run_child(cmd: &mut Command) -> ChildRun {
    let started = Instant::now();
    // Reaped by `wait4` below, which clippy does not see.
    #[allow(clippy::zombie_processes)]
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let mut status = 0i32;
    let mut usage = Rusage {
        utime: [0; 2],
        stime: [0; 2],
        maxrss: 0,
        rest: [0; 13],
    };
    // SAFETY: waits for our own child, writing into the two locals.
    let pid = unsafe { wait4(child.id() as i32, &mut status, 0, &mut usage) };
    let secs = started.elapsed().as_secs_f64();
    assert_eq!(pid, child.id() as i32, "wait4 failed");
    let seconds = |t: [i64; 2]| t[0] as f64 + t[1] as f64 / 1e6;
    ChildRun {
        secs,
        cpu_secs: seconds(usage.utime) + seconds(usage.stime),
        peak_kib: usage.maxrss as u64,
        success: status == 0,
    }
}

//! OTF2 import benchmark: archives written by the official OTF2 library
//! (`benches/otf2_gen.py`, the `otf2` PyPI package: a 2D stencil; not committed, written and
//! cached under `target/tmp/bench-data/`), imported with the `mtfdb` binary (parse, convert,
//! match, index, persist) into a fresh database. Every program runs as a child process; its
//! time is the wall time from spawn to exit and its peak memory its maximum resident set
//! (`wait4`'s `ru_maxrss`). Best of three runs each (the machine is shared); the peak is the
//! largest of the three.
//!
//! Two tables:
//!
//! 1. 16 ranks, 1M and 10M events, against `otf2-print archive > /dev/null` (Debian's
//!    `otf2-tools`), the reference reader decoding and printing every record.
//! 2. 64, 1,024 and 16,384 ranks (one location each; 10M events, and at 16,384 ranks about
//!    370 events per rank), against the OTF2 library itself reading the same archive with
//!    no-op callbacks (`benches/otf2_read_noop.c`, compiled here with `cc` against Debian's
//!    `libotf2-trace-dev`): "merged" through OTF2's global event reader, which merges the
//!    locations by time as the import does, and "per-location" reading each location alone,
//!    one after the other (no merge: the decode floor). The merged reader holds one event
//!    buffer (the archive's event chunk size) and one open file per location at once, so it is
//!    left out where that would exceed `MERGED_MEMORY`. The import runs with at most
//!    `OPEN_FILES` open files (Linux's default soft limit), fewer than the largest case's
//!    locations: mtfdb never holds one descriptor per location.
//!
//! Ratios are the baseline's time over mtfdb's (at least 1: the import is as fast or faster).
//! A missing tool (python `otf2`, `otf2-print`, `cc` or libotf2) skips what needs it, with a
//! message.
//!
//! `cargo bench --bench otf2` runs both tables; `MTFDB_BENCH_EVENTS=2000000` picks other sizes
//! for the first and `MTFDB_BENCH_RANKS=64,1024` other rank counts for the second (10M events
//! each, but for 16,384).

mod common;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::ChildRun;

const RUNS: usize = 3;
/// The second table's cases: ranks and about how many events.
const RANK_CASES: &[(u64, u64)] = &[(64, 10_000_000), (1024, 10_000_000), (16_384, 6_000_000)];
/// Events of a rank count given in `MTFDB_BENCH_RANKS` that is not in `RANK_CASES`.
const RANK_CASE_EVENTS: u64 = 10_000_000;
/// The import's open-file limit: Linux's default soft limit (`ulimit -n`).
const OPEN_FILES: u32 = 1024;
/// The memory OTF2's merged reader may take (its event buffers): 2 GiB.
const MERGED_MEMORY: u64 = 2 << 30;

/// Whether `program args` runs and succeeds; otherwise says what is skipped and why.
fn available(program: &str, args: &[&str], install: &str, skipped: &str) -> bool {
    let ok = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        println!("skipped {skipped}: needs {program} ({install})");
    }
    ok
}

/// Writes (or reuses) an archive of `ranks` ranks and about `events` events; returns its
/// folder and the generator's counts.
fn archive(data: &Path, ranks: u64, events: u64) -> (PathBuf, serde_json::Value) {
    let dir = match ranks {
        16 => data.join(format!("otf2-{events}")),
        _ => data.join(format!("otf2-{events}-{ranks}ranks")),
    };
    let counts = common::otf2_archive(&dir, ranks, events).unwrap();
    (dir, counts)
}

/// The fastest of `RUNS` runs (wall time; processor time the least of the runs too), with the
/// largest peak; `None` if a run failed (`run` has said why).
fn best_of(mut run: impl FnMut() -> Option<ChildRun>) -> Option<ChildRun> {
    let mut best: Option<ChildRun> = None;
    for _ in 0..RUNS {
        let r = run()?;
        best = Some(match best {
            Some(b) => ChildRun {
                secs: b.secs.min(r.secs),
                cpu_secs: b.cpu_secs.min(r.cpu_secs),
                peak_kib: b.peak_kib.max(r.peak_kib),
                success: true,
            },
            None => r,
        });
    }
    best
}

/// The text of a child's output file (written by `run_child`'s caller).
fn output(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Imports the archive in `dir` into a fresh database, best of `RUNS`, with at most
/// `OPEN_FILES` open files; checks that every message the generator wrote was found.
fn import(data: &Path, dir: &Path, counts: &serde_json::Value) -> ChildRun {
    let exe = env!("CARGO_BIN_EXE_mtfdb");
    // A fresh database folder per run, all removed beforehand: removing the previous run's
    // database is not part of the time measured.
    let dbs: Vec<PathBuf> = (0..RUNS)
        .map(|run| data.join(format!("db-otf2-bench-{run}")))
        .collect();
    for db in &dbs {
        let _ = std::fs::remove_dir_all(db);
    }
    let (stdout, stderr) = (data.join("import.out"), data.join("import.err"));
    let mut fresh = dbs.iter();
    let best = best_of(|| {
        let db = fresh.next().expect("a database folder per run");
        // `sh` sets the limit and becomes mtfdb (exec): the child measured is mtfdb.
        let run = common::run_child(
            Command::new("sh")
                .arg("-c")
                .arg(format!("ulimit -n {OPEN_FILES} && exec \"$0\" \"$@\""))
                .arg(exe)
                .args(["--db", db.to_str().unwrap(), "import"])
                .arg(dir)
                .args(["--name", "bench", "--stats"])
                .stdout(File::create(&stdout).unwrap())
                .stderr(File::create(&stderr).unwrap()),
        );
        let (out, err) = (output(&stdout), output(&stderr));
        assert!(
            run.success,
            "import of {} failed: {out}{err}",
            dir.display()
        );
        // The import found every message the generator wrote.
        let messages = counts["messages"].as_u64().unwrap();
        assert!(
            out.contains(&format!(" {messages} messages")),
            "expected {messages} messages: {out}"
        );
        Some(run)
    })
    .expect("every import succeeded");
    for db in &dbs {
        let _ = std::fs::remove_dir_all(db);
    }
    best
}

/// `otf2-print archive > /dev/null`, best of `RUNS`.
fn otf2_print(anchor: &Path) -> ChildRun {
    best_of(|| {
        let run = common::run_child(Command::new("otf2-print").arg(anchor).stdout(Stdio::null()));
        assert!(run.success, "otf2-print {} failed", anchor.display());
        Some(run)
    })
    .expect("otf2-print succeeded")
}

/// Compiles `benches/otf2_read_noop.c` against libotf2 into `data`; `None`, having said why,
/// if there is no compiler or no library.
fn compile_noop_reader(data: &Path) -> Option<PathBuf> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/otf2_read_noop.c");
    let exe = data.join("otf2_read_noop");
    // otf2-config (libotf2-trace-dev) gives the flags, one kind per call (given several, it
    // prints only the last); plain -lotf2 otherwise.
    let config = |kind: &str| {
        Command::new("otf2-config")
            .arg(kind)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let flags = match (config("--cflags"), config("--ldflags"), config("--libs")) {
        (Some(c), Some(l), Some(libs)) => format!("{c} {l} {libs}"),
        _ => "-lotf2".to_string(),
    };
    let skip = "the OTF2 library's no-op reader (benches/otf2_read_noop.c)";
    let compiled = Command::new("cc")
        .args(["-O2", "-Wall", "-o"])
        .arg(&exe)
        .arg(&source)
        .args(flags.split_whitespace())
        .output();
    match compiled {
        Err(e) => {
            println!("skipped {skip}: cannot run cc ({e}; apt-get install gcc)");
            None
        }
        Ok(o) if !o.status.success() => {
            let why = String::from_utf8_lossy(&o.stderr);
            let first = why.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            println!(
                "skipped {skip}: it does not compile against libotf2 (apt-get install libotf2-trace-dev): {first}"
            );
            None
        }
        Ok(_) => Some(exe),
    }
}

/// Reads the archive with the OTF2 library's no-op reader (`mode` is "" for the merged reader
/// or "--per-location"), best of `RUNS`; checks it read every event the generator wrote.
/// `None`, having said why, if it fails.
fn read_noop(
    reader: &Path,
    data: &Path,
    anchor: &Path,
    mode: &str,
    events: u64,
) -> Option<ChildRun> {
    let (stdout, stderr) = (data.join("noop.out"), data.join("noop.err"));
    best_of(|| {
        let run = common::run_child(
            Command::new(reader)
                .arg(anchor)
                .args((!mode.is_empty()).then_some(mode))
                .stdout(File::create(&stdout).unwrap())
                .stderr(File::create(&stderr).unwrap()),
        );
        let out = output(&stdout);
        if !run.success {
            let err = output(&stderr);
            let last = err.lines().last().unwrap_or("");
            println!(
                "  the OTF2 library's reader {mode} failed on {}: {last}",
                anchor.display()
            );
            return None;
        }
        let read: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(
            read["events"].as_u64(),
            Some(events),
            "the OTF2 library read another number of events than were written"
        );
        Some(run)
    })
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn archive_mib(dir: &Path) -> f64 {
    common::dir_size(dir) as f64 / (1 << 20) as f64
}

/// Table 1: 16 ranks against otf2-print.
fn against_otf2_print(data: &Path) {
    if !available(
        "otf2-print",
        &["--version"],
        "apt-get install otf2-tools",
        "the comparison with otf2-print",
    ) {
        return;
    }
    println!("16 ranks, against otf2-print (Debian's otf2-tools) decoding and printing every record to /dev/null");
    println!(
        "{:>11} {:>11} {:>14} {:>10} {:>12} {:>8} {:>10}",
        "events", "archive MiB", "otf2-print s", "import s", "events/s", "ratio", "peak MiB"
    );
    for &events in &common::sizes(&[1_000_000, 10_000_000]) {
        let (dir, counts) = archive(data, 16, events);
        let written = counts["events"].as_u64().unwrap();
        let print = otf2_print(&dir.join("traces.otf2"));
        let import = import(data, &dir, &counts);
        println!(
            "{:>11} {:>11.0} {:>14.2} {:>10.2} {:>12.0} {:>7.1}x {:>10.0}",
            written,
            archive_mib(&dir),
            print.secs,
            import.secs,
            written as f64 / import.secs,
            print.secs / import.secs,
            mib(import.peak_kib)
        );
    }
}

/// Table 2: 64, 1,024 and 16,384 ranks against the OTF2 library's no-op reader.
fn against_the_library(data: &Path) {
    let defaults: Vec<u64> = RANK_CASES.iter().map(|c| c.0).collect();
    let cases = common::env_list("MTFDB_BENCH_RANKS", &defaults)
        .into_iter()
        .map(|ranks| {
            let events = RANK_CASES
                .iter()
                .find(|c| c.0 == ranks)
                .map_or(RANK_CASE_EVENTS, |c| c.1);
            (ranks, events)
        });
    println!();
    println!("one location per rank, against the OTF2 library (libotf2) reading the same archive with no-op callbacks");
    println!("(benches/otf2_read_noop.c): merged = its global event reader (locations merged by time, as the import does),");
    println!("per-location = each location alone (no merge); ratio = the library's seconds / import seconds (>= 1: import as");
    println!("fast or faster); the import runs under ulimit -n {OPEN_FILES}; cpu s = its processor time on all cores");
    let reader = compile_noop_reader(data);
    println!(
        "{:>6} {:>10} {:>8} | {:>8} {:>6} {:>10} {:>8} | {:>9} {:>6} {:>8} | {:>9} {:>6} {:>8}",
        "ranks",
        "events",
        "arch MiB",
        "import s",
        "cpu s",
        "events/s",
        "peak MiB",
        "merged s",
        "ratio",
        "peak MiB",
        "per-loc s",
        "ratio",
        "peak MiB"
    );
    for (ranks, events) in cases {
        let (dir, counts) = archive(data, ranks, events);
        let written = counts["events"].as_u64().unwrap();
        let anchor = dir.join("traces.otf2");
        let import = import(data, &dir, &counts);
        let chunk = counts["event_chunk"].as_u64().unwrap();
        let merged_memory = ranks.saturating_mul(chunk);
        let merged = match &reader {
            Some(r) if merged_memory <= MERGED_MEMORY => read_noop(r, data, &anchor, "", written),
            Some(_) => {
                println!(
                    "  {ranks} ranks: the merged reader left out: it would hold {ranks} event buffers of {} KiB \
                     ({} MiB) and {ranks} open files at once",
                    chunk >> 10,
                    merged_memory >> 20
                );
                None
            }
            None => None,
        };
        let per_location = reader
            .as_ref()
            .and_then(|r| read_noop(r, data, &anchor, "--per-location", written));
        let baseline = |b: Option<ChildRun>| match b {
            Some(b) => format!(
                "{:>9.2} {:>5.2}x {:>8.0}",
                b.secs,
                b.secs / import.secs,
                mib(b.peak_kib)
            ),
            None => format!("{:>9} {:>6} {:>8}", "-", "-", "-"),
        };
        println!(
            "{:>6} {:>10} {:>8.0} | {:>8.2} {:>6.2} {:>10.0} {:>8.0} | {} | {}",
            ranks,
            written,
            archive_mib(&dir),
            import.secs,
            import.cpu_secs,
            written as f64 / import.secs,
            mib(import.peak_kib),
            baseline(merged),
            baseline(per_location)
        );
    }
}

fn main() {
    if !available(
        "python3",
        &["-c", "import otf2"],
        "pip install otf2",
        "the OTF2 benchmark (its archives are written by the official OTF2 library)",
    ) {
        return;
    }
    let data = common::data_dir();
    println!("OTF2 import benchmark: 2D stencil with Isend/Irecv/Waitall and Allreduce, on {} cores; best of {RUNS}", common::cores());
    against_otf2_print(&data);
    against_the_library(&data);
}

//! OTF2 import benchmark: archives of 1M and 10M events written by the official OTF2 library
//! (`benches/otf2_gen.py`, the `otf2` PyPI package; not committed, written under
//! `target/bench-data/`), imported with the `mtfdb` binary (parse, convert, match, index,
//! persist).
//!
//! Baseline, measured in the same run on the same archive: `otf2-print archive > /dev/null`
//! (Debian's `otf2-tools`), the reference reader decoding and printing every record. The ratio
//! is otf2-print's time over mtfdb's; best of three runs each, as the machine is shared.
//!
//! A last case imports an archive of 16,384 locations (16,384 MPI ranks, 1M records, one
//! iteration of the stencil), written by the same library: one event file per location, read
//! with at most 256 open at a time, and its peak memory.
//!
//! `cargo bench --bench otf2` runs both sizes; `MTFDB_BENCH_EVENTS=2000000` picks others, and
//! `MTFDB_BENCH_LOCATIONS=4096` another location count for the last case (0 skips it).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const RUNS: usize = 3;

fn require(program: &str, args: &[&str], install: &str) {
    let ok = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("the OTF2 benchmark needs {program} ({install})");
        std::process::exit(1);
    }
}

/// Writes (or reuses) an archive of about `events` events over `ranks` ranks; returns its
/// folder and the generator's counts.
fn archive(data: &Path, events: u64, ranks: u32) -> (PathBuf, serde_json::Value) {
    let dir = if ranks == 16 {
        data.join(format!("otf2-{events}"))
    } else {
        data.join(format!("otf2-{events}-{ranks}ranks"))
    };
    let counts = dir.join("counts.json");
    if let Ok(text) = std::fs::read_to_string(&counts) {
        if let Ok(v) = serde_json::from_str(&text) {
            return (dir, v);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/otf2_gen.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(&dir)
        .args(["--events", &events.to_string()])
        .args(["--ranks", &ranks.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "otf2_gen.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
    std::fs::write(&counts, &line).unwrap();
    (dir, serde_json::from_str(&line).unwrap())
}

fn main() {
    require("python3", &["-c", "import otf2"], "pip install otf2");
    require("otf2-print", &["--version"], "apt-get install otf2-tools");
    let mut cases: Vec<(u64, u32)> = common::sizes(&[1_000_000, 10_000_000])
        .into_iter()
        .map(|events| (events, 16))
        .collect();
    let locations: u32 = std::env::var("MTFDB_BENCH_LOCATIONS")
        .ok()
        .map_or(16_384, |v| v.trim().parse().expect("a location count"));
    if locations > 0 {
        cases.push((1_000_000, locations));
    }
    let data = common::data_dir();
    let exe = env!("CARGO_BIN_EXE_mtfdb");
    println!(
        "OTF2 import benchmark: 2D stencil with Isend/Irecv/Waitall and Allreduce, on {} cores; best of {RUNS}",
        common::cores()
    );
    println!(
        "{:>7} {:>11} {:>11} {:>14} {:>10} {:>12} {:>8} {:>10}",
        "ranks",
        "events",
        "archive MiB",
        "otf2-print s",
        "import s",
        "events/s",
        "ratio",
        "peak MiB"
    );
    for (events, ranks) in cases {
        let (dir, counts) = archive(&data, events, ranks);
        let written = counts["events"].as_u64().unwrap();
        let anchor = dir.join("traces.otf2");

        let ((), print_secs) = common::best(RUNS, || {
            let status = Command::new("otf2-print")
                .arg(&anchor)
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success(), "otf2-print failed");
        });

        // A fresh database folder per run, all removed beforehand: removing the previous
        // run's database is not part of the time measured.
        let dbs: Vec<PathBuf> = (0..RUNS)
            .map(|run| data.join(format!("db-otf2-{events}-{ranks}-{run}")))
            .collect();
        for db in &dbs {
            let _ = std::fs::remove_dir_all(db);
        }
        let mut fresh = dbs.iter();
        let mut peak_kib = 0u64;
        let ((), import_secs) = common::best(RUNS, || {
            let db = fresh.next().expect("a database folder per run");
            let out = Command::new(exe)
                .args(["--db", db.to_str().unwrap(), "import"])
                .arg(&dir)
                .args(["--name", "bench", "--stats"])
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "import failed: {stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            // The import found every message the generator wrote.
            let messages = counts["messages"].as_u64().unwrap();
            assert!(
                stdout.contains(&format!(" {messages} messages")),
                "expected {messages} messages: {stdout}"
            );
            let kib = common::peak_kib(&stdout);
            peak_kib = peak_kib.max(kib);
        });
        for db in &dbs {
            let _ = std::fs::remove_dir_all(db);
        }
        println!(
            "{:>7} {:>11} {:>11.0} {:>14.2} {:>10.2} {:>12.0} {:>7.1}x {:>10.0}",
            ranks,
            written,
            common::dir_size(&dir) as f64 / (1 << 20) as f64,
            print_secs,
            import_secs,
            written as f64 / import_secs,
            print_secs / import_secs,
            peak_kib as f64 / 1024.0
        );
    }
}

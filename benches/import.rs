//! Import benchmark: generates `stencil2d` MTF text traces of 10M and 50M events (not
//! committed; written under `target/bench-data/`), imports each with the `mtfdb` binary and
//! reports the import rate, on-disk bytes per event (indexes included) and peak RSS.
//!
//! Baseline, measured in the same run on the same file: a plain read of the file that counts
//! its lines (the I/O floor no importer can beat). The ratio says how many times slower than
//! that floor the full import (parse, validate, match, index, encode, persist) is.
//!
//! Every size is run as 16, 1,024, 4,096, 16,384 and 100,000 ranks (the same number of
//! events spread over more ranks): the rate and bytes per event at each rank count, and the
//! rate's ratio against the 16-rank import of the same size (the second baseline), show what
//! the rank count alone costs.
//!
//! `cargo bench --bench import` runs both sizes; `MTFDB_BENCH_EVENTS=1000000,5000000` picks
//! other sizes and `MTFDB_BENCH_RANKS=16,4096` other rank counts.

mod common;

use std::io::Read;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use mtfdb::gen::{generate, iterations_for_events, GenConfig, Scenario};
use mtfdb::ingest::mtf_text::MtfWriter;

/// Rank counts from `MTFDB_BENCH_RANKS` (comma-separated), else the five.
fn rank_counts() -> Vec<u32> {
    common::env_list("MTFDB_BENCH_RANKS", &[16, 1_024, 4_096, 16_384, 100_000])
}

/// The baseline: read the whole file and count its lines.
fn scan_lines(path: &Path) -> (u64, f64) {
    let started = Instant::now();
    let mut f = std::fs::File::open(path).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut lines = 0u64;
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        lines += memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
    }
    (lines, started.elapsed().as_secs_f64())
}

fn main() {
    let sizes = common::sizes(&[10_000_000, 50_000_000]);
    let ranks = rank_counts();
    let data = common::data_dir();
    let exe = env!("CARGO_BIN_EXE_mtfdb");
    println!(
        "import benchmark: stencil2d, ranks {ranks:?}, on {} cores",
        common::cores()
    );
    println!(
        "{:>7} {:>11} {:>9} {:>8} {:>9} {:>11} {:>7} {:>9} {:>12} {:>9}",
        "ranks",
        "events",
        "file MiB",
        "scan s",
        "import s",
        "events/s",
        "x scan",
        "x 16-rk",
        "bytes/event",
        "peak MiB"
    );
    for &events in &sizes {
        let mut base_rate: Option<f64> = None;
        for &ranks in &ranks {
            match run(exe, &data, ranks, events) {
                Ok(r) => {
                    let rate = r.events as f64 / r.import_secs;
                    let base = *base_rate.get_or_insert(rate);
                    println!(
                        "{:>7} {:>11} {:>9.0} {:>8.2} {:>9.2} {:>11.0} {:>6.1}x {:>8.2}x {:>12.2} {:>9.0}",
                        ranks,
                        r.events,
                        r.file_bytes as f64 / (1 << 20) as f64,
                        r.scan_secs,
                        r.import_secs,
                        rate,
                        r.import_secs / r.scan_secs,
                        rate / base,
                        r.on_disk as f64 / r.events as f64,
                        r.peak_kib as f64 / 1024.0
                    );
                }
                Err(why) => println!("{ranks:>7} {events:>11} refused: {why}"),
            }
        }
    }
}

/// One import's measures.
struct Run {
    events: u64,
    file_bytes: u64,
    scan_secs: f64,
    import_secs: f64,
    on_disk: u64,
    peak_kib: u64,
}

/// Generates stencil2d at `ranks` with about `events` events, scans and imports it; the
/// import's error message if it refused the trace.
fn run(exe: &str, data: &Path, ranks: u32, events: u64) -> Result<Run, String> {
    let iterations = iterations_for_events(Scenario::Stencil2d, ranks, events)
        .map_err(|e| e.to_string())?
        .max(1);
    let config = GenConfig::new(Scenario::Stencil2d, ranks, iterations);
    let file = data.join(format!("stencil2d-{ranks}-{events}.mtf"));
    let mut writer = MtfWriter::create(&file).unwrap();
    let truth = generate(&config, &mut writer).unwrap();
    writer.into_inner().unwrap();
    let file_bytes = std::fs::metadata(&file).unwrap().len();
    let (lines, scan_secs) = scan_lines(&file);
    assert!(lines >= truth.events);

    let db = data.join(format!("db-{ranks}-{events}"));
    let _ = std::fs::remove_dir_all(&db);
    let started = Instant::now();
    let out = Command::new(exe)
        .args([
            "--db",
            db.to_str().unwrap(),
            "import",
            file.to_str().unwrap(),
            "--name",
            "bench",
            "--stats",
        ])
        .output()
        .unwrap();
    let import_secs = started.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let result = if out.status.success() {
        Ok(Run {
            events: truth.events,
            file_bytes,
            scan_secs,
            import_secs,
            on_disk: common::dir_size(&db),
            peak_kib: common::peak_kib(&stdout),
        })
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    };
    let _ = std::fs::remove_dir_all(&db);
    let _ = std::fs::remove_file(&file);
    result
}

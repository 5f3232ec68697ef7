//! Import benchmark: generates `stencil2d` MTF text traces of 10M and 50M events (not
//! committed; written under `target/bench-data/`), imports each with the `mtfdb` binary and
//! reports the import rate, on-disk bytes per event (indexes included) and peak RSS.
//!
//! Baseline, measured in the same run on the same file: a plain read of the file that counts
//! its lines (the I/O floor no importer can beat). The ratio says how many times slower than
//! that floor the full import (parse, validate, match, index, encode, persist) is.
//!
//! `cargo bench --bench import` runs both sizes; `MTFDB_BENCH_EVENTS=1000000,5000000` picks others.

mod common;

use std::io::Read;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use mtfdb::gen::{generate, iterations_for_events, GenConfig, Scenario};
use mtfdb::ingest::mtf_text::MtfWriter;

const RANKS: u32 = 16;

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
    let data = common::data_dir();
    let exe = env!("CARGO_BIN_EXE_mtfdb");
    println!(
        "import benchmark: stencil2d, {RANKS} ranks, on {} cores",
        common::cores()
    );
    println!(
        "{:>11} {:>9} {:>10} {:>10} {:>12} {:>8} {:>12} {:>10}",
        "events", "file MiB", "scan s", "import s", "events/s", "ratio", "bytes/event", "peak MiB"
    );
    for &events in &sizes {
        let iterations = iterations_for_events(Scenario::Stencil2d, RANKS, events).unwrap();
        let config = GenConfig::new(Scenario::Stencil2d, RANKS, iterations);
        let file = data.join(format!("stencil2d-{RANKS}-{events}.mtf"));
        let mut writer = MtfWriter::create(&file).unwrap();
        let truth = generate(&config, &mut writer).unwrap();
        writer.into_inner().unwrap();
        let file_bytes = std::fs::metadata(&file).unwrap().len();

        let (lines, scan_secs) = scan_lines(&file);
        assert!(lines >= truth.events);

        let db = data.join(format!("db-{events}"));
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
        assert!(
            out.status.success(),
            "import failed: {}{}",
            stdout,
            String::from_utf8_lossy(&out.stderr)
        );
        let peak_kib = common::peak_kib(&stdout);
        let on_disk = common::dir_size(&db);
        println!(
            "{:>11} {:>9.0} {:>10.2} {:>10.2} {:>12.0} {:>7.1}x {:>12.2} {:>10.0}",
            truth.events,
            file_bytes as f64 / (1 << 20) as f64,
            scan_secs,
            import_secs,
            truth.events as f64 / import_secs,
            import_secs / scan_secs,
            on_disk as f64 / truth.events as f64,
            peak_kib as f64 / 1024.0
        );
        let _ = std::fs::remove_dir_all(&db);
        let _ = std::fs::remove_file(&file);
    }
}

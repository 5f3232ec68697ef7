//! Import speed of the trace formats mtfdb reads besides its own, against a plain read of the
//! same files in the same run (`std::fs::read` of every file of the trace: the least any
//! reader must do). One function per format; each writes its trace under
//! `target/bench-data/` (never committed), then prints the best of three runs of each and
//! the ratio import time / read time.
//!
//! `cargo bench --bench ingest_formats`; `MTFDB_BENCH_EVENTS=1000000` sets the records per
//! trace (default 400,000).

mod common;

#[path = "../tests/fixtures/dumpi/writer.rs"]
mod dumpi_writer;

use std::path::{Path, PathBuf};

const RUNS: usize = 3;

/// Best-of-three times of reading every file of `files` and of importing `trace` into a
/// fresh database; prints a report line.
fn compare(format: &str, records: u64, files: &[PathBuf], trace: &Path, data: &Path) {
    let bytes: u64 = files.iter().map(|f| f.metadata().unwrap().len()).sum();
    let (read, read_secs) = common::best(RUNS, || {
        files
            .iter()
            .map(|f| std::fs::read(f).unwrap().len() as u64)
            .sum::<u64>()
    });
    assert_eq!(read, bytes);
    let db_dir = data.join(format!("{format}-db"));
    let (ops, import_secs) = common::best(RUNS, || {
        let _ = std::fs::remove_dir_all(&db_dir);
        let db = mtfdb::Database::open(&db_dir).unwrap();
        db.import(trace, Some("bench")).unwrap().summary.operations
    });
    let _ = std::fs::remove_dir_all(&db_dir);
    println!(
        "{format:>8} {records:>10} {:>9.1} {read_secs:>9.4} {import_secs:>9.3} {:>12.0} {:>8.1}",
        bytes as f64 / (1 << 20) as f64,
        ops as f64 / import_secs,
        import_secs / read_secs
    );
}

/// DUMPI: 16 ranks in a ring, each iteration an Irecv from the left, an Isend to the right and
/// a Waitall, an Allreduce every 8 iterations; written by the tests' DUMPI writer.
fn dumpi(data: &Path, records: u64) {
    use dumpi_writer::{handle::*, label::*, Arg, RankWriter, Status};
    const RANKS: usize = 16;
    let dir = data.join(format!("dumpi-{records}"));
    let meta = dir.join("ring.meta");
    if !meta.exists() {
        let per_rank = records / RANKS as u64;
        let writers: Vec<RankWriter> = (0..RANKS)
            .map(|r| {
                let mut w = RankWriter::new([1, 1, 0], 1_700_000_000);
                let mut now = 1_700_000_000u64 * 1_000_000_000 + r as u64 * 1_000;
                let mut call = |w: &mut RankWriter, func: u16, args: &[Arg]| {
                    now += 500;
                    w.call(func, 0, now, now + 1_000, args);
                    now += 1_000;
                };
                let (left, right) = (((r + RANKS - 1) % RANKS) as i32, ((r + 1) % RANKS) as i32);
                call(&mut w, INIT, &[Arg::Argv(vec!["./ring".into()])]);
                let mut written = 1;
                let mut i = 0u64;
                while written + 4 < per_rank {
                    call(
                        &mut w,
                        IRECV,
                        &dumpi_writer::irecv_args(128, MPI_DOUBLE, left, 1, COMM_WORLD, 2),
                    );
                    call(
                        &mut w,
                        ISEND,
                        &dumpi_writer::send_args(128, MPI_DOUBLE, right, 1, COMM_WORLD, Some(3)),
                    );
                    let st = Status {
                        bytes: 1024,
                        source: left,
                        tag: 1,
                    };
                    call(
                        &mut w,
                        WAITALL,
                        &[
                            Arg::I(2),
                            Arg::Ints(vec![2, 3]),
                            Arg::St(Some(vec![st, st])),
                        ],
                    );
                    written += 3;
                    if i % 8 == 7 {
                        call(
                            &mut w,
                            ALLREDUCE,
                            &[
                                Arg::I(1),
                                Arg::H(MPI_DOUBLE),
                                Arg::I8(3),
                                Arg::H(COMM_WORLD),
                            ],
                        );
                        written += 1;
                    }
                    i += 1;
                }
                call(&mut w, FINALIZE, &[]);
                w
            })
            .collect();
        dumpi_writer::write_trace(&dir, "ring", &writers);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    compare("dumpi", records, &files, &meta, data);
}

fn main() {
    let sizes = common::sizes(&[400_000]);
    let data = common::data_dir();
    println!(
        "Import of foreign trace formats against a plain read of their files, on {} cores; best of {RUNS}",
        common::cores()
    );
    println!(
        "{:>8} {:>10} {:>9} {:>9} {:>9} {:>12} {:>8}",
        "format", "records", "MiB", "read s", "import s", "ops/s", "ratio"
    );
    for &records in &sizes {
        dumpi(&data, records);
    }
}

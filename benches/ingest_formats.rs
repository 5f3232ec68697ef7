//! Import speed of the readers of foreign trace formats, one function per format, each
//! against a plain read of the same files in the same run.
//!
//! The baseline reads every byte of the trace's files and counts their lines (a `BufReader`
//! and `memchr`): what no reader can beat. The import is the `mtfdb` binary's `import`
//! (parse, convert, validate, match, index, persist) into a fresh database. Each is the best
//! of several runs (three imports, ten reads), as the machine is shared; the ratio is the
//! import's time over the read's.
//! Inputs are generated here, under `target/bench-data/`, never committed.
//!
//! `cargo bench --bench ingest_formats` runs every format at its default size;
//! `MTFDB_BENCH_EVENTS=1000000` sets the number of records instead.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

const RUNS: usize = 3;
/// The plain read takes milliseconds, so its best is taken over more runs.
const READ_RUNS: usize = 10;

/// One format's input: its files, what the import must find, and how many records it holds.
struct Input {
    /// What `mtfdb import` is given.
    path: PathBuf,
    /// Every file the import reads (the baseline reads them all).
    files: Vec<PathBuf>,
    records: u64,
    messages: u64,
}

/// Reads every byte of `files`, counting lines: the baseline.
fn plain_read(files: &[PathBuf]) -> u64 {
    let mut lines = 0u64;
    for f in files {
        let mut r = BufReader::with_capacity(1 << 20, std::fs::File::open(f).unwrap());
        loop {
            let buf = r.fill_buf().unwrap();
            if buf.is_empty() {
                break;
            }
            lines += memchr::memchr_iter(b'\n', buf).count() as u64;
            let n = buf.len();
            r.consume(n);
        }
    }
    lines
}

/// Times the import of `input` against the plain read and prints one row.
fn measure(format: &str, input: &Input, data: &Path) {
    let (lines, read_secs) = common::best(READ_RUNS, || plain_read(&input.files));
    assert!(lines > 0, "{format}: nothing to read");
    let (import_secs, peak_kib) =
        common::timed_imports(RUNS, data, format, &input.path, input.messages);
    let bytes: u64 = input
        .files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();
    println!(
        "{:<10} {:>10} {:>9.1} {:>8.3} {:>9.3} {:>12.0} {:>8.1}x {:>9.0}",
        format,
        input.records,
        bytes as f64 / (1 << 20) as f64,
        read_secs,
        import_secs,
        input.records as f64 / import_secs,
        import_secs / read_secs,
        peak_kib as f64 / 1024.0
    );
}

/// A Paraver trace as Extrae writes one: `ranks` tasks in a ring, each iteration an
/// `MPI_Irecv` from the left, an `MPI_Isend` to the right (its communication record right
/// after the call), an `MPI_Waitall` holding the message's arrival, a hardware-counter event
/// with four counters, the state records of the three calls, and every tenth iteration an
/// `MPI_Allreduce` with its collective arguments. Written to reach about `records` records.
fn paraver_trace(data: &Path, records: u64) -> Input {
    const RANKS: u64 = 16;
    // Per iteration and rank: 7 events, 3 states, 1 communication record (+0.2 Allreduce).
    let iterations = (records / (RANKS * 11)).max(10);
    let dir = data.join(format!("paraver-{records}"));
    let _ = std::fs::create_dir_all(&dir);
    let prv = dir.join("ring.prv");
    let pcf = dir.join("ring.pcf");
    std::fs::write(
        &pcf,
        "EVENT_TYPE\n9 50000001 MPI Point-to-point\nVALUES\n3 MPI_Isend\n4 MPI_Irecv\n6 MPI_Waitall\n0 Outside MPI\n\n\
         EVENT_TYPE\n9 50000002 MPI Collective Comm\nVALUES\n10 MPI_Allreduce\n0 Outside MPI\n\n\
         EVENT_TYPE\n9 50000003 MPI Other\nVALUES\n31 MPI_Init\n32 MPI_Finalize\n0 Outside MPI\n",
    )
    .unwrap();
    let mut w = std::io::BufWriter::new(std::fs::File::create(&prv).unwrap());
    let step = 1_000u64;
    let end = (iterations + 2) * step;
    let tasks: Vec<String> = (0..RANKS).map(|_| "1:1".to_string()).collect();
    let members: Vec<String> = (1..=RANKS).map(|t| t.to_string()).collect();
    writeln!(
        w,
        "#Paraver (01/01/2024 at 00:00):{end}_ns:1({RANKS}):1:{RANKS}({}),1",
        tasks.join(",")
    )
    .unwrap();
    writeln!(w, "c:1:1:{RANKS}:{}", members.join(":")).unwrap();
    let mut written = 0u64;
    let mut line = |w: &mut std::io::BufWriter<std::fs::File>, text: std::fmt::Arguments| {
        w.write_fmt(text).unwrap();
        w.write_all(b"\n").unwrap();
        written += 1;
    };
    for t in 1..=RANKS {
        line(&mut w, format_args!("2:{t}:1:{t}:1:10:50000003:31"));
    }
    for t in 1..=RANKS {
        line(&mut w, format_args!("2:{t}:1:{t}:1:20:50000003:0"));
    }
    for it in 1..=iterations {
        let b = it * step;
        // Records of one iteration, in time order; within a time, rank by rank.
        for t in 1..=RANKS {
            line(
                &mut w,
                format_args!("1:{t}:1:{t}:1:{}:{}:11", b + 10, b + 20),
            );
            line(&mut w, format_args!("2:{t}:1:{t}:1:{}:50000001:4", b + 10));
        }
        for t in 1..=RANKS {
            line(&mut w, format_args!("2:{t}:1:{t}:1:{}:50000001:0", b + 20));
        }
        for t in 1..=RANKS {
            line(
                &mut w,
                format_args!("1:{t}:1:{t}:1:{}:{}:10", b + 30, b + 40),
            );
            line(&mut w, format_args!("2:{t}:1:{t}:1:{}:50000001:3", b + 30));
        }
        for t in 1..=RANKS {
            let right = t % RANKS + 1;
            line(&mut w, format_args!("2:{t}:1:{t}:1:{}:50000001:0", b + 40));
            line(
                &mut w,
                format_args!(
                    "3:{t}:1:{t}:1:{}:{}:{right}:1:{right}:1:{}:{}:{}:{}",
                    b + 30,
                    b + 40,
                    b + 10,
                    b + 60,
                    1024 * t,
                    it % 1000
                ),
            );
        }
        for t in 1..=RANKS {
            line(
                &mut w,
                format_args!("1:{t}:1:{t}:1:{}:{}:8", b + 50, b + 70),
            );
            line(&mut w, format_args!("2:{t}:1:{t}:1:{}:50000001:6", b + 50));
        }
        for t in 1..=RANKS {
            line(&mut w, format_args!("2:{t}:1:{t}:1:{}:50000001:0", b + 70));
        }
        for t in 1..=RANKS {
            line(
                &mut w,
                format_args!(
                    "2:{t}:1:{t}:1:{}:42000050:{}:42000059:{}:42000107:{}:44224275:{}",
                    b + 80,
                    it * 1000 + t,
                    it * 1700,
                    it * 900,
                    it * 7
                ),
            );
        }
        if it % 10 == 0 {
            for t in 1..=RANKS {
                line(
                    &mut w,
                    format_args!(
                        "2:{t}:1:{t}:1:{}:50000002:10:50100001:8:50100002:8:50100004:1",
                        b + 90
                    ),
                );
            }
            for t in 1..=RANKS {
                line(&mut w, format_args!("2:{t}:1:{t}:1:{}:50000002:0", b + 95));
            }
        }
    }
    let fin = end - step / 2;
    for t in 1..=RANKS {
        line(&mut w, format_args!("2:{t}:1:{t}:1:{fin}:50000003:32"));
    }
    for t in 1..=RANKS {
        line(
            &mut w,
            format_args!("2:{t}:1:{t}:1:{}:50000003:0", fin + 10),
        );
    }
    w.flush().unwrap();
    Input {
        path: prv.clone(),
        files: vec![prv, pcf],
        records: written,
        messages: iterations * RANKS,
    }
}

/// Paraver: the `.prv` (and its `.pcf`) of a generated Extrae-style trace.
fn paraver(data: &Path, records: u64) {
    let input = paraver_trace(data, records);
    measure("paraver", &input, data);
}

fn main() {
    let records = common::sizes(&[400_000])[0];
    let data = common::data_dir();
    println!(
        "Foreign-format import against a plain read of the same files, on {} cores; best of {RUNS} imports, {READ_RUNS} reads",
        common::cores()
    );
    println!(
        "{:<10} {:>10} {:>9} {:>8} {:>9} {:>12} {:>9} {:>9}",
        "format", "records", "MiB", "read s", "import s", "records/s", "ratio", "peak MiB"
    );
    paraver(&data, records);
}

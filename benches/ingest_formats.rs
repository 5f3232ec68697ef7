//! Import speed of the foreign-format readers, one function per format, each against a plain
//! read of the same files in the same run (the floor any reader of the format pays).
//!
//! OTF v1: a VampirTrace-like trace written by this bench under `target/` (16 ranks, each
//! iteration a user routine, an `MPI_Sendrecv` around a ring with its send and receive
//! records, an `MPI_Allreduce` with its collective records; zlib-compressed streams flushed
//! every 10 KiB of text as OTF does). The baseline reads and decompresses every stream file
//! and counts its lines; "parse" is mtfdb's reader alone (into a sink that counts what it
//! gets); "import" is the whole import into a fresh database (parse, convert, match, index,
//! persist). The ratio is import over read. Best of three runs each, as the machine is shared.
//!
//! Paraver: an Extrae-like `.prv` (with its `.pcf`) written by this bench under `target/` (16
//! ranks in a ring, each iteration an `MPI_Irecv`, an `MPI_Isend` with its communication
//! record after the call, an `MPI_Waitall` holding the message's arrival, the three calls'
//! state records, a four-counter event, and an `MPI_Allreduce` with its collective arguments
//! every tenth iteration). The baseline reads both files and counts their lines; the columns
//! are the same as OTF v1's.
//!
//! DUMPI: 16 ranks in a ring, each iteration an `MPI_Irecv` from the left, an `MPI_Isend` to
//! the right and an `MPI_Waitall`, an `MPI_Allreduce` every eighth, written by the tests' DUMPI
//! writer (`tests/fixtures/dumpi/writer.rs`) under `target/`. Its files are binary: the
//! baseline reads them and counts their bytes.
//!
//! GXL: a 16-rank stencil2d generated and imported in memory, then exported as GXL (the MTF
//! paper's exchange syntax) under `target/`; the baseline reads the `.gxl` file and counts its
//! lines.
//!
//! `cargo bench --bench ingest_formats`; `MTFDB_BENCH_EVENTS=1000000` sets the records.

mod common;
#[path = "../tests/fixtures/dumpi/writer.rs"]
mod dumpi_writer;

use std::io::Read;
use std::path::{Path, PathBuf};

use mtfdb::ingest::{dumpi, gxl, otf1, paraver, EventSink};
use mtfdb::model::{Operation, RoutineEvent, StrId, TraceHeader};

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress};

const RUNS: usize = 3;

fn main() {
    println!(
        "foreign-format import benchmark on {} cores; best of {RUNS}",
        common::cores()
    );
    println!(
        "{:>8} {:>10} {:>10} {:>8} {:>8} {:>9} {:>12} {:>7}",
        "format", "records", "files MiB", "read s", "parse s", "import s", "records/s", "ratio"
    );
    for &records in &common::sizes(&[320_000]) {
        otf1(records);
        paraver(records);
        dumpi_ring(records);
        gxl_stencil(records);
    }
}

/// One format's generated input.
struct Case {
    format: &'static str,
    /// Records written.
    records: u64,
    /// The folder of its files (its size is reported).
    dir: PathBuf,
    /// The files the plain read reads.
    files: Vec<PathBuf>,
    /// What the reader and the import are given.
    source: PathBuf,
    /// Whether the files are text (the plain read counts lines) or binary (bytes).
    text: bool,
}

/// Times, on `case`, the plain read of its files, `read` (the format's reader alone, into a
/// counting sink) and the whole import into a fresh database (whose result `check` checks),
/// and prints the format's row.
fn measure(
    case: &Case,
    read: impl Fn(&Path, &mut Counter) -> mtfdb::Result<()>,
    check: impl Fn(&mtfdb::TraceInfo),
) {
    let (units, read_secs) = common::best(RUNS, || {
        case.files
            .iter()
            .map(|f| {
                if case.text {
                    read_lines(f)
                } else {
                    std::fs::read(f).unwrap().len() as u64
                }
            })
            .sum::<u64>()
    });
    assert!(
        units > case.records,
        "{units} lines or bytes for {} records",
        case.records
    );
    let (items, parse_secs) = common::best(RUNS, || {
        let mut sink = Counter::default();
        read(&case.source, &mut sink).unwrap();
        sink.items
    });
    assert!(items > 0);
    let ((), import_secs) = common::best(RUNS, || {
        let tmp = tempfile::tempdir().unwrap();
        let db = mtfdb::Database::open(tmp.path().join("db")).unwrap();
        check(&db.import(&case.source, Some("bench")).unwrap());
    });
    println!(
        "{:>8} {:>10} {:>10.1} {:>8.3} {:>8.3} {:>9.3} {:>12.0} {:>7.1}",
        case.format,
        case.records,
        common::dir_size(&case.dir) as f64 / (1 << 20) as f64,
        read_secs,
        parse_secs,
        import_secs,
        case.records as f64 / import_secs,
        import_secs / read_secs
    );
}

/// The OTF v1 case.
fn otf1(records: u64) {
    let dir = common::data_dir().join(format!("otf1-{records}"));
    let written = write_otf1(&dir, records);
    let files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let case = Case {
        format: "otf1",
        records: written,
        source: dir.join("bench.otf"),
        dir,
        files,
        text: true,
    };
    measure(
        &case,
        |path, sink| otf1::read_trace(path, sink, &mut |_| {}).map(|_| ()),
        |info| assert_eq!(info.processes, 16),
    );
}

/// The Paraver case.
fn paraver(records: u64) {
    let dir = common::data_dir().join(format!("paraver-{records}"));
    let (written, messages) = write_paraver(&dir, records);
    let case = Case {
        format: "paraver",
        records: written,
        source: dir.join("ring.prv"),
        files: vec![dir.join("ring.prv"), dir.join("ring.pcf")],
        dir,
        text: true,
    };
    measure(
        &case,
        |path, sink| paraver::read_trace(path, sink).map(|_| ()),
        |info| assert_eq!((info.processes, info.summary.messages), (16, messages)),
    );
}

/// The GXL case: records are operations plus routine enters and leaves.
fn gxl_stencil(records: u64) {
    use mtfdb::gen::{iterations_for_events, GenConfig, Scenario};
    let dir = common::data_dir().join(format!("gxl-{records}"));
    let file = dir.join("stencil.gxl");
    std::fs::create_dir_all(&dir).unwrap();
    let iterations = iterations_for_events(Scenario::Stencil2d, 16, records).unwrap();
    let config = GenConfig::new(Scenario::Stencil2d, 16, iterations);
    let (db, truth) = common::generated_db(&dir.join("db"), "s", &config);
    if !file.exists() {
        let trace = db.trace("s").unwrap();
        mtfdb::export::export_file(&trace, mtfdb::export::Format::Gxl, &file).unwrap();
    }
    drop(db);
    let _ = std::fs::remove_dir_all(dir.join("db"));
    let case = Case {
        format: "gxl",
        records: truth.events,
        source: file.clone(),
        files: vec![file],
        dir,
        text: true,
    };
    let messages = truth.messages;
    measure(&case, gxl::parse_file, |info| {
        assert_eq!((info.processes, info.summary.messages), (16, messages))
    });
}

/// The DUMPI case.
fn dumpi_ring(records: u64) {
    let dir = common::data_dir().join(format!("dumpi-{records}"));
    let (written, messages) = write_dumpi(&dir, records);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    let case = Case {
        format: "dumpi",
        records: written,
        source: dir.join("ring.meta"),
        files,
        dir,
        text: false,
    };
    measure(
        &case,
        |path, sink| dumpi::read_trace(path, sink, &mut |_| {}).map(|_| ()),
        |info| assert_eq!((info.processes, info.summary.messages), (16, messages)),
    );
}

/// Writes (or reuses) the DUMPI ring of about `records` call records; returns how many, and
/// the messages they hold.
fn write_dumpi(dir: &Path, records: u64) -> (u64, u64) {
    use dumpi_writer::{handle::*, label::*, Arg, RankWriter, Status};
    const RANKS: usize = 16;
    let per_rank = records / RANKS as u64;
    // Every rank writes the same calls: count them once.
    let mut calls = 1u64;
    let mut iterations = 0u64;
    while calls + 4 < per_rank {
        calls += 3 + u64::from(iterations % 8 == 7);
        iterations += 1;
    }
    calls += 1;
    let (written, messages) = (calls * RANKS as u64, iterations * RANKS as u64);
    if dir.join("ring.meta").exists() {
        return (written, messages);
    }
    std::fs::create_dir_all(dir).unwrap();
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
            for i in 0..iterations {
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
                }
            }
            call(&mut w, FINALIZE, &[]);
            w
        })
        .collect();
    dumpi_writer::write_trace(dir, "ring", &writers);
    (written, messages)
}

/// Writes (or reuses) the Paraver trace of about `records` records; returns how many, and the
/// messages they hold.
fn write_paraver(dir: &Path, records: u64) -> (u64, u64) {
    use std::io::Write;
    const RANKS: u64 = 16;
    // Per rank and iteration: 7 events, 3 states, 1 communication record (+ the Allreduce).
    const PER_ITERATION: u64 = 11;
    let iterations = (records / RANKS / PER_ITERATION).max(10);
    let allreduces = iterations / 10;
    let written = RANKS * (iterations * PER_ITERATION + 2 * allreduces + 4);
    let messages = RANKS * iterations;
    let prv = dir.join("ring.prv");
    if prv.exists() {
        return (written, messages);
    }
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("ring.pcf"),
        "EVENT_TYPE\n9 50000001 MPI Point-to-point\nVALUES\n3 MPI_Isend\n4 MPI_Irecv\n6 MPI_Waitall\n0 Outside MPI\n\n\
         EVENT_TYPE\n9 50000002 MPI Collective Comm\nVALUES\n10 MPI_Allreduce\n0 Outside MPI\n\n\
         EVENT_TYPE\n9 50000003 MPI Other\nVALUES\n31 MPI_Init\n32 MPI_Finalize\n0 Outside MPI\n",
    )
    .unwrap();
    let mut w = std::io::BufWriter::new(std::fs::File::create(&prv).unwrap());
    let step = 1_000u64;
    let end = (iterations + 2) * step;
    let tasks: Vec<&str> = (0..RANKS).map(|_| "1:1").collect();
    let members: Vec<String> = (1..=RANKS).map(|t| t.to_string()).collect();
    writeln!(
        w,
        "#Paraver (01/01/2024 at 00:00):{end}_ns:1({RANKS}):1:{RANKS}({}),1",
        tasks.join(",")
    )
    .unwrap();
    writeln!(w, "c:1:1:{RANKS}:{}", members.join(":")).unwrap();
    // Records at one time, rank by rank: `each(w, |w, t| …)` writes one per task `t`.
    let each = |w: &mut std::io::BufWriter<std::fs::File>, f: &dyn Fn(u64) -> String| {
        for t in 1..=RANKS {
            writeln!(w, "{}", f(t)).unwrap();
        }
    };
    each(&mut w, &|t| format!("2:{t}:1:{t}:1:10:50000003:31"));
    each(&mut w, &|t| format!("2:{t}:1:{t}:1:20:50000003:0"));
    for it in 1..=iterations {
        let b = it * step;
        each(&mut w, &|t| {
            format!(
                "1:{t}:1:{t}:1:{}:{}:11\n2:{t}:1:{t}:1:{}:50000001:4",
                b + 10,
                b + 20,
                b + 10
            )
        });
        each(&mut w, &|t| format!("2:{t}:1:{t}:1:{}:50000001:0", b + 20));
        each(&mut w, &|t| {
            format!(
                "1:{t}:1:{t}:1:{}:{}:10\n2:{t}:1:{t}:1:{}:50000001:3",
                b + 30,
                b + 40,
                b + 30
            )
        });
        // The Isend ends, then its communication record (logical and physical send, the
        // right neighbour's Irecv and the Waitall holding the arrival, size, tag).
        each(&mut w, &|t| {
            let right = t % RANKS + 1;
            format!(
                "2:{t}:1:{t}:1:{}:50000001:0\n3:{t}:1:{t}:1:{}:{}:{right}:1:{right}:1:{}:{}:{}:{}",
                b + 40,
                b + 30,
                b + 40,
                b + 10,
                b + 60,
                1024 * t,
                it % 1000
            )
        });
        each(&mut w, &|t| {
            format!(
                "1:{t}:1:{t}:1:{}:{}:8\n2:{t}:1:{t}:1:{}:50000001:6",
                b + 50,
                b + 70,
                b + 50
            )
        });
        each(&mut w, &|t| format!("2:{t}:1:{t}:1:{}:50000001:0", b + 70));
        each(&mut w, &|t| {
            format!(
                "2:{t}:1:{t}:1:{}:42000050:{}:42000059:{}:42000107:{}:44224275:{}",
                b + 80,
                it * 1000 + t,
                it * 1700,
                it * 900,
                it * 7
            )
        });
        if it % 10 == 0 {
            each(&mut w, &|t| {
                format!(
                    "2:{t}:1:{t}:1:{}:50000002:10:50100001:8:50100002:8:50100004:1",
                    b + 90
                )
            });
            each(&mut w, &|t| format!("2:{t}:1:{t}:1:{}:50000002:0", b + 95));
        }
    }
    let fin = end - step / 2;
    each(&mut w, &|t| format!("2:{t}:1:{t}:1:{fin}:50000003:32"));
    each(&mut w, &|t| {
        format!("2:{t}:1:{t}:1:{}:50000003:0", fin + 10)
    });
    w.flush().unwrap();
    (written, messages)
}

/// A sink that only counts what a reader hands it: the reader's own cost.
#[derive(Default)]
struct Counter {
    items: u64,
}

impl EventSink for Counter {
    fn header(&mut self, _: &TraceHeader) -> mtfdb::Result<()> {
        Ok(())
    }
    fn string(&mut self, _: StrId, _: &str) -> mtfdb::Result<()> {
        Ok(())
    }
    fn operation(&mut self, _: &Operation) -> mtfdb::Result<()> {
        self.items += 1;
        Ok(())
    }
    fn routine(&mut self, _: &RoutineEvent) -> mtfdb::Result<()> {
        self.items += 1;
        Ok(())
    }
    fn finish(&mut self) -> mtfdb::Result<()> {
        Ok(())
    }
}

/// Lines of a stream file, decompressing a `.z` file (OTF's streams are flushed but never
/// finished, which `flate2`'s readers take for a cut stream: decompress chunk by chunk).
fn read_lines(path: &Path) -> u64 {
    let mut file = std::fs::File::open(path).unwrap();
    let compressed = path.extension().is_some_and(|e| e == "z");
    let mut z = Decompress::new(true);
    let (mut input, mut out) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    let mut lines = 0;
    loop {
        let n = file.read(&mut input).unwrap();
        if n == 0 {
            // What the decompressor still holds.
            while compressed && drain(&mut z, &mut out, &mut lines) {}
            return lines;
        }
        if !compressed {
            lines += input[..n].iter().filter(|&&b| b == b'\n').count() as u64;
            continue;
        }
        let mut at = 0;
        while at < n {
            let before = (z.total_in(), z.total_out());
            z.decompress(&input[at..n], &mut out, FlushDecompress::None)
                .unwrap();
            at += (z.total_in() - before.0) as usize;
            let produced = (z.total_out() - before.1) as usize;
            lines += out[..produced].iter().filter(|&&b| b == b'\n').count() as u64;
        }
    }
}

/// Decompresses what `z` still holds into `out`, counting lines; `false` once it holds none.
fn drain(z: &mut Decompress, out: &mut [u8], lines: &mut u64) -> bool {
    let before = z.total_out();
    z.decompress(&[], out, FlushDecompress::None).unwrap();
    let produced = (z.total_out() - before) as usize;
    *lines += out[..produced].iter().filter(|&&b| b == b'\n').count() as u64;
    produced > 0
}

/// OTF's way of compressing a stream: one zlib stream flushed every buffer, never finished.
struct Flushed {
    z: Compress,
    text: Vec<u8>,
    out: Vec<u8>,
}

impl Flushed {
    fn new() -> Flushed {
        Flushed {
            z: Compress::new(Compression::new(4), true),
            text: Vec::new(),
            out: Vec::new(),
        }
    }

    fn push(&mut self, s: &str) {
        self.text.extend_from_slice(s.as_bytes());
        if self.text.len() >= 10 * 1024 {
            self.flush();
        }
    }

    fn flush(&mut self) {
        self.out.reserve(self.text.len() + 1024);
        self.z
            .compress_vec(&self.text, &mut self.out, FlushCompress::Full)
            .unwrap();
        self.text.clear();
    }

    fn finish(mut self) -> Vec<u8> {
        self.flush();
        self.out
    }
}

/// Writes (or reuses) the trace of about `records` event records; returns how many.
fn write_otf1(dir: &Path, records: u64) -> u64 {
    const RANKS: u64 = 16;
    const PER_ITERATION: u64 = 10;
    let iterations = (records / RANKS / PER_ITERATION).max(1);
    let written = RANKS * (iterations * PER_ITERATION + 2);
    if dir.join("bench.otf").exists() {
        return written;
    }
    std::fs::create_dir_all(dir).unwrap();
    let master: String = (1..=RANKS).map(|p| format!("{p:x}:{p:x}\n")).collect();
    let members: String = (1..=RANKS).map(|p| format!("{p:x},")).collect();
    let mut defs = format!(
        "DCR\"mtfdb benchmark\"\nDTR3b9aca00\nDPG1M{members}NM\"MPI_COMM_WORLD\"\n\
         DFG1NM\"Application\"\nDFG2NM\"MPI\"\nDF1G1NM\"main\"\nDF2G1NM\"compute\"\n\
         DF3G2NM\"MPI_Sendrecv\"\nDF4G2NM\"MPI_Allreduce\"\nDCO3NM\"MPI_Allreduce\"Y4\n"
    );
    for p in 1..=RANKS {
        defs.push_str(&format!("DP{p:x}NM\"Process {}\"\n", p - 1));
    }
    let mut z = Flushed::new();
    z.push(&defs);
    std::fs::write(dir.join("bench.0.def.z"), z.finish()).unwrap();
    for p in 1..=RANKS {
        let (next, prev) = (p % RANKS + 1, (p + RANKS - 2) % RANKS + 1);
        let mut z = Flushed::new();
        z.push(&format!("0\n*{p:x}\nE1\n"));
        for i in 0..iterations {
            let t = 1000 * (i + 1) + p;
            z.push(&format!(
                "{:x}\n*{p:x}\nE2\n{:x}\n*{p:x}\nL\n{:x}\n*{p:x}\nE3\nS{next:x}L800T0C1\nR{prev:x}L800T0C1\n\
                 {:x}\n*{p:x}\nL\n{:x}\n*{p:x}\nE4\nCOPB3H{:x}C1RT0S8R8\n{:x}\n*{p:x}\nCOPE{:x}\nL\n",
                t,
                t + 100,
                t + 200,
                t + 300,
                t + 400,
                i + 1,
                t + 500,
                i + 1
            ));
        }
        z.push(&format!("{:x}\n*{p:x}\nL\n", 1000 * (iterations + 1) + 600));
        std::fs::write(dir.join(format!("bench.{p:x}.events.z")), z.finish()).unwrap();
    }
    std::fs::write(dir.join("bench.otf"), master).unwrap();
    written
}

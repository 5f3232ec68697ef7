//! Fuzzing on stable Rust, in CI: seeded mutation loops over every reader of [`READERS`] (the
//! MTF text parser, the OTF2 and OTF v1 readers on their fixtures, the GXL and Parquet readers
//! on mtfdb's own exports of a hand-built trace and a generated one), the query parser, the engine
//! (random statements from the grammar checked against the naive evaluator of
//! `tests/common/oracle.rs`, and mutated statements that must give an answer or a clear error),
//! and the storage (`storage_faults`: a database's files damaged at random, read, checked and
//! repaired).
//!
//! - Budget: `MTFDB_FUZZ_SECS` seconds in all (default 45), shared by the targets by weight;
//!   `MTFDB_FUZZ_SECS=600 cargo test --release --test fuzz` runs ten minutes.
//! - Seed: `MTFDB_FUZZ_SEED` (default: from the clock). Every target prints its seed when it
//!   starts, and a failure prints the seed and the case number with the command that replays
//!   it (`MTFDB_FUZZ_SEED=… MTFDB_FUZZ_CASE=… cargo test --release --test fuzz TARGET`). Case k
//!   of a seed is always the same input; the input of a failing case is also written to
//!   `target/tmp/fuzz-failures/`.
//! - What counts as a failure: a panic, a case that runs longer than [`HANG`], an error of a
//!   kind that input cannot cause (damaged storage, a stopped pipeline, a broken rule the reader
//!   did not place in its input), an error without a position inside its input, an error
//!   longer than [`LONGEST_MESSAGE`], an import that fails half-way yet leaves a trace behind, a
//!   statement whose canonical text does not parse back to it, a selection whose rows differ
//!   from the naive evaluator's. A process killed by a stack overflow leaves its seed and case
//!   in `target/tmp/fuzz-<target>.last`.
//!
//! The hostile inputs found so far are kept in `tests/corpus/` and are among the seeds.

mod common;

use std::collections::BTreeSet;
use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use common::oracle::{
    fit_scope, ids_of, naive, prepare, selection_strategy, window_of, Model, EXTREMES,
};
use mtfdb::export::{export_file, Format};
use mtfdb::gen::{generate, GenConfig, Scenario};
use mtfdb::ingest::{gxl, mtf_text, otf1, otf2, parquet, EventSink, Policy, ValidatingSink};
use mtfdb::model::{Anomaly, Location, Operation, RoutineEvent, StrId, TraceHeader};
use mtfdb::query::ast::MAX_NESTING;
use mtfdb::query::{parse_statement, Expr, Session, KEYWORDS};
use mtfdb::{Database, Error, SourceFormat};

// ---- the readers --------------------------------------------------------------------------

/// A reader under fuzzing: its seeds and how it reads. Adding a reader is one entry here.
struct Reader {
    /// The target's name (`reader_<name>` is its test).
    name: &'static str,
    /// Seed inputs, relative to the crate root: files (a folder stands for the files in it),
    /// or, for a format whose input is a folder of files (`archive`), folders.
    seeds: &'static [&'static str],
    /// True when one input is a folder of files (OTF2 archives): a case mutates one of them.
    archive: bool,
    /// Reads the input at a path (a file, or an archive's main file) into a sink, through the
    /// validating seam as the import does.
    read: fn(&Path, &mut dyn EventSink) -> mtfdb::Result<()>,
    /// The format, for full imports into a database now and then.
    format: SourceFormat,
    /// In an archive, the file given to `read` (the OTF2 anchor); `None` gives the archive's
    /// folder itself (a Parquet export).
    main_file: Option<&'static str>,
    /// Seeds made when the target starts, beside `seeds`: two traces (a hand-built one with
    /// every field, name and anomaly class, and a generated scenario) exported in this format.
    exported: Option<Format>,
}

const READERS: &[Reader] = &[
    Reader {
        name: "mtf",
        seeds: &["tests/corpus/mtf"],
        archive: false,
        read: |p, sink| {
            let mut seam = ValidatingSink::new(sink, Policy::Strict);
            mtf_text::parse_file(p, &mut seam).map(|_| ())
        },
        format: SourceFormat::MtfText,
        main_file: None,
        exported: None,
    },
    Reader {
        name: "otf2",
        seeds: &[
            "tests/fixtures/otf2/pingpong-isend",
            "tests/fixtures/otf2/mapped",
            "tests/fixtures/otf2/subcomms",
        ],
        archive: true,
        read: |p, sink| {
            let mut seam = ValidatingSink::new(sink, Policy::Lenient);
            otf2::read_archive(p, &mut seam, &mut |_| {}).map(|_| ())
        },
        format: SourceFormat::Otf2,
        main_file: Some("*.otf2"),
        exported: None,
    },
    Reader {
        name: "otf1",
        seeds: &["tests/fixtures/otf1/subgroup"],
        archive: true,
        read: |p, sink| {
            let mut seam = ValidatingSink::new(sink, Policy::Lenient);
            otf1::read_trace(p, &mut seam, &mut |_| {}).map(|_| ())
        },
        format: SourceFormat::Otf1,
        main_file: Some("*.otf"),
        exported: None,
    },
    Reader {
        name: "gxl",
        seeds: &[],
        archive: false,
        read: |p, sink| {
            let mut seam = ValidatingSink::new(sink, SourceFormat::Gxl.policy());
            gxl::parse_file(p, &mut seam)
        },
        format: SourceFormat::Gxl,
        main_file: None,
        exported: Some(Format::Gxl),
    },
    Reader {
        name: "parquet",
        seeds: &[],
        archive: true,
        read: |p, sink| {
            let export = parquet::locate(p, None)?;
            let mut seam = ValidatingSink::new(sink, SourceFormat::Parquet.policy());
            parquet::read_export(&export, &mut seam)
        },
        format: SourceFormat::Parquet,
        main_file: None,
        exported: Some(Format::Parquet),
    },
];

#[test]
fn reader_mtf() {
    fuzz_reader(&READERS[0]);
}

#[test]
fn reader_otf2() {
    fuzz_reader(&READERS[1]);
}

#[test]
fn reader_otf1() {
    fuzz_reader(&READERS[2]);
}

#[test]
fn reader_gxl() {
    fuzz_reader(&READERS[3]);
}

#[test]
fn reader_parquet() {
    fuzz_reader(&READERS[4]);
}

#[test]
fn every_reader_has_its_test() {
    // A reader added to READERS gets a `reader_<name>` test above, calling fuzz_reader.
    let source = include_str!("fuzz.rs");
    for r in READERS {
        assert!(
            source.contains(&format!("fn reader_{}()", r.name)),
            "{}",
            r.name
        );
    }
}

// ---- budget, seeds, replay ----------------------------------------------------------------

/// The longest a single case may run.
const HANG: Duration = Duration::from_secs(30);

/// Each target's share of `MTFDB_FUZZ_SECS`.
fn share(target: &str) -> f64 {
    match target {
        "engine_oracle" => 0.2,
        "engine_statements" => 0.15,
        "storage_faults" => 0.1,
        "query_parser" => 0.15,
        _ => 0.4 / READERS.len() as f64,
    }
}

fn total_secs() -> f64 {
    std::env::var("MTFDB_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(45.0)
}

fn base_seed() -> u64 {
    match std::env::var("MTFDB_FUZZ_SEED") {
        Ok(s) => s.trim().parse().expect("MTFDB_FUZZ_SEED is a number"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
    }
}

/// Written straight to the process's standard error, past the test harness's capture, so
/// that a seed is seen even when the process dies.
fn say(text: &str) {
    let _ = std::io::stderr().write_all(text.as_bytes());
}

fn scratch() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
}

/// SplitMix64: case `k` of seed `s` draws from `Rng::new(s, k)`.
struct Rng(u64);

impl Rng {
    fn new(seed: u64, case: u64) -> Rng {
        let mut r = Rng(seed ^ case.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        r.next();
        r
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next()) * n as u128) >> 64) as usize
    }

    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Runs `case` for case numbers 0, 1, … until the target's share of the budget is spent (or
/// only `MTFDB_FUZZ_CASE`). A case returns `Err(description)` for a wrong outcome; a panic is
/// one too. A case running past [`HANG`] ends the process with its seed and number.
fn run_cases(target: &str, mut case: impl FnMut(&mut Rng, u64) -> Result<(), String>) {
    let seed = base_seed();
    let budget = Duration::from_secs_f64(total_secs() * share(target));
    let only: Option<u64> = std::env::var("MTFDB_FUZZ_CASE")
        .ok()
        .and_then(|s| s.parse().ok());
    let replay = format!(
        "MTFDB_FUZZ_SEED={seed} MTFDB_FUZZ_CASE={{case}} cargo test --release --test fuzz {target}"
    );
    say(&format!(
        "fuzz {target}: seed {seed}, {:.1} s (replay: MTFDB_FUZZ_SEED={seed} cargo test --release --test fuzz {target})\n",
        budget.as_secs_f64()
    ));
    // The watchdog: a case that does not end is reported with its seed and number.
    let current = Arc::new(AtomicU64::new(u64::MAX));
    let started_at = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let clock = Instant::now();
    let watchdog = {
        let (current, started_at, done) = (current.clone(), started_at.clone(), done.clone());
        let target = target.to_string();
        let replay = replay.clone();
        std::thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(200));
                let k = current.load(Ordering::SeqCst);
                let since = clock.elapsed().as_millis() as u64 - started_at.load(Ordering::SeqCst);
                if k != u64::MAX && Duration::from_millis(since) > HANG {
                    say(&format!(
                        "fuzz {target}: seed {seed}, case {k} runs past {HANG:?}; replay: {}\n",
                        replay.replace("{case}", &k.to_string())
                    ));
                    std::process::exit(101);
                }
            }
        })
    };
    let last = scratch().join(format!("fuzz-{target}.last"));
    let end = Instant::now() + budget;
    let mut cases = 0u64;
    let mut k = only.unwrap_or(0);
    loop {
        if only.is_none() && Instant::now() >= end && cases > 0 {
            break;
        }
        let _ = std::fs::write(&last, format!("seed {seed} case {k}\n"));
        started_at.store(clock.elapsed().as_millis() as u64, Ordering::SeqCst);
        current.store(k, Ordering::SeqCst);
        let mut rng = Rng::new(seed, k);
        let outcome = catch_unwind(AssertUnwindSafe(|| case(&mut rng, k)));
        current.store(u64::MAX, Ordering::SeqCst);
        let problem = match outcome {
            Ok(Ok(())) => None,
            Ok(Err(why)) => Some(why),
            Err(panic) => Some(format!(
                "panicked: {}",
                panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default()
            )),
        };
        if let Some(why) = problem {
            done.store(true, Ordering::SeqCst);
            panic!(
                "fuzz {target}: seed {seed}, case {k}: {why}\nreplay: {}",
                replay.replace("{case}", &k.to_string())
            );
        }
        cases += 1;
        k += 1;
        if only.is_some() {
            break;
        }
    }
    done.store(true, Ordering::SeqCst);
    let _ = watchdog.join();
    say(&format!("fuzz {target}: {cases} cases, none failed\n"));
}

/// Keeps a failing input where the failure message says.
fn keep_failure(target: &str, k: u64, name: &str, bytes: &[u8]) -> PathBuf {
    let dir = scratch().join("fuzz-failures");
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("{target}-{}-{k}-{name}", base_seed()));
    let _ = std::fs::write(&path, bytes);
    path
}

// ---- mutations ----------------------------------------------------------------------------

/// Numbers at the edges of the types a format stores: as text for text formats.
const TEXT_NUMBERS: &[&str] = &[
    "0",
    "-1",
    "2147483647",
    "2147483648",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "340282366920938463463374607431768211456",
    "1e9",
    "0.5",
    "",
];

/// Mutates `data` one to four times: bit flips, byte sets, insertions and deletions of
/// ranges, copies of one range over another, truncations, numbers at the types' edges (as text
/// when `text`, as little- and big-endian integers otherwise), swaps of lines.
fn mutate(rng: &mut Rng, data: &mut Vec<u8>, text: bool) {
    for _ in 0..1 + rng.below(4) {
        let len = data.len();
        let at = rng.below(len + 1);
        match rng.below(9) {
            0 if len > 0 => {
                let i = rng.below(len);
                data[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                data[i] = *rng.pick(&[0u8, 0xff, b'\n', b' ', b'#', b'"', b'=', b'-', 0x80, 0xc3]);
            }
            2 => {
                let n = 1 + rng.below(16);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                data.splice(at..at, bytes);
            }
            3 if len > 0 => {
                let n = 1 + rng.below(len.min(64));
                let from = rng.below(len + 1 - n);
                data.drain(from..from + n);
            }
            4 if len > 0 => {
                let n = 1 + rng.below(len.min(256));
                let from = rng.below(len + 1 - n);
                let piece = data[from..from + n].to_vec();
                data.splice(at..at, piece);
            }
            5 => data.truncate(at),
            6 if text => {
                // Replace the number nearest `at` with one at a type's edge.
                let start = data[..at]
                    .iter()
                    .rposition(|b| !b.is_ascii_digit())
                    .map_or(0, |i| i + 1);
                let end = data[at..]
                    .iter()
                    .position(|b| !b.is_ascii_digit())
                    .map_or(len, |i| at + i);
                let n = rng.pick(TEXT_NUMBERS).as_bytes().to_vec();
                data.splice(start..end, n);
            }
            6 => {
                let v = *rng.pick(&[
                    0u64,
                    1,
                    0x7f,
                    0xff,
                    0xffff,
                    0x7fff_ffff,
                    0xffff_ffff,
                    1 << 63,
                    u64::MAX,
                ]);
                let width = *rng.pick(&[1usize, 2, 4, 8]);
                let bytes = if rng.chance(2) {
                    v.to_le_bytes()
                } else {
                    v.to_be_bytes()
                };
                let piece = bytes[..width].to_vec();
                let end = (at + width).min(len);
                data.splice(at..end, piece);
            }
            7 if text => {
                let mut lines: Vec<Vec<u8>> =
                    data.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
                if lines.len() > 2 {
                    let (a, b) = (rng.below(lines.len()), rng.below(lines.len()));
                    lines.swap(a, b);
                    *data = lines.join(&b'\n');
                }
            }
            _ if len > 0 => {
                let i = rng.below(len);
                data[i] = data[i].wrapping_add(1 + rng.below(3) as u8);
            }
            _ => data.push(rng.next() as u8),
        }
    }
}

// ---- reader targets -----------------------------------------------------------------------

/// A sink that takes everything, as the import would, and counts it.
#[derive(Default)]
struct Counting {
    items: u64,
}

impl EventSink for Counting {
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
    fn anomaly(&mut self, _: &Anomaly) -> mtfdb::Result<()> {
        Ok(())
    }
    fn locations(&mut self, _: &[Location]) -> mtfdb::Result<()> {
        Ok(())
    }
    fn finish(&mut self) -> mtfdb::Result<()> {
        Ok(())
    }
}

/// One seed input: its files, relative to the input's folder (a single file for file formats).
struct SeedInput {
    files: Vec<(PathBuf, Vec<u8>)>,
}

fn load_seeds(reader: &Reader) -> Vec<SeedInput> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut seeds = Vec::new();
    for s in reader.seeds {
        let path = root.join(s);
        if reader.archive {
            let mut files = Vec::new();
            collect_files(&path, &path, &mut files);
            seeds.push(SeedInput { files });
        } else if path.is_dir() {
            let mut files = Vec::new();
            collect_files(&path, &path, &mut files);
            // Small files mutate fast; the large ones are regression cases of their own.
            for f in files.into_iter().filter(|(_, b)| b.len() <= 64 * 1024) {
                seeds.push(SeedInput { files: vec![f] });
            }
        } else {
            let name = PathBuf::from(path.file_name().expect("a file name"));
            seeds.push(SeedInput {
                files: vec![(name, std::fs::read(&path).expect("a seed file"))],
            });
        }
    }
    if let Some(format) = reader.exported {
        seeds.extend(exported_seeds(reader.name, format));
    }
    assert!(!seeds.is_empty(), "{}: no seeds", reader.name);
    seeds
}

/// The hand-built trace with every field and anomaly class, and a small generated scenario,
/// exported in `format` (under the target's scratch folder, made again at every start): a
/// file each, or a folder of files each for Parquet.
fn exported_seeds(target: &str, format: Format) -> Vec<SeedInput> {
    let dir = scratch().join(format!("fuzz-seeds-{target}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    let db = Database::open(dir.join("db")).expect("a scratch database");
    db.import_events("rich", |sink| common::contents::rich_trace(sink))
        .expect("the hand-built trace imports");
    db.import_events("stencil", |sink| {
        generate(&GenConfig::new(Scenario::Stencil2d, 4, 2), sink).map(|_| ())
    })
    .expect("the generated trace imports");
    let mut seeds = Vec::new();
    for name in ["rich", "stencil"] {
        let out = dir.join(format!("{name}.{}", format.name()));
        export_file(&db.trace(name).expect("imported"), format, &out).expect("the export");
        let mut files = Vec::new();
        if out.is_dir() {
            collect_files(&out, &out, &mut files);
        } else {
            let file = PathBuf::from(out.file_name().expect("a file name"));
            files.push((file, std::fs::read(&out).expect("the exported file")));
        }
        seeds.push(SeedInput { files });
    }
    seeds
}

fn collect_files(root: &Path, dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("a seed folder")
        .map(|e| e.expect("an entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect_files(root, &p, out);
        } else if !p
            .extension()
            .is_some_and(|e| e == "json" || e == "md" || e == "py")
        {
            let rel = p.strip_prefix(root).expect("inside the root").to_path_buf();
            out.push((rel, std::fs::read(&p).expect("a seed file")));
        }
    }
}

/// The kinds of error bad input may cause: anything else (damaged storage, a stopped
/// pipeline, a storage error, a rule the import's checks found broken that the reader did
/// not place in its input) is a bug.
fn input_error(e: &Error) -> bool {
    matches!(
        e,
        Error::Input(_) | Error::Io { .. } | Error::Unsupported(_) | Error::Usage(_)
    )
}

/// The longest error message bad input may cause: a message quotes tokens and lines of the
/// input cut short, whatever their length.
const LONGEST_MESSAGE: usize = 2000;

/// An input error's position is inside the input: a line of the text, or a byte of the file.
fn position_inside(e: &Error, dir: &Path, files: &[(PathBuf, Vec<u8>)]) -> Result<(), String> {
    let Error::Input(input) = e else {
        return Ok(());
    };
    let Some((_, bytes)) = files
        .iter()
        .find(|(rel, _)| Path::new(&input.file) == dir.join(rel))
    else {
        // A position in a file the reader derived (an archive's folder): nothing to check.
        return Ok(());
    };
    if input.line == 0 {
        if input.column > bytes.len() as u64 {
            return Err(format!(
                "byte {} past the file's {} bytes: {e}",
                input.column,
                bytes.len()
            ));
        }
    } else {
        let lines = bytes.split(|&b| b == b'\n').count() as u64;
        if input.line > lines {
            return Err(format!(
                "line {} past the file's {lines} lines: {e}",
                input.line
            ));
        }
    }
    Ok(())
}

fn fuzz_reader(reader: &'static Reader) {
    let seeds = load_seeds(reader);
    let target = format!("reader_{}", reader.name);
    let work = tempfile::tempdir().unwrap();
    let db = Database::open(work.path().join("db")).unwrap();
    run_cases(&target, |rng, k| {
        let seed = rng.pick(&seeds);
        let mut files = seed.files.clone();
        let which = rng.below(files.len());
        mutate(rng, &mut files[which].1, !reader.archive);
        let dir = work.path().join(format!("case{k}"));
        for (rel, bytes) in &files {
            let p = dir.join(rel);
            std::fs::create_dir_all(p.parent().expect("a folder")).unwrap();
            std::fs::write(&p, bytes).unwrap();
        }
        let input = match reader.main_file {
            None if reader.archive => dir.clone(),
            None => dir.join(&files[0].0),
            Some(pattern) => {
                let ext = pattern.trim_start_matches("*.");
                files
                    .iter()
                    .map(|(rel, _)| dir.join(rel))
                    .find(|p| p.extension().is_some_and(|e| e == ext))
                    .unwrap_or_else(|| dir.clone())
            }
        };
        let keep = |why: String| {
            let saved = keep_failure(&target, k, "input", &files[which].1);
            format!(
                "{why}\n(mutated {} kept at {})",
                files[which].0.display(),
                saved.display()
            )
        };
        let outcome = (reader.read)(&input, &mut Counting::default());
        if let Err(e) = &outcome {
            if !input_error(e) {
                return Err(keep(format!("an error input cannot cause: {e:?}")));
            }
            let message = e.to_string();
            if message.len() > LONGEST_MESSAGE {
                return Err(keep(format!(
                    "an error of {} bytes: {}…",
                    message.len(),
                    message.chars().take(300).collect::<String>()
                )));
            }
            position_inside(e, &dir, &files).map_err(keep)?;
        }
        // Now and then the whole import: all or nothing.
        if k % 8 == 0 {
            let before = db.traces().unwrap().len();
            let name = format!("case{k}");
            match db.import_as(&input, Some(&name), reader.format) {
                Ok(_) => {
                    db.trace(&name)
                        .map_err(|e| keep(format!("imported but unreadable: {e}")))?;
                    db.drop_trace(&name).unwrap();
                }
                Err(e) if input_error(&e) => {}
                Err(e) => return Err(keep(format!("the import failed with {e:?}"))),
            }
            if db.traces().unwrap().len() != before {
                return Err(keep("the import left a trace behind".into()));
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    });
}

// ---- the query parser ---------------------------------------------------------------------

/// Statements to start from: the grammar's examples and every statement of the statement
/// files and the corpus.
fn seed_statements() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let grammar = std::fs::read_to_string(root.join("grammar/query.ebnf")).unwrap();
    let begin = grammar.find("BEGIN EXAMPLES").unwrap();
    let end = grammar.find("END EXAMPLES").unwrap();
    let mut out: Vec<String> = grammar[begin..end]
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("--"))
        .map(str::to_string)
        .collect();
    for dir in ["tests/statements", "tests/corpus"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "test") {
                let text = std::fs::read_to_string(&p).unwrap();
                // The line after a record's header, when it is short: its statement's first line.
                let lines: Vec<&str> = text.lines().collect();
                for w in lines.windows(2) {
                    if (w[0].starts_with("statement") || w[0].starts_with("query"))
                        && !w[1].contains('{')
                    {
                        out.push(w[1].to_string());
                    }
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Tokens beside the language's keywords ([`KEYWORDS`]) a mutated statement may gain:
/// symbols, names, broken quotes and odd characters.
const OTHER_TOKENS: &[&str] = &[
    "(",
    ")",
    ",",
    ";",
    "-",
    "*",
    ":",
    "<",
    "<=",
    "=",
    "!=",
    "<>",
    ">=",
    ">",
    "'",
    "\"",
    "--",
    "é",
    "\u{feff}",
    "P0",
    "S1",
    "R0",
    "MPI_Bcast",
    "C1",
    "small",
    "extremes",
];

/// A statement mutated by tokens (insert, delete, duplicate, swap, replace a number with an
/// extreme one, a name with a 70,000-character one, wrap conditions in deep nesting) or bytes.
fn mutate_statement(rng: &mut Rng, statement: &str) -> String {
    let mut tokens: Vec<String> = statement
        .split_inclusive([' ', '(', ')', ','])
        .map(str::to_string)
        .collect();
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(tokens.len() + 1);
        match rng.below(9) {
            0 => {
                let i = rng.below(KEYWORDS.len() + OTHER_TOKENS.len());
                let word = KEYWORDS
                    .get(i)
                    .unwrap_or_else(|| &OTHER_TOKENS[i - KEYWORDS.len()]);
                tokens.insert(at, format!("{word} "));
            }
            1 if !tokens.is_empty() => {
                tokens.remove(at.min(tokens.len() - 1));
            }
            2 if !tokens.is_empty() => {
                let t = tokens[at.min(tokens.len() - 1)].clone();
                tokens.insert(at, t);
            }
            3 if tokens.len() > 1 => {
                let (a, b) = (at.min(tokens.len() - 1), rng.below(tokens.len()));
                tokens.swap(a, b);
            }
            4 => {
                let n = rng.pick(EXTREMES);
                let sign = if rng.chance(4) { "-" } else { "" };
                tokens.insert(at, format!("{sign}{n} "));
            }
            5 => {
                let c = *rng.pick(&['x', 'é', '\'', 'P']);
                let n = *rng.pick(&[255usize, 256, 65_536, 70_000]);
                let quote = if c == '\'' { '"' } else { '\'' };
                tokens.insert(at, format!("{quote}{}{quote} ", c.to_string().repeat(n)));
            }
            6 => {
                // Nesting at the limit, or one past it.
                let depth = MAX_NESTING + rng.below(2);
                let open = if rng.chance(2) { "NOT " } else { "(" };
                let close = if open == "(" { ")" } else { "" };
                tokens.insert(
                    at,
                    format!("{}SIZE > 1{} ", open.repeat(depth), close.repeat(depth)),
                );
            }
            7 => {
                let mut bytes = tokens.concat().into_bytes();
                mutate(rng, &mut bytes, true);
                return String::from_utf8_lossy(&bytes).into_owned();
            }
            _ => tokens.insert(at, format!("{} ", rng.pick(TEXT_NUMBERS))),
        }
    }
    tokens.concat()
}

#[test]
fn query_parser() {
    let seeds = seed_statements();
    assert!(seeds.len() > 200, "{} seed statements", seeds.len());
    run_cases("query_parser", |rng, k| {
        let seed = rng.pick(&seeds).clone();
        let text = mutate_statement(rng, &seed);
        match parse_statement(&text) {
            Ok(statement) => {
                // Canonical text parses back to the same statement.
                let canonical = statement.to_string();
                match parse_statement(&canonical) {
                    Ok(again) if again == statement => Ok(()),
                    other => Err(format!(
                        "{}\ncanonical {}\nparsed back as {other:?}",
                        keep_failure("query_parser", k, "statement", text.as_bytes()).display(),
                        canonical.chars().take(500).collect::<String>()
                    )),
                }
            }
            Err(e) => {
                let lines: Vec<&str> = text.lines().collect();
                let line = lines.get(e.line.saturating_sub(1)).copied().unwrap_or("");
                let ok = e.line >= 1
                    && e.line <= lines.len().max(1)
                    && e.column >= 1
                    && e.column <= line.chars().count() + 1;
                let shown = e.to_string();
                if ok && !shown.is_empty() {
                    Ok(())
                } else {
                    Err(format!(
                        "error outside its statement (line {}, column {}): {}",
                        e.line,
                        e.column,
                        keep_failure("query_parser", k, "statement", text.as_bytes()).display()
                    ))
                }
            }
        }
    });
}

// ---- the engine ---------------------------------------------------------------------------

/// A database with a few generated traces and the trace of extreme values, their rows for the
/// naive evaluator, and the longest views.
struct World {
    _dir: tempfile::TempDir,
    session: Session,
    models: Vec<(String, Model)>,
}

fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    let mut session = Session::new(db);
    let mut models = Vec::new();
    for (scenario, ranks, iterations) in [
        (Scenario::Stencil2d, 6, 2),
        (Scenario::Cg, 8, 1),
        (Scenario::Bt, 9, 1),
        (Scenario::Alltoall, 5, 2),
    ] {
        let config = GenConfig {
            scenario,
            ranks,
            iterations,
            seed: 7,
            shuffle_ranks: ranks % 2 == 0,
            delays: Vec::new(),
            network: None,
        };
        let name = format!("{scenario}-{ranks}");
        session
            .database()
            .import_events(&name, |sink| generate(&config, sink).map(|_| ()))
            .unwrap();
        let model = prepare(&mut session, &name);
        models.push((name, model));
    }
    // Sizes, tags and times at the edges of their ranges (tests/corpus/mtf/extremes.mtf).
    let extremes = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/mtf/extremes.mtf");
    session
        .database()
        .import(&extremes, Some("extremes"))
        .unwrap();
    let model = prepare(&mut session, "extremes");
    models.push(("extremes".to_string(), model));
    World {
        _dir: dir,
        session,
        models,
    }
}

/// Random selections from the grammar (extreme constants, nesting to the limit and one past,
/// the longest view names) select exactly what the naive evaluator selects.
#[test]
fn engine_oracle() {
    let mut w = world();
    let strategy = selection_strategy();
    run_cases("engine_oracle", |rng, _| {
        let mut seed_bytes = [0u8; 32];
        for chunk in seed_bytes.chunks_mut(8) {
            chunk.copy_from_slice(&rng.next().to_le_bytes());
        }
        let mut runner = TestRunner::new_with_rng(
            Config::default(),
            TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
        );
        let (mut sel, window) = strategy
            .new_tree(&mut runner)
            .map_err(|e| e.to_string())?
            .current();
        // The trace of extreme values half the time, a generated one otherwise.
        let which = if rng.chance(2) {
            w.models.len() - 1
        } else {
            rng.below(w.models.len() - 1)
        };
        let (name, model) = &w.models[which];
        fit_scope(&mut sel.filter.scope, model.ranks);
        if let Some((a, b)) = window {
            sel.filter.time = Some(window_of(model.span, a, b));
        }
        let expected = naive(model, &sel);
        let text = format!("SELECT {sel}");
        let name = name.clone();
        w.session.use_trace(&name).map_err(|e| e.to_string())?;
        let outcome = w.session.run(&text);
        let depth = sel.filter.predicate.as_ref().map_or(0, Expr::depth);
        match outcome {
            Err(Error::LimitExceeded { .. }) if depth > MAX_NESTING => Ok(()),
            Ok(_) if depth > MAX_NESTING => Err(format!(
                "{name}: {text}: past the nesting limit, yet answered"
            )),
            Ok(result) => {
                let got = ids_of(&result);
                if got == expected {
                    Ok(())
                } else {
                    let missing: BTreeSet<_> = expected.difference(&got).take(5).collect();
                    let extra: BTreeSet<_> = got.difference(&expected).take(5).collect();
                    Err(format!(
                        "{name}: {text}\n{} rows, the naive evaluator {}; missing {missing:?}, extra {extra:?}",
                        got.len(),
                        expected.len()
                    ))
                }
            }
            Err(e) => Err(format!("{name}: {text}: {e}")),
        }
    });
}

/// Mutated statements of every kind run against a small database: each gives an answer or an
/// error of a kind a statement may cause, in bounded time.
#[test]
fn engine_statements() {
    let mut w = world();
    let seeds = seed_statements();
    let names: Vec<String> = w.models.iter().map(|(n, _)| n.clone()).collect();
    run_cases("engine_statements", |rng, k| {
        let name = rng.pick(&names).clone();
        w.session.use_trace(&name).map_err(|e| e.to_string())?;
        let seed = rng.pick(&seeds).clone();
        let text = mutate_statement(rng, &seed);
        match w.session.run(&text) {
            Ok(_) => Ok(()),
            Err(
                Error::Syntax(_)
                | Error::UnknownName { .. }
                | Error::LimitExceeded { .. }
                | Error::NoSuchTrace { .. }
                | Error::Usage(_),
            ) => Ok(()),
            Err(e) => Err(format!(
                "{name}: {e:?}\nstatement kept at {}",
                keep_failure("engine_statements", k, "statement", text.as_bytes()).display()
            )),
        }
    });
}

// ---- storage faults -------------------------------------------------------------------------

/// A database of two small generated traces, one with a view and a stored analysis result,
/// and what a user sees of it; made once, copied for every case.
fn storage_pristine() -> &'static (tempfile::TempDir, PathBuf, String) {
    static PRISTINE: std::sync::OnceLock<(tempfile::TempDir, PathBuf, String)> =
        std::sync::OnceLock::new();
    PRISTINE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let db = Database::open(&path).unwrap();
        for (name, scenario, ranks) in [("ring", Scenario::Ring, 4), ("cg", Scenario::Cg, 8)] {
            db.import_events(name, |sink| {
                generate(&GenConfig::new(scenario, ranks, 3), sink).map(|_| ())
            })
            .unwrap();
        }
        let mut session = Session::new(db);
        session.use_trace("ring").unwrap();
        session
            .run("CREATE VIEW sends AS SELECT ALL MESSAGES WHERE SIZE > 0")
            .unwrap();
        session.run("SELECT PATTERNS FOR PROCESS(0)").unwrap();
        drop(session);
        let expected = observe_storage(&path).unwrap();
        (dir, path, expected)
    })
}

/// What a user sees of the database at `path`: its traces, and of each its messages, a
/// statement's rows, and `ring`'s view and stored patterns.
fn observe_storage(path: &Path) -> mtfdb::Result<String> {
    let db = Database::open(path)?;
    let mut out = format!("{:?}\n", db.traces()?);
    let names = db.trace_names()?;
    for name in &names {
        out += &format!("{:?}\n", db.trace(name)?.messages()?);
    }
    let mut session = Session::new(db);
    for name in &names {
        session.use_trace(name)?;
        out += &format!(
            "{:?}\n",
            session.run("SELECT OPERATIONS WHERE SIZE > 1024")?
        );
        if name == "ring" {
            out += &format!(
                "{:?}\n{:?}\n",
                session.run("SELECT COUNT(*) FROM MESSAGES IN VIEW sends")?,
                session.run("SELECT PATTERNS FOR PROCESS(0)")?
            );
        }
    }
    Ok(out)
}

/// Every file under `dir`, relative to it.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

/// Damages the stored files of a copy of a small database (bits flipped, files truncated,
/// deleted, grown, zeroed, stray files left as dead writers leave them) and reads it: the
/// answers are as before or an error names a damaged file; never a panic, never a changed
/// answer. Then `mtfdb check` must not call sound a database that fails, and `--repair`
/// must leave one that opens.
#[test]
fn storage_faults() {
    let (_keep, pristine, expected) = storage_pristine();
    let files = files_under(pristine);
    run_cases("storage_faults", |rng, _| {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let path = dir.path().join("db");
        for f in &files {
            let to = path.join(f);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(pristine.join(f), &to).unwrap();
        }
        let mut damaged: Vec<String> = Vec::new();
        for _ in 0..1 + rng.below(3) {
            let rel = rng.pick(&files).clone();
            let file = path.join(&rel);
            let name = rel.file_name().unwrap().to_string_lossy().into_owned();
            // The lock file's content only explains a wait.
            let counts = name != "LOCK";
            let Ok(mut bytes) = std::fs::read(&file) else {
                continue;
            };
            match rng.below(7) {
                0 | 1 if !bytes.is_empty() => {
                    let at = rng.below(bytes.len());
                    bytes[at] ^= 1 << rng.below(8);
                    std::fs::write(&file, &bytes).unwrap();
                }
                2 => {
                    bytes.truncate(rng.below(bytes.len() + 1));
                    std::fs::write(&file, &bytes).unwrap();
                }
                3 => std::fs::remove_file(&file).unwrap(),
                4 => {
                    bytes.extend((0..1 + rng.below(64)).map(|_| rng.next() as u8));
                    std::fs::write(&file, &bytes).unwrap();
                }
                5 if !bytes.is_empty() => {
                    let at = rng.below(bytes.len());
                    let end = (at + 1 + rng.below(512)).min(bytes.len());
                    bytes[at..end].fill(0);
                    std::fs::write(&file, &bytes).unwrap();
                }
                _ => {
                    // What a writer that died leaves: a partial import, a temporary
                    // manifest, a stored file no catalog names. Harmless.
                    let stray = match rng.below(3) {
                        0 => path.join("segments/import-999999-0.partial"),
                        1 => path.join("MANIFEST.tmp"),
                        _ => path.join("stored/0-1-7.bin"),
                    };
                    let junk: Vec<u8> = (0..rng.below(4096)).map(|_| rng.next() as u8).collect();
                    std::fs::write(stray, junk).unwrap();
                    continue;
                }
            }
            if counts {
                damaged.push(name);
            }
        }
        let seen = observe_storage(&path);
        match &seen {
            Ok(text) if text == expected => {}
            Ok(_) => {
                return Err(format!(
                    "damage to {damaged:?} changed an answer without an error"
                ))
            }
            Err(
                e @ (Error::Corrupt(_)
                | Error::Io { .. }
                | Error::Storage(_)
                | Error::Database { .. }),
            ) => {
                let message = e.to_string();
                if !damaged.iter().any(|d| message.contains(d.as_str())) {
                    return Err(format!(
                        "damage to {damaged:?}: the error names none of them: {message}"
                    ));
                }
            }
            Err(e) => {
                return Err(format!(
                    "damage to {damaged:?}: an error of another kind: {e:?}"
                ))
            }
        }
        match Database::check(&path, false) {
            Ok(report) if seen.is_err() && report.sound() => {
                return Err(format!(
                    "damage to {damaged:?} fails a read ({}) but check calls the database sound",
                    seen.err().map(|e| e.to_string()).unwrap_or_default()
                ))
            }
            _ => {}
        }
        let _ = Database::check(&path, true);
        let _ = observe_storage(&path);
        Ok(())
    });
}

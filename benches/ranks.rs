//! Analyses at many ranks: the same number of events as 16, 1,024, 4,096 and 16,384 ranks, and
//! the time of each analysis statement a user runs first on a trace.
//!
//! Two traces at each rank count, each imported once into a fresh database under `target/`
//! (not committed): a generated `stencil2d` (imported through the library), and an OTF2 archive
//! of the same shape written by the official OTF2 library (`benches/otf2_gen.py`, the `otf2`
//! PyPI package; skipped with a message when it is missing; archives are cached under
//! `target/tmp/bench-data/`).
//!
//! Each statement runs once, on a fresh session, as a user's first query does (the analyses
//! store their result; a second run would read it back): `SELECT COMMUNICATION PATTERNS`,
//! `SELECT PHASES`, `SELECT GLOBAL MODEL`, `SELECT TOPOLOGY` and `SELECT STATISTICS FOR ALL
//! PROCESSES`. Baseline, in the same run: the statement's time on the 16-rank trace of the same
//! kind; the ratio `x 16-rk` is this time over that one (the goal is at most 2). Reading every
//! operation (`SELECT COUNT(*) FROM OPERATIONS WHERE DURATION >= 0`, which decodes every row)
//! is printed beside them as the floor any analysis of the stored trace pays.
//!
//! `cargo bench --bench ranks`; `MTFDB_BENCH_EVENTS=4000000` picks another number of events
//! (2M events by default) and `MTFDB_BENCH_RANKS=16,4096` other rank counts (the first is the
//! baseline).

mod common;

use std::path::{Path, PathBuf};
use std::time::Instant;

use mtfdb::gen::{iterations_for_events, GenConfig, Scenario};
use mtfdb::query::Session;
use mtfdb::Database;

/// The statements timed, with the short names of the table's columns.
const STATEMENTS: &[(&str, &str)] = &[
    (
        "read",
        "SELECT COUNT(*) FROM OPERATIONS WHERE DURATION >= 0",
    ),
    ("patterns", "SELECT COMMUNICATION PATTERNS"),
    ("phases", "SELECT PHASES"),
    ("model", "SELECT GLOBAL MODEL"),
    ("topology", "SELECT TOPOLOGY"),
    ("stats", "SELECT STATISTICS FOR ALL PROCESSES"),
];

/// One trace's times, in the order of `STATEMENTS`.
struct Row {
    ranks: u32,
    operations: u64,
    secs: Vec<f64>,
}

/// Runs every statement once on a fresh session over `db`'s trace `name`.
fn time_statements(db_dir: &Path, name: &str, ranks: u32) -> Row {
    // One open database at a time: this one is closed at the end of the statement, and each
    // session opens its own.
    let operations = Database::open(db_dir)
        .unwrap()
        .trace(name)
        .unwrap()
        .summary()
        .operations;
    let mut secs = Vec::new();
    for (_, statement) in STATEMENTS {
        let mut session = Session::new(Database::open(db_dir).unwrap());
        session.run(&format!("USE TRACE {name}")).unwrap();
        let started = Instant::now();
        let result = session
            .run(statement)
            .unwrap_or_else(|e| panic!("{statement} at {ranks} ranks: {e}"));
        secs.push(started.elapsed().as_secs_f64());
        assert!(!result.is_empty(), "{statement} at {ranks} ranks: no rows");
    }
    Row {
        ranks,
        operations,
        secs,
    }
}

/// Writes (or reuses) an OTF2 archive of `ranks` ranks and about `events` events; `None`,
/// having said why, when the generator cannot run.
fn otf2_archive(data: &Path, ranks: u32, events: u64) -> Option<PathBuf> {
    let dir = data.join(format!("ranks-otf2-{events}-{ranks}"));
    match common::otf2_archive(&dir, u64::from(ranks), events) {
        Ok(_) => Some(dir.join("traces.otf2")),
        Err(why) => {
            println!("skipped the OTF2 traces (needs python3 and the otf2 package: pip install otf2): {why}");
            None
        }
    }
}

fn print_table(kind: &str, rows: &[Row]) {
    println!(
        "\n{kind}: seconds of each statement's first run, and its ratio to the first rank count's"
    );
    print!("{:>6} {:>10}", "ranks", "ops");
    for (name, _) in STATEMENTS {
        print!(" {name:>9} {:>7}", "x 16-rk");
    }
    println!();
    let Some(base) = rows.first() else { return };
    for r in rows {
        print!("{:>6} {:>10}", r.ranks, r.operations);
        for (s, b) in r.secs.iter().zip(&base.secs) {
            print!(" {s:>9.3} {:>6.2}x", s / b.max(1e-9));
        }
        println!();
    }
}

fn main() {
    let data = common::data_dir();
    let operations = common::env_list("MTFDB_BENCH_EVENTS", &[2_000_000u64])[0];
    let ranks: Vec<u32> = common::env_list("MTFDB_BENCH_RANKS", &[16, 1_024, 4_096, 16_384]);
    println!(
        "analyses at many ranks: stencil2d of about {operations} events, on {} cores; one run each",
        common::cores()
    );

    let mut generated = Vec::new();
    for &n in &ranks {
        let iterations = iterations_for_events(Scenario::Stencil2d, n, operations)
            .unwrap()
            .max(2);
        let dir = data.join(format!("ranks-stencil-{n}"));
        let config = GenConfig::new(Scenario::Stencil2d, n, iterations);
        drop(common::generated_db(&dir, "stencil", &config));
        generated.push(time_statements(&dir, "stencil", n));
        let _ = std::fs::remove_dir_all(&dir);
    }
    print_table("generated stencil2d", &generated);

    let mut otf2 = Vec::new();
    for &n in &ranks {
        let Some(anchor) = otf2_archive(&data, n, operations) else {
            break;
        };
        let dir = data.join(format!("ranks-otf2-db-{n}"));
        let _ = std::fs::remove_dir_all(&dir);
        Database::open(&dir)
            .unwrap()
            .import(&anchor, Some("otf2"))
            .unwrap();
        otf2.push(time_statements(&dir, "otf2", n));
        let _ = std::fs::remove_dir_all(&dir);
    }
    if !otf2.is_empty() {
        print_table("OTF2 archive (official writer)", &otf2);
    }
}

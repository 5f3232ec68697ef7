//! The Parquet export against the import of the same trace.
//!
//! A generated `stencil2d` of about 50M events (`MTFDB_BENCH_EVENTS` picks another size,
//! `MTFDB_BENCH_RANKS` another rank count, 16 by default) is written as MTF text under
//! `target/` (not committed). In the same run, each as a child `mtfdb` process whose peak
//! resident set `wait4` reports:
//!
//! 1. baseline: `mtfdb import` of the MTF text;
//! 2. `mtfdb export --format parquet` of the imported trace;
//! 3. `mtfdb import` of that Parquet export (the round trip's other half).
//!
//! Rates are events per second (an event is an operation, a routine enter or a leave), and
//! the sizes bytes per event: the Parquet folder beside the database.
//!
//! `cargo bench --bench export`.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use mtfdb::gen::{iterations_for_events, Scenario};

fn mtfdb(db: &Path, args: &[&str]) -> common::ChildRun {
    let run = common::run_child(
        Command::new(env!("CARGO_BIN_EXE_mtfdb"))
            .arg("--db")
            .arg(db)
            .args(args)
            .stdout(Stdio::null()),
    );
    assert!(run.success, "mtfdb {args:?} failed");
    run
}

fn main() {
    let events = common::env_list("MTFDB_BENCH_EVENTS", &[50_000_000u64])[0];
    let ranks = common::env_list("MTFDB_BENCH_RANKS", &[16u32])[0];
    let iterations = iterations_for_events(Scenario::Stencil2d, ranks, events)
        .unwrap()
        .max(2);
    let dir = common::data_dir().join(format!("export-{ranks}-{events}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (mtf, db, out) = (dir.join("stencil.mtf"), dir.join("db"), dir.join("parquet"));
    let path = |p: &Path| p.to_str().unwrap().to_string();
    let gen = mtfdb(
        &db,
        &[
            "gen",
            "stencil2d",
            "--ranks",
            &ranks.to_string(),
            "--iterations",
            &iterations.to_string(),
            "-o",
            &path(&mtf),
        ],
    );
    println!(
        "Parquet export of a stencil2d of {ranks} ranks, {iterations} iterations (asked: {events} events), {} cores; MTF text written in {:.1} s",
        common::cores(),
        gen.secs
    );
    let import = mtfdb(&db, &["import", &path(&mtf), "--name", "stencil"]);
    let (operations, calls, db_bytes) = {
        let database = mtfdb::Database::open_existing(&db).unwrap();
        let t = database.trace("stencil").unwrap();
        let s = t.summary();
        (
            s.operations,
            s.routine_calls,
            database.size_on_disk().unwrap(),
        )
    };
    let events = operations + 2 * calls;
    let export = mtfdb(
        &db,
        &[
            "export",
            "stencil",
            "--format",
            "parquet",
            "-o",
            &path(&out),
        ],
    );
    let parquet_bytes = common::dir_size(&out);
    let back = mtfdb(&db, &["import", &path(&out), "--name", "back"]);
    {
        let database = mtfdb::Database::open_existing(&db).unwrap();
        let (a, b) = (
            database.trace("stencil").unwrap().summary().clone(),
            database.trace("back").unwrap().summary().clone(),
        );
        assert_eq!(
            (a.operations, a.messages, a.routine_calls),
            (b.operations, b.messages, b.routine_calls)
        );
    }
    println!(
        "{} operations, {} routine calls: {events} events",
        operations, calls
    );
    println!(
        "{:<28} {:>9} {:>13} {:>10} {:>10}",
        "", "seconds", "events/s", "x import", "peak MiB"
    );
    for (what, run) in [
        ("import of the MTF text", import),
        ("export to Parquet", export),
        ("import of the Parquet", back),
    ] {
        println!(
            "{:<28} {:>9.2} {:>13.0} {:>9.2}x {:>10.0}",
            what,
            run.secs,
            events as f64 / run.secs,
            import.secs / run.secs,
            run.peak_kib as f64 / 1024.0
        );
    }
    println!(
        "bytes per event: Parquet {:.2} ({} B), database {:.2} ({} B)",
        parquet_bytes as f64 / events as f64,
        parquet_bytes,
        db_bytes as f64 / events as f64,
        db_bytes
    );
    let _ = std::fs::remove_dir_all(&dir);
}

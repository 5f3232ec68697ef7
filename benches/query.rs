//! Query benchmark: a generated `stencil2d` trace of 50M events (16 ranks; built by the bench,
//! not committed), four queries timed in mtfdb and, as the baseline measured in the same run,
//! in DuckDB over the same messages and collective operations exported to CSV and converted to
//! Parquet (`benches/duckdb_baseline.py`; needs `pip install duckdb`, which the bench tries
//! itself when the package is missing).
//!
//! Queries: a selective one (two processes, a time window of 1% of the run, a size predicate),
//! `FAN_IN FOR ALL PROCESSES`, the communication matrix, and a full-scan aggregate
//! (`SUM(SIZE)` per tag over all messages). Each figure is the best of several warm runs.
//!
//! `cargo bench --bench query`; `MTFDB_BENCH_QUERY_EVENTS=5000000` for a smaller trace.

mod common;

use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use mtfdb::gen::{iterations_for_events, GenConfig, Scenario};
use mtfdb::query::Session;
use mtfdb::Database;

const RUNS: u32 = 7;

fn export(db: &Database, dir: &Path) -> (u64, u64) {
    let trace = db.trace("bench").unwrap();
    let mut m = BufWriter::with_capacity(
        1 << 20,
        std::fs::File::create(dir.join("messages.csv")).unwrap(),
    );
    writeln!(m, "sender,receiver,comm,tag,size,send_time,recv_time").unwrap();
    let mut messages = 0;
    for chunk in 0..trace.message_chunk_count() {
        for x in trace.message_chunk(chunk).unwrap() {
            writeln!(
                m,
                "{},{},{},{},{},{},{}",
                x.sender, x.receiver, x.comm, x.tag, x.bytes, x.send_time, x.recv_time
            )
            .unwrap();
            messages += 1;
        }
    }
    m.flush().unwrap();
    let mut c = BufWriter::with_capacity(
        1 << 20,
        std::fs::File::create(dir.join("collectives.csv")).unwrap(),
    );
    writeln!(c, "rank,send_bytes,recv_bytes").unwrap();
    let mut collectives = 0;
    for info in trace.op_chunks() {
        for (_, op) in trace.chunk_operations(info).unwrap() {
            if op.kind.is_collective() {
                writeln!(c, "{},{},{}", op.rank, op.send_bytes, op.recv_bytes).unwrap();
                collectives += 1;
            }
        }
    }
    c.flush().unwrap();
    (messages, collectives)
}

fn time_query(session: &mut Session, q: &str) -> (f64, usize) {
    let mut best = f64::INFINITY;
    let mut rows = 0;
    for _ in 0..RUNS {
        let t = Instant::now();
        let r = session.run(q).unwrap();
        best = best.min(t.elapsed().as_secs_f64() * 1e3);
        rows = r.len();
    }
    (best, rows)
}

fn duckdb(dir: &Path, args: &[String]) -> serde_json::Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/duckdb_baseline.py");
    let run = || {
        let out = Command::new("python3")
            .arg(script)
            .arg(dir)
            .args(args)
            .output()
            .expect("python3 runs");
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap_or_else(
            |_| serde_json::json!({"error": String::from_utf8_lossy(&out.stderr).to_string()}),
        )
    };
    let mut v = run();
    if v.get("error").is_some() {
        eprintln!("installing the duckdb Python package for the baseline (pip install duckdb)…");
        let _ = Command::new("python3")
            .args(["-m", "pip", "install", "--quiet", "duckdb"])
            .status();
        v = run();
    }
    v
}

fn main() {
    let events: u64 = std::env::var("MTFDB_BENCH_QUERY_EVENTS")
        .ok()
        .map(|v| v.parse().expect("a count"))
        .unwrap_or(50_000_000);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("query-bench");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config = GenConfig::new(
        Scenario::Stencil2d,
        16,
        iterations_for_events(Scenario::Stencil2d, 16, events).unwrap(),
    );
    let started = Instant::now();
    let (db, truth) = common::generated_db(&dir.join("db"), "bench", &config);
    println!(
        "query benchmark: stencil2d, 16 ranks, {} events, imported in {:.1} s",
        truth.events,
        started.elapsed().as_secs_f64()
    );
    let (messages, collectives) = export(&db, &dir);
    println!("exported {messages} messages and {collectives} collective operations for DuckDB");

    let span = db.trace("bench").unwrap().summary().last_time.unwrap();
    let (t1, t2) = (span / 2, span / 2 + span / 100);
    // Ranks 5 and 9 are north-south neighbours on the 4x4 grid: their messages are 80 KiB.
    let (a, b, size) = (5u32, 9u32, 65_536u64);
    let mut session = Session::new(db);
    let queries = [
        ("selective", format!("SELECT ALL MESSAGES BETWEEN PROCESS({a},{b}) BETWEEN TIME {t1} ns AND {t2} ns WHERE SIZE > 64 KiB"), "< 5 ms, faster than DuckDB"),
        ("fan_in", "SELECT FAN_IN FOR ALL PROCESSES".to_string(), "< 100 ms, faster than DuckDB"),
        ("matrix", "SELECT COMMUNICATION MATRIX OF BYTES".to_string(), "< 100 ms, faster than DuckDB"),
        ("full_scan", "SELECT SUM(SIZE) FROM MESSAGES GROUP BY TAG".to_string(), "within 2x of DuckDB"),
    ];
    let mut ours = Vec::new();
    for (name, q, _) in &queries {
        ours.push((name, time_query(&mut session, q)));
    }
    let base = duckdb(
        &dir,
        &[
            a.to_string(),
            b.to_string(),
            t1.to_string(),
            t2.to_string(),
            size.to_string(),
            RUNS.to_string(),
        ],
    );
    println!(
        "{:<10} {:>10} {:>10} {:>16} {:>8} {:>8}  target",
        "query", "mtfdb ms", "duckdb ms", "duckdb / mtfdb", "rows", "duckdb"
    );
    for ((name, (ms, rows)), (_, q, target)) in ours.iter().zip(&queries) {
        let theirs = base.get(*name).and_then(|v| v.as_f64());
        let their_rows = base["rows"].get(*name).and_then(|v| v.as_u64());
        println!(
            "{:<10} {:>10.3} {:>10} {:>16} {:>8} {:>8}  {target}",
            name,
            ms,
            theirs.map_or("n/a".into(), |t| format!("{t:.3}")),
            theirs.map_or("n/a".into(), |t| format!("{:.2}x", t / ms)),
            rows,
            their_rows.map_or("n/a".into(), |r| r.to_string()),
        );
        let _ = q;
    }
    if let Some(e) = base.get("error") {
        println!("DuckDB baseline unavailable: {e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

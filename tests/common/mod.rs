//! Helpers shared by the integration tests.

// Each test file is its own crate and uses only some of these.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use mtfdb::gen::{generate, GenConfig, GroundTruth};
use mtfdb::model::Anomaly;
use mtfdb::{Database, Error, Trace};

/// Imports the trace `config` generates as `name`, straight from the generator, and returns
/// what the generator says the trace holds.
pub fn import_generated(db: &Database, config: &GenConfig, name: &str) -> GroundTruth {
    let mut truth = None;
    db.import_events(name, |sink| {
        truth = Some(generate(config, sink)?);
        Ok(())
    })
    .unwrap();
    truth.unwrap()
}

/// The bundled example trace (16 ranks, 1,440 messages).
pub const EXAMPLE_TRACE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/examples/traces/stencil2d-16.mtf"
);

/// Bytes a command printed, as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// What a command that must succeed printed on its standard output; its output and errors
/// in the failure message otherwise.
pub fn succeeded(o: std::process::Output) -> String {
    assert!(
        o.status.success(),
        "mtfdb failed:\n{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    text(&o.stdout)
}

/// Runs the `mtfdb` binary on the database `db` (whatever `MTFDB_DB` says) and returns what it
/// did.
pub fn mtfdb_output(db: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_mtfdb"))
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("MTFDB_DB")
        .output()
        .expect("mtfdb runs")
}

/// `mtfdb --db DB repl` with `script` piped on its standard input and the extra environment
/// `env`, and what it did.
pub fn mtfdb_repl(db: &Path, script: &str, env: &[(&str, &str)]) -> std::process::Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mtfdb"))
        .arg("--db")
        .arg(db)
        .arg("repl")
        .env_remove("MTFDB_DB")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mtfdb runs");
    let written = child.stdin.take().unwrap().write_all(script.as_bytes());
    let output = child.wait_with_output().expect("mtfdb ends");
    written.expect("the script is written");
    output
}

/// A database in a fresh temporary directory (kept while the `TempDir` lives).
pub fn temp_db() -> (tempfile::TempDir, Database) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    (dir, db)
}

/// A fresh database holding the trace `config` generates, as `t`.
pub fn generated_db(config: &GenConfig) -> (tempfile::TempDir, Database) {
    let (dir, db) = temp_db();
    import_generated(&db, config, "t");
    (dir, db)
}

/// Imports `damaged` into a database that already holds the trace at `earlier`, expects an
/// input or I/O error whose message contains each of `needles`, checks that the database
/// still holds exactly the earlier trace, and returns the message.
pub fn rejected_import(earlier: &Path, damaged: &Path, needles: &[&str]) -> String {
    let (_dir, db) = temp_db();
    db.import(earlier, Some("earlier")).unwrap();
    let before = db.traces().unwrap()[0].summary.clone();
    let err = db.import(damaged, Some("damaged")).unwrap_err();
    let message = err.to_string();
    for needle in needles {
        assert!(
            message.contains(needle),
            "{message:?} should mention {needle:?}"
        );
    }
    assert!(
        matches!(err, Error::Input(_) | Error::Io { .. }),
        "a user's input error, not {err:?}"
    );
    assert_eq!(db.trace_names().unwrap(), vec!["earlier".to_string()]);
    assert_eq!(db.traces().unwrap()[0].summary, before);
    message
}

/// (bytes sent, bytes received) of every receive-length mismatch the trace reports.
pub fn length_mismatches(trace: &Trace) -> Vec<(u64, u64)> {
    trace
        .anomalies()
        .unwrap()
        .into_iter()
        .filter_map(|a| match a {
            Anomaly::LengthMismatch { sent, received, .. } => Some((sent, received)),
            _ => None,
        })
        .collect()
}

pub mod contents;
pub mod oracle;
pub mod otf2_print;
pub mod reported;

/// `GenConfig::new(scenario, 16, 12)` with rank 5 computing 10 ms longer in iteration 6
/// (`gen --delay 5:6:10ms`), the delayed run the wait-state and critical-path tests compare.
pub fn delayed_run(scenario: mtfdb::gen::Scenario) -> GenConfig {
    GenConfig {
        delays: vec![mtfdb::gen::Delay {
            rank: 5,
            iteration: 6,
            duration: 10_000_000,
        }],
        ..GenConfig::new(scenario, 16, 12)
    }
}

/// Every real trace in `../shared/traces` (OTF2 anchors, OTF v1, DUMPI metadata and Paraver
/// files), sorted; `None`, having said so, when the traces are not beside this checkout.
pub fn real_traces() -> Option<Vec<PathBuf>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/traces");
    if !root.is_dir() {
        eprintln!("skipped: {} is absent", root.display());
        return None;
    }
    let mut files = Vec::new();
    let mut stack = vec![root];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if path.is_dir() {
                stack.push(path);
            } else if name == "traces.otf2"
                || name.ends_with(".otf")
                || name.ends_with(".prv")
                || name.ends_with(".meta")
            {
                files.push(path);
            }
        }
    }
    files.sort();
    assert!(files.len() >= 13, "the shared traces: {files:?}");
    Some(files)
}

/// A database holding, as `t`, a hand-made MTF text trace of `ranks` ranks on one node, with
/// the world communicator 0, then `declarations` (more communicators, routines) and `events`.
pub fn hand_made_db(ranks: u32, declarations: &str, events: &str) -> (tempfile::TempDir, Database) {
    let (dir, db) = temp_db();
    let mut text = String::from("MTF 1\nprocessor 0 node0\n");
    for r in 0..ranks {
        text.push_str(&format!("process {r} P{r} on 0\n"));
    }
    text.push_str(&format!("communicator 0 world 0-{}\n", ranks - 1));
    text.push_str(declarations);
    text.push_str(events);
    let path = dir.path().join("t.mtf");
    std::fs::write(&path, text).unwrap();
    db.import(&path, Some("t")).unwrap();
    (dir, db)
}

/// Whether python3 has the `duckdb` package (`.ci/run` installs it); says so when it has not.
pub fn duckdb_available() -> bool {
    let ok = std::process::Command::new("python3")
        .args(["-c", "import duckdb"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: python3 with duckdb is not installed (.ci/run installs it)");
    }
    ok
}

/// Runs the Python `script` with the `duckdb` package and returns what it prints, trimmed;
/// `None`, having said so, when that is not installed.
pub fn duckdb_script(script: &str) -> Option<String> {
    if !duckdb_available() {
        return None;
    }
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Runs every SQL text of `queries` in DuckDB (the `duckdb` Python package, installed by
/// `.ci/run`) over the Parquet exports under `root` (one folder per trace), with a view per
/// exported table, and returns each one's rows (every value as JSON: integers as strings, to
/// keep 128 bits) or its error; `None`, having said so, without python3's duckdb.
pub fn duckdb(
    root: &Path,
    queries: &[String],
) -> Option<Vec<Result<Vec<Vec<serde_json::Value>>, String>>> {
    let script = r#"
import json, sys
import duckdb
root, path = sys.argv[1], sys.argv[2]
con = duckdb.connect()
for table in ["operations", "messages", "communicators", "processes", "collectives", "requests", "routine_calls", "anomalies"]:
    try:
        con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{root}/*/{table}/**/*.parquet', hive_partitioning = true, union_by_name = true)")
    except duckdb.IOException:
        pass  # no trace exported a row of it: a query of it fails, naming it
out = []
for sql in json.load(open(path)):
    try:
        rows = con.execute(sql).fetchall()
        out.append({"rows": [[str(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in r] for r in rows]})
    except Exception as e:
        out.append({"error": str(e)})
print(json.dumps(out))
"#;
    if !duckdb_available() {
        return None;
    }
    let file = root.join("queries.json");
    std::fs::write(&file, serde_json::to_string(queries).unwrap()).unwrap();
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(root)
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "duckdb: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answers: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    Some(
        answers
            .into_iter()
            .map(|a| match a.get("rows") {
                Some(rows) => Ok(rows
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| r.as_array().unwrap().clone())
                    .collect()),
                None => Err(a["error"].as_str().unwrap_or("?").to_string()),
            })
            .collect(),
    )
}

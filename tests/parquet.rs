//! Parquet export and import (`mtfdb export --format parquet`, `mtfdb import DIR`): the
//! files' schemas are the documented contract (docs/parquet.md); exporting and importing
//! again gives the same trace (every operation, routine call, message, link, collective and
//! anomaly, ids aside), the same answers and the same `info`, for every generated scenario,
//! a hand-built trace with every field and anomaly class, and every real trace; DuckDB reads
//! the files and counts what the trace holds; and what is wrong is refused with its path.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field};
use mtfdb::export::parquet::{export_parquet, TABLES};
use mtfdb::gen::{GenConfig, Scenario};
use mtfdb::ingest::EventSink;
use mtfdb::model::TraceHeader;
use mtfdb::query::Session;
use mtfdb::Database;

use common::contents::{answers, contents, info_lines, mtfdb, rich_trace};
use common::import_generated;

// ---------------------------------------------------------------------------------------
// Everything a trace holds, ids aside (as tests/export.rs compares it).
// Everything a trace holds, with ids replaced by what does not depend on the import's order:
// operations by position (rank, thread, index), names instead of string ids.

// ---------------------------------------------------------------------------------------
// The schema: the contract the SQL translation (EXPLAIN SQL) and docs/parquet.md rely on.

/// A table's columns: name, type, nullable.
type Columns = Vec<(&'static str, DataType, bool)>;

fn list(t: DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(t, true)))
}

/// Every table's columns, with their Arrow types and whether they may be null, as
/// docs/parquet.md lists them (DuckDB: UBIGINT = UInt64, UINTEGER = UInt32, INTEGER = Int32,
/// USMALLINT = UInt16, UTINYINT = UInt8, VARCHAR = Utf8, LIST = List).
fn contract() -> Vec<(&'static str, Columns)> {
    use DataType::{Boolean, Int32, UInt16, UInt32, UInt64, UInt8, Utf8};
    vec![
        (
            "operations",
            vec![
                ("id", UInt64, false),
                ("rank", UInt32, false),
                ("thread", UInt32, false),
                ("operation", Utf8, false),
                ("is_send", Boolean, false),
                ("is_receive", Boolean, false),
                ("is_collective", Boolean, false),
                ("start_ns", UInt64, false),
                ("end_ns", UInt64, false),
                ("duration_ns", UInt64, false),
                ("comm", UInt32, true),
                ("dest", UInt32, true),
                ("source", UInt32, true),
                ("send_tag", Int32, true),
                ("recv_tag", Int32, true),
                ("bytes_sent", UInt64, false),
                ("bytes_received", UInt64, false),
                ("root", UInt32, true),
                ("datatype", Utf8, true),
                ("request", UInt64, true),
                ("completes", list(UInt64), false),
                ("flags", UInt8, false),
                ("depth", UInt16, false),
            ],
        ),
        (
            "messages",
            vec![
                ("id", UInt64, false),
                ("sender", UInt32, false),
                ("receiver", UInt32, false),
                ("comm", UInt32, false),
                ("tag", Int32, false),
                ("size", UInt64, false),
                ("send_time_ns", UInt64, false),
                ("recv_time_ns", UInt64, false),
                ("send_op", UInt64, false),
                ("recv_op", UInt64, false),
            ],
        ),
        (
            "collectives",
            vec![
                ("instance", UInt64, false),
                ("operation", Utf8, false),
                ("comm", UInt32, false),
                ("root", UInt32, true),
                ("start_ns", UInt64, false),
                ("end_ns", UInt64, false),
                ("send_bytes", UInt64, false),
                ("recv_bytes", UInt64, false),
                ("members", list(UInt64), false),
            ],
        ),
        (
            "requests",
            vec![
                ("request_op", UInt64, false),
                ("completion_op", UInt64, false),
            ],
        ),
        (
            "routine_calls",
            vec![
                ("rank", UInt32, false),
                ("thread", UInt32, false),
                ("routine", Utf8, false),
                ("depth", UInt16, false),
                ("start_ns", UInt64, false),
                ("end_ns", UInt64, false),
            ],
        ),
        (
            "communicators",
            vec![
                ("id", UInt32, false),
                ("name", Utf8, false),
                ("members", list(UInt32), false),
            ],
        ),
        (
            "processes",
            vec![
                ("rank", UInt32, false),
                ("name", Utf8, false),
                ("processor", Utf8, true),
            ],
        ),
        (
            "anomalies",
            vec![("kind", Utf8, false), ("detail", Utf8, false)],
        ),
        (
            "trace",
            vec![
                ("name", Utf8, false),
                ("format", Utf8, false),
                ("source", Utf8, false),
                ("header", Utf8, false),
            ],
        ),
    ]
}

/// Every `.parquet` file under `dir`, sorted.
fn parquet_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn file_schema(path: &Path) -> arrow::datatypes::SchemaRef {
    let file = std::fs::File::open(path).unwrap();
    parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .schema()
        .clone()
}

#[test]
fn every_table_has_the_documented_columns_and_types() {
    let (dir, db) = common::temp_db();
    import_generated(&db, &GenConfig::new(Scenario::Cg, 8, 3), "cg");
    db.import_events("rich", |sink| rich_trace(sink)).unwrap();
    let out = dir.path().join("out");
    for name in ["cg", "rich"] {
        export_parquet(&db.trace(name).unwrap(), &out).unwrap();
    }
    let contract = contract();
    assert_eq!(
        contract.iter().map(|(t, _)| *t).collect::<Vec<_>>(),
        TABLES.to_vec()
    );
    for (table, columns) in &contract {
        for name in ["cg", "rich"] {
            let base = out.join(table).join(format!("trace={name}"));
            let files = parquet_files(&base);
            assert!(!files.is_empty(), "{table} of {name}: no file");
            for file in files {
                // The partition columns live in the path only.
                let rel = file
                    .strip_prefix(&base)
                    .unwrap()
                    .to_string_lossy()
                    .to_string();
                if mtfdb::export::parquet::is_rank_partitioned(table) {
                    assert!(
                        rel.starts_with("rank_block=") && rel.ends_with("/part-0.parquet"),
                        "{}",
                        file.display()
                    );
                } else {
                    assert_eq!(rel, "part-0.parquet");
                }
                let schema = file_schema(&file);
                let got: Vec<(String, DataType, bool)> = schema
                    .fields()
                    .iter()
                    .map(|f| (f.name().clone(), f.data_type().clone(), f.is_nullable()))
                    .collect();
                let want: Vec<(String, DataType, bool)> = columns
                    .iter()
                    .map(|(n, t, null)| (n.to_string(), t.clone(), *null))
                    .collect();
                assert_eq!(got, want, "{}", file.display());
            }
        }
    }
    // The library's own description of the schema is the same contract.
    for (table, columns) in &contract {
        let s = mtfdb::export::parquet::schema(table).unwrap();
        assert_eq!(s.fields().len(), columns.len(), "{table}");
    }
}

// ---------------------------------------------------------------------------------------
// Round trips

/// Exports trace `name` of the database at `db` to Parquet under `out`, imports the export
/// as a new trace, and checks that both are the same trace, answer the same, and print the
/// same `info`.
fn round_trip(db: &Path, name: &str, out: &Path) {
    let copy = format!("{name}-pq");
    {
        let database = Database::open(db).unwrap();
        let original = database.trace(name).unwrap();
        let stored = original.stored_bytes().unwrap();
        let stats = export_parquet(&original, out).unwrap();
        assert_eq!(stats.operations, original.summary().operations, "{name}");
        assert_eq!(stats.messages, original.summary().messages, "{name}");
        assert_eq!(
            original.stored_bytes().unwrap(),
            stored,
            "export wrote to the store"
        );
        // Import by the table folder, as a user pointing at one trace of many would.
        let folder = out.join("operations").join(format!("trace={name}"));
        database
            .import(&folder, Some(&copy))
            .unwrap_or_else(|e| panic!("{name} from parquet: {e}"));
        let imported = database.trace(&copy).unwrap();
        assert_eq!(contents(&imported), contents(&original), "{name}");
        assert_eq!(imported.info().source, original.info().source);
        assert_eq!(imported.info().format, original.info().format);
    }
    let mut session = Session::new(Database::open(db).unwrap());
    assert_eq!(
        answers(&mut session, &copy),
        answers(&mut session, name),
        "{name}"
    );
    drop(session);
    let (a, b) = (info_lines(db, &copy), info_lines(db, name));
    assert!(a == b, "{name}: info differs:\n{a:#?}\n{b:#?}");
}

#[test]
fn generated_scenarios_come_back_the_same_from_parquet() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let out = dir.path().join("out");
    for (i, scenario) in Scenario::ALL.into_iter().enumerate() {
        let mut config = GenConfig::new(scenario, 16, 5);
        config.shuffle_ranks = i % 2 == 1;
        let name = scenario.to_string();
        {
            let database = Database::open(&db).unwrap();
            import_generated(&database, &config, &name);
        }
        round_trip(&db, &name, &out);
    }
    // Several traces side by side in one folder: the folder alone is ambiguous.
    let database = Database::open(&db).unwrap();
    let err = database.import(&out, None).unwrap_err().to_string();
    assert!(
        err.contains("several traces") && err.contains(&out.display().to_string()),
        "{err}"
    );
    // Named, it is not.
    let info = database.import(&out, Some("ring")).unwrap_err().to_string();
    assert!(info.contains("already exists"), "{info}");
}

#[test]
fn ranks_past_one_block_are_partitioned_and_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let out = dir.path().join("out");
    {
        let database = Database::open(&db).unwrap();
        import_generated(&database, &GenConfig::new(Scenario::Ring, 2100, 2), "wide");
    }
    round_trip(&db, "wide", &out);
    let blocks: Vec<String> = std::fs::read_dir(out.join("operations/trace=wide"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(blocks, ["rank_block=0", "rank_block=1", "rank_block=2"]);
}

#[test]
fn every_field_name_thread_location_and_anomaly_comes_back_from_parquet() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    {
        let database = Database::open(&db).unwrap();
        database
            .import_events("rich", |sink| rich_trace(sink))
            .unwrap();
    }
    round_trip(&db, "rich", &dir.path().join("out"));
}

#[test]
fn every_real_trace_comes_back_the_same_from_parquet() {
    let Some(files) = common::real_traces() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let out = dir.path().join("out");
    for (i, file) in files.iter().enumerate() {
        let name = format!("real{i}");
        println!("{} as {name}", file.display());
        Database::open(&db)
            .unwrap()
            .import(file, Some(&name))
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        round_trip(&db, &name, &out);
    }
}

// ---------------------------------------------------------------------------------------
// An independent reader: DuckDB

#[test]
fn duckdb_reads_the_export_and_counts_what_the_trace_holds() {
    let (dir, db) = common::temp_db();
    let out = dir.path().join("out");
    let mut expected = Vec::new();
    for (i, scenario) in [Scenario::Stencil2d, Scenario::Alltoall, Scenario::Lu]
        .into_iter()
        .enumerate()
    {
        let name = format!("t{i}");
        import_generated(&db, &GenConfig::new(scenario, 12, 4), &name);
        let t = db.trace(&name).unwrap();
        export_parquet(&t, &out).unwrap();
        let s = t.summary();
        expected.push(format!(
            "{name} {} {} {} {} {}",
            s.operations, s.messages, s.message_bytes, s.collective_instances, s.routine_calls
        ));
    }
    let root = out.display().to_string();
    let script = format!(
        r#"
import duckdb
root = {root:?}
c = duckdb.connect()
def q(sql):
    return dict(c.sql(sql).fetchall())
ops = q(f"select trace, count(*) from read_parquet('{{root}}/operations/*/*/*.parquet', hive_partitioning=true) group by trace")
msgs = q(f"select trace, count(*) from read_parquet('{{root}}/messages/*/*/*.parquet', hive_partitioning=true) group by trace")
size = q(f"select trace, sum(size) from read_parquet('{{root}}/messages/*/*/*.parquet', hive_partitioning=true) group by trace")
coll = q(f"select trace, count(*) from read_parquet('{{root}}/collectives/*/*/*.parquet', hive_partitioning=true) group by trace")
calls = q(f"select trace, count(*) from read_parquet('{{root}}/routine_calls/*/*/*.parquet', hive_partitioning=true) group by trace")
for t in sorted(ops):
    print(t, ops[t], msgs.get(t, 0), size.get(t, 0), coll.get(t, 0), calls.get(t, 0))
# Every message's operations are in the operations table, and join to a send and a receive.
bad = c.sql(f"""
    select count(*) from read_parquet('{{root}}/messages/*/*/*.parquet', hive_partitioning=true) m
    left join read_parquet('{{root}}/operations/*/*/*.parquet', hive_partitioning=true) s
      on s.trace = m.trace and s.id = m.send_op and s.is_send
    left join read_parquet('{{root}}/operations/*/*/*.parquet', hive_partitioning=true) r
      on r.trace = m.trace and r.id = m.recv_op and r.is_receive
    where s.id is null or r.id is null or s.rank <> m.sender or r.rank <> m.receiver""").fetchall()[0][0]
print("unjoined", bad)
"#
    );
    let Some(text) = common::duckdb_script(&script) else {
        return;
    };
    let mut want = expected.join("\n");
    want.push_str("\nunjoined 0");
    assert_eq!(text, want);
}

// ---------------------------------------------------------------------------------------
// What is wrong is refused, with the path and why, and changes nothing

#[test]
fn a_second_export_of_the_same_trace_is_refused_and_leaves_the_first() {
    let (dir, db) = common::temp_db();
    import_generated(&db, &GenConfig::new(Scenario::Ring, 4, 2), "r");
    let t = db.trace("r").unwrap();
    let out = dir.path().join("out");
    export_parquet(&t, &out).unwrap();
    let before = parquet_files(&out);
    let err = export_parquet(&t, &out).unwrap_err().to_string();
    assert!(
        err.contains("already there") && err.contains("trace=r"),
        "{err}"
    );
    assert_eq!(parquet_files(&out), before);
    // Nothing temporary is left beside the tables.
    let names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");
}

#[test]
fn an_unwritable_or_file_output_is_refused_with_its_path() {
    let (dir, db) = common::temp_db();
    import_generated(&db, &GenConfig::new(Scenario::Ring, 4, 2), "r");
    let t = db.trace("r").unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let err = export_parquet(&t, &file).unwrap_err().to_string();
    assert!(
        err.contains("a-file") && err.contains("not a directory"),
        "{err}"
    );
    let below = file.join("sub");
    let err = export_parquet(&t, &below).unwrap_err().to_string();
    assert!(err.contains("a-file"), "{err}");
}

/// Imports `path` into a fresh database and returns the error, checking that nothing was
/// imported.
fn refused(path: &Path) -> String {
    let (_dir, db) = common::temp_db();
    let err = db
        .import_as(path, Some("x"), mtfdb::SourceFormat::Parquet)
        .unwrap_err();
    assert!(db.trace_names().unwrap().is_empty());
    err.to_string()
}

#[test]
fn damaged_missing_or_foreign_files_are_refused_with_their_path() {
    let (dir, db) = common::temp_db();
    import_generated(&db, &GenConfig::new(Scenario::Stencil2d, 4, 2), "s");
    let out = dir.path().join("out");
    export_parquet(&db.trace("s").unwrap(), &out).unwrap();
    let copy = |to: &str| {
        let to = dir.path().join(to);
        let status = Command::new("cp")
            .arg("-r")
            .arg(&out)
            .arg(&to)
            .status()
            .unwrap();
        assert!(status.success());
        to
    };
    // A folder that does not exist.
    let missing = dir.path().join("nowhere");
    let err = refused(&missing);
    assert!(err.contains("nowhere") && err.contains("no such"), "{err}");
    // A folder that is not an export.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let err = refused(&empty);
    assert!(
        err.contains("empty") && err.contains("not a Parquet export"),
        "{err}"
    );
    // A damaged file: its bytes cut short.
    let cut = copy("cut");
    let ops = cut.join("operations/trace=s/rank_block=0/part-0.parquet");
    let bytes = std::fs::read(&ops).unwrap();
    std::fs::write(&ops, &bytes[..bytes.len() / 2]).unwrap();
    let err = refused(&cut);
    assert!(
        err.contains("part-0.parquet") && err.contains("not a readable Parquet file"),
        "{err}"
    );
    // Garbage in the middle of a file.
    let garbled = copy("garbled");
    let ops = garbled.join("operations/trace=s/rank_block=0/part-0.parquet");
    let mut bytes = std::fs::read(&ops).unwrap();
    let half = bytes.len() / 2;
    for b in &mut bytes[8..half] {
        *b = 0x55;
    }
    std::fs::write(&ops, &bytes).unwrap();
    let err = refused(&garbled);
    assert!(err.contains("part-0.parquet"), "{err}");
    // A file of another table where the operations should be.
    let foreign = copy("foreign");
    let ops = foreign.join("operations/trace=s/rank_block=0/part-0.parquet");
    std::fs::copy(foreign.join("requests/trace=s/part-0.parquet"), &ops).unwrap();
    let err = refused(&foreign);
    assert!(
        err.contains("part-0.parquet") && err.contains("not a file of the operations table"),
        "{err}"
    );
    // A table missing.
    let headless = copy("headless");
    std::fs::remove_dir_all(headless.join("trace/trace=s")).unwrap();
    let err = refused(&headless);
    assert!(err.contains("trace"), "{err}");
    // The command says so too, and fails.
    let (ok, _, stderr) = mtfdb(&dir.path().join("db2"), &["import", cut.to_str().unwrap()]);
    assert!(!ok && stderr.contains("part-0.parquet"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn the_commands_export_and_import_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let mtf = dir.path().join("s.mtf");
    let (ok, _, err) = mtfdb(
        &db,
        &[
            "gen",
            "stencil2d",
            "--ranks",
            "4",
            "--iterations",
            "2",
            "-o",
            mtf.to_str().unwrap(),
        ],
    );
    assert!(ok, "{err}");
    let (ok, _, err) = mtfdb(&db, &["import", mtf.to_str().unwrap()]);
    assert!(ok, "{err}");
    let out = dir.path().join("pq");
    let (ok, text, err) = mtfdb(
        &db,
        &[
            "export",
            "s",
            "--format",
            "parquet",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert!(ok, "{err}");
    assert!(
        text.contains("exported \"s\"") && text.contains("files"),
        "{text}"
    );
    let (ok, _, err) = mtfdb(
        &db,
        &[
            "export",
            "s",
            "--format",
            "parquet",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert!(!ok && err.contains("already there"), "{err}");
    let (ok, text, err) = mtfdb(&db, &["import", out.to_str().unwrap(), "--name", "back"]);
    assert!(ok, "{err}");
    assert!(text.contains("\"back\""), "{text}");
    let (ok, _, err) = mtfdb(&db, &["import", out.to_str().unwrap()]);
    assert!(!ok && err.contains("already exists"), "{err}");
}

#[test]
fn a_trace_without_operations_comes_back_too() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    {
        let database = Database::open(&db).unwrap();
        database
            .import_events("empty", |sink| {
                sink.header(&TraceHeader::world(3, "MPI_COMM_WORLD"))?;
                sink.finish()
            })
            .unwrap();
    }
    round_trip(&db, "empty", &dir.path().join("out"));
}

#[test]
fn query_results_convert_to_arrow_record_batches() {
    let (_dir, db) = common::temp_db();
    import_generated(&db, &GenConfig::new(Scenario::Stencil2d, 8, 3), "s");
    let mut session = Session::new(db);
    session.use_trace("s").unwrap();
    for q in [
        "SELECT STATISTICS FOR ALL PROCESSES",
        "SELECT COMMUNICATION MATRIX",
        "SELECT MESSAGES LIMIT 50",
    ] {
        let r = session.run(q).unwrap();
        let batch = r.to_record_batch().unwrap();
        assert_eq!(batch.num_rows(), r.len(), "{q}");
        let names: Vec<String> = batch
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(names, r.columns, "{q}");
        // Every value comes through: rendered back, the rows are the result's.
        for (c, column) in batch.columns().iter().enumerate() {
            for (i, row) in r.rows.iter().enumerate() {
                let text = arrow::util::display::array_value_to_string(column, i).unwrap();
                let want = match &row[c] {
                    mtfdb::results::Value::Null => String::new(),
                    mtfdb::results::Value::Float(f) => arrow::util::display::array_value_to_string(
                        &(std::sync::Arc::new(arrow::array::Float64Array::from(vec![*f]))
                            as arrow::array::ArrayRef),
                        0,
                    )
                    .unwrap(),
                    v => v.render(),
                };
                assert_eq!(text, want, "{q} row {i} column {c}");
            }
        }
    }
}

/// The stored results of the analyses are exported as tables (and only when stored), and
/// DuckDB reads from them what mtfdb answers: wait time per kind, phases, pattern occurrences.
#[test]
fn stored_analyses_are_exported_as_tables_duckdb_reads() {
    let (dir, db) = common::temp_db();
    import_generated(&db, &common::delayed_run(Scenario::Stencil2d), "d");
    let bare = dir.path().join("bare");
    export_parquet(&db.trace("d").unwrap(), &bare).unwrap();
    for table in mtfdb::export::parquet::ANALYSIS_TABLES {
        assert!(!bare.join(table).exists(), "{table} without its analysis");
    }
    let mut session = Session::new(db);
    session.use_trace("d").unwrap();
    let waits = session.run("SELECT WAIT STATES").unwrap();
    let phases = session.run("SELECT PHASES").unwrap();
    let patterns = session.run("SELECT COMMUNICATION PATTERNS").unwrap();
    let out = dir.path().join("out");
    export_parquet(&session.database().trace("d").unwrap(), &out).unwrap();
    // mtfdb's answers, as DuckDB will print them.
    let mut want = Vec::new();
    for row in &waits.rows {
        let kind = row[0].render();
        if kind != "total" && row[1].render() != "0" {
            want.push(format!(
                "wait {kind} {} {}",
                row[1].render(),
                row[2].render()
            ));
        }
    }
    want.sort();
    for row in &phases.rows {
        let at = |c: &str| phases.column(c).unwrap();
        let seconds = |v: &mtfdb::Value| match v {
            mtfdb::Value::Float(s) => format!("{s:.6}"),
            other => other.render(),
        };
        want.push(format!(
            "phase {} {} {} {}",
            row[0].render(),
            seconds(&row[at("start_s")]),
            seconds(&row[at("end_s")]),
            row[at("routine")].render()
        ));
    }
    for row in &patterns.rows {
        want.push(format!("pattern {} {}", row[0].render(), row[2].render()));
    }
    let root = out.display().to_string();
    let script = format!(
        r#"
import duckdb
root = {root:?}
c = duckdb.connect()
def t(name):
    return f"read_parquet('{{root}}/{{name}}/**/*.parquet', hive_partitioning=true)"
waits = c.sql(f"select kind, count(*), sum(wait_ns) from {{t('wait_states')}} group by kind").fetchall()
for kind, n, total in sorted(waits):
    print("wait", kind, n, total)
for p, s, e, r in c.sql(f"select phase, start_ns, end_ns, routine from {{t('phases')}} order by phase").fetchall():
    print("phase", p, f"{{s / 1e9:.6f}}", f"{{e / 1e9:.6f}}", r)
for p, n in c.sql(f"select pattern, count(*) from {{t('pattern_occurrences')}} group by pattern order by pattern").fetchall():
    print("pattern", p, n)
"#
    );
    let Some(text) = common::duckdb_script(&script) else {
        return;
    };
    assert_eq!(text, want.join("\n"));
    assert!(text.contains("wait late sender"), "{text}");
    // The export with its analysis tables imports back as the same trace.
    let (ok, _, err) = mtfdb(&dir.path().join("db2"), &["import", out.to_str().unwrap()]);
    assert!(ok, "{err}");
}

/// A cursor streams its rows as record batches of the size asked for, one schema throughout
/// for a selection (columns of nulls included), holding the same values as the whole result.
#[test]
fn a_cursor_streams_arrow_record_batches_with_one_schema() {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::DataType;
    let (_dir, db) = common::temp_db();
    import_generated(&db, &GenConfig::new(Scenario::Stencil2d, 8, 3), "s");
    let mut session = Session::new(db);
    session.use_trace("s").unwrap();
    for (q, size) in [
        // Batches of one row: a collective's batch has no peer, a send's has one.
        ("SELECT ALL OPERATIONS", 1),
        ("SELECT ALL OPERATIONS", 100),
        ("SELECT MESSAGES FOR PROCESS(1)", 7),
        ("SELECT ALL OPERATIONS LIMIT 250", 100),
        ("SELECT STATISTICS FOR ALL PROCESSES", 3),
    ] {
        let whole = session.run(q).unwrap();
        let batches: Vec<_> = session
            .query(q)
            .unwrap()
            .record_batches(size)
            .collect::<mtfdb::Result<_>>()
            .unwrap();
        assert_eq!(batches.len(), whole.len().div_ceil(size).max(1), "{q}");
        assert!(batches.iter().all(|b| b.num_rows() <= size), "{q}");
        let schema = batches[0].schema();
        assert!(batches.iter().all(|b| b.schema() == schema), "{q}");
        let all = arrow::compute::concat_batches(&schema, &batches).unwrap();
        assert_eq!(all.num_rows(), whole.len(), "{q}");
        for (c, column) in all.columns().iter().enumerate() {
            for (i, row) in whole.rows.iter().enumerate() {
                let text = arrow::util::display::array_value_to_string(column, i).unwrap();
                match &row[c] {
                    mtfdb::results::Value::Null => assert!(column.is_null(i), "{q} {i} {c}"),
                    mtfdb::results::Value::Float(f) => {
                        assert_eq!(
                            column
                                .as_primitive::<arrow::datatypes::Float64Type>()
                                .value(i),
                            *f
                        )
                    }
                    v => assert_eq!(text, v.render(), "{q} row {i} column {c}"),
                }
            }
        }
        if q.starts_with("SELECT ALL OPERATIONS") {
            // A selection's columns have the catalog's types, whatever the first batch holds.
            for name in ["id", "peer", "tag"] {
                let i = schema.index_of(name).unwrap();
                assert_eq!(schema.field(i).data_type(), &DataType::Int64, "{name}");
            }
            let operation = schema.index_of("operation").unwrap();
            assert_eq!(schema.field(operation).data_type(), &DataType::Utf8);
        }
    }
    // No row: one empty batch, with the columns.
    let empty: Vec<_> = session
        .query("SELECT ALL OPERATIONS WHERE DURATION < 0")
        .unwrap()
        .record_batches(10)
        .collect::<mtfdb::Result<_>>()
        .unwrap();
    assert_eq!(empty.len(), 1);
    assert_eq!(empty[0].num_rows(), 0);
    assert!(empty[0].schema().index_of("start_ns").is_ok());
}

// ---------------------------------------------------------------------------------------
// A damaged ARROW:schema

/// Where the `ARROW:schema` value lies in a Parquet file: the footer's key/value pairs are
/// Thrift compact (a field header, a ULEB128 length, the bytes verbatim), and no checksum
/// covers the footer, so the value can be damaged in place.
fn arrow_schema_value(bytes: &[u8]) -> std::ops::Range<usize> {
    let key = b"ARROW:schema";
    let at = bytes
        .windows(key.len())
        .rposition(|w| w == key)
        .expect("the export writes an ARROW:schema");
    let mut i = at + key.len();
    // Field 2 (one past the key's field 1), a binary.
    assert_eq!(bytes[i], 0x18, "the value's field header");
    i += 1;
    let (mut len, mut shift) = (0usize, 0);
    loop {
        let b = bytes[i];
        i += 1;
        len |= usize::from(b & 0x7f) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            break;
        }
    }
    // The key/value struct ends right after it.
    assert_eq!(bytes[i + len], 0, "the end of the key/value pair");
    i..i + len
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding, as the value is written.
fn base64_decode(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for &c in text.iter().filter(|&&c| c != b'=') {
        let v = BASE64.iter().position(|&b| b == c).expect("base64") as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

fn base64_encode(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for chunk in bytes.chunks(3) {
        let mut n = 0u32;
        for (i, &b) in chunk.iter().enumerate() {
            n |= u32::from(b) << (16 - 8 * i);
        }
        for i in 0..4 {
            out.push(if i <= chunk.len() {
                BASE64[(n >> (18 - 6 * i)) as usize & 63]
            } else {
                b'='
            });
        }
    }
    out
}

/// Every call a reader makes, in order, as text: two reads that hand over the same
/// transcript import the same trace.
#[derive(Default)]
struct Transcript(Vec<String>);

impl EventSink for Transcript {
    fn header(&mut self, h: &TraceHeader) -> mtfdb::Result<()> {
        self.0.push(format!("{h:?}"));
        Ok(())
    }
    fn string(&mut self, id: u32, text: &str) -> mtfdb::Result<()> {
        self.0.push(format!("string {id} {text:?}"));
        Ok(())
    }
    fn operation(&mut self, op: &mtfdb::model::Operation) -> mtfdb::Result<()> {
        self.0.push(format!("{op:?}"));
        Ok(())
    }
    fn routine(&mut self, e: &mtfdb::model::RoutineEvent) -> mtfdb::Result<()> {
        self.0.push(format!("{e:?}"));
        Ok(())
    }
    fn anomaly(&mut self, a: &mtfdb::model::Anomaly) -> mtfdb::Result<()> {
        self.0.push(format!("{a:?}"));
        Ok(())
    }
    fn anomaly_at(
        &mut self,
        a: &mtfdb::model::Anomaly,
        at: &[mtfdb::model::OpPosition],
    ) -> mtfdb::Result<()> {
        self.0.push(format!("{a:?} at {at:?}"));
        Ok(())
    }
    fn locations(&mut self, l: &[mtfdb::model::Location]) -> mtfdb::Result<()> {
        self.0.push(format!("{l:?}"));
        Ok(())
    }
    fn finish(&mut self) -> mtfdb::Result<()> {
        self.0.push("finish".into());
        Ok(())
    }
}

/// The export at `dir` read as the import reads it (through the validating seam).
fn read_through_seam(dir: &Path) -> mtfdb::Result<Vec<String>> {
    use mtfdb::ingest::{parquet, ValidatingSink};
    let mut transcript = Transcript::default();
    let mut seam = ValidatingSink::new(&mut transcript, mtfdb::SourceFormat::Parquet.policy());
    parquet::read_export(&parquet::locate(dir, None)?, &mut seam)?;
    drop(seam);
    Ok(transcript.0)
}

/// A stencil trace exported to Parquet: the export's folder (under `dir`), the trace's
/// contents, and what the import's read hands over.
fn exported_stencil(dir: &Path) -> (PathBuf, common::contents::Contents, Vec<String>) {
    let db = Database::open(dir.join("db")).unwrap();
    import_generated(&db, &GenConfig::new(Scenario::Stencil2d, 4, 2), "s");
    let out = dir.join("out");
    export_parquet(&db.trace("s").unwrap(), &out).unwrap();
    let original = contents(&db.trace("s").unwrap());
    let clean = read_through_seam(&out).unwrap();
    (out, original, clean)
}

/// Puts each damaged file of `flips` (its path in the export, what was done, its bytes) in
/// place of the undamaged one in a copy of the export `out`, and checks that the read fails
/// with an error naming that file or hands over `clean`; every 256th is imported whole into
/// a database, which must then hold `original`. Flips run on several threads. Returns how
/// many read the same and how many were refused.
fn each_flip_is_refused_or_the_same(
    dir: &Path,
    out: &Path,
    original: &common::contents::Contents,
    clean: &[String],
    flips: &[(&str, String, Vec<u8>)],
) -> (usize, usize) {
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get().min(8));
    let outcomes: Vec<(usize, usize, Vec<String>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || {
                    let copy = dir.join(format!("copy{t}"));
                    let status = Command::new("cp")
                        .arg("-r")
                        .arg(out)
                        .arg(&copy)
                        .status()
                        .unwrap();
                    assert!(status.success());
                    let db = Database::open(dir.join(format!("db{t}"))).unwrap();
                    let (mut same, mut refused, mut wrong) = (0, 0, Vec::new());
                    for (i, (file, what, bytes)) in
                        flips.iter().enumerate().skip(t).step_by(threads)
                    {
                        let path = copy.join(file);
                        let undamaged = std::fs::read(&path).unwrap();
                        std::fs::write(&path, bytes).unwrap();
                        let whole = i % 256 == 0;
                        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            let read = read_through_seam(&copy);
                            if !whole || read.is_err() {
                                return read.map(Some);
                            }
                            db.import_as(&copy, Some("x"), mtfdb::SourceFormat::Parquet)?;
                            let imported = contents(&db.trace("x")?);
                            db.drop_trace("x")?;
                            read.map(|r| (&imported == original).then_some(r))
                        }));
                        match result {
                            Err(_) => wrong.push(format!("{what}: panicked")),
                            Ok(Ok(Some(read))) if read == clean => same += 1,
                            Ok(Ok(_)) => wrong.push(format!("{what}: read another trace")),
                            Ok(Err(e)) => {
                                let e = e.to_string();
                                if e.contains(&path.display().to_string()) && e.len() < 1000 {
                                    refused += 1;
                                } else {
                                    wrong.push(format!("{what}: {e}"));
                                }
                            }
                        }
                        std::fs::write(&path, undamaged).unwrap();
                    }
                    assert!(db.trace_names().unwrap().is_empty());
                    (same, refused, wrong)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let same: usize = outcomes.iter().map(|o| o.0).sum();
    let refused: usize = outcomes.iter().map(|o| o.1).sum();
    let wrong: Vec<&String> = outcomes.iter().flat_map(|o| &o.2).collect();
    assert_eq!(same + refused + wrong.len(), flips.len());
    assert!(
        wrong.is_empty(),
        "{} of {} flips went wrong ({same} read the same, {refused} refused): {wrong:#?}",
        wrong.len(),
        flips.len()
    );
    (same, refused)
}

/// Every single-bit flip of the `ARROW:schema` value of two of the export's files (the
/// `trace` table's, read first, and the operations', whose schema holds a list), both of
/// the stored text and of the schema it encodes: each read either fails with an error
/// naming the damaged file, or hands over the same trace as the undamaged export (and the
/// imports among them hold the same trace). None panics (arrow-ipc panicked on 9 of 660
/// such flips).
#[test]
fn every_bit_flip_of_the_arrow_schema_is_a_clear_error_or_the_same_import() {
    let dir = tempfile::tempdir().unwrap();
    let (out, original, clean) = exported_stencil(dir.path());
    let mut flips: Vec<(&str, String, Vec<u8>)> = Vec::new();
    for file in [
        "trace/trace=s/part-0.parquet",
        "operations/trace=s/rank_block=0/part-0.parquet",
    ] {
        let bytes = std::fs::read(out.join(file)).unwrap();
        let value = arrow_schema_value(&bytes);
        let text = bytes[value.clone()].to_vec();
        let schema = base64_decode(&text);
        assert_eq!(base64_encode(&schema), text, "{file}: the value is base64");
        for bit in 0..text.len() * 8 {
            let mut damaged = bytes.clone();
            damaged[value.start + bit / 8] ^= 1 << (bit % 8);
            flips.push((file, format!("{file}: text bit {bit}"), damaged));
        }
        for bit in 0..schema.len() * 8 {
            let mut changed = schema.clone();
            changed[bit / 8] ^= 1 << (bit % 8);
            let mut damaged = bytes.clone();
            damaged[value.clone()].copy_from_slice(&base64_encode(&changed));
            flips.push((file, format!("{file}: schema bit {bit}"), damaged));
        }
    }
    let (same, refused) =
        each_flip_is_refused_or_the_same(dir.path(), &out, &original, &clean, &flips);
    eprintln!(
        "{} flips: {same} read the same, {refused} refused",
        flips.len()
    );
}

/// Every single-bit flip of the whole footer of the `trace` table's file (the file's
/// metadata: schema, row groups, column chunks, key/value pairs, its length and the closing
/// magic): the parquet crate panics on some of these where it should fail (its footer
/// decoding unwraps what a damaged footer lacks); the import says the file is damaged.
#[test]
fn every_bit_flip_of_a_parquet_footer_is_a_clear_error_or_the_same_import() {
    let dir = tempfile::tempdir().unwrap();
    let (out, original, clean) = exported_stencil(dir.path());
    let file = "trace/trace=s/part-0.parquet";
    let bytes = std::fs::read(out.join(file)).unwrap();
    let n = bytes.len();
    assert_eq!(&bytes[n - 4..], b"PAR1");
    let footer = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as usize;
    let mut flips: Vec<(&str, String, Vec<u8>)> = Vec::new();
    for bit in (n - 8 - footer) * 8..n * 8 {
        let mut damaged = bytes.clone();
        damaged[bit / 8] ^= 1 << (bit % 8);
        flips.push((file, format!("{file}: bit {bit}"), damaged));
    }
    let (same, refused) =
        each_flip_is_refused_or_the_same(dir.path(), &out, &original, &clean, &flips);
    assert!(refused > 0, "no flip of the footer was refused");
    eprintln!(
        "{} flips: {same} read the same, {refused} refused",
        flips.len()
    );
}

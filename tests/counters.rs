//! Hardware counters on the paths no shared trace has (issue 40, goal 6): a trace written
//! with the official OTF2 library (`tests/fixtures/otf2/make_counter_cases.py`) whose calls
//! miss some or all of their samples (NULL), and whose counters span two stored chunks of
//! operations and two of routine calls. Its counters as the columns of `SELECT OPERATIONS`
//! and `ROUTINE CALLS`, in `WHERE`, in aggregates and in the Parquet export equal what
//! `otf2-print`'s METRIC records give (`common/otf2_print.rs`); the SQL `EXPLAIN SQL` writes
//! gives mtfdb's answers in DuckDB, where it is installed.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Int64Type, UInt32Type, UInt64Type};
use mtfdb::query::Session;
use mtfdb::results::{ResultSet, Value};
use mtfdb::Database;

use common::otf2_print::{self, CounterCall};

/// The counters, as `SELECT METRICS` names them, and their columns.
const NAMES: [&str; 3] = ["PAPI_TOT_CYC", "PAPI_FP_OPS", "temperature"];
const COLUMNS: [&str; 3] = ["papi_tot_cyc", "papi_fp_ops", "temperature"];
/// Rank 0's iterations: more operations than one stored chunk holds (65,536).
const ITERATIONS: usize = 66_000;

/// A call's values, in the order of [`NAMES`].
type Values = [Option<i64>; 3];
/// Calls by (rank, start ns, MPI call or routine).
type Calls = BTreeMap<(u64, u64, String), Values>;

/// The trace imported (database folder, trace `c`) and what otf2-print says its calls keep.
struct Fixture {
    _dir: tempfile::TempDir,
    db: PathBuf,
    anchor: PathBuf,
    calls: Vec<CounterCall>,
}

/// The fixture, written, imported and read by otf2-print once for all the tests; `None`
/// (the tests say they skipped) without the otf2 Python package or otf2-print.
fn fixture() -> Option<&'static Fixture> {
    static FIXTURE: OnceLock<Option<Fixture>> = OnceLock::new();
    FIXTURE
        .get_or_init(|| {
            if !otf2_print::writer_available() || !otf2_print::available() {
                return None;
            }
            let dir = tempfile::tempdir().unwrap();
            let iterations = ITERATIONS.to_string();
            otf2_print::write_with(
                "tests/fixtures/otf2/make_counter_cases.py",
                &[dir.path().as_os_str(), iterations.as_ref()],
            );
            let anchor = dir.path().join("counters/traces.otf2");
            let db = dir.path().join("db");
            Database::open(&db)
                .unwrap()
                .import(&anchor, Some("c"))
                .unwrap();
            let calls = otf2_print::counter_calls(&anchor);
            Some(Fixture {
                _dir: dir,
                db,
                anchor,
                calls,
            })
        })
        .as_ref()
}

fn session(f: &Fixture) -> Session {
    let mut s = Session::new(Database::open(&f.db).unwrap());
    s.run("USE TRACE c").unwrap();
    s
}

fn values(c: &CounterCall) -> Values {
    NAMES.map(|n| c.values[n])
}

/// otf2-print's calls, the MPI calls (operations) or the others (routine calls), keyed as
/// mtfdb's rows are (the archive's clock counts nanoseconds from 0, so ticks are ns).
fn oracle(f: &Fixture, mpi: bool) -> Calls {
    f.calls
        .iter()
        .filter(|c| c.region.starts_with("MPI_") == mpi)
        .map(|c| ((c.location, c.enter, c.region.clone()), values(c)))
        .collect()
}

/// A result's rows keyed as [`oracle`]'s, with the counter columns' values (`name` is the
/// column of the call's name).
fn rows(r: &ResultSet, name: &str) -> Calls {
    let col = |c: &str| r.column(c).unwrap_or_else(|| panic!("no column {c}"));
    let int = |v: &Value| -> i64 { v.render().parse().unwrap() };
    r.rows
        .iter()
        .map(|row| {
            let key = (
                int(&row[col("rank")]) as u64,
                int(&row[col("start_ns")]) as u64,
                row[col(name)].render(),
            );
            let v = COLUMNS.map(|c| match &row[col(c)] {
                Value::Null => None,
                v => Some(int(v)),
            });
            (key, v)
        })
        .collect()
}

fn run(s: &mut Session, q: &str) -> ResultSet {
    s.run(q).unwrap_or_else(|e| panic!("{q}: {e}"))
}

/// The archive has what the tests are for: calls with every value, with some and with none,
/// and counters in two chunks of operations and two of routine calls.
#[test]
fn the_archive_has_calls_without_samples_and_counters_in_two_chunks_of_each_table() {
    let Some(f) = fixture() else { return };
    let all = |v: &Values| v.iter().all(Option::is_some);
    let none = |v: &Values| v.iter().all(Option::is_none);
    for mpi in [true, false] {
        let calls = oracle(f, mpi);
        assert!(calls.values().any(all), "mpi {mpi}");
        assert!(calls.values().any(none), "mpi {mpi}");
        assert!(
            calls.values().any(|v| !all(v) && !none(v)),
            "mpi {mpi}: a call with some values"
        );
        // Negative values of the absolute counter, and counts past 2^32.
        assert!(calls.values().any(|v| v[2].is_some_and(|t| t < 0)));
    }
    let db = Database::open(&f.db).unwrap();
    let trace = db.trace("c").unwrap();
    assert_eq!(trace.metrics().unwrap().len(), 3);
    let rank0: Vec<u32> = trace
        .op_chunks()
        .iter()
        .filter(|c| c.rank == 0)
        .map(|c| c.chunk)
        .collect();
    assert!(rank0.len() >= 2, "rank 0's operations in {rank0:?}");
    for chunk in rank0 {
        assert!(!trace.operation_counters(chunk, 3).unwrap().is_empty());
    }
    let routine_chunks = trace.routine_chunk_count();
    assert!(routine_chunks >= 2);
    for chunk in 0..routine_chunks {
        assert!(!trace.routine_counters(chunk, 3).unwrap().is_empty());
    }
}

/// `SELECT OPERATIONS` and `SELECT ROUTINE CALLS` show each counter as a column after the
/// others, NULL where the call has no sample, with otf2-print's values; `DESCRIBE` lists the
/// columns with the trace in use; a trace without counters shows none.
#[test]
fn rows_of_calls_carry_a_column_per_counter_with_otf2_print_s_values() {
    let Some(f) = fixture() else { return };
    let mut s = session(f);
    for (q, name, mpi) in [
        ("SELECT OPERATIONS", "operation", true),
        ("SELECT ROUTINE CALLS", "routine", false),
    ] {
        let r = run(&mut s, q);
        let n = r.columns.len();
        assert_eq!(r.columns[n - 3..], COLUMNS, "{q}");
        let expected = oracle(f, mpi);
        assert_eq!(r.rows.len(), expected.len(), "{q}");
        assert_eq!(rows(&r, name), expected, "{q}");
        // DESCRIBE says what the rows have.
        let target = q.trim_start_matches("SELECT ");
        let d = run(&mut s, &format!("DESCRIBE {target}"));
        let described: Vec<String> = d.rows.iter().map(|r| r[0].render()).collect();
        let at = described.iter().position(|c| c == COLUMNS[0]).unwrap();
        assert_eq!(described[at..at + 3], COLUMNS, "{q}");
        assert!(d.rows[at][3]
            .render()
            .contains("null where the call has no sample"));
    }
    // Through the cursor, with the column types and NULLs as such.
    let cursor = s
        .query("SELECT OPERATIONS FOR PROCESS(0) WHERE DURATION = 30 ns LIMIT 6")
        .unwrap();
    let types = cursor.column_types().unwrap().to_vec();
    assert_eq!(types.len(), cursor.columns().len());
    let mut got = Vec::new();
    for row in cursor {
        let row = row.unwrap();
        let v: Option<i64> = row.get("papi_tot_cyc").unwrap();
        got.push(v);
    }
    // MPI_Comm_rank (30 ns) of iterations 0 to 5 of rank 0: only 0, 3 and 4 sampled its
    // Enter and Leave.
    assert_eq!(
        got,
        [Some(90), None, None, Some(90), Some(90), None],
        "{got:?}"
    );
    // A trace without counters prints exactly the columns it had.
    let db = s.database();
    db.import(common::EXAMPLE_TRACE, Some("plain")).unwrap();
    s.run("USE TRACE plain").unwrap();
    let r = run(&mut s, "SELECT OPERATIONS LIMIT 1");
    let plain: Vec<&str> = mtfdb::query::catalog::OPERATION_COLUMNS
        .iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(r.columns, plain);
}

/// Three-valued logic, as SQL's: a comparison with a call's missing sample is unknown.
type Truth = Option<bool>;

fn and(a: Truth, b: Truth) -> Truth {
    match (a, b) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    }
}

fn or(a: Truth, b: Truth) -> Truth {
    match (a, b) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (Some(false), Some(false)) => Some(false),
        _ => None,
    }
}

fn not(a: Truth) -> Truth {
    a.map(|b| !b)
}

/// `WHERE` on counters keeps the calls whose condition is true in SQL's three-valued logic
/// (NULL never matches, not even under `NOT` or `!=`), alone and with the other fields; a
/// name that is no counter is refused with the trace's counters.
#[test]
fn where_on_counters_keeps_what_sql_keeps_and_never_a_call_without_the_sample() {
    let Some(f) = fixture() else { return };
    let mut s = session(f);
    let cmp = |v: Option<i64>, p: &dyn Fn(i64) -> bool| v.map(p);
    type Condition = Box<dyn Fn(&Values) -> Truth>;
    let operations: Vec<(&str, Condition)> = vec![
        (
            "PAPI_TOT_CYC > 90",
            Box::new(move |v| cmp(v[0], &|x| x > 90)),
        ),
        (
            "NOT PAPI_TOT_CYC > 90",
            Box::new(move |v| not(cmp(v[0], &|x| x > 90))),
        ),
        (
            "PAPI_TOT_CYC != 90",
            Box::new(move |v| cmp(v[0], &|x| x != 90)),
        ),
        (
            "temperature < 0 AND SIZE = 0 OR papi_fp_ops >= 9",
            Box::new(move |v| {
                or(
                    and(cmp(v[2], &|x| x < 0), Some(true)),
                    cmp(v[1], &|x| x >= 9),
                )
            }),
        ),
        (
            "NOT (temperature > 100 OR PAPI_TOT_CYC = 90)",
            Box::new(move |v| not(or(cmp(v[2], &|x| x > 100), cmp(v[0], &|x| x == 90)))),
        ),
        (
            // Every MPI_Comm_rank lasts 30 ns, MPI_Finalize 10 ns: only MPI_Init, 100 ns, is
            // longer than 50 ns (added below).
            "temperature <= -400 OR DURATION > 50 ns",
            Box::new(move |v| cmp(v[2], &|x| x <= -400)),
        ),
        (
            "PAPI_TOT_CYC < 99999999999999999999999",
            Box::new(move |v| cmp(v[0], &|_| true)),
        ),
        (
            "NOT PAPI_TOT_CYC < -99999999999999999999999",
            Box::new(move |v| not(cmp(v[0], &|_| false))),
        ),
    ];
    let ops = oracle(f, true);
    for (condition, holds) in &operations {
        let q = format!("SELECT OPERATIONS WHERE {condition}");
        let mut expected: Calls = ops
            .iter()
            .filter(|(_, v)| holds(v) == Some(true))
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        if condition.contains("DURATION") {
            // MPI_Init, the one call longer than 50 ns, on each rank.
            for (k, v) in &ops {
                if k.2 == "MPI_Init" {
                    expected.insert(k.clone(), *v);
                }
            }
        }
        assert!(!expected.is_empty(), "{q}");
        assert_eq!(rows(&run(&mut s, &q), "operation"), expected, "{q}");
        // The same count through an aggregate.
        let count = run(
            &mut s,
            &format!("SELECT COUNT(*) FROM OPERATIONS WHERE {condition}"),
        );
        assert_eq!(count.rows[0][0].render(), expected.len().to_string(), "{q}");
    }
    // Routine calls, with their own fields.
    let calls = oracle(f, false);
    let q = "SELECT ROUTINE CALLS WHERE temperature >= -100 AND DEPTH = 1";
    let expected: Calls = calls
        .iter()
        .filter(|(k, v)| k.2 == "step" && v[2].is_some_and(|t| t >= -100))
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    assert!(!expected.is_empty());
    assert_eq!(rows(&run(&mut s, q), "routine"), expected, "{q}");
    // A name that is no counter (nor field) of the trace.
    let e = s
        .run("SELECT OPERATIONS WHERE PAPI_TOT_INS > 5")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("PAPI_TOT_INS is neither a field of OPERATIONS")
            && e.contains("the trace's counters are PAPI_TOT_CYC, PAPI_FP_OPS, temperature"),
        "{e}"
    );
    // Messages have no counters: the parser says what a condition on them can be.
    let e = s
        .run("SELECT MESSAGES WHERE PAPI_TOT_CYC > 5")
        .unwrap_err()
        .to_string();
    assert!(e.contains("expected a condition after WHERE"), "{e}");
}

/// Per group: calls, then per counter (sum, min, max, values), from otf2-print.
type Folds = (u64, [(i128, i64, i64, u64); 3]);

fn fold(calls: &[&Values]) -> Folds {
    let mut f: Folds = (0, [(0, i64::MAX, i64::MIN, 0); 3]);
    for v in calls {
        f.0 += 1;
        for (i, x) in v.iter().enumerate() {
            if let Some(x) = *x {
                let (sum, min, max, n) = &mut f.1[i];
                *sum += i128::from(x);
                *min = (*min).min(x);
                *max = (*max).max(x);
                *n += 1;
            }
        }
    }
    f
}

/// What a group's row renders: count, then sum, min, max and average of each counter (NULL
/// for a counter none of the group's calls has).
fn rendered(f: &Folds) -> Vec<String> {
    let mut row = vec![f.0.to_string()];
    for (sum, min, max, n) in f.1 {
        if n == 0 {
            row.extend(std::iter::repeat_n("NULL".to_string(), 4));
            continue;
        }
        row.extend([
            sum.to_string(),
            min.to_string(),
            max.to_string(),
            Value::Float(sum as f64 / n as f64).render(),
        ]);
    }
    row
}

fn rendered_rows(r: &ResultSet) -> Vec<Vec<String>> {
    r.rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|v| match v {
                    Value::Null => "NULL".to_string(),
                    v => v.render(),
                })
                .collect()
        })
        .collect()
}

/// `SUM`, `MIN`, `MAX` and `AVG` of each counter per process and per routine skip the calls
/// without a sample and equal otf2-print's folds; a group with no sample is NULL.
#[test]
fn counter_aggregates_skip_missing_samples_and_equal_otf2_print() {
    let Some(f) = fixture() else { return };
    let mut s = session(f);
    let columns: Vec<String> = NAMES
        .iter()
        .map(|n| format!("SUM({n}), MIN({n}), MAX({n}), AVG({n})"))
        .collect();
    let columns = columns.join(", ");
    let ops = oracle(f, true);
    let calls = oracle(f, false);
    let mut per_process: BTreeMap<u64, Vec<&Values>> = BTreeMap::new();
    for ((rank, ..), v) in &ops {
        per_process.entry(*rank).or_default().push(v);
    }
    let mut per_routine: BTreeMap<&str, Vec<&Values>> = BTreeMap::new();
    for ((_, _, routine), v) in &calls {
        per_routine.entry(routine).or_default().push(v);
    }
    let expected: Vec<Vec<String>> = per_process
        .iter()
        .map(|(rank, v)| [vec![rank.to_string()], rendered(&fold(v))].concat())
        .collect();
    let q = format!("SELECT COUNT(*), {columns} FROM OPERATIONS GROUP BY PROCESS");
    assert_eq!(rendered_rows(&run(&mut s, &q)), expected, "{q}");
    let expected: Vec<Vec<String>> = per_routine
        .iter()
        .map(|(routine, v)| [vec![routine.to_string()], rendered(&fold(v))].concat())
        .collect();
    let q = format!("SELECT COUNT(*), {columns} FROM ROUTINE CALLS GROUP BY ROUTINE");
    assert_eq!(rendered_rows(&run(&mut s, &q)), expected, "{q}");
    // Iteration 5 of rank 0 samples nothing: its MPI_Comm_rank (1,510 to 1,540 ns) is a
    // group of one call and no value.
    let q = "SELECT COUNT(*), SUM(PAPI_TOT_CYC), MAX(temperature) FROM OPERATIONS FOR PROCESS(0) \
             BETWEEN TIME 1510 ns AND 1540 ns";
    assert_eq!(
        rendered_rows(&run(&mut s, q)),
        [["1", "NULL", "NULL"]],
        "{q}"
    );
}

/// Every value of an Int64 column, by row.
fn int64s(a: &dyn Array) -> Vec<Option<i64>> {
    let a = a.as_primitive::<Int64Type>();
    (0..a.len())
        .map(|i| (!a.is_null(i)).then(|| a.value(i)))
        .collect()
}

/// The rows of an exported table (`name` the column of the call's name), keyed as
/// [`oracle`]'s, from its files read by the parquet crate's own reader; its counter columns
/// must be the last three, nullable `Int64`.
fn exported(dir: &Path, table: &str, name: &str) -> Calls {
    let mut out = Calls::new();
    let mut files = Vec::new();
    let mut stack = vec![dir.join(table)];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                files.push(p);
            }
        }
    }
    assert!(!files.is_empty(), "{table}");
    for file in files {
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            std::fs::File::open(&file).unwrap(),
        )
        .unwrap()
        .build()
        .unwrap();
        for batch in reader {
            let batch = batch.unwrap();
            let schema = batch.schema();
            let n = schema.fields().len();
            let last: Vec<(&str, &DataType, bool)> = schema.fields()[n - 3..]
                .iter()
                .map(|f| (f.name().as_str(), f.data_type(), f.is_nullable()))
                .collect();
            assert_eq!(
                last,
                COLUMNS.map(|c| (c, &DataType::Int64, true)),
                "{}",
                file.display()
            );
            let column = |c: &str| batch.column(schema.index_of(c).unwrap()).clone();
            let rank = column("rank");
            let rank = rank.as_primitive::<UInt32Type>();
            let start = column("start_ns");
            let start = start.as_primitive::<UInt64Type>();
            let names = column(name);
            let names = names.as_string::<i32>();
            let counters: [Vec<Option<i64>>; 3] = COLUMNS.map(|c| int64s(column(c).as_ref()));
            for i in 0..batch.num_rows() {
                let key = (
                    u64::from(rank.value(i)),
                    start.value(i),
                    names.value(i).to_string(),
                );
                out.insert(key, counters.each_ref().map(|c| c[i]));
            }
        }
    }
    out
}

/// The Parquet export's `operations` and `routine_calls` carry one nullable Int64 column per
/// counter with otf2-print's values (read back with the parquet crate's reader); the SQL of
/// `EXPLAIN SQL` over them (rows, WHERE, aggregates) gives mtfdb's answers in DuckDB.
#[test]
fn the_parquet_export_carries_the_counters_and_explain_sql_reads_them() {
    let Some(f) = fixture() else { return };
    let out = f.db.with_file_name("export");
    let db = Database::open(&f.db).unwrap();
    mtfdb::export::parquet::export_parquet(&db.trace("c").unwrap(), &out).unwrap();
    assert_eq!(exported(&out, "operations", "operation"), oracle(f, true));
    assert_eq!(exported(&out, "routine_calls", "routine"), oracle(f, false));
    assert!(f.anchor.exists());

    let mut s = session(f);
    let statements = [
        "SELECT OPERATIONS FOR PROCESS(1) WHERE NOT (temperature > 100 OR PAPI_TOT_CYC = 90)",
        "SELECT OPERATIONS WHERE PAPI_FP_OPS > 99999999999999999999 OR temperature < -490 \
         ORDER BY temperature DESC LIMIT 20",
        "SELECT COUNT(*), SUM(PAPI_TOT_CYC), AVG(PAPI_FP_OPS), MIN(temperature), MAX(temperature) \
         FROM OPERATIONS WHERE NOT PAPI_TOT_CYC != 90 GROUP BY PROCESS",
        "SELECT COUNT(*), SUM(PAPI_TOT_CYC), AVG(temperature), MAX(papi_fp_ops) FROM ROUTINE \
         CALLS WHERE DEPTH = 1 AND NOT temperature < 0 GROUP BY PROCESS",
        "SELECT COUNT(*), SUM(PAPI_TOT_CYC) FROM OPERATIONS FOR PROCESS(0) BETWEEN TIME 1510 ns \
         AND 1540 ns",
    ];
    let mut script = format!(
        "import duckdb\nc = duckdb.connect()\nroot = {:?}\n\
         for t in ['operations', 'messages', 'communicators', 'processes', 'routine_calls']:\n    \
         c.sql(f\"CREATE VIEW {{t}} AS SELECT * FROM read_parquet('{{root}}/{{t}}/**/*.parquet', hive_partitioning = true)\")\n",
        out.display().to_string()
    );
    let mut expected = Vec::new();
    for q in statements {
        let sql: Vec<String> = run(&mut s, &format!("EXPLAIN SQL {q}"))
            .rows
            .iter()
            .map(|r| r[0].render())
            .collect();
        script.push_str(&format!(
            "for row in c.sql({:?}).fetchall():\n    print('|'.join(repr(v) for v in row))\nprint('--')\n",
            sql.join("\n")
        ));
        // mtfdb's rows as Python's repr prints them.
        for row in run(&mut s, q).rows {
            let cells: Vec<String> = row
                .iter()
                .map(|v| match v {
                    Value::Null => "None".to_string(),
                    Value::Float(x) => format!("{x:?}"),
                    Value::Text(t) => format!("'{t}'"),
                    v => v.render(),
                })
                .collect();
            expected.push(cells.join("|"));
        }
        expected.push("--".to_string());
    }
    let Some(text) = common::duckdb_script(&script) else {
        return;
    };
    assert_eq!(text, expected.join("\n"));
}

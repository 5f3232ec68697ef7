//! Every real OTF2 archive in `../shared/traces/otf2` (Score-P 1.3 to 9.0: MPI, MPI+CUDA,
//! MPI+OpenMP, OpenCL, OMPT, HIP, PAPI metrics; EZTrace 2.0) imports, and its sends per
//! sender -> receiver world-rank pair, their bytes, its matched messages, MPI calls by name
//! and collective instances equal what the reference library's `otf2-print` shows, computed
//! here from its output (`common/otf2_print.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod common;
use common::{otf2_print, temp_db};

/// The shared traces, or `None` (with a message) when this checkout has none beside it.
fn traces_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/traces/otf2");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("skipped: {} is absent", dir.display());
        None
    }
}

/// Every anchor file under `dir`.
fn anchors(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "otf2") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_real_otf2_archive_imports_and_equals_otf2_print() {
    let Some(dir) = traces_dir() else { return };
    if !otf2_print::available() {
        return;
    }
    let archives = anchors(&dir);
    assert!(
        archives.len() >= 10,
        "expected the ten archives, found {archives:?}"
    );
    let (_tmp, db) = temp_db();
    for (i, anchor) in archives.iter().enumerate() {
        let name = format!("t{i}");
        let expected = otf2_print::oracle(anchor);
        db.import(anchor, Some(&name))
            .unwrap_or_else(|e| panic!("{}: {e}", anchor.display()));
        let trace = db.trace(&name).unwrap();
        let label = anchor.display().to_string();
        otf2_print::assert_equals(&trace, &expected, &label);
        // A trace with no MPI call has no MPI anomaly.
        if expected.calls.is_empty() {
            assert_eq!(
                trace.summary().anomaly_count("missing MPI_Finalize"),
                0,
                "{label}"
            );
        }
    }
}

#[test]
fn the_real_archives_numbers_match_their_readme() {
    let Some(dir) = traces_dir() else { return };
    let (_tmp, db) = temp_db();
    // (archive folder, messages, bytes, MPI ranks) as the traces' README gives them.
    let known: [(&str, u64, u64, usize); 6] = [
        ("ping-pong", 16, 2 * 4_177_920, 2),
        ("ping-pong-papi", 16, 8_355_840, 2),
        ("casita/4_mpi_ls_barr", 3, 12, 4),
        ("casita/2_jacobi_blame_cpu_015", 2_000, 32_752_000, 2),
        ("casita/2_cuda_simple", 20, 327_520, 2),
        ("casita/1_xeonphi_jacobi_01", 0, 0, 1),
    ];
    for (folder, messages, bytes, ranks) in known {
        let info = db
            .import(dir.join(folder), Some(folder))
            .unwrap_or_else(|e| panic!("{folder}: {e}"));
        assert_eq!(info.summary.messages, messages, "{folder}");
        assert_eq!(info.summary.message_bytes, bytes, "{folder}");
        assert_eq!(info.processes, ranks, "{folder}");
        assert!(
            info.summary.anomalies.is_empty(),
            "{folder}: {:?}",
            info.summary.anomalies
        );
    }
    // The accelerator streams and OpenMP threads of the CUDA run are listed by kind.
    let trace = db.trace("casita/2_cuda_simple").unwrap();
    let kinds: Vec<(String, mtfdb::model::LocationKind, Option<u32>)> = trace
        .header()
        .locations
        .iter()
        .map(|l| (l.name.clone(), l.kind, l.rank))
        .collect();
    use mtfdb::model::LocationKind::{Accelerator, CpuThread};
    assert_eq!(
        kinds,
        vec![
            ("OMP thread 1".to_string(), CpuThread, Some(0)),
            ("CUDA[0:7]".to_string(), Accelerator, Some(0)),
            ("OMP thread 1".to_string(), CpuThread, Some(1)),
            ("CUDA[0:7]".to_string(), Accelerator, Some(1)),
        ]
    );
    // Only MPI's communicators: world, and MPI_COMM_SELF as one per rank; the CUDA and
    // OpenMP "communicators" are not MPI's.
    let comms: Vec<(String, Vec<u32>)> = trace
        .header()
        .communicators
        .iter()
        .map(|c| (c.name.clone(), c.members.clone()))
        .collect();
    assert_eq!(
        comms,
        vec![
            ("MPI_COMM_WORLD".to_string(), vec![0, 1]),
            ("comm 5 of rank 0".to_string(), vec![0]),
            ("comm 5 of rank 1".to_string(), vec![1]),
        ]
    );
}

/// Every call of the archive with its counter values, from `otf2-print` (see
/// [`otf2_print::CounterCall`]); in `ping-pong-papi` every call has every counter's delta.
fn counter_oracle(anchor: &Path) -> Vec<otf2_print::CounterCall> {
    let calls = otf2_print::counter_calls(anchor);
    for c in &calls {
        assert!(c.values.values().all(Option::is_some), "{c:?}");
    }
    calls
}

/// A call's counter values, all present.
fn deltas(c: &otf2_print::CounterCall) -> BTreeMap<String, i64> {
    c.values
        .iter()
        .map(|(n, v)| (n.clone(), v.unwrap()))
        .collect()
}

/// The PAPI counters of `ping-pong-papi`, per MPI call and per routine call, equal the
/// differences of `otf2-print`'s METRIC records at the call's Enter and Leave.
#[test]
fn papi_counters_per_call_equal_otf2_print() {
    let Some(dir) = traces_dir() else { return };
    if !otf2_print::available() {
        return;
    }
    let anchor = dir.join("ping-pong-papi/traces.otf2");
    let expected = counter_oracle(&anchor);
    // 40 MPI calls and `main`, on each of the two ranks.
    assert_eq!(expected.len(), 42, "{expected:?}");
    let (_tmp, db) = temp_db();
    db.import(&anchor, Some("papi")).unwrap();
    let trace = db.trace("papi").unwrap();
    let metrics = trace.metrics().unwrap();
    let names: Vec<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["PAPI_TOT_CYC", "PAPI_L2_TCM", "PAPI_BR_MSP"]);
    for m in &metrics {
        assert_eq!(
            (
                m.source.as_str(),
                m.mode.as_str(),
                m.value_type.as_str(),
                m.unit.as_str()
            ),
            ("PAPI", "ACCUMULATED_START", "UINT64", "#"),
            "{m:?}"
        );
        assert_eq!(m.values, mtfdb::model::MetricValues::Accumulated);
    }
    assert_eq!(
        metrics[0].description,
        "Total cycles. [ CPU_CLK_THREAD_UNHALTED:THREAD_P ]"
    );
    // Location i is world rank i (the MPI locations group lists <0>, <1>).
    assert_eq!(trace.header().processes.len(), 2);

    // mtfdb's calls: (rank, start, name, counters), start order per rank.
    let mut got: Vec<(u64, u64, String, BTreeMap<String, i64>)> = Vec::new();
    let values = |c: &mtfdb::store::counters::ChunkCounters, id: u64| -> BTreeMap<String, i64> {
        metrics
            .iter()
            .enumerate()
            .filter_map(|(i, m)| Some((m.name.clone(), c.get(id, i)?)))
            .collect()
    };
    for info in trace.op_chunks() {
        let counters = trace.operation_counters(info.chunk, metrics.len()).unwrap();
        let ids: roaring::RoaringTreemap = info.ids().collect();
        for (id, op) in trace.operations(&ids).unwrap() {
            let name = trace.kind_name(op.kind);
            got.push((op.rank.into(), op.start, name, values(&counters, id)));
        }
    }
    for (id, call) in trace.routine_calls().unwrap().into_iter().enumerate() {
        let id = id as u64;
        let counters = trace
            .routine_counters((id >> 16) as u32, metrics.len())
            .unwrap();
        let name = trace.string(call.routine).unwrap().to_string();
        got.push((call.rank.into(), call.start, name, values(&counters, id)));
    }
    got.sort_by_key(|a| (a.0, a.1));
    let expected: Vec<(u64, String, BTreeMap<String, i64>)> = expected
        .iter()
        .map(|c| (c.location, c.region.clone(), deltas(c)))
        .collect();
    let got: Vec<(u64, String, BTreeMap<String, i64>)> =
        got.into_iter().map(|(r, _, n, d)| (r, n, d)).collect();
    assert_eq!(got, expected);

    // The same values as the counter columns of the rows of SELECT OPERATIONS and ROUTINE
    // CALLS, named after the counters.
    let mut s = mtfdb::query::Session::new(db);
    s.run("USE TRACE papi").unwrap();
    let mut shown: Vec<(u64, String, BTreeMap<String, i64>)> = Vec::new();
    for (q, name) in [
        ("SELECT OPERATIONS", "operation"),
        ("SELECT ROUTINE CALLS", "routine"),
    ] {
        let r = s.run(q).unwrap();
        let n = r.columns.len();
        assert_eq!(
            r.columns[n - 3..],
            ["papi_tot_cyc", "papi_l2_tcm", "papi_br_msp"],
            "{q}"
        );
        let col = |c: &str| r.column(c).unwrap();
        for row in &r.rows {
            let values = names
                .iter()
                .zip(&row[n - 3..])
                .map(|(m, v)| (m.to_string(), v.render().parse().unwrap()))
                .collect();
            let rank = row[col("rank")].render().parse().unwrap();
            shown.push((rank, row[col(name)].render(), values));
        }
    }
    shown.sort_by(|a, b| (a.0, &a.1, &a.2).cmp(&(b.0, &b.1, &b.2)));
    let mut expected = expected;
    expected.sort();
    assert_eq!(shown, expected);
}

/// `SELECT METRICS` lists the counters as `otf2-print -G`'s METRIC_MEMBER records define
/// them; a trace without counters (the same program traced without PAPI) lists none and
/// stores no counter value at all (so its store holds no byte more).
#[test]
fn the_metrics_target_lists_otf2_print_s_metric_members_and_a_trace_without_has_none() {
    let Some(dir) = traces_dir() else { return };
    if !otf2_print::available() {
        return;
    }
    let anchor = dir.join("ping-pong-papi/traces.otf2");
    // (name, description, unit, source, mode, value type) of each METRIC_MEMBER, by id.
    let mut expected = Vec::new();
    for line in otf2_print::run(&["-G"], &anchor).lines() {
        if !line.starts_with("METRIC_MEMBER") {
            continue;
        }
        let field = |key: &str| {
            let rest = line.split(&format!("{key}: ")).nth(1).unwrap();
            match rest.strip_prefix('"') {
                Some(quoted) => quoted.split('"').next().unwrap().to_string(),
                None => rest.split(',').next().unwrap().to_string(),
            }
        };
        let row: Vec<String> = ["Name", "Descr.", "Unit", "Type", "Mode", "Value Type"]
            .iter()
            .map(|k| field(k))
            .collect();
        expected.push(row);
    }
    assert_eq!(expected.len(), 3);
    let (_tmp, db) = temp_db();
    db.import(&anchor, Some("papi")).unwrap();
    db.import(dir.join("ping-pong/traces.otf2"), Some("plain"))
        .unwrap();
    let mut s = mtfdb::query::Session::new(db);
    s.run("USE TRACE papi").unwrap();
    let r = s.run("SELECT METRICS").unwrap();
    let cell = |row: &Vec<mtfdb::results::Value>, name: &str| row[r.column(name).unwrap()].render();
    let got: Vec<Vec<String>> = r
        .rows
        .iter()
        .map(|row| {
            [
                "name",
                "description",
                "unit",
                "source",
                "mode",
                "value_type",
            ]
            .iter()
            .map(|c| cell(row, c))
            .collect()
        })
        .collect();
    assert_eq!(got, expected);
    for row in &r.rows {
        assert_eq!(
            (
                cell(row, "per_call"),
                cell(row, "base"),
                cell(row, "exponent")
            ),
            ("delta".to_string(), "10".to_string(), "0".to_string())
        );
    }
    let r = s.run("SELECT METRICS ORDER BY name LIMIT 1").unwrap();
    assert_eq!(r.rows.len(), 1);
    assert_eq!(r.rows[0][r.column("name").unwrap()].render(), "PAPI_BR_MSP");

    // The trace without counters.
    s.run("USE TRACE plain").unwrap();
    assert_eq!(s.run("SELECT METRICS").unwrap().rows.len(), 0);
    let plain = s.database().trace("plain").unwrap();
    assert!(plain.metrics().unwrap().is_empty());
    for info in plain.op_chunks() {
        assert!(plain.operation_counters(info.chunk, 3).unwrap().is_empty());
    }
    for chunk in 0..plain.routine_chunk_count() {
        assert!(plain.routine_counters(chunk, 3).unwrap().is_empty());
    }
}

/// Counter columns in aggregates: on `ping-pong-papi`, `SUM`, `MIN`, `MAX`, `AVG` of each
/// PAPI counter per routine (ROUTINE CALLS) and per process (OPERATIONS) equal the same
/// folds of `otf2-print`'s METRIC deltas; a name that is not a counter of the trace and a
/// target without counters are refused with what exists.
#[test]
fn counter_aggregates_per_routine_and_process_equal_otf2_print() {
    let Some(dir) = traces_dir() else { return };
    if !otf2_print::available() {
        return;
    }
    let anchor = dir.join("ping-pong-papi/traces.otf2");
    let names = ["PAPI_TOT_CYC", "PAPI_L2_TCM", "PAPI_BR_MSP"];
    // Per group: (calls, per counter (sum, min, max)), from otf2-print. MPI regions are the
    // operations, the others routine calls.
    type Folds = (u64, Vec<(i64, i64, i64)>);
    let fold = |into: &mut Folds, call: &otf2_print::CounterCall| {
        into.0 += 1;
        for (i, n) in names.iter().enumerate() {
            let v = call.values[*n].unwrap();
            let (sum, min, max) = &mut into.1[i];
            *sum += v;
            *min = (*min).min(v);
            *max = (*max).max(v);
        }
    };
    let empty = || -> Folds { (0, vec![(0, i64::MAX, i64::MIN); 3]) };
    let mut per_routine: BTreeMap<String, Folds> = BTreeMap::new();
    let mut per_process: BTreeMap<u64, Folds> = BTreeMap::new();
    for call in counter_oracle(&anchor) {
        if call.region.starts_with("MPI_") {
            fold(
                per_process.entry(call.location).or_insert_with(empty),
                &call,
            );
        } else {
            fold(
                per_routine.entry(call.region.clone()).or_insert_with(empty),
                &call,
            );
        }
    }
    assert_eq!(per_process.len(), 2, "{per_process:?}");
    assert!(!per_routine.is_empty());
    // What the query's row of a group should render: count, then sum, min, max, avg of each.
    let expected = |f: &Folds| -> Vec<String> {
        let mut row = vec![f.0.to_string()];
        for (sum, min, max) in &f.1 {
            let avg = *sum as f64 / f.0 as f64;
            row.extend([
                sum.to_string(),
                min.to_string(),
                max.to_string(),
                mtfdb::results::Value::Float(avg).render(),
            ]);
        }
        row
    };
    let columns: Vec<String> = names
        .iter()
        .map(|n| format!("SUM({n}), MIN({n}), MAX({n}), AVG({n})"))
        .collect();
    let (_tmp, db) = temp_db();
    db.import(&anchor, Some("papi")).unwrap();
    db.import(dir.join("ping-pong/traces.otf2"), Some("plain"))
        .unwrap();
    let mut s = mtfdb::query::Session::new(db);
    s.run("USE TRACE papi").unwrap();
    let rows = |s: &mut mtfdb::query::Session, q: &str| -> Vec<Vec<String>> {
        let r = s.run(q).unwrap_or_else(|e| panic!("{q}: {e}"));
        r.rows
            .iter()
            .map(|row| row.iter().map(|v| v.render()).collect())
            .collect()
    };
    let by_routine: Vec<Vec<String>> = per_routine
        .iter()
        .map(|(name, f)| [vec![name.clone()], expected(f)].concat())
        .collect();
    let by_process: Vec<Vec<String>> = per_process
        .iter()
        .map(|(rank, f)| [vec![rank.to_string()], expected(f)].concat())
        .collect();
    for (target, want) in [
        ("ROUTINE CALLS GROUP BY ROUTINE", by_routine),
        ("OPERATIONS GROUP BY PROCESS", by_process),
    ] {
        let q = format!("SELECT COUNT(*), {} FROM {target}", columns.join(", "));
        assert_eq!(rows(&mut s, &q), want, "{q}");
    }
    // The column is named as the statement names the counter, lowercase like every column.
    let r = s.run("SELECT SUM(papi_tot_cyc) FROM OPERATIONS").unwrap();
    assert_eq!(r.columns, ["sum(papi_tot_cyc)"]);
    let total: i64 = per_process.values().map(|f| f.1[0].0).sum();
    assert_eq!(r.rows[0][0].render(), total.to_string());

    // Refusals, each naming what exists.
    let err = |s: &mut mtfdb::query::Session, q: &str| s.run(q).unwrap_err().to_string();
    let e = err(
        &mut s,
        "SELECT SUM(PAPI_TOT_INS) FROM ROUTINE CALLS GROUP BY ROUTINE",
    );
    assert!(
        e.contains("no counter PAPI_TOT_INS")
            && e.contains("PAPI_TOT_CYC, PAPI_L2_TCM, PAPI_BR_MSP"),
        "{e}"
    );
    let e = err(&mut s, "SELECT SUM(PAPI_TOT_CYC) FROM MESSAGES");
    assert!(e.contains("MESSAGES has none"), "{e}");
    s.run("USE TRACE plain").unwrap();
    let e = err(&mut s, "SELECT MAX(PAPI_TOT_CYC) FROM OPERATIONS");
    assert!(e.contains("the trace has no counters"), "{e}");
}

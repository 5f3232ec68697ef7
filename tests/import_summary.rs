//! What `mtfdb import` says (issue #40, goal 7): its summary line counts the anomalies by
//! class, and a path that is only a part of a trace, or a folder of another format, names the
//! file to give instead.

mod common;

use std::path::{Path, PathBuf};

use common::contents::mtfdb;

fn shared(part: &str) -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/traces")
        .join(part);
    if path.exists() {
        Some(path)
    } else {
        eprintln!("skipped: {} is absent", path.display());
        None
    }
}

#[test]
fn the_summary_line_counts_the_anomalies_by_class() {
    let Some(prv) = shared("paraver/lulesh/lulesh_7+1_with_uncores_sockets1+2.chop8.prv") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (ok, out, err) = mtfdb(&db, &["import", prv.to_str().unwrap(), "--name", "lulesh"]);
    assert!(ok, "{err}");
    // The counts `mtfdb info` lists from the stored anomalies.
    let (ok, info, err) = mtfdb(&db, &["info", "lulesh"]);
    assert!(ok, "{err}");
    // LULESH's communicator lines list tasks 9 to 12 of an application of 8: 8 members that
    // are no process, and 4 communicators left empty without them (Table 3.1).
    for (kind, n) in [
        ("MPI call without its records", 112),
        ("missing MPI_Finalize", 8),
        ("member not a process", 8),
        ("empty communicator", 4),
    ] {
        assert!(
            info.lines()
                .any(|l| l.trim().starts_with(kind) && l.trim().ends_with(&format!(" {n}"))),
            "{kind}: {info}"
        );
    }
    assert!(
        out.trim_end().ends_with(
            "; 132 anomalies: 112 MPI call without its records, 8 member not a process, 8 missing MPI_Finalize, 4 empty communicator"
        ),
        "{out}"
    );
    let mtf = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/traces/stencil2d-16.mtf");
    let (ok, out, err) = mtfdb(&db, &["import", mtf.to_str().unwrap(), "--name", "s"]);
    assert!(ok, "{err}");
    assert!(out.trim_end().ends_with("; no anomalies"), "{out}");
}

/// `mtfdb import PATH` fails saying `PATH: what`.
fn refused(path: &Path, what: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (ok, out, err) = mtfdb(&dir.path().join("db"), &["import", path.to_str().unwrap()]);
    assert!(!ok, "{out}");
    assert_eq!(err.trim_end(), format!("error: {}: {what}", path.display()));
}

#[test]
fn a_part_of_a_trace_names_the_file_to_give_instead() {
    let Some(otf2) = shared("otf2/ping-pong") else {
        return;
    };
    let anchor = otf2.join("traces.otf2");
    let a = anchor.display();
    refused(
        &otf2.join("traces.def"),
        &format!("an OTF2 archive's global definitions, not the archive: give {a}, the anchor"),
    );
    refused(
        &otf2.join("traces"),
        &format!(
            "a folder of an OTF2 archive's local files, not the archive: give {a}, the anchor"
        ),
    );
    refused(
        &otf2.join("traces/1.evt"),
        &format!(
            "an OTF2 archive's event file of one location, not the archive: give {a}, the anchor"
        ),
    );
    refused(
        &otf2.join("traces/0.def"),
        &format!(
            "an OTF2 archive's definitions of one location, not the archive: give {a}, the anchor"
        ),
    );
    let Some(otf1) = shared("otf1/jacobi") else {
        return;
    };
    let master = otf1.join("jacobi_mpi+cuda.otf");
    for stream in ["jacobi_mpi+cuda.0.def.z", "jacobi_mpi+cuda.1.events.z"] {
        refused(
            &otf1.join(stream),
            &format!(
                "a stream of an OTF v1 trace, not the trace: give {}, the master file",
                master.display()
            ),
        );
    }
    let Some(lulesh) = shared("paraver/lulesh") else {
        return;
    };
    let prv = lulesh.join("lulesh_7+1_with_uncores_sockets1+2.chop8.prv");
    let p = prv.display();
    refused(
        &prv.with_extension("pcf"),
        &format!("a Paraver trace's configuration (.pcf), not the trace: give {p}, the .prv"),
    );
    refused(
        &prv.with_extension("row"),
        &format!("a Paraver trace's names of rows (.row), not the trace: give {p}, the .prv"),
    );
    // A folder of another format says which one, never an OTF2 error.
    refused(
        &lulesh,
        &format!("a folder holding a Paraver trace, not an OTF2 archive: give {p}, the .prv"),
    );
}

#[test]
fn a_dumpi_rank_file_imports_the_whole_trace() {
    let Some(bin) = shared("dumpi/testtrace/testtrace-0002.bin") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (ok, _, err) = mtfdb(&db, &["import", bin.to_str().unwrap(), "--name", "one"]);
    assert!(ok, "{err}");
    let meta = bin.with_file_name("testtrace.meta");
    let (ok, _, err) = mtfdb(&db, &["import", meta.to_str().unwrap(), "--name", "all"]);
    assert!(ok, "{err}");
    let (_, one, _) = mtfdb(&db, &["info", "one"]);
    let (_, all, _) = mtfdb(&db, &["info", "all"]);
    let counts = |info: &str| -> Vec<String> {
        info.lines()
            .filter(|l| l.starts_with("operations") || l.starts_with("messages"))
            .map(str::to_string)
            .collect()
    };
    assert!(!counts(&all).is_empty(), "{all}");
    assert_eq!(counts(&one), counts(&all));
}

//! The metamodel's constraints (thesis Table 3.1) that an import checks and reports as
//! anomalies, never refusals: each on its fixture in `tests/fixtures/anomalies`, with its
//! exact message; each round trips through every format that carries anomalies; and none is
//! found in the real traces, which keep their constraints.

mod common;

use std::path::{Path, PathBuf};

use common::contents::{anomaly_text, info_lines, mtfdb};
use mtfdb::export::{export_file, parquet::export_parquet, Format};
use mtfdb::Database;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/anomalies")
        .join(format!("{name}.mtf"))
}

/// The anomaly lines `mtfdb info --anomalies` prints for the fixture `name`.
fn reported(name: &str) -> (tempfile::TempDir, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (ok, _, err) = mtfdb(
        &db,
        &["import", fixture(name).to_str().unwrap(), "--name", name],
    );
    assert!(ok, "{err}");
    let (ok, text, err) = mtfdb(&db, &["info", name, "--anomalies"]);
    assert!(ok, "{err}");
    let lines = text
        .lines()
        .skip_while(|l| !l.starts_with("anomalies:"))
        .take_while(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    (dir, lines)
}

#[test]
fn a_matched_pair_with_two_datatypes_is_reported() {
    // The Sendrecv pair is not judged: its one datatype may be either side's.
    assert_eq!(
        reported("datatype").1,
        vec![
            "anomalies: 1 in 1 classes (kept and counted; the trace was imported whole)",
            "  receive datatype differs from send            1",
            "      e.g. operations 1 -> 65537: the send's datatype is MPI_DOUBLE, the receive's MPI_LONG",
        ]
    );
}

#[test]
fn calls_before_init_and_after_finalize_are_reported_once_per_rank() {
    assert_eq!(
        reported("lifecycle").1,
        vec![
            "anomalies: 2 in 2 classes (kept and counted; the trace was imported whole)",
            "  MPI call after MPI_Finalize                   1",
            "      e.g. operation 65540: rank 1 made 1 MPI call(s) after MPI_Finalize, this the first",
            "  MPI call before MPI_Init                      1",
            "      e.g. operation 0: rank 0 made 2 MPI call(s) before MPI_Init, this the first",
        ]
    );
}

#[test]
fn a_member_contributing_another_size_to_a_collective_is_reported() {
    assert_eq!(
        reported("collective").1,
        vec![
            "anomalies: 1 in 1 classes (kept and counted; the trace was imported whole)",
            "  collective size mismatch                      1",
            "      e.g. operation 131074: rank 2 sent 16 bytes in MPI_Allreduce on communicator 0, \
             the first member 8",
        ]
    );
}

#[test]
fn a_barrier_whose_members_do_not_overlap_is_reported() {
    assert_eq!(
        reported("barrier").1,
        vec![
            "anomalies: 1 in 1 classes (kept and counted; the trace was imported whole)",
            "  barrier members do not overlap                1",
            "      e.g. operations 131074 and 2: a barrier on communicator 0 whose last member \
             entered 5 ns after its first member left",
        ]
    );
}

#[test]
fn the_new_anomalies_round_trip_through_mtf_text_gxl_and_parquet() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    for name in ["datatype", "lifecycle", "collective", "barrier"] {
        db.import(fixture(name), Some(name)).unwrap();
        let original = db.trace(name).unwrap();
        let expected: Vec<String> = original
            .anomalies()
            .unwrap()
            .iter()
            .map(|a| anomaly_text(&original, a))
            .collect();
        assert_eq!(expected.len(), if name == "lifecycle" { 2 } else { 1 });
        let parquet = dir.path().join(format!("{name}-parquet"));
        export_parquet(&original, &parquet).unwrap();
        let mut copies = vec![(
            format!("{name}-pq"),
            parquet.join("operations").join(format!("trace={name}")),
        )];
        for (format, ext) in [(Format::MtfText, "mtf"), (Format::Gxl, "gxl")] {
            let file = dir.path().join(format!("{name}-copy.{ext}"));
            export_file(&original, format, &file).unwrap();
            copies.push((format!("{name}-{ext}"), file));
        }
        for (copy, path) in copies {
            db.import(&path, Some(&copy)).unwrap();
            let t = db.trace(&copy).unwrap();
            let got: Vec<String> = t
                .anomalies()
                .unwrap()
                .iter()
                .map(|a| anomaly_text(&t, a))
                .collect();
            assert_eq!(got, expected, "{copy}");
        }
    }
}

#[test]
fn the_real_traces_keep_the_constraints() {
    let Some(files) = common::real_traces() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let classes = [
        "receive datatype differs from send",
        "MPI call before MPI_Init",
        "MPI call after MPI_Finalize",
        "collective size mismatch",
        "barrier members do not overlap",
    ];
    for (i, file) in files.iter().enumerate() {
        let name = format!("t{i}");
        let (ok, _, err) = mtfdb(&db, &["import", file.to_str().unwrap(), "--name", &name]);
        assert!(ok, "{}: {err}", file.display());
        for line in info_lines(&db, &name) {
            assert!(
                !classes.iter().any(|c| line.contains(c)),
                "{}: {line}",
                file.display()
            );
        }
    }
}

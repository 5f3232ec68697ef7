//! Every real OTF2 archive in `../shared/traces/otf2` (Score-P 1.3 to 9.0: MPI, MPI+CUDA,
//! MPI+OpenMP, OpenCL, OMPT, HIP, PAPI metrics; EZTrace 2.0) imports, and its sends per
//! sender -> receiver world-rank pair, their bytes, its matched messages, MPI calls by name
//! and collective instances equal what the reference library's `otf2-print` shows, computed
//! here from its output (`common/otf2_print.rs`).

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

//! What real tracers write into OTF2 archives and the textbook does not allow, one fixture per
//! case (`tests/fixtures/otf2/make_real_cases.py`, written with the official OTF2 library):
//! each imports, what breaks the rules is kept and counted as anomalies, and the MPI part stays
//! exact.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use mtfdb::model::{Anomaly, LocationKind, OpKind};
use mtfdb::{Database, Trace};

mod common;
use common::temp_db;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/otf2")
        .join(name)
}

fn import(db: &Database, name: &str) -> Trace {
    db.import(fixture(name), Some(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    db.trace(name).unwrap()
}

/// Anomalies by class.
fn classes(t: &Trace) -> BTreeMap<String, u64> {
    t.summary().anomalies.iter().cloned().collect()
}

/// MPI calls by name.
fn calls(t: &Trace) -> BTreeMap<String, u64> {
    t.summary()
        .by_kind
        .iter()
        .map(|(k, n)| (t.kind_name(*k), *n))
        .collect()
}

fn map<const N: usize>(pairs: [(&str, u64); N]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// (sender, receiver, communicator, bytes) of every message.
fn messages(t: &Trace) -> Vec<(u32, u32, u32, u64)> {
    let mut m: Vec<_> = t
        .messages()
        .unwrap()
        .iter()
        .map(|m| (m.sender, m.receiver, m.comm, m.bytes))
        .collect();
    m.sort();
    m
}

#[test]
fn an_otf2_1x_archive_imports() {
    let (_d, db) = temp_db();
    let t = import(&db, "real-v1x");
    assert!(
        t.header().comments.starts_with("OTF2 1.4.0 archive"),
        "{}",
        t.header().comments
    );
    assert_eq!(messages(&t), vec![(0, 1, 0, 1000), (1, 0, 0, 24)]);
    assert_eq!(
        calls(&t),
        map([
            ("MPI_Init", 2),
            ("MPI_Finalize", 2),
            ("MPI_Send", 2),
            ("MPI_Recv", 2)
        ])
    );
    assert_eq!(t.summary().routine_calls, 2);
    assert!(classes(&t).is_empty());
}

/// A listed location: name, kind, rank, thread, group, regions entered, events.
type ListedLocation<'a> = (
    &'a str,
    LocationKind,
    Option<u32>,
    Option<u32>,
    &'a str,
    u64,
    u64,
);

#[test]
fn other_paradigms_locations_are_listed_and_never_ranks() {
    let (dir, db) = temp_db();
    let t = import(&db, "real-paradigms");
    let h = t.header();
    assert_eq!(h.processes.len(), 2);
    // Only MPI's communicator; the CUDA, OpenMP (one of them empty) and measurement-system
    // "communicators" list locations and are not MPI's.
    let comms: Vec<(&str, u32, &[u32])> = h
        .communicators
        .iter()
        .map(|c| (c.name.as_str(), c.id, c.members.as_slice()))
        .collect();
    assert_eq!(comms, vec![("MPI_COMM_WORLD", 4, &[0, 1][..])]);
    let locations: Vec<ListedLocation> = h
        .locations
        .iter()
        .map(|l| {
            (
                l.name.as_str(),
                l.kind,
                l.rank,
                l.thread,
                l.group.as_str(),
                l.regions,
                l.events,
            )
        })
        .collect();
    use LocationKind::{Accelerator, CpuThread};
    assert_eq!(
        locations,
        vec![
            (
                "OMP thread 1",
                CpuThread,
                Some(0),
                Some(1),
                "MPI Rank 0",
                3,
                6
            ),
            (
                "CUDA[0:7]",
                Accelerator,
                Some(0),
                Some(2),
                "MPI Rank 0",
                3,
                6
            ),
            (
                "OMP thread 1",
                CpuThread,
                Some(1),
                Some(1),
                "MPI Rank 1",
                3,
                6
            ),
            (
                "CUDA[0:7]",
                Accelerator,
                Some(1),
                Some(2),
                "MPI Rank 1",
                3,
                6
            ),
            // Created by rank 1 (an OTF2 3.0 accelerator location group).
            (
                "HIP queue 0",
                Accelerator,
                Some(1),
                Some(3),
                "HIP Context 0",
                1,
                2
            ),
        ]
    );
    // The MPI part is exact: 3 messages of 4,096 bytes on MPI_COMM_WORLD, 3 Allreduces.
    assert_eq!(messages(&t), vec![(0, 1, 4, 4096); 3]);
    assert_eq!(t.summary().collective_instances, 3);
    assert_eq!(
        calls(&t),
        map([
            ("MPI_Init", 2),
            ("MPI_Finalize", 2),
            ("MPI_Send", 3),
            ("MPI_Recv", 3),
            ("MPI_Allreduce", 6)
        ])
    );
    // Region calls of every location are kept: main on each rank, the OpenMP regions and
    // kernels on their threads.
    assert_eq!(t.summary().routine_calls, 2 + 6 + 6 + 1);
    assert!(classes(&t).is_empty(), "{:?}", classes(&t));
    // `info` shows them at a glance: how many of each kind, then each with its rank, thread
    // and group (compared word by word: the columns' padding aside).
    drop(t);
    drop(db);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mtfdb"))
        .arg("--db")
        .arg(dir.path().join("db"))
        .args(["info", "real-paradigms"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let info = String::from_utf8(out.stdout).unwrap();
    let section: Vec<String> = info
        .lines()
        .skip_while(|l| !l.starts_with("other locations"))
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        section,
        vec![
            "other locations (not MPI ranks): 5",
            "CPU thread 2 6 regions entered 12 events",
            "accelerator 3 7 regions entered 14 events",
            "OMP thread 1 CPU thread rank 0 thread 1 in MPI Rank 0 3 regions",
            "CUDA[0:7] accelerator rank 0 thread 2 in MPI Rank 0 3 regions",
            "OMP thread 1 CPU thread rank 1 thread 1 in MPI Rank 1 3 regions",
            "CUDA[0:7] accelerator rank 1 thread 2 in MPI Rank 1 3 regions",
            "HIP queue 0 accelerator rank 1 thread 3 in HIP Context 0 1 regions",
        ],
        "{info}"
    );
}

#[test]
fn a_trace_with_no_mpi_imports_with_no_mpi_operations_or_anomalies() {
    let (_d, db) = temp_db();
    let t = import(&db, "real-no-mpi");
    assert_eq!(t.summary().operations, 0);
    assert!(classes(&t).is_empty(), "{:?}", classes(&t));
    assert_eq!(t.header().processes.len(), 1);
    assert!(t.header().communicators.is_empty());
    let threads: Vec<(&str, u64)> = t
        .header()
        .locations
        .iter()
        .map(|l| (l.name.as_str(), l.regions))
        .collect();
    assert_eq!(threads, vec![("OMP thread 1", 4), ("OMP thread 2", 4)]);
    // main, and two parallel regions with a work region each on each of 3 threads.
    assert_eq!(t.summary().routine_calls, 1 + 3 * 2 * 2);
}

#[test]
fn regions_that_do_not_nest_are_closed_kept_and_reported_with_location_and_time() {
    let (_d, db) = temp_db();
    let t = import(&db, "real-nesting");
    assert_eq!(
        classes(&t),
        map([
            ("crossed routine leave", 2),
            ("routine left but never entered", 3),
            ("routine never left", 2)
        ])
    );
    let name = |id: u32| t.string(id).unwrap().to_string();
    let mut crossed = Vec::new();
    let mut unentered = Vec::new();
    for a in t.anomalies().unwrap() {
        match a {
            Anomaly::CrossedLeave {
                rank,
                thread,
                time,
                routine,
                innermost,
            } => crossed.push((rank, thread, time, name(routine), name(innermost))),
            Anomaly::LeaveWithoutEnter {
                rank,
                time,
                routine,
                ..
            } => unentered.push((rank, time, name(routine))),
            _ => {}
        }
    }
    unentered.sort();
    assert_eq!(
        crossed,
        vec![
            (0, 0, 12, "f".to_string(), "g".to_string()),
            (0, 0, 22, "task A".to_string(), "task B".to_string())
        ]
    );
    assert_eq!(
        unentered,
        vec![
            (0, 13, "g".to_string()),
            (0, 23, "task B".to_string()),
            (1, 45, "g".to_string())
        ]
    );
    // Every call is kept: g and task B are closed where f and task A were left; loop and
    // main of rank 1 at its last event.
    let mut calls: Vec<(u32, String, u64, u64)> = t
        .routine_calls()
        .unwrap()
        .iter()
        .map(|c| (c.rank, name(c.routine), c.start, c.end))
        .collect();
    calls.sort();
    assert_eq!(
        calls,
        vec![
            (0, "f".into(), 10, 12),
            (0, "g".into(), 11, 12),
            (0, "main".into(), 1, 90),
            (0, "task A".into(), 20, 22),
            (0, "task B".into(), 21, 22),
            (1, "loop".into(), 70, 71),
            (1, "main".into(), 1, 71),
        ]
    );
    // MPI is exact.
    assert_eq!(messages(&t), vec![(0, 1, 0, 64)]);
}

#[test]
fn mpi_calls_without_their_records_are_kept_by_name_and_counted() {
    let (_d, db) = temp_db();
    let t = import(&db, "real-bare-mpi");
    assert_eq!(
        classes(&t),
        map([
            ("MPI call without its records", 5),
            ("send never received", 1)
        ])
    );
    assert_eq!(
        calls(&t),
        map([
            ("MPI_Init", 2),
            ("MPI_Finalize", 2),
            ("MPI_Iallgather", 4),
            ("MPI_Waitall", 4),
            ("MPI_Send", 1),
            ("MPI_Recv", 1),
            ("MPI_Barrier", 2)
        ])
    );
    let ops: Vec<(u64, mtfdb::model::Operation)> = (0..2)
        .flat_map(|rank| t.process_operations(rank).unwrap())
        .collect();
    let bare: Vec<(u32, String, Option<u32>)> = ops
        .iter()
        .filter(|(_, op)| op.flags & mtfdb::model::flags::WITHOUT_RECORDS != 0)
        .map(|(_, op)| (op.rank, t.kind_name(op.kind), op.comm))
        .collect();
    assert_eq!(bare.len(), 5);
    assert!(bare.iter().all(|(_, _, comm)| comm.is_none()));
    assert_eq!(
        bare.iter()
            .filter(|(_, n, _)| n == "MPI_Iallgather")
            .count(),
        4
    );
    // Bare calls stay out of collective matching: only the Barrier forms an instance.
    let instances = t.collective_instances().unwrap();
    assert_eq!(instances.len(), 1);
    assert_eq!(instances[0].kind, OpKind::Barrier);
    // The anomalies name the operations involved.
    for a in t.anomalies().unwrap() {
        if let Anomaly::CallWithoutRecords { op, name, .. } = a {
            let (_, found) = ops.iter().find(|(id, _)| *id == op).unwrap();
            assert_eq!(found.kind, OpKind::Other(name));
        }
    }
}

#[test]
fn a_split_that_leaves_ranks_alone_stays_a_communicator_of_its_own() {
    let (_d, db) = temp_db();
    let t = import(&db, "real-split-self");
    let comms: Vec<(String, u32, Vec<u32>)> = t
        .header()
        .communicators
        .iter()
        .map(|c| (c.name.clone(), c.id, c.members.clone()))
        .collect();
    assert_eq!(
        comms,
        vec![
            ("MPI_COMM_WORLD".to_string(), 0, vec![0, 1, 2]),
            ("MPI_COMM_SELF of rank 0".to_string(), 3, vec![0]),
            ("MPI_COMM_SELF of rank 1".to_string(), 4, vec![1]),
            ("MPI_COMM_SELF of rank 2".to_string(), 5, vec![2]),
            ("alone of rank 0".to_string(), 6, vec![0]),
            ("alone of rank 1".to_string(), 7, vec![1]),
            ("alone of rank 2".to_string(), 8, vec![2]),
        ]
    );
    // Each rank's message to itself keeps the communicator it was sent on.
    assert_eq!(
        messages(&t),
        vec![
            (0, 0, 3, 10),
            (0, 0, 6, 100),
            (1, 1, 4, 10),
            (1, 1, 7, 101),
            (2, 2, 5, 10),
            (2, 2, 8, 102)
        ]
    );
    // A Barrier on "alone" is an instance per rank.
    let mut barriers: Vec<(u32, usize)> = t
        .collective_instances()
        .unwrap()
        .iter()
        .map(|c| (c.comm, c.ops.len()))
        .collect();
    barriers.sort();
    assert_eq!(barriers, vec![(6, 1), (7, 1), (8, 1)]);
    assert!(classes(&t).is_empty(), "{:?}", classes(&t));
}

#[test]
fn garbage_lengths_and_overflowing_sums_are_reported_never_wrapped() {
    let (_d, db) = temp_db();
    let t = import(&db, "real-bad-values");
    assert_eq!(
        classes(&t),
        map([
            ("receive length differs from send", 1),
            ("value overflow", 3)
        ])
    );
    let mismatch = common::length_mismatches(&t);
    assert_eq!(mismatch, vec![(4096, 3_000_000_000_000)]);
    // The message keeps the send's length; the sums saturate instead of wrapping.
    assert_eq!(
        messages(&t),
        vec![(0, 1, 0, 4096), (0, 1, 0, 1 << 63), (0, 1, 0, 1 << 63)]
    );
    assert_eq!(t.summary().message_bytes, u64::MAX);
    assert_eq!(t.pairs()[0].bytes, u64::MAX);
    assert_eq!(t.traffic()[0].p2p_sent_bytes, u64::MAX);
    assert_eq!(t.traffic()[1].p2p_recv_bytes, u64::MAX);
}

/// An archive of more locations than a process may keep files open imports with a bounded
/// number of open files (written by the official library when it is installed).
#[test]
fn many_locations_import_with_a_bounded_number_of_open_files() {
    if !common::otf2_print::writer_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let archive = tmp.path().join("many");
    let ranks = 600;
    let many = ranks.to_string();
    common::otf2_print::write_with(
        "tests/fixtures/otf2/make_real_cases.py",
        &["--many".as_ref(), many.as_ref(), archive.as_os_str()],
    );
    // Far fewer descriptors than locations: the reader must not hold one per location.
    let db = tmp.path().join("db");
    let script = format!(
        "ulimit -n 128 && exec {} --db {} import {} --name many",
        env!("CARGO_BIN_EXE_mtfdb"),
        db.display(),
        archive.display()
    );
    let out = std::process::Command::new("sh")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let db = Database::open(&db).unwrap();
    let t = db.trace("many").unwrap();
    assert_eq!(t.header().processes.len(), ranks);
    assert_eq!(t.summary().messages, ranks as u64);
    assert_eq!(t.summary().message_bytes, 8 * ranks as u64);
    assert_eq!(t.summary().collective_instances, 1);
    assert!(classes(&t).is_empty(), "{:?}", classes(&t));
}

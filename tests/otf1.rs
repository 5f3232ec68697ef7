//! OTF v1 import: the real VampirTrace trace in `../shared/traces/otf1/jacobi` against
//! `otfprint` (Debian's `otf-trace`, the reference reader), a hand-written fixture with
//! collectives and messages on a sub-communicator (`tests/fixtures/otf1/subgroup`, in short
//! and long record forms, plain and compressed as VampirTrace writes them), and damaged
//! input.

mod common;

use common::temp_db;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use flate2::{Compress, Compression, FlushCompress};
use mtfdb::model::{Anomaly, LocationKind, OpKind, Operation};
use mtfdb::SourceFormat;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/otf1/subgroup")
}

fn jacobi() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/traces/otf1/jacobi");
    if dir.exists() {
        Some(dir)
    } else {
        eprintln!("skipped: {} is absent", dir.display());
        None
    }
}

fn have(program: &str) -> bool {
    let found = Command::new(program)
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("skipped: {program} is not installed (apt-get install otf-trace)");
    }
    found
}

/// A copy of the folder `from` in a fresh temporary folder.
fn copy(from: &Path) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let to = tmp.path().join(from.file_name().unwrap());
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let p = entry.unwrap().path();
        std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
        let mut perms = std::fs::metadata(to.join(p.file_name().unwrap()))
            .unwrap()
            .permissions();
        #[allow(clippy::permissions_set_readonly_false)]
        perms.set_readonly(false);
        std::fs::set_permissions(to.join(p.file_name().unwrap()), perms).unwrap();
    }
    (tmp, to)
}

/// Compresses every definitions and events stream of the trace in `dir` as OTF does (one
/// zlib stream per file, flushed, never finished) and removes the plain files.
fn compress_streams(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".def") || name.ends_with(".events") {
            let text = std::fs::read(&p).unwrap();
            let mut z = Compress::new(Compression::default(), true);
            let mut out = Vec::with_capacity(text.len() + 64);
            z.compress_vec(&text, &mut out, FlushCompress::Full)
                .unwrap();
            std::fs::write(dir.join(format!("{name}.z")), out).unwrap();
            std::fs::remove_file(&p).unwrap();
        }
    }
}

/// The number after `key` (up to the next comma) in an `otfprint` line.
fn field(line: &str, key: &str) -> u64 {
    let rest = &line[line
        .find(key)
        .unwrap_or_else(|| panic!("{key:?} in {line}"))
        + key.len()..];
    rest.split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

fn quoted(line: &str, key: &str) -> String {
    let rest = &line[line.find(key).unwrap() + key.len()..];
    rest.split('"').nth(1).unwrap().to_string()
}

/// What `otfprint` shows of a trace, in world ranks (the order of `MPI_COMM_WORLD`).
#[derive(Debug, Default)]
struct Printed {
    /// (sender, receiver) -> (messages, bytes) of the send records.
    sends: BTreeMap<(u32, u32), (u64, u64)>,
    /// (sender, receiver) -> (messages, bytes) of the receive records.
    receives: BTreeMap<(u32, u32), (u64, u64)>,
    /// (rank, MPI function) -> Enter records.
    calls: BTreeMap<(u32, String), u64>,
    /// Enter records by process token.
    enters: BTreeMap<u64, u64>,
    /// Process names by token.
    names: BTreeMap<u64, String>,
}

/// Runs `otfprint` on a copy of the trace in `dir` (decompressed first with `otfdecompress`:
/// `otfprint` reads only plain streams) and parses what it prints.
fn otfprint(dir: &Path, master: &str) -> Printed {
    let (_tmp, copy) = copy(dir);
    for entry in std::fs::read_dir(&copy).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "z") {
            let out = Command::new("otfdecompress").arg(&p).output().unwrap();
            assert!(
                out.status.success(),
                "otfdecompress {}: {out:?}",
                p.display()
            );
        }
    }
    let out = Command::new("otfprint")
        .arg(copy.join(master))
        .output()
        .unwrap();
    assert!(out.status.success(), "otfprint: {out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let mut world: Vec<u64> = Vec::new();
    let mut mpi_group = None;
    let mut functions: BTreeMap<u64, (String, u64)> = BTreeMap::new();
    let mut printed = Printed::default();
    for line in text.lines() {
        if line.contains("DefProcessGroup:") && line.contains("name \"MPI_COMM_WORLD\"") {
            let procs = &line[line.find("procs ").unwrap() + 6..];
            world = procs
                .split(", ")
                .map(|p| p.trim().parse().unwrap())
                .collect();
        } else if line.contains("DefProcess:") {
            printed
                .names
                .insert(field(line, "process "), quoted(line, "name "));
        } else if line.contains("DefFunctionGroup:") && quoted(line, "name ") == "MPI" {
            mpi_group = Some(field(line, "group "));
        } else if line.contains("DefFunction:") {
            functions.insert(
                field(line, "function "),
                (quoted(line, "name "), field(line, "group ")),
            );
        }
    }
    let rank = |token: u64| world.iter().position(|&p| p == token).map(|r| r as u32);
    for line in text.lines() {
        if line.contains(" Enter: ") {
            let process = field(line, "process ");
            *printed.enters.entry(process).or_default() += 1;
            let (name, group) = &functions[&field(line, "function ")];
            if let (Some(r), true) = (rank(process), Some(*group) == mpi_group) {
                *printed.calls.entry((r, name.clone())).or_default() += 1;
            }
        } else if line.contains(" SendMessage: ") || line.contains(" ReceiveMessage: ") {
            let pair = (
                rank(field(line, "sender ")).unwrap(),
                rank(field(line, "receiver ")).unwrap(),
            );
            let map = if line.contains(" SendMessage: ") {
                &mut printed.sends
            } else {
                &mut printed.receives
            };
            let e = map.entry(pair).or_default();
            e.0 += 1;
            e.1 += field(line, "length ");
        }
    }
    printed
}

/// Every operation of the trace, by id.
fn operations(trace: &mtfdb::Trace) -> BTreeMap<u64, Operation> {
    let mut ops = BTreeMap::new();
    for rank in 0..trace.header().processes.len() as u32 {
        ops.extend(trace.process_operations(rank).unwrap());
    }
    ops
}

/// What mtfdb stored, in `otfprint`'s terms: send and receive pairs, MPI calls by name.
fn stored(trace: &mtfdb::Trace) -> Printed {
    let mut mine = Printed::default();
    for p in trace.pairs() {
        mine.sends
            .insert((p.sender, p.receiver), (p.messages, p.bytes));
    }
    for op in operations(trace).values() {
        *mine
            .calls
            .entry((op.rank, trace.kind_name(op.kind)))
            .or_default() += 1;
        if let Some(source) = op.source {
            let e = mine.receives.entry((source, op.rank)).or_default();
            e.0 += 1;
            e.1 += op.recv_bytes;
        }
    }
    mine
}

#[test]
fn the_jacobi_trace_gives_otfprints_messages_bytes_and_calls() {
    let Some(dir) = jacobi() else { return };
    let (_tmp, db) = temp_db();
    let info = db.import(&dir, Some("jacobi")).unwrap();
    assert_eq!(info.format, "otf1");
    assert_eq!(info.processes, 2);
    let trace = db.trace("jacobi").unwrap();
    // The numbers the traces' README lists.
    assert_eq!(info.summary.messages, 200);
    assert_eq!(info.summary.message_bytes, 408_000);
    let mine = stored(&trace);
    assert_eq!(mine.receives.values().map(|r| r.0).sum::<u64>(), 200);
    assert!(trace.messages().unwrap().iter().all(|m| m.bytes == 2040));
    assert!(trace.anomalies().unwrap().is_empty());

    // The CUDA streams are locations of their ranks' processes, not ranks.
    let locations = &trace.header().locations;
    assert_eq!(
        locations
            .iter()
            .map(|l| (l.name.as_str(), l.kind, l.rank, l.group.as_str()))
            .collect::<Vec<_>>(),
        vec![
            (
                "CUDA[0:2] 0:1",
                LocationKind::Accelerator,
                Some(0),
                "Process 0"
            ),
            (
                "CUDA[1:2] 1:1",
                LocationKind::Accelerator,
                Some(1),
                "Process 1"
            ),
        ]
    );

    if !(have("otfprint") && have("otfdecompress")) {
        return;
    }
    let printed = otfprint(&dir, "jacobi_mpi+cuda.otf");
    assert_eq!(mine.sends, printed.sends);
    assert_eq!(mine.receives, printed.receives);
    assert_eq!(mine.calls, printed.calls);
    assert_eq!(printed.sends.values().map(|s| s.0).sum::<u64>(), 200);
    for l in locations {
        let (&token, _) = printed
            .names
            .iter()
            .find(|(_, name)| **name == l.name)
            .unwrap();
        assert_eq!(l.regions, printed.enters[&token], "kernels of {}", l.name);
    }
}

/// (kind, communicator, root, member ranks, bytes sent, bytes received) of every collective
/// instance, sorted.
type Instance = (OpKind, u32, Option<u32>, Vec<u32>, u64, u64);

fn instances(trace: &mtfdb::Trace) -> Vec<Instance> {
    let ops = operations(trace);
    let mut all: Vec<Instance> = trace
        .collective_instances()
        .unwrap()
        .into_iter()
        .map(|c| {
            let mut ranks: Vec<u32> = c.ops.iter().map(|id| ops[id].rank).collect();
            ranks.sort();
            (c.kind, c.comm, c.root, ranks, c.send_bytes, c.recv_bytes)
        })
        .collect();
    all.sort();
    all
}

/// The exact content of the fixture, read plain or compressed.
fn check_fixture(trace: &mtfdb::Trace) {
    let h = trace.header();
    assert_eq!(h.processes.len(), 4);
    let comms: Vec<(u32, &str, Vec<u32>)> = h
        .communicators
        .iter()
        .map(|c| (c.id, c.name.as_str(), c.members.clone()))
        .collect();
    // The node group is not a communicator (it is not marked as one): it is the processor.
    assert_eq!(
        h.processors
            .iter()
            .map(|p| (p.id, p.name.as_str()))
            .collect::<Vec<_>>(),
        vec![(0, "node01")]
    );
    assert!(h.processes.iter().all(|p| p.processor == Some(0)));
    assert_eq!(
        comms,
        vec![
            (1, "MPI_COMM_WORLD", vec![0, 1, 2, 3]),
            (0x10, "MPI Communicator 1", vec![3, 1]),
            (0x11, "MPI Communicator 2", vec![0, 2]),
        ]
    );
    let mut messages: Vec<_> = trace
        .messages()
        .unwrap()
        .iter()
        .map(|m| (m.sender, m.receiver, m.comm, m.tag, m.bytes))
        .collect();
    messages.sort();
    assert_eq!(messages, vec![(1, 3, 0x10, 5, 100), (2, 0, 1, 7, 64)]);
    assert_eq!(
        instances(trace),
        vec![
            (OpKind::Barrier, 1, None, vec![0, 1, 2, 3], 0, 0),
            (OpKind::Bcast, 0x10, Some(3), vec![1, 3], 128, 128),
            (OpKind::Reduce, 0x10, Some(1), vec![1, 3], 16, 16),
            (OpKind::Allreduce, 0x10, None, vec![1, 3], 16, 16),
            (OpKind::Allgather, 0x11, None, vec![0, 2], 32, 64),
        ]
    );
    let ops = operations(trace);
    // The old-style collective record, outside any MPI call, spans its duration (ticks are
    // ns here).
    let allgather: Vec<(u32, u64, u64)> = ops
        .values()
        .filter(|o| o.kind == OpKind::Allgather)
        .map(|o| (o.rank, o.start, o.end))
        .collect();
    assert_eq!(allgather, vec![(0, 0x200, 0x250), (2, 0x200, 0x250)]);
    // The receive of the MPI_Irecv was recorded in the MPI_Wait that completed it.
    let links = trace.request_links().unwrap();
    assert_eq!(links.len(), 1);
    let (irecv, wait) = (&ops[&links[0].request_op], &ops[&links[0].completion_op]);
    assert_eq!(
        (
            irecv.kind,
            irecv.rank,
            irecv.source,
            irecv.recv_tag,
            irecv.recv_bytes
        ),
        (OpKind::Irecv, 0, Some(2), Some(7), 64)
    );
    assert_eq!((irecv.start, irecv.end), (0x300, 0x310));
    assert_eq!(
        (wait.kind, wait.start, wait.end),
        (OpKind::Wait, 0x400, 0x410)
    );
    let mut calls: Vec<(u32, u64, u64)> = trace
        .routine_calls()
        .unwrap()
        .iter()
        .map(|r| (r.rank, r.start, r.end))
        .collect();
    calls.sort();
    assert_eq!(
        calls,
        vec![(0, 0, 0x520), (1, 0, 0x620), (2, 0, 0x520), (3, 0, 0x620)],
        "one call of main per rank"
    );
    assert_eq!(
        trace.anomalies().unwrap(),
        Vec::<Anomaly>::new(),
        "a clean trace"
    );
}

#[test]
fn collectives_and_messages_on_a_sub_communicator_are_exact() {
    let (_tmp, db) = temp_db();
    let info = db.import(fixture().join("sub.otf"), None).unwrap();
    assert_eq!((info.name.as_str(), info.format.as_str()), ("sub", "otf1"));
    assert_eq!(info.summary.messages, 2);
    check_fixture(&db.trace("sub").unwrap());

    if have("otfprint") {
        let printed = otfprint(&fixture(), "sub.otf");
        let mut mine = stored(&db.trace("sub").unwrap());
        // otfprint shows the old-style collective records outside any MPI call as records,
        // not calls; mtfdb makes them operations (checked above).
        mine.calls.retain(|(_, name), _| name != "MPI_Allgather");
        assert_eq!(mine.sends, printed.sends);
        assert_eq!(mine.receives, printed.receives);
        assert_eq!(mine.calls, printed.calls);
    }
}

#[test]
fn compressed_streams_read_as_the_plain_ones() {
    let (_tmp, dir) = copy(&fixture());
    compress_streams(&dir);
    assert!(dir.join("sub.3.events.z").exists() && !dir.join("sub.3.events").exists());
    let (_db_dir, db) = temp_db();
    db.import(&dir, Some("z")).unwrap();
    check_fixture(&db.trace("z").unwrap());
}

/// Imports `trace` into a database that already holds one trace, expects an error whose
/// message contains each of `needles`, and checks the database still holds exactly the
/// earlier trace.
fn rejected(trace: &Path, needles: &[&str]) -> String {
    common::rejected_import(&fixture(), trace, needles)
}

/// The byte offset an error names.
fn offset_of(message: &str) -> u64 {
    message
        .split("byte ")
        .nth(1)
        .and_then(|s| s.split(':').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no offset in {message}"))
}

#[test]
fn a_cut_or_corrupt_zlib_stream_is_refused_with_its_file_and_offset() {
    let (_tmp, dir) = copy(&fixture());
    compress_streams(&dir);
    let events = dir.join("sub.3.events.z");
    let data = std::fs::read(&events).unwrap();
    // Cut short: no longer refused (issue 40); the stream's ranks (2 and 3) are reported
    // cut at the end of the last whole record the cut left.
    let cut = data.len() / 2;
    std::fs::write(&events, &data[..cut]).unwrap();
    let (_db_dir, db) = temp_db();
    db.import(&dir, Some("cut")).unwrap();
    let trace = db.trace("cut").unwrap();
    let plain = std::fs::read(fixture().join("sub.3.events")).unwrap();
    let cuts: Vec<(u32, u32, String, Option<u64>)> = trace
        .anomalies()
        .unwrap()
        .into_iter()
        .filter_map(|a| match a {
            Anomaly::MissingRankData {
                rank,
                thread,
                file,
                cut_at,
                ..
            } => Some((rank, thread, file, cut_at)),
            _ => None,
        })
        .collect();
    assert_eq!(cuts.len(), 2, "{cuts:?}");
    for (i, (rank, thread, file, cut_at)) in cuts.iter().enumerate() {
        assert_eq!((*rank, *thread), (2 + i as u32, 0));
        assert_eq!(file, &events.display().to_string());
        // What was read is whole lines of the stream as written.
        let at = cut_at.unwrap() as usize;
        assert!(at < plain.len() && plain[at - 1] == b'\n', "{cut_at:?}");
    }

    // A damaged zlib header: refused at its start (the decompressor reads the two header
    // bytes before it judges them).
    let mut bad = data.clone();
    bad[0] = 0;
    std::fs::write(&events, &bad).unwrap();
    let message = rejected(&dir, &["sub.3.events.z: byte ", "damaged zlib stream"]);
    assert!(offset_of(&message) <= 2, "{message}");
}

/// The `MissingRankData` anomalies of `trace`, and the others that are not
/// `PeerDataMissing`; and the `PeerDataMissing` ones on point-to-point calls and on
/// collectives.
fn partial_anomalies(trace: &mtfdb::Trace) -> (Vec<Anomaly>, Vec<Anomaly>, usize, usize) {
    let ops = operations(trace);
    let (mut missing, mut others, mut p2p, mut collectives) = (Vec::new(), Vec::new(), 0, 0);
    for a in trace.anomalies().unwrap() {
        match &a {
            Anomaly::MissingRankData { .. } => missing.push(a),
            Anomaly::PeerDataMissing { op, .. } => {
                if ops[op].kind.is_collective() {
                    collectives += 1;
                } else {
                    p2p += 1;
                }
            }
            _ => others.push(a),
        }
    }
    (missing, others, p2p, collectives)
}

#[test]
fn the_real_trace_with_a_stream_missing_imports_the_other_rank() {
    let Some(trace) = jacobi() else { return };
    let (_tmp, db) = temp_db();
    db.import(&trace, Some("full")).unwrap();
    let full = db.trace("full").unwrap();
    let (_copy, dir) = copy(&trace);
    std::fs::remove_file(dir.join("jacobi_mpi+cuda.2.events.z")).unwrap();
    db.import(&dir, Some("partial")).unwrap();
    let partial = db.trace("partial").unwrap();

    // Rank 1 (process 2, stream 2) has no events; rank 0 has all of its own.
    assert_eq!(partial.header().processes.len(), 2);
    assert!(partial.process_operations(1).unwrap().is_empty());
    let ops0 = |t: &mtfdb::Trace| -> Vec<Operation> {
        t.process_operations(0)
            .unwrap()
            .into_iter()
            .map(|(_, o)| o)
            .collect()
    };
    assert_eq!(ops0(&partial), ops0(&full));
    let (missing, others, p2p, collectives) = partial_anomalies(&partial);
    assert_eq!(
        missing,
        vec![Anomaly::MissingRankData {
            rank: 1,
            thread: 0,
            file: format!("{}[.z]", dir.join("jacobi_mpi+cuda.2.events").display()),
            announced: None,
            read: 0,
            cut_at: None,
        }]
    );
    assert!(others.is_empty(), "{others:?}");
    // Every message of the full trace is between ranks 0 and 1: each leaves rank 0's side
    // waiting, for that reason; so does every collective instance.
    assert!(partial.messages().unwrap().is_empty());
    assert_eq!(p2p, full.messages().unwrap().len());
    assert_eq!(collectives, full.collective_instances().unwrap().len());
    assert_eq!((p2p, collectives), (200, 102));
}

#[test]
fn the_real_trace_with_a_stream_cut_short_keeps_what_came_before() {
    let Some(trace) = jacobi() else { return };
    let (_tmp, db) = temp_db();
    db.import(&trace, Some("full")).unwrap();
    let full = db.trace("full").unwrap();
    let (_copy, dir) = copy(&trace);
    let events = dir.join("jacobi_mpi+cuda.2.events.z");
    let data = std::fs::read(&events).unwrap();
    std::fs::write(&events, &data[..15_000]).unwrap();
    db.import(&dir, Some("cut")).unwrap();
    let cut = db.trace("cut").unwrap();

    let (missing, others, p2p, collectives) = partial_anomalies(&cut);
    let [Anomaly::MissingRankData {
        rank: 1,
        thread: 0,
        file,
        announced: None,
        read,
        cut_at: Some(at),
    }] = &missing[..]
    else {
        panic!("{missing:?}");
    };
    assert_eq!(file, &events.display().to_string());
    // The cut falls at the end of a whole line of the decompressed stream.
    let mut text = Vec::new();
    let mut z = flate2::Decompress::new(true);
    let mut buf = vec![0u8; 1 << 20];
    let whole = std::fs::read(trace.join("jacobi_mpi+cuda.2.events.z")).unwrap();
    let _ = z.decompress(&whole, &mut buf, flate2::FlushDecompress::Sync);
    text.extend_from_slice(&buf[..z.total_out() as usize]);
    assert!(*at > 0 && (*at as usize) < text.len() && text[*at as usize - 1] == b'\n');
    assert!(*read > 0);
    // Rank 1's calls are the first of the full trace's (the last one open at the cut may
    // end earlier): compared by kind and start.
    let shape = |t: &mtfdb::Trace| -> Vec<(OpKind, u64)> {
        t.process_operations(1)
            .unwrap()
            .into_iter()
            .map(|(_, o)| (o.kind, o.start))
            .collect()
    };
    let (kept, all) = (shape(&cut), shape(&full));
    assert!(!kept.is_empty() && kept.len() < all.len());
    assert_eq!(kept[..], all[..kept.len()]);
    // Each message of the full trace is matched, or left on rank 0's side for that reason;
    // each instance is complete, or reported for that reason. The only other anomalies are
    // the routines rank 1 had open at the cut.
    let matched = cut.messages().unwrap();
    let full_messages = full.messages().unwrap();
    assert!(!matched.is_empty());
    assert_eq!(matched.len() + p2p, full_messages.len());
    for m in &matched {
        assert!(full_messages
            .iter()
            .any(|f| (f.sender, f.receiver, f.tag, f.bytes, f.send_time)
                == (m.sender, m.receiver, m.tag, m.bytes, m.send_time)));
    }
    let complete = cut
        .collective_instances()
        .unwrap()
        .iter()
        .filter(|c| c.ops.len() == 2)
        .count();
    assert_eq!(
        complete + collectives,
        full.collective_instances().unwrap().len()
    );
    assert!(
        others
            .iter()
            .all(|a| matches!(a, Anomaly::UnclosedRoutine { rank: 1, .. })),
        "{others:?}"
    );
}

/// A copy of the fixture with `old` replaced by `new` in stream file `file`, and the 1-based
/// line where the replacement is.
fn edited(file: &str, old: &str, new: &str) -> (tempfile::TempDir, PathBuf, usize) {
    let (tmp, dir) = copy(&fixture());
    let path = dir.join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let line = text.lines().position(|l| l == old).unwrap() + 1;
    std::fs::write(
        &path,
        text.replacen(&format!("\n{old}\n"), &format!("\n{new}\n"), 1),
    )
    .unwrap();
    (tmp, dir, line)
}

#[test]
fn a_malformed_record_is_refused_with_its_file_line_and_column() {
    let (_tmp, dir, line) = edited("sub.2.events", "S4L64T5C10", "S4L64C10");
    rejected(
        &dir,
        &[&format!(
            "sub.2.events:{line}:6: bad event record: expected T or TAG (message tag)"
        )],
    );
    let (_tmp, dir, line) = edited("sub.0.def", "DF9G2NM\"MPI_Recv\"", "DF9NM\"MPI_Recv\"");
    rejected(
        &dir,
        &[&format!(
            "sub.0.def:{line}:4: bad definition record: expected G or GROUP (function group)"
        )],
    );
    // A record cut short at the end of a plain stream is no longer refused (issue 40): the
    // stream's rank is reported cut at the start of that last line.
    let (_tmp, dir) = copy(&fixture());
    let path = dir.join("sub.1.events");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, &text[..text.len() - 2]).unwrap();
    let (_db_dir, db) = temp_db();
    db.import(&dir, Some("cut")).unwrap();
    let last_line = text[..text.len() - 1].rfind('\n').unwrap() + 1;
    let cut: Vec<(u32, Option<u64>)> = db
        .trace("cut")
        .unwrap()
        .anomalies()
        .unwrap()
        .into_iter()
        .filter_map(|a| match a {
            Anomaly::MissingRankData { rank, cut_at, .. } => Some((rank, cut_at)),
            _ => None,
        })
        .collect();
    assert_eq!(cut, vec![(0, Some(last_line as u64))]);
}

/// The anomalies of the fixture edited so (`old` replaced by `new` in `file`), imported.
fn edited_anomalies(file: &str, old: &str, new: &str) -> Vec<Anomaly> {
    let (_tmp, dir, _) = edited(file, old, new);
    let (_db_dir, db) = temp_db();
    db.import(&dir, Some("edited")).unwrap();
    db.trace("edited").unwrap().anomalies().unwrap()
}

#[test]
fn references_to_undefined_things_are_skipped_and_reported() {
    // Issue 40: a reference to something the definitions do not define is no undecodable
    // byte: the record is skipped and reported, the rest imports. (Function 99's entry and
    // its leave, a receive on an undefined process group; its MPI_Recv is then kept as a
    // call without its records.)
    let whats = |anomalies: &[Anomaly]| -> Vec<String> {
        anomalies
            .iter()
            .filter_map(|a| match a {
                Anomaly::SkippedRecord { what, .. } => Some(what.clone()),
                _ => None,
            })
            .collect()
    };
    let a = edited_anomalies("sub.2.events", "E8", "E99");
    assert!(
        whats(&a).contains(&"an entry of function 99, which is not defined".to_string()),
        "{a:?}"
    );
    let a = edited_anomalies(
        "sub.3.events",
        "RECEIVE 2 LEN 64 TAG 5 COMM 10",
        "RECEIVE 2 LEN 64 TAG 5 COMM 20",
    );
    assert_eq!(
        whats(&a),
        vec!["a message on process group 20, which is not a defined communicator".to_string()],
        "{a:?}"
    );
    // Rank 3's MPI_Recv is kept without its records; rank 1's send to it, on communicator
    // 0x10, is then never received.
    assert!(
        matches!(
            a[..],
            [
                Anomaly::SkippedRecord { rank: Some(3), .. },
                Anomaly::CallWithoutRecords { rank: 3, .. },
                Anomaly::UnmatchedSend {
                    rank: 1,
                    dest: 3,
                    comm: 0x10,
                    tag: 5,
                    ..
                },
            ]
        ),
        "{a:?}"
    );
}

#[test]
fn time_going_back_is_refused_and_a_broken_rule_is_kept() {
    let (_tmp, dir, line) = edited("sub.2.events", "510", "50");
    rejected(
        &dir,
        &[&format!(
            "sub.2.events:{line}:1: time goes backwards: time 50 is before the previous time 500"
        )],
    );
    // A rule only the import's checks see (the reader takes the send as it is): OTF v1 is a
    // foreign format, so the send to process 1 (rank 0), which is no member of communicator
    // 10, is kept without that peer, unmatched, and reported as PeerOutsideCommunicator.
    let (_tmp, dir, _) = edited("sub.2.events", "S4L64T5C10", "S1L64T5C10");
    let (_db_dir, db) = temp_db();
    db.import(&dir, Some("peer")).unwrap();
    let trace = db.trace("peer").unwrap();
    let broken: Vec<Anomaly> = trace
        .anomalies()
        .unwrap()
        .into_iter()
        .filter(|a| matches!(a, Anomaly::BrokenRule { .. }))
        .collect();
    let [Anomaly::BrokenRule {
        rule,
        rank: Some(rank),
        time: Some(time),
        op: Some(op),
        comm,
        value,
        ..
    }] = broken.as_slice()
    else {
        panic!("{broken:?}")
    };
    assert_eq!(
        (*rule, *value),
        (mtfdb::model::Rule::PeerOutsideCommunicator, Some(0))
    );
    let send = trace
        .process_operations(*rank)
        .unwrap()
        .into_iter()
        .find(|(id, _)| id == op)
        .unwrap()
        .1;
    assert_eq!(
        (send.kind, send.start, send.dest),
        (OpKind::Send, *time, None)
    );
    assert_eq!(*comm, send.comm);
    // Its receiver's receive is the one left unmatched.
    assert_eq!(trace.summary().anomaly_count("receive never matched"), 1);
    // A missing stream is no longer refused (issue 40): see
    // `the_real_trace_with_a_stream_missing_imports_the_other_rank`.
}

#[test]
fn records_of_unknown_kinds_are_skipped_and_reported() {
    let (_tmp, dir, _) = edited("sub.1.events", "PB", "QQQ 5");
    let (_db_dir, db) = temp_db();
    db.import(&dir, Some("q")).unwrap();
    let trace = db.trace("q").unwrap();
    assert_eq!(trace.summary().messages, 2);
    let anomalies = trace.anomalies().unwrap();
    assert_eq!(anomalies.len(), 1, "{anomalies:?}");
    assert!(
        matches!(&anomalies[0], Anomaly::SkippedRecord { rank: Some(0), time: Some(0), what } if what.contains("QQQ 5")),
        "{anomalies:?}"
    );
}

#[test]
fn the_format_is_detected_from_the_master_file_or_folder() {
    let (_db_dir, db) = temp_db();
    db.import(fixture(), None).unwrap();
    db.import(fixture().join("sub.otf"), None).unwrap();
    db.import_as(fixture(), Some("forced"), SourceFormat::Otf1)
        .unwrap();
    assert_eq!(
        db.trace_names().unwrap(),
        vec!["forced".to_string(), "sub".into(), "subgroup".into()]
    );
    assert_eq!(SourceFormat::from_name("otf1").unwrap(), SourceFormat::Otf1);
    let err = SourceFormat::from_name("vtf").unwrap_err().to_string();
    for name in ["mtf", "otf2", "otf1"] {
        assert!(err.contains(name), "{err}");
    }
    // A stream of the trace names the master file to give instead.
    let err = db
        .import(fixture().join("sub.0.def"), None)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        format!(
            "{}: a stream of an OTF v1 trace, not the trace: give {}, the master file",
            fixture().join("sub.0.def").display(),
            fixture().join("sub.otf").display()
        )
    );
    // An unknown file: the error names every format mtfdb reads.
    let other = tempfile::tempdir().unwrap();
    let notes = other.path().join("notes.txt");
    std::fs::write(&notes, "hello\n").unwrap();
    let err = db.import(&notes, None).unwrap_err().to_string();
    for needle in ["MTF text", "OTF2", "OTF v1"] {
        assert!(err.contains(needle), "{err}");
    }
    // An MTF text file forced as OTF v1 is refused, naming it.
    let mtf = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/traces/stencil2d-16.mtf");
    let err = db
        .import_as(&mtf, Some("x"), SourceFormat::Otf1)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("stencil2d-16.mtf") && err.contains("not an OTF v1 master file"),
        "{err}"
    );
}

#[test]
fn the_command_line_imports_a_master_file() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mtfdb"))
        .arg("--db")
        .arg(tmp.path().join("db"))
        .arg("import")
        .arg(fixture().join("sub.otf"))
        .args(["--format", "otf1"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.contains("imported")
            && stdout.contains("as \"sub\"")
            && stdout.contains("2 messages"),
        "{stdout}"
    );
}

#[test]
fn the_jacobi_host_is_a_processor_and_only_mpi_communicators_are_listed() {
    let Some(dir) = jacobi() else { return };
    let (tmp, db) = temp_db();
    db.import(&dir, Some("jacobi")).unwrap();
    let trace = db.trace("jacobi").unwrap();
    let h = trace.header();
    // otfprint's definitions: groups `All`, the node `n04`, `GPU_COMM_GLOBAL`, `GPU_GROUP`,
    // `GPU_MASTER_GROUP` (all with the CUDA streams), `MPI_COMM_WORLD` (processes 1, 2) and
    // `MPI_COMM_SELF 0`/`1`, the last three and GPU_COMM_GLOBAL marked IsCommunicator.
    // Only MPI's are communicators; the world is the trace's own, none is invented.
    let comms: Vec<(u32, &str, Vec<u32>)> = h
        .communicators
        .iter()
        .map(|c| (c.id, c.name.as_str(), c.members.clone()))
        .collect();
    assert_eq!(
        comms,
        vec![
            (1_000_000_005, "MPI_COMM_WORLD", vec![0, 1]),
            (1_000_000_006, "MPI_COMM_SELF 0", vec![0]),
            (1_000_000_007, "MPI_COMM_SELF 1", vec![1]),
        ]
    );
    // The node group names the host both ranks ran on.
    assert_eq!(
        h.processors
            .iter()
            .map(|p| (p.id, p.name.as_str()))
            .collect::<Vec<_>>(),
        vec![(0, "n04")]
    );
    assert!(h.processes.iter().all(|p| p.processor == Some(0)));
    if have("otfprint") && have("otfdecompress") {
        let (_t, copy_dir) = copy(&dir);
        for entry in std::fs::read_dir(&copy_dir).unwrap() {
            let p = entry.unwrap().path();
            if p.extension().is_some_and(|e| e == "z") {
                assert!(Command::new("otfdecompress")
                    .arg(&p)
                    .status()
                    .unwrap()
                    .success());
            }
        }
        let out = Command::new("otfprint")
            .arg(copy_dir.join("jacobi_mpi+cuda.otf"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        // The processor is the group otfprint shows beside `All` with no attributes.
        assert!(text.contains("group 1000000001, name \"n04\", procs 1, 1048577, 2, 1048578"));
        assert!(!text.contains("process 1000000001, attr_token"));
    }
    drop(trace);
    let out = common::succeeded(common::mtfdb_output(
        &tmp.path().join("db"),
        &["info", "jacobi"],
    ));
    assert!(
        out.contains("processors: 1\n  0    n04              ranks 0-1\n"),
        "{out}"
    );
    assert!(
        out.contains("communicators: 3\n  MPI_COMM_WORLD (id 1000000005): 2 members: 0-1\n  MPI_COMM_SELF 0 (id 1000000006): 1 members: 0\n  MPI_COMM_SELF 1 (id 1000000007): 1 members: 1\n"),
        "{out}"
    );
}

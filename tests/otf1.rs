//! OTF v1 import: the real VampirTrace trace in `../shared/traces/otf1/jacobi` against
//! `otfprint` (Debian's `otf-trace`, the reference reader), a hand-written fixture with
//! collectives and messages on a sub-communicator (`tests/fixtures/otf1/subgroup`, in short
//! and long record forms, plain and compressed as VampirTrace writes them), and damaged
//! input.

mod common;

use common::reported::assert_rule_reported;
use common::temp_db;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use flate2::{Compress, Compression, FlushCompress};
use mtfdb::model::{Anomaly, LocationKind, OpKind, Operation, Rule};
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
    // byte: the record is skipped and reported, the rest imports (function 99's entry and
    // its leave). A reference that breaks a rule is the rule's anomaly.
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
    // A receive on the node group 0x20, a group but no communicator: it names an unknown
    // communicator (issue 40: reported as the rule). Rank 3's MPI_Recv is kept without it,
    // and rank 1's send to it, on communicator 0x10, matches no receive: one that rank 3
    // made without a usable envelope may have received it.
    let a = edited_anomalies(
        "sub.3.events",
        "RECEIVE 2 LEN 64 TAG 5 COMM 10",
        "RECEIVE 2 LEN 64 TAG 5 COMM 20",
    );
    assert!(
        matches!(
            a[..],
            [
                Anomaly::BrokenRule {
                    rule: Rule::UnknownCommunicator,
                    rank: Some(3),
                    value: Some(0x20),
                    ..
                },
                Anomaly::ReceiveNotRecorded {
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

/// A Table 3.1 rule broken by editing the fixture, and what the import must report.
struct RuleCase {
    rule: Rule,
    /// (stream file, a whole line of it, what replaces it), applied in turn.
    edits: &'static [(&'static str, &'static str, &'static str)],
    /// The anomaly's row in `SELECT ANOMALIES`: rank, call, time (ns; the fixture's ticks are
    /// ns from 0). Header faults have none of them.
    at: (&'static str, &'static str, &'static str),
    /// The value recorded that broke the rule (a world rank, or the process token when it
    /// is no rank; a group token; a time; bytes).
    value: Option<u64>,
    /// (sender, receiver) of the messages still matched.
    messages: &'static [(u32, u32)],
    /// Collective instances.
    instances: usize,
}

const BOTH_MESSAGES: &[(u32, u32)] = &[(1, 3), (2, 0)];
const WORLD_BARRIER: &str = "COPB6H1C1RT0S0R0";
const RANK1_BCAST: &str = "COPB7H2C10RT4S0R80";
const COMM2: &str = "DPG11M1,3,NM\"MPI Communicator 2\"";

/// Every rule an OTF v1 trace can break (docs/formats.md, "Table 3.1 rules by reader", says
/// why the others cannot be written), on the fixture: process 1 is rank 0, 2 rank 1, 3 and
/// 4 ranks 2 and 3; group 1 is the world, 0x10 ranks 3 and 1, 0x11 ranks 0 and 2.
const RULE_CASES: &[RuleCase] = &[
    RuleCase {
        rule: Rule::DuplicateDeclaration,
        edits: &[(
            "sub.0.def",
            COMM2,
            "DPG11M1,3,NM\"MPI Communicator 2\"\nDPG11M2,4,NM\"again\"",
        )],
        at: ("", "", ""),
        value: Some(0x11),
        messages: BOTH_MESSAGES,
        instances: 5,
    },
    RuleCase {
        rule: Rule::EmptyCommunicator,
        edits: &[
            (
                "sub.0.def",
                COMM2,
                "DPG11M1,3,NM\"MPI Communicator 2\"\nDPG12MNM\"MPI Communicator 3\"",
            ),
            ("sub.0.def", "DPGA11V1", "DPGA11V1\nDPGA12V1"),
        ],
        at: ("", "", ""),
        value: None,
        messages: BOTH_MESSAGES,
        instances: 5,
    },
    RuleCase {
        rule: Rule::UnknownMember,
        edits: &[("sub.0.def", COMM2, "DPG11M1,3,99,NM\"MPI Communicator 2\"")],
        at: ("", "", ""),
        value: Some(0x99),
        messages: BOTH_MESSAGES,
        instances: 5,
    },
    RuleCase {
        rule: Rule::DuplicateMember,
        edits: &[("sub.0.def", COMM2, "DPG11M1,3,1,NM\"MPI Communicator 2\"")],
        at: ("", "", ""),
        value: Some(0),
        messages: BOTH_MESSAGES,
        instances: 5,
    },
    // MPI_COMM_WORLD listing a process twice was refused before issue 40.
    RuleCase {
        rule: Rule::DuplicateMember,
        edits: &[(
            "sub.0.def",
            "DPG1M1,2,3,4,NM\"MPI_COMM_WORLD\"",
            "DPG1M1,2,3,4,2,NM\"MPI_COMM_WORLD\"",
        )],
        at: ("", "", ""),
        value: Some(1),
        messages: BOTH_MESSAGES,
        instances: 5,
    },
    // Records of process 0x99, which the trace never defines, at 0x520.
    RuleCase {
        rule: Rule::UnknownRank,
        edits: &[("sub.1.events", "PE", "PE\n*99\nE1")],
        at: ("", "", "1312"),
        value: Some(0x99),
        messages: BOTH_MESSAGES,
        instances: 5,
    },
    // Rank 1's MPI_Send, entered at 0x500, is left at 0x50.
    RuleCase {
        rule: Rule::EndBeforeStart,
        edits: &[("sub.2.events", "510", "50")],
        at: ("1", "MPI_Send", "1280"),
        value: Some(0x50),
        messages: BOTH_MESSAGES,
        instances: 5,
    },
    // Rank 1's MPI_Finalize at 0x450, after its MPI_Send at 0x500: moved to 0x500.
    RuleCase {
        rule: Rule::TimeGoesBackwards,
        edits: &[("sub.2.events", "600", "450")],
        at: ("1", "MPI_Finalize", "1280"),
        value: Some(0x450),
        messages: BOTH_MESSAGES,
        instances: 5,
    },
    // Rank 1 leaves main at 5, after its MPI_Finalize at 0x600.
    RuleCase {
        rule: Rule::RoutineTimeGoesBackwards,
        edits: &[("sub.2.events", "620", "5")],
        at: ("1", "", "1536"),
        value: Some(5),
        messages: BOTH_MESSAGES,
        instances: 5,
    },
    // Rank 3's receive names group 0x99, which the definitions lack: rank 1's send to it
    // matches no receive (one rank 3 made without a usable communicator may have had it).
    RuleCase {
        rule: Rule::UnknownCommunicator,
        edits: &[(
            "sub.3.events",
            "RECEIVE 2 LEN 64 TAG 5 COMM 10",
            "RECEIVE 2 LEN 64 TAG 5 COMM 99",
        )],
        at: ("3", "MPI_Recv", "1280"),
        value: Some(0x99),
        messages: &[(2, 0)],
        instances: 5,
    },
    // Rank 0 enters the world barrier on group 0x10, which it is no member of.
    RuleCase {
        rule: Rule::RankOutsideCommunicator,
        edits: &[("sub.1.events", WORLD_BARRIER, "COPB6H1C10RT0S0R0")],
        at: ("0", "MPI_Barrier", "256"),
        value: Some(0x10),
        messages: BOTH_MESSAGES,
        instances: 5,
    },
    // Rank 1 sends to process 1 (rank 0), no member of group 0x10.
    RuleCase {
        rule: Rule::PeerOutsideCommunicator,
        edits: &[("sub.2.events", "S4L64T5C10", "S1L64T5C10")],
        at: ("1", "MPI_Send", "1280"),
        value: Some(0),
        messages: &[(2, 0)],
        instances: 5,
    },
    // … and to process 0x99, which is no process at all.
    RuleCase {
        rule: Rule::PeerOutsideCommunicator,
        edits: &[("sub.2.events", "S4L64T5C10", "S99L64T5C10")],
        at: ("1", "MPI_Send", "1280"),
        value: Some(0x99),
        messages: &[(2, 0)],
        instances: 5,
    },
    // Rank 0's world barrier names process 1 as its root.
    RuleCase {
        rule: Rule::UnexpectedRoot,
        edits: &[("sub.1.events", WORLD_BARRIER, "COPB6H1C1RT1S0R0")],
        at: ("0", "MPI_Barrier", "256"),
        value: Some(0),
        messages: BOTH_MESSAGES,
        instances: 5,
    },
    // Rank 1's MPI_Bcast at 0x200 names no root (process 0 is none).
    RuleCase {
        rule: Rule::MissingRoot,
        edits: &[("sub.2.events", RANK1_BCAST, "COPB7H2C10RT0S0R80")],
        at: ("1", "MPI_Bcast", "512"),
        value: None,
        messages: BOTH_MESSAGES,
        instances: 5,
    },
    // … roots process 1 (rank 0), no member of group 0x10 …
    RuleCase {
        rule: Rule::RootOutsideCommunicator,
        edits: &[("sub.2.events", RANK1_BCAST, "COPB7H2C10RT1S0R80")],
        at: ("1", "MPI_Bcast", "512"),
        value: Some(0),
        messages: BOTH_MESSAGES,
        instances: 5,
    },
    // … or process 0x99, no process at all.
    RuleCase {
        rule: Rule::RootOutsideCommunicator,
        edits: &[("sub.2.events", RANK1_BCAST, "COPB7H2C10RT99S0R80")],
        at: ("1", "MPI_Bcast", "512"),
        value: Some(0x99),
        messages: BOTH_MESSAGES,
        instances: 5,
    },
    // Rank 0's world barrier records 4 bytes sent and received.
    RuleCase {
        rule: Rule::BytesOnBarrier,
        edits: &[("sub.1.events", WORLD_BARRIER, "COPB6H1C1RT0S4R4")],
        at: ("0", "MPI_Barrier", "256"),
        value: Some(4),
        messages: BOTH_MESSAGES,
        instances: 5,
    },
];

/// A copy of the fixture with every edit of `edits` made.
fn edited_all(edits: &[(&str, &str, &str)]) -> (tempfile::TempDir, PathBuf) {
    let (tmp, dir) = copy(&fixture());
    for (file, old, new) in edits {
        let path = dir.join(file);
        // A line between two ends of line (the first one after the start of the file).
        let text = format!("\n{}", std::fs::read_to_string(&path).unwrap());
        let (old, new) = (format!("\n{old}\n"), format!("\n{new}\n"));
        assert!(text.contains(&old), "{file} has no line {old:?}");
        std::fs::write(&path, &text.replacen(&old, &new, 1)[1..]).unwrap();
    }
    (tmp, dir)
}

/// (rank, call name) of every operation, in rank order.
fn calls_by_rank(trace: &mtfdb::Trace) -> Vec<(u32, String)> {
    operations(trace)
        .values()
        .map(|o| (o.rank, trace.kind_name(o.kind)))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

#[test]
fn every_rule_an_otf1_trace_can_break_imports_as_an_anomaly_of_its_class() {
    let (_clean_dir, clean_db) = temp_db();
    clean_db.import(fixture(), Some("clean")).unwrap();
    let clean = clean_db.trace("clean").unwrap();
    check_fixture(&clean);
    let (clean_calls, clean_comms) = (calls_by_rank(&clean), clean.header().communicators.clone());
    for (i, case) in RULE_CASES.iter().enumerate() {
        let class = case.rule.class();
        let label = format!("case {i} ({class})");
        let (_tmp, dir) = edited_all(case.edits);
        let db = dir.parent().unwrap().join("db");
        let (rank, call, time) = case.at;
        let trace = assert_rule_reported(
            &db,
            &dir,
            "t",
            case.rule,
            &[(rank, call, time)],
            case.value,
            &label,
        );
        // The rest of the trace is the fixture's: every call, the communicators, the
        // messages the fault leaves matched, the collective instances.
        assert_eq!(calls_by_rank(&trace), clean_calls, "{label}");
        assert_eq!(trace.header().communicators, clean_comms, "{label}");
        let mut messages: Vec<(u32, u32)> = trace
            .messages()
            .unwrap()
            .iter()
            .map(|m| (m.sender, m.receiver))
            .collect();
        messages.sort();
        assert_eq!(messages, case.messages, "{label}");
        assert_eq!(
            trace.collective_instances().unwrap().len(),
            case.instances,
            "{label}"
        );
    }
}

#[test]
fn a_time_before_every_streams_first_time_is_kept_as_the_first() {
    // Rank 1 leaves MPI_Finalize at tick 0 after the trace's first time moved to 5: no
    // stream starts earlier, so the time is kept as the trace's first and counted.
    let (_tmp, dir) = edited_all(&[
        ("sub.1.events", "0", "5"),
        ("sub.2.events", "0", "5"),
        ("sub.3.events", "0", "5"),
        ("sub.2.events", "610", "0"),
    ]);
    let (_db_dir, db) = temp_db();
    db.import(&dir, Some("early")).unwrap();
    let trace = db.trace("early").unwrap();
    let anomalies = trace.anomalies().unwrap();
    assert!(
        anomalies.iter().any(|a| matches!(a, Anomaly::ValueOverflow { rank: Some(1), what } if what == "1 time before the trace's first time 5, kept as its first time")),
        "{anomalies:?}"
    );
    let finalize = operations(&trace)
        .into_values()
        .find(|o| o.rank == 1 && trace.kind_name(o.kind) == "MPI_Finalize")
        .unwrap();
    // Entered at 0x600 - 5 ns, left at the trace's first time: it ends at its start.
    assert_eq!((finalize.start, finalize.end), (0x5fb, 0x5fb));
    assert!(
        anomalies.iter().any(|a| matches!(
            a,
            Anomaly::BrokenRule {
                rule: Rule::EndBeforeStart,
                rank: Some(1),
                value: Some(0),
                ..
            }
        )),
        "{anomalies:?}"
    );
}

#[test]
fn records_no_process_of_a_stream_read_can_hold_are_skipped_and_reported() {
    // Issue 40: once refused. Process 5 is defined but the master file maps it to no stream;
    // rank 0's stream holds an entry of it at 0x520, and an entry before any time line.
    let (_tmp, dir) = edited_all(&[
        (
            "sub.0.def",
            "DP4NM\"Process 3\"",
            "DP4NM\"Process 3\"\nDP5NM\"helper\"",
        ),
        ("sub.1.events", "PE", "PE\n*5\nE1"),
        ("sub.1.events", "0", "E1\n0"),
    ]);
    let (_db_dir, db) = temp_db();
    db.import(&dir, Some("stray")).unwrap();
    let trace = db.trace("stray").unwrap();
    let skipped: Vec<(Option<u32>, Option<u64>, String)> = trace
        .anomalies()
        .unwrap()
        .into_iter()
        .filter_map(|a| match a {
            Anomaly::SkippedRecord { rank, time, what } => Some((rank, time, what)),
            _ => None,
        })
        .collect();
    let events = dir.join("sub.1.events").display().to_string();
    assert_eq!(
        skipped,
        vec![
            (
                None,
                None,
                format!("an event record before the first time and process lines of {events} (line 1)")
            ),
            (
                None,
                Some(0x520),
                format!("a record of process 5 in {events}, which the master file maps to no stream read")
            ),
        ]
    );
    assert_eq!(trace.summary().messages, 2);
    assert_eq!(trace.collective_instances().unwrap().len(), 5);
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

//! Paraver import: the two real traces in `../shared/traces/paraver` against an oracle this
//! file computes from their `.prv` and `.pcf` text with its own small parser; fixtures in
//! `tests/fixtures/paraver` for what the real traces lack (several applications, several
//! threads per task, old-style records alone, a cut trace, no `.pcf`); damaged inputs; the
//! command line's format detection.

mod common;

use common::temp_db;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use mtfdb::model::{flags, Anomaly, LocationKind, OpKind, Operation};
use mtfdb::{Error, Trace};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/paraver")
        .join(name)
}

/// A real trace's `.prv`, or `None` (with a message) when `../shared/traces` is absent.
fn shared(folder: &str, file: &str) -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/traces/paraver")
        .join(folder)
        .join(file);
    if path.exists() {
        Some(path)
    } else {
        eprintln!("skipped: {} is absent", path.display());
        None
    }
}

// ---------------------------------------------------------------------------------------
// The oracle: what the .prv and .pcf text says, read without mtfdb.

/// What a Paraver trace holds, counted from its text.
#[derive(Debug, Default)]
struct Oracle {
    /// Tasks of each application.
    tasks: Vec<u64>,
    /// The MPI application (from 1): the one the communicator lines name.
    mpi_app: u64,
    /// (sender task, receiver task) within the MPI application, from 0 → (records, bytes).
    pairs: BTreeMap<(u32, u32), (u64, u64)>,
    /// Communication records with an end outside the MPI application.
    foreign_records: u64,
    /// MPI calls by their .pcf name: a non-zero value opens a call unless it repeats the
    /// value of the call open on that thread (MPItrace's way of closing some calls).
    calls: BTreeMap<String, u64>,
    /// Sends and receives (by call name) of each thread.
    /// Old-style global operations: (communicator, operation id) → records.
    global_ops: BTreeMap<(u64, u64), u64>,
    /// Old-style global operations: (communicator, operation id) → root fields seen.
    global_roots: BTreeMap<(u64, u64), Vec<u64>>,
    /// Communicator id → its tasks (from 1) as listed.
    comms: BTreeMap<u64, Vec<i64>>,
    /// User-function entries.
    function_entries: u64,
    /// Type:value pairs of event records, per (application, task, thread).
    thread_events: BTreeMap<(u64, u64, u64), u64>,
}

/// The names the .pcf gives the values of Extrae's MPI call types.
fn pcf_mpi_names(pcf: &Path) -> BTreeMap<(u64, u64), String> {
    let text = std::fs::read_to_string(pcf).unwrap();
    let mut names = BTreeMap::new();
    let mut types: Vec<u64> = Vec::new();
    let mut in_values = false;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line == "EVENT_TYPE" {
            types.clear();
            in_values = false;
        } else if line == "VALUES" {
            in_values = true;
        } else if in_values {
            let (v, name) = line.split_once(char::is_whitespace).unwrap();
            for &t in &types {
                names.insert((t, v.parse().unwrap()), name.trim().to_string());
            }
        } else {
            let parts: Vec<&str> = line.split_whitespace().collect();
            if parts.len() >= 2 {
                if let Ok(t) = parts[1].parse::<u64>() {
                    if (50_000_001..=50_000_005).contains(&t) {
                        types.push(t);
                    }
                }
            }
        }
    }
    names
}

/// Splits at `sep` outside parentheses.
fn split_top(s: &str, sep: char) -> Vec<&str> {
    let (mut depth, mut start, mut out) = (0, 0, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            c if c == sep && depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn oracle(prv: &Path, pcf: Option<&Path>) -> Oracle {
    let names = pcf.map(pcf_mpi_names).unwrap_or_default();
    let text = std::fs::read_to_string(prv).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let after_date = &header[header.find("):").unwrap() + 2..];
    // duration : nodes : applications : application lists [, communicators]
    let fields = split_top(after_date, ':');
    let apps: Vec<&str> = fields[3..]
        .iter()
        .flat_map(|f| split_top(f, ','))
        .filter(|a| a.contains('('))
        .collect();
    let mut o = Oracle {
        tasks: apps
            .iter()
            .map(|a| a[..a.find('(').unwrap()].parse().unwrap())
            .collect(),
        ..Oracle::default()
    };
    let mut stacks: BTreeMap<(u64, u64, u64), Vec<(u64, u64)>> = BTreeMap::new();
    for line in lines {
        let f: Vec<&str> = line.split(':').collect();
        let n = |i: usize| -> u64 { f[i].parse().unwrap() };
        match f[0] {
            "c" => {
                if o.mpi_app == 0 {
                    o.mpi_app = n(1);
                }
                o.comms
                    .insert(n(2), f[4..].iter().map(|m| m.parse().unwrap()).collect());
            }
            "2" => {
                let thread = (n(2), n(3), n(4));
                *o.thread_events.entry(thread).or_default() += (f.len() as u64 - 6) / 2;
                for pair in f[6..].chunks(2) {
                    let (t, v): (u64, u64) = (pair[0].parse().unwrap(), pair[1].parse().unwrap());
                    if t == 60_000_019 && v != 0 {
                        o.function_entries += 1;
                    }
                    if !(50_000_001..=50_000_005).contains(&t) {
                        continue;
                    }
                    let stack = stacks.entry(thread).or_default();
                    if v == 0 {
                        let i = stack.iter().rposition(|c| c.0 == t).unwrap();
                        stack.truncate(i);
                    } else if stack.last() == Some(&(t, v)) {
                        stack.pop();
                    } else {
                        stack.push((t, v));
                        let name = names.get(&(t, v)).cloned().unwrap_or(format!("{t}:{v}"));
                        *o.calls.entry(name).or_default() += 1;
                    }
                }
            }
            "3" => {
                if n(2) == o.mpi_app && n(8) == o.mpi_app {
                    let pair = o
                        .pairs
                        .entry((n(3) as u32 - 1, n(9) as u32 - 1))
                        .or_default();
                    pair.0 += 1;
                    pair.1 += n(13);
                } else {
                    o.foreign_records += 1;
                }
            }
            "4" => {
                *o.global_ops.entry((n(6), n(9))).or_default() += 1;
                o.global_roots.entry((n(6), n(9))).or_default().push(n(10));
            }
            _ => {}
        }
    }
    if o.mpi_app == 0 {
        o.mpi_app = 1;
    }
    o
}

// ---------------------------------------------------------------------------------------
// What mtfdb stored.

/// Messages and bytes per (sender, receiver), as stored.
fn stored_pairs(trace: &Trace) -> BTreeMap<(u32, u32), (u64, u64)> {
    trace
        .pairs()
        .iter()
        .map(|p| ((p.sender, p.receiver), (p.messages, p.bytes)))
        .collect()
}

/// Operations by call name, as stored.
fn stored_calls(trace: &Trace) -> BTreeMap<String, u64> {
    let mut calls = BTreeMap::new();
    for (kind, n) in &trace.summary().by_kind {
        *calls.entry(trace.kind_name(*kind)).or_default() += n;
    }
    calls
}

fn all_operations(trace: &Trace) -> Vec<Operation> {
    (0..trace.header().processes.len() as u32)
        .flat_map(|r| trace.process_operations(r).unwrap())
        .map(|(_, op)| op)
        .collect()
}

/// The `what` of every `SkippedRecord` anomaly.
fn skipped(trace: &Trace) -> Vec<String> {
    trace
        .anomalies()
        .unwrap()
        .into_iter()
        .filter_map(|a| match a {
            Anomaly::SkippedRecord { what, .. } => Some(what),
            _ => None,
        })
        .collect()
}

/// The calls kept without their records (`CallWithoutRecords`): (rank, name, start).
fn without_records(trace: &Trace) -> Vec<(u32, String, u64)> {
    let mut out = Vec::new();
    for a in trace.anomalies().unwrap() {
        if let Anomaly::CallWithoutRecords { op, rank, name } = a {
            let ops = trace.process_operations(rank).unwrap();
            let (_, call) = ops
                .iter()
                .find(|(id, _)| *id == op)
                .expect("the call is stored");
            assert_eq!(call.kind, OpKind::Other(name));
            assert!(call.flags & flags::WITHOUT_RECORDS != 0);
            assert_eq!((call.comm, call.dest, call.source), (None, None, None));
            out.push((rank, trace.string(name).unwrap().to_string(), call.start));
        }
    }
    out.sort();
    out
}

fn anomaly_count(trace: &Trace, kind: &str) -> u64 {
    trace
        .summary()
        .anomalies
        .iter()
        .find(|(k, _)| k == kind)
        .map_or(0, |(_, n)| *n)
}

// ---------------------------------------------------------------------------------------
// The real traces.

#[test]
fn lulesh_messages_bytes_and_calls_equal_the_prv_records() {
    let Some(prv) = shared("lulesh", "lulesh_7+1_with_uncores_sockets1+2.chop8.prv") else {
        return;
    };
    let pcf = prv.with_extension("pcf");
    let o = oracle(&prv, Some(&pcf));
    let (_dir, db) = temp_db();
    let info = db.import(&prv, Some("lulesh")).unwrap();
    let trace = db.trace("lulesh").unwrap();

    // The shared README's numbers, and the oracle's.
    assert_eq!(o.mpi_app, 1);
    assert_eq!(o.tasks, vec![8, 12]);
    let records: u64 = o.pairs.values().map(|p| p.0).sum();
    let bytes: u64 = o.pairs.values().map(|p| p.1).sum();
    assert_eq!((records, bytes, o.foreign_records), (160, 12_508_992, 0));
    assert_eq!(o.calls["MPI_Isend"], 216);

    // Only the MPI application's tasks are ranks; world rank = task index.
    assert_eq!(info.processes, 8);
    assert_eq!(stored_pairs(&trace), o.pairs);
    assert_eq!(
        (info.summary.messages, info.summary.message_bytes),
        (160, 12_508_992)
    );
    assert_eq!(stored_calls(&trace), o.calls);

    // Every message pairs a non-blocking receive with the Wait that completed it.
    assert_eq!(info.summary.request_links, 160);
    let links = trace.request_links().unwrap();
    let ops: BTreeMap<u64, Operation> = (0..8)
        .flat_map(|r| trace.process_operations(r).unwrap())
        .collect();
    for l in &links {
        assert_eq!(ops[&l.request_op].kind, OpKind::Irecv);
        assert_eq!(ops[&l.completion_op].kind, OpKind::Wait);
    }
    // The 16 MPI_Allreduce calls on communicator 14 (the world, all 8 tasks): 2 instances.
    assert_eq!(o.comms[&14], (1..=8).collect::<Vec<i64>>());
    let world = trace.header().communicator(14).unwrap();
    assert_eq!(
        (world.name.as_str(), world.members.clone()),
        ("MPI_COMM_WORLD", (0..8).collect())
    );
    let instances = trace.collective_instances().unwrap();
    assert_eq!(instances.len(), 2);
    assert!(instances.iter().all(|c| c.kind == OpKind::Allreduce
        && c.comm == 14
        && c.ops.len() == 8
        && c.send_bytes == 64));

    // The cut: sends and receives whose record is gone are calls without records (the
    // import's anomaly), never errors; they still count as calls of their name above.
    let cut = without_records(&trace);
    let count = |name: &str| cut.iter().filter(|c| c.1 == name).count() as u64;
    let cut_sends = o.calls["MPI_Isend"] - records;
    let cut_receives = o.calls["MPI_Irecv"] - records;
    assert_eq!((cut_sends, cut_receives), (56, 56));
    assert_eq!(
        (count("MPI_Isend"), count("MPI_Irecv")),
        (cut_sends, cut_receives)
    );
    assert_eq!(cut.len() as u64, cut_sends + cut_receives);
    assert_eq!(
        anomaly_count(&trace, "MPI call without its records"),
        cut_sends + cut_receives
    );
    // Communicator lines that list tasks the MPI application does not have (9 to 12): each
    // such task is a member that is no process (Table 3.1), dropped from its communicator;
    // a communicator left without members is dropped too.
    let beyond = |m: &Vec<i64>| m.iter().filter(|&&t| t as u64 > o.tasks[0]).count() as u64;
    let unknown_members: u64 = o.comms.values().map(beyond).sum();
    let emptied = o
        .comms
        .values()
        .filter(|m| beyond(m) == m.len() as u64)
        .count() as u64;
    assert_eq!((unknown_members, emptied), (8, 4));
    assert_eq!(
        anomaly_count(&trace, "member not a process"),
        unknown_members
    );
    assert_eq!(anomaly_count(&trace, "empty communicator"), emptied);
    assert_eq!(skipped(&trace), Vec::<String>::new());
    assert_eq!(anomaly_count(&trace, "record skipped"), 0);
    assert_eq!(anomaly_count(&trace, "send never received"), 0);
    assert_eq!(anomaly_count(&trace, "receive never matched"), 0);

    // The 12 uncore readers of application 2: metric locations with their event counts.
    let locations = &trace.header().locations;
    assert_eq!(locations.len(), 12);
    for (i, l) in locations.iter().enumerate() {
        assert_eq!(
            (l.kind, l.rank, l.thread),
            (LocationKind::Metric, None, None),
            "{l:?}"
        );
        assert_eq!(l.name, format!("THREAD 2.{}.1", i + 1));
        assert_eq!(l.events, o.thread_events[&(2, i as u64 + 1, 1)], "{l:?}");
    }
    // 696 event records of 4 pairs each.
    assert_eq!(locations.iter().map(|l| l.events).sum::<u64>(), 696 * 4);
}

#[test]
fn qsort_old_style_records_give_its_messages_calls_and_collectives() {
    let Some(prv) = shared("qsort", "qsort_beo3.prv") else {
        return;
    };
    let pcf = prv.with_extension("pcf");
    let o = oracle(&prv, Some(&pcf));
    let (_dir, db) = temp_db();
    let info = db.import(&prv, None).unwrap();
    assert_eq!(info.name, "qsort_beo3");
    let trace = db.trace("qsort_beo3").unwrap();

    assert_eq!(info.processes, 4);
    assert_eq!(stored_pairs(&trace), o.pairs);
    assert_eq!(o.pairs.values().map(|p| p.0).sum::<u64>(), 33);
    assert_eq!(info.summary.messages, 33);
    let want: BTreeMap<String, u64> = [
        ("MPI_Allreduce", 9),
        ("MPI_Bcast", 18),
        ("MPI_Finalize", 4),
        ("MPI_Init", 4),
        ("MPI_Recv", 33),
        ("MPI_Reduce", 18),
        ("MPI_Send", 33),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(o.calls, want);
    assert_eq!(stored_calls(&trace), o.calls);
    // The global-operation records agree: one per collective call (Dimemas's ids 1 Bcast,
    // 10 Reduce, 11 Allreduce).
    let per_op = |id| {
        o.global_ops
            .iter()
            .filter(|((_, op), _)| *op == id)
            .map(|(_, n)| n)
            .sum::<u64>()
    };
    assert_eq!((per_op(1), per_op(10), per_op(11)), (18, 18, 9));

    // Collective instances: per communicator and operation, its calls over its members;
    // the root is the member the record names.
    let mut want_instances = 0;
    let instances = trace.collective_instances().unwrap();
    for ((comm, op), calls) in &o.global_ops {
        let members = &o.comms[comm];
        assert_eq!(calls % members.len() as u64, 0, "comm {comm} op {op}");
        want_instances += calls / members.len() as u64;
        let kind = match op {
            1 => OpKind::Bcast,
            10 => OpKind::Reduce,
            _ => OpKind::Allreduce,
        };
        let stored: Vec<_> = instances
            .iter()
            .filter(|c| c.comm as u64 == *comm && c.kind == kind)
            .collect();
        assert_eq!(stored.len() as u64, calls / members.len() as u64);
        if kind != OpKind::Allreduce {
            for &root in &o.global_roots[&(*comm, *op)] {
                let world_root = (members[root as usize] - 1) as u32;
                assert!(
                    stored.iter().all(|c| c.root == Some(world_root)),
                    "comm {comm}"
                );
            }
        }
    }
    assert_eq!(info.summary.collective_instances, want_instances);
    assert_eq!(want_instances, 15);
    // User functions are routine calls.
    assert_eq!(info.summary.routine_calls, o.function_entries);
    assert_eq!(o.function_entries, 22);
    // Times in microseconds (no unit in the header) become nanoseconds.
    assert_eq!(info.summary.last_time, Some(260_194_000));
    // The only anomaly: the communicator line whose one task is -1.
    assert_eq!(
        skipped(&trace),
        vec![
            "communicator line 3: communicator 92 lists task -1 but application 1 has tasks 1 to 4"
        ]
    );
    assert_eq!(trace.summary().anomalies.len(), 1);
}

// ---------------------------------------------------------------------------------------
// Fixtures.

#[test]
fn several_applications_and_threads_keep_ranks_threads_and_locations_apart() {
    let prv = fixture("multi.prv");
    let o = oracle(&prv, Some(&fixture("multi.pcf")));
    let (_dir, db) = temp_db();
    let info = db.import(&prv, None).unwrap();
    let trace = db.trace("multi").unwrap();
    let h = trace.header();

    // Application 2 (named by the communicator lines) is the MPI one: its 3 tasks are the
    // ranks, named by the .row, on the .row's nodes.
    assert_eq!(o.mpi_app, 2);
    let procs: Vec<(u32, &str, Option<u32>)> = h
        .processes
        .iter()
        .map(|p| (p.rank, p.name.as_str(), p.processor))
        .collect();
    assert_eq!(
        procs,
        vec![
            (0, "solver.0", Some(0)),
            (1, "solver.1", Some(0)),
            (2, "solver.2", Some(1))
        ]
    );
    let nodes: Vec<&str> = h.processors.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(nodes, vec!["alpha", "beta"]);
    let comms: Vec<(u32, &str, Vec<u32>)> = h
        .communicators
        .iter()
        .map(|c| (c.id, c.name.as_str(), c.members.clone()))
        .collect();
    assert_eq!(
        comms,
        vec![(5, "MPI_COMM_WORLD", vec![0, 1, 2]), (6, "C6", vec![2, 0])]
    );

    // Messages per pair equal the records between the MPI tasks.
    let want: BTreeMap<(u32, u32), (u64, u64)> = [
        ((0, 1), (1, 100)),
        ((1, 2), (2, 2080)),
        ((2, 0), (1, 64)),
        ((2, 1), (1, 16)),
    ]
    .into_iter()
    .collect();
    assert_eq!(o.pairs, want);
    assert_eq!(stored_pairs(&trace), want);
    assert_eq!(
        (info.summary.messages, info.summary.message_bytes),
        (5, 2260)
    );

    // Calls by the .pcf's names, on every thread.
    let calls = stored_calls(&trace);
    assert_eq!(calls, o.calls);
    let want_calls: BTreeMap<String, u64> = [
        ("MPI_Allreduce", 3),
        ("MPI_Bcast", 2),
        ("MPI_Finalize", 3),
        ("MPI_Init", 3),
        ("MPI_Irecv", 2),
        ("MPI_Isend", 2),
        ("MPI_Recv", 1),
        ("MPI_Send", 1),
        ("MPI_Sendrecv", 2),
        ("MPI_Wait", 2),
        ("MPI_Waitall", 1),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(calls, want_calls);

    // The second thread of task 2 is thread 1 of rank 1: its Isend to rank 2 and its Wait.
    let ops = all_operations(&trace);
    let helper: Vec<(OpKind, u64, u64, Option<u32>, u64)> = ops
        .iter()
        .filter(|op| op.thread == 1)
        .map(|op| (op.kind, op.start, op.end, op.dest, op.send_bytes))
        .collect();
    assert_eq!(
        helper,
        vec![
            (OpKind::Isend, 45_000, 47_000, Some(2), 2048),
            (OpKind::Wait, 52_000, 53_000, None, 0)
        ]
    );
    assert!(ops
        .iter()
        .filter(|op| op.thread == 1)
        .all(|op| op.rank == 1));
    // MPI_Sendrecv carries both sides of its two records.
    let sendrecv: Vec<_> = ops
        .iter()
        .filter(|op| op.kind == OpKind::Sendrecv)
        .map(|op| (op.rank, op.dest, op.send_bytes, op.source, op.recv_bytes))
        .collect();
    assert_eq!(
        sendrecv,
        vec![(1, Some(2), 32, Some(2), 16), (2, Some(1), 16, Some(1), 32)]
    );

    // The non-blocking receives are completed by the Wait/Waitall holding their physical
    // receive times.
    let links = trace.request_links().unwrap();
    assert_eq!(links.len(), 2);
    let by_id: BTreeMap<u64, Operation> = (0..3)
        .flat_map(|r| trace.process_operations(r).unwrap())
        .collect();
    let mut linked: Vec<(u32, OpKind, OpKind, u64)> = links
        .iter()
        .map(|l| {
            let (a, b) = (&by_id[&l.request_op], &by_id[&l.completion_op]);
            (a.rank, a.kind, b.kind, b.start)
        })
        .collect();
    linked.sort();
    assert_eq!(
        linked,
        vec![
            (0, OpKind::Irecv, OpKind::Waitall, 80_000),
            (2, OpKind::Irecv, OpKind::Wait, 60_000)
        ]
    );

    // Collectives: the Bcast on communicator 6 rooted at rank 2 (its root flag), the
    // Allreduce on the world.
    let mut instances: Vec<(OpKind, u32, Option<u32>, usize, u64, u64)> = trace
        .collective_instances()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c.kind,
                c.comm,
                c.root,
                c.ops.len(),
                c.send_bytes,
                c.recv_bytes,
            )
        })
        .collect();
    instances.sort();
    assert_eq!(
        instances,
        vec![
            (OpKind::Bcast, 6, Some(2), 2, 256, 256),
            (OpKind::Allreduce, 5, None, 3, 24, 24)
        ]
    );

    // Only rank 2's Bcast carries the root flag; rank 0's learns the root from it.
    let roots: Vec<(u32, Option<u32>)> = ops
        .iter()
        .filter(|op| op.kind == OpKind::Bcast)
        .map(|op| (op.rank, op.root))
        .collect();
    assert_eq!(roots, vec![(0, Some(2)), (2, Some(2))]);

    // User functions are routine calls, on their thread, named by the .pcf.
    let mut routines: Vec<(u32, u32, String, u64, u64)> = trace
        .routine_calls()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r.rank,
                r.thread,
                trace.string(r.routine).unwrap().to_string(),
                r.start,
                r.end,
            )
        })
        .collect();
    routines.sort();
    assert_eq!(
        routines,
        vec![
            (0, 0, "solve".into(), 25_000, 150_000),
            (1, 1, "exchange".into(), 44_000, 50_000)
        ]
    );

    // Locations: the two counter readers (one sent a message and has a state: a process;
    // the other only counted: a metric reader), and rank 1's second thread.
    let locs: Vec<_> = h
        .locations
        .iter()
        .map(|l| {
            (
                l.name.as_str(),
                l.kind,
                l.group.as_str(),
                l.rank,
                l.thread,
                l.regions,
                l.events,
            )
        })
        .collect();
    assert_eq!(
        locs,
        vec![
            (
                "reader 1",
                LocationKind::Process,
                "reader.1",
                None,
                None,
                0,
                o.thread_events[&(1, 1, 1)]
            ),
            (
                "reader 2",
                LocationKind::Metric,
                "reader.2",
                None,
                None,
                0,
                o.thread_events[&(1, 2, 1)]
            ),
            (
                "solver 1 helper",
                LocationKind::CpuThread,
                "solver.1",
                Some(1),
                Some(1),
                1,
                o.thread_events[&(2, 2, 2)]
            ),
        ]
    );
    assert_eq!((locs[0].6, locs[1].6, locs[2].6), (3, 2, 7));

    // The reader's message to rank 0 is no MPI message: reported, not kept.
    assert_eq!(o.foreign_records, 1);
    assert_eq!(
        skipped(&trace),
        vec!["communication record at line 52 from reader 1 to solver 0 main: only messages between tasks of the MPI application (application 2) are read"]
    );
    assert_eq!(
        trace.summary().anomalies,
        vec![("record skipped".to_string(), 1)]
    );
}

#[test]
fn without_a_pcf_extrae_numbering_names_the_calls() {
    let tmp = tempfile::tempdir().unwrap();
    let prv = tmp.path().join("bare.prv");
    std::fs::copy(fixture("multi.prv"), &prv).unwrap();
    let (_dir, db) = temp_db();
    db.import(&prv, None).unwrap();
    let trace = db.trace("bare").unwrap();
    let named = oracle(&fixture("multi.prv"), Some(&fixture("multi.pcf")));
    assert_eq!(stored_calls(&trace), named.calls);
    assert_eq!(trace.summary().messages, 5);
    // Without the .row, Paraver's default names.
    assert_eq!(trace.header().processes[1].name, "TASK 2.2");
    assert_eq!(trace.header().processors[1].name, "node 2");
    let names: Vec<String> = trace
        .routine_calls()
        .unwrap()
        .iter()
        .map(|r| trace.string(r.routine).unwrap().to_string())
        .collect();
    assert_eq!(names.len(), 2);
    assert!(names.contains(&"function 1".to_string()) && names.contains(&"function 2".to_string()));
}

#[test]
fn old_style_records_alone_become_sends_receives_and_collectives() {
    let (_dir, db) = temp_db();
    let info = db.import(fixture("oldstyle.prv"), None).unwrap();
    let trace = db.trace("oldstyle").unwrap();
    // Each rank's operations in time order, as stored.
    let ops: Vec<_> = all_operations(&trace)
        .iter()
        .map(|op| {
            (
                op.rank,
                op.kind,
                op.start,
                op.end,
                op.dest,
                op.source,
                op.root,
                op.send_bytes,
                op.recv_bytes,
            )
        })
        .collect();
    use OpKind::*;
    assert_eq!(
        ops,
        vec![
            // A send over its logical and physical send times (µs → ns), a receive at its
            // physical receive time; a Bcast rooted at the communicator's rank 0.
            (0, Send, 10_000, 12_000, Some(1), None, None, 40, 0),
            (0, Bcast, 30_000, 30_000, None, None, Some(0), 8, 0),
            (0, Recv, 60_000, 60_000, None, Some(1), None, 0, 16),
            (0, Allreduce, 70_000, 70_000, None, None, None, 4, 4),
            (1, Recv, 20_000, 20_000, None, Some(0), None, 0, 40),
            (1, Bcast, 31_000, 31_000, None, None, Some(0), 0, 8),
            (1, Send, 50_000, 55_000, Some(0), None, None, 16, 0),
            (1, Allreduce, 70_000, 70_000, None, None, None, 4, 4),
        ]
    );
    assert_eq!((info.summary.messages, info.summary.message_bytes), (2, 56));
    assert_eq!(info.summary.collective_instances, 2);
}

#[test]
fn a_cut_trace_reports_what_crosses_the_cut_and_keeps_the_rest() {
    let (_dir, db) = temp_db();
    let info = db.import(fixture("cut.prv"), None).unwrap();
    let trace = db.trace("cut").unwrap();
    assert_eq!((info.summary.messages, info.summary.message_bytes), (1, 8));
    let mut anomalies: Vec<String> = trace
        .anomalies()
        .unwrap()
        .iter()
        .map(|a| match a {
            Anomaly::CallWithoutRecords { .. } | Anomaly::SkippedRecord { .. } => String::new(),
            Anomaly::LeaveWithoutEnter {
                rank,
                thread,
                time,
                routine,
            } => {
                format!(
                    "left {} on {rank}.{thread} at {time}",
                    trace.string(*routine).unwrap()
                )
            }
            Anomaly::UnclosedRoutine { rank, routine } => {
                format!("open {} on {rank}", trace.string(*routine).unwrap())
            }
            Anomaly::MissingFinalize { rank } => format!("no finalize on {rank}"),
            Anomaly::BrokenRule {
                rule,
                rank: Some(rank),
                time: Some(time),
                value,
                ..
            } => format!("{} on {rank} at {time}: {value:?}", rule.class()),
            other => format!("{other:?}"),
        })
        .collect();
    anomalies.retain(|a| !a.is_empty());
    anomalies.sort();
    // The Isend whose receive lies past the cut, the Irecv whose send does: calls without
    // records. The Bcast whose root's call lies past the cut (no member of its instance
    // names the root) and the Allreduce on a communicator the header does not declare are
    // kept as calls of their kind, reported as the rules they break.
    assert_eq!(
        without_records(&trace),
        vec![
            (0, "MPI_Isend".to_string(), 10),
            (1, "MPI_Irecv".to_string(), 30),
        ]
    );
    assert_eq!(skipped(&trace), Vec::<String>::new());
    // The Bcast's instance lacks rank 0's call, past the cut.
    assert_eq!(
        anomalies,
        vec![
            "IncompleteCollective { kind: Bcast, comm: 1, present: 1, expected: 2 }",
            "MissingRoot on 1 at 40: None",
            "UnknownCommunicator on 1 at 50: Some(77)",
            "left event type 50000001 on 0.0 at 5",
            "left event type 60000019 on 0.0 at 5",
            "no finalize on 0",
            "no finalize on 1",
            "open MPI_Wait on 0",
        ]
    );
    // The Wait open at the end closes at its rank's last record; the call crossing the
    // cut keeps its name, without a peer.
    let ops = all_operations(&trace);
    let wait = ops.iter().find(|op| op.kind == OpKind::Wait).unwrap();
    assert_eq!((wait.start, wait.end), (90, 90));
    let isends: Vec<(u64, Option<u32>)> = ops
        .iter()
        .filter(|op| trace.kind_name(op.kind) == "MPI_Isend")
        .map(|op| (op.start, op.dest))
        .collect();
    assert_eq!(isends, vec![(10, None), (20, Some(1))]);
    // The matched receive's message arrived after the last Wait/Test: no request link.
    assert_eq!(info.summary.request_links, 0);
}

// ---------------------------------------------------------------------------------------
// Damaged input.

/// Imports `prv` into a database holding one trace already; expects an input error whose
/// text starts with `want` (file:line:column: rule: message) and the database unchanged.
fn rejected(prv: &Path, want: &str) {
    let (_dir, db) = temp_db();
    db.import(fixture("oldstyle.prv"), Some("earlier")).unwrap();
    let before = db.traces().unwrap()[0].summary.clone();
    let err = db.import(prv, Some("damaged")).unwrap_err();
    assert!(matches!(err, Error::Input(_)), "{err:?}");
    let message = err.to_string();
    assert!(
        message.starts_with(want),
        "{message:?}\n  should start with {want:?}"
    );
    assert_eq!(db.trace_names().unwrap(), vec!["earlier".to_string()]);
    assert_eq!(db.traces().unwrap()[0].summary, before);
}

/// The multi fixture (with its .pcf and .row) in a temporary folder, with line `line`
/// (from 1) replaced by `text`.
fn damaged(line: usize, text: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    for ext in ["pcf", "row"] {
        std::fs::copy(
            fixture(&format!("multi.{ext}")),
            tmp.path().join(format!("d.{ext}")),
        )
        .unwrap();
    }
    let original = std::fs::read_to_string(fixture("multi.prv")).unwrap();
    let mut lines: Vec<&str> = original.lines().collect();
    lines[line - 1] = text;
    let prv = tmp.path().join("d.prv");
    std::fs::write(&prv, lines.join("\n") + "\n").unwrap();
    (tmp, prv)
}

#[test]
fn a_truncated_record_is_refused_with_its_file_line_and_column() {
    let original = std::fs::read_to_string(fixture("multi.prv")).unwrap();
    // Line 20 is "2:2:2:2:1:40:50000001:0"; cut after its event type.
    assert_eq!(original.lines().nth(19), Some("2:2:2:2:1:40:50000001:0"));
    let (_tmp, prv) = damaged(20, "2:2:2:2:1:40:50000001");
    rejected(
        &prv,
        &format!(
            "{}:20:22: truncated record: the record ends before its event value",
            prv.display()
        ),
    );
    // A file cut in the middle of its last line.
    let tmp = tempfile::tempdir().unwrap();
    let cut = tmp.path().join("cut.prv");
    let end = original.find("3:5:2:3:1:141:142").unwrap() + 14;
    std::fs::write(&cut, &original[..end]).unwrap();
    let line = original[..end].lines().count();
    rejected(
        &cut,
        &format!(
            "{}:{line}:15: truncated record: the record ends before its physical send time",
            cut.display()
        ),
    );
}

#[test]
fn a_bad_header_is_refused_with_its_column() {
    let (_tmp, prv) = damaged(
        1,
        "#Paraver (01/02/2024 at 10:00):200_ps:2(4,4):2:2(1:1,1:2),3(1:1,2:1,1:2),2",
    );
    rejected(
        &prv,
        &format!(
            "{}:1:35: bad header: unknown time unit \"_ps\"",
            prv.display()
        ),
    );
    let (_tmp, prv) = damaged(3, "x:2:6:2:3:1");
    rejected(
        &prv,
        &format!("{}:3:1: bad header: communicator line 2 of the 2 the header announces should start with c:", prv.display()),
    );
}

#[test]
fn a_communicator_line_of_an_application_the_header_lacks_is_reported_not_refused() {
    // The first communicator line names application 7 of 2: the second names the MPI one.
    let (_tmp, prv) = damaged(2, "c:7:5:3:1:2:3");
    let (_dir, db) = temp_db();
    db.import(&prv, Some("d")).unwrap();
    let trace = db.trace("d").unwrap();
    assert_eq!(trace.header().processes.len(), 3);
    let whats = skipped(&trace);
    let line = "communicator line 2: communicator 5 belongs to application 7, not to the MPI application 2";
    assert!(whats.iter().any(|w| w == line), "{whats:?}");
}

#[test]
fn bad_records_are_refused_with_their_line() {
    let (_tmp, prv) = damaged(7, "2:1:2:1:1:10:50000003:3x1");
    rejected(
        &prv,
        &format!(
            "{}:7:23: bad number: the event value \"3x1\" is not a number",
            prv.display()
        ),
    );
    let (_tmp, prv) = damaged(7, "7:1:2:1:1:10");
    rejected(
        &prv,
        &format!("{}:7:1: unknown record: record type '7'", prv.display()),
    );
    let (_tmp, prv) = damaged(7, "2:1:2:1:1:99999999999999999:50000003:31");
    rejected(
        &prv,
        &format!("{}:7:11: time overflow: the time 99999999999999999 × 1000 ns does not fit 64 bits of nanoseconds", prv.display()),
    );
}

// ---------------------------------------------------------------------------------------
// The command line.

fn mtfdb(db: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mtfdb"))
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn import_detects_paraver_from_content_and_names_every_format_otherwise() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    // Detected from the #Paraver line, whatever the file is called.
    let renamed = tmp.path().join("run.trace");
    std::fs::copy(fixture("oldstyle.prv"), &renamed).unwrap();
    let out = mtfdb(&db, &["import", renamed.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("2 messages"));
    // Forced.
    let out = mtfdb(
        &db,
        &[
            "import",
            fixture("multi.prv").to_str().unwrap(),
            "--format",
            "paraver",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("5 messages"));
    // A file of no known format: the error names the formats.
    let other = tmp.path().join("notes.txt");
    std::fs::write(&other, "hello\n").unwrap();
    let out = mtfdb(&db, &["import", other.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    for name in ["mtf", "otf2", "paraver"] {
        assert!(err.contains(name), "{err}");
    }
    let out = mtfdb(
        &db,
        &["import", other.to_str().unwrap(), "--format", "nope"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("paraver (Paraver .prv traces)"), "{err}");
}

/// The communicators of a stored trace as (id, name, members).
fn comm_list(trace: &Trace) -> Vec<(u32, String, Vec<u32>)> {
    trace
        .header()
        .communicators
        .iter()
        .map(|c| (c.id, c.name.clone(), c.members.clone()))
        .collect()
}

#[test]
fn lulesh_one_member_communicators_are_the_ranks_self_communicators_and_its_node_a_processor() {
    let Some(prv) = shared("lulesh", "lulesh_7+1_with_uncores_sockets1+2.chop8.prv") else {
        return;
    };
    let (dir, db) = temp_db();
    db.import(&prv, Some("lulesh")).unwrap();
    let trace = db.trace("lulesh").unwrap();
    // The .prv's lines `c:1:ID:1:TASK` of the 8-task MPI application: each is task TASK's
    // (rank TASK - 1) MPI_COMM_SELF; `c:1:14:8:1:…:8` is the world. Tasks 9 to 12 (which
    // the application does not have) are members that are no process, dropped (reported
    // by tests above): `c:1:1:12:1:…:12` keeps tasks 1 to 8, a line of one of them alone
    // is dropped with it.
    let text = std::fs::read_to_string(&prv).unwrap();
    let mut want = vec![(
        14,
        "MPI_COMM_WORLD".to_string(),
        (0..8).collect::<Vec<u32>>(),
    )];
    for line in text.lines().filter(|l| l.starts_with("c:1:")) {
        let f: Vec<u32> = line[4..].split(':').map(|x| x.parse().unwrap()).collect();
        let (id, tasks) = (f[0], &f[2..]);
        let kept: Vec<u32> = tasks.iter().filter(|&&t| t <= 8).map(|t| t - 1).collect();
        match kept[..] {
            _ if id == 14 => {}
            [] => {}
            [rank] => want.push((id, format!("MPI_COMM_SELF of rank {rank}"), kept)),
            _ => want.push((id, format!("C{id}"), kept)),
        }
    }
    assert_eq!(comm_list(&trace), want);
    assert_eq!(want.len(), 10);
    // The .row's one node is the processor every rank ran on.
    let h = trace.header();
    assert_eq!(
        h.processors
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>(),
        vec!["epeec04"]
    );
    assert!(h.processes.iter().all(|p| p.processor == Some(0)));
    drop(trace);
    let out = mtfdb(&dir.path().join("db"), &["info", "lulesh"]);
    let out = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.contains("processors: 1\n  0    epeec04          ranks 0-7\n"),
        "{out}"
    );
    assert!(
        out.contains("communicators: 10\n  MPI_COMM_WORLD (id 14): 8 members: 0-7\n  C1 (id 1): 8 members: 0-7\n  MPI_COMM_SELF of rank 1 (id 2): 1 members: 1\n"),
        "{out}"
    );
}

#[test]
fn qsort_split_communicators_keep_their_members_and_nodes_are_processors() {
    let Some(prv) = shared("qsort", "qsort_beo3.prv") else {
        return;
    };
    let (_dir, db) = temp_db();
    db.import(&prv, Some("qsort")).unwrap();
    let trace = db.trace("qsort").unwrap();
    // From the .prv's lines: `c:1:91:4:1:2:3:4` the world, the recursive halves 94 and 96,
    // and 93, 95, 97, 98 leave one task alone: that rank's self communicator. Line 92 names
    // task -1 and is reported (MPItrace's way of writing MPI_COMM_SELF, not modelled).
    let s = |id: u32, r: u32| (id, format!("MPI_COMM_SELF of rank {r}"), vec![r]);
    assert_eq!(
        comm_list(&trace),
        vec![
            (91, "MPI_COMM_WORLD".to_string(), vec![0, 1, 2, 3]),
            s(93, 0),
            (94, "C94".to_string(), vec![1, 2, 3]),
            s(95, 1),
            (96, "C96".to_string(), vec![2, 3]),
            s(97, 2),
            s(98, 3),
        ]
    );
    // No .row: Paraver's own node names, one rank on each.
    let h = trace.header();
    let nodes: Vec<(&str, Option<u32>)> = h
        .processes
        .iter()
        .map(|p| {
            (
                h.processors[p.processor.unwrap() as usize].name.as_str(),
                p.processor,
            )
        })
        .collect();
    assert_eq!(
        nodes,
        vec![
            ("node 1", Some(0)),
            ("node 2", Some(1)),
            ("node 3", Some(2)),
            ("node 4", Some(3))
        ]
    );
}

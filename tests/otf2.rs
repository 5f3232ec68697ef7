//! OTF2 import: fixture archives written by the official OTF2 library
//! (`tests/fixtures/otf2/make_fixtures.py`), the real Score-P trace in `../shared/traces`, a
//! differential check against `otf2-print`, and damaged archives.

mod common;

use common::temp_db;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use mtfdb::model::{flags, Anomaly, OpClass, OpKind, Operation};
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/otf2")
        .join(name)
}

const FIXTURES: [&str; 3] = ["subcomms", "pingpong-isend", "mapped"];

fn expected(name: &str) -> Value {
    let text = std::fs::read_to_string(fixture(name).join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Every operation of the trace with its process's thread.
fn all_operations(trace: &mtfdb::Trace) -> Vec<Operation> {
    let mut ops = Vec::new();
    for rank in 0..trace.header().processes.len() as u32 {
        ops.extend(
            trace
                .process_operations(rank)
                .unwrap()
                .into_iter()
                .map(|(_, op)| op),
        );
    }
    ops
}

#[test]
fn fixtures_import_with_their_exact_messages_bytes_and_fan_in_out() {
    for name in FIXTURES {
        let e = expected(name);
        let (_dir, db) = temp_db();
        let info = db.import(fixture(name), Some(name)).unwrap();
        let trace = db.trace(name).unwrap();
        assert_eq!(info.processes as u64, u(&e["ranks"]), "{name}: ranks");
        assert_eq!(info.summary.messages, u(&e["messages"]), "{name}: messages");
        assert_eq!(
            info.summary.message_bytes,
            u(&e["message_bytes"]),
            "{name}: message bytes"
        );

        // Bytes and messages per process pair, in world ranks.
        let mut pairs: Vec<(u32, u32, u64, u64)> = trace
            .pairs()
            .iter()
            .map(|p| (p.sender, p.receiver, p.messages, p.bytes))
            .collect();
        pairs.sort();
        let want: Vec<(u32, u32, u64, u64)> = e["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    u(&p["sender"]) as u32,
                    u(&p["receiver"]) as u32,
                    u(&p["messages"]),
                    u(&p["bytes"]),
                )
            })
            .collect();
        assert_eq!(pairs, want, "{name}: messages and bytes per pair");

        // Fan-in and fan-out per process: the byte counts they are the sums of, and the
        // message counts.
        for f in e["fan"].as_array().unwrap() {
            let rank = u(&f["rank"]) as usize;
            let t = &trace.traffic()[rank];
            let got = [
                t.p2p_sent_bytes,
                t.p2p_recv_bytes,
                t.coll_send_bytes,
                t.coll_recv_bytes,
                t.messages_sent,
                t.messages_received,
            ];
            let want = [
                "p2p_sent_bytes",
                "p2p_recv_bytes",
                "coll_send_bytes",
                "coll_recv_bytes",
                "messages_sent",
                "messages_received",
            ]
            .map(|k| u(&f[k]));
            assert_eq!(got, want, "{name}: traffic of rank {rank}");
        }

        // Operations per MPI call and routine calls.
        let ops = all_operations(&trace);
        let mut by_name: BTreeMap<String, u64> = BTreeMap::new();
        for op in &ops {
            *by_name.entry(trace.kind_name(op.kind)).or_default() += 1;
        }
        let want: BTreeMap<String, u64> = e["operations_by_region"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), u(v)))
            .collect();
        assert_eq!(by_name, want, "{name}: operations by MPI call");
        let routines = trace.routine_calls().unwrap();
        assert_eq!(
            routines.len() as u64,
            u(&e["routine_calls"]),
            "{name}: routine calls"
        );

        // Collective instances, one per call across the communicator.
        let mut colls: BTreeMap<String, u64> = BTreeMap::new();
        for c in trace.collective_instances().unwrap() {
            *colls.entry(trace.kind_name(c.kind)).or_default() += 1;
        }
        let want: BTreeMap<String, u64> = e["collectives"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), u(v)))
            .collect();
        assert_eq!(colls, want, "{name}: collective instances");

        // Times: nanoseconds since the global offset, after the clock offsets.
        // The first stored call starts after the trace's first record (ProgramBegin), within a
        // microsecond.
        let first = info.summary.first_time.unwrap();
        let trace_first = u(&e["trace_first_ns"]);
        assert!(
            first >= trace_first && first < trace_first + 1_000,
            "{name}: first time {first} ns, trace starts at {trace_first} ns"
        );
        // The last stored call ends before the trace's last record (ProgramEnd), within a
        // microsecond.
        let last = info.summary.last_time.unwrap();
        let trace_last = u(&e["trace_last_ns"]);
        assert!(
            last <= trace_last && last + 1_000 > trace_last,
            "{name}: last time {last} ns, trace ends at {trace_last} ns"
        );
        for (rank, want) in e["first_event_ns"].as_array().unwrap().iter().enumerate() {
            let first_routine = routines
                .iter()
                .filter(|r| r.rank == rank as u32 && r.thread == 0)
                .map(|r| r.start);
            let first_op = ops
                .iter()
                .filter(|o| o.rank == rank as u32 && o.thread == 0)
                .map(|o| o.start);
            let first = first_routine.chain(first_op).min().unwrap();
            assert!(
                first >= u(want),
                "{name}: rank {rank} starts at {first} ns, before its first event {want}"
            );
        }

        // Exact start times of MPI calls, after clock corrections that change over time
        // (the `mapped` fixture).
        if let Some(per_location) = e["mpi_enter_ns"].as_object() {
            for l in e["locations"].as_array().unwrap() {
                let (id, rank, thread) =
                    (u(&l["id"]), u(&l["rank"]) as u32, u(&l["thread"]) as u32);
                let mut starts: Vec<u64> = ops
                    .iter()
                    .filter(|o| o.rank == rank && o.thread == thread)
                    .map(|o| o.start)
                    .collect();
                starts.sort();
                let want: Vec<u64> = per_location[&id.to_string()]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(u)
                    .collect();
                assert_eq!(starts, want, "{name}: MPI call starts on location {id}");
            }
        }

        // Requests the trace never completes are reported, and nothing else is.
        let mut never: Vec<(u32, u64)> = Vec::new();
        for a in trace.anomalies().unwrap() {
            match a {
                mtfdb::model::Anomaly::RequestNeverCompleted { rank, request, .. } => {
                    never.push((rank, request))
                }
                other => panic!("{name}: unexpected anomaly {other:?}"),
            }
        }
        never.sort();
        let rank_of = |location: u64| {
            e["locations"]
                .as_array()
                .unwrap()
                .iter()
                .find(|l| u(&l["id"]) == location)
                .map(|l| u(&l["rank"]) as u32)
                .unwrap()
        };
        let mut want: Vec<(u32, u64)> = e["uncompleted"]
            .as_array()
            .map(|list| {
                list.iter()
                    .map(|x| (rank_of(u(&x["location"])), u(&x["request_id"])))
                    .collect()
            })
            .unwrap_or_default();
        want.sort();
        assert_eq!(never, want, "{name}: requests never completed");
    }
}

#[test]
fn sub_communicator_ranks_become_world_ranks() {
    let (_dir, db) = temp_db();
    db.import(fixture("subcomms"), None).unwrap();
    let trace = db.trace("subcomms").unwrap();
    let e = expected("subcomms");
    for c in e["communicators"].as_array().unwrap() {
        let Some(members) = c["world_ranks"].as_array() else {
            continue;
        };
        let id = u(&c["id"]) as u32;
        let comm = trace.header().communicator(id).unwrap();
        let members: Vec<u32> = members.iter().map(|m| u(m) as u32).collect();
        assert_eq!(comm.members, members, "members of {}", comm.name);
        assert_eq!(comm.name, c["name"].as_str().unwrap());
    }
    // The Bcast on "odd" has comm rank 0 as root: world rank 3. The Reduce on "even" has comm
    // rank 1: world rank 2. Each is one call on both ranks of its communicator.
    let ops = all_operations(&trace);
    let roots = |kind: OpKind| -> Vec<Option<u32>> {
        ops.iter()
            .filter(|o| o.kind == kind)
            .map(|o| o.root)
            .collect()
    };
    assert_eq!(roots(OpKind::Bcast), vec![Some(3); 2]);
    assert_eq!(roots(OpKind::Reduce), vec![Some(2); 2]);
    // Self communicators: one per process, and the self-send stays on its process.
    let self_sends: Vec<_> = ops
        .iter()
        .filter(|o| o.kind == OpKind::Send && o.dest == Some(o.rank))
        .collect();
    assert!(!self_sends.is_empty());
    // The second thread of each process keeps its own column value.
    let threads: std::collections::BTreeSet<(u32, u32)> = trace
        .routine_calls()
        .unwrap()
        .iter()
        .map(|r| (r.rank, r.thread))
        .collect();
    for rank in 0..4 {
        assert!(
            threads.contains(&(rank, 1)),
            "rank {rank} has a second thread"
        );
    }
}

#[test]
fn the_real_score_p_ping_pong_trace_gives_its_known_numbers() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/traces/otf2/ping-pong");
    if !dir.exists() {
        eprintln!("skipped: {} is absent", dir.display());
        return;
    }
    let (_tmp, db) = temp_db();
    let info = db.import(&dir, None).unwrap();
    assert_eq!(info.name, "ping-pong");
    assert_eq!(info.processes, 2);
    assert_eq!(info.summary.messages, 16);
    let trace = db.trace("ping-pong").unwrap();
    let mut pairs: Vec<_> = trace
        .pairs()
        .iter()
        .map(|p| (p.sender, p.receiver, p.messages, p.bytes))
        .collect();
    pairs.sort();
    assert_eq!(pairs, vec![(0, 1, 8, 4_177_920), (1, 0, 8, 4_177_920)]);
    let mut tags = BTreeMap::new();
    for m in trace.messages().unwrap() {
        let e = tags.entry((m.sender, m.tag)).or_insert((0u64, 0u64));
        e.0 += 1;
        e.1 += m.bytes;
    }
    assert_eq!(
        tags.into_iter().collect::<Vec<_>>(),
        vec![((0, 10), (8, 4_177_920)), ((1, 20), (8, 4_177_920))]
    );
    // Sizes double from 16,384 to 2,097,152 bytes.
    let mut sizes: Vec<u64> = trace
        .messages()
        .unwrap()
        .iter()
        .filter(|m| m.sender == 0)
        .map(|m| m.bytes)
        .collect();
    sizes.sort();
    assert_eq!(sizes, (14..=21).map(|p| 1u64 << p).collect::<Vec<_>>());
    assert!(trace.anomalies().unwrap().is_empty());
}

/// A location id with its world rank and thread.
type Location = (u64, u32, u32);

/// Counts per location of each record type, as `otf2-print` shows them.
fn otf2_print_counts(anchor: &Path) -> Option<BTreeMap<(u64, String), u64>> {
    let out = match Command::new("otf2-print").arg(anchor).output() {
        Ok(o) if o.status.success() => o,
        Ok(o) => panic!(
            "otf2-print failed on {}: {}",
            anchor.display(),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(_) => return None,
    };
    let mut counts = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let mut words = line.split_whitespace();
        let (Some(kind), Some(location)) = (words.next(), words.next()) else {
            continue;
        };
        let is_record = kind
            .chars()
            .all(|c| c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit());
        if let (true, Ok(location)) = (is_record, location.parse::<u64>()) {
            *counts.entry((location, kind.to_string())).or_default() += 1;
        }
    }
    Some(counts)
}

/// The records of each type a location must have held for what mtfdb stored of it.
fn stored_record_counts(
    trace: &mtfdb::Trace,
    ops: &[&Operation],
    routine_calls: u64,
) -> BTreeMap<&'static str, u64> {
    let mut c: BTreeMap<&'static str, u64> = BTreeMap::new();
    let calls = ops.len() as u64 + routine_calls;
    c.insert("ENTER", calls);
    c.insert("LEAVE", calls);
    let mut add = |k: &'static str, n: u64| *c.entry(k).or_default() += n;
    for op in ops {
        let k = op.kind;
        let blocking = !k.is_nonblocking();
        if k.is_send() {
            add(if blocking { "MPI_SEND" } else { "MPI_ISEND" }, 1);
        }
        if k.is_receive() {
            if blocking {
                add("MPI_RECV", 1);
            } else {
                add("MPI_IRECV_REQUEST", 1);
            }
        }
        // A receive never completed has no envelope in OTF2: it is kept as a plain call.
        if matches!(k, OpKind::Other(_)) && trace.kind_name(k) == "MPI_Irecv" {
            add("MPI_IRECV_REQUEST", 1);
        }
        let comm_creation = k.class() == OpClass::Communicator && op.comm.is_some();
        if (k.is_collective() && blocking) || comm_creation {
            add("MPI_COLLECTIVE_BEGIN", 1);
            add("MPI_COLLECTIVE_END", 1);
        }
        if k.is_collective() && !blocking {
            add("NON_BLOCKING_COLLECTIVE_REQUEST", 1);
        }
        if op.flags & flags::NOT_COMPLETED != 0 {
            add("MPI_REQUEST_TEST", 1);
        }
        // Each completed request is one completion record inside the Wait or Test.
        add("completions", op.completes.len() as u64);
    }
    c
}

#[test]
fn per_location_record_counts_agree_with_otf2_print() {
    // Each archive with its locations as (location id, rank, thread).
    let mut archives: Vec<(PathBuf, Vec<Location>)> = Vec::new();
    for name in FIXTURES {
        let e = expected(name);
        let locations = e["locations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| (u(&l["id"]), u(&l["rank"]) as u32, u(&l["thread"]) as u32))
            .collect();
        archives.push((fixture(name), locations));
    }
    let real = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/traces/otf2/ping-pong");
    if real.exists() {
        archives.push((real, vec![(0, 0, 0), (1, 1, 0)]));
    }
    for (dir, locations) in archives {
        let anchor = mtfdb::ingest::otf2::find_anchor(&dir).unwrap();
        let Some(printed) = otf2_print_counts(&anchor) else {
            eprintln!("skipped: otf2-print is not installed (Debian package otf2-tools)");
            return;
        };
        let (_tmp, db) = temp_db();
        db.import(&dir, Some("t")).unwrap();
        let trace = db.trace("t").unwrap();
        let ops = all_operations(&trace);
        let routines = trace.routine_calls().unwrap();
        for (location, rank, thread) in locations {
            let mine: Vec<&Operation> = ops
                .iter()
                .filter(|o| o.rank == rank && o.thread == thread)
                .collect();
            let calls = routines
                .iter()
                .filter(|r| r.rank == rank && r.thread == thread)
                .count() as u64;
            let stored = stored_record_counts(&trace, &mine, calls);
            let printed_of = |k: &str| {
                printed
                    .get(&(location, k.to_string()))
                    .copied()
                    .unwrap_or(0)
            };
            for (kind, &n) in &stored {
                let want = if *kind == "completions" {
                    printed_of("MPI_ISEND_COMPLETE")
                        + printed_of("MPI_IRECV")
                        + printed_of("NON_BLOCKING_COLLECTIVE_COMPLETE")
                        + printed_of("MPI_REQUEST_CANCELLED")
                } else {
                    printed_of(kind)
                };
                assert_eq!(
                    n,
                    want,
                    "{}: location {location} (rank {rank} thread {thread}): {kind}",
                    dir.display()
                );
            }
            // Non-blocking receives: one request and one completion each; one never completed
            // is kept without its envelope (no completion record gave it one).
            let completed = |o: &&&Operation| o.flags & flags::WITHOUT_RECORDS == 0;
            let irecvs = mine.iter().filter(|o| o.kind == OpKind::Irecv);
            assert_eq!(
                printed_of("MPI_IRECV"),
                irecvs.filter(completed).count() as u64
            );
        }
    }
}

/// A copy of a fixture in a temporary folder, to damage.
fn copy_fixture(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let to = tmp.path().join(name);
    copy_dir(&fixture(name), &to);
    (tmp, to)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let p = entry.unwrap().path();
        let target = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &target);
        } else {
            std::fs::copy(&p, &target).unwrap();
        }
    }
}

/// Imports `archive` into a database that already holds one trace, expects an input error
/// whose message contains each of `needles`, and checks the database still holds exactly
/// the earlier trace.
fn rejected(archive: &Path, needles: &[&str]) -> String {
    common::rejected_import(&fixture("pingpong-isend"), archive, needles)
}

#[test]
fn a_corrupted_definitions_file_is_refused_with_its_name_and_offset() {
    let (_tmp, dir) = copy_fixture("subcomms");
    let def = dir.join("run.def");
    let mut data = std::fs::read(&def).unwrap();
    // The first record after the 18-byte chunk header: its type byte, then its length. Claim a
    // length that runs past the end of the chunk.
    let at = 18 + 1;
    data[at] = 0xfe;
    std::fs::write(&def, &data).unwrap();
    rejected(
        &dir,
        &[
            "run.def",
            "byte ",
            "corrupt definitions",
            "anchor file announces 108",
        ],
    );
    // A compressed integer whose size byte is impossible: the String record's id.
    let mut data = std::fs::read(fixture("subcomms").join("run.def")).unwrap();
    let first_string = (18..data.len()).find(|&i| data[i] == 10).unwrap();
    data[first_string + 2] = 7;
    std::fs::write(&def, &data).unwrap();
    rejected(
        &dir,
        &[
            "run.def",
            &format!("byte {}", first_string + 2),
            "String definition",
            "invalid compressed size 7",
        ],
    );
}

/// The events `otf2-print -G` says location `id`'s definition announces.
fn announced_events(archive: &Path, id: u64) -> u64 {
    let text = common::otf2_print::run(&["-G"], &archive.join("run.otf2"));
    let line = text
        .lines()
        .find(|l| {
            let mut f = l.split_whitespace();
            f.next() == Some("LOCATION") && f.next() == Some(&id.to_string())
        })
        .unwrap_or_else(|| panic!("no location {id} in {text}"));
    line.split("# Events: ")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// (sender, receiver, tag, bytes) of every matched message.
fn envelopes(trace: &mtfdb::Trace) -> Vec<(u32, u32, i32, u64)> {
    let mut out = Vec::new();
    for chunk in 0..trace.message_chunk_count() {
        for m in trace.message_chunk(chunk).unwrap() {
            out.push((m.sender, m.receiver, m.tag, m.bytes));
        }
    }
    out.sort();
    out
}

/// The `MissingRankData` anomalies of `trace`.
fn missing_ranks(trace: &mtfdb::Trace) -> Vec<Anomaly> {
    trace
        .anomalies()
        .unwrap()
        .into_iter()
        .filter(|a| matches!(a, Anomaly::MissingRankData { .. }))
        .collect()
}

#[test]
fn a_missing_event_file_is_reported_and_the_other_locations_import() {
    if !common::otf2_print::available() {
        return;
    }
    let (_tmp, dir) = copy_fixture("subcomms");
    let (_full_tmp, full_db) = temp_db();
    full_db.import(fixture("subcomms"), Some("full")).unwrap();
    let full = full_db.trace("full").unwrap();
    let announced = announced_events(&dir, 2);
    std::fs::remove_file(dir.join("run/2.evt")).unwrap();
    let (_db_tmp, db) = temp_db();
    db.import(&dir, Some("partial")).unwrap();
    let trace = db.trace("partial").unwrap();

    // Location 2 is rank 2's: reported with the file and what its definition announced.
    let file = dir.join("run/2.evt").display().to_string();
    assert_eq!(
        missing_ranks(&trace),
        vec![Anomaly::MissingRankData {
            rank: 2,
            thread: 0,
            file,
            announced: Some(announced),
            read: 0,
            cut_at: None,
        }]
    );
    // The others' messages among themselves are all there; those with rank 2 are left
    // waiting for it, reported apart, never as unmatched operations of the others.
    let among_others: Vec<_> = envelopes(&full)
        .into_iter()
        .filter(|m| m.0 != 2 && m.1 != 2)
        .collect();
    assert_eq!(envelopes(&trace), among_others);
    let with_rank_2 = envelopes(&full)
        .iter()
        .filter(|m| (m.0 == 2) != (m.1 == 2))
        .count() as u64;
    // One anomaly per send or receive of the others left waiting for rank 2, and one per
    // collective instance it was a member of (each of its collective calls in the full trace).
    let rank_2_collectives = full
        .process_operations(2)
        .unwrap()
        .iter()
        .filter(|(_, op)| op.kind.is_collective())
        .count() as u64;
    let s = trace.summary();
    assert_eq!(
        s.anomaly_count("peer's event data missing"),
        with_rank_2 + rank_2_collectives
    );
    assert_eq!(s.anomaly_count("send never received"), 0);
    assert_eq!(s.anomaly_count("receive never matched"), 0);
    assert_eq!(trace.operations_per_rank()[2], 0);
    for rank in [0, 1, 3] {
        assert_eq!(
            trace.operations_per_rank()[rank],
            full.operations_per_rank()[rank],
            "rank {rank}"
        );
    }
}

#[test]
fn info_says_which_event_data_is_missing_rather_than_that_the_trace_is_whole() {
    let (_tmp, dir) = copy_fixture("subcomms");
    std::fs::remove_file(dir.join("run/2.evt")).unwrap();
    let db_dir = tempfile::tempdir().unwrap();
    let db = db_dir.path().join("db");
    let (ok, _, err) =
        common::contents::mtfdb(&db, &["import", dir.to_str().unwrap(), "--name", "partial"]);
    assert!(ok, "{err}");
    let (ok, info, err) = common::contents::mtfdb(&db, &["info", "partial"]);
    assert!(ok, "{err}");
    let line = info.lines().find(|l| l.starts_with("anomalies:")).unwrap();
    assert!(
        line.ends_with(
            "(kept and counted; event data of 1 location missing or cut short; the rest was imported)"
        ),
        "{line}"
    );
    assert!(!info.contains("imported whole"), "{info}");
}

#[test]
fn an_event_file_cut_short_keeps_what_was_read_and_reports_where() {
    let (_tmp, dir) = copy_fixture("subcomms");
    let (_full_tmp, full_db) = temp_db();
    full_db.import(fixture("subcomms"), Some("full")).unwrap();
    let full = full_db.trace("full").unwrap();
    let evt = dir.join("run/0.evt");
    let data = std::fs::read(&evt).unwrap();
    let cut = data.len() / 2;
    std::fs::write(&evt, &data[..cut]).unwrap();
    let (_db_tmp, db) = temp_db();
    db.import(&dir, Some("cut")).unwrap();
    let trace = db.trace("cut").unwrap();

    let missing = missing_ranks(&trace);
    let [Anomaly::MissingRankData {
        rank: 0,
        thread: 0,
        file,
        read,
        cut_at: Some(at),
        ..
    }] = missing.as_slice()
    else {
        panic!("{missing:?}")
    };
    assert!(file.ends_with("run/0.evt"), "{file}");
    assert_eq!(*at, cut as u64);
    assert!(*read > 0, "records before the cut are read");
    // Rank 0's operations are the full trace's first ones: the same calls at the same times
    // (a receive whose completion lay past the cut is kept as never completed, and the call
    // open at the cut ends there), and the other ranks' are all there.
    let thread_0 = |t: &mtfdb::Trace| -> Vec<Operation> {
        let ops = t.process_operations(0).unwrap().into_iter();
        ops.map(|(_, op)| op).filter(|op| op.thread == 0).collect()
    };
    let (mine, all) = (thread_0(&trace), thread_0(&full));
    assert!(
        !mine.is_empty() && mine.len() < all.len(),
        "{} of {}",
        mine.len(),
        all.len()
    );
    for (a, b) in mine.iter().zip(&all) {
        assert_eq!((a.start, a.dest), (b.start, b.dest));
    }
    for rank in 1..4 {
        assert_eq!(
            trace.operations_per_rank()[rank],
            full.operations_per_rank()[rank]
        );
    }
}

#[test]
fn an_unsupported_version_is_refused_with_its_name_and_offset() {
    let (_tmp, dir) = copy_fixture("subcomms");
    let anchor = dir.join("run.otf2");
    let mut data = std::fs::read(&anchor).unwrap();
    // Chunk header (2), "OTF2\0" (5), anchor format, trace format: the major version is at 9.
    assert_eq!(data[9], 3);
    data[9] = 4;
    std::fs::write(&anchor, &data).unwrap();
    rejected(
        &dir,
        &[
            "run.otf2",
            "byte 9",
            "unsupported version",
            "OTF2 4.2.0",
            "1.0 to 3.x",
        ],
    );
    data[9] = 0;
    std::fs::write(&anchor, &data).unwrap();
    rejected(&dir, &["unsupported version", "OTF2 0.2.0"]);
}

#[test]
fn the_format_is_detected_from_the_anchor_whatever_its_name() {
    let (_tmp, dir) = copy_fixture("subcomms");
    let (_db_dir, db) = temp_db();
    // By folder, by anchor file (named run.otf2), and forced.
    db.import(&dir, Some("by-folder")).unwrap();
    db.import(dir.join("run.otf2"), None).unwrap();
    db.import_as(&dir, Some("forced"), mtfdb::SourceFormat::Otf2)
        .unwrap();
    assert_eq!(
        db.trace_names().unwrap(),
        vec!["by-folder".to_string(), "forced".into(), "run".into()]
    );
    // An MTF text file forced as OTF2 is refused, naming it.
    let mtf = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/traces/stencil2d-16.mtf");
    let err = db
        .import_as(&mtf, Some("x"), mtfdb::SourceFormat::Otf2)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("stencil2d-16.mtf") && err.contains("not an OTF2 anchor file"),
        "{err}"
    );
}

#[test]
fn an_archive_spanning_many_chunks_reads_every_record() {
    if !common::otf2_print::writer_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let archive = tmp.path().join("big");
    let out = common::otf2_print::write_with(
        "benches/otf2_gen.py",
        &[
            archive.as_os_str(),
            "--events".as_ref(),
            "400000".as_ref(),
            "--ranks".as_ref(),
            "2".as_ref(),
        ],
    );
    let counts: Value = serde_json::from_slice(&out).unwrap();
    // Each location's event file spans several 1 MiB chunks.
    let evt = std::fs::metadata(archive.join("traces/0.evt"))
        .unwrap()
        .len();
    assert!(evt > 2 << 20, "event file of {evt} bytes");

    let mut sink = mtfdb::gen::NullSink;
    let stats = mtfdb::ingest::otf2::read_archive(&archive, &mut sink, &mut |_| {}).unwrap();
    assert_eq!(stats.events, u(&counts["events"]));

    let (_dir, db) = temp_db();
    let info = db.import(&archive, None).unwrap();
    assert_eq!(info.name, "big");
    assert_eq!(info.summary.messages, u(&counts["messages"]));
    assert_eq!(info.summary.message_bytes, u(&counts["message_bytes"]));
    assert!(db.trace("big").unwrap().anomalies().unwrap().is_empty());
}

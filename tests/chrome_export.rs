//! `mtfdb export --format chrome`: the Chrome Trace Event JSON that Perfetto and
//! chrome://tracing open. For the generated scenarios and every real trace in
//! `../shared/traces` that imports, the file follows the format's rules (every event has its
//! fields, every flow its start and end, each flow event inside the MPI call it belongs to)
//! and holds what the trace holds: one slice per operation at its exact time, one per routine
//! call, one flow per message from its sender to its receiver, one per collective instance. A
//! time window and a rank selection keep exactly the operations the query language selects
//! with `FOR PROCESSES(..) BETWEEN TIME a AND b`. Errors leave no file.

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Output;

use mtfdb::export::chrome::{export_file, Restriction};
use mtfdb::export::{ExportStats, Format};
use mtfdb::gen::{GenConfig, Scenario};
use mtfdb::model::{OpId, Rank, Time};
use mtfdb::query::Session;
use mtfdb::{Database, Error, Trace};
use serde_json::Value;

use common::import_generated;

// ---------------------------------------------------------------------------------------
// Reading the file back

/// A JSON number of microseconds with three decimals, in nanoseconds (exactly: from its text).
fn ns(v: &Value) -> Time {
    let text = v.to_string();
    assert!(v.is_number(), "a time is a number, not {text}");
    let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
    assert!(
        frac.len() <= 3 && int.bytes().all(|b| b.is_ascii_digit()),
        "{text} is not microseconds with nanosecond precision"
    );
    let frac = format!("{frac:0<3}");
    int.parse::<Time>().unwrap() * 1000 + frac.parse::<Time>().unwrap()
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Slice {
    start: Time,
    end: Time,
    cat: String,
    name: String,
}

#[derive(Debug, Clone, Copy)]
struct FlowEvent {
    pid: Rank,
    tid: u32,
    ts: Time,
}

/// One flow: its events by phase.
#[derive(Debug, Default)]
struct Flow {
    name: String,
    s: Vec<FlowEvent>,
    t: Vec<FlowEvent>,
    f: Vec<FlowEvent>,
}

/// What a Chrome export holds, checked against the format's rules as it is read.
#[derive(Debug, Default)]
struct Doc {
    /// Slices by (pid, tid).
    slices: HashMap<(Rank, u32), Vec<Slice>>,
    process_names: BTreeMap<Rank, String>,
    thread_names: HashMap<(Rank, u32), String>,
    /// Flows by (category, id).
    flows: BTreeMap<(String, u64), Flow>,
}

impl Doc {
    fn mpi_slices(&self) -> usize {
        self.count("mpi")
    }

    fn count(&self, cat: &str) -> usize {
        self.slices
            .values()
            .flatten()
            .filter(|s| s.cat == cat)
            .count()
    }

    fn flows_of<'a>(&'a self, cat: &'a str) -> impl Iterator<Item = &'a Flow> + 'a {
        self.flows
            .iter()
            .filter(move |((c, _), _)| c == cat)
            .map(|(_, f)| f)
    }

    /// The MPI call slices of rank `pid`, as (tid, start, end, name), sorted.
    fn mpi_of(&self, pid: Rank) -> Vec<(u32, Time, Time, String)> {
        let mut out: Vec<_> = self
            .slices
            .iter()
            .filter(|((p, _), _)| *p == pid)
            .flat_map(|((_, t), list)| {
                list.iter()
                    .filter(|s| s.cat == "mpi")
                    .map(|s| (*t, s.start, s.end, s.name.clone()))
            })
            .collect();
        out.sort();
        out
    }
}

fn field<'a>(e: &'a Value, key: &str) -> &'a Value {
    e.get(key)
        .unwrap_or_else(|| panic!("an event without {key:?}: {e}"))
}

/// Parses `path` and checks every rule of the format the export promises.
fn read(path: &Path) -> Doc {
    let text = std::fs::read_to_string(path).unwrap();
    let root: Value = serde_json::from_str(&text).expect("the file is JSON");
    assert_eq!(root["displayTimeUnit"], "ns");
    let events = root["traceEvents"].as_array().expect("a traceEvents array");
    let mut doc = Doc::default();
    let mut with_events: HashSet<(Rank, u32)> = HashSet::new();
    for e in events {
        let name = field(e, "name")
            .as_str()
            .expect("a name string")
            .to_string();
        let ph = field(e, "ph").as_str().expect("a ph string");
        let pid = Rank::try_from(field(e, "pid").as_u64().expect("a pid number")).unwrap();
        let tid = u32::try_from(field(e, "tid").as_u64().expect("a tid number")).unwrap();
        if ph == "M" {
            let arg = &field(e, "args");
            match name.as_str() {
                "process_name" => {
                    let n = arg["name"].as_str().unwrap().to_string();
                    assert!(
                        doc.process_names.insert(pid, n).is_none(),
                        "named twice: {e}"
                    );
                }
                "process_sort_index" => assert_eq!(arg["sort_index"], pid),
                "thread_name" => {
                    let n = arg["name"].as_str().unwrap().to_string();
                    assert!(!n.is_empty());
                    assert!(
                        doc.thread_names.insert((pid, tid), n).is_none(),
                        "twice: {e}"
                    );
                }
                other => panic!("unexpected metadata {other}: {e}"),
            }
            continue;
        }
        with_events.insert((pid, tid));
        let ts = ns(field(e, "ts"));
        let cat = field(e, "cat").as_str().expect("a category").to_string();
        match ph {
            "X" => {
                let dur = ns(field(e, "dur"));
                assert!(["mpi", "routine"].contains(&cat.as_str()), "{e}");
                doc.slices.entry((pid, tid)).or_default().push(Slice {
                    start: ts,
                    end: ts + dur,
                    cat,
                    name,
                });
            }
            "s" | "t" | "f" => {
                assert!(["message", "collective"].contains(&cat.as_str()), "{e}");
                if cat == "message" {
                    assert_eq!(name, "message");
                }
                let id = field(e, "id").as_u64().expect("a numeric flow id");
                if ph == "f" {
                    assert_eq!(
                        field(e, "bp"),
                        "e",
                        "a flow end binds to its enclosing slice"
                    );
                }
                let flow = doc.flows.entry((cat, id)).or_default();
                flow.name = name;
                let at = FlowEvent { pid, tid, ts };
                match ph {
                    "s" => flow.s.push(at),
                    "t" => flow.t.push(at),
                    _ => flow.f.push(at),
                }
            }
            other => panic!("unexpected phase {other}: {e}"),
        }
    }
    for (pid, tid) in &with_events {
        assert!(
            doc.thread_names.contains_key(&(*pid, *tid)),
            "thread {pid}/{tid} unnamed"
        );
        assert!(doc.process_names.contains_key(pid), "process {pid} unnamed");
    }
    for (pid, name) in &doc.process_names {
        assert_eq!(name, &format!("rank {pid}"));
    }
    for ((cat, id), flow) in &doc.flows {
        assert_eq!(
            (flow.s.len(), flow.f.len()),
            (1, 1),
            "flow {cat} {id} needs exactly one start and one end"
        );
        if cat == "message" {
            assert!(flow.t.is_empty());
            // What Perfetto draws as an arrow: never backwards in time.
            assert!(
                flow.s[0].ts <= flow.f[0].ts,
                "message flow {id} ends at {} before it starts at {}",
                flow.f[0].ts,
                flow.s[0].ts
            );
        }
        for at in flow.s.iter().chain(&flow.t).chain(&flow.f) {
            check_bound(&doc, at, &format!("flow {cat} {id}"));
        }
    }
    doc
}

/// A flow event must sit in an MPI call slice of its own pid/tid, the innermost slice open
/// there (what Perfetto binds it to), and strictly inside it when the slice lasts longer than
/// a nanosecond (so that no neighbour starting or ending then can take it).
fn check_bound(doc: &Doc, at: &FlowEvent, what: &str) {
    let slices = doc
        .slices
        .get(&(at.pid, at.tid))
        .unwrap_or_else(|| panic!("{what}: no slice on {}/{}", at.pid, at.tid));
    let containing: Vec<&Slice> = slices
        .iter()
        .filter(|s| s.start <= at.ts && at.ts <= s.end)
        .collect();
    let innermost = containing
        .iter()
        .max_by_key(|s| (s.start, std::cmp::Reverse(s.end)))
        .unwrap_or_else(|| panic!("{what}: ts {} in no slice of {}/{}", at.ts, at.pid, at.tid));
    assert_eq!(innermost.cat, "mpi", "{what} binds to {innermost:?}");
    if innermost.end - innermost.start > 1 {
        assert!(
            innermost.start < at.ts && at.ts < innermost.end,
            "{what} at an edge of {innermost:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// What the trace holds

/// Every operation of the trace as (rank, thread, start, end, call name), and by id.
fn operations(trace: &Trace) -> HashMap<OpId, (Rank, u32, Time, Time, String)> {
    let mut out = HashMap::new();
    for p in &trace.header().processes {
        for (id, op) in trace.process_operations(p.rank).unwrap() {
            let name = trace.kind_name(op.kind);
            out.insert(id, (op.rank, op.thread, op.start, op.end, name));
        }
    }
    out
}

fn export(trace: &Trace, r: &Restriction, dir: &Path, file: &str) -> (ExportStats, Doc) {
    let path = dir.join(file);
    let stats = export_file(trace, r, &path).unwrap();
    (stats, read(&path))
}

/// The whole trace's export holds exactly what the trace holds.
fn check_whole(trace: &Trace, dir: &Path, label: &str) -> Doc {
    let (stats, doc) = export(trace, &Restriction::all(), dir, &format!("{label}.json"));
    let s = trace.summary();
    // One slice per operation, at its exact time, on its rank and thread, named after its call.
    assert_eq!(doc.mpi_slices() as u64, s.operations, "{label}");
    assert_eq!(stats.operations, s.operations, "{label}");
    let ops = operations(trace);
    for p in &trace.header().processes {
        let mut want: Vec<(u32, Time, Time, String)> = ops
            .values()
            .filter(|o| o.0 == p.rank)
            .map(|o| (o.1, o.2, o.3, o.4.clone()))
            .collect();
        want.sort();
        assert_eq!(doc.mpi_of(p.rank), want, "{label}: rank {}", p.rank);
    }
    assert_eq!(doc.count("routine") as u64, s.routine_calls, "{label}");
    assert_eq!(stats.routine_calls, s.routine_calls, "{label}");
    // One flow per message, from the sender's send to the receiver's receive.
    // (A message received before it was sent in the clocks written draws none: counted.)
    assert_eq!(
        doc.flows_of("message").count() as u64,
        stats.messages,
        "{label}"
    );
    assert_eq!(
        stats.messages + stats.backward_messages,
        s.messages,
        "{label}"
    );
    let mut want_pairs: BTreeMap<(Rank, Rank), u64> = BTreeMap::new();
    for m in trace.messages().unwrap() {
        *want_pairs.entry((m.sender, m.receiver)).or_default() += 1;
    }
    let mut got_pairs: BTreeMap<(Rank, Rank), u64> = BTreeMap::new();
    for f in doc.flows_of("message") {
        *got_pairs.entry((f.s[0].pid, f.f[0].pid)).or_default() += 1;
    }
    if stats.backward_messages == 0 {
        assert_eq!(
            got_pairs, want_pairs,
            "{label}: messages per (sender, receiver)"
        );
    }
    // One flow per collective instance of two members or more, through every member.
    let instances: Vec<usize> = trace
        .collective_instances()
        .unwrap()
        .iter()
        .map(|c| c.ops.len())
        .filter(|&n| n >= 2)
        .collect();
    let drawn: Vec<&Flow> = doc.flows_of("collective").collect();
    assert_eq!(drawn.len(), instances.len(), "{label}");
    assert_eq!(
        stats.collective_instances,
        instances.len() as u64,
        "{label}"
    );
    let members: usize = drawn.iter().map(|f| 2 + f.t.len()).sum();
    assert_eq!(members, instances.iter().sum::<usize>(), "{label}");
    for f in &drawn {
        assert!(f.name.starts_with("MPI_") || !f.name.is_empty());
        let times: Vec<Time> = f.s.iter().chain(&f.t).chain(&f.f).map(|e| e.ts).collect();
        assert!(
            times.windows(2).all(|w| w[0] <= w[1]),
            "{label}: members in time order"
        );
    }
    // A rank per process, named.
    let ranks: Vec<Rank> = trace.header().processes.iter().map(|p| p.rank).collect();
    assert_eq!(doc.process_names.keys().copied().collect::<Vec<_>>(), ranks);
    doc
}

// ---------------------------------------------------------------------------------------
// Generated scenarios

#[test]
fn generated_scenarios_export_every_operation_message_and_collective() {
    let (dir, db) = common::temp_db();
    for (i, scenario) in Scenario::ALL.into_iter().enumerate() {
        let mut config = GenConfig::new(scenario, 16, 4);
        config.shuffle_ranks = i % 2 == 1;
        let name = scenario.to_string();
        let truth = import_generated(&db, &config, &name);
        let trace = db.trace(&name).unwrap();
        assert_eq!(trace.summary().operations, truth.operations);
        let doc = check_whole(&trace, dir.path(), &name);
        // Every scenario but alltoall sends point-to-point messages.
        assert_eq!(
            doc.flows_of("message").count() > 0,
            scenario != Scenario::Alltoall,
            "{name}"
        );
        assert!(
            doc.flows_of("collective").count() > 0,
            "{name} has collectives"
        );
    }
}

#[test]
fn the_stencil_slices_carry_bytes_peer_tag_and_communicator() {
    let (dir, db) = common::temp_db();
    import_generated(&db, &GenConfig::new(Scenario::Stencil2d, 4, 2), "s");
    let trace = db.trace("s").unwrap();
    let path = dir.path().join("s.json");
    export_file(&trace, &Restriction::all(), &path).unwrap();
    let root: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let events = root["traceEvents"].as_array().unwrap();
    let ops = operations(&trace);
    let mut isends = 0;
    for e in events.iter().filter(|e| e["name"] == "MPI_Isend") {
        let (pid, ts) = (e["pid"].as_u64().unwrap() as Rank, ns(&e["ts"]));
        let op = trace
            .process_operations(pid)
            .unwrap()
            .into_iter()
            .map(|(_, op)| op)
            .find(|op| op.start == ts && op.kind == mtfdb::model::OpKind::Isend)
            .expect("the slice is an MPI_Isend of its rank at its time");
        let args = &e["args"];
        assert_eq!(args["bytes"], op.send_bytes);
        assert_eq!(args["peer"], op.dest.unwrap());
        assert_eq!(args["tag"], op.send_tag.unwrap());
        assert_eq!(args["communicator"], "C1");
        isends += 1;
    }
    assert_eq!(
        isends,
        trace.summary().kind_count(mtfdb::model::OpKind::Isend)
    );
    let bcast = events
        .iter()
        .find(|e| e["name"] == "MPI_Bcast" && e["ph"] == "X")
        .unwrap();
    assert_eq!(bcast["args"]["root"], 0);
    assert!(ops.len() as u64 == trace.summary().operations);
}

/// The operations `SELECT OPERATIONS FOR PROCESSES(ranks) BETWEEN TIME a AND b` selects.
fn query_count(db: Database, trace: &str, ranks: &str, from: &str, to: &str) -> u64 {
    let mut s = Session::new(db);
    s.use_trace(trace).unwrap();
    let q = format!("SELECT OPERATIONS FOR PROCESSES({ranks}) BETWEEN TIME {from} AND {to}");
    s.run(&q).unwrap().len() as u64
}

#[test]
fn a_window_and_ranks_keep_exactly_the_operations_the_query_selects() {
    let (dir, db) = common::temp_db();
    import_generated(&db, &GenConfig::new(Scenario::Stencil2d, 16, 8), "s");
    let trace = db.trace("s").unwrap();
    let (first, last) = (
        trace.summary().first_time.unwrap(),
        trace.summary().last_time.unwrap(),
    );
    // The middle third, in microseconds as a user would type it.
    let (a_us, b_us) = (
        (first + (last - first) / 3) / 1000,
        (first + 2 * (last - first) / 3) / 1000,
    );
    let (from, to) = (format!("{a_us}us"), format!("{b_us}us"));
    let ranks = "0-5,9";
    let r = Restriction {
        from: Some(Restriction::parse_time(&from, "--from").unwrap()),
        to: Some(Restriction::parse_time(&to, "--to").unwrap()),
        ranks: Some(Restriction::parse_ranks(ranks).unwrap()),
        ..Restriction::default()
    };
    assert_eq!(r.from, Some(a_us * 1000));
    let (stats, doc) = export(&trace, &r, dir.path(), "w.json");
    let (a, b) = (a_us * 1000, b_us * 1000);
    let kept = |rank: Rank, start: Time, end: Time| {
        [0, 1, 2, 3, 4, 5, 9].contains(&rank) && start <= b && end >= a
    };
    // The operations: as the query language selects them, and one by one.
    let ops = operations(&trace);
    let want = ops.values().filter(|o| kept(o.0, o.2, o.3)).count() as u64;
    assert!(want > 0 && want < trace.summary().operations / 4, "{want}");
    assert_eq!(doc.mpi_slices() as u64, want);
    assert_eq!(stats.operations, want);
    for rank in 0..16 {
        let mut mine: Vec<_> = ops
            .values()
            .filter(|o| o.0 == rank && kept(o.0, o.2, o.3))
            .map(|o| (o.1, o.2, o.3, o.4.clone()))
            .collect();
        mine.sort();
        assert_eq!(doc.mpi_of(rank), mine, "rank {rank}");
    }
    // Routine calls overlapping the window, whole.
    let calls = trace.routine_calls().unwrap();
    let want_calls = calls
        .iter()
        .filter(|c| kept(c.rank, c.start, c.end))
        .count();
    assert_eq!(doc.count("routine"), want_calls);
    // A flow only for a message with both ends written.
    let both = trace
        .message_ops()
        .unwrap()
        .iter()
        .filter(|(s, r)| {
            let (s, r) = (&ops[s], &ops[r]);
            kept(s.0, s.2, s.3) && kept(r.0, r.2, r.3)
        })
        .count();
    assert!(both > 0);
    assert_eq!(doc.flows_of("message").count(), both);
    assert_eq!(stats.messages, both as u64);
    // Only the kept ranks are there.
    assert_eq!(
        doc.process_names.keys().copied().collect::<Vec<_>>(),
        vec![0, 1, 2, 3, 4, 5, 9]
    );
    drop(trace);
    assert_eq!(query_count(db, "s", ranks, &from, &to), want);
}

#[test]
fn a_time_window_alone_and_ranks_alone() {
    let (dir, db) = common::temp_db();
    import_generated(&db, &GenConfig::new(Scenario::Ring, 8, 6), "r");
    let trace = db.trace("r").unwrap();
    let ops = operations(&trace);
    // Ranks alone: every operation of those ranks; messages among them only.
    let r = Restriction {
        ranks: Some(vec![3, 1, 2, 1]),
        ..Restriction::all()
    };
    let (_, doc) = export(&trace, &r, dir.path(), "ranks.json");
    let want = ops.values().filter(|o| (1..=3).contains(&o.0)).count();
    assert_eq!(doc.mpi_slices(), want);
    let among = trace
        .messages()
        .unwrap()
        .iter()
        .filter(|m| (1..=3).contains(&m.sender) && (1..=3).contains(&m.receiver))
        .count();
    assert_eq!(doc.flows_of("message").count(), among);
    // A window alone, open at one end: from the middle on.
    let s = trace.summary();
    let mid = (s.first_time.unwrap() + s.last_time.unwrap()) / 2;
    let r = Restriction {
        from: Some(mid),
        ..Restriction::all()
    };
    let (_, doc) = export(&trace, &r, dir.path(), "late.json");
    let want = ops.values().filter(|o| o.3 >= mid).count();
    assert_eq!(doc.mpi_slices(), want);
    // A window past the end: no events but the names of the ranks, still a valid file.
    let r = Restriction {
        from: Some(s.last_time.unwrap() + 1),
        ..Restriction::all()
    };
    let (stats, doc) = export(&trace, &r, dir.path(), "none.json");
    assert_eq!(
        (stats.operations, doc.slices.len(), doc.flows.len()),
        (0, 0, 0)
    );
    assert_eq!(doc.process_names.len(), 8);
}

#[test]
fn times_and_rank_lists_parse_as_the_query_language_writes_them() {
    for (text, ns) in [
        ("1.5", 1_500_000_000),
        ("1.5ms", 1_500_000),
        ("1.5 ms", 1_500_000),
        ("200us", 200_000),
        ("7ns", 7),
        ("0", 0),
        (".25s", 250_000_000),
    ] {
        assert_eq!(
            Restriction::parse_time(text, "--from").unwrap(),
            ns,
            "{text}"
        );
    }
    for (text, why) in [
        ("1.5ns", "whole number of nanoseconds"),
        ("3 parsecs", "unknown time unit"),
        ("ms", "not a time"),
        ("-1", "not a time"),
        ("1.2.3", "not a time"),
        ("99999999999999999999", "too large"),
    ] {
        let e = Restriction::parse_time(text, "--to").unwrap_err();
        assert!(matches!(e, Error::Usage(_)), "{e:?}");
        let m = e.to_string();
        assert!(m.starts_with("--to: ") && m.contains(why), "{text}: {m}");
    }
    assert_eq!(
        Restriction::parse_ranks("0-3, 32,2").unwrap(),
        vec![0, 1, 2, 3, 32]
    );
    for bad in ["", "1-", "a", "5-2", "1,,2", "-3"] {
        let m = Restriction::parse_ranks(bad).unwrap_err().to_string();
        assert!(
            m.contains("--processes") && m.contains("0-15,32"),
            "{bad}: {m}"
        );
    }
}

#[test]
fn errors_are_clean_and_leave_no_file() {
    let (dir, db) = common::temp_db();
    import_generated(&db, &GenConfig::new(Scenario::Ring, 4, 2), "r");
    let trace = db.trace("r").unwrap();
    // An output in a folder that does not exist.
    let missing = dir.path().join("no/such/folder/r.json");
    let e = export_file(&trace, &Restriction::all(), &missing).unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e:?}");
    assert!(e.to_string().contains("no/such/folder/r.json"), "{e}");
    assert!(!missing.exists());
    // A restriction the trace cannot meet: refused, and the file created for it removed.
    let out = dir.path().join("r.json");
    for (r, why) in [
        (
            Restriction {
                ranks: Some(vec![0, 4]),
                ..Restriction::all()
            },
            "the trace has no rank 4 (its ranks are 0-3)",
        ),
        (
            Restriction {
                from: Some(2_000_000),
                to: Some(1_000_000),
                ..Restriction::all()
            },
            "--from 2 ms is after --to 1 ms",
        ),
    ] {
        let e = export_file(&trace, &r, &out).unwrap_err();
        assert!(matches!(e, Error::Usage(_)), "{e:?}");
        assert!(e.to_string().contains(why), "{e}");
        assert!(!out.exists(), "no half-written file");
    }
    // Through the generic entry point too.
    let whole = dir.path().join("whole.json");
    let stats = mtfdb::export::export_file(&trace, Format::Chrome, &whole).unwrap();
    assert_eq!(stats.operations, trace.summary().operations);
    read(&whole);
    assert_eq!(Format::from_name("chrome").unwrap(), Format::Chrome);
    assert_eq!(Format::Chrome.name(), "chrome");
}

// ---------------------------------------------------------------------------------------
// Every real trace that imports

/// Where the real traces are: `../shared/traces` beside the crate.
fn shared_traces() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/traces");
    dir.is_dir().then_some(dir)
}

#[test]
fn every_real_trace_exports_every_operation_message_and_collective() {
    let Some(root) = shared_traces() else {
        println!("skipped: ../shared/traces is absent");
        return;
    };
    let (dir, db) = common::temp_db();
    let traces: [(&str, &str); 13] = [
        ("dumpi/testtrace", "dumpi"),
        ("otf1/jacobi", "otf1_jacobi"),
        ("paraver/qsort", "qsort"),
        ("paraver/lulesh", "lulesh"),
        ("otf2/ping-pong", "ping_pong"),
        ("otf2/ping-pong-papi", "ping_pong_papi"),
        ("otf2/casita/4_mpi_ls_barr", "ls_barr"),
        ("otf2/casita/2_jacobi_blame_cpu_015", "jacobi_blame"),
        ("otf2/casita/2_cuda_simple", "cuda_simple"),
        ("otf2/casita/1_xeonphi_jacobi_01", "xeonphi"),
        ("otf2/casita/1_ocl_deps", "ocl"),
        ("otf2/casita/1_scorep-ompt-host-nested", "ompt"),
        ("otf2/mi300-hip", "mi300"),
    ];
    let mut exported = Vec::new();
    let mut windows = Vec::new();
    for (folder, name) in traces {
        let path = root.join(folder);
        // A folder, or else its one trace file (the Paraver folders hold a .prv beside others).
        let imported = db.import(&path, Some(name)).is_ok() || {
            let prv = std::fs::read_dir(&path)
                .unwrap()
                .map(|e| e.unwrap().path())
                .find(|p| p.extension().is_some_and(|e| e == "prv"));
            prv.is_some_and(|p| db.import(&p, Some(name)).is_ok())
        };
        assert!(imported, "{folder} imports");
        let trace = db.trace(name).unwrap();
        let doc = check_whole(&trace, dir.path(), name);
        exported.push((
            name,
            trace.summary().messages,
            doc.flows_of("message").count(),
        ));
        // The middle third of the time and the first half of the ranks.
        let s = trace.summary();
        if let (Some(first), Some(last)) = (s.first_time, s.last_time) {
            let n = trace.header().processes.len() as u32;
            let r = Restriction {
                from: Some(first + (last - first) / 3),
                to: Some(first + 2 * (last - first) / 3),
                ranks: Some((0..n.div_ceil(2)).collect()),
                ..Restriction::default()
            };
            let (stats, part) = export(&trace, &r, dir.path(), &format!("{name}.part.json"));
            assert_eq!(part.mpi_slices() as u64, stats.operations);
            windows.push((name, r, stats.operations));
        }
    }
    println!("exported (name, messages, flows): {exported:?}");
    let mut session = Session::new(db);
    for (name, r, written) in windows {
        session.use_trace(name).unwrap();
        let ranks = r.ranks.unwrap();
        let q = format!(
            "SELECT OPERATIONS FOR PROCESSES(0-{}) BETWEEN TIME {}ns AND {}ns",
            ranks.last().unwrap(),
            r.from.unwrap(),
            r.to.unwrap()
        );
        assert_eq!(
            session.run(&q).unwrap().len() as u64,
            written,
            "{name}: {q}"
        );
    }
    let flows = |n: &str| exported.iter().find(|e| e.0 == n).unwrap().2;
    // What the traces' README says they hold.
    assert_eq!(flows("ping_pong"), 16);
    assert_eq!(flows("jacobi_blame"), 2000);
    assert_eq!(flows("cuda_simple"), 20);
    assert_eq!(flows("ls_barr"), 3);
    assert_eq!(flows("qsort"), 33);
}

// ---------------------------------------------------------------------------------------
// The command line

use common::mtfdb_output as mtfdb;

fn ok(o: Output) -> String {
    assert!(
        o.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).to_string()
}

fn fails(o: Output) -> String {
    assert!(!o.status.success(), "should fail");
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn the_cli_writes_chrome_json_from_the_extension_or_format_with_a_restriction() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let p = |f: &str| dir.path().join(f).to_str().unwrap().to_string();
    ok(mtfdb(
        &db,
        &[
            "gen",
            "ring",
            "--ranks",
            "8",
            "--iterations",
            "3",
            "-o",
            &p("ring.mtf"),
        ],
    ));
    ok(mtfdb(&db, &["import", &p("ring.mtf"), "--name", "ring"]));
    let out = ok(mtfdb(&db, &["export", "ring", "-o", &p("ring.json")]));
    assert!(out.contains("(chrome)"), "{out}");
    let doc = read(Path::new(&p("ring.json")));
    let trace = Database::open_existing(&db).unwrap().trace("ring").unwrap();
    assert_eq!(doc.mpi_slices() as u64, trace.summary().operations);
    assert!(
        out.contains(&format!("{} MPI calls", trace.summary().operations)),
        "{out}"
    );
    drop(trace);
    // --format chrome whatever the extension; a restriction in units.
    ok(mtfdb(
        &db,
        &[
            "export",
            "ring",
            "--format",
            "chrome",
            "-o",
            &p("part.trace"),
            "--from",
            "0",
            "--to",
            "1ms",
            "--processes",
            "0-1,5",
        ],
    ));
    let doc = read(Path::new(&p("part.trace")));
    assert_eq!(
        doc.process_names.keys().copied().collect::<Vec<_>>(),
        vec![0, 1, 5]
    );
    assert!(doc.slices.values().flatten().all(|s| s.start <= 1_000_000));
    // User errors: a clear message, exit status 1, no file.
    let cases: [(&[&str], &str); 5] = [
        (&["--from", "1 lightyear"], "unknown time unit"),
        (&["--processes", "0-99"], "the trace has no rank 8"),
        (&["--from", "2ms", "--to", "1ms"], "must go forward"),
        (
            &["--format", "gxl", "--to", "1ms"],
            "restrict a chrome export only",
        ),
        (
            &["--format", "svg"],
            "chrome (Chrome trace JSON for Perfetto)",
        ),
    ];
    for (args, why) in cases {
        let bad = p("bad.json");
        let mut all = vec!["export", "ring", "-o", &bad];
        all.extend_from_slice(args);
        let err = fails(mtfdb(&db, &all));
        assert!(err.contains(why), "{args:?}: {err}");
        assert!(!Path::new(&bad).exists(), "{args:?} left a file");
    }
    let err = fails(mtfdb(&db, &["export", "ring", "-o", &p("no/dir/x.json")]));
    assert!(err.contains("no/dir/x.json"), "{err}");
    let err = fails(mtfdb(&db, &["export", "ring", "-o", &p("ring.txt")]));
    assert!(
        err.contains("--format mtf, gxl, parquet or chrome"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------
// Flows forward in time, names demangled, an independent reader

/// Runs the independent checker of the Chrome trace format (tests/chrome_trace_check.py) on
/// `path`: it must find no fault; returns its closing line.
fn independent_check(path: &Path) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/chrome_trace_check.py");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg(path)
        .output()
        .expect("python3 runs (the CI machine has it)");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{}: {text}", path.display());
    let last = text.lines().last().unwrap_or("").to_string();
    assert!(last.ends_with(" 0 failed"), "{last}");
    last
}

/// The message flows of `doc` whose end sits in a slice named `call` on its thread.
fn flows_ending_in(doc: &Doc, call: &str) -> usize {
    doc.flows_of("message")
        .filter(|f| {
            let at = f.f[0];
            doc.slices[&(at.pid, at.tid)]
                .iter()
                .any(|s| s.name == call && s.start <= at.ts && at.ts <= s.end)
        })
        .count()
}

#[test]
fn every_message_flow_ends_after_it_starts_on_the_call_that_completed_its_receive() {
    let (dir, db) = common::temp_db();
    // CG posts its receives (MPI_Irecv) before it sends: a flow ending on the Irecv would
    // go back in time; it ends on the Wait that completed the receive.
    for scenario in [
        Scenario::Cg,
        Scenario::Stencil2d,
        Scenario::Ring,
        Scenario::Bt,
    ] {
        let name = scenario.to_string();
        import_generated(&db, &GenConfig::new(scenario, 16, 6), &name);
        let trace = db.trace(&name).unwrap();
        let (stats, doc) = export(
            &trace,
            &Restriction::all(),
            dir.path(),
            &format!("{name}.json"),
        );
        assert_eq!(stats.backward_messages, 0, "{name}: generated clocks agree");
        assert_eq!(stats.messages, trace.summary().messages, "{name}");
        let irecvs = trace.summary().kind_count(mtfdb::model::OpKind::Irecv);
        if irecvs > 0 {
            assert_eq!(flows_ending_in(&doc, "MPI_Irecv"), 0, "{name}");
            let on_waits = ["MPI_Wait", "MPI_Waitall", "MPI_Waitany", "MPI_Waitsome"]
                .iter()
                .map(|w| flows_ending_in(&doc, w))
                .sum::<usize>();
            assert_eq!(
                on_waits as u64, irecvs,
                "{name}: each Irecv's flow ends on its Wait"
            );
        }
        let last = independent_check(&dir.path().join(format!("{name}.json")));
        println!("{name}: {last}");
    }
}

/// A sink that moves every time of one rank by a constant: a clock that runs ahead.
struct SkewedClock<'a, 's> {
    inner: &'a mut mtfdb::ValidatingSink<'s>,
    rank: Rank,
    ahead: Time,
}

impl mtfdb::EventSink for SkewedClock<'_, '_> {
    fn header(&mut self, h: &mtfdb::model::TraceHeader) -> mtfdb::Result<()> {
        self.inner.header(h)
    }
    fn string(&mut self, id: mtfdb::model::StrId, text: &str) -> mtfdb::Result<()> {
        self.inner.string(id, text)
    }
    fn operation(&mut self, op: &mtfdb::model::Operation) -> mtfdb::Result<()> {
        let mut op = op.clone();
        if op.rank == self.rank {
            op.start += self.ahead;
            op.end += self.ahead;
        }
        self.inner.operation(&op)
    }
    fn routine(&mut self, e: &mtfdb::model::RoutineEvent) -> mtfdb::Result<()> {
        let mut e = *e;
        if e.rank == self.rank {
            e.time += self.ahead;
        }
        self.inner.routine(&e)
    }
    fn finish(&mut self) -> mtfdb::Result<()> {
        self.inner.finish()
    }
}

#[test]
fn skewed_clocks_draw_no_backward_flow_and_the_correction_restores_every_flow() {
    let (dir, db) = common::temp_db();
    let config = GenConfig::new(Scenario::Ring, 4, 20);
    // Rank 1's clock 1 ms ahead: its messages to rank 2 arrive "before" they were sent.
    db.import_events("skewed", |sink| {
        let mut skewed = SkewedClock {
            inner: sink,
            rank: 1,
            ahead: 1_000_000,
        };
        mtfdb::gen::generate(&config, &mut skewed).map(|_| ())
    })
    .unwrap();
    let trace = db.trace("skewed").unwrap();
    let messages = trace.summary().messages;
    let (stats, _) = export(&trace, &Restriction::all(), dir.path(), "stored.json");
    assert!(stats.backward_messages > 0, "{stats:?}");
    assert_eq!(stats.messages + stats.backward_messages, messages);
    independent_check(&dir.path().join("stored.json"));
    for clock in ["offsets", "clc"] {
        let r = Restriction {
            clock: mtfdb::analysis::clock::ClockCorrection::from_name(clock).unwrap(),
            ..Restriction::default()
        };
        let file = format!("{clock}.json");
        let (stats, doc) = export(&trace, &r, dir.path(), &file);
        assert_eq!(stats.backward_messages, 0, "{clock}");
        assert_eq!(stats.messages, messages, "{clock}");
        assert_eq!(doc.flows_of("message").count() as u64, messages, "{clock}");
        independent_check(&dir.path().join(&file));
    }
}

#[test]
fn mangled_cpp_names_are_written_demangled() {
    assert_eq!(
        mtfdb::export::chrome::demangled("_ZN6Domain10AllocateElEii"),
        "Domain::AllocateEl(int, int)"
    );
    assert_eq!(mtfdb::export::chrome::demangled("main"), "main");
    // Not every name starting with _Z is mangled: such a name is kept as it is.
    assert_eq!(mtfdb::export::chrome::demangled("_Zebra"), "_Zebra");
}

#[test]
fn every_real_trace_passes_the_independent_checker() {
    let Some(root) = shared_traces() else {
        println!("skipped: ../shared/traces is absent");
        return;
    };
    let (dir, db) = common::temp_db();
    for (folder, name) in [
        ("otf1/jacobi", "jacobi"),
        ("otf2/casita/2_jacobi_blame_cpu_015", "jacobi_blame"),
        ("dumpi/testtrace", "dumpi"),
        ("otf2/mi300-hip", "mi300"),
        ("otf2/eztrace-lammps-melt/eztrace_log.otf2", "lammps"),
    ] {
        db.import(root.join(folder), Some(name)).unwrap();
        let trace = db.trace(name).unwrap();
        let path = dir.path().join(format!("{name}.json"));
        let stats = export_file(&trace, &Restriction::all(), &path).unwrap();
        let last = independent_check(&path);
        println!("{name}: {stats:?}; {last}");
        // The names Perfetto shows are people's: no mangled C++ name is left.
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("\"name\":\"_Z"), "{name}: a mangled name");
    }
}

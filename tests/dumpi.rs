//! DUMPI import: the real trace in `../shared/traces/dumpi/testtrace` against its reference
//! `dumpi2ascii` dump, a DUMPI 1.1 fixture (written by `tests/fixtures/dumpi/writer.rs`) with a
//! communicator made by `MPI_Comm_create` on a subgroup, a split, a dup, Waitall, Waitany and
//! Testsome, checked against the reference `dumpi2ascii` dump of its files and against the
//! messages, collectives and communicators it was written to hold, and damaged files.

mod common;

#[path = "fixtures/dumpi/writer.rs"]
mod writer;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::temp_db;
use mtfdb::model::{flags, Anomaly, OpKind, Operation, Rank, Rule};
use mtfdb::{Error, SourceFormat, Trace};
use writer::{handle::*, label::*, Arg, RankWriter, Status};

// ---------------------------------------------------------------------------------------
// The fixture.

/// Wall-clock seconds of the fixture's start.
const T0: u32 = 1_700_000_000;
/// Ranks of the fixture.
const RANKS: usize = 6;
/// Address of the profiled function `solve`.
const SOLVE: u64 = 0x40_1000;

/// One rank's script: its writer and its clock.
struct Script {
    w: RankWriter,
    now: u64,
}

impl Script {
    fn new(rank: usize) -> Script {
        let mut w = RankWriter::new([1, 1, 0], T0);
        w.functions.push((SOLVE, "solve".into()));
        Script {
            w,
            // Ranks start 10 us apart: rank 0's MPI_Init is the trace's first event.
            now: u64::from(T0) * 1_000_000_000 + 500_000 + rank as u64 * 10_000,
        }
    }

    /// A call of 1 us after a gap of 1 us; returns its record's offset.
    fn call(&mut self, func: u16, args: Vec<Arg>) -> u64 {
        self.on_thread(func, 0, args)
    }

    fn on_thread(&mut self, func: u16, thread: u16, args: Vec<Arg>) -> u64 {
        self.now += 1_000;
        let start = self.now;
        self.now += 1_000;
        self.w.call(func, thread, start, self.now, &args)
    }
}

/// Writes the ranks' scripts as trace `name` into `dir`; returns its meta file.
fn write_scripts(dir: &Path, name: &str, scripts: Vec<Script>) -> PathBuf {
    let writers: Vec<RankWriter> = scripts.into_iter().map(|p| p.w).collect();
    writer::write_trace(dir, name, &writers)
}

fn st(bytes: i32, source: i32, tag: i32) -> Status {
    Status { bytes, source, tag }
}

/// Offsets of records the damage tests overwrite.
struct Marks {
    /// Rank 3's `MPI_Comm_rank` record.
    rank3_comm_rank: u64,
    /// Rank 2's `MPI_Waitall` record and the offset of its request count.
    rank2_waitall: u64,
}

/// Writes the fixture trace `subcomm` (DUMPI 1.1, 6 ranks) into `dir`:
///
/// - the odd ranks make a communicator with `MPI_Comm_group`, `MPI_Group_incl` and
///   `MPI_Comm_create` (world ranks 1, 3, 5; the even ranks get `MPI_COMM_NULL`), broadcast 10
///   doubles from its rank 1 (world 3), exchange messages in its ranks (its rank 0 to 2: 5
///   ints, tag 7, received with `MPI_ANY_SOURCE`/`MPI_ANY_TAG` and completed by `MPI_Waitany`;
///   its rank 2 to 1: 3 doubles, tag 9), reduce 2 ints with `MPI_Allreduce`, and free it;
/// - the even ranks pass 4 ints around a ring 0 → 2 → 4 → 0 (tag 3) on the world,
///   completing with `MPI_Testsome` (a first call that finds nothing, then both requests) on
///   rank 0, `MPI_Waitall` on rank 2, `MPI_Waitany` then `MPI_Wait` on rank 4; rank 0 does it
///   inside the profiled function `solve`, and its thread 1 calls `MPI_Comm_rank` meanwhile;
/// - everyone splits the world by parity with keys 10 − rank (members 4, 2, 0 and 5, 3, 1),
///   dups the result and synchronizes on the dup, sends 2 chars from split rank 0 to split
///   rank 1 (world 4 → 2, 5 → 3), gathers an int at split rank 0, and ends with a world
///   barrier.
fn write_subcomm(dir: &Path) -> (PathBuf, Marks) {
    let mut s: Vec<Script> = (0..RANKS).map(Script::new).collect();
    let mut marks = Marks {
        rank3_comm_rank: 0,
        rank2_waitall: 0,
    };
    for (r, p) in s.iter_mut().enumerate() {
        let ri = r as i32;
        p.call(
            INIT,
            vec![Arg::Argv(vec!["./fixture".into(), "-n".into(), "6".into()])],
        );
        let at = p.call(COMM_RANK, vec![Arg::H(COMM_WORLD), Arg::I(ri)]);
        if r == 3 {
            marks.rank3_comm_rank = at;
        }
        p.call(COMM_SIZE, vec![Arg::H(COMM_WORLD), Arg::I(RANKS as i32)]);
        p.call(COMM_GROUP, vec![Arg::H(COMM_WORLD), Arg::H(3)]);
        p.call(
            GROUP_INCL,
            vec![Arg::H(3), Arg::I(3), Arg::Ints(vec![1, 3, 5]), Arg::H(4)],
        );
        let sub = if r % 2 == 1 { 4 } else { COMM_NULL };
        p.call(
            COMM_CREATE,
            vec![Arg::H(COMM_WORLD), Arg::H(4), Arg::H(sub)],
        );
        p.call(GROUP_FREE, vec![Arg::H(4)]);
        if r % 2 == 1 {
            let local = (ri - 1) / 2;
            p.call(
                BCAST,
                vec![Arg::I(10), Arg::H(MPI_DOUBLE), Arg::I(1), Arg::H(4)],
            );
            match local {
                0 => {
                    p.call(ISEND, writer::send_args(5, MPI_INT, 2, 7, 4, Some(2)));
                    p.call(WAIT, vec![Arg::I(2), Arg::St(Some(vec![st(0, 0, 0)]))]);
                }
                1 => {
                    p.call(
                        RECV,
                        writer::recv_args(3, MPI_DOUBLE, 2, 9, 4, Some(st(24, 2, 9))),
                    );
                }
                _ => {
                    p.call(
                        IRECV,
                        writer::irecv_args(5, MPI_INT, ANY_SOURCE, ANY_TAG, 4, 2),
                    );
                    p.call(ISEND, writer::send_args(3, MPI_DOUBLE, 1, 9, 4, Some(3)));
                    p.call(
                        WAITANY,
                        vec![
                            Arg::I(2),
                            Arg::Ints(vec![2, 3]),
                            Arg::I(0),
                            Arg::St(Some(vec![st(20, 0, 7)])),
                        ],
                    );
                    p.call(
                        WAITANY,
                        vec![
                            Arg::I(2),
                            Arg::Ints(vec![REQUEST_NULL, 3]),
                            Arg::I(1),
                            Arg::St(Some(vec![st(0, 0, 0)])),
                        ],
                    );
                }
            }
            p.call(
                ALLREDUCE,
                vec![Arg::I(2), Arg::H(MPI_INT), Arg::I8(3), Arg::H(4)],
            );
            p.call(COMM_FREE, vec![Arg::H(4)]);
        } else {
            let (prev, next) = ((ri + 4) % 6, (ri + 2) % 6);
            if r == 0 {
                p.call(FUNCTION_ENTER, vec![Arg::I64(SOLVE)]);
            }
            p.call(
                IRECV,
                writer::irecv_args(4, MPI_INT, prev, 3, COMM_WORLD, 2),
            );
            p.call(
                ISEND,
                writer::send_args(4, MPI_INT, next, 3, COMM_WORLD, Some(3)),
            );
            let two = || Arg::Ints(vec![2, 3]);
            match r {
                0 => {
                    p.on_thread(COMM_RANK, 1, vec![Arg::H(COMM_WORLD), Arg::I(0)]);
                    p.call(
                        TESTSOME,
                        vec![
                            Arg::I(2),
                            two(),
                            Arg::I(0),
                            Arg::Ints(vec![]),
                            Arg::St(None),
                        ],
                    );
                    p.call(
                        TESTSOME,
                        vec![
                            Arg::I(2),
                            two(),
                            Arg::I(2),
                            Arg::Ints(vec![1, 0]),
                            Arg::St(Some(vec![st(0, 0, 0), st(16, 4, 3)])),
                        ],
                    );
                    p.call(FUNCTION_EXIT, vec![Arg::I64(SOLVE)]);
                }
                2 => {
                    marks.rank2_waitall = p.call(
                        WAITALL,
                        vec![
                            Arg::I(2),
                            two(),
                            Arg::St(Some(vec![st(16, 0, 3), st(0, 0, 0)])),
                        ],
                    );
                }
                _ => {
                    p.call(
                        WAITANY,
                        vec![
                            Arg::I(2),
                            two(),
                            Arg::I(1),
                            Arg::St(Some(vec![st(0, 0, 0)])),
                        ],
                    );
                    p.call(WAIT, vec![Arg::I(2), Arg::St(Some(vec![st(16, 2, 3)]))]);
                }
            }
        }
        let color = ri % 2;
        p.call(
            COMM_SPLIT,
            vec![
                Arg::H(COMM_WORLD),
                Arg::I(color),
                Arg::I(10 - ri),
                Arg::H(5),
            ],
        );
        p.call(COMM_DUP, vec![Arg::H(5), Arg::H(6)]);
        p.call(BARRIER, vec![Arg::H(6)]);
        // Split ranks: 4, 2, 0 and 5, 3, 1.
        let split_rank = if r % 2 == 1 {
            (5 - ri) / 2
        } else {
            (4 - ri) / 2
        };
        match split_rank {
            0 => {
                p.call(SEND, writer::send_args(2, MPI_CHAR, 1, 11, 5, None));
            }
            1 => {
                p.call(
                    RECV,
                    writer::recv_args(2, MPI_CHAR, 0, 11, 5, Some(st(2, 0, 11))),
                );
            }
            _ => {}
        }
        let mut gather = vec![
            Arg::I(split_rank),
            Arg::I(1),
            Arg::H(MPI_INT),
            Arg::I(0),
            Arg::H(5),
        ];
        if split_rank == 0 {
            gather.extend([Arg::I(1), Arg::H(MPI_INT)]);
        }
        p.call(GATHER, gather);
        p.call(BARRIER, vec![Arg::H(COMM_WORLD)]);
        p.call(FINALIZE, vec![]);
    }
    let writers: Vec<RankWriter> = s.into_iter().map(|p| p.w).collect();
    (writer::write_trace(dir, "subcomm", &writers), marks)
}

/// Writes the fixture's files into `$DUMPI_FIXTURE_OUT`, to dump them with the reference
/// `dumpi2ascii` (see `tests/fixtures/dumpi/README.md`).
#[test]
#[ignore]
fn write_fixture_files() {
    let out = std::env::var("DUMPI_FIXTURE_OUT").expect("set DUMPI_FIXTURE_OUT to a folder");
    write_subcomm(Path::new(&out));
}

fn subcomm() -> (tempfile::TempDir, PathBuf, Marks) {
    let dir = tempfile::tempdir().unwrap();
    let (meta, marks) = write_subcomm(dir.path());
    (dir, meta, marks)
}

// ---------------------------------------------------------------------------------------
// Reference dumps: `dumpi2ascii`'s text, parsed.

/// One call as `dumpi2ascii` prints it.
#[derive(Debug, Clone)]
struct DumpCall {
    name: String,
    thread: u32,
    /// Wall-clock entry and return, ns since the epoch.
    enter: u64,
    leave: u64,
    /// Arguments by name (`requests[2]` is `requests`), values as printed.
    args: BTreeMap<String, String>,
}

impl DumpCall {
    fn int(&self, name: &str) -> Option<i64> {
        let v = self.args.get(name)?;
        v.split_whitespace().next()?.parse().ok()
    }

    /// The name in parentheses after a value (`9 (MPI_INT)` gives `MPI_INT`).
    fn label(&self, name: &str) -> Option<&str> {
        let v = self.args.get(name)?;
        Some(v.split_once(" (")?.1.trim_end_matches(')'))
    }

    /// An array value (`[2, 3]`; `<IGNORED>` is empty).
    fn ints(&self, name: &str) -> Vec<i64> {
        let Some(v) = self.args.get(name) else {
            return Vec::new();
        };
        v.trim_start_matches('[')
            .trim_end_matches(']')
            .split(',')
            .filter_map(|x| x.trim().parse().ok())
            .collect()
    }

    /// The statuses printed for argument `name`: (bytes, source, tag) each.
    fn statuses(&self, name: &str) -> Vec<(i64, i64, i64)> {
        let Some(v) = self.args.get(name) else {
            return Vec::new();
        };
        v.split('{')
            .skip(1)
            .map(|s| {
                let field = |f: &str| -> i64 {
                    let at = s.find(&format!("{f}=")).unwrap() + f.len() + 1;
                    s[at..].split([',', '}']).next().unwrap().parse().unwrap()
                };
                (field("bytes"), field("source"), field("tag"))
            })
            .collect()
    }
}

/// A `dumpi2ascii` dump: its calls and its datatype sizes (by index: name, bytes).
struct Dump {
    calls: Vec<DumpCall>,
    types: BTreeMap<i64, (String, u64)>,
}

fn walltime(text: &str) -> u64 {
    let (s, ns) = text.split_once('.').unwrap();
    s.parse::<u64>().unwrap() * 1_000_000_000 + ns.parse::<u64>().unwrap()
}

fn parse_dump(text: &str) -> Dump {
    let mut calls: Vec<DumpCall> = Vec::new();
    let mut types = BTreeMap::new();
    let mut open = false;
    for line in text.lines() {
        if let Some((name, rest)) = line.split_once(" entering at walltime ") {
            let (wall, rest) = rest.split_once(',').unwrap();
            let thread = rest
                .rsplit_once("in thread ")
                .unwrap()
                .1
                .trim_end_matches('.')
                .parse()
                .unwrap();
            calls.push(DumpCall {
                name: name.to_string(),
                thread,
                enter: walltime(wall),
                leave: 0,
                args: BTreeMap::new(),
            });
            open = true;
        } else if let Some((_, rest)) = line.split_once(" returning at walltime ") {
            calls.last_mut().unwrap().leave = walltime(rest.split_once(',').unwrap().0);
            open = false;
        } else if let Some(rest) = line.strip_prefix("Datatype ") {
            // Datatype 9 (MPI_INT) has size 4
            let (index, rest) = rest.split_once(" (").unwrap();
            let (name, size) = rest.split_once(") has size ").unwrap();
            types.insert(
                index.parse().unwrap(),
                (name.to_string(), size.parse().unwrap()),
            );
        } else if open {
            let (left, value) = line.split_once('=').unwrap();
            let name = left.rsplit(' ').next().unwrap();
            let name = name.split('[').next().unwrap();
            calls
                .last_mut()
                .unwrap()
                .args
                .insert(name.to_string(), value.to_string());
        }
    }
    Dump { calls, types }
}

/// (sender, receiver, messages, bytes) per communicating pair, sorted.
fn sorted_pairs(trace: &Trace) -> Vec<(Rank, Rank, u64, u64)> {
    let mut pairs: Vec<_> = trace
        .pairs()
        .iter()
        .map(|p| (p.sender, p.receiver, p.messages, p.bytes))
        .collect();
    pairs.sort();
    pairs
}

/// Operations of `rank`, in time order (threads merged).
fn rank_operations(trace: &Trace, rank: Rank) -> Vec<Operation> {
    let mut ops: Vec<Operation> = trace
        .process_operations(rank)
        .unwrap()
        .into_iter()
        .map(|(_, op)| op)
        .collect();
    ops.sort_by_key(|o| (o.start, o.thread));
    ops
}

/// Checks that what mtfdb stored for `rank` is, call by call, what the reference dump of its
/// file says: names, threads, times (from the trace's first event at wall time `origin`),
/// communicators, peers and roots translated to world ranks, tags, bytes (counts times the
/// dump's datatype sizes; collectives by Score-P's convention), datatypes, requests and what
/// each Wait or Test completed. Returns how many calls were compared.
fn assert_matches_dump(trace: &Trace, rank: Rank, dump: &Dump, origin: u64) -> usize {
    let ops = rank_operations(trace, rank);
    let calls: Vec<&DumpCall> = dump
        .calls
        .iter()
        .filter(|c| !c.name.starts_with("Function_"))
        .collect();
    assert_eq!(
        ops.iter()
            .map(|o| trace.kind_name(o.kind))
            .collect::<Vec<_>>(),
        calls.iter().map(|c| c.name.clone()).collect::<Vec<_>>(),
        "rank {rank}: calls in order"
    );
    let header = trace.header();
    let members = |c: u32| header.communicator(c).unwrap().members.clone();
    let size = |dt: i64| dump.types[&dt].1;
    let mut handles: BTreeMap<i64, u32> = BTreeMap::new();
    for (op, d) in ops.iter().zip(&calls) {
        let at = format!("rank {rank}, {} entering at {}", d.name, d.enter);
        assert_eq!(op.thread, d.thread, "{at}: thread");
        assert_eq!(op.start, d.enter - origin, "{at}: start");
        assert_eq!(op.end, d.leave - origin, "{at}: end");
        // The communicator: the world's handle is the world; any other handle names one
        // communicator from its creation to its release.
        let handle = d.int("comm").or(d.int("oldcomm"));
        if let Some(h) = handle {
            let c = op.comm.unwrap_or_else(|| panic!("{at}: no communicator"));
            if h == 2 {
                assert_eq!(
                    header.communicator(c).unwrap().name,
                    "MPI_COMM_WORLD",
                    "{at}"
                );
            } else {
                assert_eq!(*handles.entry(h).or_insert(c), c, "{at}: handle {h}");
            }
            if d.name == "MPI_Comm_free" {
                handles.remove(&h);
            }
        }
        let world = |local: i64| members(op.comm.unwrap())[local as usize];
        let datatype = op.datatype.map(|id| trace.string(id).unwrap().to_string());
        if let Some(dest) = d.int("dest") {
            assert_eq!(op.dest, Some(world(dest)), "{at}: destination");
            assert_eq!(op.send_tag, d.int("tag").map(|t| t as i32), "{at}: tag");
            let bytes = d.int("count").unwrap() as u64 * size(d.int("datatype").unwrap());
            assert_eq!(op.send_bytes, bytes, "{at}: bytes sent");
            assert_eq!(datatype.as_deref(), d.label("datatype"), "{at}: datatype");
        }
        if let Some(source) = d.int("source") {
            let status = d.statuses("status").first().copied();
            let tag = d.int("tag").unwrap();
            if source >= 0 {
                assert_eq!(op.source, Some(world(source)), "{at}: source");
            } else {
                assert_ne!(op.flags & flags::ANY_SOURCE, 0, "{at}: any source");
                if let Some((_, s, _)) = status {
                    assert_eq!(op.source, Some(world(s)), "{at}: actual source");
                }
            }
            match (tag, status) {
                (-1, Some((_, _, t))) => {
                    assert_eq!(op.recv_tag, Some(t as i32), "{at}: actual tag")
                }
                (-1, None) => assert_ne!(op.flags & flags::ANY_TAG, 0, "{at}: any tag"),
                (t, _) => assert_eq!(op.recv_tag, Some(t as i32), "{at}: tag"),
            }
            let bytes = d.int("count").unwrap() as u64 * size(d.int("datatype").unwrap());
            assert_eq!(op.recv_bytes, bytes, "{at}: bytes received");
        }
        if matches!(op.kind, OpKind::Isend | OpKind::Irecv) {
            assert_eq!(
                op.request,
                d.ints("request").first().map(|&r| r as u64),
                "{at}: request"
            );
        }
        // What a Wait or Test completed (MPI_REQUEST_NULL, handle 1, completes nothing).
        let requests = if d.args.contains_key("requests") {
            d.ints("requests")
        } else {
            d.ints("request")
        };
        let done: Option<Vec<i64>> = match op.kind {
            OpKind::Wait | OpKind::Waitall => Some(requests.clone()),
            OpKind::Test | OpKind::Testall => Some(if d.int("flag") == Some(0) {
                vec![]
            } else {
                requests.clone()
            }),
            OpKind::Waitany | OpKind::Testany => Some(
                d.int("index")
                    .map(|i| vec![requests[i as usize]])
                    .unwrap_or_default(),
            ),
            OpKind::Waitsome | OpKind::Testsome => Some(
                d.ints("indices")
                    .iter()
                    .map(|&i| requests[i as usize])
                    .collect(),
            ),
            _ => None,
        };
        if let Some(done) = done {
            let done: Vec<u64> = done
                .into_iter()
                .filter(|&r| r > 1)
                .map(|r| r as u64)
                .collect();
            assert_eq!(op.completes, done, "{at}: requests completed");
            let nothing = done.is_empty() && matches!(op.kind, OpKind::Testsome | OpKind::Test);
            assert_eq!(
                op.flags & flags::NOT_COMPLETED != 0,
                nothing,
                "{at}: completed or not"
            );
        }
        if op.kind.is_collective() {
            let c = op.comm.unwrap();
            let n = members(c).len() as u64;
            let me = members(c).iter().position(|&m| m == rank).unwrap() as i64;
            let root = d.int("root");
            if let Some(root) = root {
                assert_eq!(op.root, Some(world(root)), "{at}: root");
            }
            let is_root = root == Some(me);
            let block =
                |count: &str, dt: &str| d.int(count).unwrap() as u64 * size(d.int(dt).unwrap());
            let want = match op.kind {
                OpKind::Barrier => (0, 0),
                OpKind::Bcast if is_root => {
                    (n * block("count", "datatype"), block("count", "datatype"))
                }
                OpKind::Bcast => (0, block("count", "datatype")),
                OpKind::Allreduce => (
                    n * block("count", "datatype"),
                    n * block("count", "datatype"),
                ),
                OpKind::Gather if is_root => (
                    block("recvcount", "recvtype"),
                    n * block("recvcount", "recvtype"),
                ),
                OpKind::Gather => (block("sendcount", "sendtype"), 0),
                k => panic!("{at}: no byte rule for {k:?} in this test"),
            };
            assert_eq!(
                (op.send_bytes, op.recv_bytes),
                want,
                "{at}: collective bytes"
            );
            let dt = d.label("datatype").or(d.label("sendtype"));
            assert_eq!(datatype.as_deref(), dt, "{at}: datatype");
        }
    }
    // Profiled functions: one routine call per entry and exit.
    let enters: Vec<&DumpCall> = dump
        .calls
        .iter()
        .filter(|c| c.name == "Function_enter")
        .collect();
    let exits: Vec<&DumpCall> = dump
        .calls
        .iter()
        .filter(|c| c.name == "Function_exit")
        .collect();
    let routines: Vec<_> = trace
        .routine_calls()
        .unwrap()
        .into_iter()
        .filter(|r| r.rank == rank)
        .collect();
    assert_eq!(routines.len(), enters.len(), "rank {rank}: routine calls");
    for ((r, e), x) in routines.iter().zip(&enters).zip(&exits) {
        let name = e.args["fn"].split('"').nth(1).unwrap();
        assert_eq!(trace.string(r.routine), Some(name));
        assert_eq!((r.start, r.end), (e.enter - origin, x.enter - origin));
    }
    calls.len()
}

// ---------------------------------------------------------------------------------------
// The real trace.

fn testtrace() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/traces/dumpi/testtrace");
    if dir.join("testtrace.meta").exists() {
        Some(dir)
    } else {
        eprintln!("skipped: {} is absent", dir.display());
        None
    }
}

#[test]
fn testtrace_rank0_equals_its_reference_dump_line_for_line() {
    let Some(dir) = testtrace() else { return };
    let (_tmp, db) = temp_db();
    db.import(dir.join("testtrace.meta"), None).unwrap();
    let trace = db.trace("testtrace").unwrap();
    let dump = parse_dump(&std::fs::read_to_string(dir.join("testtrace-0000.txt")).unwrap());
    // Rank 0's MPI_Init is the earliest record of the four files (ranks 1-3 start at
    // .739561, .738101 and .738346 s): the trace's times count from it.
    let origin = dump.calls[0].enter;
    let compared = assert_matches_dump(&trace, 0, &dump, origin);
    assert_eq!(compared, 9);
    assert_eq!(trace.summary().first_time, Some(0));
    assert_eq!(trace.header().scenario, "./mpi");
    assert_eq!(trace.header().processes.len(), 4);
}

#[test]
fn testtrace_ring_barrier_and_allreduce_are_exact() {
    let Some(dir) = testtrace() else { return };
    let (_tmp, db) = temp_db();
    // The folder is recognized as a DUMPI trace and named after its meta file.
    assert_eq!(SourceFormat::detect(&dir).unwrap(), SourceFormat::Dumpi);
    let info = db.import(&dir, None).unwrap();
    assert_eq!(
        (info.name.as_str(), info.format.as_str()),
        ("testtrace", "dumpi")
    );
    let trace = db.trace("testtrace").unwrap();
    let pairs = sorted_pairs(&trace);
    // The ring 0 -> 1 -> 2 -> 3 -> 0, one MPI_INT each.
    assert_eq!(
        pairs,
        vec![(0, 1, 1, 4), (1, 2, 1, 4), (2, 3, 1, 4), (3, 0, 1, 4)]
    );
    for m in trace.messages().unwrap() {
        assert_eq!((m.tag, m.comm), (1337, 0));
    }
    let mut instances: Vec<(OpKind, u32, usize, u64, u64)> = trace
        .collective_instances()
        .unwrap()
        .into_iter()
        .map(|c| (c.kind, c.comm, c.ops.len(), c.send_bytes, c.recv_bytes))
        .collect();
    instances.sort();
    // Allreduce of one MPI_INT on 4 ranks: each sends and receives 4 x 4 bytes.
    assert_eq!(
        instances,
        vec![
            (OpKind::Barrier, 0, 4, 0, 0),
            (OpKind::Allreduce, 0, 4, 64, 64)
        ]
    );
    let s = trace.summary();
    assert_eq!((s.operations, s.request_links), (36, 4));
    assert!(s.anomalies.is_empty(), "{:?}", s.anomalies);
}

// ---------------------------------------------------------------------------------------
// The fixture.

#[test]
fn fixture_equals_the_reference_dump_of_every_rank() {
    let (_dir, meta, _) = subcomm();
    let (_tmp, db) = temp_db();
    db.import(&meta, None).unwrap();
    let trace = db.trace("subcomm").unwrap();
    // The first event: rank 0's MPI_Init, 501 us after the start second.
    let origin = u64::from(T0) * 1_000_000_000 + 501_000;
    let refs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/dumpi/subcomm");
    let mut compared = 0;
    for rank in 0..RANKS as Rank {
        let text = std::fs::read_to_string(refs.join(format!("subcomm-{rank:04}.txt"))).unwrap();
        compared += assert_matches_dump(&trace, rank, &parse_dump(&text), origin);
    }
    assert_eq!(compared as u64, trace.summary().operations);
}

#[test]
fn fixture_communicators_messages_and_collectives_are_exact() {
    let (_dir, meta, _) = subcomm();
    let (_tmp, db) = temp_db();
    db.import(&meta, Some("sub")).unwrap();
    let trace = db.trace("sub").unwrap();
    let h = trace.header();
    assert_eq!(h.scenario, "./fixture -n 6");
    assert_eq!(
        h.processors
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>(),
        vec!["node0", "node1", "node2"]
    );
    // The communicators the trace created, by how and with whom (ids from 7 on, after the
    // world and the six MPI_COMM_SELF).
    let mut created: Vec<(String, Vec<Rank>)> = h
        .communicators
        .iter()
        .filter(|c| c.id > RANKS as u32)
        .map(|c| (c.name.clone(), c.members.clone()))
        .collect();
    created.sort();
    assert_eq!(
        created,
        vec![
            (
                "MPI_Comm_create #0 of MPI_COMM_WORLD".to_string(),
                vec![1, 3, 5]
            ),
            // Dups of the split's communicators 8 and 9.
            (
                "MPI_Comm_dup #0 of communicator 8".to_string(),
                vec![4, 2, 0]
            ),
            (
                "MPI_Comm_dup #0 of communicator 9".to_string(),
                vec![5, 3, 1]
            ),
            (
                "MPI_Comm_split #1 of MPI_COMM_WORLD, color 0".to_string(),
                vec![4, 2, 0]
            ),
            (
                "MPI_Comm_split #1 of MPI_COMM_WORLD, color 1".to_string(),
                vec![5, 3, 1]
            ),
        ]
    );
    let id = |members: &[Rank], how: &str| {
        h.communicators
            .iter()
            .find(|c| c.members == members && c.name.starts_with(how))
            .unwrap()
            .id
    };
    let (sub, even, odd) = (
        id(&[1, 3, 5], "MPI_Comm_create"),
        id(&[4, 2, 0], "MPI_Comm_split"),
        id(&[5, 3, 1], "MPI_Comm_split"),
    );
    let (even_dup, odd_dup) = (
        id(&[4, 2, 0], "MPI_Comm_dup"),
        id(&[5, 3, 1], "MPI_Comm_dup"),
    );

    // Messages in world ranks: the subgroup's, the ring's and the split communicators'.
    let mut messages: Vec<(Rank, Rank, u32, i32, u64)> = trace
        .messages()
        .unwrap()
        .iter()
        .map(|m| (m.sender, m.receiver, m.comm, m.tag, m.bytes))
        .collect();
    messages.sort();
    assert_eq!(
        messages,
        vec![
            (0, 2, 0, 3, 16),
            (1, 5, sub, 7, 20),
            (2, 4, 0, 3, 16),
            (4, 0, 0, 3, 16),
            (4, 2, even, 11, 2),
            (5, 3, sub, 9, 24),
            (5, 3, odd, 11, 2),
        ]
    );
    let pairs = sorted_pairs(&trace);
    assert_eq!(
        pairs,
        vec![
            (0, 2, 1, 16),
            (1, 5, 1, 20),
            (2, 4, 1, 16),
            (4, 0, 1, 16),
            (4, 2, 1, 2),
            (5, 3, 2, 26)
        ]
    );

    // Collective instances: (kind, communicator, root, members, bytes sent, received).
    let mut instances: Vec<(OpKind, u32, Option<Rank>, usize, u64, u64)> = trace
        .collective_instances()
        .unwrap()
        .into_iter()
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
    let mut want = vec![
        (OpKind::Barrier, 0, None, 6, 0, 0),
        (OpKind::Barrier, even_dup, None, 3, 0, 0),
        (OpKind::Barrier, odd_dup, None, 3, 0, 0),
        // 10 doubles from the subgroup's rank 1 (world 3): it sends 3 x 80, all receive 80.
        (OpKind::Bcast, sub, Some(3), 3, 240, 240),
        // One int gathered at split rank 0 (world 4 and 5).
        (OpKind::Gather, even, Some(4), 3, 12, 12),
        (OpKind::Gather, odd, Some(5), 3, 12, 12),
        // 2 ints reduced over 3 members: each sends and receives 3 x 8 bytes.
        (OpKind::Allreduce, sub, None, 3, 72, 72),
    ];
    want.sort();
    assert_eq!(instances, want);

    // Every request completed: rank 1's Isend, rank 5's Irecv and Isend (Waitany twice),
    // and the ring's six (Testsome, Waitall, Waitany and Wait).
    let s = trace.summary();
    assert_eq!(s.request_links, 9);
    // The writer gives each rank its own stretch of the clock, so no barrier's members
    // overlap (the dumps above: rank 0 leaves the world barrier at 534 µs, rank 5 enters it at
    // 583 µs): Table 3.1 is broken by each of the three barriers, and messages from a later
    // stretch to an earlier one are received before they were sent, one anomaly per pair.
    let pairs: Vec<(Rank, Rank)> = trace
        .anomalies()
        .unwrap()
        .iter()
        .filter_map(|a| match a {
            Anomaly::ClockConditionViolated {
                sender, receiver, ..
            } => Some((*sender, *receiver)),
            _ => None,
        })
        .collect();
    assert!(pairs.iter().all(|(s, r)| s > r), "{pairs:?}");
    assert_eq!(
        s.anomalies,
        vec![
            ("barrier members do not overlap".to_string(), 3),
            ("receive before send (clock condition)".to_string(), 3)
        ],
        "{:?}",
        s.anomalies
    );
    // Rank 0's first Testsome found nothing.
    let not_completed: Vec<(Rank, OpKind)> = (0..RANKS as Rank)
        .flat_map(|r| rank_operations(&trace, r))
        .filter(|o| o.flags & flags::NOT_COMPLETED != 0)
        .map(|o| (o.rank, o.kind))
        .collect();
    assert_eq!(not_completed, vec![(0, OpKind::Testsome)]);
    // Rank 5's wildcard receive learned its source (world 1) and tag from its Waitany.
    let irecv = rank_operations(&trace, 5)
        .into_iter()
        .find(|o| o.kind == OpKind::Irecv)
        .unwrap();
    assert_eq!(
        (irecv.source, irecv.recv_tag, irecv.comm),
        (Some(1), Some(7), Some(sub))
    );
    assert_eq!(
        irecv.flags & (flags::ANY_SOURCE | flags::ANY_TAG),
        flags::ANY_SOURCE | flags::ANY_TAG
    );
    // Rank 0's profiled function and its second thread.
    let routines = trace.routine_calls().unwrap();
    assert_eq!(routines.len(), 1);
    assert_eq!(
        (routines[0].rank, trace.string(routines[0].routine)),
        (0, Some("solve"))
    );
    let ring: Vec<u16> = rank_operations(&trace, 0)
        .iter()
        .filter(|o| matches!(o.kind, OpKind::Irecv | OpKind::Isend | OpKind::Testsome))
        .map(|o| o.depth)
        .collect();
    assert_eq!(ring, vec![1, 1, 1, 1]);
    let threads: Vec<(String, Option<Rank>, Option<u32>, u64)> = h
        .locations
        .iter()
        .map(|l| (l.name.clone(), l.rank, l.thread, l.events))
        .collect();
    assert_eq!(
        threads,
        vec![("rank 0 thread 1".to_string(), Some(0), Some(1), 1)]
    );
}

/// A trace of DUMPI 0.6.1, whose `MPI_Init` wrote its argument count twice and whose statuses
/// have no tag: a wildcard receive still learns its source.
#[test]
fn early_format_quirks_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut ranks: Vec<Script> = (0..2).map(Script::new).collect();
    for (r, p) in ranks.iter_mut().enumerate() {
        p.w.version = [0, 6, 1];
        p.call(INIT, vec![Arg::Argv(vec!["./old".into()])]);
        if r == 0 {
            p.call(
                SEND,
                writer::send_args(8, MPI_DOUBLE, 1, 5, COMM_WORLD, None),
            );
        } else {
            p.call(
                IRECV,
                writer::irecv_args(8, MPI_DOUBLE, ANY_SOURCE, 5, COMM_WORLD, 2),
            );
            p.call(WAIT, vec![Arg::I(2), Arg::St(Some(vec![st(64, 0, 0)]))]);
        }
        p.call(FINALIZE, vec![]);
    }
    let writers: Vec<RankWriter> = ranks.into_iter().map(|p| p.w).collect();
    let meta = writer::write_trace(dir.path(), "old", &writers);
    let (_tmp, db) = temp_db();
    db.import(&meta, None).unwrap();
    let trace = db.trace("old").unwrap();
    assert_eq!(trace.header().scenario, "./old");
    assert!(trace.header().comments.starts_with("SST DUMPI 0.6.1 trace"));
    let m = trace.messages().unwrap();
    assert_eq!(m.len(), 1);
    assert_eq!(
        (m[0].sender, m[0].receiver, m[0].tag, m[0].bytes),
        (0, 1, 5, 64)
    );
    assert!(trace.summary().anomalies.is_empty());
}

// ---------------------------------------------------------------------------------------
// Formats and damaged input.

#[test]
fn formats_are_detected_and_named() {
    let (dir, meta, _) = subcomm();
    assert_eq!(SourceFormat::detect(&meta).unwrap(), SourceFormat::Dumpi);
    assert_eq!(
        SourceFormat::detect(dir.path()).unwrap(),
        SourceFormat::Dumpi
    );
    assert_eq!(
        SourceFormat::from_name("dumpi").unwrap(),
        SourceFormat::Dumpi
    );
    // A rank's .bin file leads to its trace.
    let bin = dir.path().join("subcomm-0003.bin");
    assert_eq!(SourceFormat::detect(&bin).unwrap(), SourceFormat::Dumpi);
    let (_tmp, db) = temp_db();
    let info = db.import_as(&bin, None, SourceFormat::Dumpi).unwrap();
    assert_eq!((info.name.as_str(), info.processes), ("subcomm", RANKS));
    // Unknown files and format names say which formats mtfdb reads.
    let other = dir.path().join("notes.txt");
    std::fs::write(&other, "hello\n").unwrap();
    for e in [
        SourceFormat::detect(&other).unwrap_err().to_string(),
        SourceFormat::from_name("vampir").unwrap_err().to_string(),
    ] {
        for f in ["mtf", "otf2", "dumpi"] {
            assert!(e.contains(f), "{e}");
        }
    }
}

/// Imports `meta`, which must fail with an input error at `file`, byte `offset`, of `rule`;
/// the database's traces stay as they were.
fn assert_refused(
    db: &mtfdb::Database,
    meta: &Path,
    file: &Path,
    offset: u64,
    rule: &str,
) -> String {
    let before = db.trace_names().unwrap();
    let e = db.import(meta, Some("broken")).unwrap_err();
    assert_eq!(db.trace_names().unwrap(), before);
    match &e {
        Error::Input(i) => {
            assert_eq!(i.file, file.display().to_string(), "{e}");
            assert_eq!(
                (i.line, i.column, i.rule.as_str()),
                (0, offset, rule),
                "{e}"
            );
        }
        other => panic!("expected an input error, got {other}"),
    }
    e.to_string()
}

#[test]
fn damaged_files_are_refused_with_file_and_offset_and_leave_the_database_unchanged() {
    let (_tmp, db) = temp_db();
    {
        let (_dir, meta, _) = subcomm();
        db.import(&meta, Some("good")).unwrap();
    }
    let rank_file = |dir: &Path, r: usize| dir.join(format!("subcomm-{r:04}.bin"));

    // Bad magic: rank 1's first byte.
    let (dir, meta, _) = subcomm();
    let f = rank_file(dir.path(), 1);
    let mut bytes = std::fs::read(&f).unwrap();
    bytes[0] = 0;
    std::fs::write(&f, &bytes).unwrap();
    assert_refused(&db, &meta, &f, 0, "bad magic");

    // Bad record: rank 3's MPI_Comm_rank record gets a label that is no function.
    let (dir, meta, marks) = subcomm();
    let f = rank_file(dir.path(), 3);
    let mut bytes = std::fs::read(&f).unwrap();
    let at = marks.rank3_comm_rank as usize;
    bytes[at..at + 2].copy_from_slice(&0x7777u16.to_be_bytes());
    std::fs::write(&f, &bytes).unwrap();
    let msg = assert_refused(&db, &meta, &f, marks.rank3_comm_rank, "bad record");
    assert!(msg.contains("30583"), "{msg}");

    // Bad record: rank 2's MPI_Waitall announces 2^31 - 1 requests. Its count follows the
    // label (2 bytes), mask (1), thread (2), CPU and wall times (12 each) and count (4).
    let (dir, meta, marks) = subcomm();
    let f = rank_file(dir.path(), 2);
    let mut bytes = std::fs::read(&f).unwrap();
    let at = marks.rank2_waitall as usize + 33;
    bytes[at..at + 4].copy_from_slice(&i32::MAX.to_be_bytes());
    std::fs::write(&f, &bytes).unwrap();
    let msg = assert_refused(&db, &meta, &f, marks.rank2_waitall, "bad record");
    assert!(
        msg.contains("MPI_Waitall") && msg.contains("2147483647"),
        "{msg}"
    );

    // A missing or cut rank file is no longer refused (issue 40: a partial copy imports,
    // see `a_missing_rank_file_*` and `a_rank_file_cut_short_*`); a meta file that names no
    // readable rank file at all still is.
    let (dir, meta, _) = subcomm();
    for r in 0..RANKS {
        std::fs::remove_file(rank_file(dir.path(), r)).unwrap();
    }
    let before = db.trace_names().unwrap();
    match db.import(&meta, Some("broken")).unwrap_err() {
        Error::Io { path, .. } => assert_eq!(path, rank_file(dir.path(), 0)),
        other => panic!("expected an I/O error, got {other}"),
    }
    assert_eq!(db.trace_names().unwrap(), before);
    assert_eq!(before, vec!["good".to_string()]);
}

#[test]
fn no_anomaly_hides_in_a_clean_trace_and_unknown_handles_are_reported() {
    // Rank 1 sends twice on a communicator handle the trace never created: nothing else is
    // reported.
    let dir = tempfile::tempdir().unwrap();
    let mut ranks: Vec<Script> = (0..2).map(Script::new).collect();
    for (r, p) in ranks.iter_mut().enumerate() {
        p.call(INIT, vec![Arg::Argv(vec![])]);
        if r == 1 {
            p.call(SEND, writer::send_args(1, MPI_INT, 0, 1, 9, None));
            p.call(SEND, writer::send_args(1, MPI_INT, 0, 1, 9, None));
        }
        p.call(FINALIZE, vec![]);
    }
    let writers: Vec<RankWriter> = ranks.into_iter().map(|p| p.w).collect();
    let meta = writer::write_trace(dir.path(), "odd", &writers);
    let (_tmp, db) = temp_db();
    db.import(&meta, None).unwrap();
    let trace = db.trace("odd").unwrap();
    let sends: Vec<Operation> = rank_operations(&trace, 1)
        .into_iter()
        .filter(|o| trace.kind_name(o.kind) == "MPI_Send")
        .collect();
    // Kept as sends of 4 bytes without a communicator or destination, outside matching, and
    // reported each as the rule it breaks (issue 40), with the handle.
    assert_eq!(sends.len(), 2);
    assert!(
        sends.iter().all(|o| o.kind == OpKind::Send
            && (o.comm, o.dest, o.send_bytes) == (None, None, 4)
            && o.flags & flags::WITHOUT_RECORDS != 0),
        "{sends:?}"
    );
    let expected: Vec<Anomaly> = sends
        .iter()
        .map(|o| Anomaly::BrokenRule {
            rule: Rule::UnknownCommunicator,
            rank: Some(1),
            thread: 0,
            time: Some(o.start),
            op: None,
            comm: None,
            value: Some(9),
        })
        .collect();
    assert_eq!(trace.anomalies().unwrap(), expected);
}

#[test]
fn a_record_that_breaks_a_rule_is_kept_as_an_anomaly_of_its_class() {
    /// Rule, rank, time, value recorded.
    type Broken = (Rule, Option<u32>, Option<u64>, Option<u64>);
    // Rank 1's Barrier starts 50 us before its Init started (and its Finalize follows it):
    // both go back in time. DUMPI is a foreign format: the calls are kept, moved to the time
    // of the previous event of their rank, and reported as TimeGoesBackwards.
    let dir = tempfile::tempdir().unwrap();
    let mut ranks: Vec<Script> = (0..2).map(Script::new).collect();
    for (r, p) in ranks.iter_mut().enumerate() {
        p.call(INIT, vec![Arg::Argv(vec![])]);
        if r == 1 {
            p.now -= 50_000;
        }
        p.call(BARRIER, vec![Arg::H(COMM_WORLD)]);
        p.call(FINALIZE, vec![]);
    }
    let writers: Vec<RankWriter> = ranks.into_iter().map(|p| p.w).collect();
    let meta = writer::write_trace(dir.path(), "back", &writers);
    let (tmp, db) = temp_db();
    db.import(&meta, Some("back")).unwrap();
    let trace = db.trace("back").unwrap();
    let ops: Vec<(OpKind, u64, u64)> = trace
        .process_operations(1)
        .unwrap()
        .into_iter()
        .map(|(_, o)| (o.kind, o.start, o.end))
        .collect();
    let init_start = ops[0].1;
    let broken: Vec<Broken> = trace
        .anomalies()
        .unwrap()
        .into_iter()
        .filter_map(|a| match a {
            Anomaly::BrokenRule {
                rule,
                rank,
                time,
                value,
                ..
            } => Some((rule, rank, time, value)),
            _ => None,
        })
        .collect();
    // Both calls now start where Init started; the anomalies keep their recorded starts.
    assert_eq!(broken.len(), 2, "{broken:?}");
    for (i, (rule, rank, time, value)) in broken.iter().enumerate() {
        assert_eq!(
            (*rule, *rank, *time),
            (Rule::TimeGoesBackwards, Some(1), Some(init_start))
        );
        assert!(value.unwrap() < init_start, "{broken:?}");
        assert_eq!(ops[i + 1].1, init_start, "{ops:?}");
    }
    assert!(ops.windows(2).all(|w| w[0].1 <= w[1].1), "{ops:?}");
    drop((trace, db));
    let (ok, csv, err) = common::contents::mtfdb(
        &tmp.path().join("db"),
        &[
            "query",
            "--format",
            "csv",
            "SELECT COUNT(*) FROM ANOMALIES GROUP BY CLASS",
        ],
    );
    assert!(ok, "{err}");
    assert!(csv.lines().any(|l| l == "TimeGoesBackwards,2"), "{csv}");
}

/// A Table 3.1 rule broken by a DUMPI trace of two ranks, and what the import must report.
struct RuleCase {
    rule: Rule,
    /// Writes rank `r`'s faulty calls, after its `MPI_Init` (calls are 1 us long, 1 us apart:
    /// rank 0's next call starts 2,000 ns after the trace's first event, rank 1's 12,000).
    fault: fn(usize, &mut Script),
    /// The MPI calls the fault writes on ranks 0 and 1.
    calls: [&'static [&'static str]; 2],
    /// The anomalies' rows in `SELECT ANOMALIES`: rank, call, time (ns).
    at: &'static [(&'static str, &'static str, &'static str)],
    /// The value recorded that broke the rule (a handle, a rank in the communicator, ns).
    value: Option<u64>,
    /// Collective instances the fault adds.
    instances: usize,
}

/// A call of `func` on rank `r` that starts `back` ns earlier than `Script::call` would
/// start it and ends `short` ns before it starts; the clock goes on as if it had not.
fn skewed(p: &mut Script, func: u16, back: u64, short: u64, args: Vec<Arg>) {
    let start = p.now + 1_000 - back;
    p.w.call(func, 0, start, start - short, &args);
    p.now += 2_000;
}

/// Every rule a DUMPI trace can break (docs/formats.md, "Table 3.1 rules by reader", says why
/// the others cannot be written).
const RULE_CASES: &[RuleCase] = &[
    // Rank 1's MPI_Comm_rank at 12,000 ns ends at 11,500.
    RuleCase {
        rule: Rule::EndBeforeStart,
        fault: |r, p| {
            if r == 1 {
                skewed(p, COMM_RANK, 0, 500, vec![Arg::H(COMM_WORLD), Arg::I(1)]);
            }
        },
        calls: [&[], &["MPI_Comm_rank"]],
        at: &[("1", "MPI_Comm_rank", "12000")],
        value: Some(11_500),
        instances: 0,
    },
    // … starts at 7,000 ns, before its MPI_Init at 10,000: moved there.
    RuleCase {
        rule: Rule::TimeGoesBackwards,
        fault: |r, p| {
            if r == 1 {
                skewed(p, COMM_RANK, 5_000, 0, vec![Arg::H(COMM_WORLD), Arg::I(1)]);
            }
        },
        calls: [&[], &["MPI_Comm_rank"]],
        at: &[("1", "MPI_Comm_rank", "10000")],
        value: Some(7_000),
        instances: 0,
    },
    // Rank 1 enters `solve` at 12,000 ns and leaves it at 9,000.
    RuleCase {
        rule: Rule::RoutineTimeGoesBackwards,
        fault: |r, p| {
            if r == 1 {
                p.call(FUNCTION_ENTER, vec![Arg::I64(SOLVE)]);
                skewed(p, FUNCTION_EXIT, 5_000, 0, vec![Arg::I64(SOLVE)]);
            }
        },
        calls: [&[], &[]],
        at: &[("1", "", "12000")],
        value: Some(9_000),
        instances: 0,
    },
    // Rank 1 sends on handle 9, which the trace never created …
    RuleCase {
        rule: Rule::UnknownCommunicator,
        fault: |r, p| {
            if r == 1 {
                p.call(SEND, writer::send_args(1, MPI_INT, 0, 1, 9, None));
            }
        },
        calls: [&[], &["MPI_Send"]],
        at: &[("1", "", "12000")],
        value: Some(9),
        instances: 0,
    },
    // … on MPI_COMM_NULL …
    RuleCase {
        rule: Rule::MissingCommunicator,
        fault: |r, p| {
            if r == 1 {
                p.call(SEND, writer::send_args(1, MPI_INT, 0, 1, COMM_NULL, None));
            }
        },
        calls: [&[], &["MPI_Send"]],
        at: &[("1", "", "12000")],
        value: None,
        instances: 0,
    },
    // … to rank 5 of a world of 2.
    RuleCase {
        rule: Rule::PeerOutsideCommunicator,
        fault: |r, p| {
            if r == 1 {
                p.call(SEND, writer::send_args(1, MPI_INT, 5, 1, COMM_WORLD, None));
            }
        },
        calls: [&[], &["MPI_Send"]],
        at: &[("1", "", "12000")],
        value: Some(5),
        instances: 0,
    },
    // Both ranks broadcast from rank 7 of a world of 2.
    RuleCase {
        rule: Rule::RootOutsideCommunicator,
        fault: |_, p| {
            p.call(
                BCAST,
                vec![Arg::I(1), Arg::H(MPI_INT), Arg::I(7), Arg::H(COMM_WORLD)],
            );
        },
        calls: [&["MPI_Bcast"], &["MPI_Bcast"]],
        at: &[("0", "", "2000"), ("1", "", "12000")],
        value: Some(7),
        instances: 1,
    },
    // Both ranks make a communicator of the group of world ranks 0, 1 and 1 again, and
    // synchronize on it.
    RuleCase {
        rule: Rule::DuplicateMember,
        fault: |_, p| {
            p.call(COMM_GROUP, vec![Arg::H(COMM_WORLD), Arg::H(3)]);
            p.call(
                GROUP_INCL,
                vec![Arg::H(3), Arg::I(3), Arg::Ints(vec![0, 1, 1]), Arg::H(4)],
            );
            p.call(COMM_CREATE, vec![Arg::H(COMM_WORLD), Arg::H(4), Arg::H(4)]);
            p.call(BARRIER, vec![Arg::H(4)]);
        },
        calls: [
            &[
                "MPI_Comm_group",
                "MPI_Group_incl",
                "MPI_Comm_create",
                "MPI_Barrier",
            ],
            &[
                "MPI_Comm_group",
                "MPI_Group_incl",
                "MPI_Comm_create",
                "MPI_Barrier",
            ],
        ],
        at: &[("", "", "")],
        value: Some(1),
        instances: 1,
    },
];

#[test]
fn every_rule_a_dumpi_trace_can_break_imports_as_an_anomaly_of_its_class() {
    use common::reported::assert_rule_reported;
    for case in RULE_CASES {
        let class = case.rule.class();
        // Each rank: MPI_Init, the fault, then 4 ints from rank 0 to rank 1 on the world
        // (tag 1), a world barrier and MPI_Finalize.
        let dir = tempfile::tempdir().unwrap();
        let mut ranks: Vec<Script> = (0..2).map(Script::new).collect();
        for (r, p) in ranks.iter_mut().enumerate() {
            p.call(INIT, vec![Arg::Argv(vec![])]);
            (case.fault)(r, p);
            if r == 0 {
                p.call(SEND, writer::send_args(4, MPI_INT, 1, 1, COMM_WORLD, None));
            } else {
                let status = Some(st(16, 0, 1));
                p.call(
                    RECV,
                    writer::recv_args(4, MPI_INT, 0, 1, COMM_WORLD, status),
                );
            }
            p.call(BARRIER, vec![Arg::H(COMM_WORLD)]);
            p.call(FINALIZE, vec![]);
        }
        let meta = write_scripts(dir.path(), "rules", ranks);
        let db = dir.path().join("db");
        let trace = assert_rule_reported(&db, &meta, "t", case.rule, case.at, case.value, class);
        // The rest of the trace is what was written: every call, the message, the barrier.
        for (r, fault_calls) in case.calls.iter().enumerate() {
            let names: Vec<String> = rank_operations(&trace, r as Rank)
                .iter()
                .map(|o| trace.kind_name(o.kind))
                .collect();
            let mut written = vec!["MPI_Init"];
            written.extend(fault_calls.iter());
            written.extend([["MPI_Send", "MPI_Recv"][r], "MPI_Barrier", "MPI_Finalize"]);
            assert_eq!(names, written, "{class}: rank {r}");
        }
        let messages: Vec<(Rank, Rank, u64)> = trace
            .messages()
            .unwrap()
            .iter()
            .map(|m| (m.sender, m.receiver, m.bytes))
            .collect();
        assert_eq!(messages, vec![(0, 1, 16)], "{class}");
        assert_eq!(
            trace.collective_instances().unwrap().len(),
            case.instances + 1,
            "{class}"
        );
    }
}

#[test]
fn a_receive_buffer_larger_than_its_message_is_legal_and_a_smaller_one_is_reported() {
    // DUMPI records the buffer a receive posted (count x datatype size), not the length it
    // got: rank 1 posts 100 doubles for a message of 10 (legal in MPI), then 5 doubles for a
    // message of 10 (truncation, MPI_ERR_TRUNCATE).
    let dir = tempfile::tempdir().unwrap();
    let mut ranks: Vec<Script> = (0..2).map(Script::new).collect();
    for (r, p) in ranks.iter_mut().enumerate() {
        p.call(INIT, vec![Arg::Argv(vec![])]);
        if r == 0 {
            p.call(
                SEND,
                writer::send_args(10, MPI_DOUBLE, 1, 1, COMM_WORLD, None),
            );
            p.call(
                SEND,
                writer::send_args(10, MPI_DOUBLE, 1, 2, COMM_WORLD, None),
            );
        } else {
            p.call(
                RECV,
                writer::recv_args(100, MPI_DOUBLE, 0, 1, COMM_WORLD, Some(st(80, 0, 1))),
            );
            p.call(
                RECV,
                writer::recv_args(5, MPI_DOUBLE, 0, 2, COMM_WORLD, Some(st(40, 0, 2))),
            );
        }
        p.call(FINALIZE, vec![]);
    }
    let meta = write_scripts(dir.path(), "buffers", ranks);
    let (_tmp, db) = temp_db();
    db.import(&meta, None).unwrap();
    let trace = db.trace("buffers").unwrap();
    assert_eq!(trace.summary().messages, 2);
    let receives: Vec<Operation> = rank_operations(&trace, 1)
        .into_iter()
        .filter(|o| o.kind == OpKind::Recv)
        .collect();
    assert_eq!(
        receives.iter().map(|o| o.recv_bytes).collect::<Vec<_>>(),
        vec![800, 40]
    );
    assert!(receives.iter().all(|o| o.flags & flags::RECV_CAPACITY != 0));
    let mismatches = common::length_mismatches(&trace);
    assert_eq!(mismatches, vec![(80, 40)]);
}

// ---------------------------------------------------------------------------------------
// Partial copies of the real trace (issue 40): a rank's file missing or cut short.

/// The real trace copied into a fresh folder, with `damage` done to rank 2's file.
fn partial_testtrace(dir: &Path, damage: impl FnOnce(&Path)) -> PathBuf {
    let src = testtrace().expect("checked by the caller");
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
    let f = dir.join("testtrace-0002.bin");
    let mut perms = std::fs::metadata(&f).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&f, perms).unwrap();
    damage(&f);
    f
}

/// The messages of `full` whose rank-2 side (if any) is among `kept`, the ids of the rank-2
/// operations the partial trace still has: (sender, receiver, tag, bytes), sorted.
fn messages_without(full: &Trace, kept: &[u64]) -> Vec<(Rank, Rank, i32, u64)> {
    let rank2: Vec<u64> = full
        .process_operations(2)
        .unwrap()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    let keeps = |id: u64| !rank2.contains(&id) || kept.contains(&id);
    let mut out: Vec<_> = full
        .messages()
        .unwrap()
        .into_iter()
        .filter(|m| keeps(m.send_op) && keeps(m.recv_op))
        .map(|m| (m.sender, m.receiver, m.tag, m.bytes))
        .collect();
    out.sort();
    out
}

fn message_tuples(trace: &Trace) -> Vec<(Rank, Rank, i32, u64)> {
    let mut out: Vec<_> = trace
        .messages()
        .unwrap()
        .into_iter()
        .map(|m| (m.sender, m.receiver, m.tag, m.bytes))
        .collect();
    out.sort();
    out
}

/// The anomalies of `trace` that are neither `MissingRankData` nor `PeerDataMissing`, and the
/// `PeerDataMissing` ones as (kind of the call, rank, peer, communicator), sorted.
/// A `PeerDataMissing` as (the kind of its call, rank, peer, communicator).
type PeerMissing = (String, Rank, Rank, u32);

fn peer_missing(trace: &Trace) -> (Vec<Anomaly>, Vec<PeerMissing>) {
    let mut others = Vec::new();
    let mut peers = Vec::new();
    for a in trace.anomalies().unwrap() {
        match &a {
            Anomaly::PeerDataMissing {
                op,
                rank,
                peer,
                comm,
            } => {
                let ops = trace.process_operations(*rank).unwrap();
                let (_, o) = ops.iter().find(|(id, _)| id == op).unwrap();
                peers.push((trace.kind_name(o.kind), *rank, *peer, *comm));
            }
            Anomaly::MissingRankData { .. } => {}
            _ => others.push(a),
        }
    }
    peers.sort();
    (others, peers)
}

#[test]
fn a_missing_rank_file_is_reported_and_the_other_ranks_import() {
    let Some(src) = testtrace() else { return };
    let (_tmp, db) = temp_db();
    db.import(&src, Some("full")).unwrap();
    let full = db.trace("full").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let f = partial_testtrace(dir.path(), |f| std::fs::remove_file(f).unwrap());
    db.import(dir.path(), Some("partial")).unwrap();
    let trace = db.trace("partial").unwrap();

    // Rank 2 is declared, with no operation; the others have all of theirs.
    assert_eq!(trace.header().processes.len(), 4);
    assert!(rank_operations(&trace, 2).is_empty());
    for r in [0, 1, 3] {
        assert_eq!(
            rank_operations(&trace, r),
            rank_operations(&full, r),
            "rank {r}"
        );
    }
    // The ring without rank 2: 0 -> 1 and 3 -> 0 remain, exactly as in the full trace.
    assert_eq!(message_tuples(&trace), messages_without(&full, &[]));
    assert_eq!(
        message_tuples(&trace),
        vec![(0, 1, 1337, 4), (3, 0, 1337, 4)]
    );
    // The anomaly names the rank and the file.
    let missing: Vec<Anomaly> = trace
        .anomalies()
        .unwrap()
        .into_iter()
        .filter(|a| matches!(a, Anomaly::MissingRankData { .. }))
        .collect();
    assert_eq!(
        missing,
        vec![Anomaly::MissingRankData {
            rank: 2,
            thread: 0,
            file: f.display().to_string(),
            announced: None,
            read: 0,
            cut_at: None,
        }]
    );
    // What waited for rank 2 is reported for that reason: 1's send to 2, 3's receive from
    // 2, the barrier and the allreduce on the world; nothing else is an anomaly.
    let (others, peers) = peer_missing(&trace);
    assert!(others.is_empty(), "{others:?}");
    // (A collective instance is named by its member that called first.)
    let owned = |k: &str, r: Rank| (k.to_string(), r, 2, 0);
    assert_eq!(
        peers,
        vec![
            owned("MPI_Allreduce", 1),
            owned("MPI_Barrier", 0),
            owned("MPI_Isend", 1),
            owned("MPI_Recv", 3),
        ]
    );
    // The same count from the full trace: the messages touching rank 2 between other
    // ranks' calls, and the instances rank 2 was a member of.
    let touching = full
        .messages()
        .unwrap()
        .iter()
        .filter(|m| (m.sender == 2) != (m.receiver == 2))
        .count();
    let instances = full.collective_instances().unwrap().len();
    assert_eq!(peers.len(), touching + instances);

    // `info` keeps them apart from the unmatched messages of the others.
    let out = common::succeeded(common::mtfdb_output(db.path(), &["info", "partial"]));
    assert!(
        out.contains("unmatched operations: 0 sends never received, 0 receives never matched; 4 left waiting for a rank whose event data is missing"),
        "{out}"
    );
    assert!(
        out.contains("  rank's event data missing                     1"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "rank 2 thread 0: {} is missing; none of its events are in the trace",
            f.display()
        )),
        "{out}"
    );
}

#[test]
fn a_rank_file_cut_short_keeps_its_calls_before_the_cut() {
    let Some(src) = testtrace() else { return };
    let (_tmp, db) = temp_db();
    db.import(&src, Some("full")).unwrap();
    let full = db.trace("full").unwrap();
    let full2 = rank_operations(&full, 2);
    // Cut inside rank 2's seventh record (it starts at byte 257), and right at its start:
    // both keep six whole records and say the data ends at byte 257.
    for (len, name) in [(300usize, "mid"), (257, "edge")] {
        let dir = tempfile::tempdir().unwrap();
        let f = partial_testtrace(dir.path(), |f| {
            let bytes = std::fs::read(f).unwrap();
            std::fs::write(f, &bytes[..len]).unwrap();
        });
        db.import(dir.path(), Some(name)).unwrap();
        let trace = db.trace(name).unwrap();
        let cut: Vec<Anomaly> = trace
            .anomalies()
            .unwrap()
            .into_iter()
            .filter(|a| matches!(a, Anomaly::MissingRankData { .. }))
            .collect();
        assert_eq!(
            cut,
            vec![Anomaly::MissingRankData {
                rank: 2,
                thread: 0,
                file: f.display().to_string(),
                announced: None,
                read: 6,
                cut_at: Some(257),
            }],
            "{name}"
        );
        // Rank 2's first six calls, as the whole file has them (times, peers, tags; its
        // datatype table is lost with the end of the file, so its bytes are not compared).
        let ops = rank_operations(&trace, 2);
        let shape = |o: &Operation| {
            (
                o.kind, o.start, o.end, o.comm, o.dest, o.source, o.send_tag, o.recv_tag, o.request,
            )
        };
        assert_eq!(
            ops.iter().map(shape).collect::<Vec<_>>(),
            full2[..6].iter().map(shape).collect::<Vec<_>>(),
            "{name}"
        );
        for r in [0, 1, 3] {
            assert_eq!(
                rank_operations(&trace, r),
                rank_operations(&full, r),
                "rank {r}"
            );
        }
        // The messages whose rank-2 side is among the six calls remain.
        let kept: Vec<u64> = full
            .process_operations(2)
            .unwrap()
            .into_iter()
            .filter(|(_, o)| ops.iter().any(|k| shape(k) == shape(o)))
            .map(|(id, _)| id)
            .collect();
        let mut expected = messages_without(&full, &kept);
        for m in &mut expected {
            if m.0 == 2 {
                m.3 = 0; // sent by the cut rank: no datatype size, bytes counted as 0
            }
        }
        assert_eq!(message_tuples(&trace), expected, "{name}");
        // Its own requests still open at the cut are not reported; the others' calls left
        // waiting for it are, for that reason, and its lost datatype table is reported.
        let (others, peers) = peer_missing(&trace);
        assert!(peers.iter().all(|p| p.2 == 2), "{peers:?}");
        assert!(
            others
                .iter()
                .all(|a| matches!(a, Anomaly::SkippedRecord { rank: Some(2), .. })),
            "{others:?}"
        );
        let left_waiting = full.messages().unwrap().len() - message_tuples(&trace).len();
        let collectives_after_cut = full.collective_instances().unwrap().len()
            - trace
                .collective_instances()
                .unwrap()
                .iter()
                .filter(|c| c.ops.len() == 4)
                .count();
        assert_eq!(
            peers.len(),
            left_waiting + collectives_after_cut,
            "{name}: {peers:?}"
        );
    }
}

#[test]
fn testtrace_hosts_and_communicators_are_listed() {
    // DUMPI names each rank's host in its file: the one host is the one processor; the
    // communicators are the world and each rank's MPI_COMM_SELF, as the OTF2 reader gives.
    let Some(src) = testtrace() else { return };
    let (tmp, db) = temp_db();
    db.import(&src, None).unwrap();
    let trace = db.trace("testtrace").unwrap();
    let h = trace.header();
    assert_eq!(
        h.processors
            .iter()
            .map(|p| (p.id, p.name.as_str()))
            .collect::<Vec<_>>(),
        vec![(0, "hadalst-mbp.ca.sandia.gov")]
    );
    assert!(h.processes.iter().all(|p| p.processor == Some(0)));
    let comms: Vec<(u32, &str, Vec<Rank>)> = h
        .communicators
        .iter()
        .map(|c| (c.id, c.name.as_str(), c.members.clone()))
        .collect();
    assert_eq!(
        comms,
        vec![
            (0, "MPI_COMM_WORLD", vec![0, 1, 2, 3]),
            (1, "MPI_COMM_SELF of rank 0", vec![0]),
            (2, "MPI_COMM_SELF of rank 1", vec![1]),
            (3, "MPI_COMM_SELF of rank 2", vec![2]),
            (4, "MPI_COMM_SELF of rank 3", vec![3]),
        ]
    );
    drop(trace);
    let out = common::succeeded(common::mtfdb_output(
        &tmp.path().join("db"),
        &["info", "testtrace"],
    ));
    assert!(
        out.contains("processors: 1\n  0    hadalst-mbp.ca.sandia.gov ranks 0-3\n"),
        "{out}"
    );
}

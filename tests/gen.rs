//! Tests of the trace generators: exact shapes a user would check, and an independent
//! re-derivation of the ground truth from the emitted stream.

use std::collections::{BTreeMap, HashMap, VecDeque};

use mtfdb::gen::{generate, iterations_for_events, GenConfig, GroundTruth, NullSink, Scenario};
use mtfdb::ingest::EventSink;
use mtfdb::model::{OpKind, Operation, Rank, RoutineEvent, StrId, Time, TraceHeader};
use mtfdb::{Error, Result};

/// Minimum one-way latency the generator promises (ns).
const LATENCY: Time = 1_500;

#[derive(Debug, Clone, PartialEq)]
enum Event {
    Op(Operation),
    Routine(RoutineEvent),
}

/// A sink that keeps everything and checks the call order as it goes.
#[derive(Default)]
struct Collect {
    header: Option<TraceHeader>,
    strings: Vec<String>,
    events: Vec<Event>,
    finished: bool,
}

impl EventSink for Collect {
    fn header(&mut self, header: &TraceHeader) -> Result<()> {
        assert!(self.header.is_none(), "header twice");
        assert!(
            self.strings.is_empty() && self.events.is_empty(),
            "header not first"
        );
        self.header = Some(header.clone());
        Ok(())
    }
    fn string(&mut self, id: StrId, text: &str) -> Result<()> {
        assert!(self.header.is_some() && !self.finished);
        assert_eq!(id as usize, self.strings.len(), "string ids dense from 0");
        self.strings.push(text.to_string());
        Ok(())
    }
    fn operation(&mut self, op: &Operation) -> Result<()> {
        assert!(self.header.is_some() && !self.finished);
        if let Some(d) = op.datatype {
            assert!(
                (d as usize) < self.strings.len(),
                "datatype defined before use"
            );
        }
        self.events.push(Event::Op(op.clone()));
        Ok(())
    }
    fn routine(&mut self, event: &RoutineEvent) -> Result<()> {
        assert!(self.header.is_some() && !self.finished);
        assert!(
            (event.routine as usize) < self.strings.len(),
            "routine defined before use"
        );
        self.events.push(Event::Routine(*event));
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        assert!(!self.finished, "finish twice");
        self.finished = true;
        Ok(())
    }
}

impl Collect {
    fn ops(&self) -> impl Iterator<Item = &Operation> {
        self.events.iter().filter_map(|e| match e {
            Event::Op(op) => Some(op),
            Event::Routine(_) => None,
        })
    }
}

/// (communicator, source, destination, tag): MPI's non-overtaking order holds per key.
type MessageKey = (u32, Rank, Rank, i32);

fn config(scenario: Scenario, ranks: u32, iterations: u32) -> GenConfig {
    GenConfig::new(scenario, ranks, iterations)
}

fn run(config: &GenConfig) -> (Collect, GroundTruth) {
    let mut sink = Collect::default();
    let truth = generate(config, &mut sink).expect("generate");
    (sink, truth)
}

/// Checks every structural promise of a generated trace and re-derives its ground truth
/// from the stream, independently of the generator's own tallies.
fn check(config: &GenConfig, c: &Collect, truth: &GroundTruth) {
    let n = config.ranks;
    assert!(c.finished);
    let header = c.header.as_ref().unwrap();
    assert_eq!(header.trace_name, format!("{}-{}", config.scenario, n));
    let c1 = header.communicator(0).expect("C1");
    assert_eq!(c1.name, "C1");
    assert_eq!(c1.members, (0..n).collect::<Vec<_>>());
    assert_eq!(header.processes.len(), n as usize);
    for (r, p) in header.processes.iter().enumerate() {
        assert_eq!(p.rank, r as Rank);
        assert_eq!(p.name, format!("P{r}"));
        let node = p.processor.unwrap();
        assert!(header.processors.iter().any(|pr| pr.id == node));
    }
    let name = |id: StrId| c.strings[id as usize].as_str();

    // Per-rank time order, end >= start, routine nesting.
    let mut last = vec![0 as Time; n as usize];
    let mut stack: Vec<Vec<StrId>> = vec![Vec::new(); n as usize];
    let mut calls: BTreeMap<(Rank, String), u64> = BTreeMap::new();
    for e in &c.events {
        match e {
            Event::Op(op) => {
                let r = op.rank as usize;
                assert!(op.start >= last[r], "rank {r} goes back in time: {op:?}");
                assert!(op.end >= op.start, "{op:?}");
                assert!(!stack[r].is_empty(), "operation outside main: {op:?}");
                last[r] = op.start;
            }
            Event::Routine(ev) => {
                let r = ev.rank as usize;
                assert!(ev.time >= last[r]);
                last[r] = ev.time;
                if ev.enter {
                    stack[r].push(ev.routine);
                    *calls
                        .entry((ev.rank, name(ev.routine).to_string()))
                        .or_default() += 1;
                } else {
                    assert_eq!(stack[r].pop(), Some(ev.routine), "unbalanced leave");
                }
            }
        }
    }
    assert!(stack.iter().all(|s| s.is_empty()), "routine never left");
    for r in 0..n {
        assert_eq!(calls[&(r, "main".to_string())], 1);
        assert_eq!(calls[&(r, "init".to_string())], 1);
        assert_eq!(calls[&(r, "setup".to_string())], 1);
        assert_eq!(calls[&(r, "finalize".to_string())], 1);
        let solves = calls.get(&(r, "solve".to_string())).copied().unwrap_or(0);
        assert_eq!(solves, u64::from(config.iterations));
    }

    // Requests: each completed exactly once, by a later Wait/Waitall of its rank.
    let mut open: HashMap<(Rank, u64), usize> = HashMap::new();
    let mut completed_at: HashMap<(Rank, u64), Time> = HashMap::new();
    let ops: Vec<&Operation> = c.ops().collect();
    for (i, op) in ops.iter().enumerate() {
        if let Some(req) = op.request {
            assert!(open.insert((op.rank, req), i).is_none(), "request reused");
        }
        for &req in &op.completes {
            assert!(open.remove(&(op.rank, req)).is_some(), "unknown request");
            completed_at.insert((op.rank, req), op.end);
        }
    }
    assert!(open.is_empty(), "requests never completed: {}", open.len());

    // Messages: FIFO per (comm, source, dest, tag); causality of each receive.
    // Partners are close in the stream: within one iteration's worth of operations.
    let near = ops.len() / config.iterations.max(1) as usize;
    let mut sends: HashMap<MessageKey, VecDeque<(usize, &Operation)>> = HashMap::new();
    let mut recvs: Vec<(usize, &Operation)> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        if op.kind.is_send() {
            let key = (
                op.comm.unwrap(),
                op.rank,
                op.dest.unwrap(),
                op.send_tag.unwrap(),
            );
            sends.entry(key).or_default().push_back((i, op));
        }
        if op.kind.is_receive() {
            recvs.push((i, op));
        }
    }
    let mut pairs: BTreeMap<(Rank, Rank), (u64, u64)> = BTreeMap::new();
    for (at, recv) in recvs {
        let key = (
            recv.comm.unwrap(),
            recv.source.unwrap(),
            recv.rank,
            recv.recv_tag.unwrap(),
        );
        let (sent_at, send) = sends
            .get_mut(&key)
            .and_then(|q| q.pop_front())
            .unwrap_or_else(|| panic!("receive without a send: {recv:?}"));
        assert!(
            at.abs_diff(sent_at) <= near,
            "partners far apart in the stream"
        );
        assert_eq!(send.send_bytes, recv.recv_bytes);
        let done = match recv.request {
            Some(req) => completed_at[&(recv.rank, req)],
            None => recv.end,
        };
        assert!(
            done >= send.start + LATENCY,
            "receive done before the message could arrive: {send:?} {recv:?}"
        );
        let e = pairs.entry((send.rank, recv.rank)).or_default();
        e.0 += 1;
        e.1 += send.send_bytes;
    }
    assert!(sends.values().all(|q| q.is_empty()), "send never received");
    let truth_pairs: BTreeMap<(Rank, Rank), (u64, u64)> = truth
        .pairs
        .iter()
        .map(|p| ((p.sender, p.receiver), (p.messages, p.bytes)))
        .collect();
    assert_eq!(truth_pairs, pairs);
    assert_eq!(truth.messages, pairs.values().map(|v| v.0).sum::<u64>());

    // Collectives: the i-th call of (comm, kind) by each member is one instance; it ends
    // after its last member entered.
    let mut coll: HashMap<(u32, OpKind), Vec<Vec<&Operation>>> = HashMap::new();
    let mut seen: HashMap<(u32, OpKind, Rank), usize> = HashMap::new();
    for op in &ops {
        if op.kind.is_collective() {
            let comm = op.comm.unwrap();
            let k = seen.entry((comm, op.kind, op.rank)).or_default();
            let list = coll.entry((comm, op.kind)).or_default();
            if list.len() <= *k {
                list.push(Vec::new());
            }
            list[*k].push(op);
            *k += 1;
        }
    }
    let mut instances: BTreeMap<String, u64> = BTreeMap::new();
    for ((comm, kind), list) in &coll {
        let members = &header.communicator(*comm).unwrap().members;
        for inst in list {
            let mut ranks: Vec<Rank> = inst.iter().map(|op| op.rank).collect();
            ranks.sort_unstable();
            let mut expected = members.clone();
            expected.sort_unstable();
            assert_eq!(
                ranks, expected,
                "every member of comm {comm} calls {kind:?}"
            );
            let entered = inst.iter().map(|op| op.start).max().unwrap();
            assert!(inst.iter().all(|op| op.end >= entered));
            assert!(inst.iter().all(|op| op.root == inst[0].root));
            if kind.is_rooted() {
                assert!(members.contains(&inst[0].root.unwrap()));
            }
            *instances
                .entry(kind.mpi_name().unwrap().to_string())
                .or_default() += 1;
        }
    }
    assert_eq!(instances, truth.collectives);

    // Per-rank tallies.
    let mut kinds: Vec<BTreeMap<String, u64>> = vec![BTreeMap::new(); n as usize];
    let mut bytes = vec![[0u64; 4]; n as usize];
    for op in &ops {
        let r = op.rank as usize;
        *kinds[r]
            .entry(op.kind.mpi_name().unwrap().to_string())
            .or_default() += 1;
        if op.kind.is_send() {
            bytes[r][0] += op.send_bytes;
        }
        if op.kind.is_receive() {
            bytes[r][1] += op.recv_bytes;
        }
        if op.kind.is_collective() {
            bytes[r][2] += op.send_bytes;
            bytes[r][3] += op.recv_bytes;
        }
    }
    for r in 0..n as usize {
        let t = &truth.per_rank[r];
        assert_eq!(t.rank as usize, r);
        assert_eq!(t.ops_by_kind, kinds[r], "rank {r}");
        assert_eq!(t.operations, kinds[r].values().sum::<u64>());
        assert_eq!(
            [
                t.p2p_sent_bytes,
                t.p2p_recv_bytes,
                t.coll_send_bytes,
                t.coll_recv_bytes
            ],
            bytes[r]
        );
        let routine_calls: u64 = calls
            .iter()
            .filter(|((rank, _), _)| *rank as usize == r)
            .map(|(_, v)| v)
            .sum();
        assert_eq!(t.routine_calls, routine_calls);
    }
    assert_eq!(truth.operations, ops.len() as u64);
    assert_eq!(truth.events, c.events.len() as u64);
    assert_eq!(truth.strings as usize, c.strings.len());
    let first = c
        .events
        .iter()
        .map(|e| match e {
            Event::Op(op) => op.start,
            Event::Routine(ev) => ev.time,
        })
        .min()
        .unwrap();
    let end = c
        .events
        .iter()
        .map(|e| match e {
            Event::Op(op) => op.end,
            Event::Routine(ev) => ev.time,
        })
        .max()
        .unwrap();
    assert_eq!((truth.first_time, truth.last_time), (first, end));
    assert_eq!(first, 0, "times count from the trace's first event");
    let mut perm = truth.permutation.clone();
    perm.sort_unstable();
    assert_eq!(perm, (0..n).collect::<Vec<_>>());
}

fn per_rank(truth: &GroundTruth, rank: Rank, kind: OpKind) -> u64 {
    truth.per_rank[rank as usize].count(kind)
}

#[test]
fn gen_every_scenario_is_consistent() {
    let cases: &[(Scenario, &[u32])] = &[
        (Scenario::Stencil2d, &[1, 2, 6, 7, 16]),
        (Scenario::Ring, &[2, 3, 8]),
        (Scenario::Sweep, &[1, 6, 12]),
        (Scenario::Lu, &[4, 9, 16]),
        (Scenario::Bt, &[4, 9, 16]),
        (Scenario::Cg, &[1, 2, 8, 16, 32]),
        (Scenario::Alltoall, &[1, 5]),
    ];
    for &(scenario, sizes) in cases {
        for &ranks in sizes {
            for shuffle in [false, true] {
                let mut cfg = config(scenario, ranks, 9);
                cfg.shuffle_ranks = shuffle;
                cfg.seed = 11;
                let (c, truth) = run(&cfg);
                check(&cfg, &c, &truth);
            }
        }
    }
}

#[test]
fn gen_stencil2d_16_has_the_wrf_shape() {
    let k = 16;
    let (c, truth) = run(&config(Scenario::Stencil2d, 16, k));
    check(&config(Scenario::Stencil2d, 16, k), &c, &truth);
    assert_eq!(truth.topology, "4x4 grid");
    // 24 edges in a 4x4 grid, a message each way per iteration.
    assert_eq!(truth.messages, 48 * u64::from(k));
    let degree = |r: Rank| match r {
        0 | 3 | 12 | 15 => 2,
        5 | 6 | 9 | 10 => 4,
        _ => 3,
    };
    for r in 0..16 {
        let d = degree(r) * u64::from(k);
        assert_eq!(per_rank(&truth, r, OpKind::Isend), d, "rank {r}");
        assert_eq!(per_rank(&truth, r, OpKind::Irecv), d);
        assert_eq!(per_rank(&truth, r, OpKind::Wait), 2 * d);
        assert_eq!(per_rank(&truth, r, OpKind::Init), 1);
        assert_eq!(per_rank(&truth, r, OpKind::Finalize), 1);
        // One Bcast in setup, then one per iteration; Gather every 4th, Scatterv every 8th.
        assert_eq!(per_rank(&truth, r, OpKind::Bcast), 17);
        assert_eq!(per_rank(&truth, r, OpKind::Gather), 4);
        assert_eq!(per_rank(&truth, r, OpKind::Scatterv), 2);
        assert_eq!(truth.partners(r).len() as u64, degree(r));
    }
    assert_eq!(truth.instances(OpKind::Bcast), 17);
    assert_eq!(truth.instances(OpKind::Gather), 4);
    assert_eq!(truth.instances(OpKind::Scatterv), 2);
    assert_eq!(truth.count(OpKind::Wait), 2 * truth.count(OpKind::Isend));
    assert_eq!(truth.count(OpKind::Isend), 768);
    // East-west and north-south halos differ in size.
    let ew = truth.pair(0, 1).unwrap();
    let ns = truth.pair(0, 4).unwrap();
    assert_eq!((ew.messages, ew.bytes), (16, 16 * 61_440));
    assert_eq!((ns.messages, ns.bytes), (16, 16 * 81_920));
    assert!(truth.pair(0, 5).is_none());
    // Rank 0 is a corner: one east and one south neighbour.
    let r0 = &truth.per_rank[0];
    assert_eq!(r0.p2p_sent_bytes, 16 * (61_440 + 81_920));
    assert_eq!(r0.p2p_recv_bytes, 16 * (61_440 + 81_920));
    // Root of C1's collectives: the setup Bcast of 40 B and 16 Bcasts of 1 KiB sent to all 16
    // members (Score-P's count), its own 4 Gather blocks, and 2 Scatterv sends of the sum of
    // the counts (16 ranks: 4 x (1024+1280+1536+1792)).
    let scatter_sum: u64 = 4 * (1024 + 1280 + 1536 + 1792);
    assert_eq!(
        r0.coll_send_bytes,
        16 * 40 + 16 * 16 * 1024 + 4 * 4096 + 2 * scatter_sum
    );
    // It receives every Bcast like everyone, 16 blocks per Gather and its own Scatterv share.
    assert_eq!(
        r0.coll_recv_bytes,
        40 + 16 * 1024 + 4 * 16 * 4096 + 2 * 1024
    );
    assert_eq!(r0.fan_out(), r0.p2p_sent_bytes + r0.coll_send_bytes);
    let r5 = &truth.per_rank[5];
    assert_eq!(r5.coll_send_bytes, 4 * 4096);
    assert_eq!(r5.coll_recv_bytes, 40 + 16 * 1024 + 2 * 4 * (256 + 64));
    // The stream: header, string table with routines and datatypes.
    let header = c.header.as_ref().unwrap();
    assert_eq!(header.trace_name, "stencil2d-16");
    assert_eq!(header.processors.len(), 4);
    assert_eq!(header.processors[3].name, "node3");
    for s in [
        "main", "init", "setup", "solve", "exchange", "io", "finalize",
    ] {
        assert!(c.strings.iter().any(|x| x == s), "{s}");
    }
    assert!(c.strings.iter().any(|x| x == "MPI_FLOAT"));
}

#[test]
fn gen_ring_message_counts() {
    let k = 5;
    for n in [2u32, 5, 8] {
        let (_, truth) = run(&config(Scenario::Ring, n, k));
        assert_eq!(truth.messages, u64::from(n * k));
        for r in 0..n {
            let right = (r + 1) % n;
            let p = truth.pair(r, right).unwrap();
            assert_eq!((p.messages, p.bytes), (u64::from(k), u64::from(k) * 8192));
            assert_eq!(per_rank(&truth, r, OpKind::Send), u64::from(k));
            assert_eq!(per_rank(&truth, r, OpKind::Recv), u64::from(k));
            assert_eq!(per_rank(&truth, r, OpKind::Allreduce), u64::from(k));
        }
        assert_eq!(truth.pairs.len(), n as usize);
        assert_eq!(truth.instances(OpKind::Allreduce), u64::from(k));
    }
}

#[test]
fn gen_sweep_and_lu_neighbour_counts() {
    let k = 3;
    // Sweep3D on a 3x2 grid (6 ranks): 7 edges, 4 wavefronts x 2 blocks each per iteration.
    let (_, truth) = run(&config(Scenario::Sweep, 6, k));
    assert_eq!(truth.topology, "3x2 grid");
    assert_eq!(truth.messages, 7 * 4 * 2 * u64::from(k));
    // Each edge carries 2 wavefronts each way, 2 blocks each.
    for p in &truth.pairs {
        assert_eq!(p.messages, 4 * u64::from(k), "{p:?}");
        assert_eq!(
            truth.pair(p.receiver, p.sender).unwrap().messages,
            p.messages
        );
    }
    assert_eq!(truth.pairs.len(), 14);
    assert_eq!(truth.instances(OpKind::Allreduce), u64::from(k));
    // LU on 4x4: 24 edges, down and up wavefronts of 2 blocks.
    let (_, truth) = run(&config(Scenario::Lu, 16, k));
    assert_eq!(truth.messages, 24 * 2 * 2 * u64::from(k));
    assert_eq!(truth.pair(0, 1).unwrap().messages, 2 * u64::from(k));
    assert_eq!(truth.pair(1, 0).unwrap().messages, 2 * u64::from(k));
    assert_eq!(truth.pair(0, 1).unwrap().bytes, 2 * u64::from(k) * 1200);
    assert_eq!(truth.pair(0, 4).unwrap().bytes, 2 * u64::from(k) * 1600);
    // Rank 0 starts the down wavefront: it sends and never receives in blts; it receives
    // in buts.
    assert_eq!(per_rank(&truth, 0, OpKind::Send), 2 * 2 * u64::from(k));
    assert_eq!(per_rank(&truth, 0, OpKind::Recv), 2 * 2 * u64::from(k));
    assert_eq!(per_rank(&truth, 5, OpKind::Send), 2 * 2 * 2 * u64::from(k));
}

#[test]
fn gen_bt_has_degree_six() {
    let k = 4;
    for n in [9u32, 16, 25] {
        let (_, truth) = run(&config(Scenario::Bt, n, k));
        for r in 0..n {
            assert_eq!(truth.partners(r).len(), 6, "rank {r} of {n}");
            assert_eq!(per_rank(&truth, r, OpKind::Isend), 6 * u64::from(k));
            assert_eq!(per_rank(&truth, r, OpKind::Irecv), 6 * u64::from(k));
            assert_eq!(per_rank(&truth, r, OpKind::Waitall), u64::from(k));
        }
        assert!(truth
            .pairs
            .iter()
            .all(|p| p.messages == u64::from(k) && p.bytes == u64::from(k) * 3840));
    }
    let (_, truth) = run(&config(Scenario::Bt, 16, 1));
    assert_eq!(truth.partners(0), vec![1, 3, 4, 7, 12, 13]);
    // A 2x2 torus: opposite directions reach the same rank.
    let (_, truth) = run(&config(Scenario::Bt, 4, k));
    assert_eq!(truth.partners(0), vec![1, 2, 3]);
    assert_eq!(truth.pair(0, 1).unwrap().messages, 2 * u64::from(k));
}

#[test]
fn gen_cg_partner_sets() {
    let k = 2;
    let (c, truth) = run(&config(Scenario::Cg, 16, k));
    let degrees: Vec<usize> = (0..16).map(|r| truth.partners(r).len()).collect();
    assert_eq!(degrees.iter().filter(|&&d| d == 3).count(), 12);
    assert_eq!(degrees.iter().filter(|&&d| d == 2).count(), 4);
    for r in [0, 5, 10, 15] {
        assert_eq!(degrees[r], 2, "diagonal rank {r}");
    }
    assert_eq!(truth.partners(0), vec![1, 2]);
    assert_eq!(truth.partners(1), vec![0, 3, 4]);
    assert_eq!(truth.partners(6), vec![4, 7, 9]);
    // Row partners exchange 14000/4 doubles, transpose partners 14000/4 doubles.
    assert_eq!(truth.pair(1, 4).unwrap().bytes, u64::from(k) * 28_000);
    for r in 0..16 {
        assert_eq!(
            per_rank(&truth, r, OpKind::Wait),
            per_rank(&truth, r, OpKind::Irecv)
        );
        // A row Allreduce and a world Allreduce per iteration.
        assert_eq!(per_rank(&truth, r, OpKind::Allreduce), 2 * u64::from(k));
    }
    assert_eq!(truth.instances(OpKind::Allreduce), u64::from(k) * (4 + 1));
    let header = c.header.as_ref().unwrap();
    assert_eq!(header.communicators.len(), 5);
    assert_eq!(header.communicators[1].name, "C2");
    assert_eq!(header.communicators[2].members, vec![4, 5, 6, 7]);

    // 32 ranks: a 4x8 grid, 3 row partners, 8 ranks on the diagonal.
    let (_, truth) = run(&config(Scenario::Cg, 32, 1));
    let degrees: Vec<usize> = (0..32).map(|r| truth.partners(r).len()).collect();
    assert_eq!(degrees.iter().filter(|&&d| d == 4).count(), 24);
    assert_eq!(degrees.iter().filter(|&&d| d == 3).count(), 8);
}

#[test]
fn gen_alltoall_instances() {
    let k = 7;
    let (_, truth) = run(&config(Scenario::Alltoall, 6, k));
    assert_eq!(truth.instances(OpKind::Alltoall), u64::from(k));
    assert_eq!(truth.instances(OpKind::Allreduce), u64::from(k));
    assert_eq!(truth.messages, 0);
    for r in &truth.per_rank {
        assert_eq!(r.count(OpKind::Alltoall), u64::from(k));
        let own_bcast = if r.rank == 0 { (6 * 40, 40) } else { (0, 40) };
        assert_eq!(
            r.coll_send_bytes,
            own_bcast.0 + u64::from(k) * (6 * 4096 + 16)
        );
        assert_eq!(
            r.coll_recv_bytes,
            own_bcast.1 + u64::from(k) * (6 * 4096 + 16)
        );
    }
}

#[test]
fn gen_is_deterministic() {
    for scenario in Scenario::ALL {
        let ranks = if scenario == Scenario::Cg || scenario == Scenario::Bt {
            16
        } else {
            12
        };
        let mut cfg = config(scenario, ranks, 5);
        cfg.seed = 99;
        cfg.shuffle_ranks = true;
        let (a, ta) = run(&cfg);
        let (b, tb) = run(&cfg);
        assert_eq!(a.events, b.events, "{scenario}");
        assert_eq!(a.strings, b.strings);
        assert_eq!(a.header, b.header);
        assert_eq!(ta, tb);
        cfg.seed = 100;
        let (d, td) = run(&cfg);
        assert_ne!(a.events, d.events, "another seed changes the times");
        assert_eq!(ta.operations, td.operations);
    }
}

#[test]
fn gen_shuffle_maps_pairs_through_the_permutation() {
    for (scenario, n) in [
        (Scenario::Stencil2d, 16),
        (Scenario::Bt, 16),
        (Scenario::Cg, 16),
        (Scenario::Sweep, 12),
    ] {
        let mut cfg = config(scenario, n, 3);
        cfg.seed = 5;
        let (_, plain) = run(&cfg);
        cfg.shuffle_ranks = true;
        let (c, shuffled) = run(&cfg);
        check(&cfg, &c, &shuffled);
        let perm = &shuffled.permutation;
        assert_ne!(
            perm,
            &(0..n).collect::<Vec<_>>(),
            "seed 5 scrambles 16 ranks"
        );
        assert_eq!(plain.permutation, (0..n).collect::<Vec<_>>());
        assert_eq!(plain.pairs.len(), shuffled.pairs.len());
        for p in &plain.pairs {
            let q = shuffled
                .pair(perm[p.sender as usize], perm[p.receiver as usize])
                .unwrap();
            assert_eq!((q.messages, q.bytes), (p.messages, p.bytes));
        }
        for r in 0..n {
            let a = &plain.per_rank[r as usize];
            let b = &shuffled.per_rank[perm[r as usize] as usize];
            assert_eq!(a.p2p_sent_bytes, b.p2p_sent_bytes);
            assert_eq!(a.p2p_recv_messages, b.p2p_recv_messages);
        }
    }
}

#[test]
fn gen_rejects_impossible_configs() {
    let bad = [
        (Scenario::Bt, 15, "square"),
        (Scenario::Bt, 1, "square"),
        (Scenario::Cg, 12, "power of two"),
        (Scenario::Ring, 1, "at least 2"),
        (Scenario::Stencil2d, 0, "at least 1"),
        (Scenario::Alltoall, 0, "at least 1"),
    ];
    for (scenario, ranks, says) in bad {
        match generate(&config(scenario, ranks, 1), &mut NullSink) {
            Err(Error::Usage(msg)) => assert!(msg.contains(says), "{msg}"),
            other => panic!("{scenario} on {ranks}: {other:?}"),
        }
    }
}

#[test]
fn gen_scenario_names_round_trip() {
    for s in Scenario::ALL {
        assert_eq!(s.to_string().parse::<Scenario>().unwrap(), s);
    }
    assert_eq!(
        "STENCIL2D".parse::<Scenario>().unwrap(),
        Scenario::Stencil2d
    );
    let names: Vec<String> = Scenario::ALL.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        names,
        ["stencil2d", "ring", "sweep", "lu", "bt", "cg", "alltoall"]
    );
    match "mg".parse::<Scenario>() {
        Err(Error::Usage(msg)) => assert!(msg.contains("stencil2d") && msg.contains("alltoall")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn gen_iterations_for_events_hits_the_target() {
    for (scenario, ranks) in [(Scenario::Stencil2d, 16), (Scenario::Cg, 8)] {
        let k = iterations_for_events(scenario, ranks, 100_000).unwrap();
        let events = generate(&config(scenario, ranks, k), &mut NullSink)
            .unwrap()
            .events;
        let per = events / u64::from(k);
        assert!(events >= 100_000 && events < 100_000 + 2 * per, "{events}");
    }
}

#[test]
fn gen_ground_truth_serializes() {
    let (_, truth) = run(&config(Scenario::Cg, 8, 2));
    let json = serde_json::to_string(&truth).unwrap();
    let back: GroundTruth = serde_json::from_str(&json).unwrap();
    assert_eq!(back, truth);
    assert!(json.contains("\"MPI_Irecv\""));
}

#[test]
fn gen_sink_errors_stop_generation() {
    struct Failing(u32);
    impl EventSink for Failing {
        fn header(&mut self, _: &TraceHeader) -> Result<()> {
            Ok(())
        }
        fn string(&mut self, _: StrId, _: &str) -> Result<()> {
            Ok(())
        }
        fn operation(&mut self, _: &Operation) -> Result<()> {
            self.0 += 1;
            if self.0 == 100 {
                return Err(Error::Storage("disk full".into()));
            }
            Ok(())
        }
        fn routine(&mut self, _: &RoutineEvent) -> Result<()> {
            Ok(())
        }
        fn finish(&mut self) -> Result<()> {
            panic!("finish after an error");
        }
    }
    let mut sink = Failing(0);
    let err = generate(&config(Scenario::Ring, 4, 100), &mut sink).unwrap_err();
    assert!(matches!(err, Error::Storage(_)));
    assert_eq!(sink.0, 100);
}

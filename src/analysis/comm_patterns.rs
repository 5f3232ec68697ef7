//! Communication patterns (thesis §2.8, Algorithm 4.7): the occurrences of process patterns on
//! different processes joined through the messages and collective instances that link their
//! events. It is connected components (union–find) over the nodes "process-pattern
//! occurrence" and "lone event" (an event in no occurrence that partners one), with an edge
//! per matched message and per collective instance. Components with the same shape (the
//! multiset of (process, process pattern) and (process, lone event)) are occurrences of one
//! communication pattern.

use roaring::RoaringTreemap;

use super::process_events::{Alphabet, ProcessEvents};
use crate::hash::FxHashMap;
use crate::model::{CollectiveInstance, OpId, Rank, Time};

/// One process pattern of one process, with its occurrences as event ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessPatternOccurrences {
    /// The pattern's symbols (in general form: a tandem repeat's unit once).
    pub symbols: Vec<u32>,
    /// Each occurrence as `start..end` in the process's event sequence.
    pub occurrences: Vec<(usize, usize)>,
    /// The tandem repeats inside its first occurrence as (offset in `symbols`, unit length,
    /// copies), an enclosing run before the runs nested in it.
    pub runs: Vec<(usize, usize, usize)>,
}

impl ProcessPatternOccurrences {
    /// The pattern in words, its tandem repeats with their copies: `(R1 S1)×2 MPI_Allreduce`.
    pub fn render(&self, alphabet: &Alphabet) -> String {
        render_runs(alphabet, &self.symbols, &self.runs, 0, self.symbols.len())
    }
}

fn render_runs(
    alphabet: &Alphabet,
    symbols: &[u32],
    runs: &[(usize, usize, usize)],
    from: usize,
    to: usize,
) -> String {
    let mut words = Vec::new();
    let mut i = from;
    while i < to {
        // Runs are listed outermost first, so the first one starting here is the outermost.
        let run = runs.iter().copied().find(|&(offset, unit, copies)| {
            offset == i && unit > 0 && copies > 1 && i + unit <= to
        });
        match run {
            Some((offset, unit, copies)) => {
                let inner: Vec<(usize, usize, usize)> = runs
                    .iter()
                    .copied()
                    .filter(|&r| r != (offset, unit, copies))
                    .filter(|&(o, u, _)| o >= offset && o + u <= offset + unit)
                    .collect();
                let body = render_runs(alphabet, symbols, &inner, offset, offset + unit);
                words.push(format!("({body})×{copies}"));
                i += unit;
            }
            None => {
                words.push(alphabet.render(&symbols[i..i + 1]));
                i += 1;
            }
        }
    }
    words.join(" ")
}

/// A part of a communication pattern's shape on one process.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ShapePart {
    /// An occurrence of the process's pattern with these symbols and tandem runs (see
    /// [`ProcessPatternOccurrences::runs`]).
    Pattern(Vec<u32>, Vec<(usize, usize, usize)>),
    /// A single event (in no pattern) partnering one.
    Event(u32),
}

/// A communication pattern: a shape and its occurrences.
#[derive(Debug, Clone)]
pub struct CommPattern {
    /// 1-based, in the order of first occurrence.
    pub id: u32,
    /// The processes it involves, ascending.
    pub processes: Vec<Rank>,
    /// Its parts, by process.
    pub shape: Vec<(Rank, ShapePart)>,
    /// Its occurrences, by start time.
    pub occurrences: Vec<CommOccurrence>,
}

impl CommPattern {
    /// The shape in words: `P0: R1 S1 | P1: R0 S0`.
    pub fn describe(&self, alphabet: &Alphabet) -> String {
        let parts: Vec<String> = self
            .shape
            .iter()
            .map(|(rank, part)| match part {
                ShapePart::Pattern(symbols, runs) => format!(
                    "P{rank}: {}",
                    render_runs(alphabet, symbols, runs, 0, symbols.len())
                ),
                ShapePart::Event(s) => format!("P{rank}: {}", alphabet.render(&[*s])),
            })
            .collect();
        parts.join(" | ")
    }

    /// Symbols in the shape (a tandem repeat's unit counted once; see
    /// [`CommOccurrence::events`] for the events themselves).
    pub fn symbols(&self) -> usize {
        self.shape
            .iter()
            .map(|(_, p)| match p {
                ShapePart::Pattern(s, _) => s.len(),
                ShapePart::Event(_) => 1,
            })
            .sum()
    }
}

/// One occurrence of a communication pattern.
#[derive(Debug, Clone)]
pub struct CommOccurrence {
    /// Start time of its first event.
    pub start: Time,
    /// The process of its first event.
    pub first_rank: Rank,
    /// Its events (the copies of tandem repeats included).
    pub events: usize,
    /// Start time of its last event.
    pub end: Time,
    /// The operations of its events.
    pub ops: RoaringTreemap,
    /// The messages between its events (message ids).
    pub messages: RoaringTreemap,
}

const NONE: u32 = u32::MAX;

/// Union–find with path halving.
struct Components {
    parent: Vec<u32>,
}

impl Components {
    fn new() -> Components {
        Components { parent: Vec::new() }
    }

    fn add(&mut self) -> u32 {
        self.parent.push(self.parent.len() as u32);
        self.parent.len() as u32 - 1
    }

    fn find(&mut self, mut x: u32) -> u32 {
        while self.parent[x as usize] != x {
            let grand = self.parent[self.parent[x as usize] as usize];
            self.parent[x as usize] = grand;
            x = grand;
        }
        x
    }

    fn union(&mut self, a: u32, b: u32) {
        let (a, b) = (self.find(a), self.find(b));
        if a != b {
            self.parent[a.max(b) as usize] = a.min(b);
        }
    }
}

/// What a node stands for.
#[derive(Clone, Copy)]
enum Node {
    /// Occurrence `occurrence` of pattern `pattern` of the process at index `process`.
    Occurrence {
        process: u32,
        pattern: u32,
        start: u32,
        end: u32,
    },
    /// Event `event` of the process at index `process`.
    Event { process: u32, event: u32 },
}

/// A communication pattern's shape: per process, the pattern or event it contributes.
type Shape = Vec<(Rank, ShapePart)>;

/// Joins process-pattern occurrences into communication patterns. `patterns[i]` are the
/// patterns of `events[i]`; an event covered by several occurrences belongs to the longest
/// (occurrences that would share events with a longer one are dropped).
pub fn assemble(
    events: &[ProcessEvents],
    patterns: &[Vec<ProcessPatternOccurrences>],
    messages: &[(OpId, OpId)],
    collectives: &[CollectiveInstance],
) -> Vec<CommPattern> {
    let mut uf = Components::new();
    let mut nodes: Vec<Node> = Vec::new();
    // Per process, the node of each event (NONE until known).
    let mut node_of: Vec<Vec<u32>> = events.iter().map(|e| vec![NONE; e.len()]).collect();
    for (p, list) in patterns.iter().enumerate() {
        let mut order: Vec<(usize, usize, usize)> = Vec::new();
        for (pattern, pp) in list.iter().enumerate() {
            for &(start, end) in &pp.occurrences {
                order.push((pattern, start, end));
            }
        }
        order.sort_by_key(|&(_, start, end)| (std::cmp::Reverse(end - start), start));
        for (pattern, start, end) in order {
            let covered = &mut node_of[p][start..end];
            if covered.iter().any(|&n| n != NONE) {
                continue;
            }
            let id = uf.add();
            nodes.push(Node::Occurrence {
                process: p as u32,
                pattern: pattern as u32,
                start: start as u32,
                end: end as u32,
            });
            covered.fill(id);
        }
    }
    // Where each operation's events are: (process, first event, last event). An MPI_Sendrecv
    // gives a send event followed by a receive event of the same operation.
    let total: usize = events.iter().map(ProcessEvents::len).sum();
    let mut at: FxHashMap<OpId, (u32, u32, u32)> =
        FxHashMap::with_capacity_and_hasher(total, Default::default());
    for (p, e) in events.iter().enumerate() {
        for (i, &op) in e.ops.iter().enumerate() {
            let i = i as u32;
            at.entry(op)
                .and_modify(|v| v.2 = i)
                .or_insert((p as u32, i, i));
        }
    }
    let mut node = |uf: &mut Components, nodes: &mut Vec<Node>, (p, i): (u32, u32)| -> u32 {
        let n = node_of[p as usize][i as usize];
        if n != NONE {
            return n;
        }
        let id = uf.add();
        nodes.push(Node::Event {
            process: p,
            event: i,
        });
        node_of[p as usize][i as usize] = id;
        id
    };
    let mut message_nodes: Vec<(u64, u32)> = Vec::with_capacity(messages.len());
    for (mid, (send, recv)) in messages.iter().enumerate() {
        if let (Some(&(sp, si, _)), Some(&(rp, _, ri))) = (at.get(send), at.get(recv)) {
            let a = node(&mut uf, &mut nodes, (sp, si));
            let b = node(&mut uf, &mut nodes, (rp, ri));
            uf.union(a, b);
            message_nodes.push((mid as u64, a));
        }
    }
    for c in collectives {
        let mut first: Option<u32> = None;
        for op in &c.ops {
            if let Some(&(p, i, _)) = at.get(op) {
                let n = node(&mut uf, &mut nodes, (p, i));
                match first {
                    Some(f) => uf.union(f, n),
                    None => first = Some(n),
                }
            }
        }
    }

    // Components holding at least one occurrence are instances of communication patterns.
    let mut members: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
    for n in 0..nodes.len() as u32 {
        let root = uf.find(n);
        members.entry(root).or_default().push(n);
    }
    // Occurrences grouped by shape; a shape is hashed once per occurrence, and messages find
    // their occurrence by index (hashing a shape per message cost messages x ranks).
    let mut shape_index: FxHashMap<Shape, usize> = FxHashMap::default();
    let mut by_shape: Vec<(Shape, Vec<CommOccurrence>)> = Vec::new();
    let mut occurrence_of_root: FxHashMap<u32, (usize, usize)> = FxHashMap::default();
    for (root, list) in members {
        if !list
            .iter()
            .any(|&n| matches!(nodes[n as usize], Node::Occurrence { .. }))
        {
            continue;
        }
        let mut shape = Vec::with_capacity(list.len());
        let mut occ = CommOccurrence {
            start: Time::MAX,
            first_rank: 0,
            events: 0,
            end: 0,
            ops: RoaringTreemap::new(),
            messages: RoaringTreemap::new(),
        };
        // The occurrence's operations, sorted before they go into the bitmap: inserted in
        // the order of the processes, each went into the middle of a container (a memmove
        // of it), which at 16,384 ranks took a fifth of pattern detection.
        let mut ops: Vec<OpId> = Vec::new();
        for &n in &list {
            let (p, range, part) = match nodes[n as usize] {
                Node::Occurrence {
                    process,
                    pattern,
                    start,
                    end,
                } => (process as usize, start as usize..end as usize, {
                    let pp = &patterns[process as usize][pattern as usize];
                    ShapePart::Pattern(pp.symbols.clone(), pp.runs.clone())
                }),
                Node::Event { process, event } => (
                    process as usize,
                    event as usize..event as usize + 1,
                    ShapePart::Event(events[process as usize].symbols[event as usize]),
                ),
            };
            let e = &events[p];
            occ.events += range.len();
            for i in range {
                ops.push(e.ops[i]);
                if (e.times[i], e.rank) < (occ.start, occ.first_rank) {
                    occ.start = e.times[i];
                    occ.first_rank = e.rank;
                }
                occ.end = occ.end.max(e.times[i]);
            }
            shape.push((e.rank, part));
        }
        ops.sort_unstable();
        occ.ops = ops.into_iter().collect();
        shape.sort();
        let group = match shape_index.get(&shape) {
            Some(&g) => g,
            None => {
                shape_index.insert(shape.clone(), by_shape.len());
                by_shape.push((shape, Vec::new()));
                by_shape.len() - 1
            }
        };
        let list = &mut by_shape[group].1;
        occurrence_of_root.insert(root, (group, list.len()));
        list.push(occ);
    }
    drop(shape_index);
    for (mid, n) in message_nodes {
        let root = uf.find(n);
        if let Some(&(group, i)) = occurrence_of_root.get(&root) {
            by_shape[group].1[i].messages.insert(mid);
        }
    }
    let mut out: Vec<CommPattern> = by_shape
        .into_iter()
        .map(|(shape, mut occurrences)| {
            occurrences.sort_by_key(|o| (o.start, o.end));
            let mut processes: Vec<Rank> = shape.iter().map(|(r, _)| *r).collect();
            processes.dedup();
            CommPattern {
                id: 0,
                processes,
                shape,
                occurrences,
            }
        })
        .collect();
    out.sort_by(|a, b| (a.occurrences[0].start, &a.shape).cmp(&(b.occurrences[0].start, &b.shape)));
    for (i, p) in out.iter_mut().enumerate() {
        p.id = i as u32 + 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::process_events::EventKey;

    fn events(
        rank: Rank,
        keys: &[EventKey],
        ops: &[OpId],
        alphabet: &mut Alphabet,
    ) -> ProcessEvents {
        ProcessEvents {
            rank,
            symbols: keys.iter().map(|k| alphabet.intern(*k)).collect(),
            ops: ops.to_vec(),
            times: ops.iter().map(|&o| o * 10).collect(),
            blocks: vec![0; keys.len()],
        }
    }

    fn message(_id: u64, send_op: OpId, recv_op: OpId) -> (OpId, OpId) {
        (send_op, recv_op)
    }

    #[test]
    fn occurrences_joined_by_messages_form_one_pattern_per_shape() {
        use EventKey::*;
        let mut a = Alphabet::default();
        // Two rounds of P0 -> P1 -> P0 (ops 1..), the second on other op ids.
        let p0 = events(
            0,
            &[Send(1), Receive(1), Send(1), Receive(1)],
            &[1, 2, 3, 4],
            &mut a,
        );
        let p1 = events(
            1,
            &[Receive(0), Send(0), Receive(0), Send(0)],
            &[11, 12, 13, 14],
            &mut a,
        );
        let pat = |s: &ProcessEvents| ProcessPatternOccurrences {
            symbols: s.symbols[0..2].to_vec(),
            occurrences: vec![(0, 2), (2, 4)],
            runs: Vec::new(),
        };
        let patterns = vec![vec![pat(&p0)], vec![pat(&p1)]];
        let messages = vec![
            message(0, 1, 11),
            message(1, 12, 2),
            message(2, 3, 13),
            message(3, 14, 4),
        ];
        let found = assemble(&[p0, p1], &patterns, &messages, &[]);
        assert_eq!(found.len(), 1);
        let p = &found[0];
        assert_eq!(
            (p.id, p.processes.clone(), p.occurrences.len()),
            (1, vec![0, 1], 2)
        );
        assert_eq!(p.describe(&a), "P0: S1 R1 | P1: R0 S0");
        assert_eq!(
            p.occurrences[0].ops.iter().collect::<Vec<_>>(),
            vec![1, 2, 11, 12]
        );
        assert_eq!(
            p.occurrences[1].messages.iter().collect::<Vec<_>>(),
            vec![2, 3]
        );
        assert_eq!((p.occurrences[0].start, p.occurrences[0].end), (10, 120));
    }

    #[test]
    fn a_lone_partner_event_joins_the_occurrence_it_talks_to() {
        use EventKey::*;
        let mut a = Alphabet::default();
        let p0 = events(
            0,
            &[Send(1), Send(2), Send(1), Send(2)],
            &[1, 2, 3, 4],
            &mut a,
        );
        let p1 = events(1, &[Receive(0), Receive(0)], &[11, 12], &mut a);
        let p2 = events(2, &[Receive(0), Receive(0)], &[21, 22], &mut a);
        let patterns = vec![
            vec![ProcessPatternOccurrences {
                symbols: p0.symbols[0..2].to_vec(),
                occurrences: vec![(0, 2), (2, 4)],
                runs: Vec::new(),
            }],
            vec![],
            vec![],
        ];
        let messages = vec![
            message(0, 1, 11),
            message(1, 2, 21),
            message(2, 3, 12),
            message(3, 4, 22),
        ];
        let found = assemble(&[p0, p1, p2], &patterns, &messages, &[]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].describe(&a), "P0: S1 S2 | P1: R0 | P2: R0");
        assert_eq!(found[0].occurrences.len(), 2);
        assert_eq!(found[0].symbols(), 4);
        assert_eq!(found[0].occurrences[0].events, 4);
    }

    /// The NAS BT "copy faces" exchange of the thesis's Table 5.7 (16 processes, 1-based
    /// there): each process sends to six partners, then receives from the same six in the same
    /// order. Two rounds, each a routine call, give one process pattern per process and one
    /// communication pattern over all 16 processes, occurring twice.
    #[test]
    fn the_bt_copy_faces_exchange_is_one_pattern_over_sixteen_processes() {
        use crate::analysis::patterns::{detect, Event, Options};
        let partners: [[Rank; 6]; 16] = [
            [2, 4, 5, 13, 8, 14],
            [3, 1, 6, 14, 5, 15],
            [4, 2, 7, 15, 6, 16],
            [1, 3, 8, 16, 7, 13],
            [6, 8, 9, 1, 12, 2],
            [7, 5, 10, 2, 9, 3],
            [8, 6, 11, 3, 10, 4],
            [5, 7, 12, 4, 11, 1],
            [10, 12, 13, 5, 16, 6],
            [11, 9, 14, 6, 13, 7],
            [12, 10, 15, 7, 14, 8],
            [9, 11, 16, 8, 15, 5],
            [14, 16, 1, 9, 4, 10],
            [15, 13, 2, 10, 1, 11],
            [16, 14, 3, 11, 2, 12],
            [13, 15, 4, 12, 3, 9],
        ];
        let mut alphabet = Alphabet::default();
        let mut events = Vec::new();
        let op = |rank: usize, round: usize, i: usize| (rank * 100 + round * 20 + i) as OpId;
        for (p, list) in partners.iter().enumerate() {
            let mut e = ProcessEvents {
                rank: p as Rank,
                ..ProcessEvents::default()
            };
            for round in 0..2 {
                for (i, &q) in list.iter().enumerate() {
                    e.symbols.push(alphabet.intern(EventKey::Send(q - 1)));
                    e.ops.push(op(p, round, i));
                }
                for (i, &q) in list.iter().enumerate() {
                    e.symbols.push(alphabet.intern(EventKey::Receive(q - 1)));
                    e.ops.push(op(p, round, 6 + i));
                }
                e.times
                    .extend((0..12).map(|i| (round * 1000 + i * 10) as Time));
                e.blocks.extend([round as u32; 12]);
            }
            events.push(e);
        }
        // Process p's send to q in a round meets q's receive from p in that round.
        let mut messages = Vec::new();
        for (p, list) in partners.iter().enumerate() {
            for round in 0..2 {
                for (i, &q) in list.iter().enumerate() {
                    let q = q as usize - 1;
                    let j = partners[q]
                        .iter()
                        .position(|&x| x as usize == p + 1)
                        .unwrap();
                    messages.push(message(
                        messages.len() as u64,
                        op(p, round, i),
                        op(q, round, 6 + j),
                    ));
                }
            }
        }
        let patterns: Vec<Vec<ProcessPatternOccurrences>> = events
            .iter()
            .map(|e| {
                let mut input: Vec<Event> =
                    e.symbols[..12].iter().map(|&s| Event::Mpi(s)).collect();
                input.push(Event::Delimiter);
                input.extend(e.symbols[12..].iter().map(|&s| Event::Mpi(s)));
                detect(&input, &Options::default())
                    .into_iter()
                    .map(|p| ProcessPatternOccurrences {
                        symbols: p.symbols.clone(),
                        runs: Vec::new(),
                        // Input positions after the delimiter are one past their event.
                        occurrences: p
                            .occurrences()
                            .map(|(s, e)| if s > 12 { (s - 1, e - 1) } else { (s, e) })
                            .collect(),
                    })
                    .collect()
            })
            .collect();
        for (p, found) in patterns.iter().enumerate() {
            assert_eq!(found.len(), 1, "P{}: {found:?}", p + 1);
            assert_eq!(found[0].occurrences, vec![(0, 12), (12, 24)]);
        }
        let joined = assemble(&events, &patterns, &messages, &[]);
        assert_eq!(joined.len(), 1);
        let bt = &joined[0];
        assert_eq!(bt.processes, (0..16).collect::<Vec<Rank>>());
        assert_eq!(bt.occurrences.len(), 2);
        assert_eq!(bt.symbols(), 16 * 12);
        assert_eq!(bt.occurrences[1].events, 16 * 12);
        assert_eq!(bt.occurrences[0].messages.len(), 96);
        assert!(bt
            .describe(&alphabet)
            .starts_with("P0: S1 S3 S4 S12 S7 S13 R1 R3 R4 R12 R7 R13 | P1: S2 S0 S5 S13"));
    }

    #[test]
    fn patterns_render_their_tandem_repeats_with_copies() {
        use EventKey::*;
        let mut a = Alphabet::default();
        let symbols: Vec<u32> = [Send(1), Receive(1), Send(2)]
            .iter()
            .map(|k| a.intern(*k))
            .collect();
        let p = |runs: Vec<(usize, usize, usize)>| ProcessPatternOccurrences {
            symbols: symbols.clone(),
            occurrences: vec![],
            runs,
        };
        assert_eq!(p(vec![]).render(&a), "S1 R1 S2");
        assert_eq!(p(vec![(0, 2, 3)]).render(&a), "(S1 R1)×3 S2");
        // A run nested in another is listed after it.
        assert_eq!(p(vec![(0, 2, 3), (0, 1, 2)]).render(&a), "((S1)×2 R1)×3 S2");
        assert_eq!(p(vec![(1, 2, 4)]).render(&a), "S1 (R1 S2)×4");
    }
}

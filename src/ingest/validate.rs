//! Structural validation of the metamodel constraints, shared by every input format.
//!
//! A [`Validator`] is built from a trace's [`TraceHeader`] (which it checks first) and then
//! sees every operation and routine event in the order the source delivers them. A broken
//! rule is a [`Violation`]: the rule's short name, the [`Field`] of the item at fault and a
//! message. Each reader maps the field to a position in its own input (a column of a text
//! line, a byte offset of a binary record) and reports an [`crate::Error::input`].
//!
//! The rules, by the short name a [`Violation`] carries:
//!
//! | rule | broken when |
//! |---|---|
//! | `duplicate declaration` | a processor id, process rank or communicator id is declared twice |
//! | `ranks not contiguous` | the process ranks are not exactly 0..n-1 |
//! | `processes out of order` | the header's processes are not listed in rank order |
//! | `unknown processor` | a process runs on an undeclared processor |
//! | `empty communicator` | a communicator has no members |
//! | `unknown rank` | an item's rank, a peer, a root or a communicator member is no declared process |
//! | `duplicate member` | a communicator lists a rank twice |
//! | `end before start` | an operation ends before it starts |
//! | `time goes backwards` | a start (or routine time) precedes the previous one of its rank and thread |
//! | `unknown communicator` | an operation names an undeclared communicator |
//! | `not a member` | an operation's rank is not a member of its communicator |
//! | `missing communicator` | a send, receive or collective names no communicator (unless recorded without its records, `flags::WITHOUT_RECORDS`, as the next three) |
//! | `missing destination` / `missing source` | a send without a destination, a receive without a source (a receive posted with `MPI_ANY_SOURCE` may lack the actual source) |
//! | `peer not in communicator` | a destination or source is not a member of the communicator |
//! | `unexpected root` | a root on an operation that has none (Table 3.1, rules 11-12) |
//! | `missing root` | a rooted collective (Bcast, Gather(v), Scatter(v), Reduce, and their I-forms) without a root |
//! | `root not in communicator` | the root is not a member of the communicator |
//! | `bytes on a barrier` | a Barrier or Ibarrier carries bytes (Table 3.1, rule 8) |
//! | `unbalanced leave` | a routine leave that does not match the innermost routine entered |
//!
//! Under the strict policy (MTF text, the library) the rules checked here reject an import;
//! under the lenient one (foreign formats) `crate::ingest::seam` repairs the item and
//! reports it as an [`crate::model::Anomaly::BrokenRule`] of the rule's class. Anomalies that real tracers do record (a send
//! never received, a missing `MPI_Finalize`, a request never completed) are not checked here:
//! the matcher counts them.

use std::collections::HashMap;
use std::fmt;

use crate::ingest::excerpt::clipped;
use crate::model::{
    flags, CommId, OpKind, Operation, Rank, RoutineEvent, StrId, Time, TraceHeader,
};

/// The part of an item (or of the header) a [`Violation`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// The item as a whole.
    Item,
    /// The rank of an operation or routine event.
    Rank,
    /// The thread of an operation or routine event.
    Thread,
    /// An operation's start time.
    Start,
    /// An operation's end time.
    End,
    /// The operation's kind (also blamed for a field the kind needs but the item lacks,
    /// when the reader cannot point at the missing field).
    Kind,
    /// The communicator.
    Comm,
    /// The destination of a send.
    Dest,
    /// The source of a receive.
    Source,
    /// The send tag.
    SendTag,
    /// The receive tag.
    RecvTag,
    /// The bytes sent.
    SendBytes,
    /// The bytes received.
    RecvBytes,
    /// The datatype.
    Datatype,
    /// The root of a collective.
    Root,
    /// The request created.
    Request,
    /// The requests completed.
    Completes,
    /// The flags.
    Flags,
    /// A routine event's time.
    Time,
    /// A routine event's routine (name).
    Routine,
    /// The id of the i-th processor of the header.
    Processor(usize),
    /// The rank of the i-th process of the header.
    ProcessRank(usize),
    /// The processor of the i-th process of the header.
    ProcessProcessor(usize),
    /// The id of the i-th communicator of the header.
    CommId(usize),
    /// The `member`-th member of the `comm`-th communicator of the header.
    Member {
        /// Index of the communicator in the header.
        comm: usize,
        /// Index of the member in its member list.
        member: usize,
    },
}

/// A broken structural rule: which rule, which field, and what exactly was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The rule's short name (`unknown communicator`, `time goes backwards`, …).
    pub rule: &'static str,
    /// The field at fault.
    pub field: Field,
    /// What was wrong.
    pub message: String,
}

impl Violation {
    fn new(rule: &'static str, field: Field, message: String) -> Violation {
        Violation {
            rule,
            field,
            message,
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.rule, self.message)
    }
}

/// Communicator ids below this bound are looked up in a dense table.
const DENSE_COMMS: u32 = 1 << 16;
const NO_COMM: u32 = u32::MAX;

struct CommInfo {
    id: CommId,
    name: String,
    /// Membership bitset over world ranks, up to the largest member.
    bits: Vec<u64>,
}

impl CommInfo {
    #[inline]
    fn contains(&self, rank: Rank) -> bool {
        let word = (rank / 64) as usize;
        word < self.bits.len() && self.bits[word] & (1u64 << (rank % 64)) != 0
    }
}

struct ThreadState {
    thread: u32,
    last: Time,
    /// Operations checked on this location (its next operation's position).
    ops: u64,
    stack: Vec<StrId>,
}

/// Checks a trace's items against the metamodel's structural rules, in source order.
pub struct Validator {
    ranks: u32,
    comms: Vec<CommInfo>,
    dense: Vec<u32>,
    sparse: HashMap<CommId, u32>,
    /// Per rank, the state of each of its threads (thread 0 usually alone).
    threads: Vec<Vec<ThreadState>>,
    strings: Vec<String>,
}

impl Validator {
    /// Checks the header ([`Validator::check_header`]) and prepares to check its events.
    pub fn new(header: &TraceHeader) -> Result<Validator, Violation> {
        Validator::check_header(header)?;
        let mut v = Validator {
            ranks: header.processes.len() as u32,
            comms: Vec::with_capacity(header.communicators.len()),
            dense: Vec::new(),
            sparse: HashMap::new(),
            threads: (0..header.processes.len()).map(|_| Vec::new()).collect(),
            strings: Vec::new(),
        };
        for (i, c) in header.communicators.iter().enumerate() {
            let top = c.members.iter().copied().max().unwrap_or(0);
            let mut bits = vec![0u64; top as usize / 64 + 1];
            for &m in &c.members {
                bits[(m / 64) as usize] |= 1u64 << (m % 64);
            }
            v.comms.push(CommInfo {
                id: c.id,
                name: c.name.clone(),
                bits,
            });
            if c.id < DENSE_COMMS {
                if v.dense.len() <= c.id as usize {
                    v.dense.resize(c.id as usize + 1, NO_COMM);
                }
                v.dense[c.id as usize] = i as u32;
            } else {
                v.sparse.insert(c.id, i as u32);
            }
        }
        Ok(v)
    }

    /// The header rules: processor ids, process ranks and communicator ids are unique;
    /// processes are numbered 0..n-1 and listed in rank order; a process's processor is
    /// declared; communicator members are declared ranks, each listed once.
    pub fn check_header(header: &TraceHeader) -> Result<(), Violation> {
        let mut seen = HashMap::new();
        for (i, p) in header.processors.iter().enumerate() {
            if seen.insert(p.id, i).is_some() {
                return Err(Violation::new(
                    "duplicate declaration",
                    Field::Processor(i),
                    format!("processor {} is declared twice", p.id),
                ));
            }
        }
        let n = header.processes.len();
        let mut ranks_seen = vec![false; n];
        for (i, p) in header.processes.iter().enumerate() {
            let r = p.rank as usize;
            if r < n && ranks_seen[r] {
                return Err(Violation::new(
                    "duplicate declaration",
                    Field::ProcessRank(i),
                    format!("process rank {} is declared twice", p.rank),
                ));
            }
            if r >= n {
                if header.processes[..i].iter().any(|q| q.rank == p.rank) {
                    return Err(Violation::new(
                        "duplicate declaration",
                        Field::ProcessRank(i),
                        format!("process rank {} is declared twice", p.rank),
                    ));
                }
                return Err(Violation::new(
                    "ranks not contiguous",
                    Field::ProcessRank(i),
                    format!(
                        "process rank {} is out of range: {} processes are declared, so ranks must be 0-{}",
                        p.rank,
                        n,
                        n - 1
                    ),
                ));
            }
            ranks_seen[r] = true;
            if let Some(proc_id) = p.processor {
                if !seen.contains_key(&proc_id) {
                    return Err(Violation::new(
                        "unknown processor",
                        Field::ProcessProcessor(i),
                        format!(
                            "process {} runs on processor {}, which is not declared",
                            p.rank, proc_id
                        ),
                    ));
                }
            }
        }
        for (i, p) in header.processes.iter().enumerate() {
            if p.rank as usize != i {
                return Err(Violation::new(
                    "processes out of order",
                    Field::ProcessRank(i),
                    format!("process rank {} is listed at position {}; processes must be listed in rank order", p.rank, i),
                ));
            }
        }
        let mut comm_seen = HashMap::new();
        let mut member_seen = vec![usize::MAX; n];
        for (ci, c) in header.communicators.iter().enumerate() {
            if comm_seen.insert(c.id, ci).is_some() {
                return Err(Violation::new(
                    "duplicate declaration",
                    Field::CommId(ci),
                    format!("communicator {} is declared twice", c.id),
                ));
            }
            if c.members.is_empty() {
                return Err(Violation::new(
                    "empty communicator",
                    Field::CommId(ci),
                    format!(
                        "communicator {} ({}) has no members",
                        c.id,
                        clipped(&c.name)
                    ),
                ));
            }
            for (mi, &m) in c.members.iter().enumerate() {
                if m as usize >= n {
                    return Err(Violation::new(
                        "unknown rank",
                        Field::Member { comm: ci, member: mi },
                        format!(
                            "communicator {} ({}) lists rank {}, which is not a declared process ({})",
                            c.id,
                            clipped(&c.name),
                            m,
                            describe_ranks(n as u32)
                        ),
                    ));
                }
                if member_seen[m as usize] == ci {
                    return Err(Violation::new(
                        "duplicate member",
                        Field::Member {
                            comm: ci,
                            member: mi,
                        },
                        format!(
                            "communicator {} ({}) lists rank {} twice",
                            c.id,
                            clipped(&c.name),
                            m
                        ),
                    ));
                }
                member_seen[m as usize] = ci;
            }
        }
        Ok(())
    }

    /// Defines string `id` (as [`crate::ingest::EventSink::string`] does), so that messages
    /// can name routines and calls.
    pub fn string(&mut self, id: StrId, text: &str) {
        let i = id as usize;
        if self.strings.len() <= i {
            self.strings.resize(i + 1, String::new());
        }
        self.strings[i] = text.to_string();
    }

    fn name_of(&self, id: StrId) -> String {
        match self.strings.get(id as usize) {
            Some(s) if !s.is_empty() => clipped(s),
            _ => format!("#{id}"),
        }
    }

    fn kind_name(&self, kind: OpKind) -> String {
        match kind {
            OpKind::Other(id) => self.name_of(id),
            k => k.mpi_name().unwrap_or("?").to_string(),
        }
    }

    #[inline]
    fn comm_index(&self, id: CommId) -> Option<usize> {
        if id < DENSE_COMMS {
            match self.dense.get(id as usize) {
                Some(&i) if i != NO_COMM => Some(i as usize),
                _ => None,
            }
        } else {
            self.sparse.get(&id).map(|&i| i as usize)
        }
    }

    #[inline]
    fn thread_state(&mut self, rank: Rank, thread: u32) -> &mut ThreadState {
        let threads = &mut self.threads[rank as usize];
        let pos = match threads.iter().position(|t| t.thread == thread) {
            Some(p) => p,
            None => {
                threads.push(ThreadState {
                    thread,
                    last: 0,
                    ops: 0,
                    stack: Vec::new(),
                });
                threads.len() - 1
            }
        };
        &mut threads[pos]
    }

    /// The routines entered and not yet left on `rank`'s `thread`, outermost first.
    pub fn open_routines(&self, rank: Rank, thread: u32) -> &[StrId] {
        self.threads
            .get(rank as usize)
            .and_then(|ts| ts.iter().find(|t| t.thread == thread))
            .map_or(&[], |t| t.stack.as_slice())
    }

    /// The time of the last event checked on `rank`'s `thread` (0 before any).
    pub fn last_time(&self, rank: Rank, thread: u32) -> Time {
        self.state(rank, thread).map_or(0, |t| t.last)
    }

    /// The operations of a declared rank checked so far on `rank`'s `thread`: after
    /// [`Validator::visit_operation`], one more than the position of the operation it saw.
    pub fn operations(&self, rank: Rank, thread: u32) -> u64 {
        self.state(rank, thread).map_or(0, |t| t.ops)
    }

    fn state(&self, rank: Rank, thread: u32) -> Option<&ThreadState> {
        self.threads
            .get(rank as usize)
            .and_then(|ts| ts.iter().find(|t| t.thread == thread))
    }

    /// The number of routines entered and not yet left on `rank`'s `thread`: the nesting
    /// depth of an operation that starts now.
    pub fn depth(&self, rank: Rank, thread: u32) -> u16 {
        self.threads
            .get(rank as usize)
            .and_then(|ts| ts.iter().find(|t| t.thread == thread))
            .map_or(0, |t| t.stack.len().min(u16::MAX as usize) as u16)
    }

    fn unknown_rank(&self, field: Field, what: &str, rank: Rank) -> Violation {
        Violation::new(
            "unknown rank",
            field,
            format!(
                "{what} {rank} is not a declared process ({})",
                describe_ranks(self.ranks)
            ),
        )
    }

    fn check_time(
        &mut self,
        rank: Rank,
        thread: u32,
        time: Time,
        what: &str,
    ) -> Result<(), Violation> {
        let state = self.thread_state(rank, thread);
        if time < state.last {
            let last = state.last;
            let on = on_rank(rank, thread);
            return Err(Violation::new(
                "time goes backwards",
                if what == "start" {
                    Field::Start
                } else {
                    Field::Time
                },
                format!("{what} {time} is before the previous event's start {last} on {on}"),
            ));
        }
        state.last = time;
        Ok(())
    }

    /// Checks one operation: its rank is declared, its start time does not go backwards on
    /// its rank and thread, it ends no earlier than it starts, its communicator is declared
    /// and has its rank as a member, sends name a destination and receives a source, peers
    /// and roots are members of the communicator, rooted collectives (and only they) name a
    /// root, and a Barrier carries no data. The first broken rule is the error.
    pub fn check_operation(&mut self, op: &Operation) -> Result<(), Violation> {
        self.visit_operation(op, Err)
    }

    /// Checks one operation as [`Validator::check_operation`] does, handing every broken
    /// rule to `on`, which stops the check by returning an error or lets it go on. After an
    /// undeclared rank nothing more is checked; after a communicator that is undeclared or
    /// does not have the rank as a member, peers and root are checked as on no communicator;
    /// after an unexpected root the root is not checked further. An operation that goes back
    /// in time leaves its location's time where it was.
    pub fn visit_operation(
        &mut self,
        op: &Operation,
        mut on: impl FnMut(Violation) -> Result<(), Violation>,
    ) -> Result<(), Violation> {
        if op.rank >= self.ranks {
            return on(self.unknown_rank(Field::Rank, "rank", op.rank));
        }
        self.thread_state(op.rank, op.thread).ops += 1;
        if op.end < op.start {
            on(Violation::new(
                "end before start",
                Field::End,
                format!("end {} is before start {}", op.end, op.start),
            ))?;
        }
        if let Err(v) = self.check_time(op.rank, op.thread, op.start, "start") {
            on(v)?;
        }
        let kind = op.kind;
        // A call recorded without (some of) its records may lack its communicator, peer or
        // root: it is outside matching.
        let incomplete = op.flags & flags::WITHOUT_RECORDS != 0;
        let comm = match op.comm {
            Some(id) => match self.comm_index(id) {
                Some(i) => {
                    let c = &self.comms[i];
                    if !c.contains(op.rank) {
                        on(Violation::new(
                            "not a member",
                            Field::Comm,
                            format!(
                                "{} on communicator {} ({}) by rank {}, which is not one of its members",
                                self.kind_name(kind),
                                c.id,
                                clipped(&c.name),
                                op.rank
                            ),
                        ))?;
                        None
                    } else {
                        Some(c)
                    }
                }
                None => {
                    on(Violation::new(
                        "unknown communicator",
                        Field::Comm,
                        format!("communicator {id} is not declared"),
                    ))?;
                    None
                }
            },
            None => {
                if (kind.is_send() || kind.is_receive() || kind.is_collective()) && !incomplete {
                    on(Violation::new(
                        "missing communicator",
                        Field::Comm,
                        format!("{} names no communicator", self.kind_name(kind)),
                    ))?;
                }
                None
            }
        };
        if kind.is_send() && op.dest.is_none() && !incomplete {
            on(Violation::new(
                "missing destination",
                Field::Dest,
                format!("{} names no destination", self.kind_name(kind)),
            ))?;
        }
        if kind.is_receive()
            && op.source.is_none()
            && op.flags & flags::ANY_SOURCE == 0
            && !incomplete
        {
            on(Violation::new(
                "missing source",
                Field::Source,
                format!("{} names no source", self.kind_name(kind)),
            ))?;
        }
        for (peer, field, what) in [
            (op.dest, Field::Dest, "destination"),
            (op.source, Field::Source, "source"),
        ] {
            if let Some(p) = peer {
                if p >= self.ranks {
                    on(self.unknown_rank(field, what, p))?;
                    continue;
                }
                if let Some(c) = comm {
                    if !c.contains(p) {
                        on(Violation::new(
                            "peer not in communicator",
                            field,
                            format!(
                                "{what} {p} is not a member of communicator {} ({})",
                                c.id,
                                clipped(&c.name)
                            ),
                        ))?;
                    }
                }
            }
        }
        match op.root {
            Some(root) => {
                if !kind.is_rooted() {
                    let why = if kind.is_collective() {
                        " (Table 3.1, rules 11-12)"
                    } else {
                        ""
                    };
                    on(Violation::new(
                        "unexpected root",
                        Field::Root,
                        format!("{} has no root{why}", self.kind_name(kind)),
                    ))?;
                } else if root >= self.ranks {
                    on(self.unknown_rank(Field::Root, "root", root))?;
                } else if let Some(c) = comm {
                    if !c.contains(root) {
                        on(Violation::new(
                            "root not in communicator",
                            Field::Root,
                            format!(
                                "root {root} is not a member of communicator {} ({})",
                                c.id,
                                clipped(&c.name)
                            ),
                        ))?;
                    }
                }
            }
            None if kind.is_rooted() && !incomplete => {
                on(Violation::new(
                    "missing root",
                    Field::Root,
                    format!("{} names no root", self.kind_name(kind)),
                ))?;
            }
            None => {}
        }
        if kind.blocking_collective() == Some(OpKind::Barrier)
            && (op.send_bytes != 0 || op.recv_bytes != 0)
        {
            let (field, bytes) = if op.send_bytes != 0 {
                (Field::SendBytes, op.send_bytes)
            } else {
                (Field::RecvBytes, op.recv_bytes)
            };
            on(Violation::new(
                "bytes on a barrier",
                field,
                format!(
                    "{} carries no data (Table 3.1, rule 8), found {bytes} bytes",
                    self.kind_name(kind)
                ),
            ))?;
        }
        Ok(())
    }

    /// Checks one routine enter or leave: its rank is declared, its time does not go
    /// backwards on its rank and thread, and a leave names the innermost routine entered.
    pub fn check_routine(&mut self, event: &RoutineEvent) -> Result<(), Violation> {
        if event.rank >= self.ranks {
            return Err(self.unknown_rank(Field::Rank, "rank", event.rank));
        }
        self.check_time(event.rank, event.thread, event.time, "time")?;
        let (rank, thread) = (event.rank, event.thread);
        let state = self.thread_state(rank, thread);
        if event.enter {
            state.stack.push(event.routine);
            return Ok(());
        }
        match state.stack.last().copied() {
            Some(top) if top == event.routine => {
                state.stack.pop();
                Ok(())
            }
            Some(top) => Err(Violation::new(
                "unbalanced leave",
                Field::Routine,
                format!(
                    "leave {} does not match the innermost entered routine {} on {}",
                    self.name_of(event.routine),
                    self.name_of(top),
                    on_rank(rank, thread)
                ),
            )),
            None => Err(Violation::new(
                "unbalanced leave",
                Field::Routine,
                format!(
                    "leave {} without a routine entered on {}",
                    self.name_of(event.routine),
                    on_rank(rank, thread)
                ),
            )),
        }
    }
}

fn on_rank(rank: Rank, thread: u32) -> String {
    if thread == 0 {
        format!("rank {rank}")
    } else {
        format!("rank {rank} thread {thread}")
    }
}

fn describe_ranks(n: u32) -> String {
    match n {
        0 => "no processes are declared".to_string(),
        1 => "the only rank is 0".to_string(),
        n => format!("ranks are 0-{}", n - 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Communicator, Process, Processor};

    fn header(n: u32) -> TraceHeader {
        TraceHeader {
            processors: vec![Processor {
                id: 0,
                name: "n0".into(),
            }],
            processes: (0..n)
                .map(|r| Process {
                    rank: r,
                    name: format!("P{r}"),
                    processor: Some(0),
                })
                .collect(),
            communicators: vec![
                Communicator {
                    id: 0,
                    name: "world".into(),
                    members: (0..n).collect(),
                },
                Communicator {
                    id: 7,
                    name: "pair".into(),
                    members: vec![2, 0],
                },
            ],
            ..TraceHeader::default()
        }
    }

    fn op(rank: Rank, kind: OpKind, start: Time) -> Operation {
        let mut o = Operation::new(rank, kind, start, start + 10);
        o.comm = Some(0);
        o
    }

    #[test]
    fn header_rules() {
        assert!(Validator::check_header(&header(4)).is_ok());
        let mut h = header(4);
        h.processes[3].rank = 1;
        let v = Validator::check_header(&h).unwrap_err();
        assert_eq!(
            (v.rule, v.field),
            ("duplicate declaration", Field::ProcessRank(3))
        );
        let mut h = header(4);
        h.processes[3].rank = 9;
        let v = Validator::check_header(&h).unwrap_err();
        assert_eq!(v.rule, "ranks not contiguous");
        assert_eq!(
            v.message,
            "process rank 9 is out of range: 4 processes are declared, so ranks must be 0-3"
        );
        let mut h = header(4);
        h.communicators[1].members = vec![2, 5];
        let v = Validator::check_header(&h).unwrap_err();
        assert_eq!(v.field, Field::Member { comm: 1, member: 1 });
        assert_eq!(
            v.message,
            "communicator 7 (pair) lists rank 5, which is not a declared process (ranks are 0-3)"
        );
        let mut h = header(4);
        h.communicators[1].members = vec![2, 2];
        assert_eq!(
            Validator::check_header(&h).unwrap_err().rule,
            "duplicate member"
        );
        let mut h = header(4);
        h.communicators[1].members.clear();
        let v = Validator::check_header(&h).unwrap_err();
        assert_eq!((v.rule, v.field), ("empty communicator", Field::CommId(1)));
        assert_eq!(v.message, "communicator 7 (pair) has no members");
        let mut h = header(4);
        h.processes.swap(0, 2);
        let v = Validator::check_header(&h).unwrap_err();
        assert_eq!(
            (v.rule, v.field),
            ("processes out of order", Field::ProcessRank(0))
        );
        assert_eq!(
            v.message,
            "process rank 2 is listed at position 0; processes must be listed in rank order"
        );
        let mut h = header(4);
        h.processes[1].processor = Some(3);
        let v = Validator::check_header(&h).unwrap_err();
        assert_eq!(
            v.message,
            "process 1 runs on processor 3, which is not declared"
        );
    }

    #[test]
    fn operation_rules() {
        let mut v = Validator::new(&header(4)).unwrap();
        let mut s = op(1, OpKind::Send, 100);
        s.dest = Some(2);
        v.check_operation(&s).unwrap();
        let back = op(1, OpKind::Barrier, 50);
        let e = v.check_operation(&back).unwrap_err();
        assert_eq!(
            e.to_string(),
            "time goes backwards: start 50 is before the previous event's start 100 on rank 1"
        );
        let mut p = op(1, OpKind::Send, 200);
        p.comm = Some(7);
        p.dest = Some(0);
        let e = v.check_operation(&p).unwrap_err();
        assert_eq!(e.to_string(), "not a member: MPI_Send on communicator 7 (pair) by rank 1, which is not one of its members");
        let mut g = op(2, OpKind::Gather, 0);
        g.comm = Some(7);
        g.root = Some(3);
        let e = v.check_operation(&g).unwrap_err();
        assert_eq!((e.rule, e.field), ("root not in communicator", Field::Root));
        let mut b = op(3, OpKind::Ibarrier, 0);
        b.recv_bytes = 4;
        let e = v.check_operation(&b).unwrap_err();
        assert_eq!(e.field, Field::RecvBytes);
        assert_eq!(
            e.message,
            "MPI_Ibarrier carries no data (Table 3.1, rule 8), found 4 bytes"
        );
        let mut r = op(0, OpKind::Irecv, 0);
        r.flags = flags::ANY_SOURCE;
        v.check_operation(&r).unwrap();
    }

    #[test]
    fn routine_rules_and_depth() {
        let mut v = Validator::new(&header(4)).unwrap();
        v.string(0, "main");
        v.string(1, "solve");
        let ev = |time, routine, enter| RoutineEvent {
            rank: 1,
            thread: 2,
            time,
            routine,
            enter,
        };
        v.check_routine(&ev(1, 0, true)).unwrap();
        v.check_routine(&ev(2, 1, true)).unwrap();
        assert_eq!(v.depth(1, 2), 2);
        assert_eq!(v.depth(1, 0), 0);
        let e = v.check_routine(&ev(3, 0, false)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "unbalanced leave: leave main does not match the innermost entered routine solve on rank 1 thread 2"
        );
        v.check_routine(&ev(3, 1, false)).unwrap();
        v.check_routine(&ev(4, 0, false)).unwrap();
        let e = v.check_routine(&ev(5, 0, false)).unwrap_err();
        assert_eq!(
            e.message,
            "leave main without a routine entered on rank 1 thread 2"
        );
    }
}

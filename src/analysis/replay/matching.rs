//! Messages and collective instances matched as MPI matches them, while the replay issues
//! the calls: the replay needs no table of the trace's links, and holds only what is in
//! flight. The rules are the importer's (see [`crate::ingest::matcher`]), so a replay pairs
//! the messages and instances the import stored.

use std::collections::VecDeque;

use crate::hash::FxHashMap;
use crate::model::{CommId, OpKind, Rank, TraceHeader};

/// A point-to-point message's envelope: communicator, sender, receiver, tag.
pub type Envelope = (CommId, Rank, Rank, i32);

/// Per envelope, the k-th send goes with the k-th receive (MPI's non-overtaking rule); a
/// message is named by a key both its halves get.
///
/// ```
/// use mtfdb::analysis::replay::matching::Envelopes;
/// let mut m = Envelopes::default();
/// let first = m.message((0, 1, 2, 7), true); // a send from 1 to 2, tag 7
/// let second = m.message((0, 1, 2, 7), true);
/// assert_eq!(m.message((0, 1, 2, 7), false), first); // the receives take them in order
/// assert_eq!(m.message((0, 1, 2, 7), false), second);
/// assert_eq!(m.in_flight(), 0);
/// m.forget(first); // both halves of the first message ended: its key is free again
/// assert_eq!(m.message((0, 3, 2, 7), true), first);
/// ```
#[derive(Debug, Default)]
pub struct Envelopes {
    /// Per envelope, the messages waiting for their other half: sends not received yet, or
    /// receives posted for messages not sent yet (never both: they would have matched).
    /// One map, one lookup per call; the oldest key inline, so that an envelope with one
    /// message waiting at a time (the common case) allocates nothing.
    waiting: FxHashMap<Envelope, Waiting>,
    /// Keys handed out so far (the largest).
    messages: u64,
    /// Keys of messages forgotten, handed out again before new ones (last forgotten first:
    /// the replay's table entry for it is likely still in the cache).
    free: Vec<u64>,
    /// Entries left after the last pruning.
    pruned: usize,
}

/// An envelope's waiting halves, oldest first. Small (24 bytes), since the map holds one
/// per envelope and its lookups miss the cache at many ranks.
#[derive(Debug, Default)]
struct Waiting {
    /// Whether the waiting halves are sends.
    sends: bool,
    /// The oldest waiting message (0: nothing waits; keys start at 1).
    first: u64,
    /// The others, oldest first (seldom any).
    // Boxed so that an entry holds 8 bytes for them rather than the deque's 32.
    #[allow(clippy::box_collection)]
    rest: Option<Box<VecDeque<u64>>>,
}

impl Waiting {
    fn push(&mut self, key: u64) {
        if self.first == 0 {
            self.first = key;
        } else {
            self.rest.get_or_insert_default().push_back(key);
        }
    }

    fn pop(&mut self) -> Option<u64> {
        let key = std::mem::take(&mut self.first);
        if key == 0 {
            return None;
        }
        self.first = self
            .rest
            .as_mut()
            .and_then(|rest| rest.pop_front())
            .unwrap_or(0);
        Some(key)
    }

    fn waits(&self) -> bool {
        self.first != 0
    }

    fn len(&self) -> usize {
        if self.waits() {
            1 + self.rest.as_ref().map_or(0, |rest| rest.len())
        } else {
            0
        }
    }
}

impl Envelopes {
    /// The key of the message a send (or receive) with this envelope sends (or receives):
    /// the oldest waiting partner's, else a new one left for its partner.
    pub fn message(&mut self, envelope: Envelope, sending: bool) -> u64 {
        if self.waiting.len() >= Self::PRUNE_AT.max(4 * self.pruned) {
            // Envelopes whose queues emptied keep their entry (a message per iteration would
            // otherwise insert one each time); when many pile up, the empty ones go.
            self.waiting.retain(|_, w| w.waits());
            self.pruned = self.waiting.len();
        }
        let w = self.waiting.entry(envelope).or_default();
        if w.sends != sending {
            if let Some(key) = w.pop() {
                return key;
            }
        }
        w.sends = sending;
        let key = self.free.pop().unwrap_or_else(|| {
            self.messages += 1;
            self.messages
        });
        w.push(key);
        key
    }

    /// Message `key` is done with (both its halves were issued, and their calls ended):
    /// its key names a later message.
    pub fn forget(&mut self, key: u64) {
        // (0 names no message: `Waiting` reads it as none.)
        if key != 0 {
            self.free.push(key);
        }
    }

    /// Entries the envelope map holds before its empty queues are dropped.
    const PRUNE_AT: usize = 1 << 16;

    /// Sends and receives issued whose partner was not yet.
    pub fn in_flight(&self) -> usize {
        self.waiting.values().map(Waiting::len).sum()
    }
}

/// The k-th call of a blocking collective kind on a communicator by each of its members is
/// one instance.
///
/// ```
/// use mtfdb::analysis::replay::matching::Instances;
/// use mtfdb::model::OpKind;
/// let mut i = Instances::default();
/// let a = i.instance(0, 0, OpKind::Allreduce, 2);
/// let b = i.instance(0, 0, OpKind::Allreduce, 2); // rank 0's second call
/// assert_ne!(a, b);
/// assert_eq!(i.instance(1, 0, OpKind::Allreduce, 2), a);
/// assert_eq!(i.instance(1, 0, OpKind::Allreduce, 2), b);
/// assert_eq!(i.open(), 0);
/// ```
#[derive(Debug, Default)]
pub struct Instances {
    /// Per member, communicator and kind: its calls so far.
    calls: FxHashMap<(Rank, CommId, OpKind), u64>,
    /// Instances some member entered and not all: (communicator, kind, index) → (key,
    /// members entered).
    open: FxHashMap<(CommId, OpKind, u64), (u64, u32)>,
    instances: u64,
}

impl Instances {
    /// The key of the instance `rank`'s next call of `kind` on `comm` (of `members`
    /// members) belongs to.
    pub fn instance(&mut self, rank: Rank, comm: CommId, kind: OpKind, members: u32) -> u64 {
        let calls = self.calls.entry((rank, comm, kind)).or_default();
        let index = *calls;
        *calls += 1;
        let slot = (comm, kind, index);
        let next = self.instances + 1;
        let (key, entered) = self.open.entry(slot).or_insert((next, 0));
        if *key == next {
            self.instances = next;
        }
        *entered += 1;
        let key = *key;
        if *entered >= members {
            self.open.remove(&slot);
        }
        key
    }

    /// Instances entered by some members and not all.
    pub fn open(&self) -> usize {
        self.open.len()
    }
}

/// A communicator's ranks by world rank: the identity for a communicator of world ranks
/// `0..n` in order (the world), else a map.
#[derive(Debug)]
enum Ranks {
    Identity(u32),
    Map(FxHashMap<Rank, u32>),
}

/// The rank a world rank has in each communicator (its place in the communicator's member
/// list), each communicator's looked up once: what orders a collective's members (who sends
/// to whom in a pairwise exchange).
///
/// ```
/// use mtfdb::analysis::replay::matching::CommRanks;
/// use mtfdb::model::{Communicator, TraceHeader};
/// let mut header = TraceHeader::world(4, "world");
/// header.communicators.push(Communicator { id: 7, name: "odd".into(), members: vec![3, 1] });
/// let mut ranks = CommRanks::default();
/// assert_eq!(ranks.rank_in(&header, 0, 2), Some(2));
/// assert_eq!(ranks.rank_in(&header, 7, 1), Some(1));
/// assert_eq!(ranks.rank_in(&header, 7, 3), Some(0));
/// assert_eq!(ranks.rank_in(&header, 7, 2), None); // not a member
/// assert_eq!(ranks.rank_in(&header, 9, 0), None); // no such communicator
/// ```
#[derive(Debug, Default)]
pub struct CommRanks {
    by_comm: FxHashMap<CommId, Option<Ranks>>,
}

impl CommRanks {
    /// World rank `rank`'s rank in communicator `comm` of `header` (`None` when it is not a
    /// member or the communicator is not declared).
    pub fn rank_in(&mut self, header: &TraceHeader, comm: CommId, rank: Rank) -> Option<u32> {
        let ranks = self.by_comm.entry(comm).or_insert_with(|| {
            let members = &header.communicator(comm)?.members;
            let identity = members.iter().enumerate().all(|(i, &r)| r as usize == i);
            Some(if identity {
                Ranks::Identity(members.len() as u32)
            } else {
                let mut map = FxHashMap::default();
                for (i, &r) in members.iter().enumerate() {
                    // A rank listed twice keeps its first place.
                    map.entry(r).or_insert(i as u32);
                }
                Ranks::Map(map)
            })
        });
        match ranks.as_ref()? {
            Ranks::Identity(n) => (rank < *n).then_some(rank),
            Ranks::Map(map) => map.get(&rank).copied(),
        }
    }
}

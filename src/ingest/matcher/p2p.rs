//! Point-to-point matching by MPI's non-overtaking rule.
//!
//! Per channel (communicator, source, destination, tag) the k-th send matches the k-th
//! receive. Whichever side arrives first waits in a FIFO for its channel; at any moment a
//! channel holds only sends or only receives (if it held both, they would have matched).
//! A channel's queue is removed as soon as it empties and its buffer kept in a small pool,
//! so memory follows the number of waiting items, not the length of the trace.

use std::collections::hash_map::Entry;
use std::collections::VecDeque;

use crate::hash::FxHashMap;
use crate::model::{CommId, Message, OpId, Rank, StrId, Time};

/// Emptied queue buffers kept for reuse; more than this are freed.
const POOL_LIMIT: usize = 256;

/// The matching key of a point-to-point operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct Channel {
    pub comm: CommId,
    pub source: Rank,
    pub dest: Rank,
    pub tag: i32,
}

/// One side of a message waiting for the other.
#[derive(Debug, Clone, Copy)]
pub(super) struct Waiting {
    /// The operation.
    pub op: OpId,
    /// Send start (for a send) or receive end (for a receive).
    pub time: Time,
    /// Bytes sent (a send) or received (a receive).
    pub bytes: u64,
    /// A receive's `bytes` is its buffer's capacity ([`crate::model::flags::RECV_CAPACITY`]).
    pub capacity: bool,
    /// The datatype this side recorded (none for a `Sendrecv`, whose one datatype may be
    /// either side's).
    pub datatype: Option<StrId>,
    /// For a receive: whether its end (or its Wait's) is when the data had arrived; not so
    /// for a non-blocking receive whose completion the trace does not record.
    pub timed: bool,
}

/// The waiting side(s) of one channel.
#[derive(Debug)]
struct Queue {
    sends: bool,
    items: VecDeque<Waiting>,
}

/// A leftover at the end of the trace.
#[derive(Debug, Clone, Copy)]
pub(super) struct Leftover {
    pub channel: Channel,
    pub is_send: bool,
    pub waiting: Waiting,
}

/// Every channel with something waiting.
#[derive(Debug, Default)]
pub(super) struct P2p {
    queues: FxHashMap<Channel, Queue>,
    pool: Vec<VecDeque<Waiting>>,
    waiting: usize,
}

impl P2p {
    /// Sends and receives currently waiting.
    pub fn waiting(&self) -> usize {
        self.waiting
    }

    /// One side arrives on `channel`: match it with the oldest waiting opposite side, or
    /// make it wait. Returns the message if one was formed, with its send's and its
    /// receive's sides as they waited (the message keeps the send's bytes).
    #[inline]
    pub fn arrive(
        &mut self,
        channel: Channel,
        is_send: bool,
        me: Waiting,
    ) -> Option<(Message, Waiting, Waiting)> {
        let other = match self.queues.entry(channel) {
            Entry::Occupied(mut e) => {
                let queue = e.get_mut();
                if queue.sends == is_send {
                    queue.items.push_back(me);
                    self.waiting += 1;
                    return None;
                }
                // Empty queues are removed from the map as soon as they empty.
                #[allow(clippy::expect_used)]
                let other = queue
                    .items
                    .pop_front()
                    .expect("a channel queue is never left empty");
                if queue.items.is_empty() {
                    let queue = e.remove();
                    if self.pool.len() < POOL_LIMIT {
                        self.pool.push(queue.items);
                    }
                }
                self.waiting -= 1;
                other
            }
            Entry::Vacant(e) => {
                let mut items = self.pool.pop().unwrap_or_default();
                items.push_back(me);
                e.insert(Queue {
                    sends: is_send,
                    items,
                });
                self.waiting += 1;
                return None;
            }
        };
        let (send, recv) = if is_send { (me, other) } else { (other, me) };
        let message = Message {
            sender: channel.source,
            receiver: channel.dest,
            comm: channel.comm,
            tag: channel.tag,
            bytes: send.bytes,
            send_time: send.time,
            recv_time: recv.time,
            send_op: send.op,
            recv_op: recv.op,
        };
        Some((message, send, recv))
    }

    /// Everything still waiting, ordered by operation id (a `Sendrecv`'s send before its
    /// receive); leaves the matcher empty.
    pub fn drain(&mut self) -> Vec<Leftover> {
        let mut out = Vec::with_capacity(self.waiting);
        for (channel, queue) in self.queues.drain() {
            out.extend(queue.items.into_iter().map(|waiting| Leftover {
                channel,
                is_send: queue.sends,
                waiting,
            }));
        }
        out.sort_unstable_by_key(|l| (l.waiting.op, !l.is_send));
        self.waiting = 0;
        self.pool.clear();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ch(tag: i32) -> Channel {
        Channel {
            comm: 0,
            source: 0,
            dest: 1,
            tag,
        }
    }

    fn w(op: OpId) -> Waiting {
        Waiting {
            op,
            time: op * 10,
            bytes: op,
            capacity: false,
            datatype: None,
            timed: true,
        }
    }

    #[test]
    fn fifo_per_channel_and_queue_removed_when_empty() {
        let mut p = P2p::default();
        assert!(p.arrive(ch(5), true, w(1)).is_none());
        assert!(p.arrive(ch(5), true, w(2)).is_none());
        assert!(p.arrive(ch(6), false, w(3)).is_none());
        assert_eq!(p.waiting(), 3);
        let m = p.arrive(ch(5), false, w(4)).unwrap().0;
        assert_eq!(
            (m.send_op, m.recv_op, m.bytes, m.send_time, m.recv_time),
            (1, 4, 1, 10, 40)
        );
        let m = p.arrive(ch(5), false, w(5)).unwrap().0;
        assert_eq!((m.send_op, m.recv_op), (2, 5));
        assert_eq!(p.queues.len(), 1);
        assert_eq!(p.pool.len(), 1);
        let left = p.drain();
        assert_eq!(left.len(), 1);
        assert_eq!(
            (left[0].waiting.op, left[0].is_send, left[0].channel.tag),
            (3, false, 6)
        );
        assert_eq!(p.waiting(), 0);
    }
}

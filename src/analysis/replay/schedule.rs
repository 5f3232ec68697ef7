//! The discrete-event replay: every rank's sequence of computation bursts and MPI calls run
//! against a [`NetworkModel`], each call starting when the rank's previous call ended plus
//! the computation between them, and ending when the model says (see [`super::network`]).
//!
//! Ranks advance one at a time, each as far as it can; a call that needs another rank's
//! progress (a receive whose message was not injected yet, a rendezvous send whose receive
//! was not posted, a Wait on such requests, a collective some member has not entered) parks
//! its rank until that happens. Memory holds the messages in flight, the collective instances
//! open and one call per rank. A call whose partner never comes (a trace that lost it)
//! keeps its measured duration, and is counted. Times saturate at `Time::MAX` instead of
//! wrapping (the caller reports a prediction that reached it as an overflow).

use std::collections::hash_map::Entry;
use std::collections::VecDeque;

use super::network::{is_pairwise_exchange, NetworkModel};
use crate::error::Result;
use crate::hash::FxHashMap;
use crate::model::{OpKind, Time};

/// What an MPI call does, as the replay sees it. Messages are named by a key both halves
/// share (the replay of a stored trace uses the send's operation id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A call the network model does not time (`MPI_Init`, a communicator call, an
    /// unmatched send…): it keeps its measured duration.
    Local,
    /// Sends message `message` of `bytes` bytes; a non-blocking send completes later, in the
    /// Wait that names it.
    Send {
        /// The message.
        message: u64,
        /// Its size.
        bytes: u64,
        /// `MPI_Send` (true) or `MPI_Isend` (false).
        blocking: bool,
    },
    /// Receives message `message`.
    Recv {
        /// The message.
        message: u64,
        /// `MPI_Recv` (true) or `MPI_Irecv` (false).
        blocking: bool,
    },
    /// `MPI_Sendrecv`: sends one message and receives another.
    SendRecv {
        /// The message sent.
        send: u64,
        /// Its size.
        bytes: u64,
        /// The message received.
        recv: u64,
    },
    /// A Wait (any variant) completing the requests of these non-blocking sends and receives.
    Wait {
        /// Messages of the completed `MPI_Isend`s.
        sends: Vec<u64>,
        /// Messages of the completed `MPI_Irecv`s.
        recvs: Vec<u64>,
    },
    /// A member's call of blocking collective instance `instance`.
    Collective {
        /// The instance, shared by its members.
        instance: u64,
        /// The collective.
        kind: OpKind,
        /// Its number of members.
        members: u32,
        /// This member's rank in the communicator (`None` when the trace does not say):
        /// members of a pairwise exchange leave at different times by it.
        position: Option<u32>,
        /// Bytes this member sends.
        send_bytes: u64,
        /// Bytes this member receives.
        recv_bytes: u64,
    },
}

/// Marks `message` injected at `at`; the ranks parked on it.
fn inject(message: &mut Message, at: Time) -> Vec<usize> {
    message.injected = Some(at);
    std::mem::take(&mut message.waiters)
}

/// One call of a rank's program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// Computation since the rank's previous call ended (before the CPU factor).
    pub burst: Time,
    /// Its measured duration, kept by [`Step::Local`] calls and by calls whose partner never
    /// comes.
    pub duration: Time,
    /// What it does.
    pub step: Step,
}

/// What a replay saw beyond the times.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplayStats {
    /// Calls that waited for a partner that never came, replayed with their measured duration.
    pub calls: u64,
    /// The most messages held at once (issued by one side and not yet done with by both):
    /// the replay's memory follows this, not the trace's length.
    pub peak_messages: u64,
}

/// A message in flight.
#[derive(Default)]
struct Message {
    /// Its time on the wire, `T(bytes)` (a 128-bit division, made once per message).
    wire: Time,
    /// The send began: `(eager, ready)`, ready being when a rendezvous could start (`t + o`).
    sent: Option<(bool, Time)>,
    /// When its receive was posted.
    posted: Option<Time>,
    /// When it was injected.
    injected: Option<Time>,
    /// Ranks parked until it is injected.
    waiters: Vec<usize>,
    /// Its halves whose calls ended (sending and receiving): at two it is forgotten.
    ended: u8,
}

/// The messages in flight by key. A key below [`DENSE_KEYS`] indexes a table, whose size
/// follows the largest key met: a program that reuses the keys of messages forgotten (see
/// [`Program::forget`]) keeps it to the most messages in flight at once, and each message is
/// found without hashing; larger keys go to a map.
#[derive(Default)]
struct MessageTable {
    dense: Vec<Option<Message>>,
    sparse: FxHashMap<u64, Message>,
    /// Messages held, in both.
    len: usize,
}

/// Keys that [`MessageTable`] keeps in its table (at most this many slots, about 25 MiB).
const DENSE_KEYS: u64 = 1 << 18;

impl MessageTable {
    fn get(&self, key: u64) -> Option<&Message> {
        if key < DENSE_KEYS {
            self.dense.get(key as usize)?.as_ref()
        } else {
            self.sparse.get(&key)
        }
    }

    fn get_mut(&mut self, key: u64) -> Option<&mut Message> {
        if key < DENSE_KEYS {
            self.dense.get_mut(key as usize)?.as_mut()
        } else {
            self.sparse.get_mut(&key)
        }
    }

    /// Message `key`, made (knowing nothing yet) if it is not held.
    fn entry(&mut self, key: u64) -> &mut Message {
        if key < DENSE_KEYS {
            let at = key as usize;
            if at >= self.dense.len() {
                self.dense.resize_with(at + 1, || None);
            }
            let slot = &mut self.dense[at];
            if slot.is_none() {
                self.len += 1;
            }
            slot.get_or_insert_with(Message::default)
        } else {
            match self.sparse.entry(key) {
                Entry::Occupied(m) => m.into_mut(),
                Entry::Vacant(v) => {
                    self.len += 1;
                    v.insert(Message::default())
                }
            }
        }
    }

    fn remove(&mut self, key: u64) {
        let removed = if key < DENSE_KEYS {
            self.dense
                .get_mut(key as usize)
                .and_then(Option::take)
                .is_some()
        } else {
            self.sparse.remove(&key).is_some()
        };
        self.len -= usize::from(removed);
    }

    fn len(&self) -> usize {
        self.len
    }
}

/// A collective instance being entered.
#[derive(Default)]
struct Instance {
    entered: u32,
    /// Members whose call ended: at all of them it is forgotten.
    left: u32,
    last: Time,
    max_send: u64,
    max_recv: u64,
    end: Option<Time>,
    waiters: Vec<usize>,
    /// A pairwise exchange's entries by communicator rank while its members enter (`None`
    /// for a member not yet in).
    entries: Vec<Option<Time>>,
    /// Whether some member's place was unknown, outside the communicator or taken twice:
    /// then everyone leaves at `end`.
    misplaced: bool,
    /// Once all entered, a pairwise exchange's ends by communicator rank (each member leaves
    /// at its own); empty when everyone leaves at `end`.
    ends: Vec<Time>,
}

/// A rank's replay state.
struct RankState {
    /// When its previous call ended.
    clock: Time,
    /// When its next eager message may leave.
    nic: Time,
    /// The call begun and not ended, with its start.
    current: Option<(Call, Time)>,
    done: bool,
    queued: bool,
    /// Parked on something that has not happened yet.
    parked: bool,
}

/// The ranks' programs a replay runs: each rank's calls in order, and where their simulated
/// times go.
pub trait Program {
    /// Rank `rank`'s next call, `None` at its end.
    fn next(&mut self, rank: usize) -> Result<Option<Call>>;
    /// Rank `rank`'s call handed out first and not ended yet ran from `start` to `end`;
    /// `unresolved` when it waited for a partner that never came and kept its measured
    /// duration.
    fn ended(&mut self, rank: usize, start: Time, end: Time, unresolved: bool) -> Result<()>;
    /// Both halves of message `message` ended: the replay holds nothing of it any more, and
    /// its key may name another message from now on. (Keys handed out small and reused are
    /// the cheapest for the replay: see `MessageTable`.)
    fn forget(&mut self, _message: u64) {}
}

/// A [`Program`] of two closures: the calls, and where their times go.
pub struct Calls<N, E>(pub N, pub E);

impl<N, E> Program for Calls<N, E>
where
    N: FnMut(usize) -> Result<Option<Call>>,
    E: FnMut(usize, Time, Time) -> Result<()>,
{
    fn next(&mut self, rank: usize) -> Result<Option<Call>> {
        (self.0)(rank)
    }

    fn ended(&mut self, rank: usize, start: Time, end: Time, _unresolved: bool) -> Result<()> {
        (self.1)(rank, start, end)
    }
}

/// Replays `program`: rank `r` starts at `origin[r]`, and each call's simulated times go to
/// the program in each rank's order.
pub fn replay<P: Program>(
    net: &NetworkModel,
    origin: &[Time],
    program: &mut P,
) -> Result<ReplayStats> {
    let mut state = Replay {
        net,
        ranks: origin
            .iter()
            .map(|&clock| RankState {
                clock,
                nic: 0,
                current: None,
                done: false,
                queued: true,
                parked: false,
            })
            .collect(),
        messages: MessageTable::default(),
        instances: FxHashMap::default(),
        runnable: (0..origin.len()).collect(),
        stats: ReplayStats::default(),
    };
    loop {
        while let Some(r) = state.runnable.pop_front() {
            state.ranks[r].queued = false;
            state.run(r, program)?;
        }
        // Everyone left is parked on a partner that will not come: the earliest parked call
        // keeps its measured duration, and the replay goes on.
        let stuck = (0..state.ranks.len())
            .filter(|&r| !state.ranks[r].done && state.ranks[r].parked)
            .min_by_key(|&r| state.ranks[r].current.as_ref().map(|(_, start)| *start));
        let Some(r) = stuck else {
            break;
        };
        state.stats.calls += 1;
        let Some((call, start)) = state.ranks[r].current.take() else {
            break;
        };
        state.ranks[r].parked = false;
        state.finish(
            r,
            &call,
            (start, start.saturating_add(call.duration)),
            true,
            program,
        )?;
        state.wake(r);
    }
    Ok(state.stats)
}

struct Replay<'n> {
    net: &'n NetworkModel,
    ranks: Vec<RankState>,
    messages: MessageTable,
    instances: FxHashMap<u64, Instance>,
    runnable: VecDeque<usize>,
    stats: ReplayStats,
}

/// What a call's end depends on when it is not known yet.
enum Blocked {
    Message(u64),
    Instance(u64),
}

impl Replay<'_> {
    fn wake(&mut self, r: usize) {
        let rank = &mut self.ranks[r];
        if !rank.queued && !rank.done {
            rank.queued = true;
            rank.parked = false;
            self.runnable.push_back(r);
        }
    }

    fn wake_all(&mut self, waiters: Vec<usize>) {
        for r in waiters {
            self.wake(r);
        }
    }

    /// Runs rank `r` until it ends or parks.
    fn run<P: Program>(&mut self, r: usize, program: &mut P) -> Result<()> {
        loop {
            // The call is read in place where the program returned it (moving it out of the
            // result copied it with loads that straddled the callee's stores: a stall on
            // every call), or taken back when it was parked (the empty slot is left alone).
            let resumed_at = self.ranks[r].current.as_ref().map(|(_, start)| *start);
            let taken = match resumed_at {
                Some(_) => Ok(self.ranks[r].current.take().map(|(call, _)| call)),
                None => program.next(r),
            };
            let call = match &taken {
                Ok(Some(call)) => call,
                Ok(None) => {
                    self.ranks[r].done = true;
                    return Ok(());
                }
                Err(_) => return taken.map(drop),
            };
            let start = match resumed_at {
                Some(start) => start,
                None => {
                    let start = self.ranks[r]
                        .clock
                        .saturating_add(self.net.burst(call.burst));
                    self.begin(r, call, start);
                    start
                }
            };
            match self.end_of(call, start) {
                Ok(end) => self.finish(r, call, (start, end), false, program)?,
                Err(blocked) => {
                    let waiters = match blocked {
                        Blocked::Message(m) => &mut self.messages.entry(m).waiters,
                        Blocked::Instance(i) => &mut self.instances.entry(i).or_default().waiters,
                    };
                    waiters.push(r);
                    if let Ok(Some(call)) = taken {
                        self.ranks[r].current = Some((call, start));
                    }
                    self.ranks[r].parked = true;
                    return Ok(());
                }
            }
        }
    }

    fn finish<P: Program>(
        &mut self,
        r: usize,
        call: &Call,
        (start, end): (Time, Time),
        unresolved: bool,
        program: &mut P,
    ) -> Result<()> {
        self.ranks[r].clock = end;
        // The halves of messages this call completes: a message both of whose halves are
        // done is no longer needed (a non-blocking send's half is done in its Wait).
        // One lookup per half: the entry found is the one removed.
        let mut done = |key: u64| {
            if let Some(message) = self.messages.get_mut(key) {
                message.ended += 1;
                if message.ended >= 2 && message.waiters.is_empty() {
                    self.messages.remove(key);
                    program.forget(key);
                }
            }
        };
        match &call.step {
            Step::Send {
                message,
                blocking: true,
                ..
            }
            | Step::Recv {
                message,
                blocking: true,
            } => done(*message),
            Step::SendRecv { send, recv, .. } => {
                done(*send);
                done(*recv);
            }
            Step::Wait { sends, recvs } => sends.iter().chain(recvs).for_each(|&m| done(m)),
            Step::Collective {
                instance, members, ..
            } => {
                if let Some(i) = self.instances.get_mut(instance) {
                    i.left += 1;
                    if i.left >= *members && i.waiters.is_empty() {
                        self.instances.remove(instance);
                    }
                }
            }
            _ => {}
        }
        program.ended(r, start, end, unresolved)
    }

    /// What happens when a call starts: a send leaves (or is ready to), a receive is posted,
    /// a member enters its collective.
    fn begin(&mut self, r: usize, call: &Call, start: Time) {
        match &call.step {
            Step::Send { message, bytes, .. } => self.send(r, *message, *bytes, start),
            Step::Recv { message, .. } => self.post(*message, start),
            Step::SendRecv { send, bytes, recv } => {
                self.send(r, *send, *bytes, start);
                self.post(*recv, start);
            }
            Step::Collective {
                instance,
                kind,
                members,
                position,
                send_bytes,
                recv_bytes,
            } => {
                let net = self.net;
                let inst = self.instances.entry(*instance).or_default();
                inst.entered += 1;
                inst.last = inst.last.max(start);
                inst.max_send = inst.max_send.max(*send_bytes);
                inst.max_recv = inst.max_recv.max(*recv_bytes);
                if is_pairwise_exchange(*kind) && !inst.misplaced {
                    if inst.entries.is_empty() {
                        inst.entries = vec![None; *members as usize];
                    }
                    match position.and_then(|at| inst.entries.get_mut(at as usize)) {
                        Some(slot @ None) => *slot = Some(start),
                        _ => inst.misplaced = true,
                    }
                }
                if inst.entered >= *members {
                    inst.end = Some(inst.last.saturating_add(net.collective(
                        *kind,
                        *members,
                        inst.max_send,
                        inst.max_recv,
                    )));
                    let entries: Option<Vec<Time>> =
                        std::mem::take(&mut inst.entries).into_iter().collect();
                    if let (false, Some(entries)) = (inst.misplaced, entries) {
                        inst.ends = net
                            .member_ends(*kind, &entries, inst.max_send, inst.max_recv)
                            .unwrap_or_default();
                    }
                    let waiters = std::mem::take(&mut inst.waiters);
                    self.wake_all(waiters);
                }
            }
            Step::Local | Step::Wait { .. } => {}
        }
    }

    fn send(&mut self, r: usize, key: u64, bytes: u64, start: Time) {
        let net = self.net;
        let eager = net.eager(bytes);
        let ready = start.saturating_add(net.overhead);
        // One lookup of the message for all of it (the injection too).
        let message = self.messages.entry(key);
        message.wire = net.transfer(bytes);
        message.sent = Some((eager, ready));
        let injected = if eager {
            let rank = &mut self.ranks[r];
            let injected = ready.max(rank.nic);
            rank.nic = injected.saturating_add(net.gap.max(message.wire));
            Some(injected)
        } else {
            message
                .posted
                .map(|posted| ready.max(posted.saturating_add(net.latency)))
        };
        if let Some(at) = injected {
            let woken = inject(message, at);
            self.injected_one(woken);
        }
    }

    fn post(&mut self, key: u64, start: Time) {
        let latency = self.net.latency;
        let message = self.messages.entry(key);
        message.posted = Some(start);
        if let (Some((false, ready)), None) = (message.sent, message.injected) {
            let woken = inject(message, ready.max(start.saturating_add(latency)));
            self.injected_one(woken);
        }
    }

    /// A message was injected: the ranks parked on it go on.
    fn injected_one(&mut self, woken: Vec<usize>) {
        self.stats.peak_messages = self.stats.peak_messages.max(self.messages.len() as u64);
        self.wake_all(woken);
    }

    /// When message `key`'s data has left its sender (`Ok((injected, T))`).
    fn injected(&self, key: u64) -> std::result::Result<(Time, Time), Blocked> {
        self.messages
            .get(key)
            .and_then(|m| m.injected.map(|at| (at, m.wire)))
            .ok_or(Blocked::Message(key))
    }

    fn arrival(&self, key: u64) -> std::result::Result<Time, Blocked> {
        self.injected(key)
            .map(|(at, wire)| at.saturating_add(wire).saturating_add(self.net.latency))
    }

    /// The call's end, or what it waits for.
    fn end_of(&self, call: &Call, start: Time) -> std::result::Result<Time, Blocked> {
        let o = self.net.overhead;
        Ok(match &call.step {
            Step::Local => start.saturating_add(call.duration),
            Step::Send {
                message,
                blocking: true,
                ..
            } => {
                let (at, wire) = self.injected(*message)?;
                at.saturating_add(wire)
            }
            Step::Recv {
                message,
                blocking: true,
            } => start.max(self.arrival(*message)?).saturating_add(o),
            Step::Send { .. } | Step::Recv { .. } => start.saturating_add(o),
            Step::SendRecv { send, recv, .. } => {
                let (at, wire) = self.injected(*send)?;
                at.saturating_add(wire)
                    .max(start.max(self.arrival(*recv)?).saturating_add(o))
            }
            Step::Wait { sends, recvs } => {
                let mut ready = start;
                for &m in sends {
                    let (at, wire) = self.injected(m)?;
                    ready = ready.max(at.saturating_add(wire));
                }
                for &m in recvs {
                    ready = ready.max(self.arrival(m)?);
                }
                ready.saturating_add(o)
            }
            Step::Collective {
                instance, position, ..
            } => {
                let inst = self.instances.get(instance);
                let end = inst
                    .and_then(|i| i.end)
                    .ok_or(Blocked::Instance(*instance))?;
                // A pairwise exchange's member leaves at its own time.
                position
                    .and_then(|at| inst?.ends.get(at as usize).copied())
                    .unwrap_or(end)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net() -> NetworkModel {
        NetworkModel {
            latency: 1_000,
            overhead: 100,
            gap: 0,
            bandwidth: 1_000_000_000, // 1 byte per ns
            eager_limit: 1_000,
            cpu: 1.0,
        }
    }

    fn call(burst: Time, step: Step) -> Call {
        Call {
            burst,
            duration: 7,
            step,
        }
    }

    /// Replays `programs` from time 0 and returns every call's (start, end) per rank.
    fn run(net: &NetworkModel, programs: Vec<Vec<Call>>) -> (Vec<Vec<(Time, Time)>>, u64) {
        let origin = vec![0; programs.len()];
        let mut queues: Vec<VecDeque<Call>> = programs.into_iter().map(Into::into).collect();
        let mut times = vec![Vec::new(); origin.len()];
        let unresolved = replay(
            net,
            &origin,
            &mut Calls(
                |r: usize| Ok(queues[r].pop_front()),
                |r: usize, s, e| {
                    times[r].push((s, e));
                    Ok(())
                },
            ),
        )
        .unwrap();
        (times, unresolved.calls)
    }

    fn send(message: u64, bytes: u64, blocking: bool) -> Step {
        Step::Send {
            message,
            bytes,
            blocking,
        }
    }

    fn recv(message: u64, blocking: bool) -> Step {
        Step::Recv { message, blocking }
    }

    #[test]
    fn an_eager_ping_pong_follows_loggp() {
        // Rank 0 sends 500 bytes at 0 and receives the reply; rank 1 receives, computes 200
        // ns and replies.
        let (times, unresolved) = run(
            &net(),
            vec![
                vec![call(0, send(1, 500, true)), call(0, recv(2, true))],
                vec![call(0, recv(1, true)), call(200, send(2, 500, true))],
            ],
        );
        assert_eq!(unresolved, 0);
        // Send: injected at o = 100, on the wire 500: ends 600, arrives 1,600.
        // Receive posted at 0 ends at 1,600 + o = 1,700.
        // The reply starts at 1,900, injected 2,000, ends 2,500, arrives 3,500; rank 0's
        // receive (posted at 600) ends at 3,600.
        assert_eq!(times[0], vec![(0, 600), (600, 3_600)]);
        assert_eq!(times[1], vec![(0, 1_700), (1_900, 2_500)]);
    }

    #[test]
    fn a_rendezvous_send_waits_for_its_receive() {
        // 2,000 bytes are above the eager limit: the send waits until the receive is posted
        // at 5,000 and its go-ahead crossed back (L).
        let (times, _) = run(
            &net(),
            vec![
                vec![call(0, send(1, 2_000, true))],
                vec![call(5_000, recv(1, true))],
            ],
        );
        // Injected at 6,000, 2,000 on the wire: the send ends at 8,000, the message arrives
        // at 9,000, the receive ends at 9,100.
        assert_eq!(times[0], vec![(0, 8_000)]);
        assert_eq!(times[1], vec![(5_000, 9_100)]);
    }

    #[test]
    fn requests_complete_in_their_wait_and_the_gap_spaces_eager_messages() {
        let net = NetworkModel { gap: 300, ..net() };
        // Rank 0: two Isends of 100 bytes to rank 1, then a Wait on both. Rank 1: two
        // Irecvs and a Wait on both.
        let (times, _) = run(
            &net,
            vec![
                vec![
                    call(0, send(1, 100, false)),
                    call(0, send(2, 100, false)),
                    call(
                        0,
                        Step::Wait {
                            sends: vec![1, 2],
                            recvs: vec![],
                        },
                    ),
                ],
                vec![
                    call(0, recv(1, false)),
                    call(0, recv(2, false)),
                    call(
                        0,
                        Step::Wait {
                            sends: vec![],
                            recvs: vec![1, 2],
                        },
                    ),
                ],
            ],
        );
        // Isend 1 at 0: ends 100, injected 100 (leaves the NIC busy until 400). Isend 2 at
        // 100: ends 200, injected at 400, done at 500, arrives 1,500. The send Wait starts
        // at 200 and ends at 500 + o.
        assert_eq!(times[0], vec![(0, 100), (100, 200), (200, 600)]);
        // The receive Wait starts at 200 and ends at the second arrival plus o.
        assert_eq!(times[1], vec![(0, 100), (100, 200), (200, 1_600)]);
    }

    /// A program of fixed calls that records the messages the replay forgot.
    struct Forgetful {
        queues: Vec<VecDeque<Call>>,
        times: Vec<Vec<(Time, Time)>>,
        forgotten: Vec<u64>,
    }

    impl Program for Forgetful {
        fn next(&mut self, rank: usize) -> Result<Option<Call>> {
            Ok(self.queues[rank].pop_front())
        }

        fn ended(&mut self, rank: usize, start: Time, end: Time, _: bool) -> Result<()> {
            self.times[rank].push((start, end));
            Ok(())
        }

        fn forget(&mut self, message: u64) {
            self.forgotten.push(message);
        }
    }

    /// Two ranks swapping `rounds` messages each way by Isend, Irecv and Wait, the messages
    /// of round `i` named `first + 2i` (from rank 0) and `first + 2i + 1`.
    fn exchanges(first: u64, rounds: u64) -> Forgetful {
        let round = |r: u64, i: u64| {
            let (out, back) = (first + 2 * i + r, first + 2 * i + 1 - r);
            vec![
                call(10, send(out, 100 + 900 * r, false)),
                call(0, recv(back, false)),
                call(
                    5,
                    Step::Wait {
                        sends: vec![out],
                        recvs: vec![back],
                    },
                ),
            ]
        };
        let queues = (0..2)
            .map(|r| (0..rounds).flat_map(|i| round(r, i)).collect())
            .collect();
        Forgetful {
            queues,
            times: vec![Vec::new(); 2],
            forgotten: Vec::new(),
        }
    }

    #[test]
    fn a_message_is_forgotten_once_both_halves_ended_and_any_key_replays_alike() {
        let mut small = exchanges(1, 3);
        replay(&net(), &[0, 0], &mut small).unwrap();
        // Each message once, when the later of its two Waits ended.
        let mut forgotten = small.forgotten.clone();
        forgotten.sort_unstable();
        assert_eq!(forgotten, (1..=6).collect::<Vec<_>>());
        assert_eq!(small.times[0].len(), 9);
        // Keys past the table's (kept in its map) give the same times.
        let mut large = exchanges(DENSE_KEYS, 3);
        replay(&net(), &[0, 0], &mut large).unwrap();
        assert_eq!(large.times, small.times);
        let mut forgotten = large.forgotten.clone();
        forgotten.sort_unstable();
        assert_eq!(forgotten, (DENSE_KEYS..DENSE_KEYS + 6).collect::<Vec<_>>());
    }

    #[test]
    fn a_collective_ends_for_everyone_after_its_last_member() {
        let allreduce = |instance, position| Step::Collective {
            instance,
            kind: OpKind::Allreduce,
            members: 4,
            position: Some(position),
            send_bytes: 8,
            recv_bytes: 8,
        };
        let programs = (0..4)
            .map(|r| vec![call(1_000 * r, allreduce(9, r as u32))])
            .collect();
        let (times, _) = run(&net(), programs);
        // Last entry at 3,000; 2 rounds of L + 2o + 8.
        let end = 3_000 + 2 * (1_000 + 200 + 8);
        for (r, t) in times.iter().enumerate() {
            assert_eq!(t, &vec![(1_000 * r as Time, end)]);
        }
    }

    #[test]
    fn an_alltoalls_members_leave_by_their_rounds_unless_their_places_are_unknown() {
        let alltoall = |position| Step::Collective {
            instance: 1,
            kind: OpKind::Alltoall,
            members: 3,
            position,
            send_bytes: 30,
            recv_bytes: 30,
        };
        let (h, b) = (1_000 + 200 + 10, 1_000 + 10);
        // Members 0 and 1 enter at 0, member 2 at 5,000: s = 3·2/2 mod 3 = 0, so member 2
        // leaves 2 rounds after entering, the others one L + T(10) sooner.
        let programs = |places: [Option<u32>; 3]| {
            [0, 0, 5_000]
                .into_iter()
                .zip(places)
                .map(|(burst, at)| vec![call(burst, alltoall(at))])
                .collect()
        };
        let (times, _) = run(&net(), programs([Some(0), Some(1), Some(2)]));
        let end = 5_000 + 2 * h;
        assert_eq!(
            times,
            vec![vec![(0, end - b)], vec![(0, end - b)], vec![(5_000, end)]]
        );
        // A place taken twice or unknown: everyone leaves with the last.
        for places in [[Some(0), Some(0), Some(2)], [Some(0), None, Some(2)]] {
            let (times, _) = run(&net(), programs(places));
            assert_eq!(
                times,
                vec![vec![(0, end)], vec![(0, end)], vec![(5_000, end)]]
            );
        }
    }

    #[test]
    fn a_receive_whose_send_never_comes_keeps_its_duration() {
        let (times, unresolved) = run(
            &net(),
            vec![vec![call(10, recv(42, true)), call(5, Step::Local)]],
        );
        assert_eq!(unresolved, 1);
        assert_eq!(times[0], vec![(10, 17), (22, 29)]);
    }

    #[test]
    fn the_cpu_factor_scales_computation_only() {
        let fast = NetworkModel { cpu: 2.0, ..net() };
        let program = || vec![vec![call(1_000, Step::Local), call(3_000, Step::Local)]];
        assert_eq!(
            run(&net(), program()).0[0],
            vec![(1_000, 1_007), (4_007, 4_014)]
        );
        assert_eq!(run(&fast, program()).0[0], vec![(500, 507), (2_007, 2_014)]);
    }
}

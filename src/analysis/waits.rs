//! Wait states: how long each MPI call waited because a partner was late, by Scalasca's
//! definitions (Geimer, Wolf, Wylie et al., "The Scalasca performance toolset architecture";
//! its wait-state patterns).
//!
//! Every wait belongs to one operation and never exceeds its duration, so the waits of a rank
//! never add up to more than its time in MPI:
//!
//! - **Late Sender** ([`WaitKind::LateSender`]): a blocking receive (`MPI_Recv`, the receive
//!   half of `MPI_Sendrecv`), or the Wait/Waitall/Waitany/Waitsome that completes an
//!   `MPI_Irecv`, waits `min(send start, its end) - its start` when positive; a completion of
//!   several receives takes the largest. Test calls never wait (they return at once). A
//!   receive that ended before its send started (clocks out of step) waited for nothing the
//!   trace can show: it is counted in [`WaitStates::inconsistent`] instead.
//! - **Late Receiver** ([`WaitKind::LateReceiver`]): a blocking `MPI_Send`, `MPI_Ssend` or
//!   `MPI_Rsend` that ends after its receive was posted waits
//!   `min(receive start, its end) - its start` when positive; one that ended before the
//!   receive was posted was eager and did not wait. (`MPI_Bsend` returns once buffered.)
//! - **Wait at Barrier** / **Wait at N x N** (Allreduce, Allgather(v), Alltoall(v/w),
//!   Reduce_scatter(_block)): each member waits `min(last member's start, its end) - its
//!   start`.
//! - **Late Broadcast** (Bcast, Scatter(v)): a non-root waits `min(root's start, its end) -
//!   its start`. **Early Reduce** (Reduce, Gather(v)): the root waits `min(first non-root's
//!   start, its end) - its start`.
//! - Non-blocking collectives: the Wait that completes a member's request gets the N x N rule
//!   over the instance (the last member's start of the non-blocking call), or the barrier
//!   rule for `MPI_Ibarrier`.
//!
//! Scan and Exscan have no wait state here (Scalasca defines none for them), nor do
//! collectives whose members are not all in the trace.
//!
//! ```
//! use mtfdb::analysis::waits::{late_receiver, late_sender, wait_for_last};
//! // A receive posted at 100 that ends at 900, for a send that started at 600: 500 ns late.
//! assert_eq!(late_sender(100, 900, 600), 500);
//! // A send that started before the receive was posted: no wait.
//! assert_eq!(late_sender(100, 900, 50), 0);
//! // A blocking send over [100, 700] whose receive was posted at 400 waited 300 ns.
//! assert_eq!(late_receiver(100, 700, 400), 300);
//! // ... and did not wait when it ended before the receive was posted (eager).
//! assert_eq!(late_receiver(100, 300, 400), 0);
//! // A member of an Allreduce over [100, 900] whose last member entered at 750.
//! assert_eq!(wait_for_last(100, 900, 750), 650);
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

use super::clock::{self, ClockCorrection, ClockMap};
use super::op_times::OpTimes;
use crate::error::Result;
use crate::hash::FxHashMap;
use crate::model::{CollectiveInstance, OpId, OpKind, Rank, Time};
use crate::store::scan::{progress_stage, Order, Projection, ScanFilter, ScanRequest};
use crate::Trace;

/// Why an operation waited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum WaitKind {
    /// A receive (or the completion of a non-blocking one) waited for a send that started
    /// later.
    LateSender,
    /// A blocking send waited for its receive to be posted.
    LateReceiver,
    /// A barrier member waited for the last member to enter.
    WaitAtBarrier,
    /// A member of an all-to-all style collective waited for the last member to enter.
    WaitAtNxN,
    /// A non-root waited for the root of a broadcast or scatter.
    LateBroadcast,
    /// The root of a reduce or gather waited for the first non-root.
    EarlyReduce,
}

impl WaitKind {
    /// Every kind, in the order reports list them.
    pub const ALL: [WaitKind; 6] = [
        WaitKind::LateSender,
        WaitKind::LateReceiver,
        WaitKind::WaitAtBarrier,
        WaitKind::WaitAtNxN,
        WaitKind::LateBroadcast,
        WaitKind::EarlyReduce,
    ];

    /// The kind's position in [`WaitKind::ALL`] (the order of totals and report columns).
    ///
    /// ```
    /// use mtfdb::analysis::waits::WaitKind;
    /// for (i, kind) in WaitKind::ALL.into_iter().enumerate() {
    ///     assert_eq!(kind.index(), i);
    /// }
    /// ```
    pub fn index(self) -> usize {
        self as usize
    }

    /// The kind's name as reports print it (`late sender`).
    ///
    /// ```
    /// use mtfdb::analysis::waits::WaitKind;
    /// assert_eq!(WaitKind::WaitAtNxN.name(), "wait at NxN");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            WaitKind::LateSender => "late sender",
            WaitKind::LateReceiver => "late receiver",
            WaitKind::WaitAtBarrier => "wait at barrier",
            WaitKind::WaitAtNxN => "wait at NxN",
            WaitKind::LateBroadcast => "late broadcast",
            WaitKind::EarlyReduce => "early reduce",
        }
    }
}

impl fmt::Display for WaitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One operation's wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wait {
    /// The operation that waited (the receive, send, collective call, or the Wait that
    /// completed a non-blocking one).
    pub op: OpId,
    /// Its rank.
    pub rank: Rank,
    /// Why it waited.
    pub kind: WaitKind,
    /// When the operation started (ns): it waited over `[start, start + time]`, until the
    /// partner released it.
    pub start: Time,
    /// How long (ns), at least 1.
    pub time: Time,
    /// The rank it waited for: the late sender or receiver, the last member to enter, the
    /// root, the first non-root.
    pub partner: Rank,
}

/// `min(send_start, end) - start` when positive: what a receive (or the completion of one)
/// over `[start, end]` waited for a send that started at `send_start`.
pub fn late_sender(start: Time, end: Time, send_start: Time) -> Time {
    wait_for_last(start, end, send_start)
}

/// A receive's late-sender wait, or `None` when the waiting call over `[start, end]` (the
/// receive, or the Wait completing an Irecv) returned before its send began: the clocks
/// disagree, and no wait can be told from them ([`WaitStates::inconsistent`]).
pub(crate) fn receive_wait(start: Time, end: Time, send_start: Time) -> Option<Time> {
    (send_start < end).then(|| late_sender(start, end, send_start))
}

/// What a blocking send over `[start, end]` waited for its receive, posted at `recv_start`:
/// `min(recv_start, end) - start` when the send ended after the receive was posted, else 0
/// (the send was eager).
pub fn late_receiver(start: Time, end: Time, recv_start: Time) -> Time {
    if end > recv_start {
        recv_start.min(end).saturating_sub(start)
    } else {
        0
    }
}

/// `min(awaited, end) - start` when positive: what a call over `[start, end]` waited for a
/// partner that started at `awaited` (the last member of a barrier or N x N collective, the
/// root of a broadcast, the first non-root of a reduce).
pub fn wait_for_last(start: Time, end: Time, awaited: Time) -> Time {
    awaited.min(end).saturating_sub(start)
}

/// Every wait of a trace, in operation order, with totals.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitStates {
    /// The waits, one per waiting operation at most, sorted by operation id.
    pub waits: Vec<Wait>,
    /// Messages whose receive (or the Wait completing it) ended before the send started, as
    /// skewed clocks record them: no wait is counted for them.
    pub inconsistent: u64,
}

impl WaitStates {
    /// The total waiting time (ns) of each kind, in [`WaitKind::ALL`] order.
    pub fn totals(&self) -> [Time; 6] {
        let mut out = [0; 6];
        for w in &self.waits {
            out[w.kind.index()] += w.time;
        }
        out
    }

    /// The total waiting time (ns) per rank and kind, for ranks `0..ranks`.
    pub fn per_rank(&self, ranks: u32) -> Vec<[Time; 6]> {
        let mut out = vec![[0; 6]; ranks as usize];
        for w in &self.waits {
            if let Some(row) = out.get_mut(w.rank as usize) {
                row[w.kind.index()] += w.time;
            }
        }
        out
    }

    /// The wait of operation `op`, if it waited.
    pub fn of(&self, op: OpId) -> Option<&Wait> {
        self.waits
            .binary_search_by_key(&op, |w| w.op)
            .ok()
            .map(|i| &self.waits[i])
    }
}

impl crate::store::StoredResult for WaitStates {
    const SCHEMA_VERSION: u32 = 1;
}

/// The key the wait states are stored under.
pub const WAITS_KEY: &str = "waits/scalasca";

/// The wait states of `trace`, computed once and stored with it (`refresh`: computed again
/// and stored anew).
pub fn stored_wait_states(trace: &Trace, refresh: bool) -> Result<WaitStates> {
    trace.stored_result(WAITS_KEY, refresh, || wait_states(trace))
}

/// The key the wait states under `correction` are stored under ([`WAITS_KEY`] for the
/// stored times).
pub fn waits_key(correction: ClockCorrection) -> String {
    match correction {
        ClockCorrection::None => WAITS_KEY.to_string(),
        c => format!("{WAITS_KEY}/clock={}", c.name()),
    }
}

/// The wait states of `trace` with its times corrected by `correction` (see
/// [`crate::analysis::clock`]), computed once and stored with it; `None` is
/// [`stored_wait_states`].
pub fn stored_wait_states_with(
    trace: &Trace,
    correction: ClockCorrection,
    refresh: bool,
) -> Result<WaitStates> {
    if correction == ClockCorrection::None {
        return stored_wait_states(trace, refresh);
    }
    trace.stored_result(&waits_key(correction), refresh, || {
        let map = clock::stored_map(trace, correction, refresh)?;
        wait_states_with(trace, &map)
    })
}

/// The wait states of `trace` with its times corrected by `map`.
pub fn wait_states_with(trace: &Trace, map: &ClockMap) -> Result<WaitStates> {
    progress_stage("wait states");
    let instances = trace.collective_instances()?;
    wait_states_in(trace, &OpTimes::corrected(trace, map)?, &instances)
}

/// What the analysis needs of one operation's call: `Other` for any call that neither
/// completes a receive nor can wait as a sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// `MPI_Irecv`: its wait is the Wait that completes it.
    Irecv,
    /// A Wait variant (Test variants return at once and never wait).
    Completion,
    /// A blocking send that can wait for its receiver (`MPI_Send`, `Ssend`, `Rsend`).
    BlockingSend,
    /// Any other call.
    Other,
}

impl Role {
    fn of(kind: Option<OpKind>) -> Role {
        match kind {
            Some(OpKind::Irecv) => Role::Irecv,
            Some(OpKind::Wait | OpKind::Waitall | OpKind::Waitany | OpKind::Waitsome) => {
                Role::Completion
            }
            Some(OpKind::Send | OpKind::Ssend | OpKind::Rsend) => Role::BlockingSend,
            _ => Role::Other,
        }
    }
}

/// What the analysis needs of one operation.
#[derive(Debug, Clone, Copy)]
struct Call {
    start: Time,
    end: Time,
    role: Role,
    rank: Rank,
}

/// Operations' calls by id, from the operations' times read once (corrected when they were
/// read through a clock map).
struct Calls<'c, 't>(&'c OpTimes<'t>);

impl Calls<'_, '_> {
    fn get(&self, op: OpId) -> Option<Call> {
        self.0.get(op).map(|t| Call {
            start: t.start,
            end: t.end,
            role: Role::of(t.kind),
            rank: t.rank,
        })
    }
}

/// Collects waits, keeping the largest per operation (a Waitall over several late receives).
#[derive(Default)]
struct Found {
    by_op: FxHashMap<OpId, Wait>,
    inconsistent: u64,
}

impl Found {
    fn add(&mut self, op: OpId, call: Call, kind: WaitKind, time: Time, partner: Rank) {
        if time == 0 {
            return;
        }
        let wait = Wait {
            op,
            rank: call.rank,
            kind,
            start: call.start,
            time,
            partner,
        };
        self.by_op
            .entry(op)
            .and_modify(|w| {
                if time > w.time {
                    *w = wait;
                }
            })
            .or_insert(wait);
    }
}

/// The wait states of every operation of `trace`.
///
/// ```no_run
/// # fn main() -> mtfdb::Result<()> {
/// use mtfdb::analysis::waits::{wait_states, WaitKind};
/// let db = mtfdb::Database::open("mtfdb.db")?;
/// let trace = db.trace("stencil")?;
/// let waits = wait_states(&trace)?;
/// let late = waits.totals()[0];
/// println!("{} ns of {}", late, WaitKind::LateSender);
/// # Ok(())
/// # }
/// ```
pub fn wait_states(trace: &Trace) -> Result<WaitStates> {
    progress_stage("wait states");
    let instances = trace.collective_instances()?;
    wait_states_in(trace, &OpTimes::new(trace)?, &instances)
}

/// [`wait_states`] reading operations through `times` (corrected when it reads through a
/// clock map) and the trace's collective `instances`, which a caller shares with what it does
/// next (the critical path reads the same chunks and instances).
pub(crate) fn wait_states_in(
    trace: &Trace,
    times: &OpTimes<'_>,
    instances: &[CollectiveInstance],
) -> Result<WaitStates> {
    use crate::store::MessageField::{RecvOp, SendOp};
    let calls = Calls(times);
    let completion = Completions::read(trace)?;
    let mut found = Found::default();
    let scan = trace.scan(&ScanRequest {
        projection: Projection::Messages(&[SendOp, RecvOp]),
        filter: ScanFilter::default(),
        order: Order::Id,
    })?;
    // In message order, so that of two equal waits of one operation the first is kept.
    for batch in scan.iter() {
        trace.check_cancel()?;
        let batch = batch?;
        let messages = batch.messages().expect("a message scan");
        for row in batch.rows() {
            let (send_op, recv_op) = (messages.send_op(row), messages.recv_op(row));
            let (Some(send), Some(recv)) = (calls.get(send_op), calls.get(recv_op)) else {
                continue;
            };
            // Late sender: the blocking receive itself, or the Wait completing the Irecv.
            let waiting = match recv.role {
                Role::Irecv => match completion.of(recv_op) {
                    Some(w) => calls
                        .get(w)
                        .filter(|c| c.role == Role::Completion)
                        .map(|c| (w, c)),
                    None => None,
                },
                _ => Some((recv_op, recv)),
            };
            if let Some((op, call)) = waiting {
                match receive_wait(call.start, call.end, send.start) {
                    Some(time) => found.add(op, call, WaitKind::LateSender, time, send.rank),
                    None => found.inconsistent += 1,
                }
            }
            // Late receiver: blocking sends only.
            if send.role == Role::BlockingSend {
                let time = late_receiver(send.start, send.end, recv.start);
                found.add(send_op, send, WaitKind::LateReceiver, time, recv.rank);
            }
        }
    }
    for instance in instances {
        trace.check_cancel()?;
        let mut members = Vec::with_capacity(instance.ops.len());
        for &op in &instance.ops {
            match calls.get(op) {
                Some(call) => members.push((op, call)),
                None => break,
            }
        }
        if members.len() < instance.ops.len() {
            continue;
        }
        if instance.kind.blocking_collective() == Some(instance.kind) {
            blocking_collective_waits(instance.kind, instance.root, &members, &mut found);
        } else {
            // Non-blocking: the Wait completing each member's request waits for the last
            // member to have started the call.
            let Some(&(_, last)) = members.iter().max_by_key(|(_, c)| c.start) else {
                continue;
            };
            let kind = if instance.kind == OpKind::Ibarrier {
                WaitKind::WaitAtBarrier
            } else {
                WaitKind::WaitAtNxN
            };
            for (op, _) in &members {
                let Some(w) = completion.of(*op) else {
                    continue;
                };
                if let Some(call) = calls.get(w).filter(|c| c.role == Role::Completion) {
                    let time = wait_for_last(call.start, call.end, last.start);
                    found.add(w, call, kind, time, last.rank);
                }
            }
        }
    }
    let mut waits: Vec<Wait> = found.by_op.into_values().collect();
    waits.sort_unstable_by_key(|w| w.op);
    Ok(WaitStates {
        waits,
        inconsistent: found.inconsistent,
    })
}

/// The Wait (or Test) that completed each non-blocking call: the request links, sorted by
/// the call (16 bytes a link, searched by bisection).
pub(crate) struct Completions(Vec<(OpId, OpId)>);

impl Completions {
    /// The trace's request links.
    pub(crate) fn read(trace: &Trace) -> Result<Completions> {
        let mut links: Vec<(OpId, OpId)> = trace
            .request_links()?
            .into_iter()
            .map(|l| (l.request_op, l.completion_op))
            .collect();
        links.sort_unstable();
        Ok(Completions(links))
    }

    /// The operation that completed `request_op`'s request, if any.
    pub(crate) fn of(&self, request_op: OpId) -> Option<OpId> {
        let i = self.0.partition_point(|&(op, _)| op < request_op);
        self.0
            .get(i)
            .filter(|(op, _)| *op == request_op)
            .map(|l| l.1)
    }
}

/// The waits of the members of one blocking collective instance (see the module's rules).
fn blocking_collective_waits(
    kind: OpKind,
    root: Option<Rank>,
    members: &[(OpId, Call)],
    found: &mut Found,
) {
    let Some(&(_, last)) = members.iter().max_by_key(|(_, c)| c.start) else {
        return;
    };
    use OpKind::*;
    match kind {
        Barrier | Allreduce | Allgather | Allgatherv | Alltoall | Alltoallv | Alltoallw
        | ReduceScatter | ReduceScatterBlock => {
            let wait_kind = if kind == Barrier {
                WaitKind::WaitAtBarrier
            } else {
                WaitKind::WaitAtNxN
            };
            for &(op, call) in members {
                let time = wait_for_last(call.start, call.end, last.start);
                found.add(op, call, wait_kind, time, last.rank);
            }
        }
        Bcast | Scatter | Scatterv => {
            let Some(&(_, root)) = members.iter().find(|(_, c)| Some(c.rank) == root) else {
                return;
            };
            for &(op, call) in members.iter().filter(|(_, c)| c.rank != root.rank) {
                let time = wait_for_last(call.start, call.end, root.start);
                found.add(op, call, WaitKind::LateBroadcast, time, root.rank);
            }
        }
        Reduce | Gather | Gatherv => {
            let Some(&(root_op, root_call)) = members.iter().find(|(_, c)| Some(c.rank) == root)
            else {
                return;
            };
            let first = members
                .iter()
                .filter(|(_, c)| c.rank != root_call.rank)
                .min_by_key(|(_, c)| c.start);
            if let Some(&(_, first)) = first {
                let time = wait_for_last(root_call.start, root_call.end, first.start);
                found.add(root_op, root_call, WaitKind::EarlyReduce, time, first.rank);
            }
        }
        _ => {}
    }
}

//! Anomalies in words: the one sentence `mtfdb info` prints for an anomaly and `SELECT
//! ANOMALIES` shows in its `message` column.

use crate::model::{Anomaly, Rule};
use crate::Trace;

/// Nanoseconds as seconds with microsecond precision.
fn seconds(ns: u64) -> String {
    format!("{:.6} s", ns as f64 / 1e9)
}

impl Trace {
    /// One anomaly in words, with the trace's names (operations by id, ranks, communicators
    /// by id, routines and calls by name).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = mtfdb::Database::open(dir.path().join("db")).unwrap();
    /// # db.import(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/traces/stencil2d-16.mtf"), Some("paper")).unwrap();
    /// let trace = db.trace("paper")?;
    /// let a = mtfdb::model::Anomaly::MissingFinalize { rank: 3 };
    /// assert_eq!(trace.anomaly_text(&a), "rank 3 never called MPI_Finalize");
    /// # Ok::<(), mtfdb::Error>(())
    /// ```
    pub fn anomaly_text(&self, a: &Anomaly) -> String {
        match a {
        Anomaly::UnmatchedSend { op, rank, dest, comm, tag } => {
            format!("operation {op}: send from rank {rank} to rank {dest} (communicator {comm}, tag {tag}) was never received")
        }
        Anomaly::UnmatchedReceive { op, rank, source, comm, tag } => {
            format!("operation {op}: receive by rank {rank} from rank {source} (communicator {comm}, tag {tag}) matched no send")
        }
        Anomaly::RequestNeverCompleted { op, rank, request } => {
            format!("operation {op}: request {request} of rank {rank} was never completed by a Wait or Test")
        }
        Anomaly::UnknownRequest { op, rank, request } => {
            format!("operation {op}: rank {rank} completed request {request}, which it never created")
        }
        Anomaly::IncompleteCollective { kind, comm, present, expected } => format!(
            "{} on communicator {comm}: only {present} of {expected} members took part",
            self.kind_name(*kind)
        ),
        Anomaly::WaitBeforeRequest { op, request_op, rank } => {
            format!("operation {op}: rank {rank} waited before operation {request_op} created the request")
        }
        Anomaly::UnresolvedWildcard { op, rank } => {
            format!("operation {op}: wildcard receive by rank {rank} has no recorded source or tag; it cannot be matched")
        }
        Anomaly::RootMismatch { op, rank, kind, comm } => format!(
            "operation {op}: rank {rank} named a different root for {} on communicator {comm} than the other members",
            self.kind_name(*kind)
        ),
        Anomaly::MissingFinalize { rank } => format!("rank {rank} never called MPI_Finalize"),
        Anomaly::UnclosedRoutine { rank, routine } => format!(
            "rank {rank}: routine {} was entered but never left (closed at the rank's last event)",
            self.string(*routine).unwrap_or("?")
        ),
        Anomaly::CrossedLeave { rank, thread, time, routine, innermost } => format!(
            "rank {rank} thread {thread} at {}: left {} while {} was still open (closed there)",
            seconds(*time),
            self.string(*routine).unwrap_or("?"),
            self.string(*innermost).unwrap_or("?")
        ),
        Anomaly::LeaveWithoutEnter { rank, thread, time, routine } => format!(
            "rank {rank} thread {thread} at {}: left {}, which was never entered",
            seconds(*time),
            self.string(*routine).unwrap_or("?")
        ),
        Anomaly::CallWithoutRecords { op, rank, name } => format!(
            "operation {op}: rank {rank} called {} but the trace has no MPI records for it (no communicator; not matched)",
            self.string(*name).unwrap_or("?")
        ),
        Anomaly::LengthMismatch { send_op, recv_op, sent, received } => format!(
            "operations {send_op} -> {recv_op}: the send recorded {sent} bytes, the receive {received}"
        ),
        Anomaly::DatatypeMismatch { send_op, recv_op, sent, received } => format!(
            "operations {send_op} -> {recv_op}: the send's datatype is {}, the receive's {}",
            self.string(*sent).unwrap_or("?"),
            self.string(*received).unwrap_or("?")
        ),
        Anomaly::CallBeforeInit { op, rank, calls } => format!(
            "operation {op}: rank {rank} made {calls} MPI call(s) before MPI_Init, this the first"
        ),
        Anomaly::CallAfterFinalize { op, rank, calls } => format!(
            "operation {op}: rank {rank} made {calls} MPI call(s) after MPI_Finalize, this the first"
        ),
        Anomaly::CollectiveSizeMismatch { op, rank, kind, comm, bytes, expected } => format!(
            "operation {op}: rank {rank} sent {bytes} bytes in {} on communicator {comm}, the first member {expected}",
            self.kind_name(*kind)
        ),
        Anomaly::BarrierWithoutOverlap { op, leave_op, comm, gap } => format!(
            "operations {op} and {leave_op}: a barrier on communicator {comm} whose last member entered {gap} ns after its first member left"
        ),
        Anomaly::ValueOverflow { rank, what } => match rank {
            Some(r) => format!("rank {r}: {what}"),
            None => what.clone(),
        },
        Anomaly::SkippedRecord { rank, time, what } => {
            let mut s = String::new();
            if let Some(r) = rank {
                s.push_str(&format!("rank {r} "));
            }
            if let Some(t) = time {
                s.push_str(&format!("at {} ", seconds(*t)));
            }
            if !s.is_empty() {
                s.pop();
                s.push_str(": ");
            }
            s.push_str(what);
            s
        }
        Anomaly::MissingRankData { rank, thread, file, announced, read, cut_at } => {
            let announced = announced.map_or(String::new(), |n| format!(" (the definitions announce {n} records)"));
            match cut_at {
                Some(at) => format!("rank {rank} thread {thread}: {file} is cut short at byte {at}, after {read} whole records{announced}; what followed is not in the trace"),
                None => format!("rank {rank} thread {thread}: {file} is missing{announced}; none of its events are in the trace"),
            }
        }
        Anomaly::PeerDataMissing { op, rank, peer, comm } => format!(
            "operation {op}: rank {rank}'s call on communicator {comm} has no counterpart because the event data of rank {peer} is missing"
        ),
        Anomaly::BrokenRule { rule, rank, thread, time, op, comm, value } => {
            let mut s = String::new();
            if let Some(op) = op {
                s.push_str(&format!("operation {op}: "));
            }
            if let Some(r) = rank {
                s.push_str(&format!("rank {r} "));
                if *thread != 0 {
                    s.push_str(&format!("thread {thread} "));
                }
            }
            if let Some(t) = time {
                s.push_str(&format!("at {} ", seconds(*t)));
            }
            if !s.is_empty() {
                s.pop();
                s.push_str(": ");
            }
            s.push_str(&broken_rule_text(*rule, *comm, value.unwrap_or(0)));
            s
        }
        Anomaly::ReceiveNotRecorded { op, rank, dest, comm, tag } => format!(
            "operation {op}: send from rank {rank} to rank {dest} (communicator {comm}, tag {tag}) matched no receive; rank {dest} made receives whose communicator, source or tag the trace does not record, one of which may have received it"
        ),
        Anomaly::ClockConditionViolated { sender, receiver, messages, worst, time } => format!(
            "rank {sender} -> rank {receiver}: {messages} message(s) received before they were sent (clocks out of step), by up to {worst} ns, the first sent at {}",
            seconds(*time)
        ),
    }
    }
}

/// What a broken rule was and how the import repaired it.
fn broken_rule_text(rule: Rule, comm: Option<u32>, value: u64) -> String {
    let on = comm.map_or_else(String::new, |c| format!(" communicator {c}"));
    match rule {
        Rule::DuplicateDeclaration => format!("id {value} is declared twice; the first declaration is kept"),
        Rule::UnknownProcessor => format!("runs on processor {value}, which is not declared; kept on no processor"),
        Rule::EmptyCommunicator => format!("communicator{on} has no members; dropped"),
        Rule::UnknownMember => format!("communicator{on} lists rank {value}, which is no declared process; dropped from it"),
        Rule::DuplicateMember => format!("communicator{on} lists rank {value} twice; listed once"),
        Rule::UnknownRank => format!("an event of rank {value}, which is no declared process; dropped"),
        Rule::EndBeforeStart => format!("the call ends at {} before it starts; kept ending at its start", seconds(value)),
        Rule::TimeGoesBackwards => format!("the call starts at {}, before the previous event of its location; kept starting at that event", seconds(value)),
        Rule::RoutineTimeGoesBackwards => format!("a routine event at {}, before the previous event of its location; kept at that event", seconds(value)),
        Rule::UnknownCommunicator => format!("the call names communicator {value}, which is not declared; kept on no communicator, never matched"),
        Rule::RankOutsideCommunicator => format!("the call is on communicator {value}, which the rank is not a member of; kept on no communicator, never matched"),
        Rule::MissingCommunicator => "the call names no communicator; never matched".to_string(),
        Rule::MissingDestination => "the send names no destination; never matched".to_string(),
        Rule::MissingSource => "the receive names no source; never matched".to_string(),
        Rule::PeerOutsideCommunicator => format!("peer {value} is not a member of{on}; kept without it, never matched"),
        Rule::UnexpectedRoot => format!("root {value} on a call that has none (Table 3.1, rules 11-12); dropped"),
        Rule::MissingRoot => "the rooted collective names no root".to_string(),
        Rule::RootOutsideCommunicator => format!("root {value} is not a member of{on}; kept without a root"),
        Rule::BytesOnBarrier => format!("the barrier recorded {value} bytes, but carries no data (Table 3.1, rule 8); kept with 0 bytes"),
    }
}

//! The vocabulary of mtfdb's GXL graphs, shared by the writer ([`crate::export::gxl`]) and
//! the reader ([`super`]): node and edge types (the MTF metamodel's classes and
//! associations) and the attribute names of each.
//!
//! A node's type is `<type xlink:href="mtf.gxl#Class"/>`. Nodes, in the order written:
//!
//! | type | id | attributes |
//! |---|---|---|
//! | `Scenario` | `scen` | `description` |
//! | `Trace` | `trace` | `traceName`, `comments`, `untimed` (`true` when the times are only the events' order), `startTime`, `endTime` (ns, when the trace has events) |
//! | `StringTable` | `strings` | `strings`: the trace's names (datatypes, routines, MPI calls of no fixed kind) in id order, a `seq` of `string`s |
//! | `Processor` | `PRCR<id>` | `processorId`, `processorName` |
//! | `Process` | `PRC<rank>` | `rank`, `processName`, `processorId` (if known) |
//! | `ProcessTrace` | `PT<rank>` | `rank` |
//! | `Communicator` | `COMM<id>` | `commId`, `commName`, `members` (a `seq` of world ranks, in communicator-rank order) |
//! | `Location` | `LOC<i>` | `locationName`, `kind`, `group`, `rank`, `thread`, `regions`, `events` |
//! | an operation class | `o<rank>.<thread>.<index>` | `call` (`MPI_Isend`) or `otherCall` (an MPI call of no fixed kind), `rank`, `thread`, `startTime`, `endTime`, `nestingLevel`, and as the call has them `comm`, `dest`, `source`, `sendTag`, `recvTag`, `sendBytes`, `recvBytes`, `dataType`, `root`, `request`, `completes` (a `seq`), `anySource`, `anyTag`, `notCompleted`, `withoutRecords`, `recvCapacity` (`bool`s), `otherFlags` |
//! | `RoutineCall` | `r<rank>.<thread>.<index>` | `routineCallName`, `rank`, `thread`, `nestingLevel`, `startTime`, `endTime` |
//! | `Message` | `m<k>` | `sender`, `receiver`, `comm`, `tag`, `dataSize`, `sendTime`, `recvTime` |
//! | `CollectiveInstance` | `ci<k>` | `call` or `otherCall`, `comm`, `root`, `startTime`, `endTime`, `sendBytes`, `recvBytes` |
//! | `Anomaly` | `a<k>` | `class` (a [`crate::model::Anomaly`] variant), `derived` (found again by matching on import), and the variant's fields by name; an operation field is a `tup` (rank, thread, index); an MPI call field `kind` is `otherKind` for a call of no fixed kind |
//!
//! Operations and routine calls come in time order, each routine call before what it holds;
//! the index in an operation's id is its position among its location's operations, from 0.
//! Edges: `hasTrace` (scenario → trace), `hasProcessTrace` (trace → process trace),
//! `ofProcess` (process trace → process, location → process), `runsOn` (process →
//! processor), `contains` (process trace or routine call → the operation or call directly
//! inside it), `sendOf`/`receiveOf` (message → its send and receive operation), `completes`
//! (Wait/Test → the operation whose request it completed), `member` (collective instance →
//! member operation), and from an anomaly to each operation it names, typed by the field.
//! Edges are the graph for other tools; the reader takes everything from node attributes.

use crate::model::{OpClass, OpKind};

/// The character that starts an escape in a name: XML 1.0 cannot carry most C0 controls,
/// U+FFFE or U+FFFF, not even as character references, so the writer gives each of them
/// (and this character itself) as U+E000, a private-use character XML does carry, followed
/// by the code point in four upper-case hex digits (ESC is `\u{E000}001B`). Tab, line feed
/// and carriage return are character references (`&#x9;`), which XML keeps exactly.
pub(crate) const ESCAPE: char = '\u{E000}';

/// Whether a name's character `c` is written as an [`ESCAPE`] sequence.
pub(crate) fn needs_escape(c: char) -> bool {
    matches!(c, '\0'..='\u{8}' | '\u{B}' | '\u{C}' | '\u{E}'..='\u{1F}' | '\u{FFFE}' | '\u{FFFF}')
        || c == ESCAPE
}

/// A name as the writer escaped it, back to what the trace holds: each [`ESCAPE`] and the
/// four hex digits after it become the character they name. An escape that is not four hex
/// digits naming a character the writer escapes is an error, described in the message.
pub(crate) fn unescape_name(text: &str) -> std::result::Result<String, String> {
    if !text.contains(ESCAPE) {
        return Ok(text.to_string());
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(ESCAPE) {
        out.push_str(&rest[..at]);
        let after = &rest[at + ESCAPE.len_utf8()..];
        let c = after
            .get(..4)
            .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .and_then(char::from_u32)
            .filter(|&c| needs_escape(c))
            .ok_or_else(|| {
                format!(
                    "a U+E000 escape not followed by the four hex digits of a character that needs one (found {:?})",
                    after.chars().take(4).collect::<String>()
                )
            })?;
        out.push(c);
        rest = &after[4..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The prefix of every type's `xlink:href`.
pub(crate) const TYPE_PREFIX: &str = "mtf.gxl#";

/// The metamodel class an operation of `kind` is an instance of (its node's type).
pub(crate) fn operation_class(kind: OpKind) -> &'static str {
    use OpKind::*;
    match kind.blocking_collective() {
        Some(Barrier) => return "Barrier",
        Some(Bcast) => return "Broadcast",
        Some(Gather | Gatherv) => return "Gather",
        Some(Scatter | Scatterv) => return "Scatter",
        Some(Reduce) => return "Reduce",
        Some(Allreduce) => return "Allreduce",
        Some(Allgather | Allgatherv) => return "Allgather",
        Some(Alltoall | Alltoallv | Alltoallw) => return "AllToAll",
        Some(ReduceScatter | ReduceScatterBlock) => return "ReduceScatter",
        Some(Scan | Exscan) => return "Scan",
        _ => {}
    }
    match kind {
        Init | InitThread => "Initialize",
        Finalize => "Finalize",
        Isend | Ibsend | Issend | Irsend => "NonBlockingSend",
        Send | Bsend | Ssend | Rsend => "Send",
        Irecv => "NonBlockingReceive",
        Recv => "Receive",
        Sendrecv | SendrecvReplace => "PointToPointOperation",
        Wait | Waitall | Waitany | Waitsome => "WaitOperation",
        Test | Testall | Testany | Testsome => "TestOperation",
        Probe | Iprobe => "ProbeOperation",
        k if k.class() == OpClass::Communicator => "CommunicatorOperation",
        _ => "MPOperation",
    }
}

/// Whether a node type names an operation.
pub(crate) fn is_operation_class(class: &str) -> bool {
    matches!(
        class,
        "Barrier"
            | "Broadcast"
            | "Gather"
            | "Scatter"
            | "Reduce"
            | "Allreduce"
            | "Allgather"
            | "AllToAll"
            | "ReduceScatter"
            | "Scan"
            | "Initialize"
            | "Finalize"
            | "NonBlockingSend"
            | "Send"
            | "NonBlockingReceive"
            | "Receive"
            | "PointToPointOperation"
            | "WaitOperation"
            | "TestOperation"
            | "ProbeOperation"
            | "CommunicatorOperation"
            | "MPOperation"
    )
}

/// The name of the attribute that carries an MPI call of no fixed kind, for the attribute
/// `key` that carries a fixed one (`call` → `otherCall`, `kind` → `otherKind`).
pub(crate) fn other_key(key: &str) -> String {
    let mut out = String::from("other");
    let mut chars = key.chars();
    if let Some(first) = chars.next() {
        out.extend(first.to_uppercase());
        out.push_str(chars.as_str());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_an_operation_class() {
        for &k in OpKind::ALL {
            assert!(is_operation_class(operation_class(k)), "{k:?}");
        }
        assert!(is_operation_class(operation_class(OpKind::Other(3))));
        assert_eq!(operation_class(OpKind::Ibcast), "Broadcast");
        assert_eq!(operation_class(OpKind::Isend), "NonBlockingSend");
        assert_eq!(other_key("call"), "otherCall");
        assert_eq!(other_key("kind"), "otherKind");
    }
}

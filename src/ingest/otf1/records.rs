//! OTF v1 event records, one per line of an events stream. A line that starts with a
//! hexadecimal digit sets the time of the records after it; `*` and a process token sets
//! their process; the other lines are records:
//!
//! | short | long | record |
//! |---|---|---|
//! | `E f` | `ENTER` | enter function `f` |
//! | `L [f]` | `LEAVE` | leave function `f` (0 or none: the innermost one) |
//! | `S p L len T tag C group` | `SEND … LEN … TAG … COMM` | message sent to process `p` |
//! | `R p L len T tag C group` | `RECEIVE …` | message received from process `p` |
//! | `COP c C group RT root S sent R recvd D dur` | `COLLOP …` | one process's part of a collective |
//! | `COPB c H id C group RT root S sent R recvd` | `COLLOPBEGIN …` | its begin… |
//! | `COPE id` | `COLLOPEND` | …and end |
//! | `T`, `U`, `G`, `M` | `TRMAPUT`, … | one-sided (RMA) put, remote end, get, end |
//!
//! Counters, comments, file operations, process begin and end, no-ops, key-value lists and
//! inline snapshots are records mtfdb does not use. Any other line is a record of an unknown
//! kind, which readers skip.

use super::syntax::{Cursor, Parsed};

/// One line of an events stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Record {
    /// The time (in clock ticks) of the records that follow.
    Time(u64),
    /// The process of the records that follow.
    Process(u32),
    Enter {
        function: u32,
    },
    /// Leaves `function`, or the innermost function when 0.
    Leave {
        function: u32,
    },
    Send {
        receiver: u32,
        group: u32,
        tag: u32,
        bytes: u32,
    },
    Receive {
        sender: u32,
        group: u32,
        tag: u32,
        bytes: u32,
    },
    /// `COLLOP` (with its duration) or `COLLOPBEGIN` (with its matching id).
    Collective {
        collective: u32,
        group: u32,
        /// The root's process token, 0 for none.
        root: u32,
        sent: u64,
        received: u64,
        duration: Option<u64>,
        matching: Option<u64>,
    },
    CollectiveEnd {
        matching: u64,
    },
    /// A one-sided (RMA) record, named.
    Rma(&'static str),
    /// A record mtfdb does not use.
    Unused,
    /// A record of no kind the format defines.
    Unknown,
    /// An empty line.
    Empty,
}

const SCL: &[&[u8]] = &[b"X", b"SCL", b"S"];

/// Parses one line of an events stream.
pub(crate) fn parse(line: &[u8]) -> Parsed<Record> {
    let mut c = Cursor::new(line);
    let Some(first) = c.peek() else {
        return Ok(Record::Empty);
    };
    if first.is_ascii_digit() || (b'a'..=b'f').contains(&first) {
        return Ok(Record::Time(c.hex("time")?));
    }
    if c.prefix(b"*") {
        return Ok(Record::Process(c.hex32("process")?));
    }
    if c.keyword(&[b"E", b"ENTER"]) {
        return Ok(Record::Enter {
            function: c.hex32("function")?,
        });
    }
    if c.keyword(&[b"L", b"LEAVE"]) {
        let function = match c.peek() {
            Some(b'0'..=b'9' | b'a'..=b'f') => c.hex32("function")?,
            _ => 0,
        };
        return Ok(Record::Leave { function });
    }
    if c.keyword(&[b"S", b"SEND"]) {
        let receiver = c.hex32("receiver")?;
        let (bytes, tag, group) = envelope(&mut c)?;
        return Ok(Record::Send {
            receiver,
            group,
            tag,
            bytes,
        });
    }
    if c.keyword(&[b"R", b"RECEIVE"]) {
        let sender = c.hex32("sender")?;
        let (bytes, tag, group) = envelope(&mut c)?;
        return Ok(Record::Receive {
            sender,
            group,
            tag,
            bytes,
        });
    }
    if c.keyword(&[b"COP", b"COLLOP"]) {
        let collective = c.hex32("collective operation")?;
        let group = c.field32(&[b"C", b"COMM"], "process group")?;
        let root = c.field32(&[b"RT", b"ROOT"], "root process")?;
        let sent = c.field32(&[b"S", b"SENT"], "bytes sent")?;
        let received = c.field32(&[b"R", b"RECVD"], "bytes received")?;
        let duration = c.field64(&[b"D", b"DUR"], "duration")?;
        return Ok(Record::Collective {
            collective,
            group,
            root,
            sent: sent.into(),
            received: received.into(),
            duration: Some(duration),
            matching: None,
        });
    }
    if c.keyword(&[b"COPB", b"COLLOPBEGIN"]) {
        let collective = c.hex32("collective operation")?;
        let matching = c.field64(&[b"H", b"HANDLEID"], "matching id")?;
        let group = c.field32(&[b"C", b"COMM"], "process group")?;
        let root = c.field32(&[b"RT", b"ROOT"], "root process")?;
        let sent = c.field64(&[b"S", b"SENT"], "bytes sent")?;
        let received = c.field64(&[b"R", b"RECVD"], "bytes received")?;
        return Ok(Record::Collective {
            collective,
            group,
            root,
            sent,
            received,
            duration: None,
            matching: Some(matching),
        });
    }
    if c.keyword(&[b"COPE", b"COLLOPEND"]) {
        return Ok(Record::CollectiveEnd {
            matching: c.hex("matching id")?,
        });
    }
    for (keywords, name) in [
        (&[b"T".as_slice(), b"TRMAPUT"], "RMA put"),
        (&[b"U".as_slice(), b"URMAPUTRE"], "RMA put remote end"),
        (&[b"G".as_slice(), b"GRMAGET"], "RMA get"),
        (&[b"M".as_slice(), b"MRMAEND"], "RMA end"),
    ] {
        if c.keyword(keywords) {
            return Ok(Record::Rma(name));
        }
    }
    let unused: &[&[u8]] = &[
        b"#",
        b"#EVTCOMMENT",
        b"K",
        b"KEY",
        b"N",
        b"NOOP",
        b"CNT",
        b"COUNTER",
        b"PB",
        b"PROCESSBEGIN",
        b"PE",
        b"PROCESSEND",
        b"F",
        b"FILEOP",
        b"FA",
        b"FILEOPBEGINNEW",
        b"FF",
        b"FILEOPENDNEW",
        b"FB",
        b"FILEOPBEGIN",
        b"FE",
        b"FILEOPEND",
    ];
    // Inline snapshot records all start with the snapshot prefix `T`.
    if c.keyword(unused) || c.prefix(b"T") {
        return Ok(Record::Unused);
    }
    Ok(Record::Unknown)
}

/// The `L len T tag C group [X scl]` part of a message record.
fn envelope(c: &mut Cursor<'_>) -> Parsed<(u32, u32, u32)> {
    let bytes = c.field32(&[b"L", b"LEN"], "message length")?;
    let tag = c.field32(&[b"T", b"TAG"], "message tag")?;
    let group = c.field32(&[b"C", b"COMM"], "process group")?;
    if !c.at_end() && c.keyword(SCL) {
        c.hex32("source code location")?;
    }
    Ok((bytes, tag, group))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vampirtrace_records_in_short_and_long_form() {
        assert_eq!(parse(b"1dbb055e").unwrap(), Record::Time(0x1dbb055e));
        assert_eq!(parse(b"*100001").unwrap(), Record::Process(0x100001));
        assert_eq!(parse(b"E13c").unwrap(), Record::Enter { function: 0x13c });
        assert_eq!(parse(b"L").unwrap(), Record::Leave { function: 0 });
        assert_eq!(
            parse(b"LEAVE 1f SCL 3").unwrap(),
            Record::Leave { function: 0x1f }
        );
        let send = Record::Send {
            receiver: 2,
            group: 0x3b9aca05,
            tag: 0,
            bytes: 0x7f8,
        };
        assert_eq!(parse(b"S2L7f8T0C3b9aca05").unwrap(), send);
        assert_eq!(parse(b"SEND 2 LEN 7f8 TAG 0 COMM 3b9aca05").unwrap(), send);
        assert_eq!(
            parse(b"COPB3H2C3b9aca05RT0S4R4").unwrap(),
            Record::Collective {
                collective: 3,
                group: 0x3b9aca05,
                root: 0,
                sent: 4,
                received: 4,
                duration: None,
                matching: Some(2),
            }
        );
        assert_eq!(
            parse(b"COPE2").unwrap(),
            Record::CollectiveEnd { matching: 2 }
        );
        assert_eq!(
            parse(b"G0P1C3b9aca02T0Ld000").unwrap(),
            Record::Rma("RMA get")
        );
        assert_eq!(parse(b"K2Y6V100001").unwrap(), Record::Unused);
        assert_eq!(parse(b"PB").unwrap(), Record::Unused);
        assert_eq!(parse(b"QWERTY 1").unwrap(), Record::Unknown);
        assert_eq!(parse(b"").unwrap(), Record::Empty);
    }

    #[test]
    fn a_malformed_known_record_says_which_field() {
        let e = parse(b"S2L7f8C3").unwrap_err();
        assert_eq!(e.column, 7);
        assert_eq!(e.message, "expected T or TAG (message tag)");
        let e = parse(b"COP3C5RT0S4R4").unwrap_err();
        assert_eq!(e.message, "expected D or DUR (duration)");
    }
}

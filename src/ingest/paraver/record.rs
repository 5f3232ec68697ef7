//! The records of a `.prv` body, as written (times in the trace's unit):
//!
//! ```text
//! 1:cpu:appl:task:thread:begin:end:state
//! 2:cpu:appl:task:thread:time:type:value[:type:value…]
//! 3:cpu:appl:task:thread:logical_send:physical_send:cpu:appl:task:thread:logical_recv:physical_recv:size:tag
//! 4:cpu:appl:task:thread:time:communicator:send_size:recv_size:global_op:root
//! ```
//!
//! Applications, tasks and threads count from 1. The global-operation record is the old
//! MPItrace/Dimemas one: its operation id numbers the MPI collectives as Dimemas does and its
//! root is a rank within the communicator.

use super::calls::{is_collective_argument, is_mpi_call_type, USER_FUNCTION};
use super::text::{Fault, Fields};

/// The thread a record is about.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Object {
    pub app: u64,
    pub task: u64,
    pub thread: u64,
}

fn object(f: &mut Fields) -> Result<Object, Fault> {
    f.unsigned("CPU")?;
    Ok(Object {
        app: f.unsigned("application")?,
        task: f.unsigned("task")?,
        thread: f.unsigned("thread")?,
    })
}

/// A time field and its offset.
pub(crate) type Stamp = (u64, usize);

fn stamp(f: &mut Fields, what: &str) -> Result<Stamp, Fault> {
    let at = f.position();
    Ok((f.unsigned(what)?, at))
}

/// A state record: only its thread and begin time matter to mtfdb.
#[derive(Debug)]
pub(crate) struct State {
    pub object: Object,
    pub begin: Stamp,
}

pub(crate) fn state(line: &[u8]) -> Result<State, Fault> {
    let mut f = Fields::new(line, 2);
    let object = object(&mut f)?;
    let begin = stamp(&mut f, "begin time")?;
    f.unsigned("end time")?;
    f.unsigned("state")?;
    f.end("a state record", 8)?;
    Ok(State { object, begin })
}

/// The head of an event record; its pairs go to a reused buffer.
#[derive(Debug)]
pub(crate) struct Event {
    pub object: Object,
    pub time: Stamp,
}

/// One type:value pair of an event record. `value` is converted only for the types mtfdb
/// interprets (MPI calls, collective arguments, user functions); others are checked only.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pair {
    pub ty: u64,
    pub value: i64,
}

/// Whether mtfdb reads the value of event type `ty`.
fn interpreted(ty: u64) -> bool {
    is_mpi_call_type(ty) || is_collective_argument(ty) || ty == USER_FUNCTION
}

pub(crate) fn event(line: &[u8], pairs: &mut Vec<Pair>) -> Result<Event, Fault> {
    let mut f = Fields::new(line, 2);
    let object = object(&mut f)?;
    let time = stamp(&mut f, "time")?;
    pairs.clear();
    if f.is_empty() {
        return Err(Fault::new(
            f.position(),
            "truncated record",
            "an event record has at least one type:value pair",
        ));
    }
    while !f.is_empty() {
        let ty = f.unsigned("event type")?;
        if interpreted(ty) {
            let value = f.signed("event value")?;
            pairs.push(Pair { ty, value });
        } else {
            f.integer("event value")?;
            pairs.push(Pair { ty, value: 0 });
        }
    }
    Ok(Event { object, time })
}

/// A communication record.
#[derive(Debug)]
pub(crate) struct Comm {
    pub sender: Object,
    pub logical_send: Stamp,
    pub physical_send: Stamp,
    pub receiver: Object,
    pub logical_recv: Stamp,
    pub physical_recv: Stamp,
    pub size: u64,
    pub tag: i32,
}

pub(crate) fn communication(line: &[u8]) -> Result<Comm, Fault> {
    let mut f = Fields::new(line, 2);
    let sender = object(&mut f)?;
    let logical_send = stamp(&mut f, "logical send time")?;
    let physical_send = stamp(&mut f, "physical send time")?;
    let receiver = object(&mut f)?;
    let logical_recv = stamp(&mut f, "logical receive time")?;
    let physical_recv = stamp(&mut f, "physical receive time")?;
    let size = f.unsigned("size")?;
    let at = f.position();
    let tag = f.signed("tag")?;
    let tag = i32::try_from(tag).map_err(|_| {
        Fault::new(
            at,
            "bad number",
            format!("the tag {tag} does not fit an MPI tag (32 bits)"),
        )
    })?;
    f.end("a communication record", 15)?;
    Ok(Comm {
        sender,
        logical_send,
        physical_send,
        receiver,
        logical_recv,
        physical_recv,
        size,
        tag,
    })
}

/// An old-style global-operation record.
#[derive(Debug)]
pub(crate) struct Global {
    pub object: Object,
    pub time: Stamp,
    pub comm: u64,
    pub send: u64,
    pub recv: u64,
    pub op: u64,
    pub root: u64,
}

pub(crate) fn global_op(line: &[u8]) -> Result<Global, Fault> {
    let mut f = Fields::new(line, 2);
    let object = object(&mut f)?;
    let time = stamp(&mut f, "time")?;
    let g = Global {
        object,
        time,
        comm: f.unsigned("communicator")?,
        send: f.unsigned("send size")?,
        recv: f.unsigned("receive size")?,
        op: f.unsigned("global operation")?,
        root: f.unsigned("root")?,
    };
    f.end("a global-operation record", 11)?;
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_parse_and_damaged_ones_say_where() {
        let mut pairs = Vec::new();
        let e = event(b"2:8:1:8:1:10389541:50000001:3:42000050:249970", &mut pairs).unwrap();
        assert_eq!(
            (e.object.app, e.object.task, e.time),
            (1, 8, (10389541, 10))
        );
        assert_eq!(pairs.len(), 2);
        assert_eq!((pairs[0].ty, pairs[0].value), (50000001, 3));

        let c = communication(b"3:8:1:8:1:38286722:38292979:4:1:4:1:26910967:40788410:209088:2048")
            .unwrap();
        assert_eq!(
            (c.receiver.task, c.physical_recv.0, c.size, c.tag),
            (4, 40788410, 209088, 2048)
        );
        let g = global_op(b"4:2:1:2:1:73107:91:32:0:10:0").unwrap();
        assert_eq!((g.comm, g.send, g.recv, g.op, g.root), (91, 32, 0, 10, 0));

        let cases: [(&[u8], usize, &str); 5] = [
            (b"2:8:1:8:1:103895", 16, "an event record has at least one"),
            (
                b"2:8:1:8:1:10:50000001",
                21,
                "the record ends before its event value",
            ),
            (
                b"3:8:1:8:1:38:39:4:1:4:1:26:40:20x:2",
                30,
                "the size \"20x\" is not a number",
            ),
            (
                b"1:1:1:1:1:0:10:1:7",
                17,
                "a state record has more than its 8 fields",
            ),
            (
                b"2:1:1:1:1:5:7:abc",
                14,
                "the event value \"abc\" is not a number",
            ),
        ];
        for (line, at, message) in cases {
            let fault = match line[0] {
                b'1' => state(line).unwrap_err(),
                b'2' => event(line, &mut pairs).unwrap_err(),
                _ => communication(line).unwrap_err(),
            };
            assert_eq!(fault.at, at, "{}", String::from_utf8_lossy(line));
            assert!(fault.message.starts_with(message), "{}", fault.message);
        }
    }
}

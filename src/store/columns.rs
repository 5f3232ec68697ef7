//! Typed readers over the rows of a decoded operation or message chunk: the only way values
//! leave the store. A reader answers "the destination rank of row 5" in the model's types
//! ([`Rank`], [`Time`], [`OpKind`], …); which column holds it and how it is encoded (optional
//! values shifted by one, signed values zigzagged, end times stored as durations) stays in
//! [`tables`](super::tables).
//!
//! A scan asks the [`TraceReader`](super::TraceReader) for the fields it needs
//! ([`OperationField`], [`MessageField`]): only their columns are decoded, once per chunk, and
//! each row is then read in place. Reading a field that was not asked for panics, like an
//! index out of bounds.

use std::borrow::Borrow;
use std::marker::PhantomData;

use super::ids::row_id;
use super::tables::{kind_code, msg_col, op_col, unopt, unopt_tag, ChunkStream, Columns};
use crate::error::{Error, Result};
use crate::model::{CommId, Message, OpId, OpKind, Operation, Rank, RequestId, StrId, Time};

/// A field of an operation (the [`Operation`] field of the same name), to read from a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperationField {
    /// Start time.
    Start,
    /// End time.
    End,
    /// The MPI call.
    Kind,
    /// The communicator.
    Comm,
    /// Destination rank of a send.
    Dest,
    /// Source rank of a receive or probe.
    Source,
    /// Tag of a send.
    SendTag,
    /// Tag of a receive or probe.
    RecvTag,
    /// Bytes sent.
    SendBytes,
    /// Bytes received.
    RecvBytes,
    /// The datatype's name (a string id).
    Datatype,
    /// Root rank of a rooted collective.
    Root,
    /// The request a non-blocking call created.
    Request,
    /// The operation's flag bits.
    Flags,
    /// Nesting depth in the routine call tree.
    Depth,
    /// The requests a Wait or Test variant completes (read in row order with
    /// [`OperationColumns::completes_count`] and [`OperationColumns::completes_list`]).
    Completes,
}

impl OperationField {
    /// Every field: what reading whole operations takes.
    pub const ALL: [OperationField; 16] = [
        OperationField::Start,
        OperationField::End,
        OperationField::Kind,
        OperationField::Comm,
        OperationField::Dest,
        OperationField::Source,
        OperationField::SendTag,
        OperationField::RecvTag,
        OperationField::SendBytes,
        OperationField::RecvBytes,
        OperationField::Datatype,
        OperationField::Root,
        OperationField::Request,
        OperationField::Flags,
        OperationField::Depth,
        OperationField::Completes,
    ];

    /// The stored columns the field is read from.
    pub(super) fn columns(self) -> &'static [usize] {
        use op_col::*;
        match self {
            OperationField::Start => &[START],
            OperationField::End => &[START, DURATION],
            OperationField::Kind => &[KIND],
            OperationField::Comm => &[COMM],
            OperationField::Dest => &[DEST],
            OperationField::Source => &[SOURCE],
            OperationField::SendTag => &[SEND_TAG],
            OperationField::RecvTag => &[RECV_TAG],
            OperationField::SendBytes => &[SEND_BYTES],
            OperationField::RecvBytes => &[RECV_BYTES],
            OperationField::Datatype => &[DATATYPE],
            OperationField::Root => &[ROOT],
            OperationField::Request => &[REQUEST],
            OperationField::Flags => &[FLAGS],
            OperationField::Depth => &[DEPTH],
            // The list column comes after the fixed ones.
            OperationField::Completes => &[COMPLETES, COUNT],
        }
    }
}

/// A field of a message (the [`Message`] field of the same name), to read from a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageField {
    /// Sender rank.
    Sender,
    /// Receiver rank.
    Receiver,
    /// The communicator.
    Comm,
    /// The tag.
    Tag,
    /// Payload in bytes.
    Bytes,
    /// Start time of the send.
    SendTime,
    /// End time of the receive.
    RecvTime,
    /// The sending operation's id.
    SendOp,
    /// The receiving operation's id.
    RecvOp,
}

impl MessageField {
    /// Every field: what reading whole messages takes.
    pub const ALL: [MessageField; 9] = [
        MessageField::Sender,
        MessageField::Receiver,
        MessageField::Comm,
        MessageField::Tag,
        MessageField::Bytes,
        MessageField::SendTime,
        MessageField::RecvTime,
        MessageField::SendOp,
        MessageField::RecvOp,
    ];

    /// The stored columns the field is read from.
    pub(super) fn columns(self) -> &'static [usize] {
        use msg_col::*;
        match self {
            MessageField::Sender => &[SENDER],
            MessageField::Receiver => &[RECEIVER],
            MessageField::Comm => &[COMM],
            MessageField::Tag => &[TAG],
            MessageField::Bytes => &[BYTES],
            MessageField::SendTime => &[SEND_TIME],
            MessageField::RecvTime => &[SEND_TIME, RECV_DELAY],
            MessageField::SendOp => &[SEND_OP],
            MessageField::RecvOp => &[RECV_OP],
        }
    }
}

/// The stored columns `fields` are read from.
pub(super) fn columns_of<F: Copy>(
    fields: &[F],
    columns: impl Fn(F) -> &'static [usize],
) -> Vec<usize> {
    fields
        .iter()
        .flat_map(|&f| columns(f).iter().copied())
        .collect()
}

/// Typed reader of one chunk of a table ([`Operations`] or [`Messages`]), which it owns (as a
/// [`TraceReader`] read returns it) or borrows (`ChunkColumns<_, &Columns>`, over a chunk the
/// importer holds). Its accessors take a row number, `0..rows()`.
///
/// [`TraceReader`]: super::TraceReader
#[derive(Debug, Clone)]
pub struct ChunkColumns<T, C = Columns> {
    chunk: u32,
    /// The chunk's row that row 0 holds (not 0 for a window of a chunk's rows).
    first_row: usize,
    columns: C,
    table: PhantomData<T>,
}

/// The operation table: a chunk holds one location's operations, row `r` its `r`-th in the
/// chunk.
#[derive(Debug, Clone, Copy)]
pub struct Operations;

/// The message table: a chunk holds messages in matching order.
#[derive(Debug, Clone, Copy)]
pub struct Messages;

/// Typed reader of one operation chunk.
pub type OperationColumns<C = Columns> = ChunkColumns<Operations, C>;

/// Typed reader of one message chunk.
pub type MessageColumns<C = Columns> = ChunkColumns<Messages, C>;

impl<T, C: Borrow<Columns>> ChunkColumns<T, C> {
    /// A reader over `columns`, chunk number `chunk` of its table.
    pub fn new(chunk: u32, columns: C) -> ChunkColumns<T, C> {
        ChunkColumns {
            chunk,
            first_row: 0,
            columns,
            table: PhantomData,
        }
    }

    fn column(&self, c: usize) -> &[u64] {
        &self.columns.borrow().cols[c]
    }

    /// The chunk number.
    pub fn chunk(&self) -> u32 {
        self.chunk
    }

    /// The chunk's row that row 0 holds: 0, but for a window of a chunk's rows.
    pub fn first_row(&self) -> usize {
        self.first_row
    }

    /// Number of rows in the chunk (a read of the first rows only holds fewer).
    pub fn rows(&self) -> usize {
        self.columns.borrow().rows
    }

    /// The id of the operation or message in row `row`.
    pub fn id(&self, row: usize) -> u64 {
        row_id(self.chunk, self.first_row + row)
    }
}

impl<C: Borrow<Columns>> OperationColumns<C> {
    /// Start time of row `row` (ns).
    pub fn start(&self, row: usize) -> Time {
        self.column(op_col::START)[row]
    }

    /// End time of row `row` (ns).
    pub fn end(&self, row: usize) -> Time {
        self.start(row)
            .saturating_add(self.column(op_col::DURATION)[row])
    }

    /// The MPI call of row `row`; `None` for a kind this version does not know.
    pub fn kind(&self, row: usize) -> Option<OpKind> {
        kind_code(self.column(op_col::KIND)[row])
    }

    /// The communicator of row `row`.
    pub fn comm(&self, row: usize) -> Option<CommId> {
        unopt(self.column(op_col::COMM)[row])
    }

    /// Destination rank of row `row`, a send.
    pub fn dest(&self, row: usize) -> Option<Rank> {
        unopt(self.column(op_col::DEST)[row])
    }

    /// Source rank of row `row`, a receive or probe.
    pub fn source(&self, row: usize) -> Option<Rank> {
        unopt(self.column(op_col::SOURCE)[row])
    }

    /// Tag of row `row`, a send.
    pub fn send_tag(&self, row: usize) -> Option<i32> {
        unopt_tag(self.column(op_col::SEND_TAG)[row])
    }

    /// Tag of row `row`, a receive or probe.
    pub fn recv_tag(&self, row: usize) -> Option<i32> {
        unopt_tag(self.column(op_col::RECV_TAG)[row])
    }

    /// Bytes row `row` sent.
    pub fn send_bytes(&self, row: usize) -> u64 {
        self.column(op_col::SEND_BYTES)[row]
    }

    /// Bytes row `row` received.
    pub fn recv_bytes(&self, row: usize) -> u64 {
        self.column(op_col::RECV_BYTES)[row]
    }

    /// The datatype name (a string id) of row `row`.
    pub fn datatype(&self, row: usize) -> Option<StrId> {
        unopt(self.column(op_col::DATATYPE)[row])
    }

    /// Root rank of row `row`, a rooted collective.
    pub fn root(&self, row: usize) -> Option<Rank> {
        unopt(self.column(op_col::ROOT)[row])
    }

    /// The request row `row` created, a non-blocking call.
    pub fn request(&self, row: usize) -> Option<RequestId> {
        self.column(op_col::REQUEST)[row].checked_sub(1)
    }

    /// The flag bits of row `row` (see [`crate::model::flags`]).
    pub fn flags(&self, row: usize) -> u8 {
        self.column(op_col::FLAGS)[row] as u8
    }

    /// Nesting depth of row `row` in the routine call tree.
    pub fn depth(&self, row: usize) -> u16 {
        self.column(op_col::DEPTH)[row] as u16
    }

    /// How many requests row `row` completes: its next that many entries of
    /// [`OperationColumns::completes_list`] (the rows before it take theirs first).
    pub fn completes_count(&self, row: usize) -> usize {
        self.column(op_col::COMPLETES)[row] as usize
    }

    /// Every row's completed requests, one after the other in row order.
    pub fn completes_list(&self) -> &[RequestId] {
        &self.columns.borrow().list
    }

    /// Every row as an [`Operation`] of location (`rank`, `thread`): the chunk must have been
    /// read whole (with the list of requests each row completes).
    pub(super) fn operations(&self, rank: Rank, thread: u32) -> Result<Vec<Operation>> {
        let mut list_at = 0usize;
        let mut out = Vec::with_capacity(self.rows());
        for row in 0..self.rows() {
            out.push(self.operation(row, rank, thread, list_at)?);
            list_at += self.completes_count(row);
        }
        Ok(out)
    }

    /// Row `row` as an [`Operation`] of location (`rank`, `thread`), its completed requests
    /// starting at `list_at` in [`OperationColumns::completes_list`] (the sum of the earlier
    /// rows' [`OperationColumns::completes_count`]): every field must have been read.
    pub fn operation(
        &self,
        row: usize,
        rank: Rank,
        thread: u32,
        list_at: usize,
    ) -> Result<Operation> {
        let kind = self.known_kind(row)?;
        Ok(Operation {
            rank,
            thread,
            start: self.start(row),
            end: self.end(row),
            kind,
            comm: self.comm(row),
            dest: self.dest(row),
            source: self.source(row),
            send_tag: self.send_tag(row),
            recv_tag: self.recv_tag(row),
            send_bytes: self.send_bytes(row),
            recv_bytes: self.recv_bytes(row),
            datatype: self.datatype(row),
            root: self.root(row),
            request: self.request(row),
            completes: self.completes(row, list_at)?.to_vec(),
            flags: self.flags(row),
            depth: self.depth(row),
        })
    }

    /// The MPI call of row `row`; a code this version does not know is a damaged chunk.
    pub fn known_kind(&self, row: usize) -> Result<OpKind> {
        self.kind(row).ok_or_else(|| {
            let code = self.column(op_col::KIND)[row];
            Error::Corrupt(format!("unknown operation code {code}"))
        })
    }

    /// The requests row `row` completes, which start at `list_at` in
    /// [`OperationColumns::completes_list`] (see [`OperationColumns::operation`]).
    pub fn completes(&self, row: usize, list_at: usize) -> Result<&[RequestId]> {
        let n = self.completes_count(row);
        self.completes_list()
            .get(list_at..list_at + n)
            .ok_or_else(|| Error::Corrupt("request list column is short".into()))
    }
}

/// One operation chunk read a window of rows at a time (see
/// [`TraceReader::operation_stream`](super::TraceReader::operation_stream)): it holds the
/// chunk's wanted columns as stored, a few bytes per value, and decodes only the window asked
/// for.
#[derive(Debug, Clone)]
pub struct OperationStream {
    chunk: u32,
    stream: ChunkStream,
}

impl OperationStream {
    pub(super) fn new(chunk: u32, stream: ChunkStream) -> OperationStream {
        OperationStream { chunk, stream }
    }

    /// The chunk number.
    pub fn chunk(&self) -> u32 {
        self.chunk
    }

    /// Rows of the chunk not read yet.
    pub fn rows_left(&self) -> usize {
        self.stream.rows_left()
    }

    /// The next `rows` rows of the chunk (fewer at its end), `None` once every row was read.
    /// The window's row 0 is the first row not read before, and its ids are the chunk's.
    pub fn next_window(&mut self, rows: usize) -> Result<Option<OperationColumns>> {
        if self.rows_left() == 0 {
            return Ok(None);
        }
        let first_row = self.stream.rows_read();
        Ok(Some(ChunkColumns {
            chunk: self.chunk,
            first_row,
            columns: self.stream.next(rows.max(1))?,
            table: PhantomData,
        }))
    }
}

impl<C: Borrow<Columns>> MessageColumns<C> {
    /// Sender rank of row `row`.
    pub fn sender(&self, row: usize) -> Rank {
        self.column(msg_col::SENDER)[row] as Rank
    }

    /// Receiver rank of row `row`.
    pub fn receiver(&self, row: usize) -> Rank {
        self.column(msg_col::RECEIVER)[row] as Rank
    }

    /// The communicator of row `row`.
    pub fn comm(&self, row: usize) -> CommId {
        self.column(msg_col::COMM)[row] as CommId
    }

    /// The tag of row `row`.
    pub fn tag(&self, row: usize) -> i32 {
        super::codec::unzigzag(self.column(msg_col::TAG)[row]) as i32
    }

    /// Payload of row `row` in bytes.
    pub fn bytes(&self, row: usize) -> u64 {
        self.column(msg_col::BYTES)[row]
    }

    /// Start time of row `row`'s send (ns).
    pub fn send_time(&self, row: usize) -> Time {
        self.column(msg_col::SEND_TIME)[row]
    }

    /// End time of row `row`'s receive (ns).
    pub fn recv_time(&self, row: usize) -> Time {
        let delay = super::codec::unzigzag(self.column(msg_col::RECV_DELAY)[row]);
        self.send_time(row).wrapping_add(delay as u64)
    }

    /// The id of row `row`'s sending operation.
    pub fn send_op(&self, row: usize) -> OpId {
        self.column(msg_col::SEND_OP)[row]
    }

    /// The id of row `row`'s receiving operation.
    pub fn recv_op(&self, row: usize) -> OpId {
        self.column(msg_col::RECV_OP)[row]
    }

    /// Row `row` as a [`Message`]: every field must have been read, but for
    /// [`MessageField::SendOp`] and [`MessageField::RecvOp`], 0 when they were not.
    pub fn message(&self, row: usize) -> Message {
        let read = |c: usize| !self.column(c).is_empty();
        Message {
            sender: self.sender(row),
            receiver: self.receiver(row),
            comm: self.comm(row),
            tag: self.tag(row),
            bytes: self.bytes(row),
            send_time: self.send_time(row),
            recv_time: self.recv_time(row),
            send_op: if read(msg_col::SEND_OP) {
                self.send_op(row)
            } else {
                0
            },
            recv_op: if read(msg_col::RECV_OP) {
                self.recv_op(row)
            } else {
                0
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_reads_every_stored_column_of_a_whole_operation() {
        let mut read = columns_of(&OperationField::ALL, OperationField::columns);
        read.sort_unstable();
        read.dedup();
        // The fixed columns and the list column (COUNT is the list's place after them).
        assert_eq!(read, (0..=op_col::COUNT).collect::<Vec<_>>());
        let mut messages = columns_of(&MessageField::ALL, MessageField::columns);
        messages.sort_unstable();
        messages.dedup();
        assert_eq!(messages, (0..msg_col::COUNT).collect::<Vec<_>>());
    }
}

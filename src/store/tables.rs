//! The stored tables, each a sequence of column chunks of at most [`CHUNK_ROWS`] rows:
//! operations (one location's rows per chunk; small chunks of many locations are packed into
//! one stored blob, see [`crate::store::OpChunkInfo`]), messages, request links, collective instances
//! and routine calls. A chunk is a [`Columns`]: fixed `u64` columns plus one optional
//! variable-length list column, encoded column by column by the store's `codec`.
//!
//! Which column holds what, and how values are encoded in it, is private to the store: the
//! importer writes rows with the `push_` functions, and readers read them back through the
//! typed readers of [`columns`](super::columns).

use super::codec::{
    column_body, decode_column, decode_column_prefix, decode_column_prefix_into, encode_column,
    encode_column_fast, get_varint, put_varint, seal, skip_column, unseal, unzigzag, zigzag,
    ColumnReader,
};
use std::fmt;
use std::ops::Range;
use std::sync::Arc;
// The writer (the importer) fills chunks up to `CHUNK_ROWS` and numbers their rows by the id
// layout.
pub use super::ids::{chunk_ids, row_id, CHUNK_ROWS};
use crate::error::{Error, Result};
use crate::model::{
    CollectiveInstance, Message, OpKind, Operation, Rank, RequestLink, RoutineCall,
};

const CHUNK_FORMAT: u8 = 1;

/// One chunk of a table in column form. Its values are read through the typed readers of
/// [`columns`](super::columns) (operations, messages) or whole by the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Columns {
    /// Number of rows.
    pub rows: usize,
    /// The fixed columns, each `rows` long (a column left undecoded is empty, one decoded only
    /// in its first rows is shorter).
    pub(super) cols: Vec<Vec<u64>>,
    /// The list column's values, flattened; each row's length is in one of the fixed columns.
    pub(super) list: Vec<u64>,
}

impl Columns {
    /// An empty chunk of `ncols` columns.
    pub fn new(ncols: usize) -> Columns {
        Columns {
            rows: 0,
            cols: vec![Vec::new(); ncols],
            list: Vec::new(),
        }
    }

    /// An empty chunk of `ncols` columns with room for `rows` rows (and as many list values).
    pub fn with_capacity(ncols: usize, rows: usize) -> Columns {
        Columns {
            rows: 0,
            // Not `vec![Vec::with_capacity(rows); ncols]`: a clone of an empty vector has no
            // capacity, so all columns but the last would grow row by row.
            cols: (0..ncols).map(|_| Vec::with_capacity(rows)).collect(),
            list: Vec::with_capacity(rows),
        }
    }

    /// Encodes the chunk, sealed with a checksum.
    pub fn encode(&self) -> Vec<u8> {
        self.encode_with(encode_column)
    }

    /// Encodes the chunk without compressing its columns: for scratch copies read back once.
    /// [`Columns::decode`] reads either.
    pub fn encode_fast(&self) -> Vec<u8> {
        self.encode_with(encode_column_fast)
    }

    fn encode_with(&self, encode: fn(&[u64], &mut Vec<u8>)) -> Vec<u8> {
        let mut out = vec![CHUNK_FORMAT];
        put_varint(&mut out, self.rows as u64);
        put_varint(&mut out, self.cols.len() as u64);
        put_varint(&mut out, self.list.len() as u64);
        for col in &self.cols {
            encode(col, &mut out);
        }
        encode(&self.list, &mut out);
        seal(&mut out);
        out
    }

    /// Decodes a chunk of `ncols` columns from its `body` (its stored bytes without their
    /// checksum, once the bytes were checked: [`unseal`], or the segment's check of every
    /// blob it reads); `what` names it in errors.
    pub fn decode<W: fmt::Display + ?Sized>(
        body: &[u8],
        ncols: usize,
        what: &W,
    ) -> Result<Columns> {
        let (mut pos, rows, list_len) = chunk_header(body, ncols, what)?;
        let n = ncols;
        let mut cols = Vec::with_capacity(n);
        for _ in 0..n {
            cols.push(decode_column(body, &mut pos, rows)?);
        }
        let list = decode_column(body, &mut pos, list_len)?;
        Ok(Columns { rows, cols, list })
    }
}

/// Checks a chunk's header in its `body` (see [`Columns::decode`]): returns the position of
/// its first column, its row count and the length of its list column.
fn chunk_header<W: fmt::Display + ?Sized>(
    body: &[u8],
    ncols: usize,
    what: &W,
) -> Result<(usize, usize, usize)> {
    let bad = |why: &str| Error::Corrupt(format!("{what}: {why}"));
    if body.first() != Some(&CHUNK_FORMAT) {
        return Err(bad("unknown chunk format"));
    }
    let mut pos = 1;
    let rows = get_varint(body, &mut pos)? as usize;
    let n = get_varint(body, &mut pos)? as usize;
    let list_len = get_varint(body, &mut pos)? as usize;
    if n != ncols || rows > CHUNK_ROWS {
        return Err(bad("unexpected shape"));
    }
    Ok((pos, rows, list_len))
}

/// Decodes only the `wanted` columns of a chunk's `body` (see [`Columns::decode`]), and of
/// each only rows `0..take`: the others are skipped by their length and left empty. The list
/// column is decoded whole when `wanted` holds `ncols` (the index after the fixed columns),
/// else left empty. For scans that need two columns of nine, and reads of a chunk's first
/// rows. The row count is the chunk's.
pub(super) fn decode_column_prefixes<W: fmt::Display + ?Sized>(
    body: &[u8],
    ncols: usize,
    wanted: &[usize],
    take: usize,
    what: &W,
) -> Result<Columns> {
    let (mut pos, rows, list_len) = chunk_header(body, ncols, what)?;
    let bad = |why: &str| Error::Corrupt(format!("{what}: {why}"));
    let mut cols = vec![Vec::new(); ncols];
    for (i, col) in cols.iter_mut().enumerate() {
        if wanted.contains(&i) {
            *col = decode_column_prefix(body, &mut pos, rows, take)?;
        } else {
            skip_column(body, &mut pos).map_err(|_| bad("column runs past the end"))?;
        }
    }
    let list = if wanted.contains(&ncols) {
        decode_column(body, &mut pos, list_len)?
    } else {
        Vec::new()
    };
    Ok(Columns { rows, cols, list })
}

/// Decodes column `col` of a chunk's `body` (of `ncols` fixed columns) into `out`, replacing
/// what it held: for a reader of one column of many small chunks, which keeps one buffer
/// instead of allocating the chunk's columns for each.
pub(super) fn decode_column_into<W: fmt::Display + ?Sized>(
    body: &[u8],
    ncols: usize,
    col: usize,
    out: &mut Vec<u64>,
    what: &W,
) -> Result<()> {
    let (mut pos, rows, _) = chunk_header(body, ncols, what)?;
    for _ in 0..col {
        skip_column(body, &mut pos)
            .map_err(|_| Error::Corrupt(format!("{what}: column runs past the end")))?;
    }
    decode_column_prefix_into(body, &mut pos, rows, rows, out)
}

/// A chunk decoded a window of rows at a time: the wanted columns' bodies are kept as
/// encoded (a few bytes per value) and each window decodes only its rows. For readers that
/// hold many chunks open at once and go through each slowly (the replay, one chunk per
/// location): decoding a chunk whole would hold eight bytes per value of every one.
#[derive(Debug, Clone)]
pub(super) struct ChunkStream {
    rows: usize,
    read: usize,
    /// The wanted columns' bodies, one after another (shared by the stream's copies).
    bodies: Arc<Vec<u8>>,
    /// Per fixed column, when wanted: where its body lies in `bodies`, and its reader.
    cols: Vec<Option<(Range<usize>, ColumnReader)>>,
    /// The list column likewise, when wanted, with the fixed column of each row's list length.
    list: Option<(Range<usize>, ColumnReader, usize)>,
}

impl ChunkStream {
    /// Opens the `wanted` columns of a chunk of `ncols` columns from its `body` (see
    /// [`Columns::decode`]; the list column when `wanted` holds `ncols`; its rows' lengths
    /// are in column `list_lengths`, which is then read too); `what` names the chunk in errors.
    pub(super) fn open<W: fmt::Display + ?Sized>(
        body: &[u8],
        ncols: usize,
        wanted: &[usize],
        list_lengths: usize,
        what: &W,
    ) -> Result<ChunkStream> {
        let (mut pos, rows, list_len) = chunk_header(body, ncols, what)?;
        let with_list = wanted.contains(&ncols);
        let mut bodies = Vec::new();
        let mut cols = Vec::with_capacity(ncols);
        let mut keep =
            |enc: u8, column: &[u8], rows: usize| -> Result<(Range<usize>, ColumnReader)> {
                let at = bodies.len();
                bodies.extend_from_slice(column);
                Ok((at..bodies.len(), ColumnReader::new(enc, column, rows)?))
            };
        for i in 0..ncols {
            if wanted.contains(&i) || (with_list && i == list_lengths) {
                let (enc, column) = column_body(body, &mut pos)?;
                cols.push(Some(keep(enc, &column, rows)?));
            } else {
                skip_column(body, &mut pos)?;
                cols.push(None);
            }
        }
        let list = if with_list {
            let (enc, column) = column_body(body, &mut pos)?;
            let (range, reader) = keep(enc, &column, list_len)?;
            Some((range, reader, list_lengths))
        } else {
            None
        };
        Ok(ChunkStream {
            rows,
            read: 0,
            bodies: Arc::new(bodies),
            cols,
            list,
        })
    }

    /// Rows of the chunk not read yet.
    pub(super) fn rows_left(&self) -> usize {
        self.rows - self.read
    }

    /// Rows read so far: the chunk's row that the next window starts at.
    pub(super) fn rows_read(&self) -> usize {
        self.read
    }

    /// The next `n` rows (fewer at the chunk's end, none after it): the wanted columns hold
    /// them, the others are empty.
    pub(super) fn next(&mut self, n: usize) -> Result<Columns> {
        let n = n.min(self.rows_left());
        let mut cols = Vec::with_capacity(self.cols.len());
        for col in &mut self.cols {
            let mut values = Vec::new();
            if let Some((range, reader)) = col {
                reader.read(&self.bodies[range.clone()], n, &mut values)?;
            }
            cols.push(values);
        }
        let mut list = Vec::new();
        if let Some((range, reader, lengths)) = &mut self.list {
            let len: u64 = cols[*lengths].iter().sum();
            reader.read(&self.bodies[range.clone()], len as usize, &mut list)?;
            if list.len() as u64 != len {
                return Err(Error::Corrupt("request list column is short".into()));
            }
        }
        self.read += n;
        Ok(Columns {
            rows: n,
            cols,
            list,
        })
    }
}

/// `None` as 0, `Some(v)` as `v + 1`.
fn opt(v: Option<u32>) -> u64 {
    v.map_or(0, |v| u64::from(v) + 1)
}

/// The inverse of [`opt`].
pub(super) fn unopt(v: u64) -> Option<u32> {
    v.checked_sub(1).map(|v| v as u32)
}

/// `None` as 0, `Some(t)` as `zigzag(t) + 1`.
fn opt_tag(v: Option<i32>) -> u64 {
    v.map_or(0, |t| zigzag(i64::from(t)) + 1)
}

/// The inverse of [`opt_tag`].
pub(super) fn unopt_tag(v: u64) -> Option<i32> {
    v.checked_sub(1).map(|v| unzigzag(v) as i32)
}

/// The kind a stored code names; `None` for a code this version does not know.
pub(super) fn kind_code(code: u64) -> Option<OpKind> {
    u32::try_from(code).ok().and_then(OpKind::from_code)
}

fn kind_of(code: u64) -> Result<OpKind> {
    kind_code(code).ok_or_else(|| Error::Corrupt(format!("unknown operation code {code}")))
}

/// Column layout of an operation chunk. Rank and thread are the chunk's (one location per
/// chunk); the end time is stored as a duration.
pub(super) mod op_col {
    pub const START: usize = 0;
    pub const DURATION: usize = 1;
    pub const KIND: usize = 2;
    pub const COMM: usize = 3;
    pub const DEST: usize = 4;
    pub const SOURCE: usize = 5;
    pub const SEND_TAG: usize = 6;
    pub const RECV_TAG: usize = 7;
    pub const SEND_BYTES: usize = 8;
    pub const RECV_BYTES: usize = 9;
    pub const DATATYPE: usize = 10;
    pub const ROOT: usize = 11;
    pub const REQUEST: usize = 12;
    pub const FLAGS: usize = 13;
    pub const DEPTH: usize = 14;
    /// Number of requests each row completes (the list column holds them).
    pub const COMPLETES: usize = 15;
    pub const COUNT: usize = 16;
}

/// An operation as a row of its chunk's fixed columns (the requests it completes go to the
/// list column), packed: 80 bytes where the sixteen columns' values take 128. The import
/// writes one per operation into the open chunks of many locations at once and the encoders
/// read it back, so its size is memory traffic on the import's path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PackedRow {
    start: u64,
    duration: u64,
    send_bytes: u64,
    recv_bytes: u64,
    /// The stored request column's value (`request + 1`, 0 for none).
    request: u64,
    kind: u32,
    comm: u32,
    dest: u32,
    source: u32,
    datatype: u32,
    root: u32,
    completes: u32,
    send_tag: i32,
    recv_tag: i32,
    depth: u16,
    flags: u8,
    /// Which optional fields are present ([`PRESENT_COMM`] …).
    present: u8,
}

// The optional fields' presence bits: bit `i` for the `i`-th of `presence`'s flags.
const PRESENT_COMM: u8 = 1 << 0;
const PRESENT_DEST: u8 = 1 << 1;
const PRESENT_SOURCE: u8 = 1 << 2;
const PRESENT_SEND_TAG: u8 = 1 << 3;
const PRESENT_RECV_TAG: u8 = 1 << 4;
const PRESENT_DATATYPE: u8 = 1 << 5;
const PRESENT_ROOT: u8 = 1 << 6;

/// The presence bits of the optional fields, flagged in the bits' order: comm, dest, source,
/// send tag, receive tag, datatype, root.
fn presence(present: [bool; 7]) -> u8 {
    present
        .iter()
        .enumerate()
        .fold(0, |bits, (i, &p)| bits | (u8::from(p) << i))
}

/// `v` if its bit is in `present`.
fn when<T>(present: u8, bit: u8, v: T) -> Option<T> {
    (present & bit != 0).then_some(v)
}

impl PackedRow {
    /// `op`'s row at nesting depth `depth` (the importer's, from the routine enter/leave
    /// events; sources need not fill `op.depth`).
    fn of(op: &Operation, depth: u16) -> PackedRow {
        PackedRow {
            start: op.start,
            duration: op.end.saturating_sub(op.start),
            send_bytes: op.send_bytes,
            recv_bytes: op.recv_bytes,
            request: op.request.map_or(0, |r| r.wrapping_add(1)),
            kind: op.kind.code(),
            comm: op.comm.unwrap_or(0),
            dest: op.dest.unwrap_or(0),
            source: op.source.unwrap_or(0),
            datatype: op.datatype.unwrap_or(0),
            root: op.root.unwrap_or(0),
            // A location completes fewer than 2^32 requests in one call.
            completes: u32::try_from(op.completes.len()).unwrap_or(u32::MAX),
            send_tag: op.send_tag.unwrap_or(0),
            recv_tag: op.recv_tag.unwrap_or(0),
            depth,
            flags: op.flags,
            present: presence([
                op.comm.is_some(),
                op.dest.is_some(),
                op.source.is_some(),
                op.send_tag.is_some(),
                op.recv_tag.is_some(),
                op.datatype.is_some(),
                op.root.is_some(),
            ]),
        }
    }

    /// The row's values in the chunk's fixed columns ([`op_col`]).
    fn values(&self) -> [u64; op_col::COUNT] {
        use op_col::*;
        let p = self.present;
        let mut row = [0u64; COUNT];
        row[START] = self.start;
        row[DURATION] = self.duration;
        row[KIND] = u64::from(self.kind);
        row[COMM] = opt(when(p, PRESENT_COMM, self.comm));
        row[DEST] = opt(when(p, PRESENT_DEST, self.dest));
        row[SOURCE] = opt(when(p, PRESENT_SOURCE, self.source));
        row[SEND_TAG] = opt_tag(when(p, PRESENT_SEND_TAG, self.send_tag));
        row[RECV_TAG] = opt_tag(when(p, PRESENT_RECV_TAG, self.recv_tag));
        row[SEND_BYTES] = self.send_bytes;
        row[RECV_BYTES] = self.recv_bytes;
        row[DATATYPE] = opt(when(p, PRESENT_DATATYPE, self.datatype));
        row[ROOT] = opt(when(p, PRESENT_ROOT, self.root));
        row[REQUEST] = self.request;
        row[FLAGS] = u64::from(self.flags);
        row[DEPTH] = u64::from(self.depth);
        row[COMPLETES] = u64::from(self.completes);
        row
    }

    /// The row whose column values are `row`; `None` when a value is out of its column's
    /// range (only damage makes one: every row stored came from [`PackedRow::values`]).
    fn from_values(row: &[u64; op_col::COUNT]) -> Option<PackedRow> {
        use op_col::*;
        let small = |v: u64| u32::try_from(v).ok();
        // A present optional value is stored plus one: 0 is none.
        let optional = |v: u64| -> Option<(bool, u32)> {
            match v.checked_sub(1) {
                None => Some((false, 0)),
                Some(v) => small(v).map(|v| (true, v)),
            }
        };
        let tag = |v: u64| -> Option<(bool, i32)> {
            match v.checked_sub(1) {
                None => Some((false, 0)),
                Some(v) => i32::try_from(unzigzag(v)).ok().map(|t| (true, t)),
            }
        };
        let (comm, dest, source) = (
            optional(row[COMM])?,
            optional(row[DEST])?,
            optional(row[SOURCE])?,
        );
        let (datatype, root) = (optional(row[DATATYPE])?, optional(row[ROOT])?);
        let (send_tag, recv_tag) = (tag(row[SEND_TAG])?, tag(row[RECV_TAG])?);
        Some(PackedRow {
            start: row[START],
            duration: row[DURATION],
            send_bytes: row[SEND_BYTES],
            recv_bytes: row[RECV_BYTES],
            request: row[REQUEST],
            kind: small(row[KIND])?,
            comm: comm.1,
            dest: dest.1,
            source: source.1,
            datatype: datatype.1,
            root: root.1,
            completes: small(row[COMPLETES])?,
            send_tag: send_tag.1,
            recv_tag: recv_tag.1,
            depth: u16::try_from(row[DEPTH]).ok()?,
            flags: u8::try_from(row[FLAGS]).ok()?,
            present: presence([
                comm.0, dest.0, source.0, send_tag.0, recv_tag.0, datatype.0, root.0,
            ]),
        })
    }
}

/// Operation rows kept row by row, as the import fills a chunk for each of many locations at
/// once: appending a row writes one place in memory instead of sixteen columns' ends (with
/// thousands of open chunks, each of those was a cache miss). Turned into [`Columns`] when
/// the rows go to be encoded.
#[derive(Debug, Default)]
pub struct OperationRows {
    fixed: Vec<PackedRow>,
    list: Vec<u64>,
}

impl OperationRows {
    /// No rows, with room for `rows` of them.
    pub fn with_capacity(rows: usize) -> OperationRows {
        OperationRows {
            fixed: Vec::with_capacity(rows),
            list: Vec::new(),
        }
    }

    /// Appends an operation at nesting depth `depth` (see [`operation_row`]).
    pub fn push(&mut self, op: &Operation, depth: u16) {
        self.fixed.push(PackedRow::of(op, depth));
        if !op.completes.is_empty() {
            self.list.extend_from_slice(&op.completes);
        }
    }

    /// The number of rows.
    pub fn len(&self) -> usize {
        self.fixed.len()
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.fixed.is_empty()
    }

    /// Appends the rows to `out` as a piece of an open chunk parked for a while by the import
    /// (read back once, by the same import): each value as the zigzag varint of its
    /// difference from the value above it, then the list column, then a CRC. One pass, no
    /// choice of encoding: parking is on the import's path, and at many ranks most rows park.
    pub fn encode_piece(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.reserve(self.fixed.len() * op_col::COUNT + self.list.len() + 16);
        put_varint(out, self.fixed.len() as u64);
        put_varint(out, self.list.len() as u64);
        let mut above = [0u64; op_col::COUNT];
        for row in &self.fixed {
            for (a, &v) in above.iter_mut().zip(&row.values()) {
                put_varint(out, zigzag(v.wrapping_sub(*a) as i64));
                *a = v;
            }
        }
        for &v in &self.list {
            put_varint(out, v);
        }
        let crc = crc32fast::hash(&out[start..]);
        out.extend_from_slice(&crc.to_le_bytes());
    }

    /// Appends the rows of a piece [`OperationRows::encode_piece`] wrote; `what` names it in
    /// errors.
    pub fn decode_piece<W: fmt::Display + ?Sized>(&mut self, bytes: &[u8], what: &W) -> Result<()> {
        let body = unseal(bytes, what)?;
        let bad = |why: &str| Error::Corrupt(format!("{what}: {why}"));
        let mut pos = 0;
        let rows = get_varint(body, &mut pos)? as usize;
        let list_len = get_varint(body, &mut pos)? as usize;
        // Every value takes a byte at least: a count past the body's length is damage.
        if rows.saturating_mul(op_col::COUNT).saturating_add(list_len) > body.len() {
            return Err(bad("unexpected shape"));
        }
        self.fixed.reserve(rows);
        let mut row = [0u64; op_col::COUNT];
        for _ in 0..rows {
            for v in row.iter_mut() {
                *v = v.wrapping_add(unzigzag(get_varint(body, &mut pos)?) as u64);
            }
            self.fixed
                .push(PackedRow::from_values(&row).ok_or_else(|| bad("a value out of range"))?);
        }
        self.list.reserve(list_len);
        for _ in 0..list_len {
            self.list.push(get_varint(body, &mut pos)?);
        }
        if pos != body.len() {
            return Err(bad("bytes after its rows"));
        }
        Ok(())
    }

    /// Removes every row, keeping room for `rows` rows at most.
    pub fn clear_keeping(&mut self, rows: usize) {
        self.fixed.clear();
        self.fixed.shrink_to(rows);
        self.list.clear();
        self.list.shrink_to(rows);
    }

    /// Appends `other`'s rows after these.
    pub fn append(&mut self, mut other: OperationRows) {
        self.fixed.append(&mut other.fixed);
        self.list.append(&mut other.list);
    }

    /// The rows as an operation chunk's columns.
    pub fn into_columns(self) -> Columns {
        let rows = self.fixed.len();
        let mut c = Columns::with_capacity(op_col::COUNT, rows);
        // Blocks of rows that stay in the first-level cache while every column takes its
        // values from them (a row at a time, each value was a push with its own check).
        let mut values = [[0u64; op_col::COUNT]; 64];
        for block in self.fixed.chunks(64) {
            for (v, row) in values.iter_mut().zip(block) {
                *v = row.values();
            }
            let values = &values[..block.len()];
            for (i, col) in c.cols.iter_mut().enumerate() {
                col.extend(values.iter().map(|row| row[i]));
            }
        }
        c.list = self.list;
        c.rows = rows;
        c
    }
}

/// Column layout of a message chunk. The receive time is stored relative to the send time.
pub(super) mod msg_col {
    pub const SENDER: usize = 0;
    pub const RECEIVER: usize = 1;
    pub const COMM: usize = 2;
    pub const TAG: usize = 3;
    pub const BYTES: usize = 4;
    pub const SEND_TIME: usize = 5;
    pub const RECV_DELAY: usize = 6;
    pub const SEND_OP: usize = 7;
    pub const RECV_OP: usize = 8;
    pub const COUNT: usize = 9;
}

/// Appends a message row.
pub fn push_message(c: &mut Columns, m: &Message) {
    use msg_col::*;
    let cols = &mut c.cols;
    cols[SENDER].push(u64::from(m.sender));
    cols[RECEIVER].push(u64::from(m.receiver));
    cols[COMM].push(u64::from(m.comm));
    cols[TAG].push(zigzag(i64::from(m.tag)));
    cols[BYTES].push(m.bytes);
    cols[SEND_TIME].push(m.send_time);
    cols[RECV_DELAY].push(zigzag(m.recv_time.wrapping_sub(m.send_time) as i64));
    cols[SEND_OP].push(m.send_op);
    cols[RECV_OP].push(m.recv_op);
    c.rows += 1;
}

/// Column layout of a request-link chunk.
pub(super) mod link_col {
    pub const REQUEST_OP: usize = 0;
    pub const COMPLETION_OP: usize = 1;
    pub const COUNT: usize = 2;
}

/// Appends a request link row.
pub fn push_link(c: &mut Columns, l: &RequestLink) {
    c.cols[link_col::REQUEST_OP].push(l.request_op);
    c.cols[link_col::COMPLETION_OP].push(l.completion_op);
    c.rows += 1;
}

/// Reads every row of a request-link chunk.
pub(super) fn read_links(c: &Columns) -> Vec<RequestLink> {
    (0..c.rows)
        .map(|r| RequestLink {
            request_op: c.cols[link_col::REQUEST_OP][r],
            completion_op: c.cols[link_col::COMPLETION_OP][r],
        })
        .collect()
}

/// Column layout of a collective-instance chunk; the list column holds member op ids.
pub(super) mod coll_col {
    pub const KIND: usize = 0;
    pub const COMM: usize = 1;
    pub const ROOT: usize = 2;
    pub const START: usize = 3;
    pub const END: usize = 4;
    pub const SEND_BYTES: usize = 5;
    pub const RECV_BYTES: usize = 6;
    pub const MEMBERS: usize = 7;
    pub const COUNT: usize = 8;
}

/// Appends a collective instance row.
pub fn push_collective(c: &mut Columns, ci: &CollectiveInstance) {
    use coll_col::*;
    let cols = &mut c.cols;
    cols[KIND].push(u64::from(ci.kind.code()));
    cols[COMM].push(u64::from(ci.comm));
    cols[ROOT].push(opt(ci.root));
    cols[START].push(ci.start);
    cols[END].push(ci.end);
    cols[SEND_BYTES].push(ci.send_bytes);
    cols[RECV_BYTES].push(ci.recv_bytes);
    cols[MEMBERS].push(ci.ops.len() as u64);
    c.list.extend_from_slice(&ci.ops);
    c.rows += 1;
}

/// Reads every row of a collective-instance chunk.
pub(super) fn read_collectives(c: &Columns) -> Result<Vec<CollectiveInstance>> {
    use coll_col::*;
    let mut pos = 0usize;
    let mut out = Vec::with_capacity(c.rows);
    for r in 0..c.rows {
        let col = |i: usize| c.cols[i][r];
        let n = col(MEMBERS) as usize;
        let ops = c
            .list
            .get(pos..pos + n)
            .ok_or_else(|| Error::Corrupt("collective member column is short".into()))?
            .to_vec();
        pos += n;
        out.push(CollectiveInstance {
            kind: kind_of(col(KIND))?,
            comm: col(COMM) as u32,
            root: unopt(col(ROOT)),
            ops,
            start: col(START),
            end: col(END),
            send_bytes: col(SEND_BYTES),
            recv_bytes: col(RECV_BYTES),
        });
    }
    Ok(out)
}

/// Column layout of a routine-call chunk.
pub(super) mod routine_col {
    pub const RANK: usize = 0;
    pub const THREAD: usize = 1;
    pub const ROUTINE: usize = 2;
    pub const DEPTH: usize = 3;
    pub const START: usize = 4;
    pub const DURATION: usize = 5;
    pub const COUNT: usize = 6;
}

/// Appends a routine call row.
pub fn push_routine(c: &mut Columns, rc: &RoutineCall) {
    use routine_col::*;
    let cols = &mut c.cols;
    cols[RANK].push(u64::from(rc.rank));
    cols[THREAD].push(u64::from(rc.thread));
    cols[ROUTINE].push(u64::from(rc.routine));
    cols[DEPTH].push(u64::from(rc.depth));
    cols[START].push(rc.start);
    cols[DURATION].push(rc.end.saturating_sub(rc.start));
    c.rows += 1;
}

/// Reads every row of a routine-call chunk.
pub(super) fn read_routines(c: &Columns) -> Vec<RoutineCall> {
    use routine_col::*;
    (0..c.rows)
        .map(|r| {
            let col = |i: usize| c.cols[i][r];
            RoutineCall {
                rank: col(RANK) as Rank,
                thread: col(THREAD) as u32,
                routine: col(ROUTINE) as u32,
                depth: col(DEPTH) as u16,
                start: col(START),
                end: col(START).saturating_add(col(DURATION)),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::columns::{
        columns_of, MessageColumns, MessageField, OperationColumns, OperationField,
    };
    use super::*;
    use crate::model::flags;

    fn sample_op(i: u64) -> Operation {
        let mut op = Operation::new(3, OpKind::Isend, 1000 + i * 10, 1005 + i * 10);
        op.comm = Some((i % 2) as u32);
        op.dest = Some((i % 5) as u32);
        op.send_tag = Some(if i.is_multiple_of(7) {
            -1
        } else {
            (i % 3) as i32
        });
        op.send_bytes = 8 * i;
        op.datatype = Some(2);
        op.request = Some(i);
        if i.is_multiple_of(4) {
            op.kind = OpKind::Waitall;
            op.completes = vec![i, i + 1, i + 2];
            op.flags = flags::NOT_COMPLETED;
        }
        op.depth = (i % 4) as u16;
        op
    }

    /// A chunk of `ops`, each at its own depth.
    fn chunk_of(ops: &[Operation]) -> Columns {
        let mut rows = OperationRows::with_capacity(ops.len());
        for op in ops {
            rows.push(op, op.depth);
        }
        rows.into_columns()
    }

    /// Rows parked in pieces and joined give the columns the rows pushed straight into a
    /// chunk give; a piece with a flipped byte or cut short is refused, naming it.
    #[test]
    fn parked_pieces_join_into_the_chunk_and_damage_is_refused() {
        let ops: Vec<Operation> = (0..1000).map(sample_op).collect();
        let direct = chunk_of(&ops);
        let mut pieces = Vec::new();
        for part in ops.chunks(37) {
            let mut rows = OperationRows::with_capacity(part.len());
            for op in part {
                rows.push(op, op.depth);
            }
            let mut bytes = Vec::new();
            rows.encode_piece(&mut bytes);
            pieces.push(bytes);
        }
        let mut joined = OperationRows::default();
        for piece in &pieces {
            joined.decode_piece(piece, "piece").unwrap();
        }
        assert_eq!(joined.len(), ops.len());
        assert_eq!(joined.into_columns(), direct);

        let mut flipped = pieces[3].clone();
        flipped[5] ^= 0x10;
        let err = OperationRows::default()
            .decode_piece(&flipped, "piece 3")
            .unwrap_err();
        assert!(err.to_string().contains("piece 3"), "{err}");
        let cut = &pieces[3][..pieces[3].len() - 9];
        assert!(OperationRows::default()
            .decode_piece(cut, "piece 3")
            .is_err());
    }

    /// The packed row keeps every field's whole range, absent and present apart (a present 0
    /// is not an absent value), directly and through a parked piece.
    #[test]
    fn extreme_fields_survive_the_packed_row() {
        let mut ops = Vec::new();
        for i in 0..8u64 {
            let mut op = Operation::new(3, OpKind::Sendrecv, u64::MAX - 10, u64::MAX);
            let big = i % 2 == 1;
            let (id, tag) = if big {
                (u32::MAX, i32::MIN)
            } else {
                (0, i32::MAX)
            };
            if i < 6 {
                (op.comm, op.dest, op.source) = (Some(id), Some(id), Some(id));
                (op.datatype, op.root) = (Some(id), Some(id));
                (op.send_tag, op.recv_tag) = (Some(tag), Some(if big { -1 } else { 0 }));
            }
            (op.send_bytes, op.recv_bytes) = (u64::MAX, u64::MAX - i);
            op.request = if i < 4 { Some(u64::MAX - 1) } else { None };
            op.flags = 0xff;
            op.depth = u16::MAX;
            op.completes = (0..i).collect();
            ops.push(op);
        }
        let direct = chunk_of(&ops);
        let read = OperationColumns::new(0, &direct).operations(3, 0).unwrap();
        assert_eq!(read, ops);
        let mut rows = OperationRows::default();
        for op in &ops {
            rows.push(op, op.depth);
        }
        let mut piece = Vec::new();
        rows.encode_piece(&mut piece);
        let mut joined = OperationRows::default();
        joined.decode_piece(&piece, "piece").unwrap();
        assert_eq!(joined.into_columns(), direct);
    }

    #[test]
    fn operation_chunk_round_trips_column_by_column() {
        let ops: Vec<Operation> = (0..CHUNK_ROWS as u64).map(sample_op).collect();
        let c = chunk_of(&ops);
        let bytes = c.encode();
        let back =
            Columns::decode(unseal(&bytes, "t").unwrap(), op_col::COUNT, "test chunk").unwrap();
        assert_eq!(back, c);
        let read = OperationColumns::new(0, &back).operations(3, 0).unwrap();
        assert_eq!(read.len(), CHUNK_ROWS);
        assert_eq!(read, ops);
    }

    #[test]
    fn a_partial_read_decodes_only_the_fields_asked_for() {
        let ops: Vec<Operation> = (0..1000).map(sample_op).collect();
        let c = chunk_of(&ops);
        let fields = [OperationField::End, OperationField::SendTag];
        let wanted = columns_of(&fields, OperationField::columns);
        let bytes = c.encode();
        let body = unseal(&bytes, "t").unwrap();
        let read = decode_column_prefixes(body, op_col::COUNT, &wanted, 10, "t").unwrap();
        let read = OperationColumns::new(7, read);
        assert_eq!(read.rows(), 1000);
        for (row, op) in ops.iter().enumerate().take(10) {
            assert_eq!(read.id(row), row_id(7, row));
            assert_eq!((read.end(row), read.send_tag(row)), (op.end, op.send_tag));
        }
    }

    #[test]
    fn a_partial_read_of_the_completed_requests_gives_each_rows_list() {
        let ops: Vec<Operation> = (0..1000).map(sample_op).collect();
        let c = chunk_of(&ops);
        let wanted = columns_of(&[OperationField::Completes], OperationField::columns);
        let bytes = c.encode();
        let body = unseal(&bytes, "t").unwrap();
        let read = OperationColumns::new(
            0,
            decode_column_prefixes(body, op_col::COUNT, &wanted, usize::MAX, "t").unwrap(),
        );
        let mut at = 0;
        for (row, op) in ops.iter().enumerate() {
            let n = read.completes_count(row);
            assert_eq!(
                &read.completes_list()[at..at + n],
                &op.completes[..],
                "row {row}"
            );
            at += n;
        }
        assert_eq!(at, read.completes_list().len());
        assert!(ops.iter().any(|op| !op.completes.is_empty()));
    }

    #[test]
    fn a_message_read_without_its_operations_names_none() {
        let m = Message {
            sender: 3,
            receiver: 1,
            comm: 2,
            tag: -4,
            bytes: 64,
            send_time: 10,
            recv_time: 7,
            send_op: 11,
            recv_op: 12,
        };
        let mut c = Columns::new(msg_col::COUNT);
        push_message(&mut c, &m);
        let bytes = c.encode();
        let all = columns_of(&MessageField::ALL, MessageField::columns);
        let body = unseal(&bytes, "m").unwrap();
        let whole = decode_column_prefixes(body, msg_col::COUNT, &all, 1, "m").unwrap();
        assert_eq!(MessageColumns::new(0, whole).message(0), m);
        let without_ops: Vec<MessageField> = MessageField::ALL
            .into_iter()
            .filter(|f| !matches!(f, MessageField::SendOp | MessageField::RecvOp))
            .collect();
        let wanted = columns_of(&without_ops, MessageField::columns);
        let part = decode_column_prefixes(body, msg_col::COUNT, &wanted, 1, "m").unwrap();
        let expected = Message {
            send_op: 0,
            recv_op: 0,
            ..m
        };
        assert_eq!(MessageColumns::new(0, part).message(0), expected);
    }

    #[test]
    fn a_damaged_chunk_is_refused() {
        let mut c = Columns::new(msg_col::COUNT);
        push_message(
            &mut c,
            &Message {
                sender: 1,
                receiver: 2,
                comm: 0,
                tag: 5,
                bytes: 64,
                send_time: 10,
                recv_time: 7,
                send_op: 1,
                recv_op: 2,
            },
        );
        let mut bytes = c.encode();
        let back = Columns::decode(unseal(&bytes, "m").unwrap(), msg_col::COUNT, "m").unwrap();
        assert_eq!(MessageColumns::new(0, &back).recv_time(0), 7);
        let last = bytes.len() - 6;
        bytes[last] ^= 0x40;
        let err = unseal(&bytes, "message chunk 0").unwrap_err();
        assert!(
            err.to_string()
                .contains("message chunk 0 fails its checksum"),
            "{err}"
        );
    }
}

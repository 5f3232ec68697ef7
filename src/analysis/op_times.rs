//! The start, end and MPI call of operations, read a chunk at a time as an analysis reaches
//! them (three columns decoded, not whole operations), and kept up to a budget of rows, the
//! least recently used chunks dropped first. The wait states and the critical path look
//! operations up by id or by rank and time, in about the order they happened, so the chunks
//! in use are those of the current stretch of time (one per location at worst), not the
//! whole trace.
//!
//! Read through a [`ClockMap`], every time is the rank's corrected one: the wait states and
//! the critical path then run on corrected clocks without knowing it. A map is monotonic per
//! rank, so each chunk stays sorted by start and a chunk directory's first start and last end
//! stay its rows' bounds once corrected ([`OpTimes::time`]).

use super::clock::ClockMap;
use crate::error::Result;
use crate::hash::FxHashMap;
use crate::model::{OpId, OpKind, Rank, Time};
use crate::store::ids::{chunk_and_row, row_id};
use crate::store::OperationField::{End, Kind, Start};
use crate::Trace;

/// The most operation rows kept decoded: 24 bytes each, about 144 MiB.
const BUDGET_ROWS: usize = 6 << 20;

/// One operation chunk's start, end and call columns; a location's operations are in start
/// order, so each chunk is sorted by start.
pub(crate) struct ChunkTimes {
    /// The chunk number.
    pub chunk: u32,
    /// The location's rank.
    pub rank: Rank,
    /// Start of each row (ns).
    pub start: Vec<Time>,
    /// End of each row (ns).
    pub end: Vec<Time>,
    /// The MPI call of each row (`None`: a code this version does not know).
    pub kind: Vec<Option<OpKind>>,
    used: u64,
}

impl ChunkTimes {
    /// The id of row `row`.
    pub fn id(&self, row: usize) -> OpId {
        row_id(self.chunk, row)
    }
}

/// One operation's times and call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OpTime {
    pub rank: Rank,
    pub start: Time,
    pub end: Time,
    pub kind: Option<OpKind>,
}

/// Operation chunks' times, read on demand and kept within [`BUDGET_ROWS`].
pub(crate) struct OpTimes<'t> {
    trace: &'t Trace,
    /// The correction every time is read through, if any.
    map: Option<&'t ClockMap>,
    rank_of_chunk: FxHashMap<u32, Rank>,
    chunks: FxHashMap<u32, ChunkTimes>,
    rows: usize,
    tick: u64,
}

impl<'t> OpTimes<'t> {
    pub fn new(trace: &'t Trace) -> OpTimes<'t> {
        OpTimes::through(trace, None)
    }

    /// Operations' times corrected by `map`.
    pub fn corrected(trace: &'t Trace, map: &'t ClockMap) -> OpTimes<'t> {
        OpTimes::through(trace, Some(map))
    }

    fn through(trace: &'t Trace, map: Option<&'t ClockMap>) -> OpTimes<'t> {
        OpTimes {
            trace,
            map,
            rank_of_chunk: trace
                .op_chunks()
                .iter()
                .map(|c| (c.chunk, c.rank))
                .collect(),
            chunks: FxHashMap::default(),
            rows: 0,
            tick: 0,
        }
    }

    /// Time `t` of `rank` as this reads it: corrected when there is a map (for the times the
    /// chunk directory holds).
    pub fn time(&self, rank: Rank, t: Time) -> Time {
        match self.map {
            Some(m) => m.time(rank, t),
            None => t,
        }
    }

    /// Chunk `chunk`'s times, read if they are not kept; `None` for a chunk the trace does not
    /// have.
    pub fn chunk(&mut self, chunk: u32) -> Result<Option<&ChunkTimes>> {
        self.tick += 1;
        if !self.chunks.contains_key(&chunk) {
            let Some(&rank) = self.rank_of_chunk.get(&chunk) else {
                return Ok(None);
            };
            self.trace.check_cancel()?;
            let cols = self.trace.operation_columns(chunk, &[Start, End, Kind])?;
            let rows = cols.rows();
            let times = ChunkTimes {
                chunk,
                rank,
                start: (0..rows).map(|r| self.time(rank, cols.start(r))).collect(),
                end: (0..rows).map(|r| self.time(rank, cols.end(r))).collect(),
                kind: (0..rows).map(|r| cols.kind(r)).collect(),
                used: 0,
            };
            self.make_room(rows);
            self.rows += rows;
            self.chunks.insert(chunk, times);
        }
        let tick = self.tick;
        Ok(self.chunks.get_mut(&chunk).map(|c| {
            c.used = tick;
            &*c
        }))
    }

    /// Operation `op`'s times; `None` for an id the trace does not have.
    pub fn get(&mut self, op: OpId) -> Result<Option<OpTime>> {
        let (chunk, row) = chunk_and_row(op);
        Ok(self.chunk(chunk)?.and_then(|c| {
            (row < c.start.len()).then(|| OpTime {
                rank: c.rank,
                start: c.start[row],
                end: c.end[row],
                kind: c.kind[row],
            })
        }))
    }

    /// Drops the least recently used chunks until `rows` more fit in the budget (down to
    /// three quarters of it, so that eviction happens in batches).
    fn make_room(&mut self, rows: usize) {
        if self.rows + rows <= BUDGET_ROWS {
            return;
        }
        let mut by_use: Vec<(u64, u32)> = self.chunks.iter().map(|(&k, c)| (c.used, k)).collect();
        by_use.sort_unstable();
        for (_, chunk) in by_use {
            if self.rows + rows <= BUDGET_ROWS / 4 * 3 {
                break;
            }
            if let Some(c) = self.chunks.remove(&chunk) {
                self.rows -= c.start.len();
            }
        }
    }
}

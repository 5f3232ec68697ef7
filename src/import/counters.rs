//! The counter values of calls (hardware counters) on their way to the store: buffered per
//! chunk of operations or routine calls, and handed to the writer as pieces of those chunks
//! when the buffers together hold [`MAX_BUFFERED`] rows (see [`crate::store::counters`]), so
//! that memory stays bounded whatever the number of locations.

use std::sync::mpsc::SyncSender;

use super::{writer_gone, Job};
use crate::error::Result;
use crate::hash::FxHashMap as HashMap;
use crate::model::Metric;
use crate::store::counters::CounterRows;
use crate::store::ids::chunk_and_row;
use crate::store::Table;

/// Counter rows buffered across all chunks before they go to the writer.
const MAX_BUFFERED: usize = 1 << 16;

/// The counters of an import of a trace that recorded some.
pub(super) struct CounterBuffer {
    /// The trace's counters.
    pub metrics: Vec<Metric>,
    open: HashMap<(Table, u32), CounterRows>,
    rows: usize,
    /// The number of the next piece (one sequence for all chunks: a chunk's pieces sort in
    /// the order they were written).
    next_piece: u32,
}

impl CounterBuffer {
    /// Nothing buffered, for `metrics`.
    pub fn new(metrics: &[Metric]) -> CounterBuffer {
        CounterBuffer {
            metrics: metrics.to_vec(),
            open: HashMap::default(),
            rows: 0,
            next_piece: 0,
        }
    }

    /// The values of row `id` of `table` (an operation id, or a routine call's position).
    pub fn push(
        &mut self,
        table: Table,
        id: u64,
        values: &[Option<i64>],
        jobs: &SyncSender<Job>,
    ) -> Result<()> {
        let (chunk, _) = chunk_and_row(id);
        let n = self.metrics.len();
        self.open
            .entry((table, chunk))
            .or_insert_with(|| CounterRows::new(n))
            .push(id, values);
        self.rows += 1;
        if self.rows >= MAX_BUFFERED {
            self.flush(jobs)?;
        }
        Ok(())
    }

    /// Hands every buffered row to the writer.
    pub fn flush(&mut self, jobs: &SyncSender<Job>) -> Result<()> {
        let mut open: Vec<_> = self.open.drain().collect();
        open.sort_by_key(|((table, chunk), _)| (*table == Table::Routines, *chunk));
        for ((table, chunk), rows) in open {
            let piece = self.next_piece;
            self.next_piece += 1;
            let job = Job::Counters {
                table,
                chunk,
                piece,
                rows,
            };
            jobs.send(job).map_err(|_| writer_gone())?;
        }
        self.rows = 0;
        Ok(())
    }
}

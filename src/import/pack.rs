//! Packing operation chunks: many locations with few rows each share one stored blob.
//!
//! An import keeps one open chunk per location (rank, thread). With thousands of locations
//! and a cap on buffered rows, each location can buffer only a few rows at a time; storing
//! those as chunks of their own made a trace of many ranks cost a blob, a directory entry and
//! a set of index bitmaps per few rows (27 bytes per event at 4,096 ranks against 11 at 64).
//! Instead, the buffered rows of a chunk that is not full yet are parked in the import's
//! scratch file ([`SpillFile`]) and the chunk stays open; when it is complete its pieces are
//! read back and joined, and whole chunks are laid back to back into packs of up to
//! [`CHUNK_ROWS`] rows, with one posting list per index dimension and pack.

use roaring::RoaringTreemap;

use crate::error::Result;
use crate::hash::FxHashMap as HashMap;
use crate::store::segment::SpillFile;
use crate::store::tables::{chunk_ids, Columns, OperationRows, CHUNK_ROWS};
use crate::store::{encode_postings, IndexDim, TraceWriter};

/// Where a finished operation chunk was stored: chunk, pack, offset and length in the pack.
pub(super) type Placement = (u32, u32, u32, u32);

/// A piece of an open chunk in the scratch file: its offset and length.
pub(super) type Piece = (u64, u32);

/// The index groups of a chunk: per dimension and value, the ids (ascending within a list;
/// a dimension and value may come in more than one list).
pub(super) type Postings = Vec<(IndexDim, u32, Vec<u64>)>;

/// Chunks shorter than this are encoded without compressing their columns, and the pack that
/// holds them is compressed whole: a column of a few hundred rows compresses badly alone.
pub(super) const SHORT_CHUNK_ROWS: usize = CHUNK_ROWS / 16;

/// Encodes a finished operation chunk for its pack (see [`SHORT_CHUNK_ROWS`]).
pub(super) fn encode_chunk(cols: &Columns) -> Vec<u8> {
    if cols.rows < SHORT_CHUNK_ROWS {
        cols.encode_fast()
    } else {
        cols.encode()
    }
}

/// Reads that far apart are made one read (the gap is read and dropped).
const READ_GAP: u64 = 16 << 10;

/// The parked pieces a batch of finished chunks needs, read from the scratch file.
///
/// The pieces of one relief of the buffers lie in the file in location order, and chunks
/// tend to finish in that order too, so the pieces of a batch are mostly side by side: they
/// are read in spans of adjacent pieces, not one read per piece (at 100,000 ranks a chunk has
/// a dozen pieces of a few rows, and reading each with its own system call took about 6% of
/// the import).
#[derive(Default)]
pub(super) struct ParkedBytes {
    /// Spans read: their offset in the file and their bytes, by offset.
    spans: Vec<(u64, Vec<u8>)>,
}

impl ParkedBytes {
    /// Reads the `pieces` (flushed to `spill` before).
    pub(super) fn read<'a>(
        spill: Option<&SpillFile>,
        pieces: impl Iterator<Item = &'a Piece>,
    ) -> Result<ParkedBytes> {
        let mut wanted: Vec<Piece> = pieces.copied().collect();
        let Some(spill) = spill.filter(|_| !wanted.is_empty()) else {
            return Ok(ParkedBytes::default());
        };
        wanted.sort_unstable();
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        for (offset, len) in wanted {
            let end = offset + u64::from(len);
            match ranges.last_mut() {
                Some((_, span_end)) if offset <= *span_end + READ_GAP => {
                    *span_end = (*span_end).max(end);
                }
                _ => ranges.push((offset, end)),
            }
        }
        let mut spans = Vec::with_capacity(ranges.len());
        for (start, end) in ranges {
            let len = u32::try_from(end - start).map_err(|_| {
                crate::Error::Storage("a span of parked pieces exceeds 4 GiB".into())
            })?;
            spans.push((start, spill.read(start, len)?));
        }
        Ok(ParkedBytes { spans })
    }

    /// The bytes of a piece read by [`ParkedBytes::read`].
    fn piece(&self, (offset, len): Piece) -> &[u8] {
        let i = self.spans.partition_point(|(start, _)| *start <= offset) - 1;
        let (start, bytes) = &self.spans[i];
        let at = (offset - start) as usize;
        &bytes[at..at + len as usize]
    }
}

/// Joins a chunk's parked pieces (in the order they were parked) and its last rows, `rows`
/// in all.
pub(super) fn join_pieces(
    parked: &ParkedBytes,
    pieces: &[Piece],
    last: OperationRows,
    chunk: u32,
    rows: usize,
) -> Result<Columns> {
    if pieces.is_empty() {
        return Ok(last.into_columns());
    }
    let mut joined = OperationRows::with_capacity(rows.min(CHUNK_ROWS));
    for &piece in pieces {
        joined.decode_piece(
            parked.piece(piece),
            &format_args!("a parked piece of operation chunk {chunk}"),
        )?;
    }
    joined.append(last);
    Ok(joined.into_columns())
}

/// Lays finished operation chunks back to back into packs and writes each pack with its
/// posting lists when it is full.
#[derive(Default)]
pub(super) struct OpPacker {
    bytes: Vec<u8>,
    rows: usize,
    chunks: Vec<(u32, u32, u32)>,
    /// Whether a chunk in the pack was encoded without compression (a short one): the pack
    /// is then compressed whole, where the short chunks' columns have company.
    compress: bool,
    /// The pack's index groups, as the ids of its chunks' lists one after another.
    postings: HashMap<(IndexDim, u32), Vec<u64>>,
    /// The pack's ids by process: each chunk's whole id range, added as a range.
    by_rank: HashMap<u32, RoaringTreemap>,
    next_pack: u32,
    placed: Vec<Placement>,
}

impl OpPacker {
    /// Adds an encoded chunk of `rank`'s, of `rows` rows, with its index groups (the process
    /// index, the chunk's whole id range, is added here).
    pub(super) fn add(
        &mut self,
        writer: &mut TraceWriter<'_>,
        chunk: u32,
        rank: u32,
        rows: usize,
        bytes: Vec<u8>,
        postings: Postings,
    ) -> Result<()> {
        let short = rows < SHORT_CHUNK_ROWS;
        if self.rows > 0 && self.rows + rows > CHUNK_ROWS {
            self.flush(writer)?;
        }
        let offset = u32::try_from(self.bytes.len()).ok();
        let len = u32::try_from(bytes.len()).ok();
        let (Some(offset), Some(len)) = (offset, len) else {
            return Err(crate::Error::Storage(
                "an operation pack grew past 4 GiB".into(),
            ));
        };
        self.bytes.extend_from_slice(&bytes);
        self.rows += rows;
        self.chunks.push((chunk, offset, len));
        self.compress |= short;
        (self.by_rank.entry(rank).or_default()).insert_range(chunk_ids(chunk, rows));
        for (dim, value, ids) in postings {
            self.postings.entry((dim, value)).or_default().extend(ids);
        }
        Ok(())
    }

    /// Writes the pack being filled, if any.
    pub(super) fn flush(&mut self, writer: &mut TraceWriter<'_>) -> Result<()> {
        if self.chunks.is_empty() {
            return Ok(());
        }
        let pack = self.next_pack;
        self.next_pack += 1;
        writer.put_op_pack(pack, &self.bytes, std::mem::take(&mut self.compress))?;
        let mut by_dim: HashMap<IndexDim, Vec<(u32, RoaringTreemap)>> = HashMap::default();
        by_dim.insert(IndexDim::Process, self.by_rank.drain().collect());
        for ((dim, value), mut ids) in self.postings.drain() {
            // Chunks reach the pack in the order they fill, not by number; the lists of one
            // chunk ascend, so the sort merges runs.
            ids.sort();
            ids.dedup();
            let bitmap = RoaringTreemap::from_sorted_iter(ids).expect("sorted and unique");
            by_dim.entry(dim).or_default().push((value, bitmap));
        }
        let mut dims: Vec<_> = by_dim.into_iter().collect();
        dims.sort_by_key(|(dim, _)| *dim as u8);
        for (dim, mut postings) in dims {
            writer.put_encoded_postings(dim, pack, encode_postings(&mut postings))?;
        }
        self.placed.extend(
            self.chunks
                .drain(..)
                .map(|(chunk, offset, len)| (chunk, pack, offset, len)),
        );
        self.bytes.clear();
        self.rows = 0;
        Ok(())
    }

    /// Writes the last pack; returns where every chunk went.
    pub(super) fn finish(mut self, writer: &mut TraceWriter<'_>) -> Result<Vec<Placement>> {
        self.flush(writer)?;
        Ok(self.placed)
    }
}

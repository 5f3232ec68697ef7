//! How an operation or message id names a stored row: the high bits its chunk, the low 16
//! bits its row within the chunk. Only this module knows that layout; readers above the store
//! get a row's id from its chunk reader ([`OperationColumns::id`], [`MessageColumns::id`]) and
//! an id's chunk and row from [`chunk_and_row`].
//!
//! [`OperationColumns::id`]: super::OperationColumns::id
//! [`MessageColumns::id`]: super::MessageColumns::id

use std::ops::Range;

/// The most rows one chunk holds: one roaring container's worth, so that the high bits of an
/// id name its chunk and the low 16 bits its row. The importer fills chunks up to it.
pub const CHUNK_ROWS: usize = 1 << 16;

/// The id of row `row` of chunk `chunk`: 64 bits, so that ids never run out before chunk
/// numbers do (2^32 chunks of 2^16 rows).
pub fn row_id(chunk: u32, row: usize) -> u64 {
    (u64::from(chunk) << 16) | (row as u64 & 0xffff)
}

/// The ids of the first `rows` rows of chunk `chunk` (at most all it can hold).
pub fn chunk_ids(chunk: u32, rows: usize) -> Range<u64> {
    row_id(chunk, 0)..row_id(chunk, 0) + rows.min(CHUNK_ROWS) as u64
}

/// Every id chunk `chunk` can hold, whether or not it has that many rows: to keep or drop a
/// whole chunk's ids in a bitmap.
pub fn chunk_id_space(chunk: u32) -> Range<u64> {
    chunk_ids(chunk, CHUNK_ROWS)
}

/// The chunk and the row within it of an operation or message id (`u32::MAX` as the chunk of
/// an id beyond every chunk).
pub fn chunk_and_row(id: u64) -> (u32, usize) {
    (
        u32::try_from(id >> 16).unwrap_or(u32::MAX),
        (id & 0xffff) as usize,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_name_chunk_and_row() {
        assert_eq!(row_id(3, 17), 3 * 65_536 + 17);
        assert_eq!(chunk_and_row(row_id(65_535, 65_535)), (65_535, 65_535));
        assert_eq!(chunk_id_space(2), row_id(2, 0)..row_id(3, 0));
        assert_eq!(chunk_ids(2, 5), row_id(2, 0)..row_id(2, 5));
    }
}

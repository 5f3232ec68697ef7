//! The column codec: each column of a chunk is encoded on its own with whichever of a few
//! lightweight encodings is smallest (constant, dictionary bit-packing, delta varints, plain
//! varints), then zstd-compressed when that helps. A chunk ends with a CRC-32 of its bytes,
//! verified on every read.

use std::borrow::Cow;

use crate::error::{Error, Result};

/// Appends `v` as a LEB128 varint.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a LEB128 varint at `*pos`, advancing it.
pub fn get_varint(buf: &[u8], pos: &mut usize) -> Result<u64> {
    let mut v: u64 = 0;
    let mut shift = 0u32;
    loop {
        let Some(&b) = buf.get(*pos) else {
            return Err(corrupt("varint runs past the end of its column"));
        };
        *pos += 1;
        if shift >= 64 {
            return Err(corrupt("varint longer than 64 bits"));
        }
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
        shift += 7;
    }
}

/// [`get_varint`] with a fast path for the one- and two-byte values that make up most columns.
#[inline(always)]
fn next_varint(buf: &[u8], pos: &mut usize) -> Result<u64> {
    if let Some(&b0) = buf.get(*pos) {
        if b0 < 0x80 {
            *pos += 1;
            return Ok(u64::from(b0));
        }
        if let Some(&b1) = buf.get(*pos + 1) {
            if b1 < 0x80 {
                *pos += 2;
                return Ok(u64::from(b0 & 0x7f) | (u64::from(b1) << 7));
            }
        }
    }
    get_varint(buf, pos)
}

/// Maps a signed value onto an unsigned one so that small magnitudes stay small.
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// The inverse of [`zigzag`].
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

fn corrupt(what: &str) -> Error {
    Error::Corrupt(what.to_string())
}

const ENC_CONST: u8 = 0;
const ENC_DICT: u8 = 1;
const ENC_DELTA: u8 = 2;
const ENC_PLAIN: u8 = 3;
/// Set on the encoding byte when the payload after it is zstd-compressed.
const ZSTD_FLAG: u8 = 0x80;
/// Columns smaller than this are never worth a zstd frame.
const ZSTD_MIN_LEN: usize = 64;
const ZSTD_LEVEL: i32 = 1;

thread_local! {
    /// One zstd decompression context per thread: creating one per column costs more than
    /// decompressing a small column.
    // Creating a context fails only when memory is exhausted, where allocation aborts anyway.
    #[allow(clippy::expect_used)]
    static DECOMPRESSOR: std::cell::RefCell<zstd::bulk::Decompressor<'static>> =
        std::cell::RefCell::new(zstd::bulk::Decompressor::new().expect("zstd allocates a context"));
    /// Likewise one compression context per thread (allocating one per column showed up as
    /// page faults in import profiles).
    #[allow(clippy::expect_used)]
    static COMPRESSOR: std::cell::RefCell<zstd::bulk::Compressor<'static>> =
        std::cell::RefCell::new(zstd::bulk::Compressor::new(ZSTD_LEVEL).expect("zstd allocates a context"));
}

/// Encodes a column of `values` (its length is known to the reader) and appends it to `out`
/// as `varint(len) bytes`.
pub fn encode_column(values: &[u64], out: &mut Vec<u8>) {
    let mut body = take_scratch();
    encode_body(values, &mut body);
    if body.len() >= ZSTD_MIN_LEN {
        let packed = COMPRESSOR.with(|c| c.borrow_mut().compress(&body[1..]));
        if let Ok(packed) = packed {
            if packed.len() + 5 < body.len() - 1 {
                let mut framed = Vec::with_capacity(packed.len() + 6);
                framed.push(body[0] | ZSTD_FLAG);
                put_varint(&mut framed, (body.len() - 1) as u64);
                framed.extend_from_slice(&packed);
                put_varint(out, framed.len() as u64);
                out.extend_from_slice(&framed);
                return give_back_scratch(body);
            }
        }
    }
    put_varint(out, body.len() as u64);
    out.extend_from_slice(&body);
    give_back_scratch(body);
}

thread_local! {
    /// A column's encoding before its length is known, kept per thread: a chunk of a few rows
    /// encodes seventeen columns, and allocating a buffer for each showed in import profiles
    /// at 100,000 ranks.
    static SCRATCH: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// The thread's scratch buffer, empty.
fn take_scratch() -> Vec<u8> {
    let mut v = SCRATCH.take();
    v.clear();
    v
}

/// Returns the scratch buffer for the next column, unless it grew past 1 MiB.
fn give_back_scratch(v: Vec<u8>) {
    if v.capacity() <= 1 << 20 {
        SCRATCH.set(v);
    }
}

/// [`encode_column`] without the zstd pass: for scratch data read back once (an import's
/// spilled rows), where compressing costs more than the bytes it saves.
pub fn encode_column_fast(values: &[u64], out: &mut Vec<u8>) {
    let mut body = take_scratch();
    encode_body(values, &mut body);
    put_varint(out, body.len() as u64);
    out.extend_from_slice(&body);
    give_back_scratch(body);
}

/// Decodes the column at `*pos` holding `rows` values, advancing `pos`.
pub fn decode_column(buf: &[u8], pos: &mut usize, rows: usize) -> Result<Vec<u64>> {
    decode_column_prefix(buf, pos, rows, rows)
}

/// Decodes only the first `take` of the column's `rows` values (a delta column must be read
/// from its start, but a reader that needs rows up to some row can stop there), advancing
/// `pos` past the whole column.
pub fn decode_column_prefix(
    buf: &[u8],
    pos: &mut usize,
    rows: usize,
    take: usize,
) -> Result<Vec<u64>> {
    let mut out = Vec::with_capacity(take.min(rows));
    decode_column_prefix_into(buf, pos, rows, take, &mut out)?;
    Ok(out)
}

/// [`decode_column_prefix`] into `out`, which is emptied first: for a reader of many small
/// columns that keeps one buffer.
pub fn decode_column_prefix_into(
    buf: &[u8],
    pos: &mut usize,
    rows: usize,
    take: usize,
    out: &mut Vec<u64>,
) -> Result<()> {
    let (enc, body) = column_body(buf, pos)?;
    out.clear();
    ColumnReader::new(enc, &body, rows)?.read(&body, take.min(rows), out)
}

/// The column at `*pos`: its encoding and its body as encoded (decompressed if it was
/// compressed, borrowed from `buf` otherwise), advancing `pos` past it. Read its values with
/// a [`ColumnReader`].
pub fn column_body<'a>(buf: &'a [u8], pos: &mut usize) -> Result<(u8, Cow<'a, [u8]>)> {
    let len = next_varint(buf, pos)? as usize;
    let end = pos
        .checked_add(len)
        .filter(|&e| e <= buf.len())
        .ok_or_else(|| corrupt("column runs past the end of its chunk"))?;
    let body = &buf[*pos..end];
    *pos = end;
    let (&enc, rest) = body.split_first().ok_or_else(|| corrupt("empty column"))?;
    if enc & ZSTD_FLAG != 0 {
        let mut p = 0;
        let raw_len = get_varint(rest, &mut p)? as usize;
        let raw = DECOMPRESSOR
            .with(|d| d.borrow_mut().decompress(&rest[p..], raw_len))
            .map_err(|e| Error::Corrupt(format!("column does not decompress: {e}")))?;
        Ok((enc & !ZSTD_FLAG, Cow::Owned(raw)))
    } else {
        Ok((enc, Cow::Borrowed(rest)))
    }
}

/// Moves `pos` past the column there without decoding it.
pub fn skip_column(buf: &[u8], pos: &mut usize) -> Result<()> {
    // Inlined: a read of one column of a small chunk skips the others by their lengths, and
    // a call per length was a fifth of it (`perf`, 16,384 chunks of a few dozen rows).
    let len = next_varint(buf, pos)? as usize;
    *pos = pos
        .checked_add(len)
        .filter(|&e| e <= buf.len())
        .ok_or_else(|| corrupt("column runs past the end of its chunk"))?;
    Ok(())
}

/// A column being read a window of rows at a time: where the reader is in the column's body
/// (which the caller keeps, see [`column_body`], and passes to every [`ColumnReader::read`]).
/// A scan reads a column whole in one call; the replay keeps thousands of locations' chunks
/// open and reads each a few hundred rows at a time, so that only those rows are decoded.
#[derive(Debug, Clone)]
pub struct ColumnReader {
    enc: u8,
    /// Rows in the column, and rows read so far.
    rows: usize,
    row: usize,
    /// The next value's place in the body (delta and plain varints), or where the packed codes
    /// begin (dictionary).
    pos: usize,
    /// The last value read (delta), or the column's one value (constant).
    prev: u64,
    /// The dictionary's values (dictionary encoding only, shared by the reader's copies; the
    /// other encodings allocate nothing: a scan makes a reader per column of every chunk).
    dict: Option<std::sync::Arc<[u64]>>,
}

impl ColumnReader {
    /// A reader of the first of `rows` values of a column encoded as `enc` in `body`.
    pub fn new(enc: u8, body: &[u8], rows: usize) -> Result<ColumnReader> {
        let mut reader = ColumnReader {
            enc,
            rows,
            row: 0,
            pos: 0,
            prev: 0,
            dict: None,
        };
        match enc {
            ENC_CONST => reader.prev = get_varint(body, &mut reader.pos)?,
            ENC_DICT => {
                let n = *body.first().ok_or_else(|| corrupt("empty dictionary"))? as usize;
                reader.pos = 1;
                let mut dict = Vec::with_capacity(n);
                for _ in 0..n {
                    dict.push(get_varint(body, &mut reader.pos)?);
                }
                reader.dict = Some(dict.into());
                let packed = body.len() - reader.pos;
                if packed < rows.div_ceil(8 / dict_bits(n)) {
                    return Err(corrupt("dictionary column is short"));
                }
            }
            ENC_DELTA | ENC_PLAIN => {}
            other => return Err(Error::Corrupt(format!("unknown column encoding {other}"))),
        }
        Ok(reader)
    }

    /// Appends the next `n` values (fewer at the column's end) to `out`; `body` is the one
    /// the reader was made for.
    pub fn read(&mut self, body: &[u8], n: usize, out: &mut Vec<u64>) -> Result<()> {
        let n = n.min(self.rows - self.row);
        out.reserve(n);
        match self.enc {
            ENC_CONST => out.extend(std::iter::repeat_n(self.prev, n)),
            ENC_DICT => {
                let dict = self.dict.as_deref().unwrap_or_default();
                let bits = dict_bits(dict.len());
                let per_byte = 8 / bits;
                let mask = (1usize << bits) - 1;
                // Every code a byte can hold, with a bit of `known` set for those that map to
                // a value (a damaged column may hold others).
                // (Codes have at most four bits: entries past the sixteenth are unreachable.)
                let reachable = dict.len().min(16);
                let mut table = [0u64; 16];
                table[..reachable].copy_from_slice(&dict[..reachable]);
                let known = (1u32 << reachable) - 1;
                let mut unknown = 0u32;
                let (mut row, end) = (self.row, self.row + n);
                for &byte in &body[self.pos + row / per_byte..self.pos + end.div_ceil(per_byte)] {
                    let mut codes = usize::from(byte) >> ((row % per_byte) * bits);
                    for _ in row % per_byte..per_byte.min(row % per_byte + end - row) {
                        let code = codes & mask;
                        unknown |= !known & (1 << code);
                        out.push(table[code]);
                        codes >>= bits;
                        row += 1;
                    }
                }
                if unknown != 0 {
                    return Err(corrupt("dictionary code out of range"));
                }
            }
            ENC_DELTA => {
                let mut prev = self.prev;
                for _ in 0..n {
                    prev = prev.wrapping_add(unzigzag(next_varint(body, &mut self.pos)?) as u64);
                    out.push(prev);
                }
                self.prev = prev;
            }
            _ => {
                for _ in 0..n {
                    out.push(next_varint(body, &mut self.pos)?);
                }
            }
        }
        self.row += n;
        Ok(())
    }
}

/// Bytes of `v` as a LEB128 varint.
fn varint_len(v: u64) -> usize {
    // Seven bits a byte, rounded up: one multiply and shift (`div_ceil` took two of them and
    // a select, a third of the encoder's sizing pass).
    ((70 - (v | 1).leading_zeros()) / 7) as usize
}

/// Bits per code of a dictionary of `n` entries.
fn dict_bits(n: usize) -> usize {
    match n {
        0..=2 => 1,
        3..=4 => 2,
        _ => 4,
    }
}

/// The distinct values of a column in order of first appearance, if there are at most 16.
fn small_dictionary(values: &[u64]) -> Option<Dictionary> {
    let first = *values.first()?;
    let mut dict = Dictionary {
        values: [0; 16],
        len: 0,
    };
    dict.values[0] = first;
    dict.len = 1;
    let mut last = first;
    for &v in values {
        // Equal neighbours are common; only a new value needs the dictionary scan.
        if v != last && !dict.contains(&v) {
            if dict.len == 16 {
                return None;
            }
            dict.values[dict.len] = v;
            dict.len += 1;
        }
        last = v;
    }
    Some(dict)
}

/// Up to 16 distinct values, on the stack (one per column encoded).
struct Dictionary {
    values: [u64; 16],
    len: usize,
}

impl std::ops::Deref for Dictionary {
    type Target = [u64];

    fn deref(&self) -> &[u64] {
        &self.values[..self.len]
    }
}

/// Encodes a column with whichever encoding is smallest; only the winner is written.
fn encode_body(values: &[u64], out: &mut Vec<u8>) {
    let Some(&first) = values.first() else {
        out.push(ENC_CONST);
        put_varint(out, 0);
        return;
    };
    let dict = small_dictionary(values);
    let dict_len = match &dict {
        Some(dict) if dict.len() == 1 => {
            out.push(ENC_CONST);
            put_varint(out, first);
            return;
        }
        Some(dict) => {
            2 + dict.iter().map(|&d| varint_len(d)).sum::<usize>()
                + values.len().div_ceil(8 / dict_bits(dict.len()))
        }
        None => usize::MAX,
    };
    // Every varint takes at least a byte: a dictionary no longer than one byte per value
    // wins without sizing the other two encodings.
    if let Some(dict) = dict.as_ref().filter(|_| dict_len <= values.len()) {
        encode_dict(values, dict, out);
        return;
    }
    let (mut delta_len, mut plain_len) = (0usize, 0usize);
    let mut prev = 0u64;
    for &v in values {
        delta_len += varint_len(zigzag(v.wrapping_sub(prev) as i64));
        plain_len += varint_len(v);
        prev = v;
    }
    match dict {
        Some(dict) if dict_len <= delta_len && dict_len <= plain_len => {
            encode_dict(values, &dict, out)
        }
        _ if delta_len <= plain_len => {
            out.reserve(delta_len + 1);
            out.push(ENC_DELTA);
            let mut prev = 0u64;
            for &v in values {
                put_varint(out, zigzag(v.wrapping_sub(prev) as i64));
                prev = v;
            }
        }
        _ => {
            out.reserve(plain_len + 1);
            out.push(ENC_PLAIN);
            for &v in values {
                put_varint(out, v);
            }
        }
    }
}

/// Dictionary encoding for columns of at most 16 distinct values: the dictionary, then each
/// row's code bit-packed in 1, 2 or 4 bits.
fn encode_dict(values: &[u64], dict: &[u64], out: &mut Vec<u8>) {
    let bits = dict_bits(dict.len());
    out.push(ENC_DICT);
    out.push(dict.len() as u8);
    for &d in dict {
        put_varint(out, d);
    }
    let per_byte = 8 / bits;
    let (mut last, mut last_code) = (dict[0], 0u8);
    for group in values.chunks(per_byte) {
        let mut byte = 0u8;
        for (i, &v) in group.iter().enumerate() {
            if v != last {
                last = v;
                // The dictionary was built from these very values.
                #[allow(clippy::expect_used)]
                let code = dict
                    .iter()
                    .position(|&d| d == v)
                    .expect("value in dictionary");
                last_code = code as u8;
            }
            byte |= last_code << (i * bits);
        }
        out.push(byte);
    }
}

/// Appends the CRC-32 of everything in `buf` so far.
pub fn seal(buf: &mut Vec<u8>) {
    seal_from(buf, 0);
}

/// Appends the CRC-32 of `buf[start..]`: seals what follows a prefix of `start` bytes.
pub fn seal_from(buf: &mut Vec<u8>, start: usize) {
    let crc = crc32fast::hash(&buf[start..]);
    buf.extend_from_slice(&crc.to_le_bytes());
}

/// Verifies and strips the CRC-32 that [`seal`] appended; `what` names the value for the error.
pub fn unseal<'a, W: std::fmt::Display + ?Sized>(buf: &'a [u8], what: &W) -> Result<&'a [u8]> {
    if buf.len() < 4 {
        return Err(Error::Corrupt(format!("{what} is truncated")));
    }
    let (body, tail) = buf.split_at(buf.len() - 4);
    let stored = u32::from_le_bytes(
        tail.try_into()
            .map_err(|_| Error::Corrupt(format!("{what} is truncated")))?,
    );
    if crc32fast::hash(body) != stored {
        return Err(Error::Corrupt(format!("{what} fails its checksum")));
    }
    Ok(body)
}

/// The body of sealed bytes whose checksum need not be checked again: read from a segment,
/// which checks every blob it reads against its directory.
pub fn strip_seal<'a, W: std::fmt::Display + ?Sized>(buf: &'a [u8], what: &W) -> Result<&'a [u8]> {
    buf.len()
        .checked_sub(4)
        .map(|body| &buf[..body])
        .ok_or_else(|| Error::Corrupt(format!("{what} is truncated")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_len_is_the_written_length_at_every_width() {
        let mut values = vec![0, 1, u64::MAX];
        for bit in 0..64 {
            let v = 1u64 << bit;
            values.extend([v - 1, v, v | (v >> 1), v.wrapping_mul(2).wrapping_sub(1)]);
        }
        for v in values {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(varint_len(v), out.len(), "{v:#x}");
        }
    }

    fn round_trip(values: &[u64]) -> usize {
        let mut buf = Vec::new();
        encode_column(values, &mut buf);
        let mut pos = 0;
        let back = decode_column(&buf, &mut pos, values.len()).unwrap();
        assert_eq!(back, values);
        assert_eq!(pos, buf.len());
        buf.len()
    }

    #[test]
    fn constant_column_is_a_few_bytes() {
        assert!(round_trip(&vec![42u64; 65_536]) <= 4);
    }

    #[test]
    fn dictionary_column_packs_codes() {
        let values: Vec<u64> = (0..1000u64).map(|i| [7, 9, 11][(i % 3) as usize]).collect();
        let len = round_trip(&values);
        assert!(len <= 1000 / 4 + 16, "{len}");
    }

    #[test]
    fn dictionary_keeps_a_first_value_that_never_comes_back() {
        round_trip(&[5, 1, 1, 2, 2, 1, 2, 2, 2, 1]);
        round_trip(&[9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn increasing_times_use_deltas() {
        let values: Vec<u64> = (0..10_000u64)
            .map(|i| 1_000_000_000 + i * 1_000 + (i * 7919 % 13))
            .collect();
        let len = round_trip(&values);
        assert!(len < 10_000 * 2 + 16, "{len}");
    }

    #[test]
    fn extremes_round_trip() {
        round_trip(&[]);
        round_trip(&[u64::MAX, 0, u64::MAX, 1, 5]);
        round_trip(&(0..17u64).collect::<Vec<_>>());
        round_trip(
            &(0..100u64)
                .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
                .collect::<Vec<_>>(),
        );
    }

    proptest::proptest! {
        /// Any column, of any mix of runs, small domains and wide values, decodes to itself.
        #[test]
        fn any_column_round_trips(
            values in proptest::collection::vec(
                proptest::prop_oneof![0u64..4, 0u64..20, proptest::num::u64::ANY],
                0..600,
            ),
            take in 0usize..700,
        ) {
            round_trip(&values);
            let mut buf = Vec::new();
            encode_column(&values, &mut buf);
            let mut pos = 0;
            let prefix = decode_column_prefix(&buf, &mut pos, values.len(), take).unwrap();
            proptest::prop_assert_eq!(&prefix[..], &values[..take.min(values.len())]);
            proptest::prop_assert_eq!(pos, buf.len());
        }

        /// Read a window at a time, windows of any sizes, a column gives its values in order
        /// and nothing past its end.
        #[test]
        fn a_column_read_in_windows_is_the_column(
            values in proptest::collection::vec(
                proptest::prop_oneof![0u64..2, 0u64..5, 0u64..20, proptest::num::u64::ANY],
                0..600,
            ),
            windows in proptest::collection::vec(0usize..80, 1..40),
        ) {
            let mut buf = Vec::new();
            encode_column(&values, &mut buf);
            let mut pos = 0;
            let (enc, body) = column_body(&buf, &mut pos).unwrap();
            let mut reader = ColumnReader::new(enc, &body, values.len()).unwrap();
            let mut out = Vec::new();
            for n in windows.iter().cycle().take(values.len() + 2) {
                let before = out.len();
                reader.read(&body, *n, &mut out).unwrap();
                proptest::prop_assert_eq!(out.len() - before, (*n).min(values.len() - before));
            }
            reader.read(&body, values.len() + 1, &mut out).unwrap();
            proptest::prop_assert_eq!(out, values);
        }
    }

    #[test]
    fn zigzag_round_trips() {
        for v in [0i64, 1, -1, i64::MAX, i64::MIN, 123_456, -987_654] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
    }

    #[test]
    fn checksum_detects_a_flipped_bit() {
        let mut buf = b"some chunk bytes".to_vec();
        seal(&mut buf);
        assert_eq!(unseal(&buf, "chunk").unwrap(), b"some chunk bytes");
        buf[3] ^= 1;
        let err = unseal(&buf, "chunk 7 of trace wrf16").unwrap_err();
        assert_eq!(
            err.to_string(),
            "corrupt database: chunk 7 of trace wrf16 fails its checksum"
        );
    }

    #[test]
    fn truncated_column_is_an_error_not_a_panic() {
        let mut buf = Vec::new();
        encode_column(&(0..1000u64).map(|i| i * i).collect::<Vec<_>>(), &mut buf);
        for cut in [1, 2, buf.len() / 2, buf.len() - 1] {
            let mut pos = 0;
            assert!(decode_column(&buf[..cut], &mut pos, 1000).is_err());
        }
    }
}

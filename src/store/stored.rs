//! Stored files: one immutable file per view or stored analysis result of a trace, in
//! `<db>/stored/`, named by the catalog ([`super::catalog::StoredRef`]).
//!
//! A file is `<trace id>-<generation>-<n>.bin`, the generation being the catalog's that
//! publishes it and `n` counting the files one change writes for one trace. Its content describes itself, so that a lost catalog can be rebuilt from
//! the files alone (`mtfdb check --repair`):
//!
//! | bytes | what |
//! |---|---|
//! | 8 | magic `mtfdbsto` |
//! | 8 | the trace id (u64 LE) |
//! | 4 | the key's length (u32 LE) |
//! | … | the key (`v:<view name>` or `r:<result key>`, UTF-8) |
//! | … | the value |
//! | 4 | CRC-32 of everything before it |

use std::fs::File;
use std::io::Write;
use std::path::Path;

use super::catalog::StoredRef;
use super::codec::{seal, unseal};
use crate::error::{Error, Result};

/// The folder of stored files inside the database folder.
pub const STORED_DIR: &str = "stored";
const MAGIC: &[u8; 8] = b"mtfdbsto";

/// A stored file's name: the trace id, the generation that published it, and its number
/// among the files that change wrote for the trace.
pub fn file_name(trace: u64, generation: u64, n: usize) -> String {
    format!("{trace}-{generation}-{n}.bin")
}

/// The trace id, generation and number of a stored file's name, if it is one.
pub fn parse_name(name: &str) -> Option<(u64, u64, usize)> {
    let mut parts = name.strip_suffix(".bin")?.split('-');
    let (Some(trace), Some(generation), Some(n), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    Some((
        trace.parse().ok()?,
        generation.parse().ok()?,
        n.parse().ok()?,
    ))
}

/// Writes the stored file `n` of `key` for trace `trace` under `generation` (which must not
/// exist) and makes it durable (the folder is synced by the commit that names it). On any
/// error, a full disk above all, nothing is left behind.
pub fn write(
    dir: &Path,
    (trace, generation, n): (u64, u64, usize),
    key: &str,
    value: &[u8],
) -> Result<StoredRef> {
    let name = file_name(trace, generation, n);
    let path = dir.join(&name);
    let mut bytes = Vec::with_capacity(24 + key.len() + value.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&trace.to_le_bytes());
    bytes.extend_from_slice(&(key.len() as u32).to_le_bytes());
    bytes.extend_from_slice(key.as_bytes());
    bytes.extend_from_slice(value);
    seal(&mut bytes);
    let checksum = u32::from_le_bytes([
        bytes[bytes.len() - 4],
        bytes[bytes.len() - 3],
        bytes[bytes.len() - 2],
        bytes[bytes.len() - 1],
    ]);
    let written = File::options()
        .write(true)
        .create_new(true)
        .open(&path)
        .and_then(|mut f| {
            f.write_all(&bytes)?;
            f.sync_all()
        });
    if let Err(e) = written {
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            let _ = std::fs::remove_file(&path);
        }
        return Err(Error::io(&path, e));
    }
    Ok(StoredRef {
        file: name,
        size: bytes.len() as u64,
        checksum,
    })
}

/// A stored file's content: the trace id, the key and the value.
#[derive(Debug)]
pub struct StoredFile {
    /// The trace it belongs to.
    pub trace: u64,
    /// Its key.
    pub key: String,
    /// Its value.
    pub value: Vec<u8>,
}

/// Decodes a stored file's bytes, checking its checksum (`what` names it in errors).
pub fn decode(bytes: &[u8], what: &str) -> Result<StoredFile> {
    let body = unseal(bytes, what)?;
    let truncated = || Error::Corrupt(format!("{what} is truncated"));
    if body.len() < 20 || &body[..8] != MAGIC {
        return Err(Error::Corrupt(format!("{what} is not a stored file")));
    }
    let trace = u64::from_le_bytes(body[8..16].try_into().map_err(|_| truncated())?);
    let key_len = u32::from_le_bytes(body[16..20].try_into().map_err(|_| truncated())?) as usize;
    let key_end = 20usize
        .checked_add(key_len)
        .filter(|&e| e <= body.len())
        .ok_or_else(truncated)?;
    let key = std::str::from_utf8(&body[20..key_end])
        .map_err(|_| Error::Corrupt(format!("{what} has a damaged key")))?
        .to_string();
    Ok(StoredFile {
        trace,
        key,
        value: body[key_end..].to_vec(),
    })
}

/// Reads the stored file `r` names, checked against its size and checksum; `None` if it is
/// gone (a writer replaced it since the caller read the catalog).
pub fn read(dir: &Path, r: &StoredRef, what: &str) -> Result<Option<StoredFile>> {
    let path = dir.join(&r.file);
    match std::fs::read(&path) {
        Ok(bytes) => verify(&bytes, r, &format!("{what} ({})", path.display())).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(&path, e)),
    }
}

/// Reads the stored file `r` names through a descriptor opened earlier (a reader's
/// snapshot: the file may have been removed since), checked as [`read`] checks it.
pub fn read_open(file: &File, path: &Path, r: &StoredRef, what: &str) -> Result<StoredFile> {
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    let mut bytes =
        vec![
            0u8;
            usize::try_from(len)
                .map_err(|_| Error::io(path, std::io::ErrorKind::FileTooLarge.into()))?
        ];
    std::os::unix::fs::FileExt::read_exact_at(file, &mut bytes, 0)
        .map_err(|e| Error::io(path, e))?;
    verify(&bytes, r, &format!("{what} ({})", path.display()))
}

/// A stored file's bytes checked against what the catalog recorded of it: its size and its
/// checksum (`what` names it in errors).
fn verify(bytes: &[u8], r: &StoredRef, what: &str) -> Result<StoredFile> {
    if bytes.len() as u64 != r.size {
        return Err(Error::Corrupt(format!(
            "{what} has {} bytes, not the {} it was written with",
            bytes.len(),
            r.size
        )));
    }
    let file = decode(bytes, what)?;
    if crc32fast::hash(&bytes[..bytes.len() - 4]) != r.checksum {
        return Err(Error::Corrupt(format!(
            "{what} is not the file the catalog names (another checksum)"
        )));
    }
    Ok(file)
}

impl StoredFile {
    /// The value, when the file is trace `trace`'s under `key` as the catalog says; an error
    /// naming `path` otherwise.
    pub fn value_of(self, trace: u64, key: &str, what: &str, path: &Path) -> Result<Vec<u8>> {
        if self.trace != trace || self.key != key {
            return Err(Error::Corrupt(format!(
                "{what} ({}) holds another trace's or key's value",
                path.display()
            )));
        }
        Ok(self.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_file_reads_back_and_any_flipped_bit_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let r = write(dir.path(), (7, 42, 0), "v:busy ranks", b"the value").unwrap();
        assert_eq!(r.file, "7-42-0.bin");
        assert_eq!(parse_name(&r.file), Some((7, 42, 0)));
        assert_eq!(parse_name("7-42.bin"), None);
        let back = read(dir.path(), &r, "view").unwrap().unwrap();
        assert_eq!((back.trace, back.key.as_str()), (7, "v:busy ranks"));
        assert_eq!(back.value, b"the value");
        let bytes = std::fs::read(dir.path().join(&r.file)).unwrap();
        for bit in 0..bytes.len() * 8 {
            let mut bad = bytes.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(decode(&bad, "view").is_err(), "bit {bit}");
        }
        // Written once: a second write of the same generation is refused, the first kept.
        assert!(write(dir.path(), (7, 42, 0), "v:x", b"other").is_err());
        assert!(read(dir.path(), &r, "view").unwrap().is_some());
        std::fs::remove_file(dir.path().join(&r.file)).unwrap();
        assert!(read(dir.path(), &r, "view").unwrap().is_none());
    }
}

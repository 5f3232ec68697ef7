//! The manifest: the database's catalog ([`Catalog`]) in one small file, published whole.
//!
//! `<db>/MANIFEST` is a line of JSON followed by a line `crc32 <hex>` of that JSON. It is
//! replaced atomically (written to a temporary file beside it, fsync'd, renamed over it,
//! folder fsync'd) at every commit, drop, view and stored result, by the one writer that
//! holds the write lock ([`super::lock`]). A reader reads it once and has a consistent
//! snapshot: every file it names is complete and durable before it is named, and stays
//! readable through descriptors already open after a later change removes it.
//!
//! A full disk fails the temporary file's write: the error is reported, the temporary file
//! removed, and the manifest is the one before.

use std::io::Write;
use std::path::Path;

use super::catalog::Catalog;
use super::segment::sync_dir;
use crate::error::{Error, Result};

/// The manifest's file name inside the database folder.
pub const MANIFEST: &str = "MANIFEST";
/// The temporary file a new manifest is written to before it is renamed over the old one.
pub(crate) const MANIFEST_TMP: &str = "MANIFEST.tmp";

fn damaged(path: &Path, why: &str) -> Error {
    Error::Corrupt(format!(
        "the manifest {} {why}; `mtfdb check --repair` rebuilds it from the trace files",
        path.display()
    ))
}

/// Reads `<dir>/MANIFEST`; `None` if there is none.
pub fn read(dir: &Path) -> Result<Option<Catalog>> {
    let path = dir.join(MANIFEST);
    let text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(&path, e)),
    };
    decode(&text, &path).map(Some)
}

/// The catalog the manifest text `text` holds (read from `path`, for errors).
fn decode(text: &[u8], path: &Path) -> Result<Catalog> {
    let text = std::str::from_utf8(text)
        .map_err(|e| damaged(path, &format!("is not text (byte {})", e.valid_up_to())))?;
    let mut lines = text.split_terminator('\n');
    let (Some(body), Some(crc_line), None) = (lines.next(), lines.next(), lines.next()) else {
        return Err(damaged(path, "does not have its two lines"));
    };
    let crc = crc_line
        .strip_prefix("crc32 ")
        .and_then(|h| u32::from_str_radix(h, 16).ok())
        .ok_or_else(|| {
            damaged(
                path,
                &format!("has a damaged checksum line at byte {}", body.len() + 1),
            )
        })?;
    if crc32fast::hash(body.as_bytes()) != crc {
        return Err(damaged(path, "fails its checksum"));
    }
    serde_json::from_str(body).map_err(|e| damaged(path, &format!("does not decode: {e}")))
}

/// Replaces `<dir>/MANIFEST` with `catalog`, atomically and durably.
pub fn write(dir: &Path, catalog: &Catalog) -> Result<()> {
    let body = serde_json::to_string(catalog)
        .map_err(|e| Error::Storage(format!("the manifest does not serialize: {e}")))?;
    let text = format!("{body}\ncrc32 {:08x}\n", crc32fast::hash(body.as_bytes()));
    let tmp = dir.join(MANIFEST_TMP);
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()
    };
    if let Err(e) = write() {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io(&tmp, e));
    }
    let path = dir.join(MANIFEST);
    if let Err(e) = std::fs::rename(&tmp, &path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io(&path, e));
    }
    sync_dir(dir)
}

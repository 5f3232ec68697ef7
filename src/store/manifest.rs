//! The manifest: a small file beside sled listing the ready traces with their segments, so
//! that a catalog sled's recovery rolled back (or lost) is detected, never trusted.
//!
//! `<db>/MANIFEST` is a line of JSON followed by a line `crc32 <hex>` of that JSON. It is
//! replaced atomically (written to `MANIFEST.tmp`, fsync'd, renamed, folder fsync'd) at every
//! commit and drop, ordered so that after a crash it never names a trace the catalog lacks:
//! a commit updates the catalog first, a drop the manifest first. So on open the catalog may
//! hold more than the manifest (one step interrupted; the manifest is rewritten), never less.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::catalog::{Catalog, CatalogEntry};
use super::segment::sync_dir;
use crate::error::{Error, Result};

/// The manifest's file name inside the database folder.
pub const MANIFEST: &str = "MANIFEST";
const MANIFEST_TMP: &str = "MANIFEST.tmp";

/// What the manifest holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The database's storage format version.
    pub format_version: u32,
    /// The ready traces, as the catalog had them.
    pub traces: Vec<CatalogEntry>,
}

fn damaged(path: &Path, why: &str) -> Error {
    Error::Corrupt(format!("the manifest {} {why}", path.display()))
}

impl Manifest {
    /// The manifest of `catalog`.
    pub fn of(catalog: &Catalog, format_version: u32) -> Manifest {
        Manifest {
            format_version,
            traces: catalog.traces.clone(),
        }
    }

    /// Reads `<dir>/MANIFEST`; `None` if there is none.
    pub fn read(dir: &Path) -> Result<Option<Manifest>> {
        let path = dir.join(MANIFEST);
        let text = match std::fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(&path, e)),
        };
        let text = std::str::from_utf8(&text)
            .map_err(|e| damaged(&path, &format!("is not text (byte {})", e.valid_up_to())))?;
        let mut lines = text.split_terminator('\n');
        let (Some(body), Some(crc_line), None) = (lines.next(), lines.next(), lines.next()) else {
            return Err(damaged(&path, "does not have its two lines"));
        };
        let crc = crc_line
            .strip_prefix("crc32 ")
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or_else(|| {
                damaged(
                    &path,
                    &format!("has a damaged checksum line at byte {}", body.len() + 1),
                )
            })?;
        if crc32fast::hash(body.as_bytes()) != crc {
            return Err(damaged(&path, "fails its checksum"));
        }
        serde_json::from_str(body)
            .map(Some)
            .map_err(|e| damaged(&path, &format!("does not decode: {e}")))
    }

    /// Replaces `<dir>/MANIFEST` atomically and durably.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let body = serde_json::to_string(self)
            .map_err(|e| Error::Storage(format!("the manifest does not serialize: {e}")))?;
        let text = format!("{body}\ncrc32 {:08x}\n", crc32fast::hash(body.as_bytes()));
        let tmp: PathBuf = dir.join(MANIFEST_TMP);
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
        std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
        sync_dir(dir)
    }

    /// How the catalog falls short of the manifest: traces the manifest names that the catalog
    /// lacks or records differently, one sentence each. Empty when the catalog holds at least
    /// the manifest's traces, unchanged.
    pub fn shortfalls(&self, catalog: &Catalog) -> Vec<String> {
        let in_catalog: BTreeMap<u64, &CatalogEntry> =
            catalog.traces.iter().map(|e| (e.id, e)).collect();
        self.traces
            .iter()
            .filter_map(|m| match in_catalog.get(&m.id) {
                None => Some(format!(
                    "trace {:?} is in the manifest but missing from the catalog",
                    m.name
                )),
                Some(c) if *c != m => Some(format!(
                    "trace {:?} is recorded differently by the catalog and the manifest",
                    m.name
                )),
                Some(_) => None,
            })
            .collect()
    }
}

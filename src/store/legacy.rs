//! Databases of storage formats 6 and 7, whose catalog, views and stored results were in a
//! sled database (`<db>/catalog/`) beside the manifest: upgraded to format 8 the first time
//! they are opened with write access. sled is read here and nowhere else; it is never
//! written, so the hang of its flush on a full disk cannot happen.
//!
//! The upgrade writes each view and stored result as a stored file, then the format-8
//! manifest that names them (the one commit: until then the database is the old one), then
//! removes the sled folder (a later writer removes it if the process died first).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::catalog::{Catalog, CatalogEntry, FORMAT_VERSION};
use super::segment::{sync_dir, SegmentRef};
use super::stored::{self, STORED_DIR};
use super::{database_error, decode_meta, lock, manifest, version_error};
use crate::error::{Error, Result};

/// The sled folder of formats 4 to 7 inside the database folder.
pub(crate) const CATALOG_DIR: &str = "catalog";
const KEY_VERSION: &[u8] = b"format_version";
const KEY_CATALOG: &[u8] = b"catalog";
const PER_TRACE_TREE: &str = "per_trace";

/// A trace as formats 6 and 7 recorded it in sled.
#[derive(Serialize, Deserialize)]
struct OldEntry {
    id: u64,
    name: String,
    segment: SegmentRef,
}

/// The catalog as formats 6 and 7 kept it in sled.
#[derive(Serialize, Deserialize)]
struct OldCatalog {
    traces: Vec<OldEntry>,
    next_id: u64,
}

/// Runs a sled call, a panic inside sled (it panics on some damaged files) included, as an
/// error that names the old catalog as damaged.
fn guarded<T>(dir: &Path, call: impl FnOnce() -> std::result::Result<T, sled::Error>) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(call)) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(Error::Corrupt(format!(
            "the format-7 catalog {} cannot be read ({}); the traces' own files are intact if \
             `mtfdb check` says so, and `mtfdb check --repair` rebuilds a catalog from them \
             (without the views and stored results the old catalog held)",
            dir.display(),
            crate::error::sled_words(&e)
        ))),
        Err(_) => Err(Error::Corrupt(format!(
            "the format-7 catalog {} is damaged (sled failed reading it); `mtfdb check \
             --repair` rebuilds a catalog from the traces' own files",
            dir.display()
        ))),
    }
}

fn open_sled(dir: &Path) -> Result<sled::Db> {
    guarded(dir, || {
        sled::Config::new()
            .path(dir)
            .cache_capacity(16 << 20)
            .flush_every_ms(None)
            .open()
    })
}

/// Explains a folder laid out as mtfdb before format 4 (everything in sled, at the top).
pub(crate) fn layout_error(path: &Path) -> Error {
    let version = open_sled(path)
        .ok()
        .and_then(|db| guarded(path, || db.get(KEY_VERSION)).ok().flatten())
        .and_then(|v| <[u8; 4]>::try_from(v.as_ref()).ok());
    match version {
        Some(v) => version_error(path, u32::from_le_bytes(v)),
        None => database_error(
            path,
            "is a sled database but not an mtfdb one (no format version)",
        ),
    }
}

/// Upgrades the database at `path`, whose manifest of an older format holds `old`, to
/// format 8; returns its new catalog.
pub(crate) fn upgrade(path: &Path, old: Catalog) -> Result<Catalog> {
    let _lock = lock::acquire(path, Duration::from_secs(10), "upgrade the database")?;
    // Another process may have upgraded it while this one waited.
    if let Some(now) = manifest::read(path)? {
        if now.format_version == FORMAT_VERSION {
            return Ok(now);
        }
    }
    let sled_dir = path.join(CATALOG_DIR);
    let stored_dir = path.join(STORED_DIR);
    std::fs::create_dir_all(&stored_dir).map_err(|e| Error::io(&stored_dir, e))?;
    let mut catalog = Catalog::new();
    catalog.generation = 1;
    catalog.traces = old.traces.clone();
    catalog.next_id = old.traces.iter().map(|e| e.id + 1).max().unwrap_or(0);
    let mut created = Vec::new();
    if sled_dir.exists() {
        let db = open_sled(&sled_dir)?;
        if let Some(bytes) = guarded(&sled_dir, || db.get(KEY_CATALOG))? {
            let what = format!("the format-7 catalog {}", sled_dir.display());
            let listed: OldCatalog = decode_meta(&bytes, &what)?;
            catalog.next_id = catalog.next_id.max(listed.next_id);
            // The old catalog may hold a trace the manifest lacks (a commit interrupted
            // between its two steps): it was complete, so it is kept.
            for e in listed.traces {
                if catalog.trace_by_id(e.id).is_none() {
                    catalog.next_id = catalog.next_id.max(e.id + 1);
                    catalog.traces.push(CatalogEntry {
                        id: e.id,
                        name: e.name,
                        segment: e.segment,
                        stored: Default::default(),
                    });
                }
            }
        }
        let tree = guarded(&sled_dir, || db.open_tree(PER_TRACE_TREE))?;
        let entries: Vec<(sled::IVec, sled::IVec)> = guarded(&sled_dir, || tree.iter().collect())?;
        let mut counts: std::collections::HashMap<u64, usize> = Default::default();
        for (key, value) in entries {
            // A key is the trace id, `v` or `r`, and the name.
            if key.len() < 9 {
                continue;
            }
            let id = u64::from_be_bytes(key[..8].try_into().unwrap_or_default());
            let Some(entry) = catalog.traces.iter_mut().find(|e| e.id == id) else {
                continue;
            };
            let name = String::from_utf8_lossy(&key[9..]);
            let key = match key[8] {
                b'v' => super::view_key(&name),
                b'r' => super::result_key(&name),
                _ => continue,
            };
            let n = counts.entry(id).or_default();
            let written = stored::write(&stored_dir, (id, 1, *n), &key, &value);
            *n += 1;
            match written {
                Ok(r) => {
                    created.push(stored_dir.join(&r.file));
                    entry.stored.insert(key, r);
                }
                Err(e) => {
                    super::remove_files(&created);
                    return Err(e);
                }
            }
        }
    }
    let committed = sync_dir(&stored_dir).and_then(|()| manifest::write(path, &catalog));
    if let Err(e) = committed {
        super::remove_files(&created);
        return Err(e);
    }
    // The old catalog is no longer read by anyone: a build of the old format finds no
    // catalog folder and a manifest of version 8, and refuses the database.
    let _ = std::fs::remove_dir_all(&sled_dir);
    Ok(catalog)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{encode_meta, Store, StoredView};
    use roaring::RoaringTreemap;

    /// Makes a database as format 7 left it, with one trace, one view and one stored
    /// result in sled; opening it upgrades it and keeps all three.
    #[test]
    fn a_format_7_database_is_upgraded_with_its_views_and_results() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        // A trace imported by this build gives a real segment.
        let db = crate::Database::open(&path).unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/traces/stencil2d-16.mtf");
        let messages = db.import(&src, Some("t")).unwrap().summary.messages;
        assert!(messages > 0);
        drop(db);
        let new = manifest::read(&path).unwrap().unwrap();
        let entry = new.traces[0].clone();
        // Rewrite as format 7: sled holds the catalog and the per-trace values.
        std::fs::remove_dir_all(path.join(STORED_DIR)).unwrap();
        let sled_dir = path.join(CATALOG_DIR);
        {
            let db = sled::Config::new().path(&sled_dir).open().unwrap();
            db.insert(KEY_VERSION, &7u32.to_le_bytes()).unwrap();
            let old = OldCatalog {
                traces: vec![OldEntry {
                    id: entry.id,
                    name: entry.name.clone(),
                    segment: entry.segment.clone(),
                }],
                next_id: entry.id + 1,
            };
            db.insert(KEY_CATALOG, encode_meta(&old)).unwrap();
            let tree = db.open_tree(PER_TRACE_TREE).unwrap();
            let mut ids = RoaringTreemap::new();
            ids.insert_range(0..2);
            let view = StoredView {
                messages: false,
                definition: "SELECT ALL OPERATIONS".into(),
                ids,
            };
            let mut k = entry.id.to_be_bytes().to_vec();
            k.push(b'v');
            k.extend_from_slice(b"all");
            tree.insert(k, encode_meta(&super::super::ViewRecord::from(&view)))
                .unwrap();
            db.flush().unwrap();
        }
        let old_manifest = Catalog {
            format_version: 7,
            traces: vec![CatalogEntry {
                stored: Default::default(),
                ..entry.clone()
            }],
            ..Catalog::default()
        };
        manifest::write(&path, &old_manifest).unwrap();

        let store = Store::open(&path).unwrap();
        assert!(!sled_dir.exists(), "the old catalog folder is removed");
        let upgraded = manifest::read(&path).unwrap().unwrap();
        assert_eq!(upgraded.format_version, FORMAT_VERSION);
        assert_eq!(upgraded.traces.len(), 1);
        let reader = store.reader("t").unwrap();
        let view = reader.view("all").unwrap().expect("the view survives");
        assert_eq!(view.definition, "SELECT ALL OPERATIONS");
        assert_eq!(view.ids.len(), 2);
        assert_eq!(reader.meta().summary.messages, messages);
    }
}

//! `mtfdb check`: verifies a whole database, as SQLite's `PRAGMA integrity_check` does (the
//! manifest, every blob of every segment, every stored file, against their checksums), and
//! lists what is damaged, what can be recovered and what a dead writer left behind.
//! `--repair` rebuilds the catalog from the files: the manifest and the segments are the
//! truth, and each segment and stored file describes itself.
//!
//! What is certain and what is not:
//! - an unlocked partial segment is a dead import's: removed (by the next writer too);
//! - a segment no catalog names, with an id below the catalog's next id, is a dropped
//!   trace's whose removal was interrupted: removed;
//! - a stored file no catalog names, of a generation the catalog has passed, was replaced or
//!   dropped by a committed change: removed;
//! - a complete segment no catalog names with a newer id, and a stored file of a newer
//!   generation, are what a lost or rolled-back catalog forgot: only `--repair` adds them
//!   back (never removed without a catalog that says so).

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::catalog::{Catalog, CatalogEntry, StoredRef, FORMAT_VERSION};
use super::legacy::CATALOG_DIR;
use super::lock::{self, try_lock_file};
use super::segment::{self, blob_key, sync_dir, Segment};
use super::stored::{self, STORED_DIR};
use super::{
    decode_meta, manifest, stored_key_words as stored_name, TraceMeta, KEY_META, PARTIAL,
    SEGMENTS_DIR,
};
use crate::error::{Error, Result};

/// What `mtfdb check` found of one thing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Checked whole: sound.
    Ok,
    /// Damaged or missing: answers that need it fail, saying so.
    Damaged,
    /// Sound, but the catalog does not name it: `--repair` adds it back.
    Recoverable,
    /// Left by a writer that died or was interrupted: takes room, harms nothing; removed by
    /// `--repair` and by the next writer.
    Leftover,
    /// An import in progress in a process that is alive.
    InProgress,
    /// Done by `--repair`.
    Repaired,
}

impl Status {
    /// The word the report prints.
    pub fn word(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Damaged => "damaged",
            Status::Recoverable => "recoverable",
            Status::Leftover => "leftover",
            Status::InProgress => "in progress",
            Status::Repaired => "repaired",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What was found.
    pub status: Status,
    /// The thing: `manifest`, `trace "wrf"`, a file's path inside the database.
    pub item: String,
    /// Why, and what to do.
    pub detail: String,
}

/// What `mtfdb check` found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Every finding, the sound ones included.
    pub findings: Vec<Finding>,
}

impl Report {
    fn add(&mut self, status: Status, item: impl Into<String>, detail: impl Into<String>) {
        self.findings.push(Finding {
            status,
            item: item.into(),
            detail: detail.into(),
        });
    }

    /// The findings of `status`.
    pub fn count(&self, status: Status) -> usize {
        self.findings.iter().filter(|f| f.status == status).count()
    }

    /// True when nothing is damaged and nothing waits to be recovered.
    pub fn sound(&self) -> bool {
        self.count(Status::Damaged) == 0 && self.count(Status::Recoverable) == 0
    }
}

/// A file of the database's folders that the catalog does not name.
enum Unnamed {
    /// A partial segment whose import is alive (its lock is held).
    LiveImport(PathBuf),
    /// A dead import's partial segment or scratch file.
    DeadImport(PathBuf),
    /// A segment of a dropped trace.
    DroppedSegment(PathBuf),
    /// A complete-looking segment the catalog does not know: `<id>.seg`.
    NewSegment(PathBuf, u64),
    /// A stored file a committed change replaced or dropped.
    ObsoleteStored(PathBuf),
    /// A stored file newer than the catalog: (trace, generation, n).
    NewStored(PathBuf, (u64, u64, usize)),
    /// A temporary manifest, or the sled folder of an upgraded format-7 database.
    Stale(PathBuf),
}

fn list(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    let files = match std::fs::read_dir(dir) {
        Ok(files) => files,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(Error::io(dir, e)),
    };
    for f in files {
        let f = f.map_err(|e| Error::io(dir, e))?;
        out.push((f.file_name().to_string_lossy().into_owned(), f.path()));
    }
    out.sort();
    Ok(out)
}

/// Whether the import that writes the partial segment `path` is alive (holds its lock).
fn import_alive(path: &Path) -> bool {
    match File::open(path) {
        Ok(f) => !try_lock_file(&f).unwrap_or(false),
        Err(_) => false,
    }
}

/// Sorts the files the catalog does not name; `catalog` is `None` when it is lost.
fn survey(path: &Path, catalog: Option<&Catalog>) -> Result<Vec<Unnamed>> {
    let mut out = Vec::new();
    let listed = |id: u64| catalog.is_some_and(|c| c.trace_by_id(id).is_some());
    let dropped = |id: u64| catalog.is_some_and(|c| id < c.next_id && c.trace_by_id(id).is_none());
    for (name, file) in list(&path.join(SEGMENTS_DIR))? {
        if name.ends_with(&format!(".{PARTIAL}")) {
            out.push(if import_alive(&file) {
                Unnamed::LiveImport(file)
            } else {
                Unnamed::DeadImport(file)
            });
        } else if name.ends_with(segment::CREATING_SUFFIX) {
            // Locked and renamed an instant after its creation: only an old one is dead.
            let age = std::fs::metadata(&file)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok());
            if age.is_some_and(|a| a > Duration::from_secs(60)) {
                out.push(Unnamed::DeadImport(file));
            }
        } else if name.ends_with(".spill") {
            if !import_alive(&file.with_extension(PARTIAL)) {
                out.push(Unnamed::DeadImport(file));
            }
        } else if let Some(id) = name
            .strip_suffix(".seg")
            .and_then(|n| n.parse::<u64>().ok())
        {
            let named = catalog
                .and_then(|c| c.trace_by_id(id))
                .is_some_and(|e| e.segment.file == name);
            if named {
                continue;
            }
            out.push(if dropped(id) {
                Unnamed::DroppedSegment(file)
            } else {
                Unnamed::NewSegment(file, id)
            });
        }
    }
    let named: std::collections::HashSet<&str> = catalog
        .iter()
        .flat_map(|c| c.traces.iter())
        .flat_map(|e| e.stored.values().map(|r| r.file.as_str()))
        .collect();
    for (name, file) in list(&path.join(STORED_DIR))? {
        if named.contains(name.as_str()) {
            continue;
        }
        let Some(parsed @ (trace, generation, _)) = stored::parse_name(&name) else {
            continue;
        };
        let obsolete = dropped(trace)
            || (listed(trace) && catalog.is_some_and(|c| generation <= c.generation));
        out.push(if obsolete {
            Unnamed::ObsoleteStored(file)
        } else {
            Unnamed::NewStored(file, parsed)
        });
    }
    if catalog.is_some() {
        for stale in [path.join(manifest::MANIFEST_TMP), path.join(CATALOG_DIR)] {
            if stale.exists() {
                out.push(Unnamed::Stale(stale));
            }
        }
    }
    Ok(out)
}

fn remove(path: &Path) -> Result<()> {
    let removed = if path.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    };
    match removed {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// Removes what dead writers certainly left (see the module documentation); the caller
/// holds the write lock.
pub(crate) fn remove_leftovers(path: &Path, catalog: &Catalog) -> Result<()> {
    let mut removed = false;
    for u in survey(path, Some(catalog))? {
        if let Unnamed::DeadImport(f)
        | Unnamed::DroppedSegment(f)
        | Unnamed::ObsoleteStored(f)
        | Unnamed::Stale(f) = u
        {
            remove(&f)?;
            removed = true;
        }
    }
    if removed {
        for dir in [path.join(SEGMENTS_DIR), path.join(STORED_DIR)] {
            if dir.exists() {
                sync_dir(&dir)?;
            }
        }
    }
    Ok(())
}

/// A path inside the database, as the report names it.
fn inside(db: &Path, file: &Path) -> String {
    file.strip_prefix(db).unwrap_or(file).display().to_string()
}

/// Opens and reads every blob of the segment `entry` names; returns its metadata and how
/// many blobs it has.
fn verify_segment(db: &Path, entry: &CatalogEntry) -> Result<(TraceMeta, usize)> {
    let path = db.join(SEGMENTS_DIR).join(&entry.segment.file);
    let segment = Segment::open(path, &entry.segment, &entry.name)?;
    let blobs = segment.verify_all()?;
    let meta_bytes = segment.get(&blob_key(&[KEY_META]))?.ok_or_else(|| {
        Error::Corrupt(format!(
            "trace {:?}: its segment has no metadata",
            entry.name
        ))
    })?;
    let meta: TraceMeta = decode_meta(
        &meta_bytes,
        &format!("the metadata of trace {:?}", entry.name),
    )?;
    Ok((meta, blobs))
}

/// Checks the database at `path` whole; with `repair`, rebuilds its catalog from its files
/// (holding the write lock) and removes what dead writers left.
pub fn check(path: &Path, repair: bool) -> Result<Report> {
    if !path.is_dir() {
        return Err(Error::Database {
            path: path.to_path_buf(),
            message: "is not a database folder".into(),
        });
    }
    let _lock = if repair {
        Some(lock::acquire(
            path,
            Duration::from_secs(10),
            "repair the database",
        )?)
    } else {
        None
    };
    let mut report = Report::default();
    let catalog = match manifest::read(path) {
        Ok(Some(c)) if c.format_version == FORMAT_VERSION => {
            report.add(
                Status::Ok,
                "manifest",
                format!(
                    "generation {}, {} trace{}",
                    c.generation,
                    c.traces.len(),
                    if c.traces.len() == 1 { "" } else { "s" }
                ),
            );
            Some(c)
        }
        Ok(Some(c)) => {
            report.add(
                Status::Damaged,
                "manifest",
                format!(
                    "is of storage format version {} (this mtfdb's is {FORMAT_VERSION}; \
                     opening the database with write access upgrades it)",
                    c.format_version
                ),
            );
            return Ok(report);
        }
        Ok(None) => {
            report.add(
                Status::Damaged,
                "manifest",
                "is missing: `mtfdb check --repair` rebuilds it from the traces' files",
            );
            None
        }
        Err(e) => {
            report.add(Status::Damaged, "manifest", e.to_string());
            None
        }
    };
    let mut rebuilt = catalog.clone().unwrap_or_else(Catalog::new);
    for entry in catalog.iter().flat_map(|c| c.traces.iter()) {
        let item = format!("trace {:?}", entry.name);
        match verify_segment(path, entry) {
            Ok((_, blobs)) => report.add(
                Status::Ok,
                &item,
                format!(
                    "segments/{}: {} bytes, {blobs} blobs checked",
                    entry.segment.file, entry.segment.size
                ),
            ),
            Err(e) => report.add(
                Status::Damaged,
                &item,
                format!(
                    "{e}; restore segments/{} from a copy, or `mtfdb drop` the trace",
                    entry.segment.file
                ),
            ),
        }
        for (key, r) in &entry.stored {
            let what = stored_name(key);
            match stored::read(&path.join(STORED_DIR), r, &what) {
                Ok(Some(f)) if f.trace == entry.id && f.key == *key => report.add(
                    Status::Ok,
                    format!("{item}: {what}"),
                    format!("stored/{}", r.file),
                ),
                Ok(Some(_)) => report.add(
                    Status::Damaged,
                    format!("{item}: {what}"),
                    format!("stored/{} holds another trace's or key's value", r.file),
                ),
                Ok(None) => report.add(
                    Status::Damaged,
                    format!("{item}: {what}"),
                    format!("stored/{} is missing", r.file),
                ),
                Err(e) => report.add(Status::Damaged, format!("{item}: {what}"), e.to_string()),
            }
        }
    }
    let mut recovered = false;
    // The newest stored file of each (trace, key) that the catalog does not name.
    let mut newest: BTreeMap<(u64, String), ((u64, usize), StoredRef)> = BTreeMap::new();
    for u in survey(path, catalog.as_ref())? {
        match u {
            Unnamed::LiveImport(f) => {
                report.add(Status::InProgress, inside(path, &f), "an import in progress")
            }
            Unnamed::DeadImport(f) => report.add(
                Status::Leftover,
                inside(path, &f),
                "left by an import that died; removed by --repair or the next writer",
            ),
            Unnamed::DroppedSegment(f) => report.add(
                Status::Leftover,
                inside(path, &f),
                "the file of a dropped trace; removed by --repair or the next writer",
            ),
            Unnamed::ObsoleteStored(f) => report.add(
                Status::Leftover,
                inside(path, &f),
                "a view or result that was replaced or dropped; removed by --repair or the next writer",
            ),
            Unnamed::Stale(f) => report.add(
                Status::Leftover,
                inside(path, &f),
                "left by an interrupted write or upgrade; removed by --repair or the next writer",
            ),
            Unnamed::NewSegment(f, id) => {
                let file = f
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let probe = segment::own_ref(&f).and_then(|seg| {
                    let entry = CatalogEntry {
                        id,
                        name: file.clone(),
                        segment: seg,
                        stored: Default::default(),
                    };
                    verify_segment(path, &entry).map(|(meta, _)| (entry, meta))
                });
                match probe {
                    Ok((mut entry, meta)) => {
                        let mut name = meta.name.clone();
                        if rebuilt.trace(&name).is_some() {
                            name = format!("{name}-recovered-{id}");
                        }
                        entry.name = name.clone();
                        rebuilt.next_id = rebuilt.next_id.max(id + 1);
                        rebuilt.traces.push(entry);
                        recovered = true;
                        report.add(
                            if repair { Status::Repaired } else { Status::Recoverable },
                            format!("trace {name:?}"),
                            format!(
                                "segments/{file} is complete and sound but not in the catalog{}",
                                if repair { ": added back" } else { "; `mtfdb check --repair` adds it back" }
                            ),
                        );
                    }
                    Err(e) => report.add(
                        Status::Damaged,
                        inside(path, &f),
                        format!("a trace the catalog does not name, and it cannot be read: {e}"),
                    ),
                }
            }
            Unnamed::NewStored(f, (trace, generation, n)) => {
                let bytes = std::fs::read(&f).map_err(|e| Error::io(&f, e))?;
                match stored::decode(&bytes, &inside(path, &f)) {
                    Ok(s) if s.trace == trace => {
                        let r = StoredRef {
                            file: f
                                .file_name()
                                .map(|n| n.to_string_lossy().into_owned())
                                .unwrap_or_default(),
                            size: bytes.len() as u64,
                            checksum: crc32fast::hash(&bytes[..bytes.len() - 4]),
                        };
                        rebuilt.generation = rebuilt.generation.max(generation);
                        let slot = newest.entry((trace, s.key)).or_insert(((generation, n), r.clone()));
                        if (generation, n) > slot.0 {
                            *slot = ((generation, n), r);
                        }
                    }
                    Ok(_) => report.add(
                        Status::Damaged,
                        inside(path, &f),
                        "its name and content disagree on its trace",
                    ),
                    Err(e) => report.add(Status::Damaged, inside(path, &f), e.to_string()),
                }
            }
        }
    }
    for ((trace, key), ((generation, n), r)) in newest {
        let Some(entry) = rebuilt.traces.iter_mut().find(|e| e.id == trace) else {
            continue;
        };
        let current = entry
            .stored
            .get(&key)
            .and_then(|c| stored::parse_name(&c.file))
            .map(|(_, g, n)| (g, n));
        if current.is_some_and(|c| c >= (generation, n)) {
            continue;
        }
        let item = format!("trace {:?}: {}", entry.name, stored_name(&key));
        report.add(
            if repair {
                Status::Repaired
            } else {
                Status::Recoverable
            },
            item,
            format!(
                "stored/{} is sound and newer than the catalog{}",
                r.file,
                if repair {
                    ": added back"
                } else {
                    "; `mtfdb check --repair` adds it back"
                }
            ),
        );
        entry.stored.insert(key, r);
        recovered = true;
    }
    if repair {
        if recovered || catalog.is_none() {
            rebuilt.format_version = FORMAT_VERSION;
            rebuilt.generation += 1;
            rebuilt.next_id = rebuilt
                .traces
                .iter()
                .map(|e| e.id + 1)
                .fold(rebuilt.next_id, u64::max);
            manifest::write(path, &rebuilt)?;
            for f in report.findings.iter_mut() {
                if f.item == "manifest" && f.status == Status::Damaged {
                    f.status = Status::Repaired;
                }
            }
            report.add(
                Status::Repaired,
                "manifest",
                format!(
                    "rewritten: generation {}, {} trace{}",
                    rebuilt.generation,
                    rebuilt.traces.len(),
                    if rebuilt.traces.len() == 1 { "" } else { "s" }
                ),
            );
        }
        remove_leftovers(path, &rebuilt)?;
        for f in report.findings.iter_mut() {
            if f.status == Status::Leftover {
                f.status = Status::Repaired;
                f.detail = format!("{}: removed", f.detail.split(';').next().unwrap_or(""));
            }
        }
    }
    Ok(report)
}

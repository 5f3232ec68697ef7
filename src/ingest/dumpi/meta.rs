//! The `.meta` file of a DUMPI trace and the rank files it names.
//!
//! The meta file is text, one `key=value` per line: `hostname`, `numprocs` (the number of
//! ranks), `username`, `startime` (sic, seconds since the Unix epoch), `fileprefix` (the
//! rank files' common name, relative to the meta file's folder), `version`, `subversion`,
//! `subsubversion`. Rank `r`'s calls are in `PREFIX-RRRR.bin`, the rank written with at least
//! four digits (sst-dumpi's readers also try other widths; so does this one).

use std::io::Read;
use std::path::{Path, PathBuf};

use super::bin::{error_at, MAGIC};
use crate::error::{Error, Result};
use crate::ingest::excerpt::{quoted, shown_line};

/// Keys a meta file must have.
const REQUIRED: [&str; 2] = ["numprocs", "fileprefix"];

/// A parsed `.meta` file.
#[derive(Debug, Clone)]
pub(crate) struct Meta {
    /// The meta file.
    pub path: PathBuf,
    /// Number of ranks.
    pub numprocs: u32,
    /// The rank files' common name.
    pub prefix: String,
    /// `version.subversion.subsubversion`, if recorded.
    pub version: Option<String>,
}

/// The `key=value` pairs of a meta file's text (lines without `=` are ignored).
fn pairs(text: &str) -> impl Iterator<Item = (usize, &str, &str)> {
    text.lines().enumerate().filter_map(|(i, line)| {
        let (k, v) = line.split_once('=')?;
        Some((i + 1, k.trim(), v.trim()))
    })
}

/// Whether `path` looks like a DUMPI meta file: text whose `key=value` lines include
/// `numprocs` and `fileprefix`.
pub(crate) fn looks_like_meta(path: &Path) -> bool {
    let mut head = Vec::new();
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    if f.take(64 * 1024).read_to_end(&mut head).is_err() {
        return false;
    }
    let Ok(text) = std::str::from_utf8(&head) else {
        return false;
    };
    let keys: Vec<&str> = pairs(text).map(|(_, k, _)| k).collect();
    REQUIRED.iter().all(|r| keys.contains(r))
}

/// Whether `path` starts with DUMPI's binary magic (one rank's `.bin` file).
pub(crate) fn looks_like_bin(path: &Path) -> bool {
    let mut head = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok()
        && u64::from_be_bytes(head) == MAGIC
}

/// The meta files in folder `dir`, sorted.
fn metas_in(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "meta") && p.is_file() && looks_like_meta(p))
        .collect();
    found.sort();
    Ok(found)
}

/// Finds the meta file of the trace at `path`: the meta file itself, the one meta file in a
/// folder, or the meta file beside one of the trace's `.bin` files.
pub(crate) fn find_meta(path: &Path) -> Result<PathBuf> {
    if path.is_dir() {
        let mut metas = metas_in(path)?;
        return match metas.len() {
            1 => Ok(metas.remove(0)),
            0 => Err(Error::Usage(format!(
                "{}: no DUMPI .meta file in this folder",
                path.display()
            ))),
            _ => Err(Error::Usage(format!(
                "{}: the folder holds several DUMPI traces ({}); give the .meta file of the one to import",
                path.display(),
                names(&metas)
            ))),
        };
    }
    if looks_like_meta(path) {
        return Ok(path.to_path_buf());
    }
    if looks_like_bin(path) {
        // One rank's file: the trace is the meta file whose prefix this file's name starts with.
        let dir = parent(path);
        let stem = path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let owners: Vec<PathBuf> = metas_in(dir)?
            .into_iter()
            .filter(|m| {
                read(m).is_ok_and(|meta| {
                    stem.strip_prefix(&format!("{}-", file_part(&meta.prefix)))
                        .is_some_and(|rest| rest.ends_with(".bin"))
                })
            })
            .collect();
        if let [only] = owners.as_slice() {
            return Ok(only.clone());
        }
        return Err(Error::Usage(format!(
            "{}: this is one rank's file of a DUMPI trace; give the trace's .meta file (or its folder)",
            path.display()
        )));
    }
    Err(error_at(
        path,
        0,
        "not a DUMPI trace",
        "the file is neither a DUMPI .meta file (lines numprocs=… and fileprefix=…) nor a rank's .bin file",
    ))
}

fn names(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| {
            p.file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned()
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// The last component of a prefix (`out/run` → `run`).
fn file_part(prefix: &str) -> &str {
    prefix.rsplit('/').next().unwrap_or(prefix)
}

/// Reads the meta file at `path`.
pub(crate) fn read(path: &Path) -> Result<Meta> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let mut numprocs = None;
    let mut prefix = None;
    let mut version = [None, None, None];
    for (line, key, value) in pairs(&text) {
        let bad = |what: &str| {
            Error::input(
                path.display().to_string(),
                line as u64,
                key.len() as u64 + 2,
                "bad meta file",
                format!("{key} must be {what}, found {}", quoted(value)),
                shown_line(&format!("{key}={value}"), key.len() as u64 + 2),
            )
        };
        match key {
            "numprocs" => {
                let n: u32 = value.parse().map_err(|_| bad("a number of ranks"))?;
                if n == 0 {
                    return Err(bad("at least 1"));
                }
                numprocs = Some(n);
            }
            "fileprefix" => {
                if value.is_empty() {
                    return Err(bad("the rank files' name"));
                }
                prefix = Some(value.to_string());
            }
            "version" => version[0] = Some(value.to_string()),
            "subversion" => version[1] = Some(value.to_string()),
            "subsubversion" => version[2] = Some(value.to_string()),
            _ => {}
        }
    }
    let missing = |key: &str| {
        Error::input(
            path.display().to_string(),
            0,
            0,
            "bad meta file",
            format!("the meta file has no {key}= line"),
            "",
        )
    };
    let numprocs = numprocs.ok_or_else(|| missing("numprocs"))?;
    let prefix = prefix.ok_or_else(|| missing("fileprefix"))?;
    let version = match version {
        [Some(a), Some(b), Some(c)] => Some(format!("{a}.{b}.{c}")),
        _ => None,
    };
    Ok(Meta {
        path: path.to_path_buf(),
        numprocs,
        prefix,
        version,
    })
}

impl Meta {
    /// The rank files the trace announces, in rank order, whether they exist or not. The rank
    /// number's width is the one under which one of the first ranks' files exists (4 digits
    /// first).
    pub fn rank_files(&self) -> Vec<PathBuf> {
        let base = parent(&self.path).join(&self.prefix);
        let file = |width: usize, rank: u32| {
            let mut name = base.clone().into_os_string();
            name.push(format!("-{rank:0width$}.bin"));
            PathBuf::from(name)
        };
        // The width of the rank numbers, from the first few ranks' files (one may be missing).
        let width = (4..=10)
            .chain(0..4)
            .find(|&w| (0..self.numprocs.min(4)).any(|r| file(w, r).is_file()))
            .unwrap_or(4);
        (0..self.numprocs).map(|rank| file(width, rank)).collect()
    }
}

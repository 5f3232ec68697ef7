//! What to give instead when an import is pointed at a part of a trace (an OTF2 archive's
//! `traces.def`, its `traces/` folder or one location's `.evt`, an OTF v1 stream, a Paraver
//! `.pcf` or `.row`) or at a folder of a format other than the one it looks for: the file
//! that opens the whole trace, found beside it, so the user is never left with the error of
//! a reader that was never meant to read it.

use std::path::{Path, PathBuf};

use crate::ingest::{otf1, otf2, paraver};

/// The files of `dir` that `pred` accepts, by name.
fn files_in(dir: &Path, pred: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && pred(p))
        .collect();
    found.sort();
    found
}

/// "X" or "one of X, Y" for the files to give.
fn one_of(files: &[PathBuf]) -> String {
    let names: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
    match names.len() {
        1 => names[0].clone(),
        _ => format!("one of {}", names.join(", ")),
    }
}

fn has_extension(path: &Path, ext: &str) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case(ext))
}

/// The OTF2 anchors in `dir` and in its parent (an archive's `traces/` folder is beside
/// its anchor).
fn anchors_near(dir: &Path) -> Vec<PathBuf> {
    let mut found = files_in(dir, otf2::looks_like_anchor);
    if found.is_empty() {
        if let Some(parent) = dir.parent() {
            found = files_in(parent, otf2::looks_like_anchor);
        }
    }
    found
}

/// The folder `path` names, or the one holding the file `path` ("." for a bare name).
fn folder_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// What `path` is and the file to give instead, when `path` is a part of a trace (or a
/// folder of a trace) that the format detection does not take; `None` when nothing beside
/// it opens a trace.
pub fn instead(path: &Path) -> Option<String> {
    if path.is_dir() {
        let anchors = anchors_near(path);
        if !anchors.is_empty() {
            return Some(format!(
                "a folder of an OTF2 archive's local files, not the archive: give {}, the anchor",
                one_of(&anchors)
            ));
        }
        let prv = files_in(path, paraver::looks_like_prv);
        if !prv.is_empty() {
            return Some(format!(
                "a folder holding a Paraver trace, not an OTF2 archive: give {}, the .prv",
                one_of(&prv)
            ));
        }
        return None;
    }
    let dir = folder_of(path);
    if has_extension(path, "pcf") || has_extension(path, "row") {
        let beside = path.with_extension("prv");
        let prv = if paraver::looks_like_prv(&beside) {
            vec![beside]
        } else {
            files_in(&dir, paraver::looks_like_prv)
        };
        let what = if has_extension(path, "pcf") {
            "a Paraver trace's configuration (.pcf)"
        } else {
            "a Paraver trace's names of rows (.row)"
        };
        return (!prv.is_empty())
            .then(|| format!("{what}, not the trace: give {}, the .prv", one_of(&prv)));
    }
    if has_extension(path, "def") || has_extension(path, "evt") {
        let anchors = anchors_near(&dir);
        if !anchors.is_empty() {
            let what = if has_extension(path, "evt") {
                "an OTF2 archive's event file of one location"
            } else if files_in(&dir, otf2::looks_like_anchor).is_empty() {
                "an OTF2 archive's definitions of one location"
            } else {
                "an OTF2 archive's global definitions"
            };
            return Some(format!(
                "{what}, not the archive: give {}, the anchor",
                one_of(&anchors)
            ));
        }
    }
    // OTF v1 streams: NAME.0.def, NAME.1.events, NAME.1.stats, ... (maybe .z), beside NAME.otf.
    let name = path.file_name()?.to_string_lossy().to_string();
    let name = name.strip_suffix(".z").unwrap_or(&name);
    let otf1_part = [".def", ".events", ".stats", ".snaps", ".marker"]
        .iter()
        .any(|s| name.ends_with(s));
    if otf1_part {
        let masters = files_in(&dir, otf1::looks_like_master);
        if !masters.is_empty() {
            return Some(format!(
                "a stream of an OTF v1 trace, not the trace: give {}, the master file",
                one_of(&masters)
            ));
        }
    }
    None
}

//! Locks: one writer at a time per database, and a mark on each import in progress.
//!
//! The write lock is an advisory lock (`flock`) on `<db>/LOCK`, held only while a writer
//! changes the catalog (a commit, a drop, a view, a stored result), never while it reads or
//! while an import parses and writes its segment. The holder writes who it is into the file,
//! so that a writer that waited in vain can say who holds the lock and since when. The
//! kernel lets go of the lock when its holder exits or dies: a dead writer blocks nobody.
//!
//! An import in progress holds the same kind of lock on its own partial segment file, so
//! that the next writer can tell a dead import's leftovers (unlocked: removed) from a live
//! one's in another process (locked: left alone).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rustix::fs::{flock, FlockOperation};

use crate::error::{Error, Result};

/// The lock file's name inside the database folder.
pub const LOCK_FILE: &str = "LOCK";

/// How long a writer waits for another writer by default (see [`super::Store::set_busy_timeout`]).
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The write lock, held until dropped.
#[derive(Debug)]
pub struct WriteLock {
    _file: File,
}

/// Takes `file`'s exclusive lock if it is free; false if another holds it.
pub fn try_lock_file(file: &File) -> std::io::Result<bool> {
    match flock(file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(true),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => Ok(false),
        Err(e) => Err(e.into()),
    }
}

fn open_lock_file(dir: &Path) -> Result<(File, PathBuf)> {
    let path = dir.join(LOCK_FILE);
    let file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    Ok((file, path))
}

/// Marks the lock as `what`'s, in this process, from now (best effort: the mark only
/// explains a wait to the next writer).
fn mark_holder(file: &mut File, what: &str) {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let line = format!("pid {} since {since} {what}\n", std::process::id());
    let _ = file.set_len(0);
    let _ = std::os::unix::fs::FileExt::write_all_at(file, line.as_bytes(), 0);
    let _ = file.flush();
}

/// Who holds the lock, in words, from its mark.
fn holder(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut words = text.split_whitespace();
    match (words.next(), words.next(), words.next(), words.next()) {
        (Some("pid"), Some(pid), Some("since"), Some(since)) => {
            let what: Vec<&str> = words.collect();
            let ago = since
                .parse::<u64>()
                .ok()
                .and_then(|s| {
                    SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .ok()
                        .map(|now| now.as_secs().saturating_sub(s))
                })
                .map_or(String::new(), |s| format!(" for {s} s"));
            format!("process {pid} ({}){ago}", what.join(" "))
        }
        _ => "another process".to_string(),
    }
}

/// Takes the write lock of the database at `dir` for `what`, waiting up to `timeout` for
/// another writer; then fails, saying who holds it and since when.
pub fn acquire(dir: &Path, timeout: Duration, what: &str) -> Result<WriteLock> {
    let (mut file, path) = open_lock_file(dir)?;
    let start = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        if try_lock_file(&file).map_err(|e| Error::io(&path, e))? {
            mark_holder(&mut file, what);
            return Ok(WriteLock { _file: file });
        }
        if start.elapsed() >= timeout {
            return Err(Error::Database {
                path: dir.to_path_buf(),
                message: format!(
                    "is being written by {} (waited {:.1} s for its write lock to {what}; \
                     try again, or give a longer --busy-timeout)",
                    holder(&path),
                    start.elapsed().as_secs_f64()
                ),
            });
        }
        std::thread::sleep(pause.min(timeout.saturating_sub(start.elapsed())));
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// Takes the write lock if it is free at once; `None` if another writer holds it.
pub fn try_acquire(dir: &Path, what: &str) -> Result<Option<WriteLock>> {
    let (mut file, path) = open_lock_file(dir)?;
    if try_lock_file(&file).map_err(|e| Error::io(&path, e))? {
        mark_holder(&mut file, what);
        Ok(Some(WriteLock { _file: file }))
    } else {
        Ok(None)
    }
}

//! Where a command's output goes: the one way every command that writes a file the user
//! named (`report`, `query -o`, `gen`, every `export`, the shell's pictures) opens it.
//!
//! An [`Output`] acts only on what it creates:
//!
//! - A regular file (there or not) is written to a hidden temporary file beside it
//!   (`.NAME.mtfdb-tmp-PID-N`, created exclusively), synced, and renamed over it by
//!   [`Output::commit`] once complete. Until then the target is untouched; an error, a panic
//!   or an early return removes the temporary file, and a killed process leaves at most that
//!   hidden file, never a truncated target. A file that was there keeps its permissions (and,
//!   where the process may give it, its owner).
//! - A symbolic link is followed: the file it leads to is what is replaced (or created), and
//!   the link stays a link.
//! - A character or block device, a FIFO or any other file that is not a regular file is
//!   written in place: opened for writing, never truncated, renamed or removed, even when a
//!   write fails (`-o /dev/null` stays the system's `/dev/null`; `-o /dev/full` fails with
//!   "No space left on device" and leaves the device there). `-o /dev/stdout` (a link
//!   through /proc) writes to the pipe or terminal standard output is, and appends to the file
//!   it was redirected to (`>` emptied it, `>>` keeps what it held).
//! - A directory is refused.
//!
//! ```
//! use std::io::Write;
//! # let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("out.txt");
//! let mut out = mtfdb::export::output::Output::create(&path)?;
//! out.write_all(b"whole or not at all\n").map_err(|e| mtfdb::Error::io(&path, e))?;
//! out.commit()?;
//! assert_eq!(std::fs::read_to_string(&path).unwrap(), "whole or not at all\n");
//! # Ok::<(), mtfdb::Error>(())
//! ```

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

/// The marker in a temporary file's name (`.NAME.mtfdb-tmp-PID-N`), so that one a killed
/// process left behind says where it came from.
pub const TEMP_MARKER: &str = ".mtfdb-tmp-";

/// Links followed before giving up, as the kernel's own limit for a path (`ELOOP`).
const MAX_LINKS: usize = 40;

/// Bytes of the target's name kept in a temporary file's name, so that the temporary
/// name stays under the 255 bytes a file name may have.
const NAME_BYTES_KEPT: usize = 200;

/// Makes each temporary name of this process differ from the last.
static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);

/// An output file being written; see the module documentation for what it does with each
/// kind of target. Write to it through [`Write`] (or [`Output::file_mut`]), then
/// [`Output::commit`]; dropped without a commit, it leaves the target as it was.
#[derive(Debug)]
pub struct Output {
    /// The path as the user gave it, for errors.
    path: PathBuf,
    file: File,
    place: Place,
}

/// How an [`Output`] reaches its target.
#[derive(Debug)]
enum Place {
    /// A regular file: `temp` is renamed over `target` (the path with its links followed) on
    /// commit; until `committed`, dropping removes `temp`.
    Replace {
        temp: PathBuf,
        target: PathBuf,
        committed: bool,
    },
    /// A device, FIFO or other non-regular file, written directly.
    InPlace,
}

impl Output {
    /// Opens the output at `path`: a temporary file beside a regular (or absent) target, the
    /// target itself when it is a device, FIFO or other non-regular file. Errors name `path`
    /// and say why (a missing folder, a directory, no permission).
    pub fn create(path: &Path) -> Result<Output> {
        // The kernel's answer first: it follows every link, including /proc's (/dev/stdout),
        // whose text names no file (`pipe:[…]`).
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => {
                Err(Error::io(path, io::Error::from(rustix::io::Errno::ISDIR)))
            }
            Ok(meta) if meta.is_file() => {
                let (target, through_proc) = follow_links(path).map_err(|e| Error::io(path, e))?;
                match std::fs::metadata(&target) {
                    Ok(m) if !through_proc && (m.dev(), m.ino()) == (meta.dev(), meta.ino()) => {
                        // The rename would replace a file the user may not write; refuse as
                        // `>` does.
                        rustix::fs::access(&target, rustix::fs::Access::WRITE_OK)
                            .map_err(|e| Error::io(path, io::Error::from(e)))?;
                        Output::replacing(path, target, Some(&meta))
                    }
                    // A /proc link to an open file (`-o /dev/stdout` with `> FILE` or `>>
                    // FILE`): the file is the shell's, opened (and emptied or not) by it;
                    // replacing it would lose what `>>` keeps. Append, as the shell would.
                    _ => Output::in_place(path, true),
                }
            }
            Ok(_) => Output::in_place(path, false),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // Absent, or a link to what is absent: the file the links lead to is made.
                let (target, _) = follow_links(path).map_err(|e| Error::io(path, e))?;
                Output::replacing(path, target, None)
            }
            Err(e) => Err(Error::io(path, e)),
        }
    }

    /// An output written straight to `path`, never truncated (a device ignores it, a FIFO
    /// or socket has nothing to cut, and an open file reached through /proc is the shell's
    /// to empty); `append` for a regular file.
    fn in_place(path: &Path, append: bool) -> Result<Output> {
        let file = OpenOptions::new()
            .write(true)
            .append(append)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        Ok(Output {
            path: path.to_path_buf(),
            file,
            place: Place::InPlace,
        })
    }

    /// An output written to a new temporary file beside `target`, which it replaces on
    /// commit; `existing` is the target's metadata when it is there.
    fn replacing(
        path: &Path,
        target: PathBuf,
        existing: Option<&std::fs::Metadata>,
    ) -> Result<Output> {
        let Some(name) = target.file_name() else {
            return Err(Error::io(
                path,
                io::Error::new(io::ErrorKind::InvalidInput, "not a file name"),
            ));
        };
        let dir = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let kept = &name.as_bytes()[..name.len().min(NAME_BYTES_KEPT)];
        let mut attempts = 0;
        let (temp, file) = loop {
            attempts += 1;
            let n = NEXT_TEMP.fetch_add(1, Ordering::Relaxed);
            let mut temp_name = b".".to_vec();
            temp_name.extend_from_slice(kept);
            temp_name.extend_from_slice(TEMP_MARKER.as_bytes());
            temp_name.extend_from_slice(format!("{}-{n}", std::process::id()).as_bytes());
            let temp = dir.join(OsString::from_vec(temp_name));
            // create_new is O_CREAT | O_EXCL: never a file (or link) that was already there.
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o666)
                .open(&temp)
            {
                Ok(file) => break (temp, file),
                // Left by a killed process with the same id, or made by someone else.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempts < 100 => continue,
                Err(e) => {
                    return Err(Error::io(
                        path,
                        io::Error::new(
                            e.kind(),
                            format!(
                                "cannot create a temporary file in {} to write it whole: {e}",
                                dir.display()
                            ),
                        ),
                    ))
                }
            }
        };
        let output = Output {
            path: path.to_path_buf(),
            file,
            place: Place::Replace {
                temp,
                target,
                committed: false,
            },
        };
        if let Some(meta) = existing {
            output.keep_owner_and_mode(meta)?;
        }
        Ok(output)
    }

    /// Gives the temporary file the replaced file's owner (when the process may: root, or a
    /// group it is in) and its permissions.
    fn keep_owner_and_mode(&self, meta: &std::fs::Metadata) -> Result<()> {
        let now = self.file.metadata().map_err(|e| Error::io(&self.path, e))?;
        if (now.uid(), now.gid()) != (meta.uid(), meta.gid()) {
            // Best effort: an ordinary user cannot give a file away, and the content is theirs.
            let _ = std::os::unix::fs::fchown(&self.file, Some(meta.uid()), Some(meta.gid()));
        }
        // After the owner: changing it clears set-id bits. Those are not kept anyway, since
        // the content is new.
        self.file
            .set_permissions(std::fs::Permissions::from_mode(meta.mode() & 0o777))
            .map_err(|e| Error::io(&self.path, e))
    }

    /// The path as the caller gave it (errors name it).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True when the target is written in place (a device, FIFO or other non-regular file)
    /// rather than replaced on commit.
    pub fn is_in_place(&self) -> bool {
        matches!(self.place, Place::InPlace)
    }

    /// The open file: the temporary file, or the target itself when written in place.
    pub fn file_mut(&mut self) -> &mut File {
        &mut self.file
    }

    /// Publishes the output: a temporary file is synced and renamed over the target (then
    /// the folder is synced, so that the rename survives a crash); an output written in place
    /// is done. On an error the target is as it was and the temporary file is removed.
    pub fn commit(mut self) -> Result<()> {
        let Place::Replace {
            temp,
            target,
            committed,
        } = &mut self.place
        else {
            return self.file.flush().map_err(|e| Error::io(&self.path, e));
        };
        self.file.sync_all().map_err(|e| Error::io(&self.path, e))?;
        std::fs::rename(&*temp, &*target).map_err(|e| Error::io(&self.path, e))?;
        *committed = true;
        // The file is in place; a folder that cannot be synced (some file systems refuse)
        // loses only durability against a crash, which every other write there lacks too.
        if let Some(dir) = target.parent() {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.file.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        // Only the temporary file is ours to remove; a target written in place never is.
        if let Place::Replace {
            temp,
            committed: false,
            ..
        } = &self.place
        {
            let _ = std::fs::remove_file(temp);
        }
    }
}

/// `path` with the symbolic links of its last component followed (relative links from the
/// link's folder), so that the file they lead to is the one replaced and the link stays. A
/// dangling link leads to the file to create. True with it when a link on the way is one of
/// /proc's (`/dev/stdout` leads to `/proc/self/fd/1`), whose text need not name the file the
/// kernel opens through it.
fn follow_links(path: &Path) -> io::Result<(PathBuf, bool)> {
    let proc_dev = std::fs::metadata("/proc/self").map(|m| m.dev()).ok();
    let mut through_proc = false;
    let mut p = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&p) {
            Ok(meta) if meta.file_type().is_symlink() => {
                through_proc |= Some(meta.dev()) == proc_dev;
                let to = std::fs::read_link(&p)?;
                // Joining an absolute path replaces; an empty parent leaves `to` relative.
                p = match p.parent() {
                    Some(dir) => dir.join(to),
                    None => to,
                };
            }
            _ => return Ok((p, through_proc)),
        }
    }
    Err(io::Error::from(rustix::io::Errno::LOOP))
}

/// Writes what `write` writes to the output at `path` and commits it: `path` gets the whole
/// output or, on an error, stays as it was (see the module documentation for devices,
/// FIFOs and links).
pub fn write_with<T>(path: &Path, write: impl FnOnce(&mut Output) -> Result<T>) -> Result<T> {
    let mut out = Output::create(path)?;
    let value = write(&mut out)?;
    out.commit()?;
    Ok(value)
}

/// Syncs every file and folder under `dir` (and `dir` itself) to the disk: what a folder
/// output (a Parquet export) does before renaming its parts into place, as
/// [`Output::commit`] does for a file.
pub fn sync_tree(dir: &Path) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            sync_tree(&path)?;
        } else {
            File::open(&path)?.sync_all()?;
        }
    }
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(TEMP_MARKER))
            .collect()
    }

    #[test]
    fn a_regular_file_is_replaced_only_on_commit_and_keeps_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        std::fs::write(&path, "before").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let mut out = Output::create(&path).unwrap();
        assert!(!out.is_in_place());
        out.write_all(b"after").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "before");
        assert_eq!(leftovers(dir.path()).len(), 1);
        out.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "after");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o640);
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn an_output_dropped_without_commit_leaves_the_target_and_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        std::fs::write(&path, "before").unwrap();
        let failed = write_with(&path, |out| {
            out.write_all(b"half").unwrap();
            Err::<(), _>(Error::Usage("stopped".into()))
        });
        assert!(failed.is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "before");
        assert!(leftovers(dir.path()).is_empty());
        // And a new file is not created at all.
        let fresh = dir.path().join("fresh.txt");
        drop(Output::create(&fresh).unwrap());
        assert!(!fresh.exists());
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn a_link_is_followed_and_stays_a_link() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("real")).unwrap();
        let link = dir.path().join("link");
        // A relative, dangling link: the file it names is created.
        std::os::unix::fs::symlink("real/target.txt", &link).unwrap();
        write_with(&link, |out| {
            out.write_all(b"one").map_err(|e| Error::io("x", e))
        })
        .unwrap();
        write_with(&link, |out| {
            out.write_all(b"two").map_err(|e| Error::io("x", e))
        })
        .unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("real/target.txt")).unwrap(),
            "two"
        );
    }

    #[test]
    fn a_directory_and_a_loop_of_links_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let e = Output::create(dir.path()).unwrap_err().to_string();
        assert!(e.contains("Is a directory"), "{e}");
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        std::os::unix::fs::symlink(&b, &a).unwrap();
        std::os::unix::fs::symlink(&a, &b).unwrap();
        let e = Output::create(&a).unwrap_err().to_string();
        assert!(e.contains("symbolic links"), "{e}");
    }
}

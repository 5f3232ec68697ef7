//! The master file `NAME.otf` of an OTF v1 trace: one line per stream, `stream:process,…`
//! in hexadecimal, saying which processes' events each `NAME.<stream>.events` file holds.
//! The definitions are in `NAME.0.def` (stream 0), optionally with local definitions in
//! `NAME.<stream>.def`; statistics, snapshot and marker streams sit beside them.

use std::path::{Path, PathBuf};

use super::stream::{self, LineReader};
use super::syntax::Cursor;
use crate::error::{Error, Result};
use crate::hash::FxHashMap;

/// A master file read.
#[derive(Debug)]
pub(crate) struct Master {
    /// The trace's path without `.otf` (`dir/NAME`), which every stream file name extends.
    pub stub: PathBuf,
    /// Each event stream and the processes it holds, in file order.
    pub streams: Vec<(u32, Vec<u32>)>,
}

impl Master {
    /// The path `NAME.<id>.<suffix>` (without `.z`), stream ids in hexadecimal.
    pub fn file(&self, id: u32, suffix: &str) -> PathBuf {
        let mut name = self.stub.as_os_str().to_owned();
        name.push(format!(".{id:x}.{suffix}"));
        PathBuf::from(name)
    }
}

/// The `NAME` part of `NAME.otf`, with its folder.
fn stub_of(path: &Path) -> Option<PathBuf> {
    (path.extension()? == "otf").then(|| path.with_extension(""))
}

/// A line `stream:process,…` split into its numbers; `None` for any other line.
fn mapping(line: &[u8]) -> Option<(u32, Vec<u32>)> {
    let mut c = Cursor::new(line);
    let stream = c.hex32("stream").ok()?;
    if !c.prefix(b":") {
        return None;
    }
    let mut processes = vec![c.hex32("process").ok()?];
    while c.prefix(b",") {
        processes.push(c.hex32("process").ok()?);
    }
    c.at_end().then_some((stream, processes))
}

/// Whether `path` is an OTF v1 master file: named `*.otf`, its first line a stream mapping,
/// with the definitions stream `NAME.0.def` (or `.def.z`) beside it.
pub fn looks_like_master(path: &Path) -> bool {
    let Some(stub) = stub_of(path) else {
        return false;
    };
    if !path.is_file() {
        return false;
    }
    let first = LineReader::open(path).ok().and_then(|mut r| {
        while let Ok(true) = r.advance() {
            let line = r.line();
            if !line.iter().all(u8::is_ascii_whitespace) {
                return Some(mapping(line).is_some());
            }
        }
        None
    });
    let master = Master {
        stub,
        streams: Vec::new(),
    };
    first == Some(true) && stream::find(&master.file(0, "def")).is_some()
}

/// Finds the master file of the trace at `path`: the file itself, or the one master file in
/// a folder.
pub fn find_master(path: &Path) -> Result<PathBuf> {
    if !path.is_dir() {
        return if looks_like_master(path) {
            Ok(path.to_path_buf())
        } else {
            Err(Error::input(
                path.display().to_string(),
                0,
                0,
                "not an OTF v1 master file",
                "give the trace's NAME.otf file (lines `stream:process,...`, with NAME.0.def or NAME.0.def.z beside it) or its folder",
                "",
            ))
        };
    }
    let entries = std::fs::read_dir(path).map_err(|e| Error::io(path, e))?;
    let mut masters: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| looks_like_master(p))
        .collect();
    masters.sort();
    match masters.len() {
        1 => Ok(masters.remove(0)),
        0 => Err(Error::Usage(format!(
            "{}: no OTF v1 master file in this folder (a trace has one, NAME.otf)",
            path.display()
        ))),
        _ => Err(Error::Usage(format!(
            "{}: the folder holds several OTF v1 traces ({}); give the .otf file of the one to import",
            path.display(),
            masters
                .iter()
                .map(|p| p.file_name().unwrap_or_default().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Reads the master file at `path`. Lines that are not stream mappings are skipped, as the
/// OTF library does; a process in two streams is an error.
pub(crate) fn read(path: &Path) -> Result<Master> {
    let stub = stub_of(path).ok_or_else(|| {
        Error::input(
            path.display().to_string(),
            0,
            0,
            "not an OTF v1 master file",
            "the master file's name ends in .otf",
            "",
        )
    })?;
    let mut reader = LineReader::open(path)?;
    let mut streams: Vec<(u32, Vec<u32>)> = Vec::new();
    let mut owner: FxHashMap<u32, u32> = FxHashMap::default();
    while reader.advance()? {
        let Some((stream, processes)) = mapping(reader.line()) else {
            continue;
        };
        if stream == 0 {
            return Err(reader.error(
                1,
                "bad stream mapping",
                "stream 0 is the definitions stream and holds no events",
            ));
        }
        for &p in &processes {
            if let Some(other) = owner.insert(p, stream) {
                return Err(reader.error(
                    1,
                    "bad stream mapping",
                    format!("process {p:x} is mapped to stream {other:x} and to stream {stream:x}"),
                ));
            }
        }
        match streams.iter_mut().find(|(s, _)| *s == stream) {
            Some((_, list)) => list.extend(processes),
            None => streams.push((stream, processes)),
        }
    }
    Ok(Master { stub, streams })
}

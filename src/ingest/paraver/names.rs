//! The two optional companions of a `.prv`: the `.pcf` (names of event types and their
//! values) and the `.row` (names of the CPUs, nodes, tasks and threads).
//!
//! A `.pcf` is a sequence of sections headed by a keyword line (`DEFAULT_OPTIONS`, `STATES`,
//! `EVENT_TYPE`, …). Only `EVENT_TYPE` sections are read: lines `gradient type label` for one
//! or more types, then optionally `VALUES` and lines `value label` that name the values of
//! those types; a blank line or the next keyword ends the section. A `.row` is a sequence of
//! `LEVEL name SIZE n` lines, each followed by its n names.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use super::text::{parse_signed, parse_unsigned, Fault, Lines};
use crate::error::Result;
use crate::hash::FxHashMap;
use crate::ingest::excerpt::quoted;

/// What a `.pcf` names.
#[derive(Debug, Default)]
pub(crate) struct Pcf {
    /// Event type → its label.
    pub types: FxHashMap<u64, String>,
    /// (event type, value) → the value's label.
    pub values: FxHashMap<(u64, i64), String>,
}

impl Pcf {
    /// The label of value `value` of event type `ty`, if named.
    pub fn value(&self, ty: u64, value: i64) -> Option<&str> {
        self.values.get(&(ty, value)).map(String::as_str)
    }
}

/// What a `.row` names, per level, in the trace's global order.
#[derive(Debug, Default)]
pub(crate) struct Row {
    /// Node names.
    pub nodes: Vec<String>,
    /// Task names (all applications, in order).
    pub tasks: Vec<String>,
    /// Thread names (all applications and tasks, in order).
    pub threads: Vec<String>,
}

/// Reads `path` with `parse` if the file exists; `None` if it does not.
fn optional<T>(
    path: &Path,
    parse: impl FnOnce(&mut Lines<BufReader<File>>, &str) -> Result<T>,
) -> Result<Option<T>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(crate::error::Error::io(path, e)),
    };
    let name = path.display().to_string();
    let mut lines = Lines::new(BufReader::new(file), &name);
    parse(&mut lines, &name).map(Some)
}

/// Reads the `.pcf` at `path`, if there is one.
pub(crate) fn read_pcf(path: &Path) -> Result<Option<Pcf>> {
    optional(path, parse_pcf)
}

/// Reads the `.row` at `path`, if there is one.
pub(crate) fn read_row(path: &Path) -> Result<Option<Row>> {
    optional(path, parse_row)
}

/// Whether a line is a section keyword: one word of capitals and underscores.
fn is_keyword(line: &str) -> bool {
    !line.is_empty() && line.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
}

/// Splits `line` into its first whitespace-separated word and the rest (trimmed).
fn word(line: &str) -> (&str, &str) {
    let line = line.trim_start();
    match line.find(char::is_whitespace) {
        Some(i) => (&line[..i], line[i..].trim()),
        None => (line, ""),
    }
}

/// The byte offset of `part` (a slice of `line`) within `line`.
fn offset(line: &str, part: &str) -> usize {
    part.as_ptr() as usize - line.as_ptr() as usize
}

#[derive(PartialEq)]
enum Section {
    Other,
    Types,
    Values,
}

fn parse_pcf<R: BufRead>(lines: &mut Lines<R>, file: &str) -> Result<Pcf> {
    let mut pcf = Pcf::default();
    let mut section = Section::Other;
    let mut current: Vec<u64> = Vec::new();
    while let Some((line_no, raw)) = lines.next_line()? {
        let line = String::from_utf8_lossy(raw);
        let trimmed = line.trim();
        let fault = |at: usize, message: String| {
            Fault::new(at, "bad .pcf line", message).at_line(file, line_no, raw)
        };
        if trimmed.is_empty() {
            if section != Section::Other {
                section = Section::Other;
            }
            continue;
        }
        if is_keyword(trimmed) {
            section = match trimmed {
                "EVENT_TYPE" => {
                    current.clear();
                    Section::Types
                }
                "VALUES" if section == Section::Types => Section::Values,
                _ => Section::Other,
            };
            continue;
        }
        match section {
            Section::Other => {}
            Section::Types => {
                let (gradient, rest) = word(&line);
                if parse_signed(gradient.as_bytes()).is_none() {
                    return Err(fault(
                        offset(&line, gradient),
                        format!(
                            "expected an event type line (gradient, type, label), found {}",
                            quoted(gradient)
                        ),
                    ));
                }
                let (ty, label) = word(rest);
                let Some(ty_value) = parse_unsigned(ty.as_bytes()) else {
                    return Err(fault(
                        offset(&line, ty),
                        format!("the event type {} is not a number", quoted(ty)),
                    ));
                };
                pcf.types.insert(ty_value, label.to_string());
                current.push(ty_value);
            }
            Section::Values => {
                let (value, label) = word(&line);
                let Some(v) = parse_signed(value.as_bytes()) else {
                    return Err(fault(
                        offset(&line, value),
                        format!(
                            "expected a value line (value, label), found {}",
                            quoted(value)
                        ),
                    ));
                };
                for &ty in &current {
                    pcf.values.insert((ty, v), label.to_string());
                }
            }
        }
    }
    Ok(pcf)
}

fn parse_row<R: BufRead>(lines: &mut Lines<R>, file: &str) -> Result<Row> {
    let mut row = Row::default();
    // The level being read and the names it still expects.
    let mut level: Option<(String, usize)> = None;
    let mut last_line = 0;
    while let Some((line_no, raw)) = lines.next_line()? {
        last_line = line_no;
        let line = String::from_utf8_lossy(raw);
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        let (first, rest) = word(trimmed);
        match &mut level {
            Some((name, left)) if *left > 0 && first != "LEVEL" => {
                let list = match name.as_str() {
                    "NODE" => Some(&mut row.nodes),
                    "TASK" => Some(&mut row.tasks),
                    "THREAD" => Some(&mut row.threads),
                    _ => None,
                };
                if let Some(list) = list {
                    list.push(trimmed.to_string());
                }
                *left -= 1;
                continue;
            }
            Some((name, left)) if *left > 0 => {
                return Err(Fault::new(
                    0,
                    "truncated .row level",
                    format!("level {name} still expects {left} names"),
                )
                .at_line(file, line_no, raw));
            }
            _ => {}
        }
        // LEVEL <name> SIZE <n>
        let (name, rest) = word(rest);
        let (size_word, count) = word(rest);
        let n = parse_unsigned(count.as_bytes());
        match (first, size_word, n) {
            ("LEVEL", "SIZE", Some(n)) if !name.is_empty() => {
                let n = usize::try_from(n).unwrap_or(usize::MAX);
                level = Some((name.to_ascii_uppercase(), n));
            }
            _ => {
                return Err(Fault::new(
                    offset(&line, trimmed),
                    "bad .row line",
                    format!(
                        "expected LEVEL <name> SIZE <count>, found {}",
                        quoted(trimmed)
                    ),
                )
                .at_line(file, line_no, raw));
            }
        }
    }
    if let Some((name, left)) = level.filter(|(_, left)| *left > 0) {
        return Err(crate::error::Error::input(
            file,
            last_line + 1,
            1,
            "truncated .row level",
            format!("the file ends while level {name} still expects {left} names"),
            "",
        ));
    }
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_types_share_their_values_and_other_sections_are_skipped() {
        let text = "DEFAULT_OPTIONS\n\nLEVEL THREAD\nUNITS NANOSEC\n\nSTATES\n0 Idle\n\nEVENT_TYPE\n9   50000001    MPI Point-to-point\n9   50000002    MPI Collective\nVALUES\n3   MPI_Isend\n0   Outside MPI\n\nEVENT_TYPE\n7  42000050 PAPI_TOT_INS ([Instr completed])\n";
        let pcf = parse_pcf(&mut Lines::new(text.as_bytes(), "t.pcf"), "t.pcf").unwrap();
        assert_eq!(pcf.value(50000001, 3), Some("MPI_Isend"));
        assert_eq!(pcf.value(50000002, 3), Some("MPI_Isend"));
        assert_eq!(pcf.types[&42000050], "PAPI_TOT_INS ([Instr completed])");
        assert_eq!(pcf.value(42000050, 0), None);
        let bad = "EVENT_TYPE\n9 5000000x MPI\n";
        let e = parse_pcf(&mut Lines::new(bad.as_bytes(), "t.pcf"), "t.pcf").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("t.pcf:2:3: bad .pcf line: the event type \"5000000x\""),
            "{e}"
        );
    }

    #[test]
    fn row_levels_and_a_truncated_one() {
        let text = "LEVEL CPU SIZE 2\n1.a\n2.a\n\nLEVEL NODE SIZE 1\nnodeA\n\nLEVEL THREAD SIZE 2\nTHREAD 1.1.1\nTHREAD 1.2.1\n";
        let row = parse_row(&mut Lines::new(text.as_bytes(), "t.row"), "t.row").unwrap();
        assert_eq!(row.nodes, vec!["nodeA"]);
        assert_eq!(row.threads, vec!["THREAD 1.1.1", "THREAD 1.2.1"]);
        let e = parse_row(
            &mut Lines::new(&b"LEVEL NODE SIZE 2\nx\n"[..], "t.row"),
            "t.row",
        )
        .unwrap_err();
        assert!(
            e.to_string().starts_with("t.row:3:1: truncated .row level"),
            "{e}"
        );
    }
}

//! The shell's line editor helper: Tab completion that knows where the cursor is (meta
//! commands and their arguments, file paths, the keywords valid after the previous word, then
//! the database's names), keywords highlighted on a terminal, and hints from history.

use std::borrow::Cow;
use std::sync::LazyLock;

use rustyline::completion::{Completer, FilenameCompleter, Pair};
use rustyline::highlight::Highlighter;
use rustyline::hint::{Hinter, HistoryHinter};
use rustyline::validate::Validator;
use rustyline::{Context, Helper};

use mtfdb::query::{COLLECTIVE_WORDS, KEYWORDS};

/// The words a statement starts with.
const STATEMENT_STARTS: &[&str] = &[
    "SELECT", "EXPLAIN", "SHOW", "DESCRIBE", "USE", "CREATE", "DROP", "MATCH", "REFRESH",
    "SIMULATE",
];

/// What `SELECT` is followed by (besides the MPI call names): these words, then the
/// collective words ([`COLLECTIVE_WORDS`]).
static SELECT_TARGETS: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
    SELECT_WORDS
        .iter()
        .chain(COLLECTIVE_WORDS)
        .copied()
        .collect()
});

/// [`SELECT_TARGETS`] but the collective words.
const SELECT_WORDS: &[&str] = &[
    "ALL",
    "MESSAGES",
    "OPERATIONS",
    "POINT_TO_POINT_OPERATIONS",
    "SENDS",
    "RECEIVES",
    "COLLECTIVE_OPERATIONS",
    "COLLECTIVE",
    "ROUTINE",
    "REQUESTS",
    "ANOMALIES",
    "FAN_IN",
    "FAN_OUT",
    "STATISTICS",
    "COMMUNICATION",
    "HISTOGRAM",
    "WAIT",
    "LATE",
    "CRITICAL",
    "CPU",
    "PATTERNS",
    "PHASES",
    "LOOPS",
    "GLOBAL",
    "TOPOLOGY",
    "LOGICAL",
    "MPI",
    "COUNT",
    "SUM",
    "AVG",
    "MIN",
    "MAX",
];

/// The keywords valid after `previous` (upper case), or `None` when any may follow.
fn keywords_after(previous: Option<&str>) -> Option<&'static [&'static str]> {
    Some(match previous {
        None => STATEMENT_STARTS,
        Some("SELECT") | Some("DESCRIBE") => SELECT_TARGETS.as_slice(),
        Some("SHOW") => &[
            "TRACES",
            "TABLES",
            "PROCESSES",
            "COMMUNICATORS",
            "OPERATIONS",
            "VIEWS",
            "PHASE",
        ],
        Some("EXPLAIN") => &["SELECT"],
        Some("USE") => &["TRACE"],
        Some("CREATE") | Some("DROP") => &["VIEW"],
        Some("GROUP") | Some("ORDER") => &["BY"],
        Some("IN") => &["COMM", "VIEW", "PHASE", "PATTERN"],
        Some("ROUTINE") => &["CALLS"],
        Some("COLLECTIVE") => &["INSTANCES"],
        // A name follows.
        Some("TRACE") | Some("VIEW") | Some("COMM") => &[],
        _ => return None,
    })
}

/// The `.mode` argument's values.
pub const MODES: &[&str] = &["table", "csv", "json", "svg"];

/// The meta commands whose argument is a file path.
const FILE_COMMANDS: &[&str] = &[".open", ".import", ".read", ".output", ".once"];

/// The meta commands that take `on` or `off`.
const SWITCH_COMMANDS: &[&str] = &[".headers", ".timer", ".bail", ".pager", ".safe", ".units"];

/// Completion, highlighting and hints for the shell's editor.
pub struct ReplHelper {
    /// The meta commands' names (`.help`, …).
    meta: Vec<&'static str>,
    /// The database's names: traces, communicators, views, MPI calls.
    pub names: Vec<String>,
    /// Whether to colour keywords (standard output is a terminal).
    color: bool,
    files: FilenameCompleter,
    hinter: HistoryHinter,
}

impl ReplHelper {
    /// A helper completing `meta` commands and `names`, colouring keywords when `color`.
    pub fn new(meta: Vec<&'static str>, names: Vec<String>, color: bool) -> ReplHelper {
        ReplHelper {
            meta,
            names,
            color,
            files: FilenameCompleter::new(),
            hinter: HistoryHinter::new(),
        }
    }

    /// The candidates for the text before the cursor (`line[..pos]`), from where they start
    /// (file paths aside: the editor's file completer handles those).
    fn candidates(&self, line: &str, pos: usize) -> (usize, Vec<String>) {
        let before = &line[..pos];
        let trimmed = before.trim_start();
        if trimmed.starts_with('.') {
            let Some((command, _)) = trimmed.split_once(char::is_whitespace) else {
                let start = pos - trimmed.len();
                return (start, matching(self.meta.iter().copied(), trimmed));
            };
            let start = word_start(before);
            let prefix = &before[start..];
            let words: Vec<&str> = match command {
                ".mode" => MODES.to_vec(),
                c if SWITCH_COMMANDS.contains(&c) => vec!["on", "off"],
                ".use" | ".schema" => self.names.iter().map(String::as_str).collect(),
                _ => Vec::new(),
            };
            return (start, matching(words.into_iter(), prefix));
        }
        let start = word_start(before);
        let prefix = &before[start..];
        let previous = before[..start]
            .split(|c: char| c.is_whitespace() || c == '(' || c == ',')
            .rfind(|w| !w.is_empty())
            .filter(|w| !w.ends_with(';'))
            .map(str::to_ascii_uppercase);
        match keywords_after(previous.as_deref()) {
            Some(keywords) if prefix.is_empty() => (start, matching(keywords.iter().copied(), "")),
            // Valid keywords first, then names.
            Some(keywords) => {
                let mut out = matching(keywords.iter().copied(), prefix);
                out.extend(matching(self.names.iter().map(String::as_str), prefix));
                (start, out)
            }
            None if prefix.is_empty() => (start, Vec::new()),
            None => {
                let mut out = matching(KEYWORDS.iter().copied(), prefix);
                for name in matching(self.names.iter().map(String::as_str), prefix) {
                    if !out.contains(&name) {
                        out.push(name);
                    }
                }
                (start, out)
            }
        }
    }
}

/// Where the word under the cursor starts.
fn word_start(before: &str) -> usize {
    before
        .rfind(|c: char| c.is_whitespace() || c == '(' || c == ',')
        .map_or(0, |i| i + 1)
}

/// The `words` that start with `prefix` (ignoring case), in order, each once.
fn matching<'a>(words: impl Iterator<Item = &'a str>, prefix: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in words {
        if w.is_char_boundary(prefix.len().min(w.len()))
            && w.len() >= prefix.len()
            && w[..prefix.len()].eq_ignore_ascii_case(prefix)
            && !out.iter().any(|o| o == w)
        {
            out.push(w.to_string());
        }
    }
    out
}

/// Whether the meta command being typed on `before` takes a file path.
fn completes_files(before: &str) -> bool {
    before
        .trim_start()
        .split_once(char::is_whitespace)
        .is_some_and(|(command, _)| FILE_COMMANDS.contains(&command))
}

impl Completer for ReplHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        if completes_files(&line[..pos]) {
            return self.files.complete_path(line, pos);
        }
        let (start, words) = self.candidates(line, pos);
        let pairs = words
            .into_iter()
            .map(|w| Pair {
                display: w.clone(),
                replacement: w,
            })
            .collect();
        Ok((start, pairs))
    }
}

impl Hinter for ReplHelper {
    type Hint = String;

    fn hint(&self, line: &str, pos: usize, ctx: &Context<'_>) -> Option<String> {
        self.hinter.hint(line, pos, ctx)
    }
}

/// Keywords in bold green, as duckdb's shell shows them; hints dimmed.
const KEYWORD_STYLE: &str = "\x1b[1;32m";
const HINT_STYLE: &str = "\x1b[2m";
const RESET: &str = "\x1b[0m";

impl Highlighter for ReplHelper {
    fn highlight<'l>(&self, line: &'l str, _pos: usize) -> Cow<'l, str> {
        if !self.color || line.trim_start().starts_with('.') {
            return Cow::Borrowed(line);
        }
        let mut out = String::with_capacity(line.len() + 16);
        let mut rest = line;
        while let Some(start) = rest.find(|c: char| c.is_ascii_alphabetic() || c == '_') {
            out.push_str(&rest[..start]);
            let len = rest[start..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len() - start);
            let word = &rest[start..start + len];
            if KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(word)) {
                out.push_str(KEYWORD_STYLE);
                out.push_str(word);
                out.push_str(RESET);
            } else {
                out.push_str(word);
            }
            rest = &rest[start + len..];
        }
        out.push_str(rest);
        Cow::Owned(out)
    }

    fn highlight_hint<'h>(&self, hint: &'h str) -> Cow<'h, str> {
        if self.color {
            Cow::Owned(format!("{HINT_STYLE}{hint}{RESET}"))
        } else {
            Cow::Borrowed(hint)
        }
    }

    fn highlight_char(&self, _line: &str, _pos: usize, _forced: bool) -> bool {
        self.color
    }
}

impl Validator for ReplHelper {}

impl Helper for ReplHelper {}

#[cfg(test)]
mod tests {
    use super::*;

    fn helper() -> ReplHelper {
        ReplHelper::new(
            vec![".help", ".mode", ".open"],
            vec!["C1".into(), "wrf16".into()],
            false,
        )
    }

    #[test]
    fn completes_by_context() {
        let h = helper();
        assert_eq!(h.candidates(".mode c", 7), (6, vec!["csv".to_string()]));
        assert_eq!(h.candidates(".mo", 3), (0, vec![".mode".to_string()]));
        assert_eq!(h.candidates("SHOW TA", 7), (5, vec!["TABLES".to_string()]));
        assert_eq!(h.candidates("se", 2), (0, vec!["SELECT".to_string()]));
        assert_eq!(
            h.candidates("SELECT ALL MESSAGES IN COMM(C", 29),
            (28, vec!["C1".to_string()])
        );
        assert_eq!(
            h.candidates("USE TRACE w", 11),
            (10, vec!["wrf16".to_string()])
        );
        assert!(completes_files(".import bi"));
        assert!(!completes_files(".mode c"));
    }
}

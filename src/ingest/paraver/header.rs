//! The `.prv` header: the first line, and the communicator lines it announces.
//!
//! ```text
//! #Paraver (31/01/2022 at 11:46):567453952_ns:1(20):2:8(1:1,1:1,…),12(1:1,…),14
//!           date                 duration+unit nodes(CPUs per node)
//!                                                    applications, each tasks(threads:node,…)
//!                                                                              communicator lines
//! c:1:14:8:1:2:3:4:5:6:7:8        application, communicator id, tasks, the tasks in rank order
//! ```
//!
//! The duration carries its unit (`_ns`, `_us`, `_ms`; none means microseconds, as Paraver
//! reads it). The resource part is `0` (no nodes declared), `N` (N nodes of one CPU) or
//! `N(c1,…,cN)`. Applications are separated by `:` or `,`, and the number of communicator
//! lines follows the last one after either separator. Node numbers count from 1.

use std::io::BufRead;

use super::text::{parse_signed, parse_unsigned, Fault, Fields, Lines};
use crate::error::{Error, Result};
use crate::ingest::excerpt::quoted_bytes;

/// One task as the header declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TaskDecl {
    /// Its threads (at least 1).
    pub threads: u32,
    /// The node it ran on, counted from 1 (0: none; the header may not declare it).
    pub node: u32,
}

/// A communicator line: `c:application:id:tasks:task…`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CommLine {
    /// Its line number in the `.prv`.
    pub line: u64,
    /// The application (from 1).
    pub app: u64,
    /// The communicator id.
    pub id: u64,
    /// Its tasks in communicator-rank order, numbered from 1 within the application, as
    /// written (tracers write -1 for a member they could not name).
    pub members: Vec<i64>,
}

/// What the header declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Header {
    /// The recording date as written (`31/01/2022 at 11:46`).
    pub date: String,
    /// Nanoseconds per unit of the trace's times.
    pub ns_per_unit: u64,
    /// CPUs of each node; empty when the trace declares no nodes.
    pub nodes: Vec<u32>,
    /// Each application's tasks.
    pub apps: Vec<Vec<TaskDecl>>,
    /// The communicator lines.
    pub comms: Vec<CommLine>,
    /// Line numbers of inter-communicator lines (`i:`), which mtfdb does not read.
    pub intercomm_lines: Vec<u64>,
}

/// Whether a file's first bytes are those of a Paraver trace.
pub(crate) fn looks_like_prv(head: &[u8]) -> bool {
    let head = head.strip_prefix(b"new format\n").unwrap_or(head);
    head.starts_with(b"#Paraver")
}

/// Reads the header line and its communicator lines from `lines`.
pub(crate) fn read<R: BufRead>(lines: &mut Lines<R>, file: &str) -> Result<Header> {
    let mut first = lines.next_line()?.map(|(n, l)| (n, l.to_vec()));
    // Paraver's own writer may put a "new format" line first.
    if first.as_ref().is_some_and(|(_, l)| l == b"new format") {
        first = lines.next_line()?.map(|(n, l)| (n, l.to_vec()));
    }
    let Some((line_no, line)) = first else {
        return Err(Error::input(
            file,
            1,
            1,
            "bad header",
            "the file is empty; a Paraver trace starts with a #Paraver header line",
            "",
        ));
    };
    let mut header = parse_first_line(&line).map_err(|f| f.at_line(file, line_no, &line))?;
    let announced = comm_count(&line).map_err(|f| f.at_line(file, line_no, &line))?;
    for n in 0..announced {
        let Some((at, text)) = lines.next_line()? else {
            return Err(Error::input(
                file,
                lines.line_no + 1,
                1,
                "truncated header",
                format!(
                    "the header announces {announced} communicator lines, the file ends after {n}"
                ),
                "",
            ));
        };
        match text.first() {
            Some(b'c' | b'C') => {
                let comm = parse_comm(text, at).map_err(|f| f.at_line(file, at, text))?;
                header.comms.push(comm);
            }
            Some(b'i' | b'I') => header.intercomm_lines.push(at),
            _ => {
                return Err(Fault::new(
                    0,
                    "bad header",
                    format!(
                        "communicator line {} of the {announced} the header announces should start with c: (or i:)",
                        n + 1
                    ),
                )
                .at_line(file, at, text))
            }
        }
    }
    Ok(header)
}

/// A cursor over the header line.
struct Cursor<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn expect(&mut self, byte: u8, context: &str) -> std::result::Result<(), Fault> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.fault(format!("expected '{}' {context}", byte as char)))
        }
    }

    fn number(&mut self, what: &str) -> std::result::Result<u64, Fault> {
        let start = self.pos;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
        parse_unsigned(&self.s[start..self.pos]).ok_or_else(|| {
            Fault::new(
                start,
                "bad header",
                if start == self.pos {
                    format!("expected the {what} (a number)")
                } else {
                    format!("the {what} is out of range")
                },
            )
        })
    }

    fn small(&mut self, what: &str) -> std::result::Result<u32, Fault> {
        let start = self.pos;
        let n = self.number(what)?;
        u32::try_from(n)
            .map_err(|_| Fault::new(start, "bad header", format!("the {what} {n} is too large")))
    }

    fn fault(&self, message: String) -> Fault {
        Fault::new(self.pos, "bad header", message)
    }
}

/// The most nodes, and the most threads in all, a header may declare: each is kept (a
/// processor, a rank's thread or a location), so a damaged count must not be believed.
const MAX_DECLARED: u32 = 1 << 24;

fn too_many(at: usize, what: &str, n: u64) -> Fault {
    Fault::new(
        at,
        "bad header",
        format!("the header declares {n} {what}; mtfdb reads at most {MAX_DECLARED}"),
    )
}

/// The nanoseconds of one unit named by a duration's suffix.
fn unit(suffix: &[u8]) -> Option<u64> {
    Some(match suffix {
        b"" | b"_us" => 1_000,
        b"_ns" => 1,
        b"_ms" => 1_000_000,
        _ => return None,
    })
}

fn parse_first_line(line: &[u8]) -> std::result::Result<Header, Fault> {
    if !line.starts_with(b"#Paraver") {
        return Err(Fault::new(
            0,
            "bad header",
            "a Paraver trace starts with #Paraver",
        ));
    }
    let mut c = Cursor { s: line, pos: 8 };
    while c.peek() == Some(b' ') {
        c.pos += 1;
    }
    c.expect(b'(', "before the date")?;
    let close = memchr::memchr(b')', &line[c.pos..])
        .ok_or_else(|| c.fault("the date has no closing ')'".into()))?;
    let date = String::from_utf8_lossy(&line[c.pos..c.pos + close]).into_owned();
    c.pos += close + 1;
    c.expect(b':', "after the date")?;

    c.number("duration")?;
    let suffix_at = c.pos;
    while c.peek().is_some_and(|b| b != b':') {
        c.pos += 1;
    }
    let ns_per_unit = unit(&line[suffix_at..c.pos]).ok_or_else(|| {
        Fault::new(
            suffix_at,
            "bad header",
            format!(
                "unknown time unit {} (Paraver writes _ns, _us or _ms)",
                quoted_bytes(&line[suffix_at..c.pos])
            ),
        )
    })?;
    c.expect(b':', "after the duration")?;

    let nodes_at = c.pos;
    let node_count = c.small("number of nodes")?;
    let mut nodes = Vec::new();
    if c.peek() == Some(b'(') {
        c.pos += 1;
        for i in 0..node_count {
            nodes.push(c.small("number of CPUs")?);
            c.expect(
                if i + 1 < node_count { b',' } else { b')' },
                "in the CPUs per node",
            )?;
        }
    } else {
        if node_count > MAX_DECLARED {
            return Err(too_many(nodes_at, "nodes", u64::from(node_count)));
        }
        nodes = vec![1; node_count as usize];
    }
    c.expect(b':', "after the nodes")?;

    let app_count = c.small("number of applications")?;
    if app_count == 0 {
        return Err(Fault::new(
            c.pos - 1,
            "bad header",
            "the trace declares no application",
        ));
    }
    c.expect(b':', "after the number of applications")?;
    let mut apps = Vec::new();
    // Every declared thread becomes a rank's thread or a location of its own.
    let mut threads_declared = 0u64;
    for a in 0..app_count {
        if a > 0 {
            // Writers separate applications with ':' or ','.
            match c.peek() {
                Some(b':' | b',') => c.pos += 1,
                _ => return Err(c.fault(format!("expected application {} of {app_count}", a + 1))),
            }
        }
        let at = c.pos;
        let tasks = c.small("number of tasks")?;
        if tasks == 0 {
            return Err(Fault::new(
                at,
                "bad header",
                format!("application {} has no task", a + 1),
            ));
        }
        c.expect(b'(', "before the tasks' threads and nodes")?;
        let mut decls = Vec::new();
        for t in 0..tasks {
            let at = c.pos;
            let threads = c.small("number of threads")?;
            threads_declared += u64::from(threads);
            if threads_declared > u64::from(MAX_DECLARED) {
                return Err(too_many(at, "threads", threads_declared));
            }
            if threads == 0 {
                return Err(Fault::new(
                    at,
                    "bad header",
                    format!("task {} of application {} has no thread", t + 1, a + 1),
                ));
            }
            c.expect(b':', "between a task's threads and its node")?;
            // A node the header does not declare is kept: the import's seam reports the
            // process on an unknown processor.
            let node = c.small("node")?;
            decls.push(TaskDecl { threads, node });
            c.expect(
                if t + 1 < tasks { b',' } else { b')' },
                "in the tasks' list",
            )?;
        }
        apps.push(decls);
    }
    Ok(Header {
        date,
        ns_per_unit,
        nodes,
        apps,
        comms: Vec::new(),
        intercomm_lines: Vec::new(),
    })
}

/// The number of communicator lines the header line announces after its last application.
fn comm_count(line: &[u8]) -> std::result::Result<u64, Fault> {
    // The applications end at the last ')'.
    let Some(end) = memchr::memrchr(b')', line) else {
        return Ok(0);
    };
    let rest = &line[end + 1..];
    match rest {
        [] => Ok(0),
        [b',' | b':', count @ ..] => {
            let trimmed = count.trim_ascii_end();
            parse_unsigned(trimmed).ok_or_else(|| {
                Fault::new(
                    end + 2,
                    "bad header",
                    format!(
                        "the number of communicator lines {} is not a number",
                        quoted_bytes(trimmed)
                    ),
                )
            })
        }
        _ => Err(Fault::new(
            end + 1,
            "bad header",
            "expected ',' and the number of communicator lines, or the end of the line",
        )),
    }
}

fn parse_comm(line: &[u8], line_no: u64) -> std::result::Result<CommLine, Fault> {
    let mut f = Fields::new(line, 2);
    if line.get(1) != Some(&b':') {
        return Err(Fault::new(1, "bad header", "expected ':' after c"));
    }
    let app = f.unsigned("application")?;
    let id = f.unsigned("communicator id")?;
    let count = f.unsigned("number of tasks")?;
    let mut members = Vec::new();
    for _ in 0..count {
        let end = f.position();
        let (at, field) = f.next_field().ok_or_else(|| {
            Fault::new(
                end,
                "truncated header",
                format!(
                    "communicator {id} announces {count} tasks, the line lists {}",
                    members.len()
                ),
            )
        })?;
        members.push(parse_signed(field).ok_or_else(|| {
            Fault::new(
                at,
                "bad number",
                format!("the task {} is not a number", quoted_bytes(field)),
            )
        })?);
    }
    f.end("the communicator line", 4 + count as usize)?;
    Ok(CommLine {
        line: line_no,
        app,
        id,
        members,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(text: &str) -> Result<Header> {
        let mut lines = Lines::new(text.as_bytes(), "t.prv");
        read(&mut lines, "t.prv")
    }

    #[test]
    fn lulesh_header_with_two_applications_and_communicators() {
        let h = header(
            "#Paraver (31/01/2022 at 11:46):567453952_ns:1(20):2:2(1:1,2:1),3(1:1,1:1,1:1),2\nc:1:14:2:1:2\nc:1:92:1:-1\n2:1:1:1:1:0:1:1\n",
        )
        .unwrap();
        assert_eq!(h.date, "31/01/2022 at 11:46");
        assert_eq!(h.ns_per_unit, 1);
        assert_eq!(h.nodes, vec![20]);
        assert_eq!(h.apps.len(), 2);
        assert_eq!(
            h.apps[0][1],
            TaskDecl {
                threads: 2,
                node: 1
            }
        );
        assert_eq!(h.apps[1].len(), 3);
        assert_eq!(
            h.comms[1],
            CommLine {
                line: 3,
                app: 1,
                id: 92,
                members: vec![-1]
            }
        );
    }

    #[test]
    fn old_header_in_microseconds_with_one_cpu_nodes() {
        let h = header(
            "#Paraver (26/01/04 at 16:35):260199:4:1:4(1:1,1:2,1:3,1:4),1\nc:1:91:4:1:2:3:4",
        )
        .unwrap();
        assert_eq!((h.ns_per_unit, h.nodes.clone()), (1000, vec![1, 1, 1, 1]));
        assert_eq!(
            h.apps[0][3],
            TaskDecl {
                threads: 1,
                node: 4
            }
        );
        assert_eq!(h.comms[0].members, vec![1, 2, 3, 4]);
    }

    #[test]
    fn damaged_headers_name_their_line_and_column() {
        let cases = [
            ("#Paraver (d):10_ps:1:1:1(1:1)", "t.prv:1:16: bad header: unknown time unit \"_ps\""),
            ("#Paraver (d):10:1:1:2(1:1)", "t.prv:1:26: bad header: expected ',' in the tasks' list"),
            ("#Paraver (d):10:1:1:1(1:1),2\nc:1:1:1:1", "t.prv:3:1: truncated header: the header announces 2 communicator lines, the file ends after 1"),
            ("#Paraver (d):10:1:1:1(1:1),1\nc:1:1:2:1", "t.prv:2:10: truncated header: communicator 1 announces 2 tasks"),
            ("Paraver", "t.prv:1:1: bad header: a Paraver trace starts with #Paraver"),
            // Counts no trace has: refused, not believed.
            ("#Paraver (d):10:1:1:2(16777216:1,1:1)", "t.prv:1:34: bad header: the header declares 16777217 threads; mtfdb reads at most 16777216"),
            ("#Paraver (d):10:99999999:1:1(1:1)", "t.prv:1:17: bad header: the header declares 99999999 nodes"),
        ];
        for (text, want) in cases {
            let e = header(text).unwrap_err().to_string();
            assert!(e.starts_with(want), "{text:?}: {e}");
        }
    }
}

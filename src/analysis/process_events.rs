//! Each process's trace as a sequence of communication events, the input of pattern detection
//! (thesis §2.2): `S<peer>` for a send, `R<peer>` for a receive, a collective by its name (and
//! root); waits, tests and other calls are not events. With routine delimiters (the thesis's
//! "routine-call-directed" variant), each event carries the routine call that directly
//! contains it, and patterns never cross from one such call to another.

use std::fmt;

use crate::error::Result;
use crate::hash::FxHashMap;
use crate::model::{OpId, OpKind, Rank, Time};
use crate::Trace;

/// An event of the pattern alphabet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventKey {
    /// A send to a world rank.
    Send(Rank),
    /// A receive from a world rank.
    Receive(Rank),
    /// A collective, with its root's world rank when it has one.
    Collective(OpKind, Option<Rank>),
    /// Entry into a routine (its interned name): only in the streams loop models read
    /// ([`extract_with_calls`]); pattern detection never sees it.
    Enter(u32),
    /// Exit from a routine (its interned name), as [`EventKey::Enter`].
    Leave(u32),
}

impl fmt::Display for EventKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EventKey::Send(r) => write!(f, "S{r}"),
            EventKey::Receive(r) => write!(f, "R{r}"),
            EventKey::Collective(kind, root) => {
                f.write_str(kind.mpi_name().unwrap_or("MPI_Other"))?;
                if let Some(root) = root {
                    write!(f, "({root})")?;
                }
                Ok(())
            }
            EventKey::Enter(routine) => write!(f, "routine{routine}("),
            EventKey::Leave(_) => f.write_str(")"),
        }
    }
}

/// A message's or collective's envelope, which pattern detection may take into account
/// (thesis §2.1: dropped by default, "used again optionally").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Envelope {
    /// The tag (0 for a collective).
    pub tag: i32,
    /// Bytes sent or received (a collective's send and receive sizes added up).
    pub bytes: u64,
    /// The datatype's string id, when recorded.
    pub datatype: Option<u32>,
}

/// The symbols of a trace's events: dense ids shared by every process.
#[derive(Debug, Clone, Default)]
pub struct Alphabet {
    keys: Vec<(EventKey, Option<Envelope>)>,
    ids: FxHashMap<(EventKey, Option<Envelope>), u32>,
    /// Datatype names, for rendering envelopes.
    datatypes: FxHashMap<u32, String>,
    /// Routine names, for rendering routine entries.
    routines: FxHashMap<u32, String>,
}

impl Alphabet {
    /// The symbol of `key`, made if new.
    pub fn intern(&mut self, key: EventKey) -> u32 {
        self.intern_with(key, None)
    }

    /// The symbol of `key` with an envelope, made if new.
    pub fn intern_with(&mut self, key: EventKey, envelope: Option<Envelope>) -> u32 {
        if let Some(&id) = self.ids.get(&(key, envelope)) {
            return id;
        }
        let id = self.keys.len() as u32;
        self.keys.push((key, envelope));
        self.ids.insert((key, envelope), id);
        id
    }

    /// The symbol of `key` (without envelope), if any event has it.
    pub fn get(&self, key: &EventKey) -> Option<u32> {
        self.ids.get(&(*key, None)).copied()
    }

    /// The event a symbol stands for.
    pub fn key(&self, symbol: u32) -> EventKey {
        self.keys[symbol as usize].0
    }

    /// A symbol in words: `S2`, or with its envelope `S2[tag 7, 64 B, MPI_INT]`; a routine's
    /// entry and exit read `solve(` and `)`.
    pub fn name(&self, symbol: u32) -> String {
        self.with_envelope(symbol, self.key(symbol).to_string())
    }

    /// [`Alphabet::name`] with a send's or receive's peer written as `peer`: `S(r+1)`.
    pub fn name_with_peer(&self, symbol: u32, peer: &str) -> String {
        let head = match self.key(symbol) {
            EventKey::Send(_) => format!("S{peer}"),
            EventKey::Receive(_) => format!("R{peer}"),
            key => key.to_string(),
        };
        self.with_envelope(symbol, head)
    }

    /// `head`, the event's own words, followed by the symbol's envelope.
    fn with_envelope(&self, symbol: u32, head: String) -> String {
        let (key, envelope) = &self.keys[symbol as usize];
        match envelope {
            None => match key {
                EventKey::Enter(_) => match self.routine(symbol) {
                    Some(name) => format!("{name}("),
                    None => head,
                },
                _ => head,
            },
            Some(e) => {
                let mut s = format!("{head}[");
                if !matches!(key, EventKey::Collective(..)) {
                    s.push_str(&format!("tag {}, ", e.tag));
                }
                s.push_str(&format!("{} B", e.bytes));
                if let Some(name) = e.datatype.and_then(|d| self.datatypes.get(&d)) {
                    s.push_str(&format!(", {name}"));
                }
                s.push(']');
                s
            }
        }
    }

    /// The symbol of `key` with `envelope`, if any event has it.
    pub fn get_with(&self, key: EventKey, envelope: Option<Envelope>) -> Option<u32> {
        self.ids.get(&(key, envelope)).copied()
    }

    /// The envelope a symbol carries, if any.
    pub fn envelope(&self, symbol: u32) -> Option<Envelope> {
        self.keys[symbol as usize].1
    }

    /// The routine a routine's entry or exit names, if the symbol is one.
    pub fn routine(&self, symbol: u32) -> Option<&str> {
        match self.keys[symbol as usize].0 {
            EventKey::Enter(r) | EventKey::Leave(r) => self.routines.get(&r).map(String::as_str),
            _ => None,
        }
    }

    /// `S2 S3 R2`: a symbol sequence in words.
    pub fn render(&self, symbols: &[u32]) -> String {
        let words: Vec<String> = symbols.iter().map(|&s| self.name(s)).collect();
        words.join(" ")
    }

    /// Number of distinct symbols.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when no event was seen.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// One process's events in time order.
#[derive(Debug, Clone, Default)]
pub struct ProcessEvents {
    /// The world rank.
    pub rank: Rank,
    /// Each event's symbol.
    pub symbols: Vec<u32>,
    /// Each event's operation (an `MPI_Sendrecv` gives two events of one operation).
    pub ops: Vec<OpId>,
    /// Each event's operation start time.
    pub times: Vec<Time>,
    /// Each event's block: the routine call that directly contains it (patterns never cross
    /// blocks), numbered from 0 per process; every event is in block 0 without delimiters.
    pub blocks: Vec<u32>,
}

impl ProcessEvents {
    /// Number of events.
    pub fn len(&self) -> usize {
        self.symbols.len()
    }

    /// True for a process without communication events.
    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }
}

/// Reads every process's events (`delimiters`: split them by the routine call that directly
/// contains them; `envelope`: tell events apart by tag, size and datatype too).
pub fn extract(
    trace: &Trace,
    delimiters: bool,
    envelope: bool,
) -> Result<(Alphabet, Vec<ProcessEvents>)> {
    let mut alphabet = Alphabet::default();
    if envelope {
        for id in 0.. {
            match trace.string(id) {
                Some(name) => alphabet.datatypes.insert(id, name.to_string()),
                None => break,
            };
        }
    }
    let ranks = trace.header().processes.len() as Rank;
    let calls = if delimiters {
        trace.routine_calls()?
    } else {
        Vec::new()
    };
    // Routine calls per (rank, thread) as (start, end), by start time.
    let mut calls_of: FxHashMap<(Rank, u32), Vec<(Time, Time)>> = FxHashMap::default();
    for c in &calls {
        calls_of
            .entry((c.rank, c.thread))
            .or_default()
            .push((c.start, c.end));
    }
    for list in calls_of.values_mut() {
        list.sort_unstable();
    }
    let mut out = Vec::with_capacity(ranks as usize);
    for rank in 0..ranks {
        let ops = communication_ops(trace, rank, envelope)?;
        let mut events = ProcessEvents {
            rank,
            ..ProcessEvents::default()
        };
        // Per thread: the open routine calls (end, block) and the next call to open.
        let mut cursors: FxHashMap<u32, (usize, Vec<(Time, u32)>)> = FxHashMap::default();
        let mut next_block = 1u32;
        for op in &ops {
            let block = match calls_of.get(&(rank, op.thread)) {
                Some(list) => {
                    let (next, open) = cursors.entry(op.thread).or_default();
                    // Open every call that started by now, close those that ended before.
                    while *next < list.len() && list[*next].0 <= op.start {
                        let (start, end) = list[*next];
                        open.retain(|&(e, _)| e >= start);
                        open.push((end, next_block));
                        next_block += 1;
                        *next += 1;
                    }
                    open.retain(|&(e, _)| e >= op.start);
                    open.last().map_or(0, |&(_, b)| b)
                }
                None => 0,
            };
            for (key, envelope) in op.keys.into_iter().zip(op.envelopes) {
                let Some(key) = key else { continue };
                events.symbols.push(alphabet.intern_with(key, envelope));
                events.ops.push(op.id);
                events.times.push(op.start);
                events.blocks.push(block);
            }
        }
        out.push(events);
    }
    Ok((alphabet, out))
}

/// A rank and its symbols in time order.
pub type RankSymbols = (Rank, Vec<u32>);

/// Every process's communication events and the entries into and exits from the routine
/// calls of its main thread (thread 0), in time order, as symbols: the input of loop models.
///
/// P1 keeps call entries and returns in its traces as `local` events that take part in loop
/// recognition; here they do the same for routine calls, which anchors loops at the
/// program's own iterations (the setup's `MPI_Bcast` inside `setup( … )` is no longer the
/// same run of events as an iteration's). Other threads' calls are left out: they
/// interleave with the main thread's in no fixed order.
pub fn extract_with_calls(trace: &Trace) -> Result<(Alphabet, Vec<RankSymbols>)> {
    let ranks = trace.header().processes.len() as Rank;
    streams_with_calls(trace, 0..ranks)
}

/// [`extract_with_calls`] for one rank (no symbols for a rank the trace does not have).
pub fn extract_rank_with_calls(trace: &Trace, rank: Rank) -> Result<(Alphabet, Vec<u32>)> {
    let (alphabet, mut streams) = streams_with_calls(trace, rank..rank + 1)?;
    Ok((alphabet, streams.pop().map(|(_, s)| s).unwrap_or_default()))
}

fn streams_with_calls(
    trace: &Trace,
    ranks: std::ops::Range<Rank>,
) -> Result<(Alphabet, Vec<RankSymbols>)> {
    let mut alphabet = Alphabet::default();
    let ranks = ranks.start..ranks.end.min(trace.header().processes.len() as Rank);
    let mut calls_of: Vec<Vec<(Time, Time, u16, u32)>> = vec![Vec::new(); ranks.len()];
    for c in trace.routine_calls()? {
        if c.thread == 0 && ranks.contains(&c.rank) {
            calls_of[(c.rank - ranks.start) as usize].push((c.start, c.end, c.depth, c.routine));
        }
    }
    let mut out = Vec::with_capacity(ranks.len());
    for (rank, calls) in ranks.zip(calls_of.iter_mut()) {
        calls.sort_unstable_by_key(|&(start, _, depth, _)| (start, depth));
        for &(.., routine) in calls.iter() {
            alphabet
                .routines
                .entry(routine)
                .or_insert_with(|| match trace.string(routine) {
                    Some(name) => name.to_string(),
                    None => format!("routine{routine}"),
                });
        }
        let ops = communication_ops(trace, rank, false)?;
        let mut stream = CallStream {
            symbols: Vec::with_capacity(ops.len() + 2 * calls.len()),
            open: Vec::new(),
        };
        let mut next = 0;
        for op in &ops {
            // Every call that started by the operation's start holds it, unless it ended.
            while next < calls.len() && calls[next].0 <= op.start {
                stream.enter(&mut alphabet, calls[next]);
                next += 1;
            }
            stream.leave_while(&mut alphabet, |&(end, ..)| end < op.start);
            for key in op.keys.into_iter().flatten() {
                stream.symbols.push(alphabet.intern(key));
            }
        }
        for &call in &calls[next..] {
            stream.enter(&mut alphabet, call);
        }
        stream.leave_while(&mut alphabet, |_| true);
        out.push((rank, stream.symbols));
    }
    Ok((alphabet, out))
}

/// A rank's symbols as they are made, with the routine calls still open.
struct CallStream {
    symbols: Vec<u32>,
    /// The open calls as (end, depth, routine), innermost last.
    open: Vec<(Time, u16, u32)>,
}

impl CallStream {
    /// Enters a call `(start, end, depth, routine)`, leaving first the open ones that ended
    /// before it starts or that it replaces (the same or a lower depth).
    fn enter(
        &mut self,
        alphabet: &mut Alphabet,
        (start, end, depth, routine): (Time, Time, u16, u32),
    ) {
        self.leave_while(alphabet, |&(e, d, _)| e < start || d >= depth);
        self.symbols.push(alphabet.intern(EventKey::Enter(routine)));
        self.open.push((end, depth, routine));
    }

    /// Leaves the innermost open calls while `ended` holds for them.
    fn leave_while(&mut self, alphabet: &mut Alphabet, ended: impl Fn(&(Time, u16, u32)) -> bool) {
        while let Some(call) = self.open.last() {
            if !ended(call) {
                break;
            }
            self.symbols.push(alphabet.intern(EventKey::Leave(call.2)));
            self.open.pop();
        }
    }
}

/// A communication operation of a process, with its events' keys.
struct CommOp {
    id: OpId,
    start: Time,
    thread: u32,
    /// A send (or collective) key, then a receive key.
    keys: [Option<EventKey>; 2],
    /// Their envelopes, when asked for.
    envelopes: [Option<Envelope>; 2],
}

/// The communication operations of `rank`, in time order, read from five columns of its
/// chunks (not the whole operations), ten with the envelope.
fn communication_ops(trace: &Trace, rank: Rank, envelope: bool) -> Result<Vec<CommOp>> {
    use crate::store::OperationField as F;
    let mut ops = Vec::new();
    for info in trace.op_chunks_of(rank) {
        let mut wanted = vec![F::Start, F::Kind, F::Dest, F::Source, F::Root];
        if envelope {
            wanted.extend([
                F::SendTag,
                F::RecvTag,
                F::SendBytes,
                F::RecvBytes,
                F::Datatype,
            ]);
        }
        let chunk = trace.operation_columns(info.chunk, &wanted)?;
        for row in 0..chunk.rows() {
            let Some(kind) = chunk.kind(row) else {
                continue;
            };
            let mut keys: [Option<EventKey>; 2] = [None, None];
            if kind.is_send() {
                keys[0] = chunk.dest(row).map(EventKey::Send);
            }
            if kind.is_receive() {
                keys[1] = chunk.source(row).map(EventKey::Receive);
            }
            if kind.is_collective() {
                keys[0] = Some(EventKey::Collective(kind, chunk.root(row)));
            }
            if keys.iter().any(Option::is_some) {
                let envelopes = if envelope {
                    let datatype = chunk.datatype(row);
                    let (send_bytes, recv_bytes) = (chunk.send_bytes(row), chunk.recv_bytes(row));
                    if kind.is_collective() {
                        [
                            Some(Envelope {
                                tag: 0,
                                bytes: send_bytes + recv_bytes,
                                datatype,
                            }),
                            None,
                        ]
                    } else {
                        [
                            Some(Envelope {
                                tag: chunk.send_tag(row).unwrap_or(0),
                                bytes: send_bytes,
                                datatype,
                            }),
                            Some(Envelope {
                                tag: chunk.recv_tag(row).unwrap_or(0),
                                bytes: recv_bytes,
                                datatype,
                            }),
                        ]
                    }
                } else {
                    [None, None]
                };
                ops.push(CommOp {
                    id: chunk.id(row),
                    start: chunk.start(row),
                    thread: info.thread,
                    keys,
                    envelopes,
                });
            }
        }
    }
    // Chunks of one thread are in time order; threads interleave.
    ops.sort_by_key(|o| (o.start, o.id));
    Ok(ops)
}

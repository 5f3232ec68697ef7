//! One call record of the stream, decoded by the layout of its function.
//!
//! A record is the function's 16-bit label, a mask byte saying what the tracer recorded
//! (bits 0-1: statuses, bit 2: CPU times, bit 3: wall-clock times, bit 6: the thread, bit 7:
//! performance counters), the thread (16 bits), the CPU and the wall-clock times (each a start
//! and a stop of 16-bit seconds, relative to the stream's second offset, and 32-bit
//! nanoseconds), the counters (a count byte, then an entry and an exit value of 64 bits per
//! counter of the file's counter table), and then the call's arguments in the order of the
//! function's layout ([`super::funcs`]).

use super::bin::{version_at_least, Stream, Version};
use super::funcs;
use crate::error::Result;

/// Mask bits: statuses recorded.
const STATUS_MASK: u8 = 0x03;
/// Mask bit: CPU times recorded.
const CPU_MASK: u8 = 0x04;
/// Mask bit: wall-clock times recorded.
const WALL_MASK: u8 = 0x08;
/// Mask bit: thread recorded.
const THREAD_MASK: u8 = 0x40;
/// Mask bit: performance counters recorded.
const PERF_MASK: u8 = 0x80;

/// The scalar arguments mtfdb uses; every other argument is decoded into [`Slot::Skip`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Slot {
    Skip,
    Count,
    Datatype,
    Dest,
    Source,
    Tag,
    Comm,
    Request,
    Flag,
    Index,
    Outcount,
    SendCount,
    SendType,
    RecvCount,
    RecvType,
    SendTag,
    RecvTag,
    Root,
    CommRank,
    CommSize,
    OldComm,
    NewComm,
    Group,
    Group2,
    NewGroup,
    Color,
    Key,
    Address,
}

const SLOTS: usize = Slot::Address as usize + 1;

/// The array arguments mtfdb uses; every other array is decoded into [`List::Ignored`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum List {
    Ignored,
    Requests,
    Indices,
    SendCounts,
    RecvCounts,
    SendTypes,
    RecvTypes,
    Ranks,
    /// Rows of integers, each stored as its length followed by its values.
    Ranges,
    Dims,
    RemainDims,
}

const LISTS: usize = List::RemainDims as usize + 1;

/// One argument of a function's layout, in file order.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Field {
    /// An 8-bit value (operation, comparison result, thread level, …).
    I8(Slot),
    /// A 16-bit handle (communicator, datatype, group, info, file, window, …).
    I16(Slot),
    /// A 32-bit signed integer (count, rank, tag, request, …).
    I32(Slot),
    /// A 64-bit integer (file offset, function address).
    I64(Slot),
    /// A 32-bit count and that many 32-bit integers.
    Ints(List),
    /// A 32-bit count and that many [`Field::Ints`] rows.
    Ints2(List),
    /// A 32-bit count and that many 16-bit handles (datatypes, infos).
    Shorts(List),
    /// A 32-bit count and that many bytes (distributions).
    Bytes,
    /// A 32-bit length and that many characters.
    Chars,
    /// A 32-bit count and that many [`Field::Chars`].
    Chars2,
    /// A 32-bit count and that many [`Field::Chars2`].
    Chars3,
    /// Statuses, present when the record's mask says statuses were recorded: a 32-bit count
    /// (0 for `MPI_STATUS_IGNORE`) and per status its bytes, source, cancelled flag (1 byte),
    /// error (1 byte) and, since DUMPI 0.6.3, tag.
    Statuses,
    /// `MPI_Init`'s and `MPI_Init_thread`'s argument vector: a count and that many
    /// [`Field::Chars`]; before DUMPI 0.6.2 `MPI_Init` wrote the count twice.
    Argv { early_quirk: bool },
    /// An integer array since the given version, a single integer before it (a tracer bug
    /// of `MPI_Type_struct` before 0.6.9 and `MPI_Cart_get` before 0.6.8).
    IntsSince(Version),
    /// Fields written only by the root of the collective (`CommRank == Root`).
    AtRoot(&'static [Field]),
}

/// One status of a completed receive or request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Status {
    /// Bytes received, as the tracer recorded them.
    pub bytes: i32,
    /// The source, as a rank in the communicator.
    pub source: i32,
    /// The tag (`-1`, any tag, for files before DUMPI 0.6.3, which did not record it).
    pub tag: i32,
    /// The cancelled flag.
    pub cancelled: u8,
    /// The error code.
    pub error: u8,
}

/// A start and a stop time in nanoseconds.
pub(crate) type Span = (u64, u64);

/// A decoded record. Reused from record to record.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    /// The function label.
    pub func: u16,
    /// Offset of the record's label in the file.
    pub offset: u64,
    /// The thread that made the call.
    pub thread: u16,
    /// Wall-clock start and stop, in ns since the Unix epoch.
    pub wall: Option<Span>,
    /// CPU time at start and stop, in ns.
    pub cpu: Option<Span>,
    /// Whether statuses were recorded (the mask's status bits).
    pub statuses_recorded: bool,
    /// The statuses of the call (empty when ignored or not recorded).
    pub statuses: Vec<Status>,
    /// The argument vector of `MPI_Init` and `MPI_Init_thread`.
    pub argv: Vec<String>,
    values: [i64; SLOTS],
    present: u64,
    lists: [Vec<i32>; LISTS],
}

impl Default for Record {
    fn default() -> Record {
        Record {
            func: 0,
            offset: 0,
            thread: 0,
            wall: None,
            cpu: None,
            statuses_recorded: false,
            statuses: Vec::new(),
            argv: Vec::new(),
            values: [0; SLOTS],
            present: 0,
            lists: Default::default(),
        }
    }
}

impl Record {
    /// The scalar argument `slot`, if the record has it.
    #[inline]
    pub fn get(&self, slot: Slot) -> Option<i64> {
        (self.present & (1 << slot as u8) != 0).then(|| self.values[slot as usize])
    }

    /// The array argument `list` (empty if the record has none).
    pub fn list(&self, list: List) -> &[i32] {
        &self.lists[list as usize]
    }

    fn set(&mut self, slot: Slot, v: i64) {
        if slot != Slot::Skip {
            self.values[slot as usize] = v;
            self.present |= 1 << slot as u8;
        }
    }
}

/// Turns 16-bit seconds into seconds, counting the times they wrapped: a tracer writes the
/// seconds since the stream's offset modulo 2^16, so a run longer than 18 hours wraps.
#[derive(Debug, Clone, Copy, Default)]
struct Seconds {
    offset: u64,
    last: Option<u16>,
    epoch: u64,
}

impl Seconds {
    /// The seconds of a start time (a start more than half the range before the previous
    /// one is a wrap, not a step back).
    fn start(&mut self, s: u16) -> u64 {
        if let Some(last) = self.last {
            if s < last && last - s > u16::MAX / 2 {
                self.epoch += 1 << 16;
            }
        }
        self.last = Some(s);
        self.offset + self.epoch + u64::from(s)
    }

    /// The seconds of a stop time, given its start's 16-bit seconds.
    fn stop(&self, start: u16, s: u16) -> u64 {
        let wrap = if s < start { 1 << 16 } else { 0 };
        self.offset + self.epoch + wrap + u64::from(s)
    }
}

/// Decodes one rank's records, in order.
#[derive(Debug)]
pub(crate) struct Decoder {
    version: Version,
    perf_counters: u32,
    cpu: Seconds,
    wall: Seconds,
    /// Whether the previous record was `MPI_Finalize` (old files end their stream with a
    /// label 0 after it).
    after_finalize: bool,
    done: bool,
    /// Records decoded.
    pub records: u64,
}

impl Decoder {
    /// Reads the stream's time offsets and prepares to decode records of a file written by
    /// DUMPI `version` with `perf_counters` counters per record.
    pub fn start(stream: &mut Stream, version: Version, perf_counters: u32) -> Result<Decoder> {
        stream.record_name = "call stream's time offsets";
        let cpu = stream.u32()?;
        let wall = stream.u32()?;
        Ok(Decoder {
            version,
            perf_counters,
            cpu: Seconds {
                offset: u64::from(cpu),
                ..Seconds::default()
            },
            wall: Seconds {
                offset: u64::from(wall),
                ..Seconds::default()
            },
            after_finalize: false,
            done: false,
            records: 0,
        })
    }

    /// Decodes the next record into `rec`; `false` at the end of the stream.
    pub fn next(&mut self, stream: &mut Stream, rec: &mut Record) -> Result<bool> {
        if self.done || stream.at_end() {
            self.done = true;
            // A cut file that ends between two records still lacks its end-of-stream label.
            if stream.is_cut() && stream.at_end() {
                stream.record = stream.offset();
                return Err(stream.cut_at_end());
            }
            return Ok(false);
        }
        rec.offset = stream.offset();
        stream.record = rec.offset;
        stream.record_name = "call";
        let func = stream.u16()?;
        if func == funcs::END_OF_STREAM || (self.after_finalize && func == 0) {
            self.done = true;
            return Ok(false);
        }
        let layout = funcs::layout(func).ok_or_else(|| {
            stream.error(
                "bad record",
                match funcs::name(func) {
                    Some(name) => format!(
                        "the record at byte {} has function label {func} ({name}), which DUMPI never writes a record for",
                        rec.offset
                    ),
                    None => format!(
                        "the record at byte {} has function label {func}, which is no DUMPI function (labels go up to {})",
                        rec.offset,
                        funcs::END_OF_STREAM
                    ),
                },
            )
        })?;
        stream.record_name = funcs::name(func).unwrap_or("call");
        rec.func = func;
        rec.present = 0;
        rec.statuses.clear();
        rec.argv.clear();
        for l in &mut rec.lists {
            l.clear();
        }
        let mask = stream.u8()?;
        rec.thread = if mask & THREAD_MASK != 0 {
            stream.u16()?
        } else {
            0
        };
        rec.cpu = if mask & CPU_MASK != 0 {
            Some(Self::span(stream, &mut self.cpu)?)
        } else {
            None
        };
        rec.wall = if mask & WALL_MASK != 0 {
            Some(Self::span(stream, &mut self.wall)?)
        } else {
            None
        };
        if mask & PERF_MASK != 0 {
            // The per-record count byte is not what the reference reader trusts: it reads as
            // many values as the counter table names.
            stream.u8()?;
            stream.skip(16 * u64::from(self.perf_counters))?;
        }
        rec.statuses_recorded = mask & STATUS_MASK != 0;
        self.fields(stream, rec, layout)?;
        self.after_finalize = func == funcs::FINALIZE;
        self.records += 1;
        Ok(true)
    }

    fn span(stream: &mut Stream, seconds: &mut Seconds) -> Result<Span> {
        let s0 = stream.u16()?;
        let n0 = stream.u32()?;
        let s1 = stream.u16()?;
        let n1 = stream.u32()?;
        let ns = |s: u64, n: u32| s.checked_mul(1_000_000_000)?.checked_add(u64::from(n));
        match (ns(seconds.start(s0), n0), ns(seconds.stop(s0, s1), n1)) {
            (Some(start), Some(stop)) => Ok((start, stop)),
            _ => Err(stream.error("bad record", "the record's time is beyond 2^64 nanoseconds")),
        }
    }

    fn fields(&self, stream: &mut Stream, rec: &mut Record, layout: &[Field]) -> Result<()> {
        for &field in layout {
            match field {
                Field::I8(slot) => {
                    let v = stream.u8()?;
                    rec.set(slot, i64::from(v));
                }
                Field::I16(slot) => {
                    let v = stream.u16()?;
                    rec.set(slot, i64::from(v));
                }
                Field::I32(slot) => {
                    let v = stream.u32()? as i32;
                    rec.set(slot, i64::from(v));
                }
                Field::I64(slot) => {
                    let v = stream.u64()?;
                    rec.set(slot, v as i64);
                }
                Field::Ints(list) => ints(stream, rec, list, false)?,
                Field::Ints2(list) => {
                    let rows = stream.count(4, "rows")?;
                    for _ in 0..rows {
                        ints(stream, rec, list, true)?;
                    }
                }
                Field::Shorts(list) => {
                    let n = stream.count(2, "handles")?;
                    for _ in 0..n {
                        let v = stream.u16()?;
                        if list != List::Ignored {
                            rec.lists[list as usize].push(i32::from(v));
                        }
                    }
                }
                Field::Bytes => {
                    let n = stream.count(1, "bytes")?;
                    stream.skip(u64::from(n))?;
                }
                Field::Chars => chars(stream)?,
                Field::Chars2 => chars2(stream)?,
                Field::Chars3 => {
                    let n = stream.count(4, "string arrays")?;
                    for _ in 0..n {
                        chars2(stream)?;
                    }
                }
                Field::Statuses => {
                    if rec.statuses_recorded {
                        self.statuses(stream, rec)?;
                    }
                }
                Field::Argv { early_quirk } => {
                    let n = stream.count(4, "arguments")?;
                    if early_quirk && !version_at_least(self.version, [0, 6, 2]) {
                        stream.u32()?;
                    }
                    for _ in 0..n {
                        let len = stream.count(1, "characters")?;
                        let arg = stream.text(u64::from(len))?;
                        rec.argv.push(arg);
                    }
                }
                Field::IntsSince(since) => {
                    if version_at_least(self.version, since) {
                        ints(stream, rec, List::Ignored, false)?;
                    } else {
                        stream.u32()?;
                    }
                }
                Field::AtRoot(inner) => {
                    if rec.get(Slot::CommRank).is_some()
                        && rec.get(Slot::CommRank) == rec.get(Slot::Root)
                    {
                        self.fields(stream, rec, inner)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn statuses(&self, stream: &mut Stream, rec: &mut Record) -> Result<()> {
        let with_tag = version_at_least(self.version, [0, 6, 3]);
        let n = stream.count(if with_tag { 14 } else { 10 }, "statuses")?;
        for _ in 0..n {
            let bytes = stream.u32()? as i32;
            let source = stream.u32()? as i32;
            let cancelled = stream.u8()?;
            let error = stream.u8()?;
            let tag = if with_tag { stream.u32()? as i32 } else { -1 };
            rec.statuses.push(Status {
                bytes,
                source,
                tag,
                cancelled,
                error,
            });
        }
        Ok(())
    }
}

fn ints(stream: &mut Stream, rec: &mut Record, list: List, with_length: bool) -> Result<()> {
    let n = stream.count(4, "integers")?;
    let keep = list != List::Ignored;
    if keep && with_length {
        rec.lists[list as usize].push(n as i32);
    }
    for _ in 0..n {
        let v = stream.u32()? as i32;
        if keep {
            rec.lists[list as usize].push(v);
        }
    }
    Ok(())
}

fn chars(stream: &mut Stream) -> Result<()> {
    let n = stream.count(1, "characters")?;
    stream.skip(u64::from(n))
}

fn chars2(stream: &mut Stream) -> Result<()> {
    let n = stream.count(4, "strings")?;
    for _ in 0..n {
        chars(stream)?;
    }
    Ok(())
}

//! A location's event file as a stream of decoded events with times in nanoseconds.

use std::path::Path;

use super::defs::{
    fault_error, ClockProperties, IdMap, LocalDefinitions, MAPPING_COMM, MAPPING_METRIC,
    MAPPING_REGION, MAPPING_STRING,
};
use super::reader::{ChunkReader, Decoder, Fault, Next, ReadPlan};
use crate::error::Result;

/// One event record, with references mapped to global definitions.
#[derive(Debug, Clone, Copy)]
pub enum Event {
    Enter(u32),
    Leave(u32),
    /// `MpiSend`: receiver (rank in the communicator), communicator, tag, bytes.
    Send {
        peer: u32,
        comm: u32,
        tag: u32,
        bytes: u64,
    },
    /// `MpiIsend`.
    Isend {
        peer: u32,
        comm: u32,
        tag: u32,
        bytes: u64,
        request: u64,
    },
    IsendComplete(u64),
    IrecvRequest(u64),
    /// `MpiRecv`: sender (rank in the communicator), communicator, tag, bytes.
    Recv {
        peer: u32,
        comm: u32,
        tag: u32,
        bytes: u64,
    },
    /// `MpiIrecv` (the completion of a non-blocking receive).
    Irecv {
        peer: u32,
        comm: u32,
        tag: u32,
        bytes: u64,
        request: u64,
    },
    /// `MpiRequestTest`: a test that found its request not completed.
    RequestTest,
    RequestCancelled(u64),
    CollectiveBegin,
    /// `MpiCollectiveEnd`: communicator, root (rank in the communicator or undefined), bytes
    /// sent and received.
    CollectiveEnd {
        comm: u32,
        root: u32,
        sent: u64,
        received: u64,
    },
    /// `NonBlockingCollectiveRequest`.
    CollectiveRequest(u64),
    /// `NonBlockingCollectiveComplete`.
    CollectiveComplete {
        comm: u32,
        root: u32,
        sent: u64,
        received: u64,
        request: u64,
    },
    ProgramBegin {
        name: u32,
    },
    ProgramEnd,
    /// `MeasurementOnOff`.
    Measurement,
    /// `Metric`: samples of a metric class or instance (its global id); the values are in
    /// [`EventStream::metric_values`].
    Metric(u32),
    /// Any other record (parameters, threads, RMA, I/O, …).
    Other,
}

/// OTF2 event record type codes.
pub mod kinds {
    pub const BUFFER_FLUSH: u8 = 10;
    pub const MEASUREMENT_ON_OFF: u8 = 11;
    pub const ENTER: u8 = 12;
    pub const LEAVE: u8 = 13;
    pub const MPI_SEND: u8 = 14;
    pub const MPI_ISEND: u8 = 15;
    pub const MPI_ISEND_COMPLETE: u8 = 16;
    pub const MPI_IRECV_REQUEST: u8 = 17;
    pub const MPI_RECV: u8 = 18;
    pub const MPI_IRECV: u8 = 19;
    pub const MPI_REQUEST_TEST: u8 = 20;
    pub const MPI_REQUEST_CANCELLED: u8 = 21;
    pub const MPI_COLLECTIVE_BEGIN: u8 = 22;
    pub const MPI_COLLECTIVE_END: u8 = 23;
    pub const METRIC: u8 = 31;
    pub const PROGRAM_BEGIN: u8 = 83;
    pub const PROGRAM_END: u8 = 84;
    pub const NON_BLOCKING_COLLECTIVE_REQUEST: u8 = 85;
    pub const NON_BLOCKING_COLLECTIVE_COMPLETE: u8 = 86;
}

/// The name `otf2-print` gives an event record type (`MPI_SEND`, …), for error messages.
pub fn kind_name(kind: u8) -> &'static str {
    use kinds::*;
    match kind {
        BUFFER_FLUSH => "BUFFER_FLUSH",
        MEASUREMENT_ON_OFF => "MEASUREMENT_ON_OFF",
        ENTER => "ENTER",
        LEAVE => "LEAVE",
        MPI_SEND => "MPI_SEND",
        MPI_ISEND => "MPI_ISEND",
        MPI_ISEND_COMPLETE => "MPI_ISEND_COMPLETE",
        MPI_IRECV_REQUEST => "MPI_IRECV_REQUEST",
        MPI_RECV => "MPI_RECV",
        MPI_IRECV => "MPI_IRECV",
        MPI_REQUEST_TEST => "MPI_REQUEST_TEST",
        MPI_REQUEST_CANCELLED => "MPI_REQUEST_CANCELLED",
        MPI_COLLECTIVE_BEGIN => "MPI_COLLECTIVE_BEGIN",
        MPI_COLLECTIVE_END => "MPI_COLLECTIVE_END",
        METRIC => "METRIC",
        32 => "PARAMETER_STRING",
        33 => "PARAMETER_INT64",
        34 => "PARAMETER_UINT64",
        PROGRAM_BEGIN => "PROGRAM_BEGIN",
        PROGRAM_END => "PROGRAM_END",
        NON_BLOCKING_COLLECTIVE_REQUEST => "NON_BLOCKING_COLLECTIVE_REQUEST",
        NON_BLOCKING_COLLECTIVE_COMPLETE => "NON_BLOCKING_COLLECTIVE_COMPLETE",
        87 => "COMM_CREATE",
        88 => "COMM_DESTROY",
        _ => "OTHER",
    }
}

/// Turns raw ticks into nanoseconds since the trace's start, applying the location's clock
/// offsets the way OTF2's reader does (linear interpolation between synchronisation points,
/// the last interval extended; no correction with fewer than two points).
pub(crate) struct Clock {
    resolution: u64,
    global_offset: u64,
    /// `(begin, end, offset, slope)` per interval.
    intervals: Vec<(u64, u64, i64, f64)>,
    current: usize,
    /// The last conversion (events share timestamps).
    last: Option<(u64, u64)>,
}

impl Clock {
    pub fn new(props: ClockProperties, offsets: &[(u64, i64)]) -> Clock {
        let intervals = offsets
            .windows(2)
            .filter(|w| w[1].0 > w[0].0)
            .map(|w| {
                let slope = (w[1].1 - w[0].1) as f64 / (w[1].0 - w[0].0) as f64;
                (w[0].0, w[1].0, w[0].1, slope)
            })
            .collect();
        Clock {
            resolution: props.resolution,
            global_offset: props.global_offset,
            intervals,
            current: 0,
            last: None,
        }
    }

    /// Nanoseconds since the global offset (0 for earlier ticks).
    #[inline]
    pub fn ns(&mut self, ticks: u64) -> u64 {
        match self.last {
            Some((t, ns)) if t == ticks => ns,
            _ => {
                let ns = self.convert(ticks);
                self.last = Some((ticks, ns));
                ns
            }
        }
    }

    fn convert(&mut self, ticks: u64) -> u64 {
        let corrected = self.correct(ticks);
        let since = corrected.saturating_sub(self.global_offset) as u128;
        if self.resolution == 1_000_000_000 {
            return since as u64;
        }
        (since * 1_000_000_000 / self.resolution as u128).min(u64::MAX as u128) as u64
    }

    fn correct(&mut self, t: u64) -> u64 {
        if self.intervals.is_empty() {
            return t;
        }
        while self.current + 1 < self.intervals.len() && t > self.intervals[self.current].1 {
            self.current += 1;
        }
        let (begin, _, offset, slope) = self.intervals[self.current];
        if slope == 0.0 {
            return t.wrapping_add(offset as u64);
        }
        let diff = if t >= begin {
            (t - begin) as f64
        } else {
            -((begin - t) as f64)
        };
        let offset = offset + (slope * diff).round_ties_even() as i64;
        t.wrapping_add(offset as u64)
    }
}

/// The events of one location, decoded in file order.
pub(crate) struct EventStream {
    reader: ChunkReader,
    clock: Clock,
    strings: Option<IdMap>,
    regions: Option<IdMap>,
    comms: Option<IdMap>,
    metrics: Option<IdMap>,
    /// The values of the last `Metric` record read: its OTF2 type and raw bits per value.
    pub metric_values: Vec<(u8, u64)>,
    /// File offset of the last record read.
    pub offset: u64,
    /// Time (ns) of the last record read.
    pub time: u64,
}

impl EventStream {
    pub fn open(
        path: &Path,
        chunk_size: u64,
        clock: ClockProperties,
        mut local: LocalDefinitions,
        plan: ReadPlan,
    ) -> Result<EventStream> {
        let reader = ChunkReader::open_with(path, chunk_size, true, plan)?;
        Ok(EventStream {
            reader,
            clock: Clock::new(clock, &local.clock_offsets),
            strings: local.mappings.remove(&MAPPING_STRING),
            regions: local.mappings.remove(&MAPPING_REGION),
            comms: local.mappings.remove(&MAPPING_COMM),
            metrics: local.mappings.remove(&MAPPING_METRIC),
            metric_values: Vec::new(),
            offset: 0,
            time: 0,
        })
    }

    /// The event file.
    pub fn reader(&self) -> &ChunkReader {
        &self.reader
    }

    /// The next event, or `None` at the end of the file.
    pub fn next(&mut self) -> Result<Option<Event>> {
        let kind = match self.reader.next()? {
            Next::End => return Ok(None),
            Next::Record { kind, offset } => {
                self.offset = offset;
                kind
            }
        };
        self.time = self.clock.ns(self.reader.time);
        let mut d = self.reader.decoder();
        let decoded = if kind == kinds::METRIC {
            decode_metric(&mut d, &mut self.metric_values)
                .map(|metric| Event::Metric(Self::map(&self.metrics, metric)))
        } else {
            self.decode(kind, &mut d)
        };
        match decoded {
            Ok(e) => Ok(Some(e)),
            Err(f) => Err(fault_error(
                &self.reader,
                &format!("{} event", kind_name(kind)),
                f,
            )),
        }
    }

    fn map(map: &Option<IdMap>, id: u32) -> u32 {
        match map {
            Some(m) if id != u32::MAX => m.map(id as u64) as u32,
            _ => id,
        }
    }

    fn decode(&self, kind: u8, d: &mut Decoder) -> std::result::Result<Event, Fault> {
        use kinds::*;
        let comm = |d: &mut Decoder| d.u32("communicator").map(|c| Self::map(&self.comms, c));
        Ok(match kind {
            ENTER => Event::Enter(Self::map(&self.regions, d.u32("region")?)),
            LEAVE => Event::Leave(Self::map(&self.regions, d.u32("region")?)),
            MPI_SEND | MPI_RECV | MPI_ISEND | MPI_IRECV => {
                let peer = d.u32(if kind == MPI_SEND || kind == MPI_ISEND {
                    "receiver"
                } else {
                    "sender"
                })?;
                let comm = comm(d)?;
                let tag = d.u32("tag")?;
                let bytes = d.u64("message length")?;
                match kind {
                    MPI_SEND => Event::Send {
                        peer,
                        comm,
                        tag,
                        bytes,
                    },
                    MPI_RECV => Event::Recv {
                        peer,
                        comm,
                        tag,
                        bytes,
                    },
                    MPI_ISEND => Event::Isend {
                        peer,
                        comm,
                        tag,
                        bytes,
                        request: d.u64("request id")?,
                    },
                    _ => Event::Irecv {
                        peer,
                        comm,
                        tag,
                        bytes,
                        request: d.u64("request id")?,
                    },
                }
            }
            MPI_ISEND_COMPLETE => Event::IsendComplete(d.u64("request id")?),
            MPI_IRECV_REQUEST => Event::IrecvRequest(d.u64("request id")?),
            MPI_REQUEST_TEST => {
                let _ = d.u64("request id")?;
                Event::RequestTest
            }
            MPI_REQUEST_CANCELLED => Event::RequestCancelled(d.u64("request id")?),
            MPI_COLLECTIVE_BEGIN => Event::CollectiveBegin,
            MPI_COLLECTIVE_END | NON_BLOCKING_COLLECTIVE_COMPLETE => {
                let _ = d.u8("collective operation")?;
                let comm = comm(d)?;
                let root = d.u32("root")?;
                let sent = d.u64("bytes sent")?;
                let received = d.u64("bytes received")?;
                if kind == MPI_COLLECTIVE_END {
                    Event::CollectiveEnd {
                        comm,
                        root,
                        sent,
                        received,
                    }
                } else {
                    let request = d.u64("request id")?;
                    Event::CollectiveComplete {
                        comm,
                        root,
                        sent,
                        received,
                        request,
                    }
                }
            }
            NON_BLOCKING_COLLECTIVE_REQUEST => Event::CollectiveRequest(d.u64("request id")?),
            PROGRAM_BEGIN => Event::ProgramBegin {
                name: Self::map(&self.strings, d.u32("program name")?),
            },
            PROGRAM_END => Event::ProgramEnd,
            MEASUREMENT_ON_OFF => {
                let _ = d.u8("measurement mode")?;
                Event::Measurement
            }
            _ => Event::Other,
        })
    }
}

/// Decodes a `Metric` record: the metric (class or instance), the number of values, then
/// per value its type and the compressed bits of its OTF2_MetricValue union.
fn decode_metric(d: &mut Decoder, values: &mut Vec<(u8, u64)>) -> std::result::Result<u32, Fault> {
    let metric = d.u32("metric")?;
    let n = d.u8("number of metrics")?;
    values.clear();
    for _ in 0..n {
        let kind = d.u8("type id")?;
        values.push((kind, d.u64("metric value")?));
    }
    Ok(metric)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(resolution: u64, global_offset: u64) -> ClockProperties {
        ClockProperties {
            resolution,
            global_offset,
        }
    }

    #[test]
    fn ticks_become_nanoseconds_since_the_global_offset() {
        let mut c = Clock::new(props(2_500_000_000, 1_000), &[]);
        assert_eq!(c.ns(1_000), 0);
        assert_eq!(c.ns(3_500), 1_000);
        assert_eq!(c.ns(10), 0, "ticks before the offset saturate");
    }

    #[test]
    fn clock_offsets_interpolate_like_otf2() {
        // One point: no correction.
        let mut c = Clock::new(props(1_000_000_000, 0), &[(100, 50)]);
        assert_eq!(c.ns(200), 200);
        // Two points: offset 10 at t=100 growing to 30 at t=300; extended past both ends.
        let mut c = Clock::new(props(1_000_000_000, 0), &[(100, 10), (300, 30)]);
        assert_eq!(c.ns(50), 55);
        assert_eq!(c.ns(100), 110);
        assert_eq!(c.ns(200), 220);
        assert_eq!(c.ns(500), 550);
    }
}

//! The merge by time that every reader of one file per location does (OTF2, OTF v1, DUMPI):
//! the sink gets the trace's items in time order while memory holds one ready item (and a
//! read window) per location, never the trace.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{EventSink, Progress};
use crate::error::Result;
use crate::model::Time;

/// Events between two progress reports.
const REPORT_EVERY: u64 = 1 << 16;

/// A reader's locations, as the merge sees them.
pub(crate) trait TimeOrderedStreams {
    /// Readies location `i`'s next item, reading more of it if needed, and gives its time;
    /// `None` once the location has nothing more. Counts what it reads for [`Self::progress`].
    fn next_time(&mut self, i: usize) -> Result<Option<Time>>;
    /// Hands location `i`'s ready item to `sink`.
    fn deliver(&mut self, i: usize, sink: &mut dyn EventSink) -> Result<()>;
    /// Event records read so far (asked after every run of one location's items: cheap).
    fn events(&self) -> u64;
    /// How far the read has come (asked only to report it).
    fn progress(&self) -> Progress;
}

/// The locations by the time of their ready item.
pub(crate) struct TimeMerge {
    heap: BinaryHeap<Reverse<(Time, usize)>>,
}

impl TimeMerge {
    /// Readies the first item of each of the `locations` locations of `streams`.
    pub fn prime(streams: &mut impl TimeOrderedStreams, locations: usize) -> Result<TimeMerge> {
        let mut heap = BinaryHeap::with_capacity(locations);
        for i in 0..locations {
            if let Some(t) = streams.next_time(i)? {
                heap.push(Reverse((t, i)));
            }
        }
        Ok(TimeMerge { heap })
    }

    /// Hands every item of `streams` to `sink` in time order, reporting progress every 65,536
    /// events and once at the end. A location keeps delivering while its next item is no
    /// later than every other location's, so items of equal time from one location stay
    /// together; ties between locations go to the lower location first.
    pub fn run(
        mut self,
        streams: &mut impl TimeOrderedStreams,
        sink: &mut dyn EventSink,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<()> {
        let mut next_report = REPORT_EVERY;
        while let Some(Reverse((_, i))) = self.heap.pop() {
            // Take this location's items while it stays the earliest.
            let bound = self.heap.peek().map_or(Time::MAX, |Reverse((t, _))| *t);
            loop {
                streams.deliver(i, sink)?;
                match streams.next_time(i)? {
                    Some(t) if t <= bound => continue,
                    Some(t) => {
                        self.heap.push(Reverse((t, i)));
                        break;
                    }
                    None => break,
                }
            }
            let events = streams.events();
            if events >= next_report {
                progress(&streams.progress());
                next_report = events + REPORT_EVERY;
            }
        }
        progress(&streams.progress());
        Ok(())
    }
}

//! The merge by time that every reader of one file per location does (OTF2, OTF v1, DUMPI):
//! the sink gets the trace's items in time order while memory holds one ready item (and a
//! read window) per location, never the trace.

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
    tree: ReadyTree,
}

impl TimeMerge {
    /// Readies the first item of each of the `locations` locations of `streams`.
    pub fn prime(streams: &mut impl TimeOrderedStreams, locations: usize) -> Result<TimeMerge> {
        let mut times = Vec::with_capacity(locations);
        for i in 0..locations {
            times.push(streams.next_time(i)?);
        }
        let tree = ReadyTree::new(&times);
        Ok(TimeMerge { tree })
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
        while let Some(i) = self.tree.earliest() {
            // Take this location's items while it stays the earliest.
            let bound = self.tree.runner_up_time();
            loop {
                streams.deliver(i, sink)?;
                match streams.next_time(i)? {
                    Some(t) if t <= bound => continue,
                    next => {
                        self.tree.update(i, next);
                        break;
                    }
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

/// A tournament (loser) tree over the locations' ready times: the root holds the earliest
/// location, every inner node the loser of the match played there. When the earliest
/// location's next time is known, only the matches on its path are replayed, one comparison
/// per level without a branch to mispredict (`BinaryHeap`'s pop and push cost about twice
/// that, and were a tenth of the 64-rank OTF2 reading thread's perf samples). The time of the
/// next location is the least of the losers on the earliest one's path.
struct ReadyTree {
    /// Leaves: a power of two, at least the number of locations.
    leaves: usize,
    /// `nodes[0]` the winner, `nodes[1..leaves]` the losers, as [`key`]s.
    nodes: Vec<u128>,
}

/// A location's key: its time, then its number (ties to the lower location); `u128::MAX`
/// once it has nothing more (no location is numbered `u64::MAX`).
fn key(time: Time, location: usize) -> u128 {
    (u128::from(time) << 64) | location as u128
}

const DONE: u128 = u128::MAX;

impl ReadyTree {
    /// The tree over locations whose first ready times are `times` (`None`: nothing).
    fn new(times: &[Option<Time>]) -> ReadyTree {
        let leaves = times.len().next_power_of_two().max(1);
        // Play every match once, bottom up: `winners[n]` is node n's winner.
        let mut winners = vec![DONE; 2 * leaves];
        for (i, t) in times.iter().enumerate() {
            winners[leaves + i] = t.map_or(DONE, |t| key(t, i));
        }
        let mut nodes = vec![DONE; leaves];
        for n in (1..leaves).rev() {
            let (a, b) = (winners[2 * n], winners[2 * n + 1]);
            winners[n] = a.min(b);
            nodes[n] = a.max(b);
        }
        nodes[0] = winners[1];
        ReadyTree { leaves, nodes }
    }

    /// The location whose ready item is earliest.
    fn earliest(&self) -> Option<usize> {
        (self.nodes[0] != DONE).then_some(self.nodes[0] as u64 as usize)
    }

    /// The earliest time of every location but the earliest one (`Time::MAX` if none).
    fn runner_up_time(&self) -> Time {
        let mut node = (self.earliest().unwrap_or(0) + self.leaves) >> 1;
        let mut least = DONE;
        while node > 0 {
            least = least.min(self.nodes[node]);
            node >>= 1;
        }
        (least >> 64) as Time
    }

    /// Gives the earliest location, `location`, the time of its next ready item (`None`: it
    /// has nothing more), and plays its new key up its path: at each node the lesser key goes
    /// on, the greater stays as the loser. Only the earliest may be moved: a loser tree
    /// replays the path of the last winner.
    fn update(&mut self, location: usize, next: Option<Time>) {
        let mut winner = next.map_or(DONE, |t| key(t, location));
        let mut node = (location + self.leaves) >> 1;
        while node > 0 {
            let other = self.nodes[node];
            let other_wins = other < winner;
            self.nodes[node] = std::hint::select_unpredictable(other_wins, winner, other);
            winner = std::hint::select_unpredictable(other_wins, other, winner);
            node >>= 1;
        }
        self.nodes[0] = winner;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Locations as lists of times; delivering records (location, time).
    struct Lists {
        lists: Vec<Vec<Time>>,
        next: Vec<usize>,
        delivered: Vec<(usize, Time)>,
    }

    impl TimeOrderedStreams for Lists {
        fn next_time(&mut self, i: usize) -> Result<Option<Time>> {
            Ok(self.lists[i].get(self.next[i]).copied())
        }
        fn deliver(&mut self, i: usize, _: &mut dyn EventSink) -> Result<()> {
            self.delivered.push((i, self.lists[i][self.next[i]]));
            self.next[i] += 1;
            Ok(())
        }
        fn events(&self) -> u64 {
            self.delivered.len() as u64
        }
        fn progress(&self) -> Progress {
            Progress::default()
        }
    }

    /// The order the merge promises, by a plain rule: repeatedly take the location with the
    /// earliest next item (lowest location on ties) and keep taking from it while its next
    /// item is no later than every other location's.
    fn expected(lists: &[Vec<Time>]) -> Vec<(usize, Time)> {
        let mut next = vec![0; lists.len()];
        let mut out = Vec::new();
        let head = |next: &[usize], i: usize| lists[i].get(next[i]).copied();
        while let Some(i) = (0..lists.len())
            .filter(|&i| head(&next, i).is_some())
            .min_by_key(|&i| (head(&next, i), i))
        {
            let bound = (0..lists.len())
                .filter(|&j| j != i)
                .filter_map(|j| head(&next, j))
                .min()
                .unwrap_or(Time::MAX);
            loop {
                out.push((i, lists[i][next[i]]));
                next[i] += 1;
                match head(&next, i) {
                    Some(t) if t <= bound => continue,
                    _ => break,
                }
            }
        }
        out
    }

    #[test]
    fn items_come_in_time_order_with_a_locations_equal_times_together() {
        let mut rng = crate::gen::rng::SplitMix64::new(0x2545_f491);
        let mut random = |n: u64| rng.below(n);
        for round in 0..200 {
            let locations = 1 + random(40) as usize;
            let lists: Vec<Vec<Time>> = (0..locations)
                .map(|_| {
                    let mut t = random(5);
                    (0..random(30))
                        .map(|_| {
                            t += random(4); // repeats make ties within and across locations
                            t
                        })
                        .collect()
                })
                .collect();
            let mut streams = Lists {
                next: vec![0; locations],
                lists: lists.clone(),
                delivered: Vec::new(),
            };
            let merge = TimeMerge::prime(&mut streams, locations).unwrap();
            merge
                .run(&mut streams, &mut crate::gen::NullSink, &mut |_| {})
                .unwrap();
            assert_eq!(
                streams.delivered,
                expected(&lists),
                "round {round}: {lists:?}"
            );
            let times: Vec<Time> = streams.delivered.iter().map(|&(_, t)| t).collect();
            assert!(times.windows(2).all(|w| w[0] <= w[1]), "round {round}");
        }
    }
}

//! State an import keeps per rank (the matcher's open requests, non-blocking receives and
//! where each thread stands between Init and Finalize; the traffic per pair of ranks), stored
//! rank by rank.
//!
//! A trace merged in time order visits every rank before it comes back to the first: with
//! thousands of ranks, one map keyed by (rank, key) was cold at every lookup, and an
//! `MPI_Waitall` of eight requests paid eight cache misses in a 4 MB table (`perf`: a sixth of
//! a 16,384-rank import). Here a rank's few entries sit side by side in one short vector; a rank
//! that keeps many open at once (a trace that never waits) gets a hash map of its own, so no
//! lookup costs more than a hash probe.

use std::hash::Hash;

use crate::hash::FxHashMap;
use crate::model::Rank;

/// Entries a rank keeps in a vector before they move to a hash map.
const FEW: usize = 16;

/// One rank's entries.
#[derive(Debug)]
enum Entries<K, V> {
    Few(Vec<(K, V)>),
    Many(FxHashMap<K, V>),
}

impl<K: Eq + Hash + Copy, V> Entries<K, V> {
    fn contains(&self, key: &K) -> bool {
        match self {
            Entries::Few(list) => list.iter().any(|(k, _)| k == key),
            Entries::Many(map) => map.contains_key(key),
        }
    }

    fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        match self {
            Entries::Few(list) => list.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v),
            Entries::Many(map) => map.get_mut(key),
        }
    }

    fn remove(&mut self, key: &K) -> Option<V> {
        match self {
            Entries::Few(list) => {
                let at = list.iter().position(|(k, _)| k == key)?;
                Some(list.swap_remove(at).1)
            }
            Entries::Many(map) => map.remove(key),
        }
    }

    /// The value under `key`, made with `V::default()` when absent; whether it was made.
    fn get_or_default(&mut self, key: K) -> (&mut V, bool)
    where
        V: Default,
    {
        if let Entries::Few(list) = self {
            if list.len() == FEW && !list.iter().any(|(k, _)| *k == key) {
                *self = Entries::Many(list.drain(..).collect());
            }
        }
        match self {
            Entries::Few(list) => match list.iter().position(|(k, _)| *k == key) {
                Some(at) => (&mut list[at].1, false),
                None => {
                    list.push((key, V::default()));
                    let last = list.len() - 1;
                    (&mut list[last].1, true)
                }
            },
            Entries::Many(map) => match map.entry(key) {
                std::collections::hash_map::Entry::Occupied(e) => (e.into_mut(), false),
                std::collections::hash_map::Entry::Vacant(e) => (e.insert(V::default()), true),
            },
        }
    }

    /// Adds an entry known to be absent.
    fn push(&mut self, key: K, value: V) {
        match self {
            Entries::Few(list) if list.len() < FEW => list.push((key, value)),
            Entries::Few(list) => {
                let mut map: FxHashMap<K, V> = list.drain(..).collect();
                map.insert(key, value);
                *self = Entries::Many(map);
            }
            Entries::Many(map) => {
                map.insert(key, value);
            }
        }
    }
}

/// Values keyed by (rank, key), each rank's kept together.
#[derive(Debug)]
pub(crate) struct ByRank<K, V> {
    ranks: Vec<Entries<K, V>>,
    len: usize,
}

impl<K, V> Default for ByRank<K, V> {
    fn default() -> Self {
        ByRank {
            ranks: Vec::new(),
            len: 0,
        }
    }
}

impl<K: Eq + Hash + Copy, V> ByRank<K, V> {
    /// The rank's entries, made on first use (ranks need not be dense or declared).
    fn rank_mut(&mut self, rank: Rank) -> &mut Entries<K, V> {
        let i = rank as usize;
        if i >= self.ranks.len() {
            self.ranks.resize_with(i + 1, || Entries::Few(Vec::new()));
        }
        &mut self.ranks[i]
    }

    /// The number of entries.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The value under (`rank`, `key`).
    pub(crate) fn get_mut(&mut self, rank: Rank, key: &K) -> Option<&mut V> {
        self.ranks.get_mut(rank as usize)?.get_mut(key)
    }

    /// Whether (`rank`, `key`) has a value.
    pub(crate) fn contains(&self, rank: Rank, key: &K) -> bool {
        self.ranks
            .get(rank as usize)
            .is_some_and(|entries| entries.contains(key))
    }

    /// Sets the value under (`rank`, `key`); returns the one it replaces.
    pub(crate) fn insert(&mut self, rank: Rank, key: K, value: V) -> Option<V> {
        let entries = self.rank_mut(rank);
        if let Some(old) = entries.get_mut(&key) {
            return Some(std::mem::replace(old, value));
        }
        entries.push(key, value);
        self.len += 1;
        None
    }

    /// Takes the value under (`rank`, `key`) out.
    pub(crate) fn remove(&mut self, rank: Rank, key: &K) -> Option<V> {
        let value = self.ranks.get_mut(rank as usize)?.remove(key)?;
        self.len -= 1;
        Some(value)
    }

    /// The value under (`rank`, `key`), made with `V::default()` when absent.
    pub(crate) fn get_or_default(&mut self, rank: Rank, key: K) -> &mut V
    where
        V: Default,
    {
        self.rank_mut(rank);
        let (value, made) = self.ranks[rank as usize].get_or_default(key);
        if made {
            self.len += 1;
        }
        value
    }

    /// Takes every entry out, rank by rank (in no order within a rank).
    pub(crate) fn drain(&mut self) -> Vec<(Rank, K, V)> {
        self.len = 0;
        let mut out = Vec::new();
        for (rank, entries) in std::mem::take(&mut self.ranks).into_iter().enumerate() {
            let rank = rank as Rank;
            match entries {
                Entries::Few(list) => out.extend(list.into_iter().map(|(k, v)| (rank, k, v))),
                Entries::Many(map) => out.extend(map.into_iter().map(|(k, v)| (rank, k, v))),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Random inserts and removes over a few ranks, some past [`FEW`] entries, agree with a
    /// plain ordered map at every step and when drained.
    #[test]
    fn agrees_with_a_map_through_inserts_removes_and_the_switch_to_a_map() {
        let mut by_rank: ByRank<u64, u64> = ByRank::default();
        let mut oracle: BTreeMap<(Rank, u64), u64> = BTreeMap::new();
        let mut x = 12345u64;
        for step in 0..20_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let rank = ((x >> 33) % 5) as Rank;
            // Rank 4 keeps up to 64 keys open: past FEW, it moves to a map.
            let key = (x >> 40) % if rank == 4 { 64 } else { 8 };
            match (x >> 20) % 3 {
                0 | 1 => assert_eq!(
                    by_rank.insert(rank, key, step),
                    oracle.insert((rank, key), step)
                ),
                _ => assert_eq!(by_rank.remove(rank, &key), oracle.remove(&(rank, key))),
            }
            assert_eq!(by_rank.len(), oracle.len());
            assert_eq!(
                by_rank.get_mut(rank, &key).copied(),
                oracle.get(&(rank, key)).copied()
            );
        }
        *by_rank.get_or_default(9, 1) += 5;
        *oracle.entry((9, 1)).or_default() += 5;
        let mut drained = by_rank.drain();
        drained.sort_unstable();
        let expected: Vec<_> = oracle.into_iter().map(|((r, k), v)| (r, k, v)).collect();
        assert_eq!(drained, expected);
        assert_eq!(by_rank.len(), 0);
    }
}

//! Items grouped by a small integer key (a rank, a vertex) with a counting sort: one vector
//! of offsets and one of items, whatever the number of keys. At 16,384 ranks a vector per
//! key was 16,384 allocations, and a hash map per item a third of identifying a topology.

/// `items` grouped by their key (each below `keys`), each key's items in the order given:
/// where each key's items begin (`keys + 1` offsets, the last the number of items), and the
/// items. `items` is walked twice, to count and to place.
///
/// ```text
/// let (offsets, items) = by_key(3, [(2, 'a'), (0, 'b'), (2, 'c')].into_iter());
/// assert_eq!(offsets, [0, 1, 1, 3]);
/// assert_eq!(items, ['b', 'a', 'c']);
/// ```
pub(crate) fn by_key<T: Copy + Default>(
    keys: usize,
    items: impl Iterator<Item = (usize, T)> + Clone,
) -> (Vec<u32>, Vec<T>) {
    let mut offsets = vec![0u32; keys + 1];
    for (key, _) in items.clone() {
        offsets[key + 1] += 1;
    }
    for key in 0..keys {
        offsets[key + 1] += offsets[key];
    }
    let mut next = offsets.clone();
    let mut placed = vec![T::default(); offsets[keys] as usize];
    for (key, item) in items {
        placed[next[key] as usize] = item;
        next[key] += 1;
    }
    (offsets, placed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_are_grouped_by_key_in_their_order() {
        let (offsets, items) = by_key(4, [(2, 'a'), (0, 'b'), (2, 'c'), (3, 'd')].into_iter());
        assert_eq!(offsets, [0, 1, 1, 3, 4]);
        assert_eq!(items, ['b', 'a', 'c', 'd']);
        let (offsets, items) = by_key::<u8>(2, std::iter::empty());
        assert_eq!((offsets, items), (vec![0, 0, 0], vec![]));
    }
}

//! A queue that hands out the highest delivery rank first and, within a
//! rank, the earliest arrival: the one ordering rule the worker's intake
//! and its handler permits share.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// Items waiting by rank, then arrival.
#[derive(Debug)]
pub(crate) struct RankQueue<T> {
    heap: BinaryHeap<Queued<T>>,
    /// Arrivals so far, for first come first served within a rank.
    arrivals: u64,
}

impl<T> Default for RankQueue<T> {
    fn default() -> Self {
        Self {
            heap: BinaryHeap::new(),
            arrivals: 0,
        }
    }
}

/// An item's place in line: its rank and when it arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Place {
    pub(crate) rank: u8,
    arrival: u64,
}

#[derive(Debug)]
struct Queued<T> {
    /// Higher rank first, then the earlier arrival: the heap pops the
    /// greatest key.
    key: (u8, Reverse<u64>),
    item: T,
}

impl<T> Ord for Queued<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key.cmp(&other.key)
    }
}

impl<T> PartialOrd for Queued<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> PartialEq for Queued<T> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl<T> Eq for Queued<T> {}

impl<T> RankQueue<T> {
    /// Queues `item` at `rank`, behind what arrived before it at that rank.
    pub(crate) fn push(&mut self, rank: u8, item: T) {
        self.arrivals += 1;
        self.heap.push(Queued {
            key: (rank, Reverse(self.arrivals)),
            item,
        });
    }

    /// The most urgent item, if any.
    pub(crate) fn pop(&mut self) -> Option<(u8, T)> {
        self.pop_placed().map(|(place, item)| (place.rank, item))
    }

    /// The most urgent item with its place in line, to [`RankQueue::restore`]
    /// it there if it is put back.
    pub(crate) fn pop_placed(&mut self) -> Option<(Place, T)> {
        self.heap.pop().map(|q| {
            let place = Place {
                rank: q.key.0,
                arrival: q.key.1.0,
            };
            (place, q.item)
        })
    }

    /// Puts back an item popped with [`RankQueue::pop_placed`], in the
    /// place it had: ahead of what arrived after it at its rank.
    pub(crate) fn restore(&mut self, place: Place, item: T) {
        self.heap.push(Queued {
            key: (place.rank, Reverse(place.arrival)),
            item,
        });
    }

    /// Keeps only the items `keep` accepts; how many were dropped.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) -> usize {
        let before = self.heap.len();
        self.heap.retain(|q| keep(&q.item));
        before - self.heap.len()
    }

    /// The rank of the most urgent item, if any.
    pub(crate) fn top_rank(&self) -> Option<u8> {
        self.heap.peek().map(|q| q.key.0)
    }

    /// How many wait.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn highest_rank_first_then_arrival_order() {
        let mut q = RankQueue::default();
        for (rank, name) in [(0, "bulk-1"), (5, "cron"), (0, "bulk-2"), (9, "urgent")] {
            q.push(rank, name);
        }
        assert_eq!(q.top_rank(), Some(9));
        let order: Vec<&str> = std::iter::from_fn(|| q.pop().map(|(_, n)| n)).collect();
        assert_eq!(order, ["urgent", "cron", "bulk-1", "bulk-2"]);
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn a_restored_item_keeps_its_place_in_line() {
        let mut q = RankQueue::default();
        q.push(0, "first");
        q.push(0, "second");
        let (place, item) = q.pop_placed().unwrap();
        assert_eq!((place.rank, item), (0, "first"));
        q.push(0, "third");
        q.restore(place, item);
        let order: Vec<&str> = std::iter::from_fn(|| q.pop().map(|(_, n)| n)).collect();
        assert_eq!(order, ["first", "second", "third"]);
        q.push(1, "keep");
        q.push(1, "drop");
        assert_eq!(q.retain(|n| *n != "drop"), 1);
        assert_eq!(q.pop(), Some((1, "keep")));
    }
}

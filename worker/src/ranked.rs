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
        self.heap.pop().map(|q| (q.key.0, q.item))
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

    /// Drops everything queued; how many there were.
    pub(crate) fn clear(&mut self) -> usize {
        let n = self.heap.len();
        self.heap.clear();
        n
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
}

//! Handler permits handed out by delivery rank: when a permit comes free,
//! the waiting dispatch with the highest rank (priority, then immediate, see
//! [`kairos_core::priority::delivery_rank`]) takes it, and within one rank
//! the one that asked first.
//!
//! The broker delivers by rank too, but only what is still in its queue: a
//! busy worker holds up to its buffer of accepted dispatches waiting for a
//! permit, and with a first-come semaphore an urgent dispatch waited behind
//! every scheduled one accepted before it. `tokio::sync::Semaphore` is fair
//! (first come, first served) by design and has no notion of rank, hence
//! this small queue.

use crate::ranked::RankQueue;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::oneshot;

/// A fixed number of permits, handed to waiters by rank.
#[derive(Debug)]
pub(crate) struct RankedPermits {
    capacity: u32,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Permits nobody holds. Never non-zero while someone waits.
    free: u32,
    /// Where each waiter's permit is sent.
    waiting: RankQueue<oneshot::Sender<Permit>>,
}

/// One held permit; dropping it hands it on.
#[derive(Debug)]
pub(crate) struct Permit {
    /// `None` once handed on without a drop (a grant nobody took).
    permits: Option<Arc<RankedPermits>>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(permits) = self.permits.take() {
            permits.release();
        }
    }
}

impl RankedPermits {
    pub(crate) fn new(capacity: u32) -> Arc<Self> {
        Arc::new(Self {
            capacity,
            state: Mutex::new(State {
                free: capacity,
                ..State::default()
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Permits held now.
    pub(crate) fn held(&self) -> u32 {
        self.capacity.saturating_sub(self.lock().free)
    }

    /// Dispatches waiting for a permit now.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.lock().waiting.len()
    }

    /// The highest rank waiting for a permit, if any waits.
    pub(crate) fn highest_waiting(&self) -> Option<u8> {
        self.lock().waiting.top_rank()
    }

    /// A permit, as soon as one is free and no higher rank (nor an earlier
    /// arrival of the same rank) waits. Cancel-safe: a permit granted to a
    /// waiter that gave up is handed on.
    pub(crate) async fn acquire(self: &Arc<Self>, rank: u8) -> Permit {
        let granted = {
            let mut state = self.lock();
            if state.free > 0 {
                state.free -= 1;
                return Permit {
                    permits: Some(self.clone()),
                };
            }
            let (grant, granted) = oneshot::channel();
            state.waiting.push(rank, grant);
            granted
        };
        match granted.await {
            Ok(permit) => permit,
            // Senders are only dropped with the queue, which `self` keeps.
            Err(_) => Permit { permits: None },
        }
    }

    /// A permit came back: to the best waiter still waiting, or to the free
    /// count.
    fn release(self: Arc<Self>) {
        let mut state = self.lock();
        while let Some((_, grant)) = state.waiting.pop() {
            let permit = Permit {
                permits: Some(self.clone()),
            };
            match grant.send(permit) {
                Ok(()) => return,
                // That waiter gave up: defuse the permit (its drop would
                // come back here under the lock) and try the next one.
                Err(mut permit) => permit.permits = None,
            }
        }
        state.free += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::sync::mpsc;

    /// Waits until `n` dispatches wait, yielding to let them register.
    async fn until_waiting(p: &RankedPermits, n: usize) {
        while p.waiting() < n {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn freed_permits_go_to_the_highest_rank_then_the_first_to_ask() {
        let p = RankedPermits::new(1);
        let first = p.acquire(0).await;
        let (order_tx, mut order) = mpsc::unbounded_channel();
        for (name, rank) in [("bulk-a", 0), ("urgent", 9), ("mid", 5), ("bulk-b", 0)] {
            let (q, tx) = (p.clone(), order_tx.clone());
            let before = p.waiting();
            tokio::spawn(async move {
                let permit = q.acquire(rank).await;
                tx.send(name).unwrap();
                drop(permit);
            });
            until_waiting(&p, before + 1).await;
        }
        assert_eq!(p.held(), 1);
        assert_eq!(p.highest_waiting(), Some(9));
        drop(first);
        let mut got = Vec::new();
        for _ in 0..4 {
            got.push(order.recv().await.unwrap());
        }
        assert_eq!(got, ["urgent", "mid", "bulk-a", "bulk-b"]);
        assert_eq!(p.held(), 0);
    }

    #[tokio::test]
    async fn a_waiter_that_gives_up_does_not_keep_a_permit() {
        let p = RankedPermits::new(1);
        let held = p.acquire(3).await;
        let gave_up = tokio::spawn({
            let p = p.clone();
            async move { p.acquire(9).await }
        });
        until_waiting(&p, 1).await;
        gave_up.abort();
        assert!(gave_up.await.unwrap_err().is_cancelled());
        drop(held);
        let next = tokio::time::timeout(Duration::from_secs(5), p.acquire(0)).await;
        assert!(next.is_ok(), "the permit went to the free count");
        assert_eq!(p.held(), 1);
    }

    #[tokio::test]
    async fn free_permits_are_taken_at_once_up_to_capacity() {
        let p = RankedPermits::new(2);
        let a = p.acquire(0).await;
        let b = p.acquire(0).await;
        assert_eq!(p.held(), 2);
        drop((a, b));
        assert_eq!(p.held(), 0);
    }
}

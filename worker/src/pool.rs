//! The bounded execution pool: places for accepted deliveries (running or
//! waiting in the buffer), one permit per running handler (handed out by
//! rank, see [`crate::permits`]), the attempts held
//! and running here (so heartbeats list them and stop requests reach them),
//! the delivery tasks shutdown waits for, and the hard stop at the end of
//! the grace period.

use crate::permits::RankedPermits;
use kairos_core::protocol::HeldRef;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub(crate) struct Pool {
    /// Handlers allowed to run at once.
    pub(crate) capacity: u32,
    /// Accepted deliveries allowed to wait for a permit.
    pub(crate) buffer: u32,
    /// One permit per running handler, the most urgent waiter first.
    pub(crate) permits: Arc<RankedPermits>,
    /// Deliveries accepted and not yet finished (waiting or running): the
    /// figure backpressure is decided on, since dispatches are acked early.
    in_flight: AtomicU32,
    /// Every delivery task, so shutdown can wait for them.
    pub(crate) tasks: TaskTracker,
    /// Cancelled when the grace period ends: handlers still running are
    /// stopped and reported failed.
    pub(crate) hard_stop: CancellationToken,
    /// Running attempts by stop key, each with the token that stops it.
    running: Mutex<HashMap<String, CancellationToken>>,
    /// Every attempt accepted and not yet reported (waiting for a slot or
    /// running), as the heartbeat's `held` lists them.
    held: Mutex<HashSet<HeldRef>>,
    /// Signalled whenever a place in the pool or buffer is given back.
    slot_freed: Notify,
}

impl Pool {
    pub(crate) fn new(capacity: u32, buffer: u32) -> Self {
        Self {
            capacity,
            buffer,
            permits: RankedPermits::new(capacity),
            in_flight: AtomicU32::new(0),
            tasks: TaskTracker::new(),
            hard_stop: CancellationToken::new(),
            running: Mutex::new(HashMap::new()),
            held: Mutex::new(HashSet::new()),
            slot_freed: Notify::new(),
        }
    }

    /// Handlers running now.
    pub(crate) fn running(&self) -> u32 {
        self.permits.held()
    }

    /// Deliveries accepted and not yet finished (waiting or running).
    pub(crate) fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Publishes the pool's gauges (capacity, running, buffered).
    pub(crate) fn report(&self) {
        crate::metrics::pool(self.capacity, self.running(), self.in_flight());
    }

    /// Takes a place in the pool or its buffer, or `None` when both are full.
    pub(crate) fn try_reserve(self: &Arc<Self>) -> Option<Slot> {
        let limit = self.capacity.saturating_add(self.buffer);
        self.in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(Arc::clone(self)))
    }

    /// Places for the `n` dispatches of one delivery, or none if no place
    /// in pool or buffer comes free within `wait`. Short handlers free places
    /// within milliseconds, so a full worker would otherwise refuse (and send
    /// into reroute) dispatches it could take a moment later. Once one place
    /// is free the whole delivery is taken: the dispatches beyond the free
    /// places wait beyond the buffer, as a single dispatch would have waited
    /// in the queue, rather than a batch being refused for a place or two.
    pub(crate) async fn reserve_within(
        self: &Arc<Self>,
        n: usize,
        wait: Duration,
    ) -> Option<Vec<Slot>> {
        let deadline = tokio::time::Instant::now() + wait;
        let first = loop {
            // Registered before the check, so a place freed in between is seen.
            let freed = self.slot_freed.notified();
            if let Some(slot) = self.try_reserve() {
                break slot;
            }
            if tokio::time::timeout_at(deadline, freed).await.is_err() {
                break self.try_reserve()?;
            }
        };
        let mut slots = Vec::with_capacity(n);
        slots.push(first);
        slots.extend((1..n).map(|_| self.place()));
        Some(slots)
    }

    /// Places for the `n` dispatches of a delivery that outranks every
    /// dispatch waiting for a permit, taken at once, beyond the buffer if it
    /// is full: they are next in line for a permit here whatever the buffer
    /// holds, so making them wait for a place (or refusing them for
    /// reroute) would only queue urgent work behind what it outranks.
    /// `None` when nothing waits (a full pool without a buffer still
    /// refuses), or something waiting ranks as high.
    pub(crate) fn reserve_ahead(self: &Arc<Self>, n: usize, rank: u8) -> Option<Vec<Slot>> {
        // Nothing waiting (None) or something as urgent: the usual path.
        self.permits.highest_waiting().filter(|&h| h < rank)?;
        Some((0..n).map(|_| self.place()).collect())
    }

    /// A place in pool or buffer, or beyond them when both are full: for a
    /// delivery already being taken.
    fn place(self: &Arc<Self>) -> Slot {
        self.try_reserve().unwrap_or_else(|| {
            self.in_flight.fetch_add(1, Ordering::AcqRel);
            Slot(Arc::clone(self))
        })
    }

    /// Lists an attempt in `held` until the returned guard is dropped (after
    /// its final result is confirmed, or when it is handed back).
    pub(crate) fn hold(&self, execution_id: &str, attempt: u32) -> Held<'_> {
        let r = HeldRef {
            execution_id: execution_id.to_string(),
            attempt,
        };
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(r.clone());
        Held { pool: self, r }
    }

    /// The attempts held now, in a stable order.
    pub(crate) fn held(&self) -> Vec<HeldRef> {
        let mut held: Vec<HeldRef> = self
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect();
        held.sort_by(|a, b| (&a.execution_id, a.attempt).cmp(&(&b.execution_id, b.attempt)));
        held
    }

    /// Registers a running attempt under its stop key; the registration ends
    /// when the returned guard is dropped.
    pub(crate) fn track(&self, stop_key: String, stop: CancellationToken) -> Tracked<'_> {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(stop_key.clone(), stop);
        Tracked {
            pool: self,
            stop_key,
        }
    }

    /// Stop keys of the attempts running now.
    pub(crate) fn running_keys(&self) -> Vec<String> {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect()
    }

    /// Stops the running attempt registered under `stop_key`, if any.
    pub(crate) fn stop(&self, stop_key: &str) -> bool {
        let running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        match running.get(stop_key) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }
}

/// A running attempt's registration; see [`Pool::track`].
pub(crate) struct Tracked<'a> {
    pool: &'a Pool,
    stop_key: String,
}

impl Drop for Tracked<'_> {
    fn drop(&mut self) {
        self.pool
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.stop_key);
    }
}

/// An attempt listed in `held`; see [`Pool::hold`].
pub(crate) struct Held<'a> {
    pool: &'a Pool,
    r: HeldRef,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.pool
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.r);
    }
}

/// A place in the pool or buffer, given back when the delivery is finished.
pub(crate) struct Slot(Arc<Pool>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.0.slot_freed.notify_waiters();
        self.0.report();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn places_are_bounded_by_capacity_plus_buffer_and_given_back() {
        let pool = Arc::new(Pool::new(1, 1));
        let a = pool.try_reserve().expect("a place in the pool");
        let _b = pool.try_reserve().expect("a place in the buffer");
        assert!(pool.try_reserve().is_none(), "pool and buffer are full");
        assert_eq!(pool.in_flight(), 2);
        drop(a);
        assert_eq!(pool.in_flight(), 1);
        let batch = pool
            .reserve_within(3, Duration::from_millis(10))
            .await
            .expect("a place is free, so the whole batch is taken");
        assert_eq!(batch.len(), 3);
        assert_eq!(pool.in_flight(), 4, "the rest waits beyond the buffer");
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_pool_waits_for_a_place_then_refuses() {
        let pool = Arc::new(Pool::new(1, 0));
        let slot = pool.try_reserve().unwrap();
        assert!(
            pool.reserve_within(1, Duration::from_millis(100))
                .await
                .is_none()
        );
        let waiting = {
            let pool = Arc::clone(&pool);
            tokio::spawn(async move { pool.reserve_within(1, Duration::from_secs(5)).await })
        };
        tokio::task::yield_now().await;
        drop(slot);
        assert!(waiting.await.unwrap().is_some(), "the freed place is taken");
    }

    #[test]
    fn held_and_running_attempts_are_listed_while_their_guards_live() {
        let pool = Pool::new(2, 0);
        let held = pool.hold("e", 2);
        let _other = pool.hold("a", 1);
        assert_eq!(
            pool.held()
                .iter()
                .map(|h| h.execution_id.as_str())
                .collect::<Vec<_>>(),
            ["a", "e"]
        );
        drop(held);
        assert_eq!(pool.held().len(), 1);

        let token = CancellationToken::new();
        let tracked = pool.track("k".into(), token.clone());
        assert_eq!(pool.running_keys(), ["k"]);
        assert!(pool.stop("k") && token.is_cancelled());
        assert!(!pool.stop("other"));
        drop(tracked);
        assert!(pool.running_keys().is_empty());
    }
}

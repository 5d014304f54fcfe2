//! State shared by a running worker's tasks: configuration, the bounded pool
//! and its counters, the attempts running now (so stop requests can reach
//! them), the cost window and the lifecycle state.

use crate::handler::Registry;
use crate::heartbeat::CostWindow;
use crate::logs::LogSink;
use crate::results::Reporter;
use kairos_core::broker::Broker;
use kairos_core::coord::Coordination;
use kairos_core::protocol::{HeartbeatMsg, HeldRef, Names};
use kairos_core::worker::WorkerState;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub(crate) struct Shared {
    pub(crate) id: String,
    /// Fresh for every process: tells the dispatchers this process from an
    /// earlier one under the same worker id (see `docs/worker-protocol.md`).
    pub(crate) incarnation: String,
    pub(crate) names: Names,
    pub(crate) broker: Arc<dyn Broker>,
    /// Publishes `started` reports and final results, grouped.
    pub(crate) reporter: Reporter,
    /// Attempt keys and stop requests.
    pub(crate) coord: Arc<dyn Coordination>,
    pub(crate) handlers: Registry,
    /// Worker group announced in heartbeats.
    pub(crate) group: Option<String>,
    /// Where handlers' log lines go.
    pub(crate) logs: LogSink,
    /// Handlers allowed to run at once.
    pub(crate) capacity: u32,
    /// Accepted deliveries allowed to wait for a pool slot.
    pub(crate) buffer: u32,
    /// Most dispatches offered per message (heartbeat `dispatch_batch`).
    pub(crate) dispatch_batch: u32,
    /// How long an attempt key is kept once taken.
    pub(crate) attempt_key_ttl: Duration,
    /// One permit per running handler.
    pub(crate) permits: Semaphore,
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
    costs: Mutex<CostWindow>,
    state: Mutex<WorkerState>,
    /// Wakes the heartbeat loop when the state changes.
    pub(crate) state_changed: Notify,
    /// Signalled whenever a place in the pool or buffer is given back.
    slot_freed: Notify,
}

/// What a worker is built from (checked by the builder).
pub(crate) struct Setup {
    pub(crate) id: String,
    pub(crate) names: Names,
    pub(crate) broker: Arc<dyn Broker>,
    pub(crate) coord: Arc<dyn Coordination>,
    pub(crate) handlers: Registry,
    pub(crate) group: Option<String>,
    pub(crate) logs: LogSink,
    pub(crate) capacity: u32,
    pub(crate) buffer: u32,
    pub(crate) dispatch_batch: u32,
    pub(crate) attempt_key_ttl: Duration,
}

impl Shared {
    pub(crate) fn new(setup: Setup) -> Self {
        let Setup {
            id,
            names,
            broker,
            coord,
            handlers,
            group,
            logs,
            capacity,
            buffer,
            dispatch_batch,
            attempt_key_ttl,
        } = setup;
        Self {
            id,
            incarnation: new_incarnation(),
            names,
            reporter: Reporter::new(Arc::clone(&broker)),
            broker,
            coord,
            handlers,
            group,
            logs,
            capacity,
            buffer,
            dispatch_batch,
            attempt_key_ttl,
            permits: Semaphore::new(capacity as usize),
            in_flight: AtomicU32::new(0),
            tasks: TaskTracker::new(),
            hard_stop: CancellationToken::new(),
            running: Mutex::new(HashMap::new()),
            held: Mutex::new(HashSet::new()),
            costs: Mutex::new(CostWindow::default()),
            state: Mutex::new(WorkerState::Online),
            state_changed: Notify::new(),
            slot_freed: Notify::new(),
        }
    }

    /// The owner written into this process's attempt keys.
    pub(crate) fn key_owner(&self) -> String {
        HeartbeatMsg::key_owner(&self.id, Some(&self.incarnation))
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
        Held { shared: self, r }
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

    /// Handlers running now.
    pub(crate) fn running(&self) -> u32 {
        let free = u32::try_from(self.permits.available_permits()).unwrap_or(self.capacity);
        self.capacity.saturating_sub(free)
    }

    /// Deliveries accepted and not yet finished (waiting or running).
    pub(crate) fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Acquire)
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

    /// Registers a running attempt under its stop key; the registration ends
    /// when the returned guard is dropped.
    pub(crate) fn track(&self, stop_key: String, stop: CancellationToken) -> Tracked<'_> {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(stop_key.clone(), stop);
        Tracked {
            shared: self,
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
        while slots.len() < n {
            let slot = self.try_reserve().unwrap_or_else(|| self.overflow());
            slots.push(slot);
        }
        Some(slots)
    }

    /// A place beyond pool and buffer, for the rest of a batch taken.
    fn overflow(self: &Arc<Self>) -> Slot {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        Slot(Arc::clone(self))
    }

    pub(crate) fn record_cost(&self, ms: f64) {
        self.costs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .record(ms);
    }

    pub(crate) fn avg_cost_ms(&self) -> f64 {
        self.costs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .mean()
    }

    pub(crate) fn state(&self) -> WorkerState {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn set_state(&self, state: WorkerState) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = state;
        self.state_changed.notify_one();
    }
}

/// A running attempt's registration; see [`Shared::track`].
pub(crate) struct Tracked<'a> {
    shared: &'a Shared,
    stop_key: String,
}

impl Drop for Tracked<'_> {
    fn drop(&mut self) {
        self.shared
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.stop_key);
    }
}

/// An attempt listed in `held`; see [`Shared::hold`].
pub(crate) struct Held<'a> {
    shared: &'a Shared,
    r: HeldRef,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.shared
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.r);
    }
}

/// A fresh incarnation id: the start time (hex ms) and 64 random bits, so
/// ids sort by start and never repeat.
fn new_incarnation() -> String {
    format!(
        "{:x}-{:016x}",
        kairos_core::time::now_ms(),
        rand::random::<u64>()
    )
}

/// A place in the pool or buffer, given back when the delivery is finished.
pub(crate) struct Slot(Arc<Shared>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.0.slot_freed.notify_waiters();
        crate::metrics::pool(&self.0);
    }
}

//! Claimed work on its way to workers: what a term has claimed and not
//! finished publishing (so the sweeps leave it alone), the publishing tasks
//! that wait for each batch's due time, and their shared limits.

use super::publish::Publisher;
use crate::lease::Term;
use kairos_core::store::DispatchWork;
use kairos_core::time::{Millis, now_ms};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::{Notify, Semaphore};
use tokio_util::task::TaskTracker;
use tracing::debug;

/// Claimed work this term has not finished publishing, so the sweep leaves
/// it alone, and the publishing tasks' shared limits.
pub(super) struct Unpublished {
    held: Mutex<HashSet<String>>,
    /// One permit per batch being published.
    pub(super) permits: Arc<Semaphore>,
    /// Set when a publish left work pending (no worker, broker error).
    pub(super) left_behind: AtomicBool,
    /// Wakes the loop when `left_behind` is set.
    pub(super) wake: Notify,
    /// The publishing tasks (and the immediate lane's rounds' end).
    pub(super) tasks: TaskTracker,
}

impl Unpublished {
    pub(super) fn new(publishers: usize) -> Self {
        Self {
            held: Mutex::new(HashSet::new()),
            permits: Arc::new(Semaphore::new(publishers.max(1))),
            left_behind: AtomicBool::new(false),
            wake: Notify::new(),
            tasks: TaskTracker::new(),
        }
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn hold(&self, work: &[DispatchWork]) {
        self.lock()
            .extend(work.iter().map(|w| w.execution_id.clone()));
    }

    pub(super) fn leave_behind(&self) {
        self.left_behind.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    pub(super) fn release(&self, ids: &[String]) {
        let mut held = self.lock();
        for id in ids {
            held.remove(id);
        }
    }
}

/// Waits until `at` (ms UTC), then publishes `batch` if the term still holds.
pub(super) async fn publish_at(
    at: Millis,
    batch: Vec<DispatchWork>,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
    publisher: Arc<Publisher>,
    unpublished: Arc<Unpublished>,
    term: Term,
) {
    let ids = ids_of(&batch);
    let wait = Duration::from_millis((at - now_ms()).max(0) as u64);
    let ready = tokio::select! {
        _ = term.token.cancelled() => false,
        _ = tokio::time::sleep(wait) => true,
    };
    let permit = match (ready, permit) {
        (false, _) => None,
        (true, Some(p)) => Some(p),
        (true, None) => tokio::select! {
            _ = term.token.cancelled() => None,
            p = unpublished.permits.clone().acquire_owned() => p.ok(),
        },
    };
    // Unpublished work is (or goes back to) `pending`: this term's sweep
    // (once released here) or the next leader's picks it up.
    if permit.is_some() && term.is_valid() {
        let report = publisher.publish(batch, &term).await;
        if report.no_worker > 0 || report.failed > 0 {
            unpublished.leave_behind();
        }
        if report.dispatched > 0 {
            debug!(?report, "dispatched");
        }
    } else {
        publisher.hand_back(&batch, NOT_PUBLISHED).await;
    }
    unpublished.release(&ids);
}

/// Why work claimed as dispatched went back to `pending` unpublished.
pub(super) const NOT_PUBLISHED: &str = "not published: the dispatcher's leadership ended first";

pub(super) fn ids_of(work: &[DispatchWork]) -> Vec<String> {
    work.iter().map(|w| w.execution_id.clone()).collect()
}

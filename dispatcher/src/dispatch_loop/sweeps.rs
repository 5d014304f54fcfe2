//! The dispatch loop's sweeps: executions left `pending` (retries, failed
//! publishes, a predecessor's unfinished work, work no worker could take)
//! published again, work a concurrency limit held back published as slots
//! free, and slot rows of ended executions deleted. The leader's only (see
//! [`super::Duty`]).

use super::publish::Publisher;
use super::unpublished::Unpublished;
use crate::balancer::Balancer;
use crate::lease::Term;
use kairos_core::store::{Dispatch, DispatchWork, StoreError};
use kairos_core::time::{Millis, now_ms};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tracing::{debug, info, warn};

/// What the sweeps read and publish with.
pub(super) struct Sweeps {
    pub(super) dispatch: Arc<dyn Dispatch>,
    pub(super) publisher: Arc<Publisher>,
    /// The loop's worker view: only what some live worker can run is swept.
    pub(super) balancer: Arc<Mutex<Balancer>>,
    /// Executions published per sweep.
    pub(super) batch: u32,
}

impl Sweeps {
    /// Publishes executions left `pending`; `true` if there may be more.
    pub(super) async fn sweep(&self, term: &Term, unpublished: &Unpublished) -> bool {
        let now = now_ms();
        // Only what some live worker can run: work waiting for a handler no
        // worker serves stays pending (and visible as waiting) without
        // filling the batch ahead of work that can go.
        let routable = self
            .balancer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .routable(now);
        match self
            .dispatch
            .executions_find_unpublished(now, self.batch, &routable)
            .await
        {
            Ok(work) if work.is_empty() || !term.is_valid() => false,
            Ok(work) => {
                let full = work.len() as u32 >= self.batch;
                let work: Vec<DispatchWork> = {
                    let held = unpublished.lock();
                    work.into_iter()
                        .filter(|w| !held.contains(&w.execution_id))
                        .collect()
                };
                if work.is_empty() {
                    return false;
                }
                let report = self.publisher.publish(work, term).await;
                if report.no_worker > 0 || report.failed > 0 {
                    // Retried on the next round, not at once: no spinning.
                    unpublished
                        .left_behind
                        .store(true, std::sync::atomic::Ordering::Release);
                }
                if report.dispatched > 0 {
                    info!(?report, "published pending executions");
                }
                full && report.dispatched > 0
            }
            Err(e) => {
                warn!(error = %e, "cannot sweep pending executions");
                false
            }
        }
    }

    /// Publishes the work a concurrency limit held back, as far as slots
    /// (and rates) allow now; whether some still waits, and when a rate that
    /// holds some back has room again. Sets the gauge of executions waiting
    /// for a limit.
    pub(super) async fn sweep_waiting(
        &self,
        term: &Term,
        unpublished: &Unpublished,
    ) -> (bool, Option<Millis>) {
        let now = now_ms();
        let routable = self
            .balancer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .routable(now);
        let work = match self
            .dispatch
            .executions_find_waiting(now, self.batch, &routable)
            .await
        {
            Ok(work) => work,
            Err(e) => {
                warn!(error = %e, "cannot sweep work waiting for a concurrency slot");
                return (true, None);
            }
        };
        if work.is_empty() {
            crate::metrics::waiting_for_concurrency(0);
            return (false, None);
        }
        let mut retry_at = None;
        let work: Vec<DispatchWork> = {
            let held = unpublished.lock();
            work.into_iter()
                .filter(|w| !held.contains(&w.execution_id))
                .collect()
        };
        if term.is_valid() && !work.is_empty() {
            let report = self.publisher.publish(work, term).await;
            retry_at = report.retry_at;
            if report.dispatched > 0 {
                debug!(?report, "published work that waited for a concurrency slot");
            }
        }
        match self
            .dispatch
            .executions_count_waiting(WAITING_COUNT_CAP)
            .await
        {
            Ok(n) => {
                crate::metrics::waiting_for_concurrency(n);
                (n > 0, retry_at)
            }
            Err(e) => {
                debug!(error = %e, "cannot count work waiting for a concurrency slot");
                (true, retry_at)
            }
        }
    }

    /// Deletes slot rows that count for nothing any more (see
    /// `concurrency_slots_purge`): housekeeping only, a failure costs nothing.
    pub(super) async fn purge_slots(&self, term: &Term) {
        match self
            .dispatch
            .concurrency_slots_purge(term.fence, SLOTS_PURGE_BATCH)
            .await
        {
            Ok(0) => {}
            Ok(n) => debug!(deleted = n, "slot rows of ended executions deleted"),
            Err(StoreError::Fenced { ours, current }) => {
                warn!(ours, current, "storage holds a newer fence; stepping down");
                term.fenced(current);
            }
            Err(e) => debug!(error = %e, "cannot purge slot rows now"),
        }
    }
}

/// How often the leader deletes slot rows of ended executions, and at most
/// how many at a time.
pub(super) const SLOTS_PURGE_EVERY: Duration = Duration::from_secs(60);
const SLOTS_PURGE_BATCH: u32 = 5_000;

/// The gauge of work waiting for a concurrency slot counts no further.
const WAITING_COUNT_CAP: u32 = 1_000_000;

//! The leader's dispatch loop: find due triggers, claim them, publish them.
//!
//! Each round reads due jobs through the `(status, next_trigger_at)` index,
//! computes each job's following trigger, claims the batch in one transaction
//! (version check per job, fencing token, unique `(job_id, scheduled_at)`), and
//! hands the claimed work to the publisher. A full batch starts the next round
//! at once; otherwise the loop sleeps until the scan interval passes or it is
//! woken (a job was created or triggered). Executions left `pending` (retries,
//! failed publishes, a predecessor's unfinished work) are swept up regularly.

use crate::balancer::Balancer;
use crate::leader::Term;
use crate::publish::Publisher;
use kairos_core::store::{Claim, Store, StoreError};
use kairos_core::time::now_ms;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use tracing::{debug, info, warn};
use uuid::Uuid;

/// Dispatch loop settings.
#[derive(Debug, Clone)]
pub struct ScanConfig {
    /// Longest sleep between two scans when nothing wakes the loop.
    pub interval: Duration,
    /// Jobs claimed per transaction.
    pub batch: u32,
    /// How often `pending` executions are swept up and published.
    pub sweep_every: Duration,
    /// How often the worker view is reloaded from the database.
    pub workers_every: Duration,
}

/// Everything the loop needs.
pub struct DispatchLoop {
    /// Storage.
    pub store: Arc<dyn Store>,
    /// Sends claimed work.
    pub publisher: Publisher,
    /// Worker view shared with the publisher.
    pub balancer: Arc<Mutex<Balancer>>,
    /// Woken when a job may have become due.
    pub wake: Arc<Notify>,
    /// Settings.
    pub cfg: ScanConfig,
}

impl DispatchLoop {
    /// Runs until the term ends.
    pub async fn run(self, term: Term) {
        let mut last_sweep = Instant::now() - self.cfg.sweep_every;
        let mut last_workers = Instant::now() - self.cfg.workers_every;
        while term.is_valid() {
            if last_workers.elapsed() >= self.cfg.workers_every {
                self.refresh_workers().await;
                last_workers = Instant::now();
            }
            let mut busy = match self.claim_round(&term).await {
                Ok(full) => full,
                Err(StoreError::Fenced { ours, current }) => {
                    warn!(ours, current, "a newer leader has written; stepping down");
                    term.token.cancel();
                    return;
                }
                Err(e) => {
                    warn!(error = %e, "dispatch round failed; retrying");
                    self.pause(&term, self.cfg.interval.max(Duration::from_millis(500)))
                        .await;
                    continue;
                }
            };
            if last_sweep.elapsed() >= self.cfg.sweep_every && term.is_valid() {
                busy |= self.sweep().await;
                last_sweep = Instant::now();
            }
            if !busy {
                self.pause(&term, self.cfg.interval).await;
            }
        }
        debug!("dispatch loop ended with the term");
    }

    async fn pause(&self, term: &Term, d: Duration) {
        tokio::select! {
            _ = term.token.cancelled() => {}
            _ = self.wake.notified() => {}
            _ = tokio::time::sleep(d) => {}
        }
    }

    async fn refresh_workers(&self) {
        match self.store.workers_list().await {
            Ok(workers) => self
                .balancer
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .refresh(workers),
            Err(e) => warn!(error = %e, "cannot load workers; keeping the previous view"),
        }
    }

    /// One claim-and-publish round; `true` if the batch was full (more is due).
    async fn claim_round(&self, term: &Term) -> Result<bool, StoreError> {
        let now = now_ms();
        let due = self.store.jobs_find_due(now, self.cfg.batch).await?;
        if due.is_empty() {
            return Ok(false);
        }
        let full = due.len() as u32 >= self.cfg.batch;
        let claims: Vec<Claim> = due
            .iter()
            .filter_map(|job| {
                let scheduled_at = job.next_trigger_at?;
                Some(Claim {
                    job_id: job.id.clone(),
                    version: job.version,
                    scheduled_at,
                    next_trigger_at: job.schedule.next_trigger(scheduled_at, now),
                    execution_id: Uuid::now_v7().to_string(),
                })
            })
            .collect();
        if !term.is_valid() {
            return Ok(false);
        }
        let work = self.store.triggers_claim(term.fence, &claims, now).await?;
        if work.len() < claims.len() {
            debug!(
                lost = claims.len() - work.len(),
                "some claims lost their version check"
            );
        }
        let report = self.publisher.publish(work).await;
        if report.dispatched > 0 {
            debug!(?report, "dispatched");
        }
        Ok(full)
    }

    /// Publishes executions left `pending`; `true` if there may be more.
    async fn sweep(&self) -> bool {
        match self
            .store
            .executions_find_unpublished(now_ms(), self.cfg.batch)
            .await
        {
            Ok(work) if work.is_empty() => false,
            Ok(work) => {
                let full = work.len() as u32 >= self.cfg.batch;
                let report = self.publisher.publish(work).await;
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
}

//! The leader's dispatch loop: find due triggers, claim them, publish them.
//!
//! Each round reads due jobs through the `(status, next_trigger_at)` index,
//! computes each job's following trigger, claims the batch in one transaction
//! (version check per job, fencing token, unique `(job_id, scheduled_at)`), and
//! hands the claimed work to the publisher.
//!
//! Timing: each scan also looks a little ahead, and the loop then sleeps until
//! exactly the earliest upcoming trigger — so a trigger is claimed at its due
//! time, not at the next poll. A due signal from the API (a job created,
//! triggered or resumed) cuts the sleep short when it names an earlier time. A
//! full batch starts the next round at once. The periodic scan stays as the
//! safety net: a lost signal costs latency, never a trigger. Executions left
//! `pending` (retries, failed publishes, a predecessor's unfinished work) are
//! swept up regularly.

use crate::balancer::Balancer;
use crate::leader::Term;
use crate::publish::Publisher;
use kairos_core::job::Job;
use kairos_core::store::{Claim, Store, StoreError};
use kairos_core::time::{Millis, now_ms};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

/// Dispatch loop settings.
#[derive(Debug, Clone)]
pub struct ScanConfig {
    /// Longest sleep between two scans (the safety net for lost signals).
    pub interval: Duration,
    /// How far ahead each scan looks for the next trigger to sleep until.
    pub lookahead: Duration,
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
    /// Due times announced by the API (see [`kairos_core::due`]).
    pub due: mpsc::Receiver<Millis>,
    /// Settings.
    pub cfg: ScanConfig,
}

/// What one claim round found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Round {
    /// The batch was full: more triggers are due now.
    more_due: bool,
    /// Earliest trigger inside the look-ahead window that is not due yet.
    next_due: Option<Millis>,
}

impl DispatchLoop {
    /// Runs until the term ends.
    pub async fn run(mut self, term: Term) {
        let mut last_sweep = Instant::now() - self.cfg.sweep_every;
        let mut last_workers = Instant::now() - self.cfg.workers_every;
        while term.is_valid() {
            if last_workers.elapsed() >= self.cfg.workers_every {
                self.refresh_workers().await;
                last_workers = Instant::now();
            }
            let mut round = match self.claim_round(&term).await {
                Ok(round) => round,
                Err(StoreError::Fenced { ours, current }) => {
                    warn!(ours, current, "a newer leader has written; stepping down");
                    term.token.cancel();
                    return;
                }
                Err(e) => {
                    warn!(error = %e, "dispatch round failed; retrying");
                    let retry_at = now_ms()
                        + self
                            .cfg
                            .interval
                            .max(Duration::from_millis(500))
                            .as_millis() as Millis;
                    self.sleep_until(&term, retry_at).await;
                    continue;
                }
            };
            if last_sweep.elapsed() >= self.cfg.sweep_every && term.is_valid() {
                round.more_due |= self.sweep(&term).await;
                last_sweep = Instant::now();
            }
            if !round.more_due {
                let safety_net = now_ms() + self.cfg.interval.as_millis() as Millis;
                let wake_at = round.next_due.map_or(safety_net, |t| t.min(safety_net));
                self.sleep_until(&term, wake_at).await;
            }
        }
        debug!("dispatch loop ended with the term");
    }

    /// Sleeps until `wake_at` (ms UTC), the end of the term, or a due signal
    /// naming a time before `wake_at`.
    async fn sleep_until(&mut self, term: &Term, wake_at: Millis) {
        loop {
            let left = Duration::from_millis((wake_at - now_ms()).max(0) as u64);
            if left.is_zero() {
                return;
            }
            tokio::select! {
                _ = term.token.cancelled() => return,
                _ = tokio::time::sleep(left) => return,
                signal = self.due.recv() => match signal {
                    Some(at) if at < wake_at => return,
                    Some(_) => continue,
                    // No signal source any more: the timer alone is enough.
                    None => {
                        tokio::time::sleep(left).await;
                        return;
                    }
                },
            }
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

    /// One claim-and-publish round.
    async fn claim_round(&self, term: &Term) -> Result<Round, StoreError> {
        let now = now_ms();
        let horizon = now + self.cfg.lookahead.as_millis() as Millis;
        let found = self.store.jobs_find_due(horizon, self.cfg.batch).await?;
        let next_due = found
            .iter()
            .filter_map(|j| j.next_trigger_at)
            .find(|&t| t > now);
        let due: Vec<Job> = found
            .into_iter()
            .filter(|j| j.next_trigger_at.is_some_and(|t| t <= now))
            .collect();
        let more_due = due.len() as u32 >= self.cfg.batch;
        if due.is_empty() || !term.is_valid() {
            return Ok(Round {
                more_due: false,
                next_due,
            });
        }
        let claims = build_claims(&due, now);
        let work = self.store.triggers_claim(term.fence, &claims, now).await?;
        if work.len() < claims.len() {
            debug!(
                lost = claims.len() - work.len(),
                "some claims produced no work (version check lost, skipped or dropped)"
            );
        }
        // A leader frozen between claim and publish must not publish on waking:
        // the claimed rows stay `pending` for the current leader's sweep.
        if !term.is_valid() {
            return Ok(Round {
                more_due: false,
                next_due,
            });
        }
        let report = self.publisher.publish(work).await;
        if report.dispatched > 0 {
            debug!(?report, "dispatched");
        }
        Ok(Round { more_due, next_due })
    }

    /// Publishes executions left `pending`; `true` if there may be more.
    async fn sweep(&self, term: &Term) -> bool {
        match self
            .store
            .executions_find_unpublished(now_ms(), self.cfg.batch)
            .await
        {
            Ok(work) if work.is_empty() || !term.is_valid() => false,
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

/// The claims for jobs due at `now`, with the jobs' misfire policies, fixed
/// rates and delays and windows applied (see [`kairos_core::trigger::claims_for`]).
fn build_claims(due: &[Job], now: Millis) -> Vec<Claim> {
    kairos_core::trigger::claims_for(due, now)
}

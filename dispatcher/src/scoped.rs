//! The store as one dispatch loop sees it: in partitioned mode, the due
//! scans and claims restricted to the partitions this dispatcher holds
//! (fenced per partition), and with `KAIROS_DISPATCH_MAX_RATE`, claims
//! held to that rate. The loops ([`crate::scan`], the immediate lane) run
//! unchanged on top of it; everything else passes through.
//!
//! A partitioned claim loop records dispatches only with its claims: work
//! left `pending` (no worker free at claim time, a failed publish) is the
//! leader's sweep's, so admissions are refused here and that work simply
//! stays pending for it.

use crate::partitions::OwnedSet;
use crate::rate::RateLimit;
use async_trait::async_trait;
use kairos_core::job::Job;
use kairos_core::outcome::Verdict;
use kairos_core::partition::Owned;
use kairos_core::protocol::{HeartbeatMsg, LogMsg, ResultMsg};
use kairos_core::store::{
    Admitted, Applied, Claim, Dispatch, DispatchWork, DispatchedTo, DispatcherStore, HeldAttempt,
    LogLimits, LogStore, Maintenance, Marked, Page, PartitionedClaim, Reincarnation, StopRequest,
    StoreResult, StoredLogLine, WorkerLedger, WorkerStore,
};
use kairos_core::time::Millis;
use kairos_core::worker::{Routable, WorkerInfo, WorkerState};
use std::sync::Arc;

/// A [`DispatcherStore`] scoped to a dispatcher's partitions and rate.
pub(crate) struct ScopedStore {
    inner: Arc<dyn DispatcherStore>,
    /// The partitions held; `None` in single-leader mode (every job).
    owned: Option<Arc<OwnedSet>>,
    /// The claim rate, in single-leader mode (partitioned: on `owned`).
    rate: Option<Arc<RateLimit>>,
}

impl ScopedStore {
    /// Claims of the single leader, limited to `rate`.
    pub(crate) fn rate_limited(inner: Arc<dyn DispatcherStore>, rate: RateLimit) -> Self {
        Self {
            inner,
            owned: None,
            rate: Some(Arc::new(rate)),
        }
    }

    /// Scans and claims of the partitions in `owned`.
    pub(crate) fn partitioned(inner: Arc<dyn DispatcherStore>, owned: Arc<OwnedSet>) -> Self {
        Self {
            inner,
            owned: Some(owned),
            rate: None,
        }
    }

    fn rate(&self) -> Option<&RateLimit> {
        self.owned
            .as_deref()
            .and_then(|o| o.rate.as_ref())
            .or(self.rate.as_deref())
    }

    /// A scan's `limit`, no more than a limited rate can claim at once.
    fn page(&self, limit: u32) -> u32 {
        self.rate().map_or(limit, |r| limit.min(r.burst().max(1)))
    }

    /// The claims of `claims` the rate allows now (whole jobs), waiting for
    /// the first token; the rest stay due for a later round.
    async fn within_rate<'a>(&self, claims: &'a [Claim]) -> &'a [Claim] {
        let Some(rate) = self.rate() else {
            return claims;
        };
        let taken = rate.take(claims.len()).await;
        let mut cut = taken.min(claims.len());
        // Never split a job's claims (its shards win or lose together).
        while cut > 0 && cut < claims.len() && claims[cut].job.id == claims[cut - 1].job.id {
            cut -= 1;
        }
        if cut == 0 {
            cut = claims
                .iter()
                .position(|c| c.job.id != claims[0].job.id)
                .unwrap_or(claims.len());
        }
        rate.settle(taken, cut);
        &claims[..cut]
    }
}

/// The partitions to scan, or `None` when none is held (nothing to scan).
fn scope(owned: &OwnedSet) -> Option<Vec<u32>> {
    let parts = owned.partitions();
    (!parts.is_empty()).then_some(parts)
}

#[async_trait]
impl Dispatch for ScopedStore {
    async fn jobs_find_due(
        &self,
        now: Millis,
        limit: u32,
        except: &[&str],
    ) -> StoreResult<Vec<Job>> {
        let limit = self.page(limit);
        match &self.owned {
            None => self.inner.jobs_find_due(now, limit, except).await,
            Some(o) => match scope(o) {
                None => Ok(Vec::new()),
                Some(p) => self.inner.jobs_find_due_in(&p, now, limit, except).await,
            },
        }
    }

    async fn jobs_find_due_ranked(
        &self,
        due_by: Millis,
        starving_before: Millis,
        limit: u32,
        except: &[&str],
    ) -> StoreResult<Vec<Job>> {
        let limit = self.page(limit);
        match &self.owned {
            None => {
                self.inner
                    .jobs_find_due_ranked(due_by, starving_before, limit, except)
                    .await
            }
            Some(o) => match scope(o) {
                None => Ok(Vec::new()),
                Some(p) => {
                    self.inner
                        .jobs_find_due_ranked_in(&p, due_by, starving_before, limit, except)
                        .await
                }
            },
        }
    }

    async fn jobs_find_due_immediate(&self, due_by: Millis, limit: u32) -> StoreResult<Vec<Job>> {
        let limit = self.page(limit);
        match &self.owned {
            None => self.inner.jobs_find_due_immediate(due_by, limit).await,
            Some(o) => match scope(o) {
                None => Ok(Vec::new()),
                Some(p) => {
                    self.inner
                        .jobs_find_due_immediate_in(&p, due_by, limit)
                        .await
                }
            },
        }
    }

    async fn jobs_count_due(&self, until: Millis, cap: u32) -> StoreResult<u32> {
        match &self.owned {
            None => self.inner.jobs_count_due(until, cap).await,
            Some(o) => match scope(o) {
                None => Ok(0),
                Some(p) => self.inner.jobs_count_due_in(&p, until, cap).await,
            },
        }
    }

    async fn triggers_claim(
        &self,
        fence: u64,
        claims: &[Claim],
        now: Millis,
    ) -> StoreResult<Vec<DispatchWork>> {
        let claims = self.within_rate(claims).await;
        let Some(owned) = &self.owned else {
            return self.inner.triggers_claim(fence, claims, now).await;
        };
        // The partitions as held now: the rate may have waited.
        let held = owned.snapshot();
        if held.is_empty() {
            return Ok(Vec::new());
        }
        let done = self
            .inner
            .triggers_claim_partitioned(&held, claims, now)
            .await?;
        owned.refuse(&done.fenced);
        Ok(done.work)
    }

    async fn executions_find_unpublished(
        &self,
        now: Millis,
        limit: u32,
        routable: &Routable,
    ) -> StoreResult<Vec<DispatchWork>> {
        self.inner
            .executions_find_unpublished(now, limit, routable)
            .await
    }

    async fn executions_mark_dispatched(
        &self,
        sent: &[DispatchedTo],
        now: Millis,
    ) -> StoreResult<Marked> {
        self.inner.executions_mark_dispatched(sent, now).await
    }

    async fn execution_mark_rerouted(
        &self,
        sent: &DispatchedTo,
        reason: &str,
        now: Millis,
    ) -> StoreResult<bool> {
        self.inner.execution_mark_rerouted(sent, reason, now).await
    }

    async fn executions_admit(
        &self,
        fence: u64,
        picks: &[DispatchedTo],
        now: Millis,
    ) -> StoreResult<Admitted> {
        match &self.owned {
            None => self.inner.executions_admit(fence, picks, now).await,
            // Nothing admitted: the work stays pending for the leader.
            Some(_) => Ok(Admitted::default()),
        }
    }

    async fn executions_find_waiting(
        &self,
        now: Millis,
        limit: u32,
        routable: &Routable,
    ) -> StoreResult<Vec<DispatchWork>> {
        self.inner
            .executions_find_waiting(now, limit, routable)
            .await
    }

    async fn executions_count_waiting(&self, cap: u32) -> StoreResult<u64> {
        self.inner.executions_count_waiting(cap).await
    }

    async fn concurrency_slots_purge(&self, fence: u64, limit: u32) -> StoreResult<u64> {
        match &self.owned {
            None => self.inner.concurrency_slots_purge(fence, limit).await,
            Some(_) => Ok(0),
        }
    }

    async fn results_apply(&self, results: &[ResultMsg], now: Millis) -> StoreResult<Vec<Applied>> {
        self.inner.results_apply(results, now).await
    }

    async fn partitions_count(&self) -> StoreResult<u32> {
        self.inner.partitions_count().await
    }

    async fn jobs_find_due_in(
        &self,
        partitions: &[u32],
        now: Millis,
        limit: u32,
        except: &[&str],
    ) -> StoreResult<Vec<Job>> {
        self.inner
            .jobs_find_due_in(partitions, now, limit, except)
            .await
    }

    async fn jobs_find_due_ranked_in(
        &self,
        partitions: &[u32],
        due_by: Millis,
        starving_before: Millis,
        limit: u32,
        except: &[&str],
    ) -> StoreResult<Vec<Job>> {
        self.inner
            .jobs_find_due_ranked_in(partitions, due_by, starving_before, limit, except)
            .await
    }

    async fn jobs_find_due_immediate_in(
        &self,
        partitions: &[u32],
        due_by: Millis,
        limit: u32,
    ) -> StoreResult<Vec<Job>> {
        self.inner
            .jobs_find_due_immediate_in(partitions, due_by, limit)
            .await
    }

    async fn jobs_count_due_in(
        &self,
        partitions: &[u32],
        until: Millis,
        cap: u32,
    ) -> StoreResult<u32> {
        self.inner.jobs_count_due_in(partitions, until, cap).await
    }

    async fn triggers_claim_partitioned(
        &self,
        owned: &Owned,
        claims: &[Claim],
        now: Millis,
    ) -> StoreResult<PartitionedClaim> {
        self.inner
            .triggers_claim_partitioned(owned, claims, now)
            .await
    }
}

#[async_trait]
impl Maintenance for ScopedStore {
    async fn executions_find_overdue(
        &self,
        now: Millis,
        margin_ms: i64,
        limit: u32,
    ) -> StoreResult<Vec<(String, u32)>> {
        self.inner
            .executions_find_overdue(now, margin_ms, limit)
            .await
    }

    async fn executions_find_unbounded(
        &self,
        now: Millis,
        limit_ms: i64,
        limit: u32,
    ) -> StoreResult<Vec<(String, u32)>> {
        self.inner
            .executions_find_unbounded(now, limit_ms, limit)
            .await
    }

    async fn executions_in_flight_on(&self, worker_id: &str) -> StoreResult<Vec<HeldAttempt>> {
        self.inner.executions_in_flight_on(worker_id).await
    }

    async fn executions_apply_verdict(
        &self,
        targets: &[(String, u32)],
        verdict: Verdict,
        reason: &str,
        now: Millis,
    ) -> StoreResult<Vec<Applied>> {
        self.inner
            .executions_apply_verdict(targets, verdict, reason, now)
            .await
    }

    async fn executions_requeue_unstarted(
        &self,
        targets: &[(String, u32)],
        reason: &str,
        now: Millis,
    ) -> StoreResult<u64> {
        self.inner
            .executions_requeue_unstarted(targets, reason, now)
            .await
    }

    async fn executions_stop_requested(
        &self,
        since: Millis,
        limit: u32,
    ) -> StoreResult<Vec<StopRequest>> {
        self.inner.executions_stop_requested(since, limit).await
    }
}

#[async_trait]
impl WorkerStore for ScopedStore {
    async fn workers_record_heartbeats(
        &self,
        beats: &[HeartbeatMsg],
        now: Millis,
    ) -> StoreResult<Vec<Reincarnation>> {
        self.inner.workers_record_heartbeats(beats, now).await
    }

    async fn worker_ledger(&self, id: &str) -> StoreResult<Option<WorkerLedger>> {
        self.inner.worker_ledger(id).await
    }

    async fn workers_list(&self) -> StoreResult<Vec<WorkerInfo>> {
        self.inner.workers_list().await
    }

    async fn worker_set_state(&self, id: &str, state: WorkerState, now: Millis) -> StoreResult<()> {
        self.inner.worker_set_state(id, state, now).await
    }

    async fn worker_forget(&self, id: &str, silent_before: Millis) -> StoreResult<bool> {
        self.inner.worker_forget(id, silent_before).await
    }
}

#[async_trait]
impl LogStore for ScopedStore {
    async fn logs_append(
        &self,
        batches: &[LogMsg],
        limits: &LogLimits,
        now: Millis,
    ) -> StoreResult<()> {
        self.inner.logs_append(batches, limits, now).await
    }

    async fn logs_page(
        &self,
        execution_id: &str,
        cursor: Option<&str>,
        limit: u32,
    ) -> StoreResult<Page<StoredLogLine>> {
        self.inner.logs_page(execution_id, cursor, limit).await
    }

    async fn logs_purge(&self, before: Millis, limit: u32) -> StoreResult<u64> {
        self.inner.logs_purge(before, limit).await
    }
}

/// Scheduled workflows are the leader's (see `crate::workflows`): passed
/// through unscoped.
#[async_trait]
impl kairos_core::workflow::WorkflowScheduler for ScopedStore {
    async fn workflows_fire_due(
        &self,
        now: Millis,
        limit: u32,
    ) -> StoreResult<Vec<kairos_core::workflow::WorkflowRun>> {
        self.inner.workflows_fire_due(now, limit).await
    }
}

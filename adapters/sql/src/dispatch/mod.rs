//! [`Dispatch`]: the dispatcher's hot path — the due scan and its count, the
//! claim transaction (`claim`), the scan for unpublished work, publisher
//! confirms and reroutes (`confirm`), and worker results (through
//! `crate::outcomes`).

mod admit;
mod claim;
mod confirm;
mod due;
mod fence;
mod partitioned;

pub use due::{due_scan_sql, lane_scan_sql};

use crate::outcomes::{self, Input};
use crate::rows;
use crate::store::SqlStore;
use async_trait::async_trait;
use kairos_core::job::Job;
use kairos_core::outcome::Verdict;
use kairos_core::protocol::{ResultMsg, incarnation_id};
use kairos_core::store::{
    Admitted, Applied, Claim, ClaimOutcome, Dispatch, DispatchScope, DispatchWork, DispatchedTo,
    Marked, StoreResult,
};
use kairos_core::time::Millis;
use kairos_core::worker::Routable;

#[async_trait]
impl Dispatch for SqlStore {
    async fn jobs_find_due(
        &self,
        scope: DispatchScope<'_>,
        now: Millis,
        limit: u32,
        except: &[&str],
    ) -> StoreResult<Vec<Job>> {
        if scope.is_empty() {
            return Ok(Vec::new());
        }
        let parts = scope.partitions();
        let found = due::due_scan(now, limit, except, parts.as_deref())
            .fetch_all(self.read())
            .await?;
        found.iter().map(rows::job).collect()
    }

    async fn jobs_find_due_ranked(
        &self,
        scope: DispatchScope<'_>,
        due_by: Millis,
        starving_before: Millis,
        limit: u32,
        except: &[&str],
    ) -> StoreResult<Vec<Job>> {
        if scope.is_empty() {
            return Ok(Vec::new());
        }
        let parts = scope.partitions();
        let found = due::due_ranked(due_by, starving_before, limit, except, parts.as_deref())
            .fetch_all(self.read())
            .await?;
        let mut seen = std::collections::HashSet::with_capacity(found.len());
        let mut jobs = Vec::with_capacity(found.len());
        for row in &found {
            let job = rows::job(row)?;
            if seen.insert(job.id.clone()) {
                jobs.push(job);
            }
        }
        Ok(jobs)
    }

    async fn jobs_find_due_immediate(
        &self,
        scope: DispatchScope<'_>,
        due_by: Millis,
        limit: u32,
    ) -> StoreResult<Vec<Job>> {
        if scope.is_empty() {
            return Ok(Vec::new());
        }
        let parts = scope.partitions();
        let found = due::due_immediate(due_by, limit, parts.as_deref())
            .fetch_all(self.read())
            .await?;
        found.iter().map(rows::job).collect()
    }

    async fn jobs_count_due(
        &self,
        scope: DispatchScope<'_>,
        until: Millis,
        cap: u32,
    ) -> StoreResult<u32> {
        if scope.is_empty() {
            return Ok(0);
        }
        let parts = scope.partitions();
        let n: i64 = due::due_count(until, cap, parts.as_deref())
            .scalar(self.read(), "n")
            .await?;
        Ok(u32::try_from(n).unwrap_or(cap))
    }

    async fn triggers_claim(
        &self,
        scope: DispatchScope<'_>,
        claims: &[Claim],
        now: Millis,
    ) -> StoreResult<ClaimOutcome> {
        if claims.is_empty() || scope.is_empty() {
            return Ok(ClaimOutcome::default());
        }
        match scope {
            DispatchScope::All { fence } => {
                let work = self
                    .transaction(|tx| claim::claim(tx, fence, claims, now))
                    .await?;
                Ok(ClaimOutcome {
                    work,
                    fenced: Vec::new(),
                })
            }
            DispatchScope::Partitions(owned) => {
                let count = crate::partitions::recorded(self.read()).await?;
                self.transaction(|tx| partitioned::claim(tx, owned, count, claims, now))
                    .await
            }
        }
    }

    async fn executions_find_unpublished(
        &self,
        now: Millis,
        limit: u32,
        routable: &Routable,
    ) -> StoreResult<Vec<DispatchWork>> {
        self.find_unpublished(now, limit, routable, false).await
    }

    async fn executions_admit(
        &self,
        fence: u64,
        picks: &[DispatchedTo],
        now: Millis,
    ) -> StoreResult<Admitted> {
        if picks.is_empty() {
            return Ok(Admitted::default());
        }
        self.transaction(|tx| admit::admit(tx, fence, picks, now))
            .await
    }

    async fn executions_find_waiting(
        &self,
        now: Millis,
        limit: u32,
        routable: &Routable,
    ) -> StoreResult<Vec<DispatchWork>> {
        self.find_unpublished(now, limit, routable, true).await
    }

    async fn concurrency_slots_purge(&self, fence: u64, limit: u32) -> StoreResult<u64> {
        self.transaction(|mut tx| async move {
            fence::check_fence(&mut tx, fence).await?;
            let n = crate::concurrency::purge(&mut tx, limit).await?;
            tx.commit().await?;
            Ok(n)
        })
        .await
    }

    async fn executions_count_waiting(&self, cap: u32) -> StoreResult<u64> {
        let n: i64 = due::waiting_count(cap).scalar(self.read(), "n").await?;
        Ok(u64::try_from(n).unwrap_or_default())
    }

    async fn executions_mark_dispatched(
        &self,
        sent: &[DispatchedTo],
        now: Millis,
    ) -> StoreResult<Marked> {
        if sent.is_empty() {
            return Ok(Marked::default());
        }
        self.transaction(|tx| confirm::mark_dispatched(tx, sent, now))
            .await
    }

    async fn execution_mark_rerouted(
        &self,
        sent: &DispatchedTo,
        reason: &str,
        now: Millis,
    ) -> StoreResult<bool> {
        self.transaction(|tx| confirm::mark_rerouted(tx, sent, reason, now))
            .await
    }

    async fn partitions_count(&self) -> StoreResult<u32> {
        crate::partitions::recorded(self.read()).await
    }

    async fn results_apply(&self, results: &[ResultMsg], now: Millis) -> StoreResult<Vec<Applied>> {
        if results.is_empty() {
            return Ok(Vec::new());
        }
        let inputs: Vec<Input<'_>> = results
            .iter()
            .map(|r| Input {
                execution_id: &r.execution_id,
                attempt: r.attempt,
                verdict: Verdict::of_result(r),
                worker_id: Some(&r.worker_id),
                incarnation: incarnation_id(&r.incarnation),
                started_at: r.started_at,
                output: r.output.as_ref(),
                error: r.error.as_deref(),
                at: r.at,
            })
            .collect();
        self.transaction(|tx| outcomes::apply(tx, &inputs, now, self.run_limits()))
            .await
    }
}

impl SqlStore {
    /// `pending` work some announcement of `routable` can run, oldest
    /// first: the work a concurrency limit holds back (`waiting`), or the
    /// rest.
    async fn find_unpublished(
        &self,
        now: Millis,
        limit: u32,
        routable: &Routable,
        waiting: bool,
    ) -> StoreResult<Vec<DispatchWork>> {
        let Some(entries) = due::routable_entries(routable) else {
            return Ok(Vec::new());
        };
        let found = due::unpublished(now, limit, &entries, waiting)
            .fetch_all(self.read())
            .await?;
        found.iter().map(due::work).collect()
    }
}

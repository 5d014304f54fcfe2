//! The dispatcher's hot path: the due scan, batched claims behind the fencing
//! check, and the scan for unpublished work.

use super::SqlStore;
use super::error::{corrupt, db_err, retrying};
use super::inserts::{self, EventRow};
use super::rows::{self, JOB_COLS, R, select_list};
use super::stmt::{CHUNK, bind_names, from_u64, marks, q, row_marks};
use crate::execution::{ExecStatus, ExecTransition};
use crate::job::JobTransition;
use crate::store::{Claim, DispatchWork, StoreError, StoreResult};
use crate::time::Millis;
use std::collections::{HashMap, HashSet};

/// Name of the dispatcher lease in `leader_fences`.
const DISPATCH_FENCE: &str = "dispatcher";

/// The due-trigger scan. Binds, in order: each name of
/// `JobTransition::Claim.from_states()`, `now`, the limit. Public so that
/// operators and tests can `EXPLAIN` exactly what runs: it must read through
/// the `(status, next_trigger_at)` index `idx_jobs_status_next`.
pub fn due_scan_sql() -> String {
    format!(
        "SELECT {} FROM jobs j WHERE j.status IN ({}) AND j.next_trigger_at <= ? \
         ORDER BY j.next_trigger_at LIMIT ?",
        select_list("j", &JOB_COLS),
        marks(JobTransition::Claim.from_states().len())
    )
}

/// `DispatchWork` from a row carrying the execution and job columns it needs.
fn work(row: &sqlx::any::AnyRow) -> StoreResult<DispatchWork> {
    let r = R::new(row, "executions");
    Ok(DispatchWork {
        execution_id: r.string("id")?,
        job_id: r.string("job_id")?,
        tenant: r.string("tenant")?,
        attempt: r.u32("attempt")?,
        handler: r.string("handler")?,
        params: r.json("params")?,
        scheduled_at: r.i64("scheduled_at")?,
        timeout_ms: r.opt_u64("timeout_ms")?,
    })
}

/// What a winning claim needs from its job.
struct JobBits {
    tenant: String,
    handler: String,
    params: serde_json::Value,
    timeout_ms: Option<u64>,
}

impl SqlStore {
    pub(crate) async fn find_due(
        &self,
        now: Millis,
        limit: u32,
    ) -> StoreResult<Vec<crate::job::Job>> {
        let query = bind_names(
            q(due_scan_sql()),
            JobTransition::Claim
                .from_states()
                .iter()
                .map(|s| s.as_str()),
        );
        let found = query
            .bind(now)
            .bind(i64::from(limit))
            .fetch_all(self.read())
            .await
            .map_err(db_err)?;
        found.iter().map(rows::job).collect()
    }

    pub(crate) async fn claim(
        &self,
        fence: u64,
        claims: &[Claim],
        now: Millis,
    ) -> StoreResult<Vec<DispatchWork>> {
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        retrying(|| self.try_claim(fence, claims, now)).await
    }

    async fn try_claim(
        &self,
        fence: u64,
        claims: &[Claim],
        now: Millis,
    ) -> StoreResult<Vec<DispatchWork>> {
        let mut tx = self.begin().await?;
        let ours = from_u64(fence);
        sqlx::query(self.dialect().fence_upsert())
            .bind(DISPATCH_FENCE)
            .bind(ours)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        let current: i64 = sqlx::query_scalar("SELECT fence FROM leader_fences WHERE name = ?")
            .bind(DISPATCH_FENCE)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_err)?;
        if current > ours {
            return Err(StoreError::Fenced {
                ours: fence,
                current: u64::try_from(current).unwrap_or_default(),
            });
        }

        // Jobs are updated in id order so two claimers lock them in one order.
        let mut order: Vec<usize> = (0..claims.len()).collect();
        order.sort_by(|&a, &b| claims[a].job_id.cmp(&claims[b].job_id));
        let t = JobTransition::Claim;
        let from = t.from_states();
        let update = format!(
            "UPDATE jobs SET next_trigger_at = ?, status = ?, version = version + 1, \
             updated_at = ? WHERE id = ? AND version = ? AND status IN ({})",
            marks(from.len())
        );
        let mut won = vec![false; claims.len()];
        for i in order {
            let c = &claims[i];
            let query = q(update.clone())
                .bind(c.next_trigger_at)
                .bind(t.to_state().as_str())
                .bind(now)
                .bind(c.job_id.as_str())
                .bind(c.version);
            let res = bind_names(query, from.iter().map(|s| s.as_str()))
                .execute(&mut *tx)
                .await
                .map_err(db_err)?;
            won[i] = res.rows_affected() == 1;
        }
        let winners: Vec<&Claim> = claims
            .iter()
            .zip(&won)
            .filter(|(_, w)| **w)
            .map(|(c, _)| c)
            .collect();
        if winners.is_empty() {
            tx.commit().await.map_err(db_err)?;
            return Ok(Vec::new());
        }

        let mut jobs: HashMap<String, JobBits> = HashMap::with_capacity(winners.len());
        for chunk in winners.chunks(CHUNK) {
            let sql = format!(
                "SELECT id, tenant, handler, params, timeout_ms FROM jobs WHERE id IN ({})",
                marks(chunk.len())
            );
            let mut query = q(sql);
            for c in chunk {
                query = query.bind(c.job_id.as_str());
            }
            for row in query.fetch_all(&mut *tx).await.map_err(db_err)? {
                let r = R::new(&row, "jobs");
                jobs.insert(
                    r.string("id")?,
                    JobBits {
                        tenant: r.string("tenant")?,
                        handler: r.string("handler")?,
                        params: r.json("params")?,
                        timeout_ms: r.opt_u64("timeout_ms")?,
                    },
                );
            }
        }

        let mut rows = Vec::with_capacity(winners.len());
        for c in winners {
            let job = jobs
                .get(&c.job_id)
                .ok_or_else(|| corrupt("jobs", format!("claimed job {} vanished", c.job_id)))?;
            rows.push((c, job));
        }
        let pending = ExecStatus::Pending;
        let mut inserted = 0u64;
        for chunk in rows.chunks(CHUNK) {
            let sql = format!(
                "{} executions (id, job_id, tenant, scheduled_at, attempt, status, not_before, \
                 created_at, updated_at) VALUES {}",
                self.dialect().insert_ignore(),
                row_marks(chunk.len(), 9)
            );
            let mut query = q(sql);
            for (c, job) in chunk {
                query = query
                    .bind(c.execution_id.as_str())
                    .bind(c.job_id.as_str())
                    .bind(job.tenant.as_str())
                    .bind(c.scheduled_at)
                    .bind(1_i64)
                    .bind(pending.as_str())
                    .bind(c.scheduled_at)
                    .bind(now)
                    .bind(now);
            }
            inserted += query
                .execute(&mut *tx)
                .await
                .map_err(db_err)?
                .rows_affected();
        }
        // A trigger that already had an execution (unique (job_id,
        // scheduled_at)) was skipped by the insert; find out which.
        let mut present: Option<HashSet<String>> = None;
        if inserted < rows.len() as u64 {
            let mut ids = HashSet::new();
            for chunk in rows.chunks(CHUNK) {
                let sql = format!(
                    "SELECT id FROM executions WHERE id IN ({})",
                    marks(chunk.len())
                );
                let mut query = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql));
                for (c, _) in chunk {
                    query = query.bind(c.execution_id.as_str());
                }
                ids.extend(query.fetch_all(&mut *tx).await.map_err(db_err)?);
            }
            present = Some(ids);
        }

        let mut out = Vec::with_capacity(rows.len());
        let mut events = Vec::with_capacity(rows.len());
        for (c, job) in rows {
            if present
                .as_ref()
                .is_some_and(|p| !p.contains(&c.execution_id))
            {
                continue;
            }
            events.push(EventRow::plain(&c.execution_id, 1, pending, now));
            out.push(DispatchWork {
                execution_id: c.execution_id.clone(),
                job_id: c.job_id.clone(),
                tenant: job.tenant.clone(),
                attempt: 1,
                handler: job.handler.clone(),
                params: job.params.clone(),
                scheduled_at: c.scheduled_at,
                timeout_ms: job.timeout_ms,
            });
        }
        inserts::events(&mut tx, &events).await?;
        tx.commit().await.map_err(db_err)?;
        Ok(out)
    }

    pub(crate) async fn find_unpublished(
        &self,
        now: Millis,
        limit: u32,
    ) -> StoreResult<Vec<DispatchWork>> {
        let from = ExecTransition::Dispatch.from_states();
        let sql = format!(
            "SELECT e.id AS id, e.job_id AS job_id, e.tenant AS tenant, e.attempt AS attempt, \
             e.scheduled_at AS scheduled_at, j.handler AS handler, j.params AS params, \
             j.timeout_ms AS timeout_ms FROM executions e JOIN jobs j ON j.id = e.job_id \
             WHERE e.status IN ({}) AND e.not_before <= ? ORDER BY e.not_before LIMIT ?",
            marks(from.len())
        );
        let found = bind_names(q(sql), from.iter().map(|s| s.as_str()))
            .bind(now)
            .bind(i64::from(limit))
            .fetch_all(self.read())
            .await
            .map_err(db_err)?;
        found.iter().map(work).collect()
    }
}

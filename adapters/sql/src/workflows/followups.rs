//! Child jobs (issue 34, part 3): a job's follow-ups (`job_followups`),
//! set by its owner (never forming a cycle: every change takes the tenant's
//! follow-up graph lock first), and fired by the transaction that ends one
//! of its executions (`crate::outcomes`, see `chains`). Only jobs with
//! `has_followups` set cost that transaction a read.

use crate::db::Tx;
use crate::rows::R;
use crate::sql::{CHUNK, Fields, Sql, fetch_chunked, time};
use crate::store::SqlStore;
use async_trait::async_trait;
use kairos_core::store::StoreResult;
use kairos_core::time::Millis;
use kairos_core::workflow::followup::{FollowUpOn, FollowUpStore, FollowUps, SetFollowUps};
use std::collections::HashSet;

/// Whether `id` is an ordinary job of `tenant` (not a workflow node's).
async fn job_exists(
    on: impl Into<crate::db::On<'_>>,
    tenant: &str,
    id: &str,
    lock: bool,
) -> StoreResult<bool> {
    let mut s = Sql::new("SELECT id FROM jobs WHERE tenant = ");
    s.bind(tenant)
        .push(" AND id = ")
        .bind(id)
        .push(" AND workflow_id IS NULL");
    if lock {
        s.for_update();
    }
    Ok(s.fetch_optional(on).await?.is_some())
}

async fn read(on: impl Into<crate::db::On<'_>>, job_id: &str) -> StoreResult<FollowUps> {
    let found = Sql::new("SELECT outcome, child_id FROM job_followups WHERE job_id = ")
        .bind(job_id)
        .push(" ORDER BY created_at, child_id")
        .fetch_all(on)
        .await?;
    let mut out = FollowUps::default();
    for row in &found {
        let r = R::new(row, "job_followups");
        let child = r.string("child_id")?;
        match r.parsed("outcome", FollowUpOn::parse)? {
            FollowUpOn::Success => out.on_success.push(child),
            FollowUpOn::Failure => out.on_failure.push(child),
        }
    }
    Ok(out)
}

/// Whether following follow-ups from `from` reaches `target`.
async fn reaches(tx: &mut Tx, from: &[String], target: &str) -> StoreResult<bool> {
    let mut seen: HashSet<String> = HashSet::new();
    let mut frontier: Vec<String> = from.to_vec();
    while !frontier.is_empty() {
        if frontier.iter().any(|j| j == target) {
            return Ok(true);
        }
        let next = fetch_chunked(&mut *tx, &frontier, |chunk| {
            let mut s = Sql::new("SELECT child_id FROM job_followups WHERE job_id IN ");
            s.list(chunk.iter().map(String::as_str));
            s
        })
        .await?;
        seen.extend(frontier.drain(..));
        for row in &next {
            let child = R::new(row, "job_followups").string("child_id")?;
            if !seen.contains(&child) {
                frontier.push(child);
            }
        }
    }
    Ok(false)
}

/// Takes the tenant's follow-up graph lock (its `followup_graph_locks` row,
/// created on first use), held to the commit. Every change of the tenant's
/// follow-ups takes it before it reads the graph, so the cycle check and
/// the write are one step: two concurrent changes A→B and B→A take turns,
/// and under READ COMMITTED the second one's check reads the first one's
/// edge. (Locking only the jobs changed does not do it: each change locks
/// its own job and reads the other's edges before they are committed.)
async fn lock_graph(tx: &mut Tx, tenant: &str) -> StoreResult<()> {
    if bump_graph_lock(tx, tenant).await? == 1 {
        return Ok(());
    }
    // First use: a concurrent first insert waits for the other's commit,
    // then finds the row; the update takes its lock either way.
    Sql::new("")
        .insert_ignore_into()
        .push("followup_graph_locks")
        .rows([&Fields::new().with("tenant", tenant).with("changes", 0_i64)])
        .on_conflict_ignore()
        .execute(&mut *tx)
        .await?;
    bump_graph_lock(tx, tenant).await?;
    Ok(())
}

/// Writes the tenant's lock row (taking its row lock); rows changed.
async fn bump_graph_lock(tx: &mut Tx, tenant: &str) -> StoreResult<u64> {
    Sql::new("UPDATE followup_graph_locks SET changes = changes + 1 WHERE tenant = ")
        .bind(tenant)
        .execute(tx)
        .await
}

async fn set(
    mut tx: Tx,
    tenant: &str,
    job_id: &str,
    f: &FollowUps,
    now: Millis,
) -> StoreResult<SetFollowUps> {
    lock_graph(&mut tx, tenant).await?;
    if !job_exists(&mut tx, tenant, job_id, true).await? {
        return tx.unchanged(SetFollowUps::NotFound).await;
    }
    let children: Vec<String> = {
        let mut all: Vec<String> = f.on_success.iter().chain(&f.on_failure).cloned().collect();
        all.sort();
        all.dedup();
        all
    };
    for c in &children {
        if c == job_id {
            return tx.unchanged(SetFollowUps::Cycle(c.clone())).await;
        }
        if !job_exists(&mut tx, tenant, c, false).await? {
            return tx.unchanged(SetFollowUps::UnknownChild(c.clone())).await;
        }
    }
    if reaches(&mut tx, &children, job_id).await? {
        return tx.unchanged(SetFollowUps::Cycle(job_id.to_string())).await;
    }
    Sql::new("DELETE FROM job_followups WHERE job_id = ")
        .bind(job_id)
        .execute(&mut tx)
        .await?;
    let rows: Vec<Fields> = [
        (FollowUpOn::Success, &f.on_success),
        (FollowUpOn::Failure, &f.on_failure),
    ]
    .into_iter()
    .flat_map(|(on, ids)| {
        let mut ids: Vec<&String> = ids.iter().collect();
        ids.dedup();
        ids.into_iter().map(move |c| (on, c))
    })
    .map(|(on, c)| {
        Fields::new()
            .with("job_id", job_id)
            .with("outcome", on.as_str())
            .with("child_id", c.as_str())
            .with("tenant", tenant)
            .with("created_at", time(now))
    })
    .collect();
    for chunk in rows.chunks(CHUNK) {
        Sql::new("INSERT INTO job_followups")
            .rows(chunk)
            .execute(&mut tx)
            .await?;
    }
    Sql::new("UPDATE jobs SET has_followups = ")
        .bind(i64::from(!rows.is_empty()))
        .push(" WHERE id = ")
        .bind(job_id)
        .execute(&mut tx)
        .await?;
    let now_set = read(&mut tx, job_id).await?;
    tx.commit().await?;
    Ok(SetFollowUps::Done(now_set))
}

#[async_trait]
impl FollowUpStore for SqlStore {
    async fn job_followups_get(
        &self,
        tenant: &str,
        job_id: &str,
    ) -> StoreResult<Option<FollowUps>> {
        if !job_exists(self.read(), tenant, job_id, false).await? {
            return Ok(None);
        }
        read(self.read(), job_id).await.map(Some)
    }

    async fn job_followups_set(
        &self,
        tenant: &str,
        job_id: &str,
        followups: &FollowUps,
        now: Millis,
    ) -> StoreResult<SetFollowUps> {
        self.transaction(|tx| set(tx, tenant, job_id, followups, now))
            .await
    }
}

/// The first trigger time at or after `now` with no execution of `job_id`.
pub(super) async fn free_slot(tx: &mut Tx, job_id: &str, now: Millis) -> StoreResult<Millis> {
    let found = Sql::new("SELECT scheduled_at FROM executions WHERE job_id = ")
        .bind(job_id)
        .push(" AND scheduled_at >= ")
        .bind(time(now))
        .push(" ORDER BY scheduled_at LIMIT 1000")
        .fetch_all(&mut *tx)
        .await?;
    let mut slot = now;
    for row in &found {
        if R::new(row, "executions").time("scheduled_at")? != slot {
            break;
        }
        slot += 1;
    }
    Ok(slot)
}

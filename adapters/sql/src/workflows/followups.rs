//! Child jobs (issue 34, part 3): a job's follow-ups (`job_followups`),
//! set by its owner, and fired by the transaction that ends one of its
//! executions (`crate::outcomes`): an execution of each child, pending and
//! due now at the child's first free trigger time, as a manual trigger
//! makes. Only jobs with `has_followups` set cost that transaction a read.

use crate::db::Tx;
use crate::inserts::{self, EventRow};
use crate::rows::{self, R};
use crate::sql::{CHUNK, Fields, Sql, fetch_chunked, time};
use crate::store::SqlStore;
use async_trait::async_trait;
use kairos_core::execution::{ExecStatus, Execution};
use kairos_core::job::JobStatus;
use kairos_core::store::StoreResult;
use kairos_core::time::Millis;
use kairos_core::workflow::followup::{FollowUpOn, FollowUpStore, FollowUps, SetFollowUps};
use std::collections::{HashMap, HashSet};

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

async fn set(
    mut tx: Tx,
    tenant: &str,
    job_id: &str,
    f: &FollowUps,
    now: Millis,
) -> StoreResult<SetFollowUps> {
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

/// Fires the follow-ups of `ended` (executions of jobs with follow-ups
/// that reached a final state in this transaction). A broadcast or sharded
/// trigger's shards fire none (one trigger, many ends). Children that are
/// paused or cancelled are not triggered.
pub(crate) async fn fire(tx: &mut Tx, ended: &[&Execution], now: Millis) -> StoreResult<()> {
    let ended: Vec<&&Execution> = ended.iter().filter(|e| !e.shard.is_fanned_out()).collect();
    if ended.is_empty() {
        return Ok(());
    }
    let parents: Vec<&str> = {
        let set: HashSet<&str> = ended.iter().map(|e| e.job_id.as_str()).collect();
        set.into_iter().collect()
    };
    let found = fetch_chunked(&mut *tx, &parents, |chunk| {
        let mut s =
            Sql::new("SELECT job_id, outcome, child_id FROM job_followups WHERE job_id IN ");
        s.list(chunk.iter().copied());
        s
    })
    .await?;
    let mut children: HashMap<(String, FollowUpOn), Vec<String>> = HashMap::new();
    for row in &found {
        let r = R::new(row, "job_followups");
        children
            .entry((r.string("job_id")?, r.parsed("outcome", FollowUpOn::parse)?))
            .or_default()
            .push(r.string("child_id")?);
    }
    let mut due: Vec<String> = Vec::new();
    for e in &ended {
        if let Some(on) = FollowUpOn::of(e.status)
            && let Some(list) = children.get(&(e.job_id.clone(), on))
        {
            due.extend(list.iter().cloned());
        }
    }
    if due.is_empty() {
        return Ok(());
    }
    due.sort();
    // Locked in id order: the child's trigger times are then picked by one
    // transaction at a time.
    let jobs = fetch_chunked(
        &mut *tx,
        &{
            let mut d = due.clone();
            d.dedup();
            d
        },
        |chunk| {
            let mut s = Sql::new("SELECT ");
            s.columns("j", &rows::JOB_COLS)
                .push(" FROM jobs j WHERE j.id IN ")
                .list(chunk.iter().map(String::as_str))
                .push(" ORDER BY j.id")
                .for_update();
            s
        },
    )
    .await?;
    let mut by_id = HashMap::new();
    for row in &jobs {
        let j = rows::job(row)?;
        by_id.insert(j.id.clone(), j);
    }
    let pending = ExecStatus::Pending;
    for child in &due {
        let Some(job) = by_id.get(child) else {
            continue;
        };
        if matches!(job.status, JobStatus::Paused | JobStatus::Cancelled) {
            continue;
        }
        let at = free_slot(tx, &job.id, now).await?;
        let id = uuid::Uuid::now_v7().to_string();
        let row = Fields::new()
            .with("id", id.as_str())
            .with("job_id", job.id.as_str())
            .with("tenant", job.tenant.as_str())
            .with("scheduled_at", time(at))
            .with("attempt", 1_i64)
            .with("status", pending.as_str())
            .with("not_before", time(now))
            .with("created_at", time(now))
            .with("updated_at", time(now))
            .with("shard_index", 0_i64)
            .with("shard_count", 1_i64);
        Sql::new("INSERT INTO executions")
            .rows([&row])
            .execute(&mut *tx)
            .await?;
        inserts::events(tx, &[EventRow::plain(&id, 1, pending, now)]).await?;
    }
    Ok(())
}

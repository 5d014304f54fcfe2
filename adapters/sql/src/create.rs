//! Job creation, many rows per transaction: the group commit behind
//! `job_create` and the one transaction behind `jobs_create_many`.
//!
//! A commit costs the same for one row as for a hundred, so concurrent
//! creates are written together. [`Committer`] takes the creates that are
//! waiting when it is free, as many as the largest of a few fixed group
//! sizes they fill (no fixed window: an idle store adds no latency, a busy
//! one gets large batches), writes them with multi-row inserts in one
//! transaction, and answers each caller only after that commit. One batch is
//! written at a time: what arrives during a commit makes the next batch
//! larger, so a slower commit is paid by more rows. On MariaDB with 32
//! clients that gave batches of about 16 instead of 4 (with four in flight)
//! and a tenth less CPU per job over the whole stack: each batch costs the
//! same four statements whatever its size.
//!
//! Idempotency stays per request: `(tenant, client_request_id)` pairs already
//! stored are answered `Existing` without inserting, and a pair repeated
//! within one batch is inserted once and answered `Existing` for the rest.
//! If the batch still fails (a concurrent create on another API instance won
//! the unique key, or one row is bad), every job is retried on its own, so
//! one request's error never fails the others.

use crate::db::{Pool, Tx};
use crate::error::{corrupt, is_unique_violation};
use crate::rows::{self, JOB_COLS};
use crate::sched_cols::schedule_columns;
use crate::sql::{Fields, Sql, from_u64, json, time};
use kairos_core::job::{Job, JobStatus, NewJob};
use kairos_core::priority::Lane;
use kairos_core::store::{CreateOutcome, StoreError, StoreResult};
use kairos_core::supervise::spawn_critical;
use std::collections::HashMap;
use tokio::sync::{mpsc, oneshot};

/// The audit action recorded with a job created through the API.
pub(crate) const AUDIT_CREATE: &str = "job.create";

/// Version of a newly created job.
pub(crate) const FIRST_VERSION: i64 = 1;
/// The group sizes the committer writes (the largest is the most creates in
/// one transaction). A multi-row `INSERT`'s text names its row count, and a
/// server prepares each text once per pooled connection: writing whatever
/// had arrived (any count from 1 to 256) made MariaDB prepare again about a
/// third of the statements the API sent. Creates beyond the largest size
/// that fits wait for the next group, which starts as soon as this one is
/// committed; the steps of about 1.5 keep that remainder under a third.
const GROUP_SIZES: [usize; 16] = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256];
/// Rows per `INSERT` statement (29 columns: far below every database's
/// placeholder limit); a group size, so larger groups split into sizes too.
const ROWS_PER_INSERT: usize = 128;
/// Creates waiting for the committer before callers wait for room.
const QUEUE: usize = 4096;

/// One create waiting to be written.
struct Pending {
    job: NewJob,
    reply: oneshot::Sender<StoreResult<CreateOutcome>>,
}

/// The group committer of one store.
#[derive(Debug)]
pub(crate) struct Committer {
    tx: mpsc::Sender<Pending>,
}

impl Committer {
    /// Starts the committer task, writing on `pool` (the store's writer);
    /// it ends when the store is dropped. A panic in it exits the process
    /// (`spawn_critical`): a store whose creates all answered "shutting down"
    /// would otherwise keep reporting itself ready.
    pub(crate) fn start(pool: Pool) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        spawn_critical("job create group committer", run(pool, rx));
        Self { tx }
    }

    /// Creates `job` in the next group commit; answers after that commit.
    pub(crate) async fn submit(&self, job: NewJob) -> StoreResult<CreateOutcome> {
        let (reply, answer) = oneshot::channel();
        let gone = || StoreError::Unavailable("the store is shutting down".into());
        self.tx
            .send(Pending { job, reply })
            .await
            .map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }
}

async fn run(pool: Pool, mut rx: mpsc::Receiver<Pending>) {
    let max = GROUP_SIZES[GROUP_SIZES.len() - 1];
    // Creates that arrived but did not fit the last group's size.
    let mut carried: Vec<Pending> = Vec::new();
    loop {
        let mut group = std::mem::take(&mut carried);
        if group.is_empty() {
            match rx.recv().await {
                Some(first) => group.push(first),
                None => return,
            }
        }
        while group.len() < max {
            match rx.try_recv() {
                Ok(p) => group.push(p),
                Err(_) => break,
            }
        }
        carried = group.split_off(group_size(group.len()));
        let (jobs, replies): (Vec<NewJob>, Vec<_>) =
            group.into_iter().map(|p| (p.job, p.reply)).unzip();
        metrics::histogram!("kairos_store_create_group_size").record(jobs.len() as f64);
        let outcomes = create_each(&pool, jobs).await;
        for (reply, outcome) in replies.into_iter().zip(outcomes) {
            let _ = reply.send(outcome);
        }
    }
}

/// The largest group size of `GROUP_SIZES` that `waiting` creates fill.
fn group_size(waiting: usize) -> usize {
    GROUP_SIZES
        .iter()
        .copied()
        .take_while(|&size| size <= waiting)
        .last()
        .unwrap_or(waiting)
}

/// Creates `jobs` in one transaction if it can, else one by one; one outcome
/// per job, in order.
async fn create_each(pool: &Pool, jobs: Vec<NewJob>) -> Vec<StoreResult<CreateOutcome>> {
    if jobs.len() == 1 {
        let job = jobs.into_iter().next().map(|j| create_alone(pool, j));
        return match job {
            Some(one) => vec![one.await],
            None => Vec::new(),
        };
    }
    match together(pool, jobs.clone()).await {
        Ok(outcomes) => outcomes.into_iter().map(Ok).collect(),
        Err(StoreError::Unavailable(why)) => jobs
            .iter()
            .map(|_| Err(StoreError::Unavailable(why.clone())))
            .collect(),
        Err(e) => {
            tracing::debug!(error = %e, rows = jobs.len(), "group commit failed; creating one by one");
            let mut out = Vec::with_capacity(jobs.len());
            for job in jobs {
                out.push(create_alone(pool, job).await);
            }
            out
        }
    }
}

/// [`create_together`] in a transaction of its own on `pool`, not run again
/// if it loses a lock race: the committer then creates its jobs one by one.
async fn together(pool: &Pool, jobs: Vec<NewJob>) -> StoreResult<Vec<CreateOutcome>> {
    create_together(pool.begin().await?, jobs).await
}

/// Creates every job in `tx` and commits it (the group commit and the bulk
/// endpoint). Fails whole: nothing is written if anything fails.
pub(crate) async fn create_together(
    mut tx: Tx,
    jobs: Vec<NewJob>,
) -> StoreResult<Vec<CreateOutcome>> {
    let existing = existing_by_key(&mut tx, &jobs).await?;
    // Which job answers for each (tenant, key): a stored one, or the first
    // of this batch to use it.
    let mut owner: HashMap<(String, String), usize> = HashMap::new();
    let mut fresh = Vec::with_capacity(jobs.len());
    let mut plan = Vec::with_capacity(jobs.len());
    for (i, job) in jobs.iter().enumerate() {
        match &job.client_request_id {
            Some(key) => {
                let k = (job.tenant.clone(), key.clone());
                if let Some(found) = existing.get(&k) {
                    plan.push(Plan::Stored(Box::new(found.clone())));
                } else if let Some(first) = owner.get(&k) {
                    plan.push(Plan::SameAs(*first));
                } else {
                    owner.insert(k, i);
                    fresh.push(job);
                    plan.push(Plan::Insert);
                }
            }
            None => {
                fresh.push(job);
                plan.push(Plan::Insert);
            }
        }
    }
    for chunk in fresh.chunks(ROWS_PER_INSERT) {
        let rows: Vec<Fields> = chunk.iter().copied().map(job_fields).collect();
        Sql::new("INSERT INTO jobs")
            .rows(&rows)
            .execute(&mut tx)
            .await?;
    }
    insert_audit(&mut tx, &fresh).await?;
    tx.commit().await?;
    let created: Vec<Job> = jobs.into_iter().map(created_job).collect();
    Ok(plan
        .into_iter()
        .enumerate()
        .map(|(i, p)| match p {
            Plan::Insert => CreateOutcome::Created(created[i].clone()),
            Plan::SameAs(first) => CreateOutcome::Existing(created[first].clone()),
            Plan::Stored(job) => CreateOutcome::Existing(*job),
        })
        .collect())
}

/// Audit rows (`job.create`) for the jobs of `fresh` that name the key that
/// created them, in the transaction that inserts them.
async fn insert_audit(tx: &mut Tx, fresh: &[&NewJob]) -> StoreResult<()> {
    let audited: Vec<Fields> = fresh
        .iter()
        .filter_map(|j| {
            j.created_by.as_deref().map(|by| {
                Fields::new()
                    .with("tenant", j.tenant.as_str())
                    .with("actor", by)
                    .with("action", AUDIT_CREATE)
                    .with("target", j.id.as_str())
                    .with("at", time(j.created_at))
            })
        })
        .collect();
    for chunk in audited.chunks(ROWS_PER_INSERT) {
        Sql::new("INSERT INTO audit_log")
            .rows(chunk)
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

/// Creates one job on its own: with its audit row in one transaction when
/// it has one, else in a single statement.
async fn create_alone(pool: &Pool, job: NewJob) -> StoreResult<CreateOutcome> {
    if job.created_by.is_none() {
        return create_one(pool, job).await;
    }
    match together(pool, vec![job.clone()]).await {
        Ok(mut outcomes) => outcomes
            .pop()
            .ok_or_else(|| corrupt("jobs", "a create answered nothing")),
        Err(e @ StoreError::Unavailable(_)) => Err(e),
        // A concurrent create took its key: answered `Existing` from the row
        // that won (a job that exists already is not audited again).
        Err(_) => create_one(pool, job).await,
    }
}

/// What becomes of one job of a batch.
enum Plan {
    Insert,
    /// Its key was used earlier in the same batch, by this index.
    SameAs(usize),
    /// Its key was already stored.
    Stored(Box<Job>),
}

/// Stored jobs whose `(tenant, client_request_id)` a job of `jobs` uses.
async fn existing_by_key(
    tx: &mut Tx,
    jobs: &[NewJob],
) -> StoreResult<HashMap<(String, String), Job>> {
    let mut by_tenant: HashMap<&str, Vec<&str>> = HashMap::new();
    for job in jobs {
        if let Some(key) = &job.client_request_id {
            by_tenant.entry(&job.tenant).or_default().push(key);
        }
    }
    let mut found = HashMap::new();
    for (tenant, keys) in by_tenant {
        for chunk in keys.chunks(ROWS_PER_INSERT) {
            let stored = Sql::new("SELECT ")
                .columns("j", &JOB_COLS)
                .push(" FROM jobs j WHERE j.tenant = ")
                .bind(tenant)
                .push(" AND j.client_request_id IN ")
                .list(chunk.iter().copied())
                .fetch_all(&mut *tx)
                .await?;
            for row in stored {
                let job = rows::job(&row)?;
                if let Some(key) = job.client_request_id.clone() {
                    found.insert((job.tenant.clone(), key), job);
                }
            }
        }
    }
    Ok(found)
}

/// Creates one job in a statement of its own: the path of a lone create and
/// the fallback of a failed group.
async fn create_one(pool: &Pool, job: NewJob) -> StoreResult<CreateOutcome> {
    let inserted = Sql::new("INSERT INTO jobs")
        .rows([&job_fields(&job)])
        .execute(pool)
        .await;
    match inserted {
        Ok(_) => Ok(CreateOutcome::Created(created_job(job))),
        Err(e) if is_unique_violation(&e) => {
            let Some(key) = job.client_request_id.as_deref() else {
                return Err(e);
            };
            let row = Sql::new("SELECT ")
                .columns("j", &JOB_COLS)
                .push(" FROM jobs j WHERE j.tenant = ")
                .bind(job.tenant.as_str())
                .push(" AND j.client_request_id = ")
                .bind(key)
                .fetch_optional(pool)
                .await?;
            match row {
                Some(row) => Ok(CreateOutcome::Existing(rows::job(&row)?)),
                None => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

/// One job's row of `jobs`, every column of [`JOB_COLS`] by name.
pub(crate) fn job_fields(job: &NewJob) -> Fields {
    let mut f = Fields::new()
        .with("id", job.id.as_str())
        .with("tenant", job.tenant.as_str())
        .with("name", job.name.as_str())
        .with("handler", job.handler.as_str())
        .with("params", json(job.params.to_string()));
    schedule_columns(&job.schedule).fields(&mut f);
    f.with("next_trigger_at", time(job.next_trigger_at))
        .with("status", JobStatus::Scheduled.as_str())
        .with("version", FIRST_VERSION)
        .with("callback_url", job.callback_url.as_deref())
        .with("client_request_id", job.client_request_id.as_deref())
        .with("request_hash", job.request_hash.as_deref())
        .with("max_attempts", job.retry.max_attempts)
        .with("retry_backoff_ms", from_u64(job.retry.backoff_ms))
        .with("timeout_ms", job.timeout_ms.map(from_u64))
        .with("created_at", time(job.created_at))
        .with("updated_at", time(job.created_at))
        .with("worker_group", job.worker_group.as_deref())
        .with("trace_context", job.trace.as_ref().map(trace_json))
        .with("pause_reason", None::<&str>)
        .with("sensitive_params", sensitive_json(&job.sensitive_params))
        .with("revision", FIRST_VERSION)
        .with("last_result", None::<&str>)
        .with("last_result_at", time(None::<kairos_core::time::Millis>))
        .with("fail_streak", 0_i64)
        .with("priority", i64::from(job.priority.get()))
        .with("lane", i64::from(new_lane(job).code()))
        .with("execution_mode", job.execution_mode.as_str())
        .with("shard_count", job.execution_mode.shard_count())
        .with("max_concurrency", job.max_concurrency.map(i64::from))
        .with("partition_no", crate::partitions::of_new(&job.id))
}

/// The claim loop a new job's triggers go to (see [`kairos_core::priority`]).
fn new_lane(job: &NewJob) -> Lane {
    Lane::of_new(&job.schedule, job.next_trigger_at, job.created_at)
}

/// The stored form of a job's sensitive paths: `NULL` for none.
pub(crate) fn sensitive_json(paths: &[String]) -> crate::sql::Value {
    json((!paths.is_empty()).then(|| serde_json::Value::from(paths.to_vec()).to_string()))
}

/// The stored form of a caller's trace context (see migration 0006).
fn trace_json(t: &kairos_core::trace::CallerTrace) -> String {
    serde_json::to_string(t).unwrap_or_default()
}

/// The job as stored by a successful insert.
fn created_job(job: NewJob) -> Job {
    let lane = new_lane(&job);
    Job {
        id: job.id,
        tenant: job.tenant,
        name: job.name,
        handler: job.handler,
        params: job.params,
        sensitive_params: job.sensitive_params,
        schedule: job.schedule,
        next_trigger_at: Some(job.next_trigger_at),
        status: JobStatus::Scheduled,
        version: FIRST_VERSION,
        callback_url: job.callback_url,
        client_request_id: job.client_request_id,
        request_hash: job.request_hash,
        retry: job.retry,
        timeout_ms: job.timeout_ms,
        worker_group: job.worker_group,
        max_concurrency: job.max_concurrency,
        trace: job.trace,
        pause_reason: None,
        revision: FIRST_VERSION,
        last_result: None,
        last_result_at: None,
        fail_streak: 0,
        priority: job.priority,
        lane,
        execution_mode: job.execution_mode,
        created_at: job.created_at,
        updated_at: job.created_at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_takes_the_largest_size_the_waiting_creates_fill() {
        assert_eq!(group_size(1), 1);
        assert_eq!(group_size(5), 4);
        assert_eq!(group_size(23), 16);
        assert_eq!(group_size(24), 24);
        assert_eq!(group_size(255), 192);
        for waiting in 1..=256 {
            let size = group_size(waiting);
            assert!(GROUP_SIZES.contains(&size) && size <= waiting);
            assert!(
                waiting - size < size.max(2) / 2 + 1,
                "{waiting}: at most a third or so waits"
            );
        }
    }

    #[test]
    fn every_group_size_splits_into_inserts_of_group_sizes() {
        for size in GROUP_SIZES {
            let rows: Vec<usize> = (0..size).collect();
            for chunk in rows.chunks(ROWS_PER_INSERT) {
                assert!(
                    GROUP_SIZES.contains(&chunk.len()),
                    "{size} → {}",
                    chunk.len()
                );
            }
        }
    }
}

//! The claim transaction: fencing check, the claimed jobs' versions read
//! once (the jobs themselves come with the claims, as the dispatcher read
//! them), their live executions read once (only for jobs whose overlap policy
//! needs it), one version-checked update per job, one multi-row execution
//! insert, and the history and outbox rows — whatever the batch size. A
//! claim that names its worker inserts its execution already `dispatched`:
//! the dispatch is recorded with the claim, not in a write of its own.

use super::fence::check_fence;
use crate::concurrency::{self, Candidate};
use crate::db::Tx;
use crate::inserts::{self, EventRow};
use crate::rows::{self, EXEC_COLS, R};
use crate::rows_update::{Col, RowsUpdate, rows_per_statement};
use crate::sql::{self, CHUNK, Fields, Sql, time};
use crate::stop;
use kairos_core::callback::Callback;
use kairos_core::execution::{ExecStatus, ExecTransition, Execution};
use kairos_core::job::{Job, JobStatus, JobTransition};
use kairos_core::schedule::OverlapPolicy;
use kairos_core::shard::Shard;
use kairos_core::store::{Claim, DispatchWork, StoreError, StoreResult};
use kairos_core::time::Millis;
use kairos_core::trigger::{self, Fate, JobMove, Resolution};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// Error recorded on a pending execution cancelled by a newer trigger.
const REPLACED: &str = "cancelled: replaced by a newer trigger (overlapPolicy replace)";

/// A job whose claims won, with what they become.
struct Won<'a> {
    job: Arc<Job>,
    claims: Vec<&'a Claim>,
    res: Resolution,
}

/// One execution row to insert.
struct NewExec<'a> {
    claim: &'a Claim,
    /// The claimed job (the one the version check passed).
    job: &'a Job,
    status: ExecStatus,
    error: Option<&'static str>,
    /// Its part of the trigger.
    shard: Shard,
    /// The concurrency limit it waits for (created `pending` instead of
    /// dispatched).
    waiting: Option<String>,
}

/// `triggers_claim`'s transaction.
pub(super) async fn claim(
    mut tx: Tx,
    fence: u64,
    claims: &[Claim],
    now: Millis,
) -> StoreResult<Vec<DispatchWork>> {
    check_fence(&mut tx, fence).await?;
    claim_checked(tx, claims, now).await
}

/// The claim after its fences were checked: everything but the check, in
/// the order it happens (each step one or a few statements for the whole
/// batch).
pub(super) async fn claim_checked(
    mut tx: Tx,
    claims: &[Claim],
    now: Millis,
) -> StoreResult<Vec<DispatchWork>> {
    let groups = by_job(claims);
    let ids: Vec<&str> = groups.keys().copied().collect();
    let stored = read_versions(&mut tx, &ids).await?;
    let candidates = unchanged(groups, &stored);
    let (watched, lock) = watched(&candidates);
    let live = live_executions(&mut tx, &watched, lock).await?;
    let (won, moves) = resolve(candidates, &live, now);
    update_claimed(&mut tx, &moves, now).await?;
    let mut rows = new_executions(&won);
    hold_over_limit(&mut tx, &mut rows, now).await?;
    let present = insert_executions(&mut tx, &rows, now).await?;
    let mut written = Written::of(&rows, present.as_ref(), now);
    replace_live(&mut tx, &won, &live, &mut written, now).await?;
    inserts::events(&mut tx, &written.events).await?;
    inserts::callbacks(&mut tx, &written.callbacks).await?;
    tx.commit().await?;
    Ok(written.work)
}

/// Claims grouped per job, due times ascending. A BTreeMap keeps the jobs
/// in id order, so two claimers lock them in one order.
fn by_job(claims: &[Claim]) -> BTreeMap<&str, Vec<&Claim>> {
    let mut groups: BTreeMap<&str, Vec<&Claim>> = BTreeMap::new();
    for c in claims {
        groups.entry(c.job.id.as_str()).or_default().push(c);
    }
    for g in groups.values_mut() {
        g.sort_by_key(|c| (c.scheduled_at, c.shard.index));
    }
    groups
}

/// The jobs whose claims can win: their stored version is the one the
/// dispatcher read, and their state allows a claim. The jobs are locked
/// from the read of `stored` to the commit (`FOR UPDATE` on MySQL and
/// PostgreSQL, the single writer on SQLite), so this check is the one that
/// decides. A job whose version is the one the dispatcher read is, field
/// for field, the job it read.
fn unchanged<'a>(
    groups: BTreeMap<&str, Vec<&'a Claim>>,
    stored: &HashMap<String, (i64, JobStatus)>,
) -> Vec<(Arc<Job>, Vec<&'a Claim>)> {
    groups
        .into_iter()
        .filter_map(|(id, g)| {
            let (version, status) = stored.get(id)?;
            let job = &g[0].job;
            (job.version == *version && JobTransition::Claim.allowed_from(*status))
                .then(|| (job.clone(), g))
        })
        .collect()
}

/// The jobs whose live executions must be read, and whether to lock them.
/// Live executions matter to the overlap policy, and to a recurring job
/// whose window closes now: it ends at once only if none is live. They are
/// locked when a `replace` may cancel them.
fn watched<'a>(candidates: &'a [(Arc<Job>, Vec<&Claim>)]) -> (Vec<&'a str>, bool) {
    let watched = candidates
        .iter()
        .filter(|(j, g)| {
            j.schedule.recurrence().is_some_and(|r| {
                r.overlap != OverlapPolicy::Allow
                    || g.last().is_some_and(|c| c.next_trigger_at.is_none())
            })
        })
        .map(|(j, _)| j.id.as_str())
        .collect();
    let lock = candidates.iter().any(|(j, _)| {
        j.schedule
            .recurrence()
            .is_some_and(|r| r.overlap == OverlapPolicy::Replace)
    });
    (watched, lock)
}

/// What each job's claims become ([`trigger::resolve`]), and the job's own
/// move (next trigger, state).
fn resolve<'a>(
    candidates: Vec<(Arc<Job>, Vec<&'a Claim>)>,
    live: &HashMap<String, Vec<Execution>>,
    now: Millis,
) -> (Vec<Won<'a>>, Vec<ClaimedJob>) {
    let mut won = Vec::with_capacity(candidates.len());
    let mut moves = Vec::with_capacity(candidates.len());
    for (job, claims) in candidates {
        // The shards of one trigger are one due time.
        let mut due: Vec<Millis> = claims.iter().map(|c| c.scheduled_at).collect();
        due.dedup();
        let next = claims.last().and_then(|c| c.next_trigger_at);
        let live_before = live.get(&job.id).is_some_and(|v| !v.is_empty());
        let res = trigger::resolve(&job.schedule, &due, live_before, next.is_some(), now);
        let status = match res.job {
            JobMove::Run => JobTransition::Claim.to_state(),
            JobMove::Keep => job.status,
            JobMove::Complete => JobTransition::Complete.to_state(),
        };
        moves.push(ClaimedJob {
            id: job.id.clone(),
            version: job.version,
            next,
            status,
        });
        won.push(Won { job, claims, res });
    }
    (won, moves)
}

/// The execution rows the winning claims become: dispatched to the worker
/// a claim chose (its dispatch record), else pending; one skipped row per
/// skipped trigger; none for a dropped one.
fn new_executions<'a>(won: &'a [Won<'a>]) -> Vec<NewExec<'a>> {
    let mut rows = Vec::new();
    for w in won {
        for (c, fate) in with_fates(&w.claims, &w.res.fates) {
            let (status, error) = match fate {
                Fate::Dispatch if c.worker_id.is_some() => {
                    (ExecTransition::Dispatch.to_state(), None)
                }
                Fate::Dispatch => (ExecStatus::Pending, None),
                // A skipped trigger is one skipped execution, whatever
                // its job's fan-out.
                Fate::Skipped(_) if c.shard.index > 0 => continue,
                Fate::Skipped(reason) => (ExecTransition::Skip.to_state(), Some(*reason)),
                Fate::Dropped => continue,
            };
            rows.push(NewExec {
                claim: c,
                job: &w.job,
                status,
                error,
                shard: if status.is_terminal() {
                    Shard::SINGLE
                } else {
                    c.shard
                },
                waiting: None,
            });
        }
    }
    rows
}

/// What a claim writes besides the jobs and executions, and the work it
/// hands back.
#[derive(Default)]
struct Written {
    events: Vec<EventRow>,
    callbacks: Vec<Callback>,
    work: Vec<DispatchWork>,
}

impl Written {
    /// The history of every inserted row (`present`: the rows that are
    /// there, `None` for all), the work to publish (not what waits for a
    /// concurrency slot, nor what ended at once), and the callbacks of
    /// skipped triggers.
    fn of(rows: &[NewExec<'_>], present: Option<&HashSet<String>>, now: Millis) -> Self {
        let mut out = Written::default();
        for r in rows
            .iter()
            .filter(|r| present.is_none_or(|p| p.contains(&r.claim.execution_id)))
        {
            out.events.push(EventRow {
                error: r.error.map(str::to_string).or_else(|| r.waiting_note()),
                worker_id: r.worker_id().map(str::to_string),
                ..EventRow::plain(&r.claim.execution_id, 1, r.status, now)
            });
            if r.waiting.is_some() {
                // Left for the sweep of waiting work, which admits it when a
                // slot frees.
                continue;
            }
            if !r.status.is_terminal() {
                out.work.push(r.work());
            } else if let Some(url) = &r.job.callback_url {
                out.callbacks
                    .push(inserts::new_callback(&skipped(r, now), url, now));
            }
        }
        out
    }
}

/// Under `overlapPolicy: replace`, the live executions of the jobs whose
/// trigger asked for it are cancelled if pending and asked to stop
/// otherwise; their history and callbacks join `written`.
async fn replace_live(
    tx: &mut Tx,
    won: &[Won<'_>],
    live: &HashMap<String, Vec<Execution>>,
    written: &mut Written,
    now: Millis,
) -> StoreResult<()> {
    for w in won.iter().filter(|w| w.res.stop_live) {
        let Some(execs) = live.get(&w.job.id) else {
            continue;
        };
        let cancelled = stop::replace(&mut *tx, execs, REPLACED, now).await?;
        for e in cancelled {
            written.events.push(EventRow {
                error: e.error.clone(),
                ..EventRow::plain(&e.id, e.attempt, e.status, now)
            });
            if let Some(url) = &w.job.callback_url {
                written.callbacks.push(inserts::new_callback(&e, url, now));
            }
        }
    }
    Ok(())
}

/// Triggers dispatched at claim time go through the concurrency gate: one
/// whose handler, tenant or job is at its limit is created `pending`,
/// waiting for a slot, instead (its worker's pick is given back by the
/// dispatcher, as for any claim that produced no work). The gate takes its
/// own lock, only when a limit applies.
async fn hold_over_limit(tx: &mut Tx, rows: &mut [NewExec<'_>], now: Millis) -> StoreResult<()> {
    let at: Vec<usize> = (0..rows.len())
        .filter(|&i| rows[i].status == ExecStatus::Dispatched)
        .collect();
    if at.is_empty() {
        return Ok(());
    }
    let candidates: Vec<Candidate<'_>> = at
        .iter()
        .map(|&i| Candidate {
            execution_id: &rows[i].claim.execution_id,
            handler: &rows[i].job.handler,
            tenant: &rows[i].job.tenant,
            job_id: &rows[i].job.id,
            max_concurrency: rows[i].job.max_concurrency,
        })
        .collect();
    let decisions = concurrency::gate(tx, &candidates, now).await?;
    for (i, d) in at.into_iter().zip(decisions) {
        if let Some(waiting) = d.waiting_for() {
            rows[i].status = ExecStatus::Pending;
            rows[i].waiting = Some(waiting);
        }
    }
    Ok(())
}

/// The named jobs' stored versions and states, by id, locked.
async fn read_versions(
    tx: &mut Tx,
    ids: &[&str],
) -> StoreResult<HashMap<String, (i64, JobStatus)>> {
    // PostgreSQL passes over jobs another transaction holds (an API
    // update, a result): their claims lose this round and come back in
    // the next scan, instead of the whole claim waiting on them.
    let found = sql::fetch_chunked(&mut *tx, ids, |chunk| {
        let mut s = Sql::new("SELECT id, version, status FROM jobs WHERE id IN ");
        s.list(chunk.iter().copied()).for_claim();
        s
    })
    .await?;
    let mut stored = HashMap::with_capacity(found.len());
    for row in &found {
        let r = R::new(row, "jobs");
        stored.insert(
            r.string("id")?,
            (r.i64("version")?, r.job_status("status")?),
        );
    }
    Ok(stored)
}

/// Live executions of the named jobs (locked on MySQL when `lock`), by job.
async fn live_executions(
    tx: &mut Tx,
    job_ids: &[&str],
    lock: bool,
) -> StoreResult<HashMap<String, Vec<Execution>>> {
    let mut live: HashMap<String, Vec<Execution>> = HashMap::new();
    let found = sql::fetch_chunked(&mut *tx, job_ids, |chunk| {
        let mut s = Sql::new("SELECT ");
        s.columns("e", &EXEC_COLS)
            .push(" FROM executions e WHERE e.job_id IN ")
            .list(chunk.iter().copied())
            .push(" AND e.status IN ")
            .list(ExecStatus::LIVE.iter().map(|s| s.as_str()));
        if lock {
            s.for_update();
        }
        s
    })
    .await?;
    for row in &found {
        let e = rows::execution(row)?;
        live.entry(e.job_id.clone()).or_default().push(e);
    }
    Ok(live)
}

/// Moves every claimed job (next trigger, status, version + 1) in one
/// statement per chunk. The rows are locked and their versions checked,
/// so every one of them moves; each row's version stays in the
/// condition, and a count that differs is an error.
async fn update_claimed(tx: &mut Tx, moves: &[ClaimedJob], now: Millis) -> StoreResult<()> {
    let dialect = tx.dialect();
    for chunk in moves.chunks(rows_per_statement(dialect)) {
        let n = chunk.len();
        let mut u = RowsUpdate::new(
            "jobs",
            "id",
            &[
                Col::Set("next_trigger_at"),
                Col::Set("status"),
                Col::Check("version"),
            ],
        );
        for m in chunk {
            u.row(
                m.id.as_str(),
                vec![
                    Some(time(m.next)),
                    Some(m.status.as_str().into()),
                    Some(m.version.into()),
                ],
            );
        }
        u.increment("version").same("updated_at", time(now));
        let Some(sql) = u.sql(dialect) else { continue };
        let moved = sql.execute(&mut *tx).await?;
        if moved != n as u64 {
            // Unreachable unless something writes jobs without locking
            // them; the round is rolled back and retried.
            return Err(StoreError::Corrupt {
                table: "jobs",
                reason: format!("a claim moved {moved} of {n} locked jobs"),
            });
        }
    }
    Ok(())
}

/// Inserts the rows, skipping shards of triggers that already have their
/// execution (unique `(job_id, scheduled_at, shard_index)`). `None` if every row went in,
/// otherwise the ids that are present.
async fn insert_executions(
    tx: &mut Tx,
    rows: &[NewExec<'_>],
    now: Millis,
) -> StoreResult<Option<HashSet<String>>> {
    let mut inserted = 0u64;
    for chunk in rows.chunks(CHUNK) {
        let fields: Vec<Fields> = chunk.iter().map(|r| r.fields(now)).collect();
        inserted += Sql::new("")
            .insert_ignore_into()
            .push("executions")
            .rows(&fields)
            .on_conflict_ignore()
            .execute(&mut *tx)
            .await?;
    }
    if inserted == rows.len() as u64 {
        return Ok(None);
    }
    let wanted: Vec<&str> = rows.iter().map(|r| r.claim.execution_id.as_str()).collect();
    let found = sql::fetch_chunked(&mut *tx, &wanted, |chunk| {
        let mut s = Sql::new("SELECT id FROM executions WHERE id IN ");
        s.list(chunk.iter().copied());
        s
    })
    .await?;
    let mut ids = HashSet::with_capacity(found.len());
    for row in &found {
        ids.insert(R::new(row, "executions").string("id")?);
    }
    Ok(Some(ids))
}

/// Each claim with its trigger's fate: `fates` has one entry per due time,
/// and the claims (due times ascending) hold every shard of a trigger side
/// by side.
fn with_fates<'a, F>(claims: &'a [&'a Claim], fates: &'a [F]) -> Vec<(&'a Claim, &'a F)> {
    let mut out = Vec::with_capacity(claims.len());
    let mut trigger = 0;
    for (i, c) in claims.iter().enumerate() {
        if i > 0 && claims[i - 1].scheduled_at != c.scheduled_at {
            trigger += 1;
        }
        if let Some(fate) = fates.get(trigger) {
            out.push((*c, fate));
        }
    }
    out
}

/// A claimed job's move, decided on its locked row.
struct ClaimedJob {
    id: String,
    version: i64,
    next: Option<Millis>,
    status: kairos_core::job::JobStatus,
}

impl NewExec<'_> {
    /// The history's note for a trigger held back by a limit.
    fn waiting_note(&self) -> Option<String> {
        self.waiting
            .as_ref()
            .map(|k| format!("waiting for a concurrency slot ({k})"))
    }

    /// The work to publish for the row.
    fn work(&self) -> DispatchWork {
        let (job, claim) = (self.job, self.claim);
        DispatchWork {
            execution_id: claim.execution_id.clone(),
            job_id: job.id.clone(),
            tenant: job.tenant.clone(),
            attempt: 1,
            handler: job.handler.clone(),
            params: job.params.clone(),
            scheduled_at: claim.scheduled_at,
            timeout_ms: job.timeout_ms,
            worker_group: job.worker_group.clone(),
            priority: job.priority,
            trace: job.trace.clone(),
            worker_id: self.worker_id().map(str::to_string),
            shard: self.shard,
            immediate: job.lane == kairos_core::priority::Lane::Immediate,
            parent_outputs: None,
        }
    }

    /// The worker the row is dispatched to, if its claim chose one.
    fn worker_id(&self) -> Option<&str> {
        match self.status {
            ExecStatus::Dispatched => self.claim.worker_id.as_deref(),
            _ => None,
        }
    }

    /// The row's `executions` columns (first attempt, due at its trigger; a
    /// dispatched row goes out at its due time, or now if that is later).
    fn fields(&self, now: Millis) -> Fields {
        let dispatched_at = self.worker_id().map(|_| self.claim.scheduled_at.max(now));
        Fields::new()
            .with("id", self.claim.execution_id.as_str())
            .with("job_id", self.job.id.as_str())
            .with("tenant", self.job.tenant.as_str())
            .with("scheduled_at", time(self.claim.scheduled_at))
            .with("attempt", 1_i64)
            .with("status", self.status.as_str())
            .with("worker_id", self.worker_id())
            .with("dispatched_at", time(dispatched_at))
            .with("not_before", time(self.claim.scheduled_at))
            .with(
                "finished_at",
                time(self.status.is_terminal().then_some(now)),
            )
            .with("error", self.error)
            .with("waiting_for", self.waiting.as_deref())
            .with("created_at", time(now))
            .with("updated_at", time(now))
            .with("shard_index", self.shard.index)
            .with("shard_count", self.shard.count)
    }
}

/// The execution a skipped trigger became, for its callback.
fn skipped(r: &NewExec<'_>, now: Millis) -> Execution {
    Execution {
        id: r.claim.execution_id.clone(),
        job_id: r.job.id.clone(),
        tenant: r.job.tenant.clone(),
        scheduled_at: r.claim.scheduled_at,
        attempt: 1,
        status: r.status,
        worker_id: None,
        output: None,
        error: r.error.map(str::to_string),
        not_before: r.claim.scheduled_at,
        dispatched_at: None,
        started_at: None,
        finished_at: Some(now),
        stop_requested_at: None,
        created_at: now,
        progress: None,
        shard: r.shard,
        waiting_for: None,
    }
}

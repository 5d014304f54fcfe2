//! Results and reaper verdicts: one transaction per batch that locks the
//! executions and their jobs, asks [`outcome::plan`] what each input does,
//! applies the plans to the locked rows in memory, and writes them back: the
//! changed executions in one multi-row statement (see `write_back`), job moves
//! and each job's last result and failures in a row, history events and, for
//! terminal executions of jobs with a callback URL, the outbox row.
//!
//! The rows are locked (`FOR UPDATE` on MySQL and PostgreSQL, the single
//! writer on SQLite) from the read to the commit, so what `plan` decided from
//! them is what the database holds: no other writer can move an execution in
//! between. A workflow node's internal job is the exception: its row is read
//! but neither locked nor written (see `load`).

mod job_state;
mod shards;
mod write_back;

use crate::db::{Row, Tx};
use crate::dialect::Dialect;
use crate::inserts::{self, EventRow};
use crate::rows::{self, EXEC_COLS, R};
use crate::sql::{Sql, fetch_chunked, from_u64};
use job_state::{JobState, continuation, count_live};
use kairos_core::callback::Callback;
use kairos_core::concurrency::{ScopeKey, scopes_of};
use kairos_core::execution::{ExecStatus, ExecTransition, Execution};
use kairos_core::outcome::{self, Continuation, ExecSnapshot, Origin, Plan, Verdict};
use kairos_core::store::{Applied, StoreResult};
use kairos_core::time::Millis;
use kairos_core::workflow::budget::RunLimits;
use shards::{Ended, Triggers};
use std::collections::{HashMap, HashSet};
use write_back::{TouchedExecutions, TouchedJobs, write_executions, write_jobs};

/// One thing that happened to an attempt: a worker's result or a verdict.
pub(crate) struct Input<'a> {
    pub(crate) execution_id: &'a str,
    pub(crate) attempt: u32,
    pub(crate) verdict: Verdict,
    /// Reporting worker (`None` for verdicts: the execution keeps its own).
    pub(crate) worker_id: Option<&'a str>,
    /// Reporting worker process, if the worker says.
    pub(crate) incarnation: Option<&'a str>,
    /// When the handler started, as a final result reports it: recorded if
    /// the execution's `started` has not been applied yet.
    pub(crate) started_at: Option<Millis>,
    pub(crate) output: Option<&'a serde_json::Value>,
    pub(crate) error: Option<&'a str>,
    /// When it happened.
    pub(crate) at: Millis,
}

/// What the batch writes once every input is decided.
#[derive(Default)]
struct Tail {
    executions: TouchedExecutions,
    jobs: TouchedJobs,
    events: Vec<EventRow>,
    callbacks: Vec<Callback>,
    /// The fanned-out triggers the batch may end (read, not written).
    triggers: Triggers,
    /// Attempts that started while `pending` (see [`ghost_start`]), with
    /// the scopes their slots count under.
    ghost_starts: Vec<(String, [ScopeKey; 3])>,
}

/// Applies `inputs` in order in `tx` and commits it.
pub(crate) async fn apply(
    mut tx: Tx,
    inputs: &[Input<'_>],
    now: Millis,
    limits: RunLimits,
) -> StoreResult<Vec<Applied>> {
    let (mut execs, mut jobs) = load(&mut tx, inputs).await?;
    // Only a final outcome can end a job, and only then do its other
    // live executions matter: a batch of `started` reports counts none.
    let ending: HashSet<&str> = inputs
        .iter()
        .filter(|i| i.verdict != Verdict::Started)
        .filter_map(|i| execs.get(i.execution_id))
        .map(|(e, _)| e.job_id.as_str())
        .collect();
    count_live(&mut tx, &mut jobs, &ending).await?;
    let triggers = {
        let finals: Vec<&Execution> = inputs
            .iter()
            .filter(|i| i.verdict != Verdict::Started)
            .filter_map(|i| execs.get(i.execution_id))
            .map(|(e, _)| e)
            .collect();
        Triggers::load(&mut tx, &finals).await?
    };
    let retired = retired_among(&mut tx, inputs).await?;
    let mut tail = Tail {
        triggers,
        ..Tail::default()
    };
    let mut out = Vec::with_capacity(inputs.len());
    for input in inputs {
        let queued_before = tail.callbacks.len();
        let new_status = match execs.get_mut(input.execution_id) {
            Some((exec, hold)) => match jobs.get_mut(&exec.job_id) {
                Some(job) => {
                    let origin = match input.worker_id {
                        None => Origin::Scheduler,
                        Some(_) => Origin::Worker {
                            incarnation: input.incarnation,
                            retired: input.incarnation.is_some_and(|i| retired.contains(i)),
                        },
                    };
                    apply_one(exec, hold, job, input, origin, now, &mut tail)
                }
                None => None,
            },
            None => None,
        };
        out.push(Applied {
            execution_id: input.execution_id.to_string(),
            attempt: input.attempt,
            new_status,
            callback_queued: tail.callbacks.len() > queued_before,
            next_work: false,
        });
    }
    let rows: HashMap<String, Execution> = execs.into_iter().map(|(id, (e, _))| (id, e)).collect();
    write_executions(&mut tx, &rows, &tail.executions, now).await?;
    // Workflows (issue 34): a node's execution that ended moves its run on
    // in this same transaction, after the outcome is written.
    let ended: Vec<&Execution> = out
        .iter()
        .filter(|a| a.new_status.is_some_and(ExecStatus::is_terminal))
        .filter_map(|a| rows.get(&a.execution_id))
        .filter(|e| jobs.get(&e.job_id).is_some_and(|j| j.workflow))
        .collect();
    let run_callbacks = crate::workflows::on_settled(&mut tx, &ended, now, limits).await?;
    // Child jobs: the follow-ups of jobs that name some.
    let parents: Vec<&Execution> = out
        .iter()
        .filter(|a| a.new_status.is_some_and(ExecStatus::is_terminal))
        .filter_map(|a| rows.get(&a.execution_id))
        .filter(|e| jobs.get(&e.job_id).is_some_and(|j| j.followups))
        .collect();
    crate::workflows::fire_followups(&mut tx, &parents, now, limits).await?;
    // A run it ended queued its callback: the result says so, as a job's
    // callback does (the dispatcher wakes the relay on it). A node or a
    // parent with follow-ups that ended may have left next work pending
    // (the dispatcher asks the leader for a sweep on it).
    let chained: HashSet<&str> = ended
        .iter()
        .chain(&parents)
        .map(|e| e.id.as_str())
        .collect();
    for a in &mut out {
        a.callback_queued |= run_callbacks.contains(&a.execution_id);
        a.next_work = chained.contains(a.execution_id.as_str());
    }
    write_jobs(&mut tx, &tail.jobs, now).await?;
    inserts::events(&mut tx, &tail.events).await?;
    inserts::callbacks(&mut tx, &tail.callbacks).await?;
    crate::concurrency::occupy(&mut tx, &tail.ghost_starts, now).await?;
    tx.commit().await?;
    Ok(out)
}

/// The job columns a batch reads with each execution.
const JOB_READ: &str = ", e.incarnation AS held_by, e.handbacks AS handbacks, \
     j.status AS job_status, \
     j.handler AS job_handler, j.schedule_kind AS schedule_kind, \
     j.next_trigger_at AS next_trigger_at, j.max_attempts AS max_attempts, \
     j.retry_backoff_ms AS retry_backoff_ms, j.timeout_ms AS timeout_ms, \
     j.callback_url AS callback_url, j.delay_ms AS delay_ms, j.end_at AS end_at, \
     j.fail_streak AS fail_streak, j.workflow_id AS workflow_id, \
     j.has_followups AS has_followups \
     FROM executions e JOIN jobs j ON j.id = e.job_id WHERE e.id IN ";

/// Reads every named execution with its job, and locks the executions and
/// the jobs whose rows the batch may write (MySQL and PostgreSQL: `FOR
/// UPDATE`; SQLite: the single writer).
///
/// A workflow node's internal job is read but not locked (see
/// [`JobState::workflow`]): every run's execution of a node shares that one
/// row, and each run's child executions take a foreign-key share lock on
/// their own node's job row when they are inserted. Two batches locking a
/// node's job row for update while inserting children of another node
/// deadlocked (issue 34's flat-out runs); without the lock they take only
/// shared locks on node job rows, which never wait for one another, and a
/// node's results across runs no longer take turns on its row. A fanned-out
/// execution's job is locked whatever it backs: ending its trigger once
/// relies on it (see `shards`).
///
/// So the rows are read once without locks, to learn which jobs back
/// nodes, then locked and read again: the executions of other jobs with
/// their jobs (one statement, as before), the node executions alone.
async fn load(
    tx: &mut Tx,
    inputs: &[Input<'_>],
) -> StoreResult<(Loaded, HashMap<String, JobState>)> {
    let mut seen = HashSet::new();
    let ids: Vec<&str> = inputs
        .iter()
        .map(|i| i.execution_id)
        .filter(|id| seen.insert(*id))
        .collect();
    let found = fetch_chunked(&mut *tx, &ids, |c| with_jobs(c, false)).await?;
    let mut execs = HashMap::with_capacity(found.len());
    let mut jobs = HashMap::new();
    for row in &found {
        let (exec, hold, job) = loaded_row(row)?;
        jobs.insert(exec.job_id.clone(), job);
        execs.insert(exec.id.clone(), (exec, hold));
    }
    // SQLite's single writer holds the database since `BEGIN IMMEDIATE`:
    // what was read is what stays.
    if tx.dialect() == Dialect::Sqlite {
        return Ok((execs, jobs));
    }
    let mut nodes = Vec::new();
    let mut others = Vec::new();
    for (id, (e, _)) in &execs {
        let node = jobs.get(&e.job_id).is_some_and(|j| j.workflow) && !e.shard.is_fanned_out();
        if node {
            nodes.push(id.as_str());
        } else {
            others.push(id.as_str());
        }
    }
    // In id order, as the executions' index would take them anyway.
    nodes.sort_unstable();
    others.sort_unstable();
    let mut locked = HashMap::with_capacity(execs.len());
    for row in &fetch_chunked(&mut *tx, &others, |c| with_jobs(c, true)).await? {
        let (exec, hold, job) = loaded_row(row)?;
        jobs.insert(exec.job_id.clone(), job);
        locked.insert(exec.id.clone(), (exec, hold));
    }
    let node_rows = fetch_chunked(&mut *tx, &nodes, |chunk| {
        let mut s = Sql::new("SELECT ");
        s.columns("e", &EXEC_COLS)
            .push(", e.incarnation AS held_by, e.handbacks AS handbacks FROM executions e WHERE e.id IN ")
            .list(chunk.iter().copied())
            .for_update();
        s
    })
    .await?;
    for row in &node_rows {
        let exec = rows::execution(row)?;
        let hold = Hold::read(row)?;
        locked.insert(exec.id.clone(), (exec, hold));
    }
    Ok((locked, jobs))
}

/// The executions of `chunk` with their jobs, locked if `lock`.
fn with_jobs(chunk: &[&str], lock: bool) -> Sql {
    let mut s = Sql::new("SELECT ");
    s.columns("e", &EXEC_COLS)
        .push(JOB_READ)
        .list(chunk.iter().copied());
    if lock {
        s.for_update();
    }
    s
}

/// What the batch reads with an execution besides its row: who holds its
/// current attempt, and the retries granted for free after hand-backs.
struct Hold {
    /// The incarnation holding the current attempt.
    by: Option<String>,
    /// See [`ExecSnapshot::handbacks`].
    handbacks: u32,
}

impl Hold {
    fn read(row: &Row) -> StoreResult<Hold> {
        let r = R::new(row, "executions");
        Ok(Hold {
            by: r.opt_string("held_by")?,
            handbacks: r.u32("handbacks")?,
        })
    }
}

/// One row of [`load`]'s read: the execution, who holds its attempt, and
/// its job.
fn loaded_row(row: &Row) -> StoreResult<(Execution, Hold, JobState)> {
    let exec = rows::execution(row)?;
    let hold = Hold::read(row)?;
    let r = R::new(row, "jobs");
    let job = JobState {
        status: r.job_status("job_status")?,
        handler: r.string("job_handler")?,
        continuation: continuation(&r)?,
        retry: r.retry()?,
        timeout_ms: r.opt_u64("timeout_ms")?,
        callback_url: r.opt_string("callback_url")?,
        live: 0,
        fail_streak: r.u32("fail_streak")?,
        workflow: r.opt_string("workflow_id")?.is_some(),
        followups: r.i64("has_followups")? != 0,
    };
    Ok((exec, hold, job))
}

/// The incarnations among the inputs' that a later process of their
/// worker replaced.
async fn retired_among(tx: &mut Tx, inputs: &[Input<'_>]) -> StoreResult<HashSet<String>> {
    let mut seen = HashSet::new();
    let incs: Vec<&str> = inputs
        .iter()
        .filter_map(|i| i.incarnation)
        .filter(|i| seen.insert(*i))
        .collect();
    fetch_chunked(&mut *tx, &incs, |chunk| {
        let mut s = Sql::new("SELECT incarnation FROM worker_incarnations WHERE incarnation IN ");
        s.list(chunk.iter().copied())
            .push(" AND retired_at IS NOT NULL");
        s
    })
    .await?
    .iter()
    .map(|row| R::new(row, "worker_incarnations").string("incarnation"))
    .collect()
}

/// Loaded executions by id, each with who holds its current attempt.
type Loaded = HashMap<String, (Execution, Hold)>;

/// Plans and applies one input; the state it moved the execution to, if any.
fn apply_one(
    exec: &mut Execution,
    hold: &mut Hold,
    job: &mut JobState,
    input: &Input<'_>,
    origin: Origin<'_>,
    now: Millis,
    tail: &mut Tail,
) -> Option<ExecStatus> {
    let own = u64::from(!exec.status.is_terminal());
    let snapshot = ExecSnapshot {
        status: exec.status,
        attempt: exec.attempt,
        job_status: job.status,
        continuation: job.continuation,
        others_live: job.live > own,
        stop_requested: exec.stop_requested_at.is_some(),
        retry: job.retry,
        incarnation: hold.by.clone(),
        handbacks: hold.handbacks,
    };
    let plan = outcome::plan(&snapshot, input.verdict, input.attempt, origin, now)?;
    // `plan` only proposes legal moves; this keeps the guard a
    // conditional `UPDATE` used to give.
    if !plan.exec.allowed_from(exec.status) {
        return None;
    }
    let applied = match plan.exec {
        ExecTransition::Start => {
            if exec.status == ExecStatus::Pending {
                ghost_start(exec, job, tail);
            }
            start(exec, job, input, tail);
            hold.by = input.incarnation.map(str::to_string);
            tail.executions.held_by(&exec.id, hold.by.clone());
            true
        }
        ExecTransition::Retry => {
            retry(exec, &plan, input, now, tail);
            hold.by = None;
            tail.executions.held_by(&exec.id, None);
            if plan.free_retry {
                hold.handbacks += 1;
                tail.executions.handed_back(&exec.id, hold.handbacks);
            }
            true
        }
        ExecTransition::Succeed
        | ExecTransition::Fail
        | ExecTransition::TimeOut
        | ExecTransition::Lose
        | ExecTransition::Stop => {
            finish(exec, job, &plan, input, now, tail);
            true
        }
        // `plan` never yields these; they belong to the publisher and
        // the reroute, to cancel, to the claim and to the requeue of
        // unstarted work.
        ExecTransition::Dispatch
        | ExecTransition::Reroute
        | ExecTransition::Cancel
        | ExecTransition::Skip
        | ExecTransition::Requeue => false,
    };
    applied.then(|| plan.exec.to_state())
}

/// A final outcome: the execution ends, its job moves on (or ends), and the
/// callback is queued.
fn finish(
    exec: &mut Execution,
    job: &mut JobState,
    plan: &Plan,
    input: &Input<'_>,
    now: Millis,
    tail: &mut Tail,
) {
    let error = if plan.exec == ExecTransition::Succeed {
        None
    } else {
        input.error
    };
    tail.executions.touch(&exec.id, None);
    exec.status = plan.exec.to_state();
    exec.worker_id = input
        .worker_id
        .map(str::to_string)
        .or(exec.worker_id.take());
    exec.output = input.output.cloned();
    exec.error = error.map(str::to_string);
    exec.finished_at = Some(input.at);
    if exec.started_at.is_none() {
        exec.started_at = input.started_at;
    }
    job.live = job.live.saturating_sub(1);
    tail.events.push(EventRow {
        worker_id: exec.worker_id.clone(),
        error: exec.error.clone(),
        ..EventRow::plain(&exec.id, exec.attempt, exec.status, input.at)
    });
    // A shard of a broadcast or sharded trigger ends the trigger only if
    // it is the last one: the job then moves as the aggregate says.
    let (outcome, shards, planned) = match tail.triggers.end(exec) {
        Ended::Single => (exec.status, None, plan.job),
        Ended::Pending => return,
        Ended::Last(outcome, shards) => (
            outcome,
            Some(shards),
            kairos_core::shard::job_move(plan.job, outcome),
        ),
    };
    // A workflow node's internal job has no trigger of its own: it never
    // moves with a result, and records none (its row is not locked, see
    // `load`; a node's outcome is its run's).
    if !job.workflow {
        record_on_job(exec, job, plan, planned, outcome, input.at, tail);
    }
    if let Some(url) = &job.callback_url {
        let mut callback = inserts::new_callback(exec, url, now);
        if let Some(shards) = shards {
            let shards: Vec<&Execution> = shards.iter().collect();
            callback.payload =
                kairos_core::shard::callback_payload(exec, outcome, &shards).to_string();
        }
        tail.callbacks.push(callback);
    }
}

/// What the end of `exec`'s trigger (as `outcome`) does to its job, whose
/// row `load` locked: its last result and failures in a row, and the
/// `planned` move or its next trigger.
fn record_on_job(
    exec: &Execution,
    job: &mut JobState,
    plan: &Plan,
    planned: Option<kairos_core::job::JobTransition>,
    outcome: ExecStatus,
    at: Millis,
    tail: &mut Tail,
) {
    // The job's last result and failures in a row, for its health: in the
    // order results are applied, which is the order they finished in.
    let streak = kairos_core::job::next_fail_streak(job.fail_streak, outcome);
    if let Some(n) = streak {
        job.fail_streak = n;
    }
    tail.jobs.finished(&exec.job_id, outcome, at, streak);
    // The job row is locked with the execution, so its status in memory
    // is the stored one: the move's condition is checked here.
    let moved = match planned {
        Some(t) if t.allowed_from(job.status) => {
            job.status = t.to_state();
            tail.jobs
                .moved(&exec.job_id, job.status, plan.next_trigger_at);
            true
        }
        _ => false,
    };
    if let Some(next) = plan.next_trigger_at {
        // A fixed-delay job that could not be moved (paused while its
        // execution ran, or kept `scheduled` by a skipped overlap) still
        // gets its next trigger if it has none, so it never stalls.
        if !moved && !job.status.is_terminal() && job.continuation != Continuation::Scheduled {
            tail.jobs.rescheduled(&exec.job_id, next);
        }
        job.continuation = Continuation::Scheduled;
    }
}

/// An attempt reported `started` while its execution is `pending`: its
/// dispatch was handed back (the publish was not confirmed, or its worker
/// was replaced) and yet the message reached a worker, which took the
/// attempt. It runs now, so it occupies a slot under every limit of its
/// job like any admitted execution, and the gate counts it from here on.
fn ghost_start(exec: &Execution, job: &JobState, tail: &mut Tail) {
    tail.ghost_starts.push((
        exec.id.clone(),
        scopes_of(&job.handler, &exec.tenant, &exec.job_id),
    ));
}

/// `started`: the attempt runs, with its deadline if the job has a time limit.
fn start(exec: &mut Execution, job: &JobState, input: &Input<'_>, tail: &mut Tail) {
    let deadline = job.timeout_ms.map(|t| input.at.saturating_add(from_u64(t)));
    exec.status = ExecTransition::Start.to_state();
    exec.worker_id = input
        .worker_id
        .map(str::to_string)
        .or(exec.worker_id.take());
    exec.started_at = Some(input.at);
    tail.executions.touch(&exec.id, Some(deadline));
    tail.events.push(EventRow {
        worker_id: exec.worker_id.clone(),
        ..EventRow::plain(&exec.id, exec.attempt, exec.status, input.at)
    });
}

/// A failed, timed-out or lost attempt with attempts left: the next attempt
/// waits in `pending` until its backoff has passed.
fn retry(exec: &mut Execution, plan: &Plan, input: &Input<'_>, now: Millis, tail: &mut Tail) {
    let retry_at = plan.retry_at.unwrap_or(now);
    let worker = input
        .worker_id
        .map(str::to_string)
        .or(exec.worker_id.take());
    let outcome = plan.attempt_outcome.unwrap_or(ExecStatus::Failed);
    tail.events.push(EventRow {
        worker_id: worker,
        error: input.error.map(str::to_string),
        ..EventRow::plain(&exec.id, exec.attempt, outcome, input.at)
    });
    exec.attempt += 1;
    exec.status = ExecTransition::Retry.to_state();
    exec.not_before = retry_at;
    exec.worker_id = None;
    exec.dispatched_at = None;
    exec.started_at = None;
    exec.error = input.error.map(str::to_string);
    tail.executions.touch(&exec.id, Some(None));
    tail.events
        .push(EventRow::plain(&exec.id, exec.attempt, exec.status, now));
}

//! The storage port. Every method is named for what it guarantees; every state
//! change is conditional, so a stale caller changes nothing. `kairos-store-sql`
//! implements it for MySQL/MariaDB, PostgreSQL and SQLite.
//!
//! The port is split by role: [`Dispatch`] is the dispatcher's hot path,
//! [`Maintenance`] the reaper's and recovery's calls, [`History`] the API's
//! and dashboard's reads of executions. Each process holds only what it uses
//! ([`DispatcherStore`], [`ApiStore`], [`CallbackStore`] for the relay);
//! [`Store`] is all of them.
//!
//! Methods that write many rows take slices: the hot path is batched (one
//! transaction and a few multi-row statements per batch, never one per job).

use crate::callback::{Callback, CallbackAttempt};
use crate::execution::{ExecEvent, ExecStatus, Execution};
use crate::job::{Job, JobStatus, NewJob, RetryPolicy};
use crate::outcome::Verdict;
use crate::protocol::{
    DispatchMsg, HeartbeatMsg, HeldRef, LogLevel, LogMsg, PROTOCOL_VERSION, ResultMsg,
};
use crate::schedule::Schedule;
use crate::tenant::{ApiKey, AuditEntry, Tenant, TenantLimits, UiSession};
use crate::time::Millis;
use crate::worker::{Routable, WorkerInfo, WorkerState};
use async_trait::async_trait;
use std::sync::Arc;

/// Storage failures, at the crate boundary.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be reached or the connection broke.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// A leader whose lease was superseded tried to write.
    #[error("stale leader: fencing token {ours} is older than {current}")]
    Fenced {
        /// Token the caller holds.
        ours: u64,
        /// Newest token the database has seen.
        current: u64,
    },
    /// A stored row could not be decoded (a bug or manual tampering).
    #[error("corrupt row in {table}: {reason}")]
    Corrupt {
        /// Table.
        table: &'static str,
        /// What was wrong.
        reason: String,
    },
    /// The transaction lost a deadlock or serialization race with another
    /// writer; running it again may succeed (adapters retry it themselves
    /// before reporting this).
    #[error("database contention: {0}")]
    Contention(#[source] BoxError),
    /// Any other database error, with the driver's error as its source.
    #[error("database error: {0}")]
    Database(#[source] BoxError),
}

/// A driver's error, kept whole as the source of a [`StoreError`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Result alias for the port.
pub type StoreResult<T> = Result<T, StoreError>;

/// Outcome of an idempotent create.
#[derive(Debug, Clone, PartialEq)]
pub enum CreateOutcome {
    /// The job was inserted and committed.
    Created(Job),
    /// A job with the same `(tenant, client_request_id)` already existed; it is
    /// returned unchanged so the caller can compare `request_hash`.
    Existing(Job),
}

/// A page of results with opaque cursors for the next and previous ones.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    /// Items on this page.
    pub items: Vec<T>,
    /// Cursor for the next page, `None` on the last.
    pub next_cursor: Option<String>,
    /// Cursor for the page before this one, `None` on the first page (and
    /// from listings that only page forwards).
    pub prev_cursor: Option<String>,
}

impl<T> Page<T> {
    /// A page that only pages forwards.
    pub fn forward(items: Vec<T>, next_cursor: Option<String>) -> Self {
        Page {
            items,
            next_cursor,
            prev_cursor: None,
        }
    }
}

/// Listing filter for jobs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobFilter {
    /// Only jobs in this state.
    pub status: Option<JobStatus>,
    /// Only jobs of this handler.
    pub handler: Option<String>,
    /// Only jobs whose name contains this text (case as stored).
    pub name_contains: Option<String>,
    /// Only jobs of this health ([`crate::job::JobHealth`]).
    pub health: Option<crate::job::JobHealth>,
    /// Page size.
    pub limit: u32,
    /// Cursor from a previous page.
    pub cursor: Option<String>,
}

/// Outcome of a caller's control request (pause, resume, cancel, trigger).
#[derive(Debug, Clone, PartialEq)]
pub enum ControlOutcome {
    /// Applied; the job as it is now.
    Done(Job),
    /// No such job for this tenant.
    NotFound,
    /// The job's state does not allow it; the job as it is.
    Conflict(Job),
}

/// A caller's change to a job (`PATCH`): the job's definition as it is to
/// be, every field given (the API merges the request into the job it read).
#[derive(Debug, Clone, PartialEq)]
pub struct JobUpdate {
    /// Schedule, window and policies.
    pub schedule: Schedule,
    /// Whether the schedule changed: the next trigger is then recomputed.
    pub reschedule: bool,
    /// Handler input.
    pub params: serde_json::Value,
    /// Paths of params values shown masked.
    pub sensitive_params: Vec<String>,
    /// Where to POST terminal outcomes.
    pub callback_url: Option<String>,
    /// Retries.
    pub retry: RetryPolicy,
    /// Handler time limit.
    pub timeout_ms: Option<u64>,
    /// Worker group the job must run in.
    pub worker_group: Option<String>,
    /// Claim order under a backlog.
    pub priority: crate::priority::Priority,
    /// At most this many of its executions live at once.
    pub max_concurrency: Option<u32>,
}

/// Outcome of [`JobStore::job_update`].
#[derive(Debug, Clone, PartialEq)]
pub enum UpdateOutcome {
    /// Applied; the job as it is now.
    Done(Job),
    /// No such job for this tenant.
    NotFound,
    /// The job's revision is not the one the caller read (someone changed
    /// it meanwhile); the job as it is.
    VersionConflict(Job),
    /// The job is finished (terminal), or its schedule can no longer change
    /// (a one-shot that already fired); the job as it is.
    Conflict(Job),
}

/// An attempt whose stop was requested while a worker may be running it.
#[derive(Debug, Clone, PartialEq)]
pub struct StopRequest {
    /// Execution.
    pub execution_id: String,
    /// Attempt to stop.
    pub attempt: u32,
    /// Worker holding it, if known.
    pub worker_id: Option<String>,
    /// When the stop was requested.
    pub requested_at: Millis,
}

/// One due trigger the dispatcher wants to claim. Claims of one job in one
/// call (consecutive missed triggers under the `fireAll` misfire policy)
/// share its version check: they win or lose together, and the job's next
/// trigger becomes that of its latest claim.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    /// The job as the dispatcher read it. The claim fails if its version
    /// changed since; every change to a job bumps its version, so a claim
    /// that wins ran on exactly this content, and the store need not read
    /// it again inside the claim.
    pub job: Arc<Job>,
    /// Due time being claimed (becomes the execution's `scheduled_at`).
    pub scheduled_at: Millis,
    /// The trigger after this one, `None` for a one-shot.
    pub next_trigger_at: Option<Millis>,
    /// Id for the execution row (UUIDv7 text).
    pub execution_id: String,
    /// The worker the dispatcher chose for this trigger. The execution is
    /// then created `dispatched` to it, so publishing after the commit has
    /// nothing left to record. `None`: it is created `pending`, and whoever
    /// publishes it picks a worker and records the confirm.
    pub worker_id: Option<String>,
    /// The trigger's shard this claim runs ([`crate::shard::Shard::SINGLE`]
    /// for a single job). Claims of one trigger share its due time and
    /// win or lose together; each is one execution.
    pub shard: crate::shard::Shard,
}

/// Which jobs a due scan or a claim covers, and the fences its claims are
/// made under: the whole table for the single leader, or the partitions a
/// partitioned dispatcher holds leases on (see [`crate::partition`]). The
/// scans read under no fence; only claims check them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DispatchScope<'a> {
    /// Every job, claimed under the single leader's fencing token.
    All {
        /// The leader lease's fencing token.
        fence: u64,
    },
    /// The jobs of these partitions only, each claimed under the fence of
    /// its own lease (partition → fence). An empty map covers no job.
    Partitions(&'a crate::partition::Owned),
}

impl DispatchScope<'_> {
    /// The partitions the scope is limited to, ascending; `None` for every job.
    pub fn partitions(&self) -> Option<Vec<u32>> {
        match self {
            DispatchScope::All { .. } => None,
            DispatchScope::Partitions(owned) => Some(owned.keys().copied().collect()),
        }
    }

    /// Whether the scope covers no job at all (no partition held).
    pub fn is_empty(&self) -> bool {
        matches!(self, DispatchScope::Partitions(owned) if owned.is_empty())
    }
}

/// What a claim did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClaimOutcome {
    /// The work claimed: what is to be published.
    pub work: Vec<DispatchWork>,
    /// Partitions a newer owner has claimed in ([`DispatchScope::Partitions`]
    /// only): the caller no longer owns them, and none of their claims was
    /// made.
    pub fenced: Vec<crate::partition::Fenced>,
}

/// An execution ready to publish: everything the dispatch message needs.
#[derive(Debug, Clone, PartialEq)]
pub struct DispatchWork {
    /// Execution id.
    pub execution_id: String,
    /// Job id.
    pub job_id: String,
    /// Owner.
    pub tenant: String,
    /// Attempt to dispatch.
    pub attempt: u32,
    /// Handler.
    pub handler: String,
    /// Handler input.
    pub params: serde_json::Value,
    /// Due time.
    pub scheduled_at: Millis,
    /// Handler time limit.
    pub timeout_ms: Option<u64>,
    /// Worker group the job must run in.
    pub worker_group: Option<String>,
    /// The job's priority (the worker's queue serves higher ones first).
    pub priority: crate::priority::Priority,
    /// The trace the job's creator sent, if any.
    pub trace: Option<crate::trace::CallerTrace>,
    /// The worker the execution is already `dispatched` to (its claim chose
    /// one): publish to that worker's queue and record nothing; if it cannot
    /// be published, hand it back (`executions_requeue_unstarted`). `None`:
    /// still `pending`, to be routed and recorded by its publisher.
    pub worker_id: Option<String>,
    /// Its part of the trigger.
    pub shard: crate::shard::Shard,
    /// Someone waits for this attempt (an immediate-lane job, or a retry):
    /// the worker's queue delivers it before scheduled work of its priority.
    pub immediate: bool,
    /// A workflow node's parents' outputs, by parent node id (`None` for
    /// an execution that is no workflow node, or a root node).
    pub parent_outputs: Option<serde_json::Value>,
}

impl DispatchWork {
    /// The protocol message for this work.
    pub fn to_message(&self) -> DispatchMsg {
        DispatchMsg {
            v: PROTOCOL_VERSION,
            execution_id: self.execution_id.clone(),
            job_id: self.job_id.clone(),
            attempt: self.attempt,
            handler: self.handler.clone(),
            params: self.params.clone(),
            scheduled_at: self.scheduled_at,
            timeout_ms: self.timeout_ms,
            group: self.worker_group.clone(),
            trace: self.trace.clone(),
            priority: Some(self.priority),
            immediate: self.immediate,
            shard: self.shard.for_message(),
            parent_outputs: self.parent_outputs.clone(),
        }
    }
}

/// A publisher confirm to record.
#[derive(Debug, Clone, PartialEq)]
pub struct DispatchedTo {
    /// Execution.
    pub execution_id: String,
    /// Attempt that was published.
    pub attempt: u32,
    /// Worker whose queue confirmed it.
    pub worker_id: String,
}

/// An attempt a worker holds (see [`Maintenance::executions_in_flight_on`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldAttempt {
    /// Execution.
    pub execution_id: String,
    /// Attempt.
    pub attempt: u32,
    /// `dispatched` (never confirmed started) or `running`.
    pub status: ExecStatus,
    /// The worker process that reported it `started`, if it said.
    pub incarnation: Option<String>,
    /// When its dispatch was confirmed (dispatcher clock).
    pub dispatched_at: Option<Millis>,
    /// When the worker reported it started (worker clock).
    pub started_at: Option<Millis>,
}

impl HeldAttempt {
    /// As the `(execution_id, attempt)` target other calls take.
    pub fn target(&self) -> (String, u32) {
        (self.execution_id.clone(), self.attempt)
    }
}

/// What the store knows of a worker's processes, for recovering what a
/// replaced process held and reconciling against what the worker reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerLedger {
    /// Worker id.
    pub worker_id: String,
    /// The incarnation of its latest heartbeat (`None`: a legacy worker).
    pub current: Option<String>,
    /// When the current incarnation was first seen (dispatcher clock).
    pub current_since: Option<Millis>,
    /// Earlier incarnations, replaced by a later one: newest first.
    pub retired: Vec<String>,
    /// Attempts the latest heartbeat listed (`None`: not reported).
    pub held: Option<Vec<HeldRef>>,
    /// When that heartbeat was taken (worker clock).
    pub beat_at: Millis,
    /// Its lifecycle state: `Offline` once it deregistered or was declared
    /// dead.
    pub state: crate::worker::WorkerState,
}

/// A worker id that came back as a new process (see [`WorkerStore::workers_record_heartbeats`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reincarnation {
    /// Worker id.
    pub worker_id: String,
    /// The replaced process.
    pub previous: String,
    /// The new one.
    pub current: String,
}

/// What recording publisher confirms did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Marked {
    /// Attempts moved to `dispatched`.
    pub dispatched: u64,
    /// Sent attempts found `cancelled`, as `(execution_id, attempt)`.
    pub cancelled: Vec<(String, u32)>,
}

/// What recording dispatches under the concurrency limits did (see
/// [`Dispatch::executions_admit`]), as `(execution_id, attempt)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Admitted {
    /// Moved to `dispatched` to the worker chosen for them: to publish now.
    pub dispatched: Vec<(String, u32)>,
    /// Left `pending` because a limit is reached (`waiting_for` set).
    pub waiting: Vec<(String, u32)>,
    /// When the earliest rate limit that held some back has a token again.
    pub retry_at: Option<Millis>,
}

/// A limit with what runs under it now.
#[derive(Debug, Clone, PartialEq)]
pub struct LimitUsage {
    /// The limit.
    pub limit: crate::concurrency::Limit,
    /// Live executions counted against it.
    pub running: u32,
}

/// What applying one result or verdict did.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// Execution.
    pub execution_id: String,
    /// Attempt the result named.
    pub attempt: u32,
    /// The state it moved to, or `None` if it was ignored as stale/duplicate.
    pub new_status: Option<ExecStatus>,
    /// Whether it queued a callback in the outbox (what wakes a relay).
    pub callback_queued: bool,
    /// Whether it ended a workflow node or a job with follow-ups, whose next
    /// work may now be `pending` (what asks the leader for a sweep).
    pub next_work: bool,
}

/// Jobs: what callers create, list and control.
#[async_trait]
pub trait JobStore: Send + Sync {
    /// Inserts the job and commits before returning, or returns the existing job
    /// with the same `(tenant, client_request_id)`.
    async fn job_create(&self, job: NewJob) -> StoreResult<CreateOutcome>;
    /// Creates every job in one transaction (all or nothing), idempotent per
    /// `(tenant, client_request_id)` like [`JobStore::job_create`]; one outcome
    /// per job, in order.
    async fn jobs_create_many(&self, jobs: Vec<NewJob>) -> StoreResult<Vec<CreateOutcome>>;
    /// One job of a tenant.
    async fn job_get(&self, tenant: &str, id: &str) -> StoreResult<Option<Job>>;
    /// The jobs of `tenant` among `ids` (those that exist, in no order), for
    /// listings that show each item's job: one read where the store can,
    /// instead of one per job.
    async fn jobs_get_many(&self, tenant: &str, ids: &[&str]) -> StoreResult<Vec<Job>> {
        let mut found = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(job) = self.job_get(tenant, id).await? {
                found.push(job);
            }
        }
        Ok(found)
    }
    /// Jobs of a tenant, newest first.
    async fn job_list(&self, tenant: &str, filter: &JobFilter) -> StoreResult<Page<Job>>;
    /// How many of a tenant's jobs `filter` matches (its cursor and limit
    /// ignored), counting no further than `cap`: `cap` means "at least".
    async fn job_count(&self, tenant: &str, filter: &JobFilter, cap: u64) -> StoreResult<u64>;
    /// `scheduled|running → paused`.
    async fn job_pause(
        &self,
        tenant: &str,
        id: &str,
        reason: Option<&str>,
        now: Millis,
    ) -> StoreResult<ControlOutcome>;
    /// `paused → scheduled`; a trigger missed while paused is then a late or
    /// missed trigger like any other (misfire policy).
    async fn job_resume(&self, tenant: &str, id: &str, now: Millis) -> StoreResult<ControlOutcome>;
    /// Any non-terminal state → `cancelled`; its pending executions are
    /// cancelled too, and a stop is requested for its dispatched and running
    /// ones (in the same transaction).
    async fn job_cancel(&self, tenant: &str, id: &str, now: Millis) -> StoreResult<ControlOutcome>;
    /// Adds an execution due `now`, outside the schedule (`POST …/trigger`).
    /// Only for jobs that are not terminal or paused.
    async fn job_trigger_now(
        &self,
        tenant: &str,
        id: &str,
        execution_id: &str,
        now: Millis,
    ) -> StoreResult<ControlOutcome>;
    /// Replaces a job's definition if its caller's revision
    /// ([`Job::revision`]) is still `expected_revision` and it is not
    /// finished. The scheduler's own bookkeeping (claims, results) never
    /// makes it conflict: it moves [`Job::version`], not the revision. When `update.reschedule`, the next trigger is
    /// recomputed from `now` (a fixed delay with a live execution waits for
    /// its end; a window with no trigger left ends the job at once when
    /// nothing of it runs). Bumps the revision and the version (so a claim
    /// from a scan before the update loses, and the next scan's claim runs
    /// the new definition).
    async fn job_update(
        &self,
        tenant: &str,
        id: &str,
        expected_revision: i64,
        update: &JobUpdate,
        now: Millis,
    ) -> StoreResult<UpdateOutcome>;
}

/// The dispatcher's hot path: find what is due, claim it, publish it, record
/// the confirms, and apply what workers report.
#[async_trait]
pub trait Dispatch: Send + Sync {
    /// Jobs of `scope` in a claimable state whose `next_trigger_at <= now`,
    /// oldest due first, read through the `(status, next_trigger_at)` index,
    /// leaving out the jobs named in `except` (a claim in flight holds them).
    async fn jobs_find_due(
        &self,
        scope: DispatchScope<'_>,
        now: Millis,
        limit: u32,
        except: &[&str],
    ) -> StoreResult<Vec<Job>>;
    /// A backlog's claim order: the claimable jobs of `scope` due by
    /// `due_by`, those due before `starving_before` first (oldest first,
    /// whatever their priority: the starvation bound), then by priority,
    /// highest first, oldest due first within one. Each priority is read
    /// through the `(status, priority, next_trigger_at)` index, so a deep
    /// backlog of one priority costs no more than the time-ordered due
    /// scan. Leaves out the jobs in `except`.
    async fn jobs_find_due_ranked(
        &self,
        scope: DispatchScope<'_>,
        due_by: Millis,
        starving_before: Millis,
        limit: u32,
        except: &[&str],
    ) -> StoreResult<Vec<Job>>;
    /// The immediate lane's due jobs of `scope` (one-shots due when they
    /// were created, see [`crate::priority::Lane`]) due by `due_by`, highest
    /// priority first, then *newest* first: the lane's loop serves the
    /// latest request at once while a ranked backlog scan, oldest first,
    /// works through older ones from the other end, so the two rarely
    /// pick the same job. Few rows, through the `(lane, status,
    /// next_trigger_at)` index.
    async fn jobs_find_due_immediate(
        &self,
        scope: DispatchScope<'_>,
        due_by: Millis,
        limit: u32,
    ) -> StoreResult<Vec<Job>>;
    /// How many triggers of `scope` are due by `until`, counting at most
    /// `cap`: how large a burst ahead is, so the leader can start claiming
    /// it early enough. Read through the same index as [`Self::jobs_find_due`].
    async fn jobs_count_due(
        &self,
        scope: DispatchScope<'_>,
        until: Millis,
        cap: u32,
    ) -> StoreResult<u32>;
    /// Claims triggers in one transaction: each job is updated only if its
    /// version is unchanged (then `next_trigger_at` advances and the job is
    /// `running`), and an execution row is inserted for each winning claim. The
    /// unique `(job_id, scheduled_at)` key makes a second claim of one trigger
    /// impossible. Returns the work that was claimed: what is to be published.
    /// A claim naming a worker creates its execution `dispatched` to that
    /// worker (dispatched at its due time, or now if that is later), in the
    /// same transaction: the claim is then also the dispatch record.
    ///
    /// Fencing follows `scope`. [`DispatchScope::All`]: refuses with
    /// [`StoreError::Fenced`] if a newer leader has written.
    /// [`DispatchScope::Partitions`]: the stored fence of each partition the claims
    /// fall in is raised to ours or, if a newer owner's is there, reported
    /// in [`ClaimOutcome::fenced`] and that partition's claims dropped;
    /// claims of partitions not in the scope are dropped too, and the rest
    /// is claimed, with the concurrency gate serialized with every other
    /// dispatcher's.
    ///
    /// Each job's claims go through [`crate::trigger::resolve`]: a misfire
    /// under `skip` gets no execution; under `forbid` a trigger of a job with
    /// a live execution is recorded `skipped` (with its callback); under
    /// `replace` the live executions are cancelled if still pending and asked
    /// to stop otherwise.
    async fn triggers_claim(
        &self,
        scope: DispatchScope<'_>,
        claims: &[Claim],
        now: Millis,
    ) -> StoreResult<ClaimOutcome>;
    /// Executions in `pending` whose `not_before <= now` (retries, and work a
    /// crashed leader claimed but never published), oldest first, among those
    /// some live worker can run (`routable`): work waiting for a handler no
    /// worker serves is left out, so it never holds up the rest.
    async fn executions_find_unpublished(
        &self,
        now: Millis,
        limit: u32,
        routable: &Routable,
    ) -> StoreResult<Vec<DispatchWork>>;
    /// Records publisher confirms of work that was still `pending`:
    /// `pending → dispatched` for the named attempt only, after its publish.
    /// The stock dispatcher records every dispatch before publishing instead
    /// (a claim that chose a worker, or [`Self::executions_admit`], which
    /// also applies the concurrency limits); this stays for publishers that
    /// record confirms afterwards, and it bypasses those limits.
    /// Also reports the sent attempts that were cancelled meanwhile (their job
    /// was cancelled between claim and confirm): a worker now holds them, and
    /// must be asked to stop.
    async fn executions_mark_dispatched(
        &self,
        sent: &[DispatchedTo],
        now: Millis,
    ) -> StoreResult<Marked>;
    /// Records that a dispatch refused by its worker now sits in another
    /// worker's queue (`sent.worker_id`), with `reason` in its history. Only
    /// for the named attempt while `dispatched`; `false` if nothing changed.
    async fn execution_mark_rerouted(
        &self,
        sent: &DispatchedTo,
        reason: &str,
        now: Millis,
    ) -> StoreResult<bool>;
    /// Records, before publishing, the dispatch of `pending` work to the
    /// worker chosen for each, in one transaction under the concurrency
    /// limits: fenced like [`Self::triggers_claim`], its limit decisions
    /// serialized with every dispatcher's claims, it counts the live
    /// executions of each limited handler, tenant and job, moves the named
    /// attempts still `pending` to `dispatched` oldest first while their
    /// limits allow (taking their slots), and marks the rest as waiting. Attempts no
    /// longer `pending` (cancelled, already dispatched) are in neither list.
    /// What is then not published must be handed back
    /// ([`Maintenance::executions_requeue_unstarted`]).
    async fn executions_admit(
        &self,
        fence: u64,
        picks: &[DispatchedTo],
        now: Millis,
    ) -> StoreResult<Admitted>;
    /// Like [`Self::executions_find_unpublished`], but only the executions
    /// held back by a concurrency limit (which that scan leaves out, so
    /// they never fill its batch), oldest first.
    async fn executions_find_waiting(
        &self,
        now: Millis,
        limit: u32,
        routable: &Routable,
    ) -> StoreResult<Vec<DispatchWork>>;
    /// How many `pending` executions wait for a concurrency limit, counting
    /// at most `cap`.
    async fn executions_count_waiting(&self, cap: u32) -> StoreResult<u64>;
    /// Deletes up to `limit` slot rows whose execution no longer holds its
    /// slot (they count for nothing already; the gate deletes those of the
    /// keys it checks, this catches keys never checked again, like a
    /// finished job's). Fenced like [`Self::executions_admit`], so it never
    /// races a gate that admits the same execution again. How many went.
    async fn concurrency_slots_purge(&self, fence: u64, limit: u32) -> StoreResult<u64>;
    /// The number of partitions jobs hash into, as recorded at migration
    /// (see [`crate::partition`]).
    async fn partitions_count(&self) -> StoreResult<u32>;
    /// Applies worker results in one transaction, each through [`crate::outcome::plan`];
    /// terminal executions of jobs with a callback URL get their outbox row in
    /// the same transaction.
    async fn results_apply(&self, results: &[ResultMsg], now: Millis) -> StoreResult<Vec<Applied>>;
}

/// The reaper's and recovery's calls: attempts past their time limit, what a
/// worker holds, the verdicts that end or retry them, handing back work that
/// never started, and the stops workers must be told about.
#[async_trait]
pub trait Maintenance: Send + Sync {
    /// `dispatched`/`running` attempts whose time limit (plus `margin_ms`) has
    /// passed by `now`, as `(execution_id, attempt)`.
    async fn executions_find_overdue(
        &self,
        now: Millis,
        margin_ms: i64,
        limit: u32,
    ) -> StoreResult<Vec<(String, u32)>>;
    /// `dispatched`/`running` attempts with no time limit of their own
    /// (`deadline_at` unset) that were started — or, never started,
    /// dispatched — more than `limit_ms` before `now`: what the
    /// deployment's default execution timeout ends.
    async fn executions_find_unbounded(
        &self,
        now: Millis,
        limit_ms: i64,
        limit: u32,
    ) -> StoreResult<Vec<(String, u32)>>;
    /// `dispatched`/`running` attempts held by a worker.
    async fn executions_in_flight_on(&self, worker_id: &str) -> StoreResult<Vec<HeldAttempt>>;
    /// Applies a reaper verdict (`Lost`, `TimedOut`) to the named attempts.
    async fn executions_apply_verdict(
        &self,
        targets: &[(String, u32)],
        verdict: Verdict,
        reason: &str,
        now: Millis,
    ) -> StoreResult<Vec<Applied>>;
    /// `dispatched → pending` (same attempt, publishable from its `not_before`
    /// on: at once, unless it was claimed ahead of its due time) for the named
    /// attempts that never started; others are left alone. Records an event
    /// with `reason`. Returns how many moved.
    async fn executions_requeue_unstarted(
        &self,
        targets: &[(String, u32)],
        reason: &str,
        now: Millis,
    ) -> StoreResult<u64>;
    /// Live (`dispatched`/`running`) attempts whose stop was requested at or
    /// after `since`, oldest request first: what workers must be told to stop.
    async fn executions_stop_requested(
        &self,
        since: Millis,
        limit: u32,
    ) -> StoreResult<Vec<StopRequest>>;
}

/// Executions as the API and the dashboard read them: one, a page of them,
/// their history, and a tenant's figures.
#[async_trait]
pub trait History: Send + Sync {
    /// One execution of a tenant.
    async fn execution_get(&self, tenant: &str, id: &str) -> StoreResult<Option<Execution>>;
    /// A job's executions, newest trigger first.
    async fn executions_list_for_job(
        &self,
        tenant: &str,
        job_id: &str,
        limit: u32,
        cursor: Option<&str>,
    ) -> StoreResult<Page<Execution>>;
    /// A tenant's executions across jobs, newest trigger first.
    async fn executions_list(
        &self,
        tenant: &str,
        filter: &crate::overview::ExecFilter,
    ) -> StoreResult<Page<Execution>>;
    /// How many of a tenant's executions `filter` matches (its cursor and
    /// limit ignored), counting no further than `cap`: `cap` means "at least".
    async fn executions_count(
        &self,
        tenant: &str,
        filter: &crate::overview::ExecFilter,
        cap: u64,
    ) -> StoreResult<u64>;
    /// A tenant's figures: jobs by state, and executions, outcomes, lateness
    /// of what was due since `since`, and its callback backlog.
    async fn tenant_overview(
        &self,
        tenant: &str,
        since: Millis,
    ) -> StoreResult<crate::overview::Overview>;
    /// Every recorded transition of an execution, oldest first.
    async fn execution_events(&self, tenant: &str, id: &str) -> StoreResult<Vec<ExecEvent>>;
    /// How a tenant's triggers due (or executions finished) since `since`
    /// kept time, as of `now`.
    async fn trigger_timing(
        &self,
        tenant: &str,
        since: Millis,
        now: Millis,
    ) -> StoreResult<crate::overview::Timing>;
}

/// Workers as seen through their heartbeats.
#[async_trait]
pub trait WorkerStore: Send + Sync {
    /// Upserts the latest figures of each worker, with its incarnation and
    /// the attempts it says it holds. A beat from an incarnation already
    /// replaced by a later one is dropped. Returns the workers whose
    /// incarnation changed: the previous one is retired in the same
    /// transaction, so its late results change nothing from then on.
    async fn workers_record_heartbeats(
        &self,
        beats: &[HeartbeatMsg],
        now: Millis,
    ) -> StoreResult<Vec<Reincarnation>>;
    /// A worker's processes and what it last said it holds; `None` for an
    /// unknown worker.
    async fn worker_ledger(&self, id: &str) -> StoreResult<Option<WorkerLedger>>;
    /// All known workers.
    async fn workers_list(&self) -> StoreResult<Vec<WorkerInfo>>;
    /// Sets a worker's state (e.g. the reaper declaring it offline).
    async fn worker_set_state(&self, id: &str, state: WorkerState, now: Millis) -> StoreResult<()>;
    /// Deletes a gone worker's row and the record of its processes, only if
    /// it is still `offline` and its last heartbeat is older than
    /// `silent_before`: a process of the same id that came back since keeps
    /// its row. Returns whether the worker was forgotten. A worker id reused
    /// later registers as a new worker.
    async fn worker_forget(&self, id: &str, silent_before: Millis) -> StoreResult<bool>;
}

/// What the relay does with a callback after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallbackNext {
    /// The receiver answered 2xx.
    Delivered,
    /// Try again at this time.
    RetryAt(Millis),
    /// Give up (retries exhausted, or 410 Gone).
    Dead,
}

/// The outbox as the relay's metrics show it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallbackBacklog {
    /// Pending callbacks with at least one failed attempt.
    pub retrying: u64,
    /// Callbacks given up on (`dead`).
    pub dead: u64,
    /// Creation time of the oldest pending callback, if any.
    pub oldest_pending_at: Option<Millis>,
}

/// The callback outbox. Rows are inserted by [`Dispatch::results_apply`]
/// and [`Maintenance::executions_apply_verdict`] in the transaction that
/// makes an execution terminal.
#[async_trait]
pub trait CallbackStore: Send + Sync {
    /// Leases up to `limit` pending callbacks due by `now` to `owner` for
    /// `lease_ms`; a callback leased to another live owner is never returned,
    /// so two relays never send the same attempt at once.
    async fn callbacks_claim_due(
        &self,
        owner: &str,
        now: Millis,
        lease_ms: i64,
        limit: u32,
    ) -> StoreResult<Vec<Callback>>;
    /// Records an attempt and what follows, if `owner` still holds the lease.
    /// `false` if the lease was lost (the attempt is recorded anyway).
    async fn callback_record_attempt(
        &self,
        id: &str,
        owner: &str,
        attempt: &CallbackAttempt,
        next: CallbackNext,
        now: Millis,
    ) -> StoreResult<bool>;
    /// Earliest `next_attempt_at` of a pending callback, to sleep until then.
    async fn callbacks_next_due(&self) -> StoreResult<Option<Millis>>;
    /// Figures for monitoring the outbox: callbacks pending after a failed
    /// attempt, callbacks given up on, and when the oldest pending one was
    /// written.
    async fn callbacks_backlog(&self) -> StoreResult<CallbackBacklog>;
    /// Callbacks of an execution with their attempts, oldest first.
    async fn callbacks_for_execution(
        &self,
        tenant: &str,
        execution_id: &str,
    ) -> StoreResult<Vec<(Callback, Vec<CallbackAttempt>)>>;
    /// The tenant a callback belongs to, for the secrets it is signed with;
    /// `None` if there is no such tenant.
    async fn callback_tenant(&self, tenant: &str) -> StoreResult<Option<Tenant>>;
    /// Queues a new delivery (new delivery id, same body) of the execution's
    /// latest callback if that one is `delivered` or `dead`. `None` if there is
    /// none or it is still pending.
    async fn callback_redeliver(
        &self,
        tenant: &str,
        execution_id: &str,
        new_id: &str,
        now: Millis,
    ) -> StoreResult<Option<Callback>>;
}

/// Tenants, API keys and the audit trail. These are operator calls: the API
/// allows them to admin keys only, and the key lookup serves the
/// authentication of every request.
#[async_trait]
pub trait TenantStore: Send + Sync {
    /// Inserts a tenant; `false` if one with that id exists (nothing changes).
    async fn tenant_create(&self, tenant: &Tenant) -> StoreResult<bool>;
    /// One tenant.
    async fn tenant_get(&self, id: &str) -> StoreResult<Option<Tenant>>;
    /// Every tenant, by id.
    async fn tenants_list(&self) -> StoreResult<Vec<Tenant>>;
    /// Replaces a tenant's limit overrides; `false` if there is no such tenant.
    async fn tenant_set_limits(
        &self,
        id: &str,
        limits: &TenantLimits,
        now: Millis,
    ) -> StoreResult<bool>;
    /// Makes `new_secret` the tenant's callback secret and keeps the current
    /// one signing until `grace_until`. The tenant as it is now, `None` if
    /// there is no such tenant.
    async fn tenant_rotate_secret(
        &self,
        id: &str,
        new_secret: &str,
        grace_until: Millis,
        now: Millis,
    ) -> StoreResult<Option<Tenant>>;
    /// Inserts a key; `false` if its prefix is taken or its tenant unknown.
    async fn api_key_create(&self, key: &ApiKey) -> StoreResult<bool>;
    /// The key with this prefix, usable or not (the caller checks).
    async fn api_key_get(&self, prefix: &str) -> StoreResult<Option<ApiKey>>;
    /// Keys of one tenant, or of all, newest first.
    async fn api_keys_list(&self, tenant: Option<&str>) -> StoreResult<Vec<ApiKey>>;
    /// Marks a key revoked (idempotent: the first revocation time stays).
    /// `None` if there is no such key (of `tenant`, when given).
    async fn api_key_revoke(
        &self,
        prefix: &str,
        tenant: Option<&str>,
        now: Millis,
    ) -> StoreResult<Option<ApiKey>>;
    /// Records a control action.
    async fn audit_append(&self, entry: &AuditEntry) -> StoreResult<()>;
    /// Audit entries, newest first, of one tenant or all; `cursor` is the id of
    /// the last entry of the previous page.
    async fn audit_list(
        &self,
        tenant: Option<&str>,
        limit: u32,
        cursor: Option<&str>,
    ) -> StoreResult<Page<AuditEntry>>;
    /// How many jobs of the tenant are not terminal (`scheduled`, `running`, `paused`).
    async fn jobs_count_live(&self, tenant: &str) -> StoreResult<u64>;
}

/// Operators' concurrency limits per handler and per tenant (a job's own
/// limit is a field of the job), and what runs under them.
#[async_trait]
pub trait LimitStore: Send + Sync {
    /// Every operator limit, by key, with its live executions.
    async fn limits_list(&self) -> StoreResult<Vec<LimitUsage>>;
    /// Sets (creates or replaces) a limit; it applies from the next dispatch.
    async fn limit_set(&self, limit: &crate::concurrency::Limit, now: Millis) -> StoreResult<()>;
    /// Removes a limit; `false` if there was none.
    async fn limit_delete(&self, scope: crate::concurrency::Scope, name: &str)
    -> StoreResult<bool>;
    /// Live executions counted against `key` now: those admitted under it
    /// that are still `dispatched` or `running`.
    async fn concurrency_in_use(&self, key: &crate::concurrency::ScopeKey) -> StoreResult<u32>;
}

/// The dashboard's sessions, kept in the database so that every API
/// instance serves them and a restart keeps them.
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// Stores a new session.
    async fn ui_session_create(&self, session: &UiSession) -> StoreResult<()>;
    /// The session whose id hashes to `id_hash`, expired or not (the caller
    /// checks).
    async fn ui_session_get(&self, id_hash: &str) -> StoreResult<Option<UiSession>>;
    /// Ends a session (logout); ending one that is gone is not an error.
    async fn ui_session_delete(&self, id_hash: &str) -> StoreResult<()>;
    /// Deletes sessions expired at `now`; how many went.
    async fn ui_sessions_purge(&self, now: Millis) -> StoreResult<u64>;
}

/// A stored execution log line.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredLogLine {
    /// Position in the execution's log (increasing; the page cursor).
    pub seq: i64,
    /// Attempt that wrote it.
    pub attempt: u32,
    /// Worker that sent it.
    pub worker_id: String,
    /// When the handler wrote it (ms UTC, worker clock).
    pub at: Millis,
    /// Severity.
    pub level: LogLevel,
    /// Text (cut at [`LogLimits::max_line_bytes`]).
    pub message: String,
}

/// What is kept of each execution's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLimits {
    /// Lines kept per execution; the oldest are dropped first.
    pub max_lines: u32,
    /// Bytes of message text kept per execution; the oldest lines are dropped first.
    pub max_bytes: u64,
    /// A longer line is cut to this many bytes.
    pub max_line_bytes: usize,
}

impl Default for LogLimits {
    fn default() -> Self {
        Self {
            max_lines: 1_000,
            max_bytes: 256 * 1024,
            max_line_bytes: 4 * 1024,
        }
    }
}

/// Execution logs: lines handlers write, bounded per execution.
#[async_trait]
pub trait LogStore: Send + Sync {
    /// Stores the lines of each batch and the latest progress of its
    /// execution (for the batch's attempt only), then drops the oldest lines
    /// of every execution touched beyond `limits`. Batches for executions
    /// that do not exist are dropped.
    async fn logs_append(
        &self,
        batches: &[LogMsg],
        limits: &LogLimits,
        now: Millis,
    ) -> StoreResult<()>;
    /// A page of an execution's lines, oldest first. Looked up by execution
    /// id only: callers check the execution belongs to the tenant first
    /// (see [`History::execution_get`]).
    async fn logs_page(
        &self,
        execution_id: &str,
        cursor: Option<&str>,
        limit: u32,
    ) -> StoreResult<Page<StoredLogLine>>;
    /// Deletes up to `limit` lines stored before `before`; how many went.
    async fn logs_purge(&self, before: Millis, limit: u32) -> StoreResult<u64>;
}

/// Liveness of the database itself.
#[async_trait]
pub trait Health: Send + Sync {
    /// A round trip to the database.
    async fn ping(&self) -> StoreResult<()>;
}

/// What the dispatcher uses: its hot path, maintenance (the reaper and
/// recovery), workers' heartbeats and logs, and scheduled workflows' triggers.
pub trait DispatcherStore:
    Dispatch + Maintenance + WorkerStore + LogStore + crate::workflow::WorkflowScheduler
{
}
impl<T> DispatcherStore for T where
    T: Dispatch + Maintenance + WorkerStore + LogStore + crate::workflow::WorkflowScheduler
{
}

/// What the API and the dashboard use: jobs, executions' history, workers,
/// logs, callbacks, tenants and keys (with their retention overrides),
/// dashboard sessions, and the database's liveness.
pub trait ApiStore:
    JobStore
    + History
    + WorkerStore
    + LogStore
    + CallbackStore
    + TenantStore
    + SessionStore
    + LimitStore
    + crate::workflow::WorkflowStore
    + crate::workflow::followup::FollowUpStore
    + crate::retention::RetentionStore
    + Health
{
}
impl<T> ApiStore for T where
    T: JobStore
        + History
        + WorkerStore
        + LogStore
        + CallbackStore
        + TenantStore
        + SessionStore
        + LimitStore
        + crate::workflow::WorkflowStore
        + crate::workflow::followup::FollowUpStore
        + crate::retention::RetentionStore
        + Health
{
}

/// The whole storage port: every role, as a process running them all
/// (`kairos dev`) holds it. It coerces to each role's trait object.
pub trait Store: DispatcherStore + ApiStore {}
impl<T> Store for T where T: DispatcherStore + ApiStore {}

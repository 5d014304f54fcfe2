//! The storage port ([`kairos_core::store`]) for MySQL/MariaDB, PostgreSQL and
//! SQLite, with one set of statements run on each database's own sqlx driver.
//!
//! `KAIROS_DATABASE_URL` picks the database: `mysql://…` or `mariadb://…`,
//! `postgres://…` or `postgresql://…`, `sqlite://…`.
//!
//! # Statements and types
//!
//! Every statement is built with `sql::Sql` from `&'static str` fragments,
//! with each value bound where it is used (a row's values by column name,
//! through `sql::Fields`); it becomes a sqlx `QueryBuilder` for the
//! database it runs on, which numbers PostgreSQL's `$1, $2, …`. No SQL is
//! assembled with `format!`. The few fragments that differ (`INSERT IGNORE`
//! / `INSERT OR IGNORE` / `ON CONFLICT DO NOTHING`, upserts, `FOR UPDATE`,
//! which SQLite lacks, and `SKIP LOCKED` claims on PostgreSQL) are picked
//! when the statement runs. Multi-row updates, which give each row its own
//! values, take a different form per database (`rows_update`: a `CASE` per
//! column on MySQL, a joined `VALUES` list elsewhere). `IN` lists, `CASE`
//! arms and `VALUES` rows are padded to a few fixed lengths so the
//! prepared-statement cache stays small.
//!
//! Columns have the database's own types: times are `DATETIME(3)` (UTC) on
//! MySQL and `TIMESTAMPTZ` on PostgreSQL, documents `JSON` and `JSONB`; SQLite,
//! which has neither, keeps integer milliseconds and text. Ids are UUID text
//! and flags integers everywhere. Every bound value is typed (a `NULL` too),
//! so PostgreSQL's strict typing needs no casts; only a `SUM` is cast back to
//! an integer. Status names are never written into SQL: every conditional
//! update binds the `from_states()` of a [`kairos_core::job::JobTransition`]
//! or [`kairos_core::execution::ExecTransition`].
//!
//! # Connections
//!
//! PostgreSQL: one pool of 16 connections in `READ COMMITTED` (set on every
//! session, whatever the server's default). Deadlocks (SQLSTATE 40P01) and
//! serialization failures (40001) rerun the transaction like InnoDB's
//! deadlocks. Claims read their jobs, and the callback relay its due rows,
//! with `FOR UPDATE SKIP LOCKED`: a row another transaction holds is left
//! for the next round instead of waited for.
//!
//! MySQL: one pool of 16 connections in `READ COMMITTED`, so the hot path's
//! inserts take no gap locks (a server that binlogs in `STATEMENT` format
//! refuses writes at that level; `MIXED`, the MariaDB default, and `ROW` are
//! fine). Every multi-statement write transaction is run again, up to four
//! times in all, when InnoDB picks it as a deadlock victim. Claims and
//! admissions share their fence's `leader_fences` row (a shared lock, so
//! one term's claims run side by side); the concurrency gate takes a row of
//! its own exclusively, only when a limit applies.
//!
//! SQLite (WAL, `synchronous=NORMAL`, `busy_timeout` 5 s, foreign keys on):
//! a pool of 4 connections for reads, and a separate pool of exactly one
//! connection for every write. SQLite allows one writer at a time anyway;
//! queueing writers in the pool instead of inside SQLite means a
//! read-then-write transaction never meets `SQLITE_BUSY` half way (no lock
//! upgrade between two writers of this process), and waiting writers are
//! woken in order instead of polling SQLite's busy handler. Write
//! transactions still start with `BEGIN IMMEDIATE`, so a second process on
//! the same file (e.g. `kairos migrate`) waits up front instead of failing
//! at the first write. WAL lets readers run while the writer works.
//!
//! # Statements per call
//!
//! With `n` items per call (multi-row statements are chunked at 500 rows; the
//! counts assume one chunk):
//!
//! | call | statements |
//! |---|---|
//! | `jobs_find_due`, `jobs_count_due` | 1 (the count reads at most its cap of index entries) |
//! | `triggers_claim` | 1 fence read under a shared lock (when a term begins, + an upsert returning the stored fence, + a read on MySQL) + 1 locking read of the jobs' versions (the jobs come with the claims, as scanned) + 1 multi-row update per 64 claimed jobs on MySQL (`CASE id`) or per 256 on SQLite and PostgreSQL (joined `VALUES`), version-checked + 1 execution insert (rows `dispatched` to the worker the claim names, else `pending`) + 1 event insert (+1 read when a trigger already had an execution; +1 read of live executions when a job's overlap policy is not `allow` or its window closes; with `replace`, +1 cancel and +1 stop-request update; +1 callback insert for skipped or cancelled executions with a callback URL) |
//! | `executions_mark_dispatched` | 1 locking read + 1 update per (worker, attempt) group (usually one) + 1 event insert |
//! | `executions_requeue_unstarted` | 1 locking read + 1 update per attempt number + 1 event insert |
//! | `results_apply`, `executions_apply_verdict` | 1 locking read + 1 count of live executions (jobs that may end with a final outcome in the batch: one-shots and closed windows; none for a batch of `started` reports) + 1 read of retired incarnations (results that carry one) + 1 multi-row update per 64 changed executions and per 64 changed jobs (status, next trigger, last result and failures in a row) on MySQL (`CASE id`), per 256 on SQLite and PostgreSQL (joined `VALUES`) + 1 event insert + 1 callback insert (if any) |
//! | `executions_find_unpublished`, `executions_find_overdue`, `executions_find_unbounded` | 1 |
//! | `callbacks_claim_due` | 1 read + 1 lease update + 1 read back (PostgreSQL: the read locks, in one transaction with the update) |
//! | `workers_record_heartbeats` | 1 locking read of the workers + 1 read of retired incarnations + 1 upsert (+1 insert and 1 update per worker whose incarnation changed) |
//! | `worker_ledger`, `executions_in_flight_on` | 2 reads, 1 read |
//! | `job_create` | 1 insert (+1 read when the idempotency key exists) |
//! | `job_pause`/`resume`/`cancel` | 1 update + 1 read (cancel: + 1 locking read, 1 update, 1 event insert, 1 callback insert for its pending executions, 1 stop-request update for its running ones) |
//! | `job_update` | 1 locking read (its revision checked) + 1 update + 1 read (+1 read of live executions when the schedule changed) |
//! | `executions_stop_requested` | 1 |
//! | `job_trigger_now` | 1 locking read + 1 read of taken trigger times + 1 insert + 1 event insert |
//! | `results_apply`, `executions_apply_verdict`, for workflow nodes (issue 34) | only when the batch ends executions of node jobs: 1 read of their node rows + 1 locking read of their runs + 1 node update per ended node + 1 read of the workflows + 1 read of the runs' nodes + per node made due: 1 node update and 1 execution insert, + 1 read of the parents' outputs, 1 event insert, 1 skip update and 1 run update when there are any |
//! | the same, for child jobs | only when the batch ends executions of jobs with follow-ups: 1 read of the follow-ups + 1 locking read of the children + per child triggered: 1 read of taken trigger times, 1 insert, 1 event insert |
//! | `history_purge` (issue 45) | 1 read of up to a batch of ids through the kind's `(tenant, finished time)` index + for executions, jobs and runs one transaction: 1 delete per child table (executions: delivery attempts, deliveries, events, log lines, concurrency slots; jobs: follow-ups; runs: delivery attempts, deliveries, node rows) + 1 delete of the rows, their terminal state checked again; audit entries and sessions: 1 delete |
//!
//! plus `BEGIN`/`COMMIT` for the transactional calls.
//!
//! Measured on the 2-core development box (release build, while other
//! builds ran; before execution updates were batched): 2 000 triggers claimed in batches of 500 in ~0.3 s on
//! MariaDB and ~0.06 s on SQLite; 2 000 `started` results in batches of 200
//! in ~0.3 s / ~0.1 s; 2 000 final results with outbox rows in ~0.55 s /
//! ~0.15 s.

//!
//! # Modules
//!
//! Each port is implemented directly on [`SqlStore`] by the module of its
//! aggregate: `jobs` ([`kairos_core::store::JobStore`], with the group
//! committer in `create`), `dispatch` (the dispatcher's hot path),
//! `maintenance` (the reaper's calls), `executions` (the history the API and
//! dashboard read), `callbacks`, `tenants` (tenants, keys and the audit
//! trail), `workers`, `logs` and `retention` (the tenants' retention overrides
//! and the purge of finished history). `outcomes` applies results and verdicts for
//! both `dispatch` and `maintenance`. Below them, and importing none of them:
//! `store` (the pools, and the one retrying transaction runner), `stop` and
//! `moves` (execution moves several aggregates make), `inserts` (history and
//! outbox rows), `rows` and `sched_cols` (decoding and encoding rows),
//! `rows_update` and `sql` (statements), `db` (the drivers), `error` and
//! `dialect`. `workflows` ([`kairos_core::workflow::WorkflowStore`]) is
//! also called by `outcomes`, which advances runs as their nodes end.

mod callbacks;
mod concurrency;
mod create;
mod db;
mod dialect;
mod dispatch;
mod error;
mod executions;
mod fill;
mod inserts;
mod jobs;
mod keyset;
mod logs;
mod maintenance;
mod migrations;
mod moves;
mod outcomes;
mod partitions;
pub mod plans;
mod retention;
mod rows;
mod rows_update;
mod sched_cols;
mod sessions;
mod sql;
mod stop;
mod store;
mod tenants;
mod workers;
mod workflows;

pub use dialect::Dialect;
pub use dispatch::{due_scan_sql, lane_scan_sql};
pub use fill::{EXECUTIONS_PER_JOB, Filled, filled_execution_id, filled_job_id};
pub use stop::stop_requests_sql;
pub use store::SqlStore;

//! Kairos core: the domain every process shares, and the ports that keep it
//! independent of its databases, broker and coordination service. Depends on
//! no database, broker or Redis crate; the adapters live in `adapters/`.
//!
//! # Layout
//!
//! - [`time`]: milliseconds since the epoch, the one time unit of the domain.
//! - [`job`]: a job definition, its [`job::JobStatus`] state machine and schedule.
//! - [`execution`]: one trigger of a job and its [`execution::ExecStatus`] state machine.
//! - [`schedule`]: one-shot, cron (seconds field, IANA time zones), fixed-rate and
//!   fixed-delay schedules with their window and misfire/overlap policies.
//! - [`trigger`]: what a due trigger becomes (claims, misfires, overlaps).
//! - [`protocol`]: the JSON messages on the broker and the names of queues and keys.
//! - [`outcome`]: what a result or a reaper verdict does to an execution and its job.
//! - [`concurrency`]: limits on live executions per handler, tenant and job, and the gate.
//! - [`reconcile`]: which attempts a restarted or forgetful worker no longer holds.
//! - [`worker`]: what a worker reports about itself and what the balancer reads.
//! - [`callback`]: the callback outbox row and its body.
//! - Ports: [`store`] (storage), [`broker`] (message broker), [`coord`] (leader
//!   lease, once-only guard, stop board) and [`due`] ("a job became due" signals).
//! - [`priority`]: job priorities and the immediate lane: which due triggers
//!   are claimed first.
//! - [`overview`]: executions across jobs and a tenant's figures, for dashboards.
//! - [`tenant`]: tenants, API keys and their roles, audit entries.
//! - [`retention`]: how long finished history is kept, per tenant, and the purge's storage port.
//! - [`redact`]: the one way to print a connection URL without its secret.
//! - [`sensitive`]: which params values are masked for people who only
//!   look, and their redaction from outputs and logs.
//! - [`partition`]: jobs hashed into partitions, and which live dispatcher
//!   owns each (rendezvous hashing), for partitioned dispatch.
//! - [`shard`]: broadcast and sharded jobs: a trigger's shards and their aggregate.
//! - [`workflow`]: DAGs of job templates, their runs and what a run does next.
//! - [`supervise`]: long-lived consumer loops that reopen with backoff, and
//!   tasks whose panic stops the process.
#![warn(missing_docs, unreachable_pub)]

pub mod broker;
pub mod callback;
pub mod concurrency;
pub mod coord;
pub mod due;
pub mod execution;
pub mod job;
pub mod outcome;
pub mod overview;
pub mod partition;
pub mod priority;
pub mod protocol;
pub mod reconcile;
pub mod redact;
pub mod retention;
pub mod schedule;
pub mod sensitive;
pub mod shard;
pub mod store;
pub mod supervise;
pub mod tenant;
pub mod time;
pub mod trace;
pub mod trigger;
pub mod worker;
pub mod workflow;

//! Kairos core: the domain every process shares, and the ports that keep it
//! independent of MySQL/SQLite, RabbitMQ/in-process and Redis/in-process.
//!
//! # Layout
//!
//! - [`time`]: milliseconds since the epoch, the one time unit stored anywhere.
//! - [`job`]: a job definition, its [`job::JobStatus`] state machine and schedule.
//! - [`execution`]: one trigger of a job and its [`execution::ExecStatus`] state machine.
//! - [`schedule`]: one-shot, cron (seconds field, IANA time zones), fixed-rate and
//!   fixed-delay schedules with their window and misfire/overlap policies.
//! - [`trigger`]: what a due trigger becomes (claims, misfires, overlaps).
//! - [`protocol`]: the JSON messages on the broker and the names of queues and keys.
//! - [`outcome`]: what a result or a reaper verdict does to an execution and its job.
//! - [`worker`]: what a worker reports about itself and what the balancer reads.
//! - [`store`]: the storage port ([`store::Store`]); [`sql`] implements it for MySQL and SQLite.
//! - [`broker`]: the message broker port; [`amqp`] (RabbitMQ) and [`memory_broker`] implement it.
//! - [`coord`]: leader lease and once-only guard ports; [`redis_coord`] and [`memory_coord`] implement them.
//! - [`callback`]: the callback outbox row and its body.
//! - [`testkit`]: fresh databases and unique names for tests on real services.
//! - [`due`]: "a job became due" signals from the API to the leader (Redis pub/sub or in-process).
//! - [`connect`]: builds adapters from URLs, with errors that name the service.
#![warn(missing_docs, unreachable_pub)]

pub mod amqp;
pub mod broker;
pub mod callback;
pub mod connect;
pub mod coord;
pub mod due;
pub mod execution;
pub mod job;
pub mod memory_broker;
pub mod memory_coord;
pub mod outcome;
pub mod protocol;
pub mod redis_coord;
pub mod schedule;
pub mod sql;
pub mod store;
pub mod testkit;
pub mod time;
pub mod trigger;
pub mod worker;

//! Kairos worker: runs job handlers for the dispatcher, as a process or
//! embedded in a Rust service.
//!
//! # Layout
//!
//! The public side:
//!
//! - [`handler`]: the [`Handler`] trait, [`JobContext`] and [`HandlerOutcome`].
//! - [`builtin`]: the stock handlers `noop`, `sleep`, `fail` and `http`.
//! - `config`: [`WorkerConfig`] (one field per `KAIROS_WORKER_*` variable),
//!   its defaults and checks, and [`WorkerError`].
//! - `builder`: [`WorkerBuilder`], a config plus handlers, broker and
//!   coordination, checked into a [`Worker`].
//! - `worker`: the [`Worker`], its parts and its life (start, drain, stop).
//!
//! A running worker's state, split by concern; each task gets only the
//! parts it uses:
//!
//! - `connections`: broker, coordination, names, worker id and incarnation.
//! - `intake`: deliveries received and not yet taken, most urgent first.
//! - `ranked`: the queue both hand out by (rank, then arrival).
//! - `permits`: handler permits, the most urgent waiting dispatch first.
//! - `pool`: the bounded pool — places, permits, held and running attempts,
//!   the delivery tasks and the hard stop at the end of the grace period.
//! - `reporting`: the result outlet (`results`) and the log sink (`logs`).
//! - `load`: the cost of recent runs, CPU idle and the lifecycle state.
//!
//! Its tasks and the path of one dispatch:
//!
//! - `consume`: the delivery loop — decoding, backpressure, one task per dispatch.
//! - `attempt`: one dispatch end to end — permit, attempt key, `started`, ack, result.
//! - `execute`: one handler run in the pool — timeout, stop, panics, shutdown.
//! - `settle`: acking or requeueing a delivery that carries a batch.
//! - `results`: result messages and their grouped publishing with retries.
//! - `logs`: handlers' log lines, batched and shipped in the background.
//! - `stops`: the stop watcher — stop requests for the attempts running here.
//! - `heartbeat`: the heartbeat loop.
//! - `metrics`: the Prometheus figures (a leaf: callers hand it the numbers).
//!
//! A [`Worker`] is built with [`Worker::builder`] and runs until its shutdown
//! token is cancelled, then drains: see [`Worker::run`].

#![warn(missing_docs, unreachable_pub)]

mod attempt;
mod builder;
pub mod builtin;
mod config;
mod connections;
mod consume;
mod execute;
pub mod handler;
mod heartbeat;
mod intake;
mod load;
mod logs;
mod metrics;
mod permits;
mod pool;
mod ranked;
mod reporting;
mod results;
mod settle;
mod stops;
#[cfg(test)]
mod testing;
mod worker;

pub use builder::WorkerBuilder;
pub use config::{
    DEFAULT_ATTEMPT_KEY_TTL, DEFAULT_CAPACITY, DEFAULT_DISPATCH_BATCH_MAX, DEFAULT_GRACE_PERIOD,
    DEFAULT_HEARTBEAT_EVERY, DEFAULT_STOP_POLL, WorkerConfig, WorkerError,
};
pub use handler::{Handler, HandlerError, HandlerOutcome, JobContext, Typed, typed};
pub use worker::Worker;

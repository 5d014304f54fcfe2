//! Kairos worker: runs job handlers for the dispatcher, as a process or
//! embedded in a Rust service.
//!
//! # Layout
//!
//! - [`handler`]: the [`Handler`] trait, [`JobContext`] and [`HandlerOutcome`].
//! - [`builtin`]: the stock handlers `noop`, `sleep`, `fail` and `http`.
//! - `consume`: the delivery loop — backpressure, attempt key, `started`, ack.
//! - `execute`: one attempt in the bounded pool — timeout, stop, panics, shutdown.
//! - `stops`: the stop watcher — stop requests for the attempts running here.
//! - `results`: result messages and their publishing with retries.
//! - `heartbeat`: load figures (cost window, CPU idle) and the heartbeat loop.
//! - `shared`: the state those tasks share.
//!
//! A [`Worker`] is built with [`Worker::builder`] and runs until its shutdown
//! token is cancelled, then drains: see [`Worker::run`].

#![warn(missing_docs, unreachable_pub)]

pub mod builtin;
mod config;
mod consume;
mod execute;
pub mod handler;
mod heartbeat;
mod logs;
mod metrics;
mod results;
mod settle;
mod shared;
mod stops;

pub use config::WorkerConfig;
pub use handler::{Handler, HandlerError, HandlerOutcome, JobContext, Typed, typed};

use handler::Registry;
use kairos_core::broker::{Broker, BrokerError};
use kairos_core::coord::Coordination;
use kairos_core::protocol::{MAX_DISPATCH_BATCH, Names};
use kairos_core::supervise::spawn_critical;
use kairos_core::worker::WorkerState;
use shared::Shared;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Handlers run at once when the builder is not told otherwise.
///
/// A place is held from before the `started` report is published until the
/// handler returns, so even a handler that takes no time keeps it for a Redis
/// round trip and a persistent-message confirm: a worker's rate is capped at
/// capacity ÷ that time, and a small pool also shrinks the batches the
/// dispatcher and the worker send (docs/performance.md, "Worker capacity").
/// Handlers are async tasks, so an idle place costs nothing; a host running
/// CPU-bound handlers wants a lower setting.
pub const DEFAULT_CAPACITY: u32 = 32;
/// How long an attempt key lives when the builder is not told otherwise: as
/// long as the dispatchers' default ceiling on an attempt
/// (`KAIROS_DEFAULT_TIMEOUT_MS`), so a copy of a dispatch that turns up while
/// its attempt could still be live is skipped. Each key costs Redis about
/// 260 bytes for this long (docs/operations.md, "Redis").
pub const DEFAULT_ATTEMPT_KEY_TTL: Duration = Duration::from_secs(24 * 3600);
/// Heartbeat period when the builder is not told otherwise.
pub const DEFAULT_HEARTBEAT_EVERY: Duration = Duration::from_secs(3);
/// Time running handlers get to finish on shutdown, unless told otherwise.
pub const DEFAULT_GRACE_PERIOD: Duration = Duration::from_secs(30);
/// How often running attempts are checked for stop requests, unless told otherwise.
pub const DEFAULT_STOP_POLL: Duration = Duration::from_millis(250);
/// Worker ids end up in queue names and routing keys.
/// Largest default [`WorkerBuilder::dispatch_batch`]: a burst costs one
/// message per this many dispatches, while a batch stays small enough to fit
/// the buffer of a busy worker.
pub const DEFAULT_DISPATCH_BATCH_MAX: u32 = 64;
const MAX_ID_LEN: usize = 200;

/// Worker failures, at the crate boundary.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The builder was given something unusable.
    #[error("invalid worker configuration: {0}")]
    Config(String),
    /// The broker failed at startup (later failures are retried, not returned).
    #[error(transparent)]
    Broker(#[from] BrokerError),
}

/// A configured worker, ready to [`run`](Worker::run).
pub struct Worker {
    shared: Arc<Shared>,
    shipper: logs::Shipper,
    heartbeat_every: Duration,
    grace_period: Duration,
    stop_poll: Duration,
}

/// Builds a [`Worker`]; see [`Worker::builder`].
#[derive(Default)]
pub struct WorkerBuilder {
    id: Option<String>,
    capacity: Option<u32>,
    buffer: Option<u32>,
    dispatch_batch: Option<u32>,
    heartbeat_every: Option<Duration>,
    grace_period: Option<Duration>,
    stop_poll: Option<Duration>,
    attempt_key_ttl: Option<Duration>,
    handlers: Registry,
    group: Option<String>,
    only: Option<Vec<String>>,
    broker: Option<Arc<dyn Broker>>,
    coord: Option<Arc<dyn Coordination>>,
    names: Option<Names>,
    /// An error met while registering (e.g. the HTTP client), reported by `build`.
    deferred: Option<String>,
    /// Whether the built-in `http` handler may reach private addresses.
    http_allow_private: bool,
    /// Whether "http" is the built-in handler (rebuilt when the above changes).
    builtin_http: bool,
}

impl WorkerBuilder {
    /// Stable worker id (default: hostname + `-` + 6 random hex digits). It
    /// names the queue, so letters, digits, `-`, `_` and `.` only.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Handlers run at once (default [`DEFAULT_CAPACITY`]).
    pub fn capacity(mut self, capacity: u32) -> Self {
        self.capacity = Some(capacity);
        self
    }

    /// How long the key that lets an attempt run once is kept (default
    /// [`DEFAULT_ATTEMPT_KEY_TTL`]). A copy of a dispatch delivered after
    /// its key expired runs again, so keep it longer than a dispatch can
    /// wait in a queue and its handler can run; shorter saves Redis memory.
    pub fn attempt_key_ttl(mut self, ttl: Duration) -> Self {
        self.attempt_key_ttl = Some(ttl);
        self
    }

    /// Accepted dispatches that may wait for a free slot (default: the
    /// capacity). Beyond capacity + buffer, dispatches are refused for reroute.
    /// A waiting dispatch stays unacked until its handler starts, so for jobs
    /// that run longer than RabbitMQ's `consumer_timeout` set this to 0.
    pub fn buffer(mut self, buffer: u32) -> Self {
        self.buffer = Some(buffer);
        self
    }

    /// Most dispatches this worker takes in one message (default: the
    /// buffer, at most [`DEFAULT_DISPATCH_BATCH_MAX`], at least 1; at most
    /// [`MAX_DISPATCH_BATCH`]). A batch is taken whole once a place in pool
    /// or buffer is free (what does not fit waits beyond the buffer), or
    /// refused whole for reroute when none comes free within the full-worker
    /// wait; 1 asks for one dispatch per message.
    pub fn dispatch_batch(mut self, n: u32) -> Self {
        self.dispatch_batch = Some(n);
        self
    }

    /// Heartbeat period (default 3 s).
    pub fn heartbeat_every(mut self, every: Duration) -> Self {
        self.heartbeat_every = Some(every);
        self
    }

    /// Time running handlers get to finish on shutdown (default 30 s).
    pub fn grace_period(mut self, grace: Duration) -> Self {
        self.grace_period = Some(grace);
        self
    }

    /// How often running attempts are checked for stop requests (default 250 ms).
    pub fn stop_poll(mut self, every: Duration) -> Self {
        self.stop_poll = Some(every);
        self
    }

    /// Registers a handler under `name`; a later registration of the same
    /// name replaces the earlier one.
    pub fn handler(mut self, name: impl Into<String>, handler: impl Handler) -> Self {
        let name = name.into();
        if name == "http" {
            self.builtin_http = false;
        }
        self.handlers.insert(name, Arc::new(handler));
        self
    }

    /// Registers the stock handlers `noop`, `sleep`, `fail` and `http`.
    pub fn builtin_handlers(self) -> Self {
        self.handler("noop", builtin::Noop)
            .handler("sleep", builtin::Sleep)
            .handler("fail", builtin::Fail)
            .builtin_http()
    }

    fn builtin_http(mut self) -> Self {
        match builtin::HttpHandler::new(self.http_allow_private) {
            Ok(h) => {
                self = self.handler("http", h);
                self.builtin_http = true;
                self
            }
            Err(e) => {
                self.deferred = Some(format!("cannot set up the http handler's client: {e}"));
                self
            }
        }
    }

    /// Lets the built-in `http` handler reach loopback and private addresses
    /// (`KAIROS_HTTP_ALLOW_PRIVATE`; default: refused). Order-independent
    /// with [`WorkerBuilder::builtin_handlers`].
    pub fn http_allow_private(mut self, allow: bool) -> Self {
        self.http_allow_private = allow;
        if self.builtin_http {
            self = self.builtin_http();
        }
        self
    }

    /// Serves only the named handlers among those registered (e.g. keep
    /// `http` off workers in a sensitive network). Naming one that is not
    /// registered is a configuration error. Heartbeats announce what is
    /// served, and dispatchers send this worker nothing else.
    ///
    /// ```
    /// use kairos_worker::Worker;
    /// let builder = Worker::builder().builtin_handlers().only_handlers(["noop", "sleep"]);
    /// # let _ = builder;
    /// ```
    pub fn only_handlers<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.only = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// Worker group (default none): jobs that name a `workerGroup` run only
    /// on workers of that group; jobs without one run on any worker serving
    /// their handler.
    ///
    /// ```
    /// let builder = kairos_worker::Worker::builder().group("gpu");
    /// # let _ = builder;
    /// ```
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// The broker to consume dispatches from and publish results to (required).
    pub fn broker(mut self, broker: Arc<dyn Broker>) -> Self {
        self.broker = Some(broker);
        self
    }

    /// Coordination (required): the once-per-attempt guard and the stop
    /// requests. Redis in production, in-process for `kairos dev`.
    pub fn coordination(mut self, coord: Arc<dyn Coordination>) -> Self {
        self.coord = Some(coord);
        self
    }

    /// Queue and key names (default namespace `kairos`).
    pub fn names(mut self, names: Names) -> Self {
        self.names = Some(names);
        self
    }

    /// Checks the configuration.
    pub fn build(self) -> Result<Worker, WorkerError> {
        let config = |m: &str| WorkerError::Config(m.to_string());
        if let Some(e) = self.deferred {
            return Err(WorkerError::Config(e));
        }
        let id = self.id.unwrap_or_else(default_id);
        check_id(&id)?;
        let capacity = self.capacity.unwrap_or(DEFAULT_CAPACITY);
        if capacity == 0 {
            return Err(config("capacity must be at least 1"));
        }
        let buffer = self.buffer.unwrap_or(capacity);
        if u64::from(capacity) + u64::from(buffer) > u64::from(u16::MAX) {
            return Err(config(
                "capacity + buffer must not exceed 65535 (the prefetch limit)",
            ));
        }
        let dispatch_batch = self
            .dispatch_batch
            .unwrap_or(buffer.clamp(1, DEFAULT_DISPATCH_BATCH_MAX));
        if dispatch_batch == 0 || dispatch_batch > MAX_DISPATCH_BATCH {
            return Err(WorkerError::Config(format!(
                "dispatch batch must be 1–{MAX_DISPATCH_BATCH}"
            )));
        }
        let heartbeat_every = self.heartbeat_every.unwrap_or(DEFAULT_HEARTBEAT_EVERY);
        if heartbeat_every.is_zero() {
            return Err(config("heartbeat period must be positive"));
        }
        let broker = self.broker.ok_or_else(|| config("a broker is required"))?;
        let coord = self
            .coord
            .ok_or_else(|| config("coordination (attempt keys and stop requests) is required"))?;
        let stop_poll = self.stop_poll.unwrap_or(DEFAULT_STOP_POLL);
        if stop_poll.is_zero() {
            return Err(config("stop poll period must be positive"));
        }
        let attempt_key_ttl = self.attempt_key_ttl.unwrap_or(DEFAULT_ATTEMPT_KEY_TTL);
        if attempt_key_ttl < Duration::from_millis(1) {
            return Err(config("attempt key TTL must be at least 1 ms"));
        }
        let mut handlers = self.handlers;
        if let Some(only) = self.only {
            let unknown: Vec<&str> = only
                .iter()
                .filter(|n| handlers.get(n).is_none())
                .map(String::as_str)
                .collect();
            if !unknown.is_empty() {
                return Err(WorkerError::Config(format!(
                    "handlers {unknown:?} are not registered; this worker has: {}",
                    handlers.names().join(", ")
                )));
            }
            for name in handlers.names() {
                if !only.contains(&name) {
                    handlers.remove(&name);
                }
            }
        }
        if handlers.is_empty() {
            return Err(config("no handlers registered"));
        }
        if let Some(g) = &self.group
            && (g.trim().is_empty() || g.chars().count() > 255)
        {
            return Err(config("worker group must be 1–255 characters"));
        }
        let names = self.names.unwrap_or_default();
        let (log_sink, shipper) = logs::channel(Arc::clone(&broker), id.clone());
        let shared = Shared::new(shared::Setup {
            id,
            names,
            broker,
            coord,
            handlers,
            group: self.group,
            logs: log_sink,
            capacity,
            buffer,
            dispatch_batch,
            attempt_key_ttl,
        });
        Ok(Worker {
            shipper,
            shared: Arc::new(shared),
            heartbeat_every,
            grace_period: self.grace_period.unwrap_or(DEFAULT_GRACE_PERIOD),
            stop_poll,
        })
    }
}

fn check_id(id: &str) -> Result<(), WorkerError> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if id.is_empty() || id.len() > MAX_ID_LEN || !id.chars().all(ok_char) {
        return Err(WorkerError::Config(format!(
            "worker id {id:?} must be 1–{MAX_ID_LEN} letters, digits, '-', '_' or '.'"
        )));
    }
    Ok(())
}

/// Hostname (made safe for queue names) plus a random suffix, so two workers
/// on one host never share a queue.
fn default_id() -> String {
    let host: String = sysinfo::System::host_name()
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .take(MAX_ID_LEN - 7)
        .collect();
    let host = if host.is_empty() {
        "worker".to_string()
    } else {
        host
    };
    format!("{host}-{:06x}", rand::random::<u32>() & 0x00ff_ffff)
}

impl Worker {
    /// A builder with the defaults.
    pub fn builder() -> WorkerBuilder {
        WorkerBuilder::default()
    }

    /// Handler names this worker serves (announced in its heartbeats).
    pub fn handlers(&self) -> Vec<String> {
        self.shared.handlers.names()
    }

    /// This worker's id (its queue is `<namespace>.worker.<id>`).
    pub fn id(&self) -> &str {
        &self.shared.id
    }

    /// Declares the queue, heartbeats and consumes until `shutdown` is
    /// cancelled; then stops consuming (deliveries whose handler has not
    /// started go back to the queue, and the dispatcher requeues them once
    /// this worker is offline), reports `draining`, gives running handlers the
    /// grace period, reports the ones still running as failed so they are
    /// retried, and reports `offline`. Errors only if the broker fails at startup.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), WorkerError> {
        let shared = self.shared;
        metrics::register(&shared);
        shared.broker.worker_queue_declare(&shared.id).await?;
        tracing::info!(worker_id = %shared.id, capacity = shared.capacity, buffer = shared.buffer, "worker started");
        let beats_stop = CancellationToken::new();
        let beats = spawn_critical(
            "heartbeats",
            heartbeat::run(
                Arc::clone(&shared),
                self.heartbeat_every,
                beats_stop.clone(),
            ),
        );
        let stop_watch = spawn_critical(
            "stop watcher",
            stops::run(Arc::clone(&shared), self.stop_poll, beats_stop.clone()),
        );
        let shipper = spawn_critical("log shipper", self.shipper.run(beats_stop.clone()));

        consume::run(Arc::clone(&shared), shutdown).await;

        shared.set_state(WorkerState::Draining);
        shared.tasks.close();
        tracing::info!(worker_id = %shared.id, in_flight = shared.tasks.len(), grace = ?self.grace_period, "worker draining");
        if tokio::time::timeout(self.grace_period, shared.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!(worker_id = %shared.id, unfinished = shared.tasks.len(), "grace period over; stopping handlers still running and reporting them failed");
            shared.hard_stop.cancel();
            shared.tasks.wait().await;
        }
        shared.set_state(WorkerState::Offline);
        beats_stop.cancel();
        if let Err(e) = beats.await {
            tracing::error!(worker_id = %shared.id, "heartbeat task failed: {e}");
        }
        if let Err(e) = stop_watch.await {
            tracing::error!(worker_id = %shared.id, "stop watcher failed: {e}");
        }
        if let Err(e) = shipper.await {
            tracing::error!(worker_id = %shared.id, "log shipper failed: {e}");
        }
        tracing::info!(worker_id = %shared.id, "worker stopped");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_ids_are_queue_safe_and_distinct() {
        let (a, b) = (default_id(), default_id());
        assert!(check_id(&a).is_ok(), "{a}");
        assert_ne!(a, b);
        let suffix = &a[a.len() - 7..];
        assert!(suffix.starts_with('-'));
        assert!(suffix[1..].chars().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn bad_ids_are_refused() {
        for id in ["", "a b", "w/1", "ü"] {
            assert!(check_id(id).is_err(), "{id:?}");
        }
        assert!(check_id("w-1.a_b").is_ok());
    }
}

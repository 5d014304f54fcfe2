//! [`WorkerBuilder`]: a [`WorkerConfig`] plus what is not a setting (the
//! handlers, the broker and coordination, the names, the stop poll), checked
//! into a [`Worker`] by [`WorkerBuilder::build`].

use crate::builtin;
use crate::config::{DEFAULT_STOP_POLL, WorkerConfig, WorkerError, millis};
use crate::handler::{Handler, Registry};
use crate::worker::{Parts, Worker};
use kairos_core::broker::Broker;
use kairos_core::coord::Coordination;
use kairos_core::protocol::Names;
use kairos_core::supervise::CriticalTasks;
use std::sync::Arc;
use std::time::Duration;

/// Builds a [`Worker`]; see [`Worker::builder`].
#[derive(Default)]
pub struct WorkerBuilder {
    config: WorkerConfig,
    stop_poll: Option<Duration>,
    /// Whether the queues stay when the worker stops (default: deleted).
    keep_queues: bool,
    handlers: Registry,
    only: Option<Vec<String>>,
    broker: Option<Arc<dyn Broker>>,
    coord: Option<Arc<dyn Coordination>>,
    names: Option<Names>,
    /// Where the worker's long-lived tasks are watched.
    tasks: CriticalTasks,
    /// An error met while registering (e.g. the HTTP client), reported by `build`.
    deferred: Option<String>,
    /// Whether "http" is the built-in handler (rebuilt when
    /// `http_allow_private` changes).
    builtin_http: bool,
}

impl Worker {
    /// A builder with the defaults.
    pub fn builder() -> WorkerBuilder {
        WorkerBuilder::default()
    }
}

impl WorkerBuilder {
    /// Every setting at once, replacing those set before (the setters below
    /// each change one field of it). Checked by [`WorkerBuilder::build`].
    pub fn config(mut self, config: WorkerConfig) -> Self {
        let allow_private = config.http_allow_private;
        self.config = config;
        self.http_allow_private(allow_private)
    }

    /// Stable worker id (default: hostname + `-` + 6 random hex digits). It
    /// names the queue, so letters, digits, `-`, `_` and `.` only.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.config.worker_id = Some(id.into());
        self
    }

    /// Handlers run at once (default [`DEFAULT_CAPACITY`](crate::DEFAULT_CAPACITY)).
    pub fn capacity(mut self, capacity: u32) -> Self {
        self.config.worker_capacity = capacity;
        self
    }

    /// How long the key that lets an attempt run once is kept (default
    /// [`DEFAULT_ATTEMPT_KEY_TTL`](crate::DEFAULT_ATTEMPT_KEY_TTL), at least
    /// a minute). A copy of a dispatch delivered after its key expired runs
    /// again, so keep it longer than a dispatch can wait in a queue and its
    /// handler can run; shorter saves Redis memory.
    pub fn attempt_key_ttl(mut self, ttl: Duration) -> Self {
        self.config.worker_attempt_key_ttl_ms = millis(ttl);
        self
    }

    /// Accepted dispatches that may wait for a free slot (default: the
    /// capacity). Beyond capacity + buffer, dispatches are refused for reroute.
    /// A waiting dispatch stays unacked until its handler starts, so for jobs
    /// that run longer than RabbitMQ's `consumer_timeout` set this to 0.
    pub fn buffer(mut self, buffer: u32) -> Self {
        self.config.worker_buffer = Some(buffer);
        self
    }

    /// Most dispatches this worker takes in one message (default: the
    /// buffer, at most
    /// [`DEFAULT_DISPATCH_BATCH_MAX`](crate::DEFAULT_DISPATCH_BATCH_MAX), at
    /// least 1; at most
    /// [`MAX_DISPATCH_BATCH`](kairos_core::protocol::MAX_DISPATCH_BATCH)). A
    /// batch is taken whole once a place in pool or buffer is free (what does
    /// not fit waits beyond the buffer), or refused whole for reroute when
    /// none comes free within the full-worker wait; 1 asks for one dispatch
    /// per message.
    pub fn dispatch_batch(mut self, n: u32) -> Self {
        self.config.worker_dispatch_batch = Some(n);
        self
    }

    /// Whether to consume (and offer) the immediate queue, where dispatchers
    /// send work someone waits for (default: yes).
    pub fn immediate_queue(mut self, consume: bool) -> Self {
        self.config.worker_immediate_queue = consume;
        self
    }

    /// Heartbeat period (default 3 s).
    pub fn heartbeat_every(mut self, every: Duration) -> Self {
        self.config.worker_heartbeat_ms = millis(every);
        self
    }

    /// Time running handlers get to finish on shutdown (default 30 s).
    pub fn grace_period(mut self, grace: Duration) -> Self {
        self.config.worker_grace_ms = millis(grace);
        self
    }

    /// How often running attempts are checked for stop requests (default 250 ms).
    pub fn stop_poll(mut self, every: Duration) -> Self {
        self.stop_poll = Some(every);
        self
    }

    /// Keeps this worker's queues when it stops, instead of deleting them
    /// (deregistration). For an embedded worker whose id comes straight back
    /// and whose owner inspects the queue between runs (tests); if it does
    /// not come back, the dispatcher's reaper deletes them anyway.
    pub fn keep_queues_on_stop(mut self) -> Self {
        self.keep_queues = true;
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
        match builtin::HttpHandler::new(self.config.http_allow_private) {
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
        self.config.http_allow_private = allow;
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
        self.config.worker_group = Some(group.into());
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

    /// Watches the worker's long-lived tasks (the dispatch intake, the
    /// heartbeats, the stop watcher, the log shipper) in `tasks`, so the
    /// process's `/readyz` reports one that ended. A panic in any of them
    /// stops the process (see [`kairos_core::supervise::spawn_critical`]).
    pub fn critical_tasks(mut self, tasks: CriticalTasks) -> Self {
        self.tasks = tasks;
        self
    }

    /// Checks the configuration ([`WorkerConfig::validate`]) and what is
    /// not a setting.
    pub fn build(self) -> Result<Worker, WorkerError> {
        let config = |m: &str| WorkerError::Config(m.to_string());
        if let Some(e) = self.deferred {
            return Err(WorkerError::Config(e));
        }
        let settings = self.config.resolve()?;
        let broker = self.broker.ok_or_else(|| config("a broker is required"))?;
        let coord = self
            .coord
            .ok_or_else(|| config("coordination (attempt keys and stop requests) is required"))?;
        let stop_poll = self.stop_poll.unwrap_or(DEFAULT_STOP_POLL);
        if stop_poll.is_zero() {
            return Err(config("stop poll period must be positive"));
        }
        let handlers = served(self.handlers, self.only)?;
        let parts = Parts {
            handlers,
            names: self.names.unwrap_or_default(),
            broker,
            coord,
            stop_poll,
            tasks: self.tasks,
            deregister: !self.keep_queues,
        };
        Ok(Worker::new(settings, parts))
    }
}

/// The handlers `only` keeps of those registered (all without it); naming
/// one not registered, or keeping none, is an error.
fn served(mut handlers: Registry, only: Option<Vec<String>>) -> Result<Registry, WorkerError> {
    if let Some(only) = only {
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
        return Err(WorkerError::Config("no handlers registered".into()));
    }
    Ok(handlers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DEFAULT_CAPACITY;
    use kairos_inproc::{MemoryBroker, MemoryCoord};

    fn connected() -> WorkerBuilder {
        Worker::builder()
            .broker(Arc::new(MemoryBroker::new(Names::new("builder"))))
            .coordination(Arc::new(MemoryCoord::new()))
    }

    #[test]
    fn the_setters_write_into_the_config() {
        let b = Worker::builder()
            .id("w-1")
            .capacity(4)
            .buffer(2)
            .dispatch_batch(3)
            .immediate_queue(false)
            .heartbeat_every(Duration::from_millis(250))
            .grace_period(Duration::from_secs(5))
            .attempt_key_ttl(Duration::from_secs(120))
            .group("gpu")
            .http_allow_private(true);
        assert_eq!(
            b.config,
            WorkerConfig {
                worker_id: Some("w-1".into()),
                worker_capacity: 4,
                worker_buffer: Some(2),
                worker_dispatch_batch: Some(3),
                worker_immediate_queue: false,
                worker_heartbeat_ms: 250,
                worker_grace_ms: 5000,
                worker_attempt_key_ttl_ms: 120_000,
                worker_group: Some("gpu".into()),
                http_allow_private: true,
            }
        );
    }

    #[test]
    fn a_config_replaces_the_settings_and_setters_still_apply_after_it() {
        let cfg = WorkerConfig {
            worker_id: Some("from-config".into()),
            worker_capacity: 7,
            ..Default::default()
        };
        let w = connected()
            .capacity(3)
            .config(cfg)
            .buffer(1)
            .builtin_handlers()
            .build()
            .unwrap();
        assert_eq!(w.id(), "from-config");
        let b = Worker::builder()
            .capacity(3)
            .config(WorkerConfig::default());
        assert_eq!(b.config.worker_capacity, DEFAULT_CAPACITY);
    }

    #[test]
    fn build_refuses_what_validate_refuses() {
        let err = connected()
            .builtin_handlers()
            .attempt_key_ttl(Duration::from_secs(59))
            .build()
            .err()
            .expect("refused");
        assert!(
            err.to_string()
                .contains("KAIROS_WORKER_ATTEMPT_KEY_TTL_MS must be at least 60000"),
            "{err}"
        );
    }

    #[test]
    fn what_is_not_a_setting_is_checked_too() {
        let msg = |b: WorkerBuilder| b.build().err().expect("refused").to_string();
        assert!(msg(Worker::builder().builtin_handlers()).contains("a broker is required"));
        assert!(msg(connected()).contains("no handlers registered"));
        assert!(
            msg(connected().builtin_handlers().only_handlers(["nope"]))
                .contains(r#"handlers ["nope"] are not registered"#)
        );
        assert!(
            msg(connected().builtin_handlers().stop_poll(Duration::ZERO)).contains("stop poll")
        );
        let w = connected()
            .builtin_handlers()
            .only_handlers(["noop"])
            .build()
            .unwrap();
        assert_eq!(w.handlers(), ["noop"]);
    }
}

//! The whole system in one process, as `kairos dev` runs it: the API, a
//! dispatcher, one worker, and the callback relay, on SQLite (or the
//! configured database) with the in-process broker, lease and due signal.
//!
//! `kairos dev` is this with the built-in handlers; a Rust service can run
//! it with its own handlers to try them without MySQL, Redis or RabbitMQ:
//!
//! ```no_run
//! use kairos::embedded::Embedded;
//! use kairos_worker::{HandlerOutcome, JobContext};
//!
//! # async fn run() -> Result<(), kairos::embedded::EmbeddedError> {
//! let shutdown = tokio_util::sync::CancellationToken::new();
//! let running = Embedded::new()
//!     .database_url("sqlite://demo.db")
//!     .http_addr("127.0.0.1:0")
//!     .worker(|w| {
//!         w.builtin_handlers().handler("hello", |ctx: JobContext| async move {
//!             ctx.info("hello from my handler");
//!             HandlerOutcome::Success(ctx.params)
//!         })
//!     })
//!     .start(shutdown.clone())
//!     .await?;
//! println!("API at http://{}", running.addr());
//! running.wait().await;
//! # Ok(()) }
//! ```
//!
//! Shutdown runs in two phases so nothing is left unrecorded: first the API
//! and the leader stop and the worker drains (running handlers finish or are
//! reported for retry); then the result consumers and the relay stop.

use crate::connect::{self, ConnectError};
use kairos_api::{ApiConfig, AppState};
use kairos_callback_relay::{Relay, RelayConfig};
use kairos_core::protocol::Names;
use kairos_core::store::Store;
use kairos_core::supervise::{CriticalTasks, spawn_critical};
use kairos_core::workflow::budget::RunLimits;
use kairos_dispatcher::logs::LogConfig;
use kairos_dispatcher::retention::RetentionConfig;
use kairos_dispatcher::{Dispatcher, DispatcherConfig, reaper};
use kairos_inproc::{MemoryBroker, MemoryCoord, MemoryDue};
use kairos_worker::{Worker, WorkerBuilder, WorkerError};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// The embedded worker's id. Stable across restarts, so work it held when the
/// previous run stopped can be found and retried.
pub const WORKER_ID: &str = "dev-worker";
/// The database `kairos dev` opens unless told otherwise.
pub const DEV_DATABASE_URL: &str = "sqlite://kairos.db";
/// Callback secret when none is set (for local use only).
pub const DEV_SECRET: &str = "kairos-dev-secret";

/// Why the embedded system could not start.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
    /// The database could not be opened or migrated.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The API address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// Address asked for.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The worker's configuration was refused.
    #[error(transparent)]
    Worker(#[from] WorkerError),
    /// The callback relay's configuration was refused.
    #[error("callback relay: {0}")]
    Relay(String),
    /// The admin key could not be made or kept.
    #[error("admin key: {0}")]
    Key(String),
}

type WorkerSetup = Box<dyn FnOnce(WorkerBuilder) -> WorkerBuilder + Send>;

/// Configures and starts the embedded system; see the [module docs](self).
pub struct Embedded {
    database_url: String,
    http_addr: String,
    worker: WorkerSetup,
    callback_secret: String,
    callback_allow_private: bool,
    logs: LogConfig,
    retention: RetentionConfig,
    reaper: reaper::ReaperConfig,
    prometheus: Option<metrics_exporter_prometheus::PrometheusHandle>,
    api: ApiConfig,
    run_limits: RunLimits,
}

impl Default for Embedded {
    fn default() -> Self {
        Self::new()
    }
}

impl Embedded {
    /// Defaults: `sqlite://kairos.db`, `127.0.0.1:8080`, a worker with the
    /// built-in handlers, the dev callback secret, private callback
    /// addresses allowed.
    ///
    /// ```
    /// let e = kairos::embedded::Embedded::new();
    /// # let _ = e;
    /// ```
    pub fn new() -> Self {
        Self {
            database_url: DEV_DATABASE_URL.into(),
            http_addr: "127.0.0.1:8080".into(),
            worker: Box::new(WorkerBuilder::builtin_handlers),
            callback_secret: DEV_SECRET.into(),
            callback_allow_private: true,
            logs: LogConfig::default(),
            retention: RetentionConfig::default(),
            reaper: reaper::ReaperConfig::default(),
            prometheus: None,
            api: ApiConfig::default(),
            run_limits: RunLimits::default(),
        }
    }

    /// The budgets of follow-up chains and workflow runs (executions, parent
    /// outputs); the defaults otherwise.
    pub fn run_limits(mut self, limits: RunLimits) -> Self {
        self.run_limits = limits;
        self
    }

    /// The API's limits (create rate, live jobs); the defaults otherwise.
    pub fn api_config(mut self, api: ApiConfig) -> Self {
        self.api = api;
        self
    }

    /// Database URL (`sqlite://…`, `mysql://…` or `postgres://…`); migrated at start.
    ///
    /// ```
    /// let e = kairos::embedded::Embedded::new().database_url("sqlite://demo.db");
    /// # let _ = e;
    /// ```
    pub fn database_url(mut self, url: impl Into<String>) -> Self {
        self.database_url = url.into();
        self
    }

    /// API listen address (`127.0.0.1:0` picks a free port; see [`Running::addr`]).
    ///
    /// ```
    /// let e = kairos::embedded::Embedded::new().http_addr("127.0.0.1:0");
    /// # let _ = e;
    /// ```
    pub fn http_addr(mut self, addr: impl Into<String>) -> Self {
        self.http_addr = addr.into();
        self
    }

    /// Sets up the worker: register handlers, capacity, … The broker,
    /// coordination, names and id are set by the embedded system. The
    /// default registers the built-in handlers; a setup that replaces it
    /// calls `builtin_handlers()` itself if it wants them.
    ///
    /// ```
    /// use kairos_worker::{HandlerOutcome, JobContext};
    /// let e = kairos::embedded::Embedded::new().worker(|w| {
    ///     w.capacity(4).handler("echo", |ctx: JobContext| async move {
    ///         HandlerOutcome::Success(ctx.params)
    ///     })
    /// });
    /// # let _ = e;
    /// ```
    pub fn worker(
        mut self,
        setup: impl FnOnce(WorkerBuilder) -> WorkerBuilder + Send + 'static,
    ) -> Self {
        self.worker = Box::new(setup);
        self
    }

    /// Callback signing secret (default [`DEV_SECRET`]).
    ///
    /// ```
    /// let e = kairos::embedded::Embedded::new().callback_secret("s3cret");
    /// # let _ = e;
    /// ```
    pub fn callback_secret(mut self, secret: impl Into<String>) -> Self {
        self.callback_secret = secret.into();
        self
    }

    /// Whether callbacks may go to loopback and private addresses (default `true`).
    ///
    /// ```
    /// let e = kairos::embedded::Embedded::new().callback_allow_private(false);
    /// # let _ = e;
    /// ```
    pub fn callback_allow_private(mut self, allow: bool) -> Self {
        self.callback_allow_private = allow;
        self
    }

    /// What is kept of execution logs (default: 1000 lines / 256 KiB per
    /// execution, 72 h).
    ///
    /// ```
    /// let e = kairos::embedded::Embedded::new()
    ///     .log_config(kairos_dispatcher::logs::LogConfig::default());
    /// # let _ = e;
    /// ```
    pub fn log_config(mut self, logs: LogConfig) -> Self {
        self.logs = logs;
        self
    }

    /// How long finished history is kept (default: executions, one-shot
    /// jobs and workflow runs 30 days, audit entries 365 days, expired
    /// sessions a day), tenants' overrides aside.
    ///
    /// ```
    /// let e = kairos::embedded::Embedded::new()
    ///     .retention_config(kairos_dispatcher::retention::RetentionConfig::default());
    /// # let _ = e;
    /// ```
    pub fn retention_config(mut self, retention: RetentionConfig) -> Self {
        self.retention = retention;
        self
    }

    /// How the dispatcher recovers work nothing else ends: dead workers,
    /// the default execution timeout (`KAIROS_DEFAULT_TIMEOUT_MS`, a day by
    /// default), the reconcile grace (`KAIROS_RECONCILE_GRACE_MS`).
    ///
    /// ```
    /// let mut reaper = kairos_dispatcher::reaper::ReaperConfig::default();
    /// reaper.default_timeout_ms = 600_000;
    /// let e = kairos::embedded::Embedded::new().reaper_config(reaper);
    /// # let _ = e;
    /// ```
    pub fn reaper_config(mut self, reaper: reaper::ReaperConfig) -> Self {
        self.reaper = reaper;
        self
    }

    /// Serves `GET /metrics` from this Prometheus handle (`kairos dev`
    /// installs the process-wide recorder; an embedding service may not want
    /// that, and then `/metrics` is empty).
    pub fn prometheus(mut self, handle: metrics_exporter_prometheus::PrometheusHandle) -> Self {
        self.prometheus = Some(handle);
        self
    }

    /// Opens the database, binds the API and starts every part; they run
    /// until `shutdown` is cancelled (then see [`Running::wait`]).
    pub async fn start(self, shutdown: CancellationToken) -> Result<Running, EmbeddedError> {
        let store: Arc<dyn Store> = Arc::new(
            connect::database(&self.database_url, true)
                .await?
                .with_run_limits(self.run_limits),
        );
        let listener = tokio::net::TcpListener::bind(&self.http_addr)
            .await
            .map_err(|source| EmbeddedError::Listen {
                addr: self.http_addr.clone(),
                source,
            })?;
        let addr = listener
            .local_addr()
            .map_err(|source| EmbeddedError::Listen {
                addr: self.http_addr.clone(),
                source,
            })?;
        let names = Names::default();
        let coord = Arc::new(MemoryCoord::new());
        let attempts = reaper::Attempts {
            coord: coord.clone(),
            names: names.clone(),
        };
        recover_interrupted(store.as_ref(), &attempts).await;
        let (admin_key, key_file, new_key) =
            crate::dev_key::ensure(store.as_ref(), &self.database_url)
                .await
                .map_err(|e| EmbeddedError::Key(format!("{e:#}")))?;

        let broker = Arc::new(MemoryBroker::new(names.clone()));
        let relay_wake = Arc::new(Notify::new());
        let due = Arc::new(MemoryDue::new());
        // The dispatcher's, worker's and relay's long-lived tasks, for the
        // API's /readyz.
        let tasks = CriticalTasks::new();
        let dispatcher = Dispatcher::new(
            store.clone(),
            broker.clone(),
            coord.clone(),
            DispatcherConfig {
                names: names.clone(),
                logs: self.logs,
                retention: self.retention,
                reaper: self.reaper,
                ..DispatcherConfig::default()
            },
        )
        .retention(store.clone())
        .notify_callbacks(relay_wake.clone())
        .due_signal(due.clone())
        .critical_tasks(tasks.clone());
        let worker = (self.worker)(Worker::builder())
            .id(WORKER_ID)
            .broker(broker.clone())
            .coordination(coord.clone())
            .names(names)
            .critical_tasks(tasks.clone())
            .build()?;
        let mut relay_cfg = RelayConfig::new(self.callback_secret, "dev-relay");
        relay_cfg.callback_allow_private = self.callback_allow_private;
        let relay = Relay::new(store.clone(), relay_cfg)
            .map_err(|e| EmbeddedError::Relay(e.to_string()))?
            .critical_tasks(tasks.clone());
        let mut state = AppState::new(store.clone(), self.api)
            .with_ready_check(Arc::new(crate::ops::BrokerCheck(broker.clone())))
            .with_ready_check(Arc::new(crate::ops::CoordCheck(coord.clone())))
            .with_ready_check(Arc::new(crate::ops::TasksCheck(tasks)));
        if let Some(p) = self.prometheus {
            state = state.with_prometheus(p);
        }
        state = state.with_due_notifier(kairos_api::due::merging_notifier(due));

        let front = shutdown;
        let back = CancellationToken::new();
        let handlers = worker.handlers();
        // One process, four services: a panic in any of them stops the
        // process rather than leave the others running without it.
        let api = spawn_critical(
            "api",
            crate::web::serve(listener, state, front.clone().cancelled_owned()),
        );
        let dispatcher = spawn_critical(
            "dispatcher",
            dispatcher.run_until(front.clone(), back.clone()),
        );
        let worker = spawn_critical("worker", worker.run(front.clone()));
        let relay = spawn_critical("callback relay", relay.run(back.clone(), relay_wake));
        Ok(Running {
            addr,
            handlers,
            admin_key,
            key_file,
            new_key,
            front,
            back,
            api,
            dispatcher,
            worker,
            relay,
        })
    }
}

/// A started embedded system.
pub struct Running {
    addr: SocketAddr,
    handlers: Vec<String>,
    admin_key: String,
    key_file: std::path::PathBuf,
    new_key: bool,
    front: CancellationToken,
    back: CancellationToken,
    api: JoinHandle<Result<(), std::io::Error>>,
    dispatcher: JoinHandle<()>,
    worker: JoinHandle<Result<(), WorkerError>>,
    relay: JoinHandle<Result<(), kairos_callback_relay::RelayError>>,
}

impl Running {
    /// Where the API listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The handlers the embedded worker serves.
    pub fn handlers(&self) -> &[String] {
        &self.handlers
    }

    /// An admin key of the `default` tenant, for `Authorization: Bearer …`:
    /// made on the first start and kept in [`Running::key_file`].
    pub fn admin_key(&self) -> &str {
        &self.admin_key
    }

    /// Where the admin key is kept (beside a SQLite database).
    pub fn key_file(&self) -> &std::path::Path {
        &self.key_file
    }

    /// Whether the admin key was made by this start.
    pub fn key_is_new(&self) -> bool {
        self.new_key
    }

    /// Waits for the shutdown token, then stops in two phases: the API,
    /// the leader and the worker first (running handlers finish or are
    /// reported for retry), then the consumers and the relay.
    pub async fn wait(self) {
        self.front.cancelled().await;
        match self.worker.await {
            Ok(Ok(())) => info!("worker drained"),
            Ok(Err(e)) => warn!(error = %e, "worker stopped with an error"),
            Err(e) => warn!(error = %e, "worker task failed"),
        }
        self.back.cancel();
        let _ = self.dispatcher.await;
        if let Ok(Err(e)) = self.relay.await {
            warn!(error = %e, "callback relay stopped with an error");
        }
        if let Ok(Err(e)) = self.api.await {
            warn!(error = %e, "API stopped with an error");
        }
    }
}

/// Attempts the embedded worker held when the previous run ended abruptly
/// (killed, power loss) can never report: their broker lived in memory. They
/// are rescued like a dead worker's: unstarted ones are published again,
/// started ones are lost and retried if the job allows.
async fn recover_interrupted(store: &dyn Store, attempts: &reaper::Attempts) {
    let reason = "kairos dev stopped while this attempt was in flight";
    match reaper::rescue_work_of(store, attempts, WORKER_ID, reason).await {
        Ok(r) if r.requeued > 0 || r.lost > 0 => {
            info!(
                requeued = r.requeued,
                lost = r.lost,
                "recovered executions interrupted by the previous run"
            )
        }
        Ok(_) => {}
        Err(e) => warn!(error = %e, "cannot recover interrupted executions"),
    }
}

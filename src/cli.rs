//! Command-line interface: subcommands and the settings each one reads. Every
//! setting can come from a flag, its `KAIROS_*` environment variable, or the
//! TOML file given with `--config` (in that order of precedence).

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// Kairos: a distributed job scheduler for systems that submit work over HTTP.
///
/// Every process reads KAIROS_LOG (log filter), KAIROS_LOG_FORMAT (text or
/// json) and KAIROS_OTLP_ENDPOINT (export spans to an OTLP/HTTP collector).
///
/// Callers create one-shot or cron jobs through the REST API (`kairos api`);
/// dispatchers (`kairos dispatcher`, one of them leader) send each due trigger to
/// one worker (`kairos worker`) through RabbitMQ; results come back to the
/// dispatchers; `kairos callback-relay` delivers signed callbacks. `kairos dev`
/// runs all of it in one process with no external service.
#[derive(Debug, Parser)]
#[command(name = "kairos", version)]
pub struct Cli {
    /// TOML file setting the same keys as the environment variables, in lower
    /// case without the prefix (e.g. `database_url = "mysql://…"`).
    #[arg(long, global = true, env = "KAIROS_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// One subcommand per process.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Apply the database schema (MySQL, PostgreSQL or SQLite), then exit.
    ///
    /// Reads KAIROS_DATABASE_URL.
    Migrate(MigrateArgs),
    /// Serve the REST API. Writes jobs to the database; never talks to workers.
    ///
    /// Reads KAIROS_DATABASE_URL and KAIROS_HTTP_ADDR; with KAIROS_REDIS_URL
    /// (and KAIROS_NAMESPACE) it wakes the leader dispatcher when a job is due.
    /// Every /openapi/* route needs an API key (`kairos keys create`).
    /// KAIROS_API_CREATE_RATE, KAIROS_API_CREATE_BURST and
    /// KAIROS_API_MAX_LIVE_JOBS set the default limits; KAIROS_METRICS_ADDR
    /// moves /metrics to its own listener.
    Api(ApiArgs),
    /// Run a dispatcher. Any number may run; the one holding the Redis lease
    /// dispatches, every one records results and heartbeats.
    ///
    /// Reads KAIROS_DATABASE_URL, KAIROS_REDIS_URL, KAIROS_AMQP_URL,
    /// KAIROS_AMQP_QUEUE_TYPE, KAIROS_NAMESPACE, KAIROS_BALANCER,
    /// KAIROS_LEASE_TTL_MS, KAIROS_WORKER_DEAD_AFTER_MS and KAIROS_METRICS_ADDR.
    Dispatcher(DispatcherArgs),
    /// Run a worker with the built-in handlers (noop, sleep, fail, http).
    ///
    /// Reads KAIROS_REDIS_URL, KAIROS_AMQP_URL, KAIROS_AMQP_QUEUE_TYPE,
    /// KAIROS_NAMESPACE, KAIROS_WORKER_ID, KAIROS_WORKER_CAPACITY,
    /// KAIROS_WORKER_BUFFER, KAIROS_WORKER_DISPATCH_BATCH,
    /// KAIROS_WORKER_HEARTBEAT_MS, KAIROS_WORKER_GRACE_MS,
    /// KAIROS_METRICS_ADDR and KAIROS_HTTP_ALLOW_PRIVATE.
    Worker(WorkerArgs),
    /// Deliver callbacks from the outbox with signatures and retries.
    ///
    /// Reads KAIROS_DATABASE_URL, KAIROS_CALLBACK_SECRET,
    /// KAIROS_CALLBACK_ALLOW_PRIVATE and KAIROS_METRICS_ADDR.
    CallbackRelay(RelayArgs),
    /// Run everything in one process on embedded defaults: SQLite file,
    /// in-process broker and lease, one worker. Needs no external service.
    ///
    /// Reads KAIROS_DATABASE_URL (default sqlite://kairos.db), KAIROS_HTTP_ADDR,
    /// KAIROS_WORKER_CAPACITY, KAIROS_CALLBACK_SECRET and the API's limits.
    /// Creates the `default` tenant's admin key on first start and keeps it
    /// beside the database (`kairos.db.key`).
    Dev(DevArgs),
    /// Measure a deployment, like pgbench or redis-benchmark: jobs per second
    /// and latency percentiles, from the server's own timestamps.
    ///
    /// Against a running API (--url) or, without one, a `kairos dev` it starts
    /// itself on a temporary SQLite file. Workloads: `create` (N jobs from C
    /// connections, create → succeeded), `burst` (N jobs due at one instant),
    /// `cron` (M every-second schedules, trigger lateness).
    Bench(BenchArgs),
    /// Manage tenants: create, list, set limits, rotate the callback secret.
    ///
    /// Reads KAIROS_DATABASE_URL; applies the schema first, so it works on a
    /// fresh database.
    #[command(subcommand)]
    Tenants(TenantsCommand),
    /// Manage API keys: create (the key is printed once), list, revoke.
    ///
    /// Reads KAIROS_DATABASE_URL; applies the schema first.
    #[command(subcommand)]
    Keys(KeysCommand),
}

/// What `kairos bench` measures and against what.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Workload to run.
    #[arg(value_enum, default_value = "create")]
    pub workload: BenchWorkload,
    /// Base URL of a running API; without it an embedded `kairos dev` is
    /// started on a temporary SQLite file and stopped afterwards.
    #[arg(long, env = "KAIROS_BENCH_URL", value_name = "URL")]
    pub url: Option<String>,
    /// API key sent as `Authorization: Bearer …`, for deployments that need one.
    #[arg(long, env = "KAIROS_BENCH_KEY", value_name = "KEY")]
    pub key: Option<String>,
    /// Jobs to create (`create`, `burst`).
    #[arg(short = 'n', long, default_value_t = 2_000)]
    pub jobs: usize,
    /// Concurrent keep-alive connections creating jobs.
    #[arg(short = 'c', long, default_value_t = 32)]
    pub connections: usize,
    /// Create through `POST /openapi/jobs/batch`, this many jobs a request
    /// (1 = one `POST /openapi/jobs` a job).
    #[arg(long, default_value_t = 1, value_name = "JOBS")]
    pub batch: usize,
    /// `burst`: how far in the future the common due time is set, so every
    /// job is stored before it; default: room for 1,000 creates a second + 3 s.
    #[arg(long, value_name = "MS")]
    pub lead_ms: Option<u64>,
    /// `cron`: every-second schedules to run.
    #[arg(long, default_value_t = 100)]
    pub schedules: usize,
    /// `cron`: how long to let them fire.
    #[arg(long, default_value_t = 10, value_name = "SECONDS")]
    pub seconds: u64,
    /// Before the workload, store this many one-shot jobs due in 30 days
    /// (through the batch endpoint), to measure with a large table.
    #[arg(long, default_value_t = 0, value_name = "JOBS")]
    pub preload: usize,
    /// Before the workload, store this many schedules firing once a minute
    /// (at second 0), to measure under a steady cron load.
    #[arg(long, default_value_t = 0, value_name = "SCHEDULES")]
    pub preload_cron: usize,
    /// Give up waiting for the jobs to finish after this long.
    #[arg(long, default_value_t = 300, value_name = "SECONDS")]
    pub timeout: u64,
    /// Also write the figures as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// A `kairos bench` workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchWorkload {
    /// N noop jobs created over C connections; create → succeeded.
    Create,
    /// N noop jobs all due at one instant; how fast the burst drains.
    Burst,
    /// M schedules firing every second; trigger lateness.
    Cron,
}

/// Limits of a tenant; absent ones take the API's defaults.
#[derive(Debug, Clone, Args)]
pub struct TenantLimitArgs {
    /// Job creates per second per key.
    #[arg(long, value_name = "N")]
    pub create_rate: Option<f64>,
    /// Creates a key may burst before the rate applies.
    #[arg(long, value_name = "N")]
    pub create_burst: Option<u32>,
    /// Most scheduled, running or paused jobs the tenant may hold.
    #[arg(long, value_name = "N")]
    pub max_live_jobs: Option<u64>,
}

/// `kairos tenants …`.
#[derive(Debug, Subcommand)]
pub enum TenantsCommand {
    /// Create a tenant and print its callback signing secret.
    Create {
        /// Tenant id: 1–64 of a-z, 0-9, '-', '_'.
        id: String,
        #[command(flatten)]
        limits: TenantLimitArgs,
        #[command(flatten)]
        db: DatabaseArg,
    },
    /// List tenants and their limits.
    List {
        #[command(flatten)]
        db: DatabaseArg,
    },
    /// Replace a tenant's limits (a limit not given goes back to the default).
    SetLimits {
        /// Tenant id.
        id: String,
        #[command(flatten)]
        limits: TenantLimitArgs,
        #[command(flatten)]
        db: DatabaseArg,
    },
    /// Make a new callback secret and print it; the old one keeps signing
    /// beside it for the grace period.
    RotateSecret {
        /// Tenant id.
        id: String,
        /// Grace period of the old secret [default: 24h]; e.g. 90m, 12h, 7d.
        #[arg(long, value_name = "DURATION")]
        grace: Option<String>,
        #[command(flatten)]
        db: DatabaseArg,
    },
}

/// `kairos keys …`.
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create a key and print it (only this once; only its hash is stored).
    Create {
        /// Tenant the key acts for.
        #[arg(long, value_name = "TENANT")]
        tenant: String,
        /// operator (every tenant, the tenants and the workers), admin (this
        /// tenant's keys, callback secret and audit trail), write or read.
        #[arg(long, value_name = "ROLE")]
        role: String,
        /// Expiry: an RFC 3339 time or a duration from now (90m, 12h, 30d).
        #[arg(long, value_name = "WHEN")]
        expires: Option<String>,
        /// Free text for humans.
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
        #[command(flatten)]
        db: DatabaseArg,
    },
    /// List keys (never their secrets).
    List {
        /// Only this tenant's keys.
        #[arg(long, value_name = "TENANT")]
        tenant: Option<String>,
        #[command(flatten)]
        db: DatabaseArg,
    },
    /// Revoke a key by its prefix; every API instance refuses it within a second.
    Revoke {
        /// The key's prefix (the 12 hex digits after `kai_`), or the whole key.
        prefix: String,
        #[command(flatten)]
        db: DatabaseArg,
    },
}

/// The database.
#[derive(Debug, Clone, Args)]
pub struct DatabaseArg {
    /// Database URL: mysql://user:pass@host:3306/db, postgres://user:pass@host:5432/db
    /// or sqlite://path.db.
    #[arg(long, env = "KAIROS_DATABASE_URL", value_name = "URL")]
    pub database_url: Option<String>,
}

/// Redis.
#[derive(Debug, Clone, Args)]
pub struct RedisArg {
    /// Redis URL for the leader lease and once-per-attempt keys; a db number is
    /// honoured (redis://host:6379/2).
    #[arg(long, env = "KAIROS_REDIS_URL", value_name = "URL")]
    pub redis_url: Option<String>,
}

/// RabbitMQ.
#[derive(Debug, Clone, Args)]
pub struct AmqpArg {
    /// RabbitMQ URL; a vhost is honoured (amqp://user:pass@host:5672/vhost).
    #[arg(long, env = "KAIROS_AMQP_URL", value_name = "URL")]
    pub amqp_url: Option<String>,
    /// Type of the shared queues (results, reroute, heartbeats): classic or
    /// quorum (replicated; for a RabbitMQ cluster). Every process of a
    /// deployment must use the same [default: classic].
    #[arg(long, env = "KAIROS_AMQP_QUEUE_TYPE", value_name = "TYPE")]
    pub amqp_queue_type: Option<String>,
}

/// Names of queues and keys.
#[derive(Debug, Clone, Args)]
pub struct NamespaceArg {
    /// Prefix of every queue, exchange and Redis key [default: kairos].
    #[arg(long, env = "KAIROS_NAMESPACE", value_name = "NAME")]
    pub namespace: Option<String>,
}

/// HTTP listener.
#[derive(Debug, Clone, Args)]
pub struct HttpArg {
    /// Address the API listens on [default: 127.0.0.1:8080].
    #[arg(long, env = "KAIROS_HTTP_ADDR", value_name = "HOST:PORT")]
    pub http_addr: Option<String>,
}

/// The operations endpoint of a process without an HTTP API.
#[derive(Debug, Clone, Args)]
pub struct MetricsArg {
    /// Address serving /metrics, /healthz and /readyz [default: none, not served].
    #[arg(long, env = "KAIROS_METRICS_ADDR", value_name = "HOST:PORT")]
    pub metrics_addr: Option<String>,
}

/// Worker identity and size.
#[derive(Debug, Clone, Args)]
pub struct WorkerIdentityArg {
    /// Stable worker id [default: hostname plus a random suffix].
    #[arg(long, env = "KAIROS_WORKER_ID", value_name = "ID")]
    pub worker_id: Option<String>,
    /// Handlers run in parallel [default: 32].
    #[arg(long, env = "KAIROS_WORKER_CAPACITY", value_name = "N")]
    pub worker_capacity: Option<u32>,
}

/// How long a worker remembers that an attempt ran.
#[derive(Debug, Clone, Args)]
pub struct AttemptKeyArg {
    /// How long each attempt's once-only key is kept, in milliseconds: a
    /// copy of a dispatch delivered later than this runs again. Redis holds
    /// about 260 bytes a job for this long [default: 86400000 (24 h), the
    /// same as KAIROS_DEFAULT_TIMEOUT_MS; at least 60000].
    #[arg(long, env = "KAIROS_WORKER_ATTEMPT_KEY_TTL_MS", value_name = "MS")]
    pub worker_attempt_key_ttl_ms: Option<u64>,
}

/// What is kept of execution logs.
#[derive(Debug, Clone, Args)]
pub struct LogArg {
    /// Hours execution log lines are kept [default: 72].
    #[arg(long, env = "KAIROS_LOG_RETENTION_HOURS", value_name = "HOURS")]
    pub log_retention_hours: Option<u64>,
    /// Log lines kept per execution; the oldest go first [default: 1000].
    #[arg(long, env = "KAIROS_LOG_MAX_LINES", value_name = "N")]
    pub log_max_lines: Option<u32>,
    /// Bytes of log text kept per execution; the oldest lines go first
    /// [default: 262144].
    #[arg(long, env = "KAIROS_LOG_MAX_BYTES", value_name = "BYTES")]
    pub log_max_bytes: Option<u64>,
}

/// Callback delivery.
#[derive(Debug, Clone, Args)]
pub struct CallbackArg {
    /// Secret for the Kairos-Signature HMAC.
    #[arg(
        long,
        env = "KAIROS_CALLBACK_SECRET",
        value_name = "SECRET",
        hide_env_values = true
    )]
    pub callback_secret: Option<String>,
    /// Allow callbacks to loopback and private addresses (tests, local setups).
    #[arg(long, env = "KAIROS_CALLBACK_ALLOW_PRIVATE", value_name = "BOOL")]
    pub callback_allow_private: Option<bool>,
}

/// The built-in `http` handler's request-forgery guard.
#[derive(Debug, Clone, Args)]
pub struct HttpGuardArg {
    /// Let `http` jobs reach loopback, private and link-local addresses
    /// [default: false; `kairos dev`: true].
    #[arg(long, env = "KAIROS_HTTP_ALLOW_PRIVATE", value_name = "BOOL")]
    pub http_allow_private: Option<bool>,
}

/// The API's default limits (a tenant may override them) and metrics listener.
#[derive(Debug, Clone, Args)]
pub struct ApiLimitsArg {
    /// Job creates per second per key [default: 10000].
    #[arg(long, env = "KAIROS_API_CREATE_RATE", value_name = "N")]
    pub api_create_rate: Option<f64>,
    /// Creates a key may burst before the rate applies [default: 20000].
    #[arg(long, env = "KAIROS_API_CREATE_BURST", value_name = "N")]
    pub api_create_burst: Option<u32>,
    /// Most scheduled, running or paused jobs per tenant [default: 10000000].
    #[arg(long, env = "KAIROS_API_MAX_LIVE_JOBS", value_name = "N")]
    pub api_max_live_jobs: Option<u64>,
    /// Serve `/metrics` on this address instead of the API's.
    #[arg(long, env = "KAIROS_METRICS_ADDR", value_name = "HOST:PORT")]
    pub metrics_addr: Option<String>,
}

/// `kairos migrate`.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    #[command(flatten)]
    pub db: DatabaseArg,
}

/// `kairos api`.
#[derive(Debug, Args)]
pub struct ApiArgs {
    #[command(flatten)]
    pub db: DatabaseArg,
    #[command(flatten)]
    pub http: HttpArg,
    #[command(flatten)]
    pub redis: RedisArg,
    #[command(flatten)]
    pub ns: NamespaceArg,
    #[command(flatten)]
    pub limits: ApiLimitsArg,
}

/// `kairos dispatcher`.
#[derive(Debug, Args)]
pub struct DispatcherArgs {
    #[command(flatten)]
    pub metrics: MetricsArg,
    #[command(flatten)]
    pub db: DatabaseArg,
    #[command(flatten)]
    pub redis: RedisArg,
    #[command(flatten)]
    pub amqp: AmqpArg,
    #[command(flatten)]
    pub ns: NamespaceArg,
    /// Worker selection: equal-cost, round-robin or random [default: equal-cost].
    #[arg(long, env = "KAIROS_BALANCER", value_name = "STRATEGY")]
    pub balancer: Option<String>,
    /// Leader lease time to live in milliseconds: the longest a crashed or
    /// frozen leader delays dispatching; renewed every third of it
    /// [default: 10000; at least 500].
    #[arg(long, env = "KAIROS_LEASE_TTL_MS", value_name = "MS")]
    pub lease_ttl_ms: Option<u64>,
    /// A worker whose last heartbeat is older than this many milliseconds,
    /// and whose queue has no consumer, is declared dead and its work rescued
    /// [default: 15000; at least 1000, and well above the workers' heartbeat
    /// period].
    #[arg(long, env = "KAIROS_WORKER_DEAD_AFTER_MS", value_name = "MS")]
    pub worker_dead_after_ms: Option<u64>,
    #[command(flatten)]
    pub logs: LogArg,
    #[command(flatten)]
    pub recovery: RecoveryArgs,
}

/// How dispatchers recover work nothing else ends (`dispatcher` and `dev`).
#[derive(Debug, Args)]
pub struct RecoveryArgs {
    /// Ceiling on silence: an attempt of a job without `timeoutMs` that has
    /// not ended this many milliseconds after it started (or, never started,
    /// after it was dispatched) is timed out [default: 86400000 (24 h); at
    /// least 1000].
    #[arg(long, env = "KAIROS_DEFAULT_TIMEOUT_MS", value_name = "MS")]
    pub default_timeout_ms: Option<u64>,
    /// How long a live worker's heartbeats must leave out an attempt the
    /// database gives it before the attempt is recovered [default: 30000;
    /// at least 1000, and at least two of the workers' heartbeat periods].
    #[arg(long, env = "KAIROS_RECONCILE_GRACE_MS", value_name = "MS")]
    pub reconcile_grace_ms: Option<u64>,
}

/// `kairos worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub metrics: MetricsArg,
    #[command(flatten)]
    pub redis: RedisArg,
    #[command(flatten)]
    pub amqp: AmqpArg,
    #[command(flatten)]
    pub ns: NamespaceArg,
    #[command(flatten)]
    pub identity: WorkerIdentityArg,
    #[command(flatten)]
    pub attempt_key: AttemptKeyArg,
    #[command(flatten)]
    pub http_guard: HttpGuardArg,
    /// Dispatches that may wait for a free handler slot; beyond capacity +
    /// buffer the worker refuses dispatches so they are rerouted
    /// [default: the capacity].
    #[arg(long, env = "KAIROS_WORKER_BUFFER", value_name = "N")]
    pub worker_buffer: Option<u32>,
    /// Most dispatches the worker takes in one message (1–256); what does
    /// not fit the free places waits beyond the buffer. 1 asks for one
    /// dispatch per message [default: the buffer, 1–64].
    #[arg(long, env = "KAIROS_WORKER_DISPATCH_BATCH", value_name = "N")]
    pub worker_dispatch_batch: Option<u32>,
    /// Heartbeat period in milliseconds [default: 3000].
    #[arg(long, env = "KAIROS_WORKER_HEARTBEAT_MS", value_name = "MS")]
    pub worker_heartbeat_ms: Option<u64>,
    /// Time running handlers get to finish after SIGTERM, in milliseconds;
    /// what is still running then is reported failed and retried
    /// [default: 30000].
    #[arg(long, env = "KAIROS_WORKER_GRACE_MS", value_name = "MS")]
    pub worker_grace_ms: Option<u64>,
    /// Comma-separated built-in handlers to serve, e.g. `noop,sleep`
    /// (keep `http` off workers in a sensitive network) [default: all of
    /// noop, sleep, fail, http].
    #[arg(long, env = "KAIROS_WORKER_HANDLERS", value_name = "LIST")]
    pub worker_handlers: Option<String>,
    /// Worker group: jobs with this `workerGroup` run only on workers of
    /// the group [default: none].
    #[arg(long, env = "KAIROS_WORKER_GROUP", value_name = "GROUP")]
    pub worker_group: Option<String>,
}

/// `kairos callback-relay`.
#[derive(Debug, Args)]
pub struct RelayArgs {
    #[command(flatten)]
    pub metrics: MetricsArg,
    #[command(flatten)]
    pub db: DatabaseArg,
    #[command(flatten)]
    pub callback: CallbackArg,
}

/// `kairos dev`.
#[derive(Debug, Args)]
pub struct DevArgs {
    #[command(flatten)]
    pub db: DatabaseArg,
    #[command(flatten)]
    pub http: HttpArg,
    #[command(flatten)]
    pub identity: WorkerIdentityArg,
    #[command(flatten)]
    pub attempt_key: AttemptKeyArg,
    #[command(flatten)]
    pub callback: CallbackArg,
    #[command(flatten)]
    pub logs: LogArg,
    #[command(flatten)]
    pub recovery: RecoveryArgs,
    #[command(flatten)]
    pub http_guard: HttpGuardArg,
    #[command(flatten)]
    pub limits: ApiLimitsArg,
}

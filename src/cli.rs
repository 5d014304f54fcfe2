//! Command-line interface: subcommands and the settings each one reads. Every
//! setting can come from a flag, its `KAIROS_*` environment variable, or the
//! TOML file given with `--config` (in that order of precedence); the flag
//! groups serialize only what was given, and [`crate::config::load`] lays
//! them over the file and the defaults. Defaults shown in `--help` are
//! added from the configs themselves ([`crate::config::command`]).

use clap::{Args, Parser, Subcommand};
use serde::Serialize;
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
    /// KAIROS_LEASE_TTL_MS, KAIROS_WORKER_DEAD_AFTER_MS, KAIROS_DEFAULT_TIMEOUT_MS,
    /// KAIROS_RECONCILE_GRACE_MS, KAIROS_LOG_* and KAIROS_METRICS_ADDR.
    Dispatcher(DispatcherArgs),
    /// Run a worker with the built-in handlers (noop, sleep, fail, http).
    ///
    /// Reads KAIROS_REDIS_URL, KAIROS_AMQP_URL, KAIROS_AMQP_QUEUE_TYPE,
    /// KAIROS_NAMESPACE, KAIROS_WORKER_ID, KAIROS_WORKER_CAPACITY,
    /// KAIROS_WORKER_BUFFER, KAIROS_WORKER_DISPATCH_BATCH,
    /// KAIROS_WORKER_HEARTBEAT_MS, KAIROS_WORKER_GRACE_MS,
    /// KAIROS_WORKER_ATTEMPT_KEY_TTL_MS, KAIROS_WORKER_HANDLERS,
    /// KAIROS_WORKER_GROUP, KAIROS_METRICS_ADDR and KAIROS_HTTP_ALLOW_PRIVATE.
    Worker(WorkerArgs),
    /// Deliver callbacks from the outbox with signatures and retries.
    ///
    /// Reads KAIROS_DATABASE_URL, KAIROS_CALLBACK_SECRET,
    /// KAIROS_CALLBACK_ALLOW_PRIVATE and KAIROS_METRICS_ADDR.
    CallbackRelay(RelayArgs),
    /// Run everything in one process on embedded defaults: SQLite file,
    /// in-process broker and lease, one worker. Needs no external service.
    ///
    /// Reads KAIROS_DATABASE_URL, KAIROS_HTTP_ADDR, the worker's, dispatcher's
    /// and relay's settings and the API's limits.
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
    /// Show the settings a process would run with.
    #[command(subcommand)]
    Config(ConfigCommand),
}

/// `kairos config …`.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the effective settings of a process as TOML — defaults, then the
    /// --config file, then variables and flags — with secrets and URL
    /// passwords hidden. Takes the process's own flags.
    #[command(subcommand)]
    Print(Process),
}

/// A process whose settings `kairos config print` shows.
#[derive(Debug, Subcommand)]
pub enum Process {
    /// `kairos api`.
    Api(ApiArgs),
    /// `kairos dispatcher`.
    Dispatcher(DispatcherArgs),
    /// `kairos worker`.
    Worker(WorkerArgs),
    /// `kairos callback-relay`.
    CallbackRelay(RelayArgs),
    /// `kairos dev`.
    Dev(DevArgs),
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
    /// Triggers, resumes and redeliveries per second per key.
    #[arg(long, value_name = "N")]
    pub action_rate: Option<f64>,
    /// Such actions a key may burst before the rate applies.
    #[arg(long, value_name = "N")]
    pub action_burst: Option<u32>,
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
        /// Grace period of the old secret (24h when not given); e.g. 90m, 12h, 7d.
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
#[derive(Debug, Clone, Default, Args, Serialize)]
pub struct DatabaseArg {
    /// Database URL: mysql://user:pass@host:3306/db, postgres://user:pass@host:5432/db
    /// or sqlite://path.db.
    #[arg(long, env = "KAIROS_DATABASE_URL", value_name = "URL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database_url: Option<String>,
}

/// Redis.
#[derive(Debug, Clone, Default, Args, Serialize)]
pub struct RedisArg {
    /// Redis URL for the leader lease and once-per-attempt keys; a db number is
    /// honoured (redis://host:6379/2).
    #[arg(long, env = "KAIROS_REDIS_URL", value_name = "URL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redis_url: Option<String>,
}

/// RabbitMQ.
#[derive(Debug, Clone, Default, Args, Serialize)]
pub struct AmqpArg {
    /// RabbitMQ URL; a vhost is honoured (amqp://user:pass@host:5672/vhost).
    #[arg(long, env = "KAIROS_AMQP_URL", value_name = "URL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amqp_url: Option<String>,
    /// Type of the shared queues (results, reroute, heartbeats): classic or
    /// quorum (replicated; for a RabbitMQ cluster). Every process of a
    /// deployment must use the same.
    #[arg(long, env = "KAIROS_AMQP_QUEUE_TYPE", value_name = "TYPE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amqp_queue_type: Option<String>,
}

/// Names of queues and keys.
#[derive(Debug, Clone, Default, Args, Serialize)]
pub struct NamespaceArg {
    /// Prefix of every queue, exchange and Redis key.
    #[arg(long, env = "KAIROS_NAMESPACE", value_name = "NAME")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// HTTP listener.
#[derive(Debug, Clone, Default, Args, Serialize)]
pub struct HttpArg {
    /// Address the API listens on.
    #[arg(long, env = "KAIROS_HTTP_ADDR", value_name = "HOST:PORT")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_addr: Option<String>,
}

/// The operations endpoint.
#[derive(Debug, Clone, Default, Args, Serialize)]
pub struct MetricsArg {
    /// Address serving /metrics, /healthz and /readyz (dispatcher, worker,
    /// relay: not served without it); for the API, serve /metrics here
    /// instead of on the API's address.
    #[arg(long, env = "KAIROS_METRICS_ADDR", value_name = "HOST:PORT")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics_addr: Option<String>,
}

/// A worker's settings (`kairos worker` and the worker of `kairos dev`).
#[derive(Debug, Clone, Default, Args, Serialize)]
pub struct WorkerArg {
    /// Stable worker id (without it: hostname plus a random suffix; `dev`'s
    /// worker is always dev-worker).
    #[arg(long, env = "KAIROS_WORKER_ID", value_name = "ID")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_id: Option<String>,
    /// Handlers run in parallel.
    #[arg(long, env = "KAIROS_WORKER_CAPACITY", value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_capacity: Option<u32>,
    /// Dispatches that may wait for a free handler slot; beyond capacity +
    /// buffer the worker refuses dispatches so they are rerouted (without
    /// it: the capacity).
    #[arg(long, env = "KAIROS_WORKER_BUFFER", value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_buffer: Option<u32>,
    /// Most dispatches the worker takes in one message (1–256); what does
    /// not fit the free places waits beyond the buffer. 1 asks for one
    /// dispatch per message (without it: the buffer, 1–64).
    #[arg(long, env = "KAIROS_WORKER_DISPATCH_BATCH", value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_dispatch_batch: Option<u32>,
    /// Heartbeat period in milliseconds.
    #[arg(long, env = "KAIROS_WORKER_HEARTBEAT_MS", value_name = "MS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_heartbeat_ms: Option<u64>,
    /// Time running handlers get to finish after SIGTERM, in milliseconds;
    /// what is still running then is reported failed and retried.
    #[arg(long, env = "KAIROS_WORKER_GRACE_MS", value_name = "MS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_grace_ms: Option<u64>,
    /// How long each attempt's once-only key is kept, in milliseconds: a
    /// copy of a dispatch delivered later than this runs again. Redis holds
    /// about 260 bytes a job for this long (at least 60000; the default is
    /// KAIROS_DEFAULT_TIMEOUT_MS's).
    #[arg(long, env = "KAIROS_WORKER_ATTEMPT_KEY_TTL_MS", value_name = "MS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_attempt_key_ttl_ms: Option<u64>,
    /// Worker group: jobs with this `workerGroup` run only on workers of
    /// the group (without it: none).
    #[arg(long, env = "KAIROS_WORKER_GROUP", value_name = "GROUP")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_group: Option<String>,
    /// Let `http` jobs reach loopback, private and link-local addresses.
    #[arg(long, env = "KAIROS_HTTP_ALLOW_PRIVATE", value_name = "BOOL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_allow_private: Option<bool>,
}

/// What is kept of execution logs.
#[derive(Debug, Clone, Default, Args, Serialize)]
pub struct LogArg {
    /// Hours execution log lines are kept.
    #[arg(long, env = "KAIROS_LOG_RETENTION_HOURS", value_name = "HOURS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_retention_hours: Option<u64>,
    /// Log lines kept per execution; the oldest go first.
    #[arg(long, env = "KAIROS_LOG_MAX_LINES", value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_max_lines: Option<u32>,
    /// Bytes of log text kept per execution; the oldest lines go first
    /// (at least 1024).
    #[arg(long, env = "KAIROS_LOG_MAX_BYTES", value_name = "BYTES")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_max_bytes: Option<u64>,
}

/// Callback delivery.
#[derive(Debug, Clone, Default, Args, Serialize)]
pub struct CallbackArg {
    /// Secret for the Kairos-Signature HMAC.
    #[arg(
        long,
        env = "KAIROS_CALLBACK_SECRET",
        value_name = "SECRET",
        hide_env_values = true
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub callback_secret: Option<String>,
    /// Allow callbacks to loopback and private addresses (tests, local setups).
    #[arg(long, env = "KAIROS_CALLBACK_ALLOW_PRIVATE", value_name = "BOOL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub callback_allow_private: Option<bool>,
}

/// The API's default limits (a tenant may override them).
#[derive(Debug, Clone, Default, Args, Serialize)]
pub struct ApiLimitsArg {
    /// Job creates per second per key.
    #[arg(long, env = "KAIROS_API_CREATE_RATE", value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_create_rate: Option<f64>,
    /// Creates a key may burst before the rate applies.
    #[arg(long, env = "KAIROS_API_CREATE_BURST", value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_create_burst: Option<u32>,
    /// Most scheduled, running or paused jobs per tenant.
    #[arg(long, env = "KAIROS_API_MAX_LIVE_JOBS", value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_max_live_jobs: Option<u64>,
    /// Triggers, resumes and redeliveries per second per key.
    #[arg(long, env = "KAIROS_API_ACTION_RATE", value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_action_rate: Option<f64>,
    /// Such actions a key may burst before the rate applies.
    #[arg(long, env = "KAIROS_API_ACTION_BURST", value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_action_burst: Option<u32>,
    /// Failed authentications per client address and minute before 429
    /// (0: no limit).
    #[arg(long, env = "KAIROS_API_AUTH_FAIL_LIMIT", value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_auth_fail_limit: Option<u32>,
    /// Comma-separated proxy IPs whose `X-Forwarded-For` names the client.
    #[arg(
        long,
        env = "KAIROS_API_TRUSTED_PROXIES",
        value_name = "IPS",
        value_delimiter = ','
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_trusted_proxies: Option<Vec<std::net::IpAddr>>,
    /// How long an unknown key prefix is remembered as unknown, in ms.
    #[arg(long, env = "KAIROS_API_KEY_NEGATIVE_TTL_MS", value_name = "MS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_negative_ttl_ms: Option<u64>,
    /// API keys cached per instance (and as many unknown prefixes).
    #[arg(long, env = "KAIROS_API_KEY_CACHE_SIZE", value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_cache_size: Option<usize>,
    /// When the dashboard's cookies are `Secure`: auto (when a proxy says
    /// the request came over HTTPS), true or false.
    #[arg(long, env = "KAIROS_UI_COOKIE_SECURE", value_name = "WHEN")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ui_cookie_secure: Option<kairos_api::CookieSecure>,
}

/// How dispatchers recover work nothing else ends (`dispatcher` and `dev`).
#[derive(Debug, Clone, Default, Args, Serialize)]
pub struct RecoveryArgs {
    /// A worker whose last heartbeat is older than this many milliseconds,
    /// and whose queue has no consumer, is declared dead and its work rescued
    /// (at least 1000, and well above the workers' heartbeat period).
    #[arg(long, env = "KAIROS_WORKER_DEAD_AFTER_MS", value_name = "MS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_dead_after_ms: Option<u64>,
    /// Ceiling on silence: an attempt of a job without `timeoutMs` that has
    /// not ended this many milliseconds after it started (or, never started,
    /// after it was dispatched) is timed out (at least 1000).
    #[arg(long, env = "KAIROS_DEFAULT_TIMEOUT_MS", value_name = "MS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_timeout_ms: Option<u64>,
    /// How long a live worker's heartbeats must leave out an attempt the
    /// database gives it before the attempt is recovered (at least 1000, and
    /// at least two of the workers' heartbeat periods).
    #[arg(long, env = "KAIROS_RECONCILE_GRACE_MS", value_name = "MS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reconcile_grace_ms: Option<u64>,
}

/// `kairos migrate`.
#[derive(Debug, Args, Serialize)]
pub struct MigrateArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub db: DatabaseArg,
}

/// `kairos api`.
#[derive(Debug, Args, Serialize)]
pub struct ApiArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub db: DatabaseArg,
    #[command(flatten)]
    #[serde(flatten)]
    pub http: HttpArg,
    #[command(flatten)]
    #[serde(flatten)]
    pub redis: RedisArg,
    #[command(flatten)]
    #[serde(flatten)]
    pub ns: NamespaceArg,
    #[command(flatten)]
    #[serde(flatten)]
    pub limits: ApiLimitsArg,
    #[command(flatten)]
    #[serde(flatten)]
    pub metrics: MetricsArg,
}

/// `kairos dispatcher`.
#[derive(Debug, Args, Serialize)]
pub struct DispatcherArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub metrics: MetricsArg,
    #[command(flatten)]
    #[serde(flatten)]
    pub db: DatabaseArg,
    #[command(flatten)]
    #[serde(flatten)]
    pub redis: RedisArg,
    #[command(flatten)]
    #[serde(flatten)]
    pub amqp: AmqpArg,
    #[command(flatten)]
    #[serde(flatten)]
    pub ns: NamespaceArg,
    /// Worker selection: equal-cost, round-robin or random.
    #[arg(long, env = "KAIROS_BALANCER", value_name = "STRATEGY")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub balancer: Option<String>,
    /// Leader lease time to live in milliseconds: the longest a crashed or
    /// frozen leader delays dispatching; renewed every third of it (at
    /// least 500).
    #[arg(long, env = "KAIROS_LEASE_TTL_MS", value_name = "MS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_ttl_ms: Option<u64>,
    #[command(flatten)]
    #[serde(flatten)]
    pub logs: LogArg,
    #[command(flatten)]
    #[serde(flatten)]
    pub recovery: RecoveryArgs,
}

/// `kairos worker`.
#[derive(Debug, Args, Serialize)]
pub struct WorkerArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub metrics: MetricsArg,
    #[command(flatten)]
    #[serde(flatten)]
    pub redis: RedisArg,
    #[command(flatten)]
    #[serde(flatten)]
    pub amqp: AmqpArg,
    #[command(flatten)]
    #[serde(flatten)]
    pub ns: NamespaceArg,
    #[command(flatten)]
    #[serde(flatten)]
    pub worker: WorkerArg,
    /// Comma-separated built-in handlers to serve, e.g. `noop,sleep`
    /// (keep `http` off workers in a sensitive network; without it: all of
    /// noop, sleep, fail, http).
    #[arg(long, env = "KAIROS_WORKER_HANDLERS", value_name = "LIST")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_handlers: Option<String>,
}

/// `kairos callback-relay`.
#[derive(Debug, Args, Serialize)]
pub struct RelayArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub metrics: MetricsArg,
    #[command(flatten)]
    #[serde(flatten)]
    pub db: DatabaseArg,
    #[command(flatten)]
    #[serde(flatten)]
    pub callback: CallbackArg,
}

/// `kairos dev`.
#[derive(Debug, Args, Serialize)]
pub struct DevArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub db: DatabaseArg,
    #[command(flatten)]
    #[serde(flatten)]
    pub http: HttpArg,
    #[command(flatten)]
    #[serde(flatten)]
    pub worker: WorkerArg,
    #[command(flatten)]
    #[serde(flatten)]
    pub callback: CallbackArg,
    #[command(flatten)]
    #[serde(flatten)]
    pub logs: LogArg,
    #[command(flatten)]
    #[serde(flatten)]
    pub recovery: RecoveryArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub limits: ApiLimitsArg,
}

//! Command-line interface: the subcommands. A process's settings are its
//! config struct ([`crate::config::commands`]), whose fields declare their
//! flags and `KAIROS_*` variables; a setting can come from a flag, its
//! variable or the TOML file given with `--config` (in that order of
//! precedence), which [`crate::config::load`] lays over the defaults. The
//! defaults shown in `--help` are the configs' own
//! ([`crate::config::command`]).

use crate::config::commands::{ApiCmd, DatabaseCmd, DevCmd, DispatcherCmd, RelayCmd, WorkerCmd};
use crate::config::conn::Database;
use clap::{Args, Parser, Subcommand};
use kairos_core::retention::Period;
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
    Migrate(DatabaseCmd),
    /// Serve the REST API. Writes jobs to the database; never talks to workers.
    ///
    /// Reads KAIROS_DATABASE_URL and KAIROS_HTTP_ADDR; with KAIROS_REDIS_URL
    /// (and KAIROS_NAMESPACE) it wakes the leader dispatcher when a job is due.
    /// Every /openapi/* route needs an API key (`kairos keys create`).
    /// KAIROS_API_CREATE_RATE, KAIROS_API_CREATE_BURST and
    /// KAIROS_API_MAX_LIVE_JOBS set the default limits; KAIROS_METRICS_ADDR
    /// moves /metrics to its own listener.
    Api(ApiCmd),
    /// Run a dispatcher. Any number may run; the one holding the Redis lease
    /// dispatches, every one records results and heartbeats.
    ///
    /// Reads KAIROS_DATABASE_URL, KAIROS_REDIS_URL, KAIROS_AMQP_URL,
    /// KAIROS_AMQP_QUEUE_TYPE, KAIROS_NAMESPACE, KAIROS_BALANCER,
    /// KAIROS_LEASE_TTL_MS, KAIROS_WORKER_DEAD_AFTER_MS, KAIROS_WORKER_FORGET_AFTER_MS,
    /// KAIROS_DEFAULT_TIMEOUT_MS, KAIROS_RECONCILE_GRACE_MS, KAIROS_LOG_* and
    /// KAIROS_METRICS_ADDR.
    Dispatcher(DispatcherCmd),
    /// Run a worker with the built-in handlers (noop, sleep, fail, http).
    ///
    /// Reads KAIROS_REDIS_URL, KAIROS_AMQP_URL, KAIROS_AMQP_QUEUE_TYPE,
    /// KAIROS_NAMESPACE, KAIROS_WORKER_ID, KAIROS_WORKER_CAPACITY,
    /// KAIROS_WORKER_BUFFER, KAIROS_WORKER_DISPATCH_BATCH,
    /// KAIROS_WORKER_IMMEDIATE_QUEUE, KAIROS_WORKER_HEARTBEAT_MS, KAIROS_WORKER_GRACE_MS,
    /// KAIROS_WORKER_ATTEMPT_KEY_TTL_MS, KAIROS_WORKER_HANDLERS,
    /// KAIROS_WORKER_GROUP, KAIROS_METRICS_ADDR and KAIROS_HTTP_ALLOW_PRIVATE.
    Worker(WorkerCmd),
    /// Deliver callbacks from the outbox with signatures and retries.
    ///
    /// Reads KAIROS_DATABASE_URL, KAIROS_CALLBACK_SECRET,
    /// KAIROS_CALLBACK_ALLOW_PRIVATE and KAIROS_METRICS_ADDR.
    CallbackRelay(RelayCmd),
    /// Run everything in one process on embedded defaults: SQLite file,
    /// in-process broker and lease, one worker. Needs no external service.
    ///
    /// Reads KAIROS_DATABASE_URL, KAIROS_HTTP_ADDR, the worker's, dispatcher's
    /// and relay's settings and the API's limits.
    /// Creates the `default` tenant's admin key on first start and keeps it
    /// beside the database (`kairos.db.key`).
    Dev(DevCmd),
    /// Measure a deployment, like pgbench or redis-benchmark: jobs per second
    /// and latency percentiles, from the server's own timestamps.
    ///
    /// Against a running API (--url) or, without one, a `kairos dev` it starts
    /// itself on a temporary SQLite file. Workloads: `create` (N jobs from C
    /// connections, create → succeeded), `burst` (N jobs due at one instant),
    /// `cron` (M every-second schedules, trigger lateness), `priority` (N
    /// priority-0 jobs due at one instant and 100 priority-9 ones behind
    /// them), `workflow` (N runs of a 1 → 3 → 1 DAG, parent end → child start),
    /// `reads` (reads of jobs and executions with --fill executions stored).
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
    Api(ApiCmd),
    /// `kairos dispatcher`.
    Dispatcher(DispatcherCmd),
    /// `kairos worker`.
    Worker(WorkerCmd),
    /// `kairos callback-relay`.
    CallbackRelay(RelayCmd),
    /// `kairos dev`.
    Dev(DevCmd),
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
    /// Jobs to create (`create`, `burst`, `priority`), or runs to trigger
    /// (`workflow`).
    #[arg(short = 'n', long, default_value_t = 2_000)]
    pub jobs: usize,
    /// Concurrent keep-alive connections creating jobs.
    #[arg(short = 'c', long, default_value_t = 32)]
    pub connections: usize,
    /// Create through `POST /openapi/jobs/batch`, this many jobs a request
    /// (1 = one `POST /openapi/jobs` a job).
    #[arg(long, default_value_t = 1, value_name = "JOBS")]
    pub batch: usize,
    /// `burst`, `priority`: how far in the future the common due time is set, so every
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
    /// `create`: requests sent per second; `workflow`: runs triggered per
    /// second (0: as fast as the connections go, a throughput test rather
    /// than a latency one). Each request waits for its slot on the rate's
    /// grid, so a slow answer does not lower the load it measures.
    #[arg(long, default_value_t = 0.0, value_name = "PER_SEC")]
    pub rate: f64,
    /// Give up waiting for the jobs to finish after this long.
    #[arg(long, default_value_t = 300, value_name = "SECONDS")]
    pub timeout: u64,
    /// Also write the figures as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// `reads`: finished executions to store before measuring (20 per
    /// job); a database that already holds the fill is measured as found.
    #[arg(long, default_value_t = 1_000_000, value_name = "EXECUTIONS")]
    pub fill: u64,
    /// `reads`: the database to fill (sqlite://…, mysql://…, postgres://…).
    /// Without --url, the embedded `kairos dev` runs on it; without either,
    /// on a temporary SQLite file.
    #[arg(long, value_name = "URL")]
    pub db: Option<String>,
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
    /// N priority-0 jobs due at one instant, then 100 priority-9 jobs due
    /// just after them; when each group finished.
    Priority,
    /// N runs of a 1 → 3 → 1 workflow of noop nodes, triggered from C
    /// connections; how soon each node started after its last parent ended.
    Workflow,
    /// --fill finished executions stored, then N timed reads each of a job,
    /// a job's executions page and the executions list, one at a time.
    Reads,
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

/// Retention overrides of a tenant (`s`, `m`, `h`, `d`, e.g. 7d); absent
/// ones take the deployment's `KAIROS_RETAIN_*` periods.
#[derive(Debug, Clone, Args)]
pub struct TenantRetentionArgs {
    /// Finished executions, with their events, logs and deliveries.
    #[arg(long, value_name = "DURATION")]
    pub executions: Option<Period>,
    /// Finished one-shot jobs (once none of their executions is left).
    #[arg(long, value_name = "DURATION")]
    pub jobs: Option<Period>,
    /// Ended workflow runs, with their node rows.
    #[arg(long, value_name = "DURATION")]
    pub workflow_runs: Option<Period>,
    /// Audit entries.
    #[arg(long, value_name = "DURATION")]
    pub audit: Option<Period>,
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
        db: Database,
    },
    /// List tenants and their limits.
    List {
        #[command(flatten)]
        db: Database,
    },
    /// Replace a tenant's limits (a limit not given goes back to the default).
    SetLimits {
        /// Tenant id.
        id: String,
        #[command(flatten)]
        limits: TenantLimitArgs,
        #[command(flatten)]
        db: Database,
    },
    /// Replace a tenant's retention overrides (one not given goes back to
    /// the deployment's period).
    SetRetention {
        /// Tenant id.
        id: String,
        #[command(flatten)]
        retention: TenantRetentionArgs,
        #[command(flatten)]
        db: Database,
    },
    /// Show a tenant's retention overrides.
    Retention {
        /// Tenant id.
        id: String,
        #[command(flatten)]
        db: Database,
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
        db: Database,
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
        db: Database,
    },
    /// List keys (never their secrets).
    List {
        /// Only this tenant's keys.
        #[arg(long, value_name = "TENANT")]
        tenant: Option<String>,
        #[command(flatten)]
        db: Database,
    },
    /// Revoke a key by its prefix; every API instance refuses it within a second.
    Revoke {
        /// The key's prefix (the 12 hex digits after `kai_`), or the whole key.
        prefix: String,
        #[command(flatten)]
        db: Database,
    },
}

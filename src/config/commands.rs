//! One config per process command: the connection structs it needs and the
//! crate configs of what it runs, flattened, so every key is the `KAIROS_*`
//! variable in lower case. `kairos dev`'s own defaults live here, once.
//!
//! Each struct is also the subcommand's arguments (`clap::Args`): the flags
//! and variables are declared on the fields of the configs they flatten, so
//! a setting is declared in one place. Which values the user gave (rather
//! than clap's defaults) is read from clap's value sources
//! ([`super::Given`]).

use super::conn::{Amqp, Database, Http, Metrics, Namespace, Redis, RunBudgets};
use clap::Args;
use kairos::embedded::{DEV_DATABASE_URL, DEV_SECRET};
use kairos_api::ApiConfig;
use kairos_callback_relay::RelayConfig;
use kairos_dispatcher::DispatcherConfig;
use kairos_dispatcher::logs::LogConfig;
use kairos_dispatcher::reaper::ReaperConfig;
use kairos_dispatcher::retention::RetentionConfig;
use kairos_worker::WorkerConfig;
use serde::{Deserialize, Serialize};

/// `kairos migrate`, `kairos tenants …`, `kairos keys …`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Args)]
#[serde(default)]
pub struct DatabaseCmd {
    #[serde(flatten)]
    #[command(flatten)]
    pub db: Database,
}

/// `kairos api`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Args)]
#[serde(default)]
pub struct ApiCmd {
    #[serde(flatten)]
    #[command(flatten)]
    pub db: Database,
    #[serde(flatten)]
    #[command(flatten)]
    pub budgets: RunBudgets,
    #[serde(flatten)]
    #[command(flatten)]
    pub http: Http,
    #[serde(flatten)]
    #[command(flatten)]
    pub redis: Redis,
    #[serde(flatten)]
    #[command(flatten)]
    pub ns: Namespace,
    #[serde(flatten)]
    #[command(flatten)]
    pub metrics: Metrics,
    #[serde(flatten)]
    #[command(flatten)]
    pub api: ApiConfig,
}

/// `kairos dispatcher`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Args)]
#[serde(default)]
pub struct DispatcherCmd {
    #[serde(flatten)]
    #[command(flatten)]
    pub db: Database,
    #[serde(flatten)]
    #[command(flatten)]
    pub budgets: RunBudgets,
    #[serde(flatten)]
    #[command(flatten)]
    pub redis: Redis,
    #[serde(flatten)]
    #[command(flatten)]
    pub amqp: Amqp,
    #[serde(flatten)]
    #[command(flatten)]
    pub ns: Namespace,
    #[serde(flatten)]
    #[command(flatten)]
    pub metrics: Metrics,
    #[serde(flatten)]
    #[command(flatten)]
    pub dispatcher: DispatcherConfig,
}

/// `kairos worker`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Args)]
#[serde(default)]
pub struct WorkerCmd {
    #[serde(flatten)]
    #[command(flatten)]
    pub redis: Redis,
    #[serde(flatten)]
    #[command(flatten)]
    pub amqp: Amqp,
    #[serde(flatten)]
    #[command(flatten)]
    pub ns: Namespace,
    #[serde(flatten)]
    #[command(flatten)]
    pub metrics: Metrics,
    #[serde(flatten)]
    #[command(flatten)]
    pub worker: WorkerConfig,
    /// Comma-separated built-in handlers to serve, e.g. `noop,sleep` (keep
    /// `http` off workers in a sensitive network; unset: all of noop,
    /// sleep, fail, http).
    #[arg(long, env = "KAIROS_WORKER_HANDLERS", value_name = "LIST")]
    pub worker_handlers: Option<String>,
}

/// `kairos callback-relay`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Args)]
#[serde(default)]
pub struct RelayCmd {
    #[serde(flatten)]
    #[command(flatten)]
    pub db: Database,
    #[serde(flatten)]
    #[command(flatten)]
    pub metrics: Metrics,
    #[serde(flatten)]
    #[command(flatten)]
    pub relay: RelayConfig,
}

/// `kairos dev`: the worker, dispatcher and relay of one process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Args)]
#[serde(default)]
pub struct DevCmd {
    #[serde(flatten)]
    #[command(flatten)]
    pub db: Database,
    #[serde(flatten)]
    #[command(flatten)]
    pub budgets: RunBudgets,
    #[serde(flatten)]
    #[command(flatten)]
    pub http: Http,
    #[serde(flatten)]
    #[command(flatten)]
    pub worker: WorkerConfig,
    #[serde(flatten)]
    #[command(flatten)]
    pub relay: RelayConfig,
    #[serde(flatten)]
    #[command(flatten)]
    pub logs: LogConfig,
    #[serde(flatten)]
    #[command(flatten)]
    pub retention: RetentionConfig,
    #[serde(flatten)]
    #[command(flatten)]
    pub reaper: ReaperConfig,
    #[serde(flatten)]
    #[command(flatten)]
    pub api: ApiConfig,
}

/// Dev's own defaults: a SQLite file beside the working directory, a fixed
/// callback secret, and private addresses allowed (the jobs people try first
/// call services on their own machine).
impl Default for DevCmd {
    fn default() -> Self {
        Self {
            db: Database {
                database_url: Some(DEV_DATABASE_URL.into()),
            },
            budgets: RunBudgets::default(),
            http: Http::default(),
            worker: WorkerConfig {
                http_allow_private: true,
                ..WorkerConfig::default()
            },
            relay: RelayConfig {
                callback_secret: DEV_SECRET.into(),
                callback_allow_private: true,
                ..RelayConfig::default()
            },
            logs: LogConfig::default(),
            retention: RetentionConfig::default(),
            reaper: ReaperConfig::default(),
            api: ApiConfig::default(),
        }
    }
}

/// Every process command by its name, with its defaults as JSON (keys are
/// the settings it reads): for `--help`, `config print` and the docs test.
pub fn defaults_by_command() -> Vec<(&'static str, serde_json::Value)> {
    fn json<T: Serialize>(v: T) -> serde_json::Value {
        serde_json::to_value(v).unwrap_or_default()
    }
    vec![
        ("migrate", json(DatabaseCmd::default())),
        ("api", json(ApiCmd::default())),
        ("dispatcher", json(DispatcherCmd::default())),
        ("worker", json(WorkerCmd::default())),
        ("callback-relay", json(RelayCmd::default())),
        ("dev", json(DevCmd::default())),
    ]
}

//! One config per process command: the connection structs it needs and the
//! crate configs of what it runs, flattened, so every key is the `KAIROS_*`
//! variable in lower case. `kairos dev`'s own defaults live here, once.

use super::conn::{Amqp, Database, Http, Metrics, Namespace, Redis};
use kairos::embedded::{DEV_DATABASE_URL, DEV_SECRET};
use kairos_api::ApiConfig;
use kairos_callback_relay::RelayConfig;
use kairos_dispatcher::DispatcherConfig;
use kairos_dispatcher::logs::LogConfig;
use kairos_dispatcher::reaper::ReaperConfig;
use kairos_worker::WorkerConfig;
use serde::{Deserialize, Serialize};

/// `kairos migrate`, `kairos tenants …`, `kairos keys …`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DatabaseCmd {
    #[serde(flatten)]
    pub db: Database,
}

/// `kairos api`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApiCmd {
    #[serde(flatten)]
    pub db: Database,
    #[serde(flatten)]
    pub http: Http,
    #[serde(flatten)]
    pub redis: Redis,
    #[serde(flatten)]
    pub ns: Namespace,
    #[serde(flatten)]
    pub metrics: Metrics,
    #[serde(flatten)]
    pub api: ApiConfig,
}

/// `kairos dispatcher`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DispatcherCmd {
    #[serde(flatten)]
    pub db: Database,
    #[serde(flatten)]
    pub redis: Redis,
    #[serde(flatten)]
    pub amqp: Amqp,
    #[serde(flatten)]
    pub ns: Namespace,
    #[serde(flatten)]
    pub metrics: Metrics,
    #[serde(flatten)]
    pub dispatcher: DispatcherConfig,
}

/// `kairos worker`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkerCmd {
    #[serde(flatten)]
    pub redis: Redis,
    #[serde(flatten)]
    pub amqp: Amqp,
    #[serde(flatten)]
    pub ns: Namespace,
    #[serde(flatten)]
    pub metrics: Metrics,
    #[serde(flatten)]
    pub worker: WorkerConfig,
    /// `KAIROS_WORKER_HANDLERS`: comma-separated built-in handlers to serve;
    /// none: all of them.
    pub worker_handlers: Option<String>,
}

/// `kairos callback-relay`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RelayCmd {
    #[serde(flatten)]
    pub db: Database,
    #[serde(flatten)]
    pub metrics: Metrics,
    #[serde(flatten)]
    pub relay: RelayConfig,
}

/// `kairos dev`: the worker, dispatcher and relay of one process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DevCmd {
    #[serde(flatten)]
    pub db: Database,
    #[serde(flatten)]
    pub http: Http,
    #[serde(flatten)]
    pub worker: WorkerConfig,
    #[serde(flatten)]
    pub relay: RelayConfig,
    #[serde(flatten)]
    pub logs: LogConfig,
    #[serde(flatten)]
    pub reaper: ReaperConfig,
    #[serde(flatten)]
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

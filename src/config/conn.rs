//! Connection settings only the binary uses (it alone connects): one small
//! struct per concern, flattened into each command's config. Field names are
//! the `KAIROS_*` variables in lower case, and each struct is also the
//! command line's argument group for its settings.

use clap::Args;
use kairos_core::workflow::budget::RunLimits;
use serde::{Deserialize, Serialize};

/// Default of [`Http::http_addr`].
pub const DEFAULT_HTTP_ADDR: &str = "127.0.0.1:8080";
/// Default of [`Namespace::namespace`].
pub const DEFAULT_NAMESPACE: &str = "kairos";
/// Default of [`Amqp::amqp_queue_type`].
pub const DEFAULT_QUEUE_TYPE: &str = "classic";

/// `KAIROS_DATABASE_URL`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Args)]
#[serde(default)]
pub struct Database {
    /// Database URL: mysql://user:pass@host:3306/db,
    /// postgres://user:pass@host:5432/db or sqlite://path.db; required by
    /// every command but `dev`.
    #[arg(long, env = "KAIROS_DATABASE_URL", value_name = "URL")]
    pub database_url: Option<String>,
}

/// `KAIROS_REDIS_URL`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Args)]
#[serde(default)]
pub struct Redis {
    /// Redis URL for the leader lease and once-per-attempt keys; a db
    /// number is honoured (redis://host:6379/2).
    #[arg(long, env = "KAIROS_REDIS_URL", value_name = "URL")]
    pub redis_url: Option<String>,
}

/// `KAIROS_AMQP_URL` and `KAIROS_AMQP_QUEUE_TYPE`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Args)]
#[serde(default)]
pub struct Amqp {
    /// RabbitMQ URL; a vhost is honoured (amqp://user:pass@host:5672/vhost).
    #[arg(long, env = "KAIROS_AMQP_URL", value_name = "URL")]
    pub amqp_url: Option<String>,
    /// Type of the shared queues (results, reroute, heartbeats): classic or
    /// quorum (replicated; for a RabbitMQ cluster). Every process of a
    /// deployment must use the same.
    #[arg(long, env = "KAIROS_AMQP_QUEUE_TYPE", value_name = "TYPE")]
    pub amqp_queue_type: String,
}

impl Default for Amqp {
    fn default() -> Self {
        Self {
            amqp_url: None,
            amqp_queue_type: DEFAULT_QUEUE_TYPE.into(),
        }
    }
}

/// `KAIROS_NAMESPACE`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Args)]
#[serde(default)]
pub struct Namespace {
    /// Prefix of every queue, exchange and Redis key.
    #[arg(long, env = "KAIROS_NAMESPACE", value_name = "NAME")]
    pub namespace: String,
}

impl Default for Namespace {
    fn default() -> Self {
        Self {
            namespace: DEFAULT_NAMESPACE.into(),
        }
    }
}

impl Namespace {
    /// Queue and key names for the namespace.
    pub fn names(&self) -> kairos_core::protocol::Names {
        kairos_core::protocol::Names::new(self.namespace.clone())
    }
}

/// `KAIROS_HTTP_ADDR`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Args)]
#[serde(default)]
pub struct Http {
    /// Address the API listens on.
    #[arg(long, env = "KAIROS_HTTP_ADDR", value_name = "HOST:PORT")]
    pub http_addr: String,
}

impl Default for Http {
    fn default() -> Self {
        Self {
            http_addr: DEFAULT_HTTP_ADDR.into(),
        }
    }
}

/// `KAIROS_METRICS_ADDR`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Args)]
#[serde(default)]
pub struct Metrics {
    /// Address serving /metrics, /healthz and /readyz (dispatcher, worker,
    /// relay: not served without it); for the API, serve /metrics here
    /// instead of on the API's address.
    #[arg(long, env = "KAIROS_METRICS_ADDR", value_name = "HOST:PORT")]
    pub metrics_addr: Option<String>,
}

/// `KAIROS_RUN_MAX_EXECUTIONS`, `KAIROS_NODE_PARENT_OUTPUTS_MAX_BYTES` and
/// `KAIROS_RUN_PARENT_OUTPUTS_MAX_BYTES`: the budgets the store applies to
/// every follow-up chain and workflow run (it creates their executions, so
/// every process that writes them needs the same; see
/// [`kairos_core::workflow::budget`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Args)]
#[serde(default)]
pub struct RunBudgets {
    /// Most executions one trigger's follow-up chain, or one workflow run,
    /// may make (its first included); past it, what is due is recorded as
    /// not run, with the reason.
    #[arg(long, env = "KAIROS_RUN_MAX_EXECUTIONS", value_name = "N")]
    pub run_max_executions: u64,
    /// Most bytes of parent outputs (as JSON) one workflow node receives.
    #[arg(
        long,
        env = "KAIROS_NODE_PARENT_OUTPUTS_MAX_BYTES",
        value_name = "BYTES"
    )]
    pub node_parent_outputs_max_bytes: u64,
    /// Most bytes of parent outputs one workflow run stores across its
    /// nodes' executions.
    #[arg(
        long,
        env = "KAIROS_RUN_PARENT_OUTPUTS_MAX_BYTES",
        value_name = "BYTES"
    )]
    pub run_parent_outputs_max_bytes: u64,
}

impl Default for RunBudgets {
    fn default() -> Self {
        let d = RunLimits::default();
        Self {
            run_max_executions: d.max_executions,
            node_parent_outputs_max_bytes: d.node_parent_outputs_bytes,
            run_parent_outputs_max_bytes: d.run_parent_outputs_bytes,
        }
    }
}

impl RunBudgets {
    /// The budgets, or which setting is invalid (every one must be at
    /// least 1: a run needs its first execution).
    pub fn limits(&self) -> Result<RunLimits, String> {
        for (var, v) in [
            ("KAIROS_RUN_MAX_EXECUTIONS", self.run_max_executions),
            (
                "KAIROS_NODE_PARENT_OUTPUTS_MAX_BYTES",
                self.node_parent_outputs_max_bytes,
            ),
            (
                "KAIROS_RUN_PARENT_OUTPUTS_MAX_BYTES",
                self.run_parent_outputs_max_bytes,
            ),
        ] {
            if v == 0 {
                return Err(format!("{var} must be at least 1"));
            }
        }
        Ok(RunLimits {
            max_executions: self.run_max_executions,
            node_parent_outputs_bytes: self.node_parent_outputs_max_bytes,
            run_parent_outputs_bytes: self.run_parent_outputs_max_bytes,
        })
    }
}

//! Connection settings only the binary uses (it alone connects): one small
//! struct per concern, flattened into each command's config. Field names are
//! the `KAIROS_*` variables in lower case.

use serde::{Deserialize, Serialize};

/// Default of [`Http::http_addr`].
pub const DEFAULT_HTTP_ADDR: &str = "127.0.0.1:8080";
/// Default of [`Namespace::namespace`].
pub const DEFAULT_NAMESPACE: &str = "kairos";
/// Default of [`Amqp::amqp_queue_type`].
pub const DEFAULT_QUEUE_TYPE: &str = "classic";

/// `KAIROS_DATABASE_URL`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Database {
    /// mysql://…, postgres://… or sqlite://…; required by every command
    /// but `dev`.
    pub database_url: Option<String>,
}

/// `KAIROS_REDIS_URL`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Redis {
    /// Redis for the leader lease and once-per-attempt keys.
    pub redis_url: Option<String>,
}

/// `KAIROS_AMQP_URL` and `KAIROS_AMQP_QUEUE_TYPE`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Amqp {
    /// RabbitMQ.
    pub amqp_url: Option<String>,
    /// `classic` or `quorum`, the same on every process.
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Namespace {
    /// Prefix of every queue, exchange and Redis key.
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Http {
    /// Address the API listens on.
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
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Metrics {
    /// Address of the operations endpoint; none: not served (the API's own
    /// address for the API).
    pub metrics_addr: Option<String>,
}

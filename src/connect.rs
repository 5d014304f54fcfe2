//! Builds adapters from configuration URLs. Every failure names the service
//! and the URL (password masked), so a process can exit with one clear line.

use kairos_broker_rabbitmq::{AmqpBroker, QueueType};
use kairos_coord_redis::RedisCoord;
use kairos_core::protocol::Names;
use kairos_core::redact::redact_url;
use kairos_store_sql::SqlStore;
use std::time::Duration;

/// How long to wait for a service at startup before giving up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A service could not be used. The message names the service and the URL
/// (password masked): the adapters' own errors already do, and the failures
/// found here (timeouts, unknown schemes) are worded the same way.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ConnectError {
    message: String,
}

impl ConnectError {
    fn new(service: &'static str, url: &str, reason: impl std::fmt::Display) -> Self {
        Self {
            message: format!("cannot use {service} at {}: {reason}", redact_url(url)),
        }
    }

    fn from_adapter(e: impl std::fmt::Display) -> Self {
        Self {
            message: e.to_string(),
        }
    }
}

/// Which service a database URL points at (the store's own reading of it).
pub fn database_kind(url: &str) -> Option<&'static str> {
    kairos_store_sql::Dialect::from_url(url).map(|d| d.service())
}

/// Connects to the database and, if `migrate`, applies the schema.
pub async fn database(url: &str, migrate: bool) -> Result<SqlStore, ConnectError> {
    let service = database_kind(url).ok_or_else(|| {
        ConnectError::new(
            "the database",
            url,
            "expected a mysql://, postgres:// or sqlite:// URL",
        )
    })?;
    let store = tokio::time::timeout(CONNECT_TIMEOUT, SqlStore::connect(url))
        .await
        .map_err(|_| ConnectError::new(service, url, "timed out"))?
        .map_err(ConnectError::from_adapter)?;
    if migrate {
        store
            .migrate()
            .await
            .map_err(|e| ConnectError::new(service, url, format!("migration failed: {e}")))?;
    }
    Ok(store)
}

/// Connects to RabbitMQ and declares the shared topology with its queues
/// of type `queue_type` (`classic` or `quorum`; classic when `None`).
pub async fn rabbitmq(
    url: &str,
    names: Names,
    queue_type: Option<&str>,
) -> Result<AmqpBroker, ConnectError> {
    let queue_type: QueueType = match queue_type {
        None => QueueType::default(),
        Some(t) => t.parse().map_err(|e| {
            ConnectError::new("RabbitMQ", url, format!("KAIROS_AMQP_QUEUE_TYPE: {e}"))
        })?,
    };
    tokio::time::timeout(
        CONNECT_TIMEOUT,
        AmqpBroker::connect_with(url, names, queue_type),
    )
    .await
    .map_err(|_| ConnectError::new("RabbitMQ", url, "timed out"))?
    .map_err(ConnectError::from_adapter)
}

/// Connects to Redis.
pub async fn redis(url: &str, names: Names) -> Result<RedisCoord, ConnectError> {
    tokio::time::timeout(CONNECT_TIMEOUT, RedisCoord::connect(url, names))
        .await
        .map_err(|_| ConnectError::new("Redis", url, "timed out"))?
        .map_err(ConnectError::from_adapter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_kinds_are_recognised() {
        assert_eq!(database_kind("mysql://root@h/db"), Some("MySQL"));
        assert_eq!(database_kind("sqlite://x.db"), Some("SQLite"));
        assert_eq!(database_kind("postgres://h/db"), Some("PostgreSQL"));
        assert_eq!(database_kind("postgresql://h/db"), Some("PostgreSQL"));
        assert_eq!(database_kind("redis://h/0"), None);
    }
}

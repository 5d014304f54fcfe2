//! Due signals over Redis pub/sub: one channel per namespace.

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use kairos_core::coord::{CoordError, CoordResult};
use kairos_core::due::{Due, DueSignal};
use kairos_core::protocol::Names;
use kairos_core::redact::redact_url;
use redis::aio::ConnectionManager;
use std::time::Duration;

/// Due signals over Redis pub/sub.
#[derive(Clone)]
pub struct RedisDue {
    client: redis::Client,
    publisher: ConnectionManager,
    channel: String,
}

impl std::fmt::Debug for RedisDue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not derived: the client's Debug would print the password.
        f.debug_struct("RedisDue")
            .field("channel", &self.channel)
            .finish()
    }
}

/// The payload of [`Due::Pending`]; a [`Due::At`] is its time in decimal,
/// what every version sent (an older dispatcher ignores this one).
const PENDING: &str = "pending";

/// A payload back into a signal; `None` for one this version does not know.
fn parse(payload: &str) -> Option<Due> {
    if payload == PENDING {
        Some(Due::Pending)
    } else {
        payload.parse().ok().map(Due::At)
    }
}

/// Bound on connecting and on one publish.
const TIMEOUT: Duration = Duration::from_secs(2);

impl RedisDue {
    /// Connects to Redis at `url`.
    pub async fn connect(url: &str, names: &Names) -> CoordResult<Self> {
        let shown = redact_url(url);
        let fail = |e: String| CoordError::Unavailable(format!("Redis at {shown}: {e}"));
        let client = redis::Client::open(url).map_err(|e| fail(e.to_string()))?;
        let publisher = tokio::time::timeout(TIMEOUT, ConnectionManager::new(client.clone()))
            .await
            .map_err(|_| fail("no answer".into()))?
            .map_err(|e| fail(e.to_string()))?;
        Ok(Self {
            client,
            publisher,
            channel: format!("{}:due", names.namespace()),
        })
    }
}

#[async_trait]
impl DueSignal for RedisDue {
    async fn announce(&self, due: Due) {
        let mut conn = self.publisher.clone();
        let mut cmd = redis::cmd("PUBLISH");
        cmd.arg(&self.channel);
        match due {
            Due::At(at) => cmd.arg(at),
            Due::Pending => cmd.arg(PENDING),
        };
        let publish = cmd.query_async::<i64>(&mut conn);
        match tokio::time::timeout(TIMEOUT, publish).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "due signal not sent; the scan will catch up")
            }
            Err(_) => tracing::debug!("due signal timed out; the scan will catch up"),
        }
    }

    async fn subscribe(&self) -> CoordResult<BoxStream<'static, Due>> {
        let fail = |e: redis::RedisError| CoordError::Unavailable(format!("Redis pub/sub: {e}"));
        let mut pubsub = tokio::time::timeout(TIMEOUT, self.client.get_async_pubsub())
            .await
            .map_err(|_| CoordError::Unavailable("Redis pub/sub: no answer".into()))?
            .map_err(fail)?;
        pubsub.subscribe(&self.channel).await.map_err(fail)?;
        Ok(pubsub
            .into_on_message()
            .filter_map(|m| async move { m.get_payload::<String>().ok().and_then(|p| parse(&p)) })
            .boxed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn redis_signals_round_trip() {
        let Some(url) = kairos_testkit::redis_available().await else {
            return;
        };
        let names = Names::new(kairos_testkit::unique("due"));
        let due = RedisDue::connect(&url, &names).await.unwrap();
        let mut sub = due.subscribe().await.unwrap();
        // SUBSCRIBE has been acknowledged, so this publish is delivered.
        due.announce(Due::At(7)).await;
        due.announce(Due::Pending).await;
        for want in [Due::At(7), Due::Pending] {
            let got = tokio::time::timeout(Duration::from_secs(5), sub.next()).await;
            assert_eq!(got.unwrap(), Some(want));
        }
    }

    #[test]
    fn payloads_parse_back_and_unknown_ones_are_dropped() {
        assert_eq!(parse("1700000000000"), Some(Due::At(1_700_000_000_000)));
        assert_eq!(parse(PENDING), Some(Due::Pending));
        assert_eq!(parse("sweep-all"), None);
    }
}

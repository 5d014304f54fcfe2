//! Due signals: the API tells the leader dispatcher "a job became due at T"
//! so it dispatches at once instead of at its next scan. Best effort by
//! design: a lost signal costs latency, never a trigger, because the leader's
//! periodic scan stays the safety net.
//!
//! [`RedisDue`] uses Redis pub/sub (one channel per namespace);
//! [`MemoryDue`] is the in-process twin for `kairos dev`.

use crate::coord::{CoordError, CoordResult};
use crate::protocol::Names;
use crate::time::Millis;
use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use redis::aio::ConnectionManager;
use std::time::Duration;
use tokio::sync::broadcast;

/// Signals about jobs that became due.
#[async_trait]
pub trait DueSignal: Send + Sync {
    /// Announces that a job is due at `at` (ms UTC). Never fails the caller:
    /// errors are logged, the scan catches up.
    async fn announce(&self, at: Millis);
    /// Due times announced from now on. The stream ends when the connection
    /// is lost; subscribe again to resume.
    async fn subscribe(&self) -> CoordResult<BoxStream<'static, Millis>>;
}

/// In-process due signals.
#[derive(Debug, Clone)]
pub struct MemoryDue {
    tx: broadcast::Sender<Millis>,
}

impl Default for MemoryDue {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryDue {
    /// A new, unconnected signal.
    pub fn new() -> Self {
        // Lagging subscribers skip signals; the scan covers what they miss.
        let (tx, _) = broadcast::channel(1024);
        Self { tx }
    }
}

#[async_trait]
impl DueSignal for MemoryDue {
    async fn announce(&self, at: Millis) {
        let _ = self.tx.send(at);
    }

    async fn subscribe(&self) -> CoordResult<BoxStream<'static, Millis>> {
        let rx = tokio_stream_from(self.tx.subscribe());
        Ok(rx)
    }
}

fn tokio_stream_from(rx: broadcast::Receiver<Millis>) -> BoxStream<'static, Millis> {
    futures::stream::unfold(rx, |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(at) => return Some((at, rx)),
                // A slow subscriber skips signals; the scan covers what it missed.
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
    .boxed()
}

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

/// Bound on connecting and on one publish.
const TIMEOUT: Duration = Duration::from_secs(2);

impl RedisDue {
    /// Connects to Redis at `url`.
    pub async fn connect(url: &str, names: &Names) -> CoordResult<Self> {
        let shown = crate::connect::redact(url);
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
    async fn announce(&self, at: Millis) {
        let mut conn = self.publisher.clone();
        let mut cmd = redis::cmd("PUBLISH");
        cmd.arg(&self.channel).arg(at);
        let publish = cmd.query_async::<i64>(&mut conn);
        match tokio::time::timeout(TIMEOUT, publish).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "due signal not sent; the scan will catch up")
            }
            Err(_) => tracing::debug!("due signal timed out; the scan will catch up"),
        }
    }

    async fn subscribe(&self) -> CoordResult<BoxStream<'static, Millis>> {
        let fail = |e: redis::RedisError| CoordError::Unavailable(format!("Redis pub/sub: {e}"));
        let mut pubsub = tokio::time::timeout(TIMEOUT, self.client.get_async_pubsub())
            .await
            .map_err(|_| CoordError::Unavailable("Redis pub/sub: no answer".into()))?
            .map_err(fail)?;
        pubsub.subscribe(&self.channel).await.map_err(fail)?;
        Ok(pubsub
            .into_on_message()
            .filter_map(|m| async move { m.get_payload::<Millis>().ok() })
            .boxed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn memory_signals_reach_every_subscriber() {
        let due = MemoryDue::new();
        let mut a = due.subscribe().await.unwrap();
        let mut b = due.subscribe().await.unwrap();
        due.announce(42).await;
        assert_eq!(a.next().await, Some(42));
        assert_eq!(b.next().await, Some(42));
    }

    #[tokio::test]
    async fn redis_signals_round_trip() {
        let Some(url) = crate::testkit::redis_available().await else {
            return;
        };
        let names = Names::new(crate::testkit::unique("due"));
        let due = RedisDue::connect(&url, &names).await.unwrap();
        let mut sub = due.subscribe().await.unwrap();
        // SUBSCRIBE has been acknowledged, so this publish is delivered.
        due.announce(7).await;
        assert_eq!(
            tokio::time::timeout(Duration::from_secs(5), sub.next())
                .await
                .unwrap(),
            Some(7)
        );
    }
}

//! In-process due signals for `kairos dev` and tests: a broadcast channel,
//! the twin of the Redis pub/sub signal.

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use kairos_core::coord::CoordResult;
use kairos_core::due::{Due, DueSignal};
use tokio::sync::broadcast;

/// In-process due signals.
#[derive(Debug, Clone)]
pub struct MemoryDue {
    tx: broadcast::Sender<Due>,
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
    async fn announce(&self, due: Due) {
        let _ = self.tx.send(due);
    }

    async fn subscribe(&self) -> CoordResult<BoxStream<'static, Due>> {
        let rx = tokio_stream_from(self.tx.subscribe());
        Ok(rx)
    }
}

fn tokio_stream_from(rx: broadcast::Receiver<Due>) -> BoxStream<'static, Due> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn memory_signals_reach_every_subscriber() {
        let due = MemoryDue::new();
        let mut a = due.subscribe().await.unwrap();
        let mut b = due.subscribe().await.unwrap();
        due.announce(Due::At(42)).await;
        due.announce(Due::Pending).await;
        assert_eq!(a.next().await, Some(Due::At(42)));
        assert_eq!(b.next().await, Some(Due::At(42)));
        assert_eq!(a.next().await, Some(Due::Pending));
    }
}

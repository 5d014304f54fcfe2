//! The in-process consumer's stream and acker: dropping the stream detaches
//! the consumer and requeues what it held; the acker settles one delivery.

use std::pin::Pin;
use std::sync::Weak;
use std::task::{Context, Poll};

use async_trait::async_trait;
use futures::Stream;
use tokio::sync::mpsc;

use super::{Settle, Shared};
use kairos_core::broker::{Acker, BrokerError, BrokerResult, Delivery};

/// One consumer's deliveries.
pub(super) struct MemoryStream {
    rx: mpsc::UnboundedReceiver<Delivery>,
    shared: Weak<Shared>,
    queue: String,
    consumer: u64,
}

impl MemoryStream {
    pub(super) fn new(
        rx: mpsc::UnboundedReceiver<Delivery>,
        shared: Weak<Shared>,
        queue: String,
        consumer: u64,
    ) -> MemoryStream {
        MemoryStream {
            rx,
            shared,
            queue,
            consumer,
        }
    }
}

impl Stream for MemoryStream {
    type Item = Delivery;

    /// Ends when the queue is deleted or the broker dropped (the sender goes).
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Delivery>> {
        self.rx.poll_recv(cx)
    }
}

impl Drop for MemoryStream {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.upgrade() {
            shared.remove_consumer(&self.shared, &self.queue, self.consumer);
        }
    }
}

/// Settles one in-process delivery.
pub(super) struct MemoryAcker {
    shared: Weak<Shared>,
    queue: String,
    consumer: u64,
    tag: u64,
}

impl MemoryAcker {
    pub(super) fn new(shared: Weak<Shared>, queue: String, consumer: u64, tag: u64) -> MemoryAcker {
        MemoryAcker {
            shared,
            queue,
            consumer,
            tag,
        }
    }

    fn settle(&self, outcome: Settle) -> BrokerResult<()> {
        let Some(shared) = self.shared.upgrade() else {
            return Err(BrokerError::Unavailable(
                "the in-process broker was shut down".into(),
            ));
        };
        shared.settle(&self.shared, &self.queue, self.consumer, self.tag, outcome)
    }
}

#[async_trait]
impl Acker for MemoryAcker {
    async fn ack(&self) -> BrokerResult<()> {
        self.settle(Settle::Ack)
    }

    async fn reject(&self, requeue: bool) -> BrokerResult<()> {
        self.settle(Settle::Reject { requeue })
    }
}

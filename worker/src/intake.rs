//! Deliveries received and not yet taken into the pool, the most urgent
//! first.
//!
//! The broker orders a worker's queue by delivery rank, but only what it
//! has not sent yet: the consumer's prefetch window (counted in messages,
//! and a message is a batch of up to 64 dispatches) is already on its way,
//! in arrival order. Taken in that order, an urgent message that arrived
//! behind a flood's batches waited for thousands of dispatches. So the
//! consumer drops each delivery here as it arrives, and the delivery loop
//! takes the highest rank first (first come first served within a rank).
//! The prefetch bounds how many wait here.

use crate::ranked::RankQueue;
use kairos_core::broker::Delivery;
use kairos_core::protocol::{DispatchMsg, batch_rank};
use std::sync::{Mutex, MutexGuard, PoisonError};
use tokio::sync::Notify;

/// A decoded delivery waiting to be taken into the pool.
pub(crate) struct Arrived {
    pub(crate) delivery: Delivery,
    pub(crate) msgs: Vec<DispatchMsg>,
    /// The most urgent of its dispatches' ranks.
    pub(crate) rank: u8,
}

/// The waiting deliveries.
#[derive(Default)]
pub(crate) struct Intake {
    waiting: Mutex<RankQueue<(Delivery, Vec<DispatchMsg>)>>,
    arrived: Notify,
}

impl Intake {
    fn lock(&self) -> MutexGuard<'_, RankQueue<(Delivery, Vec<DispatchMsg>)>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a delivery and its decoded dispatches.
    pub(crate) fn push(&self, delivery: Delivery, msgs: Vec<DispatchMsg>) {
        self.lock().push(batch_rank(&msgs), (delivery, msgs));
        self.arrived.notify_one();
    }

    /// The most urgent waiting delivery, once there is one.
    pub(crate) async fn next(&self) -> Arrived {
        loop {
            // Registered before the check, so a push in between is seen.
            let arrived = self.arrived.notified();
            if let Some((rank, (delivery, msgs))) = self.lock().pop() {
                return Arrived {
                    delivery,
                    msgs,
                    rank,
                };
            }
            arrived.await;
        }
    }

    /// Forgets what waits: the consumer that received it is gone, and the
    /// broker gives its unsettled deliveries to the next one.
    pub(crate) fn clear(&self) -> usize {
        self.lock().clear()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kairos_core::broker::{Acker, BrokerResult};
    use kairos_core::priority::Priority;

    struct NoAck;

    #[async_trait::async_trait]
    impl Acker for NoAck {
        async fn ack(&self) -> BrokerResult<()> {
            Ok(())
        }
        async fn reject(&self, _requeue: bool) -> BrokerResult<()> {
            Ok(())
        }
    }

    fn arrive(intake: &Intake, name: &str, priority: u8, immediate: bool) {
        let delivery = Delivery {
            payload: Vec::new(),
            redelivered: false,
            rejected_by: None,
            traceparent: None,
            acker: Box::new(NoAck),
        };
        let msg = DispatchMsg {
            v: kairos_core::protocol::PROTOCOL_VERSION,
            execution_id: name.to_string(),
            job_id: "j".into(),
            attempt: 1,
            handler: "noop".into(),
            params: serde_json::Value::Null,
            scheduled_at: 1,
            timeout_ms: None,
            group: None,
            trace: None,
            priority: Priority::new(priority),
            shard: None,
            immediate,
            parent_outputs: None,
        };
        intake.push(delivery, vec![msg]);
    }

    #[tokio::test]
    async fn the_most_urgent_delivery_goes_first_then_arrival_order() {
        let intake = Intake::default();
        arrive(&intake, "bulk-1", 0, false);
        arrive(&intake, "cron", 5, false);
        arrive(&intake, "bulk-2", 0, false);
        arrive(&intake, "waited-for", 5, true);
        arrive(&intake, "urgent", 9, false);
        let mut order = Vec::new();
        for _ in 0..5 {
            order.push(intake.next().await.msgs[0].execution_id.clone());
        }
        assert_eq!(order, ["urgent", "waited-for", "cron", "bulk-1", "bulk-2"]);
    }

    #[tokio::test]
    async fn a_cleared_intake_waits_for_the_next_arrival() {
        let intake = std::sync::Arc::new(Intake::default());
        arrive(&intake, "stale", 9, false);
        assert_eq!(intake.clear(), 1);
        let next = tokio::spawn({
            let intake = intake.clone();
            async move { intake.next().await.msgs[0].execution_id.clone() }
        });
        arrive(&intake, "fresh", 0, false);
        assert_eq!(next.await.unwrap(), "fresh");
    }
}

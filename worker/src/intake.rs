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
//!
//! Both of the worker's queues feed it: the main one and the immediate one
//! (its own consumer and prefetch window, see
//! [`kairos_core::broker::DispatchQueue`]), so urgent work arrives here
//! even while the main queue's window is full.

use crate::ranked::{Place, RankQueue};
use kairos_core::broker::{Delivery, DispatchQueue};
use kairos_core::protocol::{DispatchMsg, batch_rank};
use std::sync::{Mutex, MutexGuard, PoisonError};
use tokio::sync::Notify;

/// A decoded delivery waiting to be taken into the pool.
pub(crate) struct Arrived {
    pub(crate) delivery: Delivery,
    pub(crate) msgs: Vec<DispatchMsg>,
    /// The queue it came from.
    pub(crate) from: DispatchQueue,
    /// Its place in line: the most urgent of its dispatches' ranks, and when
    /// it arrived.
    pub(crate) place: Place,
}

impl Arrived {
    /// The most urgent of its dispatches' ranks.
    pub(crate) fn rank(&self) -> u8 {
        self.place.rank
    }
}

/// A delivery as it waits.
struct Waiting {
    delivery: Delivery,
    msgs: Vec<DispatchMsg>,
    from: DispatchQueue,
}

/// The waiting deliveries.
#[derive(Default)]
pub(crate) struct Intake {
    waiting: Mutex<RankQueue<Waiting>>,
    arrived: Notify,
}

impl Intake {
    fn lock(&self) -> MutexGuard<'_, RankQueue<Waiting>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a delivery from queue `from` and its decoded dispatches.
    pub(crate) fn push(&self, from: DispatchQueue, delivery: Delivery, msgs: Vec<DispatchMsg>) {
        let rank = batch_rank(&msgs);
        self.lock().push(
            rank,
            Waiting {
                delivery,
                msgs,
                from,
            },
        );
        self.arrived.notify_one();
    }

    /// The most urgent waiting delivery, once there is one.
    pub(crate) async fn next(&self) -> Arrived {
        loop {
            // Registered before the check, so a push in between is seen.
            let arrived = self.arrived.notified();
            if let Some((place, w)) = self.lock().pop_placed() {
                return Arrived {
                    delivery: w.delivery,
                    msgs: w.msgs,
                    from: w.from,
                    place,
                };
            }
            arrived.await;
        }
    }

    /// Resolves once a delivery that outranks `rank` waits here: the
    /// delivery loop then puts back the one it was finding a place for
    /// and takes that first.
    pub(crate) async fn outranked(&self, rank: u8) {
        loop {
            let arrived = self.arrived.notified();
            if self.lock().top_rank().is_some_and(|top| top > rank) {
                return;
            }
            arrived.await;
        }
    }

    /// Puts a delivery taken with [`Intake::next`] back in its place.
    pub(crate) fn put_back(&self, a: Arrived) {
        let waiting = Waiting {
            delivery: a.delivery,
            msgs: a.msgs,
            from: a.from,
        };
        self.lock().restore(a.place, waiting);
        self.arrived.notify_one();
    }

    /// Forgets what waits from queue `from`: the consumer that received it
    /// is gone, and the broker gives its unsettled deliveries to the next
    /// one.
    pub(crate) fn clear(&self, from: DispatchQueue) -> usize {
        self.lock().retain(|w| w.from != from)
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
        let from = if immediate {
            DispatchQueue::Immediate
        } else {
            DispatchQueue::Main
        };
        intake.push(from, delivery, vec![msg]);
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
    async fn a_put_back_delivery_keeps_its_place() {
        let intake = Intake::default();
        arrive(&intake, "bulk-1", 0, false);
        arrive(&intake, "bulk-2", 0, false);
        let first = intake.next().await;
        arrive(&intake, "urgent", 9, false);
        let wait = std::time::Duration::from_secs(5);
        tokio::time::timeout(wait, intake.outranked(first.rank()))
            .await
            .expect("the urgent arrival is seen");
        intake.put_back(first);
        let mut order = Vec::new();
        for _ in 0..3 {
            order.push(intake.next().await.msgs[0].execution_id.clone());
        }
        assert_eq!(order, ["urgent", "bulk-1", "bulk-2"]);
    }

    #[tokio::test]
    async fn a_cleared_intake_waits_for_the_next_arrival() {
        let intake = std::sync::Arc::new(Intake::default());
        arrive(&intake, "stale", 9, false);
        arrive(&intake, "other-queue", 9, true);
        assert_eq!(intake.clear(DispatchQueue::Main), 1);
        assert_eq!(intake.clear(DispatchQueue::Immediate), 1);
        let next = tokio::spawn({
            let intake = intake.clone();
            async move { intake.next().await.msgs[0].execution_id.clone() }
        });
        arrive(&intake, "fresh", 0, false);
        assert_eq!(next.await.unwrap(), "fresh");
    }
}

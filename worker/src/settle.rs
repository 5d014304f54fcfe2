//! Settles a delivery that carries one dispatch or a batch of them: each
//! dispatch settles its own [`Part`], and the delivery is settled once every
//! part is, acked if each part was, requeued if any part must run again.
//!
//! Requeueing a whole batch is safe because each attempt key is taken before
//! its handler starts: when the batch comes back, the attempts that already
//! started are skipped as duplicates and only the requeued ones run. A part
//! dropped unsettled (the worker is stopping) leaves the delivery unsettled,
//! and closing the consumer hands it back to the queue.

use kairos_core::broker::{Acker, BrokerResult};
use std::sync::{Arc, Mutex, PoisonError};

/// One dispatch's share of a delivery.
pub(crate) struct Part(Arc<Settlement>);

struct Settlement {
    acker: Box<dyn Acker>,
    state: Mutex<State>,
}

struct State {
    /// Parts not settled yet.
    left: usize,
    /// Whether some part asked for the delivery back.
    requeue: bool,
}

/// The parts of a delivery holding `n` dispatches (at least one).
pub(crate) fn split(acker: Box<dyn Acker>, n: usize) -> Vec<Part> {
    let n = n.max(1);
    let settlement = Arc::new(Settlement {
        acker,
        state: Mutex::new(State {
            left: n,
            requeue: false,
        }),
    });
    (0..n).map(|_| Part(Arc::clone(&settlement))).collect()
}

impl Part {
    /// This dispatch is done with (started, or skipped as a duplicate).
    pub(crate) async fn ack(self) -> BrokerResult<()> {
        self.settle(false).await
    }

    /// This dispatch must run again: the delivery goes back to the queue.
    pub(crate) async fn requeue(self) -> BrokerResult<()> {
        self.settle(true).await
    }

    /// Settles the delivery if this is its last part; an error is the
    /// broker's answer to that last settle.
    async fn settle(self, requeue: bool) -> BrokerResult<()> {
        let last = {
            let mut s = self.0.state.lock().unwrap_or_else(PoisonError::into_inner);
            s.left = s.left.saturating_sub(1);
            s.requeue |= requeue;
            (s.left == 0).then_some(s.requeue)
        };
        match last {
            None => Ok(()),
            Some(false) => self.0.acker.ack().await,
            Some(true) => self.0.acker.reject(true).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;

    /// Records how the delivery was settled.
    #[derive(Clone, Default)]
    struct Seen(Arc<Mutex<Vec<&'static str>>>);

    #[async_trait]
    impl Acker for Seen {
        async fn ack(&self) -> BrokerResult<()> {
            self.0.lock().unwrap().push("ack");
            Ok(())
        }
        async fn reject(&self, requeue: bool) -> BrokerResult<()> {
            self.0
                .lock()
                .unwrap()
                .push(if requeue { "requeue" } else { "reject" });
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_batch_is_acked_once_every_part_is() {
        let seen = Seen::default();
        let mut parts = split(Box::new(seen.clone()), 3);
        parts.pop().unwrap().ack().await.unwrap();
        parts.pop().unwrap().ack().await.unwrap();
        assert!(seen.0.lock().unwrap().is_empty(), "one part is still open");
        parts.pop().unwrap().ack().await.unwrap();
        assert_eq!(*seen.0.lock().unwrap(), vec!["ack"]);
    }

    #[tokio::test]
    async fn one_part_asking_to_run_again_requeues_the_batch() {
        let seen = Seen::default();
        let mut parts = split(Box::new(seen.clone()), 3);
        parts.pop().unwrap().ack().await.unwrap();
        parts.pop().unwrap().requeue().await.unwrap();
        parts.pop().unwrap().ack().await.unwrap();
        assert_eq!(*seen.0.lock().unwrap(), vec!["requeue"]);
    }

    #[tokio::test]
    async fn a_part_dropped_unsettled_leaves_the_delivery_unsettled() {
        let seen = Seen::default();
        let mut parts = split(Box::new(seen.clone()), 2);
        drop(parts.pop());
        parts.pop().unwrap().ack().await.unwrap();
        assert!(seen.0.lock().unwrap().is_empty());
        let single = split(Box::new(seen.clone()), 1);
        assert_eq!(single.len(), 1);
    }
}

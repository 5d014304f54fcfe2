//! Sends dispatches that a worker refused (its pool and buffer were full) to
//! another worker. The refusing worker is avoided; only when no other worker
//! can take the message (e.g. a single-worker deployment) does it go back to
//! the refusing one, after a pause that gives it time to drain.
//!
//! The execution's row then names the new worker, so if that worker dies the
//! reaper rescues the execution from the right queue.
//!
//! A refused batch (one message holding several dispatches) is split: each
//! of its dispatches is placed on its own.
//!
//! A message refused again soon after it was rerouted means every worker it
//! could go to is full (heartbeats lag behind a burst): it waits a moment
//! before going out again, instead of bouncing between full workers as fast
//! as the broker can carry it.

use crate::balancer::{Balancer, Want};
use backon::{ExponentialBuilder, Retryable};
use kairos_core::broker::{Broker, BrokerError, Delivery, DeliveryStream};
use kairos_core::protocol::{DispatchMsg, decode_dispatches};
use kairos_core::store::{Dispatch, DispatchedTo, StoreError};
use kairos_core::supervise::{self, Backoff, Subscription, spawn_critical};
use kairos_core::time::now_ms;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

/// How long to wait before trying again when no other worker can take a message.
const HOLD: Duration = Duration::from_millis(250);
/// Retries at recording a rerouted dispatch's new worker, and the first
/// pause between tries (doubling, with jitter): about 1.5 s in all.
const RECORD_RETRIES: usize = 4;
const RECORD_FIRST_RETRY: Duration = Duration::from_millis(50);
/// A message back within this long of its last reroute is bouncing.
const BOUNCE_WINDOW: Duration = Duration::from_secs(2);

/// When each execution was last rerouted, to notice bouncing.
#[derive(Default)]
struct Recent {
    at: HashMap<String, Instant>,
}

impl Recent {
    /// Records a reroute of `execution` now; whether it bounced.
    fn bounced(&mut self, execution: &str) -> bool {
        let now = Instant::now();
        if self.at.len() > 10_000 {
            self.at
                .retain(|_, t| now.duration_since(*t) < BOUNCE_WINDOW);
        }
        self.at
            .insert(execution.to_string(), now)
            .is_some_and(|t| now.duration_since(t) < BOUNCE_WINDOW)
    }
}

/// Reroutes until `token` is cancelled (the leader's term).
pub async fn run_reroute(
    broker: Arc<dyn Broker>,
    store: Arc<dyn Dispatch>,
    balancer: Arc<Mutex<Balancer>>,
    token: CancellationToken,
) {
    let rerouter = Rerouter {
        broker,
        store,
        balancer,
        recent: Recent::default(),
        token: token.clone(),
    };
    let backoff = Backoff {
        min: HOLD,
        max: Duration::from_secs(5),
    };
    supervise::consume("reroute", rerouter, backoff, &token).await
}

/// The reroute queue's consumer, with what it needs to place each message.
struct Rerouter {
    broker: Arc<dyn Broker>,
    store: Arc<dyn Dispatch>,
    balancer: Arc<Mutex<Balancer>>,
    recent: Recent,
    token: CancellationToken,
}

impl Subscription for Rerouter {
    type Item = Delivery;
    type Stream = DeliveryStream;
    type Error = BrokerError;

    async fn open(&mut self) -> Result<DeliveryStream, BrokerError> {
        self.broker.reroute_consume(64).await
    }

    async fn handle(&mut self, delivery: Delivery) {
        let to = Route {
            broker: self.broker.as_ref(),
            store: &self.store,
            balancer: &self.balancer,
        };
        reroute_one(&to, delivery, &mut self.recent, &self.token).await;
    }
}

/// Where rerouted messages go and where that is recorded.
struct Route<'a> {
    broker: &'a dyn Broker,
    store: &'a Arc<dyn Dispatch>,
    balancer: &'a Mutex<Balancer>,
}

/// Places every dispatch of a refused message (a batch is split: each goes
/// wherever there is room), then acks it. Cancelled midway, the message is
/// left unsettled and comes back; the attempt keys skip what already ran.
async fn reroute_one(to: &Route<'_>, d: Delivery, recent: &mut Recent, token: &CancellationToken) {
    let msgs = match decode_dispatches(&d.payload) {
        Ok(m) => m,
        Err(e) => {
            warn!(error = %e, "dropping a malformed rerouted message");
            let _ = d.acker.reject(false).await;
            return;
        }
    };
    for msg in &msgs {
        if !place(to, msg, d.rejected_by.as_deref(), recent, token).await {
            return;
        }
    }
    let _ = d.acker.ack().await;
}

/// Publishes `msg` to a worker other than `refuser` if one can take it;
/// false if the term ended first.
async fn place(
    to: &Route<'_>,
    msg: &DispatchMsg,
    refuser: Option<&str>,
    recent: &mut Recent,
    token: &CancellationToken,
) -> bool {
    if recent.bounced(&msg.execution_id) {
        hold(token).await;
    }
    // Held unacked until a worker has room: the message stays safe in the
    // broker, and the dispatcher keeps the rest of its work flowing.
    let mut exclude = refuser;
    while !token.is_cancelled() {
        let pick = to.balancer.lock().unwrap_or_else(|p| p.into_inner()).pick(
            now_ms(),
            Want {
                handler: &msg.handler,
                group: msg.group.as_deref(),
            },
            exclude,
        );
        let Some(worker) = pick else {
            // Nobody else can take it: after a pause, the refuser may have room.
            exclude = None;
            hold(token).await;
            continue;
        };
        let queue = to
            .balancer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .queue_for(&worker, msg.immediate);
        let published = to
            .broker
            .dispatch_publish_to(&worker, queue, std::slice::from_ref(msg))
            .await;
        match published {
            Ok(()) => {
                debug!(execution = %msg.execution_id, from = ?refuser, to = %worker, "rerouted");
                crate::metrics::rerouted();
                record(to.store.clone(), msg, &worker, refuser);
                return true;
            }
            Err(e) => {
                to.balancer
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .unpick(&worker);
                warn!(execution = %msg.execution_id, error = %e, "reroute publish failed; retrying");
                hold(token).await;
            }
        }
    }
    false
}

/// Records the execution's new worker, in the background. A refusal can
/// come back before the publisher has recorded the first confirm (the row is
/// still `pending` then, and that record would name the refusing worker), so
/// a record that changed nothing is tried again a few times.
fn record(store: Arc<dyn Dispatch>, msg: &DispatchMsg, worker: &str, from: Option<&str>) {
    let sent = DispatchedTo {
        execution_id: msg.execution_id.clone(),
        attempt: msg.attempt,
        worker_id: worker.to_string(),
    };
    let reason = match from {
        Some(from) => format!("rerouted: worker {from} was full"),
        None => "rerouted".to_string(),
    };
    // Jitter: a burst of reroutes must not come back to the database in step.
    let pauses = ExponentialBuilder::default()
        .with_min_delay(RECORD_FIRST_RETRY)
        .with_max_times(RECORD_RETRIES)
        .with_jitter();
    spawn_critical("reroute record", async move {
        let recorded = (|| async {
            match store
                .execution_mark_rerouted(&sent, &reason, now_ms())
                .await
            {
                Ok(true) => Ok(()),
                // Not `dispatched` (yet): the publisher's record may follow.
                Ok(false) => Err(Unrecorded::NotYet),
                Err(e) => Err(Unrecorded::Store(e)),
            }
        })
        .retry(pauses)
        .notify(|e, _| {
            if let Unrecorded::Store(e) = e {
                warn!(execution = %sent.execution_id, error = %e, "cannot record the rerouted dispatch's new worker");
            }
        })
        .await;
        if recorded.is_err() {
            debug!(execution = %sent.execution_id, "gave up recording the rerouted dispatch's new worker");
        }
    });
}

/// Why a try at recording a reroute changed nothing.
enum Unrecorded {
    /// The row is not `dispatched` yet.
    NotYet,
    /// The store failed.
    Store(StoreError),
}

async fn hold(token: &CancellationToken) {
    tokio::select! {
        _ = token.cancelled() => {}
        _ = tokio::time::sleep(HOLD) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_back_soon_after_its_reroute_has_bounced() {
        let mut recent = Recent::default();
        assert!(!recent.bounced("e1"));
        assert!(recent.bounced("e1"));
        assert!(!recent.bounced("e2"));
    }
}

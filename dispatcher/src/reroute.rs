//! Sends dispatches that a worker refused (its pool and buffer were full) to
//! another worker. The refusing worker is avoided; only when no other worker
//! can take the message (e.g. a single-worker deployment) does it go back to
//! the refusing one, after a pause that gives it time to drain.

use crate::balancer::Balancer;
use futures::StreamExt;
use kairos_core::broker::{Broker, Delivery};
use kairos_core::protocol::DispatchMsg;
use kairos_core::time::now_ms;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

/// How long to wait before trying again when no other worker can take a message.
const HOLD: Duration = Duration::from_millis(250);

/// Reroutes until `token` is cancelled (the leader's term).
pub async fn run_reroute(
    broker: Arc<dyn Broker>,
    balancer: Arc<Mutex<Balancer>>,
    token: CancellationToken,
) {
    while !token.is_cancelled() {
        let mut stream = match broker.reroute_consume(64).await {
            Ok(s) => s,
            Err(e) => {
                warn!(error = %e, "cannot consume the reroute queue; retrying");
                hold(&token).await;
                continue;
            }
        };
        loop {
            let next = tokio::select! {
                _ = token.cancelled() => return,
                d = stream.next() => d,
            };
            let Some(delivery) = next else { break };
            reroute_one(broker.as_ref(), &balancer, delivery, &token).await;
        }
        hold(&token).await;
    }
}

async fn reroute_one(
    broker: &dyn Broker,
    balancer: &Mutex<Balancer>,
    d: Delivery,
    token: &CancellationToken,
) {
    let msg: DispatchMsg = match serde_json::from_slice(&d.payload) {
        Ok(m) => m,
        Err(e) => {
            warn!(error = %e, "dropping a malformed rerouted message");
            let _ = d.acker.reject(false).await;
            return;
        }
    };
    // Held unacked until a worker has room: the message stays safe in the
    // broker, and the dispatcher keeps the rest of its work flowing.
    let mut exclude = d.rejected_by.as_deref();
    while !token.is_cancelled() {
        let pick = balancer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pick(now_ms(), exclude);
        let Some(worker) = pick else {
            // Nobody else can take it: after a pause, the refuser may have room.
            exclude = None;
            hold(token).await;
            continue;
        };
        match broker.dispatch_publish(&worker, &msg).await {
            Ok(()) => {
                debug!(execution = %msg.execution_id, from = ?d.rejected_by, to = %worker, "rerouted");
                let _ = d.acker.ack().await;
                return;
            }
            Err(e) => {
                balancer
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .unpick(&worker);
                warn!(execution = %msg.execution_id, error = %e, "reroute publish failed; retrying");
                hold(token).await;
            }
        }
    }
}

async fn hold(token: &CancellationToken) {
    tokio::select! {
        _ = token.cancelled() => {}
        _ = tokio::time::sleep(HOLD) => {}
    }
}

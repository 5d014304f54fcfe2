//! The stop watcher: looks up stop requests for the attempts running here and
//! stops the ones the scheduler asked to stop (job cancelled, execution
//! replaced, or attempt declared lost while this worker was cut off).
//!
//! Requests are keys on the coordination service rather than messages, so a
//! worker that was partitioned away when the request was made still finds it
//! when it comes back. One batched lookup per period, only while something runs.

use crate::pool::Pool;
use kairos_core::coord::Coordination;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Runs until `stop` is cancelled, looking every `every` for requests to
/// stop the attempts running in `pool`.
pub(crate) async fn run(
    worker_id: String,
    coord: Arc<dyn Coordination>,
    pool: Arc<Pool>,
    every: Duration,
    stop: CancellationToken,
) {
    let mut failing = false;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        let keys = pool.running_keys();
        if keys.is_empty() {
            continue;
        }
        match coord.stops_posted(&keys).await {
            Ok(posted) => {
                failing = false;
                for (key, _) in keys.iter().zip(posted).filter(|(_, p)| *p) {
                    if pool.stop(key) {
                        crate::metrics::stop_honoured();
                        tracing::info!(worker_id = %worker_id, stop_key = %key, "stopping an attempt at the scheduler's request");
                    }
                }
            }
            // Logged once per outage: the lookup repeats every period.
            Err(e) if !failing => {
                failing = true;
                tracing::warn!(worker_id = %worker_id, "cannot look up stop requests: {e}; retrying");
            }
            Err(_) => {}
        }
    }
}

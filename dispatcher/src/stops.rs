//! The stop relay (leader only): turns the stop requests recorded in the
//! database (a job cancelled while running, an execution replaced under the
//! `replace` overlap policy) into stop requests on the coordination service,
//! where the worker running the attempt looks for them.
//!
//! The database is the durable record, decided in the same transaction as the
//! cancel or the replacing claim; this relay only carries it to workers, so a
//! relay that dies midway loses nothing: the next leader posts it again.

use crate::attempts::Attempts;
use kairos_core::coord::CoordError;
use kairos_core::store::{Maintenance, StoreError};
use kairos_core::time::{Millis, now_ms};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

/// Requests older than this are not posted again by a new leader: by then
/// the previous leader posted them (they live for
/// [`crate::attempts::STOP_REQUEST_TTL`]) or the attempt has ended.
const WINDOW: Duration = Duration::from_secs(600);
/// Requests read per look.
const LIMIT: u32 = 500;

/// Relays stop requests every `every` until the term ends.
pub async fn run(
    store: Arc<dyn Maintenance>,
    attempts: Attempts,
    every: Duration,
    term: CancellationToken,
) {
    // Posted during this term, so each request is posted once.
    let mut posted: HashSet<(String, u32)> = HashSet::new();
    let mut failing = false;
    while !term.is_cancelled() {
        let since = now_ms() - WINDOW.as_millis() as Millis;
        match relay_once(store.as_ref(), &attempts, since, &mut posted).await {
            Ok(n) => {
                failing = false;
                if n > 0 {
                    debug!(count = n, "posted stop requests");
                }
            }
            Err(e) if !failing => {
                failing = true;
                warn!(error = %e, "cannot relay stop requests; retrying");
            }
            Err(_) => {}
        }
        tokio::select! {
            _ = term.cancelled() => {}
            _ = tokio::time::sleep(every) => {}
        }
    }
}

/// Why a relay round failed.
#[derive(Debug, thiserror::Error)]
enum RelayError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Coord(#[from] CoordError),
}

/// Posts the requests not posted yet; how many it posted.
async fn relay_once(
    store: &dyn Maintenance,
    attempts: &Attempts,
    since: Millis,
    posted: &mut HashSet<(String, u32)>,
) -> Result<usize, RelayError> {
    let requests = store.executions_stop_requested(since, LIMIT).await?;
    let live: HashSet<(String, u32)> = requests
        .iter()
        .map(|r| (r.execution_id.clone(), r.attempt))
        .collect();
    // Forget what has ended, so the set stays as small as the live requests.
    posted.retain(|k| live.contains(k));
    let fresh: Vec<(String, u32)> = live.into_iter().filter(|k| !posted.contains(k)).collect();
    if fresh.is_empty() {
        return Ok(0);
    }
    attempts.post_stops(&fresh).await?;
    let n = fresh.len();
    posted.extend(fresh);
    Ok(n)
}

//! What the dispatcher does to attempts through the coordination service:
//! giving back attempt keys, and posting stop requests that the worker
//! running an attempt looks up.

use kairos_core::coord::{CoordResult, Coordination};
use kairos_core::protocol::Names;
use kairos_core::store::Applied;
use std::sync::Arc;
use std::time::Duration;
use tracing::warn;

/// How long a stop request stays posted: longer than any partition a worker
/// could come back from with its handlers still running.
pub const STOP_REQUEST_TTL: Duration = Duration::from_secs(24 * 3600);

/// Coordination and names, for attempt keys and stop requests.
#[derive(Clone)]
pub struct Attempts {
    /// Attempt keys and stop requests.
    pub coord: Arc<dyn Coordination>,
    /// Key names.
    pub names: Names,
}

impl Attempts {
    /// Posts a stop request for each `(execution_id, attempt)`.
    pub async fn post_stops(&self, targets: &[(String, u32)]) -> CoordResult<()> {
        if targets.is_empty() {
            return Ok(());
        }
        let keys: Vec<String> = targets
            .iter()
            .map(|(id, attempt)| self.names.stop_key(id, *attempt))
            .collect();
        self.coord.stops_post(&keys, STOP_REQUEST_TTL).await
    }

    /// Like [`Attempts::post_stops`], best effort: logged on failure, since
    /// the attempt's result is refused either way.
    pub async fn stop(&self, targets: &[(String, u32)], why: &str) {
        if let Err(e) = self.post_stops(targets).await {
            warn!(error = %e, count = targets.len(), "cannot post stop requests for attempts {why}");
        }
    }

    /// Posts a stop request for each attempt that `applied` moved.
    pub async fn stop_moved(&self, applied: &[Applied], why: &str) {
        let targets: Vec<(String, u32)> = applied
            .iter()
            .filter(|a| a.new_status.is_some())
            .map(|a| (a.execution_id.clone(), a.attempt))
            .collect();
        self.stop(&targets, why).await;
    }
}

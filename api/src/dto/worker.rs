//! Worker responses: the figures of each worker's latest heartbeat.

use super::time;
use kairos_core::worker::WorkerInfo;
use serde::Serialize;
use utoipa::ToSchema;

/// One worker as its last heartbeat described it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerView {
    /// Stable worker id.
    pub worker_id: String,
    /// Queue it consumes.
    pub queue: String,
    /// Handlers it runs in parallel.
    pub capacity: u32,
    /// Handlers running at the last heartbeat.
    pub active: u32,
    /// Mean handler duration in ms.
    pub avg_cost_ms: f64,
    /// CPU idle percentage.
    pub cpu_idle: f64,
    /// Lifecycle state.
    #[schema(schema_with = super::worker_state_schema)]
    pub state: String,
    /// Time of the last heartbeat (worker clock).
    #[schema(format = DateTime)]
    pub last_heartbeat_at: String,
    /// First registration.
    #[schema(format = DateTime)]
    pub registered_at: String,
    /// Handlers it serves; `null` for a worker that does not say (it is
    /// taken to serve every handler).
    pub handlers: Option<Vec<String>>,
    /// Its worker group, if any.
    pub group: Option<String>,
    /// Most dispatches it takes in one message (1: one per message).
    pub dispatch_batch: u32,
}

impl From<WorkerInfo> for WorkerView {
    fn from(w: WorkerInfo) -> Self {
        WorkerView {
            worker_id: w.id,
            queue: w.queue,
            capacity: w.capacity,
            active: w.active,
            avg_cost_ms: w.avg_cost_ms,
            cpu_idle: w.cpu_idle,
            state: w.state.as_str().to_string(),
            last_heartbeat_at: time(w.last_heartbeat_at),
            registered_at: time(w.registered_at),
            handlers: w.serves.handlers,
            group: w.serves.group,
            dispatch_batch: w.dispatch_batch,
        }
    }
}

/// All known workers.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WorkerList {
    /// Workers.
    pub items: Vec<WorkerView>,
}

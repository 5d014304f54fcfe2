//! What a running worker talks to and who it is there: the broker, the
//! coordination service (attempt keys, stop requests), the queue and key
//! names, and this process's identity.

use kairos_core::broker::Broker;
use kairos_core::coord::Coordination;
use kairos_core::protocol::{HeartbeatMsg, Names};
use std::sync::Arc;

pub(crate) struct Connections {
    pub(crate) id: String,
    /// Fresh for every process: tells the dispatchers this process from an
    /// earlier one under the same worker id (see `docs/worker-protocol.md`).
    pub(crate) incarnation: String,
    pub(crate) names: Names,
    pub(crate) broker: Arc<dyn Broker>,
    /// Attempt keys and stop requests.
    pub(crate) coord: Arc<dyn Coordination>,
}

impl Connections {
    /// A new process's connections, with a fresh incarnation.
    pub(crate) fn new(
        id: String,
        names: Names,
        broker: Arc<dyn Broker>,
        coord: Arc<dyn Coordination>,
    ) -> Self {
        Self {
            id,
            incarnation: new_incarnation(),
            names,
            broker,
            coord,
        }
    }

    /// The owner written into this process's attempt keys.
    pub(crate) fn key_owner(&self) -> String {
        HeartbeatMsg::key_owner(&self.id, Some(&self.incarnation))
    }
}

/// A fresh incarnation id: the start time (hex ms) and 64 random bits, so
/// ids sort by start and never repeat.
fn new_incarnation() -> String {
    format!(
        "{:x}-{:016x}",
        kairos_core::time::now_ms(),
        rand::random::<u64>()
    )
}

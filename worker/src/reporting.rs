//! What a running worker sends back besides heartbeats: results (`started`
//! reports and final results, through one grouped outlet) and handlers' log
//! lines (through a sink whose shipper publishes them in the background).

use crate::logs::{self, LogSink, Shipper};
use crate::results::Reporter;
use kairos_core::broker::Broker;
use std::sync::Arc;

/// The two outlets. Cheap to clone: each is a handle on one shared queue.
#[derive(Clone)]
pub(crate) struct Reporting {
    /// Publishes `started` reports and final results, grouped.
    pub(crate) results: Reporter,
    /// Where handlers' log lines go.
    pub(crate) logs: LogSink,
}

impl Reporting {
    /// Outlets on `broker`, and the log shipper the worker runs beside them.
    pub(crate) fn new(broker: Arc<dyn Broker>, worker_id: String) -> (Self, Shipper) {
        let (logs, shipper) = logs::channel(Arc::clone(&broker), worker_id);
        let results = Reporter::new(broker);
        (Self { results, logs }, shipper)
    }
}

//! Due signals: the API tells the leader dispatcher "a job became due at T"
//! so it dispatches at once instead of at its next scan, and anyone that
//! left executions `pending` (a manual trigger, a workflow's next nodes, a
//! child job) tells it "sweep now" instead of at its next sweep. Best effort
//! by design: a lost signal costs latency, never a trigger, because the
//! leader's periodic scan and sweep stay the safety net.
//!
//! Implemented over Redis pub/sub (`kairos-coord-redis`) and in process
//! (`kairos-inproc`, for `kairos dev`).

use crate::coord::CoordResult;
use crate::time::Millis;
use async_trait::async_trait;
use futures::stream::BoxStream;

/// What a due signal tells the leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// A job's trigger is due at this time (ms UTC): claim it by then.
    At(Millis),
    /// Executions were just left `pending`, due now (a manual trigger, the
    /// next nodes of a workflow run, a child job): sweep them up now.
    Pending,
}

/// Signals about jobs that became due.
#[async_trait]
pub trait DueSignal: Send + Sync {
    /// Announces `due`. Never fails the caller: errors are logged, the scan
    /// and the sweep catch up.
    async fn announce(&self, due: Due);
    /// Signals announced from now on. The stream ends when the connection
    /// is lost; subscribe again to resume.
    async fn subscribe(&self) -> CoordResult<BoxStream<'static, Due>>;
}

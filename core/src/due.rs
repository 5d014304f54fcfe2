//! Due signals: the API tells the leader dispatcher "a job became due at T"
//! so it dispatches at once instead of at its next scan. Best effort by
//! design: a lost signal costs latency, never a trigger, because the leader's
//! periodic scan stays the safety net.
//!
//! Implemented over Redis pub/sub (`kairos-coord-redis`) and in process
//! (`kairos-inproc`, for `kairos dev`).

use crate::coord::CoordResult;
use crate::time::Millis;
use async_trait::async_trait;
use futures::stream::BoxStream;

/// Signals about jobs that became due.
#[async_trait]
pub trait DueSignal: Send + Sync {
    /// Announces that a job is due at `at` (ms UTC). Never fails the caller:
    /// errors are logged, the scan catches up.
    async fn announce(&self, at: Millis);
    /// Due times announced from now on. The stream ends when the connection
    /// is lost; subscribe again to resume.
    async fn subscribe(&self) -> CoordResult<BoxStream<'static, Millis>>;
}

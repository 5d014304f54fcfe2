//! Execution logs kept for a while: every instance stores the lines workers
//! send (see [`crate::consume::run_logs`]) and purges the ones older than the
//! retention period, a bounded batch at a time.

use kairos_core::store::{DispatcherStore, LogLimits};
use kairos_core::time::now_ms;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

/// Lines deleted per statement round; a larger backlog takes several rounds.
const PURGE_BATCH: u32 = 5_000;

/// What is kept of execution logs, and for how long.
#[derive(Debug, Clone)]
pub struct LogConfig {
    /// Per-execution bounds (oldest lines dropped first).
    pub limits: LogLimits,
    /// Lines older than this are deleted.
    pub retention: Duration,
    /// How often old lines are looked for.
    pub purge_every: Duration,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            limits: LogLimits::default(),
            retention: Duration::from_secs(72 * 3600),
            purge_every: Duration::from_secs(60),
        }
    }
}

/// Deletes lines past their retention every `purge_every` until `shutdown`.
/// Several instances may purge at once: each deletes what it found, and a
/// line deleted twice is simply gone.
pub async fn run_purge(
    store: Arc<dyn DispatcherStore>,
    cfg: LogConfig,
    shutdown: CancellationToken,
) {
    let retention_ms = i64::try_from(cfg.retention.as_millis()).unwrap_or(i64::MAX);
    loop {
        let before = now_ms().saturating_sub(retention_ms);
        loop {
            match store.logs_purge(before, PURGE_BATCH).await {
                Ok(n) if n >= u64::from(PURGE_BATCH) && !shutdown.is_cancelled() => {
                    debug!(purged = n, "purged old execution log lines; more to go");
                }
                Ok(0) => break,
                Ok(n) => {
                    debug!(purged = n, "purged old execution log lines");
                    break;
                }
                Err(e) => {
                    warn!(error = %e, "cannot purge old execution log lines; retrying later");
                    break;
                }
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(cfg.purge_every) => {}
        }
    }
}

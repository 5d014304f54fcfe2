//! Execution logs kept for a while: every instance stores the lines workers
//! send (see [`crate::consume::run_logs`]) and purges the ones older than the
//! retention period, a bounded batch at a time.

use kairos_core::store::{LogLimits, LogStore};
use kairos_core::time::now_ms;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

/// Lines deleted per statement round; a larger backlog takes several rounds.
const PURGE_BATCH: u32 = 5_000;

/// Default of [`LogConfig::log_retention_hours`].
pub const DEFAULT_RETENTION_HOURS: u64 = 72;

/// What is kept of execution logs, and for how long. Setting fields are
/// named like their `KAIROS_*` variables.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, clap::Args)]
#[serde(default)]
pub struct LogConfig {
    /// `KAIROS_LOG_RETENTION_HOURS`: lines older than this are deleted.
    #[arg(long, env = "KAIROS_LOG_RETENTION_HOURS", value_name = "HOURS")]
    pub log_retention_hours: u64,
    /// `KAIROS_LOG_MAX_LINES`: lines kept per execution; the oldest go first.
    #[arg(long, env = "KAIROS_LOG_MAX_LINES", value_name = "N")]
    pub log_max_lines: u32,
    /// `KAIROS_LOG_MAX_BYTES`: bytes of log text kept per execution; the
    /// oldest lines go first.
    #[arg(long, env = "KAIROS_LOG_MAX_BYTES", value_name = "BYTES")]
    pub log_max_bytes: u64,
    /// How often old lines are looked for.
    #[serde(skip)]
    #[arg(skip)]
    pub purge_every: Duration,
}

impl Default for LogConfig {
    fn default() -> Self {
        let limits = LogLimits::default();
        Self {
            log_retention_hours: DEFAULT_RETENTION_HOURS,
            log_max_lines: limits.max_lines,
            log_max_bytes: limits.max_bytes,
            purge_every: Duration::from_secs(60),
        }
    }
}

impl LogConfig {
    /// Lines older than this are deleted.
    pub fn retention(&self) -> Duration {
        Duration::from_secs(self.log_retention_hours.saturating_mul(3600))
    }

    /// The per-execution bounds the store enforces.
    pub fn limits(&self) -> LogLimits {
        LogLimits {
            max_lines: self.log_max_lines,
            max_bytes: self.log_max_bytes,
            ..LogLimits::default()
        }
    }

    /// Refuses values that would keep nothing, naming the variable.
    pub fn validate(&self) -> Result<(), crate::ConfigError> {
        let bad = |m: &str| Err(crate::ConfigError(m.into()));
        if self.log_retention_hours == 0 {
            return bad("KAIROS_LOG_RETENTION_HOURS must be at least 1");
        }
        if self.log_max_lines == 0 {
            return bad("KAIROS_LOG_MAX_LINES must be at least 1");
        }
        if self.log_max_bytes < 1024 {
            return bad("KAIROS_LOG_MAX_BYTES must be at least 1024");
        }
        Ok(())
    }
}

/// Deletes lines past their retention every `purge_every` until `shutdown`.
/// Several instances may purge at once: each deletes what it found, and a
/// line deleted twice is simply gone.
pub async fn run_purge(store: Arc<dyn LogStore>, cfg: LogConfig, shutdown: CancellationToken) {
    let retention_ms = i64::try_from(cfg.retention().as_millis()).unwrap_or(i64::MAX);
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

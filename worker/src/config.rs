//! The worker's settings as one typed value: field names are the
//! `KAIROS_*` variables in lower case, defaults are the crate's constants.

use crate::{
    DEFAULT_ATTEMPT_KEY_TTL, DEFAULT_CAPACITY, DEFAULT_GRACE_PERIOD, DEFAULT_HEARTBEAT_EVERY,
    WorkerBuilder, WorkerError,
};
use std::time::Duration;

/// Shorter keys would let a dispatch redelivered while its handler still
/// runs start it again.
const MIN_ATTEMPT_KEY_TTL_MS: u64 = 60_000;

/// Settings of one worker process.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct WorkerConfig {
    /// `KAIROS_WORKER_ID`; `None`: hostname + random suffix.
    pub worker_id: Option<String>,
    /// `KAIROS_WORKER_CAPACITY`: handlers run in parallel.
    pub worker_capacity: u32,
    /// `KAIROS_WORKER_BUFFER`; `None`: the capacity.
    pub worker_buffer: Option<u32>,
    /// `KAIROS_WORKER_DISPATCH_BATCH`; `None`: the buffer, 1..=64.
    pub worker_dispatch_batch: Option<u32>,
    /// `KAIROS_WORKER_HEARTBEAT_MS`: heartbeat period, > 0.
    pub worker_heartbeat_ms: u64,
    /// `KAIROS_WORKER_GRACE_MS`: time handlers get to finish on shutdown.
    pub worker_grace_ms: u64,
    /// `KAIROS_WORKER_ATTEMPT_KEY_TTL_MS`: life of once-per-attempt keys.
    pub worker_attempt_key_ttl_ms: u64,
    /// `KAIROS_WORKER_GROUP`: jobs naming this group run only here.
    pub worker_group: Option<String>,
    /// `KAIROS_HTTP_ALLOW_PRIVATE`: let `http` jobs reach private addresses.
    pub http_allow_private: bool,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            worker_id: None,
            worker_capacity: DEFAULT_CAPACITY,
            worker_buffer: None,
            worker_dispatch_batch: None,
            worker_heartbeat_ms: DEFAULT_HEARTBEAT_EVERY.as_millis() as u64,
            worker_grace_ms: DEFAULT_GRACE_PERIOD.as_millis() as u64,
            worker_attempt_key_ttl_ms: DEFAULT_ATTEMPT_KEY_TTL.as_millis() as u64,
            worker_group: None,
            http_allow_private: false,
        }
    }
}

impl WorkerConfig {
    /// Refuses values the worker cannot run with, naming the variable.
    pub fn validate(&self) -> Result<(), WorkerError> {
        if self.worker_heartbeat_ms == 0 {
            return Err(WorkerError::Config(
                "KAIROS_WORKER_HEARTBEAT_MS must be positive".into(),
            ));
        }
        if self.worker_attempt_key_ttl_ms < MIN_ATTEMPT_KEY_TTL_MS {
            return Err(WorkerError::Config(format!(
                "KAIROS_WORKER_ATTEMPT_KEY_TTL_MS must be at least {MIN_ATTEMPT_KEY_TTL_MS} ms (got {})",
                self.worker_attempt_key_ttl_ms
            )));
        }
        Ok(())
    }
}

impl WorkerBuilder {
    /// Applies every setting of `cfg` through the individual setters.
    pub fn config(self, cfg: WorkerConfig) -> Self {
        let mut b = self
            .capacity(cfg.worker_capacity)
            .heartbeat_every(Duration::from_millis(cfg.worker_heartbeat_ms))
            .grace_period(Duration::from_millis(cfg.worker_grace_ms))
            .attempt_key_ttl(Duration::from_millis(cfg.worker_attempt_key_ttl_ms))
            .http_allow_private(cfg.http_allow_private);
        if let Some(id) = cfg.worker_id {
            b = b.id(id);
        }
        if let Some(n) = cfg.worker_buffer {
            b = b.buffer(n);
        }
        if let Some(n) = cfg.worker_dispatch_batch {
            b = b.dispatch_batch(n);
        }
        if let Some(g) = cfg.worker_group {
            b = b.group(g);
        }
        b
    }
}

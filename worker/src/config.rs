//! The worker's settings: [`WorkerConfig`] as users write it (one field per
//! `KAIROS_WORKER_*` variable), its defaults and checks, and the validated
//! form a running worker reads.

use kairos_core::broker::BrokerError;
use kairos_core::protocol::MAX_DISPATCH_BATCH;
use std::time::Duration;

/// Handlers run at once when the builder is not told otherwise.
///
/// A place is held from before the `started` report is published until the
/// handler returns, so even a handler that takes no time keeps it for a Redis
/// round trip and a persistent-message confirm: a worker's rate is capped at
/// capacity ÷ that time, and a small pool also shrinks the batches the
/// dispatcher and the worker send (docs/performance.md, "Worker capacity").
/// Handlers are async tasks, so an idle place costs nothing; a host running
/// CPU-bound handlers wants a lower setting.
pub const DEFAULT_CAPACITY: u32 = 32;
/// How long an attempt key lives when the builder is not told otherwise: as
/// long as the dispatchers' default ceiling on an attempt
/// (`KAIROS_DEFAULT_TIMEOUT_MS`), so a copy of a dispatch that turns up while
/// its attempt could still be live is skipped. Each key costs Redis about
/// 260 bytes for this long (docs/operations.md, "Redis").
pub const DEFAULT_ATTEMPT_KEY_TTL: Duration = Duration::from_secs(24 * 3600);
/// Shortest attempt key TTL accepted: a shorter one would let a dispatch
/// redelivered while its handler still runs start it a second time.
const MIN_ATTEMPT_KEY_TTL: Duration = Duration::from_secs(60);
/// Heartbeat period when the builder is not told otherwise.
pub const DEFAULT_HEARTBEAT_EVERY: Duration = Duration::from_secs(3);
/// Time running handlers get to finish on shutdown, unless told otherwise.
pub const DEFAULT_GRACE_PERIOD: Duration = Duration::from_secs(30);
/// How often running attempts are checked for stop requests, unless told otherwise.
pub const DEFAULT_STOP_POLL: Duration = Duration::from_millis(250);
/// Largest default [`WorkerBuilder::dispatch_batch`](crate::WorkerBuilder::dispatch_batch):
/// a burst costs one message per this many dispatches, while a batch stays
/// small enough to fit the buffer of a busy worker.
pub const DEFAULT_DISPATCH_BATCH_MAX: u32 = 64;
/// Worker ids end up in queue names and routing keys.
const MAX_ID_LEN: usize = 200;
/// The broker's prefetch count is 16 bits, and it bounds capacity + buffer.
const MAX_PLACES: u64 = u16::MAX as u64;

/// Worker failures, at the crate boundary.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The builder was given something unusable.
    #[error("invalid worker configuration: {0}")]
    Config(String),
    /// The broker failed at startup (later failures are retried, not returned).
    #[error(transparent)]
    Broker(#[from] BrokerError),
}

/// A worker's settings, one field per environment variable (the field name
/// is the variable's name in lower case without `KAIROS_`). Deserializes
/// from a settings file, with every missing field at its default.
///
/// ```
/// let cfg = kairos_worker::WorkerConfig {
///     worker_capacity: 8,
///     ..Default::default()
/// };
/// cfg.validate().unwrap();
/// let builder = kairos_worker::Worker::builder().config(cfg);
/// # let _ = builder;
/// ```
///
/// With the `cli` feature it is also a command line argument group: each
/// setting's flag and variable are declared on its field.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
#[serde(default)]
pub struct WorkerConfig {
    /// `KAIROS_WORKER_ID`: stable worker id. It names the worker's queue, so
    /// 1–200 letters, digits, `-`, `_` and `.`. Unset: the hostname plus `-`
    /// and 6 random hex digits, fresh for every process.
    #[cfg_attr(
        feature = "cli",
        arg(long, env = "KAIROS_WORKER_ID", value_name = "ID")
    )]
    pub worker_id: Option<String>,
    /// `KAIROS_WORKER_CAPACITY`: handlers run at once (at least 1).
    #[cfg_attr(
        feature = "cli",
        arg(long, env = "KAIROS_WORKER_CAPACITY", value_name = "N")
    )]
    pub worker_capacity: u32,
    /// `KAIROS_WORKER_BUFFER`: accepted dispatches that may wait for a free
    /// place in the pool (unset: the capacity). Beyond capacity + buffer,
    /// dispatches are refused for reroute; capacity + buffer is at most
    /// 65535. A waiting dispatch stays unacked until its handler starts, so
    /// for jobs that run longer than RabbitMQ's `consumer_timeout` set 0.
    #[cfg_attr(
        feature = "cli",
        arg(long, env = "KAIROS_WORKER_BUFFER", value_name = "N")
    )]
    pub worker_buffer: Option<u32>,
    /// `KAIROS_WORKER_DISPATCH_BATCH`: most dispatches this worker takes in
    /// one message, 1–256 (unset: the buffer, kept within 1 and
    /// 64). A batch is taken whole once a place
    /// is free, or refused whole for reroute; 1 asks for one dispatch per
    /// message.
    #[cfg_attr(
        feature = "cli",
        arg(long, env = "KAIROS_WORKER_DISPATCH_BATCH", value_name = "N")
    )]
    pub worker_dispatch_batch: Option<u32>,
    /// `KAIROS_WORKER_IMMEDIATE_QUEUE`: whether this worker also consumes
    /// its immediate queue (`<namespace>.immediate.<id>`, a prefetch window
    /// of its own for work someone waits for) and offers it in its
    /// heartbeats; false: everything comes through its one queue.
    #[cfg_attr(feature = "cli", arg(long, env = "KAIROS_WORKER_IMMEDIATE_QUEUE", value_name = "BOOL", action = clap::ArgAction::Set))]
    pub worker_immediate_queue: bool,
    /// `KAIROS_WORKER_HEARTBEAT_MS`: heartbeat period in ms (positive).
    #[cfg_attr(
        feature = "cli",
        arg(long, env = "KAIROS_WORKER_HEARTBEAT_MS", value_name = "MS")
    )]
    pub worker_heartbeat_ms: u64,
    /// `KAIROS_WORKER_GRACE_MS`: time running handlers get to finish on
    /// shutdown, in ms; those still running then are stopped
    /// and reported failed, so they are retried.
    #[cfg_attr(
        feature = "cli",
        arg(long, env = "KAIROS_WORKER_GRACE_MS", value_name = "MS")
    )]
    pub worker_grace_ms: u64,
    /// `KAIROS_WORKER_ATTEMPT_KEY_TTL_MS`: how long the key that lets an
    /// attempt run once is kept, in ms (at
    /// least 60000). A copy of a dispatch delivered after its key expired runs
    /// again, so keep it longer than a dispatch can wait in a queue and its
    /// handler can run; shorter saves Redis memory.
    #[cfg_attr(
        feature = "cli",
        arg(long, env = "KAIROS_WORKER_ATTEMPT_KEY_TTL_MS", value_name = "MS")
    )]
    pub worker_attempt_key_ttl_ms: u64,
    /// `KAIROS_WORKER_GROUP`: worker group, 1–255 characters (unset: none).
    /// Jobs that name a `workerGroup` run only on workers of that group;
    /// jobs without one run on any worker serving their handler.
    #[cfg_attr(
        feature = "cli",
        arg(long, env = "KAIROS_WORKER_GROUP", value_name = "GROUP")
    )]
    pub worker_group: Option<String>,
    /// `KAIROS_HTTP_ALLOW_PRIVATE`: whether the built-in `http` handler may
    /// reach loopback and private addresses.
    #[cfg_attr(feature = "cli", arg(long, env = "KAIROS_HTTP_ALLOW_PRIVATE", value_name = "BOOL", action = clap::ArgAction::Set))]
    pub http_allow_private: bool,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            worker_id: None,
            worker_capacity: DEFAULT_CAPACITY,
            worker_buffer: None,
            worker_dispatch_batch: None,
            worker_immediate_queue: true,
            worker_heartbeat_ms: millis(DEFAULT_HEARTBEAT_EVERY),
            worker_grace_ms: millis(DEFAULT_GRACE_PERIOD),
            worker_attempt_key_ttl_ms: millis(DEFAULT_ATTEMPT_KEY_TTL),
            worker_group: None,
            http_allow_private: false,
        }
    }
}

impl WorkerConfig {
    /// Checks every setting; the error names the variable at fault.
    pub fn validate(&self) -> Result<(), WorkerError> {
        let bad = |m: String| Err(WorkerError::Config(m));
        if let Some(id) = &self.worker_id {
            check_id(id)?;
        }
        if self.worker_capacity == 0 {
            return bad("KAIROS_WORKER_CAPACITY must be at least 1".into());
        }
        if u64::from(self.worker_capacity) + u64::from(self.buffer()) > MAX_PLACES {
            return bad(format!(
                "KAIROS_WORKER_CAPACITY + KAIROS_WORKER_BUFFER must not exceed {MAX_PLACES} (the prefetch limit)"
            ));
        }
        if !(1..=MAX_DISPATCH_BATCH).contains(&self.dispatch_batch()) {
            return bad(format!(
                "KAIROS_WORKER_DISPATCH_BATCH must be 1–{MAX_DISPATCH_BATCH}"
            ));
        }
        if self.worker_heartbeat_ms == 0 {
            return bad("KAIROS_WORKER_HEARTBEAT_MS must be positive".into());
        }
        let min_ttl = millis(MIN_ATTEMPT_KEY_TTL);
        if self.worker_attempt_key_ttl_ms < min_ttl {
            return bad(format!(
                "KAIROS_WORKER_ATTEMPT_KEY_TTL_MS must be at least {min_ttl} (got {})",
                self.worker_attempt_key_ttl_ms
            ));
        }
        if let Some(g) = &self.worker_group
            && (g.trim().is_empty() || g.chars().count() > 255)
        {
            return bad("KAIROS_WORKER_GROUP must be 1–255 characters".into());
        }
        Ok(())
    }

    /// The buffer, its default resolved.
    fn buffer(&self) -> u32 {
        self.worker_buffer.unwrap_or(self.worker_capacity)
    }

    /// The dispatch batch, its default resolved.
    fn dispatch_batch(&self) -> u32 {
        self.worker_dispatch_batch
            .unwrap_or_else(|| self.buffer().clamp(1, DEFAULT_DISPATCH_BATCH_MAX))
    }

    /// The settings a running worker reads, once they are checked; an
    /// unset id is drawn here.
    pub(crate) fn resolve(&self) -> Result<Settings, WorkerError> {
        self.validate()?;
        Ok(Settings {
            id: self.worker_id.clone().unwrap_or_else(default_id),
            capacity: self.worker_capacity,
            buffer: self.buffer(),
            dispatch_batch: self.dispatch_batch(),
            immediate_queue: self.worker_immediate_queue,
            heartbeat_every: Duration::from_millis(self.worker_heartbeat_ms),
            grace_period: Duration::from_millis(self.worker_grace_ms),
            attempt_key_ttl: Duration::from_millis(self.worker_attempt_key_ttl_ms),
            group: self.worker_group.clone(),
        })
    }
}

/// A [`WorkerConfig`] checked, with its defaults resolved.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) id: String,
    /// Handlers allowed to run at once.
    pub(crate) capacity: u32,
    /// Accepted deliveries allowed to wait for a pool slot.
    pub(crate) buffer: u32,
    /// Most dispatches offered per message (heartbeat `dispatch_batch`).
    pub(crate) dispatch_batch: u32,
    /// Whether the immediate queue is consumed and offered.
    pub(crate) immediate_queue: bool,
    pub(crate) heartbeat_every: Duration,
    pub(crate) grace_period: Duration,
    /// How long an attempt key is kept once taken.
    pub(crate) attempt_key_ttl: Duration,
    /// Worker group announced in heartbeats.
    pub(crate) group: Option<String>,
}

/// A duration in whole ms, a non-zero one never rounded down to 0 (so a
/// sub-millisecond period stays positive).
pub(crate) fn millis(d: Duration) -> u64 {
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    if ms == 0 && !d.is_zero() { 1 } else { ms }
}

fn check_id(id: &str) -> Result<(), WorkerError> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if id.is_empty() || id.len() > MAX_ID_LEN || !id.chars().all(ok_char) {
        return Err(WorkerError::Config(format!(
            "KAIROS_WORKER_ID {id:?} must be 1–{MAX_ID_LEN} letters, digits, '-', '_' or '.'"
        )));
    }
    Ok(())
}

/// Hostname (made safe for queue names) plus a random suffix, so two workers
/// on one host never share a queue.
fn default_id() -> String {
    let host: String = sysinfo::System::host_name()
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .take(MAX_ID_LEN - 7)
        .collect();
    let host = if host.is_empty() {
        "worker".to_string()
    } else {
        host
    };
    format!("{host}-{:06x}", rand::random::<u32>() & 0x00ff_ffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(cfg: WorkerConfig) -> String {
        match cfg.validate() {
            Err(WorkerError::Config(m)) => m,
            other => panic!("expected a configuration error, got {other:?}"),
        }
    }

    #[test]
    fn default_ids_are_queue_safe_and_distinct() {
        let (a, b) = (default_id(), default_id());
        assert!(check_id(&a).is_ok(), "{a}");
        assert_ne!(a, b);
        let suffix = &a[a.len() - 7..];
        assert!(suffix.starts_with('-'));
        assert!(suffix[1..].chars().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn bad_ids_are_refused() {
        for id in ["", "a b", "w/1", "ü"] {
            assert!(check_id(id).is_err(), "{id:?}");
        }
        assert!(check_id("w-1.a_b").is_ok());
    }

    #[test]
    fn the_defaults_are_the_documented_ones_and_valid() {
        let cfg = WorkerConfig::default();
        cfg.validate().unwrap();
        assert_eq!(cfg.worker_capacity, 32);
        assert_eq!(cfg.worker_heartbeat_ms, 3000);
        assert_eq!(cfg.worker_grace_ms, 30_000);
        assert_eq!(cfg.worker_attempt_key_ttl_ms, 86_400_000);
        assert!(!cfg.http_allow_private);
        let s = cfg.resolve().unwrap();
        assert_eq!((s.capacity, s.buffer, s.dispatch_batch), (32, 32, 32));
        assert!(check_id(&s.id).is_ok());
    }

    #[test]
    fn the_dispatch_batch_follows_the_buffer_within_bounds() {
        let batch = |buffer| {
            WorkerConfig {
                worker_buffer: Some(buffer),
                ..Default::default()
            }
            .resolve()
            .unwrap()
            .dispatch_batch
        };
        assert_eq!(batch(0), 1);
        assert_eq!(batch(10), 10);
        assert_eq!(batch(1000), DEFAULT_DISPATCH_BATCH_MAX);
    }

    #[test]
    fn errors_name_the_variable_at_fault() {
        let d = WorkerConfig::default;
        let cases = [
            (
                WorkerConfig {
                    worker_id: Some("a b".into()),
                    ..d()
                },
                "KAIROS_WORKER_ID",
            ),
            (
                WorkerConfig {
                    worker_capacity: 0,
                    ..d()
                },
                "KAIROS_WORKER_CAPACITY must be at least 1",
            ),
            (
                WorkerConfig {
                    worker_capacity: 60_000,
                    worker_buffer: Some(6_000),
                    ..d()
                },
                "KAIROS_WORKER_CAPACITY + KAIROS_WORKER_BUFFER must not exceed 65535",
            ),
            (
                WorkerConfig {
                    worker_dispatch_batch: Some(0),
                    ..d()
                },
                "KAIROS_WORKER_DISPATCH_BATCH must be 1–256",
            ),
            (
                WorkerConfig {
                    worker_dispatch_batch: Some(257),
                    ..d()
                },
                "KAIROS_WORKER_DISPATCH_BATCH",
            ),
            (
                WorkerConfig {
                    worker_heartbeat_ms: 0,
                    ..d()
                },
                "KAIROS_WORKER_HEARTBEAT_MS must be positive",
            ),
            (
                WorkerConfig {
                    worker_attempt_key_ttl_ms: 59_999,
                    ..d()
                },
                "KAIROS_WORKER_ATTEMPT_KEY_TTL_MS must be at least 60000",
            ),
            (
                WorkerConfig {
                    worker_group: Some(" ".into()),
                    ..d()
                },
                "KAIROS_WORKER_GROUP must be 1–255 characters",
            ),
        ];
        for (cfg, expected) in cases {
            let m = refused(cfg);
            assert!(m.contains(expected), "{m:?} should contain {expected:?}");
        }
        WorkerConfig {
            worker_attempt_key_ttl_ms: 60_000,
            worker_dispatch_batch: Some(256),
            worker_buffer: Some(0),
            ..d()
        }
        .validate()
        .unwrap();
    }

    #[test]
    fn a_settings_file_needs_only_what_differs() {
        let cfg: WorkerConfig =
            serde_json::from_str(r#"{"worker_capacity": 4, "worker_group": "gpu"}"#).unwrap();
        assert_eq!(
            cfg,
            WorkerConfig {
                worker_capacity: 4,
                worker_group: Some("gpu".into()),
                ..Default::default()
            }
        );
    }

    #[test]
    fn sub_millisecond_periods_stay_positive() {
        assert_eq!(millis(Duration::from_micros(10)), 1);
        assert_eq!(millis(Duration::ZERO), 0);
        assert_eq!(millis(Duration::from_millis(1500)), 1500);
    }
}

//! Relay settings: the signing secret, timeouts, retry schedule, batching and
//! the private-address switch, with the defaults from issue 3.

use crate::RelayError;
use std::fmt;
use std::time::Duration;

/// Environment variable holding the HMAC secret callbacks are signed with.
pub const SECRET_ENV: &str = "KAIROS_CALLBACK_SECRET";
/// Environment variable that lets callbacks reach private addresses (`true`).
pub const ALLOW_PRIVATE_ENV: &str = "KAIROS_CALLBACK_ALLOW_PRIVATE";

/// When failed attempts are retried: exponential with jitter, capped, and
/// abandoned once the callback is `give_up_after` old.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackoffPolicy {
    /// Delay after the first failed attempt (before jitter).
    pub base: Duration,
    /// Growth per further attempt (at least 1).
    pub factor: f32,
    /// No delay — jittered or asked for by `Retry-After` — exceeds this.
    pub cap: Duration,
    /// A retry is scheduled only while it falls within this time of the
    /// callback's creation; after that the callback is `dead`.
    pub give_up_after: Duration,
    /// Spread retries so receivers recovering from an outage are not hit by
    /// every callback at the same instant.
    pub jitter: bool,
}

impl Default for BackoffPolicy {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(1),
            factor: 2.0,
            cap: Duration::from_secs(3600),
            give_up_after: Duration::from_secs(24 * 3600),
            jitter: true,
        }
    }
}

/// Everything a [`crate::Relay`] needs besides its store. The two settings
/// are named like their `KAIROS_*` variables (the binary reads them by that
/// name); the `serde(skip)` fields are fixed tuning and the instance id.
#[derive(Clone, PartialEq, serde::Serialize, serde::Deserialize, clap::Args)]
#[serde(default)]
pub struct RelayConfig {
    /// `KAIROS_CALLBACK_SECRET`: HMAC-SHA256 key for `Kairos-Signature`, for
    /// tenants that store none. Required.
    #[arg(
        long,
        env = "KAIROS_CALLBACK_SECRET",
        value_name = "SECRET",
        hide_env_values = true
    )]
    pub callback_secret: String,
    /// `KAIROS_CALLBACK_ALLOW_PRIVATE`: skip the request-forgery guard (tests
    /// and `kairos dev` deliver to 127.0.0.1).
    #[arg(
        long,
        env = "KAIROS_CALLBACK_ALLOW_PRIVATE",
        value_name = "BOOL",
        action = clap::ArgAction::Set
    )]
    pub callback_allow_private: bool,
    /// Limit for one attempt: address check, connect, request and response head.
    #[serde(skip)]
    #[arg(skip)]
    pub request_timeout: Duration,
    /// Retry schedule.
    #[serde(skip)]
    #[arg(skip)]
    pub backoff: BackoffPolicy,
    /// Most callbacks claimed per store round trip.
    #[serde(skip)]
    #[arg(skip)]
    pub batch: u32,
    /// How long a claimed callback stays ours; must outlast one attempt so a
    /// live relay never loses a callback to another mid-request.
    #[serde(skip)]
    #[arg(skip)]
    pub lease: Duration,
    /// Deliveries in flight at once, so one slow receiver does not hold up others.
    #[serde(skip)]
    #[arg(skip)]
    pub concurrency: usize,
    /// Longest sleep without looking at the outbox: the safety net for wake-ups
    /// that cannot reach this process (rows written by another process).
    #[serde(skip)]
    #[arg(skip)]
    pub poll_interval: Duration,
    /// This instance's id, the lease owner in the store.
    #[serde(skip)]
    #[arg(skip)]
    pub owner: String,
}

/// The defaults of issue 3, with no secret (which [`RelayConfig::validate`]
/// refuses) and no owner.
impl Default for RelayConfig {
    fn default() -> Self {
        Self {
            callback_secret: String::new(),
            callback_allow_private: false,
            request_timeout: Duration::from_secs(10),
            backoff: BackoffPolicy::default(),
            batch: 100,
            lease: Duration::from_secs(60),
            concurrency: 32,
            poll_interval: Duration::from_secs(1),
            owner: String::new(),
        }
    }
}

impl RelayConfig {
    /// The defaults of issue 3 with the given secret and owner.
    pub fn new(secret: impl Into<String>, owner: impl Into<String>) -> Self {
        Self {
            callback_secret: secret.into(),
            owner: owner.into(),
            ..Self::default()
        }
    }

    /// The defaults with the secret from [`SECRET_ENV`] and the private-address
    /// switch from [`ALLOW_PRIVATE_ENV`].
    pub fn from_env(owner: impl Into<String>) -> Result<Self, RelayError> {
        let secret = std::env::var(SECRET_ENV).unwrap_or_default();
        let mut cfg = Self::new(secret, owner);
        cfg.callback_allow_private = std::env::var(ALLOW_PRIVATE_ENV)
            .is_ok_and(|v| matches!(v.trim(), "1" | "true" | "TRUE" | "True" | "yes"));
        cfg.validate()?;
        Ok(cfg)
    }

    /// The signing key's bytes.
    pub fn secret(&self) -> &[u8] {
        self.callback_secret.as_bytes()
    }

    /// Refuses settings the relay cannot work with, naming the setting.
    pub fn validate(&self) -> Result<(), RelayError> {
        let bad = |msg: String| Err(RelayError::Config(msg));
        if self.callback_secret.is_empty() {
            return bad(format!(
                "the callback secret is empty; set {SECRET_ENV} so receivers can verify callbacks"
            ));
        }
        if self.owner.is_empty() {
            return bad("owner (instance id) is empty".into());
        }
        if self.batch == 0 || self.concurrency == 0 {
            return bad("batch and concurrency must be at least 1".into());
        }
        if self.request_timeout.is_zero() || self.poll_interval.is_zero() {
            return bad("request_timeout and poll_interval must be positive".into());
        }
        // A lease shorter than an attempt would let a second relay resend it.
        if self.lease <= self.request_timeout * 2 {
            return bad(format!(
                "lease ({:?}) must exceed twice the request timeout ({:?})",
                self.lease, self.request_timeout
            ));
        }
        let b = &self.backoff;
        if b.base.is_zero() || b.factor.is_nan() || b.factor < 1.0 || b.cap < b.base {
            return bad(format!(
                "backoff needs base > 0, factor >= 1 and cap >= base (got {b:?})"
            ));
        }
        Ok(())
    }
}

/// The secret stays out of logs.
impl RelayConfig {
    /// The request-forgery guard of callback URLs.
    pub fn guard(&self) -> kairos_netguard::Guard {
        kairos_netguard::Guard {
            allow_private: self.callback_allow_private,
            setting: ALLOW_PRIVATE_ENV,
        }
    }
}

impl fmt::Debug for RelayConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RelayConfig")
            .field(
                "callback_secret",
                &format_args!("<{} bytes>", self.callback_secret.len()),
            )
            .field("request_timeout", &self.request_timeout)
            .field("backoff", &self.backoff)
            .field("callback_allow_private", &self.callback_allow_private)
            .field("batch", &self.batch)
            .field("lease", &self.lease)
            .field("concurrency", &self.concurrency)
            .field("poll_interval", &self.poll_interval)
            .field("owner", &self.owner)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_debug_hides_the_secret() {
        let cfg = RelayConfig::new("s3cret-value", "relay-1");
        cfg.validate().unwrap();
        assert!(!format!("{cfg:?}").contains("s3cret"));
    }

    #[test]
    fn unusable_settings_are_refused() {
        let mut cfg = RelayConfig::new("", "r");
        assert!(cfg.validate().is_err());
        cfg.callback_secret = "k".into();
        cfg.lease = cfg.request_timeout;
        assert!(cfg.validate().is_err());
        cfg.lease = Duration::from_secs(60);
        cfg.backoff.factor = 0.5;
        assert!(cfg.validate().is_err());
    }
}

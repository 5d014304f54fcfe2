//! The API's settings as one typed value. A field that is a setting is named
//! like its `KAIROS_*` variable in lower case (`KAIROS_API_CREATE_RATE` →
//! `api_create_rate`) and takes its default from a constant here; the binary
//! reads it from flags, the environment and the `--config` file by that name.
//! Fields marked `serde(skip)` are tuning knobs no deployment sets.
//!
//! The struct is also the command line's argument group (`clap::Args`):
//! each setting's flag, variable and help are declared here, once, and the
//! binary shows the defaults of [`ApiConfig::default`] in `--help`.

use crate::ui_cookie::{CookieSecure, DEFAULT_UI_COOKIE_SECURE};
use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::time::Duration;

/// Default of [`ApiConfig::api_create_rate`].
pub const DEFAULT_CREATE_RATE: f64 = 10_000.0;
/// Default of [`ApiConfig::api_create_burst`].
pub const DEFAULT_CREATE_BURST: u32 = 20_000;
/// Default of [`ApiConfig::api_max_live_jobs`].
pub const DEFAULT_MAX_LIVE_JOBS: u64 = 10_000_000;

/// Default of [`ApiConfig::api_action_rate`].
pub const DEFAULT_API_ACTION_RATE: f64 = 100.0;
/// Default of [`ApiConfig::api_action_burst`].
pub const DEFAULT_API_ACTION_BURST: u32 = 200;
/// Default of [`ApiConfig::api_auth_fail_limit`].
pub const DEFAULT_API_AUTH_FAIL_LIMIT: u32 = 30;
/// Default of [`ApiConfig::api_key_negative_ttl_ms`] (one minute).
pub const DEFAULT_API_KEY_NEGATIVE_TTL_MS: u64 = 60_000;
/// Default of [`ApiConfig::api_key_cache_size`].
pub const DEFAULT_API_KEY_CACHE_SIZE: usize = 10_000;

/// Default of [`ApiConfig::api_max_shard_count`].
pub const DEFAULT_MAX_SHARD_COUNT: u32 = kairos_core::shard::DEFAULT_MAX_SHARD_COUNT;

/// Default of [`ApiConfig::api_sensitive_params`].
pub fn default_sensitive_params() -> Vec<String> {
    kairos_core::sensitive::DEFAULT_SENSITIVE_KEYS
        .iter()
        .map(|k| k.to_string())
        .collect()
}

/// Settings of the API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, clap::Args)]
#[serde(default)]
pub struct ApiConfig {
    /// `KAIROS_API_CREATE_RATE`: job creates per second per key, unless the
    /// tenant overrides it.
    #[arg(long, env = "KAIROS_API_CREATE_RATE", value_name = "N")]
    pub api_create_rate: f64,
    /// `KAIROS_API_CREATE_BURST`: creates a key may burst before the rate
    /// applies, unless the tenant overrides it.
    #[arg(long, env = "KAIROS_API_CREATE_BURST", value_name = "N")]
    pub api_create_burst: u32,
    /// `KAIROS_API_MAX_LIVE_JOBS`: most scheduled, running or paused jobs a
    /// tenant may hold, unless the tenant overrides it.
    #[arg(long, env = "KAIROS_API_MAX_LIVE_JOBS", value_name = "N")]
    pub api_max_live_jobs: u64,
    /// `KAIROS_API_ACTION_RATE`: actions that make executions or deliveries
    /// (trigger, resume, redeliver) per second per key, unless the tenant
    /// overrides it.
    #[arg(long, env = "KAIROS_API_ACTION_RATE", value_name = "N")]
    pub api_action_rate: f64,
    /// `KAIROS_API_ACTION_BURST`: such actions a key may burst before the
    /// rate applies, unless the tenant overrides it.
    #[arg(long, env = "KAIROS_API_ACTION_BURST", value_name = "N")]
    pub api_action_burst: u32,
    /// `KAIROS_API_AUTH_FAIL_LIMIT`: failed authentications one client
    /// address may make per minute; past it, the address is answered 429
    /// on every authenticated route until the minute refills. 0: no limit.
    #[arg(long, env = "KAIROS_API_AUTH_FAIL_LIMIT", value_name = "N")]
    pub api_auth_fail_limit: u32,
    /// `KAIROS_API_TRUSTED_PROXIES`: peers whose `X-Forwarded-For` names the
    /// client (comma-separated IPs). Empty: the peer address is the client.
    #[arg(
        long,
        env = "KAIROS_API_TRUSTED_PROXIES",
        value_name = "IPS",
        value_delimiter = ','
    )]
    pub api_trusted_proxies: Vec<IpAddr>,
    /// `KAIROS_API_KEY_NEGATIVE_TTL_MS`: how long an unknown key prefix is
    /// remembered as unknown, so repeating it costs no database read.
    #[arg(long, env = "KAIROS_API_KEY_NEGATIVE_TTL_MS", value_name = "MS")]
    pub api_key_negative_ttl_ms: u64,
    /// `KAIROS_API_KEY_CACHE_SIZE`: verified keys kept per instance (least
    /// recently used go first); as many unknown prefixes again are
    /// remembered, apart, so they never push a valid key out.
    #[arg(long, env = "KAIROS_API_KEY_CACHE_SIZE", value_name = "N")]
    pub api_key_cache_size: usize,
    /// `KAIROS_API_SENSITIVE_PARAMS`: comma-separated key-name patterns
    /// whose values in job and workflow-node params are masked in the
    /// dashboard (every role) and in API answers to read keys, at any
    /// depth. A key is split into words (at case changes, digits, `-`,
    /// `_`…); a pattern matches words of it, `*` standing for more letters
    /// within a word (`*key` matches `apiKey` and `apikey`, `auth*`
    /// matches `Authorization`), a few ordinary words (`author`, `monkey`,
    /// `tokens`) excepted. Empty: only the paths jobs name in
    /// `sensitiveParams`.
    #[arg(
        long,
        env = "KAIROS_API_SENSITIVE_PARAMS",
        value_name = "NAMES",
        value_delimiter = ','
    )]
    pub api_sensitive_params: Vec<String>,
    /// `KAIROS_UI_COOKIE_SECURE`: when the dashboard's (`/ui`) session and
    /// login cookies are `Secure`: `auto` when the request came over HTTPS
    /// (a proxy's `X-Forwarded-Proto: https`), `true` always, `false` never.
    #[arg(long, env = "KAIROS_UI_COOKIE_SECURE", value_name = "WHEN")]
    pub ui_cookie_secure: CookieSecure,
    /// `KAIROS_API_MAX_SHARD_COUNT`: the largest `shardCount` a sharded job
    /// may ask for (executions per trigger).
    #[arg(long, env = "KAIROS_API_MAX_SHARD_COUNT", value_name = "N")]
    pub api_max_shard_count: u32,
    /// `KAIROS_WORKFLOW_MAX_NODES`: the most nodes a workflow may have.
    #[arg(long, env = "KAIROS_WORKFLOW_MAX_NODES", value_name = "N")]
    pub workflow_max_nodes: usize,
    /// How long a looked-up key is trusted before it is read again: the
    /// longest a revoked key keeps working on this instance.
    #[serde(skip)]
    #[arg(skip)]
    pub key_cache_ttl: Duration,
    /// Largest serialized `params` of a job.
    #[serde(skip)]
    #[arg(skip)]
    pub max_params_bytes: usize,
    /// Largest request body.
    #[serde(skip)]
    #[arg(skip)]
    pub max_body_bytes: usize,
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            api_create_rate: DEFAULT_CREATE_RATE,
            api_create_burst: DEFAULT_CREATE_BURST,
            api_max_live_jobs: DEFAULT_MAX_LIVE_JOBS,
            api_action_rate: DEFAULT_API_ACTION_RATE,
            api_action_burst: DEFAULT_API_ACTION_BURST,
            api_auth_fail_limit: DEFAULT_API_AUTH_FAIL_LIMIT,
            api_trusted_proxies: Vec::new(),
            api_key_negative_ttl_ms: DEFAULT_API_KEY_NEGATIVE_TTL_MS,
            api_key_cache_size: DEFAULT_API_KEY_CACHE_SIZE,
            api_sensitive_params: default_sensitive_params(),
            ui_cookie_secure: DEFAULT_UI_COOKIE_SECURE,
            api_max_shard_count: DEFAULT_MAX_SHARD_COUNT,
            workflow_max_nodes: kairos_core::workflow::DEFAULT_MAX_NODES,
            key_cache_ttl: Duration::from_millis(500),
            max_params_bytes: 64 * 1024,
            max_body_bytes: 1024 * 1024,
        }
    }
}

/// A setting the API cannot run with; the message names its variable.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

impl ApiConfig {
    /// Refuses values the API cannot work with, naming the variable.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let rate = self.api_create_rate;
        if !rate.is_finite() || rate <= 0.0 {
            return Err(ConfigError(format!(
                "KAIROS_API_CREATE_RATE must be a positive number (got {rate})"
            )));
        }
        if self.api_create_burst == 0 {
            return Err(ConfigError(
                "KAIROS_API_CREATE_BURST must be at least 1".into(),
            ));
        }
        let rate = self.api_action_rate;
        if !rate.is_finite() || rate <= 0.0 {
            return Err(ConfigError(format!(
                "KAIROS_API_ACTION_RATE must be a positive number (got {rate})"
            )));
        }
        if self.api_action_burst == 0 {
            return Err(ConfigError(
                "KAIROS_API_ACTION_BURST must be at least 1".into(),
            ));
        }
        if self.api_key_cache_size == 0 {
            return Err(ConfigError(
                "KAIROS_API_KEY_CACHE_SIZE must be at least 1".into(),
            ));
        }
        Ok(())
    }

    /// [`Self::api_sensitive_params`] as a matcher.
    pub fn sensitive_keys(&self) -> kairos_core::sensitive::SensitiveKeys {
        kairos_core::sensitive::SensitiveKeys::new(&self.api_sensitive_params)
    }

    /// [`Self::api_key_negative_ttl_ms`] as a duration.
    pub fn key_negative_ttl(&self) -> Duration {
        Duration::from_millis(self.api_key_negative_ttl_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_limits_name_their_variable() {
        ApiConfig::default().validate().unwrap();
        for (cfg, var) in [
            (
                ApiConfig {
                    api_create_rate: 0.0,
                    ..ApiConfig::default()
                },
                "KAIROS_API_CREATE_RATE",
            ),
            (
                ApiConfig {
                    api_create_rate: f64::NAN,
                    ..ApiConfig::default()
                },
                "KAIROS_API_CREATE_RATE",
            ),
            (
                ApiConfig {
                    api_create_burst: 0,
                    ..ApiConfig::default()
                },
                "KAIROS_API_CREATE_BURST",
            ),
        ] {
            assert!(cfg.validate().unwrap_err().0.contains(var), "{var}");
        }
    }
}

//! The API's settings as one typed value. A field that is a setting is named
//! like its `KAIROS_*` variable in lower case (`KAIROS_API_CREATE_RATE` →
//! `api_create_rate`) and takes its default from a constant here; the binary
//! reads it from flags, the environment and the `--config` file by that name.
//! Fields marked `serde(skip)` are tuning knobs no deployment sets.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Default of [`ApiConfig::api_create_rate`].
pub const DEFAULT_CREATE_RATE: f64 = 10_000.0;
/// Default of [`ApiConfig::api_create_burst`].
pub const DEFAULT_CREATE_BURST: u32 = 20_000;
/// Default of [`ApiConfig::api_max_live_jobs`].
pub const DEFAULT_MAX_LIVE_JOBS: u64 = 10_000_000;

/// Settings of the API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApiConfig {
    /// `KAIROS_API_CREATE_RATE`: job creates per second per key, unless the
    /// tenant overrides it.
    pub api_create_rate: f64,
    /// `KAIROS_API_CREATE_BURST`: creates a key may burst before the rate
    /// applies, unless the tenant overrides it.
    pub api_create_burst: u32,
    /// `KAIROS_API_MAX_LIVE_JOBS`: most scheduled, running or paused jobs a
    /// tenant may hold, unless the tenant overrides it.
    pub api_max_live_jobs: u64,
    /// How long a looked-up key is trusted before it is read again: the
    /// longest a revoked key keeps working on this instance.
    #[serde(skip)]
    pub key_cache_ttl: Duration,
    /// Largest serialized `params` of a job.
    #[serde(skip)]
    pub max_params_bytes: usize,
    /// Largest request body.
    #[serde(skip)]
    pub max_body_bytes: usize,
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            api_create_rate: DEFAULT_CREATE_RATE,
            api_create_burst: DEFAULT_CREATE_BURST,
            api_max_live_jobs: DEFAULT_MAX_LIVE_JOBS,
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
        Ok(())
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

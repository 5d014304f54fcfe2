//! Resolves settings: command-line flag or `KAIROS_*` variable first (clap
//! reads both), then the `--config` TOML file, then the default. Missing
//! required settings and unparsable values are errors naming the setting.

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use std::path::Path;

/// Keys a `--config` file may set (lower-case variable names without `KAIROS_`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSettings {
    pub database_url: Option<String>,
    pub redis_url: Option<String>,
    pub amqp_url: Option<String>,
    pub amqp_queue_type: Option<String>,
    pub http_addr: Option<String>,
    pub worker_id: Option<String>,
    pub worker_capacity: Option<u32>,
    pub namespace: Option<String>,
    pub balancer: Option<String>,
    pub callback_secret: Option<String>,
    pub callback_allow_private: Option<bool>,
    pub lease_ttl_ms: Option<u64>,
    pub worker_dead_after_ms: Option<u64>,
    pub default_timeout_ms: Option<u64>,
    pub reconcile_grace_ms: Option<u64>,
    pub worker_buffer: Option<u32>,
    pub worker_dispatch_batch: Option<u32>,
    pub worker_heartbeat_ms: Option<u64>,
    pub worker_grace_ms: Option<u64>,
    pub worker_attempt_key_ttl_ms: Option<u64>,
    pub http_allow_private: Option<bool>,
    pub api_create_rate: Option<f64>,
    pub api_create_burst: Option<u32>,
    pub api_max_live_jobs: Option<u64>,
    pub worker_handlers: Option<String>,
    pub worker_group: Option<String>,
    pub log_retention_hours: Option<u64>,
    pub log_max_lines: Option<u32>,
    pub log_max_bytes: Option<u64>,
    pub metrics_addr: Option<String>,
}

impl FileSettings {
    /// Reads the file, or empty settings without one.
    pub fn load(path: Option<&Path>) -> Result<Self> {
        let Some(path) = path else {
            return Ok(Self::default());
        };
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("invalid config file {}", path.display()))
    }
}

/// The first value present, if any.
pub fn pick<T>(flag_or_env: Option<T>, file: Option<T>) -> Option<T> {
    flag_or_env.or(file)
}

/// The first value present, or an error naming the variable and the file key.
pub fn require<T>(flag_or_env: Option<T>, file: Option<T>, var: &str) -> Result<T> {
    match pick(flag_or_env, file) {
        Some(v) => Ok(v),
        None => bail!(
            "{var} is not set (set the variable, pass --{}, or set {} in the --config file)",
            flag_name(var),
            key_name(var)
        ),
    }
}

fn key_name(var: &str) -> String {
    var.trim_start_matches("KAIROS_").to_ascii_lowercase()
}

fn flag_name(var: &str) -> String {
    key_name(var).replace('_', "-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_and_env_win_over_the_file() {
        assert_eq!(pick(Some(1), Some(2)), Some(1));
        assert_eq!(pick(None, Some(2)), Some(2));
    }

    #[test]
    fn a_missing_setting_names_every_way_to_set_it() {
        let err = require::<String>(None, None, "KAIROS_REDIS_URL")
            .unwrap_err()
            .to_string();
        assert!(err.contains("KAIROS_REDIS_URL"), "{err}");
        assert!(err.contains("--redis-url"), "{err}");
        assert!(err.contains("redis_url"), "{err}");
    }

    #[test]
    fn unknown_file_keys_are_refused() {
        assert!(toml::from_str::<FileSettings>("databse_url = 'x'").is_err());
        let ok: FileSettings =
            toml::from_str("database_url = 'sqlite://x.db'\nworker_capacity = 4").unwrap();
        assert_eq!(ok.worker_capacity, Some(4));
    }
}

//! Settings, merged once per process: each command's typed config starts
//! from its defaults (the crates' constants), then the `--config` TOML file,
//! then the flags and `KAIROS_*` variables clap read (a flag wins over its
//! variable). Keys are the variables in lower case without `KAIROS_`.
//!
//! The configs are clap's argument groups too, so clap parses every
//! setting; [`Given`] keeps only the values that came from a flag or a
//! variable (clap's value sources), which figment lays over the file.
//!
//! The file may hold keys of any process (one file can serve a whole
//! deployment), but an unknown key is refused. Missing required settings and
//! unparsable values are errors naming the variable.

pub mod commands;
pub mod conn;
mod help;

pub use help::command;

use anyhow::{Context, Result, anyhow, bail};
use clap::ArgMatches;
use clap::parser::ValueSource;
use figment::Figment;
use figment::providers::{Format, Serialized, Toml};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::BTreeSet;
use std::path::Path;

/// Settings whose values `kairos config print` and `--help` never show.
const SECRET_KEYS: &[&str] = &["callback_secret"];

/// A default as `--help` and the docs show it (`10000`, not `10000.0`);
/// `None` for an unset one.
pub fn display(value: &serde_json::Value) -> Option<String> {
    match value {
        serde_json::Value::Null => None,
        // An empty list is "none", like an unset option.
        serde_json::Value::Array(items) if items.is_empty() => None,
        serde_json::Value::Array(items) => Some(
            items
                .iter()
                .filter_map(display)
                .collect::<Vec<_>>()
                .join(","),
        ),
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
            _ => n.to_string(),
        }),
        other => Some(other.to_string()),
    }
}

/// The environment variable of a key.
pub fn var_of(key: &str) -> String {
    format!("KAIROS_{}", key.to_ascii_uppercase())
}

/// The settings the user gave on the command line or in the environment,
/// by key: what overrides the `--config` file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Given(BTreeSet<String>);

impl Given {
    /// The arguments of `matches` (and of its subcommands) that came from a
    /// flag or a `KAIROS_*` variable, not from a default.
    pub fn from_matches(matches: &ArgMatches) -> Self {
        let mut keys = BTreeSet::new();
        let mut level = Some(matches);
        while let Some(m) = level {
            for id in m.ids() {
                if matches!(
                    m.value_source(id.as_str()),
                    Some(ValueSource::CommandLine | ValueSource::EnvVariable)
                ) {
                    keys.insert(id.to_string());
                }
            }
            level = m.subcommand().map(|(_, sub)| sub);
        }
        Self(keys)
    }

    /// The given settings among `parsed`'s fields, as a table to lay over
    /// the file.
    pub fn of<T: Serialize>(&self, parsed: &T) -> Result<serde_json::Value> {
        let mut table = match serde_json::to_value(parsed)? {
            serde_json::Value::Object(map) => map,
            _ => bail!("a config is a table"),
        };
        table.retain(|key, _| self.0.contains(key));
        Ok(serde_json::Value::Object(table))
    }
}

/// `C`'s defaults, overridden by the file and then by `given` (the flags and
/// variables the user set, as [`Given::of`] gives them).
pub fn load<C>(file: Option<&Path>, given: &impl Serialize) -> Result<C>
where
    C: Default + Serialize + DeserializeOwned,
{
    let mut fig = Figment::from(Serialized::defaults(C::default()));
    if let Some(path) = file {
        check_file_keys(path)?;
        fig = fig.merge(Toml::file_exact(path));
    }
    let fig = fig.merge(Serialized::defaults(given));
    fig.extract().map_err(|e| match culprit::<C>(&fig) {
        Some(setting) => anyhow!("invalid {setting}: {e}"),
        None => anyhow!("invalid setting: {e}"),
    })
}

/// The setting that makes `fig` fail to extract, with where it came from.
/// Flattened configs lose the failing key in serde's errors, so each key is
/// tried alone over the defaults.
fn culprit<C>(fig: &Figment) -> Option<String>
where
    C: Default + Serialize + DeserializeOwned,
{
    let dict: figment::value::Dict = fig.extract().ok()?;
    dict.into_iter().find_map(|(key, value)| {
        let alone = Figment::from(Serialized::defaults(C::default()))
            .merge(Serialized::default(&key, value));
        alone.extract::<C>().err()?;
        let source = fig
            .find_metadata(&key)
            .map(|m| format!(" from {}", m.name))
            .unwrap_or_default();
        Some(format!("{} (`{key}`{source})", var_of(&key)))
    })
}

/// Every key some command reads.
fn known_keys() -> BTreeSet<String> {
    commands::defaults_by_command()
        .into_iter()
        .filter_map(|(_, v)| v.as_object().cloned())
        .flat_map(|m| m.into_iter().map(|(k, _)| k))
        .collect()
}

/// Refuses a file that does not parse or sets a key no command reads (a
/// typo would otherwise be silently ignored).
fn check_file_keys(path: &Path) -> Result<()> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    let table: toml::Table =
        toml::from_str(&text).with_context(|| format!("invalid config file {}", path.display()))?;
    let known = known_keys();
    let unknown: Vec<&String> = table.keys().filter(|k| !known.contains(*k)).collect();
    if !unknown.is_empty() {
        bail!(
            "invalid config file {}: unknown key {} (keys are the KAIROS_* variables in lower case, e.g. database_url)",
            path.display(),
            unknown
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(())
}

/// For a clap error about an unparsable value that came from a `KAIROS_*`
/// variable rather than its flag, that variable (clap names only the flag).
pub fn env_source_of(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if !matches!(
        e.kind(),
        ErrorKind::ValueValidation | ErrorKind::InvalidValue
    ) {
        return None;
    }
    let ContextValue::String(arg) = e.get(ContextKind::InvalidArg)? else {
        return None;
    };
    let flag = arg.strip_prefix("--")?.split([' ', '=']).next()?;
    let var = var_of(&flag.replace('-', "_"));
    let from_flag =
        std::env::args().any(|a| a == format!("--{flag}") || a.starts_with(&format!("--{flag}=")));
    (!from_flag && std::env::var_os(&var).is_some()).then_some(var)
}

/// A required setting, or an error naming every way to set it.
pub fn required<'a>(value: &'a Option<String>, key: &str) -> Result<&'a str> {
    match value {
        Some(v) if !v.is_empty() => Ok(v),
        _ => Err(missing(key)),
    }
}

/// The error of a required setting that is not set.
pub fn missing(key: &str) -> anyhow::Error {
    anyhow!(
        "{} is not set (set the variable, pass --{}, or set {key} in the --config file)",
        var_of(key),
        key.replace('_', "-")
    )
}

/// `cfg` as TOML with secrets and URL passwords hidden; unset settings are
/// listed as comments.
pub fn render<C: Serialize>(cfg: &C) -> Result<String> {
    let json = serde_json::to_value(cfg)?;
    let map = json
        .as_object()
        .ok_or_else(|| anyhow!("a config is a table"))?;
    let mut table = toml::Table::new();
    let mut unset = Vec::new();
    for (key, value) in map {
        let value = match value {
            serde_json::Value::Null => {
                unset.push(key.clone());
                continue;
            }
            serde_json::Value::String(s) if SECRET_KEYS.contains(&key.as_str()) => {
                serde_json::Value::String(if s.is_empty() { "" } else { "<redacted>" }.into())
            }
            serde_json::Value::String(s) if key.ends_with("_url") => {
                serde_json::Value::String(kairos_core::redact::redact_url(s))
            }
            other => other.clone(),
        };
        table.insert(key.clone(), toml::Value::try_from(value)?);
    }
    let mut out = toml::to_string(&table)?;
    for key in unset {
        out.push_str(&format!("# {key} is not set\n"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests;

//! When the dashboard's cookies carry `Secure`: a setting of the API's
//! configuration because the dashboard is served by the API's process and
//! receives its [`crate::ApiConfig`].

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// Whether the dashboard's session and login cookies get `Secure`
/// (`KAIROS_UI_COOKIE_SECURE=auto|true|false`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CookieSecure {
    /// When the request came over TLS, which Kairos learns from a proxy's
    /// `X-Forwarded-Proto: https` (or `Forwarded: proto=https`), as it
    /// terminates no TLS itself.
    #[default]
    Auto,
    /// Always (the dashboard is only ever reached over HTTPS).
    Always,
    /// Never (plain HTTP on a trusted network or for development).
    Never,
}

/// The default of [`crate::ApiConfig::ui_cookie_secure`].
pub const DEFAULT_UI_COOKIE_SECURE: CookieSecure = CookieSecure::Auto;

impl CookieSecure {
    /// The setting's value as written: `auto`, `true` or `false`.
    pub fn as_str(self) -> &'static str {
        match self {
            CookieSecure::Auto => "auto",
            CookieSecure::Always => "true",
            CookieSecure::Never => "false",
        }
    }
}

impl fmt::Display for CookieSecure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A value that is none of `auto`, `true`, `false`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected auto, true or false, not {0:?}")]
pub struct BadCookieSecure(pub String);

impl FromStr for CookieSecure {
    type Err = BadCookieSecure;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(CookieSecure::Auto),
            "true" => Ok(CookieSecure::Always),
            "false" => Ok(CookieSecure::Never),
            _ => Err(BadCookieSecure(s.to_string())),
        }
    }
}

/// `auto`, `true` or `false`; a config file may also write the booleans
/// unquoted (`ui_cookie_secure = true`).
impl<'de> Deserialize<'de> for CookieSecure {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Bool(bool),
            Text(String),
        }
        match Raw::deserialize(de)? {
            Raw::Bool(true) => Ok(Self::Always),
            Raw::Bool(false) => Ok(Self::Never),
            Raw::Text(s) => s.parse().map_err(serde::de::Error::custom),
        }
    }
}

impl Serialize for CookieSecure {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_it_prints() {
        for v in [
            CookieSecure::Auto,
            CookieSecure::Always,
            CookieSecure::Never,
        ] {
            assert_eq!(v.as_str().parse::<CookieSecure>(), Ok(v));
        }
        assert_eq!("TRUE".parse::<CookieSecure>(), Ok(CookieSecure::Always));
        assert!("yes".parse::<CookieSecure>().is_err());
        assert_eq!(CookieSecure::default(), DEFAULT_UI_COOKIE_SECURE);
    }
}

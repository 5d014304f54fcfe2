//! Time as stored and exchanged: milliseconds since the Unix epoch, UTC.

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};

/// Milliseconds since the Unix epoch (UTC). Every stored time uses this unit so
/// MySQL, PostgreSQL and SQLite compare and index it the same way.
pub type Millis = i64;

/// The current wall-clock time in milliseconds.
pub fn now_ms() -> Millis {
    Utc::now().timestamp_millis()
}

/// Formats milliseconds as RFC 3339 with millisecond precision, for the API.
pub fn to_rfc3339(ms: Millis) -> String {
    match Utc.timestamp_millis_opt(ms).single() {
        Some(t) => t.to_rfc3339_opts(SecondsFormat::Millis, true),
        None => String::new(),
    }
}

/// Parses an RFC 3339 timestamp into milliseconds.
pub fn parse_rfc3339(s: &str) -> Result<Millis, chrono::ParseError> {
    DateTime::parse_from_rfc3339(s).map(|t| t.timestamp_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trips_milliseconds() {
        let ms = 1_767_225_600_123;
        assert_eq!(parse_rfc3339(&to_rfc3339(ms)).unwrap(), ms);
        assert_eq!(to_rfc3339(0), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn offsets_are_normalised_to_utc() {
        let ms = parse_rfc3339("2026-01-01T08:00:00+08:00").unwrap();
        assert_eq!(to_rfc3339(ms), "2026-01-01T00:00:00.000Z");
    }
}

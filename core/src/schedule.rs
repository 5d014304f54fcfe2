//! Schedules: when a job fires. One-shot at a time, or a cron expression (five
//! fields, or six with seconds) evaluated in the job's IANA time zone.
//!
//! Cron parsing uses `croner` rather than the `cron` crate: croner takes both
//! five- and six-field expressions (callers coming from crontab and from Quartz
//! both work), supports `L`, `W` and `#`, and handles DST transitions.

use crate::time::Millis;
use chrono::{TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use serde::{Deserialize, Serialize};

/// When a job fires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Schedule {
    /// Fires once, at `at` (ms UTC).
    Once {
        /// Due time.
        at: Millis,
    },
    /// Fires at every match of `expr` in time zone `tz`.
    Cron {
        /// The expression as the caller gave it.
        expr: String,
        /// IANA time zone name, e.g. `Europe/Berlin`.
        tz: String,
    },
}

/// Why a schedule was refused. Messages are shown to API callers.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScheduleError {
    /// The cron expression does not parse.
    #[error("invalid cron expression {expr:?}: {reason}")]
    InvalidCron {
        /// The expression.
        expr: String,
        /// The parser's explanation.
        reason: String,
    },
    /// The time zone is not an IANA name.
    #[error("unknown time zone {0:?} (expected an IANA name such as \"Europe/Berlin\")")]
    UnknownTimeZone(String),
    /// The expression parses but never matches a future time.
    #[error("cron expression {0:?} never fires")]
    NeverFires(String),
}

/// A parsed cron schedule, ready to compute trigger times.
#[derive(Debug, Clone)]
pub struct CronSchedule {
    cron: Cron,
    tz: Tz,
}

impl CronSchedule {
    /// Parses `expr` (5 or 6 fields; 6 means the first is seconds) in `tz`.
    pub fn parse(expr: &str, tz: &str) -> Result<Self, ScheduleError> {
        let tz: Tz = tz
            .parse()
            .map_err(|_| ScheduleError::UnknownTimeZone(tz.to_string()))?;
        // Years are disallowed so a six-field expression is unambiguous: it has seconds.
        let cron = CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            .build()
            .parse(expr)
            .map_err(|e| ScheduleError::InvalidCron {
                expr: expr.to_string(),
                reason: e.to_string(),
            })?;
        Ok(Self { cron, tz })
    }

    /// The first trigger strictly after `after` (ms UTC), or `None` if the
    /// expression has no further match.
    pub fn next_after(&self, after: Millis) -> Option<Millis> {
        let start = self
            .tz
            .from_utc_datetime(&Utc.timestamp_millis_opt(after).single()?.naive_utc());
        self.cron
            .find_next_occurrence(&start, false)
            .ok()
            .map(|t| t.with_timezone(&Utc).timestamp_millis())
    }
}

impl Schedule {
    /// Checks the schedule and returns its first trigger at or after `now`.
    /// A one-shot in the past fires at once (its due time is kept as given).
    pub fn first_trigger(&self, now: Millis) -> Result<Millis, ScheduleError> {
        match self {
            Schedule::Once { at } => Ok(*at),
            Schedule::Cron { expr, tz } => CronSchedule::parse(expr, tz)?
                .next_after(now - 1)
                .ok_or_else(|| ScheduleError::NeverFires(expr.clone())),
        }
    }

    /// The trigger after the one due at `fired_at`, skipping any that are
    /// already older than `now` (a misfire fires once, not once per miss).
    pub fn next_trigger(&self, fired_at: Millis, now: Millis) -> Option<Millis> {
        match self {
            Schedule::Once { .. } => None,
            Schedule::Cron { expr, tz } => {
                let cron = CronSchedule::parse(expr, tz).ok()?;
                cron.next_after(fired_at.max(now - 1))
            }
        }
    }

    /// Whether the job can fire more than once.
    pub fn is_recurring(&self) -> bool {
        matches!(self, Schedule::Cron { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::parse_rfc3339;

    fn ms(s: &str) -> Millis {
        parse_rfc3339(s).unwrap()
    }

    #[test]
    fn six_fields_fire_every_second() {
        let s = Schedule::Cron {
            expr: "* * * * * *".into(),
            tz: "UTC".into(),
        };
        let t0 = ms("2026-03-01T10:00:00.250Z");
        let first = s.first_trigger(t0).unwrap();
        assert_eq!(first, ms("2026-03-01T10:00:01Z"));
        assert_eq!(
            s.next_trigger(first, first),
            Some(ms("2026-03-01T10:00:02Z"))
        );
    }

    #[test]
    fn five_fields_mean_minutes() {
        let s = Schedule::Cron {
            expr: "*/15 * * * *".into(),
            tz: "UTC".into(),
        };
        assert_eq!(
            s.first_trigger(ms("2026-03-01T10:01:00Z")).unwrap(),
            ms("2026-03-01T10:15:00Z")
        );
    }

    #[test]
    fn a_due_time_exactly_now_fires_now() {
        let s = Schedule::Cron {
            expr: "0 * * * * *".into(),
            tz: "UTC".into(),
        };
        let now = ms("2026-03-01T10:01:00Z");
        assert_eq!(s.first_trigger(now).unwrap(), now);
    }

    #[test]
    fn time_zone_is_honoured() {
        let s = Schedule::Cron {
            expr: "0 0 9 * * *".into(),
            tz: "Asia/Shanghai".into(),
        };
        assert_eq!(
            s.first_trigger(ms("2026-03-01T00:00:00Z")).unwrap(),
            ms("2026-03-01T01:00:00Z")
        );
    }

    #[test]
    fn missed_triggers_collapse_into_one() {
        let s = Schedule::Cron {
            expr: "* * * * * *".into(),
            tz: "UTC".into(),
        };
        let fired = ms("2026-03-01T10:00:00Z");
        let now = ms("2026-03-01T10:05:00.500Z");
        assert_eq!(s.next_trigger(fired, now), Some(ms("2026-03-01T10:05:01Z")));
    }

    #[test]
    fn bad_input_is_named() {
        assert!(matches!(
            CronSchedule::parse("not a cron", "UTC"),
            Err(ScheduleError::InvalidCron { .. })
        ));
        assert_eq!(
            CronSchedule::parse("* * * * *", "Mars/Olympus").unwrap_err(),
            ScheduleError::UnknownTimeZone("Mars/Olympus".into())
        );
        assert!(CronSchedule::parse("* * * * * * *", "UTC").is_err());
    }

    #[test]
    fn one_shot_has_no_successor() {
        let s = Schedule::Once { at: 5 };
        assert_eq!(s.first_trigger(100).unwrap(), 5);
        assert_eq!(s.next_trigger(5, 100), None);
        assert!(!s.is_recurring());
    }
}

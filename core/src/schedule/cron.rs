//! Cron expressions, read in their [`CronDialect`], evaluated in an IANA
//! time zone.
//!
//! Parsing uses `croner` rather than the `cron` crate: croner takes five-,
//! six- and seven-field expressions, has a Quartz weekday mode (see
//! [`super::dialect`]), supports `L`, `W` and `#`, and handles DST transitions the way
//! Vixie cron does. An expression whose second, minute and hour fields each
//! name one value ("fixed time", e.g. `30 2 * * *`) fires once per local day:
//! a local time skipped by spring-forward fires at the first instant after the
//! gap, and a local time repeated by fall-back fires only at its first
//! occurrence. Any other expression ("interval", e.g. `*/15 * * * *`) fires
//! on every instant whose local time matches, so it keeps its rhythm in real
//! time through the repeated hour.

use super::{CronDialect, ScheduleError};
use crate::time::Millis;
use chrono::{TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;

/// A parsed cron schedule, ready to compute trigger times.
#[derive(Debug, Clone)]
pub struct CronSchedule {
    cron: Cron,
    tz: Tz,
}

impl CronSchedule {
    /// Parses `expr` as `dialect` reads it, in `tz`.
    pub fn parse(expr: &str, tz: &str, dialect: CronDialect) -> Result<Self, ScheduleError> {
        let tz: Tz = tz
            .parse()
            .map_err(|_| ScheduleError::UnknownTimeZone(tz.to_string()))?;
        let cron = dialect.compile(expr)?;
        Ok(Self { cron, tz })
    }

    /// The schedule in words, e.g. "at 02:00, on Monday" (times are local to
    /// the schedule's zone).
    pub fn describe(&self) -> String {
        super::dialect::words(&self.cron)
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

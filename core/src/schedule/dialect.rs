//! Cron dialects: how a cron expression's fields are read. The one place
//! that turns a dialect and an expression into a parsed `croner` schedule,
//! its reading in words, and the check that refuses an expression whose
//! dialect was not named when the two dialects would read it differently.
//!
//! - `standard` (the default, Kairos' reading since the start): 5 fields, or
//!   6 with seconds first; day-of-week 0–7 with 0 and 7 = Sunday; no year.
//! - `quartz` (Quartz, XXL-Job and most Java schedulers): 6 fields with
//!   seconds first, or 7 with a year last; day-of-week 1–7 = SUN–SAT; `?` in
//!   exactly one of day-of-month and day-of-week (Quartz refuses both and
//!   neither); `L`, `W` and `#` as in Quartz.
//!
//! Both are `croner` configurations (its Quartz weekday mode and its year
//! field), not a parser of our own.

use super::ScheduleError;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use serde::{Deserialize, Serialize};
use std::fmt;

/// How a cron expression's fields are read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CronDialect {
    /// Crontab with optional seconds: day-of-week 0–7, 0 and 7 = Sunday.
    #[default]
    Standard,
    /// Quartz: seconds, optional year, day-of-week 1–7 = SUN–SAT.
    Quartz,
}

impl CronDialect {
    /// Every dialect.
    pub const ALL: [CronDialect; 2] = [CronDialect::Standard, CronDialect::Quartz];

    /// The name stored and shown by the API.
    pub fn as_str(self) -> &'static str {
        match self {
            CronDialect::Standard => "standard",
            CronDialect::Quartz => "quartz",
        }
    }

    /// Parses a stored or requested name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.as_str() == s)
    }

    /// Whether this is the default dialect (left out of serialized schedules
    /// so the ones stored before dialects existed read back unchanged).
    pub fn is_standard(&self) -> bool {
        *self == CronDialect::Standard
    }

    /// Parses `expr` as this dialect reads it.
    pub fn compile(self, expr: &str) -> Result<Cron, ScheduleError> {
        let invalid = |reason: String| ScheduleError::InvalidCron {
            expr: expr.to_string(),
            reason,
        };
        let parser = match self {
            // Years are disallowed so a six-field expression is
            // unambiguous: it has seconds.
            CronDialect::Standard => CronParser::builder()
                .seconds(Seconds::Optional)
                .year(Year::Disallowed),
            CronDialect::Quartz => {
                quartz_day_fields(expr).map_err(invalid)?;
                CronParser::builder()
                    .seconds(Seconds::Required)
                    .year(Year::Optional)
                    .alternative_weekdays(true)
            }
        };
        parser
            .build()
            .parse(expr)
            .map_err(|e| invalid(e.to_string()))
    }

    /// `expr` in words as this dialect reads it, e.g. "at 02:00, on Monday".
    pub fn describe(self, expr: &str) -> Result<String, ScheduleError> {
        Ok(words(&self.compile(expr)?))
    }
}

impl fmt::Display for CronDialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A parsed schedule in words, lower-case first and without the final stop,
/// so it reads inside a sentence.
pub(crate) fn words(cron: &Cron) -> String {
    let text = cron.describe();
    let text = text.trim_end_matches('.');
    let mut c = text.chars();
    match c.next() {
        Some(first) => first.to_lowercase().chain(c).collect(),
        None => String::new(),
    }
}

/// Quartz's own rule: `?` in exactly one of day-of-month and day-of-week.
/// Field counts are left to the parser.
fn quartz_day_fields(expr: &str) -> Result<(), String> {
    let fields: Vec<&str> = expr.split_whitespace().collect();
    if !(6..=7).contains(&fields.len()) {
        return Ok(());
    }
    match (fields[3] == "?", fields[5] == "?") {
        (true, false) | (false, true) => Ok(()),
        _ => Err(
            "Quartz cron needs `?` in exactly one of day-of-month and day-of-week \
             (e.g. \"0 0 2 ? * MON\" or \"0 0 2 1 * ?\")"
                .to_string(),
        ),
    }
}

/// An expression sent without a dialect that the two dialects read
/// differently: shown to the caller, who must name the dialect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ambiguity {
    /// The standard reading in words, or why standard cron refuses it.
    pub standard: Result<String, String>,
    /// The Quartz reading in words.
    pub quartz: String,
}

impl fmt::Display for Ambiguity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.standard {
            Ok(words) => write!(f, "as standard cron: {words}; ")?,
            Err(reason) => write!(f, "as standard cron: not valid ({reason}); ")?,
        }
        write!(
            f,
            "as Quartz: {} — set cronDialect to \"quartz\" or \"standard\"",
            self.quartz
        )
    }
}

/// Whether `expr`, given without a dialect, must be refused. The rule: it
/// looks like Quartz (a `?` in a day field, or 7 fields — every valid Quartz
/// expression has one of them, since Quartz demands `?` in one day field)
/// AND Quartz accepts it AND the standard reading differs (different words,
/// or standard cron refuses it). `0 0 2 ? * 2` is refused (Tuesday vs
/// Monday); `0 0 2 ? * MON` and `0 0 2 * * 2` are not (the first reads the
/// same in both, the second is not Quartz: Quartz would refuse it).
pub fn ambiguity(expr: &str) -> Option<Ambiguity> {
    let fields: Vec<&str> = expr.split_whitespace().collect();
    let quartz_looking = fields.len() == 7
        || (fields.len() == 6 && (fields[3].contains('?') || fields[5].contains('?')));
    if !quartz_looking {
        return None;
    }
    let quartz = CronDialect::Quartz.describe(expr).ok()?;
    let standard = CronDialect::Standard.compile(expr).map(|c| words(&c));
    let standard = match standard {
        Ok(words) if words == quartz => return None,
        Ok(words) => Ok(words),
        Err(ScheduleError::InvalidCron { reason, .. }) => Err(reason),
        Err(e) => Err(e.to_string()),
    };
    Some(Ambiguity { standard, quartz })
}

#[cfg(test)]
mod tests;

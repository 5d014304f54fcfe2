//! The schedule fields of a request (`cronExpr`, `timezone`, `triggerAt`,
//! `everyMs`, `delayMs`, `startAt`, `endAt`, `misfirePolicy`,
//! `overlapPolicy`) → a [`Schedule`], with every refusal naming its field.

use crate::error::ApiError;
use kairos_core::schedule::{
    MisfirePolicy, OverlapPolicy, Recurrence, Rule, Schedule, ScheduleError,
};
use kairos_core::time::{Millis, parse_rfc3339};

/// Shortest fixed rate or delay. Each trigger costs a claim, a publish and a
/// result; 100 ms (10 per second per job) keeps one job from flooding the
/// dispatcher while still covering sub-second polling use cases.
pub(crate) const MIN_PERIOD_MS: i64 = 100;
/// Longest fixed rate or delay: 366 days, beyond which a cron expression says
/// what is meant.
pub(crate) const MAX_PERIOD_MS: i64 = 31_622_400_000;
/// Longest cron expression.
const MAX_CRON_CHARS: usize = 255;

/// The schedule fields as sent (times already parsed), or as merged by a PATCH.
#[derive(Debug, Clone, Default)]
pub(crate) struct Fields<'a> {
    pub(crate) cron_expr: Option<&'a str>,
    pub(crate) timezone: Option<&'a str>,
    pub(crate) trigger_at: Option<Millis>,
    pub(crate) every_ms: Option<i64>,
    pub(crate) delay_ms: Option<i64>,
    pub(crate) start_at: Option<Millis>,
    pub(crate) end_at: Option<Millis>,
    pub(crate) misfire: Option<&'a str>,
    pub(crate) overlap: Option<&'a str>,
}

impl<'a> Fields<'a> {
    /// The fields that describe `s`.
    pub(crate) fn of(s: &'a Schedule) -> Self {
        match s {
            Schedule::Once { at } => Fields {
                trigger_at: Some(*at),
                ..Fields::default()
            },
            Schedule::Recurring(r) => {
                let mut f = Fields {
                    start_at: r.start_at,
                    end_at: r.end_at,
                    misfire: Some(r.misfire.as_str()),
                    overlap: Some(r.overlap.as_str()),
                    ..Fields::default()
                };
                match &r.rule {
                    Rule::Cron { expr, tz } => {
                        f.cron_expr = Some(expr);
                        f.timezone = Some(tz);
                    }
                    Rule::Every { every_ms } => f.every_ms = Some(clamp(*every_ms)),
                    Rule::Delay { delay_ms } => f.delay_ms = Some(clamp(*delay_ms)),
                }
                f
            }
        }
    }

    /// Whether the fields make a recurring schedule.
    pub(crate) fn is_recurring(&self) -> bool {
        self.cron_expr.is_some() || self.every_ms.is_some() || self.delay_ms.is_some()
    }
}

fn clamp(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// An optional RFC 3339 field.
pub(crate) fn time_field(field: &str, raw: Option<&str>) -> Result<Option<Millis>, ApiError> {
    raw.map(|raw| {
        parse_rfc3339(raw).map_err(|e| {
            ApiError::invalid(
                field,
                format!(
                    "{field} {raw:?} is not an RFC 3339 timestamp ({e}); e.g. \"2026-03-01T10:00:00Z\""
                ),
            )
        })
    })
    .transpose()
}

/// Builds the schedule the fields describe: cron, fixed rate or fixed delay
/// (at most one of them), or else a one-shot at `triggerAt` or `now`. The
/// time zone (`UTC` when absent) is checked even where it is not used.
pub(crate) fn build(f: &Fields<'_>, now: Millis) -> Result<Schedule, ApiError> {
    let tz = f.timezone.unwrap_or("UTC");
    if tz.parse::<chrono_tz::Tz>().is_err() {
        return Err(schedule_error(ScheduleError::UnknownTimeZone(
            tz.to_string(),
        )));
    }
    let kinds = [
        ("cronExpr", f.cron_expr.is_some()),
        ("everyMs", f.every_ms.is_some()),
        ("delayMs", f.delay_ms.is_some()),
    ];
    let given: Vec<&str> = kinds.iter().filter(|k| k.1).map(|k| k.0).collect();
    if given.len() > 1 {
        return Err(ApiError::invalid(
            given[1],
            format!(
                "give at most one of cronExpr, everyMs and delayMs; got {}",
                given.join(" and ")
            ),
        ));
    }
    if given.is_empty() {
        for (field, set) in [
            ("startAt", f.start_at.is_some()),
            ("endAt", f.end_at.is_some()),
            ("misfirePolicy", f.misfire.is_some()),
            ("overlapPolicy", f.overlap.is_some()),
        ] {
            if set {
                return Err(ApiError::invalid(
                    field,
                    format!("{field} applies to recurring jobs; set cronExpr, everyMs or delayMs"),
                ));
            }
        }
        return Ok(Schedule::Once {
            at: f.trigger_at.unwrap_or(now),
        });
    }
    if f.trigger_at.is_some() {
        return Err(ApiError::invalid(
            "triggerAt",
            format!(
                "triggerAt is only for one-shot jobs; omit it when {} is set",
                given[0]
            ),
        ));
    }
    let rule = if let Some(expr) = f.cron_expr {
        if expr.trim().is_empty() || expr.chars().count() > MAX_CRON_CHARS {
            return Err(ApiError::InvalidCron(format!(
                "cronExpr must be a cron expression of 1–{MAX_CRON_CHARS} characters"
            )));
        }
        Rule::Cron {
            expr: expr.to_string(),
            tz: tz.to_string(),
        }
    } else if let Some(ms) = f.every_ms {
        Rule::Every {
            every_ms: period("everyMs", ms)?,
        }
    } else {
        Rule::Delay {
            delay_ms: period("delayMs", f.delay_ms.unwrap_or_default())?,
        }
    };
    if let (Some(start), Some(end)) = (f.start_at, f.end_at)
        && end < start
    {
        return Err(ApiError::invalid(
            "endAt",
            "endAt must not be before startAt",
        ));
    }
    Ok(Schedule::Recurring(Recurrence {
        rule,
        start_at: f.start_at,
        end_at: f.end_at,
        misfire: policy(
            "misfirePolicy",
            f.misfire,
            MisfirePolicy::parse,
            &MisfirePolicy::ALL.map(|p| p.as_str()),
        )?
        .unwrap_or_default(),
        overlap: policy(
            "overlapPolicy",
            f.overlap,
            OverlapPolicy::parse,
            &OverlapPolicy::ALL.map(|p| p.as_str()),
        )?
        .unwrap_or_default(),
    }))
}

fn period(field: &str, ms: i64) -> Result<u64, ApiError> {
    if (MIN_PERIOD_MS..=MAX_PERIOD_MS).contains(&ms) {
        Ok(ms.unsigned_abs())
    } else {
        Err(ApiError::invalid(
            field,
            format!("{field} must be between {MIN_PERIOD_MS} and {MAX_PERIOD_MS} ms, got {ms}"),
        ))
    }
}

fn policy<T>(
    field: &str,
    raw: Option<&str>,
    parse: impl Fn(&str) -> Option<T>,
    known: &[&str],
) -> Result<Option<T>, ApiError> {
    raw.map(|s| {
        parse(s).ok_or_else(|| {
            ApiError::invalid(
                field,
                format!(
                    "unknown {field} {s:?}; expected one of {}",
                    known.join(", ")
                ),
            )
        })
    })
    .transpose()
}

/// The API error of a schedule refused by the core.
pub(crate) fn schedule_error(err: ScheduleError) -> ApiError {
    match err {
        ScheduleError::UnknownTimeZone(_) => ApiError::UnknownTimezone(format!("timezone: {err}")),
        ScheduleError::InvalidCron { .. } | ScheduleError::NeverFires(_) => {
            ApiError::InvalidCron(format!("cronExpr: {err}"))
        }
        ScheduleError::Ended => ApiError::invalid(
            "endAt",
            "endAt: the schedule has no trigger left between now (or startAt) and endAt",
        ),
    }
}

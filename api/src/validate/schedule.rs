//! The schedule fields of a request (`cronExpr`, `cronDialect`, `timezone`,
//! `triggerAt`, `everyMs`, `delayMs`, `startAt`, `endAt`, `misfirePolicy`,
//! `overlapPolicy`) → a [`Schedule`], with every refusal naming its field.

use crate::error::ApiError;
use kairos_core::schedule::{
    CronDialect, MisfirePolicy, OverlapPolicy, Recurrence, Rule, Schedule, ScheduleError, ambiguity,
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
    /// As sent (`None`: not named, so an ambiguous expression is refused).
    pub(crate) cron_dialect: Option<&'a str>,
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
                    Rule::Cron { expr, tz, dialect } => {
                        f.cron_expr = Some(expr);
                        f.cron_dialect = Some(dialect.as_str());
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
    if f.cron_dialect.is_some() && f.cron_expr.is_none() {
        return Err(ApiError::invalid(
            "cronDialect",
            "cronDialect applies to cron jobs; set cronExpr too",
        ));
    }
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
            dialect: dialect(expr, f.cron_dialect)?,
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

/// The dialect `expr` is read in: the one named, else `standard` — unless
/// `expr` looks like Quartz and the two dialects read it differently (see
/// [`ambiguity`]), which is refused naming both readings, so a job migrated
/// from Quartz never runs silently on the wrong day.
fn dialect(expr: &str, named: Option<&str>) -> Result<CronDialect, ApiError> {
    match named {
        Some(name) => CronDialect::parse(name).ok_or_else(|| {
            ApiError::invalid(
                "cronDialect",
                format!(
                    "unknown cronDialect {name:?}; expected one of {}",
                    CronDialect::ALL.map(|d| d.as_str()).join(", ")
                ),
            )
        }),
        None => match ambiguity(expr) {
            Some(a) => Err(ApiError::invalid(
                "cronDialect",
                format!("cronExpr {expr:?} reads differently by dialect: {a}"),
            )),
            None => Ok(CronDialect::Standard),
        },
    }
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

/// The schedule fields of a `PATCH` as sent: `startAt`/`endAt` are
/// `Some(None)` when sent as `null` (removed).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Edit<'a> {
    pub(crate) cron_expr: Option<&'a str>,
    pub(crate) cron_dialect: Option<&'a str>,
    pub(crate) timezone: Option<&'a str>,
    pub(crate) trigger_at: Option<&'a str>,
    pub(crate) every_ms: Option<i64>,
    pub(crate) delay_ms: Option<i64>,
    pub(crate) start_at: Option<Option<&'a str>>,
    pub(crate) end_at: Option<Option<&'a str>>,
    pub(crate) misfire: Option<&'a str>,
    pub(crate) overlap: Option<&'a str>,
}

/// `current` with a `PATCH`'s schedule fields applied: a kind field
/// (`cronExpr`, `everyMs`, `delayMs`, `triggerAt`) replaces the rule, the
/// others change what they name and keep the rest (`cronDialect` alone
/// rereads the current expression).
pub(crate) fn merge(current: &Schedule, req: &Edit<'_>, now: Millis) -> Result<Schedule, ApiError> {
    let trigger_at = time_field("triggerAt", req.trigger_at)?;
    let start_at = req.start_at.map(|v| time_field("startAt", v)).transpose()?;
    let end_at = req.end_at.map(|v| time_field("endAt", v)).transpose()?;
    let kind_given = req.cron_expr.is_some()
        || req.every_ms.is_some()
        || req.delay_ms.is_some()
        || trigger_at.is_some();
    let old = Fields::of(current);
    // A new expression keeps a Quartz job's dialect (as it keeps its zone);
    // a standard one was perhaps never chosen, so it is checked again.
    let kept_dialect = old
        .cron_dialect
        .filter(|d| *d == CronDialect::Quartz.as_str() && req.cron_expr.is_some());
    let mut f = if kind_given {
        Fields {
            cron_expr: req.cron_expr,
            cron_dialect: req.cron_dialect.or(kept_dialect),
            trigger_at,
            every_ms: req.every_ms,
            delay_ms: req.delay_ms,
            timezone: old.timezone,
            ..Fields::default()
        }
    } else {
        Fields {
            cron_expr: old.cron_expr,
            cron_dialect: req.cron_dialect.or(old.cron_dialect),
            trigger_at: old.trigger_at,
            every_ms: old.every_ms,
            delay_ms: old.delay_ms,
            timezone: old.timezone,
            ..Fields::default()
        }
    };
    if let Some(tz) = req.timezone {
        if f.cron_expr.is_none() {
            return Err(ApiError::invalid(
                "timezone",
                "timezone applies to cron jobs; set cronExpr too, or leave timezone out",
            ));
        }
        f.timezone = Some(tz);
    }
    // A recurring job keeps its window and policies unless the request
    // names them; a job that becomes a one-shot drops them.
    if f.is_recurring() && current.is_recurring() {
        f.start_at = old.start_at;
        f.end_at = old.end_at;
        f.misfire = old.misfire;
        f.overlap = old.overlap;
    }
    if let Some(v) = start_at {
        f.start_at = v;
    }
    if let Some(v) = end_at {
        f.end_at = v;
    }
    if let Some(p) = req.misfire {
        f.misfire = Some(p);
    }
    if let Some(p) = req.overlap {
        f.overlap = Some(p);
    }
    // The request's own spelling counts: `startAt: null` on a one-shot is
    // as meaningless as a value.
    if !f.is_recurring() {
        for (field, named) in [
            ("startAt", req.start_at.is_some()),
            ("endAt", req.end_at.is_some()),
        ] {
            if named {
                return Err(ApiError::invalid(
                    field,
                    format!("{field} applies to recurring jobs; set cronExpr, everyMs or delayMs"),
                ));
            }
        }
    }
    build(&f, now)
}

/// What decides the job's trigger times: everything but the policies.
pub(crate) fn timing(s: &Schedule) -> Schedule {
    match s {
        Schedule::Once { .. } => s.clone(),
        Schedule::Recurring(r) => Schedule::Recurring(Recurrence {
            misfire: Default::default(),
            overlap: Default::default(),
            ..r.clone()
        }),
    }
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

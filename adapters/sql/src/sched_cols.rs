//! How a [`Schedule`] is stored in the `jobs` columns, both ways.

use crate::error::corrupt;
use crate::rows::R;
use crate::sql::{Fields, from_u64, time};
use kairos_core::schedule::{
    CronDialect, MisfirePolicy, OverlapPolicy, Recurrence, Rule, Schedule,
};
use kairos_core::store::StoreResult;

impl R<'_> {
    /// The schedule columns (`schedule_kind`, `once_at`, `cron_expr`,
    /// `cron_dialect`, `timezone`, `every_ms`, `delay_ms`, `start_at`,
    /// `end_at`, and the policies).
    pub(crate) fn schedule(&self) -> StoreResult<Schedule> {
        let rule = match self.string("schedule_kind")?.as_str() {
            "once" => {
                let at = self.opt_time("once_at")?;
                let at = at.ok_or_else(|| corrupt(self.table, "one-shot job without once_at"))?;
                return Ok(Schedule::Once { at });
            }
            "cron" => {
                let expr = self.opt_string("cron_expr")?;
                let tz = self.opt_string("timezone")?;
                match (expr, tz) {
                    (Some(expr), Some(tz)) => Rule::Cron {
                        expr,
                        tz,
                        dialect: self.parsed("cron_dialect", CronDialect::parse)?,
                    },
                    _ => {
                        return Err(corrupt(
                            self.table,
                            "cron job without expression or time zone",
                        ));
                    }
                }
            }
            "every" => Rule::Every {
                every_ms: self
                    .opt_u64("every_ms")?
                    .ok_or_else(|| corrupt(self.table, "fixed-rate job without every_ms"))?,
            },
            "delay" => Rule::Delay {
                delay_ms: self
                    .opt_u64("delay_ms")?
                    .ok_or_else(|| corrupt(self.table, "fixed-delay job without delay_ms"))?,
            },
            other => {
                return Err(corrupt(
                    self.table,
                    format!("unknown schedule kind {other:?}"),
                ));
            }
        };
        Ok(Schedule::Recurring(Recurrence {
            rule,
            start_at: self.opt_time("start_at")?,
            end_at: self.opt_time("end_at")?,
            misfire: self.parsed("misfire_policy", MisfirePolicy::parse)?,
            overlap: self.parsed("overlap_policy", OverlapPolicy::parse)?,
        }))
    }
}

/// The stored form of a schedule.
pub(crate) struct ScheduleCols<'a> {
    pub(crate) kind: &'static str,
    pub(crate) cron_expr: Option<&'a str>,
    pub(crate) cron_dialect: &'static str,
    pub(crate) timezone: Option<&'a str>,
    pub(crate) once_at: Option<i64>,
    pub(crate) every_ms: Option<i64>,
    pub(crate) delay_ms: Option<i64>,
    pub(crate) start_at: Option<i64>,
    pub(crate) end_at: Option<i64>,
    pub(crate) misfire: &'static str,
    pub(crate) overlap: &'static str,
}

/// The columns that store `s`. A one-shot stores the default policies (they
/// only apply to recurring jobs).
pub(crate) fn schedule_columns(s: &Schedule) -> ScheduleCols<'_> {
    let mut cols = ScheduleCols {
        kind: "once",
        cron_expr: None,
        cron_dialect: CronDialect::Standard.as_str(),
        timezone: None,
        once_at: None,
        every_ms: None,
        delay_ms: None,
        start_at: None,
        end_at: None,
        misfire: MisfirePolicy::default().as_str(),
        overlap: OverlapPolicy::default().as_str(),
    };
    match s {
        Schedule::Once { at } => cols.once_at = Some(*at),
        Schedule::Recurring(r) => {
            match &r.rule {
                Rule::Cron { expr, tz, dialect } => {
                    cols.kind = "cron";
                    cols.cron_expr = Some(expr);
                    cols.cron_dialect = dialect.as_str();
                    cols.timezone = Some(tz);
                }
                Rule::Every { every_ms } => {
                    cols.kind = "every";
                    cols.every_ms = Some(from_u64(*every_ms));
                }
                Rule::Delay { delay_ms } => {
                    cols.kind = "delay";
                    cols.delay_ms = Some(from_u64(*delay_ms));
                }
            }
            cols.start_at = r.start_at;
            cols.end_at = r.end_at;
            cols.misfire = r.misfire.as_str();
            cols.overlap = r.overlap.as_str();
        }
    }
    cols
}

impl ScheduleCols<'_> {
    /// Adds every schedule column to `f`.
    pub(crate) fn fields(&self, f: &mut Fields) {
        f.set("schedule_kind", self.kind)
            .set("cron_expr", self.cron_expr)
            .set("cron_dialect", self.cron_dialect)
            .set("timezone", self.timezone)
            .set("once_at", time(self.once_at))
            .set("every_ms", self.every_ms)
            .set("delay_ms", self.delay_ms)
            .set("start_at", time(self.start_at))
            .set("end_at", time(self.end_at))
            .set("misfire_policy", self.misfire)
            .set("overlap_policy", self.overlap);
    }
}

/// The `cron_dialect` column of a workflow: its schedule's dialect
/// (`standard` when it has no cron schedule).
pub(crate) fn cron_dialect_of(s: Option<&Schedule>) -> &'static str {
    match s.and_then(Schedule::recurrence).map(|r| &r.rule) {
        Some(Rule::Cron { dialect, .. }) => dialect.as_str(),
        _ => CronDialect::Standard.as_str(),
    }
}

/// A workflow's stored schedule document with the dialect its
/// `cron_dialect` column names (the column is what is read, as for jobs).
pub(crate) fn with_cron_dialect(mut s: Schedule, dialect: CronDialect) -> Schedule {
    if let Schedule::Recurring(Recurrence {
        rule: Rule::Cron { dialect: d, .. },
        ..
    }) = &mut s
    {
        *d = dialect;
    }
    s
}

//! Schedules: when a job fires. One-shot at a time, or a recurring rule — a
//! cron expression in the job's IANA time zone ([`CronSchedule`]), a fixed
//! rate (`every_ms`) or a fixed delay after the previous execution finished
//! (`delay_ms`) — inside an optional `[start_at, end_at]` window, with the
//! misfire and overlap policies that only make sense for recurring jobs.
//!
//! A fixed rate runs on a grid: `anchor + k * every_ms`, where the anchor is
//! `start_at` or else the job's creation time, so a due time plus `every_ms`
//! is always the next due time and a recomputation (after a PATCH or a
//! misfire) lands on the same grid. A fixed delay has no grid: its next due
//! time is written when the previous execution ends (see
//! [`crate::outcome::Continuation::Delay`]).

mod cron;
mod dialect;
#[cfg(test)]
mod tests;

pub use cron::CronSchedule;
pub use dialect::{Ambiguity, CronDialect, ambiguity};

use crate::time::Millis;
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
    /// Fires repeatedly.
    Recurring(Recurrence),
}

/// A recurring schedule: the rule, its window and its policies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Recurrence {
    /// When it fires.
    pub rule: Rule,
    /// No trigger before this time (ms UTC).
    pub start_at: Option<Millis>,
    /// No trigger after this time (ms UTC); the job then ends `succeeded`.
    pub end_at: Option<Millis>,
    /// What to do with triggers missed while no dispatcher ran.
    pub misfire: MisfirePolicy,
    /// What to do with a trigger while an earlier execution still runs.
    pub overlap: OverlapPolicy,
}

/// The rule of a recurring schedule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "camelCase")]
pub enum Rule {
    /// At every match of `expr` in time zone `tz`.
    Cron {
        /// The expression as the caller gave it.
        expr: String,
        /// IANA time zone name, e.g. `Europe/Berlin`.
        tz: String,
        /// How `expr` is read; absent in schedules stored before dialects.
        #[serde(default, skip_serializing_if = "CronDialect::is_standard")]
        dialect: CronDialect,
    },
    /// Fixed rate: every `every_ms` on the job's grid.
    Every {
        /// Period.
        every_ms: u64,
    },
    /// Fixed delay: `delay_ms` after the previous execution finished.
    Delay {
        /// Pause between the end of one execution and the next trigger.
        delay_ms: u64,
    },
}

/// Triggers missed while no dispatcher ran (due more than
/// [`crate::trigger::MISFIRE_THRESHOLD_MS`] ago).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum MisfirePolicy {
    /// One catch-up execution, then continue from now.
    #[default]
    FireOnce,
    /// No catch-up: move to the next future trigger without an execution.
    Skip,
    /// One execution per missed trigger, a bounded number per claim round.
    FireAll,
}

/// A trigger of a recurring job whose previous execution has not ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum OverlapPolicy {
    /// Run it anyway, beside the earlier one.
    #[default]
    Allow,
    /// Record the trigger as a `skipped` execution and wait for the next.
    Forbid,
    /// Ask the earlier execution to stop and run the new one.
    Replace,
}

impl MisfirePolicy {
    /// Every policy.
    pub const ALL: [MisfirePolicy; 3] = [
        MisfirePolicy::FireOnce,
        MisfirePolicy::Skip,
        MisfirePolicy::FireAll,
    ];

    /// The name stored and shown by the API.
    pub fn as_str(self) -> &'static str {
        match self {
            MisfirePolicy::FireOnce => "fireOnce",
            MisfirePolicy::Skip => "skip",
            MisfirePolicy::FireAll => "fireAll",
        }
    }

    /// Parses a stored or requested name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

impl OverlapPolicy {
    /// Every policy.
    pub const ALL: [OverlapPolicy; 3] = [
        OverlapPolicy::Allow,
        OverlapPolicy::Forbid,
        OverlapPolicy::Replace,
    ];

    /// The name stored and shown by the API.
    pub fn as_str(self) -> &'static str {
        match self {
            OverlapPolicy::Allow => "allow",
            OverlapPolicy::Forbid => "forbid",
            OverlapPolicy::Replace => "replace",
        }
    }

    /// Parses a stored or requested name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }
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
    /// No trigger is left between now (or `start_at`) and `end_at`.
    #[error("the schedule has no trigger left before its endAt")]
    Ended,
}

/// A recurring rule ready to compute trigger times (the cron expression parsed
/// once), bounded by its window.
#[derive(Debug, Clone)]
pub struct Timeline {
    rule: CompiledRule,
    start_at: Option<Millis>,
    end_at: Option<Millis>,
}

#[derive(Debug, Clone)]
enum CompiledRule {
    Cron(Box<CronSchedule>),
    Every(i64),
    Delay(i64),
}

/// Converts a stored period to signed milliseconds; at least 1 so grid
/// arithmetic never divides by zero.
fn period(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX).max(1)
}

impl Recurrence {
    /// Defaults for `rule`: no window, `fireOnce`, `allow`.
    pub fn new(rule: Rule) -> Self {
        Self {
            rule,
            start_at: None,
            end_at: None,
            misfire: MisfirePolicy::default(),
            overlap: OverlapPolicy::default(),
        }
    }

    /// Parses the rule once for repeated use.
    pub fn timeline(&self) -> Result<Timeline, ScheduleError> {
        let rule = match &self.rule {
            Rule::Cron { expr, tz, dialect } => {
                CompiledRule::Cron(Box::new(CronSchedule::parse(expr, tz, *dialect)?))
            }
            Rule::Every { every_ms } => CompiledRule::Every(period(*every_ms)),
            Rule::Delay { delay_ms } => CompiledRule::Delay(period(*delay_ms)),
        };
        Ok(Timeline {
            rule,
            start_at: self.start_at,
            end_at: self.end_at,
        })
    }
}

impl Timeline {
    /// The earliest trigger at or after `t` (and `start_at`), or `None` if
    /// none is left before `end_at`. `anchor` is the fixed-rate grid origin
    /// when there is no `start_at` (the job's creation time, or any due time
    /// on its grid). A fixed delay fires as soon as it is allowed.
    pub fn at_or_after(&self, t: Millis, anchor: Millis) -> Option<Millis> {
        let from = self.start_at.map_or(t, |s| s.max(t));
        let at = match &self.rule {
            CompiledRule::Cron(c) => c.next_after(from.saturating_sub(1))?,
            CompiledRule::Every(every) => {
                let origin = self.start_at.unwrap_or(anchor);
                if from <= origin {
                    origin
                } else {
                    let steps = (from - origin).saturating_add(every - 1) / every;
                    origin.saturating_add(steps.saturating_mul(*every))
                }
            }
            CompiledRule::Delay(_) => from,
        };
        self.within_end(at)
    }

    /// The trigger that follows the one due at `fired` on the rule's own
    /// rhythm, or `None` when none is left (and always for a fixed delay,
    /// whose next trigger depends on when the execution ends).
    pub fn after(&self, fired: Millis) -> Option<Millis> {
        match &self.rule {
            CompiledRule::Cron(_) | CompiledRule::Every(_) => {
                self.at_or_after(fired.saturating_add(1), fired)
            }
            CompiledRule::Delay(_) => None,
        }
    }

    /// For a fixed delay: the trigger `delay_ms` after `finished`, or `None`
    /// past `end_at`. `None` for other rules.
    pub fn after_finish(&self, finished: Millis) -> Option<Millis> {
        match &self.rule {
            CompiledRule::Delay(d) => self.at_or_after(finished.saturating_add(*d), finished),
            _ => None,
        }
    }

    /// Whether the next trigger is written when an execution ends.
    pub fn is_delay(&self) -> bool {
        matches!(self.rule, CompiledRule::Delay(_))
    }

    fn within_end(&self, at: Millis) -> Option<Millis> {
        match self.end_at {
            Some(end) if at > end => None,
            _ => Some(at),
        }
    }
}

impl Schedule {
    /// A standard cron schedule with default window and policies.
    pub fn cron(expr: &str, tz: &str) -> Self {
        Self::cron_in(CronDialect::Standard, expr, tz)
    }

    /// A cron schedule in `dialect` with default window and policies.
    pub fn cron_in(dialect: CronDialect, expr: &str, tz: &str) -> Self {
        Schedule::Recurring(Recurrence::new(Rule::Cron {
            expr: expr.to_string(),
            tz: tz.to_string(),
            dialect,
        }))
    }

    /// A fixed-rate schedule with default window and policies.
    pub fn every(every_ms: u64) -> Self {
        Schedule::Recurring(Recurrence::new(Rule::Every { every_ms }))
    }

    /// A fixed-delay schedule with default window and policies.
    pub fn delay(delay_ms: u64) -> Self {
        Schedule::Recurring(Recurrence::new(Rule::Delay { delay_ms }))
    }

    /// The recurrence, `None` for a one-shot.
    pub fn recurrence(&self) -> Option<&Recurrence> {
        match self {
            Schedule::Once { .. } => None,
            Schedule::Recurring(r) => Some(r),
        }
    }

    /// Checks the schedule and returns its first trigger at or after `now`
    /// for a job created at `now`. A one-shot in the past fires at once (its
    /// due time is kept as given).
    pub fn first_trigger(&self, now: Millis) -> Result<Millis, ScheduleError> {
        self.first_trigger_from(now, now)
    }

    /// Checks the schedule and returns its first trigger at or after `now`
    /// for a job created at `created_at` (the fixed-rate grid origin when
    /// there is no `start_at`); [`ScheduleError::Ended`] if the window has no
    /// trigger left.
    pub fn first_trigger_from(
        &self,
        now: Millis,
        created_at: Millis,
    ) -> Result<Millis, ScheduleError> {
        match self {
            Schedule::Once { at } => Ok(*at),
            Schedule::Recurring(r) => {
                let timeline = r.timeline()?;
                if let Some(at) = timeline.at_or_after(now, created_at) {
                    return Ok(at);
                }
                // Tell "never matches" from "matches, but not before endAt".
                match &r.rule {
                    Rule::Cron { expr, .. }
                        if timeline
                            .without_end()
                            .at_or_after(now, created_at)
                            .is_none() =>
                    {
                        Err(ScheduleError::NeverFires(expr.clone()))
                    }
                    _ => Err(ScheduleError::Ended),
                }
            }
        }
    }

    /// The trigger after the one due at `fired_at`, skipping any that are
    /// already older than `now` (a misfire fires once, not once per miss).
    /// [`crate::trigger::claims_for`] applies the job's misfire policy
    /// instead; this is the `fireOnce` answer.
    pub fn next_trigger(&self, fired_at: Millis, now: Millis) -> Option<Millis> {
        let timeline = self.recurrence()?.timeline().ok()?;
        let next = timeline.after(fired_at)?;
        if next >= now {
            Some(next)
        } else {
            timeline.at_or_after(now, fired_at)
        }
    }

    /// Whether the job can fire more than once.
    pub fn is_recurring(&self) -> bool {
        matches!(self, Schedule::Recurring(_))
    }
}

impl Timeline {
    fn without_end(&self) -> Timeline {
        Timeline {
            end_at: None,
            ..self.clone()
        }
    }
}

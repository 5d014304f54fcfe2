//! A [`PatchJobRequest`] merged into the job the caller read → the job's new
//! definition ([`JobUpdate`]), validated as a create would be.

use super::schedule::{self, Fields};
use super::{
    callback_url, check_params, group, max_concurrency, priority, retry_policy, sensitive_paths,
    timeout,
};
use crate::ApiConfig;
use crate::dto::PatchJobRequest;
use crate::error::ApiError;
use kairos_core::job::Job;
use kairos_core::schedule::{Recurrence, Schedule, ScheduleError};
use kairos_core::sensitive::Rules;
use kairos_core::store::JobUpdate;
use kairos_core::time::Millis;

/// The new definition of `job` after `req`, at `now`. A changed rule, due
/// time or window sets `reschedule` (the store then recomputes the next
/// trigger); a window that has no trigger left is accepted, since it ends the
/// job, but a cron expression that never fires is not.
pub fn job_update(
    job: &Job,
    req: &PatchJobRequest,
    cfg: &ApiConfig,
    now: Millis,
) -> Result<JobUpdate, ApiError> {
    let schedule = merged_schedule(&job.schedule, req, now)?;
    let reschedule = timing(&schedule) != timing(&job.schedule);
    if reschedule {
        match schedule.first_trigger_from(now, job.created_at) {
            Ok(_) | Err(ScheduleError::Ended) => {}
            Err(e) => return Err(schedule::schedule_error(e)),
        }
    }
    let sensitive_params = match &req.sensitive_params {
        Some(paths) => sensitive_paths(Some(paths))?,
        None => job.sensitive_params.clone(),
    };
    let params = match &req.params {
        Some(p) => {
            let mut p = p.clone().unwrap_or_default();
            // Params read masked (the dashboard, a read key's copy) come back
            // with the mask where a secret was: it keeps the stored value.
            // The paths the job had when read count, and the new ones.
            let mut paths = job.sensitive_params.clone();
            paths.extend(sensitive_params.iter().cloned());
            Rules::new(&cfg.sensitive_keys(), &paths).restore(&mut p, &job.params);
            p
        }
        None => job.params.clone(),
    };
    check_params(&params, cfg)?;
    let callback_url = match &req.callback_url {
        Some(Some(raw)) => Some(callback_url(raw)?),
        Some(None) => None,
        None => job.callback_url.clone(),
    };
    let timeout_ms = match req.timeout_ms {
        Some(Some(ms)) => Some(timeout(ms)?),
        Some(None) => None,
        None => job.timeout_ms,
    };
    let worker_group = match &req.worker_group {
        Some(Some(raw)) => Some(group(raw)?),
        Some(None) => None,
        None => job.worker_group.clone(),
    };
    let priority = req
        .priority
        .map(priority)
        .transpose()?
        .unwrap_or(job.priority);
    let max_concurrency = match req.max_concurrency {
        Some(Some(n)) => Some(max_concurrency(n)?),
        Some(None) => None,
        None => job.max_concurrency,
    };
    Ok(JobUpdate {
        schedule,
        reschedule,
        params,
        sensitive_params,
        callback_url,
        retry: retry_policy(req.max_attempts, req.retry_backoff_ms, job.retry)?,
        timeout_ms,
        worker_group,
        priority,
        max_concurrency,
    })
}

/// The job's schedule with the request's schedule fields applied: a kind
/// field (`cronExpr`, `everyMs`, `delayMs`, `triggerAt`) replaces the rule,
/// the others change what they name and keep the rest.
fn merged_schedule(
    current: &Schedule,
    req: &PatchJobRequest,
    now: Millis,
) -> Result<Schedule, ApiError> {
    let trigger_at = schedule::time_field("triggerAt", req.trigger_at.as_deref())?;
    let start_at = req
        .start_at
        .as_ref()
        .map(|v| schedule::time_field("startAt", v.as_deref()))
        .transpose()?;
    let end_at = req
        .end_at
        .as_ref()
        .map(|v| schedule::time_field("endAt", v.as_deref()))
        .transpose()?;
    let kind_given = req.cron_expr.is_some()
        || req.every_ms.is_some()
        || req.delay_ms.is_some()
        || trigger_at.is_some();
    let old = Fields::of(current);
    let mut f = if kind_given {
        Fields {
            cron_expr: req.cron_expr.as_deref(),
            trigger_at,
            every_ms: req.every_ms,
            delay_ms: req.delay_ms,
            timezone: old.timezone,
            ..Fields::default()
        }
    } else {
        Fields {
            cron_expr: old.cron_expr,
            trigger_at: old.trigger_at,
            every_ms: old.every_ms,
            delay_ms: old.delay_ms,
            timezone: old.timezone,
            ..Fields::default()
        }
    };
    if let Some(tz) = req.timezone.as_deref() {
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
    if let Some(p) = req.misfire_policy.as_deref() {
        f.misfire = Some(p);
    }
    if let Some(p) = req.overlap_policy.as_deref() {
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
    schedule::build(&f, now)
}

/// What decides the job's trigger times: everything but the policies.
fn timing(s: &Schedule) -> Schedule {
    match s {
        Schedule::Once { .. } => s.clone(),
        Schedule::Recurring(r) => Schedule::Recurring(Recurrence {
            misfire: Default::default(),
            overlap: Default::default(),
            ..r.clone()
        }),
    }
}

#[cfg(test)]
mod tests;

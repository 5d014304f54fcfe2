//! A [`PatchJobRequest`] merged into the job the caller read → the job's new
//! definition ([`JobUpdate`]), validated as a create would be.

use super::schedule::{self, timing};
use super::{
    callback_url, check_params, group, max_concurrency, priority, retry_policy, sensitive_paths,
    timeout,
};
use crate::ApiConfig;
use crate::dto::PatchJobRequest;
use crate::error::ApiError;
use kairos_core::job::Job;
use kairos_core::schedule::{Schedule, ScheduleError};
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

/// The job's schedule with the request's schedule fields applied (see
/// [`schedule::merge`]).
fn merged_schedule(
    current: &Schedule,
    req: &PatchJobRequest,
    now: Millis,
) -> Result<Schedule, ApiError> {
    let edit = schedule::Edit {
        cron_expr: req.cron_expr.as_deref(),
        cron_dialect: req.cron_dialect.as_deref(),
        timezone: req.timezone.as_deref(),
        trigger_at: req.trigger_at.as_deref(),
        every_ms: req.every_ms,
        delay_ms: req.delay_ms,
        start_at: req.start_at.as_ref().map(Option::as_deref),
        end_at: req.end_at.as_ref().map(Option::as_deref),
        misfire: req.misfire_policy.as_deref(),
        overlap: req.overlap_policy.as_deref(),
    };
    schedule::merge(current, &edit, now)
}

#[cfg(test)]
mod tests;

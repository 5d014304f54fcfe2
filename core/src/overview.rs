//! What an operator's dashboard reads beyond single jobs: executions across
//! jobs by state, job, handler, worker and time, and one tenant's figures at
//! a glance (counts by state, outcomes per minute, trigger lateness and run
//! time, missed and late triggers, callback backlog).

use crate::execution::ExecStatus;
use crate::job::JobStatus;
use crate::time::Millis;

/// Listing filter for executions across a tenant's jobs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExecFilter {
    /// Only executions in one of these states (all states when empty).
    pub statuses: Vec<ExecStatus>,
    /// Only executions of this job.
    pub job_id: Option<String>,
    /// Only executions of jobs with this handler.
    pub handler: Option<String>,
    /// Only executions whose current (or last) attempt went to this worker.
    pub worker_id: Option<String>,
    /// Only executions due at or after this time.
    pub from: Option<Millis>,
    /// Only executions due before this time.
    pub to: Option<Millis>,
    /// Page size.
    pub limit: u32,
    /// Cursor from a previous page.
    pub cursor: Option<String>,
}

/// Succeeded and failed executions that finished within one minute.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MinuteCounts {
    /// Start of the minute (ms UTC, a multiple of 60 000).
    pub minute: Millis,
    /// Executions that finished `succeeded`.
    pub succeeded: u64,
    /// Executions that finished `failed`, `timed_out` or `lost`.
    pub failed: u64,
}

/// A tenant's figures since a point in time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overview {
    /// Jobs per state (states without jobs are left out).
    pub jobs: Vec<(JobStatus, u64)>,
    /// Executions per state, of executions due since `since`.
    pub executions: Vec<(ExecStatus, u64)>,
    /// Outcomes per minute since `since`, oldest first; minutes without
    /// outcomes are left out.
    pub per_minute: Vec<MinuteCounts>,
    /// Dispatch lateness (dispatched − due) of first attempts due since
    /// `since`, ascending: the caller takes percentiles.
    pub lateness_ms: Vec<i64>,
    /// Callbacks pending after at least one failed attempt.
    pub callbacks_retrying: u64,
    /// Callbacks given up on.
    pub callbacks_dead: u64,
}

/// How a tenant's triggers kept time since a point in time: lateness and
/// run time samples for percentiles over time, and the triggers that were
/// missed or late.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timing {
    /// `(due time, dispatch lateness)` of first attempts due since then and
    /// dispatched (dispatched − due), oldest due first; the newest
    /// [`TIMING_SAMPLES`] at most.
    pub lateness: Vec<(Millis, i64)>,
    /// `(finish time, run time)` of executions that finished since then
    /// after starting (finished − started, of the attempt that ended the
    /// execution), oldest finish first; the newest [`TIMING_SAMPLES`] at most.
    pub durations: Vec<(Millis, i64)>,
    /// Misfired triggers: executions due since then that the scheduler
    /// claimed more than [`crate::trigger::MISFIRE_THRESHOLD_MS`] after they
    /// were due (missed while no dispatcher ran, then fired under the job's
    /// misfire policy). Triggers dropped under `misfire: skip` leave no
    /// execution and are not counted.
    pub misfired: u64,
    /// Executions due since then that were not run because an earlier one
    /// of their job was still running (`skipped`, overlap policy).
    pub skipped: u64,
    /// Late triggers: first attempts due since then that were dispatched
    /// more than [`LATE_AFTER_MS`] after they were due, or still wait to be
    /// dispatched that long after (e.g. no live worker serves the handler).
    pub late: u64,
}

impl Timing {
    /// Missed triggers: misfired or skipped.
    pub fn missed(&self) -> u64 {
        self.misfired + self.skipped
    }
}

/// Most samples of each kind a [`Timing`] holds.
pub const TIMING_SAMPLES: u32 = 20_000;

/// A first attempt dispatched (or still waiting) longer than this after its
/// due time counts as late. Dispatchers claim triggers ahead of time, so a
/// healthy trigger is dispatched within milliseconds of being due.
pub const LATE_AFTER_MS: i64 = 1_000;

/// Failure outcomes counted as "failed" per minute.
pub const FAILED_STATES: [ExecStatus; 3] =
    [ExecStatus::Failed, ExecStatus::TimedOut, ExecStatus::Lost];

/// The `q`-quantile (0–1) of ascending `sorted` values, nearest rank.
pub fn quantile(sorted: &[i64], q: f64) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    sorted
        .get(rank.saturating_sub(1).min(sorted.len() - 1))
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_by_nearest_rank() {
        assert_eq!(quantile(&[], 0.5), None);
        let v: Vec<i64> = (1..=100).collect();
        assert_eq!(quantile(&v, 0.5), Some(50));
        assert_eq!(quantile(&v, 0.99), Some(99));
        assert_eq!(quantile(&v, 1.0), Some(100));
        assert_eq!(quantile(&[7], 0.99), Some(7));
    }
}

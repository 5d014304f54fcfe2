//! What an operator's dashboard reads beyond single jobs: executions across
//! jobs by state, and one tenant's figures at a glance (counts by state,
//! outcomes per minute, trigger lateness, callback backlog).

use crate::execution::ExecStatus;
use crate::job::JobStatus;
use crate::time::Millis;

/// Listing filter for executions across a tenant's jobs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExecFilter {
    /// Only executions in one of these states (all states when empty).
    pub statuses: Vec<ExecStatus>,
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

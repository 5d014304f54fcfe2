//! Child jobs (issue 34, part 3): a job may name follow-up jobs, triggered
//! when one of its executions ends — `onSuccess` when it succeeded,
//! `onFailure` when it failed after its retries (failed, timed out, lost) —
//! without writing a workflow. A follow-up trigger is like a manual one:
//! an execution of the child, pending and due now, in the transaction that
//! records the parent's end. Follow-ups may not form a cycle (a job would
//! trigger itself forever).

use crate::execution::ExecStatus;
use crate::store::StoreResult;
use crate::time::Millis;
use async_trait::async_trait;

/// Most follow-up jobs per outcome.
pub const MAX_FOLLOWUPS: usize = 20;

/// The follow-up jobs of a job, by id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FollowUps {
    /// Triggered when an execution succeeded.
    pub on_success: Vec<String>,
    /// Triggered when an execution failed after its retries.
    pub on_failure: Vec<String>,
}

/// Which follow-ups an ended execution triggers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FollowUpOn {
    /// It succeeded.
    Success,
    /// It failed after its retries (failed, timed out or lost).
    Failure,
}

impl FollowUpOn {
    /// The name stored.
    pub fn as_str(self) -> &'static str {
        match self {
            FollowUpOn::Success => "success",
            FollowUpOn::Failure => "failure",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        [FollowUpOn::Success, FollowUpOn::Failure]
            .into_iter()
            .find(|o| o.as_str() == s)
    }

    /// The follow-ups an execution that ended in `status` triggers; `None`
    /// for one that is live, cancelled or skipped (nothing ran to an end).
    pub fn of(status: ExecStatus) -> Option<Self> {
        match status {
            ExecStatus::Succeeded => Some(FollowUpOn::Success),
            ExecStatus::Failed | ExecStatus::TimedOut | ExecStatus::Lost => {
                Some(FollowUpOn::Failure)
            }
            _ => None,
        }
    }
}

/// Outcome of [`FollowUpStore::job_followups_set`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetFollowUps {
    /// Stored; the follow-ups as they are now.
    Done(FollowUps),
    /// No such job of the tenant.
    NotFound,
    /// A named child is no job of the tenant.
    UnknownChild(String),
    /// The follow-ups would form a cycle through this job.
    Cycle(String),
}

/// Jobs' follow-ups.
#[async_trait]
pub trait FollowUpStore: Send + Sync {
    /// A job's follow-ups; `None` if there is no such job of the tenant.
    async fn job_followups_get(&self, tenant: &str, job_id: &str)
    -> StoreResult<Option<FollowUps>>;
    /// Replaces a job's follow-ups (all children must be jobs of the
    /// tenant, and no cycle may form), in one transaction.
    async fn job_followups_set(
        &self,
        tenant: &str,
        job_id: &str,
        followups: &FollowUps,
        now: Millis,
    ) -> StoreResult<SetFollowUps>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ends_that_ran_trigger_follow_ups() {
        assert_eq!(
            FollowUpOn::of(ExecStatus::Succeeded),
            Some(FollowUpOn::Success)
        );
        assert_eq!(FollowUpOn::of(ExecStatus::Lost), Some(FollowUpOn::Failure));
        assert_eq!(FollowUpOn::of(ExecStatus::Cancelled), None);
        assert_eq!(FollowUpOn::of(ExecStatus::Running), None);
        for o in [FollowUpOn::Success, FollowUpOn::Failure] {
            assert_eq!(FollowUpOn::parse(o.as_str()), Some(o));
        }
    }
}

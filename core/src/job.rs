//! Jobs: what a caller submitted, and the [`JobStatus`] state machine.

use crate::execution::ExecStatus;
use crate::schedule::Schedule;
use crate::time::Millis;
use serde::{Deserialize, Serialize};

/// Where a job is in its life. Legal moves are defined only by [`JobTransition`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// Waiting for its next trigger. The dispatcher's scan moves it out.
    Scheduled,
    /// A trigger was claimed and its execution is in flight. A recurring job
    /// stays claimable here (its next trigger is already computed); results
    /// move it back to `Scheduled` or to a terminal state.
    Running,
    /// Held by the caller; triggers are not claimed. `resume` moves it out.
    Paused,
    /// One-shot job whose execution succeeded, or recurring job whose
    /// schedule ended (`endAt`) after its last execution. Terminal.
    Succeeded,
    /// One-shot job whose last attempt failed. Terminal.
    Failed,
    /// Cancelled by the caller. Terminal.
    Cancelled,
}

/// A move of the job state machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobTransition {
    /// The dispatcher claimed a due trigger.
    Claim,
    /// An execution ended and the job has another trigger: back to waiting.
    Reschedule,
    /// The last execution of a one-shot job succeeded.
    Succeed,
    /// The last execution of a one-shot job failed for good.
    Fail,
    /// The caller paused the job.
    Pause,
    /// The caller resumed the job.
    Resume,
    /// The caller cancelled the job.
    Cancel,
    /// A recurring job's schedule has no trigger left (past its `endAt`) and
    /// nothing of it runs any more: it is done.
    Complete,
}

impl JobTransition {
    /// The states this move may start from; the storage layer turns this into
    /// `status IN (…)` so a stale request changes nothing.
    pub fn from_states(self) -> &'static [JobStatus] {
        use JobStatus::*;
        match self {
            JobTransition::Claim => &[Scheduled, Running],
            JobTransition::Reschedule => &[Running],
            // A one-shot paused while its only execution ran still ends with it;
            // otherwise it would stay paused with nothing left to resume.
            JobTransition::Succeed | JobTransition::Fail => &[Running, Paused],
            JobTransition::Pause => &[Scheduled, Running],
            JobTransition::Resume => &[Paused],
            JobTransition::Cancel => &[Scheduled, Running, Paused],
            // A paused job whose window closed is finished too: resuming it
            // could never fire again.
            JobTransition::Complete => &[Scheduled, Running, Paused],
        }
    }

    /// The state this move ends in.
    pub fn to_state(self) -> JobStatus {
        match self {
            JobTransition::Claim => JobStatus::Running,
            JobTransition::Reschedule | JobTransition::Resume => JobStatus::Scheduled,
            JobTransition::Succeed | JobTransition::Complete => JobStatus::Succeeded,
            JobTransition::Fail => JobStatus::Failed,
            JobTransition::Pause => JobStatus::Paused,
            JobTransition::Cancel => JobStatus::Cancelled,
        }
    }

    /// Whether this move may be applied to a job in `from`.
    pub fn allowed_from(self, from: JobStatus) -> bool {
        self.from_states().contains(&from)
    }
}

impl JobStatus {
    /// All states, for listing filters and tests.
    pub const ALL: [JobStatus; 6] = [
        JobStatus::Scheduled,
        JobStatus::Running,
        JobStatus::Paused,
        JobStatus::Succeeded,
        JobStatus::Failed,
        JobStatus::Cancelled,
    ];

    /// The name stored in the database and shown by the API.
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Scheduled => "scheduled",
            JobStatus::Running => "running",
            JobStatus::Paused => "paused",
            JobStatus::Succeeded => "succeeded",
            JobStatus::Failed => "failed",
            JobStatus::Cancelled => "cancelled",
        }
    }

    /// Parses a stored or requested name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Whether no transition leaves this state.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobStatus::Succeeded | JobStatus::Failed | JobStatus::Cancelled
        )
    }
}

/// How failed attempts are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryPolicy {
    /// Attempts in all, including the first (at least 1).
    pub max_attempts: u32,
    /// Delay before the second attempt; doubles for each further one.
    pub backoff_ms: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 1,
            backoff_ms: 1_000,
        }
    }
}

/// Upper bound for the delay between two attempts.
const MAX_RETRY_BACKOFF_MS: u64 = 3_600_000;

impl RetryPolicy {
    /// When attempt `attempt + 1` may start after attempt `attempt` ended at
    /// `now`, or `None` if `attempt` was the last one allowed.
    pub fn next_attempt_at(&self, attempt: u32, now: Millis) -> Option<Millis> {
        if attempt >= self.max_attempts {
            return None;
        }
        let factor = 1u64 << attempt.saturating_sub(1).min(20);
        let delay = self
            .backoff_ms
            .saturating_mul(factor)
            .min(MAX_RETRY_BACKOFF_MS);
        Some(now.saturating_add(delay as i64))
    }
}

/// A job as the API accepted it, before it is stored.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    /// Id chosen by the API (UUIDv7 text).
    pub id: String,
    /// Owner. Every query filters by it.
    pub tenant: String,
    /// Caller's name for the job.
    pub name: String,
    /// Handler a worker runs.
    pub handler: String,
    /// Handler input, any JSON.
    pub params: serde_json::Value,
    /// Paths of params values shown masked, beyond the configured key names
    /// (see [`crate::sensitive`]).
    pub sensitive_params: Vec<String>,
    /// When it fires.
    pub schedule: Schedule,
    /// First due time (ms UTC).
    pub next_trigger_at: Millis,
    /// Where to POST terminal outcomes.
    pub callback_url: Option<String>,
    /// Caller's idempotency key, unique per tenant.
    pub client_request_id: Option<String>,
    /// Fingerprint of the create request, to tell a replay from a conflicting reuse of the key.
    pub request_hash: Option<String>,
    /// Retries.
    pub retry: RetryPolicy,
    /// Handler time limit.
    pub timeout_ms: Option<u64>,
    /// Only workers of this group may run it (`None`: any worker serving the handler).
    pub worker_group: Option<String>,
    /// Which of its due triggers' peers it goes before (see [`crate::priority`]).
    pub priority: crate::priority::Priority,
    /// At most this many of its executions live at once (`maxConcurrency`).
    pub max_concurrency: Option<u32>,
    /// The trace its creator sent (`traceparent`), joined by its executions.
    pub trace: Option<crate::trace::CallerTrace>,
    /// How many executions each trigger makes (see [`crate::shard`]).
    pub execution_mode: crate::shard::ExecutionMode,
    /// Creation time (ms UTC).
    pub created_at: Millis,
    /// Prefix of the API key that asked for it. When set, the store records
    /// `job.create` in the audit trail in the job's own transaction, so the
    /// trail and the jobs never disagree and the create costs no second
    /// commit. `None`: not audited here (the bulk endpoint records one entry
    /// per request; tools and tests).
    pub created_by: Option<String>,
}

/// A stored job.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// Id.
    pub id: String,
    /// Owner.
    pub tenant: String,
    /// Caller's name for the job.
    pub name: String,
    /// Handler a worker runs.
    pub handler: String,
    /// Handler input.
    pub params: serde_json::Value,
    /// Paths of params values shown masked, beyond the configured key names
    /// (see [`crate::sensitive`]).
    pub sensitive_params: Vec<String>,
    /// When it fires.
    pub schedule: Schedule,
    /// Next due time, `None` once no trigger is left.
    pub next_trigger_at: Option<Millis>,
    /// Current state.
    pub status: JobStatus,
    /// The scheduler's optimistic-lock version, bumped by every change of
    /// the row (claims, results, the caller's changes): a claim wins only
    /// if it is unchanged since the scan. Internal; callers see
    /// [`Job::revision`].
    pub version: i64,
    /// The caller's revision: bumped only by what a caller changes (an
    /// edit of the definition, pause, resume, cancel), never by the
    /// scheduler's bookkeeping. An edit is checked against it, so a job
    /// that fires every second can still be edited, while two people's
    /// edits never overwrite each other unseen.
    pub revision: i64,
    /// Where to POST terminal outcomes.
    pub callback_url: Option<String>,
    /// Caller's idempotency key.
    pub client_request_id: Option<String>,
    /// Fingerprint of the create request.
    pub request_hash: Option<String>,
    /// Retries.
    pub retry: RetryPolicy,
    /// Handler time limit.
    pub timeout_ms: Option<u64>,
    /// Only workers of this group may run it.
    pub worker_group: Option<String>,
    /// Claim order under a backlog (see [`crate::priority`]).
    pub priority: crate::priority::Priority,
    /// Which claim loop serves it, fixed at creation.
    pub lane: crate::priority::Lane,
    /// At most this many of its executions live at once (`maxConcurrency`).
    pub max_concurrency: Option<u32>,
    /// The trace its creator sent, joined by its executions.
    pub trace: Option<crate::trace::CallerTrace>,
    /// How many executions each trigger makes (see [`crate::shard`]).
    pub execution_mode: crate::shard::ExecutionMode,
    /// Why the caller paused it, if they said (kept until it is resumed).
    pub pause_reason: Option<String>,
    /// The outcome of its latest finished execution (in the order results
    /// were recorded), `None` before the first.
    pub last_result: Option<ExecStatus>,
    /// When that execution finished.
    pub last_result_at: Option<Millis>,
    /// Finished executions in a row, up to the latest, that failed (failed,
    /// timed out or lost); a success resets it, a cancelled execution
    /// leaves it as it is.
    pub fail_streak: u32,
    /// Creation time.
    pub created_at: Millis,
    /// Last update time.
    pub updated_at: Millis,
}

/// Failed runs in a row after which a recurring job is [`JobHealth::Failing`].
pub const FAILING_AFTER: u32 = 3;

/// Whether a job's recent runs succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobHealth {
    /// Not failing: a one-shot (its status says how it ended), or a
    /// recurring job with fewer than [`FAILING_AFTER`] failures in a row.
    Ok,
    /// A recurring job whose last [`FAILING_AFTER`] finished runs failed.
    Failing,
}

impl JobHealth {
    /// Both, for listing filters.
    pub const ALL: [JobHealth; 2] = [JobHealth::Ok, JobHealth::Failing];

    /// Parses a requested name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|h| h.as_str() == s)
    }

    /// The name the API shows.
    pub fn as_str(self) -> &'static str {
        match self {
            JobHealth::Ok => "ok",
            JobHealth::Failing => "failing",
        }
    }

    /// The health of a job with this schedule and failure streak.
    pub fn of(schedule: &Schedule, fail_streak: u32) -> JobHealth {
        if schedule.is_recurring() && fail_streak >= FAILING_AFTER {
            JobHealth::Failing
        } else {
            JobHealth::Ok
        }
    }
}

impl Job {
    /// Whether its recent runs succeed (see [`JobHealth`]).
    pub fn health(&self) -> JobHealth {
        JobHealth::of(&self.schedule, self.fail_streak)
    }
}

/// How a finished execution moves a job's failure streak: `None` when it
/// does not count as a run (cancelled, skipped), else the new streak.
pub fn next_fail_streak(streak: u32, outcome: ExecStatus) -> Option<u32> {
    match outcome {
        ExecStatus::Succeeded => Some(0),
        ExecStatus::Failed | ExecStatus::TimedOut | ExecStatus::Lost => {
            Some(streak.saturating_add(1))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in JobStatus::ALL {
            assert_eq!(JobStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(JobStatus::parse("done"), None);
    }

    #[test]
    fn terminal_states_have_no_way_out() {
        let moves = [
            JobTransition::Claim,
            JobTransition::Reschedule,
            JobTransition::Succeed,
            JobTransition::Fail,
            JobTransition::Pause,
            JobTransition::Resume,
            JobTransition::Cancel,
            JobTransition::Complete,
        ];
        for st in JobStatus::ALL.into_iter().filter(|s| s.is_terminal()) {
            assert!(
                moves.iter().all(|m| !m.allowed_from(st)),
                "{st:?} must be final"
            );
        }
    }

    #[test]
    fn paused_jobs_are_not_claimed_and_resume_to_scheduled() {
        assert!(!JobTransition::Claim.allowed_from(JobStatus::Paused));
        assert!(JobTransition::Resume.allowed_from(JobStatus::Paused));
        assert_eq!(JobTransition::Resume.to_state(), JobStatus::Scheduled);
        assert!(JobTransition::Cancel.allowed_from(JobStatus::Paused));
    }

    #[test]
    fn a_paused_one_shot_still_ends_with_its_execution() {
        assert!(JobTransition::Succeed.allowed_from(JobStatus::Paused));
        assert!(JobTransition::Fail.allowed_from(JobStatus::Paused));
        assert!(
            !JobTransition::Reschedule.allowed_from(JobStatus::Paused),
            "a paused cron job stays paused"
        );
    }

    #[test]
    fn only_recurring_jobs_fail_after_their_streak() {
        use crate::schedule::{Recurrence, Rule};
        let every = Schedule::Recurring(Recurrence::new(Rule::Every { every_ms: 1_000 }));
        assert_eq!(JobHealth::of(&every, FAILING_AFTER - 1), JobHealth::Ok);
        assert_eq!(JobHealth::of(&every, FAILING_AFTER), JobHealth::Failing);
        let once = Schedule::Once { at: 0 };
        assert_eq!(JobHealth::of(&once, 99), JobHealth::Ok);
    }

    #[test]
    fn failures_add_up_successes_reset_and_the_rest_do_not_count() {
        assert_eq!(next_fail_streak(2, ExecStatus::Failed), Some(3));
        assert_eq!(next_fail_streak(2, ExecStatus::TimedOut), Some(3));
        assert_eq!(next_fail_streak(2, ExecStatus::Lost), Some(3));
        assert_eq!(next_fail_streak(5, ExecStatus::Succeeded), Some(0));
        assert_eq!(next_fail_streak(5, ExecStatus::Cancelled), None);
        assert_eq!(next_fail_streak(5, ExecStatus::Skipped), None);
    }

    #[test]
    fn retry_backoff_doubles_and_stops_at_max_attempts() {
        let p = RetryPolicy {
            max_attempts: 3,
            backoff_ms: 100,
        };
        assert_eq!(p.next_attempt_at(1, 1_000), Some(1_100));
        assert_eq!(p.next_attempt_at(2, 1_000), Some(1_200));
        assert_eq!(p.next_attempt_at(3, 1_000), None);
        let huge = RetryPolicy {
            max_attempts: 100,
            backoff_ms: u64::MAX,
        };
        assert_eq!(
            huge.next_attempt_at(50, 0),
            Some(MAX_RETRY_BACKOFF_MS as i64)
        );
    }
}

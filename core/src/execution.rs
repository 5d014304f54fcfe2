//! Executions: one trigger of a job, and the [`ExecStatus`] state machine.
//!
//! Every transition is defined by [`ExecTransition`]; storage applies it as a
//! conditional update (`WHERE status IN (from_states) AND attempt = ?`), so a
//! stale or duplicate message changes nothing.

use crate::time::Millis;
use serde::{Deserialize, Serialize};

/// Where one execution is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecStatus {
    /// Claimed by the dispatcher, not yet confirmed in a worker queue (or
    /// waiting for its next attempt). The dispatcher's publisher moves it out.
    Pending,
    /// Confirmed in a worker's queue. The worker's `started` result moves it out,
    /// or the reaper when the worker dies.
    Dispatched,
    /// The worker said it started. Its final result, a timeout or the reaper
    /// moves it out.
    Running,
    /// The handler succeeded. Terminal.
    Succeeded,
    /// The handler failed and no attempt is left. Terminal.
    Failed,
    /// The handler ran past its time limit and no attempt is left. Terminal.
    TimedOut,
    /// Its worker was declared dead and no attempt is left. Terminal.
    Lost,
    /// Cancelled with its job before it ran, or stopped at the caller's
    /// request (job cancelled, or replaced by a newer trigger). Terminal.
    Cancelled,
    /// The trigger was not run because an earlier execution of the job was
    /// still running (overlap policy). Terminal.
    Skipped,
}

/// A move of the execution state machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecTransition {
    /// A publisher confirm arrived for the dispatch message.
    Dispatch,
    /// A worker refused the dispatch (full) and it was sent to another
    /// worker's queue: still `Dispatched`, with the new worker recorded so
    /// the reaper rescues it from the right one.
    Reroute,
    /// The worker reported `started`.
    Start,
    /// The worker reported success.
    Succeed,
    /// The worker reported failure (final attempt).
    Fail,
    /// The attempt exceeded its time limit (final attempt).
    TimeOut,
    /// The worker was declared dead (final attempt).
    Lose,
    /// The attempt failed, timed out or was lost and another attempt is
    /// allowed: back to `Pending` with `attempt + 1`.
    Retry,
    /// The job was cancelled before the execution ran.
    Cancel,
    /// A claimed trigger is not run (overlap policy): it is recorded as
    /// `skipped` in the claim transaction itself, never published.
    Skip,
    /// An attempt whose stop was requested (job cancelled, or replaced by a
    /// newer trigger) ended without success: `cancelled`, with no retry.
    Stop,
    /// The attempt was confirmed in a queue whose worker died (or whose
    /// in-memory broker is gone) before it started: back to `Pending` with
    /// the same attempt, to be published again. The attempt never ran, so it
    /// does not count; if it did start after all, the worker's once-per-attempt
    /// guard stops a second run.
    Requeue,
}

impl ExecTransition {
    /// The states this move may start from.
    ///
    /// Results travel on one queue consumed by several dispatchers, so a final
    /// result may be applied before `started` or even before the dispatch
    /// confirm was recorded: terminal moves are allowed from every live state.
    pub fn from_states(self) -> &'static [ExecStatus] {
        use ExecStatus::*;
        match self {
            ExecTransition::Dispatch => &[Pending],
            ExecTransition::Reroute => &[Dispatched],
            ExecTransition::Start => &[Pending, Dispatched],
            ExecTransition::Succeed | ExecTransition::Fail | ExecTransition::TimeOut => {
                &[Pending, Dispatched, Running]
            }
            ExecTransition::Lose => &[Dispatched, Running],
            ExecTransition::Retry => &[Pending, Dispatched, Running],
            ExecTransition::Cancel | ExecTransition::Skip => &[Pending],
            ExecTransition::Requeue => &[Dispatched],
            ExecTransition::Stop => &[Pending, Dispatched, Running],
        }
    }

    /// The state this move ends in.
    pub fn to_state(self) -> ExecStatus {
        match self {
            ExecTransition::Dispatch | ExecTransition::Reroute => ExecStatus::Dispatched,
            ExecTransition::Start => ExecStatus::Running,
            ExecTransition::Succeed => ExecStatus::Succeeded,
            ExecTransition::Fail => ExecStatus::Failed,
            ExecTransition::TimeOut => ExecStatus::TimedOut,
            ExecTransition::Lose => ExecStatus::Lost,
            ExecTransition::Retry | ExecTransition::Requeue => ExecStatus::Pending,
            ExecTransition::Cancel | ExecTransition::Stop => ExecStatus::Cancelled,
            ExecTransition::Skip => ExecStatus::Skipped,
        }
    }

    /// Whether this move may be applied to an execution in `from`.
    pub fn allowed_from(self, from: ExecStatus) -> bool {
        self.from_states().contains(&from)
    }
}

impl ExecStatus {
    /// All states.
    pub const ALL: [ExecStatus; 9] = [
        ExecStatus::Pending,
        ExecStatus::Dispatched,
        ExecStatus::Running,
        ExecStatus::Succeeded,
        ExecStatus::Failed,
        ExecStatus::TimedOut,
        ExecStatus::Lost,
        ExecStatus::Cancelled,
        ExecStatus::Skipped,
    ];

    /// States an execution is live in (not ended): what the overlap policy
    /// and the end of a job wait for.
    pub const LIVE: [ExecStatus; 3] = [
        ExecStatus::Pending,
        ExecStatus::Dispatched,
        ExecStatus::Running,
    ];

    /// The name stored in the database and shown by the API.
    pub fn as_str(self) -> &'static str {
        match self {
            ExecStatus::Pending => "pending",
            ExecStatus::Dispatched => "dispatched",
            ExecStatus::Running => "running",
            ExecStatus::Succeeded => "succeeded",
            ExecStatus::Failed => "failed",
            ExecStatus::TimedOut => "timed_out",
            ExecStatus::Lost => "lost",
            ExecStatus::Cancelled => "cancelled",
            ExecStatus::Skipped => "skipped",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Whether no transition leaves this state.
    pub fn is_terminal(self) -> bool {
        !matches!(
            self,
            ExecStatus::Pending | ExecStatus::Dispatched | ExecStatus::Running
        )
    }
}

/// A stored execution.
#[derive(Debug, Clone, PartialEq)]
pub struct Execution {
    /// UUIDv7 text; the `executionId` callers see.
    pub id: String,
    /// Job it belongs to.
    pub job_id: String,
    /// Owner (copied from the job so tenant filters need no join).
    pub tenant: String,
    /// Due time of the trigger; unique per job and shard index.
    pub scheduled_at: Millis,
    /// Attempt number, from 1.
    pub attempt: u32,
    /// Current state.
    pub status: ExecStatus,
    /// Worker of the current attempt.
    pub worker_id: Option<String>,
    /// Handler output of a success.
    pub output: Option<serde_json::Value>,
    /// Error of a failure.
    pub error: Option<String>,
    /// Earliest time the current attempt may be published.
    pub not_before: Millis,
    /// When the current attempt was confirmed in a worker queue.
    pub dispatched_at: Option<Millis>,
    /// When the current attempt started.
    pub started_at: Option<Millis>,
    /// When the execution reached a terminal state.
    pub finished_at: Option<Millis>,
    /// When the caller (cancel) or the overlap policy (`replace`) asked the
    /// running attempt to stop; workers see it through
    /// [`crate::store::Maintenance::executions_stop_requested`].
    pub stop_requested_at: Option<Millis>,
    /// Latest progress (0–100) the handler reported, if any.
    pub progress: Option<f64>,
    /// Its part of the trigger (`(0, 1)` unless the job is broadcast or sharded).
    pub shard: crate::shard::Shard,
    /// Creation time.
    pub created_at: Millis,
    /// The concurrency limit (a [`crate::concurrency::ScopeKey`]) this
    /// `pending` execution waits for, set when the gate held it back and
    /// cleared when it is dispatched.
    pub waiting_for: Option<String>,
}

/// One recorded transition, for the execution's history.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecEvent {
    /// Execution.
    pub execution_id: String,
    /// Attempt the event belongs to.
    pub attempt: u32,
    /// State entered.
    pub status: ExecStatus,
    /// Worker involved, if any.
    pub worker_id: Option<String>,
    /// Error text for failures.
    pub error: Option<String>,
    /// When it happened.
    pub at: Millis,
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL_MOVES: [ExecTransition; 12] = [
        ExecTransition::Dispatch,
        ExecTransition::Reroute,
        ExecTransition::Start,
        ExecTransition::Succeed,
        ExecTransition::Fail,
        ExecTransition::TimeOut,
        ExecTransition::Lose,
        ExecTransition::Retry,
        ExecTransition::Cancel,
        ExecTransition::Requeue,
        ExecTransition::Skip,
        ExecTransition::Stop,
    ];

    #[test]
    fn names_round_trip() {
        for s in ExecStatus::ALL {
            assert_eq!(ExecStatus::parse(s.as_str()), Some(s));
        }
    }

    #[test]
    fn terminal_states_are_final() {
        for st in ExecStatus::ALL.into_iter().filter(|s| s.is_terminal()) {
            assert!(ALL_MOVES.iter().all(|m| !m.allowed_from(st)), "{st:?}");
        }
    }

    #[test]
    fn a_duplicate_started_after_success_changes_nothing() {
        assert!(!ExecTransition::Start.allowed_from(ExecStatus::Succeeded));
        assert!(!ExecTransition::Start.allowed_from(ExecStatus::Running));
    }

    #[test]
    fn a_final_result_may_overtake_started_and_dispatch() {
        for from in [
            ExecStatus::Pending,
            ExecStatus::Dispatched,
            ExecStatus::Running,
        ] {
            assert!(ExecTransition::Succeed.allowed_from(from));
        }
    }

    #[test]
    fn a_late_dispatch_confirm_does_not_rewind_a_started_execution() {
        assert!(!ExecTransition::Dispatch.allowed_from(ExecStatus::Running));
    }

    #[test]
    fn only_live_states_reach_targets_they_name() {
        for m in ALL_MOVES {
            for from in m.from_states() {
                assert!(!from.is_terminal(), "{m:?} starts from terminal {from:?}");
            }
        }
        assert!(!ExecTransition::Lose.allowed_from(ExecStatus::Pending));
    }

    #[test]
    fn skipped_is_terminal_and_stop_cancels_any_live_attempt() {
        assert!(ExecStatus::Skipped.is_terminal());
        assert_eq!(ExecTransition::Skip.to_state(), ExecStatus::Skipped);
        for from in ExecStatus::LIVE {
            assert!(ExecTransition::Stop.allowed_from(from));
            assert!(!from.is_terminal());
        }
        assert_eq!(ExecTransition::Stop.to_state(), ExecStatus::Cancelled);
        assert!(!ExecTransition::Cancel.allowed_from(ExecStatus::Running));
    }

    #[test]
    fn only_unstarted_attempts_are_requeued() {
        assert!(ExecTransition::Requeue.allowed_from(ExecStatus::Dispatched));
        assert!(!ExecTransition::Requeue.allowed_from(ExecStatus::Running));
        assert_eq!(ExecTransition::Requeue.to_state(), ExecStatus::Pending);
    }
}

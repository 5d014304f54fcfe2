//! What a result (or a reaper verdict) does to an execution and its job.
//!
//! Pure decisions, kept out of the storage adapters: an adapter loads an
//! [`ExecSnapshot`], asks [`plan`] what to do, and applies the [`Plan`] with
//! conditional updates.

use crate::execution::{ExecStatus, ExecTransition};
use crate::job::{JobStatus, JobTransition, RetryPolicy};
use crate::protocol::ResultKind;
use crate::time::Millis;

/// What happened to an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The worker reported `started`.
    Started,
    /// The handler succeeded.
    Succeeded,
    /// The handler failed.
    Failed,
    /// The handler failed and said a retry cannot help (`retryable: false`):
    /// final whatever attempts the job has left.
    FailedPermanently,
    /// The handler ran past its limit (reported by the worker or the reaper).
    TimedOut,
    /// The worker was declared dead.
    Lost,
    /// The worker stopped on its own (it said `offline`) while the attempt
    /// ran: its drain window ended before the handler did (a rollout, a
    /// scale-down). Lost, but not the job's fault: retried at once, the
    /// first time without counting against `maxAttempts` (see
    /// [`FREE_HANDBACKS`]).
    HandedBack,
}

/// How many handed-back attempts of one execution are retried without
/// counting against the job's `maxAttempts`. One: a job that outlasts
/// every drain window would otherwise be handed back forever.
pub const FREE_HANDBACKS: u32 = 1;

impl Verdict {
    /// The verdict a worker's result carries.
    pub fn of_result(r: &crate::protocol::ResultMsg) -> Self {
        match (r.kind, r.retryable) {
            (ResultKind::Failed, Some(false)) => Verdict::FailedPermanently,
            (kind, _) => kind.into(),
        }
    }
}

impl From<ResultKind> for Verdict {
    fn from(k: ResultKind) -> Self {
        match k {
            ResultKind::Started => Verdict::Started,
            ResultKind::Succeeded => Verdict::Succeeded,
            ResultKind::Failed => Verdict::Failed,
            ResultKind::TimedOut => Verdict::TimedOut,
        }
    }
}

/// The state a decision is taken on, read in the same transaction that applies it.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecSnapshot {
    /// Execution status now.
    pub status: ExecStatus,
    /// Current attempt.
    pub attempt: u32,
    /// Job status now.
    pub job_status: JobStatus,
    /// What the job does once this execution ends.
    pub continuation: Continuation,
    /// Whether another execution of the job is still live: a job that ends
    /// with its executions waits for the last one.
    pub others_live: bool,
    /// Whether a stop was requested (job cancelled, or execution replaced):
    /// an unsuccessful end is then `cancelled`, never retried.
    pub stop_requested: bool,
    /// The job's retry policy.
    pub retry: RetryPolicy,
    /// The worker process (incarnation) that reported the current attempt
    /// `started`, when it said which.
    pub incarnation: Option<String>,
    /// Attempts of this execution already retried for free after a
    /// hand-back: they do not count against `maxAttempts`.
    pub handbacks: u32,
}

/// Who reports a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin<'a> {
    /// The scheduler itself (the reaper): a lost worker, a passed deadline.
    Scheduler,
    /// A worker's result.
    Worker {
        /// The reporting process, if the worker says (legacy workers do not).
        incarnation: Option<&'a str>,
        /// Whether a later process of the same worker id has replaced it:
        /// what it held was recovered, so nothing it reports counts.
        retired: bool,
    },
}

impl Origin<'_> {
    /// Whether a result from this origin may move an attempt that `held_by`
    /// started. A replaced process changes nothing; a result from one
    /// process about an attempt another process started is not about the
    /// run the scheduler knows of.
    fn may_report_on(&self, held_by: Option<&str>) -> bool {
        match *self {
            Origin::Scheduler => true,
            Origin::Worker { retired: true, .. } => false,
            Origin::Worker {
                incarnation: Some(ours),
                ..
            } => held_by.is_none_or(|h| h == ours),
            Origin::Worker {
                incarnation: None, ..
            } => true,
        }
    }
}

/// What a job does after one of its executions ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Continuation {
    /// A trigger is pending (recurring job, or a one-shot rescheduled by a
    /// PATCH): back to `scheduled`.
    Scheduled,
    /// One-shot: the job ends with this execution's outcome.
    OneShot,
    /// Fixed delay: the next trigger is `delay_ms` after this end, unless
    /// that passes `end_at`, which ends the job.
    Delay {
        /// Pause after the end.
        delay_ms: u64,
        /// End of the job's window.
        end_at: Option<Millis>,
    },
    /// Recurring job with no trigger left: the job is done (`succeeded`),
    /// whatever this execution's outcome.
    Ended,
}

/// What to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Execution move; applied only if the row is still in `from_states()` at `attempt`.
    pub exec: ExecTransition,
    /// For [`ExecTransition::Retry`]: when the next attempt may be published.
    pub retry_at: Option<Millis>,
    /// What the failed attempt became, recorded in the history before the retry.
    pub attempt_outcome: Option<ExecStatus>,
    /// Job move, if the execution ended.
    pub job: Option<JobTransition>,
    /// For [`ExecTransition::Retry`]: the retry is a hand-back's free one
    /// (the execution's `handbacks` count goes up).
    pub free_retry: bool,
    /// For a fixed delay: the job's next trigger, written with the job move
    /// (or alone when the job is paused).
    pub next_trigger_at: Option<Millis>,
}

impl Plan {
    /// Whether the execution reaches a terminal state (a callback is owed).
    pub fn is_terminal(&self) -> bool {
        self.exec.to_state().is_terminal()
    }
}

/// Decides what `verdict` on attempt `attempt`, reported by `origin`, does,
/// or `None` when it must be ignored (stale attempt, duplicate, the execution
/// already moved on, or a report from a replaced worker process).
pub fn plan(
    s: &ExecSnapshot,
    verdict: Verdict,
    attempt: u32,
    origin: Origin<'_>,
    now: Millis,
) -> Option<Plan> {
    if attempt != s.attempt || !origin.may_report_on(s.incarnation.as_deref()) {
        return None;
    }
    let (final_move, outcome) = match verdict {
        Verdict::Started => {
            return ExecTransition::Start
                .allowed_from(s.status)
                .then_some(Plan {
                    exec: ExecTransition::Start,
                    retry_at: None,
                    attempt_outcome: None,
                    job: None,
                    next_trigger_at: None,
                    free_retry: false,
                });
        }
        Verdict::Succeeded => (ExecTransition::Succeed, ExecStatus::Succeeded),
        Verdict::Failed | Verdict::FailedPermanently => (ExecTransition::Fail, ExecStatus::Failed),
        Verdict::TimedOut => (ExecTransition::TimeOut, ExecStatus::TimedOut),
        Verdict::Lost | Verdict::HandedBack => (ExecTransition::Lose, ExecStatus::Lost),
    };
    if !final_move.allowed_from(s.status) {
        return None;
    }
    let final_move = if s.stop_requested && verdict != Verdict::Succeeded {
        ExecTransition::Stop
    } else {
        final_move
    };
    let free_retry = verdict == Verdict::HandedBack && s.handbacks < FREE_HANDBACKS;
    // Attempts retried for free after a hand-back do not count.
    let counted = attempt.saturating_sub(s.handbacks);
    let retry_at = if free_retry {
        Some(now)
    } else {
        s.retry.next_attempt_at(counted, now)
    };
    if final_move != ExecTransition::Stop
        && !matches!(verdict, Verdict::Succeeded | Verdict::FailedPermanently)
        && let Some(at) = retry_at
    {
        return Some(Plan {
            exec: ExecTransition::Retry,
            retry_at: Some(at),
            attempt_outcome: Some(outcome),
            job: None,
            next_trigger_at: None,
            free_retry,
        });
    }
    let (job, next_trigger_at) = match s.continuation {
        Continuation::Scheduled => (Some(JobTransition::Reschedule), None),
        Continuation::Delay { delay_ms, end_at } => {
            let next = now.saturating_add(i64::try_from(delay_ms).unwrap_or(i64::MAX));
            if end_at.is_some_and(|end| next > end) {
                (ending(s, JobTransition::Complete), None)
            } else {
                (Some(JobTransition::Reschedule), Some(next))
            }
        }
        Continuation::Ended => (ending(s, JobTransition::Complete), None),
        Continuation::OneShot if verdict == Verdict::Succeeded => {
            (ending(s, JobTransition::Succeed), None)
        }
        Continuation::OneShot => (ending(s, JobTransition::Fail), None),
    };
    Some(Plan {
        exec: final_move,
        retry_at: None,
        attempt_outcome: None,
        job: job.filter(|t| t.allowed_from(s.job_status)),
        next_trigger_at,
        free_retry: false,
    })
}

/// A move that ends the job, held back while another execution is live.
fn ending(s: &ExecSnapshot, t: JobTransition) -> Option<JobTransition> {
    (!s.others_live).then_some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A legacy worker's result.
    const W: Origin<'static> = Origin::Worker {
        incarnation: None,
        retired: false,
    };

    fn snap(status: ExecStatus, attempt: u32, max_attempts: u32) -> ExecSnapshot {
        ExecSnapshot {
            status,
            attempt,
            job_status: JobStatus::Running,
            continuation: Continuation::OneShot,
            others_live: false,
            stop_requested: false,
            retry: RetryPolicy {
                max_attempts,
                backoff_ms: 100,
            },
            incarnation: None,
            handbacks: 0,
        }
    }

    #[test]
    fn success_ends_a_one_shot_job() {
        let p = plan(
            &snap(ExecStatus::Running, 1, 1),
            Verdict::Succeeded,
            1,
            W,
            0,
        )
        .unwrap();
        assert_eq!(p.exec, ExecTransition::Succeed);
        assert_eq!(p.job, Some(JobTransition::Succeed));
        assert!(p.is_terminal());
    }

    #[test]
    fn failure_with_attempts_left_retries_after_backoff() {
        let p = plan(
            &snap(ExecStatus::Running, 1, 3),
            Verdict::Failed,
            1,
            W,
            1_000,
        )
        .unwrap();
        assert_eq!(p.exec, ExecTransition::Retry);
        assert_eq!(p.retry_at, Some(1_100));
        assert_eq!(p.attempt_outcome, Some(ExecStatus::Failed));
        assert_eq!(p.job, None);
        assert!(!p.is_terminal());
    }

    #[test]
    fn a_permanent_failure_is_final_with_attempts_left() {
        let p = plan(
            &snap(ExecStatus::Running, 1, 3),
            Verdict::FailedPermanently,
            1,
            W,
            0,
        )
        .unwrap();
        assert_eq!(p.exec, ExecTransition::Fail);
        assert_eq!(p.retry_at, None);
        assert_eq!(p.job, Some(JobTransition::Fail));
        let msg = |retryable| crate::protocol::ResultMsg {
            started_at: None,
            traceparent: None,
            v: 1,
            execution_id: "e".into(),
            attempt: 1,
            worker_id: "w".into(),
            kind: ResultKind::Failed,
            output: None,
            error: Some("bad".into()),
            retryable,
            at: 0,
            incarnation: None,
        };
        assert_eq!(
            Verdict::of_result(&msg(Some(false))),
            Verdict::FailedPermanently
        );
        assert_eq!(Verdict::of_result(&msg(None)), Verdict::Failed);
        assert_eq!(Verdict::of_result(&msg(Some(true))), Verdict::Failed);
    }

    #[test]
    fn last_failure_fails_the_job() {
        let p = plan(&snap(ExecStatus::Running, 3, 3), Verdict::Failed, 3, W, 0).unwrap();
        assert_eq!(p.exec, ExecTransition::Fail);
        assert_eq!(p.job, Some(JobTransition::Fail));
    }

    #[test]
    fn a_recurring_job_goes_back_to_scheduled() {
        let mut s = snap(ExecStatus::Running, 1, 1);
        s.continuation = Continuation::Scheduled;
        let p = plan(&s, Verdict::Failed, 1, W, 0).unwrap();
        assert_eq!(p.job, Some(JobTransition::Reschedule));
        assert_eq!(p.next_trigger_at, None);
    }

    #[test]
    fn a_fixed_delay_schedules_its_next_trigger_from_the_end() {
        let mut s = snap(ExecStatus::Running, 1, 1);
        s.continuation = Continuation::Delay {
            delay_ms: 500,
            end_at: Some(2_000),
        };
        let p = plan(&s, Verdict::Succeeded, 1, W, 1_000).unwrap();
        assert_eq!(p.job, Some(JobTransition::Reschedule));
        assert_eq!(p.next_trigger_at, Some(1_500));
        // Paused: no move, but the next trigger is still written.
        s.job_status = JobStatus::Paused;
        let p = plan(&s, Verdict::Failed, 1, W, 1_000).unwrap();
        assert_eq!((p.job, p.next_trigger_at), (None, Some(1_500)));
        // Past the window's end the job is done.
        s.job_status = JobStatus::Running;
        let p = plan(&s, Verdict::Failed, 1, W, 1_600).unwrap();
        assert_eq!(
            (p.job, p.next_trigger_at),
            (Some(JobTransition::Complete), None)
        );
    }

    #[test]
    fn an_ended_schedule_succeeds_after_its_last_live_execution() {
        let mut s = snap(ExecStatus::Running, 1, 1);
        s.continuation = Continuation::Ended;
        s.others_live = true;
        assert_eq!(plan(&s, Verdict::Failed, 1, W, 0).unwrap().job, None);
        s.others_live = false;
        let p = plan(&s, Verdict::Failed, 1, W, 0).unwrap();
        assert_eq!(p.exec, ExecTransition::Fail);
        assert_eq!(p.job, Some(JobTransition::Complete));
        let mut one = snap(ExecStatus::Running, 1, 1);
        one.others_live = true;
        assert_eq!(plan(&one, Verdict::Succeeded, 1, W, 0).unwrap().job, None);
    }

    #[test]
    fn a_stopped_attempt_is_cancelled_and_not_retried() {
        let mut s = snap(ExecStatus::Running, 1, 3);
        s.stop_requested = true;
        let p = plan(&s, Verdict::Failed, 1, W, 0).unwrap();
        assert_eq!(p.exec, ExecTransition::Stop);
        assert_eq!(p.retry_at, None);
        assert!(p.is_terminal());
        let p = plan(&s, Verdict::Succeeded, 1, W, 0).unwrap();
        assert_eq!(
            p.exec,
            ExecTransition::Succeed,
            "it finished before stopping"
        );
        let mut pending = snap(ExecStatus::Dispatched, 1, 3);
        pending.stop_requested = true;
        assert_eq!(
            plan(&pending, Verdict::Lost, 1, W, 0).unwrap().exec,
            ExecTransition::Stop
        );
    }

    #[test]
    fn stale_and_duplicate_results_are_ignored() {
        assert_eq!(
            plan(
                &snap(ExecStatus::Running, 2, 3),
                Verdict::Succeeded,
                1,
                W,
                0
            ),
            None
        );
        assert_eq!(
            plan(&snap(ExecStatus::Succeeded, 1, 1), Verdict::Failed, 1, W, 0),
            None
        );
        assert_eq!(
            plan(&snap(ExecStatus::Running, 1, 1), Verdict::Started, 1, W, 0),
            None
        );
    }

    #[test]
    fn a_result_for_a_cancelled_job_does_not_revive_it() {
        let mut s = snap(ExecStatus::Running, 1, 1);
        s.job_status = JobStatus::Cancelled;
        let p = plan(&s, Verdict::Succeeded, 1, W, 0).unwrap();
        assert_eq!(p.exec, ExecTransition::Succeed);
        assert_eq!(p.job, None);
    }

    #[test]
    fn lost_is_only_for_work_a_worker_had() {
        assert_eq!(
            plan(&snap(ExecStatus::Pending, 1, 1), Verdict::Lost, 1, W, 0),
            None
        );
        let p = plan(&snap(ExecStatus::Dispatched, 1, 1), Verdict::Lost, 1, W, 0).unwrap();
        assert_eq!(p.exec, ExecTransition::Lose);
    }

    #[test]
    fn a_replaced_process_changes_nothing() {
        let mut s = snap(ExecStatus::Dispatched, 1, 3);
        let retired = Origin::Worker {
            incarnation: Some("old"),
            retired: true,
        };
        for v in [Verdict::Started, Verdict::Succeeded, Verdict::Failed] {
            assert_eq!(plan(&s, v, 1, retired, 0), None, "{v:?}");
        }
        // The attempt the new process started: the old one cannot end it.
        s.status = ExecStatus::Running;
        s.incarnation = Some("new".into());
        let old_live = Origin::Worker {
            incarnation: Some("old"),
            retired: false,
        };
        assert_eq!(plan(&s, Verdict::Succeeded, 1, old_live, 0), None);
        let new = Origin::Worker {
            incarnation: Some("new"),
            retired: false,
        };
        assert_eq!(
            plan(&s, Verdict::Succeeded, 1, new, 0).unwrap().exec,
            ExecTransition::Succeed
        );
        // A legacy result, and the scheduler's verdicts, still count.
        assert!(plan(&s, Verdict::Failed, 1, W, 0).is_some());
        assert_eq!(
            plan(&s, Verdict::Lost, 1, Origin::Scheduler, 0)
                .unwrap()
                .exec,
            ExecTransition::Retry
        );
    }
    #[test]
    fn a_handed_back_attempt_is_retried_once_without_counting() {
        // maxAttempts 1: a lost attempt would end the job...
        let lost = plan(
            &snap(ExecStatus::Running, 1, 1),
            Verdict::Lost,
            1,
            Origin::Scheduler,
            5,
        )
        .unwrap();
        assert_eq!(lost.exec, ExecTransition::Lose);
        // ...a handed-back one is retried at once, for free.
        let back = plan(
            &snap(ExecStatus::Running, 1, 1),
            Verdict::HandedBack,
            1,
            Origin::Scheduler,
            5,
        )
        .unwrap();
        assert_eq!(back.exec, ExecTransition::Retry);
        assert_eq!(back.retry_at, Some(5));
        assert_eq!(back.attempt_outcome, Some(ExecStatus::Lost));
        assert!(back.free_retry);
        // The free attempt does not count: attempt 2 of maxAttempts 2 after
        // one hand-back may still be retried (as the job's second try)...
        let after = ExecSnapshot {
            handbacks: 1,
            ..snap(ExecStatus::Running, 2, 2)
        };
        let p = plan(&after, Verdict::Failed, 2, W, 1_000).unwrap();
        assert_eq!(p.exec, ExecTransition::Retry);
        assert_eq!(p.retry_at, Some(1_100), "the backoff of a first retry");
        assert!(!p.free_retry);
        // ...and a second hand-back counts like a loss.
        let again = ExecSnapshot {
            handbacks: 1,
            ..snap(ExecStatus::Running, 2, 1)
        };
        let p = plan(&again, Verdict::HandedBack, 2, Origin::Scheduler, 7).unwrap();
        assert_eq!(p.exec, ExecTransition::Lose);
        assert_eq!(p.job, Some(JobTransition::Fail));
    }

    #[test]
    fn a_handed_back_attempt_of_a_stopped_execution_is_not_retried() {
        let stopped = ExecSnapshot {
            stop_requested: true,
            ..snap(ExecStatus::Running, 1, 1)
        };
        let p = plan(&stopped, Verdict::HandedBack, 1, Origin::Scheduler, 5).unwrap();
        assert_eq!(p.exec, ExecTransition::Stop);
        assert!(!p.free_retry);
    }
}

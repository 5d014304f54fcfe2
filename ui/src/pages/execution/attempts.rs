//! An execution's attempts, rebuilt from its recorded transitions: each
//! attempt's worker, when it was queued, dispatched, started and ended, how
//! it ended and with what error. An execution row holds only its current
//! attempt; the history (`execution_events`) holds them all.

use kairos_core::execution::{ExecEvent, ExecStatus, Execution};
use kairos_core::time::Millis;

/// One attempt of an execution.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Attempt {
    /// Attempt number, from 1.
    pub(crate) number: u32,
    /// Its latest state: how it ended, or where it is now.
    pub(crate) status: ExecStatus,
    /// The worker it went to, if any.
    pub(crate) worker: Option<String>,
    /// When it was queued (claimed, or due for its retry).
    pub(crate) queued_at: Option<Millis>,
    /// When it was confirmed in a worker's queue (the last time, if it was
    /// sent again).
    pub(crate) dispatched_at: Option<Millis>,
    /// When its worker said it started.
    pub(crate) started_at: Option<Millis>,
    /// When it ended.
    pub(crate) ended_at: Option<Millis>,
    /// Its error, if it failed.
    pub(crate) error: Option<String>,
}

impl Attempt {
    /// Run time: start to end (or to `now` while it runs).
    pub(crate) fn run_time(&self, now: Millis) -> Option<i64> {
        let start = self.started_at?;
        let end = self.ended_at.unwrap_or(now);
        Some((end - start).max(0))
    }

    /// Whether it is still under way.
    pub(crate) fn live(&self) -> bool {
        !self.status.is_terminal()
    }
}

/// The attempts of `exec`, oldest first, from its `events` (oldest first).
/// An execution without history (written before events were kept) shows
/// its current attempt from the row alone.
pub(crate) fn attempts(exec: &Execution, events: &[ExecEvent]) -> Vec<Attempt> {
    let mut out: Vec<Attempt> = Vec::new();
    for ev in events {
        if out.last().is_none_or(|a| a.number != ev.attempt) {
            out.push(Attempt {
                number: ev.attempt,
                status: ev.status,
                worker: None,
                queued_at: None,
                dispatched_at: None,
                started_at: None,
                ended_at: None,
                error: None,
            });
        }
        let Some(a) = out.last_mut() else { continue };
        a.status = ev.status;
        if ev.worker_id.is_some() {
            a.worker.clone_from(&ev.worker_id);
        }
        match ev.status {
            ExecStatus::Pending => {
                a.queued_at.get_or_insert(ev.at);
            }
            ExecStatus::Dispatched => a.dispatched_at = Some(ev.at),
            ExecStatus::Running => a.started_at = Some(ev.at),
            _ => {
                a.ended_at = Some(ev.at);
                if ev.error.is_some() {
                    a.error.clone_from(&ev.error);
                }
            }
        }
    }
    // The first attempt was queued when the trigger was claimed, which a
    // claim straight to a worker records as its dispatch only.
    if let Some(first) = out.first_mut().filter(|a| a.number == 1) {
        first.queued_at.get_or_insert(exec.created_at);
    }
    // The row is the truth about the current attempt (the worker's start
    // time, a worker named only on the row).
    match out.iter_mut().find(|a| a.number == exec.attempt) {
        Some(cur) => {
            if exec.worker_id.is_some() {
                cur.worker.clone_from(&exec.worker_id);
            }
            cur.started_at = exec.started_at.or(cur.started_at);
            cur.dispatched_at = cur.dispatched_at.or(exec.dispatched_at);
            if exec.status.is_terminal() {
                cur.status = exec.status;
                cur.ended_at = exec.finished_at.or(cur.ended_at);
                if exec.error.is_some() {
                    cur.error.clone_from(&exec.error);
                }
            }
        }
        None => out.push(Attempt {
            number: exec.attempt,
            status: exec.status,
            worker: exec.worker_id.clone(),
            queued_at: Some(exec.not_before),
            dispatched_at: exec.dispatched_at,
            started_at: exec.started_at,
            ended_at: exec.finished_at,
            error: exec
                .status
                .is_terminal()
                .then(|| exec.error.clone())
                .flatten(),
        }),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(
        attempt: u32,
        status: ExecStatus,
        worker: Option<&str>,
        error: Option<&str>,
        at: Millis,
    ) -> ExecEvent {
        ExecEvent {
            execution_id: "e".into(),
            attempt,
            status,
            worker_id: worker.map(str::to_string),
            error: error.map(str::to_string),
            at,
        }
    }

    fn exec(attempt: u32, status: ExecStatus) -> Execution {
        Execution {
            shard: Default::default(),
            id: "e".into(),
            job_id: "j".into(),
            tenant: "t".into(),
            scheduled_at: 0,
            attempt,
            status,
            worker_id: Some("w2".into()),
            output: None,
            error: None,
            not_before: 0,
            dispatched_at: Some(110),
            started_at: Some(120),
            finished_at: None,
            stop_requested_at: None,
            progress: None,
            waiting_for: None,
            created_at: 0,
        }
    }

    use ExecStatus::*;

    #[test]
    fn a_failed_attempt_and_its_retry_are_two_attempts() {
        let events = [
            ev(1, Pending, None, None, 0),
            ev(1, Dispatched, Some("w1"), None, 10),
            ev(1, Running, Some("w1"), None, 20),
            ev(1, Failed, Some("w1"), Some("boom"), 50),
            ev(2, Pending, None, None, 100),
            ev(2, Dispatched, Some("w2"), None, 110),
            ev(2, Running, Some("w2"), None, 120),
        ];
        let a = attempts(&exec(2, Running), &events);
        assert_eq!(a.len(), 2);
        assert_eq!(
            (a[0].status, a[0].worker.as_deref(), a[0].error.as_deref()),
            (Failed, Some("w1"), Some("boom"))
        );
        assert_eq!(
            (
                a[0].queued_at,
                a[0].dispatched_at,
                a[0].started_at,
                a[0].ended_at
            ),
            (Some(0), Some(10), Some(20), Some(50))
        );
        assert_eq!(a[0].run_time(999), Some(30));
        assert!(!a[0].live());
        assert_eq!(
            (a[1].status, a[1].worker.as_deref(), a[1].ended_at),
            (Running, Some("w2"), None)
        );
        assert!(a[1].live());
        assert_eq!(a[1].run_time(200), Some(80), "runs until now");
    }

    #[test]
    fn a_first_attempt_claimed_straight_to_a_worker_was_queued_at_its_claim() {
        let events = [ev(1, Dispatched, Some("w1"), None, 10)];
        let mut e = exec(1, Dispatched);
        e.created_at = 7;
        assert_eq!(attempts(&e, &events)[0].queued_at, Some(7));
    }

    #[test]
    fn the_row_completes_the_current_attempt() {
        let events = [ev(1, Pending, None, None, 0)];
        let mut e = exec(1, Failed);
        e.error = Some("timed out in the handler".into());
        e.finished_at = Some(500);
        let a = attempts(&e, &events);
        assert_eq!(a.len(), 1);
        assert_eq!(
            (a[0].status, a[0].ended_at, a[0].error.as_deref()),
            (Failed, Some(500), Some("timed out in the handler"))
        );
        assert_eq!(
            (a[0].worker.as_deref(), a[0].started_at),
            (Some("w2"), Some(120))
        );
        // No history at all: the row alone.
        let a = attempts(&exec(3, Running), &[]);
        assert_eq!((a.len(), a[0].number, a[0].status), (1, 3, Running));
    }

    #[test]
    fn a_requeued_attempt_keeps_its_first_queue_time_and_last_dispatch() {
        let events = [
            ev(1, Pending, None, None, 0),
            ev(1, Dispatched, Some("w1"), None, 10),
            ev(1, Pending, None, None, 30),
            ev(1, Dispatched, Some("w3"), None, 40),
        ];
        let mut e = exec(1, Dispatched);
        e.worker_id = Some("w3".into());
        e.started_at = None;
        let a = attempts(&e, &events);
        assert_eq!(
            (a[0].queued_at, a[0].dispatched_at, a[0].worker.as_deref()),
            (Some(0), Some(40), Some("w3"))
        );
        assert_eq!(a[0].started_at, None);
    }
}

//! Result messages: building them, and publishing them in groups with
//! retries, so a broker outage delays a result instead of losing it and a
//! busy worker sends one confirmed message for many attempts, `started`
//! reports and final results alike.
//!
//! Publishing is a group commit, like the API's creates: a report waits in a
//! queue; if no publish is in flight it starts one for everything queued;
//! otherwise it rides in the next one, which starts as soon as the current
//! one is confirmed. There is no timer, so a lone result goes out at once,
//! and under load each confirm round trip carries every result that arrived
//! meanwhile instead of one persistent message per result.

use kairos_core::broker::{Broker, BrokerError};
use kairos_core::protocol::{PROTOCOL_VERSION, ResultKind, ResultMsg};
use kairos_core::supervise::spawn_critical;
use kairos_core::time::now_ms;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::{Notify, oneshot};

/// What an attempt came to, before it is stamped into a [`ResultMsg`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Report {
    pub(crate) kind: ResultKind,
    pub(crate) output: Option<serde_json::Value>,
    pub(crate) error: Option<String>,
    /// `Some(false)` for a failure the handler said no retry can fix.
    pub(crate) retryable: Option<bool>,
}

impl Report {
    pub(crate) fn started() -> Self {
        Self {
            kind: ResultKind::Started,
            output: None,
            error: None,
            retryable: None,
        }
    }

    pub(crate) fn succeeded(output: serde_json::Value) -> Self {
        Self {
            kind: ResultKind::Succeeded,
            output: Some(output),
            error: None,
            retryable: None,
        }
    }

    pub(crate) fn failed(error: impl Into<String>) -> Self {
        Self {
            kind: ResultKind::Failed,
            output: None,
            error: Some(error.into()),
            retryable: None,
        }
    }

    /// A failure no retry can fix.
    pub(crate) fn failed_permanently(error: impl Into<String>) -> Self {
        Self {
            retryable: Some(false),
            ..Self::failed(error)
        }
    }

    pub(crate) fn timed_out(error: impl Into<String>) -> Self {
        Self {
            kind: ResultKind::TimedOut,
            output: None,
            error: Some(error.into()),
            retryable: None,
        }
    }

    /// The message for this attempt, stamped now.
    pub(crate) fn into_msg(
        self,
        worker_id: &str,
        incarnation: &str,
        execution_id: &str,
        attempt: u32,
    ) -> ResultMsg {
        ResultMsg {
            started_at: None,
            traceparent: None,
            v: PROTOCOL_VERSION,
            execution_id: execution_id.to_string(),
            attempt,
            worker_id: worker_id.to_string(),
            kind: self.kind,
            output: self.output,
            error: self.error,
            at: now_ms(),
            retryable: self.retryable,
            incarnation: Some(incarnation.to_string()),
        }
    }
}

/// Results per message: a bound on one message's size and on the
/// dispatchers' transaction that applies it.
const MAX_PER_MESSAGE: usize = 64;

/// Failed publishes a `started` report rides in before it is given up: only
/// briefly, because until it is confirmed the handler does not run, and the
/// attempt is better handed back to the queue than held while the reaper
/// may be declaring this worker dead.
const STARTED_TRIES: u32 = 6;
/// Failed publishes a final result rides in before it is given up: enough to
/// span a broker restart (a few minutes), so a shutdown cannot hang forever.
const FINAL_TRIES: u32 = 40;
/// The wait after a failed publish doubles from this…
const MIN_DELAY: Duration = Duration::from_millis(50);
/// …up to this while a `started` report is waiting…
const STARTED_MAX_DELAY: Duration = Duration::from_secs(1);
/// …and up to this when only final results are.
const FINAL_MAX_DELAY: Duration = Duration::from_secs(5);

/// A result that could not be published; already logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NotDelivered;

/// The worker's result outlet. `started` reports and final results share
/// one queue and one publish in flight, so under load a confirm round trip
/// carries both kinds (two outlets sent twice the messages for the same
/// results). They differ only in patience: a `started` is given up after a
/// few failed publishes, a final result keeps trying through a broker
/// restart.
#[derive(Clone)]
pub(crate) struct Reporter {
    outlet: Arc<Outlet>,
}

impl Reporter {
    pub(crate) fn new(broker: Arc<dyn Broker>) -> Self {
        Self {
            outlet: Arc::new(Outlet {
                broker,
                pending: Mutex::new(Pending::default()),
                started_queued: Notify::new(),
            }),
        }
    }

    /// Publishes a `started` report; `Ok` once the broker confirmed it.
    pub(crate) async fn started(&self, msg: ResultMsg) -> Result<(), NotDelivered> {
        self.outlet.send(msg, STARTED_TRIES).await
    }

    /// Publishes a final result; `Ok` once the broker confirmed it. A final
    /// failure is logged loudly here.
    pub(crate) async fn finished(&self, msg: ResultMsg) -> Result<(), NotDelivered> {
        self.outlet.send(msg, FINAL_TRIES).await
    }
}

/// A queued result and its caller.
struct Waiting {
    msg: ResultMsg,
    reply: oneshot::Sender<Result<(), NotDelivered>>,
    /// Failed publishes it may still ride in.
    tries_left: u32,
}

impl Waiting {
    fn is_started(&self) -> bool {
        self.msg.kind == ResultKind::Started
    }
}

/// The queue and whether a publish is in flight.
struct Outlet {
    broker: Arc<dyn Broker>,
    pending: Mutex<Pending>,
    /// Wakes a drain waiting out a long delay after failed publishes when a
    /// `started` report arrives, so it gets its few tries soon.
    started_queued: Notify,
}

#[derive(Default)]
struct Pending {
    queue: VecDeque<Waiting>,
    publishing: bool,
}

impl Outlet {
    async fn send(self: &Arc<Self>, msg: ResultMsg, tries: u32) -> Result<(), NotDelivered> {
        let (reply, answer) = oneshot::channel();
        let started = msg.kind == ResultKind::Started;
        let lead = {
            let mut p = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            p.queue.push_back(Waiting {
                msg,
                reply,
                tries_left: tries,
            });
            !std::mem::replace(&mut p.publishing, true)
        };
        if started {
            self.started_queued.notify_waiters();
        }
        if lead {
            // A task of its own, not this caller's future: if the caller is
            // dropped, the results queued behind it still go out. A panic
            // in it would leave every later result queued forever, so it
            // ends the process instead.
            let this = Arc::clone(self);
            spawn_critical("result drain", async move { this.drain().await });
        }
        answer.await.unwrap_or(Err(NotDelivered))
    }

    /// Publishes what is queued, a message at a time, until the queue is
    /// empty. A failed group goes back to the front of the queue, less what
    /// is out of tries, and the next attempt waits a growing delay.
    async fn drain(&self) {
        let mut failures: u32 = 0;
        loop {
            let group: Vec<Waiting> = {
                let mut p = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
                if p.queue.is_empty() {
                    p.publishing = false;
                    return;
                }
                next_group(&mut p.queue)
            };
            // The messages go to the broker as a slice; their callers wait
            // beside them, and are joined to them again if the publish fails.
            let (msgs, callers): (Vec<ResultMsg>, Vec<_>) = group
                .into_iter()
                .map(|w| (w.msg, (w.reply, w.tries_left)))
                .unzip();
            let sent = msgs.len();
            let error = match self.broker.results_publish(&msgs).await {
                Ok(()) => {
                    failures = 0;
                    crate::metrics::results_published(sent);
                    for (reply, _) in callers {
                        let _ = reply.send(Ok(()));
                    }
                    continue;
                }
                Err(e) => e,
            };
            // A message that cannot be encoded never will be: no retry.
            let retryable = !matches!(error, BrokerError::Encode(_));
            let group: Vec<Waiting> = msgs
                .into_iter()
                .zip(callers)
                .filter_map(|(msg, (reply, tries))| {
                    let tries_left = tries.saturating_sub(1);
                    if retryable && tries_left > 0 {
                        return Some(Waiting {
                            msg,
                            reply,
                            tries_left,
                        });
                    }
                    // Dropping its reply answers the caller `NotDelivered`.
                    give_up(&msg, &error);
                    None
                })
                .collect();
            // Listening before the queue is looked at: a `started` queued
            // after the look still cuts the wait short.
            let started_queued = self.started_queued.notified();
            tokio::pin!(started_queued);
            started_queued.as_mut().enable();
            let hurry = {
                let mut p = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
                for w in group.into_iter().rev() {
                    p.queue.push_front(w);
                }
                p.queue.iter().any(Waiting::is_started)
            };
            failures += 1;
            let wait = delay(failures, hurry);
            tracing::warn!(
                results = sent,
                "publishing results failed, retrying in {wait:?}: {error}"
            );
            if hurry {
                tokio::time::sleep(wait).await;
            } else {
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = &mut started_queued => {}
                }
            }
        }
    }
}

/// The next message's results: up to [`MAX_PER_MESSAGE`], `started` reports
/// first (each holds a pool slot and a handler waiting for its confirm;
/// order between attempts does not matter, and an attempt's final result
/// is only queued once its `started` was confirmed), the rest in order.
fn next_group(queue: &mut VecDeque<Waiting>) -> Vec<Waiting> {
    let n = queue.len().min(MAX_PER_MESSAGE);
    let mut group = Vec::with_capacity(n);
    let mut rest = VecDeque::with_capacity(queue.len() - n);
    for w in queue.drain(..) {
        if group.len() < n && w.is_started() {
            group.push(w);
        } else {
            rest.push_back(w);
        }
    }
    while group.len() < n {
        match rest.pop_front() {
            Some(w) => group.push(w),
            None => break,
        }
    }
    *queue = rest;
    group
}

/// The wait after `failures` failed publishes in a row, with jitter so
/// workers do not return to a restarted broker in step.
fn delay(failures: u32, hurry: bool) -> Duration {
    let max = if hurry {
        STARTED_MAX_DELAY
    } else {
        FINAL_MAX_DELAY
    };
    let doubled = MIN_DELAY.saturating_mul(1 << failures.saturating_sub(1).min(16));
    let base = doubled.min(max);
    base + base.mul_f64(rand::random::<f64>() * 0.5)
}

/// Reports a result given up on; a lost final result is logged loudly.
fn give_up(msg: &ResultMsg, error: &BrokerError) {
    if msg.kind == ResultKind::Started {
        tracing::warn!(execution_id = %msg.execution_id, attempt = msg.attempt, "gave up publishing `started`: {error}");
        return;
    }
    tracing::error!(
        execution_id = %msg.execution_id,
        attempt = msg.attempt,
        kind = ?msg.kind,
        output = ?msg.output,
        error = ?msg.error,
        "RESULT NOT DELIVERED: gave up publishing after retries: {error}; the dispatcher's reaper must recover this attempt"
    );
}

#[cfg(test)]
mod tests;

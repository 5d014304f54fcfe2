//! Result messages: building them, and publishing them in groups with
//! retries, so a broker outage delays a result instead of losing it and a
//! busy worker sends one confirmed message for many attempts.
//!
//! Publishing is a group commit, like the API's creates: a report waits in a
//! queue; if no publish is in flight it starts one for everything queued;
//! otherwise it rides in the next one, which starts as soon as the current
//! one is confirmed. There is no timer, so a lone result goes out at once,
//! and under load each confirm round trip carries every result that arrived
//! meanwhile instead of one persistent message per result.

use backon::{ExponentialBuilder, Retryable};
use kairos_core::broker::{Broker, BrokerError};
use kairos_core::protocol::{PROTOCOL_VERSION, ResultKind, ResultMsg};
use kairos_core::time::now_ms;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::oneshot;

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

/// Retries span a broker restart (a few minutes at most), then give up so a
/// shutdown cannot hang forever.
fn backoff() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(50))
        .with_max_delay(Duration::from_secs(5))
        .with_max_times(40)
        .with_jitter()
}

/// `started` is retried only briefly: until it is confirmed the handler does
/// not run, and the attempt is better handed back to the queue than held
/// while the reaper may be declaring this worker dead.
fn started_backoff() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(50))
        .with_max_delay(Duration::from_secs(1))
        .with_max_times(6)
        .with_jitter()
}

/// A result that could not be published; already logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NotDelivered;

/// The worker's two result outlets: `started` reports, retried briefly, and
/// final results, retried through a broker restart. Kept apart so a final
/// result never gives up early and a `started` never waits long.
#[derive(Clone)]
pub(crate) struct Reporter {
    started: Arc<Batcher>,
    finals: Arc<Batcher>,
}

impl Reporter {
    pub(crate) fn new(broker: Arc<dyn Broker>) -> Self {
        Self {
            started: Batcher::new(Arc::clone(&broker), started_backoff()),
            finals: Batcher::new(broker, backoff()),
        }
    }

    /// Publishes a `started` report; `Ok` once the broker confirmed it.
    pub(crate) async fn started(&self, msg: ResultMsg) -> Result<(), NotDelivered> {
        self.started.send(msg).await
    }

    /// Publishes a final result; `Ok` once the broker confirmed it. A final
    /// failure is logged loudly here.
    pub(crate) async fn finished(&self, msg: ResultMsg) -> Result<(), NotDelivered> {
        self.finals.send(msg).await
    }
}

type Waiting = (ResultMsg, oneshot::Sender<Result<(), NotDelivered>>);

/// One outlet's queue and whether a publish is in flight.
struct Batcher {
    broker: Arc<dyn Broker>,
    backoff: ExponentialBuilder,
    pending: Mutex<Pending>,
}

#[derive(Default)]
struct Pending {
    queue: Vec<Waiting>,
    publishing: bool,
}

impl Batcher {
    fn new(broker: Arc<dyn Broker>, backoff: ExponentialBuilder) -> Arc<Self> {
        Arc::new(Self {
            broker,
            backoff,
            pending: Mutex::new(Pending::default()),
        })
    }

    async fn send(self: &Arc<Self>, msg: ResultMsg) -> Result<(), NotDelivered> {
        let (tx, rx) = oneshot::channel();
        let lead = {
            let mut p = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            p.queue.push((msg, tx));
            !std::mem::replace(&mut p.publishing, true)
        };
        if lead {
            // A task of its own, not this caller's future: if the caller is
            // dropped, the results queued behind it still go out.
            let this = Arc::clone(self);
            tokio::spawn(async move { this.drain().await });
        }
        rx.await.unwrap_or(Err(NotDelivered))
    }

    /// Publishes what is queued, a message at a time, until the queue is empty.
    async fn drain(&self) {
        loop {
            let group: Vec<Waiting> = {
                let mut p = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
                if p.queue.is_empty() {
                    p.publishing = false;
                    return;
                }
                let n = p.queue.len().min(MAX_PER_MESSAGE);
                p.queue.drain(..n).collect()
            };
            let (msgs, waiters): (Vec<ResultMsg>, Vec<_>) = group.into_iter().unzip();
            let outcome = self.publish(&msgs).await.map_err(|_| NotDelivered);
            crate::metrics::results_published(msgs.len());
            for w in waiters {
                let _ = w.send(outcome);
            }
        }
    }

    async fn publish(&self, msgs: &[ResultMsg]) -> Result<(), BrokerError> {
        let outcome = (|| self.broker.results_publish(msgs))
            .retry(self.backoff)
            .when(|e| !matches!(e, BrokerError::Encode(_)))
            .notify(|e, wait| {
                tracing::warn!(
                    results = msgs.len(),
                    "publishing results failed, retrying in {wait:?}: {e}"
                );
            })
            .await;
        if let Err(e) = &outcome {
            for msg in msgs {
                tracing::error!(
                    execution_id = %msg.execution_id,
                    attempt = msg.attempt,
                    kind = ?msg.kind,
                    output = ?msg.output,
                    error = ?msg.error,
                    "RESULT NOT DELIVERED: gave up publishing after retries: {e}; the dispatcher's reaper must recover this attempt"
                );
            }
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use kairos_core::protocol::{Names, decode_results};
    use kairos_inproc::MemoryBroker;

    #[tokio::test]
    async fn results_ready_together_travel_together() {
        let broker = MemoryBroker::new(Names::new("results-batch"));
        let reporter = Reporter::new(Arc::new(broker.clone()));
        let sends = (0..200).map(|i| {
            let msg = Report::succeeded(serde_json::json!(i)).into_msg("w", "inc", "e", i);
            let reporter = reporter.clone();
            async move { reporter.finished(msg).await }
        });
        for outcome in futures::future::join_all(sends).await {
            assert_eq!(
                outcome,
                Ok(()),
                "each caller learns its result was confirmed"
            );
        }

        let mut stream = broker.results_consume(1000).await.unwrap();
        let (mut messages, mut attempts) = (0, Vec::new());
        while attempts.len() < 200 {
            let d = tokio::time::timeout(Duration::from_secs(5), stream.next())
                .await
                .expect("every result arrives")
                .expect("stream open");
            let results = decode_results(&d.payload).unwrap();
            assert!(results.len() <= MAX_PER_MESSAGE, "messages stay bounded");
            attempts.extend(results.iter().map(|r| r.attempt));
            messages += 1;
        }
        attempts.sort_unstable();
        assert_eq!(attempts, (0..200).collect::<Vec<_>>(), "each result once");
        assert!(
            messages < 200,
            "200 results queued together went out in {messages} messages, not one each"
        );
    }

    #[tokio::test]
    async fn a_lone_result_goes_out_at_once_as_a_plain_object() {
        let broker = MemoryBroker::new(Names::new("results-lone"));
        let reporter = Reporter::new(Arc::new(broker.clone()));
        let msg = Report::started().into_msg("w", "inc", "e", 1);
        reporter.started(msg.clone()).await.unwrap();
        let mut stream = broker.results_consume(10).await.unwrap();
        let d = stream.next().await.unwrap();
        assert_eq!(
            serde_json::from_slice::<ResultMsg>(&d.payload).unwrap(),
            msg
        );
    }
}

//! Publishes claimed work to worker queues: picks a worker per execution,
//! keeps many publisher confirms in flight at once, and records the confirmed
//! ones in one batched update. An execution cancelled between its claim and
//! that update is asked to stop, since a worker holds it now.

use crate::attempts::Attempts;
use crate::balancer::{Balancer, Want};
use futures::StreamExt;
use kairos_core::broker::{Broker, BrokerError};
use kairos_core::store::{DispatchWork, DispatchedTo, Store};
use kairos_core::time::{Millis, now_ms};
use kairos_core::trace::{CallerTrace, Stage, TraceContext};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tracing::{Instrument, debug, warn};

/// What one publish round achieved.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PublishReport {
    /// Confirmed by the broker and recorded as dispatched.
    pub dispatched: usize,
    /// Left pending because no worker could take them.
    pub no_worker: usize,
    /// Left pending because the publish failed.
    pub failed: usize,
}

/// What `w` needs from its worker.
fn want(w: &DispatchWork) -> Want<'_> {
    Want {
        handler: &w.handler,
        group: w.worker_group.as_deref(),
    }
}

/// Sends work to workers.
pub struct Publisher {
    store: Arc<dyn Store>,
    broker: Arc<dyn Broker>,
    balancer: Arc<Mutex<Balancer>>,
    attempts: Attempts,
    max_in_flight: usize,
}

impl Publisher {
    /// A publisher sharing `balancer` with the rest of the leader.
    pub fn new(
        store: Arc<dyn Store>,
        broker: Arc<dyn Broker>,
        balancer: Arc<Mutex<Balancer>>,
        attempts: Attempts,
        max_in_flight: usize,
    ) -> Self {
        Self {
            store,
            broker,
            balancer,
            attempts,
            max_in_flight: max_in_flight.max(1),
        }
    }

    /// Publishes `work`; whatever is not confirmed stays `pending` in the
    /// database and is picked up again by the unpublished sweep.
    pub async fn publish(&self, work: Vec<DispatchWork>) -> PublishReport {
        let mut report = PublishReport::default();
        if work.is_empty() {
            return report;
        }
        let now = now_ms();
        let started = Instant::now();
        let assigned: Vec<(DispatchWork, String)> = {
            let mut balancer = self.balancer.lock().unwrap_or_else(|p| p.into_inner());
            work.into_iter()
                .filter_map(|w| match balancer.pick(now, want(&w), None) {
                    Some(worker) => Some((w, worker)),
                    None => {
                        report.no_worker += 1;
                        None
                    }
                })
                .collect()
        };
        if report.no_worker > 0 {
            debug!(
                count = report.no_worker,
                "no live worker serving their handler can take work; it stays pending"
            );
        }
        let outcomes: Vec<Result<(Millis, DispatchedTo), (String, BrokerError)>> =
            futures::stream::iter(assigned)
                .map(|(w, worker)| async move {
                    let span = execution_span("dispatch", &w, &worker);
                    let sent_at = Instant::now();
                    let published = self
                        .broker
                        .dispatch_publish(&worker, &w.to_message())
                        .instrument(span.clone())
                        .await;
                    crate::metrics::publish_confirm(sent_at.elapsed());
                    span.in_scope(|| match &published {
                        Ok(()) => debug!("dispatch published"),
                        Err(e) => debug!(error = %e, "dispatch not published"),
                    });
                    match published {
                        Ok(()) => Ok((
                            w.scheduled_at,
                            DispatchedTo {
                                execution_id: w.execution_id,
                                attempt: w.attempt,
                                worker_id: worker,
                            },
                        )),
                        Err(e) => Err((worker, e)),
                    }
                })
                .buffer_unordered(self.max_in_flight)
                .collect()
                .await;
        let mut sent = Vec::with_capacity(outcomes.len());
        let mut due_times = Vec::with_capacity(outcomes.len());
        for outcome in outcomes {
            match outcome {
                Ok((due, d)) => {
                    due_times.push(due);
                    sent.push(d);
                }
                Err((worker, e)) => {
                    report.failed += 1;
                    let mut balancer = self.balancer.lock().unwrap_or_else(|p| p.into_inner());
                    balancer.unpick(&worker);
                    if report.failed == 1 {
                        warn!(worker = %worker, error = %e, "publish failed; the work stays pending and is retried");
                    }
                }
            }
        }
        let published = started.elapsed();
        if !sent.is_empty() {
            // A failure here leaves rows `pending` although their messages are in
            // worker queues; the sweep publishes them again and the worker's
            // once-per-attempt guard drops the duplicate.
            match self.store.executions_mark_dispatched(&sent, now_ms()).await {
                Ok(marked) => {
                    report.dispatched = sent.len();
                    let confirmed_at = now_ms();
                    for due in due_times {
                        crate::metrics::dispatched(due, confirmed_at);
                    }
                    self.attempts
                        .stop(
                            &marked.cancelled,
                            "cancelled before their dispatch was recorded",
                        )
                        .await;
                }
                Err(e) => warn!(error = %e, count = sent.len(), "could not record dispatches"),
            }
        }
        crate::metrics::publish_failed(report.failed);
        debug!(
            count = report.dispatched,
            publish_ms = published.as_millis() as u64,
            record_ms = (started.elapsed() - published).as_millis() as u64,
            "publish round"
        );
        report
    }
}

/// The span of one attempt's dispatch: the execution's trace fields, named
/// alike in every process (`job_id`, `execution_id`, `attempt`, `worker_id`,
/// `trace_id`), in the trace of the job's creator when it sent one (the
/// span's parent is then the creator's), else in the execution's own trace.
fn execution_span(name: &'static str, w: &DispatchWork, worker: &str) -> tracing::Span {
    let caller = w.trace.as_ref().and_then(CallerTrace::context);
    let trace =
        TraceContext::for_stage(caller.as_ref(), &w.execution_id, w.attempt, Stage::Dispatch);
    tracing::info_span!(
        "dispatch",
        stage = name,
        job_id = %w.job_id,
        execution_id = %w.execution_id,
        attempt = w.attempt,
        worker_id = %worker,
        trace_id = trace.map(|t| t.trace_id_hex()).unwrap_or_default(),
        traceparent = trace.map(|t| t.to_string()).unwrap_or_default(),
        parent = caller.map(|t| t.to_string()).unwrap_or_default(),
    )
}

//! Publishes claimed work to worker queues: routes each execution (or takes
//! the worker its claim already recorded), and keeps many publisher
//! confirms in flight at once. Every dispatch is recorded before its
//! publish: work still `pending` is first admitted in one batched
//! transaction (`executions_admit`, under the concurrency limits; what a
//! limit holds back stays `pending`, waiting), so nothing over a limit
//! reaches a worker, and a cancelled execution is never sent. Recorded work
//! that cannot be published is handed back to `pending`.

use crate::balancer::{Balancer, Want};
use crate::lease::Term;
use futures::StreamExt;
use kairos_core::broker::{Broker, BrokerError, DispatchQueue};
use kairos_core::store::{Dispatch, DispatchWork, DispatchedTo, Maintenance, StoreError};
use kairos_core::time::{Millis, now_ms};
use kairos_core::trace::{CallerTrace, Stage, TraceContext};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;
use tracing::{Instrument, debug, warn};

/// What one publish round achieved.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PublishReport {
    /// Confirmed by the broker and recorded as dispatched.
    pub(crate) dispatched: usize,
    /// Left pending because no worker could take them.
    pub(crate) no_worker: usize,
    /// Left pending because the publish failed.
    pub(crate) failed: usize,
    /// Left pending because a concurrency limit is reached.
    pub(crate) waiting: usize,
    /// When a rate limit that held some back has room again.
    pub(crate) retry_at: Option<Millis>,
}

/// What `w` needs from its worker.
fn want(w: &DispatchWork) -> Want<'_> {
    Want {
        handler: &w.handler,
        group: w.worker_group.as_deref(),
    }
}

/// One piece of work on its way to `worker`.
struct Routed {
    work: DispatchWork,
    worker: String,
    /// Which of the worker's queues it goes to.
    queue: DispatchQueue,
    /// Its claim already recorded it as dispatched to `worker`.
    recorded: bool,
}

/// Sends work to workers.
pub(crate) struct Publisher {
    /// Records dispatches (`executions_admit`).
    dispatch: Arc<dyn Dispatch>,
    /// Hands back what was not published (`executions_requeue_unstarted`).
    maintenance: Arc<dyn Maintenance>,
    broker: Arc<dyn Broker>,
    balancer: Arc<Mutex<Balancer>>,
    max_in_flight: usize,
    /// Whether work still `pending` is admitted here (see
    /// [`super::ClaimScope::admits`]); if not, it stays pending.
    admits: bool,
}

/// What a [`Publisher`] is built from.
pub(crate) struct PublisherParts {
    pub(crate) dispatch: Arc<dyn Dispatch>,
    pub(crate) maintenance: Arc<dyn Maintenance>,
    pub(crate) broker: Arc<dyn Broker>,
    /// The worker view, shared with the rest of the loop.
    pub(crate) balancer: Arc<Mutex<Balancer>>,
    /// Publisher confirms awaited at once.
    pub(crate) max_in_flight: usize,
    pub(crate) admits: bool,
}

impl Publisher {
    pub(crate) fn new(parts: PublisherParts) -> Self {
        Self {
            dispatch: parts.dispatch,
            maintenance: parts.maintenance,
            broker: parts.broker,
            balancer: parts.balancer,
            max_in_flight: parts.max_in_flight.max(1),
            admits: parts.admits,
        }
    }

    fn balancer(&self) -> MutexGuard<'_, Balancer> {
        self.balancer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Work whose claim recorded it as dispatched but that will not be
    /// published (the term ended first, or the publish failed) goes back to
    /// `pending`, where the sweep, this leader's or the next one's, finds
    /// it. If even that fails, the reaper's reconciliation recovers it: the
    /// worker's heartbeats never list it.
    pub(crate) async fn hand_back(&self, work: &[DispatchWork], reason: &str) {
        let targets: Vec<(String, u32)> = work
            .iter()
            .filter(|w| w.worker_id.is_some())
            .map(|w| (w.execution_id.clone(), w.attempt))
            .collect();
        if targets.is_empty() {
            return;
        }
        {
            let mut balancer = self.balancer();
            for worker in work.iter().filter_map(|w| w.worker_id.as_deref()) {
                balancer.unpick(worker);
            }
        }
        match self
            .maintenance
            .executions_requeue_unstarted(&targets, reason, now_ms())
            .await
        {
            Ok(moved) => debug!(moved, reason, "unpublished work handed back"),
            Err(e) => warn!(
                error = %e,
                count = targets.len(),
                "could not hand back unpublished work; reconciliation will recover it"
            ),
        }
    }

    /// Records the dispatch of routed work still `pending` (see
    /// `executions_admit`, fenced with the term's fence): what is admitted
    /// is from then on recorded work; what a limit holds back, or what is no
    /// longer pending, is dropped here and its pick given back. Storage
    /// holding a newer fence ends `term`: this leader is stale.
    async fn admit(
        &self,
        routed: Vec<Routed>,
        term: &Term,
        report: &mut PublishReport,
    ) -> Vec<Routed> {
        let picks: Vec<DispatchedTo> = routed
            .iter()
            .filter(|r| !r.recorded)
            .map(|r| DispatchedTo {
                execution_id: r.work.execution_id.clone(),
                attempt: r.work.attempt,
                worker_id: r.worker.clone(),
            })
            .collect();
        if picks.is_empty() {
            return routed;
        }
        let admitted = if !self.admits {
            // Nothing admitted: the work stays pending for the leader.
            Ok(kairos_core::store::Admitted::default())
        } else {
            self.dispatch
                .executions_admit(term.fence, &picks, now_ms())
                .await
        };
        let admitted = match admitted {
            Ok(admitted) => admitted,
            // Nothing was recorded: all of it stays pending for the sweep
            // (this leader's, or, when it is stale, the next one's).
            Err(e) => {
                warn!(error = %e, count = picks.len(), "could not record dispatches; the work stays pending");
                if let StoreError::Fenced { current, .. } = e {
                    term.fenced(current);
                }
                report.failed += picks.len();
                kairos_core::store::Admitted::default()
            }
        };
        report.waiting += admitted.waiting.len();
        report.retry_at = admitted.retry_at;
        let go: HashSet<&str> = admitted
            .dispatched
            .iter()
            .map(|(id, _)| id.as_str())
            .collect();
        let mut balancer = self.balancer();
        routed
            .into_iter()
            .filter_map(|mut r| {
                if r.recorded {
                    return Some(r);
                }
                if go.contains(r.work.execution_id.as_str()) {
                    r.recorded = true;
                    r.work.worker_id = Some(r.worker.clone());
                    return Some(r);
                }
                balancer.unpick(&r.worker);
                None
            })
            .collect()
    }

    /// Publishes `work`, leader of `term`. Work still `pending` is admitted
    /// (recorded as dispatched) first; what is left behind stays `pending`,
    /// and the sweep picks it up again. Recorded work that is not confirmed
    /// is handed back to `pending`.
    pub(crate) async fn publish(&self, work: Vec<DispatchWork>, term: &Term) -> PublishReport {
        let mut report = PublishReport::default();
        if work.is_empty() {
            return report;
        }
        let now = now_ms();
        let started = Instant::now();
        let routed: Vec<Routed> = {
            let mut balancer = self.balancer();
            work.into_iter()
                .filter_map(|w| {
                    let recorded = w.worker_id.is_some();
                    let worker = match &w.worker_id {
                        Some(worker) => Some(worker.clone()),
                        None => balancer.pick(now, want(&w), None),
                    };
                    let Some(worker) = worker else {
                        report.no_worker += 1;
                        return None;
                    };
                    Some(Routed {
                        queue: balancer.queue_for(&worker, w.immediate),
                        work: w,
                        worker,
                        recorded,
                    })
                })
                .collect()
        };
        if report.no_worker > 0 {
            debug!(
                count = report.no_worker,
                "no live worker serving their handler can take work; it stays pending"
            );
        }
        let routed = self.admit(routed, term, &mut report).await;
        if report.waiting > 0 {
            debug!(
                count = report.waiting,
                "a concurrency limit is reached; the work waits, pending"
            );
        }
        let batches = {
            let balancer = self.balancer();
            batches(
                routed,
                |r| (r.worker.as_str(), r.queue),
                |w| balancer.dispatch_batch(w),
            )
        };
        let outcomes: Vec<(Routed, Result<(), Arc<BrokerError>>)> = futures::stream::iter(batches)
            .map(|batch| self.send(batch))
            .buffer_unordered(self.max_in_flight)
            .flat_map(futures::stream::iter)
            .collect()
            .await;
        let confirmed_at = now_ms();
        let mut unsent = Vec::new();
        for (r, outcome) in outcomes {
            match outcome {
                Ok(()) => {
                    report.dispatched += 1;
                    crate::metrics::dispatched(r.work.scheduled_at, r.work.priority, confirmed_at);
                }
                Err(e) => {
                    report.failed += 1;
                    if report.failed == 1 {
                        warn!(worker = %r.worker, error = %e, "publish failed; the work goes back to pending and is retried");
                    }
                    // Every routed piece is recorded by now: `hand_back`
                    // gives the pick back with the row.
                    unsent.push(r.work);
                }
            }
        }
        let published = started.elapsed();
        self.hand_back(&unsent, "not published: the broker did not confirm it")
            .await;
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

impl Publisher {
    /// Publishes one batch for one worker as one message; every piece of it
    /// shares the outcome.
    async fn send(&self, batch: Vec<Routed>) -> Vec<(Routed, Result<(), Arc<BrokerError>>)> {
        let Some((worker, queue)) = batch.first().map(|r| (r.worker.clone(), r.queue)) else {
            return Vec::new();
        };
        let spans: Vec<tracing::Span> = batch
            .iter()
            .map(|r| execution_span("dispatch", &r.work, &worker))
            .collect();
        let msgs: Vec<_> = batch.iter().map(|r| r.work.to_message()).collect();
        let sent_at = Instant::now();
        let published = self
            .broker
            .dispatch_publish_to(&worker, queue, &msgs)
            .instrument(spans[0].clone())
            .await
            .map_err(Arc::new);
        crate::metrics::publish_confirm(sent_at.elapsed());
        for span in &spans {
            span.in_scope(|| match &published {
                Ok(()) => debug!(batch = batch.len(), "dispatch published"),
                Err(e) => debug!(error = %e, "dispatch not published"),
            });
        }
        batch.into_iter().map(|r| (r, published.clone())).collect()
    }
}

/// Groups routed work into one message per worker queue and batch: a
/// worker takes up to `size_of(worker)` dispatches in one message (1 for a
/// worker that reads only one per message). Work keeps its order within a
/// queue.
fn batches<T>(
    items: Vec<T>,
    queue_of: impl Fn(&T) -> (&str, DispatchQueue),
    size_of: impl Fn(&str) -> u32,
) -> Vec<Vec<T>> {
    let mut open: HashMap<(String, DispatchQueue), usize> = HashMap::new();
    let mut out: Vec<Vec<T>> = Vec::new();
    for item in items {
        let (worker, queue) = queue_of(&item);
        let size = usize::try_from(size_of(worker)).unwrap_or(1).max(1);
        let key = (worker.to_string(), queue);
        match open.get(&key).copied() {
            Some(i) if out[i].len() < size => out[i].push(item),
            _ => {
                open.insert(key, out.len());
                out.push(vec![item]);
            }
        }
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_is_grouped_per_worker_queue_up_to_its_batch_size() {
        use DispatchQueue::{Immediate, Main};
        let routed = vec![
            ("a", Main, 1),
            ("b", Main, 2),
            ("a", Immediate, 3),
            ("a", Main, 4),
            ("legacy", Main, 5),
            ("a", Main, 6),
            ("legacy", Main, 7),
            ("a", Immediate, 8),
        ];
        let size = |w: &str| match w {
            "a" => 2,
            "b" => 8,
            _ => 1,
        };
        let got: Vec<Vec<i32>> = batches(routed, |r| (r.0, r.1), size)
            .into_iter()
            .map(|b| b.into_iter().map(|r| r.2).collect())
            .collect();
        assert_eq!(
            got,
            vec![vec![1, 4], vec![2], vec![3, 8], vec![5], vec![6], vec![7]]
        );
        let none = Vec::<(&str, DispatchQueue, i32)>::new();
        assert!(batches(none, |r| (r.0, r.1), size).is_empty());
    }
}

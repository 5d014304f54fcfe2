//! Whether a pending execution is waiting for a worker that serves its
//! handler: computed on read from the workers' latest heartbeats, so the
//! answer is never older than the last heartbeat and needs no bookkeeping.

use crate::dto::{ExecutionView, WaitingFor};
use kairos_core::concurrency::RATE_PREFIX;
use kairos_core::execution::{ExecStatus, Execution};
use kairos_core::job::Job;
use kairos_core::store::{ApiStore, StoreResult};
use kairos_core::time::{Millis, now_ms};
use kairos_core::worker::{Routable, Serves, WorkerInfo, WorkerState};

/// A worker silent for longer gets no work (the dispatcher's default).
pub(crate) const WORKER_STALE_MS: Millis = 15_000;

/// What the live workers serve now.
pub(crate) async fn routable(store: &dyn ApiStore) -> StoreResult<Routable> {
    Ok(live(&store.workers_list().await?, now_ms()))
}

fn live(workers: &[WorkerInfo], now: Millis) -> Routable {
    Routable::Only(
        workers
            .iter()
            .filter(|w| {
                w.state == WorkerState::Online && now - w.last_heartbeat_at <= WORKER_STALE_MS
            })
            .map(|w| w.serves.clone())
            .collect::<Vec<Serves>>(),
    )
}

/// `execution` as shown, with `waitingFor` set if it is due and no live
/// worker can run it, or a concurrency limit holds it back (the dispatcher
/// recorded which).
pub(crate) fn view(job: &Job, execution: Execution, routable: &Routable) -> ExecutionView {
    let due = execution.status == ExecStatus::Pending && execution.not_before <= now_ms();
    let limit = execution.waiting_for.clone().filter(|_| due);
    let no_worker = due && !routable.accepts(&job.handler, job.worker_group.as_deref());
    let mut view = ExecutionView::from(execution);
    if no_worker || limit.is_some() {
        let (reason, limit) = match limit.filter(|_| !no_worker) {
            None => ("worker", None),
            Some(l) => match l.strip_prefix(RATE_PREFIX) {
                Some(key) => ("rate", Some(key.to_string())),
                None => ("concurrency", Some(l)),
            },
        };
        view.waiting_for = Some(WaitingFor {
            reason: reason.to_string(),
            handler: job.handler.clone(),
            group: job.worker_group.clone(),
            limit,
        });
    }
    view
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(handlers: &[&str], state: WorkerState, beat: Millis) -> WorkerInfo {
        WorkerInfo {
            id: "w".into(),
            queue: "q".into(),
            capacity: 1,
            active: 0,
            avg_cost_ms: 0.0,
            cpu_idle: 100.0,
            state,
            last_heartbeat_at: beat,
            registered_at: 0,
            serves: Serves {
                handlers: Some(handlers.iter().map(|h| h.to_string()).collect()),
                group: None,
            },
            dispatch_batch: 1,
            immediate_queue: false,
        }
    }

    #[test]
    fn only_online_recent_workers_count() {
        let now = 100_000;
        let r = live(
            &[
                worker(&["a"], WorkerState::Online, now - 1_000),
                worker(&["b"], WorkerState::Draining, now),
                worker(&["c"], WorkerState::Online, now - WORKER_STALE_MS - 1),
            ],
            now,
        );
        assert!(r.accepts("a", None));
        assert!(!r.accepts("b", None));
        assert!(!r.accepts("c", None));
    }
}

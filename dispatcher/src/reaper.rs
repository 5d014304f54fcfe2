//! The reaper: declares workers dead and rescues their work, and times out
//! attempts whose worker never reported. Runs on every dispatcher instance;
//! every write is conditional, so two reapers acting at once change nothing twice.
//!
//! A worker is declared dead only when two signals agree: its heartbeat is
//! older than the threshold *and* its queue has no consumer (or is gone). A
//! worker that is merely slow to heartbeat but still consuming is left alone —
//! the seed's lesson about "dead" workers that were only busy.
//!
//! Rescue gives back the attempt keys the dead worker took for attempts it
//! never confirmed started (so the requeued attempt is not skipped as a
//! duplicate), and posts a stop request for every attempt it declares lost or
//! timed out: a worker that was only cut off finds it when it comes back and
//! stops the handler, whose result would be refused anyway.

pub use crate::attempts::Attempts;
use kairos_core::broker::Broker;
use kairos_core::execution::ExecStatus;
use kairos_core::outcome::Verdict;
use kairos_core::store::{Store, StoreResult};
use kairos_core::time::{Millis, now_ms};
use kairos_core::worker::WorkerState;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Reaper settings.
#[derive(Debug, Clone)]
pub struct ReaperConfig {
    /// How often to look.
    pub every: Duration,
    /// A heartbeat older than this is the first sign of death.
    pub dead_after: Duration,
    /// Grace beyond an attempt's time limit before the reaper times it out
    /// (the worker normally reports `timed_out` itself).
    pub timeout_margin: Duration,
    /// How long after a worker said `offline` its leftover work is rescued.
    /// Its last results travel on another queue than its last heartbeat and
    /// may be applied after it; rescuing at once could declare lost an
    /// attempt whose success is still on its way, and run it again.
    pub offline_grace: Duration,
}

impl Default for ReaperConfig {
    fn default() -> Self {
        Self {
            every: Duration::from_secs(2),
            dead_after: Duration::from_secs(15),
            timeout_margin: Duration::from_secs(5),
            offline_grace: Duration::from_secs(5),
        }
    }
}

/// What became of a dead worker's work.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Rescue {
    /// Never started: back to `pending`, same attempt.
    pub requeued: u64,
    /// Started: declared lost (retried as a new attempt if allowed).
    pub lost: usize,
}

/// Moves a worker's in-flight work on: unstarted attempts are requeued (with
/// their attempt keys given back), started ones are lost (retried if the job
/// allows, and asked to stop in case the worker is still running them).
pub async fn rescue_work_of(
    store: &dyn Store,
    attempts: &Attempts,
    worker_id: &str,
    reason: &str,
) -> StoreResult<Rescue> {
    let held = store.executions_in_flight_on(worker_id).await?;
    if held.is_empty() {
        return Ok(Rescue::default());
    }
    let mut unstarted = Vec::new();
    for h in held.iter().filter(|h| h.status == ExecStatus::Dispatched) {
        let key = attempts.names.attempt_key(&h.execution_id, h.attempt);
        // The key goes first: a requeued attempt whose key is still held
        // would be skipped as a duplicate by every worker.
        match attempts.coord.release(&key, worker_id).await {
            Ok(_) => unstarted.push(h.target()),
            Err(e) => {
                warn!(worker = worker_id, execution = %h.execution_id, error = %e, "cannot give back the attempt key; requeueing on a later round")
            }
        }
    }
    let now = now_ms();
    let requeued = store
        .executions_requeue_unstarted(&unstarted, reason, now)
        .await?;
    // Requeued rows are `pending` now and no longer match `Lose`.
    let targets: Vec<(String, u32)> = held
        .iter()
        .filter(|h| h.status != ExecStatus::Dispatched)
        .map(|h| h.target())
        .collect();
    let lost = store
        .executions_apply_verdict(&targets, Verdict::Lost, reason, now)
        .await?;
    attempts.stop_moved(&lost, "declared lost").await;
    let rescue = Rescue {
        requeued,
        lost: lost.iter().filter(|a| a.new_status.is_some()).count(),
    };
    crate::metrics::reaper("requeued", rescue.requeued);
    crate::metrics::reaper("lost", rescue.lost as u64);
    Ok(rescue)
}

/// Runs until `shutdown`.
pub async fn run(
    store: Arc<dyn Store>,
    broker: Arc<dyn Broker>,
    attempts: Attempts,
    cfg: ReaperConfig,
    shutdown: CancellationToken,
) {
    while !shutdown.is_cancelled() {
        if let Err(e) = sweep(store.as_ref(), broker.as_ref(), &attempts, &cfg).await {
            warn!(error = %e, "reaper round failed");
        }
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = tokio::time::sleep(cfg.every) => {}
        }
    }
}

async fn sweep(
    store: &dyn Store,
    broker: &dyn Broker,
    attempts: &Attempts,
    cfg: &ReaperConfig,
) -> StoreResult<()> {
    let now = now_ms();
    let dead_after = cfg.dead_after.as_millis() as Millis;
    let offline_grace = cfg.offline_grace.as_millis() as Millis;
    for w in store.workers_list().await? {
        let silent_for = now - w.last_heartbeat_at;
        let wait = if w.state == WorkerState::Offline {
            offline_grace
        } else {
            dead_after
        };
        if silent_for <= wait {
            continue;
        }
        if w.state == WorkerState::Offline && store.executions_in_flight_on(&w.id).await?.is_empty()
        {
            continue;
        }
        // Second opinion: a worker still consuming its queue is alive, just slow.
        match broker.worker_queue_stats(&w.id).await {
            Ok(Some(stats)) if stats.consumers > 0 => continue,
            Ok(_) => {}
            Err(e) => {
                warn!(worker = %w.id, error = %e, "cannot check the worker's queue; not declaring it dead");
                continue;
            }
        }
        let reason = if w.state == WorkerState::Offline {
            format!(
                "worker {} went offline while this attempt was in flight",
                w.id
            )
        } else {
            format!(
                "worker {} was declared dead: no heartbeat for {} s and no consumer on its queue",
                w.id,
                silent_for / 1000
            )
        };
        store
            .worker_set_state(&w.id, WorkerState::Offline, now)
            .await?;
        let rescue = rescue_work_of(store, attempts, &w.id, &reason).await?;
        // The queue's messages are stale now: their executions were requeued or
        // lost in the database, which republishes them; delivering them too
        // could run an attempt the database no longer expects.
        if let Err(e) = broker.worker_queue_delete(&w.id).await {
            warn!(worker = %w.id, error = %e, "cannot delete the dead worker's queue");
        }
        if rescue != Rescue::default() || w.state != WorkerState::Offline {
            info!(worker = %w.id, requeued = rescue.requeued, lost = rescue.lost, "declared worker dead");
        }
    }
    let overdue = store
        .executions_find_overdue(now, cfg.timeout_margin.as_millis() as i64, 500)
        .await?;
    if !overdue.is_empty() {
        let applied = store
            .executions_apply_verdict(
                &overdue,
                Verdict::TimedOut,
                "no result from the worker within the time limit",
                now,
            )
            .await?;
        attempts.stop_moved(&applied, "timed out").await;
        let count = applied.iter().filter(|a| a.new_status.is_some()).count();
        crate::metrics::reaper("timed_out", count as u64);
        info!(count, "timed out silent attempts");
    }
    Ok(())
}

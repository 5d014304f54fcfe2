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
//!
//! A worker that said `offline` itself stopped on purpose (a rollout, a
//! scale-down): the attempts it still ran are handed back
//! ([`Verdict::HandedBack`]: retried at once, once without counting against
//! `maxAttempts`). Gone workers are then cleared away: their queues deleted
//! if they are still there, their rows forgotten after
//! [`ReaperConfig::worker_forget_after_ms`].

pub use crate::attempts::Attempts;
use crate::recover;
pub use crate::recover::Rescue;
use kairos_core::broker::Broker;
use kairos_core::outcome::Verdict;
use kairos_core::reconcile::Suspects;
use kairos_core::store::{HeldAttempt, Maintenance, StoreResult, WorkerStore};
use kairos_core::time::{Millis, now_ms};
use kairos_core::worker::WorkerState;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Default of [`ReaperConfig::worker_dead_after_ms`].
pub const DEFAULT_DEAD_AFTER_MS: u64 = 15_000;
/// Default of [`ReaperConfig::worker_forget_after_ms`]: long enough to see
/// in `GET /openapi/workers` which workers a rollout replaced.
pub const DEFAULT_FORGET_AFTER_MS: u64 = 600_000;
/// Default of [`ReaperConfig::reconcile_grace_ms`].
pub const DEFAULT_RECONCILE_GRACE_MS: u64 = 30_000;
/// Default of [`ReaperConfig::default_timeout_ms`]: a day, far beyond any
/// job that means to run without a `timeoutMs`.
pub const DEFAULT_EXECUTION_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
/// A shorter threshold would declare healthy workers dead between heartbeats.
const MIN_DEAD_AFTER_MS: u64 = 1000;
/// Shorter recovery windows would act on attempts still on their way.
const MIN_RECOVERY_MS: u64 = 1000;

/// Reaper settings. Setting fields are named like their `KAIROS_*`
/// variables; the others are fixed timings.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, clap::Args)]
#[serde(default)]
pub struct ReaperConfig {
    /// `KAIROS_WORKER_DEAD_AFTER_MS`: a heartbeat older than this is the
    /// first sign of death (the second: no consumer on the worker's queue).
    #[arg(long, env = "KAIROS_WORKER_DEAD_AFTER_MS", value_name = "MS")]
    pub worker_dead_after_ms: u64,
    /// `KAIROS_WORKER_FORGET_AFTER_MS`: how long a gone worker (stopped, or
    /// declared dead) with nothing left in flight stays listed as `offline`
    /// before its row is deleted. Its queues go sooner, once its last
    /// results had time to arrive.
    #[arg(long, env = "KAIROS_WORKER_FORGET_AFTER_MS", value_name = "MS")]
    pub worker_forget_after_ms: u64,
    /// `KAIROS_RECONCILE_GRACE_MS`: how long a live worker's heartbeats must
    /// leave out an attempt the database gives it before the attempt is
    /// recovered (see `kairos_core::reconcile`). Generous by default: a
    /// result the worker has sent (so no longer lists the attempt) may wait
    /// unacked in a frozen dispatcher's prefetch, and recovering that
    /// attempt would run it again.
    #[arg(long, env = "KAIROS_RECONCILE_GRACE_MS", value_name = "MS")]
    pub reconcile_grace_ms: u64,
    /// `KAIROS_DEFAULT_TIMEOUT_MS`: the deployment's ceiling on silence: an
    /// attempt without a time limit of its own that has neither ended this
    /// long after it started (or was dispatched) is timed out.
    #[arg(long, env = "KAIROS_DEFAULT_TIMEOUT_MS", value_name = "MS")]
    pub default_timeout_ms: u64,
    /// How often to look.
    #[serde(skip)]
    #[arg(skip)]
    pub every: Duration,
    /// Grace beyond an attempt's time limit before the reaper times it out
    /// (the worker normally reports `timed_out` itself).
    #[serde(skip)]
    #[arg(skip)]
    pub timeout_margin: Duration,
    /// How long after a worker said `offline` its leftover work is rescued.
    /// Its last results travel on another queue than its last heartbeat and
    /// may be applied after it; rescuing at once could declare lost an
    /// attempt whose success is still on its way, and run it again.
    #[serde(skip)]
    #[arg(skip)]
    pub offline_grace: Duration,
}

impl Default for ReaperConfig {
    fn default() -> Self {
        Self {
            worker_dead_after_ms: DEFAULT_DEAD_AFTER_MS,
            worker_forget_after_ms: DEFAULT_FORGET_AFTER_MS,
            reconcile_grace_ms: DEFAULT_RECONCILE_GRACE_MS,
            default_timeout_ms: DEFAULT_EXECUTION_TIMEOUT.as_millis() as u64,
            every: Duration::from_secs(2),
            timeout_margin: Duration::from_secs(5),
            offline_grace: Duration::from_secs(5),
        }
    }
}

impl ReaperConfig {
    /// Refuses thresholds that would act on healthy workers or live
    /// attempts, naming the variable.
    pub fn validate(&self) -> Result<(), crate::ConfigError> {
        for (ms, min, var) in [
            (
                self.worker_dead_after_ms,
                MIN_DEAD_AFTER_MS,
                "KAIROS_WORKER_DEAD_AFTER_MS",
            ),
            (
                self.worker_forget_after_ms,
                MIN_RECOVERY_MS,
                "KAIROS_WORKER_FORGET_AFTER_MS",
            ),
            (
                self.default_timeout_ms,
                MIN_RECOVERY_MS,
                "KAIROS_DEFAULT_TIMEOUT_MS",
            ),
            (
                self.reconcile_grace_ms,
                MIN_RECOVERY_MS,
                "KAIROS_RECONCILE_GRACE_MS",
            ),
        ] {
            crate::at_least(ms, min, var)?;
        }
        Ok(())
    }
}

/// Moves a dead worker's in-flight work on: unstarted attempts are requeued
/// (with the attempt keys any of its processes took given back), started
/// ones are lost (retried if the job allows, and asked to stop in case the
/// worker is still running them).
pub async fn rescue_work_of<S: Maintenance + WorkerStore + ?Sized>(
    store: &S,
    attempts: &Attempts,
    worker_id: &str,
    reason: &str,
) -> StoreResult<Rescue> {
    rescue_worker(store, attempts, worker_id, reason, Verdict::Lost).await
}

/// [`rescue_work_of`], the started attempts getting `started_verdict`.
async fn rescue_worker<S: Maintenance + WorkerStore + ?Sized>(
    store: &S,
    attempts: &Attempts,
    worker_id: &str,
    reason: &str,
    started_verdict: Verdict,
) -> StoreResult<Rescue> {
    let held = store.executions_in_flight_on(worker_id).await?;
    if held.is_empty() {
        return Ok(Rescue::default());
    }
    let ledger = store.worker_ledger(worker_id).await?;
    let owners = recover::all_owners(ledger.as_ref(), worker_id);
    let held: Vec<&HeldAttempt> = held.iter().collect();
    recover::rescue_as(store, attempts, &held, &owners, reason, started_verdict).await
}

/// Runs until `shutdown`.
pub async fn run<S: Maintenance + WorkerStore + ?Sized + 'static>(
    store: Arc<S>,
    broker: Arc<dyn Broker>,
    attempts: Attempts,
    cfg: ReaperConfig,
    shutdown: CancellationToken,
) {
    let mut suspects = Suspects::default();
    let mut cleared = HashSet::new();
    while !shutdown.is_cancelled() {
        if let Err(e) = sweep(
            store.as_ref(),
            broker.as_ref(),
            &attempts,
            &cfg,
            &mut suspects,
            &mut cleared,
        )
        .await
        {
            warn!(error = %e, "reaper round failed");
        }
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = tokio::time::sleep(cfg.every) => {}
        }
    }
}

async fn sweep<S: Maintenance + WorkerStore + ?Sized>(
    store: &S,
    broker: &dyn Broker,
    attempts: &Attempts,
    cfg: &ReaperConfig,
    suspects: &mut Suspects,
    cleared: &mut HashSet<String>,
) -> StoreResult<()> {
    let now = now_ms();
    let dead_after = Millis::try_from(cfg.worker_dead_after_ms).unwrap_or(Millis::MAX);
    let offline_grace = cfg.offline_grace.as_millis() as Millis;
    let workers = store.workers_list().await?;
    // Another dispatcher may have forgotten some: keep only the listed.
    let listed: HashSet<&str> = workers.iter().map(|w| w.id.as_str()).collect();
    cleared.retain(|id| listed.contains(id.as_str()));
    for w in workers {
        let silent_for = now - w.last_heartbeat_at;
        let wait = if w.state == WorkerState::Offline {
            offline_grace
        } else {
            dead_after
        };
        if w.state != WorkerState::Offline {
            cleared.remove(&w.id);
        }
        if silent_for <= wait {
            if w.state != WorkerState::Offline {
                let grace = Millis::try_from(cfg.reconcile_grace_ms).unwrap_or(Millis::MAX);
                if let Err(e) =
                    recover::reconcile_worker(store, broker, attempts, &w.id, grace, suspects).await
                {
                    warn!(worker = %w.id, error = %e, "cannot reconcile the worker's attempts this round");
                }
            }
            continue;
        }
        suspects.forget(&w.id);
        if w.state == WorkerState::Offline && store.executions_in_flight_on(&w.id).await?.is_empty()
        {
            deregister(store, broker, &w.id, now, silent_for, cfg, cleared).await?;
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
        // A worker that said `offline` itself stopped on purpose (a rollout,
        // a scale-down): what it still ran when its drain window ended is
        // handed back, retried once without counting against maxAttempts.
        let (reason, started_verdict) = if w.state == WorkerState::Offline {
            let reason = format!(
                "worker {} stopped before this attempt finished (its drain window, \
                 KAIROS_WORKER_GRACE_MS, was over): handed back",
                w.id
            );
            (reason, Verdict::HandedBack)
        } else {
            let reason = format!(
                "worker {} was declared dead: no heartbeat for {} s and no consumer on its queue",
                w.id,
                silent_for / 1000
            );
            (reason, Verdict::Lost)
        };
        store
            .worker_set_state(&w.id, WorkerState::Offline, now)
            .await?;
        let rescue = rescue_worker(store, attempts, &w.id, &reason, started_verdict).await?;
        // The queue's messages are stale now: their executions were requeued or
        // lost in the database, which republishes them; delivering them too
        // could run an attempt the database no longer expects.
        if let Err(e) = broker.worker_queue_delete(&w.id).await {
            warn!(worker = %w.id, error = %e, "cannot delete the dead worker's queue");
        }
        if w.state != WorkerState::Offline {
            info!(worker = %w.id, requeued = rescue.requeued, lost = rescue.lost, "declared worker dead");
        } else if rescue != Rescue::default() {
            info!(worker = %w.id, requeued = rescue.requeued, handed_back = rescue.lost, "took back the work of a worker that went offline");
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
    let limit_ms = i64::try_from(cfg.default_timeout_ms).unwrap_or(i64::MAX);
    let unbounded = store.executions_find_unbounded(now, limit_ms, 500).await?;
    if !unbounded.is_empty() {
        let applied = store
            .executions_apply_verdict(
                &unbounded,
                Verdict::TimedOut,
                &default_timeout_error(limit_ms),
                now,
            )
            .await?;
        attempts.stop_moved(&applied, "timed out").await;
        let count = applied.iter().filter(|a| a.new_status.is_some()).count();
        crate::metrics::reaper("timed_out", count as u64);
        warn!(
            count,
            "timed out attempts that ran past the deployment's default execution timeout"
        );
    }
    Ok(())
}

/// Clears away a gone worker with nothing left in flight: its queues (a
/// worker stopping cleanly deletes them itself; these are the ones of a
/// worker that died, or stopped before it could), then, once it has been
/// silent for [`ReaperConfig::worker_forget_after_ms`], its row. A queue
/// someone consumes is left alone: a process of that id is back, and its
/// heartbeat will say so. `cleared` holds the gone workers whose queues this
/// reaper already found gone, so it looks once, not every round.
async fn deregister<S: Maintenance + WorkerStore + ?Sized>(
    store: &S,
    broker: &dyn Broker,
    id: &str,
    now: Millis,
    silent_for: Millis,
    cfg: &ReaperConfig,
    cleared: &mut HashSet<String>,
) -> StoreResult<()> {
    if !cleared.contains(id) {
        match broker.worker_queue_stats(id).await {
            Ok(None) => {}
            Ok(Some(stats)) if stats.consumers > 0 => return Ok(()),
            Ok(Some(_)) => {
                if let Err(e) = broker.worker_queue_delete(id).await {
                    warn!(worker = %id, error = %e, "cannot delete the gone worker's queues");
                    return Ok(());
                }
                info!(worker = %id, "deleted the gone worker's queues");
            }
            Err(e) => {
                warn!(worker = %id, error = %e, "cannot check the gone worker's queues");
                return Ok(());
            }
        }
        cleared.insert(id.to_string());
    }
    let forget_after = Millis::try_from(cfg.worker_forget_after_ms).unwrap_or(Millis::MAX);
    if silent_for > forget_after && store.worker_forget(id, now - forget_after).await? {
        cleared.remove(id);
        crate::metrics::reaper("forgotten", 1);
        info!(worker = %id, "forgot a gone worker");
    }
    Ok(())
}

/// The error an attempt ended by the default execution timeout carries: it
/// names the limit and where it comes from.
pub fn default_timeout_error(limit_ms: i64) -> String {
    format!(
        "no result within the deployment's default execution timeout \
         (KAIROS_DEFAULT_TIMEOUT_MS = {limit_ms}); the job has no timeoutMs of its own"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_timeout_error_names_the_limit() {
        let e = default_timeout_error(86_400_000);
        assert!(e.contains("KAIROS_DEFAULT_TIMEOUT_MS = 86400000"), "{e}");
        assert!(e.contains("default execution timeout"), "{e}");
    }
}

//! Recovering attempts a worker no longer holds, while the worker itself is
//! alive: what a replaced process of the worker held (the worker id came
//! back with a new incarnation), and what the worker's heartbeats stopped
//! listing (reconciliation). Both reuse the dead-worker rescue: unstarted
//! attempts are dispatched again once the attempt keys a replaced process
//! may hold are given back, started ones are lost (retried if the job
//! allows) and asked to stop. The decisions are `kairos_core::reconcile`'s.
//!
//! An attempt key is only ever given back for an owner that can no longer
//! run it: a replaced incarnation (of whichever worker holds the key: the
//! execution's row may name another one), or the legacy owner (a bare worker
//! id) of a worker now speaking incarnations. The current process's keys are
//! never touched, so an attempt it took a moment ago cannot run twice.

use crate::attempts::Attempts;
use kairos_core::broker::Broker;
use kairos_core::execution::ExecStatus;
use kairos_core::outcome::Verdict;
use kairos_core::protocol::HeartbeatMsg;
use kairos_core::reconcile::{self, Suspects};
use kairos_core::store::{HeldAttempt, Maintenance, StoreResult, WorkerLedger, WorkerStore};
use kairos_core::time::now_ms;
use kairos_core::worker::WorkerState;
use std::collections::HashMap;
use tracing::{info, warn};

/// What became of a worker's work.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Rescue {
    /// Never started: back to `pending`, same attempt.
    pub requeued: u64,
    /// Started: declared lost or handed back (retried as a new attempt if
    /// allowed).
    pub lost: usize,
}

/// Gives back `key` if a process that can no longer run it holds it: one
/// replaced by a later process of its worker id, or one of a worker gone
/// offline. The execution's row may name another worker than the one whose
/// process took the key (a rerouted dispatch whose new worker could not be
/// recorded). Left held, the key would make every worker skip the attempt
/// as a duplicate each time it is requeued. Any other process keeps its
/// key: it may be starting the attempt.
async fn release_if_gone<S: Maintenance + WorkerStore + ?Sized>(
    store: &S,
    attempts: &Attempts,
    key: &str,
    gone_by_holder: &mut HashMap<String, bool>,
) -> Result<(), String> {
    let Some(holder) = attempts
        .coord
        .holder(key)
        .await
        .map_err(|e| e.to_string())?
    else {
        return Ok(());
    };
    let Some((worker, incarnation)) = holder.split_once(' ') else {
        // A legacy owner (a bare worker id): its dead-worker rescue gives it back.
        return Ok(());
    };
    // Replaced by a later process of its worker id, or its worker is gone
    // (deregistered, or declared dead: what it held was rescued), or
    // forgotten (a worker that took a key was dispatched to, so it had a
    // row: the reaper deletes one only long after it went offline). Asked
    // once per holder in a rescue: one process may hold many of the keys.
    let gone = match gone_by_holder.get(&holder) {
        Some(gone) => *gone,
        None => {
            let gone = store
                .worker_ledger(worker)
                .await
                .map_err(|e| e.to_string())?
                .is_none_or(|l| {
                    l.retired.iter().any(|r| r == incarnation) || l.state == WorkerState::Offline
                });
            gone_by_holder.insert(holder.clone(), gone);
            gone
        }
    };
    if gone {
        attempts
            .coord
            .release(key, &holder)
            .await
            .map_err(|e| e.to_string())?;
        info!(key, holder = %holder, "gave back an attempt key a gone process held");
    }
    Ok(())
}

/// Moves `held` on: unstarted attempts are requeued once the keys `owners`
/// hold on them are given back (an attempt whose key cannot be given back
/// now waits for a later round), started ones are lost and asked to stop.
pub async fn rescue<S: Maintenance + WorkerStore + ?Sized>(
    store: &S,
    attempts: &Attempts,
    held: &[&HeldAttempt],
    owners: &[String],
    reason: &str,
) -> StoreResult<Rescue> {
    rescue_as(store, attempts, held, owners, reason, Verdict::Lost).await
}

/// [`rescue`], with the verdict the started attempts get: [`Verdict::Lost`],
/// or [`Verdict::HandedBack`] for a worker that stopped on its own before
/// its handlers did (retried once for free).
pub async fn rescue_as<S: Maintenance + WorkerStore + ?Sized>(
    store: &S,
    attempts: &Attempts,
    held: &[&HeldAttempt],
    owners: &[String],
    reason: &str,
    started_verdict: Verdict,
) -> StoreResult<Rescue> {
    if held.is_empty() {
        return Ok(Rescue::default());
    }
    let mut unstarted = Vec::new();
    let mut gone_by_holder = HashMap::new();
    'next: for h in held.iter().filter(|h| h.status == ExecStatus::Dispatched) {
        let key = attempts.names.attempt_key(&h.execution_id, h.attempt);
        // The key goes first: a requeued attempt whose key is still held
        // would be skipped as a duplicate by every worker.
        for owner in owners {
            if let Err(e) = attempts.coord.release(&key, owner).await {
                warn!(execution = %h.execution_id, error = %e, "cannot give back the attempt key; requeueing on a later round");
                continue 'next;
            }
        }
        if let Err(e) = release_if_gone(store, attempts, &key, &mut gone_by_holder).await {
            warn!(execution = %h.execution_id, error = %e, "cannot check who holds the attempt key; requeueing on a later round");
            continue 'next;
        }
        unstarted.push(h.target());
    }
    let now = now_ms();
    let requeued = store
        .executions_requeue_unstarted(&unstarted, reason, now)
        .await?;
    let started: Vec<(String, u32)> = held
        .iter()
        .filter(|h| h.status != ExecStatus::Dispatched)
        .map(|h| h.target())
        .collect();
    let lost = store
        .executions_apply_verdict(&started, started_verdict, reason, now)
        .await?;
    attempts.stop_moved(&lost, "declared lost").await;
    let rescue = Rescue {
        requeued,
        lost: lost.iter().filter(|a| a.new_status.is_some()).count(),
    };
    crate::metrics::reaper("requeued", rescue.requeued);
    let action = match started_verdict {
        Verdict::HandedBack => "handed_back",
        _ => "lost",
    };
    crate::metrics::reaper(action, rescue.lost as u64);
    Ok(rescue)
}

/// Key owners of a worker's processes that can no longer run anything: its
/// replaced incarnations, and its bare id once it speaks incarnations.
pub fn stale_owners(ledger: &WorkerLedger) -> Vec<String> {
    let mut owners: Vec<String> = ledger
        .retired
        .iter()
        .map(|r| HeartbeatMsg::key_owner(&ledger.worker_id, Some(r)))
        .collect();
    if ledger.current.is_some() {
        owners.push(ledger.worker_id.clone());
    }
    owners
}

/// Every key owner a worker ever had (it is dead: none can run anything).
pub fn all_owners(ledger: Option<&WorkerLedger>, worker_id: &str) -> Vec<String> {
    let mut owners = vec![worker_id.to_string()];
    if let Some(l) = ledger {
        owners.extend(
            l.current
                .iter()
                .chain(&l.retired)
                .map(|i| HeartbeatMsg::key_owner(worker_id, Some(i))),
        );
    }
    owners
}

/// Recovers at once what replaced processes of `worker_id` held.
pub async fn recover_replaced<S: Maintenance + WorkerStore + ?Sized>(
    store: &S,
    attempts: &Attempts,
    worker_id: &str,
) -> StoreResult<Rescue> {
    let inflight = store.executions_in_flight_on(worker_id).await?;
    if inflight.is_empty() {
        return Ok(Rescue::default());
    }
    let Some(ledger) = store.worker_ledger(worker_id).await? else {
        return Ok(Rescue::default());
    };
    replaced(store, attempts, &ledger, &inflight).await
}

async fn replaced<S: Maintenance + WorkerStore + ?Sized>(
    store: &S,
    attempts: &Attempts,
    ledger: &WorkerLedger,
    inflight: &[HeldAttempt],
) -> StoreResult<Rescue> {
    let gone = reconcile::superseded(ledger, inflight);
    if gone.is_empty() {
        return Ok(Rescue::default());
    }
    let reason = format!(
        "worker {} restarted (incarnation {}): the process that held this attempt is gone",
        ledger.worker_id,
        ledger.current.as_deref().unwrap_or("legacy")
    );
    let r = rescue(store, attempts, &gone, &stale_owners(ledger), &reason).await?;
    if r != Rescue::default() {
        info!(worker = %ledger.worker_id, requeued = r.requeued, lost = r.lost, "recovered the work of a replaced worker process");
    }
    Ok(r)
}

/// One reaper round for a live worker: recovers what replaced processes
/// held, then what the worker's heartbeats have stopped listing for
/// `grace_ms` (see [`Suspects`]). An unstarted attempt counts as missing
/// only while the worker's queue is empty: until then it may be waiting
/// there, unknown to the worker yet.
pub async fn reconcile_worker<S: Maintenance + WorkerStore + ?Sized>(
    store: &S,
    broker: &dyn Broker,
    attempts: &Attempts,
    worker_id: &str,
    grace_ms: i64,
    suspects: &mut Suspects,
) -> StoreResult<Rescue> {
    let inflight = store.executions_in_flight_on(worker_id).await?;
    let ledger = match store.worker_ledger(worker_id).await? {
        Some(l) if !inflight.is_empty() => l,
        _ => {
            suspects.forget(worker_id);
            return Ok(Rescue::default());
        }
    };
    let first = replaced(store, attempts, &ledger, &inflight).await?;
    let gone: Vec<(String, u32)> = reconcile::superseded(&ledger, &inflight)
        .iter()
        .map(|h| h.target())
        .collect();
    let mut missing: Vec<&HeldAttempt> = reconcile::missing(&ledger, &inflight, grace_ms)
        .into_iter()
        .filter(|h| !gone.contains(&h.target()))
        .collect();
    if missing.iter().any(|h| h.status == ExecStatus::Dispatched) {
        let queued = match broker.worker_queue_stats(worker_id).await {
            Ok(Some(stats)) => stats.messages > 0,
            Ok(None) => false,
            // Unknown: the unstarted ones may be queued.
            Err(_) => true,
        };
        if queued {
            missing.retain(|h| h.status != ExecStatus::Dispatched);
        }
    }
    let targets: Vec<(String, u32)> = missing.iter().map(|h| h.target()).collect();
    let due = suspects.observe(worker_id, &targets, ledger.beat_at, grace_ms);
    if due.is_empty() {
        return Ok(first);
    }
    let due: Vec<&HeldAttempt> = inflight
        .iter()
        .filter(|h| due.contains(&h.target()))
        .collect();
    let reason = format!(
        "worker {worker_id} no longer holds this attempt: its heartbeats have not listed it for {} s",
        grace_ms / 1000
    );
    let r = rescue(store, attempts, &due, &stale_owners(&ledger), &reason).await?;
    warn!(
        worker = worker_id,
        requeued = r.requeued,
        lost = r.lost,
        "recovered attempts the worker no longer holds"
    );
    Ok(Rescue {
        requeued: first.requeued + r.requeued,
        lost: first.lost + r.lost,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger(current: Option<&str>, retired: &[&str]) -> WorkerLedger {
        WorkerLedger {
            worker_id: "w".into(),
            current: current.map(str::to_string),
            current_since: Some(1),
            retired: retired.iter().map(|s| s.to_string()).collect(),
            held: None,
            beat_at: 1,
            state: kairos_core::worker::WorkerState::Online,
        }
    }

    #[test]
    fn keys_of_the_current_process_are_never_given_back_while_it_lives() {
        let l = ledger(Some("new"), &["old", "older"]);
        assert_eq!(stale_owners(&l), ["w old", "w older", "w"]);
        assert!(!stale_owners(&l).contains(&"w new".to_string()));
        // A legacy worker (no incarnation): its bare id is its live owner.
        assert!(stale_owners(&ledger(None, &[])).is_empty());
    }

    #[test]
    fn a_dead_worker_gives_back_the_keys_of_every_process() {
        let l = ledger(Some("new"), &["old"]);
        assert_eq!(all_owners(Some(&l), "w"), ["w", "w new", "w old"]);
        assert_eq!(all_owners(None, "w"), ["w"]);
    }
}

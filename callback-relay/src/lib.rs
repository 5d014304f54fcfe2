//! Kairos callback relay: delivers the callbacks in the outbox
//! ([`CallbackStore`]) to callers, signed, retried and never two copies of one
//! attempt at once.
//!
//! # Layout
//!
//! - [`config`]: [`RelayConfig`] and [`BackoffPolicy`], defaults and validation.
//! - [`signature`]: [`sign`] and [`verify`] for the `Kairos-Signature` header.
//! - [`backoff`]: the retry schedule, `Retry-After` and the give-up rule.
//! - URLs are checked by `kairos_netguard` (private addresses refused), the
//!   guard the worker's `http` handler shares.
//! - [`secrets`]: each tenant's signing secrets (two during a rotation).
//! - [`deliver`]: one attempt, from URL check to the recorded outcome.
//! - [`Relay`] (here): the loop that claims due callbacks and runs attempts.
//!
//! # The loop
//!
//! Outbox rows are written by the store in the transaction that makes an
//! execution terminal. The relay leases due rows ([`CallbackStore::callbacks_claim_due`],
//! so several relays share the work and never send one attempt twice at once),
//! runs up to `concurrency` attempts in parallel, and records each attempt
//! with what follows it ([`CallbackStore::callback_record_attempt`]).
//!
//! When idle it sleeps until the earliest `next_attempt_at`, at most
//! `poll_interval`, or until `wake` is notified. The embedding process
//! notifies `wake` after applying results, so callbacks leave within
//! milliseconds. Rows written by *another* process are found by the poll for
//! now: there is no cross-process wake-up yet.
//!
//! On shutdown no new callbacks are claimed and attempts in flight finish
//! (each is bounded by `request_timeout`) before [`Relay::run`] returns.

pub mod backoff;
pub mod config;
pub mod deliver;
mod metrics;
pub mod secrets;
pub mod signature;

pub use config::{BackoffPolicy, RelayConfig};
pub use signature::{sign, sign_all, verify};

use kairos_core::callback::Callback;
use kairos_core::store::{CallbackNext, CallbackStore, StoreError};
use kairos_core::supervise::CriticalTasks;
use kairos_core::time::{Millis, now_ms};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Failures at the crate boundary.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// A setting is unusable; the message names it.
    #[error("invalid callback relay configuration: {0}")]
    Config(String),
    /// The HTTP client could not be built (TLS setup).
    #[error("cannot build the HTTP client: {0}")]
    Client(#[from] reqwest::Error),
    /// The store failed (only reported where the relay cannot carry on).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The callback relay service.
pub struct Relay {
    store: Arc<dyn CallbackStore>,
    cfg: Arc<RelayConfig>,
    client: reqwest::Client,
    tenants: Arc<secrets::TenantSecrets>,
    tasks: CriticalTasks,
}

impl Relay {
    /// Validates the configuration and builds the shared HTTP client.
    pub fn new(store: Arc<dyn CallbackStore>, cfg: RelayConfig) -> Result<Relay, RelayError> {
        cfg.validate()?;
        let client = deliver::client(&cfg)?;
        Ok(Relay {
            store,
            cfg: Arc::new(cfg),
            client,
            tenants: Arc::default(),
            tasks: CriticalTasks::new(),
        })
    }

    /// Watches the relay's background task (the backlog gauge) in `tasks`,
    /// so the process's `/readyz` reports it if it ends.
    pub fn critical_tasks(mut self, tasks: CriticalTasks) -> Self {
        self.tasks = tasks;
        self
    }

    /// Delivers callbacks until `shutdown` is cancelled, then lets attempts in
    /// flight finish. Store failures are logged and retried after
    /// `poll_interval`; they do not end the loop.
    pub async fn run(
        self,
        shutdown: CancellationToken,
        wake: Arc<Notify>,
    ) -> Result<(), RelayError> {
        metrics::register();
        let backlog = self.tasks.spawn(
            "callback backlog gauge",
            metrics::watch_backlog(Arc::clone(&self.store), shutdown.clone()),
        );
        let slots = Arc::new(Semaphore::new(self.cfg.concurrency));
        let mut in_flight = JoinSet::new();
        let lease_ms = i64::try_from(self.cfg.lease.as_millis()).unwrap_or(i64::MAX);
        'run: while !shutdown.is_cancelled() {
            // Registered before the claim, so a notification sent while we
            // query is not lost.
            let notified = wake.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            while let Some(done) = in_flight.try_join_next() {
                finished(done);
            }
            let free = u32::try_from(slots.available_permits()).unwrap_or(u32::MAX);
            let want = free.min(self.cfg.batch);
            let claimed_at = now_ms();
            let claimed = if want == 0 {
                Vec::new()
            } else {
                match self
                    .store
                    .callbacks_claim_due(&self.cfg.owner, claimed_at, lease_ms, want)
                    .await
                {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!(error = %e, "claiming due callbacks failed; retrying");
                        self.pause(&shutdown, self.cfg.poll_interval).await;
                        continue;
                    }
                }
            };
            let full = want == 0 || claimed.len() >= want as usize;
            for callback in claimed {
                let Ok(permit) = slots.clone().try_acquire_owned() else {
                    break; // cannot happen: we claimed no more than the free slots
                };
                in_flight.spawn(self.deliver_one(callback, permit));
            }
            if full {
                // More may be due: claim again as soon as a slot is free.
                if slots.available_permits() == 0 {
                    tokio::select! {
                        _ = shutdown.cancelled() => break,
                        Some(done) = in_flight.join_next() => { finished(done); },
                    }
                }
                continue;
            }
            let next_due = match self.store.callbacks_next_due().await {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!(error = %e, "reading the next callback due time failed");
                    None
                }
            };
            let nap = idle_delay(next_due, claimed_at, now_ms(), self.cfg.poll_interval);
            let mut until = Instant::now() + nap;
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => break 'run,
                    _ = &mut notified => break,
                    _ = tokio::time::sleep_until(until) => break,
                    // A retry scheduled by an attempt that just ended may be
                    // due before the nap is over: wake for it without asking
                    // the store.
                    Some(done) = in_flight.join_next() => {
                        if let Some(at) = finished(done) {
                            let wait = u64::try_from(at - now_ms()).unwrap_or(0);
                            until = until.min(Instant::now() + Duration::from_millis(wait));
                        }
                    }
                }
            }
        }
        while let Some(done) = in_flight.join_next().await {
            finished(done);
        }
        let _ = backlog.await;
        Ok(())
    }

    fn deliver_one(
        &self,
        callback: Callback,
        permit: OwnedSemaphorePermit,
    ) -> impl Future<Output = Option<Millis>> + Send + 'static {
        let store = Arc::clone(&self.store);
        let cfg = Arc::clone(&self.cfg);
        let client = self.client.clone();
        let tenants = Arc::clone(&self.tenants);
        let trace = deliver::callback_trace(&callback);
        let parent = deliver::callback_parent(&callback);
        let span = tracing::info_span!(
            "callback",
            job_id = callback.subject.job_id().unwrap_or_default(),
            execution_id = callback.subject.execution_id().unwrap_or_default(),
            run_id = callback.subject.run_id().unwrap_or_default(),
            delivery_id = %callback.id,
            trace_id = trace.map(|t| t.trace_id_hex()).unwrap_or_default(),
            traceparent = trace.map(|t| t.to_string()).unwrap_or_default(),
            parent = parent.map(|t| t.to_string()).unwrap_or_default(),
        );
        let work = async move {
            let secrets = match tenants.of(store.as_ref(), &cfg, &callback.tenant).await {
                Ok(s) => s,
                Err(e) => {
                    // Unsigned or wrongly signed is worse than late: the
                    // lease runs out and the callback is claimed again.
                    tracing::warn!(id = %callback.id, error = %e, "cannot read the tenant's callback secret; retrying later");
                    drop(permit);
                    return None;
                }
            };
            let (attempt, next) = deliver::attempt(&client, &cfg, &callback, &secrets).await;
            metrics::delivery(&attempt, next);
            tracing::debug!(id = %callback.id, attempt = attempt.attempt, status = ?attempt.status_code, ?next, "callback attempt");
            let recorded = store
                .callback_record_attempt(&callback.id, &cfg.owner, &attempt, next, now_ms())
                .await;
            drop(permit);
            match recorded {
                Ok(true) => {
                    if let CallbackNext::RetryAt(at) = next {
                        return Some(at);
                    }
                }
                Ok(false) => tracing::warn!(
                    id = %callback.id,
                    "callback lease was lost during the attempt; another relay owns it now"
                ),
                Err(e) => tracing::warn!(
                    id = %callback.id, error = %e,
                    "recording a callback attempt failed; it is retried when the lease expires"
                ),
            }
            None
        };
        tracing::Instrument::instrument(work, span)
    }

    async fn pause(&self, shutdown: &CancellationToken, d: Duration) {
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = tokio::time::sleep(d) => {}
        }
    }
}

/// How long to sleep when nothing more is claimable. A due time after the
/// claim is slept until (possibly zero: it has passed meanwhile). A due time
/// at or before the claim belongs to a row we could not claim — leased by
/// another relay or in flight here — so only the poll looks again.
fn idle_delay(
    next_due: Option<Millis>,
    claimed_at: Millis,
    now: Millis,
    poll: Duration,
) -> Duration {
    match next_due {
        Some(due) if due > claimed_at => {
            Duration::from_millis(u64::try_from(due - now).unwrap_or(0)).min(poll)
        }
        _ => poll,
    }
}

/// The retry time a finished delivery task scheduled, logging a panicked one.
fn finished(done: Result<Option<Millis>, tokio::task::JoinError>) -> Option<Millis> {
    done.unwrap_or_else(|e| {
        tracing::error!(error = %e, "a callback delivery task failed");
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLL: Duration = Duration::from_secs(1);

    #[test]
    fn idle_delay_sleeps_until_the_next_due_time_within_the_poll() {
        assert_eq!(idle_delay(None, 1_000, 1_000, POLL), POLL);
        assert_eq!(
            idle_delay(Some(1_250), 1_000, 1_050, POLL),
            Duration::from_millis(200)
        );
        assert_eq!(idle_delay(Some(9_000), 1_000, 1_000, POLL), POLL);
        // Became due after the claim: look again at once.
        assert_eq!(idle_delay(Some(1_010), 1_000, 1_020, POLL), Duration::ZERO);
        // Was due at the claim yet not returned: someone else holds it.
        assert_eq!(idle_delay(Some(900), 1_000, 1_020, POLL), POLL);
    }
}

//! The dispatcher lease (Redis, or in-process under `kairos dev`): campaigns
//! for it, renews it, fences the holder's writes, and runs the work of each
//! term of leadership (see `leading`) only while it is held.
//!
//! The lease is renewed every third of its TTL. The moment a renewal fails or
//! errors, the term is cancelled: a leader that cannot prove it still holds
//! the lease must stop dispatching, because another instance may take over as
//! soon as the TTL runs out. [`Term::is_valid`] also checks a local deadline, so
//! a process that was frozen (SIGSTOP, a long GC-like pause) notices on waking
//! that its lease may have expired before the renew loop even runs. Writes
//! carry the lease's fencing token, so storage refuses a stale leader anyway.

use kairos_core::coord::{Lease, LeaseStore};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// One period of leadership.
#[derive(Debug, Clone)]
pub struct Term {
    /// Fencing token of the lease; pass it to every leader-only write.
    pub fence: u64,
    /// Cancelled when the term ends (lease lost or process shutting down).
    pub token: CancellationToken,
    origin: Instant,
    /// Milliseconds after `origin` until which the lease is surely held.
    valid_until: Arc<AtomicU64>,
    /// The newer fence storage refused this term's writes with (0: none).
    fenced_by: Arc<AtomicU64>,
}

impl Term {
    fn new(fence: u64, token: CancellationToken, valid_for: Duration) -> Self {
        let origin = Instant::now();
        let valid_until = Arc::new(AtomicU64::new(valid_for.as_millis() as u64));
        Self {
            fence,
            token,
            origin,
            valid_until,
            fenced_by: Arc::new(AtomicU64::new(0)),
        }
    }

    /// A term that ends only when `token` is cancelled: a partitioned claim
    /// loop's, whose validity is per partition (`crate::partitions`).
    pub(crate) fn unbounded(token: CancellationToken) -> Self {
        Self::new(0, token, Duration::from_secs(100 * 365 * 24 * 3600))
    }

    /// Ends the term because storage holds the newer fence `current`. The
    /// lease's counter is raised past it when the term is given up.
    pub fn fenced(&self, current: u64) {
        self.fenced_by.fetch_max(current, Ordering::AcqRel);
        self.token.cancel();
    }

    fn extend(&self, renewed_at: Instant, valid_for: Duration) {
        let ms = renewed_at.duration_since(self.origin) + valid_for;
        self.valid_until
            .store(ms.as_millis() as u64, Ordering::Release);
    }

    /// Whether this instance may still act as leader right now.
    pub fn is_valid(&self) -> bool {
        !self.token.is_cancelled()
            && (self.origin.elapsed().as_millis() as u64) < self.valid_until.load(Ordering::Acquire)
    }
}

/// Lease settings.
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    /// Lease name shared by all dispatchers of one deployment.
    pub name: String,
    /// Lease time to live; a successor takes over at most this long after a crash.
    pub ttl: Duration,
}

impl LeaseConfig {
    /// How long a renewal is trusted: the TTL minus a margin for clock drift
    /// between this process and the lock service.
    fn trusted_for(&self) -> Duration {
        self.ttl.mul_f64(0.8)
    }

    fn renew_every(&self) -> Duration {
        self.ttl / 3
    }

    /// How often a follower tries to take the lease. Short, so a successor
    /// starts soon after a leader releases it on shutdown; the attempt is one
    /// cheap `SET NX`.
    fn campaign_every(&self) -> Duration {
        self.renew_every().min(CAMPAIGN_MAX_PAUSE)
    }
}

/// Upper bound on a follower's pause between two tries for the lease.
const CAMPAIGN_MAX_PAUSE: Duration = Duration::from_secs(1);

/// Campaigns for the lease until `shutdown`; while it is held, runs
/// `lead(term)` (the leader-only work) and cancels the term as soon as the lease is lost. On shutdown
/// the lease is released at once so a successor need not wait for the TTL.
pub async fn campaign<F, Fut>(
    lock: Arc<dyn LeaseStore>,
    cfg: LeaseConfig,
    shutdown: CancellationToken,
    lead: F,
) where
    F: Fn(Term) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    while !shutdown.is_cancelled() {
        match lock.lease_try_acquire(&cfg.name, cfg.ttl).await {
            Ok(Some(lease)) => {
                hold(&lock, &cfg, &shutdown, lease, &lead).await;
            }
            Ok(None) => {}
            Err(e) => warn!(error = %e, "cannot reach the lock service to campaign for the lease"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = tokio::time::sleep(cfg.campaign_every()) => {}
        }
    }
}

async fn hold<F, Fut>(
    lock: &Arc<dyn LeaseStore>,
    cfg: &LeaseConfig,
    shutdown: &CancellationToken,
    lease: Lease,
    lead: &F,
) where
    F: Fn(Term) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    info!(fence = lease.fence, "became leader");
    crate::metrics::leadership(true, lease.fence);
    let term = Term::new(lease.fence, shutdown.child_token(), cfg.trusted_for());
    let mut work = kairos_core::supervise::spawn_critical("leader work", lead(term.clone()));
    let mut work_done = false;
    loop {
        tokio::select! {
            _ = term.token.cancelled() => break,
            res = &mut work => {
                // The work ends only when the term did (e.g. its local deadline
                // passed while a renewal was slow). Holding on to the lease
                // without it would leave nobody dispatching, so step down and
                // let the campaign start a fresh term.
                work_done = true;
                match res {
                    Err(e) => warn!(error = %e, "leader work ended abnormally; giving up the lease"),
                    Ok(()) => warn!(fence = lease.fence, "leader work ended with its term (lease not renewed in time); stepping down"),
                }
                break;
            }
            _ = tokio::time::sleep(cfg.renew_every()) => {
                let started = Instant::now();
                match tokio::time::timeout(cfg.renew_every(), lock.lease_renew(&lease)).await {
                    Ok(Ok(true)) => term.extend(started, cfg.trusted_for()),
                    Ok(Ok(false)) => {
                        warn!(fence = lease.fence, "lease was taken over; stepping down");
                        break;
                    }
                    Ok(Err(e)) => {
                        warn!(error = %e, "lease renewal failed; stepping down");
                        break;
                    }
                    Err(_) => {
                        warn!("lease renewal timed out; stepping down");
                        break;
                    }
                }
            }
        }
    }
    term.token.cancel();
    crate::metrics::leadership(false, 0);
    if !work_done {
        let _ = work.await;
    }
    let fenced_by = term.fenced_by.load(Ordering::Acquire);
    if fenced_by > lease.fence {
        // Either a newer leader wrote (then the counter is past this
        // already and nothing changes) or the lock service lost its counter:
        // the next term must start past what storage holds.
        if let Err(e) = lock.lease_raise_fence(&lease.name, fenced_by).await {
            warn!(error = %e, fence = fenced_by, "cannot raise the lease's fence; the next terms catch up one by one");
        }
    }
    // Released on every step-down, not only on shutdown: the release is a
    // compare-and-set, so a successor's lease is never touched, and a lease
    // this instance still holds becomes free at once instead of after its TTL.
    match lock.lease_release(&lease).await {
        Ok(()) if shutdown.is_cancelled() => info!(fence = lease.fence, "released the lease"),
        Ok(()) => info!(fence = lease.fence, "no longer leader"),
        Err(e) => warn!(
            fence = lease.fence,
            error = %e,
            "no longer leader; could not release the lease, it expires with its TTL"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kairos_inproc::MemoryCoord;

    #[test]
    fn a_term_expires_without_renewal() {
        let term = Term::new(1, CancellationToken::new(), Duration::from_millis(0));
        assert!(!term.is_valid());
        let term = Term::new(1, CancellationToken::new(), Duration::from_secs(60));
        assert!(term.is_valid());
        term.token.cancel();
        assert!(!term.is_valid());
    }

    /// Campaigns on a fresh in-memory lease until a second term starts and
    /// returns the fences of both terms; `first` runs as the first term's
    /// work. The TTL is far beyond the test: a second term proves the first
    /// lease was given up, not left to expire.
    async fn two_terms(first: impl Fn(&Term) + Send + Sync + 'static) -> Vec<u64> {
        let lock: Arc<dyn LeaseStore> = Arc::new(MemoryCoord::new());
        let cfg = LeaseConfig {
            name: "t".into(),
            ttl: Duration::from_secs(600),
        };
        let shutdown = CancellationToken::new();
        let fences = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (seen, stop, first) = (fences.clone(), shutdown.clone(), Arc::new(first));
        let run = campaign(lock, cfg, shutdown, move |term: Term| {
            let (seen, stop, first) = (seen.clone(), stop.clone(), first.clone());
            async move {
                let terms = {
                    let mut seen = seen.lock().unwrap();
                    seen.push(term.fence);
                    seen.len()
                };
                if terms == 1 {
                    first(&term);
                } else {
                    stop.cancel();
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(30), run)
            .await
            .expect("a second term within 30 s");
        fences.lock().unwrap().clone()
    }

    #[tokio::test]
    async fn a_term_whose_work_ends_is_released_and_campaigned_for_again() {
        let fences = two_terms(|_| {}).await;
        assert_eq!(fences.len(), 2);
        assert!(fences[1] > fences[0], "{fences:?}");
    }

    #[tokio::test]
    async fn a_term_fenced_by_storage_is_followed_by_one_past_that_fence() {
        // As after a lock service lost its counter: storage holds fence 50
        // while the lease hands out 1.
        let fences = two_terms(|term| term.fenced(50)).await;
        assert_eq!(fences, [1, 51]);
    }
}

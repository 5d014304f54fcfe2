//! Partition leases (`KAIROS_DISPATCH_PARTITIONED`): each dispatcher
//! announces itself as a member of the deployment's group, computes its fair
//! share of the partitions from the live members by rendezvous hashing with
//! bounded loads ([`kairos_core::partition::owners`]), takes the leases of the partitions it
//! should own, renews them, and gives up those it should not own any more.
//!
//! Every member computes the same owners from the same member list, so a
//! join moves mostly the joiner's share (its previous owners release it on
//! their next tick, and the joiner takes each lease as soon as it is free),
//! and a member that dies drops out of the list when its announcement
//! expires; its leases expire with the same TTL and the survivors take them.
//! A rebalance therefore completes within about one lease TTL plus a tick.
//! Meanwhile a partition may briefly have no owner (its triggers wait) but
//! never two that can both claim: each lease carries a fence, checked per
//! partition in the claim transaction, and the unique trigger key backs it.
//!
//! Like the leader lease, a partition lease is trusted only until a local
//! deadline (80 % of the TTL after its last renewal), so a frozen process
//! stops claiming in partitions it may have lost before it even learns it.

use futures::StreamExt;
use kairos_core::coord::{Lease, LeaseStore, Membership};
use kairos_core::partition::{self, Fenced, Owned};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// Lease operations in flight at once while acquiring or renewing.
const CONCURRENT_OPS: usize = 32;

/// A partition lease held, and until when it is surely held.
#[derive(Debug)]
struct Held {
    lease: Lease,
    trusted_until: Instant,
}

/// The partitions this dispatcher holds, shared by the lease manager (which
/// fills it) and the claim loop's scope (which claims with it, see
/// [`crate::dispatch_loop::ClaimScope`]).
#[derive(Debug, Default)]
pub(crate) struct OwnedSet {
    held: Mutex<BTreeMap<u32, Held>>,
    /// Partitions storage refused (a newer owner claimed there), for the
    /// manager to give up and raise the lease's fence past.
    refused: Mutex<Vec<(Fenced, Option<Lease>)>>,
}

impl OwnedSet {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u32, Held>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The partitions held and still trusted, with their fences.
    pub(crate) fn snapshot(&self) -> Owned {
        let now = Instant::now();
        self.lock()
            .iter()
            .filter(|(_, h)| now < h.trusted_until)
            .map(|(&p, h)| (p, h.lease.fence))
            .collect()
    }

    /// Storage refused these partitions: stop claiming in them at once.
    pub(crate) fn refuse(&self, fenced: &[Fenced]) {
        if fenced.is_empty() {
            return;
        }
        let gone: Vec<(Fenced, Option<Lease>)> = {
            let mut held = self.lock();
            fenced
                .iter()
                .map(|f| (*f, held.remove(&f.partition).map(|h| h.lease)))
                .collect()
        };
        warn!(
            partitions = ?fenced.iter().map(|f| f.partition).collect::<Vec<_>>(),
            "storage holds newer fences for some partitions; giving them up"
        );
        self.refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(gone);
    }
}

/// The partitions an instance holds, as of its last tick: for tests and
/// diagnostics (claims use the live set).
#[derive(Debug, Clone, Default)]
pub struct HeldView(Arc<Mutex<Vec<u32>>>);

impl HeldView {
    /// The partitions held, ascending.
    pub fn get(&self) -> Vec<u32> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set(&self, held: Vec<u32>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = held;
    }
}

/// Partition lease settings.
#[derive(Debug, Clone)]
pub(crate) struct PartitionConfig {
    /// The leader lease's name: partition leases are `<name>/p<n>`, the
    /// member group `<name>`.
    pub(crate) base: String,
    /// This dispatcher's member id (unique per process).
    pub(crate) member: String,
    /// Lease and announcement time to live.
    pub(crate) ttl: Duration,
    /// Where the partitions held are shown.
    pub(crate) view: HeldView,
}

impl PartitionConfig {
    fn tick(&self) -> Duration {
        (self.ttl / 3).min(Duration::from_secs(1))
    }

    fn renew_every(&self) -> Duration {
        self.ttl / 3
    }

    fn trusted_for(&self) -> Duration {
        self.ttl.mul_f64(0.8)
    }
}

/// Holds this dispatcher's fair share of the `count` partitions in `owned`
/// until `shutdown`, then releases every lease and leaves the group.
pub(crate) async fn run(
    lock: Arc<dyn LeaseStore>,
    members: Arc<dyn Membership>,
    cfg: PartitionConfig,
    count: u32,
    owned: Arc<OwnedSet>,
    shutdown: CancellationToken,
) {
    let mut last_renew = Instant::now();
    let mut wanted: BTreeSet<u32> = BTreeSet::new();
    while !shutdown.is_cancelled() {
        give_up_refused(&lock, &cfg, &owned).await;
        if let Err(e) = members
            .member_announce(&cfg.base, &cfg.member, cfg.ttl)
            .await
        {
            warn!(error = %e, "cannot announce this dispatcher to the group");
        }
        match members.members(&cfg.base).await {
            Ok(list) => {
                let share: BTreeSet<u32> = partition::fair_share(&cfg.member, &list, count)
                    .into_iter()
                    .collect();
                if share != wanted {
                    info!(
                        members = list.len(),
                        partitions = share.len(),
                        "partition share changed"
                    );
                }
                wanted = share;
            }
            Err(e) => warn!(error = %e, "cannot list the dispatchers; keeping the current share"),
        }
        if last_renew.elapsed() >= cfg.renew_every() - cfg.tick().min(cfg.renew_every() / 2) {
            renew(&lock, &cfg, &owned).await;
            last_renew = Instant::now();
        }
        release(&lock, &owned, |p| !wanted.contains(&p)).await;
        acquire(&lock, &cfg, &owned, &wanted).await;
        let held: Vec<u32> = owned.lock().keys().copied().collect();
        crate::metrics::partitions_owned(held.len());
        cfg.view.set(held);
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = tokio::time::sleep(cfg.tick()) => {}
        }
    }
    release(&lock, &owned, |_| true).await;
    crate::metrics::partitions_owned(0);
    cfg.view.set(Vec::new());
    if let Err(e) = members.member_leave(&cfg.base, &cfg.member).await {
        debug!(error = %e, "cannot leave the group; the announcement expires with its TTL");
    }
    info!("partition leases released");
}

/// Renews every lease held; those lost or not renewed are dropped.
async fn renew(lock: &Arc<dyn LeaseStore>, cfg: &PartitionConfig, owned: &OwnedSet) {
    let leases: Vec<(u32, Lease)> = owned
        .lock()
        .iter()
        .map(|(&p, h)| (p, h.lease.clone()))
        .collect();
    let results: Vec<(u32, Instant, bool)> = futures::stream::iter(leases)
        .map(|(p, lease)| async move {
            let started = Instant::now();
            let ok = matches!(
                tokio::time::timeout(cfg.renew_every(), lock.lease_renew(&lease)).await,
                Ok(Ok(true))
            );
            (p, started, ok)
        })
        .buffer_unordered(CONCURRENT_OPS)
        .collect()
        .await;
    let mut held = owned.lock();
    let mut lost = Vec::new();
    for (p, started, ok) in results {
        if ok {
            if let Some(h) = held.get_mut(&p) {
                h.trusted_until = started + cfg.trusted_for();
            }
        } else if held.remove(&p).is_some() {
            lost.push(p);
        }
    }
    if !lost.is_empty() {
        warn!(partitions = ?lost, "partition leases lost or not renewed; no longer claiming there");
    }
}

/// Gives up the leases of the partitions `drop` picks: they leave the set
/// first (no new claim uses them), then the leases are released, so their
/// next owner need not wait for the TTL.
async fn release(lock: &Arc<dyn LeaseStore>, owned: &OwnedSet, drop: impl Fn(u32) -> bool) {
    let gone: Vec<Held> = {
        let mut held = owned.lock();
        let picked: Vec<u32> = held.keys().copied().filter(|&p| drop(p)).collect();
        picked.iter().filter_map(|p| held.remove(p)).collect()
    };
    if gone.is_empty() {
        return;
    }
    debug!(count = gone.len(), "releasing partition leases");
    futures::stream::iter(gone)
        .for_each_concurrent(CONCURRENT_OPS, |h| async move {
            if let Err(e) = lock.lease_release(&h.lease).await {
                debug!(error = %e, lease = %h.lease.name, "cannot release; it expires with its TTL");
            }
        })
        .await;
}

/// Tries for the lease of each wanted partition not held yet; a lease
/// another dispatcher still holds is tried again on the next tick.
async fn acquire(
    lock: &Arc<dyn LeaseStore>,
    cfg: &PartitionConfig,
    owned: &OwnedSet,
    wanted: &BTreeSet<u32>,
) {
    let missing: Vec<u32> = {
        let held = owned.lock();
        wanted
            .iter()
            .copied()
            .filter(|p| !held.contains_key(p))
            .collect()
    };
    if missing.is_empty() {
        return;
    }
    let got: Vec<(u32, Instant, Lease)> = futures::stream::iter(missing)
        .map(|p| async move {
            let started = Instant::now();
            let name = partition::lease_name(&cfg.base, p);
            match lock.lease_try_acquire(&name, cfg.ttl).await {
                Ok(Some(lease)) => Some((p, started, lease)),
                Ok(None) => None,
                Err(e) => {
                    debug!(error = %e, partition = p, "cannot try for a partition lease");
                    None
                }
            }
        })
        .buffer_unordered(CONCURRENT_OPS)
        .filter_map(|x| async move { x })
        .collect()
        .await;
    if got.is_empty() {
        return;
    }
    info!(count = got.len(), "partition leases taken");
    let mut held = owned.lock();
    for (p, started, lease) in got {
        held.insert(
            p,
            Held {
                lease,
                trusted_until: started + cfg.trusted_for(),
            },
        );
    }
}

/// Gives up the leases of partitions storage refused, raising each
/// lease's fence past what storage holds (a lock service that lost its
/// counter would otherwise hand out refused fences again).
async fn give_up_refused(lock: &Arc<dyn LeaseStore>, cfg: &PartitionConfig, owned: &OwnedSet) {
    let refused: Vec<(Fenced, Option<Lease>)> =
        std::mem::take(&mut *owned.refused.lock().unwrap_or_else(PoisonError::into_inner));
    for (f, lease) in refused {
        let name = partition::lease_name(&cfg.base, f.partition);
        if let Err(e) = lock.lease_raise_fence(&name, f.current).await {
            debug!(error = %e, lease = %name, "cannot raise the partition lease's fence");
        }
        // Still ours on the lock service (its counter was lost): let it go.
        if let Some(lease) = lease
            && let Err(e) = lock.lease_release(&lease).await
        {
            debug!(error = %e, lease = %name, "cannot release; it expires with its TTL");
        }
    }
}

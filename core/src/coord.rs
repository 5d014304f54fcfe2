//! Coordination ports: the dispatcher's leader lease, the worker's
//! once-per-attempt guard, and the board where dispatchers post requests to
//! stop an attempt. `RedisCoord` (crate `kairos-coord-redis`) and
//! `MemoryCoord` (in-process, crate `kairos-inproc`) implement them all, so a
//! process holds one [`Coordination`] handle.

use async_trait::async_trait;
use std::time::Duration;

/// Coordination failures, at the crate boundary.
#[derive(Debug, thiserror::Error)]
pub enum CoordError {
    /// The coordination service could not be reached.
    #[error("lock service unavailable: {0}")]
    Unavailable(String),
}

/// Result alias for the ports.
pub type CoordResult<T> = Result<T, CoordError>;

/// A held lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// Lease name (e.g. `dispatcher`).
    pub name: String,
    /// Random token proving ownership; renew and release compare it.
    pub token: String,
    /// Fencing token: strictly greater than that of every earlier lease of
    /// this name. Writers pass it to storage, which refuses older ones.
    pub fence: u64,
    /// Time to live from the last acquire or renew.
    pub ttl: Duration,
}

/// A named, expiring, exclusive lease.
#[async_trait]
pub trait LeaseStore: Send + Sync {
    /// Takes the lease if nobody holds it. `None` if someone does.
    async fn lease_try_acquire(&self, name: &str, ttl: Duration) -> CoordResult<Option<Lease>>;
    /// Extends the lease if this token still holds it. `false` means it was
    /// lost: the holder must stop acting as leader at once.
    async fn lease_renew(&self, lease: &Lease) -> CoordResult<bool>;
    /// Gives the lease up if this token still holds it.
    async fn lease_release(&self, lease: &Lease) -> CoordResult<()>;
    /// Makes every later fence of `name` greater than `seen`, a fence the
    /// storage already holds. A lock service that lost its counter (Redis
    /// restarted without persistence) hands out fences from 1 again, which
    /// storage refuses; without this a leader would step down once for
    /// every number it is behind.
    async fn lease_raise_fence(&self, name: &str, seen: u64) -> CoordResult<()>;
}

/// A "first one wins" marker, used so one attempt runs at most once.
///
/// The marker records its `owner` (a worker id), so it can be given back when
/// that owner provably never ran the attempt: the worker itself when it cannot
/// confirm `started`, or the reaper when the owner died before confirming it.
#[async_trait]
pub trait OnceGuard: Send + Sync {
    /// Sets `key` for `owner` if absent, for `ttl`. `true` if this call set it
    /// (a second call by the same owner is refused like any other).
    async fn once(&self, key: &str, owner: &str, ttl: Duration) -> CoordResult<bool>;
    /// Removes `key` if `owner` holds it; `true` if it did.
    async fn release(&self, key: &str, owner: &str) -> CoordResult<bool>;
    /// The owner holding `key` now, if anyone does.
    async fn holder(&self, key: &str) -> CoordResult<Option<String>>;
    /// Whether the service answers (for `/readyz`).
    async fn is_healthy(&self) -> bool;
}

/// Requests to stop attempts, posted by dispatchers and read by the workers
/// running them. A request is a key per attempt ([`crate::protocol::Names::stop_key`])
/// that outlives any partition the worker may come back from.
#[async_trait]
pub trait StopBoard: Send + Sync {
    /// Posts a stop request under each key, kept for `ttl`. Posting again is harmless.
    async fn stops_post(&self, keys: &[String], ttl: Duration) -> CoordResult<()>;
    /// Which of `keys` carry a stop request, in order.
    async fn stops_posted(&self, keys: &[String]) -> CoordResult<Vec<bool>>;
}

/// Live members of a group (the dispatchers of a deployment in partitioned
/// mode): each announces itself with a TTL and renews it; one that stops
/// renewing drops out when its TTL runs out. Kept apart from
/// [`Coordination`] so that coordination services without it stay valid.
#[async_trait]
pub trait Membership: Send + Sync {
    /// Announces `member` in `group` for `ttl` from now (again: renews it).
    async fn member_announce(&self, group: &str, member: &str, ttl: Duration) -> CoordResult<()>;
    /// The members of `group` whose announcement has not expired, sorted.
    async fn members(&self, group: &str) -> CoordResult<Vec<String>>;
    /// Takes `member` out of `group` at once (a clean shutdown).
    async fn member_leave(&self, group: &str, member: &str) -> CoordResult<()>;
}

/// The whole coordination port: what the dispatcher and the worker are given.
pub trait Coordination: LeaseStore + OnceGuard + StopBoard {}

impl<T: LeaseStore + OnceGuard + StopBoard> Coordination for T {}

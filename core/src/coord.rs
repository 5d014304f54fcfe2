//! Coordination ports: the dispatcher's leader lease and the worker's
//! once-per-attempt guard. [`crate::redis_coord`] and [`crate::memory_coord`]
//! implement them.

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
}

/// A "first one wins" marker, used so one attempt runs at most once.
#[async_trait]
pub trait OnceGuard: Send + Sync {
    /// Sets `key` if absent, for `ttl`. `true` if this caller set it.
    async fn once(&self, key: &str, ttl: Duration) -> CoordResult<bool>;
    /// Whether the service answers (for `/readyz`).
    async fn is_healthy(&self) -> bool;
}

//! In-process coordination for `kairos dev` and tests: the lease, once-guard
//! and stop-board semantics of the Redis adapter, held in this process's
//! memory.
//!
//! Expiry uses [`tokio::time::Instant`], so tests under `tokio::time::pause()`
//! move leases and guards through their lifetime without waiting.

use async_trait::async_trait;
use kairos_core::coord::{CoordResult, Lease, LeaseStore, Membership, OnceGuard, StopBoard};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::time::Instant;

/// Guards below this count are never swept: sweeping a small map buys nothing.
const MIN_SWEEP: usize = 64;

/// Leases and once-guards shared by every clone.
#[derive(Debug, Clone, Default)]
pub struct MemoryCoord {
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    /// Current holder per lease name; an expired entry counts as free.
    leases: HashMap<String, Held>,
    /// Last fence handed out per lease name. Never reset, so fences keep
    /// increasing across holders, as the Redis counter does.
    fences: HashMap<String, u64>,
    /// Owner and expiry per once-key.
    once: HashMap<String, Marker>,
    /// Expiry per posted stop request.
    stops: HashMap<String, Instant>,
    /// Expiry of each announced member, by group.
    members: HashMap<String, BTreeMap<String, Instant>>,
    /// Size of `once` at which expired keys are next swept; doubling it after
    /// each sweep keeps the cost per call constant.
    sweep_at: usize,
}

#[derive(Debug)]
struct Marker {
    owner: String,
    expires: Instant,
}

#[derive(Debug)]
struct Held {
    token: String,
    expires: Instant,
}

impl Held {
    fn is_live(&self, token: &str, now: Instant) -> bool {
        self.token == token && now < self.expires
    }
}

/// When something set at `now` for `ttl` expires. An absurd TTL means "never"
/// rather than an overflow panic.
fn expiry(now: Instant, ttl: Duration) -> Instant {
    now.checked_add(ttl)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
}

impl MemoryCoord {
    /// Empty state: no leases held, no keys set.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // No update panics half-way, so a poisoned state is still consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl LeaseStore for MemoryCoord {
    async fn lease_try_acquire(&self, name: &str, ttl: Duration) -> CoordResult<Option<Lease>> {
        let now = Instant::now();
        let mut state = self.lock();
        if state.leases.get(name).is_some_and(|h| now < h.expires) {
            return Ok(None);
        }
        let fence = state.fences.entry(name.to_string()).or_insert(0);
        *fence += 1;
        let lease = Lease {
            name: name.to_string(),
            token: uuid::Uuid::now_v7().to_string(),
            fence: *fence,
            ttl,
        };
        state.leases.insert(
            name.to_string(),
            Held {
                token: lease.token.clone(),
                expires: expiry(now, ttl),
            },
        );
        Ok(Some(lease))
    }

    async fn lease_renew(&self, lease: &Lease) -> CoordResult<bool> {
        let now = Instant::now();
        let mut state = self.lock();
        match state.leases.get_mut(&lease.name) {
            Some(held) if held.is_live(&lease.token, now) => {
                held.expires = expiry(now, lease.ttl);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn lease_release(&self, lease: &Lease) -> CoordResult<()> {
        let now = Instant::now();
        let mut state = self.lock();
        if state
            .leases
            .get(&lease.name)
            .is_some_and(|h| h.is_live(&lease.token, now))
        {
            state.leases.remove(&lease.name);
        }
        Ok(())
    }

    async fn lease_raise_fence(&self, name: &str, seen: u64) -> CoordResult<()> {
        let mut state = self.lock();
        let fence = state.fences.entry(name.to_string()).or_insert(0);
        *fence = (*fence).max(seen);
        Ok(())
    }
}

#[async_trait]
impl OnceGuard for MemoryCoord {
    async fn once(&self, key: &str, owner: &str, ttl: Duration) -> CoordResult<bool> {
        let now = Instant::now();
        let mut state = self.lock();
        if state.once.get(key).is_some_and(|m| now < m.expires) {
            return Ok(false);
        }
        if state.once.len() >= state.sweep_at {
            state.once.retain(|_, m| now < m.expires);
            state.stops.retain(|_, expires| now < *expires);
            state.sweep_at = (state.once.len() * 2).max(MIN_SWEEP);
        }
        let marker = Marker {
            owner: owner.to_string(),
            expires: expiry(now, ttl),
        };
        state.once.insert(key.to_string(), marker);
        Ok(true)
    }

    async fn release(&self, key: &str, owner: &str) -> CoordResult<bool> {
        let now = Instant::now();
        let mut state = self.lock();
        let held = state
            .once
            .get(key)
            .is_some_and(|m| m.owner == owner && now < m.expires);
        if held {
            state.once.remove(key);
        }
        Ok(held)
    }

    async fn holder(&self, key: &str) -> CoordResult<Option<String>> {
        let now = Instant::now();
        let state = self.lock();
        Ok(state
            .once
            .get(key)
            .filter(|m| now < m.expires)
            .map(|m| m.owner.clone()))
    }

    async fn is_healthy(&self) -> bool {
        true
    }
}

#[async_trait]
impl StopBoard for MemoryCoord {
    async fn stops_post(&self, keys: &[String], ttl: Duration) -> CoordResult<()> {
        let now = Instant::now();
        let mut state = self.lock();
        for key in keys {
            state.stops.insert(key.clone(), expiry(now, ttl));
        }
        Ok(())
    }

    async fn stops_posted(&self, keys: &[String]) -> CoordResult<Vec<bool>> {
        let now = Instant::now();
        let state = self.lock();
        Ok(keys
            .iter()
            .map(|k| state.stops.get(k).is_some_and(|expires| now < *expires))
            .collect())
    }
}

#[async_trait]
impl Membership for MemoryCoord {
    async fn member_announce(&self, group: &str, member: &str, ttl: Duration) -> CoordResult<()> {
        let now = Instant::now();
        let mut state = self.lock();
        let group = state.members.entry(group.to_string()).or_default();
        group.retain(|_, expires| now < *expires);
        group.insert(member.to_string(), expiry(now, ttl));
        Ok(())
    }

    async fn members(&self, group: &str) -> CoordResult<Vec<String>> {
        let now = Instant::now();
        let state = self.lock();
        Ok(state.members.get(group).map_or_else(Vec::new, |g| {
            g.iter()
                .filter(|(_, expires)| now < **expires)
                .map(|(m, _)| m.clone())
                .collect()
        }))
    }

    async fn member_leave(&self, group: &str, member: &str) -> CoordResult<()> {
        if let Some(g) = self.lock().members.get_mut(group) {
            g.remove(member);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn expired_guards_are_swept() {
        let c = MemoryCoord::new();
        for i in 0..MIN_SWEEP {
            assert!(
                c.once(&format!("k{i}"), "w", Duration::from_secs(1))
                    .await
                    .unwrap()
            );
        }
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(c.once("fresh", "w", Duration::from_secs(1)).await.unwrap());
        assert_eq!(c.lock().once.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn members_drop_out_when_their_announcement_expires() {
        let c = MemoryCoord::new();
        c.member_announce("g", "b", Duration::from_secs(1))
            .await
            .unwrap();
        c.member_announce("g", "a", Duration::from_secs(3))
            .await
            .unwrap();
        assert_eq!(c.members("g").await.unwrap(), ["a", "b"]);
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(c.members("g").await.unwrap(), ["a"]);
        c.member_leave("g", "a").await.unwrap();
        assert!(c.members("g").await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn huge_ttls_do_not_overflow() {
        let c = MemoryCoord::new();
        let lease = c.lease_try_acquire("l", Duration::MAX).await.unwrap();
        assert!(c.lease_renew(&lease.unwrap()).await.unwrap());
        assert!(c.once("k", "w", Duration::MAX).await.unwrap());
        assert!(!c.once("k", "w", Duration::MAX).await.unwrap());
    }
}

//! Looked-up API keys, so a key costs one store read per
//! [`crate::ApiConfig::key_cache_ttl`] per instance rather than one per
//! request, and an unknown prefix one per
//! [`crate::ApiConfig::api_key_negative_ttl_ms`].
//!
//! Known keys and unknown prefixes are kept apart, each in a bounded
//! least-recently-used map: a flood of random prefixes only pushes other
//! unknown prefixes out, never a key in use. Concurrent misses on one prefix
//! share a single store read.

use hashlink::LruCache;
use kairos_core::store::{StoreError, StoreResult};
use kairos_core::tenant::{ApiKey, Tenant};
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::OnceCell;

/// A key with its tenant, as looked up; `None`: no key has that prefix.
pub(crate) type Found = Option<(ApiKey, Tenant)>;

/// A known key with its tenant and when it was read.
type Known = (Instant, (ApiKey, Tenant));

/// A store read in flight, shared by every request waiting on the prefix.
type Pending = Arc<OnceCell<Found>>;

/// Known keys and unknown prefixes by prefix, with when they were read.
pub(crate) struct KeyCache {
    known: Mutex<LruCache<String, Known>>,
    unknown: Mutex<LruCache<String, Instant>>,
    pending: Mutex<HashMap<String, Pending>>,
    ttl: Duration,
    negative_ttl: Duration,
    reads: AtomicU64,
}

impl KeyCache {
    /// A cache of at most `size` known keys (and as many unknown prefixes),
    /// trusting them for `ttl` and `negative_ttl`.
    pub(crate) fn new(size: usize, ttl: Duration, negative_ttl: Duration) -> Self {
        let size = size.max(1);
        KeyCache {
            known: Mutex::new(LruCache::new(size)),
            unknown: Mutex::new(LruCache::new(size)),
            pending: Mutex::default(),
            ttl,
            negative_ttl,
            reads: AtomicU64::new(0),
        }
    }

    /// How many times [`KeyCache::lookup`] has read the store.
    pub(crate) fn store_reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// What is cached for `prefix` and still fresh, if anything.
    fn get(&self, prefix: &str, now: Instant) -> Option<Found> {
        {
            let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
            match known.get(prefix) {
                Some((at, found)) if now.saturating_duration_since(*at) < self.ttl => {
                    return Some(Some(found.clone()));
                }
                Some(_) => {
                    known.remove(prefix);
                }
                None => {}
            }
        }
        let mut unknown = self.unknown.lock().unwrap_or_else(|e| e.into_inner());
        match unknown.get(prefix) {
            Some(at) if now.saturating_duration_since(*at) < self.negative_ttl => Some(None),
            Some(_) => {
                unknown.remove(prefix);
                None
            }
            None => None,
        }
    }

    fn put(&self, prefix: &str, found: &Found, now: Instant) {
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        let mut unknown = self.unknown.lock().unwrap_or_else(|e| e.into_inner());
        match found {
            Some(hit) => {
                unknown.remove(prefix);
                known.insert(prefix.to_string(), (now, hit.clone()));
            }
            None => {
                known.remove(prefix);
                unknown.insert(prefix.to_string(), now);
            }
        }
    }

    /// Forgets `prefix` (a key revoked or created here): the next request
    /// reads it again.
    pub(crate) fn evict(&self, prefix: &str) {
        self.known
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(prefix);
        self.unknown
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(prefix);
    }

    /// Forgets every key of `tenant` (its limits changed here).
    pub(crate) fn evict_tenant(&self, tenant: &str) {
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        known.retain(|_, (_, (key, _))| key.tenant != tenant);
    }

    /// The key with `prefix`: from the cache when fresh, otherwise through
    /// `read` (one read per prefix however many requests wait on it).
    pub(crate) async fn lookup<F, Fut>(&self, prefix: &str, read: F) -> StoreResult<Found>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = StoreResult<Found>>,
    {
        if let Some(hit) = self.get(prefix, Instant::now()) {
            return Ok(hit);
        }
        let cell = {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(pending.entry(prefix.to_string()).or_default())
        };
        let result = cell
            .get_or_try_init(|| async {
                // A read that finished while this one queued is in the cache.
                if let Some(hit) = self.get(prefix, Instant::now()) {
                    return Ok::<_, StoreError>(hit);
                }
                self.reads.fetch_add(1, Ordering::Relaxed);
                metrics::counter!("kairos_api_key_store_reads_total").increment(1);
                let found = read().await?;
                self.put(prefix, &found, Instant::now());
                Ok(found)
            })
            .await
            .cloned();
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if pending.get(prefix).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
            pending.remove(prefix);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kairos_core::tenant::{Role, TenantLimits};

    fn hit(prefix: &str, tenant: &str) -> Found {
        let key = ApiKey {
            prefix: prefix.into(),
            tenant: tenant.into(),
            role: Role::Read,
            secret_hash: String::new(),
            name: None,
            expires_at: None,
            revoked_at: None,
            created_at: 0,
        };
        let tenant = Tenant {
            id: tenant.into(),
            callback_secret: None,
            previous_secret: None,
            previous_valid_until: None,
            limits: TenantLimits::default(),
            created_at: 0,
        };
        Some((key, tenant))
    }

    const LONG: Duration = Duration::from_secs(3600);

    #[test]
    fn unknown_prefixes_never_push_known_keys_out() {
        let cache = KeyCache::new(2, LONG, LONG);
        let t0 = Instant::now();
        cache.put("a", &hit("a", "t"), t0);
        cache.put("b", &hit("b", "t"), t0);
        for i in 0..100 {
            cache.put(&format!("x{i}"), &None, t0);
        }
        assert!(cache.get("a", t0).is_some_and(|f| f.is_some()));
        assert!(cache.get("b", t0).is_some_and(|f| f.is_some()));
        assert_eq!(cache.get("x99", t0), Some(None), "the newest unknown kept");
        assert_eq!(cache.get("x0", t0), None, "older unknowns dropped");
        // Known keys go least recently used first: "a" was read last.
        cache.get("a", t0);
        cache.put("c", &hit("c", "t"), t0);
        assert_eq!(cache.get("b", t0), None);
        assert!(cache.get("a", t0).is_some());
    }

    #[test]
    fn entries_expire_and_evict() {
        let cache = KeyCache::new(10, Duration::from_secs(1), Duration::from_secs(5));
        let t0 = Instant::now();
        cache.put("a", &hit("a", "t"), t0);
        cache.put("u", &None, t0);
        let later = t0 + Duration::from_secs(2);
        assert_eq!(cache.get("a", later), None, "known keys expire");
        assert_eq!(cache.get("u", later), Some(None), "unknowns last longer");
        assert_eq!(cache.get("u", t0 + Duration::from_secs(5)), None);
        cache.put("a", &hit("a", "t"), t0);
        cache.put("b", &hit("b", "other"), t0);
        cache.evict_tenant("t");
        assert_eq!(cache.get("a", t0), None);
        assert!(cache.get("b", t0).is_some());
        cache.evict("b");
        assert_eq!(cache.get("b", t0), None);
    }

    #[tokio::test]
    async fn one_read_per_prefix_however_many_wait() {
        let cache = Arc::new(KeyCache::new(10, LONG, LONG));
        let (tx, rx) = tokio::sync::watch::channel(false);
        let waiters: Vec<_> = (0..8)
            .map(|_| {
                let (cache, mut rx) = (Arc::clone(&cache), rx.clone());
                tokio::spawn(async move {
                    cache
                        .lookup("p", || async move {
                            let _ = rx.wait_for(|go| *go).await;
                            Ok(None)
                        })
                        .await
                })
            })
            .collect();
        tokio::task::yield_now().await;
        tx.send(true).expect("readers wait");
        for w in waiters {
            assert_eq!(w.await.expect("joined").expect("read"), None);
        }
        assert_eq!(cache.store_reads(), 1);
        let failed = cache
            .lookup("q", || async {
                Err(StoreError::Unavailable("down".into()))
            })
            .await;
        assert!(failed.is_err());
        assert!(cache.lookup("q", || async { Ok(None) }).await.is_ok());
        assert_eq!(cache.store_reads(), 3, "a failed read is not cached");
    }
}

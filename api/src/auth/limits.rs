//! Per-key limits: a token bucket for creating jobs (a batch of N costs N
//! tokens, and one larger than the bucket is refused outright), another for
//! actions that make executions or deliveries (trigger, resume, redeliver),
//! and a cap on a tenant's non-terminal jobs. Buckets live in memory on each
//! API instance, so with N instances a key may reach N times its rate. The
//! cap reads the stored count in the background, at most once a second per
//! tenant and instance near the cap (less often while the count is at most
//! half of it and slow to read), and counts this instance's creates in
//! between, so it costs no query per create; concurrent creates on several
//! instances may pass it by up to what they create in that second.

use super::Caller;
use crate::AppState;
use crate::error::ApiError;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A token bucket: `tokens` as of `at`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// A full bucket of `burst` tokens.
    pub(crate) fn full(burst: f64, now: Instant) -> Self {
        Bucket {
            tokens: burst,
            at: now,
        }
    }

    /// Refills at `rate` per second up to `burst`, then takes `need` tokens,
    /// or says how long until they are there.
    pub(crate) fn take(
        &mut self,
        need: f64,
        rate: f64,
        burst: f64,
        now: Instant,
    ) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate).min(burst);
        self.at = now;
        if self.tokens >= need {
            self.tokens -= need;
            Ok(())
        } else {
            Err(wait_for(need - self.tokens, rate))
        }
    }
}

/// How long `missing` tokens take to come back at `rate` per second.
fn wait_for(missing: f64, rate: f64) -> Duration {
    if rate > 0.0 && (missing / rate).is_finite() {
        Duration::from_secs_f64((missing / rate).min(3600.0))
    } else {
        Duration::from_secs(3600)
    }
}

/// Token buckets by key prefix (one map per kind of limit). Only
/// authenticated keys get one, so the map is as large as the keys in use.
#[derive(Default)]
pub(crate) struct Buckets {
    map: Mutex<HashMap<String, Bucket>>,
}

impl Buckets {
    /// Takes one token from `key`'s bucket (`rate` per second, at most
    /// `burst`), or says how long until one is there.
    pub(crate) fn take(
        &self,
        key: &str,
        rate: f64,
        burst: u32,
        now: Instant,
    ) -> Result<(), Duration> {
        self.take_n(key, 1, rate, burst, now)
    }

    /// Takes `n` tokens at once (a bulk create), or says how long until they
    /// are there. The caller refuses `n` above the burst first: such a
    /// request would never pass.
    pub(crate) fn take_n(
        &self,
        key: &str,
        n: u32,
        rate: f64,
        burst: u32,
        now: Instant,
    ) -> Result<(), Duration> {
        let burst = f64::from(burst.max(1));
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(key.to_string())
            .or_insert_with(|| Bucket::full(burst, now))
            .take(f64::from(n), rate, burst, now)
    }
}

/// Whole seconds to announce in `Retry-After` (at least 1).
pub(crate) fn retry_secs(wait: Duration) -> u64 {
    (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
}

/// How long a stored live-jobs count is trusted near its cap.
pub(crate) const LIVE_COUNT_TTL: Duration = Duration::from_secs(1);

/// The longest a count is trusted while it is at most half its cap.
pub(crate) const LIVE_COUNT_MAX_TTL: Duration = Duration::from_secs(10);

/// A count at most half its cap is trusted this many times as long as it
/// took to read (at least [`LIVE_COUNT_TTL`], at most
/// [`LIVE_COUNT_MAX_TTL`]). Counting 100,000 live jobs takes MariaDB about
/// 0.4 s: refreshed every second, that was 40 % of a core during a cron
/// flood (docs/performance.md). Far from the cap, other instances' creates
/// cannot cross it within the longer wait unless they create half the cap
/// in ten seconds; near it, the count is a second old at most, as before.
const TRUST_PER_READ: u32 = 25;

/// A tenant's stored live-jobs count as this instance knows it.
struct Count {
    read_at: Instant,
    n: u64,
    /// How long the count took to read.
    took: Duration,
    /// A background refresh is running: others use `n` meanwhile.
    refreshing: bool,
}

impl Count {
    /// How long the count is trusted against `cap` (see [`TRUST_PER_READ`]).
    fn trusted_for(&self, cap: u64) -> Duration {
        if self.n.saturating_mul(2) > cap {
            return LIVE_COUNT_TTL;
        }
        self.took
            .saturating_mul(TRUST_PER_READ)
            .clamp(LIVE_COUNT_TTL, LIVE_COUNT_MAX_TTL)
    }
}

/// What [`LiveCounts::lookup`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// Read less than [`LIVE_COUNT_TTL`] ago (plus this instance's creates).
    Fresh(u64),
    /// Older: use it, and refresh it in the background if `refresh` (one
    /// caller per tenant is told to, so a stale count is read once, not by
    /// every concurrent create).
    Stale { n: u64, refresh: bool },
    /// Never read: the caller reads it and waits.
    Missing,
}

/// Live-job counts by tenant.
#[derive(Default)]
pub(crate) struct LiveCounts {
    map: Mutex<HashMap<String, Count>>,
}

impl LiveCounts {
    /// The count to check a create against (capped at `cap`), and whether
    /// to refresh it.
    pub(crate) fn lookup(&self, tenant: &str, cap: u64, now: Instant) -> Lookup {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        match map.get_mut(tenant) {
            None => Lookup::Missing,
            Some(c) if now.saturating_duration_since(c.read_at) < c.trusted_for(cap) => {
                Lookup::Fresh(c.n)
            }
            Some(c) => {
                let refresh = !std::mem::replace(&mut c.refreshing, true);
                Lookup::Stale { n: c.n, refresh }
            }
        }
    }

    /// Stores a count whose read began at `read_at` and took `took`.
    pub(crate) fn set(&self, tenant: &str, n: u64, read_at: Instant, took: Duration) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.insert(
            tenant.to_string(),
            Count {
                read_at,
                n,
                took,
                refreshing: false,
            },
        );
    }

    /// A background refresh failed: the next create tries again.
    pub(crate) fn refresh_failed(&self, tenant: &str) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = map.get_mut(tenant) {
            c.refreshing = false;
        }
    }

    /// Counts a job this instance just created.
    pub(crate) fn created(&self, tenant: &str) {
        self.created_many(tenant, 1);
    }

    /// Counts `n` jobs this instance just created (a workflow's node jobs).
    pub(crate) fn created_many(&self, tenant: &str, n: u32) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = map.get_mut(tenant) {
            c.n += u64::from(n);
        }
    }
}

/// The tenant's live-jobs count: the one this instance has, refreshed in
/// the background once it is older than it is trusted for against `cap`
/// (a second near the cap); read and waited for only the first time.
/// Counting a large table takes a while and no create should wait for it.
async fn live_jobs(state: &AppState, tenant: &str, cap: u64) -> Result<u64, ApiError> {
    match state.auth.live.lookup(tenant, cap, Instant::now()) {
        Lookup::Fresh(n) | Lookup::Stale { n, refresh: false } => Ok(n),
        Lookup::Stale { n, refresh: true } => {
            let (store, auth, tenant) = (
                std::sync::Arc::clone(&state.store),
                std::sync::Arc::clone(&state.auth),
                tenant.to_string(),
            );
            tokio::spawn(async move {
                let read_at = Instant::now();
                match store.jobs_count_live(&tenant).await {
                    Ok(n) => auth.live.set(&tenant, n, read_at, read_at.elapsed()),
                    Err(e) => {
                        tracing::warn!(tenant, error = %e, "cannot refresh the live-jobs count");
                        auth.live.refresh_failed(&tenant);
                    }
                }
            });
            Ok(n)
        }
        Lookup::Missing => {
            let read_at = Instant::now();
            let n = state.store.jobs_count_live(tenant).await?;
            state.auth.live.set(tenant, n, read_at, read_at.elapsed());
            Ok(n)
        }
    }
}

/// Lets a create through, or refuses it: `429 rate_limited` when the key's
/// bucket is empty, `429 live_job_limit` when the tenant is at its cap.
pub(crate) async fn admit_create(state: &AppState, caller: &Caller) -> Result<(), ApiError> {
    admit_creates(state, caller, 1).await
}

/// [`admit_create`] for `n` jobs at once (`POST /openapi/jobs/batch`): they
/// cost `n` tokens, and more than the burst is `429 batch_exceeds_burst`
/// (it could never pass; the caller must split it).
pub(crate) async fn admit_creates(
    state: &AppState,
    caller: &Caller,
    n: u32,
) -> Result<(), ApiError> {
    let limits = &caller.tenant_row.limits;
    let cfg = &state.config;
    let rate = limits.create_rate_per_sec.unwrap_or(cfg.api_create_rate);
    let burst = limits.create_burst.unwrap_or(cfg.api_create_burst).max(1);
    if n > burst {
        return Err(ApiError::BatchExceedsBurst {
            burst,
            retry_after_secs: retry_secs(wait_for(f64::from(burst), rate)),
        });
    }
    if let Err(wait) = state
        .auth
        .buckets
        .take_n(&caller.prefix, n, rate, burst, Instant::now())
    {
        let secs = retry_secs(wait);
        return Err(ApiError::RateLimited {
            retry_after_secs: secs,
            message: format!(
                "this key may create {rate} jobs per second (bursts of {burst}); retry in {secs} s"
            ),
        });
    }
    let cap = limits.max_live_jobs.unwrap_or(cfg.api_max_live_jobs);
    let live = live_jobs(state, &caller.tenant, cap).await?;
    if live + u64::from(n) > cap {
        return Err(ApiError::LiveJobLimit(format!(
            "tenant {} holds {live} scheduled, running or paused jobs (workflow nodes \
             included), its limit is {cap}; cancel some or wait for them to finish",
            caller.tenant
        )));
    }
    Ok(())
}

/// Lets an action that makes an execution or a delivery (trigger, resume,
/// redeliver) through, or refuses it with `429 rate_limited` when the key's
/// action bucket is empty. Taken before the action is tried, so a refused
/// or failing action costs a token too: the bucket bounds requests, not
/// successes.
pub(crate) fn admit_action(state: &AppState, caller: &Caller) -> Result<(), ApiError> {
    let limits = &caller.tenant_row.limits;
    let cfg = &state.config;
    let rate = limits.action_rate_per_sec.unwrap_or(cfg.api_action_rate);
    let burst = limits.action_burst.unwrap_or(cfg.api_action_burst).max(1);
    state
        .auth
        .actions
        .take(&caller.prefix, rate, burst, Instant::now())
        .map_err(|wait| {
            let secs = retry_secs(wait);
            ApiError::RateLimited {
                retry_after_secs: secs,
                message: format!(
                    "this key may trigger, resume or redeliver {rate} times per second \
                     (bursts of {burst}); retry in {secs} s"
                ),
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_allows_a_burst_then_the_rate() {
        let b = Buckets::default();
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(b.take("k", 2.0, 3, t0).is_ok());
        }
        let wait = b.take("k", 2.0, 3, t0).expect_err("bucket empty");
        assert!(
            wait <= Duration::from_millis(500) && wait > Duration::ZERO,
            "{wait:?}"
        );
        assert!(b.take("k", 2.0, 3, t0 + Duration::from_millis(500)).is_ok());
        assert!(b.take("other", 2.0, 3, t0).is_ok(), "buckets are per key");
        // A batch takes as many tokens as it creates.
        assert!(b.take_n("batch", 3, 2.0, 3, t0).is_ok());
        assert!(b.take_n("batch", 1, 2.0, 3, t0).is_err());
        assert!(b.take_n("big", 2, 2.0, 3, t0).is_ok());
        let wait = b.take_n("big", 3, 2.0, 3, t0).expect_err("one token left");
        assert_eq!(wait, Duration::from_secs(1), "two more tokens at 2/s");
        assert!(b.take_n("big", 3, 2.0, 3, t0 + wait).is_ok());
    }

    #[test]
    fn waits_are_bounded_and_rounded_up() {
        assert_eq!(wait_for(1.0, 0.0), Duration::from_secs(3600));
        assert_eq!(wait_for(1e9, 1e-9), Duration::from_secs(3600));
        assert_eq!(retry_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_secs(Duration::from_millis(1001)), 2);
        assert_eq!(retry_secs(Duration::ZERO), 1);
    }

    #[test]
    fn a_stale_count_is_used_while_one_caller_refreshes_it() {
        let live = LiveCounts::default();
        let t0 = Instant::now();
        let cap = 15;
        assert_eq!(live.lookup("t", cap, t0), Lookup::Missing);
        live.set("t", 10, t0, Duration::from_secs(1));
        live.created("t");
        assert_eq!(
            live.lookup("t", cap, t0),
            Lookup::Fresh(11),
            "local creates count"
        );
        let later = t0 + LIVE_COUNT_TTL;
        assert_eq!(
            live.lookup("t", cap, later),
            Lookup::Stale {
                n: 11,
                refresh: true
            }
        );
        assert_eq!(
            live.lookup("t", cap, later),
            Lookup::Stale {
                n: 11,
                refresh: false
            },
            "only one refresh at a time"
        );
        live.refresh_failed("t");
        assert_eq!(
            live.lookup("t", cap, later),
            Lookup::Stale {
                n: 11,
                refresh: true
            },
            "a failed refresh is tried again"
        );
        live.set("t", 5, later, Duration::ZERO);
        assert_eq!(live.lookup("t", cap, later), Lookup::Fresh(5));
        assert_eq!(
            live.lookup("other", cap, later),
            Lookup::Missing,
            "per tenant"
        );
    }

    #[test]
    fn a_slow_count_far_from_its_cap_is_trusted_longer() {
        let live = LiveCounts::default();
        let t0 = Instant::now();
        let slow = Duration::from_millis(200);
        live.set("t", 100, t0, slow);
        let at = |d: Duration| live.lookup("t", 1_000, t0 + d);
        assert_eq!(at(Duration::from_millis(4_900)), Lookup::Fresh(100));
        assert!(
            matches!(at(slow * TRUST_PER_READ), Lookup::Stale { n: 100, .. }),
            "trusted 25 times its read"
        );
        live.set("t", 100, t0, Duration::from_secs(5));
        assert_eq!(
            at(LIVE_COUNT_MAX_TTL - Duration::from_millis(1)),
            Lookup::Fresh(100)
        );
        assert!(
            matches!(at(LIVE_COUNT_MAX_TTL), Lookup::Stale { .. }),
            "10 s at most"
        );
        assert!(
            matches!(
                live.lookup("t", 150, t0 + LIVE_COUNT_TTL),
                Lookup::Stale { .. }
            ),
            "past half its cap, a second as before"
        );
        live.set("t", 10, t0, Duration::from_millis(1));
        assert!(
            matches!(at(LIVE_COUNT_TTL), Lookup::Stale { .. }),
            "a quick count is refreshed every second"
        );
    }
}

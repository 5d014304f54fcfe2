//! Per-tenant limits on creating jobs: a token bucket per key (in memory on
//! each API instance, so with N instances a key may reach N times its rate),
//! and a cap on a tenant's non-terminal jobs. The cap reads the stored count
//! at most once a second per tenant and instance and counts this instance's
//! creates in between, so it costs no query per create; concurrent creates
//! on several instances may pass it by up to what they create in that second.

use super::Caller;
use crate::AppState;
use crate::error::ApiError;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Token buckets by key prefix.
#[derive(Default)]
pub(crate) struct Buckets {
    map: Mutex<HashMap<String, Bucket>>,
}

impl Buckets {
    /// Takes one token from `key`'s bucket (`rate` per second, at most
    /// `burst`), or says how long until one is there.
    #[cfg(test)]
    fn take(&self, key: &str, rate: f64, burst: u32, now: Instant) -> Result<(), Duration> {
        self.take_n(key, 1, rate, burst, now)
    }

    /// Takes `n` tokens at once (a bulk create), or says how long until they
    /// are there. More than the burst counts as the whole burst, so a large
    /// batch needs a full bucket rather than never passing.
    pub(crate) fn take_n(
        &self,
        key: &str,
        n: u32,
        rate: f64,
        burst: u32,
        now: Instant,
    ) -> Result<(), Duration> {
        let need = f64::from(n.clamp(1, burst.max(1)));
        let burst = f64::from(burst.max(1));
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let b = map.entry(key.to_string()).or_insert(Bucket {
            tokens: burst,
            at: now,
        });
        let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
        b.tokens = (b.tokens + elapsed * rate).min(burst);
        b.at = now;
        if b.tokens >= need {
            b.tokens -= need;
            Ok(())
        } else if rate <= 0.0 {
            Err(Duration::from_secs(3600))
        } else {
            Err(Duration::from_secs_f64((need - b.tokens) / rate))
        }
    }
}

/// How long a stored live-jobs count is trusted.
pub(crate) const LIVE_COUNT_TTL: Duration = Duration::from_secs(1);

/// Live-job counts by tenant: `(read at, count)`.
#[derive(Default)]
pub(crate) struct LiveCounts {
    map: Mutex<HashMap<String, (Instant, u64)>>,
}

impl LiveCounts {
    /// The count if read less than [`LIVE_COUNT_TTL`] ago.
    pub(crate) fn fresh(&self, tenant: &str) -> Option<u64> {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.get(tenant)
            .filter(|(at, _)| at.elapsed() < LIVE_COUNT_TTL)
            .map(|(_, n)| *n)
    }

    /// Stores a count just read.
    pub(crate) fn set(&self, tenant: &str, n: u64) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.insert(tenant.to_string(), (Instant::now(), n));
    }

    /// Counts a job this instance just created.
    pub(crate) fn created(&self, tenant: &str) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, n)) = map.get_mut(tenant) {
            *n += 1;
        }
    }
}

/// Lets a create through, or refuses it: `429 rate_limited` when the key's
/// bucket is empty, `429 live_job_limit` when the tenant is at its cap.
pub(crate) async fn admit_create(state: &AppState, caller: &Caller) -> Result<(), ApiError> {
    admit_creates(state, caller, 1).await
}

/// [`admit_create`] for `n` jobs at once (`POST /openapi/jobs/batch`).
pub(crate) async fn admit_creates(
    state: &AppState,
    caller: &Caller,
    n: u32,
) -> Result<(), ApiError> {
    let limits = &caller.tenant_row.limits;
    let cfg = &state.config;
    let rate = limits
        .create_rate_per_sec
        .unwrap_or(cfg.create_rate_per_sec);
    let burst = limits.create_burst.unwrap_or(cfg.create_burst);
    if let Err(wait) = state
        .auth
        .buckets
        .take_n(&caller.prefix, n, rate, burst, Instant::now())
    {
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        return Err(ApiError::RateLimited {
            retry_after_secs: secs.max(1),
            message: format!(
                "this key may create {rate} jobs per second (bursts of {burst}); retry in {secs} s"
            ),
        });
    }
    let cap = limits.max_live_jobs.unwrap_or(cfg.max_live_jobs);
    let live = match state.auth.live.fresh(&caller.tenant) {
        Some(n) => n,
        None => {
            let n = state.store.jobs_count_live(&caller.tenant).await?;
            state.auth.live.set(&caller.tenant, n);
            n
        }
    };
    if live + u64::from(n) > cap {
        return Err(ApiError::LiveJobLimit(format!(
            "tenant {} holds {live} scheduled, running or paused jobs, its limit is {cap}; \
             cancel some or wait for them to finish",
            caller.tenant
        )));
    }
    Ok(())
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
        // A batch takes as many tokens as it creates, at most the burst.
        assert!(b.take_n("batch", 3, 2.0, 3, t0).is_ok());
        assert!(b.take_n("batch", 1, 2.0, 3, t0).is_err());
        assert!(
            b.take_n("big", 50, 2.0, 3, t0).is_ok(),
            "capped at the burst"
        );
    }
}

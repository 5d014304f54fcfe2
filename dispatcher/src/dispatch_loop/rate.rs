//! `KAIROS_DISPATCH_MAX_RATE`: a token bucket on the triggers one dispatcher
//! claims per second, for measuring how dispatch capacity grows with the
//! number of dispatchers (each one deliberately slow). Claims wait for
//! tokens; those cut from a round stay due and are claimed in a later one.

use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// A token bucket: `rate` tokens a second, at most a fifth of a second's
/// worth (at least one) saved up, so the rate holds over short windows too.
#[derive(Debug)]
pub(crate) struct RateLimit {
    rate: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl RateLimit {
    /// `per_sec` tokens a second; `None` for 0 (no limit).
    pub(crate) fn new(per_sec: u32) -> Option<Self> {
        (per_sec > 0).then(|| {
            let rate = f64::from(per_sec);
            let burst = (rate / 5.0).max(1.0);
            Self {
                rate,
                burst,
                state: Mutex::new((burst, Instant::now())),
            }
        })
    }

    /// Waits until at least one token is there, then takes up to `want` of
    /// them; how many were taken.
    pub(crate) async fn take(&self, want: usize) -> usize {
        if want == 0 {
            return 0;
        }
        loop {
            let wait = {
                let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
                let now = Instant::now();
                let (tokens, at) = *s;
                let tokens =
                    (tokens + now.duration_since(at).as_secs_f64() * self.rate).min(self.burst);
                if tokens >= 1.0 {
                    let n = (tokens.floor() as usize).min(want);
                    *s = (tokens - n as f64, now);
                    return n;
                }
                *s = (tokens, now);
                Duration::from_secs_f64((1.0 - tokens) / self.rate)
            };
            tokio::time::sleep(wait).await;
        }
    }

    /// The most one claim round can take: a limited loop scans no more
    /// (a page of 500 read for ten claims costs the database more than
    /// the claims).
    pub(crate) fn burst(&self) -> u32 {
        self.burst as u32
    }

    /// Settles a take of `taken` tokens that used `used`: gives back what
    /// was not used, or owes what was used beyond it (a job's shards are
    /// claimed together, whatever the count).
    pub(crate) fn settle(&self, taken: usize, used: usize) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.0 += taken as f64 - used as f64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_bucket_hands_out_its_rate() {
        let r = RateLimit::new(100).unwrap();
        let start = Instant::now();
        let mut got = 0;
        while got < 1_000 {
            got += r.take(1_000 - got).await;
        }
        let took = start.elapsed();
        // 20 saved up, then 100 a second.
        assert!(
            took >= Duration::from_millis(9_700) && took <= Duration::from_millis(10_100),
            "{took:?}"
        );
        assert!(RateLimit::new(0).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn unused_tokens_go_back() {
        // One saved up at most.
        let r = RateLimit::new(5).unwrap();
        assert_eq!(r.take(5).await, 1);
        r.settle(1, 0);
        assert_eq!(r.take(5).await, 1, "given back: no wait");
    }
}
